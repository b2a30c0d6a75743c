"""Witnesses: JSON-ready encodings of inputs and values, and the replay rule every refutation obeys.

A counterexample is reported only after ``replay`` re-evaluates it on the reference interpreter and the
property's own violation predicate confirms it. Numbers are written as exact strings ("3/4").
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from .ir import Token, Vector


def input_to_json(tokens: Sequence[Token]) -> list:
    return [t if isinstance(t, str) else [str(c) for c in t] for t in tokens]


def input_from_json(data: Sequence) -> tuple[Token, ...]:
    return tuple(t if isinstance(t, str) else tuple(Fraction(c) for c in t) for t in data)


def vectors_to_json(vectors: Sequence[Vector]) -> list[list[str]]:
    return [[str(c) for c in v] for v in vectors]


def values_to_json(values: Sequence[Fraction]) -> list[str]:
    return [str(v) for v in values]


class ReplayMismatch(Exception):
    """An engine claimed a violation that the reference interpreter does not reproduce: an engine bug.

    The CLI reports it as verdict ``error`` with both values; it is never turned into a refutation.
    """

    def __init__(self, message: str, claimed: Any = None, replayed: Any = None):
        super().__init__(message)
        self.claimed, self.replayed = claimed, replayed

"""Input domains: finite sets of inputs a property quantifies over.

``GridDomain``: sequences of ``length`` tokens, each token a point of the grid {lo, lo+step, ..., hi}^dim
(Yun et al.'s G_delta is lo=0, hi=1-delta, step=delta); ``distinct_tokens`` restricts to sequences with no
repeated token (Yun's G~_delta). ``StringDomain``: every string over an alphabet with a length in
[min_length, max_length] (BOS, if the model has one, is added by the model, not by the domain), or, with a
``language`` (``verify_tf.regular.Language``), only the words of that language (a regex's, or a C-RASP program's:
``verify_tf.crasp.words``): counted and enumerated from its automaton, never by filtering Σ^n.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

from .ir import Token, Vector
from .regular import Language

# Input limits (docs/cli.md, "Input limits"): the loader checks them by formula before it lists anything.
MAX_LENGTH = 4096  # positions of an input (grid length, a string domain's max-length)
MAX_GRID_VALUES = 1 << 20  # coordinate values of a grid (lo..hi by step, values:, plus the added one)
MAX_GRID_TOKENS = 1 << 20  # tokens of a grid, |values|^dim: every engine indexes inputs by this list


def magnitude(count: int) -> str:
    """A count for a message: exact while short, else its order of magnitude (never a 1000-digit number)."""
    if count < 10**12:
        return f"{count:,}"
    return f"about 10^{int(count.bit_length() * 0.30103)}"


@dataclass(frozen=True)
class GridDomain:
    dim: int
    values: tuple[Fraction, ...]  # the coordinate values (same for every coordinate), ``outside`` included
    length: int
    distinct_tokens: bool = False
    # values added outside the regular grid, e.g. the large negative value of Yun et al.'s G⁺_δ (their
    # quantisation maps every coordinate outside [0, 1) to it); ``in_grid`` tells the two kinds apart
    outside: tuple[Fraction, ...] = ()

    def in_grid(self, token: Vector) -> bool:
        return not any(c in self.outside for c in token)

    @staticmethod
    def regular(
        dim: int,
        step: Fraction,
        length: int,
        lo: Fraction = Fraction(0),
        hi: Fraction | None = None,
        distinct_tokens: bool = False,
    ) -> GridDomain:
        hi = 1 - step if hi is None else hi
        count = math.floor((hi - lo) / step) + 1
        return GridDomain(dim, tuple(lo + k * step for k in range(count)), length, distinct_tokens)

    @property
    def tokens(self) -> list[Vector]:
        return [tuple(p) for p in itertools.product(self.values, repeat=self.dim)]

    @property
    def lengths(self) -> tuple[int, ...]:
        return (self.length,)

    def size(self) -> int:
        """By formula: |V|^(d·n), or (|V|^d)!/(|V|^d − n)! with distinct tokens (nothing is listed)."""
        t = len(self.values) ** self.dim
        if self.distinct_tokens:
            return math.perm(t, self.length)
        return t**self.length

    def inputs(self) -> Iterator[tuple[Vector, ...]]:
        tokens = self.tokens
        if self.distinct_tokens:
            return itertools.permutations(tokens, self.length)
        return itertools.product(tokens, repeat=self.length)

    def constant_inputs(self) -> Iterator[tuple[Vector, ...]]:
        """The inputs (x, ..., x) that belong to this domain (none of length >= 2 when tokens must differ)."""
        if self.distinct_tokens and self.length > 1:
            return
        for t in self.tokens:
            yield (t,) * self.length

    def describe(self) -> str:
        vals = self.values
        text = f"grid {len(vals)}^{self.dim} tokens" + (f" ({vals[0]}..{vals[-1]})" if vals else "")
        if self.outside:
            text += f" plus {', '.join(str(v) for v in self.outside)} (G⁺)"
        text += f", length {self.length}"
        return text + (", distinct tokens" if self.distinct_tokens else "")


@dataclass(frozen=True)
class StringDomain:
    alphabet: tuple[str, ...]
    min_length: int
    max_length: int
    language: Language | None = None  # only the words of this language, a regex's or a program's (None: every string)

    @property
    def tokens(self) -> list[str]:
        return list(self.alphabet)

    @property
    def lengths(self) -> tuple[int, ...]:
        return tuple(range(self.min_length, self.max_length + 1))

    def count(self, length: int) -> int:
        """The inputs of one length: |Σ|^n, or the language's words of length n (from its automaton)."""
        if self.language is not None:
            return self.language.count(length)
        return len(self.alphabet) ** length

    def size(self) -> int:
        return sum(self.count(n) for n in self.lengths)

    def inputs(self) -> Iterator[tuple[str, ...]]:
        for n in self.lengths:
            if self.language is not None:
                yield from self.language.words(n)
            else:
                yield from itertools.product(self.alphabet, repeat=n)

    def constant_inputs(self) -> Iterator[tuple[str, ...]]:
        """(a, ..., a) for every symbol and every length in range (the empty string is not an input); with a
        language, those that are its words."""
        for n in self.lengths:
            if n == 0:
                continue
            for a in self.alphabet:
                if self.language is None or self.language.accepts((a,) * n):
                    yield (a,) * n

    def describe(self) -> str:
        if self.language is not None:
            start = "" if self.min_length == 1 else f" from length {self.min_length}"
            return (
                f"words of {self.language.name} over {{{', '.join(self.alphabet)}}} up to length "
                f"{self.max_length}{start}"
            )
        return f"strings over {{{', '.join(self.alphabet)}}} of length {self.min_length}..{self.max_length}"


Domain = GridDomain | StringDomain


class _Representing(Protocol):
    def representable(self, x: Fraction) -> bool: ...

    def describe(self) -> str: ...


def unrepresentable_grid_value(domain: Domain | None, arithmetic: _Representing) -> str | None:
    """Why a grid domain cannot be read in ``arithmetic`` (a value off its grid or range), or None.

    The one check the spec loader and the Python API both apply: a fixed-point model never sees a token
    coordinate it cannot hold (-2/3 is no 16/8 value), so such a domain is refused, never silently rounded.
    """
    if not isinstance(domain, GridDomain):
        return None
    bad = next((v for v in domain.values if not arithmetic.representable(v)), None)
    return None if bad is None else f"grid value {bad} is not representable in {arithmetic.describe()}"


GRID_HINT = "in fixed arithmetic use a power-of-two step"


def format_input(tokens: tuple[Token, ...]) -> str:
    from .numbers import fmt_vector

    if tokens and isinstance(tokens[0], str):
        return "".join(tokens) if all(len(t) == 1 for t in tokens) else " ".join(tokens)
    return "[" + ", ".join(fmt_vector(t) if len(t) > 1 else fmt_vector(t)[1:-1] for t in tokens) + "]"

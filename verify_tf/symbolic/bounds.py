"""Interval bounds carried alongside every symbolic value, and the counts of what they decided.

Every encoded value (``values.Sym``) carries a sound interval [lo, hi] computed from the input domain by
interval arithmetic, propagated layer by layer exactly as the quantized-network verifiers do. The encoder
uses them to

* fix ReLUs whose sign is decided (no ``If`` emitted),
* drop hardmax candidates that can never reach the row maximum (hi(s_ij) < max_k lo(s_ik)),
* skip saturation branches that cannot fire,
* size bit-decompositions of bilinear factors and of bounded quotients (the width is the interval's).

Soundness: the intervals only ever over-approximate. Encodings that rely on a bound (a bit-decomposition
covers [lo, lo + 2^B - 1] ⊇ [lo, hi]) would exclude real inputs if a bound were wrong; the differential
tests assert "encoding == interpreter" is *satisfiable* for random inputs, which catches exactly that.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from fractions import Fraction


def interval_scale(w: Fraction, lo: Fraction, hi: Fraction) -> tuple[Fraction, Fraction]:
    return (w * lo, w * hi) if w >= 0 else (w * hi, w * lo)


def interval_product(a: tuple[Fraction, Fraction], b: tuple[Fraction, Fraction]) -> tuple[Fraction, Fraction]:
    corners = [x * y for x in a for y in b]
    return min(corners), max(corners)


def interval_hull(items: Iterable[tuple[Fraction, Fraction]]) -> tuple[Fraction, Fraction]:
    items = list(items)
    return min(lo for lo, _ in items), max(hi for _, hi in items)


@dataclass
class BoundStats:
    """What interval bounds decided during one encoding (reported in Verdict.statistics)."""

    relus_total: int = 0
    relus_fixed: int = 0  # sign decided by bounds: identity or zero, no case split
    argmax_candidates: int = 0
    argmax_pruned: int = 0  # keys that can never attain the row maximum
    saturations_total: int = 0
    saturations_decided: int = 0  # saturation provably inactive (or always active)
    bits_decomposed: int = 0  # Boolean variables introduced to linearise products / quotients
    roundings: int = 0  # floor-to-grid steps that needed a fresh quotient variable

    def merge(self, other: BoundStats) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

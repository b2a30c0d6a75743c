"""Arithmetic modes: the rounding rules the interpreter applies at each step (see docs/semantics.md).

``Exact``: rational arithmetic, no rounding; hardmax/uniform averages are exact; softmax is rejected.
``Fixed``: p-bit two's-complement fixed point with f fractional bits (values m * 2^-f, m in
[-2^(p-1), 2^(p-1)-1]). Sums and products inside one step are exact (a wide accumulator); the result of
each step is rounded once toward -inf to f bits, then saturated to the p-bit range.

Both classes are frozen configuration objects; all values are Fractions (in Fixed mode always multiples
of 2^-f), so the interpreter is written once for both modes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from .exp_table import exp_mantissa, floor_exp_times

ATTENTION_ROUNDINGS = ("exact-sums", "per-probability", "rounded-terms")
SATURATING_EXPONENT = 200  # e^200 > 2^288: beyond it a term saturates whatever the format


class UnsupportedInMode(ValueError):
    """A model feature that the chosen arithmetic cannot evaluate exactly (e.g. softmax in exact mode)."""


@dataclass(frozen=True)
class Exact:
    name: str = "exact"

    def round(self, x: Fraction) -> Fraction:
        return x

    def saturate(self, x: Fraction) -> Fraction:
        return x

    def representable(self, x: Fraction) -> bool:
        return True

    def attention_weights(self, scores: Sequence[Fraction | None], scoring: str) -> list[Fraction]:
        """Normalised weights a_ij for one query row; ``None`` marks masked keys (weight 0)."""
        if scoring == "softmax":
            raise UnsupportedInMode(
                "softmax is not exactly representable in exact arithmetic; use arithmetic: fixed, "
                "or hardmax/uniform scoring"
            )
        return _average_weights(scores, scoring)

    def describe(self) -> str:
        return "exact rational arithmetic"


@dataclass(frozen=True)
class Fixed:
    bits: int = 16
    frac: int = 8
    attention_rounding: str = "exact-sums"
    name: str = "fixed"

    def __post_init__(self) -> None:
        if not (2 <= self.bits <= 64):
            raise ValueError("bits must be in 2..64")
        if not (0 <= self.frac < self.bits):
            raise ValueError("frac must be in 0..bits-1")
        if self.attention_rounding not in ATTENTION_ROUNDINGS:
            raise ValueError(f"attention-rounding must be one of {ATTENTION_ROUNDINGS}")

    @property
    def scale(self) -> int:
        return 1 << self.frac

    @property
    def min_mantissa(self) -> int:
        return -(1 << (self.bits - 1))

    @property
    def max_mantissa(self) -> int:
        return (1 << (self.bits - 1)) - 1

    @property
    def min_value(self) -> Fraction:
        return Fraction(self.min_mantissa, self.scale)

    @property
    def max_value(self) -> Fraction:
        return Fraction(self.max_mantissa, self.scale)

    def floor(self, x: Fraction) -> Fraction:
        """Round toward -inf to f fractional bits (no saturation)."""
        return Fraction(math.floor(x * self.scale), self.scale)

    def saturate(self, x: Fraction) -> Fraction:
        return min(max(x, self.min_value), self.max_value)

    def round(self, x: Fraction) -> Fraction:
        return self.saturate(self.floor(x))

    def representable(self, x: Fraction) -> bool:
        return (x * self.scale).denominator == 1 and self.min_value <= x <= self.max_value

    def mantissa(self, x: Fraction) -> int:
        m = x * self.scale
        if m.denominator != 1:
            raise ValueError(f"{x} is not a multiple of 2^-{self.frac}")
        return m.numerator

    def attention_weights(self, scores: Sequence[Fraction | None], scoring: str) -> list[Fraction]:
        if scoring == "softmax":
            weights = self._softmax_weights(scores)
        else:
            weights = _average_weights(scores, scoring)
        if self.attention_rounding == "per-probability":
            weights = [self.floor(w) for w in weights]
        return weights

    def _softmax_weights(self, scores: Sequence[Fraction | None]) -> list[Fraction]:
        # w_j = E[(max - s_j) * 2^f]: the exp table of the (exact, non-positive) shifted score.
        live = [s for s in scores if s is not None]
        top = max(live)
        raw = [0 if s is None else exp_mantissa(self.mantissa(top - s), self.frac) for s in scores]
        total = sum(raw)  # >= 2^f: the maximal score contributes E[0] = 2^f
        return [Fraction(w, total) for w in raw]

    @property
    def rounded_terms(self) -> bool:
        return self.attention_rounding == "rounded-terms"

    def rounded_term(
        self, s: Fraction, x: Fraction, saturate: Callable[[Fraction], Fraction] | None = None
    ) -> Fraction:
        """round(e^s · x) = sat(floor(e^s · x · 2^f) / 2^f): one term of Yang et al.'s attention sums.

        ``saturate`` (default: this format's) lets the interpreter count the terms that saturate."""
        saturate = saturate or self.saturate
        if x == 0:
            return Fraction(0)
        if s > SATURATING_EXPONENT:  # e^s·|x| ≥ e^200·2^-f > 2^63: past every format's range (one saturation)
            return saturate(self.max_value + 1 if x > 0 else self.min_value - 1)
        return saturate(Fraction(floor_exp_times(s, x * self.scale), self.scale))

    def rounded_terms_row(
        self,
        scores: Sequence[Fraction | None],
        contributions: Sequence[Sequence[Fraction]],
        saturate: Callable[[Fraction], Fraction] | None = None,
    ) -> tuple[list[Fraction], list[Fraction]]:
        """Yang, Cadilhac & Chiang's head output for one query row (``attention-rounding: rounded-terms``):

            c = round( Σ_j round(e^{s_j} · x_j) / Σ_j round(e^{s_j}) ),  sums exact, scores s_j exact,

        x_j the key's contribution (C[j-i] · v_j); a zero denominator falls back to the uniform average
        round(Σ_j x_j / count). Returns the weights shown in traces (round(e^{s_j}) / Σ, or 1/count; the caller
        multiplies in URPE's C) and the head output per value coordinate. Every rounding saturates through
        ``saturate`` (default: this format's; the interpreter passes its counting one): each denominator term,
        each numerator term per coordinate and the output (docs/semantics.md, "rounded-terms").
        """
        saturate = saturate or self.saturate
        live = [j for j, s in enumerate(scores) if s is not None]
        width = len(contributions[live[0]]) if live else 0
        live_scores = {j: s for j, s in enumerate(scores) if s is not None}
        exps = {j: self.rounded_term(live_scores[j], Fraction(1), saturate) for j in live}
        total = sum(exps.values(), Fraction(0))
        if total == 0:
            weights = [Fraction(1, len(live)) if s is not None else Fraction(0) for s in scores]
            return weights, [
                saturate(self.floor(sum((contributions[j][c] for j in live), Fraction(0)) / len(live)))
                for c in range(width)
            ]
        weights = [exps[j] / total if j in exps else Fraction(0) for j in range(len(scores))]
        sums = [
            sum((self.rounded_term(live_scores[j], contributions[j][c], saturate) for j in live), Fraction(0))
            for c in range(width)
        ]
        return weights, [saturate(self.floor(x / total)) for x in sums]

    def describe(self) -> str:
        return f"fixed point, {self.bits} bits, {self.frac} fractional, attention {self.attention_rounding}"


Arithmetic = Exact | Fixed


def _average_weights(scores: Sequence[Fraction | None], scoring: str) -> list[Fraction]:
    """hardmax (argmax set, ties averaged uniformly: Yun et al.'s sigma_H) or uniform over unmasked keys."""
    live = [s for s in scores if s is not None]
    if scoring == "uniform":
        chosen = [s is not None for s in scores]
    elif scoring == "hardmax":
        top = max(live)
        chosen = [s is not None and s == top for s in scores]
    else:
        raise ValueError(f"unknown scoring {scoring!r}")
    count = sum(chosen)
    return [Fraction(1, count) if c else Fraction(0) for c in chosen]

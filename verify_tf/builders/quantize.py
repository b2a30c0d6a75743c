"""Rounding float weights onto a fixed-point grid, with the exact largest error (``quantize: {bits, frac}``).

``_Quantizer`` rounds each weight to the nearest multiple of 2^-frac (ties to even), refuses a weight outside the
``bits``-bit two's-complement range (naming it, with the ``bits`` that would hold the largest weight), folds an
logit scale 1/sqrt(d) (``over_root``: exactly where the root is rational, else by integer square roots,
``divided_by_sqrt``), and records the largest |rounded − weight| and
where (``summary``: the ``Quantization`` every verdict carries; docs/semantics.md §7). Used by the torch importer
(``torch_import``) and the quantized reading of checkpoints (``hf_quantized``); torch is not imported here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from ..ir import Quantization
from ..numbers import fmt
from ..schema.errors import strip_terminal_codes


class TorchImportError(ValueError):
    """The state dict cannot be imported exactly (the message names the component and what to do). ``key``: the
    spec key the problem is about, relative to the model section (``quantize``), when it is one."""

    def __init__(self, message: str, hint: str | None = None, key: str | None = None) -> None:
        super().__init__(strip_terminal_codes(message))
        self.hint = hint
        self.key = key


# ---------------------------------------------------------------- exact numbers and quantization

SQRT_BITS = 64  # sqrt(d_head) bracketed between k/2^64 and (k+1)/2^64: irrational errors bounded within 2^-60


def bits_for(mantissa: int) -> int:
    """The fewest bits p of a two's-complement range [-2^(p-1), 2^(p-1) - 1] that holds ``mantissa``."""
    return max(2, (mantissa if mantissa >= 0 else -mantissa - 1).bit_length() + 1)


@dataclass
class _Quantizer:
    """Rounds weights to the grid (or keeps them exact), remembering the largest rounding error, exactly."""

    bits: int | None
    frac: int | None
    largest_weight: Fraction  # max |w| over the whole state dict (for the hint when a weight overflows)
    largest_weight_at: str
    count: int = 0
    worst: Fraction = Fraction(-1)  # largest |rounded - weight| (for a folded w/sqrt(d_head): an exact upper bound)
    worst_where: str = ""
    worst_exact: bool = True
    widest: int = 0  # the largest |mantissa| seen, as bits_for

    def _limit(self, mantissa: int, where: str, value: float | Fraction) -> None:
        assert self.bits is not None and self.frac is not None
        bound = 1 << (self.bits - 1)
        self.widest = max(self.widest, bits_for(mantissa))
        if not -bound <= mantissa <= bound - 1:
            lowest, highest = fmt(Fraction(-bound, 1 << self.frac)), fmt(Fraction(bound - 1, 1 << self.frac))
            needed = bits_for(round(self.largest_weight * (1 << self.frac)))
            raise TorchImportError(
                f"{where} = {fmt(Fraction(value))} is outside the {self.bits}-bit range "
                f"[{lowest}, {highest}] of quantize {{bits: {self.bits}, frac: {self.frac}}}",
                f"the largest weight of the state dict, |{self.largest_weight_at}| = {float(self.largest_weight):.6g}, "
                f"needs {needed} bits at frac {self.frac}: write quantize: {{bits: {needed}, frac: {self.frac}}} "
                f"(and the arithmetic's bits to match), or lower frac",
                key="quantize",
            )

    def _record(self, error: Fraction, where: str, exact: bool) -> None:
        self.count += 1
        if error > self.worst:
            self.worst, self.worst_where, self.worst_exact = error, where, exact

    def exact(self, value: float | Fraction, where: str) -> Fraction:
        """The weight itself (a float32 is exactly a dyadic rational), or its nearest grid point."""
        if isinstance(value, float) and not math.isfinite(value):
            raise TorchImportError(f"{where} is {value}: not a finite weight")
        x = Fraction(value)
        if self.frac is None:
            return x
        scale = 1 << self.frac
        mantissa = round(x * scale)  # nearest, ties to even
        self._limit(mantissa, where, value)
        q = Fraction(mantissa, scale)
        self._record(abs(q - x), where, True)
        return q

    def over_root(self, value: float, radicand: int, where: str) -> Fraction:
        """value / sqrt(radicand): exact (then on the grid) when radicand is a perfect square, else rounded
        explicitly by ``quantize`` (``divided_by_sqrt``)."""
        root = math.isqrt(radicand)
        if root * root == radicand:
            if not math.isfinite(value):
                raise TorchImportError(f"{where} is {value}: not a finite weight")
            return self.exact(Fraction(value) / root, where)
        return self.divided_by_sqrt(value, radicand, where)

    def divided_by_sqrt(self, value: float, radicand: int, where: str) -> Fraction:
        """value / sqrt(radicand), rounded to nearest on the grid by integer square roots (radicand not square)."""
        if self.frac is None:
            raise TorchImportError(
                f"{where}: torch scales logits by 1/sqrt({radicand}), which is irrational; add "
                "quantize: {bits, frac} to round the folded W_Q explicitly (or use a head "
                "dimension that is a perfect square: 1, 4, 9, 16, ...)"
            )
        x = Fraction(value) * (1 << self.frac)
        # y = |x| / sqrt(radicand) = sqrt(x^2 / radicand); nearest integer m: floor(y + 1/2)
        square = x * x / radicand
        m = math.isqrt(square.numerator * square.denominator) // square.denominator
        if (Fraction(2 * m + 1, 2)) ** 2 <= square:
            m += 1
        mantissa = m if x >= 0 else -m
        self._limit(mantissa, where, value)
        q = Fraction(mantissa, 1 << self.frac)
        # |q - value/sqrt(r)| is irrational: with sqrt(r) in [low, low + 2^-64] it lies between the errors at the
        # two ends (the true quotient is between value/high and value/low), so the larger is an exact upper bound
        low = Fraction(math.isqrt(radicand << (2 * SQRT_BITS)), 1 << SQRT_BITS)
        high = low + Fraction(1, 1 << SQRT_BITS)
        bound = max(abs(q - Fraction(value) / low), abs(q - Fraction(value) / high))
        self._record(bound, where, bound == 0)
        return q

    def summary(self) -> Quantization | None:
        if self.frac is None or self.bits is None or self.count == 0:
            return None
        return Quantization(
            bits=self.bits,
            frac=self.frac,
            weights=self.count,
            largest_error=self.worst,
            largest_error_at=self.worst_where,
            error_exact=self.worst_exact,
            largest_weight=self.largest_weight,
            largest_weight_at=self.largest_weight_at,
            bits_needed=self.widest,
        )

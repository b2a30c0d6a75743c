"""The fixed-point exponential table used by softmax in ``fixed`` arithmetic.

Entry t (t = 0, 1, 2, ...) is the mantissa  E[t] = floor(exp(-t * 2^-f) * 2^f), i.e. exp of the
non-positive score difference -t*2^-f rounded toward -inf to f fractional bits. The table stops at the
first zero entry; every larger t also gives 0. E[0] = 2^f exactly (exp(0) = 1).

Computed with decimal arithmetic at high precision, never with float math.exp, so every engine sees
identical integers. exp(x) for rational x != 0 is irrational (Lindemann), so exp(-t*2^-f)*2^f is never
an integer; we still check that each value is far (> 10^-30) from an integer before flooring, and raise
if not, so a precision problem can never silently change a table entry.
"""

from __future__ import annotations

from decimal import ROUND_FLOOR, Context, Decimal, localcontext
from fractions import Fraction
from functools import cache, lru_cache

_PRECISION = 80
_MARGIN = Decimal("1e-30")


@cache
def exp_table(frac_bits: int) -> tuple[int, ...]:
    """Mantissas E[0], E[1], ... (see module docstring); the last entry is the final non-zero one."""
    if frac_bits < 0 or frac_bits > 20:
        raise ValueError("exp table supports 0..20 fractional bits")
    scale = 1 << frac_bits
    entries: list[int] = []
    with localcontext(Context(prec=_PRECISION)):
        step = (Decimal(-1) / Decimal(scale)).exp()  # exp(-2^-f)
        power = Decimal(1)  # exp(-t * 2^-f), built by repeated multiplication
        t = 0
        while True:
            if t % 4096 == 0:
                # re-anchor periodically so rounding error cannot accumulate
                power = (Decimal(-t) / Decimal(scale)).exp()
            value = power * scale
            floor = int(value.to_integral_value(rounding=ROUND_FLOOR))
            if t > 0 and (value - floor < _MARGIN or floor + 1 - value < _MARGIN):
                raise ArithmeticError(f"exp table entry {t} too close to an integer to floor safely")
            if floor == 0:
                break
            entries.append(floor)
            power *= step
            t += 1
    return tuple(entries)


def exp_mantissa(difference_mantissa: int, frac_bits: int) -> int:
    """floor(exp(-t * 2^-f) * 2^f) for t = difference_mantissa >= 0 (0 beyond the table)."""
    if difference_mantissa < 0:
        raise ValueError("softmax exp is only taken of non-positive score differences")
    table = exp_table(frac_bits)
    return table[difference_mantissa] if difference_mantissa < len(table) else 0


# ---------------------------------------------------------------- exp of any rational, floored (rounded-terms)

_BIG = 200  # |s| beyond this: e^s·x is far outside every fixed-point range (e^200 > 2^288) or far inside (0, 1)
_EXP_DIGITS = 200  # significant digits of e^s and of e^s·x: relative error below 10^-198
_TERM_MARGIN = Decimal("1e-190")  # relative: e^s·x is refused when within 10^-190·|e^s·x| of an integer


@lru_cache(maxsize=65536)
def _exp(s: Fraction) -> Decimal:
    with localcontext(Context(prec=_EXP_DIGITS)):
        return (Decimal(s.numerator) / Decimal(s.denominator)).exp()


def floor_exp_times(s: Fraction, x: Fraction) -> int:
    """floor(e^s · x) exactly, for rational s and x (Yang et al.'s rounded attention terms).

    e^s is irrational for rational s != 0 (Lindemann), so e^s·x (x != 0) is never an integer. e^s carries 200
    significant digits and so does the product (more for long x), so its relative error stays below 10^-198
    whatever its size; it is refused if it lies within 10^-190·|e^s·x| of an integer (never seen; a precision
    problem can then not silently change a value). Since e^s·x has at most 87 + 60 integer digits here, the
    margin is far below 1: a large term is floored exactly too. |s| > 200: the sign of x and |x|'s size decide
    alone (the caller saturates large values; e^-200·|x| < 1 for every x a fixed-point format holds).
    """
    if x == 0:
        return 0
    if s == 0:
        return x.numerator // x.denominator
    if s > _BIG:
        raise OverflowError("e^s·x is beyond every fixed-point range")  # callers saturate before asking
    if s < -_BIG and abs(x) < 2**200:
        return 0 if x > 0 else -1
    if len(str(abs(x.numerator))) > 60:
        raise ArithmeticError(f"e^{s}·{x}: x has too many digits for the precision used")
    digits = _EXP_DIGITS + len(str(abs(x.numerator))) + len(str(x.denominator))
    with localcontext(Context(prec=digits)):
        value = _exp(s) * Decimal(x.numerator) / Decimal(x.denominator)
        floor = int(value.to_integral_value(rounding=ROUND_FLOOR))
        margin = abs(value) * _TERM_MARGIN
        if value - floor < margin or floor + 1 - value < margin:
            raise ArithmeticError(f"e^{s}·{x} too close to an integer to floor safely")
    return floor


def exp_bracket(s: Fraction, digits: int = 60) -> tuple[Fraction, Fraction]:
    """Rationals lo < e^s < hi with hi - lo <= 10^-digits · e^s (s != 0), for exact over-approximations."""
    if s == 0:
        return Fraction(1), Fraction(1)
    with localcontext(Context(prec=_PRECISION)):
        value = _exp(s)
        exponent = digits - value.adjusted()
        if exponent < 0:  # e^s ≥ 10^(digits+1) (s > 138 at 60 digits): units of 10^-exponent, integers throughout
            unit = 10**-exponent  # (10 ** exponent was a float here: Decimal * float, a TypeError)
            mid = int((value / unit).to_integral_value(rounding=ROUND_FLOOR))
            return Fraction((mid - 1) * unit), Fraction((mid + 2) * unit)
        scale = 10**exponent
        mid = int((value * scale).to_integral_value(rounding=ROUND_FLOOR))
    return Fraction(mid - 1, scale), Fraction(mid + 2, scale)

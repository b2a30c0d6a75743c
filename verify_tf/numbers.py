"""Exact numbers: parsing user-written rationals and formatting them back.

Floats never appear on a verdict path. A number written in a spec as ``1/4``, ``0.1``, ``-3`` or ``2e-3``
becomes the exact rational it denotes (``0.1`` is 1/10, not the binary float nearest to it).
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction

_RATIO = re.compile(r"^\s*([+-]?\d+)\s*/\s*(\d+)\s*$")
# The largest number a user may write (docs/cli.md, "Input limits"): at most this many digits in a numerator or a
# denominator, and a decimal exponent within ±MAX_DIGITS. Weights, grid values and bounds need a few dozen digits;
# a 100,000-digit number is a mistake or an attack, and would cost seconds to minutes in every later step.
MAX_DIGITS = 1000


class NotANumber(ValueError):
    """Raised when text or a value does not denote a finite rational number."""


class TooLarge(NotANumber):
    """A number past the documented size (``MAX_DIGITS``): an input error, never a traceback or a hang."""


def to_fraction(value: object) -> Fraction:
    """Convert an int, Fraction, finite float (exactly, as its binary value) or numeric text to a Fraction."""
    if isinstance(value, bool):
        raise NotANumber(f"{value!r} is a boolean, not a number")
    if isinstance(value, Fraction):
        return value
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NotANumber(f"{value!r} is not finite")
        return Fraction(value)
    if isinstance(value, str):
        return parse_rational(value)
    raise NotANumber(f"{value!r} is not a number")


def parse_rational(text: str) -> Fraction:
    """Parse ``p/q``, an integer or a decimal (``0.1``, ``1e-3``) into the exact rational it denotes."""
    match = _RATIO.match(text)
    if match:
        if max(len(match.group(1).lstrip("+-")), len(match.group(2))) > MAX_DIGITS:
            raise TooLarge(f"a number with more than {MAX_DIGITS} digits")
        numerator, denominator = int(match.group(1)), int(match.group(2))
        if denominator == 0:
            raise NotANumber(f"{text!r} divides by zero")
        return Fraction(numerator, denominator)
    if len(text) > 4 * MAX_DIGITS:  # Decimal would read it, but no number within the limits is written this long
        raise TooLarge(f"a number with more than {MAX_DIGITS} digits")
    try:
        decimal = Decimal(text.strip())
    except InvalidOperation:
        raise NotANumber(f"{text!r} is not a number (write an integer, a decimal or p/q)") from None
    if not decimal.is_finite():
        raise NotANumber(f"{text!r} is not finite")
    digits = decimal.as_tuple()
    if len(digits.digits) > MAX_DIGITS or abs(decimal.adjusted()) > MAX_DIGITS or -int(digits.exponent) > MAX_DIGITS:
        raise TooLarge(f"a number with more than {MAX_DIGITS} digits or an exponent beyond ±{MAX_DIGITS}")
    return Fraction(decimal)


def check_size(value: Fraction, what: str = "a number") -> Fraction:
    """``value`` if its numerator and denominator have at most MAX_DIGITS digits, else TooLarge (for numbers
    computed from the user's, such as plus: true's −δ^(−nd))."""
    limit = 10**MAX_DIGITS
    if abs(value.numerator) >= limit or value.denominator >= limit:
        raise TooLarge(f"{what} would have more than {MAX_DIGITS} digits")
    return value


def fmt(value: Fraction | int) -> str:
    """Format an exact number for humans: integers plainly, dyadic/decimal values as decimals, else p/q."""
    value = Fraction(value)
    if value.denominator == 1:
        return str(value.numerator)
    denominator = value.denominator
    twos = fives = 0
    while denominator % 2 == 0:
        denominator //= 2
        twos += 1
    while denominator % 5 == 0:
        denominator //= 5
        fives += 1
    if denominator == 1 and max(twos, fives) <= 12:
        digits = max(twos, fives)
        text = f"{Decimal(value.numerator) / Decimal(value.denominator):.{digits}f}"
        return text
    return f"{value.numerator}/{value.denominator}"


def fmt_vector(values) -> str:
    return "[" + ", ".join(fmt(v) for v in values) + "]"


# ---------------------------------------------------------------- binary floats read as the rationals they stand for


def simplest_between(lo: Fraction, hi: Fraction) -> Fraction:
    """The simplest rational in the closed interval [lo, hi]: the smallest denominator, then the smallest |numerator|.

    The Stern-Brocot (continued fraction) descent: exact, no bound on the denominator needed.
    """
    if lo > hi:
        raise ValueError(f"empty interval [{lo}, {hi}]")
    if lo <= 0 <= hi:
        return Fraction(0)
    if hi < 0:
        return -simplest_between(-hi, -lo)
    whole = lo.numerator // lo.denominator
    if whole == lo or whole + 1 <= hi:
        return Fraction(whole) if whole == lo else Fraction(whole + 1)
    # lo and hi share the integer part: recurse on the reciprocals of the fractional parts
    return whole + 1 / simplest_between(1 / (hi - whole), 1 / (lo - whole))


def float32_from_bits(bits: int) -> Fraction:
    """The exact value of the IEEE-754 binary32 number with this bit pattern (finite numbers only)."""
    sign = -1 if bits >> 31 else 1
    exponent = (bits >> 23) & 0xFF
    mantissa = bits & 0x7FFFFF
    if exponent == 0xFF:
        raise NotANumber(f"float32 0x{bits:08x} is not finite")
    if exponent == 0:  # subnormal
        return sign * Fraction(mantissa, 1 << 149)
    return sign * Fraction((1 << 23) | mantissa) * Fraction(2) ** (exponent - 150)


def float32_interval(bits: int) -> tuple[Fraction, Fraction]:
    """The closed interval of reals that round (to nearest) to this float32: halfway to each neighbour."""
    value = float32_from_bits(bits)
    exponent = (bits >> 23) & 0xFF
    ulp = Fraction(2) ** (max(exponent, 1) - 150)
    below = ulp / 2 if (bits & 0x7FFFFF) == 0 and exponent > 1 else ulp  # the gap halves below a power of two
    if value < 0:  # mirror: the smaller gap lies above (toward zero) for a negative power of two
        return value - ulp / 2, value + below / 2
    return value - below / 2, value + ulp / 2


def snap_float32(bits: int) -> Fraction:
    """The simplest rational that rounds to this float32: the value a compiler meant when it stored p/q as a float.

    A weight meant as p/q with a small q lies inside its float32 rounding interval and no simpler rational does
    (two rationals with denominators <= q differ by at least 1/q^2, far more than the interval's width).
    """
    if bits & 0x7FFFFFFF == 0:
        return Fraction(0)
    return simplest_between(*float32_interval(bits))


def snap_float64(value: float) -> Fraction:
    """The simplest rational that rounds to this float64 (0.1 -> 1/10, 1/3 as a float -> 1/3)."""
    if not math.isfinite(value):
        raise NotANumber(f"{value!r} is not finite")
    if value == 0:
        return Fraction(0)
    exact = Fraction(value)
    up = Fraction(math.nextafter(value, math.inf))
    down = Fraction(math.nextafter(value, -math.inf))
    return simplest_between((exact + down) / 2, (exact + up) / 2)

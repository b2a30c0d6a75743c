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


class NotANumber(ValueError):
    """Raised when text or a value does not denote a finite rational number."""


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
        numerator, denominator = int(match.group(1)), int(match.group(2))
        if denominator == 0:
            raise NotANumber(f"{text!r} divides by zero")
        return Fraction(numerator, denominator)
    try:
        decimal = Decimal(text.strip())
    except InvalidOperation:
        raise NotANumber(f"{text!r} is not a number (write an integer, a decimal or p/q)") from None
    if not decimal.is_finite():
        raise NotANumber(f"{text!r} is not finite")
    return Fraction(decimal)


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

"""Decoding a float model's output from its enclosure: right on every float32 evaluation, wrong on every one, or
undecided (the enclosure straddles the decision), position by position.

The verdict rules of the "float as compiled" reading (docs/semantics.md, "Readings"):

* categorical output (tracr's argmax over the output space's coordinates): RIGHT when the wanted coordinate's
  lower bound exceeds every other coordinate's upper bound (every evaluation names it, strictly); WRONG when
  some other coordinate's lower bound exceeds the wanted one's upper bound (no evaluation names it), or the
  wanted value is not in the output space; UNDECIDED otherwise;
* numerical output: "equal" means within ``tolerance`` of the program's exact value (a float model's
  arithmetic cannot be expected to hit a mean such as 1/3 exactly): RIGHT when the whole interval lies in
  [v - tolerance, v + tolerance], WRONG when it lies wholly outside, UNDECIDED otherwise.

Everything is compared in exact integers (the enclosure's, over 2^SCALE): no float decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from .enclosure import SCALE, Box

RIGHT, WRONG, UNDECIDED = 0, 1, 2
DONT_CARE, NOT_IN_SPACE = -2, -1  # wanted indices: no check here; a value the output space cannot name
_LOWEST = -(1 << 400)


def categorical(box: Box, coordinates: Sequence[int], wanted: np.ndarray) -> np.ndarray:
    """Per (row, position) of ``box`` (B, n, d): RIGHT, WRONG or UNDECIDED for the wanted index into
    ``coordinates`` (B, n), or DONT_CARE / NOT_IN_SPACE."""
    lo, hi = box.lo[..., list(coordinates)], box.hi[..., list(coordinates)]
    k = len(coordinates)
    index = np.clip(wanted, 0, k - 1)
    mine = np.arange(k)[None, None, :] == index[..., None]
    lo_w = np.where(mine, lo, _LOWEST).max(axis=-1)
    hi_w = np.where(mine, hi, _LOWEST).max(axis=-1)
    others_hi = np.where(mine, _LOWEST, hi).max(axis=-1)
    others_lo = np.where(mine, _LOWEST, lo).max(axis=-1)
    status = np.where(lo_w > others_hi, RIGHT, np.where(others_lo > hi_w, WRONG, UNDECIDED))
    status = np.where(wanted == NOT_IN_SPACE, WRONG, status)
    return np.where(wanted == DONT_CARE, RIGHT, status).astype(np.int8)


def numerical(box: Box, coordinate: int, wanted: Sequence[Fraction | None], codes: np.ndarray, tolerance: Fraction):
    """Per (row, position): the output coordinate against the program's value ``wanted[code]`` (None: don't
    care) within ``tolerance``."""
    lo, hi = box.lo[..., coordinate], box.hi[..., coordinate]
    status = np.full(codes.shape, RIGHT, dtype=np.int8)
    scale = 1 << SCALE
    for code, value in enumerate(wanted):
        if value is None:
            continue
        here = codes == code
        if not here.any():
            continue
        low = (value - tolerance) * scale  # the interval's ends, over 2^SCALE
        high = (value + tolerance) * scale
        low_int = -((-low.numerator) // low.denominator)  # ceil
        high_int = high.numerator // high.denominator  # floor
        inside = (lo >= low_int) & (hi <= high_int)
        outside = (hi < low_int) | (lo > high_int)
        status = np.where(here, np.where(inside, RIGHT, np.where(outside, WRONG, UNDECIDED)), status)
    return status.astype(np.int8)


def interval_text(box: Box, *index: int) -> str:
    """``[lo, hi]`` of one coordinate as decimals with 7 places, rounded outward (for messages)."""
    low, high = box.fractions(*index)
    return f"[{outward(low, down=True)}, {outward(high, down=False)}]"


def outward(value: Fraction, down: bool, places: int = 7) -> str:
    """``value`` as a decimal with ``places`` places, rounded down or up (so an interval shown still contains)."""
    scaled = value * 10**places
    rounded = scaled.numerator // scaled.denominator if down else -((-scaled.numerator) // scaled.denominator)
    sign = "-" if rounded < 0 else ""
    whole, rest = divmod(abs(rounded), 10**places)
    return sign + f"{whole}.{rest:0{places}d}".rstrip("0").rstrip(".")


def upper_text(value: Fraction) -> str:
    """An upper bound of ``value`` >= 0 in scientific notation with two significant digits, rounded up: 3.1e-08."""
    if value <= 0:
        return "0"
    exponent = len(str(value.numerator)) - len(str(value.denominator))
    while Fraction(10) ** exponent > value:
        exponent -= 1
    while Fraction(10) ** (exponent + 1) <= value:
        exponent += 1
    scaled = value / Fraction(10) ** (exponent - 1)  # in [10, 100)
    digits = -((-scaled.numerator) // scaled.denominator)
    if digits == 100:
        digits, exponent = 10, exponent + 1
    return f"{digits // 10}.{digits % 10}e{exponent:+03d}"


def threshold(box: Box, cut: Fraction, accepts: np.ndarray) -> np.ndarray:
    """Per entry of ``box`` (a readout's enclosure): RIGHT when every evaluation decides as ``accepts`` says (accept
    iff the readout exceeds ``cut``: the lower bound above it, or for a rejection the upper bound at most it), WRONG
    when every evaluation decides the other way, UNDECIDED when the enclosure straddles the cut."""
    scaled = cut * (1 << SCALE)
    floor = scaled.numerator // scaled.denominator  # an integer bound b: b > cut·2^S iff b > floor; b <= iff b <= floor
    above = np.asarray(box.lo > floor, dtype=bool)
    below = np.asarray(box.hi <= floor, dtype=bool)
    right = np.where(accepts, above, below)
    wrong = np.where(accepts, below, above)
    return np.where(right, RIGHT, np.where(wrong, WRONG, UNDECIDED)).astype(np.int8)

"""RoPE's rotation tables in fixed point: cos(θ·p) and sin(θ·p) rounded to the grid, decided exactly.

**The rule** (docs/semantics.md, "RoPE"): the table entry for frequency θ and stream position p is the real
number cos(θ·p) (resp. sin(θ·p)) rounded to the nearest multiple of 2^-f, ties to the even mantissa, then
saturated to the format's range. Nearest (not the floor used for computed values) keeps the table odd and
even as sin and cos are: sin(−x) and −sin(x) round alike, so a rotation by −x is the transpose of one by x.

**How it is decided.** Never by a float. Each value is enclosed in a rational interval of proven width,
computed with integer interval arithmetic (every operation rounds its lower end down and its upper end up):

* π by Machin's formula π = 16·atan(1/5) − 4·atan(1/239), whose alternating series brackets atan;
* ln(base) = e·ln 2 + 2·atanh(z) (base = 2^e·y, y ∈ [1, 2), z = (y − 1)/(y + 1)), the positive atanh series
  with its geometric tail bound; exp by Taylor's series on v/2^s with Lagrange's remainder, squared s times;
* θ·p reduced modulo 2π (any multiple of 2π: the reduction only has to keep the argument small), then cos and
  sin by Taylor's series with Lagrange's remainder |R| ≤ |x|^(N+1)/(N+1)!, and Lipschitz continuity (|cos x −
  cos y| ≤ |x − y|) for the interval around the point.

If the enclosure of m = value·2^f + 1/2 has one integer part (and its upper end is not an integer), the rounded
mantissa is ⌊m⌋; otherwise the working precision doubles (96 bits first, at most 8192). This terminates: the
values are transcendental (Lindemann–Weierstrass: cos and sin of a non-zero algebraic number), hence never a
tie, except at rational multiples of π, which ``turns`` frequencies give: there Niven's theorem says cos and
sin are rational only at 0, ±1/2 and ±1, and those exact cases are recognised and rounded exactly (a tie at
±1/2 with f = 0 goes to the even mantissa 0).
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import cache, lru_cache

from ..ir import Frequency
from ..work import check_deadline

__all__ = ["MAX_PRECISION", "cos_sin_enclosure", "power_enclosure", "rotation_entry", "rotation_table"]

START_PRECISION = 96
MAX_PRECISION = 8192

Interval = tuple[Fraction, Fraction]


# ---------------------------------------------------------------- outward rounding to w fractional bits


def _down(x: Fraction, w: int) -> Fraction:
    return Fraction(math.floor(x * (1 << w)), 1 << w)


def _up(x: Fraction, w: int) -> Fraction:
    return Fraction(math.ceil(x * (1 << w)), 1 << w)


def _hull(lo: Fraction, hi: Fraction, w: int) -> Interval:
    return _down(min(lo, hi), w), _up(max(lo, hi), w)


def _mul(a: Interval, b: Interval, w: int) -> Interval:
    products = [a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1]]
    return _down(min(products), w), _up(max(products), w)


# ---------------------------------------------------------------- constants


def _atan_inverse(x: int, w: int) -> Interval:
    """atan(1/x) for an integer x ≥ 2: the alternating series with decreasing terms brackets it."""
    total = Fraction(0)
    k = 0
    while True:
        term = Fraction(1, (2 * k + 1) * x ** (2 * k + 1))
        if term < Fraction(1, 1 << (w + 2)):
            # |atan − partial sum| ≤ the first omitted term
            return _down(total - term, w), _up(total + term, w)
        total += term if k % 2 == 0 else -term
        k += 1
        if k % 256 == 0:
            check_deadline("RoPE tables: π")


def _step(w: int) -> int:
    """w rounded up to a multiple of 64: the constants are cached per step, so that every position and every
    doubling of the precision shares them (a tighter enclosure than asked is still an enclosure)."""
    return -(-w // 64) * 64


def _pi(w: int) -> Interval:
    return _pi_at(_step(w))


@cache
def _pi_at(w: int) -> Interval:
    a5 = _atan_inverse(5, w + 8)
    a239 = _atan_inverse(239, w + 8)
    return _down(16 * a5[0] - 4 * a239[1], w), _up(16 * a5[1] - 4 * a239[0], w)


def _atanh(z: Fraction, w: int) -> Interval:
    """atanh(z) for 0 ≤ z ≤ 1/2: positive terms z^(2k+1)/(2k+1); the tail after them is at most
    z^(2N+1)/((2N+1)(1 − z²))."""
    total = Fraction(0)
    power = z  # z^(2k+1), exact
    k = 0
    while True:
        term = power / (2 * k + 1)
        tail = term / (1 - z * z)
        if tail < Fraction(1, 1 << (w + 2)):
            return _down(total, w), _up(total + tail, w)
        total += term
        power *= z * z
        k += 1
        if k % 256 == 0:
            check_deadline("RoPE tables: ln")


def _ln(value: Fraction, w: int) -> Interval:
    """ln(value) for a rational value > 0."""
    return _ln_at(value, _step(w))


@cache
def _ln_at(value: Fraction, w: int) -> Interval:
    exponent = value.numerator.bit_length() - value.denominator.bit_length()
    y = value / Fraction(2) ** exponent
    while y >= 2:
        y, exponent = y / 2, exponent + 1
    while y < 1:
        y, exponent = y * 2, exponent - 1
    ln2 = _atanh(Fraction(1, 3), w + 8)
    rest = _atanh((y - 1) / (y + 1), w + 8)
    lo = exponent * 2 * (ln2[0] if exponent >= 0 else ln2[1]) + 2 * rest[0]
    hi = exponent * 2 * (ln2[1] if exponent >= 0 else ln2[0]) + 2 * rest[1]
    return _down(lo, w), _up(hi, w)


def _exp_point(v: Fraction, w: int) -> Interval:
    """exp(v) for a rational v: Taylor's series on v/2^s (|v/2^s| ≤ 1/16), then s squarings."""
    s = max(0, math.ceil(abs(v) * 16).bit_length())  # by formula: |v|/2^s <= 1/16
    # the squarings multiply the relative error by 2^s and the result is up to e^|v| < 2^(3|v|/2 + 1): the working
    # precision carries both, so the absolute error is 2^-w whatever the size of the result (rope-base: 1e-100
    # gives e^223)
    work = w + 2 * s + 16 + math.ceil(abs(v) * 3 / 2) + 1
    x = _hull(v / (1 << s), v / (1 << s), work)  # dyadic ends: every term below stays a w-bit dyadic
    # the terms x^n/n! as intervals rounded outward at each step (exact rationals grew n! denominators: 5 s of gcd
    # for one table of rope-base 1e-100)
    total, term, n = (Fraction(1), Fraction(1)), (Fraction(1), Fraction(1)), 0
    while True:
        n += 1
        product = _mul(term, x, work)
        term = (_down(product[0] / n, work), _up(product[1] / n, work))
        total = (total[0] + term[0], total[1] + term[1])
        # Lagrange: |R_n| ≤ |x|^(n+1)/(n+1)! · e^|x| ≤ 2·|term|·|x|/(n+1)
        remainder = 2 * max(abs(term[0]), abs(term[1])) * max(abs(x[0]), abs(x[1])) / (n + 1)
        if remainder < Fraction(1, 1 << (work + 2)):
            break
        if n % 256 == 0:
            check_deadline("RoPE tables: exp")
    lo, hi = _down(total[0] - remainder, work), _up(total[1] + remainder, work)
    for _ in range(s):
        lo, hi = _down(lo * lo, work), _up(hi * hi, work)
    return _down(lo, w), _up(hi, w)


def _power(base: Fraction, exponent: Fraction, w: int) -> Interval:
    """base^(−exponent) = exp(−exponent·ln base), enclosed (exp is increasing)."""
    return _power_at(base, exponent, _step(w))


@cache
def _power_at(base: Fraction, exponent: Fraction, w: int) -> Interval:
    if exponent == 0 or base == 1:
        return Fraction(1), Fraction(1)
    ln = _ln(base, w + 16)
    v = sorted((-exponent * ln[0], -exponent * ln[1]))
    return _down(_exp_point(v[0], w + 8)[0], w), _up(_exp_point(v[1], w + 8)[1], w)


# ---------------------------------------------------------------- cos and sin


def _cos_sin_point(x: Fraction, w: int) -> tuple[Interval, Interval]:
    """cos(x) and sin(x) for a dyadic rational |x| ≤ 4, by Taylor's series with Lagrange's remainder, in integer
    fixed point with ``work`` = w + 16 fractional bits (x itself is exact: its denominator divides 2^work)."""
    work = w + 16
    one = 1 << work
    big_x = x.numerator * (one // x.denominator)  # x·2^work exactly
    sums = [0, 0, 0, 0]  # the terms of index n ≡ 0, 1, 2, 3 (mod 4)
    term, n = one, 0  # x^n / n! · 2^work, truncated toward zero
    while True:
        sums[n % 4] += term
        n += 1
        product = term * big_x
        term = abs(product) // (n * one)
        if product < 0:
            term = -term
        if n > abs(x) and abs(term) < 4:
            break
        if n % 256 == 0:
            check_deadline("RoPE tables: cos and sin")
    # Each truncation toward zero loses less than one unit (2^-work), and an error in term k reaches term n
    # multiplied by |x|^(n-k)·k!/n! ≤ 4^4/4! < 11 (|x| ≤ 4): every computed term is within 11·n units of x^n/n!,
    # the sums within 11·n² units; the Taylor remainder is at most |x|^n/n!, i.e. |term| plus that error.
    error = abs(term) + 12 * (n + 1) ** 2
    cos, sin = sums[0] - sums[2], sums[1] - sums[3]
    return (
        (_down(Fraction(cos - error, one), w), _up(Fraction(cos + error, one), w)),
        (_down(Fraction(sin - error, one), w), _up(Fraction(sin + error, one), w)),
    )


@lru_cache(maxsize=4096)
def _cos_sin_interval(x: Interval, w: int) -> tuple[Interval, Interval]:
    """cos and sin over the interval x (any size): reduced by a multiple of 2π, then at its lower end, widened by
    the interval's width (both are 1-Lipschitz)."""
    if x[1] - x[0] >= 2:  # wider than cos and sin can move apart: the enclosure says nothing more than [-1, 1]
        return (Fraction(-1), Fraction(1)), (Fraction(-1), Fraction(1))
    # the multiple k of 2π is sized first (π to 4 bits is enough for that), then π to w + 16 bits plus k's bits:
    # 2πk is then within 2^-(w+12) of its value, so x − 2πk stays within [−4, 4] however large θ·p is (with π at
    # w + 16 bits alone, θ·p = 10^999 left |x − 2πk| near 10^963 and a Taylor loop of as many terms)
    k = math.floor(x[0] / (2 * _pi(4)[0]) + Fraction(1, 2))
    pi = _pi(w + 16 + abs(k).bit_length())
    k = math.floor(x[0] / (2 * pi[0]) + Fraction(1, 2))
    shift = (2 * k * pi[0], 2 * k * pi[1]) if k >= 0 else (2 * k * pi[1], 2 * k * pi[0])
    reduced = (x[0] - shift[1], x[1] - shift[0])  # contains x − 2πk
    point = _down(reduced[0], w + 24)
    width = reduced[1] - point
    cos, sin = _cos_sin_point(point, w + 8)
    return (_down(cos[0] - width, w), _up(cos[1] + width, w)), (_down(sin[0] - width, w), _up(sin[1] + width, w))


# Niven's theorem: cos(2πv) is rational only at these reduced turns v ∈ (−1/2, 1/2].
_EXACT_COS_OF_TURN = {
    Fraction(0): Fraction(1),
    Fraction(1, 6): Fraction(1, 2),
    Fraction(-1, 6): Fraction(1, 2),
    Fraction(1, 4): Fraction(0),
    Fraction(-1, 4): Fraction(0),
    Fraction(1, 3): Fraction(-1, 2),
    Fraction(-1, 3): Fraction(-1, 2),
    Fraction(1, 2): Fraction(-1),
}


def _reduced_turn(turns: Fraction) -> Fraction:
    """turns − an integer, in (−1/2, 1/2]."""
    v = turns - math.floor(turns)
    return v - 1 if v > Fraction(1, 2) else v


@lru_cache(maxsize=4096)
def _enclosure(frequency: Frequency, position: int, sine: bool, w: int) -> Interval:
    """An interval containing cos(θ·p) (sin if ``sine``) whose ends are rationals with w fractional bits."""
    if frequency.kind == "turns":
        v = _reduced_turn(frequency.value * position - (Fraction(1, 4) if sine else 0))  # sin(x) = cos(x − π/2)
        if v in _EXACT_COS_OF_TURN:
            exact = _EXACT_COS_OF_TURN[v]
            return exact, exact
        pi = _pi(w + 16)
        angle = _hull(2 * v * pi[0], 2 * v * pi[1], w + 16)
    elif frequency.kind == "radians":
        angle = (frequency.value * position, frequency.value * position)
    else:
        theta = _power(frequency.value, frequency.exponent, w + 16 + position.bit_length())
        angle = (theta[0] * position, theta[1] * position)
    if angle == (Fraction(0), Fraction(0)):
        return (Fraction(0), Fraction(0)) if sine else (Fraction(1), Fraction(1))
    if frequency.kind == "turns":
        return _cos_sin_interval(angle, w)[0]  # the turn was already shifted by a quarter for the sine
    return _cos_sin_interval(angle, w)[1 if sine else 0]


def _nearest_even(value: Fraction) -> int:
    """round-to-nearest of a rational, ties to the even integer."""
    floor = math.floor(value)
    rest = value - floor
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and floor % 2 == 1):
        return floor + 1
    return floor


@cache
def rotation_entry(frequency: Frequency, position: int, frac: int, sine: bool) -> int:
    """The mantissa (before saturation) of cos(θ·p) — sin(θ·p) if ``sine`` — rounded to the nearest multiple of
    2^-frac, ties to even (module docstring)."""
    if position < 0:
        raise ValueError("rotation tables are indexed by stream positions ≥ 0")
    scale = 1 << frac
    w = START_PRECISION + frac
    while w <= MAX_PRECISION:
        check_deadline("RoPE tables")
        lo, hi = _enclosure(frequency, position, sine, w)
        if lo == hi:
            return _nearest_even(lo * scale)
        a, b = lo * scale + Fraction(1, 2), hi * scale + Fraction(1, 2)
        if math.floor(a) == math.floor(b) and b.denominator != 1:
            return math.floor(a)
        w *= 2
    raise ArithmeticError(
        f"cannot decide the rounding of {'sin' if sine else 'cos'}({frequency.describe()}·{position}) "
        f"within {MAX_PRECISION} bits"
    )


def rotation_table(frequency: Frequency, positions: int, frac: int) -> tuple[tuple[int, int], ...]:
    """(cos, sin) mantissas for stream positions 0 .. positions − 1 (before saturation)."""
    return tuple(
        (rotation_entry(frequency, p, frac, False), rotation_entry(frequency, p, frac, True)) for p in range(positions)
    )


# ---------------------------------------------------------------- for the float reading (floats.transformer_enclosure)


def cos_sin_enclosure(angle: Interval, w: int) -> tuple[Interval, Interval]:
    """Rationals with w fractional bits around cos and sin over the rational interval ``angle`` (radians)."""
    return _cos_sin_interval(angle, w)


def power_enclosure(base: Fraction, exponent: Fraction, w: int) -> Interval:
    """Rationals with w fractional bits around base^exponent (base > 0)."""
    return _power(base, -exponent, w)

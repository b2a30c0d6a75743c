"""``Lin``: a tensor of quantities, each bounded by an interval and by two linear forms over the cube's inputs.

A batch of cubes has ``N`` input variables t ∈ [0, 1]^N per cube (one per user position and coordinate; a
coordinate's value is lo + (hi − lo)·t). For every element of a ``Lin`` (leading axis: the cube) and every input
x of that cube, with t the input's variables,

    lo <= y(x) <= hi,        lc·t + lb <= y(x) <= uc·t + ub,

all numbers integers over ``Scale.one`` = 2^K (``ints``). A form's extreme over the box is ``b + Σ min(c, 0)`` or
``b + Σ max(c, 0)`` (``form_min``/``form_max``), and ``tighten`` intersects the interval with the forms'. The
operations mirror the interpreter's steps, each sound by a one-line argument in its docstring; every rounding
of a coefficient or a constant moves the bound outward, so a form stays valid whatever K is. Floats appear
only where a relaxation *chooses* a slope; its offset is then computed exactly for that slope, so any choice is
sound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from . import ints
from .ints import Array, Scale


@dataclass
class Lin:
    lo: Array  # (..., ) interval ends
    hi: Array
    lc: Array  # (..., N) lower form: coefficients ...
    lb: Array  # (..., ) ... and constant
    uc: Array  # upper form
    ub: Array

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(np.broadcast_shapes(np.shape(self.lo), np.shape(self.lb)))

    def __getitem__(self, index: Any) -> Lin:
        """Elements ``index`` of the value axes (the form axis stays last)."""
        index = index if isinstance(index, tuple) else (index,)
        return Lin(
            self.lo[index],
            self.hi[index],
            self.lc[(*index, Ellipsis)] if index else self.lc,
            self.lb[index],
            self.uc[(*index, Ellipsis)] if index else self.uc,
            self.ub[index],
        )

    def map(self, values: Any, forms: Any) -> Lin:
        """The same reshaping on every array (``values`` for the value arrays, ``forms`` for the coefficients)."""
        return Lin(values(self.lo), values(self.hi), forms(self.lc), values(self.lb), forms(self.uc), values(self.ub))


def form_min(c: Array, b: Array) -> Array:
    return ints.add(b, ints.total(np.minimum(c, 0) if not ints.wide(c) else ints.minimum(c, np.int64(0)), -1))


def form_max(c: Array, b: Array) -> Array:
    return ints.add(b, ints.total(np.maximum(c, 0) if not ints.wide(c) else ints.maximum(c, np.int64(0)), -1))


def constant(lo: Array, hi: Array, n: int) -> Lin:
    """Quantities known only by their interval (forms without coefficients)."""
    shape = np.broadcast_shapes(np.shape(lo), np.shape(hi))
    zeros = np.zeros((*shape, n), dtype=np.int64)
    lo, hi = np.broadcast_to(lo, shape), np.broadcast_to(hi, shape)
    return Lin(lo, hi, zeros, lo, zeros, hi)


def tighten(x: Lin, shift: int | None = None) -> Lin:
    """The interval intersected with the forms' extremes; on a grid of 2^shift units (a rounded stage: every value
    is a multiple), rounded inward to it."""
    lo = ints.maximum(x.lo, form_min(x.lc, x.lb))
    hi = ints.minimum(x.hi, form_max(x.uc, x.ub))
    if shift is not None:
        lo, hi = ints.ceil_to(lo, shift), ints.floor_to(hi, shift)
    return Lin(lo, hi, x.lc, x.lb, x.uc, x.ub)


def _reduce(c: Array, b: Array, d: int, upper: bool) -> tuple[Array, Array]:
    """The form (c·t + b)/d with integer coefficients: c = d·c' + R, 0 <= R < d, and R·t ∈ [0, ΣR] on [0, 1]^N,
    so (c·t + b)/d >= c'·t + floor(b/d) and <= c'·t + ceil((b + ΣR)/d)."""
    if d == 1:
        return c, b
    q = ints.floordiv(c, d)
    if not upper:
        return q, ints.floordiv(b, d)
    remainder = ints.total(ints.sub(c, ints.mul(q, np.int64(d))), -1)
    return q, ints.ceildiv(ints.add(b, remainder), d)


def add(a: Lin, b: Lin) -> Lin:
    return Lin(
        ints.add(a.lo, b.lo),
        ints.add(a.hi, b.hi),
        ints.add(a.lc, b.lc),
        ints.add(a.lb, b.lb),
        ints.add(a.uc, b.uc),
        ints.add(a.ub, b.ub),
    )


def sub(a: Lin, b: Lin) -> Lin:
    """a − b: its lower form is a's lower minus b's upper."""
    return Lin(
        ints.sub(a.lo, b.hi),
        ints.sub(a.hi, b.lo),
        ints.sub(a.lc, b.uc),
        ints.sub(a.lb, b.ub),
        ints.sub(a.uc, b.lc),
        ints.sub(a.ub, b.lb),
    )


def shift(x: Lin, lo: Array, hi: Array) -> Lin:
    """x + c for a constant c ∈ [lo, hi] (a rational constant rounded outward)."""
    return Lin(ints.add(x.lo, lo), ints.add(x.hi, hi), x.lc, ints.add(x.lb, lo), x.uc, ints.add(x.ub, hi))


def scaled(x: Lin, num: Array, den: int = 1) -> Lin:
    """(num/den)·x elementwise (num an integer array broadcast against x's values, den > 0): a non-negative
    factor keeps each side's form, a negative one swaps them; then the exact division by den, outward."""
    num = np.asarray(num)
    positive = np.asarray(num >= 0, dtype=bool)
    lc = ints.mul(num[..., None], _pick(positive[..., None], x.lc, x.uc))
    uc = ints.mul(num[..., None], _pick(positive[..., None], x.uc, x.lc))
    lb = ints.mul(num, _pick(positive, x.lb, x.ub))
    ub = ints.mul(num, _pick(positive, x.ub, x.lb))
    ends = (ints.mul(num, x.lo), ints.mul(num, x.hi))
    lo, hi = ints.minimum(*ends), ints.maximum(*ends)
    lc, lb = _reduce(lc, lb, den, upper=False)
    uc, ub = _reduce(uc, ub, den, upper=True)
    return Lin(ints.floordiv(lo, den), ints.ceildiv(hi, den), lc, lb, uc, ub)


def _pick(condition: Array, a: Array, b: Array) -> Array:
    if ints.wide(a) or ints.wide(b):
        a, b = np.asarray(a).astype(object), np.asarray(b).astype(object)
    return np.where(condition, a, b)


def affine(x: Lin, weights: np.ndarray, den: int, bias_lo: Array, bias_hi: Array) -> Lin:
    """W x + b before rounding, exact: W = weights/den (integers (out, in) applied to the last value axis), b ∈
    [bias_lo, bias_hi] (in units). A positive weight carries each side's form, a negative one the other side's."""
    pos, neg = np.maximum(weights, 0), np.minimum(weights, 0)
    lc = ints.add(ints.matmul(pos, x.lc), ints.matmul(neg, x.uc))
    uc = ints.add(ints.matmul(pos, x.uc), ints.matmul(neg, x.lc))
    lb = ints.add(_matvec(pos, x.lb), _matvec(neg, x.ub))
    ub = ints.add(_matvec(pos, x.ub), _matvec(neg, x.lb))
    lo = ints.add(_matvec(pos, x.lo), _matvec(neg, x.hi))
    hi = ints.add(_matvec(pos, x.hi), _matvec(neg, x.lo))
    lc, lb = _reduce(lc, lb, den, upper=False)
    uc, ub = _reduce(uc, ub, den, upper=True)
    out = Lin(ints.floordiv(lo, den), ints.ceildiv(hi, den), lc, lb, uc, ub)
    return tighten(shift(out, bias_lo, bias_hi))


def _matvec(weights: np.ndarray, x: Array) -> Array:
    return ints.matmul(weights, np.asarray(x)[..., None])[..., 0]


def round_down(x: Lin, scale: Scale) -> Lin:
    """floor to the fixed-point grid (no-op in exact arithmetic): t − 2^-f < floor(t) <= t, and the interval ends
    floored (floor is monotone)."""
    step = scale.grid_shift
    if step is None:
        return x
    lowered = ints.sub(x.lb, np.int64(1 << step))
    return tighten(Lin(ints.floor_to(x.lo, step), ints.floor_to(x.hi, step), x.lc, lowered, x.uc, x.ub), step)


def saturate(x: Lin, low: int | None, high: int | None) -> Lin:
    """Clamp to [low, high] (the fixed-point range; None: exact arithmetic). Only where the interval says the
    clamp can act are the forms replaced by the clamped interval (constants); elsewhere it is the identity."""
    if low is None or high is None:
        return x
    acting = (x.lo < low) | (x.hi > high)
    if not np.any(acting):
        return x
    lo = ints.minimum(ints.maximum(x.lo, np.int64(low)), np.int64(high))
    hi = ints.minimum(ints.maximum(x.hi, np.int64(low)), np.int64(high))
    keep = ~acting
    return Lin(
        lo,
        hi,
        _pick(keep[..., None], x.lc, np.int64(0)),
        _pick(keep, x.lb, lo),
        _pick(keep[..., None], x.uc, np.int64(0)),
        _pick(keep, x.ub, hi),
    )


def relu(x: Lin, scale: Scale) -> Lin:
    """max(x, 0): the identity where lo >= 0, zero where hi <= 0, else the triangle: below by s·x with s ∈ {0, 1}
    (1 where hi >= −lo: any s ∈ [0, 1] is a valid lower line), above by the chord's slope σ (chosen in floats) with
    the offset that makes σ·x + β valid at both interval ends (ReLU is convex)."""
    lo, hi = x.lo, x.hi
    crossing = np.asarray((lo < 0) & (hi > 0), dtype=bool)
    dead = np.asarray(hi <= 0, dtype=bool)
    one = scale.one
    low, high = _float(lo), _float(hi)
    chord = high / np.where(crossing, high - low, 1.0)
    sigma = np.where(crossing, np.round(chord * one).astype(np.int64), np.where(dead, 0, one))
    uc, ub = _line_above(x.uc, x.ub, sigma, lo, hi, lambda t: ints.maximum(t, np.int64(0)), scale)
    alpha = np.where(crossing, np.where(high >= -low, one, 0), np.where(dead, 0, one))
    lc = ints.floordiv(ints.mul(alpha[..., None], x.lc), one)
    lb = ints.floordiv(ints.mul(alpha, x.lb), one)
    return tighten(Lin(ints.maximum(lo, np.int64(0)), ints.maximum(hi, np.int64(0)), lc, lb, uc, ub))


def _float(x: Array) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def offset(sigma: Array, t_lo: Array, t_hi: Array, f_lo: Array, f_hi: Array, one: int, upper: bool) -> Array:
    """β (units squared) making σ·t + β lie above (``upper``) or below both points (t_lo, f_lo), (t_hi, f_hi) (units;
    f rounded outward by the caller): above a convex function on [t_lo, t_hi] when it is above both ends, below a
    concave one likewise."""
    ends = (
        ints.sub(ints.mul(f_lo, np.int64(one)), ints.mul(sigma, t_lo)),
        ints.sub(ints.mul(f_hi, np.int64(one)), ints.mul(sigma, t_hi)),
    )
    return ints.maximum(*ends) if upper else ints.minimum(*ends)


def line(c: Array, b: Array, sigma: Array, beta: Array, one: int, upper: bool) -> tuple[Array, Array]:
    """The form (σ·(c·t + b) + β) / one (σ in units, β in units squared), rounded outward."""
    return _reduce(ints.mul(sigma[..., None], c), ints.add(ints.mul(sigma, b), beta), one, upper)


def _line_above(
    c: Array, b: Array, sigma: Array, t_lo: Array, t_hi: Array, f: Any, scale: Scale
) -> tuple[Array, Array]:
    """σ·(c·t + b) + β above a convex f on [t_lo, t_hi] (``offset``); σ >= 0, the form an upper bound of t."""
    beta = offset(sigma, t_lo, t_hi, f(t_lo), f(t_hi), scale.one, upper=True)
    return line(c, b, sigma, beta, scale.one, upper=True)


def box_upper(c: Array, b: Array, a_lo: Array, a_hi: Array, scale: Scale) -> tuple[Array, Array]:
    """An upper form of a·y for a weight a ∈ [a_lo, a_hi] (0 <= a_lo, units) that is no function the forms know,
    given y <= c·t + b =: U. a·y <= a·U (a >= 0) <= max(a_lo·U, a_hi·U), a convex function of U, which lies below
    the line of slope σ over U's own range [U_min, U_max] with the offset taken at both ends; σ: a_hi where U >= 0,
    a_lo where U <= 0, else the chord's slope (floats choose it; the offset makes any σ sound)."""
    t_lo, t_hi = form_min(c, b), form_max(c, b)
    sigma = _chord(a_lo, a_hi, t_lo, t_hi, upper=True)

    def above(t: Array) -> Array:  # max(a_lo·t, a_hi·t), units squared
        return ints.maximum(ints.mul(a_lo, t), ints.mul(a_hi, t))

    beta = ints.maximum(ints.sub(above(t_lo), ints.mul(sigma, t_lo)), ints.sub(above(t_hi), ints.mul(sigma, t_hi)))
    return _reduce(ints.mul(sigma[..., None], c), ints.add(ints.mul(sigma, b), beta), scale.one, upper=True)


def box_lower(c: Array, b: Array, a_lo: Array, a_hi: Array, scale: Scale) -> tuple[Array, Array]:
    """A lower form of a·y given y >= c·t + b =: L: a·y >= a·L >= min(a_lo·L, a_hi·L), concave in L, above the
    chord-slope line with the offset taken at both ends of L's range (``box_upper`` mirrored)."""
    t_lo, t_hi = form_min(c, b), form_max(c, b)
    sigma = _chord(a_lo, a_hi, t_lo, t_hi, upper=False)

    def below(t: Array) -> Array:
        return ints.minimum(ints.mul(a_lo, t), ints.mul(a_hi, t))

    beta = ints.minimum(ints.sub(below(t_lo), ints.mul(sigma, t_lo)), ints.sub(below(t_hi), ints.mul(sigma, t_hi)))
    return _reduce(ints.mul(sigma[..., None], c), ints.add(ints.mul(sigma, b), beta), scale.one, upper=False)


def _reduce_all(op: Any, items: list[Array]) -> Array:
    out = items[0]
    for item in items[1:]:
        out = op(out, item)
    return out


def _chord(a_lo: Array, a_hi: Array, t_lo: Array, t_hi: Array, upper: bool) -> np.ndarray:
    """The slope (in units) of the chord of max(a_lo·t, a_hi·t) (upper) or min(...) (lower) on [t_lo, t_hi]:
    a_hi / a_lo where t keeps one sign, else the chord through both ends (floats: a choice, not a bound)."""
    al, ah, tl, th = _float(a_lo), _float(a_hi), _float(t_lo), _float(t_hi)
    positive, negative = tl >= 0, th <= 0
    span = np.where(th > tl, th - tl, 1.0)
    chord = ((ah * th - al * tl) if upper else (al * th - ah * tl)) / span
    rounded = np.round(np.clip(chord, al, ah)).astype(np.int64)
    first, second = (a_hi, a_lo) if upper else (a_lo, a_hi)
    return np.where(positive, first, np.where(negative, second, rounded)).astype(np.int64)


def product(x: Lin, y: Lin, scale: Scale) -> Lin:
    """x·y elementwise (broadcast), by McCormick's planes written with the factors' forms: x·y >= x_lo·y + y_lo·x −
    x_lo·y_lo and >= x_hi·y + y_hi·x − x_hi·y_hi; x·y <= x_hi·y + y_lo·x − x_hi·y_lo and <= x_lo·y + y_hi·x − x_lo·y_hi
    (each from a product of two signed factors such as (x − x_lo)(y − y_lo) >= 0). Per element, the plane whose own
    extreme is better; the interval is interval arithmetic's, intersected with the forms'."""
    one = scale.one
    lower, upper = [], []
    for xa, ya in ((x.lo, y.lo), (x.hi, y.hi)):
        plane = add(scaled(y, xa, one), scaled(x, ya, one))
        corner = ints.ceildiv(ints.mul(xa, ya), one)  # subtracted: rounded up, the plane stays below
        lower.append((plane.lc, ints.sub(plane.lb, corner)))
    for xa, ya in ((x.hi, y.lo), (x.lo, y.hi)):
        plane = add(scaled(y, xa, one), scaled(x, ya, one))
        corner = ints.floordiv(ints.mul(xa, ya), one)
        upper.append((plane.uc, ints.sub(plane.ub, corner)))
    (c1, b1), (c2, b2) = lower
    first = np.asarray(form_min(c1, b1) >= form_min(c2, b2), dtype=bool)
    lc, lb = _pick(first[..., None], c1, c2), _pick(first, b1, b2)
    (c1, b1), (c2, b2) = upper
    first = np.asarray(form_max(c1, b1) <= form_max(c2, b2), dtype=bool)
    uc, ub = _pick(first[..., None], c1, c2), _pick(first, b1, b2)
    corners = [ints.mul(a, b) for a in (x.lo, x.hi) for b in (y.lo, y.hi)]
    lo = ints.floordiv(_reduce_all(ints.minimum, corners), one)
    hi = ints.ceildiv(_reduce_all(ints.maximum, corners), one)
    return tighten(Lin(lo, hi, lc, lb, uc, ub))


def dot(x: Lin, y: Lin, scale: Scale) -> Lin:
    """Σ over the last value axis of x·y (x, y broadcast against each other), by McCormick's planes as ``product``,
    summed as forms with one contraction per side and factor (no per-product temporaries).

    Each product uses, per side, the plane that is exact at the product's extreme corner of the box (below: the
    plane through (x_lo, y_lo) unless the minimum is at (x_hi, y_hi); above: through (x_hi, y_lo) unless the maximum
    is at (x_lo, y_hi)); the plane a·y + b·x − a·b takes each factor's form by the sign of its multiplier."""
    one = scale.one
    corners = {
        (i, j): _float(x_end) * _float(y_end)
        for i, x_end in enumerate((x.lo, x.hi))
        for j, y_end in enumerate((y.lo, y.hi))
    }
    low_corner = np.minimum(np.minimum(corners[0, 0], corners[0, 1]), np.minimum(corners[1, 0], corners[1, 1]))
    first_low = ~((corners[1, 1] <= low_corner) & (corners[0, 0] > low_corner))
    high_corner = np.maximum(np.maximum(corners[0, 0], corners[0, 1]), np.maximum(corners[1, 0], corners[1, 1]))
    first_high = ~((corners[0, 1] >= high_corner) & (corners[1, 0] < high_corner))
    sides = []
    for upper, first, (a1, b1), (a2, b2) in (
        (False, first_low, (x.lo, y.lo), (x.hi, y.hi)),
        (True, first_high, (x.hi, y.lo), (x.lo, y.hi)),
    ):
        a, b = _pick(first, a1, a2), _pick(first, b1, b2)  # the plane a·y + b·x − a·b
        coefficients, constant_ = [], []
        for multiplier, factor in ((a, y), (b, x)):
            plus, minus = ints.maximum(multiplier, np.int64(0)), ints.minimum(multiplier, np.int64(0))
            same = (factor.uc, factor.ub) if upper else (factor.lc, factor.lb)
            other = (factor.lc, factor.lb) if upper else (factor.uc, factor.ub)
            coefficients += [
                ints.contract(plus, same[0], "...k,...kn->...n"),
                ints.contract(minus, other[0], "...k,...kn->...n"),
            ]
            constant_ += [
                ints.contract(plus, same[1], "...k,...k->..."),
                ints.contract(minus, other[1], "...k,...k->..."),
            ]
        corner = ints.total(ints.mul(a, b), -1)
        c = _reduce_all(ints.add, coefficients)
        k = ints.sub(_reduce_all(ints.add, constant_), corner)
        sides.append(_reduce(c, k, one, upper))
    (lc, lb), (uc, ub) = sides
    ends = [ints.mul(p, q) for p in (x.lo, x.hi) for q in (y.lo, y.hi)]
    lo = ints.total(ints.floordiv(_reduce_all(ints.minimum, ends), one), -1)
    hi = ints.total(ints.ceildiv(_reduce_all(ints.maximum, ends), one), -1)
    return tighten(Lin(lo, hi, lc, lb, uc, ub))


def total(x: Lin, axis: int) -> Lin:
    """Σ over a value axis (negative: counted from the last value axis), forms summed before they are made concrete
    (so a variable's contributions cancel where they can)."""
    return tighten(
        Lin(
            ints.total(x.lo, axis),
            ints.total(x.hi, axis),
            ints.total(x.lc, axis - 1),
            ints.total(x.lb, axis),
            ints.total(x.uc, axis - 1),
            ints.total(x.ub, axis),
        )
    )


def where(mask: Array, a: Lin, b: Lin) -> Lin:
    """Per element a's bounds where ``mask``, else b's."""
    mask = np.asarray(mask, dtype=bool)
    flat = mask[..., None]
    return Lin(
        _pick(mask, a.lo, b.lo),
        _pick(mask, a.hi, b.hi),
        _pick(flat, a.lc, b.lc),
        _pick(mask, a.lb, b.lb),
        _pick(flat, a.uc, b.uc),
        _pick(mask, a.ub, b.ub),
    )


def better(a: Lin, b: Lin) -> Lin:
    """Two bounds of the same quantities: the intervals intersected, and per element each side's form whose own
    extreme is the tighter."""
    lower = np.asarray(form_min(a.lc, a.lb) >= form_min(b.lc, b.lb), dtype=bool)
    upper = np.asarray(form_max(a.uc, a.ub) <= form_max(b.uc, b.ub), dtype=bool)
    return tighten(
        Lin(
            ints.maximum(a.lo, b.lo),
            ints.minimum(a.hi, b.hi),
            _pick(lower[..., None], a.lc, b.lc),
            _pick(lower, a.lb, b.lb),
            _pick(upper[..., None], a.uc, b.uc),
            _pick(upper, a.ub, b.ub),
        )
    )


def bias_bounds(values: Any, scale: Scale) -> tuple[np.ndarray, np.ndarray]:
    """Rational constants as (floor, ceil) in units."""
    flat = [Fraction(v) for v in np.asarray(values, dtype=object).reshape(-1)]
    shape = np.shape(values)
    lo = ints.narrow(np.array([scale.floor(v) for v in flat], dtype=object).reshape(shape))
    hi = ints.narrow(np.array([scale.ceil(v) for v in flat], dtype=object).reshape(shape))
    return np.asarray(lo), np.asarray(hi)


def rational_matrix(matrix: Any) -> tuple[np.ndarray, int]:
    """(integer matrix, den) with matrix = integers / den exactly (den the lcm of the denominators)."""
    rows = [[Fraction(w) for w in row] for row in matrix]
    den = math.lcm(1, *(w.denominator for row in rows for w in row))
    return ints.integers([[w * den for w in row] for row in rows]), den

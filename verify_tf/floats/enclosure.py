"""Sound bounds on what a float model computes: every float32 evaluation, in exact integer interval arithmetic.

``enclose(network, ids)`` returns, for each input row, an interval [lo, hi] around every coordinate of the final
residual stream that contains the value of **every** evaluation of the ``FloatNetwork`` that the error model of
docs/semantics.md §7 allows: IEEE float32 with round-to-nearest, sums in any order (fused multiply-adds or wider
accumulators or not, subnormals flushed or not), divisions done as such or as a multiplication by the rounded
reciprocal (XLA under ``jit``), and any ``exp`` whose relative error is at most ``EXP_ERROR``. In particular it
contains tracr's JAX model (un-jitted, or compiled by XLA) and this package's numpy evaluation. Nothing here is
computed in floating point: numbers are Python integers over 2^SCALE (2^P for attention weights), every rounding
is outward, and ``exp`` is bracketed by exact rationals (``semantics.exp_table.exp_bracket``).

The rules, operation by operation (u = 2^-24, the unit roundoff of float32; γ_m = m·u / (1 − m·u); a rounding
may also add an absolute 2^-126, underflow, which the one-unit outward rounding at 2^-64 absorbs):

* **deterministic where the inputs are exact.** A box with lo = hi is a float32 known exactly. One rounding of
  exact operands (the embedding's token + position, a residual addition, the logit's division or reciprocal
  product, a difference to the softmax maximum) is computed exactly (``round32``). A sum of exact terms is
  exact when every partial sum in every order is a float32 (the terms are multiples of 2^e, Σ|t_i| < 2^(e+24),
  2^e normal), or when it has at most two terms (one rounding) (``determined_sums``). tracr's one-hot residual
  streams keep most of layer 0 exact this way;
* ``x @ W + b`` is a sum of the m products and the bias in any order: |fl(Σ t_i) − Σ t_i| ≤ γ_(m+1) Σ |t_i|
  (Higham, Accuracy and Stability of Numerical Algorithms, Thm. 3.4; a zero weight gives an exact zero);
* a residual addition: relative error ≤ u; the logit ``(q·k) / float32(sqrt(K))``: γ_m on the dot product, then
  relative (1 + u)² (a division, or XLA's product with the rounded reciprocal);
* softmax: ê_j = exp^(fl(l_j − m)) with m the float maximum. Softmax is invariant under a common shift, so
  ê_j / Σ ê_k = softmax(t)_j for effective logits t_j = fl(l_j − m) + ln(ê_j / e^{fl(l_j − m)}): exact
  differences ± ``EXP_SHIFT`` where the query's logits are exact, else l_j ± (u·(m − l_j) + ``EXP_SHIFT``)
  (``_effective_logits``). Masked logits (−1e30) give ê = 0 exactly. The exact softmax of the effective
  logits lies in the box w_j ∈ [e^{lo_j} / (e^{lo_j} + Σ_{k≠j} e^{hi_k}), e^{hi_j} / (e^{hi_j} + Σ_{k≠j}
  e^{lo_k})] ∩ simplex; the float weights are w_j(1 + θ_j) with |θ_j| ≤ ρ from the sum's γ_n and the division
  (``_softmax_factor``); the head's output Σ_j ŵ_j v_j is bounded by the exact fractional knapsack over the box ∩
  simplex (equal values on the argmax set and its leak cost nothing), plus the weights' deviations and the
  weighted sum's rounding;
* the MLP ``ReLU(x @ W1 + b1) @ W2 + b2`` is bounded twice, by intervals and to first order in x's width (units
  on for the whole box pass their input through, so tracr's discretising pairs cancel exactly; ``mlp``), and the
  two enclosures are intersected.

Per head, the statistics of the leak are kept: the largest total weight any query can put outside the keys
that may hold the top logit (``leak``) and the smallest logit gap between those keys and the rest (``gap``,
after the 1/sqrt(key_size) scale), so a report states the leak n·e^(−gap) head by head.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from ..semantics.exp_table import exp_bracket
from .network import FloatAttention, FloatNetwork

SCALE = 64  # values are integers over 2^SCALE
P = 64  # attention weights are integers over 2^P
GRID = 26  # logit differences are rounded outward to multiples of 2^-GRID before exp is bracketed
UNIT = Fraction(1, 1 << 24)  # float32 unit roundoff (round to nearest)
EXP_ERROR = Fraction(1, 1 << 20)  # assumed relative error of a float32 exp: 8 to 16 ulps (XLA and numpy: a few)
EXP_FLOOR = -45  # e^-45 < 2^-64: below it, e^x is bracketed by [0, 2^-64]

OBJ = object


@lru_cache(maxsize=1024)
def gamma(m: int) -> Fraction:
    """γ_m = m·u / (1 − m·u): the relative error bound of an m-term float32 sum (any order)."""
    return Fraction(m) * UNIT / (1 - m * UNIT) if m else Fraction(0)


def _ceil_times(values: np.ndarray, factor: Fraction) -> np.ndarray:
    """An integer upper bound of values · factor (values ≥ 0 integers): ⌊values · factor⌋ + 1."""
    if factor == 0:
        return np.zeros_like(values)
    return values * factor.numerator // factor.denominator + 1


def _shift_floor(values: np.ndarray, bits: int) -> np.ndarray:
    return values >> bits if bits > 0 else values << -bits


def _shift_ceil(values: np.ndarray, bits: int) -> np.ndarray:
    return -((-values) >> bits) if bits > 0 else values << -bits


def _ints(array: np.ndarray) -> tuple[np.ndarray, int]:
    """A float32 array as exact integers over 2^bits (bits as small as the array allows): (ints, bits)."""
    data = np.asarray(array, dtype=np.float64)  # float32 -> float64 is exact
    nonzero = data[data != 0]
    if nonzero.size == 0:
        return np.zeros(data.shape, dtype=OBJ), 0
    _, exponents = np.frexp(nonzero)
    bits = max(0, int(53 - exponents.min()))  # float64 mantissas: 53 bits cover every float32 exactly
    out = np.empty(data.shape, dtype=OBJ)
    flat, target = data.reshape(-1), out.reshape(-1)
    for i, value in enumerate(flat.tolist()):
        target[i] = int(Fraction(value) * (1 << bits)) if value else 0
    return out, bits


def _at_scale(array: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A float32 array as outward-rounded integers over 2^SCALE: (lo, hi) (equal when exact)."""
    ints, bits = _ints(array)
    return _shift_floor(ints, bits - SCALE), _shift_ceil(ints, bits - SCALE)


@dataclass
class Box:
    """Intervals [lo, hi] (integers over 2^SCALE) for each entry of an array."""

    lo: np.ndarray
    hi: np.ndarray

    def magnitude(self) -> np.ndarray:
        return np.maximum(-self.lo, self.hi)  # lo ≤ hi: the larger of |lo| and |hi|

    def widened(self, error: np.ndarray) -> Box:
        return Box(self.lo - error - 1, self.hi + error + 1)

    def rounded(self) -> Box:
        """The interval after one float32 rounding (relative u, plus one unit for underflow and outward rounding)."""
        return self.widened(_ceil_times(self.magnitude(), UNIT))

    def take(self, index: np.ndarray | list[int], axis: int = -1) -> Box:
        return Box(np.take(self.lo, index, axis=axis), np.take(self.hi, index, axis=axis))

    def fractions(self, *index: int) -> tuple[Fraction, Fraction]:
        return Fraction(int(self.lo[index]), 1 << SCALE), Fraction(int(self.hi[index]), 1 << SCALE)


def add(a: Box, b: Box) -> Box:
    """fl(a + b): a residual addition (or the embedding's token + position). One rounding of two float32s is
    deterministic: where both are known exactly, the result is that float32 exactly."""
    out = Box(a.lo + b.lo, a.hi + b.hi).rounded()
    exact = (a.lo == a.hi) & (b.lo == b.hi)
    if exact.any():
        values, inverse = np.unique((a.lo + b.lo)[exact], return_inverse=True)  # one-hot streams repeat values
        table = [round32(int(t), SCALE) for t in values]
        rounded = np.array([0 if r is None else r for r in table], dtype=OBJ)[inverse.reshape(-1)]
        known = np.array([r is not None for r in table], dtype=bool)[inverse.reshape(-1)]
        where = np.flatnonzero(exact.reshape(-1))[known]
        out.lo.reshape(-1)[where] = rounded[known]
        out.hi.reshape(-1)[where] = rounded[known]
    return out


def intersect(a: Box, b: Box) -> Box:
    """Two enclosures of the same values: their intersection encloses them too."""
    return Box(np.maximum(a.lo, b.lo), np.minimum(a.hi, b.hi))


def relu(a: Box) -> Box:
    return Box(np.maximum(a.lo, 0), np.maximum(a.hi, 0))


def _trailing_zeros(value: int) -> int:
    return (value & -value).bit_length() - 1 if value else NO_BITS


_TRAILING_ZEROS = np.frompyfunc(_trailing_zeros, 1, 1)
NO_BITS = 1 << 30  # "trailing zeros" of 0: larger than any exponent met


@lru_cache(maxsize=1 << 16)
def round32(value: int, scale: int) -> int | None:
    """The float32 nearest to value / 2^scale (ties to even), as an integer over 2^scale; None when that float32 is
    subnormal (a platform may flush it to zero) or overflows."""
    if value == 0:
        return 0
    magnitude = abs(value)
    extra = magnitude.bit_length() - 24  # bits below float32's 24-bit significand
    if extra > 0:
        kept, rest = divmod(magnitude, 1 << extra)
        half = 1 << (extra - 1)
        if rest > half or (rest == half and kept & 1):
            kept += 1
        magnitude = kept << extra
    exponent = magnitude.bit_length() - 1 - scale
    if not -126 <= exponent <= 127:
        return None
    return magnitude if value > 0 else -magnitude


def round32_quotient(numerator: int, denominator: int, scale: int) -> int | None:
    """The float32 nearest to numerator / (denominator · 2^scale) (denominator > 0, ties to even), as an integer over
    2^scale; None when it is not an integer over 2^scale, subnormal, or overflows."""
    if numerator == 0:
        return 0
    magnitude = abs(numerator)
    top = magnitude.bit_length() - denominator.bit_length()  # 2^top <= magnitude / denominator < 2^(top+1)
    if (magnitude << max(0, -top)) < (denominator << max(0, top)):
        top -= 1
    unit = top - 23  # the result's ulp is 2^unit (over 2^scale)
    if unit >= 0:
        kept, rest = divmod(magnitude, denominator << unit)
        twice, whole = 2 * rest, denominator << unit
    else:
        kept, rest = divmod(magnitude << -unit, denominator)
        twice, whole = 2 * rest, denominator
    if twice > whole or (twice == whole and kept & 1):
        kept += 1
    if unit < 0:
        if kept % (1 << -unit):
            return None
        result = kept >> -unit
    else:
        result = kept << unit
    exponent = result.bit_length() - 1 - scale
    if not -126 <= exponent <= 127:
        return None
    return result if numerator > 0 else -result


def _is_float32(magnitude: int, scale: int) -> bool:
    """magnitude / 2^scale (> 0) is a normal float32: at most 24 significant bits, exponent in [-126, 127]."""
    return magnitude >> _trailing_zeros(magnitude) < 1 << 24 and -126 <= magnitude.bit_length() - 1 - scale <= 127


def determined_sums(products: np.ndarray, scale: int) -> tuple[np.ndarray, np.ndarray]:
    """Sums along the last axis of exact terms (integers over 2^scale) that **every** float32 evaluation gives the
    same result for, whatever the order, fused or not: (the result over 2^scale, where it is determined).

    Determined: (a) every term and every partial sum is a float32, so no operation rounds: the terms are multiples
    of 2^e (e their least trailing-zero exponent), Σ|t_i| < 2^(e+24) and 2^e is not below float32's smallest
    normal; or (b) at most two terms, each a float32: the one rounding fl(t_1 + t_2) (fused or not) is the result."""
    total = products.sum(axis=-1)
    magnitudes = abs(products)
    size = magnitudes.sum(axis=-1)
    common = np.asarray(_TRAILING_ZEROS(np.bitwise_or.reduce(magnitudes, axis=-1)), dtype=OBJ)
    # (a), elementwise on Python integers: Σ|t_i| < 2^(e+24) and 2^e normal (a zero sum is exact too)
    zero = size == 0
    exponent = np.where(zero, 0, common)
    within = np.right_shift(size, exponent + 24) == 0
    known = np.asarray(zero | (within & (exponent - scale >= -126)), dtype=bool)
    result = np.where(known, total, 0).astype(OBJ)
    flat_total, flat_terms = total.reshape(-1), magnitudes.reshape(-1, magnitudes.shape[-1])
    out, ok = result.reshape(-1), known.reshape(-1)
    few = (products != 0).sum(axis=-1).reshape(-1) <= 2
    for i in np.flatnonzero(~ok & few):  # (b): at most two float32 terms, one rounding
        terms = [int(t) for t in flat_terms[i] if t]
        if all(_is_float32(t, scale) for t in terms):
            rounded = round32(int(flat_total[i]), scale)
            if rounded is not None:
                out[i], ok[i] = rounded, True
    return result, known


def _to_scale(values: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Integers over 2^(SCALE + bits) as the tightest integers over 2^SCALE around them: (floor, ceil)."""
    return _shift_floor(values, bits), _shift_ceil(values, bits)


@dataclass(frozen=True)
class _Linear:
    """A float32 ``x @ W + b`` prepared for interval evaluation. The bias is one more term of the sum: the error
    model lets a platform add it in any order with the products (a GEMM that starts from the bias, XLA's fused
    addend), so ``x @ W + b`` is the float32 sum of m + 1 exact terms in any order."""

    inputs: np.ndarray  # the rows of [W; b] with a non-zero weight (index d: the bias, read against a constant 1)
    columns: tuple[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, Fraction], ...]
    bits: int
    dense: np.ndarray  # (len(inputs), width) the weights of those rows, integers over 2^bits (0 where zero)
    gammas: tuple[Fraction, ...]  # (width,) γ_m of each column: its rounding error is at most γ_m Σ|x_i w_i|
    width: int
    determinable: bool  # no subnormal weight (a platform may flush it to zero): exact inputs may give exact sums

    @staticmethod
    def of(w: np.ndarray, b: np.ndarray) -> _Linear:
        augmented = np.concatenate([w, np.asarray(b, dtype=np.float32)[None, :]], axis=0)
        ints, bits = _ints(augmented)
        inputs = np.flatnonzero((augmented != 0).any(axis=1))
        position = {int(r): i for i, r in enumerate(inputs)}
        columns = []
        gammas = []
        for column in range(w.shape[1]):
            rows = np.flatnonzero(augmented[:, column] != 0)
            gammas.append(gamma(len(rows)))
            if len(rows):
                weights = ints[rows, column]
                local = np.array([position[int(r)] for r in rows], dtype=np.int64)
                positive, negative = weights > 0, weights < 0
                columns.append(
                    (
                        column,
                        local,
                        weights,
                        local[positive],
                        local[negative],
                        weights[positive],
                        weights[negative],
                        gammas[-1],
                    )
                )
        magnitudes = np.abs(augmented.astype(np.float64))
        subnormal = bool(((magnitudes != 0) & (magnitudes < 2.0**-126)).any())
        return _Linear(inputs, tuple(columns), bits, ints[inputs], tuple(gammas), int(w.shape[1]), not subnormal)

    def extended(self, x: Box) -> tuple[np.ndarray, np.ndarray]:
        """x's coordinates that the weights read, the bias's constant 1 (over 2^SCALE) appended as index d."""
        one = np.full(x.lo.shape[:-1] + (1,), 1 << SCALE, dtype=OBJ)
        lo, hi = np.concatenate([x.lo, one], axis=-1), np.concatenate([x.hi, one], axis=-1)
        return lo[..., self.inputs], hi[..., self.inputs]

    def error(self, size: np.ndarray, columns: np.ndarray | None = None) -> np.ndarray:
        """Per column (all, or ``columns``), over 2^(SCALE + bits): the rounding error bound γ_m Σ|x_i w_i| plus
        2^-SCALE (underflow) for inputs of magnitude at most ``size`` (the extended coordinates)."""
        chosen = np.arange(self.width) if columns is None else columns
        dense = abs(self.dense[:, chosen])
        magnitude = np.dot(size, dense) if dense.size else np.zeros(size.shape[:-1] + (len(chosen),), dtype=OBJ)
        numerators = np.array([self.gammas[c].numerator for c in chosen], dtype=OBJ)
        denominators = np.array([self.gammas[c].denominator for c in chosen], dtype=OBJ)
        return magnitude.astype(OBJ) * numerators // denominators + 1 + (1 << self.bits)

    def __call__(self, x: Box) -> Box:
        shape = x.lo.shape[:-1] + (self.width,)
        lo = np.zeros(shape, dtype=OBJ)
        hi = np.zeros(shape, dtype=OBJ)
        if not len(self.inputs):
            return Box(lo, hi)
        x_lo, x_hi = self.extended(x)
        size = np.maximum(-x_lo, x_hi)
        point = x_lo == x_hi
        for column, rows, weights, up, down, wp, wn, factor in self.columns:
            low = (x_lo[..., up] * wp).sum(axis=-1) + (x_hi[..., down] * wn).sum(axis=-1)
            high = (x_hi[..., up] * wp).sum(axis=-1) + (x_lo[..., down] * wn).sum(axis=-1)
            magnitude = (size[..., up] * wp).sum(axis=-1) - (size[..., down] * wn).sum(axis=-1)
            error = _ceil_times(magnitude, factor)
            column_lo = _shift_floor(low - error, self.bits) - 1  # one unit: underflow of m terms
            column_hi = _shift_ceil(high + error, self.bits) + 1
            exact = point[..., rows].all(axis=-1) & self.determinable
            if exact.any():  # every input known exactly: the sum may be determined (``determined_sums``)
                value, known = determined_sums(x_lo[exact][:, rows] * weights, SCALE + self.bits)
                where = np.flatnonzero(exact.reshape(-1))[known]
                floor, ceil = _to_scale(value[known], self.bits)
                column_lo.reshape(-1)[where] = floor
                column_hi.reshape(-1)[where] = ceil
            lo[..., column] = column_lo
            hi[..., column] = column_hi
        return Box(lo, hi)


def mlp(w1: _Linear, w2: _Linear, x: Box) -> Box:
    """``ReLU(x @ W1 + b1) @ W2 + b2`` over the box x: the plain interval bound intersected with a first-order one.

    The interval bound treats every hidden unit independently, so tracr's discretising MLPs (pairs of units
    ``ReLU(s(x − t) + 1) − ReLU(s(x − t))`` with slopes s ≈ 100) multiply an input's width by 2s although the pair
    is flat where both units are on. The first-order bound writes x = c + t with c = x.lo exact and t ∈ [0, x.hi −
    x.lo]; where a unit is on for the whole box (its pre-activation's lower bound ≥ 0) it passes its input through,
    off (upper bound ≤ 0) it is exactly 0, otherwise it is bounded by [0, upper]. The exact sum that the output
    rounds is then

        Σ_{k on} (c·W1_k + b1_k) W2_kj  +  t·M_j  +  Σ_{k on} ε_k W2_kj  +  Σ_{k unsure} h_k W2_kj  +  b2_j,

    with M = W1[:, on] W2[on, :] computed exactly once per on-pattern (so the pair's slopes cancel exactly), ε_k
    the unit's rounding (|ε_k| ≤ its Higham bound), and the output's own rounding bound added as in ``_Linear``."""
    z = w1(x)
    plain = w2(relu(z))
    if not len(w1.inputs) or not len(w2.inputs):
        return plain
    x_lo, x_hi = w1.extended(x)
    spread = x_hi - x_lo
    noisy = (spread != 0).any(axis=-1)
    if not noisy.any():
        return plain
    # only the hidden units that are read and written, and the output columns they (or the bias) write
    w2_full = np.zeros((w1.width + 1, w2.width), dtype=OBJ)  # W2 and its bias row (index H), over 2^b2
    w2_full[w2.inputs] = w2.dense
    units = np.flatnonzero((w1.dense != 0).any(axis=0) & (w2_full[:-1] != 0).any(axis=1))
    columns = np.flatnonzero((w2_full[np.append(units, w1.width)] != 0).any(axis=0))
    if not len(columns):
        return plain
    w2_used, w2_bias = w2_full[units][:, columns], w2_full[w1.width, columns]
    c, d = x_lo[noisy], spread[noisy]  # (E, I)
    z_lo, z_hi = z.lo[noisy][:, units], z.hi[noisy][:, units]  # (E, U)
    on, unsure = z_lo >= 0, (z_lo < 0) & (z_hi > 0)
    reads = np.flatnonzero((d != 0).any(axis=0))  # the inputs that vary somewhere
    w1_used = w1.dense[:, units]
    centre = np.dot(c, w1_used)  # (E, U) the exact pre-activations at c, over 2^(SCALE + b1)
    size = np.maximum(-x_lo, x_hi)[noisy]
    rounding = w1.error(size, units)  # (E, U) |ε_k|, over 2^(SCALE + b1)
    b1, b2 = w1.bits, w2.bits
    zero = np.zeros_like(centre)
    total = np.dot(np.where(on, centre, zero), w2_used) + (w2_bias << (SCALE + b1))
    slack = np.dot(np.where(on, rounding, zero), abs(w2_used))
    low, high = total - slack, total + slack
    straddle = np.where(unsure, z_hi, zero)  # over 2^SCALE, h_k in [0, z_hi]
    low = low + (np.dot(straddle, np.minimum(w2_used, 0)) << b1)
    high = high + (np.dot(straddle, np.maximum(w2_used, 0)) << b1)
    patterns, which = np.unique(on, axis=0, return_inverse=True)
    which = np.asarray(which).reshape(-1)
    for p, pattern in enumerate(patterns):
        rows = which == p
        slopes = np.dot(w1_used[reads][:, pattern], w2_used[pattern])  # (R, out) over 2^(b1 + b2)
        low[rows] += np.dot(d[rows][:, reads], np.minimum(slopes, 0))
        high[rows] += np.dot(d[rows][:, reads], np.maximum(slopes, 0))
    # the output's rounding: γ_m Σ|h_k w_kj| (the bias a term too), as ``_Linear`` bounds it
    h_size = np.zeros((len(c), w1.width + 1), dtype=OBJ)
    h_size[:, units] = np.maximum(np.maximum(-z_lo, z_hi), 0)
    h_size[:, w1.width] = 1 << SCALE
    output_error = w2.error(h_size[:, w2.inputs], columns) << b1
    low = _shift_floor(low - output_error, b1 + b2) - 1
    high = _shift_ceil(high + output_error, b1 + b2) + 1
    first_lo, first_hi = plain.lo.copy(), plain.hi.copy()
    where = np.ix_(np.flatnonzero(noisy.reshape(-1)), columns)
    flat_lo, flat_hi = first_lo.reshape(-1, w2.width), first_hi.reshape(-1, w2.width)
    flat_lo[where], flat_hi[where] = low, high
    return intersect(plain, Box(first_lo, first_hi))


@lru_cache(maxsize=1 << 16)
def _exp_ints(t: int) -> tuple[int, int]:
    """Integers (lo, hi) over 2^P with lo ≤ e^{t·2^-GRID}·2^P ≤ hi, for t ≤ 0."""
    if t >= 0:
        return 1 << P, 1 << P
    if t < EXP_FLOOR << GRID:
        return 0, 1
    low, high = exp_bracket(Fraction(t, 1 << GRID), 40)
    return (low.numerator << P) // low.denominator, -((-high.numerator << P) // high.denominator)


def _exp_box(t_lo: np.ndarray, t_hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    values, inverse = np.unique(np.concatenate([t_lo.ravel(), t_hi.ravel()]).astype(np.int64), return_inverse=True)
    table = [_exp_ints(int(t)) for t in values]
    lows = np.array([a for a, _ in table], dtype=OBJ)
    highs = np.array([b for _, b in table], dtype=OBJ)
    half = t_lo.size
    return lows[inverse[:half]].reshape(t_lo.shape), highs[inverse[half:]].reshape(t_hi.shape)


def _softmax_factor(keys: int) -> Fraction:
    """ρ with ŵ_j = w_j(1 + θ_j), |θ_j| ≤ ρ, where w is the exact softmax of the exponentials as computed (each
    ``exp`` and each difference to the maximum already inside the effective logits, ``_effective_logits``): only
    the sum of ``keys`` positive terms (γ_keys) and the division (u, or 2u as a reciprocal and a product) remain."""
    g = gamma(keys)
    division = (1 + UNIT) ** 2  # ê_j / Ŝ, or (XLA under jit) ê_j · fl(1 / Ŝ): two roundings
    upper = division / (1 - g) - 1
    lower = 1 - (1 - UNIT) ** 2 / (1 + g)
    return max(upper, lower)


EXP_SHIFT = EXP_ERROR / (1 - EXP_ERROR)  # ≥ −ln(1 − EXP_ERROR) ≥ ln(1 + EXP_ERROR): the exp error as a logit shift


def _effective_logits(logits: Box, allowed: np.ndarray, exp_shift: Fraction = EXP_SHIFT) -> Box:
    """Logits t with ê_j / Σ_k ê_k = softmax(t)_j for every float32 evaluation: ê_j = exp^(fl(l_j − m)) is the
    computed exponential of the float difference to the float maximum m. Softmax does not change when every
    logit moves by the same amount, so t_j = fl(l_j − m) + ln(ê_j / e^{fl(l_j − m)}):

    * where a query's allowed logits are all known exactly, m and each fl(l_j − m) are exact float32s (one
      rounding, deterministic), so t_j is that difference ± the exp error (``EXP_SHIFT``);
    * otherwise t_j ∈ l_j ± (u·(m − l_j) + EXP_SHIFT), with m − l_j ≤ max_k hi_k − lo_j.

    ``exp_shift``: the exp error as a logit shift (``EXP_SHIFT`` for tracr's platforms; a torch model states its
    own, ``floats.torch_enclosure``)."""
    unknown = -(1 << 400)
    lo, hi = logits.lo, logits.hi
    m_hi = np.where(allowed, hi, unknown).max(axis=-1, keepdims=True)  # (B, i, 1)
    distance = np.maximum(m_hi - lo, 0)
    shift = exp_shift * (1 << SCALE)
    slack = _ceil_times(distance, UNIT) + shift.numerator // shift.denominator + 1
    out = Box(lo - slack, hi + slack)
    rows = np.asarray(np.where(allowed, lo == hi, True).all(axis=-1))  # (B, i): every allowed logit exact
    exact = rows[:, :, None] & allowed[None, :, :]
    if exact.any():
        top = np.broadcast_to(m_hi, lo.shape)[exact]
        values, inverse = np.unique(lo[exact] - top, return_inverse=True)
        table = [round32(int(t), SCALE) for t in values]
        known = np.array([r is not None for r in table], dtype=bool)[inverse.reshape(-1)]
        difference = np.array([0 if r is None else r for r in table], dtype=OBJ)[inverse.reshape(-1)]
        where = np.flatnonzero(exact.reshape(-1))[known]
        base = difference[known] + top[known]  # the same shift (the maximum) for every key of a query
        step = shift.numerator // shift.denominator + 1
        out.lo.reshape(-1)[where] = base - step
        out.hi.reshape(-1)[where] = base + step
    return out


def _knapsack_max(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """An upper bound of max Σ_j w_j a_j over lo ≤ w ≤ hi, Σ_j w_j = 2^P (weights over 2^P), along the last axis
    (result over 2^(P+SCALE)): fill the box's lower corner, then give the remaining mass to the largest values
    first. The order is taken on the values' top 62 bits; values it cannot tell apart differ by less than 2^s,
    so the greedy answer is within 2^s · 2^P of the maximum, which is added."""
    top = int(np.max(abs(values))) if values.size else 0
    s = max(0, top.bit_length() - 61)
    keys = np.asarray(values >> s, dtype=np.int64)
    order = np.argsort(-keys, axis=-1, kind="stable")
    a = np.take_along_axis(values, order, axis=-1)
    low = np.take_along_axis(lo, order, axis=-1)
    room = np.take_along_axis(hi, order, axis=-1) - low
    remaining = (1 << P) - low.sum(axis=-1, keepdims=True)
    before = np.cumsum(room, axis=-1) - room
    give = np.minimum(room, np.maximum(remaining - before, 0))
    slack = (1 << (s + P)) if s else 0
    return (low * a).sum(axis=-1) + (give * a).sum(axis=-1) + slack


@dataclass
class HeadLeak:
    """Per input row: the largest weight outside the possible argmax set, and the smallest logit gap to it."""

    leak: np.ndarray  # (B,) integers over 2^P
    gap: np.ndarray  # (B,) integers over 2^SCALE; -1 where every key may hold the maximum
    keys: int  # keys per query at the longest row (for n·e^-gap)


@dataclass
class Enclosure:
    output: Box  # (B, n, d)
    heads: dict[str, HeadLeak] = field(default_factory=dict)  # "layer L head h" -> leak statistics


class Prepared:
    """A ``FloatNetwork`` with its weights as exact integers, ready for ``enclose`` (build once per network)."""

    def __init__(self, network: FloatNetwork):
        self.network = network
        self.token_lo, self.token_hi = _at_scale(network.token_embed)
        self.pos_lo, self.pos_hi = _at_scale(network.pos_embed)
        self.layers = []
        for attention, mlp in network.layers:
            heads = []
            for index, head in enumerate(attention.heads):
                used = [
                    c
                    for c in range(head.query.shape[1])
                    if (head.query[:, c].any() or head.query_bias[c]) and (head.key[:, c].any() or head.key_bias[c])
                ]
                values = [c for c in range(head.value.shape[1]) if head.output[c].any()]
                if not values:
                    continue  # its output is exactly zero: every value it mixes is projected to nothing
                heads.append(
                    (
                        index,
                        _Linear.of(head.query[:, used], head.query_bias[used]),
                        _Linear.of(head.key[:, used], head.key_bias[used]),
                        _Linear.of(head.value[:, values], head.value_bias[values]),
                        head.output[values],
                        len(used),
                    )
                )
            rows = (
                np.concatenate([output for *_, output, _ in heads], axis=0)
                if heads
                else np.zeros((0, network.width), dtype=np.float32)
            )
            self.layers.append(
                (
                    attention,
                    heads,
                    _Linear.of(rows, attention.output_bias),
                    _Linear.of(mlp.w1, mlp.b1),
                    _Linear.of(mlp.w2, mlp.b2),
                )
            )


def prepare(network: FloatNetwork) -> Prepared:
    """``Prepared(network)``, built once per network object (a handful are kept)."""
    return prepared_once(_PREPARED, network, Prepared)


_PREPARED: dict[int, Prepared] = {}


def prepared_once(cache: dict, network: Any, build: Callable[[Any], Any]) -> Any:
    """``build(network)``, kept in ``cache`` by the network object's identity (at most 9 kept; the entry checks
    the object itself, so a reused id never returns another network's preparation)."""
    cached = cache.get(id(network))
    if cached is None or cached.network is not network:
        if len(cache) > 8:
            cache.clear()
        cached = cache[id(network)] = build(network)
    return cached


def enclose(prepared: Prepared, ids: np.ndarray) -> Enclosure:
    """Intervals around the final residual stream of every float32 evaluation of the network on rows ``ids``."""
    n = ids.shape[1]
    positions = np.arange(n)
    x = add(
        Box(prepared.token_lo[ids], prepared.token_hi[ids]),
        Box(
            np.broadcast_to(prepared.pos_lo[positions], ids.shape + (prepared.pos_lo.shape[1],)),
            np.broadcast_to(prepared.pos_hi[positions], ids.shape + (prepared.pos_hi.shape[1],)),
        ),
    )
    result = Enclosure(x)
    for layer, (attention, heads, output, w1, w2) in enumerate(prepared.layers):
        mixed = []
        for h, query, key, value, _, used in heads:
            box, leak = _head(attention, query, key, value, used, x)
            mixed.append(box)
            result.heads[f"layer {layer} head {h}"] = leak
        if mixed:
            joined = Box(np.concatenate([m.lo for m in mixed], axis=-1), np.concatenate([m.hi for m in mixed], axis=-1))
            x = add(x, output(joined))
        elif len(output.inputs):  # no head contributes, but the output Linear adds its bias
            empty = np.zeros(x.lo.shape[:-1] + (0,), dtype=OBJ)
            x = add(x, output(Box(empty, empty.copy())))
        x = add(x, mlp(w1, w2, x))
    result.output = x
    return result


def _head(
    attention: FloatAttention,
    query: _Linear,
    key: _Linear,
    value: _Linear,
    used: int,
    x: Box,
    exp_shift: Fraction = EXP_SHIFT,
) -> tuple[Box, HeadLeak]:
    n = x.lo.shape[1]
    allowed = np.tril(np.ones((n, n), dtype=bool)) if attention.causal else np.ones((n, n), dtype=bool)
    return mix(_logits(attention, query(x), key(x), used), value(x), allowed, exp_shift)


def mix(logits: Box, v: Box, allowed: np.ndarray, exp_shift: Fraction = EXP_SHIFT) -> tuple[Box, HeadLeak]:
    """A head's output Σ_j ŵ_j v_j for every float32 evaluation of softmax over the float ``logits`` (B, i, j) and the
    weighted sum of the values ``v`` (B, j, V), keys j allowed for query i where ``allowed`` (module docstring: the
    effective logits, the box ∩ simplex knapsack, the weights' relative error and the sum's rounding)."""
    batch, n = logits.lo.shape[:2]
    weights_lo, weights_hi, leak = _weights(_effective_logits(logits, allowed, exp_shift), allowed, n)
    if v.lo.shape[-1] == 0:
        return Box(np.zeros((batch, n, 0), dtype=OBJ), np.zeros((batch, n, 0), dtype=OBJ)), leak
    rho = _softmax_factor(n)
    # exact part: the knapsack over the box ∩ simplex, per (row, query, value coordinate)
    lo_w = np.where(allowed, weights_lo, 0)[:, :, None, :]  # (B, i, 1, j)
    hi_w = np.where(allowed, weights_hi, 0)[:, :, None, :]
    v_lo = np.swapaxes(v.lo, 1, 2)[:, None, :, :]  # (B, 1, V, j)
    v_hi = np.swapaxes(v.hi, 1, 2)[:, None, :, :]
    shape = (batch, n, v.lo.shape[-1], n)
    lo_w, hi_w = np.broadcast_to(lo_w, shape), np.broadcast_to(hi_w, shape)
    top = _knapsack_max(np.broadcast_to(v_hi, shape), lo_w, hi_w)
    bottom = -_knapsack_max(-np.broadcast_to(v_lo, shape), lo_w, hi_w)
    # float part: the weights' relative error ρ (plus one unit each), then the weighted sum's rounding γ_n
    size = np.swapaxes(v.magnitude(), 1, 2)[:, None, :, :]
    bound = _ceil_times(hi_w, rho) + 1
    float_hi = hi_w + bound
    deviation = (bound * size).sum(axis=-1) + _ceil_times((float_hi * size).sum(axis=-1), gamma(n))
    lo = _shift_floor(bottom - deviation, P) - 1
    hi = _shift_ceil(top + deviation, P) + 1
    return Box(lo, hi), leak


def _logits(attention: FloatAttention, q: Box, k: Box, used: int) -> Box:
    """(q·k) / float32(sqrt(key_size)), each entry an interval: (B, i, j)."""
    batch, n = q.lo.shape[:2]
    if used == 0:
        zero = np.zeros((batch, n, n), dtype=OBJ)
        return Box(zero, zero.copy())
    # midpoint-radius (all doubled to stay integral): q·k ∈ m_q m_k ± (|m_q| r_k + r_q |m_k| + r_q r_k)
    mq, rq = (q.lo + q.hi)[:, :, None, :], (q.hi - q.lo)[:, :, None, :]
    mk, rk = (k.lo + k.hi)[:, None, :, :], (k.hi - k.lo)[:, None, :, :]
    centre = (mq * mk).sum(axis=-1)
    radius = (abs(mq) * rk + rq * abs(mk) + rq * rk).sum(axis=-1)
    low, high = centre - radius, centre + radius  # over 2^(2·SCALE + 2)
    error = _ceil_times((q.magnitude()[:, :, None, :] * k.magnitude()[:, None, :, :]).sum(axis=-1), gamma(used)) << 2
    dot = Box(_shift_floor(low - error, SCALE + 2) - 1, _shift_ceil(high + error, SCALE + 2) + 1)
    divisor = Fraction(float(attention.divisor))  # exactly the float32 haiku divides by
    # the division, or (XLA under jit) a multiplication by the divisor's float32 reciprocal: a second rounding
    out = (
        Box(
            (dot.lo * divisor.denominator) // divisor.numerator,
            -((-dot.hi * divisor.denominator) // divisor.numerator),
        )
        .rounded()
        .rounded()
    )
    # where the query and the key are known exactly, the dot product may be determined, and then so is the logit:
    # one rounding of dot / divisor, or of dot · fl(1/divisor) (both deterministic; the enclosure holds both)
    reciprocal = round32_quotient(divisor.denominator << SCALE, divisor.numerator, SCALE)
    q_point = (q.lo == q.hi).all(axis=-1)  # (B, i)
    k_point = (k.lo == k.hi).all(axis=-1)  # (B, j)
    both = q_point[:, :, None] & k_point[:, None, :]
    if both.any() and reciprocal is not None:
        b, i, j = np.nonzero(both)
        value, known = determined_sums(q.lo[b, i] * k.lo[b, j], 2 * SCALE)
        bounds: dict[int, tuple[int, int] | None] = {}  # per distinct exact dot product: the logit's two candidates
        for index in np.flatnonzero(known):
            dot_value = int(value[index])
            if dot_value not in bounds:
                bounds[dot_value] = _logit_candidates(dot_value, divisor, reciprocal)
            found = bounds[dot_value]
            if found is not None:
                where = (b[index], i[index], j[index])
                out.lo[where], out.hi[where] = found
    return out


def _logit_candidates(dot: int, divisor: Fraction, reciprocal: int) -> tuple[int, int] | None:
    """fl(dot / divisor) and fl(dot · fl(1/divisor)) for an exact dot product (over 2^(2·SCALE)): the tightest
    integers over 2^SCALE around both, or None when one of them is subnormal or overflows."""
    divided = round32_quotient(dot * divisor.denominator, divisor.numerator, 2 * SCALE)
    multiplied = round32(dot * reciprocal, 3 * SCALE)
    if divided is None or multiplied is None:
        return None
    low, high = min(divided << SCALE, multiplied), max(divided << SCALE, multiplied)  # over 2^(3·SCALE)
    return low >> (2 * SCALE), -((-high) >> (2 * SCALE))  # floor, ceil


def _weights(logits: Box, allowed: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, HeadLeak]:
    """Bounds (over 2^P) on the exact softmax weights of the float logits, and the head's leak statistics."""
    lo = np.where(allowed, logits.lo, logits.lo.min() if logits.lo.size else 0)
    hi = np.where(allowed, logits.hi, logits.lo.min() if logits.lo.size else 0)
    top = np.where(allowed, logits.hi, -(1 << 200)).max(axis=-1, keepdims=True)  # (B, i, 1)
    shift = SCALE - GRID
    t_lo = np.where(allowed, _shift_floor(lo - top, shift), EXP_FLOOR << GRID)
    t_hi = np.where(allowed, _shift_ceil(hi - top, shift), EXP_FLOOR << GRID)
    e_lo, e_hi = _exp_box(np.maximum(t_lo, (EXP_FLOOR - 1) << GRID), np.maximum(t_hi, (EXP_FLOOR - 1) << GRID))
    e_lo, e_hi = np.where(allowed, e_lo, 0), np.where(allowed, e_hi, 0)
    s_lo, s_hi = e_lo.sum(axis=-1, keepdims=True), e_hi.sum(axis=-1, keepdims=True)
    den_lo = s_hi - e_hi + e_lo
    den_hi = s_lo - e_lo + e_hi
    w_lo = np.where(den_lo > 0, (e_lo << P) // np.where(den_lo > 0, den_lo, 1), 0)
    w_hi = np.minimum(np.where(den_hi > 0, -((-(e_hi << P)) // np.where(den_hi > 0, den_hi, 1)), 1 << P), 1 << P)
    # leak: weight outside the keys that may hold the maximum (their upper logit reaches the best lower one)
    best_low = np.where(allowed, logits.lo, -(1 << 200)).max(axis=-1, keepdims=True)
    maybe_top = allowed & (logits.hi >= best_low)
    outside = allowed & ~maybe_top
    leak = np.where(outside, w_hi, 0).sum(axis=-1).max(axis=-1)
    rest = np.where(outside, logits.hi, -(1 << 200)).max(axis=-1)
    gap = np.where(outside.any(axis=-1), best_low[..., 0] - rest, 1 << 200).min(axis=-1)
    gap = np.where(gap == (1 << 200), -1, gap)
    return w_lo, w_hi, HeadLeak(leak, gap, n)

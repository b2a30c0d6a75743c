"""Sound bounds on what a float model computes: every float32 evaluation, in exact integer interval arithmetic.

``enclose(network, ids)`` returns, for each input row, an interval [lo, hi] around every coordinate of the final
residual stream that contains the value of **every** evaluation of the ``FloatNetwork`` in IEEE float32 with
round-to-nearest (any summation order, with or without fused multiply-adds, flushing subnormals or not), and
with any ``exp`` whose relative error is at most ``EXP_ERROR``. In particular it contains both haiku's (JAX)
and this package's numpy evaluation. Nothing here is computed in floating point: numbers are Python integers
over 2^SCALE (2^P for attention weights), every rounding is outward, and ``exp`` is bracketed by exact rationals
(``semantics.exp_table.exp_bracket``, Python's correctly rounded decimal ``exp``).

The error model, operation by operation (u = 2^-24, the unit roundoff of float32; γ_m = m·u / (1 − m·u); each
rounding may also add an absolute 2^-126, covering underflow, which the one-unit outward rounding at 2^-64
absorbs):

* a sum or dot product of m non-zero terms, in any order: |fl(Σ t_i) − Σ t_i| ≤ γ_m Σ |t_i| (Higham, Accuracy
  and Stability of Numerical Algorithms, Thm. 3.4; a term with a zero weight is an exact zero);
* a single addition, subtraction or division: relative error ≤ u (the residual additions, ``+ b`` of each
  ``Linear``, the division of logits by float32(sqrt(key_size)), the division of softmax by its sum);
* softmax: the weights ``ŵ_j = fl(e_j / fl(Σ e_k))`` with ``e_j = exp(fl(l_j − max l))`` satisfy
  ``ŵ_j = w_j (1 + θ_j)`` with |θ_j| ≤ ρ, where w is the exact softmax of the float logits, ρ from the exp error,
  the subtraction error (relative u on a difference of at most D, so a factor e^{D·u}), γ_n of the sum and u
  of the division (``_softmax_factor``);
* the exact softmax of logits known to lie in intervals lies in the box
  w_j ∈ [e^{lo_j} / (e^{lo_j} + Σ_{k≠j} e^{hi_k}), e^{hi_j} / (e^{hi_j} + Σ_{k≠j} e^{lo_k})] and on the simplex;
  the head's output Σ_j w_j v_j is bounded by the exact fractional knapsack over that box ∩ simplex (so equal
  values on the argmax set and its leak cost nothing), plus the float deviations of the weights and the
  rounding of the weighted sum.

Per head, the statistics of the leak are kept: the largest total weight any query can put outside the keys
that may hold the top logit (``leak``) and the smallest logit gap between those keys and the rest (``gap``,
after the 1/sqrt(key_size) scale), so a report states the leak n·e^(−gap) head by head.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache

import numpy as np

from ..semantics.exp_table import exp_bracket
from .network import FloatAttention, FloatNetwork

SCALE = 64  # values are integers over 2^SCALE
P = 64  # attention weights are integers over 2^P
GRID = 26  # logit differences are rounded outward to multiples of 2^-GRID before exp is bracketed
UNIT = Fraction(1, 1 << 24)  # float32 unit roundoff (round to nearest)
EXP_ERROR = Fraction(1, 1 << 20)  # assumed relative error of a float32 exp: 16 ulps (XLA and numpy: ~1 ulp)
EXP_FLOOR = -45  # e^-45 < 2^-64: below it, e^x is bracketed by [0, 2^-64]

OBJ = object


@lru_cache(maxsize=1024)
def gamma(m: int) -> Fraction:
    """γ_m = m·u / (1 − m·u): the relative error bound of an m-term float32 sum (any order)."""
    return Fraction(m) * UNIT / (1 - m * UNIT) if m else Fraction(0)


def _error_shift(factor: Fraction) -> int:
    """The largest k with 2^-k ≥ factor (factor > 0): errors are bounded by one shift."""
    k = 0
    while Fraction(1, 1 << (k + 1)) >= factor:
        k += 1
    return k


def _ceil_times(values: np.ndarray, factor: Fraction) -> np.ndarray:
    """An integer upper bound of values · factor (values ≥ 0): values · 2^-k + 1 with 2^-k ≥ factor (one shift)."""
    if factor == 0:
        return np.zeros_like(values)
    return (values >> _error_shift(factor)) + 1


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
    """fl(a + b): a residual addition."""
    return Box(a.lo + b.lo, a.hi + b.hi).rounded()


def relu(a: Box) -> Box:
    return Box(np.maximum(a.lo, 0), np.maximum(a.hi, 0))


@dataclass(frozen=True)
class _Linear:
    """A float32 ``x @ W + b`` prepared for interval evaluation: per used output column its non-zero rows."""

    inputs: np.ndarray  # the rows of W with a non-zero weight (the only input coordinates read)
    columns: tuple[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int], ...]
    bits: int
    bias_lo: np.ndarray
    bias_hi: np.ndarray
    bias_zero: np.ndarray  # (out,) bool
    width: int

    @staticmethod
    def of(w: np.ndarray, b: np.ndarray) -> _Linear:
        ints, bits = _ints(w)
        inputs = np.flatnonzero((w != 0).any(axis=1))
        position = {int(r): i for i, r in enumerate(inputs)}
        columns = []
        for column in range(w.shape[1]):
            rows = np.flatnonzero(w[:, column] != 0)
            if len(rows):
                weights = ints[rows, column]
                local = np.array([position[int(r)] for r in rows], dtype=np.int64)
                positive, negative = weights > 0, weights < 0
                columns.append(
                    (
                        column,
                        local,
                        local[positive],
                        local[negative],
                        weights[positive],
                        weights[negative],
                        _error_shift(gamma(len(rows))),
                    )
                )
        bias_lo, bias_hi = _at_scale(b)
        return _Linear(inputs, tuple(columns), bits, bias_lo, bias_hi, np.asarray(b) == 0, int(w.shape[1]))

    def __call__(self, x: Box) -> Box:
        shape = x.lo.shape[:-1] + (self.width,)
        lo = np.zeros(shape, dtype=OBJ)
        hi = np.zeros(shape, dtype=OBJ)
        if len(self.inputs):
            x_lo, x_hi = x.lo[..., self.inputs], x.hi[..., self.inputs]
            size = np.maximum(-x_lo, x_hi)
            for column, _rows, up, down, wp, wn, shift in self.columns:
                low = (x_lo[..., up] * wp).sum(axis=-1) + (x_hi[..., down] * wn).sum(axis=-1)
                high = (x_hi[..., up] * wp).sum(axis=-1) + (x_lo[..., down] * wn).sum(axis=-1)
                magnitude = (size[..., up] * wp).sum(axis=-1) - (size[..., down] * wn).sum(axis=-1)
                error = (magnitude >> shift) + 1
                lo[..., column] = _shift_floor(low - error, self.bits) - 1  # one unit: underflow of m terms
                hi[..., column] = _shift_ceil(high + error, self.bits) + 1
        out = Box(lo + self.bias_lo, hi + self.bias_hi)
        if self.bias_zero.all():
            return out  # dot + 0 is the dot, exactly
        rounded = out.rounded()
        keep = np.broadcast_to(self.bias_zero, shape)
        return Box(np.where(keep, out.lo, rounded.lo), np.where(keep, out.hi, rounded.hi))


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


def _softmax_factor(spread: Fraction, keys: int) -> Fraction:
    """ρ with ŵ_j = w_j(1 + θ_j), |θ_j| ≤ ρ, for logits whose differences to the maximum are at most ``spread``."""
    du = spread * UNIT
    if du > 1:
        raise ArithmeticError("logits too far apart for the softmax error bound")
    beta = (1 + EXP_ERROR) * (1 + du + du * du) - 1  # exp error and e^{D·u} ≤ 1 + Du + (Du)^2 for Du ≤ 1
    g = gamma(keys)
    upper = (1 + beta) * (1 + UNIT) / ((1 - beta) * (1 - g)) - 1
    lower = 1 - (1 - beta) * (1 - UNIT) / ((1 + beta) * (1 + g))
    return max(upper, lower)


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
    cached = _PREPARED.get(id(network))
    if cached is None or cached.network is not network:
        if len(_PREPARED) > 8:
            _PREPARED.clear()
        cached = _PREPARED[id(network)] = Prepared(network)
    return cached


_PREPARED: dict[int, Prepared] = {}


def enclose(prepared: Prepared, ids: np.ndarray) -> Enclosure:
    """Intervals around the final residual stream of every float32 evaluation of the network on rows ``ids``."""
    n = ids.shape[1]
    positions = np.arange(n)
    x = Box(
        prepared.token_lo[ids] + prepared.pos_lo[positions], prepared.token_hi[ids] + prepared.pos_hi[positions]
    ).rounded()
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
        elif not output.bias_zero.all():
            x = add(
                x, output(Box(np.zeros(x.lo.shape[:-1] + (0,), dtype=OBJ), np.zeros(x.lo.shape[:-1] + (0,), dtype=OBJ)))
            )
        x = add(x, w2(relu(w1(x))))
    result.output = x
    return result


def _head(
    attention: FloatAttention, query: _Linear, key: _Linear, value: _Linear, used: int, x: Box
) -> tuple[Box, HeadLeak]:
    batch, n = x.lo.shape[:2]
    allowed = np.tril(np.ones((n, n), dtype=bool)) if attention.causal else np.ones((n, n), dtype=bool)
    logits = _logits(attention, query(x), key(x), used)
    weights_lo, weights_hi, leak = _weights(logits, allowed, n)
    v = value(x)  # (B, n, V)
    if v.lo.shape[-1] == 0:
        return Box(np.zeros((batch, n, 0), dtype=OBJ), np.zeros((batch, n, 0), dtype=OBJ)), leak
    spread = Fraction(int(logits.hi.max() - logits.lo.min()), 1 << SCALE) if n > 1 else Fraction(0)
    rho = _softmax_factor(max(spread, Fraction(0)), n)
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
    return Box(
        (dot.lo * divisor.denominator) // divisor.numerator,
        -((-dot.hi * divisor.denominator) // divisor.numerator),
    ).rounded()


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

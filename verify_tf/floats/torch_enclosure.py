"""Sound bounds on a trained torch model's readout: every float32 evaluation torch's CPU kernels may perform.

``enclose_readout(prepared, ids)`` returns, per input row and position, an interval [lo, hi] (integers over
2^SCALE) around the readout ``u·z + b`` of every evaluation of a ``TorchNetwork`` that the error model of
docs/semantics.md §7 ("Float as trained") allows. The rules are ``floats.enclosure``'s (its functions are reused:
``_Linear`` for every ``Linear`` with its bias as one more term of a sum in any order, ``_head`` for a head's
logits, softmax and weighted values, ``mlp`` for the ReLU feed-forward, ``add`` for the residual and the
embedding's position add), with two torch-specific parts:

* ``exp`` inside ``torch.softmax``: torch's vectorised CPU kernels use Sleef's ``expf`` (1 ulp) or its own
  ``exp_u20`` ("ULP=20" in ATen/cpu/vec/vec256/vec256_float.h: a degree-5 polynomial, relative error at most
  20·2^-23 ≈ 2.4e-6; an emulation over 4·10^7 arguments measured 4.6e-7); the scalar tails use ``std::exp``. The
  assumed relative error is ``TORCH_EXP_ERROR`` = 2^-18 ≈ 3.8e-6, above all three. ``-inf`` (the causal mask) gives
  exactly 0, and so does every argument below ln(FLT_MIN) in ``exp_u20``: inside ``[0, 2^-64]`` as ``_weights``
  assumes below −45. The division by the sum is a division or a product with the rounded reciprocal (torch's
  kernel computes ``1 / sum`` and multiplies): both are in ``_softmax_factor``.
* **LayerNorm** (``layer_norm``): torch's CPU kernel (ATen/native/cpu/moments_utils.h, ``RowwiseMoments``) computes
  the mean and M2 = Σ(x − μ)² of a row of N values by Welford updates per vector lane (``m1 += c·δ``,
  ``m2 += δ·(x − m1)``, fused or not) and Chan's combination of partial moments (``m1 += c·δ``,
  ``m2 += m2_b + δ²·c·n_a``, with c = n_b / n rounded), then var = m2 / N, rstd = 1 / sqrt(var + eps), and
  y = (x − μ)·rstd·γ + β (or x·rstd + (−μ·rstd), then ·γ + β). For **any** tree of such steps (each element
  passes through at most N − 1 of them), with M = max |x_i| and D = max x_i − min x_i over the row's box:

  - each step merges groups A (n_a values) and B (n_b), c = n_b/n (or its rounded value): δ = m_b − m_a, m = m_a +
    c·δ. Its computed mean has a local error λ ≤ 3.01·u·c·|δ| + 1.01·u·|m| (δ, the product, the sum, c's own
    rounding), and the exact update is a convex combination, so the error of a group of n values is
    e = Σ_nodes (n_node/n)·λ_node ≤ u·(3.01·D'·(n − 1)/2 + 1.01·M'·(n + 1)/2) = E(n) (Σ_nodes n_b ≤ n(n − 1)/2 and
    Σ_nodes n_node ≤ n(n + 1)/2 over any binary tree; M' = M + E, D' = D + 2E, solved for E); E_μ = E(N). The
    first update of an empty accumulator (c = 1) is exact;
  - M2: Chan's identity S = S_a + S_b + (μ_b − μ_a)²·n_a·n_b/n makes the exact M2 the sum over merges of w·δ*²
    (w = n_a·n_b/n ≤ min(n_a, n_b), δ* the exact means' difference). The computed increment is (δ* + Δe)²·w with
    Δe = e_b − e_a (|Δe| ≤ 2·E(N)), times (1 + θ) for its own roundings (|θ| ≤ 6.05u: Chan's δ²·c·n_a, or Welford's
    δ·(x − m_new), which adds an absolute ζ ≤ 1.01·u·M'·|δ|); every partial sum of these positive terms meets at most
    2(N − 1) more roundings. With Cauchy–Schwarz, Σ|δ*|·|Δe|·w ≤ √(S·Q), Q = Σ Δe²·w ≤ 4E(N)²·(N/2)·⌈log2 N⌉ (each
    value is on the smaller side of at most ⌈log2 N⌉ merges), so |M̂2 − M2| ≤ E_2 = (1 + ε_r)(2√(S·Q) + Q + Z) + ε_r·S
    with Z = 1.01·u·M'·(N − 1)·D', ε_r = (1 + u)^(2(N − 1))·(1 + 8.06u) − 1 and S the box's largest exact M2;
  - var: |v̂ − v| ≤ E_2·(1 + u)/N + u·v; rstd: relative error ≤ 4u (eps added in float32 or double, sqrt,
    division); the exact variance of the box is bounded by intervals (dependency ignored: wider, still sound);
  - the normalised value z: |ẑ − (x − μ̂)·r̂| ≤ 3·u·r̂·(|x| + |μ̂|) (covers both forms above); then ·γ and + β one
    rounding each.

  A variance bound that reaches 0 (var + eps may then be 0: rstd unbounded) gives the whole row ±2^100, so no
  decision is drawn from it.

Nothing here is computed in floating point; every bound is rounded outward.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import partial

import numpy as np

from .enclosure import (
    OBJ,
    SCALE,
    UNIT,
    Box,
    _at_scale,
    _ceil_times,
    _head,
    _Linear,
    _shift_ceil,
    _shift_floor,
    add,
    mlp,
    prepared_once,
)
from .network import FloatAttention
from .torch_network import FloatNorm, TorchNetwork

TORCH_EXP_ERROR = Fraction(1, 1 << 18)  # relative error of torch's float32 exp in softmax (module docstring)
TORCH_EXP_SHIFT = TORCH_EXP_ERROR / (1 - TORCH_EXP_ERROR)  # as a logit shift (enclosure.EXP_SHIFT's rule)
RSQRT_ERROR = 4 * UNIT  # rstd = 1 / sqrt(var + eps): three roundings, relative
UNBOUNDED = 1 << (100 + SCALE)  # ±2^100: a LayerNorm whose variance bound reaches 0 (module docstring)
LARGEST_NORM_WIDTH = 2000  # E_μ's slack (M' ≤ 1.001·M) holds up to this N


@dataclass(frozen=True)
class _Norm:
    weight_lo: np.ndarray
    weight_hi: np.ndarray
    bias_lo: np.ndarray
    bias_hi: np.ndarray
    eps_lo: int  # over 2^(2·SCALE): float32(eps) and eps itself, the smaller and the larger
    eps_hi: int

    @staticmethod
    def of(norm: FloatNorm) -> _Norm:
        candidates = [Fraction(norm.eps), Fraction(float(np.float32(norm.eps)))]
        scale = 1 << (2 * SCALE)
        low, high = min(candidates) * scale, max(candidates) * scale
        weight_lo, weight_hi = _at_scale(norm.weight)
        bias_lo, bias_hi = _at_scale(norm.bias)
        return _Norm(
            weight_lo,
            weight_hi,
            bias_lo,
            bias_hi,
            low.numerator // low.denominator,
            -(-high.numerator // high.denominator),
        )


class PreparedTorch:
    """A ``TorchNetwork`` with its weights as exact integers (build once per network: ``prepare_torch``)."""

    def __init__(self, network: TorchNetwork):
        self.network = network
        self.token_lo, self.token_hi = _at_scale(network.token_embed)
        self.pos = None if network.pos_embed is None else _at_scale(network.pos_embed)
        self.blocks = []
        for block in network.blocks:
            attention = block.attention
            # an exact logit is computed as one of two candidates (``enclosure._logit_candidates``: the division by
            # float32(sqrt(d_h)), or the product with its float32 reciprocal); torch may also take the reciprocal of
            # the double sqrt. They all agree when 1/sqrt(d_h) is a power of two (d_h a power of 4); otherwise the
            # queries are never taken as exact, so the logits keep the interval rule, which covers every variant
            exact_scale = _power_of_four(int(attention.key_size))
            heads = [
                (
                    replace(_Linear.of(head.query, head.query_bias), determinable=False)
                    if not exact_scale
                    else _Linear.of(head.query, head.query_bias),
                    _Linear.of(head.key, head.key_bias),
                    _Linear.of(head.value, head.value_bias),
                    int(head.query.shape[1]),
                )
                for head in attention.heads
            ]
            output = _Linear.of(np.concatenate([h.output for h in attention.heads], axis=0), attention.output_bias)
            ff = block.feed_forward
            self.blocks.append(
                (
                    attention,
                    heads,
                    output,
                    None if ff is None else (_Linear.of(ff.w1, ff.b1), _Linear.of(ff.w2, ff.b2)),
                    None if block.attention_norm is None else _Norm.of(block.attention_norm),
                    None if block.feed_forward_norm is None else _Norm.of(block.feed_forward_norm),
                )
            )
        self.readout = _Linear.of(network.readout[:, None], np.array([network.readout_bias], dtype=np.float32))


def _power_of_four(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0 and (value.bit_length() - 1) % 2 == 0


def prepare_torch(network: TorchNetwork) -> PreparedTorch:
    """``PreparedTorch(network)``, built once per network object (a handful are kept)."""
    return prepared_once(_PREPARED, network, PreparedTorch)


_PREPARED: dict[int, PreparedTorch] = {}


def enclose_readout(prepared: PreparedTorch, ids: np.ndarray) -> Box:
    """Intervals (B, n) around the readout ``u·z + b`` of every float32 evaluation on embedding rows ``ids``."""
    network = prepared.network
    n = ids.shape[1]
    if network.max_positions is not None and n > network.max_positions:
        raise ValueError(f"input of {n} positions exceeds the model's {network.max_positions}")
    x = Box(prepared.token_lo[ids], prepared.token_hi[ids])
    if prepared.pos is not None:
        lo, hi = prepared.pos
        width = lo.shape[1]
        x = add(x, Box(np.broadcast_to(lo[:n], ids.shape + (width,)), np.broadcast_to(hi[:n], ids.shape + (width,))))
    for attention, heads, output, feed_forward, attention_norm, feed_forward_norm in prepared.blocks:
        x = _sublayer(x, partial(_attention, attention, heads, output), attention_norm, network.norm_first)
        if feed_forward is not None:
            x = _sublayer(x, partial(mlp, *feed_forward), feed_forward_norm, network.norm_first)
    out = prepared.readout(x)
    return Box(out.lo[..., 0], out.hi[..., 0])


def _sublayer(x: Box, f: Callable[[Box], Box], norm: _Norm | None, norm_first: bool) -> Box:
    """x + f(x), x + f(LN(x)) (pre-LN) or LN(x + f(x)) (post-LN)."""
    if norm is None:
        return add(x, f(x))
    if norm_first:
        return add(x, f(layer_norm(x, norm)))
    return layer_norm(add(x, f(x)), norm)


def _attention(attention: FloatAttention, heads: list, output: _Linear, x: Box) -> Box:
    mixed = [_head(attention, q, k, v, used, x, TORCH_EXP_SHIFT)[0] for q, k, v, used in heads]
    joined = Box(np.concatenate([m.lo for m in mixed], axis=-1), np.concatenate([m.hi for m in mixed], axis=-1))
    return output(joined)


def _isqrt(values: np.ndarray) -> np.ndarray:
    return np.asarray(np.frompyfunc(math.isqrt, 1, 1)(values), dtype=OBJ)


def _mean_error(spread: np.ndarray, magnitude: np.ndarray, size: int) -> np.ndarray:
    """E_μ = E(N) of the module docstring, over 2^SCALE: u·(a·D' + b·M') with D' = D + 2E, M' = M + E, solved for E."""
    a, b = Fraction(301 * (size - 1), 200), Fraction(101 * (size + 1), 200)
    scale = 1 - UNIT * (2 * a + b)
    return _ceil_times(spread, UNIT * a / scale) + _ceil_times(magnitude, UNIT * b / scale) + 1


def _m2_error(spread: np.ndarray, magnitude: np.ndarray, e_mean: np.ndarray, m2: np.ndarray, size: int) -> np.ndarray:
    """E_2 of the module docstring, over 2^(2·SCALE): (1 + ε_r)(2√(S·Q) + Q + Z) + ε_r·S (S = ``m2``, the box's
    largest exact M2)."""
    wide, big = spread + 2 * e_mean, magnitude + e_mean  # D', M' over 2^SCALE
    levels = max(1, (size - 1).bit_length())  # ⌈log2 N⌉
    q = 4 * e_mean * e_mean * size * levels // 2 + 1  # Q, over 2^(2·SCALE)
    z = _ceil_times(big * wide, Fraction(101, 100) * UNIT * (size - 1))
    root = np.asarray(np.frompyfunc(math.isqrt, 1, 1)(m2 * q), dtype=OBJ) + 1  # ⌈√(S·Q)⌉
    rounding = (1 + UNIT) ** (2 * (size - 1)) * (1 + Fraction(806, 100) * UNIT) - 1  # ε_r
    return _ceil_times(2 * root + q + z, 1 + rounding) + _ceil_times(m2, rounding) + 1


def layer_norm(x: Box, norm: _Norm) -> Box:
    """torch.nn.LayerNorm over the last axis of x, for every evaluation of torch's CPU kernel (module docstring)."""
    lo, hi = x.lo, x.hi  # over 2^SCALE
    size = lo.shape[-1]
    if size > LARGEST_NORM_WIDTH:
        raise ValueError(f"LayerNorm over {size} > {LARGEST_NORM_WIDTH} values: the stated error bound does not apply")
    s2 = 2 * SCALE
    mean_lo = lo.sum(axis=-1, keepdims=True) // size
    mean_hi = -((-hi.sum(axis=-1, keepdims=True)) // size)
    magnitude = x.magnitude().max(axis=-1, keepdims=True)
    spread = hi.max(axis=-1, keepdims=True) - lo.min(axis=-1, keepdims=True)
    e_mean = _mean_error(spread, magnitude, size)  # E_μ, over 2^SCALE
    # the exact variance over the box: each deviation x_i − μ in an interval, squared, averaged (over 2^(2·SCALE))
    below, above = lo - mean_hi, hi - mean_lo
    square_hi = np.maximum(below * below, above * above)
    square_lo = np.where(below > 0, below * below, np.where(above < 0, above * above, 0))
    var_lo = square_lo.sum(axis=-1, keepdims=True) // size
    var_hi = -((-square_hi.sum(axis=-1, keepdims=True)) // size)
    e_m2 = _m2_error(spread, magnitude, e_mean, square_hi.sum(axis=-1, keepdims=True), size)  # E_2, over 2^(2·SCALE)
    e_var = _ceil_times(e_m2, (1 + UNIT) / size) + _ceil_times(var_hi, UNIT) + 1
    s_lo = var_lo - e_var + norm.eps_lo
    s_hi = var_hi + e_var + norm.eps_hi
    bounded = s_lo > 0
    s_lo = np.where(bounded, s_lo, 1)
    # rstd = 1/sqrt(s / 2^(2·SCALE)), over 2^SCALE: 2^(2·SCALE) / sqrt(s), outward with integer square roots
    r_hi = -((-(1 << s2)) // _isqrt(s_lo))
    r_lo = (1 << s2) // (_isqrt(s_hi) + 1)
    r_hi = r_hi + _ceil_times(r_hi, RSQRT_ERROR)
    r_lo = r_lo - _ceil_times(r_lo, RSQRT_ERROR) - 1
    # x − μ̂ (μ̂ within E_μ of the exact mean), times rstd: over 2^(2·SCALE)
    centred_lo, centred_hi = lo - (mean_hi + e_mean), hi - (mean_lo - e_mean)
    z_lo = np.minimum(centred_lo * r_lo, centred_lo * r_hi)
    z_hi = np.maximum(centred_hi * r_hi, centred_hi * r_lo)
    mean_size = np.maximum(abs(mean_lo - e_mean), abs(mean_hi + e_mean))
    error = _ceil_times(r_hi * (x.magnitude() + mean_size), 3 * UNIT)
    z = Box(_shift_floor(z_lo - error, SCALE) - 1, _shift_ceil(z_hi + error, SCALE) + 1)
    # · γ (an interval product), rounded; + β, rounded
    products = [z.lo * norm.weight_lo, z.lo * norm.weight_hi, z.hi * norm.weight_lo, z.hi * norm.weight_hi]
    scaled = Box(
        _shift_floor(np.minimum.reduce(products), SCALE) - 1, _shift_ceil(np.maximum.reduce(products), SCALE) + 1
    ).rounded()
    out = Box(scaled.lo + norm.bias_lo, scaled.hi + norm.bias_hi).rounded()
    if not bounded.all():
        out = Box(np.where(bounded, out.lo, -UNBOUNDED), np.where(bounded, out.hi, UNBOUNDED))
    return out

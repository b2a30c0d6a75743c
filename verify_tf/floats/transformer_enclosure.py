"""Sound bounds on a checkpoint's readout (``FloatTransformer``): every float32 evaluation its library may perform.

``enclose_readout(prepared, ids)`` returns, per input row and position, an interval [lo, hi] (integers over 2^SCALE)
around the readout (``floats.transformer.Readout``) of every evaluation that the error model of docs/semantics.md §7
("Float as run") allows. The rules are ``floats.enclosure``'s and ``floats.torch_enclosure``'s, reused: ``_Linear``
for every projection (its bias one more term of a sum in any order), ``add`` for each residual and embedding
addition, ``mix`` for softmax and the weighted values (torch's exp within 2^-18, the division or the product with
the rounded reciprocal; the SDPA kernels' unnormalised weighted sum divided at the end has the same bound, as the
module docstring of ``floats.enclosure`` derives), ``mlp`` for a ReLU MLP, ``torch_enclosure.layer_norm`` for
LayerNorm (torch's CPU kernel). New here:

* **the logit** ``scale·(q·k)``: eager attention multiplies the float32 dot product by float32(head_dim^-0.5); SDPA's
  flash kernel does the same, its math path scales q and k by float32(√scale) first. Each term q_i·k_i of the exact
  dot product meets at most five roundings (two scalings, the scale's own float32 rounding twice, the product) before
  a sum in any order, so |l̂ − s·q·k| ≤ γ_(m+5)·s·Σ|q_i k_i| with s = scale/√head_dim exactly (bracketed by integer
  square roots);
* **RoPE** (``rope_tables``): Llama's inverse frequencies are ``1 / base^(2j/d_h)`` in float32: the exponent one
  correctly rounded division, ``pow`` within 4 ulps of base^e (every candidate float32 kept), the reciprocal and the
  angle ``p·inv_j`` one rounding each (deterministic), cos and sin within 2^-23 of the exact cosine of that float32
  angle (at least two ulps). Position 0 rotates by exactly 0. Then q·cos + rotate_half(q)·sin: two products and a
  sum, one rounding each;
* **RMSNorm** (``rms_norm``): squares (one rounding each), their mean (a sum in any order, γ_d, then a division),
  ``+ eps``, ``rsqrt`` (relative 4u: ``torch.rsqrt`` is 1/√ with two roundings), x times it, then times the weight;
* **activations**: ``floats.activations`` (GELU erf and tanh forms, SiLU); SwiGLU's product one rounding;
* **the readout**: one LM-head row (a sum of d products and the bias, any order), or the exact difference of two,
  or a coordinate of the final stream.

Intervals lose the correlation between coordinates, so the bound grows with depth and width; a property whose
margins are smaller than the enclosure's width ends ``unknown``, never with a guessed verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import partial

import numpy as np

from ..semantics.rotary import cos_sin_enclosure, power_enclosure
from .activations import activation
from .enclosure import (
    OBJ,
    SCALE,
    UNIT,
    Box,
    _at_scale,
    _ceil_times,
    _Linear,
    _shift_ceil,
    _shift_floor,
    add,
    gamma,
    mix,
    mlp as relu_mlp,
    prepared_once,
)
from .torch_enclosure import RSQRT_ERROR, TORCH_EXP_SHIFT, _Norm, layer_norm
from .torch_network import FloatNorm
from .transformer import MLP, Attention, FloatTransformer, Norm, Projection, Rope

LOGIT_ROUNDINGS = 5  # the roundings one term of the logit meets before the sum (module docstring)
POW_ULPS = 4  # pow's float32 result is within this many ulps of base^e
TRIG_ERROR = Fraction(1, 1 << 23)  # |ĉos(a) − cos(a)|, |ŝin(a) − sin(a)| for a float32 angle a


def _linear(projection: Projection) -> _Linear:
    return _Linear.of(projection.weight, projection.bias)


def _ints(value: Fraction) -> tuple[int, int]:
    """Integers over 2^SCALE below and above a rational."""
    scaled = value * (1 << SCALE)
    return math.floor(scaled), math.ceil(scaled)


def logit_scale(attention: Attention) -> tuple[Fraction, Fraction]:
    """Rationals around s = scale / √head_dim (integer square roots at 2^64)."""
    root = math.isqrt(attention.head_dim << 128)  # √d·2^64, floored
    if root * root == attention.head_dim << 128:
        exact = attention.scale * Fraction(1 << 64, root)
        return exact, exact
    return attention.scale * Fraction(1 << 64, root + 1), attention.scale * Fraction(1 << 64, root)


def _float32_steps(value: np.float32, steps: int) -> list[np.float32]:
    out = [value]
    up = down = value
    for _ in range(steps):
        up, down = np.nextafter(up, np.float32(np.inf)), np.nextafter(down, np.float32(-np.inf))
        out += [up, down]
    return out


def rope_tables(rope: Rope, positions: int) -> tuple[np.ndarray, ...]:
    """(cos lo, cos hi, sin lo, sin hi), each (positions, d_h/2), integers over 2^SCALE (module docstring)."""
    half = rope.dims // 2
    base = rope.base
    tables = [np.zeros((positions, half), dtype=OBJ) for _ in range(4)]
    for j in range(half):
        exponent = np.float32(2 * j) / np.float32(rope.dims)
        low, high = power_enclosure(base, Fraction(float(exponent)), 80)
        candidates = _float32_steps(np.float32(float(low)), POW_ULPS + 1) + _float32_steps(
            np.float32(float(high)), POW_ULPS + 1
        )
        inverse = sorted({np.float32(1.0) / y for y in candidates if y > 0})
        for p in range(positions):
            values: tuple[Fraction, ...]
            if p == 0:
                values = (Fraction(1), Fraction(1), Fraction(0), Fraction(0))
            else:
                angles = [Fraction(float(np.float32(p) * i)) for i in (inverse[0], inverse[-1])]
                (c_lo, c_hi), (s_lo, s_hi) = cos_sin_enclosure((min(angles), max(angles)), 80)
                values = (c_lo - TRIG_ERROR, c_hi + TRIG_ERROR, s_lo - TRIG_ERROR, s_hi + TRIG_ERROR)
            for table, value, upward in zip(tables, values, (False, True, False, True)):
                scaled = Fraction(value) * (1 << SCALE)
                table[p, j] = math.ceil(scaled) if upward else math.floor(scaled)
    return tuple(tables)


def multiply(a: Box, b: Box) -> Box:
    """fl(a·b) elementwise: the exact interval product, then one rounding."""
    products = [a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi]
    return Box(
        _shift_floor(np.minimum.reduce(products), SCALE) - 1, _shift_ceil(np.maximum.reduce(products), SCALE) + 1
    ).rounded()


def _stack(boxes: list[Box]) -> Box:
    return Box(np.concatenate([b.lo for b in boxes], axis=-1), np.concatenate([b.hi for b in boxes], axis=-1))


def _take(box: Box, index: slice) -> Box:
    return Box(box.lo[..., index], box.hi[..., index])


@dataclass
class _PreparedNorm:
    kind: str
    layer: _Norm | None
    weight: Box | None  # RMSNorm's weight, over 2^SCALE (exact)
    eps: tuple[int, int]  # RMSNorm: float32(eps) and eps, over 2^(2·SCALE)

    @staticmethod
    def of(norm: Norm) -> _PreparedNorm:
        if norm.kind == "layer":
            return _PreparedNorm("layer", _Norm.of(FloatNorm(norm.weight, norm.bias, norm.eps)), None, (0, 0))
        lo, hi = _at_scale(norm.weight)
        candidates = [Fraction(norm.eps), Fraction(float(np.float32(norm.eps)))]
        scale = 1 << (2 * SCALE)
        return _PreparedNorm(
            "rms", None, Box(lo, hi), (math.floor(min(candidates) * scale), math.ceil(max(candidates) * scale))
        )

    def __call__(self, x: Box) -> Box:
        if self.layer is not None:
            return layer_norm(x, self.layer)
        return rms_norm(x, self)


def rms_norm(x: Box, norm: _PreparedNorm) -> Box:
    """Llama's RMSNorm over the last axis, for every float32 evaluation (module docstring)."""
    assert norm.weight is not None
    size = x.lo.shape[-1]
    s2 = 2 * SCALE
    below = np.where(x.lo > 0, x.lo, np.where(x.hi < 0, -x.hi, 0))
    above = x.magnitude()
    squares_lo, squares_hi = below * below, above * above  # exact squares, over 2^(2·SCALE)
    # each square rounded (relative u), the sum in any order (γ_d), the division by d (u), + eps (u)
    total_lo, total_hi = squares_lo.sum(axis=-1, keepdims=True), squares_hi.sum(axis=-1, keepdims=True)
    low_factor = (1 - UNIT) ** 3 * (1 - gamma(size)) / size
    high_factor = (1 + UNIT) ** 3 * (1 + gamma(size)) / size
    mean_lo = total_lo * low_factor.numerator // low_factor.denominator
    mean_hi = -((-total_hi * high_factor.numerator) // high_factor.denominator)
    v_lo = (mean_lo + norm.eps[0]) * ((1 << 24) - 1) // (1 << 24) - 1  # the addition's rounding (u), outward
    v_hi = -((-(mean_hi + norm.eps[1]) * ((1 << 24) + 1)) // (1 << 24)) + 1
    v_lo = np.maximum(v_lo, 1)
    root = np.frompyfunc(math.isqrt, 1, 1)
    r_hi = -((-(1 << s2)) // np.asarray(root(v_lo), dtype=OBJ))  # 1/√v over 2^SCALE, outward
    r_lo = (1 << s2) // (np.asarray(root(v_hi), dtype=OBJ) + 1)
    r = Box(r_lo - _ceil_times(r_lo, RSQRT_ERROR) - 1, r_hi + _ceil_times(r_hi, RSQRT_ERROR) + 1)
    broadcast = Box(np.broadcast_to(r.lo, x.lo.shape), np.broadcast_to(r.hi, x.hi.shape))
    normalised = multiply(x, broadcast)
    weight = Box(np.broadcast_to(norm.weight.lo, x.lo.shape), np.broadcast_to(norm.weight.hi, x.hi.shape))
    return multiply(weight, normalised)


def _rotate(q: Box, tables: tuple[np.ndarray, ...], n: int) -> Box:
    """q·cos + rotate_half(q)·sin over positions 0..n−1 of q (B, n, d_h)."""
    c_lo, c_hi, s_lo, s_hi = (t[:n] for t in tables)
    cos = Box(np.concatenate([c_lo, c_lo], axis=-1)[None], np.concatenate([c_hi, c_hi], axis=-1)[None])
    sin = Box(np.concatenate([s_lo, s_lo], axis=-1)[None], np.concatenate([s_hi, s_hi], axis=-1)[None])
    half = q.lo.shape[-1] // 2
    rotated = Box(
        np.concatenate([-q.hi[..., half:], q.lo[..., :half]], axis=-1),
        np.concatenate([-q.lo[..., half:], q.hi[..., :half]], axis=-1),
    )
    shape = q.lo.shape
    cos = Box(np.broadcast_to(cos.lo, shape), np.broadcast_to(cos.hi, shape))
    sin = Box(np.broadcast_to(sin.lo, shape), np.broadcast_to(sin.hi, shape))
    out = add(multiply(q, cos), multiply(rotated, sin))
    # position 0 rotates by exactly 0: q·1 + rotated·0 is q itself
    out.lo[:, 0], out.hi[:, 0] = q.lo[:, 0], q.hi[:, 0]
    return out


def _logits(q: Box, k: Box, scale: tuple[Fraction, Fraction]) -> Box:
    """scale·(q·k) for every float32 evaluation (module docstring): (B, i, j)."""
    m = q.lo.shape[-1]
    mq, rq = (q.lo + q.hi)[:, :, None, :], (q.hi - q.lo)[:, :, None, :]
    mk, rk = (k.lo + k.hi)[:, None, :, :], (k.hi - k.lo)[:, None, :, :]
    centre = (mq * mk).sum(axis=-1)
    radius = (abs(mq) * rk + rq * abs(mk) + rq * rk).sum(axis=-1)
    low, high = centre - radius, centre + radius  # the exact dot product over the boxes, over 2^(2·SCALE + 2)
    size = (q.magnitude()[:, :, None, :] * k.magnitude()[:, None, :, :]).sum(axis=-1) << 2
    s_lo, s_hi = scale
    error = _ceil_times(size, gamma(m + LOGIT_ROUNDINGS) * s_hi)
    scaled_lo = np.where(low >= 0, low * s_lo.numerator // s_lo.denominator, low * s_hi.numerator // s_hi.denominator)
    scaled_hi = np.where(
        high >= 0,
        -((-high * s_hi.numerator) // s_hi.denominator),
        -((-high * s_lo.numerator) // s_lo.denominator),
    )
    return Box(_shift_floor(scaled_lo - error, SCALE + 2) - 1, _shift_ceil(scaled_hi + error, SCALE + 2) + 1)


class PreparedTransformer:
    """A ``FloatTransformer`` with its weights as exact integers, ready for ``enclose_readout``."""

    def __init__(self, network: FloatTransformer):
        self.network = network
        self.token = _at_scale(network.token_embed)
        self.position = None if network.position_embed is None else _at_scale(network.position_embed)
        self.token_type = None if network.token_type is None else _at_scale(network.token_type)
        self.embed_norm = None if network.embed_norm is None else _PreparedNorm.of(network.embed_norm)
        self.layers = []
        for layer in network.layers:
            attention = layer.attention
            self.layers.append(
                (
                    layer,
                    [_linear(p) for p in attention.query],
                    [_linear(p) for p in attention.key],
                    [_linear(p) for p in attention.value],
                    _linear(attention.output),
                    logit_scale(attention),
                    None if attention.rope is None else rope_tables(attention.rope, network.max_positions),
                    self._mlp(layer.mlp),
                    None if layer.attention_norm is None else _PreparedNorm.of(layer.attention_norm),
                    None if layer.mlp_norm is None else _PreparedNorm.of(layer.mlp_norm),
                )
            )
        self.final_norm = None if network.final_norm is None else _PreparedNorm.of(network.final_norm)
        readout = network.readout
        self.transform = None
        if readout.transform is not None:
            dense, kind, norm = readout.transform
            self.transform = (_linear(dense), kind, _PreparedNorm.of(norm))
        self.heads = [_Linear.of(readout.rows[:, [c]], readout.bias[[c]]) for c in range(readout.rows.shape[1])]

    @staticmethod
    def _mlp(block: MLP) -> tuple:
        return (
            _linear(block.up),
            _linear(block.down),
            block.activation,
            None if block.gate is None else _linear(block.gate),
        )


_PREPARED: dict[int, PreparedTransformer] = {}


def prepare(network: FloatTransformer) -> PreparedTransformer:
    """``PreparedTransformer(network)``, built once per network object (a handful are kept)."""
    return prepared_once(_PREPARED, network, PreparedTransformer)


def _mlp(prepared: tuple, x: Box) -> Box:
    up, down, kind, gate = prepared
    if gate is None and kind == "relu":
        return relu_mlp(up, down, x)
    if gate is None:
        return down(activation(kind, up(x)))
    return down(multiply(activation(kind, gate(x)), up(x)))


def _attention(prepared: tuple, x: Box) -> Box:
    layer, queries, keys, values, output, scale, rope, *_ = prepared
    attention: Attention = layer.attention
    n = x.lo.shape[1]
    allowed = np.tril(np.ones((n, n), dtype=bool)) if attention.causal else np.ones((n, n), dtype=bool)
    grouped_k, grouped_v = [], []
    for key, value in zip(keys, values):
        k = key(x)
        grouped_k.append(k if rope is None else _rotate(k, rope, n))
        grouped_v.append(value(x))
    mixed = []
    for head, query in enumerate(queries):
        q = query(x)
        if rope is not None:
            q = _rotate(q, rope, n)
        group = attention.group(head)
        box, _ = mix(_logits(q, grouped_k[group], scale), grouped_v[group], allowed, TORCH_EXP_SHIFT)
        mixed.append(box)
    return output(_stack(mixed))


def _sublayer(x: Box, f: partial[Box], norm: _PreparedNorm | None, placement: str) -> Box:
    if norm is None:
        return add(x, f(x))
    if placement == "pre":
        return add(x, f(norm(x)))
    return norm(add(x, f(x)))


def enclose_stream(prepared: PreparedTransformer, ids: np.ndarray) -> Box:
    """Intervals (B, n, d) around the final stream (after the final norm) of every float32 evaluation on ``ids``."""
    network = prepared.network
    n = ids.shape[1]
    if n > network.max_positions:
        raise ValueError(f"input of {n} positions exceeds the model's context of {network.max_positions}")
    lo, hi = prepared.token
    x = Box(lo[ids], hi[ids])
    if prepared.token_type is not None:
        t_lo, t_hi = prepared.token_type
        x = add(x, Box(np.broadcast_to(t_lo, x.lo.shape), np.broadcast_to(t_hi, x.hi.shape)))
    if prepared.position is not None:
        p_lo, p_hi = prepared.position
        x = add(x, Box(np.broadcast_to(p_lo[:n], x.lo.shape), np.broadcast_to(p_hi[:n], x.hi.shape)))
    if prepared.embed_norm is not None:
        x = prepared.embed_norm(x)
    for layer in prepared.layers:
        spec = layer[0]
        attention_norm, mlp_norm = layer[8], layer[9]
        x = _sublayer(x, partial(_attention, layer), attention_norm, spec.placement)
        x = _sublayer(x, partial(_mlp, layer[7]), mlp_norm, spec.placement)
    if prepared.final_norm is not None:
        x = prepared.final_norm(x)
    return x


def enclose_readout(prepared: PreparedTransformer, ids: np.ndarray) -> Box:
    """Intervals (B, n) around the readout of every float32 evaluation on token ids ``ids`` (B, n), BOS included."""
    x = enclose_stream(prepared, ids)
    readout = prepared.network.readout
    if readout.kind == "hidden":
        return Box(x.lo[..., readout.coordinate], x.hi[..., readout.coordinate])
    if prepared.transform is not None:
        dense, kind, norm = prepared.transform
        x = norm(activation(kind, dense(x)))
    first = prepared.heads[0](x)
    if readout.kind == "logit":
        return Box(first.lo[..., 0], first.hi[..., 0])
    second = prepared.heads[1](x)
    return Box(first.lo[..., 0] - second.hi[..., 0], first.hi[..., 0] - second.lo[..., 0])

"""verify-tf's float32 mirror of a checkpoint: one float32 evaluation of a ``FloatTransformer`` in numpy.

The replay of a witness when the checkpoint's own library (transformers) is not installed: every operation the
library's forward pass performs (``floats.transformer``), in its order, as a numpy float32 operation (numpy's
summation order and ``exp``/``tanh``/``cos``; GELU's erf in double precision, rounded). It is one of the evaluations
``floats.transformer_enclosure`` encloses, so a witness it reproduces is a float32 evaluation of the model; it never
decides a verdict alone (the enclosure does) and a verdict replayed on it says so ("verify-tf's float32 mirror").
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .transformer import MLP, Attention, FloatTransformer, Norm, Projection

F32 = np.float32
_ERF = np.vectorize(math.erf, otypes=[np.float64])


def _project(p: Projection, x: np.ndarray) -> np.ndarray:
    return (np.matmul(x, p.weight) + p.bias).astype(F32)


def act(kind: str, x: np.ndarray) -> np.ndarray:
    x = x.astype(F32)
    if kind == "relu":
        return np.maximum(x, F32(0))
    if kind == "gelu-erf":
        return (0.5 * x.astype(np.float64) * (1.0 + _ERF(x.astype(np.float64) / math.sqrt(2.0)))).astype(F32)
    if kind == "gelu-tanh":  # transformers' NewGELUActivation, op by op in float32
        inner = F32(math.sqrt(2.0 / math.pi)) * (x + F32(0.044715) * np.power(x, F32(3)))
        return (F32(0.5) * x * (F32(1) + np.tanh(inner))).astype(F32)
    if kind == "silu":
        with np.errstate(over="ignore"):
            return (x / (F32(1) + np.exp(-x))).astype(F32)
    raise ValueError(f"unknown activation {kind!r}")


def norm(spec: Norm, x: np.ndarray) -> np.ndarray:
    eps = F32(spec.eps)
    if spec.kind == "rms":
        variance = np.mean(x * x, axis=-1, keepdims=True, dtype=F32)
        return (spec.weight * (x * (F32(1) / np.sqrt(variance + eps)))).astype(F32)
    mean = np.mean(x, axis=-1, keepdims=True, dtype=F32)
    variance = np.mean((x - mean) ** 2, axis=-1, keepdims=True, dtype=F32)
    return (((x - mean) / np.sqrt(variance + eps)) * spec.weight + spec.bias).astype(F32)


def softmax(logits: np.ndarray) -> np.ndarray:
    top = logits.max(axis=-1, keepdims=True)
    e = np.exp(logits - top)
    return (e * (F32(1) / e.sum(axis=-1, keepdims=True, dtype=F32))).astype(F32)


def rope_cos_sin(dims: int, base: Fraction, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Llama's cos and sin tables (n, dims), computed as its rotary embedding does, in float32."""
    exponents = np.arange(0, dims, 2, dtype=F32) / F32(dims)
    inverse = (F32(1.0) / np.power(F32(float(base)), exponents)).astype(F32)
    angles = (np.arange(n, dtype=F32)[:, None] * inverse[None, :]).astype(F32)
    both = np.concatenate([angles, angles], axis=-1)
    return np.cos(both).astype(F32), np.sin(both).astype(F32)


def _rotate(x: np.ndarray, cos: np.ndarray | None, sin: np.ndarray | None) -> np.ndarray:
    if cos is None or sin is None:
        return x
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return (x * cos + rotated * sin).astype(F32)


def attention(spec: Attention, x: np.ndarray, scale: float) -> np.ndarray:
    n = x.shape[1]
    cos = sin = None
    if spec.rope is not None:
        cos, sin = rope_cos_sin(spec.rope.dims, spec.rope.base, n)
    keys, values = [], []
    for key, value in zip(spec.key, spec.value):
        k = _project(key, x)
        keys.append(_rotate(k, cos, sin))
        values.append(_project(value, x))
    mixed = []
    for head, query in enumerate(spec.query):
        q = _rotate(_project(query, x), cos, sin)
        group = spec.group(head)
        logits = (np.matmul(q, np.swapaxes(keys[group], 1, 2)) * F32(scale)).astype(F32)
        if spec.causal:
            logits = np.where(np.tril(np.ones((n, n), dtype=bool)), logits, F32(-np.inf))
        mixed.append(np.matmul(softmax(logits), values[group]).astype(F32))
    return _project(spec.output, np.concatenate(mixed, axis=-1))


def mlp(spec: MLP, x: np.ndarray) -> np.ndarray:
    if spec.gate is None:
        return _project(spec.down, act(spec.activation, _project(spec.up, x)))
    return _project(spec.down, (act(spec.activation, _project(spec.gate, x)) * _project(spec.up, x)).astype(F32))


def stream(network: FloatTransformer, ids: np.ndarray) -> np.ndarray:
    """The final stream (B, n, d), float32."""
    n = ids.shape[1]
    x = network.token_embed[ids].astype(F32)
    if network.token_type is not None:
        x = (x + network.token_type).astype(F32)
    if network.position_embed is not None:
        x = (x + network.position_embed[:n]).astype(F32)
    if network.embed_norm is not None:
        x = norm(network.embed_norm, x)
    for layer in network.layers:
        scale = float(layer.attention.scale) / math.sqrt(layer.attention.head_dim)
        for f, spec_norm in (
            (lambda z, a=layer.attention, s=scale: attention(a, z, s), layer.attention_norm),
            (lambda z, m=layer.mlp: mlp(m, z), layer.mlp_norm),
        ):
            if spec_norm is None:
                x = (x + f(x)).astype(F32)
            elif layer.placement == "pre":
                x = (x + f(norm(spec_norm, x))).astype(F32)
            else:
                x = norm(spec_norm, (x + f(x)).astype(F32))
    if network.final_norm is not None:
        x = norm(network.final_norm, x)
    return x


def readout(network: FloatTransformer, ids: np.ndarray) -> np.ndarray:
    """The readout (B, n) of one float32 evaluation, as exact rationals (object array): a logit or hidden coordinate
    is a float32; a difference of two float32 logits is taken exactly."""
    x = stream(network, ids)
    spec = network.readout
    if spec.kind == "hidden":
        values = x[..., spec.coordinate]
        return np.vectorize(Fraction, otypes=[object])(values.astype(np.float64))
    if spec.transform is not None:
        dense, kind, transform_norm = spec.transform
        x = norm(transform_norm, act(kind, _project(dense, x)))
    logits = (np.matmul(x, spec.rows) + spec.bias).astype(F32).astype(np.float64)
    exact = np.vectorize(Fraction, otypes=[object])
    if spec.kind == "logit":
        return exact(logits[..., 0])
    return exact(logits[..., 0]) - exact(logits[..., 1])

"""The "float as compiled" reading: a ``FloatNetwork`` evaluated in float32, operation by operation as haiku does.

This is the evaluator that finds and replays float counterexamples (docs/semantics.md, "Readings"). Every
value is a numpy float32 and every operation the one haiku applies, in its order: ``x @ W`` then ``+ b`` for
each ``Linear``; logits ``(q·k) / float32(sqrt(key_size))``; masked logits set to -1e30; ``jax.nn.softmax``
(``exp(x - max)``, divided by the sum); the weighted sum of values; the output ``Linear`` over all heads; the
residual additions; ``ReLU``. The summation order inside a matrix product and the ``exp`` routine are
numpy's, so a value may differ from JAX's in its last bits; a witness is also replayed in JAX with tracr's
own model when tracr is installed (``floats.jax_replay``). The sound bounds of ``floats.enclosure`` cover
every summation order and any ``exp`` within their stated error, so they hold for both.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .network import FloatAttention, FloatMLP, FloatNetwork

MASKED = np.float32(-1e30)  # tracr's jnp.where(mask, logits, -1e30)


@dataclass
class FloatTrace:
    """The residual stream after each sublayer and each head's weights (for explain and tests)."""

    embedded: np.ndarray
    residuals: list[np.ndarray] = field(default_factory=list)  # after attention, after MLP, per layer
    weights: list[list[np.ndarray]] = field(default_factory=list)  # per layer, per head: (B, n, n)
    logits: list[list[np.ndarray]] = field(default_factory=list)

    @property
    def output(self) -> np.ndarray:
        return self.residuals[-1] if self.residuals else self.embedded


def _linear(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.matmul(x, w) + b  # haiku Linear: jnp.dot(inputs, w) then + b, both float32


def softmax(logits: np.ndarray) -> np.ndarray:
    """jax.nn.softmax over the last axis, in float32."""
    top = logits.max(axis=-1, keepdims=True)
    unnormalised = np.exp(logits - top)
    return unnormalised / unnormalised.sum(axis=-1, keepdims=True)


def attention(layer: FloatAttention, x: np.ndarray, trace: FloatTrace | None = None) -> np.ndarray:
    n = x.shape[1]
    mixed, rows, weights, logits_shown = [], [], [], []
    for head in layer.heads:
        q = _linear(x, head.query, head.query_bias)
        k = _linear(x, head.key, head.key_bias)
        v = _linear(x, head.value, head.value_bias)
        logits = np.matmul(q, np.swapaxes(k, 1, 2)) / layer.divisor
        if layer.causal:
            logits = np.where(np.tril(np.ones((n, n), dtype=bool)), logits, MASKED).astype(np.float32)
        w = softmax(logits)
        mixed.append(np.matmul(w, v))
        rows.append(head.output)
        weights.append(w)
        logits_shown.append(logits)
    if trace is not None:
        trace.weights.append(weights)
        trace.logits.append(logits_shown)
    # the output Linear over every head's values at once (haiku reshapes the heads into one vector)
    return _linear(np.concatenate(mixed, axis=-1), np.concatenate(rows, axis=0), layer.output_bias)


def mlp(layer: FloatMLP, x: np.ndarray) -> np.ndarray:
    hidden = np.maximum(_linear(x, layer.w1, layer.b1), np.float32(0))
    return _linear(hidden, layer.w2, layer.b2)


def evaluate(network: FloatNetwork, ids: np.ndarray, *, keep_trace: bool = False) -> FloatTrace:
    """The float32 model on token-id rows ``ids`` (B, n), BOS included: the final residual stream (B, n, d)."""
    n = ids.shape[1]
    if n > network.max_positions:
        raise ValueError(f"input of {n} positions exceeds the model's {network.max_positions}")
    x = (network.token_embed[ids] + network.pos_embed[np.arange(n)]).astype(np.float32)
    trace = FloatTrace(x)
    for attn, feed_forward in network.layers:
        x = x + attention(attn, x, trace if keep_trace else None)
        if keep_trace:
            trace.residuals.append(x)
        x = x + mlp(feed_forward, x)
        trace.residuals.append(x)
    if not keep_trace:
        trace.residuals = [x]
    return trace

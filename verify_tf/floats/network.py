"""A float model as it runs: float32 weights, the operations in their order, the decoding of its output.

``FloatNetwork`` is plain data (numpy float32 arrays, exact as stored) for the models whose *float* reading a
property can check: today tracr's compiled models (``builders.tracr_import.float_network``). It mirrors
tracr's haiku model (tracr/transformer/model.py, attention.py) layer by layer:

* embedding: ``token_embed[token] + pos_embed[position]`` (position 0 is BOS);
* each layer: multi-head attention on the residual stream (every head's query, key and value a haiku
  ``Linear``: ``x @ W + b``; logits ``q·k / sqrt(key_size)`` with the **configuration's** key size, i.e. the
  largest head's; a causal mask; ``jax.nn.softmax``; the weighted values; the output ``Linear`` over all heads'
  values), added to the residual, then the MLP ``Linear → ReLU → Linear``, added to the residual;
* no layer norm (tracr compiles without it).

Zero weights are kept (they are part of how the model runs); the bounds in ``floats.enclosure`` skip them
exactly (a product with a zero weight is an exact zero in IEEE arithmetic).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FloatHead:
    """One attention head: its columns of the layer's query, key and value ``Linear``s and rows of the output."""

    query: np.ndarray  # (d, k) float32
    query_bias: np.ndarray  # (k,)
    key: np.ndarray  # (d, k)
    key_bias: np.ndarray  # (k,)
    value: np.ndarray  # (d, v)
    value_bias: np.ndarray  # (v,)
    output: np.ndarray  # (v, d): this head's rows of the output Linear


@dataclass(frozen=True)
class FloatAttention:
    heads: tuple[FloatHead, ...]
    output_bias: np.ndarray  # (d,)
    key_size: int  # the logits are divided by float32(sqrt(key_size)), haiku's np.sqrt(key_size).astype(float32)
    causal: bool

    @property
    def divisor(self) -> np.float32:
        return np.float32(np.sqrt(np.float64(self.key_size)))


@dataclass(frozen=True)
class FloatMLP:
    w1: np.ndarray  # (d, h)
    b1: np.ndarray  # (h,)
    w2: np.ndarray  # (h, d)
    b2: np.ndarray  # (d,)


@dataclass(frozen=True)
class FloatNetwork:
    """A float32 model: embeddings, (attention, MLP) layers, and how its output is read."""

    token_embed: np.ndarray  # (tokens, d): row per token id
    pos_embed: np.ndarray  # (positions, d): row 0 is the BOS position
    layers: tuple[tuple[FloatAttention, FloatMLP], ...]
    token_ids: dict[str, int]  # symbol -> row of token_embed (BOS included)
    bos: str
    runs_as: str  # one line: how this model runs ("float32, tracr's haiku model: ...")

    @property
    def width(self) -> int:
        return int(self.token_embed.shape[1])

    @property
    def max_positions(self) -> int:
        return int(self.pos_embed.shape[0])

    def ids(self, rows: np.ndarray, symbols: tuple[str, ...]) -> np.ndarray:
        """Token-id rows (BOS first) for rows of indices into ``symbols`` (the domain's alphabet)."""
        table = np.array([self.token_ids[s] for s in symbols], dtype=np.int64)
        body = table[rows]
        return np.concatenate([np.full((len(rows), 1), self.token_ids[self.bos], dtype=np.int64), body], axis=1)


def logit_scale(key_size: int) -> float:
    """1/sqrt(key_size) as a float, for messages only (never a decision)."""
    return 1 / math.sqrt(key_size)

"""A trained torch model as it runs, as plain data: the experiments' ``TinyTransformer`` in float32.

``TorchNetwork`` holds the float32 tensors of a ``verify_tf.experiments.modules.TinyTransformer`` state dict (built
by ``builders.torch_float.float_network``; torch is not imported here) and the order of its operations, which
``floats.torch_enclosure`` bounds for every float32 evaluation torch's CPU kernels may perform:

* embedding: ``embedding[token]`` (a row lookup, exact) ``+ position_embedding[position]`` (APE; one rounding);
* each block, each sublayer f (attention, then the ReLU feed-forward when there is one): ``x + f(x)`` (no
  LayerNorm), ``x + f(LN(x))`` (pre-LN) or ``LN(x + f(x))`` (post-LN);
* attention (per head h, d_h = d / heads): ``q = W_q x + b_q`` (head h's rows), likewise k and v; logits ``(q·k) /
  sqrt(d_h)`` (torch divides by the Python float ``math.sqrt(d_h)``, cast to float32); causal: ``masked_fill(-inf)``;
  ``torch.softmax``; the weighted values; ``W_o`` over all heads' values (+ its bias);
* the feed-forward ``w2(relu(w1(x)))``;
* the readout: one row of ``readout.weight`` and its bias, ``u·z + b`` (the trained model's output; a property
  decides against it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .network import FloatAttention, FloatMLP


@dataclass(frozen=True)
class FloatNorm:
    """``torch.nn.LayerNorm(d, eps)``: weight and bias (float32), eps as torch holds it (a Python float)."""

    weight: np.ndarray  # (d,)
    bias: np.ndarray  # (d,)
    eps: float


@dataclass(frozen=True)
class TorchBlock:
    attention: FloatAttention
    feed_forward: FloatMLP | None
    attention_norm: FloatNorm | None  # norm_attention (pre- or post-LN)
    feed_forward_norm: FloatNorm | None


@dataclass(frozen=True)
class TorchNetwork:
    """A float32 TinyTransformer: embeddings, blocks, and one readout row with its bias."""

    token_embed: np.ndarray  # (tokens, d): embedding.weight, one row per symbol of ``symbols``
    pos_embed: np.ndarray | None  # (max_length, d): position_embedding (APE), or None
    blocks: tuple[TorchBlock, ...]
    norm_first: bool  # pre-LN (x + f(LN(x))) or post-LN (LN(x + f(x))), where the blocks have norms
    readout: np.ndarray  # (d,): readout.weight[row]
    readout_bias: np.float32  # readout.bias[row] (0 when the state dict has none)
    symbols: tuple[str, ...]  # the embedding's rows, in order (BOS included when the model has one)
    bos: str | None
    digest: str  # the state dict's sha256 (the float model's name, ``Model.float_source``)

    @property
    def width(self) -> int:
        return int(self.token_embed.shape[1])

    @property
    def max_positions(self) -> int | None:
        return None if self.pos_embed is None else int(self.pos_embed.shape[0])

    def ids(self, rows: np.ndarray, alphabet: tuple[str, ...]) -> np.ndarray:
        """Embedding rows (BOS first, when the model has one) for rows of indices into ``alphabet``."""
        table = np.array([self.symbols.index(s) for s in alphabet], dtype=np.int64)
        body = table[rows]
        if self.bos is None:
            return body
        bos = np.full((len(rows), 1), self.symbols.index(self.bos), dtype=np.int64)
        return np.concatenate([bos, body], axis=1)

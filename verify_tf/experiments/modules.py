"""Small float torch transformers for the training experiments: standard (+APE), RPE, URPE, RoPE and ALiBi.

These modules are float models trained by gradient descent; nothing they compute is a verdict.  Their
parameter names mirror the model IR so a trained model can later be imported (``verify_tf.ir``):

=============================================  ===========================  =====================================
state_dict name                                shape                        meaning (per head h, d_h = head dim)
=============================================  ===========================  =====================================
``embedding.weight``                           (vocab, d)                   token embedding, one row per token
``position_embedding``                         (max_length, d)              learned absolute PE (``ape`` only)
``blocks.L.attention.W_q.weight`` / ``.bias``  (heads*d_h, d) / (heads*d_h) rows h*d_h..(h+1)*d_h are head h's
                                                                            W_Q (d_h x d) and b_Q
``blocks.L.attention.W_k.*``, ``W_v.*``        as W_q                       W_K, W_V and their biases
``blocks.L.attention.W_o.weight`` / ``.bias``  (d, heads*d_h) / (d)         columns of head h are its W_O (d x d_h);
                                                                            the bias is the layer's output bias
``blocks.L.attention.rpe_bias``                (heads, 2*max_length-1)      B[h, k] added to the logit of offset
                                                                            j-i = k-(max_length-1) (rpe, urpe)
``blocks.L.attention.urpe_c``                  (heads, 2*max_length-1)      C[h, k] multiplied into the softmax
                                                                            weight of offset k-(max_length-1) (urpe)
``blocks.L.attention.rotary_emb.inv_freq``     (d_h/2)                      RoPE's frequencies 1/base^(2k/d_h) (a
                                                                            buffer, as in Llama; rope)
``blocks.L.attention.alibi_slopes``            (heads)                      ALiBi slope m_h (a buffer: the standard
                                                                            geometric slopes; alibi)
``blocks.L.ffn.w1.*``, ``blocks.L.ffn.w2.*``   (r, d), (d, r)               z + W2 relu(W1 z + b1) + b2
``blocks.L.norm_attention``/``norm_ffn``       (d)                          LayerNorm (only with layernorm pre/post)
``readout.weight`` / ``.bias``                 (outputs, d) / (outputs)     per-position output head
=============================================  ===========================  =====================================

Attention logits are ``(W_q x_i)·(W_k x_j) / sqrt(d_h) + rpe_bias[h, j-i]`` (an importer folds the
1/sqrt(d_h) into W_Q). RoPE rotates each head's query and key at position p the usual way (Llama's
``rotate_half``: coordinate k paired with k + d_h/2, angle p·inv_freq[k]) before the product; ALiBi adds
``alibi_slopes[h]·(j − i)`` to the logits.  URPE (Luo et al. 2022, eq. for Attn in Sec. 4) multiplies the
softmax weights by the Toeplitz matrix C[j-i] *after* normalisation, without renormalising; C starts at all
ones, where URPE equals RPE.  The tables cover every offset of a ``max_length`` input, so no clipping happens.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = [
    "ATTENTION_KINDS",
    "LAYERNORM_PLACEMENTS",
    "POSITIONAL_KINDS",
    "Attention",
    "Block",
    "FeedForward",
    "RotaryEmbedding",
    "TinyTransformer",
    "standard_alibi_slopes",
]

POSITIONAL_KINDS = ("none", "ape", "rpe", "urpe", "rope", "alibi")
ATTENTION_KINDS = ("standard", "rpe", "urpe", "rope", "alibi")


def standard_alibi_slopes(heads: int) -> list[float]:
    """Press et al.'s slopes (their code's get_slopes), as floats: exact powers of two for up to 8 heads."""

    def power_of_two(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (h + 1) for h in range(n)]

    if heads & (heads - 1) == 0:
        return power_of_two(heads)
    closest = 1 << (heads.bit_length() - 1)
    return power_of_two(closest) + standard_alibi_slopes(2 * closest)[0::2][: heads - closest]


class RotaryEmbedding(nn.Module):
    """RoPE's frequencies as a persistent buffer ``inv_freq`` = 1/base^(2k/d) (Llama's layout)."""

    def __init__(self, dim: int, base: float = 10000.0):
        super().__init__()
        if dim % 2:
            raise ValueError(f"RoPE needs an even head dimension, got {dim}")
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (batch, heads, n, d) rotated at positions 0..n-1: x·cos + rotate_half(x)·sin."""
        positions = torch.arange(x.shape[-2], device=x.device, dtype=torch.float32)
        angles = positions[:, None] * self.inv_freq[None, :]  # (n, d/2)
        cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
        return x * cos + rotated * sin


LAYERNORM_PLACEMENTS = ("none", "pre", "post")


class Attention(nn.Module):
    """Multi-head softmax attention with optional RPE bias B[j-i] and URPE factor C[j-i], optionally causal."""

    def __init__(
        self,
        width: int,
        heads: int,
        positional: str = "standard",
        causal: bool = False,
        max_length: int = 1,
        rope_base: float = 10000.0,
    ):
        super().__init__()
        if width % heads:
            raise ValueError(f"width {width} is not a multiple of heads {heads}")
        if positional not in ATTENTION_KINDS:
            raise ValueError(f"unknown attention positional flavour {positional!r}")
        self.heads, self.head_dim = heads, width // heads
        self.positional, self.causal, self.max_length = positional, causal, max_length
        self.W_q = nn.Linear(width, width)
        self.W_k = nn.Linear(width, width)
        self.W_v = nn.Linear(width, width)
        self.W_o = nn.Linear(width, width)
        if positional in ("rpe", "urpe"):
            self.rpe_bias = nn.Parameter(torch.zeros(heads, 2 * max_length - 1))
        if positional == "urpe":
            self.urpe_c = nn.Parameter(torch.ones(heads, 2 * max_length - 1))
        if positional == "rope":
            self.rotary_emb = RotaryEmbedding(self.head_dim, rope_base)
        if positional == "alibi":
            self.register_buffer("alibi_slopes", torch.tensor(standard_alibi_slopes(heads), dtype=torch.float32))

    def _relative(self, table: torch.Tensor, length: int) -> torch.Tensor:
        """``table[h, (j - i) + max_length - 1]`` as an (heads, length, length) tensor."""
        if length > self.max_length:
            raise ValueError(f"input length {length} exceeds max_length {self.max_length}")
        positions = torch.arange(length, device=table.device)
        offsets = positions[None, :] - positions[:, None] + self.max_length - 1
        return table[:, offsets]

    def weights(self, x: torch.Tensor) -> torch.Tensor:
        """Attention weights (batch, heads, n, n), URPE factor included."""
        batch, length, _ = x.shape
        query = self.W_q(x).view(batch, length, self.heads, self.head_dim).transpose(1, 2)
        key = self.W_k(x).view(batch, length, self.heads, self.head_dim).transpose(1, 2)
        if self.positional == "rope":
            query, key = self.rotary_emb(query), self.rotary_emb(key)
        logits = query @ key.transpose(-1, -2) / math.sqrt(self.head_dim)
        if self.positional in ("rpe", "urpe"):
            logits = logits + self._relative(self.rpe_bias, length)
        if self.positional == "alibi":
            positions = torch.arange(length, device=x.device, dtype=torch.float32)
            offsets = positions[None, :] - positions[:, None]  # j - i
            logits = logits + self.alibi_slopes[:, None, None] * offsets
        if self.causal:
            future = torch.ones(length, length, dtype=torch.bool, device=x.device).triu(1)
            logits = logits.masked_fill(future, float("-inf"))
        weights = torch.softmax(logits, dim=-1)
        if self.positional == "urpe":
            weights = weights * self._relative(self.urpe_c, length)
        return weights

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        value = self.W_v(x).view(batch, length, self.heads, self.head_dim).transpose(1, 2)
        mixed = (self.weights(x) @ value).transpose(1, 2).reshape(batch, length, width)
        return self.W_o(mixed)


class FeedForward(nn.Module):
    """Token-wise ReLU network W2 relu(W1 z + b1) + b2."""

    def __init__(self, width: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(width, hidden)
        self.w2 = nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(torch.relu(self.w1(x)))


class Block(nn.Module):
    """Attention then feed-forward, each with a residual connection and an optional LayerNorm."""

    def __init__(
        self,
        width: int,
        heads: int,
        ffn_width: int,
        positional: str,
        causal: bool,
        max_length: int,
        layernorm: str,
        rope_base: float = 10000.0,
    ):
        super().__init__()
        self.attention = Attention(width, heads, positional, causal, max_length, rope_base)
        self.ffn = FeedForward(width, ffn_width) if ffn_width else None
        self.layernorm = layernorm
        if layernorm != "none":
            self.norm_attention = nn.LayerNorm(width)
            self.norm_ffn = nn.LayerNorm(width) if ffn_width else None

    def _sublayer(self, x: torch.Tensor, layer: nn.Module, norm: nn.Module | None) -> torch.Tensor:
        if self.layernorm == "pre":
            return x + layer(norm(x))
        if self.layernorm == "post":
            return norm(x + layer(x))
        return x + layer(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self._sublayer(x, self.attention, getattr(self, "norm_attention", None))
        if self.ffn is not None:
            x = self._sublayer(x, self.ffn, getattr(self, "norm_ffn", None))
        return x


class TinyTransformer(nn.Module):
    """Token embedding (+ learned APE), ``layers`` blocks, and a per-position linear readout.

    ``positional``: ``none`` (no positional information at all), ``ape`` (learned absolute PE added to the
    embedding, standard attention), ``rpe`` or ``urpe`` (relative tables inside every attention layer), ``rope``
    (queries and keys rotated, frequencies from ``rope_base`` and the head dimension) or ``alibi`` (the standard
    slopes times j − i added to the logits).
    """

    def __init__(
        self,
        vocab: int,
        width: int,
        heads: int,
        layers: int,
        ffn_width: int,
        outputs: int,
        positional: str = "none",
        causal: bool = False,
        max_length: int = 1,
        layernorm: str = "none",
        rope_base: float = 10000.0,
    ):
        super().__init__()
        if positional not in POSITIONAL_KINDS:
            raise ValueError(f"positional must be one of {POSITIONAL_KINDS}, got {positional!r}")
        if layernorm not in LAYERNORM_PLACEMENTS:
            raise ValueError(f"layernorm must be one of {LAYERNORM_PLACEMENTS}, got {layernorm!r}")
        self.positional = positional
        self.embedding = nn.Embedding(vocab, width)
        if positional == "ape":
            self.position_embedding = nn.Parameter(torch.randn(max_length, width) * 0.1)
        attention_kind = positional if positional in ATTENTION_KINDS else "standard"
        self.blocks = nn.ModuleList(
            Block(width, heads, ffn_width, attention_kind, causal, max_length, layernorm, rope_base)
            for _ in range(layers)
        )
        self.readout = nn.Linear(width, outputs)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens (batch, n) of ints -> outputs (batch, n, outputs)."""
        x = self.embedding(tokens)
        if self.positional == "ape":
            x = x + self.position_embedding[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.readout(x)

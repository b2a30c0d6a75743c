"""The checkpoints people train, as they run in float32, as plain data: GPT-2, Llama, BERT and nanoGPT layouts.

``FloatTransformer`` holds float32 numpy arrays (exact as stored) and the order of the operations of the library's
forward pass; ``floats.transformer_enclosure`` bounds every float32 evaluation of it and ``floats.transformer_mirror``
evaluates it once in float32 (the witness replay when the library is not installed). The builders
(``builders.huggingface``, ``builders.nanogpt``) map a checkpoint's tensors onto it, layer by layer (docs/import.md);
nothing here knows a file format, and neither torch nor transformers is imported.

The model, operation by operation (each a float32 operation of the library; docs/semantics.md §7 "Float as run"):

* embeddings: ``token[t]`` (a row lookup), ``+ token_type`` (BERT: the type-0 row), ``+ position[p]`` (learned
  absolute positions: GPT-2, BERT, nanoGPT), each addition one rounding; then ``embed_norm`` (BERT's LayerNorm);
* per layer, per sublayer f (attention, then the MLP): ``x + f(norm(x))`` (pre-LN: GPT-2, nanoGPT, Llama) or
  ``norm(x + f(x))`` (post-LN: BERT);
* attention: per head h, ``q = x·Wq_h + bq_h``; k and v from the head's key/value group (grouped KV: head h reads
  group h // (heads / kv_heads)); RoPE (Llama's rotate-half: coordinate j paired with j + d_h/2, angle p·θ_j with
  θ_j = rope_theta^(−2j/d_h)) on q and k; logits ``scale·(q·k)``; a causal mask or none; softmax; the weighted values;
  the output projection over all heads (+ its bias);
* MLP: ``down(act(up(x)))``, or gated (SwiGLU) ``down(act(gate(x)) · up(x))``;
* ``final_norm`` (GPT-2's ln_f, Llama's norm; BERT has none), then the readout (``Readout``).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

NORM_KINDS = ("layer", "rms")
PLACEMENTS = ("pre", "post")
READOUT_KINDS = ("logit", "difference", "hidden")


@dataclass(frozen=True)
class Projection:
    """``x @ weight + bias`` (torch's ``Linear`` y = x W^T + b and GPT-2's ``Conv1D`` y = x W + b, both as x @ W)."""

    weight: np.ndarray  # (inputs, outputs) float32
    bias: np.ndarray  # (outputs,) float32 (zeros where the layer has none: adding 0 is exact)

    @property
    def outputs(self) -> int:
        return int(self.weight.shape[1])

    def columns(self, index: slice | list[int]) -> Projection:
        return Projection(np.ascontiguousarray(self.weight[:, index]), np.ascontiguousarray(self.bias[index]))


@dataclass(frozen=True)
class Norm:
    """LayerNorm (``layer``: torch's ``nn.LayerNorm``, (x − μ)/√(var + eps)·γ + β) or RMSNorm (``rms``: Llama's,
    x·rsqrt(mean(x²) + eps), then γ·that)."""

    kind: str
    weight: np.ndarray  # (d,) float32
    bias: np.ndarray  # (d,) float32 (zeros for RMSNorm and bias-free LayerNorms)
    eps: float


@dataclass(frozen=True)
class Rope:
    """Llama's rotary embedding (``rope_type: default``): θ_j = base^(−2j/d_h) for j < d_h/2, rotate-half pairs."""

    base: Fraction  # rope_theta, as written in the config (a decimal read exactly)
    dims: int  # d_h: every coordinate of q and k is rotated


@dataclass(frozen=True)
class Attention:
    query: tuple[Projection, ...]  # per head: (d, d_h)
    key: tuple[Projection, ...]  # per key/value group
    value: tuple[Projection, ...]
    output: Projection  # (heads·d_h, d): every head's values, in head order
    causal: bool
    scale: Fraction  # the logit scale as a rational factor of 1/sqrt(head_dim) (1, or 1/(layer+1): GPT-2's option)
    head_dim: int
    rope: Rope | None

    @property
    def heads(self) -> int:
        return len(self.query)

    def group(self, head: int) -> int:
        return head // (len(self.query) // len(self.key))


@dataclass(frozen=True)
class MLP:
    up: Projection  # c_fc / intermediate.dense / up_proj
    down: Projection
    activation: str  # relu | gelu-erf | gelu-tanh | silu (floats.activations)
    gate: Projection | None = None  # SwiGLU: act(gate(x)) · up(x)


@dataclass(frozen=True)
class Layer:
    attention: Attention
    mlp: MLP
    attention_norm: Norm | None
    mlp_norm: Norm | None
    placement: str  # pre | post


@dataclass(frozen=True)
class Readout:
    """What a property reads at each position, from the final stream h:

    * ``logit``: the logit of one token, ``h·rows[:, 0] + bias[0]`` (an LM head's row; BERT's MLM head first applies
      ``transform``: dense, activation, LayerNorm);
    * ``difference``: the exact difference of two such float32 logits (no rounding of the difference itself);
    * ``hidden``: the coordinate ``coordinate`` of h itself (a model without a head)."""

    kind: str
    rows: np.ndarray  # (d, 1 or 2) float32; (d, 0) for hidden
    bias: np.ndarray  # (1 or 2,) float32
    coordinate: int = 0
    transform: tuple[Projection, str, Norm] | None = None  # BERT: dense, activation, LayerNorm
    describe: str = ""  # "the logit of 'a' (id 3)"


@dataclass(frozen=True)
class FloatTransformer:
    """A float32 checkpoint: embeddings, layers, final norm and the readout. ``symbols[i]`` names vocabulary id i
    (the tokens a domain's strings are made of); ``bos`` is prepended to every input when set."""

    architecture: str  # "GPT-2", "Llama", "BERT", "nanoGPT"
    token_embed: np.ndarray  # (vocabulary, d)
    position_embed: np.ndarray | None  # (positions, d) learned absolute positions
    token_type: np.ndarray | None  # (d,): BERT's type-0 embedding, added to every token
    embed_norm: Norm | None
    layers: tuple[Layer, ...]
    final_norm: Norm | None
    readout: Readout
    symbols: tuple[str, ...]
    bos: str | None
    max_positions: int  # the context length (n_positions, max_position_embeddings, block_size)
    digest: str  # sha256 of the checkpoint's config and tensors (the float model's name)

    @property
    def width(self) -> int:
        return int(self.token_embed.shape[1])

    @property
    def causal(self) -> bool:
        return all(layer.attention.causal for layer in self.layers)

    def ids(self, rows: np.ndarray, alphabet: tuple[str, ...]) -> np.ndarray:
        """Token ids (BOS first, when set) for rows of indices into ``alphabet`` (the domain's symbols)."""
        index = {symbol: i for i, symbol in enumerate(self.symbols)}
        table = np.array([index[s] for s in alphabet], dtype=np.int64)
        body = table[np.asarray(rows, dtype=np.int64)]
        if self.bos is None:
            return body
        return np.concatenate([np.full((len(body), 1), index[self.bos], dtype=np.int64), body], axis=1)

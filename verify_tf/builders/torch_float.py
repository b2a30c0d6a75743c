"""The float reading of an imported torch model (``architecture: {reading: float}``): the float32 model as trained.

Two things, both from the state dict itself:

* ``float_network``: the model as plain float32 data (``floats.TorchNetwork``), which ``floats.torch_enclosure``
  bounds for every evaluation torch's CPU kernels may perform, and from which a property decides (docs/semantics.md
  §7, "Float as trained");
* ``replay``: the witness of a refutation evaluated by torch itself: ``ReplayTransformer`` (the layout and forward of
  ``verify_tf.experiments.modules.TinyTransformer``, which this layer may not import; tests/test_torch_float.py
  pins the two equal bit for bit) rebuilt from the architecture, ``load_state_dict(strict=True)``, run in float32
  under ``torch.no_grad()`` and with autograd enabled.

Read: the experiments' ``TinyTransformer`` (token embedding, optional learned APE ``position_embedding``, blocks of
standard softmax attention ``W_q/W_k/W_v/W_o`` and an optional ReLU feed-forward ``ffn.w1/w2``, LayerNorm none, pre
or post, one readout row and its bias). Refused by name (a located error at ``model.architecture.reading``): RPE,
URPE, RoPE, ALiBi, GELU, ``nn.MultiheadAttention`` / ``nn.TransformerEncoder`` layouts, a final norm.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..floats.network import FloatAttention, FloatHead, FloatMLP
from ..floats.torch_network import FloatNorm, TorchBlock, TorchNetwork
from ..ir import Model
from .torch_import import TorchImportError, TorchState, _rename, import_state_dict, load_state_dict, state_digest

READING_KEY = "architecture.reading"
_BLOCK = re.compile(r"^blocks\.(\d+)\.")
_KNOWN = re.compile(
    r"^(embedding\.weight|position_embedding|readout\.(weight|bias)|blocks\.\d+\.(attention\.W_[qkvo]\.(weight|bias)|"
    r"ffn\.w[12]\.(weight|bias)|norm_(attention|ffn)\.(weight|bias)))$"
)


def _refuse(message: str) -> TorchImportError:
    return TorchImportError(
        message,
        "the float reading reads the experiments' TinyTransformer (standard attention, ReLU, APE, LayerNorm none, pre "
        "or post); drop reading: float to check the fixed-point reading instead (docs/import.md)",
        key=READING_KEY,
    )


def _array(state: TorchState, key: str) -> np.ndarray:
    return state[key].detach().cpu().to(torch.float32).numpy().copy()


def _norm(state: TorchState, prefix: str, eps: float) -> FloatNorm | None:
    if prefix + "weight" not in state:
        return None
    width = state[prefix + "weight"].shape[0]
    bias = _array(state, prefix + "bias") if prefix + "bias" in state else np.zeros(width, dtype=np.float32)
    return FloatNorm(_array(state, prefix + "weight"), bias, eps)


def layout_problem(state: TorchState, architecture: dict[str, Any]) -> str | None:
    """Why the float reading cannot read this state dict, or None."""
    if architecture.get("activation", "relu") != "relu":
        return f"activation {architecture.get('activation')!r}: the float reading bounds ReLU feed-forwards only"
    unknown = sorted(k for k in state if not _KNOWN.match(k))
    if unknown:
        return (
            f"state dict entries {', '.join(unknown[:4])}{', ...' if len(unknown) > 4 else ''}: the float reading "
            "reads the experiments' TinyTransformer only (not yet RPE, URPE, RoPE, ALiBi, nn.MultiheadAttention or "
            "nn.TransformerEncoder)"
        )
    if "embedding.weight" not in state or "readout.weight" not in state:
        return "the float reading needs embedding.weight and readout.weight (a TinyTransformer state dict)"
    if not any(_BLOCK.match(k) for k in state):
        return "no blocks.L.attention weights in the state dict"
    return None


def float_network(state: TorchState, architecture: dict[str, Any], digest: str) -> TorchNetwork:
    """The state dict (torch's names, after ``architecture.names``) as a float32 ``TorchNetwork``."""
    problem = layout_problem(state, architecture)
    if problem is not None:
        raise _refuse(problem)
    heads = int(architecture["heads"])
    causal = bool(architecture["causal"])
    eps = float(architecture.get("layernorm-eps") or 1e-5)
    width = state["embedding.weight"].shape[1]
    if width % heads:
        raise _refuse(f"embedding dimension {width} is not divisible by heads: {heads}")
    d_head = width // heads
    layers = sorted({int(m.group(1)) for k in state if (m := _BLOCK.match(k))})
    blocks = []
    for layer in layers:
        prefix = f"blocks.{layer}."

        def linear(name: str, rows: slice | None = None) -> tuple[np.ndarray, np.ndarray]:
            weight = _array(state, f"{prefix}{name}.weight")  # noqa: B023 - called in this iteration only
            key = f"{prefix}{name}.bias"  # noqa: B023
            bias = _array(state, key) if key in state else np.zeros(weight.shape[0], dtype=np.float32)
            if rows is not None:
                weight, bias = weight[rows], bias[rows]
            return np.ascontiguousarray(weight.T), bias  # torch's y = x W^T + b as x @ W + b

        out_weight, out_bias = linear("attention.W_o")  # (d, d): rows are the heads' values, in head order
        head_list = []
        for h in range(heads):
            rows = slice(h * d_head, (h + 1) * d_head)
            q, q_bias = linear("attention.W_q", rows)
            k, k_bias = linear("attention.W_k", rows)
            v, v_bias = linear("attention.W_v", rows)
            head_list.append(FloatHead(q, q_bias, k, k_bias, v, v_bias, np.ascontiguousarray(out_weight[rows])))
        attention = FloatAttention(tuple(head_list), out_bias, d_head, causal)
        feed_forward = None
        if f"{prefix}ffn.w1.weight" in state:
            w1, b1 = linear("ffn.w1")
            w2, b2 = linear("ffn.w2")
            feed_forward = FloatMLP(w1, b1, w2, b2)
        blocks.append(
            TorchBlock(
                attention,
                feed_forward,
                _norm(state, f"{prefix}norm_attention.", eps),
                _norm(state, f"{prefix}norm_ffn.", eps),
            )
        )
    row = int(architecture.get("readout-row") or 0)
    readout_bias = np.float32(state["readout.bias"][row].item()) if "readout.bias" in state else np.float32(0)
    return TorchNetwork(
        token_embed=_array(state, "embedding.weight"),
        pos_embed=_array(state, "position_embedding") if "position_embedding" in state else None,
        blocks=tuple(blocks),
        norm_first=bool(architecture.get("norm-first")),
        readout=_array(state, "readout.weight")[row],
        readout_bias=readout_bias,
        symbols=tuple(architecture["alphabet"]),
        bos=architecture.get("bos"),
        digest=digest,
    )


FLOAT_AS_TRAINED = "float32 as trained"  # the reading's name, next to every verdict it decides


class TorchFloatModel:
    """What ``Model.float_model`` holds for a torch import read as a float: the network (plain data, bounded by
    ``floats.torch_enclosure``), the state dict and architecture (for the replay in torch), and the readout bias the
    IR dropped (``readout-bias: drop``), which the float model's output still contains."""

    def __init__(self, network: TorchNetwork, state: TorchState, architecture: dict[str, Any]):
        self.network = network
        self.state = state
        self.architecture = {k: v for k, v in architecture.items() if k != "__node__"}
        dropped = architecture.get("readout-bias", "refuse") == "drop"
        self.dropped_bias = Fraction(float(network.readout_bias)) if dropped else Fraction(0)

    def __repr__(self) -> str:  # what canonical() and messages show: the float model's name, not its tensors
        return f"torch float model (state dict sha256 {self.network.digest[:16]})"

    def replay(self, ids: np.ndarray) -> dict[str, np.ndarray]:
        return replay(self.state, self.architecture, ids)


def import_float_reading(path: str | Path, architecture: dict[str, Any], quantize: dict[str, Any] | None) -> Model:
    """``model: {torch: FILE, architecture: {reading: float, ...}}``: the IR as ``import_torch_model`` builds it (the
    fixed-point reading other properties check) with the float32 model attached (``Model.float_model``) and named
    (``Model.float_source``: the state dict's sha256)."""
    state = load_state_dict(path)
    model = import_state_dict(state, architecture, quantize, name=Path(path).stem)
    renamed = _rename(state, architecture.get("names"))
    digest = state_digest(renamed)
    network = float_network(renamed, architecture, digest)
    return replace(model, float_source=digest, float_model=TorchFloatModel(network, renamed, architecture))


# ---------------------------------------------------------------- replay in torch itself


class _Attention(nn.Module):
    """``experiments.modules.Attention`` with positional ``standard``: the same parameters and operations."""

    def __init__(self, width: int, heads: int, causal: bool):
        super().__init__()
        self.heads, self.head_dim, self.causal = heads, width // heads, causal
        self.W_q = nn.Linear(width, width)
        self.W_k = nn.Linear(width, width)
        self.W_v = nn.Linear(width, width)
        self.W_o = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        query = self.W_q(x).view(batch, length, self.heads, self.head_dim).transpose(1, 2)
        key = self.W_k(x).view(batch, length, self.heads, self.head_dim).transpose(1, 2)
        logits = query @ key.transpose(-1, -2) / math.sqrt(self.head_dim)
        if self.causal:
            future = torch.ones(length, length, dtype=torch.bool, device=x.device).triu(1)
            logits = logits.masked_fill(future, float("-inf"))
        weights = torch.softmax(logits, dim=-1)
        value = self.W_v(x).view(batch, length, self.heads, self.head_dim).transpose(1, 2)
        return self.W_o((weights @ value).transpose(1, 2).reshape(batch, length, width))


class _FeedForward(nn.Module):
    def __init__(self, width: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(width, hidden)
        self.w2 = nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(torch.relu(self.w1(x)))


class _Block(nn.Module):
    def __init__(self, width: int, heads: int, hidden: int, causal: bool, layernorm: str, eps: float):
        super().__init__()
        self.attention = _Attention(width, heads, causal)
        self.ffn = _FeedForward(width, hidden) if hidden else None
        self.layernorm = layernorm
        if layernorm != "none":
            self.norm_attention = nn.LayerNorm(width, eps=eps)
            self.norm_ffn = nn.LayerNorm(width, eps=eps) if hidden else None

    def _sublayer(self, x: torch.Tensor, layer: nn.Module, norm: Any) -> torch.Tensor:
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


class ReplayTransformer(nn.Module):
    """``experiments.modules.TinyTransformer`` (positional ``none`` or ``ape``), rebuilt from a state dict's shapes
    and the spec's architecture (heads, causal, LayerNorm placement and eps)."""

    def __init__(self, state: TorchState, architecture: dict[str, Any]):
        super().__init__()
        vocab, width = state["embedding.weight"].shape
        heads = int(architecture["heads"])
        layers = sorted({int(m.group(1)) for k in state if (m := _BLOCK.match(k))})
        has_norms = any(".norm_attention." in k for k in state)
        layernorm = ("pre" if architecture.get("norm-first") else "post") if has_norms else "none"
        eps = float(architecture.get("layernorm-eps") or 1e-5)
        self.embedding = nn.Embedding(vocab, width)
        self.ape = "position_embedding" in state
        if self.ape:
            self.position_embedding = nn.Parameter(torch.zeros(state["position_embedding"].shape))
        self.blocks = nn.ModuleList(
            _Block(
                width,
                heads,
                state[f"blocks.{layer}.ffn.w1.weight"].shape[0] if f"blocks.{layer}.ffn.w1.weight" in state else 0,
                bool(architecture["causal"]),
                layernorm,
                eps,
            )
            for layer in layers
        )
        self.readout = nn.Linear(width, state["readout.weight"].shape[0])
        self.load_state_dict(state, strict=True)
        self.eval()

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embedding(tokens)
        if self.ape:
            x = x + self.position_embedding[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.readout(x)


REPLAY_KERNELS = ("no_grad", "autograd")


def replay(state: TorchState, architecture: dict[str, Any], ids: np.ndarray) -> dict[str, np.ndarray]:
    """The readout row (B, n) of torch's own float32 evaluation of embedding rows ``ids``, under ``no_grad`` and
    with autograd enabled (torch may pick different kernels for the two)."""
    module = ReplayTransformer(state, architecture)
    row = int(architecture.get("readout-row") or 0)
    tokens = torch.as_tensor(np.asarray(ids, dtype=np.int64))
    with torch.no_grad():
        quiet = module(tokens)[..., row].numpy().copy()
    with torch.enable_grad():
        traced = module(tokens)[..., row].detach().numpy().copy()
    return {REPLAY_KERNELS[0]: quiet, REPLAY_KERNELS[1]: traced}

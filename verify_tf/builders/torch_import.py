"""Import PyTorch state dicts (``model: {torch: FILE, architecture: {...}, quantize: {bits, frac}}``).

Reads ``torch.load(FILE, weights_only=True)`` or a ``.safetensors`` file (tensors only, never pickled objects) and
maps stacks of
``torch.nn.MultiheadAttention`` with optional ReLU feed-forwards, and the RPE / URPE / APE modules of
``verify_tf.experiments.modules`` (``W_q``/``W_k``/``W_v``/``W_o``, ``rpe_bias``, ``urpe_c`` tables), onto
the IR, exactly:

* ``in_proj_weight`` (3d x d) is split into W_Q / W_K / W_V and per head into d_head rows each (torch's
  ``Linear`` convention y = W x is the IR's); ``out_proj.weight`` (d x d) is split by columns into each
  head's W_O (d x d_head); biases likewise; ``q/k/v_proj_weight`` (``kdim``/``vdim`` modules) too.
* torch scales the logits by 1/sqrt(d_head). The importer folds that factor into W_Q and b_Q. When
  sqrt(d_head) is rational (d_head a perfect square: 1, 4, 9, 16, ...) the folding is exact; otherwise the
  scaled weights are irrational and the import requires ``quantize``, which rounds them explicitly (with
  integer square roots, no floating point) and counts them in the reported rounding error.
* ``quantize: {bits, frac}`` rounds every weight to the nearest multiple of 2^-frac (ties to even) and
  refuses weights outside the ``bits``-bit range. The largest rounding error it introduced is reported in
  the model's notes (printed by ``verify-tf check``). Without ``quantize`` every float32 weight is taken
  as the exact dyadic rational it is.

``torch.nn.TransformerEncoderLayer`` (``norm1``/``norm2``, pre- or post-LN) and ``nn.TransformerEncoder``
stacks with a final ``norm`` are read when the spec states ``layernorm: integer`` (the fixed-point LayerNorm
of docs/semantics.md) and ``norm-first``; GELU only as ``activation: i-gelu`` (I-BERT's integer polynomial).
``names`` maps torch's module names onto a model's own (``linear1: ff.0``). Anything else the IR cannot
encode exactly is refused by name, never approximated: LayerNorm or GELU not stated, ``add_bias_kv``, a
non-zero readout bias (unless the spec says ``readout-bias: drop``), and any state dict entry the importer
does not understand. ``verify_tf.experiments.exact_encoder`` has small LayerNorm-free modules to train
models this importer accepts without any approximation (docs/import.md).

torch is an optional dependency (the ``torch`` extra): this module imports it at the top and is itself
imported only when a spec has a torch source (``torch_source.py``), which names the extra when it is missing.

The verified model is the imported IR under the spec's arithmetic: with ``scoring: softmax`` that is the
fixed-point softmax of docs/semantics.md, not torch's float softmax. The model says so: ``runs_as`` names the float
model as run (the state dict's sha256), ``reading`` what the IR computes of it (``torch_reading``), and
``quantization`` the exact largest rounding error, all stated beside every verdict (docs/semantics.md §7).
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..ir import (
    DEFAULT_LAYERNORM_EPS,
    Alibi,
    AlphabetTokens,
    AttentionLayer,
    Block,
    FeedForward,
    GridTokens,
    Head,
    LayerNorm,
    Model,
    RelativeTable,
    Rotary,
)
from ..numbers import fmt
from ..schema.errors import strip_terminal_codes
from ..userfiles import model_file_problem, weight_count_problem
from . import TORCH_ROLE_NAMES
from .files import ARCH_KEY, SAFE_ALTERNATIVES, pickle_refusal
from .quantize import SQRT_BITS, TorchImportError, _Quantizer, bits_for
from .torch_reading import torch_reading, torch_runs_as

__all__ = ["SQRT_BITS", "TorchImportError", "bits_for", "import_state_dict", "import_torch_model", "load_state_dict"]

TorchState = dict[str, torch.Tensor]
ROLE_NAMES = TORCH_ROLE_NAMES


def _largest_weight(state: TorchState) -> tuple[Fraction, str]:
    """max |w| over every floating-point tensor of the state dict, exactly, and where (``key[i][j]``)."""
    best, where = Fraction(0), ""
    for key in sorted(state, key=_natural):
        tensor = state[key]
        if not tensor.is_floating_point() or tensor.numel() == 0:
            continue
        flat = tensor.detach().reshape(-1).abs()
        if not bool(torch.isfinite(flat).all()):
            continue  # a non-finite weight is refused by name where the importer reads it
        index = int(torch.argmax(flat))
        value = Fraction(float(flat[index]))
        if value > best:
            position = ""
            for size in reversed(tensor.shape):
                index, at = divmod(index, size)
                position = f"[{at}]{position}"
            best, where = value, f"{key}{position}"
    return best, where


def _refuse_unreadable_tensors(state: TorchState) -> None:
    """Weights are dense tensors with data: a sparse, meta or quantized tensor is refused by name (never read)."""
    for key in sorted(state, key=_natural):
        tensor = state[key]
        if tensor.layout != torch.strided or tensor.is_meta or tensor.is_quantized or tensor.is_complex():
            kind = "meta" if tensor.is_meta else "quantized" if tensor.is_quantized else str(tensor.layout)
            kind = "complex" if tensor.is_complex() else kind
            raise TorchImportError(
                f"{key}: a {kind} tensor ({tensor.dtype}, {tuple(tensor.shape)}); the importer reads dense real "
                "weights only",
                'save the float weights: torch.save(model.state_dict(), "model.pt") of an unquantized model',
                key="torch",
            )


def state_digest(state: TorchState) -> str:
    """sha256 of the state dict: every key, dtype, shape and the tensor's bytes, in key order."""
    digest = hashlib.sha256()
    for key in sorted(state):
        tensor = state[key].detach().cpu().contiguous()
        digest.update(f"{key}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()


# ---------------------------------------------------------------- state dict layout


def _natural(key: str) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", key)]


def _require_dimensions(key: str, tensor: torch.Tensor, dimensions: int) -> None:
    """A matrix is 2-D and a vector 1-D: an extra dimension (8×4×1) is the file's mistake, said by name."""
    if tensor.dim() != dimensions:
        shape = "×".join(str(n) for n in tensor.shape) or "a scalar"
        raise TorchImportError(
            f"{key}: expected a {'matrix' if dimensions == 2 else 'vector'} ({dimensions}-D), got a "
            f"{tensor.dim()}-D tensor of shape {shape}",
            "save the module's own state_dict(): its weights are matrices and its biases vectors "
            "(squeeze an added dimension)",
        )


def _matrix(
    state: TorchState,
    key: str,
    quantizer: _Quantizer,
    rows: range | None = None,
    cols: range | None = None,
    where: str = "",
) -> tuple[tuple[Fraction, ...], ...]:
    tensor = state[key].detach().to(torch.float64).cpu()
    _require_dimensions(key, tensor, 2)
    data = tensor.tolist()
    rows = rows if rows is not None else range(len(data))
    cols = cols if cols is not None else range(len(data[0]) if data else 0)
    return tuple(
        tuple(quantizer.exact(data[r][c], f"{where or key}[{i}][{j}]") for j, c in enumerate(cols))
        for i, r in enumerate(rows)
    )


def _vector(
    state: TorchState,
    key: str | None,
    length: int,
    quantizer: _Quantizer,
    indices: range | None = None,
    where: str = "",
) -> tuple[Fraction, ...]:
    if key is None or key not in state:
        return tuple(Fraction(0) for _ in range(length))
    tensor = state[key].detach().to(torch.float64).cpu()
    _require_dimensions(key, tensor, 1)
    data = tensor.tolist()
    indices = indices if indices is not None else range(len(data))
    return tuple(quantizer.exact(data[i], f"{where or key}[{k}]") for k, i in enumerate(indices))


@dataclass
class _AttentionKeys:
    """Where one attention module's tensors are in a state dict."""

    width: int
    weights: dict[str, tuple[str, int]]  # "q" / "k" / "v" -> (key, first row)
    biases: dict[str, tuple[str, int]]  # "q" / "k" / "v" -> (key, first entry); the key may be absent
    out_weight: str
    out_bias: str
    rpe_bias: str | None = None  # (heads, 2r+1) tables B[h, j-i+r] (the experiments' RPE/URPE modules)
    urpe_c: str | None = None
    inv_freq: str | None = None  # (d_head/2) RoPE frequencies 1/base^(2k/d_head) (Llama's rotary_emb buffer)
    alibi_slopes: str | None = None  # (heads) ALiBi slopes

    def names(self) -> set[str]:
        keys = {k for k, _ in self.weights.values()} | {k for k, _ in self.biases.values()}
        tables = (self.rpe_bias, self.urpe_c, self.inv_freq, self.alibi_slopes)
        return keys | {self.out_weight, self.out_bias} | {k for k in tables if k}


def _mha_keys(state: TorchState, prefix: str) -> _AttentionKeys:
    """torch.nn.MultiheadAttention: packed in_proj_weight, or q/k/v_proj_weight (kdim/vdim modules)."""
    for extra in ("bias_k", "bias_v"):
        if prefix + extra in state:
            raise TorchImportError(
                f"{prefix}{extra}: MultiheadAttention(add_bias_kv=True) appends a learned key/value "
                "to every sequence; the IR has no such token. Train with add_bias_kv=False"
            )
    if prefix + "in_proj_weight" in state:
        packed = state[prefix + "in_proj_weight"]
        d = packed.shape[1]
        if packed.shape[0] != 3 * d:
            raise TorchImportError(f"{prefix}in_proj_weight: expected shape (3d, d), got {tuple(packed.shape)}")
        weights = {name: (prefix + "in_proj_weight", k * d) for k, name in enumerate("qkv")}
    else:
        d = state[prefix + "q_proj_weight"].shape[0]
        weights = {name: (f"{prefix}{name}_proj_weight", 0) for name in "qkv"}
    if prefix + "out_proj.weight" not in state:
        raise TorchImportError(f"{prefix}out_proj.weight is missing: expected a torch.nn.MultiheadAttention state dict")
    return _AttentionKeys(
        d,
        weights,
        {name: (prefix + "in_proj_bias", k * d) for k, name in enumerate("qkv")},
        prefix + "out_proj.weight",
        prefix + "out_proj.bias",
    )


def _experiment_keys(state: TorchState, prefix: str) -> _AttentionKeys:
    """verify_tf.experiments.modules.Attention: W_q/W_k/W_v/W_o Linear layers, optional rpe_bias / urpe_c."""
    d = state[prefix + "W_q.weight"].shape[1]
    return _AttentionKeys(
        d,
        {name: (f"{prefix}W_{name}.weight", 0) for name in "qkv"},
        {name: (f"{prefix}W_{name}.bias", 0) for name in "qkv"},
        prefix + "W_o.weight",
        prefix + "W_o.bias",
        prefix + "rpe_bias" if prefix + "rpe_bias" in state else None,
        prefix + "urpe_c" if prefix + "urpe_c" in state else None,
        prefix + "rotary_emb.inv_freq" if prefix + "rotary_emb.inv_freq" in state else None,
        prefix + "alibi_slopes" if prefix + "alibi_slopes" in state else None,
    )


def _tables(
    state: TorchState, key: str | None, heads: int, quantizer: _Quantizer, where: str
) -> list[RelativeTable | None]:
    if key is None:
        return [None] * heads
    rows = _matrix(state, key, quantizer, where=where)
    if len(rows) != heads or len(rows[0]) % 2 != 1:
        raise TorchImportError(
            f"{key}: expected shape (heads={heads}, 2*max_length-1), got ({len(rows)}, {len(rows[0])})"
        )
    return [RelativeTable(row) for row in rows]


def _rotary(state: TorchState, key: str | None, d_head: int, base: Fraction) -> Rotary | None:
    """RoPE with the exact frequencies base^(−2k/d_head), after checking that the state dict's float32 inv_freq
    are those (to float32 precision): the IR keeps the exact description, never the floats."""
    if key is None:
        return None
    stored = state[key].detach().to(torch.float64).cpu().tolist()
    rope = Rotary.standard(d_head, base, "half")  # Llama's rotate_half pairs k with k + d_head/2
    if len(stored) != d_head // 2:
        raise TorchImportError(
            f"{key}: expected {d_head // 2} frequencies for head dimension {d_head}, got {len(stored)}"
        )
    for k, value in enumerate(stored):
        expected = float(base) ** (-2 * k / d_head)  # only to compare with a float32 buffer: never a verdict
        if abs(value - expected) > 1e-6 * expected:
            raise TorchImportError(
                f"{key}[{k}] = {value} is not 1/base^(2k/d) = {expected:.9g} for base {fmt(base)}",
                hint="state the base the model was trained with: architecture: {rope-base: B}",
            )
    return rope


def _attention(
    state: TorchState,
    keys: _AttentionKeys,
    heads: int,
    scoring: str,
    causal: bool,
    quantizer: _Quantizer,
    layer: int,
    rope_base: Fraction = Fraction(10000),
) -> AttentionLayer:
    d = keys.width
    if d % heads:
        raise TorchImportError(f"{keys.out_weight}: embedding dimension {d} is not divisible by heads: {heads}")
    d_head = d // heads
    ir_prefix = f"layers[{layer}].attention"
    rpe = _tables(state, keys.rpe_bias, heads, quantizer, f"{ir_prefix}.rpe-bias")
    urpe = _tables(state, keys.urpe_c, heads, quantizer, f"{ir_prefix}.urpe-c")
    rope = _rotary(state, keys.inv_freq, d_head, rope_base)
    slopes: tuple[Fraction | None, ...] = (None,) * heads
    if keys.alibi_slopes is not None:
        slopes = _vector(state, keys.alibi_slopes, heads, quantizer, None, f"{ir_prefix}.alibi-slopes")
    positional = (
        "urpe"
        if keys.urpe_c
        else "rpe"
        if keys.rpe_bias
        else "rope"
        if rope
        else "alibi"
        if keys.alibi_slopes
        else "standard"
    )
    out_heads = []
    for h in range(heads):
        block = range(h * d_head, (h + 1) * d_head)
        where = f"{ir_prefix}.heads[{h}]"

        def rows(name: str) -> range:
            _, first = keys.weights[name]
            return range(first + block.start, first + block.stop)

        def bias(name: str) -> tuple[Fraction, ...]:
            key, first = keys.biases[name]
            return _vector(
                state,
                key,
                d_head,
                quantizer,
                range(first + block.start, first + block.stop),
                f"{where}.{ {'q': 'query', 'k': 'key', 'v': 'value'}[name] }-bias",
            )

        # torch divides the logits by sqrt(d_head): folded into W_Q and b_Q (module docstring)
        q_data = state[keys.weights["q"][0]].detach().to(torch.float64).cpu().tolist()
        query = tuple(
            tuple(quantizer.over_root(q_data[r][c], d_head, f"{where}.query[{i}][{c}]") for c in range(d))
            for i, r in enumerate(rows("q"))
        )
        q_bias_key, q_first = keys.biases["q"]
        if q_bias_key in state:
            q_bias = state[q_bias_key].detach().to(torch.float64).cpu().tolist()
            query_bias = tuple(
                quantizer.over_root(q_bias[q_first + i], d_head, f"{where}.query-bias[{k}]")
                for k, i in enumerate(block)
            )
        else:
            query_bias = tuple(Fraction(0) for _ in block)
        out_heads.append(
            Head(
                query=query,
                key=_matrix(state, keys.weights["k"][0], quantizer, rows("k"), None, f"{where}.key"),
                value=_matrix(state, keys.weights["v"][0], quantizer, rows("v"), None, f"{where}.value"),
                output=_matrix(state, keys.out_weight, quantizer, None, block, f"{where}.output"),
                query_bias=query_bias,
                key_bias=bias("k"),
                value_bias=bias("v"),
                scoring=scoring,
                causal=causal,
                positional=positional,
                rpe_bias=rpe[h],
                urpe_c=urpe[h],
                rope=rope,
                alibi=Alibi(slopes[h]) if slopes[h] is not None else None,
            )
        )
    output_bias = _vector(state, keys.out_bias, d, quantizer, None, f"{ir_prefix}.output-bias")
    return AttentionLayer(tuple(out_heads), output_bias, residual=True)


def _feed_forward(
    state: TorchState, first: str, second: str, quantizer: _Quantizer, consumed: set[str], layer: int
) -> FeedForward | None:
    """A Linear-ReLU-Linear feed-forward with residual from the Linear layers at ``first`` and ``second``."""
    w1, w2 = first + "weight", second + "weight"
    if w1 not in state and w2 not in state:
        return None
    if w1 not in state or w2 not in state:
        raise TorchImportError(
            f"{w1 if w1 not in state else w2} is missing: expected a Linear-ReLU-Linear feed-forward"
        )
    consumed.update({w1, w2, first + "bias", second + "bias"})
    where = f"layers[{layer}].feed-forward"
    m1 = _matrix(state, w1, quantizer, where=f"{where}.w1")
    m2 = _matrix(state, w2, quantizer, where=f"{where}.w2")
    return FeedForward(
        m1,
        _vector(state, first + "bias", len(m1), quantizer, where=f"{where}.b1"),
        m2,
        _vector(state, second + "bias", len(m2), quantizer, where=f"{where}.b2"),
        residual=True,
    )


@dataclass
class _Layer:
    """Where one encoder layer's tensors are: attention, the feed-forward Linears, the two LayerNorms."""

    attention: _AttentionKeys
    first: str | None  # the feed-forward's first and second Linear prefixes
    second: str | None
    attention_norm: str | None  # LayerNorm module prefixes (norm1 / norm2, norm_attention / norm_ffn)
    feed_forward_norm: str | None
    prefix: str  # the layer's own prefix, e.g. "encoder.layers.0."


def _layers(state: TorchState) -> list[_Layer]:
    """The encoder layers, in key order.

    ``<L>self_attn.`` + ``<L>linear1.`` / ``<L>linear2.`` / ``<L>norm1.`` / ``<L>norm2.`` (torch encoder layers,
    ExactEncoderLayer), a bare MultiheadAttention, and ``<L>attention.W_q.`` + ``<L>ffn.w1.`` / ``<L>ffn.w2.`` /
    ``<L>norm_attention.`` / ``<L>norm_ffn.`` (the experiments' modules).
    """
    found: dict[str, _Layer] = {}
    for key in state:
        for suffix in ("in_proj_weight", "q_proj_weight"):
            if key.endswith(suffix) and (key == suffix or key[: -len(suffix)].endswith(".")):
                prefix = key[: -len(suffix)]
                if prefix.endswith("self_attn."):
                    layer = prefix[: -len("self_attn.")]
                    found[prefix] = _Layer(
                        _mha_keys(state, prefix),
                        f"{layer}linear1.",
                        f"{layer}linear2.",
                        f"{layer}norm1.",
                        f"{layer}norm2.",
                        layer,
                    )
                else:
                    found[prefix] = _Layer(_mha_keys(state, prefix), None, None, None, None, prefix)
        if key == "attention.W_q.weight" or key.endswith(".attention.W_q.weight"):
            prefix = key[: -len("W_q.weight")]
            layer = prefix[: -len("attention.")]
            found[prefix] = _Layer(
                _experiment_keys(state, prefix),
                f"{layer}ffn.w1.",
                f"{layer}ffn.w2.",
                f"{layer}norm_attention.",
                f"{layer}norm_ffn.",
                layer,
            )
    return [found[p] for p in sorted(found, key=_natural)]


def _final_norm_prefix(layers: list[_Layer]) -> str:
    """Where nn.TransformerEncoder keeps its final norm: ``norm.`` beside the ``layers`` list."""
    match = re.match(r"^(.*?)[^.]+\.\d+\.$", layers[0].prefix) if layers else None
    return (match.group(1) if match else "") + "norm."


def _norm(
    state: TorchState, prefix: str | None, d: int, eps: Fraction, quantizer: _Quantizer, consumed: set[str], where: str
) -> LayerNorm | None:
    """A LayerNorm's weight (γ) and bias (β, zero when the module has bias=False), or None when absent."""
    if prefix is None or prefix + "weight" not in state:
        if prefix is not None and prefix + "bias" in state:
            raise TorchImportError(f"{prefix}bias has no {prefix}weight: expected a LayerNorm with elementwise_affine")
        return None
    weight = state[prefix + "weight"]
    if tuple(weight.shape) != (d,):
        raise TorchImportError(
            f"{prefix}weight: expected a LayerNorm over the width {d}, got shape {tuple(weight.shape)}"
        )
    consumed.update({prefix + "weight", prefix + "bias"})
    return LayerNorm(
        _vector(state, prefix + "weight", d, quantizer, where=f"{where}.gamma"),
        _vector(state, prefix + "bias", d, quantizer, where=f"{where}.beta"),
        eps,
    )


def _norm_modules(state: TorchState, prefixes: list[str]) -> list[str]:
    return sorted({p[:-1] for p in prefixes if p + "weight" in state or p + "bias" in state}, key=_natural)


def _refuse_unstated_norms(modules: list[str], architecture: dict[str, Any], layer_norms: bool) -> None:
    """LayerNorm is read only when the spec says how: ``layernorm: integer`` and, inside layers, ``norm-first``."""
    if not modules:
        return
    listed = f"{', '.join(modules[:4])}{', ...' if len(modules) > 4 else ''}"
    if architecture.get("layernorm", "refuse") != "integer":
        raise TorchImportError(
            f"LayerNorm ({listed}): verify-tf never approximates a component silently. State "
            "architecture.layernorm: integer to verify the fixed-point LayerNorm of docs/semantics.md (integer "
            "mean and variance, an integer square root, one rounded division) in place of torch's float one",
            "architecture: {heads: N, layernorm: integer, norm-first: false}  (norm-first: true for pre-LN models); "
            "arithmetic: {mode: fixed, ...}; or train verify_tf.experiments.exact_encoder.ExactEncoderLayer, which has "
            "no LayerNorm (docs/import.md)",
        )
    if layer_norms and architecture.get("norm-first") is None:
        raise TorchImportError(
            f"LayerNorm ({listed}): a state dict does not record where the norms sit; state "
            "architecture.norm-first: true (pre-LN, z + f(LN(z))) or false (post-LN, LN(z + f(z)), torch's default)",
            "nn.TransformerEncoderLayer(..., norm_first=False) is post-LN: write norm-first: false",
        )


def _rename(state: TorchState, names: dict[str, str] | None) -> TorchState:
    """Apply ``architecture.names`` ({torch's name: the model's name}): every key containing the model's name as
    whole dotted components gets torch's name there (``blocks.0.ff.0.weight`` -> ``blocks.0.linear1.weight``)."""
    if not names:
        return state
    pairs = sorted(
        (
            (role, custom.strip(".").split("."))
            for role, custom in names.items()
            if role in ROLE_NAMES and isinstance(custom, str) and custom.strip(".")
        ),
        key=lambda pair: -len(pair[1]),
    )
    used: set[str] = set()
    renamed: TorchState = {}
    for key, tensor in state.items():
        parts = key.split(".")
        for role, custom in pairs:
            at = next((i for i in range(len(parts) - len(custom) + 1) if parts[i : i + len(custom)] == custom), None)
            if at is not None:
                parts = parts[:at] + [role] + parts[at + len(custom) :]
                used.add(role)
                break
        new_key = ".".join(parts)
        if new_key in renamed:
            raise TorchImportError(f"architecture.names: two state dict entries become {new_key!r}")
        renamed[new_key] = tensor
    unused = [role for role, custom in pairs if role not in used]
    if unused:
        raise TorchImportError(
            f"architecture.names.{unused[0]}: {names[unused[0]]!r} names no module of the state dict",
            f"its modules: {', '.join(_modules(state)[:12])}",
        )
    return renamed


def _modules(state: TorchState) -> list[str]:
    return sorted({k.rsplit(".", 1)[0] if "." in k else k for k in state}, key=_natural)


def _name_hint(leftovers: list[str], state: TorchState, layers: list[_Layer]) -> str:
    """Guess which of torch's names the leftover modules stand for, from their shapes (a hint, never applied)."""
    guesses: dict[str, str] = {}
    prefixes = []
    for layer in layers:
        if layer.first is None and layer.prefix:  # a bare MultiheadAttention inside a block: its parent is the layer
            parent, _, own = layer.prefix[:-1].rpartition(".")
            prefixes.append(parent + "." if parent else "")
            guesses.setdefault("self_attn", own)
        else:
            prefixes.append(layer.prefix)
    prefixes.sort(key=len, reverse=True)
    seen_layers: dict[str, list[tuple[str, tuple[int, ...]]]] = {}
    top: list[tuple[str, tuple[int, ...]]] = []
    for module in sorted({k.rsplit(".", 1)[0] for k in leftovers if "." in k}, key=_natural):
        weight = state.get(module + ".weight")
        shape = tuple(weight.shape) if weight is not None else ()
        owner = next((p for p in prefixes if p and module.startswith(p)), None)
        if owner is not None:
            seen_layers.setdefault(owner, []).append((module[len(owner) :], shape))
        else:
            top.append((module, shape))
    if seen_layers:
        first = seen_layers[min(seen_layers, key=_natural)]
        linears = [name for name, shape in first if len(shape) == 2]
        norms = [name for name, shape in first if len(shape) == 1]
        if len(linears) == 2:
            guesses.update(linear1=linears[0], linear2=linears[1])
        guesses.update({role: name for role, name in zip(("norm1", "norm2"), norms)})
    for module, shape in top:
        if len(shape) == 1:
            guesses.setdefault("norm", module)
        elif len(shape) == 2 and "emb" in module.lower():
            guesses.setdefault("positional" if "pos" in module.lower() else "embedding", module)
        elif len(shape) == 2:
            guesses.setdefault("readout", module)
    base = (
        f"the importer reads torch's module names ({', '.join(ROLE_NAMES)}); map a model's own names onto "
        "them with architecture.names"
    )
    if not guesses:
        return base
    mapping = ", ".join(f"{role}: {name}" for role, name in guesses.items())
    return f"{base}, e.g. architecture: {{heads: N, names: {{{mapping}}}}} (guessed from the shapes: check it)"


def _refuse_leftovers(state: TorchState, consumed: set[str], layers: list[_Layer]) -> None:
    leftovers = sorted((k for k in state if k not in consumed), key=_natural)
    if leftovers:
        shown = ", ".join(f"{k} {tuple(state[k].shape)}" for k in leftovers[:6])
        raise TorchImportError(
            f"unrecognised state dict entries {shown}{', ...' if len(leftovers) > 6 else ''}: "
            "the importer maps attention, feed-forward, LayerNorm, embedding, positional and "
            "readout weights only, and refuses to ignore anything else (docs/import.md)",
            _name_hint(leftovers, state, layers),
        )


def _load_safetensors(path: Path) -> TorchState:
    """A ``.safetensors`` state dict (``safetensors.torch.save_file``): a header and raw tensors, no code at all."""
    from safetensors import SafetensorError, safe_open  # a dependency of the core (builders/files.py)

    try:
        with safe_open(str(path), framework="pt") as handle:
            if ARCH_KEY in (handle.metadata() or {}):
                raise TorchImportError(f"{path.name} is a verify-tf model file: load it with model: {{file: ...}}")
            keys = list(handle.keys())
            too_many = weight_count_problem({key: tuple(handle.get_slice(key).get_shape()) for key in keys})
            if too_many is not None:
                raise TorchImportError(f"{path.name}: {too_many}")
            return {key: handle.get_tensor(key) for key in keys}
    except (SafetensorError, OSError) as exc:
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
        raise TorchImportError(f"cannot read {path.name} as safetensors: {first[:200]}") from None


def load_state_dict(path: str | Path) -> TorchState:
    """Tensors only: a ``.safetensors`` file, or ``torch.load(weights_only=True)``, which never unpickles objects
    (that could run code from the file)."""
    name = Path(path).name
    problem = model_file_problem(Path(path))
    if problem is not None:
        raise TorchImportError(f"{name}: {problem}")
    if Path(path).suffix.lower() == ".safetensors":
        return _load_safetensors(Path(path))
    try:
        state = torch.load(Path(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # a corrupt file or a pickled object weights_only refuses: say so plainly
        text = strip_terminal_codes(str(exc))
        refusal = pickle_refusal(name, exc)
        if refusal is not None:  # torch.save(model), or any other object: never print torch's advice to unpickle
            raise TorchImportError(refusal, SAFE_ALTERNATIVES) from None
        first = next((line.strip() for line in text.splitlines() if line.strip()), "")
        raise TorchImportError(f"cannot read {name} as a state dict: {type(exc).__name__}: {first[:200]}") from None
    if isinstance(state, nn.Module):  # cannot happen with weights_only, kept as a clear message
        raise TorchImportError("the file holds a module, not a state dict: save model.state_dict()")
    if isinstance(state, dict) and "__verify_tf__" in state:
        raise TorchImportError(f"{name} is a verify-tf model file: load it with model: {{file: ...}}")
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise TorchImportError(
            f"{name} is not a state dict of tensors", 'save the weights with torch.save(model.state_dict(), "model.pt")'
        )
    too_many = weight_count_problem({key: tuple(value.shape) for key, value in state.items()})
    if too_many is not None:
        raise TorchImportError(f"{name}: {too_many}")
    return dict(state)


def import_state_dict(
    state: TorchState, architecture: dict[str, Any], quantize: dict[str, Any] | None, name: str = "torch model"
) -> Model:
    """Map a state dict onto the IR (see the module docstring); raises TorchImportError naming the problem."""
    activation = architecture.get("activation", "relu")
    if activation == "gelu":
        raise TorchImportError(
            "activation 'gelu': torch's GELU (x·Φ(x)) is not exactly representable, and verify-tf "
            "never approximates a component silently",
            "state activation: i-gelu to verify I-BERT's integer polynomial i-GELU in its place "
            "(the largest deviation from GELU over the domain is reported; docs/import.md)",
            key="architecture.activation",
        )
    _refuse_unreadable_tensors(state)
    state = _rename(state, architecture.get("names"))
    digest = state_digest(state)  # under torch's names: the same float model whatever its modules were called
    heads = architecture["heads"]
    largest, largest_at = _largest_weight(state)
    bits, frac = (quantize["bits"], quantize["frac"]) if quantize else (None, None)
    quantizer = _Quantizer(bits, frac, largest, largest_at)
    consumed: set[str] = set()
    layers = _layers(state)
    if not layers:
        raise TorchImportError(
            "no attention weights found in the state dict (expected torch.nn.MultiheadAttention's "
            "in_proj_weight, or the experiments' attention.W_q.weight)",
            _name_hint(sorted(state, key=_natural), state, []),
        )
    final_prefix = _final_norm_prefix(layers)
    layer_norms = _norm_modules(
        state, [p for layer in layers for p in (layer.attention_norm, layer.feed_forward_norm) if p is not None]
    )
    _refuse_unstated_norms(layer_norms + _norm_modules(state, [final_prefix]), architecture, bool(layer_norms))
    eps = Fraction(str(architecture.get("layernorm-eps") or DEFAULT_LAYERNORM_EPS))
    norm_first = bool(architecture.get("norm-first"))
    blocks = []
    for index, layer in enumerate(layers):
        keys = layer.attention
        consumed.update(keys.names())
        attention = _attention(
            state,
            keys,
            heads,
            architecture["scoring"],
            architecture["causal"],
            quantizer,
            index,
            Fraction(architecture.get("rope-base") or 10000),
        )
        d = keys.width
        norm = _norm(state, layer.attention_norm, d, eps, quantizer, consumed, f"layers[{index}].attention.norm")
        attention = AttentionLayer(attention.heads, attention.output_bias, True, norm, norm_first)
        ff = None
        if layer.first is not None:
            ff = _feed_forward(state, layer.first, layer.second, quantizer, consumed, index)
            ff_norm = _norm(
                state, layer.feed_forward_norm, d, eps, quantizer, consumed, f"layers[{index}].feed-forward.norm"
            )
            if ff is None and ff_norm is not None:
                raise TorchImportError(
                    f"{layer.feed_forward_norm}weight: a feed-forward LayerNorm without a feed-forward"
                )
            if ff is not None:
                ff = FeedForward(ff.w1, ff.b1, ff.w2, ff.b2, True, activation, ff_norm, norm_first)
        blocks.append(Block(attention, ff))
    d = len(blocks[0].attention.output_bias)
    final_norm = _norm(state, final_prefix, d, eps, quantizer, consumed, "final-norm")
    tokens = _tokens(state, architecture, quantizer, consumed, layers, d)
    positional = None
    for key in ("positional.weight", "position_embedding"):  # ExactEncoder, the experiments' TinyTransformer
        if key in state:
            consumed.add(key)
            positional = _matrix(state, key, quantizer, where="positional-encoding")
    notes = []
    if "readout.weight" in state:
        readout = _readout(state, architecture, quantizer, consumed, notes)
    else:
        readout = tuple(Fraction(1 if c == 0 else 0) for c in range(d))
        notes.append("no readout.weight in the state dict: readout u = e1 (the first coordinate)")
    _refuse_leftovers(state, consumed, layers)
    quantization = quantizer.summary()
    if quantization is not None:
        notes.insert(0, quantization.describe())
    notes += _reading_notes(architecture, d, layer_norms, final_prefix, final_norm, eps, blocks)
    model = Model(
        tokens=tokens,
        dim=d,
        blocks=tuple(blocks),
        readout=readout,
        positional_encoding=positional,
        final_norm=final_norm,
        name=name,
        notes=tuple(notes),
        runs_as=torch_runs_as(digest),
        quantization=quantization,
    )
    return replace(model, reading=torch_reading(model))


def _tokens(
    state: TorchState, architecture: dict[str, Any], quantizer: _Quantizer, consumed: set[str], layers: list, d: int
) -> Any:
    """The tokens: the embedding table's rows named by ``architecture.alphabet`` (with its BOS), or grid tokens
    of width ``d`` when the state dict has no embedding table."""
    alphabet = architecture.get("alphabet")
    if "embedding.weight" in state:
        consumed.add("embedding.weight")
        table = _matrix(state, "embedding.weight", quantizer, where="embedding")
        if not alphabet:
            raise TorchImportError(
                f"the state dict has an embedding table with {len(table)} rows: name its symbols "
                "in order with architecture.alphabet"
            )
        if len(alphabet) != len(table):
            raise TorchImportError(
                f"architecture.alphabet has {len(alphabet)} symbols but the embedding table has {len(table)} rows"
            )
        bos = architecture.get("bos")
        if bos is not None and bos not in alphabet:
            raise TorchImportError(f"architecture.bos {bos!r} is not one of the alphabet's symbols")
        return AlphabetTokens(tuple(alphabet), table, bos)
    else:
        if alphabet:
            raise TorchImportError(
                "architecture.alphabet is given but the state dict has no embedding.weight",
                _name_hint(sorted(k for k in state if k not in consumed), state, layers),
            )
        return GridTokens(d)


def _reading_notes(
    architecture: dict[str, Any],
    d: int,
    layer_norms: list[str],
    final_prefix: str,
    final_norm: Any,
    eps: Fraction,
    blocks: list[Block],
) -> list[str]:
    """What the import's reading of the torch model says of itself: the logit scale folded into W_Q, softmax
    and LayerNorm as the fixed-point ones, i-GELU in GELU's place, the head count as stated."""
    heads, activation, norm_first = (
        architecture["heads"],
        architecture.get("activation", "relu"),
        bool(architecture.get("norm-first")),
    )
    notes: list[str] = []
    d_head = d // heads
    if d_head == 1:
        notes.append("d_head = 1: torch's logit scale 1/sqrt(d_head) is 1, nothing to fold")
    elif math.isqrt(d_head) ** 2 == d_head:
        notes.append(f"torch's logit scale 1/sqrt({d_head}) = 1/{math.isqrt(d_head)} folded into W_Q and b_Q exactly")
    else:
        notes.append(
            f"torch's logit scale 1/sqrt({d_head}) (irrational) folded into W_Q and b_Q and rounded by quantize"
        )
    if architecture["scoring"] == "softmax":
        notes.append("softmax is verified as the spec's fixed-point softmax (docs/semantics.md), not torch's float one")
    norms = layer_norms + ([final_prefix[:-1]] if final_norm is not None else [])
    if norms:
        placement = ("pre-LN, z + f(LN(z))" if norm_first else "post-LN, LN(z + f(z))") if layer_norms else "final only"
        notes.append(
            f"LayerNorm ({', '.join(norms[:4])}{', ...' if len(norms) > 4 else ''}; {placement}; eps = "
            f"{eps}) is verified as the fixed-point LayerNorm of docs/semantics.md (integer square root), "
            "not torch's float one"
        )
    if activation == "i-gelu" and any(b.feed_forward is not None for b in blocks):
        notes.append(
            "feed-forward activation i-GELU (I-BERT's integer polynomial) stands in for torch's GELU as "
            "stated (architecture.activation: i-gelu)"
        )
    notes.append(
        f"heads: {heads} as stated (d_head = {d // heads}): a state dict does not record the head count, "
        "and a wrong one gives a different model (docs/import.md)"
    )
    return notes


def _readout(
    state: TorchState, architecture: dict[str, Any], quantizer: _Quantizer, consumed: set[str], notes: list[str]
) -> tuple[Fraction, ...]:
    """The readout u: one row of readout.weight; a non-zero bias is refused unless the spec drops it explicitly."""
    consumed.update({"readout.weight", "readout.bias"})
    rows = state["readout.weight"].shape[0]
    row = architecture.get("readout-row")
    if row is None and rows > 1:
        raise TorchImportError(
            f"readout.weight has {rows} output rows: choose the one to verify with architecture.readout-row"
        )
    row = row or 0
    if row >= rows:
        raise TorchImportError(f"architecture.readout-row {row} is out of range: readout.weight has {rows} rows")
    weights = _matrix(state, "readout.weight", quantizer, range(row, row + 1), where="readout")[0]
    if "readout.bias" in state:
        bias = Fraction(float(state["readout.bias"][row]))
        if bias != 0 and architecture.get("readout-bias", "refuse") != "drop":
            raise TorchImportError(
                f"readout.bias[{row}] = {bias}: the readout q = u·z has no bias. Train with "
                "bias=False, or state architecture.readout-bias: drop to verify q without it "
                "(differences between readouts are unchanged)"
            )
        if bias != 0:
            notes.append(
                f"readout.bias[{row}] = {float(bias):.6g} dropped as stated (architecture.readout-bias: "
                "drop): q = u·z is the torch output minus this constant"
            )
    return weights


def import_torch_model(path: str | Path, architecture: dict[str, Any] | None, quantize: dict[str, Any] | None) -> Model:
    if architecture is None:
        raise TorchImportError(
            "a torch state dict needs 'architecture' (at least heads: N; the head count is not stored in a state dict)"
        )
    return import_state_dict(load_state_dict(path), architecture, quantize, name=Path(path).stem)

"""The quantized reading of a checkpoint (``reading: quantized``): its float model mapped onto the fixed-point IR.

As the torch importer maps a state dict (docs/import.md, "What is verified"), layer by layer from the float model of
``floats.transformer`` (GPT-2, BERT, nanoGPT):

* every weight rounded to the nearest multiple of 2^-frac (``quantize: {bits, frac}``, required), the largest error
  recorded exactly and carried by every verdict (``Model.quantization``); the logit scale 1/sqrt(d_h) folded into
  W_Q and b_Q (irrational unless d_h is a perfect square: rounded by integer square roots);
* the embedding table (BERT: each token's row plus the type-0 row, summed exactly before rounding) and the learned
  positions; a BOS token as the IR's ``bos``;
* LayerNorm as the fixed-point LayerNorm of docs/semantics.md (``layernorm: integer``), pre- or post-LN as the model
  places it, the final norm as ``final_norm``, BERT's embedding norm as a block whose feed-forward adds exactly zero
  (z + 0 = z) before its post-LN norm; GELU (erf or tanh form) as I-BERT's i-GELU (``i-GELU for GELU``), ReLU as is;
  softmax as the fixed-point softmax (an exp table, one rounded division); causal masks as causal heads;
* the readout: the LM head's row (a difference of two rows exactly), its bias dropped (noted: q = logit − bias); BERT's
  MLM transform (dense, GELU, LayerNorm) as a non-residual feed-forward with the identity as W2 and a post-LN norm.

What the IR cannot represent is refused by name at ``model.reading``: RMSNorm, SwiGLU and SiLU (Llama and its
family), RoPE's float32 angle tables differ from the IR's exact rotation (the IR has RoPE, but the Llama layout needs
RMSNorm anyway). The verdicts say ``fixed point p.f quantization of a float32 <architecture> checkpoint: ..., NOT the
model as run`` (``torch_reading.checkpoint_reading``).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ..floats.transformer import MLP, Attention, FloatTransformer, Norm, Projection
from ..ir import AlphabetTokens, AttentionLayer, Block, FeedForward, Head, LayerNorm, Model
from .checkpoint_files import CheckpointError
from .quantize import _Quantizer

READING_KEY = "reading"


def _refuse(what: str) -> CheckpointError:
    return CheckpointError(
        f"the quantized reading: {what} has no fixed-point form in the IR (docs/semantics.md)",
        key=READING_KEY,
        hint="reading: float (the default) checks the model as it runs",
    )


def _largest(network: FloatTransformer) -> tuple[Fraction, str]:
    """max |w| over the network's weights, and where (for the quantizer's overflow hint)."""
    best, where = Fraction(0), ""
    arrays: list[tuple[str, np.ndarray]] = [("embedding", network.token_embed)]
    if network.position_embed is not None:
        arrays.append(("positions", network.position_embed))
    for index, layer in enumerate(network.layers):
        at = f"layers[{index}]"
        for h, projection in enumerate(layer.attention.query):
            arrays.append((f"{at}.attention.heads[{h}].query", projection.weight))
        arrays += [(f"{at}.attention.output", layer.attention.output.weight), (f"{at}.mlp.up", layer.mlp.up.weight)]
        arrays.append((f"{at}.mlp.down", layer.mlp.down.weight))
    for name, array in arrays:
        if array.size:
            flat = np.abs(array.astype(np.float64)).reshape(-1)
            index = int(np.argmax(flat))
            if Fraction(float(flat[index])) > best:
                best, where = Fraction(float(flat[index])), f"{name}[{index}]"
    return best, where


class _Rounding:
    """The quantizer with the IR's shapes: matrices as tuples of rows, each weight rounded where it is named."""

    def __init__(self, quantizer: _Quantizer) -> None:
        self.q = quantizer

    def vector(self, values: np.ndarray, where: str) -> tuple[Fraction, ...]:
        return tuple(self.q.exact(float(v), f"{where}[{i}]") for i, v in enumerate(np.asarray(values).tolist()))

    def matrix(self, rows: np.ndarray, where: str) -> tuple[tuple[Fraction, ...], ...]:
        return tuple(self.vector(row, f"{where}[{i}]") for i, row in enumerate(np.asarray(rows)))

    def scaled_matrix(
        self, rows: np.ndarray, divisor: int, scale: Fraction, where: str
    ) -> tuple[tuple[Fraction, ...], ...]:
        return tuple(
            tuple(self.scaled(float(v) * float(scale), divisor, f"{where}[{i}][{j}]") for j, v in enumerate(row))
            for i, row in enumerate(np.asarray(rows).tolist())
        )

    def scaled(self, value: float, divisor: int, where: str) -> Fraction:
        """value / sqrt(divisor) (``_Quantizer.over_root``)."""
        return self.q.over_root(value, divisor, where)


def _norm(norm: Norm, rounding: _Rounding, where: str) -> LayerNorm:
    if norm.kind != "layer":
        raise _refuse(f"{where}: RMSNorm")
    return LayerNorm(rounding.vector(norm.weight, f"{where}.gamma"), rounding.vector(norm.bias, f"{where}.beta"),
                     Fraction(repr(norm.eps)))  # fmt: skip


def _activation(kind: str, where: str) -> str:
    if kind == "relu":
        return "relu"
    if kind in ("gelu-erf", "gelu-tanh"):
        return "i-gelu"
    raise _refuse(f"{where}: the activation {kind}")


def _heads(attention: Attention, rounding: _Rounding, where: str) -> tuple[Head, ...]:
    if attention.rope is not None:
        raise _refuse(f"{where}: RoPE with float32 angle tables")
    if attention.scale.denominator != 1 or attention.scale.numerator != 1:
        raise _refuse(f"{where}: a logit scale other than 1/sqrt(head_dim)")
    heads = []
    for h, query in enumerate(attention.query):
        group = attention.group(h)
        key, value = attention.key[group], attention.value[group]
        rows = attention.output.weight[h * attention.head_dim : (h + 1) * attention.head_dim]  # (d_h, d)
        at = f"{where}.heads[{h}]"
        heads.append(
            Head(
                query=rounding.scaled_matrix(query.weight.T, attention.head_dim, Fraction(1), f"{at}.query"),
                key=rounding.matrix(key.weight.T, f"{at}.key"),
                value=rounding.matrix(value.weight.T, f"{at}.value"),
                output=rounding.matrix(rows.T, f"{at}.output"),
                query_bias=tuple(
                    rounding.scaled(float(b), attention.head_dim, f"{at}.query-bias[{i}]")
                    for i, b in enumerate(query.bias.tolist())
                ),
                key_bias=rounding.vector(key.bias, f"{at}.key-bias"),
                value_bias=rounding.vector(value.bias, f"{at}.value-bias"),
                scoring="softmax",
                causal=attention.causal,
            )
        )
    return tuple(heads)


def _feed_forward(mlp: MLP, norm: LayerNorm | None, first: bool, rounding: _Rounding, where: str) -> FeedForward:
    if mlp.gate is not None:
        raise _refuse(f"{where}: SwiGLU (a gated MLP)")
    return FeedForward(
        w1=rounding.matrix(mlp.up.weight.T, f"{where}.w1"),
        b1=rounding.vector(mlp.up.bias, f"{where}.b1"),
        w2=rounding.matrix(mlp.down.weight.T, f"{where}.w2"),
        b2=rounding.vector(mlp.down.bias, f"{where}.b2"),
        activation=_activation(mlp.activation, where),
        norm=norm,
        norm_first=first,
    )


def _zero_feed_forward(width: int, norm: LayerNorm) -> FeedForward:
    """z + 0 then LN: BERT's embedding LayerNorm as a block (one hidden unit, every weight zero)."""
    zero = Fraction(0)
    return FeedForward(((zero,) * width,), (zero,), tuple((zero,) for _ in range(width)), (zero,) * width, norm=norm)


def _transform(transform: tuple[Projection, str, Norm], rounding: _Rounding, width: int) -> FeedForward:
    """BERT's MLM transform LN(act(dense(z))): a non-residual feed-forward whose W2 is the identity."""
    dense, kind, norm = transform
    identity = tuple(tuple(Fraction(int(i == j)) for j in range(width)) for i in range(width))
    return FeedForward(
        w1=rounding.matrix(dense.weight.T, "readout.transform.w1"),
        b1=rounding.vector(dense.bias, "readout.transform.b1"),
        w2=identity,
        b2=(Fraction(0),) * width,
        residual=False,
        activation=_activation(kind, "readout.transform"),
        norm=_norm(norm, rounding, "readout.transform.norm"),
        norm_first=False,
    )


def quantized(network: FloatTransformer, quantize: dict[str, Any] | None, name: str) -> Model:
    """``reading: quantized``: the IR (module docstring); ``quantize`` is required (a fixed-point grid)."""
    if quantize is None:
        raise CheckpointError(
            "reading: quantized needs quantize: {bits, frac} (the grid every weight is rounded to)",
            key=READING_KEY,
            hint="e.g. quantize: {bits: 16, frac: 10} and arithmetic: {mode: fixed, bits: 16, frac: 10}",
        )
    return quantized_model(network, quantize, name)


def quantized_model(network: FloatTransformer, quantize: dict[str, Any], name: str) -> Model:
    """The IR of the module docstring, with its notes (what was assumed and dropped)."""
    if not network.layers:
        raise _refuse("a model without layers")
    largest, at = _largest(network)
    rounding = _Rounding(_Quantizer(quantize["bits"], quantize["frac"], largest, at))
    width = network.width
    rows = network.token_embed.astype(np.float64)
    if network.token_type is not None:  # exact sums of two float32s (a double holds them), then rounded
        rows = rows + network.token_type.astype(np.float64)
    tokens = AlphabetTokens(network.symbols, rounding.matrix(rows, "embedding"), network.bos)
    positions = None if network.position_embed is None else rounding.matrix(network.position_embed, "positions")
    blocks = []
    if network.embed_norm is not None:
        blocks.append(Block(feed_forward=_zero_feed_forward(width, _norm(network.embed_norm, rounding, "embed-norm"))))
    for index, layer in enumerate(network.layers):
        at = f"layers[{index}]"
        first = layer.placement == "pre"
        attention_norm = None if layer.attention_norm is None else _norm(layer.attention_norm, rounding, f"{at}.norm")
        attention = AttentionLayer(
            heads=_heads(layer.attention, rounding, f"{at}.attention"),
            output_bias=rounding.vector(layer.attention.output.bias, f"{at}.attention.output-bias"),
            norm=attention_norm,
            norm_first=first,
        )
        mlp_norm = None if layer.mlp_norm is None else _norm(layer.mlp_norm, rounding, f"{at}.feed-forward.norm")
        blocks.append(Block(attention, _feed_forward(layer.mlp, mlp_norm, first, rounding, f"{at}.feed-forward")))
    readout = network.readout
    notes = []
    if readout.kind == "hidden":
        u = tuple(Fraction(int(i == readout.coordinate)) for i in range(width))
    else:
        if readout.transform is not None:
            blocks.append(Block(feed_forward=_transform(readout.transform, rounding, width)))
        column = readout.rows[:, 0].astype(np.float64) - (readout.rows[:, 1] if readout.kind == "difference" else 0)
        u = tuple(Fraction(float(v)) for v in column.tolist())  # exact: a readout is a measurement, not a weight
        bias = Fraction(float(readout.bias[0])) - (
            Fraction(float(readout.bias[1])) if readout.kind == "difference" else 0
        )
        if bias:
            notes.append(f"readout bias {float(bias):.6g} dropped: the quantized reading's q is the logit minus it")
    final = None if network.final_norm is None else _norm(network.final_norm, rounding, "final-norm")
    model = Model(
        tokens=tokens,
        dim=width,
        blocks=tuple(blocks),
        readout=u,
        positional_encoding=positions,
        final_norm=final,
        name=name,
        notes=tuple(notes),
        runs_as=f"float32 {network.architecture} checkpoint (sha256 {network.digest[:16]})",
        quantization=rounding.q.summary(),
    )
    return model

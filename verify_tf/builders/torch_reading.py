"""The reading of an imported torch model (docs/semantics.md, "Readings"), in words; torch is not imported here.

A torch model runs in float32 as it was trained: float32 weights, float32 softmax, LayerNorm and GELU. verify-tf
proves things about a reading of it: its weights rounded to a fixed point (``quantize``) or taken exactly, under
the spec's arithmetic (each step floored to ``frac`` bits and saturated, or exact rationals), with the attention
normalised as stated (the fixed-point softmax of the exp table, hardmax or uniform), the fixed-point LayerNorm
(integer square root) and I-BERT's i-GELU where stated. Every verdict states this reading next to its status,
and that it is not the model as run: ``proved (exhaustive; fixed point 24.13 quantization of a float32 torch
model: weights to nearest, steps floored, fixed-point softmax, NOT the model as run)``.

The importer (``torch_import``) sets ``Model.runs_as`` (``torch_runs_as``: the state dict's digest) and a reading
without the arithmetic; the spec loader, once it knows the arithmetic, states it (``with_arithmetic``).
"""

from __future__ import annotations

from dataclasses import replace

from ..ir import Model
from ..semantics import Arithmetic, Fixed

RUNS_AS = "float32 torch model as trained"


def torch_runs_as(digest: str) -> str:
    """How an imported torch model runs, naming the state dict by its sha256 (so cache keys differ by source)."""
    return f"{RUNS_AS} (state dict sha256 {digest[:16]})"


def is_torch_import(model: Model) -> bool:
    return model.runs_as.startswith(RUNS_AS)


def is_checkpoint_quantized(model: Model) -> bool:
    """A checkpoint's quantized reading (``hf_quantized``): runs as a float32 checkpoint, its IR quantized."""
    return model.quantization is not None and model.runs_as.startswith("float32 ") and " checkpoint " in model.runs_as


def _source(model: Model) -> str:
    """How the float model is named in the reading: "torch model", or the checkpoint's "GPT-2 checkpoint"."""
    if is_torch_import(model):
        return "torch model"
    return model.runs_as.removeprefix("float32 ").split(" (", 1)[0]


def torch_reading(model: Model, arithmetic: Arithmetic | None = None) -> str:
    """What the IR computes of the float32 torch model, under ``arithmetic`` (None: not known yet)."""
    q = model.quantization
    heads = [h for b in model.blocks if b.attention is not None for h in b.attention.heads]
    if isinstance(arithmetic, Fixed):
        head = f"fixed point {arithmetic.bits}.{arithmetic.frac}"
        if q is not None and (q.bits, q.frac) == (arithmetic.bits, arithmetic.frac):
            head += f" quantization of a float32 {_source(model)}"
        else:
            head += f" reading of a float32 {_source(model)}"
    elif arithmetic is None:
        head = (
            f"quantized reading of a float32 {_source(model)}"
            if q is not None
            else f"reading of a float32 {_source(model)}"
        )
    else:
        head = f"exact rational reading of a float32 {_source(model)}"
    said = []
    if q is None:
        said.append("its float32 weights exactly")
    elif isinstance(arithmetic, Fixed) and (q.bits, q.frac) == (arithmetic.bits, arithmetic.frac):
        said.append("weights to nearest")
    else:
        said.append(f"weights to nearest {q.bits}.{q.frac}")
    if isinstance(arithmetic, Fixed):
        said.append("steps floored")
    scorings = sorted({h.scoring for h in heads})
    said += ["fixed-point softmax" if s == "softmax" else f"{s} attention" for s in scorings]
    norms = [b.attention.norm for b in model.blocks if b.attention] + [
        b.feed_forward.norm for b in model.blocks if b.feed_forward
    ]
    if any(n is not None for n in [*norms, model.final_norm]):
        said.append("fixed-point LayerNorm")
    if any(b.feed_forward is not None and b.feed_forward.activation == "i-gelu" for b in model.blocks):
        said.append("i-GELU for GELU")
    return f"{head}: {', '.join(said)}"


def with_arithmetic(model: Model, arithmetic: Arithmetic) -> Model:
    """An imported torch model's (or a checkpoint's quantized) reading with the spec's arithmetic stated; any other
    model unchanged."""
    if not is_torch_import(model) and not is_checkpoint_quantized(model):
        return model
    return replace(model, reading=torch_reading(model, arithmetic))

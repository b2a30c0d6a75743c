"""Model source ``torch``: a PyTorch state dict (``model: {torch: model.pt, architecture: ..., quantize: ...}``).

Its schema (what a state dict does not say about the model: ``TORCH_ARCHITECTURE``; docs/import.md) and its build,
which imports the importer (``torch_import``, or ``torch_float`` for ``reading: float``) and with it torch, an
optional dependency: without torch the spec is skipped, naming the extra (``MissingDependency``).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ..ir import SCORINGS, Model
from ..schema.dsl import Boolean, Context, Field, FilePath, Integer, ListOf, Number, Obj, String, join
from ..schema.errors import TORCH_INSTALL, MissingDependency
from ..schema.yamlnodes import Node
from . import TORCH_ROLE_NAMES
from .sources import QUANTIZE, ModelSource, check_quantize

TORCH_READINGS = ("quantized", "float")  # architecture.reading of a torch import (docs/import.md)

TORCH_ARCHITECTURE = Obj(
    {
        "heads": Field(
            Integer("attention heads per layer (a state dict does not store it)", minimum=1, maximum=64), required=True
        ),
        "scoring": Field(String("how the imported heads normalise logits", SCORINGS), default="softmax"),
        "causal": Field(Boolean("the model was trained with a causal mask"), default=False),
        "rope-base": Field(
            Number("RoPE: frequencies base^(-2k/d_head), checked against the state dict's inv_freq", positive=True),
            default=Fraction(10000),
        ),
        "activation": Field(
            String(
                "feed-forward activation: relu, or i-gelu (I-BERT's integer polynomial) for a "
                "model trained with GELU; gelu itself is refused",
                ("relu", "i-gelu", "gelu"),
            ),
            default="relu",
        ),
        "layernorm": Field(
            String(
                "LayerNorm in the state dict: refuse it, or verify the fixed-point integer LayerNorm "
                "of docs/semantics.md",
                ("refuse", "integer"),
            ),
            default="refuse",
        ),
        "norm-first": Field(
            Boolean(
                "where the layers' norms sit: true pre-LN z + f(LN(z)), false post-LN LN(z + f(z)) "
                "(torch's norm_first; a state dict does not record it)"
            )
        ),
        "layernorm-eps": Field(Number("LayerNorm eps (torch's default 1e-5; a state dict does not record it)")),
        "names": Field(
            Obj(
                {
                    role: Field(String(f"the model's name for torch's {role!r} module, e.g. ff.0"))
                    for role in TORCH_ROLE_NAMES
                },
                "the model's own module names for the ones the importer reads (docs/import.md)",
            )
        ),
        "alphabet": Field(ListOf(String(), "symbols of the rows of embedding.weight, in order", min_length=1)),
        "bos": Field(String("a symbol of the alphabet prepended to every input")),
        "readout-row": Field(Integer("the row of readout.weight to verify (when it has several)", minimum=0)),
        "readout-bias": Field(
            String("a non-zero readout.bias is refused unless dropped explicitly", ("refuse", "drop")), default="refuse"
        ),
        "reading": Field(
            String(
                "which reading crasp-equivalence proves: quantized (the fixed-point IR of the weights) or float "
                "(the float32 model as trained, through an exact enclosure of every float32 evaluation; the "
                "experiments' TinyTransformer; docs/semantics.md §7)",
                TORCH_READINGS,
            ),
            default="quantized",
        ),
    },
    "what a torch state dict does not say about the model (docs/import.md)",
)


def _torch_model(section: dict[str, Any], node: Node, ctx: Context, path: str) -> Model:
    """``model: {torch: model.pt, architecture: ..., quantize: ...}``: a PyTorch state dict (docs/import.md)."""
    try:  # torch is an optional dependency: say which extra installs it
        from .torch_import import import_torch_model
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] != "torch":
            raise
        raise MissingDependency(
            "a torch state dict needs PyTorch, which is not installed",
            package="torch",
            install=TORCH_INSTALL,
            file=ctx.file,
            line=node.line,
            path=join(path, "torch"),
        ) from None
    check_quantize(section["quantize"], ctx, path)
    architecture = section["architecture"]
    if architecture is not None and architecture.get("reading") == "float":
        from .torch_float import import_float_reading

        return import_float_reading(section["torch"], architecture, section["quantize"])
    return import_torch_model(section["torch"], architecture, section["quantize"])


SOURCE = ModelSource(
    key="torch",
    fields={
        "torch": Field(FilePath("a PyTorch state dict (.pt) of MultiheadAttention layers (docs/import.md)")),
        "architecture": Field(TORCH_ARCHITECTURE),
        "quantize": Field(QUANTIZE),
    },
    build=_torch_model,
    label="a torch source",
    usage="write model: {torch: model.pt, architecture: {heads: N}, quantize: {bits: 16, frac: 8}}",
    example="`torch: model.pt` (a state dict)",
)

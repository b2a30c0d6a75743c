"""Model source ``tracr``: a tracr export (``model: {tracr: export.json, snap: ..., attention: ..., quantize: ...}``).

Its schema and its build, which imports the importer (``tracr_import``, docs/tracr.md) when a spec uses it.
"""

from __future__ import annotations

from typing import Any

from ..ir import Model
from ..schema.dsl import Boolean, Context, Field, FilePath, String, join
from ..schema.yamlnodes import Node
from .sources import QUANTIZE, ModelSource, check_quantize


def _tracr_model(section: dict[str, Any], node: Node, ctx: Context, path: str) -> Model:
    """``model: {tracr: export.json, snap: ..., attention: ..., quantize: ...}``: a tracr export (docs/tracr.md)."""
    from .tracr_import import TracrImportError, import_tracr

    quantize = section["quantize"]
    check_quantize(quantize, ctx, path)
    try:
        return import_tracr(
            section["tracr"],
            snap=section["snap"] is not False,
            attention=section["attention"] or "float",
            quantize=quantize,
            name=section["name"] or None,
        )
    except TracrImportError as exc:
        raise ctx.error(
            node,
            join(path, "tracr"),
            str(exc),
            "export files are written by verify_tf.tracr_export.write_export (docs/tracr.md)",
        ) from None


SOURCE = ModelSource(
    key="tracr",
    fields={
        "tracr": Field(FilePath("a tracr model exported by verify_tf.tracr_export (docs/tracr.md)")),
        "snap": Field(
            Boolean(
                "tracr: read each float32 weight as the simplest rational inside its rounding "
                "interval (false: the float32 value exactly)"
            )
        ),
        "attention": Field(
            String(
                "tracr: which reading of its softmax attention to prove: float (default: the float32 model "
                "as compiled; rasp-equivalence), hardmax (tracr's intended computation) or softmax (a "
                "fixed-point reading; needs quantize)",
                ("float", "hardmax", "softmax"),
            )
        ),
        "quantize": Field(QUANTIZE),
    },
    build=_tracr_model,
    label="a tracr source",
    usage="write model: {tracr: export.json, snap: true, attention: hardmax} (docs/tracr.md)",
    example="`tracr: export.json`",
)

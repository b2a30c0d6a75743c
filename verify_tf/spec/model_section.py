"""The ``model:`` section (dispatched to its model source, ``builders.sources``) and the ``arithmetic:`` section.

A section that names one source and only that source's keys (and ``name``) is validated with that source's schema
and built by it: only that source's module is imported. Any other section (no source, two, a key of another source,
an unknown key) is validated against every source's keys at once, so that the error says what is wrong: the
closest known key, the two sources, or the source a stray key belongs to.
"""

from __future__ import annotations

import re
from typing import Any

from ..builders import sources
from ..builders.sources import COMMON_FIELDS, ModelSource
from ..ir import Model, validate_shapes
from ..schema.dsl import Context, Either, Field, Integer, Obj, Schema, String, join
from ..schema.errors import MissingDependency
from ..schema.yamlnodes import Node
from ..semantics import Arithmetic, Exact, Fixed
from ..semantics.arithmetic import ATTENTION_ROUNDINGS

MODEL_SOURCES = sources.registered()  # the registered model sources (``builders.sources.REGISTERED``), in order


class ModelSchema(Schema):
    """A whole ``model:`` section: its source's schema, then its source's build and the shape check."""

    what = "a model section"

    def __init__(self, description: str = "the transformer"):
        self.description = description

    def validate(self, node: Node, ctx: Context, path: str) -> Model:
        source = _sole_source(node)
        if source is None:  # no source, several, or keys that are not its own: validated against all of them
            return every_source_schema(self.description).validate(node, ctx, path)
        section = source.schema(self.description).validate(node, ctx, path)
        return _built(source, section, node, ctx, path)

    def json(self) -> dict:
        return every_source_schema(self.description).json()


def model_schema(description: str = "the transformer") -> ModelSchema:
    return ModelSchema(description)


def _sole_source(node: Node) -> ModelSource | None:
    """The source of a section that names exactly one and has no key of another; else None."""
    if node.kind != "map":
        return None
    given = node.mapping()
    named = [key for key in sources.registered() if key in given]
    if len(named) != 1:
        return None
    source = sources.load(named[0])
    return source if all(key in COMMON_FIELDS or key in source.fields for key in given) else None


def every_source_schema(description: str) -> Obj:
    """The keys of every model source in one mapping (imports every source's module): for errors, the JSON schema."""
    fields: dict[str, Field] = dict(COMMON_FIELDS)
    for key in sources.registered():
        for name, f in sources.load(key).fields.items():
            fields.setdefault(name, f)
    return Obj(fields, description, convert=_build_named, exclusive=[sources.registered()])


def _build_named(section: dict[str, Any], node: Node, ctx: Context, path: str) -> Model:
    """A section validated against every source: its one source, after refusing the keys of the others."""
    present = [key for key in sources.registered() if section.get(key) is not None]
    if not present:
        raise ctx.error(node, path, "expected one model source", f"give one of: {', '.join(sources.registered())}")
    source = sources.load(present[0])
    for other in sources.registered():
        owner = sources.load(other)
        for key in owner.fields:
            if key not in source.fields and section.get(key) is not None:
                raise ctx.error(node, join(path, key), f"'{key}' applies only to {owner.label}", owner.usage)
    return _built(source, section, node, ctx, path)


def _built(source: ModelSource, section: dict[str, Any], node: Node, ctx: Context, path: str) -> Model:
    """The source's build, its refusals located, then the shape check."""
    try:
        model = source.build(section, node, ctx, path)
    except MissingDependency as exc:  # a reader raises it without a location (a .pt file without torch)
        if exc.file is None:
            exc.file, exc.line, exc.path = ctx.file, node.line, join(path, source.key)
        raise
    except ValueError as exc:  # an importer's refusal: at the spec key it names (``TorchImportError.key``), if any
        key = getattr(exc, "key", None)
        where = node.find(key) if key else node
        raise ctx.error(where, join(path, key) if key else path, str(exc), getattr(exc, "hint", None)) from None
    _check_shapes(model, node, ctx, path)
    return model


def _check_shapes(model: Model, node: Node, ctx: Context, path: str) -> None:
    """The first shape problem of the built model, located at its key; the next three in the hint."""
    problems = validate_shapes(model)
    if problems:
        where, _, what = problems[0].partition(": ")
        raise ctx.error(
            node.find(where),
            join(path, where),
            what,
            "; ".join(problems[1:4])
            if len(problems) > 1
            else "matrices are rows x columns; width d is the token dimension",
        )


# ---------------------------------------------------------------- arithmetic

ARITH_OBJ = Obj(
    {
        "mode": Field(String(choices=("exact", "fixed")), required=True),
        "bits": Field(Integer("total bits p", minimum=2, maximum=64), default=16),
        "frac": Field(Integer("fractional bits f", minimum=0, maximum=32), default=8),
        "attention-rounding": Field(String(choices=ATTENTION_ROUNDINGS), default="exact-sums"),
    },
    "arithmetic mode",
)
ARITHMETIC = Either(
    [(lambda n: n.kind == "scalar", String(choices=("exact", "fixed"))), (lambda n: n.kind == "map", ARITH_OBJ)],
    what="'exact', 'fixed', or {mode: fixed, bits: 16, frac: 8, attention-rounding: exact-sums}",
    description="the arithmetic every engine uses (docs/semantics.md)",
)


def arithmetic_of(value: Any, node: Node, ctx: Context) -> Arithmetic:
    if value == "exact":
        return Exact()
    if value == "fixed":
        return Fixed()
    if value["mode"] == "exact":
        return Exact()
    if value["frac"] >= value["bits"]:
        raise ctx.error(
            node, "arithmetic.frac", f"expected fewer fractional bits than bits ({value['bits']}), got {value['frac']}"
        )
    return Fixed(value["bits"], value["frac"], value["attention-rounding"])


def check_model_in_arithmetic(model: Model, arith: Arithmetic, node: Node, ctx: Context) -> None:
    if isinstance(arith, Exact):
        for where, _ in model.norms():
            raise ctx.error(
                node.find(where),
                f"model.{where}",
                "LayerNorm divides by a square root, which is not exactly representable in exact arithmetic",
                "use arithmetic: fixed (an integer square root, docs/semantics.md)",
            )
        for layer, head_index, head in model.heads():
            if head.scoring == "softmax":
                where = f"layers[{layer}].attention.heads[{head_index}].scoring"
                raise ctx.error(
                    node.find(where),
                    f"model.{where}",
                    "softmax is not exactly representable in exact arithmetic",
                    "use arithmetic: fixed (an exp table, docs/semantics.md), or hardmax/uniform scoring",
                )
            if head.positional == "rope" and head.scoring != "uniform":
                where = f"layers[{layer}].attention.heads[{head_index}].positional"
                raise ctx.error(
                    node.find(where),
                    f"model.{where}",
                    "RoPE rotates by cos and sin of θ·p, which are irrational: exact arithmetic cannot represent them",
                    "use arithmetic: fixed (rotation tables rounded to the grid, docs/semantics.md 'RoPE')",
                )
        return
    for name, value in model.parameters():
        if name.startswith("readout["):
            continue  # the readout is an exact measurement of the stream, not a stored value (docs/semantics.md)
        if not arith.representable(value):
            reason = (
                f"is not a multiple of 2^-{arith.frac}"
                if (value * arith.scale).denominator != 1
                else f"is outside the {arith.bits}-bit range [{arith.min_value}, {arith.max_value}]"
            )
            offset = _filled_in(node, name)
            if offset is not None:  # the user never wrote this number: say where it comes from
                raise ctx.error(
                    node.find(name),
                    f"model.{name}",
                    f"the table leaves offset {offset} out, and a sparse table fills in its neutral entry {value}, "
                    f"which {reason}",
                    "write the offset's entry, or give the table as a list; or choose a format that holds it",
                )
            raise ctx.error(
                node.find(name),
                f"model.{name}",
                f"weight {value} {reason}",
                "fixed arithmetic needs every weight on its grid; quantize the weights or raise frac/bits",
            )


def _filled_in(node: Node, name: str) -> int | None:
    """The offset of a relative table's entry ``name`` (``...urpe-c[3]``) that a sparse mapping left out (the builder
    filled in the neutral value), or None when the user wrote it."""
    match = re.fullmatch(r"(.*\.(?:urpe-c|rpe-bias))\[(\d+)\]", name)
    if match is None:
        return None
    parent, key = match.group(1).rsplit(".", 1)
    table = node.find(parent).mapping().get(key)  # None unless the path leads to the table the user wrote
    if table is None or table.kind != "map":
        return None
    offsets = []
    for key in table.mapping():
        try:
            offsets.append(int(key))
        except ValueError:
            return None
    radius = max((abs(k) for k in offsets), default=0)
    offset = int(match.group(2)) - radius
    return None if offset in offsets else offset

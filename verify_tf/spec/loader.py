"""Load ``spec.yaml`` into a typed ``Spec``: model IR, arithmetic, domain, properties, engine settings.

The top level only: the YAML, the spec's sections each validated by its own module (``model_section``: the model
sources of ``builders.sources`` and the arithmetic; ``domain_section``; ``property_section``), and the ``Spec``.
Every failure is a ``SpecError`` naming file, line, key path, expectation and a hint: never a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path

from ..builders.torch_reading import with_arithmetic
from ..domain import Domain
from ..ir import Model
from ..schema.dsl import Context, Field, Integer, Number, Obj, String
from ..schema.errors import MissingDependency, SpecError
from ..schema.yamlnodes import parse_yaml
from ..semantics import Arithmetic
from ..userfiles import MAX_SPEC_BYTES, UserFileError, read_user_text
from ..work import MAX_TIMEOUT
from .domain_section import DOMAIN, domain_of
from .model_section import ARITHMETIC, MODEL_SOURCES, arithmetic_of, check_model_in_arithmetic, model_schema
from .property_section import (
    ENGINES,
    PropertySpec,
    fitted_properties,
    properties_field,
    supported_engines,
    unfitted_properties,
)

__all__ = [
    "ENGINES",
    "MODEL_SOURCES",
    "PropertySpec",
    "Spec",
    "json_schema",
    "load_spec",
    "load_spec_text",
    "supported_engines",
    "top_schema",
]


@dataclass(frozen=True)
class Spec:
    path: Path
    name: str
    model: Model
    arithmetic: Arithmetic
    domain: Domain | None
    properties: tuple[PropertySpec, ...]
    engine: str = "auto"
    timeout: float = 60.0
    seed: int = 0
    source_text: str = field(default="", compare=False, repr=False)


def top_schema() -> Obj:
    return Obj(
        {
            "name": Field(String("a title for reports")),
            "description": Field(String("free text")),
            "model": Field(model_schema(), required=True),
            "arithmetic": Field(ARITHMETIC, default="exact"),
            "domain": Field(DOMAIN),
            "properties": properties_field(),
            "engine": Field(String("default engine", ENGINES), default="auto"),
            "timeout": Field(
                Number("seconds per property", positive=True, maximum=Fraction(MAX_TIMEOUT)), default=Fraction(60)
            ),
            "seed": Field(Integer("seed for randomised engines", minimum=0), default=0),
        },
        "a verify-tf spec",
    )


def json_schema() -> dict:
    schema = top_schema().json()
    schema["$defs"] = {"model": model_schema("a model section (as the top-level model:)").json()}
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "verify-tf spec"
    return schema


def load_spec(path: str | Path) -> Spec:
    path = Path(path)
    try:
        text = read_user_text(path, "the spec", MAX_SPEC_BYTES)
    except UserFileError as exc:
        raise SpecError(str(exc), file=str(path)) from None
    return load_spec_text(text, str(path), path.resolve().parent)


def _igelu_note(model: Model, arith: Arithmetic, domain: Domain | None) -> str | None:
    """The i-GELU deviation note of a model with i-GELU feed-forwards (``symbolic.deviation``: interval bounds
    and a search, imported for such models only), None for any other model."""
    if not any(b.feed_forward is not None and b.feed_forward.activation == "i-gelu" for b in model.blocks):
        return None
    from ..symbolic.deviation import igelu_deviation_note

    return igelu_deviation_note(model, arith, domain)


def load_spec_text(text: str, file: str = "<spec>", base_dir: Path | None = None) -> Spec:
    ctx = Context(
        file, base_dir or Path.cwd(), model_section=lambda node, c, path: model_schema().validate(node, c, path)
    )
    root = parse_yaml(text, file)
    if root.kind != "map":
        raise ctx.expected(root, "", "a mapping with keys model, properties, ...")
    try:
        data = top_schema().validate(root, ctx, "")
    except MissingDependency as missing:  # the spec cannot run here: its properties say so (CLI: skipped)
        missing.properties = unfitted_properties(root, ctx)
        raise
    model: Model = data["model"]
    arith = arithmetic_of(data["arithmetic"], root.mapping().get("arithmetic", root), ctx)
    check_model_in_arithmetic(model, arith, root.mapping()["model"], ctx)
    model = with_arithmetic(model, arith)  # an imported torch model's reading states the arithmetic
    domain = domain_of(data["domain"], model, arith, ctx) if data["domain"] is not None else None
    note = _igelu_note(model, arith, domain)
    if note is not None:
        model = replace(model, notes=model.notes + (note,))
    properties = fitted_properties(data, model, arith, domain, root, ctx)
    return Spec(
        path=Path(file),
        name=data["name"] or Path(file).stem,
        model=model,
        arithmetic=arith,
        domain=domain,
        properties=tuple(properties),
        engine=data["engine"],
        timeout=float(data["timeout"]),
        seed=data["seed"],
        source_text=text,
    )

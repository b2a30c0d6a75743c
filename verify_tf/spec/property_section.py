"""The ``properties:`` section: each property's options (its own schema plus the fields every property has), fitted
to the model and the domain, with the engines it can run; a domain restricted to a language refused, at its key,
by a property or an engine that would read it as every string."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ..domain import Domain, StringDomain
from ..engines import load as load_engine, names as engine_names, supporting
from ..ir import Model
from ..properties import Property, load as load_property, names as property_names
from ..schema.dsl import Context, Field, Integer, ListOf, Number, Obj, String, TaggedUnion, join, locate
from ..schema.errors import OptionError
from ..schema.yamlnodes import Node
from ..semantics import Arithmetic
from ..work import MAX_TIMEOUT

ENGINES = ("auto", *engine_names())  # the engines found in verify_tf/engines/ (docs/architecture.md)
SOLVERS = ("z3", "cvc5", "bitwuzla", "portfolio")
VERDICT_NAMES = ("proved", "refuted", "unknown")


@dataclass(frozen=True)
class PropertySpec:
    name: str  # registry name, e.g. "permutation-equivariance"
    label: str  # as shown in reports (name, or the user's `name:`)
    options: Any  # the property's typed options (a frozen dataclass)
    line: int
    index: int
    engine: str | None = None
    timeout: float | None = None
    expect: str | None = None
    solver: str = "z3"
    rlimit: int | None = None
    samples: int | None = None
    engines: tuple[str, ...] = ()  # the engines the property can run with these options (computed once, here)
    # (option key, the line an error at that key is located at, as the loader locates fit's): for an input error
    # met at check time (``Property.premise``); a key not written is located at the property
    option_lines: tuple[tuple[str, int], ...] = ()

    def line_of(self, key: str) -> int:
        """The line of option ``key`` (a key path: its first key), else the property's."""
        return dict(self.option_lines).get(key.split(".")[0].split("[")[0], self.line)


COMMON_PROPERTY_FIELDS = {
    "name": Field(String("label shown in reports")),
    "engine": Field(String("engine for this property", ENGINES)),
    "timeout": Field(
        Number(
            "seconds for this property (the whole check, encoding included)",
            positive=True,
            maximum=Fraction(MAX_TIMEOUT),
        )
    ),
    "expect": Field(
        String("the verdict this property is expected to get (CI treats a match as success)", VERDICT_NAMES)
    ),
    "solver": Field(
        String("smt engine: z3, cvc5, bitwuzla (optional extras) or a portfolio race", SOLVERS), default="z3"
    ),
    "rlimit": Field(
        Integer("smt engine: z3 resource limit per query (deterministic budget)", minimum=1, maximum=2**32 - 1)
    ),
    "samples": Field(Integer("search engine: how many inputs to try (seeded by the spec's seed)", minimum=1)),
}


class PropertySchemas(Mapping[str, Obj]):
    """Each property's options plus the common fields, by name; the property's own typed check runs on its part.
    A property's module is imported when a spec names it (a check loads only the properties it runs)."""

    def __iter__(self) -> Iterator[str]:
        return iter(property_names())

    def __len__(self) -> int:
        return len(property_names())

    def __getitem__(self, name: str) -> Obj:
        if name not in property_names():
            raise KeyError(name)
        prop = load_property(name)
        fields = dict(COMMON_PROPERTY_FIELDS)
        fields.update(prop.options.fields)
        return Obj(fields, prop.summary, exclusive=prop.options.exclusive, check=_split_common(prop.options))


def property_schemas() -> Mapping[str, Obj]:
    return PropertySchemas()


def _split_common(own: Obj):
    def split(values: dict) -> tuple[dict, Any]:
        common = {k: values[k] for k in COMMON_PROPERTY_FIELDS}
        options = {k: v for k, v in values.items() if k not in COMMON_PROPERTY_FIELDS}
        return common, own.check(options) if own.check is not None else options

    return split


def properties_field() -> Field:
    """The spec's ``properties:`` list, every item a property name with its options."""
    return Field(
        ListOf(TaggedUnion(property_schemas(), "a property"), "properties to check", min_length=1), required=True
    )


def fitted_properties(
    data: dict[str, Any], model: Model, arith: Arithmetic, domain: Domain | None, root: Node, ctx: Context
) -> list[PropertySpec]:
    """The validated properties of a spec fitted to its model, arithmetic and domain (``Property.fit``), each with
    the engines it can run; an option that does not fit is an error at its key."""
    properties = []
    for index, (name, (common, options), node) in enumerate(data["properties"]):
        prop = load_property(name)
        where = f"properties[{index}].{name}"
        if prop.needs_domain and domain is None:
            raise ctx.error(
                node, where, "this property needs a 'domain' section", "e.g. domain: {grid: {step: 1/2}, length: 3}"
            )
        engines = checkpoint_engines(model, prop, options, supported_engines(prop, options, domain), node, where, ctx)
        check_language(prop, engines, common["engine"], domain, root, node, where, ctx)
        if common["engine"] is not None and common["engine"] != "auto" and common["engine"] not in engines:
            raise ctx.error(
                node, f"{where}.engine", f"expected one of {', '.join(('auto',) + engines)}, got {common['engine']!r}"
            )
        body = node.value[name] if node.kind == "map" else node
        try:
            prop.fit(model, arith, domain, options)
        except OptionError as exc:
            raise ctx.error(
                locate(body, exc.key), join(where, exc.key) if exc.key else where, exc.message, exc.hint
            ) from None
        lines = tuple((key, locate(body, key).line) for key in prop.options.fields)
        properties.append(property_spec(index, name, common, options, node.line, engines, lines))
    if data["engine"] != "auto":
        for p in properties:
            if p.engine is None and data["engine"] not in p.engines:
                raise ctx.error(
                    root.mapping()["engine"],
                    "engine",
                    f"property {p.label!r} does not support engine {data['engine']!r}",
                    f"it supports: {', '.join(p.engines)}",
                )
    return properties


def checkpoint_engines(
    model: Model, prop: Property, options: Any, engines: tuple[str, ...], node: Node, where: str, ctx: Context
) -> tuple[str, ...]:
    """A checkpoint read as it runs has no IR of its own (``Model.float_model.has_ir``): only the properties that read
    its float model run on it (``checkpoint_capabilities``: what that reading offers), with the engines those
    capabilities meet."""
    source = model.float_model
    if source is None or getattr(source, "has_ir", True):
        return engines
    allowed = getattr(prop, "checkpoint_capabilities", None)
    if not allowed:
        readers = [n for n in property_names() if getattr(load_property(n), "checkpoint_capabilities", None)]
        raise ctx.error(
            node,
            where,
            f"property {prop.name!r} reads the model IR, which a checkpoint read as it runs in float32 does not have",
            f"properties that check a checkpoint as it runs: {', '.join(readers)} (docs/import.md)",
        )
    offered = prop.offers(options) & allowed
    return tuple(e for e in engines if load_engine(e).runs(offered))


def property_spec(
    index: int,
    name: str,
    common: dict[str, Any],
    options: Any,
    line: int,
    engines: tuple[str, ...] | None = None,
    option_lines: tuple[tuple[str, int], ...] = (),
) -> PropertySpec:
    """A property of the spec, with the engines it can run (``engines``: computed by the caller already) and the
    lines of its option keys (``PropertySpec.option_lines``)."""
    return PropertySpec(
        name=name,
        label=common["name"] or name,
        options=options,
        line=line,
        index=index,
        engine=common["engine"],
        timeout=float(common["timeout"]) if common["timeout"] else None,
        expect=common["expect"],
        solver=common["solver"],
        rlimit=common["rlimit"],
        samples=common["samples"],
        engines=engines if engines is not None else supported_engines(load_property(name), options),
        option_lines=option_lines,
    )


def unfitted_properties(root: Node, ctx: Context) -> tuple[PropertySpec, ...]:
    """The properties of a spec whose model could not be built: validated (a mistake in them is still the user's
    error), not fitted to a model. A model inside a property (equivalent-to's other model) is not built."""
    unbuilt = Context(ctx.file, ctx.base_dir, model_section=lambda node, c, path: None)
    node = root.mapping().get("properties")
    if node is None:
        raise ctx.error(root, "properties", "a spec needs 'properties'")
    items = properties_field().schema.validate(node, unbuilt, "properties")
    return tuple(
        property_spec(index, name, common, options, item.line)
        for index, (name, (common, options), item) in enumerate(items)
    )


def supported_engines(prop: Property, options: Any, domain: Domain | None = None) -> tuple[str, ...]:
    """The engines a property can run with these options over ``domain``: matched on the capabilities it offers
    (``engines.supporting``; some options narrow them, e.g. scope); a language-restricted strings domain keeps the
    engines that honour it (``engines.for_domain``)."""
    return supporting(prop, options, domain)


def check_language(
    prop: Property,
    engines: tuple[str, ...],
    engine: str | None,
    domain: Domain | None,
    root: Node,
    node: Node,
    where: str,
    ctx: Context,
) -> None:
    """A domain restricted to a language is refused, at its ``language`` key, by a property or engine that would
    read it as every string (never run over Σ^n)."""
    if not isinstance(domain, StringDomain) or domain.language is None:
        return
    strings = root.mapping()["domain"].mapping()["strings"]
    at = strings.mapping().get("language", strings)
    if not prop.language_domains:
        honouring = [name for name in property_names() if load_property(name).language_domains]
        raise ctx.error(
            at,
            "domain.strings.language",
            f"property {prop.name!r} does not support a domain restricted to a language",
            f"properties that do: {', '.join(honouring)}; or drop 'language' to check every string",
        )
    if not engines:
        raise ctx.error(
            at,
            "domain.strings.language",
            f"no engine of {prop.name!r} with these options honours a domain restricted to a language",
            "engines that do: "
            + ", ".join(n for n in engine_names() if load_engine(n).language_domains)
            + " (lengths: all needs the counting engine, which reads every string)",
        )
    if engine is not None and engine != "auto" and engine not in engines:
        raise ctx.error(
            locate(node.mapping()[prop.name] if node.kind == "map" else node, "engine"),
            f"{where}.engine",
            f"engine {engine!r} would check every string, not the words of {domain.language.name}",
            f"with a language domain use one of {', '.join(('auto',) + engines)}",
        )

"""Model sources: the ways a spec's ``model:`` section says where its model comes from, found by the registry below.

A model source is one module of ``verify_tf/builders/`` that defines ``SOURCE = ModelSource(...)``:

* ``key``: the model-section key that selects it (``random``, ``torch``, ...); a section names one source;
* ``fields``: every key of the model section it reads, its own key among them (``schema.dsl`` Fields); the loader
  validates a section with the common fields (``name``) and its source's fields, and refuses a key of another
  source naming the source it belongs to;
* ``build(section, node, ctx, path) -> Model``: the model from the validated section (plain values by key; ``node``,
  ``ctx`` and ``path`` locate an error: ``ctx.error(node.find(key), join(path, key), message, hint)``). A build
  that needs an optional package imports it inside ``build`` and raises ``schema.errors.MissingDependency`` when
  it is missing; an importer's refusal may be a ``ValueError`` with ``key`` and ``hint`` attributes, which the
  loader locates at that key;
* ``label``, ``usage``, ``example``: how a refusal names it ("a torch source"), a one-line section to copy (the
  hint when another source's keys appear), and the short form ``verify-tf init``'s starter spec lists.

``REGISTERED`` maps each key to its module, one line per source, so the keys are known without importing anything
and a spec imports only the module of the source it uses. Spec validation, ``verify-tf schema``, the starter spec
and docs/architecture.md ("Add a model source") all follow from it; ``register`` adds a source at run time.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..ir import Model
from ..schema.dsl import Context, Field, Integer, Obj, String, join
from ..schema.yamlnodes import Node

ModelBuilder = Callable[[dict[str, Any], Node, Context, str], Model]

# model-section key -> the module that defines its SOURCE: one line per model source, in the order the docs list
# them (a module name without dots is one of verify_tf/builders/)
REGISTERED: dict[str, str] = {
    "layers": "inline",
    "file": "files",
    "random": "random_model",
    "construct": "constructs",
    "torch": "torch_source",
    "tracr": "tracr_source",
}

# the keys every model section may have, whatever its source
COMMON_FIELDS: dict[str, Field] = {"name": Field(String("a label for reports"))}


@dataclass(frozen=True)
class ModelSource:
    """One model source, as its module declares it (the module docstring above says what each field is for)."""

    key: str
    fields: dict[str, Field]
    build: ModelBuilder
    label: str
    usage: str
    example: str

    def schema(self, description: str) -> Obj:
        """The model section of this source: the common fields and its own."""
        return Obj({**COMMON_FIELDS, **self.fields}, description)


class NotASource(ImportError):
    """A registered module whose ``SOURCE`` does not follow the interface above."""


def registered() -> tuple[str, ...]:
    """The model sources' keys, in registry order (nothing is imported)."""
    return tuple(REGISTERED)


@cache
def load(key: str) -> ModelSource:
    """The model source selected by ``key``, importing its module only."""
    if key not in REGISTERED:
        raise KeyError(f"unknown model source {key!r} (sources: {', '.join(REGISTERED)})")
    name = REGISTERED[key]
    module = importlib.import_module(name if "." in name else f"{__package__}.{name}")
    source = getattr(module, "SOURCE", None)
    if not isinstance(source, ModelSource) or source.key != key or key not in source.fields:
        raise NotASource(f"{module.__name__} must define SOURCE, a ModelSource with key {key!r} among its fields")
    return source


def register(key: str, module: str) -> None:
    """Add (or replace) the source ``key``, defined by ``module`` (a dotted module name)."""
    REGISTERED[key] = module
    load.cache_clear()


def unregister(key: str) -> None:
    REGISTERED.pop(key, None)
    load.cache_clear()


# ``quantize`` of a source that reads float weights (torch, tracr): round them onto a fixed-point grid
QUANTIZE = Obj(
    {
        "bits": Field(Integer("total bits p", minimum=2, maximum=64), required=True),
        "frac": Field(
            Integer("fractional bits f: weights are rounded to multiples of 2^-f", minimum=0, maximum=32), required=True
        ),
    },
    "round every imported weight to the nearest multiple of 2^-frac (the largest error is reported)",
)


def check_quantize(quantize: dict[str, Any] | None, ctx: Context, path: str) -> None:
    """``quantize`` of a torch or tracr source: fewer fractional bits than bits."""
    if quantize is not None and quantize["frac"] >= quantize["bits"]:
        raise ctx.error(
            quantize["__node__"],
            join(path, "quantize.frac"),
            f"expected fewer fractional bits than bits ({quantize['bits']}), got {quantize['frac']}",
        )

"""Shared helpers of the property modules, and the registry that discovers them.

A property module defines one ``Property`` subclass (``verify_tf.contract.Property``: the small base) that also
extends the capabilities it offers (``verify_tf.contract``: ``EachInput``, ``Batched``, ``Solvable``, ``Counted``,
...), and a module-level instance ``PROPERTY``. It says what the property means and nothing about how it is run
(no engine is named: the registry matches engines to the capabilities offered):

* ``options``: its options in the schema language, converted by ``check=typed(Options)`` into a frozen
  dataclass (cross-field mistakes raise ``OptionError``, which the spec loader locates);
* ``fit(model, arithmetic, domain, options)``: whether the property applies to this model and domain at all
  (raises ``OptionError``; the spec loader reports it as an input error with file, line and key);
* ``premise(task)``: what must hold of the input that takes a search to decide (``rasp-equivalence``: its RASP
  program defined on every input), at check time under the property's deadline, before any engine runs (raises
  ``OptionError``: the verdict is ``error (input error)``, located as the loader locates fit's);
* the definition, through the hooks of its capabilities (docs/architecture.md has the table): e.g.
  ``input_space`` and ``violation`` (``EachInput``), ``batched_violations`` (``Batched``), ``smt_queries`` /
  ``build_query`` / ``replay_query`` (``Solvable``), ``values`` and friends (``DistinctValues``).

Everything about running (enumeration order, units, deadline, progress, replay, verdicts) is in the drivers.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

from ..contract import Capability, Counted, CountingGoal, NoOptions, Property, Task
from ..domain import Domain, StringDomain
from ..ir import AlphabetTokens, Model
from ..schema.dsl import Field, String
from ..schema.errors import OptionError

__all__ = [
    "BOS",
    "NoOptions",
    "Property",
    "bos_offset",
    "compared_positions",
    "counted_for_every_length",
    "lengths_field",
    "load",
    "names",
    "prefix_goal",
    "registry",
    "require",
    "require_strings_for_every_length",
    "typed",
]


def typed(cls: type) -> Callable[[dict[str, Any]], Any]:
    """The ``check`` of an options schema: validated values (hyphenated keys) -> the frozen dataclass ``cls``."""
    names = {f.name for f in dataclasses.fields(cls)}

    def build(values: dict[str, Any]) -> Any:
        return cls(**{key.replace("-", "_"): value for key, value in values.items() if key.replace("-", "_") in names})

    return build


def bos_offset(model: Model) -> int:
    """1 when the model prepends a BOS token (stream position 0), else 0."""
    return 1 if isinstance(model.tokens, AlphabetTokens) and model.tokens.bos is not None else 0


BOS = "BOS"  # how witnesses name the BOS position (user positions are 0, 1, ... as the user wrote the input)


def compared_positions(
    model: Model, length: int, include_bos: bool, chosen: Sequence[int] | None = None
) -> list[tuple[int | str, int]]:
    """(witness label, stream index) of the positions a property compares, in stream order.

    The one numbering of docs/semantics.md ("Positions"): user positions 0..length-1 as the user wrote the input
    (``chosen`` may pick some, negative ones counting from the end: -1 is the last), and the BOS position,
    named "BOS", only when ``include_bos`` (and the model has one).
    """
    offset = bos_offset(model)
    users = range(length) if chosen is None else sorted({p % length for p in chosen if -length <= p < length})
    labelled: list[tuple[int | str, int]] = [(BOS, 0)] if include_bos and offset else []
    return labelled + [(p, p + offset) for p in users]


LENGTHS = ("domain", "all")


def lengths_field() -> Field:
    """The ``lengths`` option of the properties the counting engine decides for every length."""
    return Field(
        String(
            "domain: the strings of the domain; all: every length (the counting goal: the domain's lengths by "
            "counting, then induction over positions; the domain's max-length bounds the first part only)",
            LENGTHS,
        ),
        default="domain",
    )


def counted_for_every_length(offered: frozenset[type[Capability]], lengths: str) -> frozenset[type[Capability]]:
    """``lengths: all`` is a claim about every length: only its counting goal decides it (induction over the
    counts), so that is all the property offers then."""
    return frozenset({Counted}) if lengths == "all" else offered


def require_strings_for_every_length(domain: Domain | None, lengths: str) -> None:
    require(
        lengths != "all" or isinstance(domain, StringDomain),
        "lengths",
        "lengths: all needs a strings domain (every length of strings over its alphabet)",
        "e.g. domain: {strings: {alphabet: [a, b], max-length: 8}}",
    )


def prefix_goal(task: Task, reference: Any = None, **checked: Any) -> CountingGoal:
    """The counting engine's goal over the task's strings domain (``engines.base.CountingGoal``)."""
    domain = task.domain
    assert isinstance(domain, StringDomain)
    return CountingGoal(
        domain.alphabet,
        domain.min_length,
        domain.max_length,
        task.options.lengths == "all",
        reference=reference,
        **checked,
    )


def require(condition: bool, key: str, message: str, hint: str | None = None) -> None:
    if not condition:
        raise OptionError(key, message, hint)


@cache
def names() -> tuple[str, ...]:
    """Every property's name, found without importing any: module ``value_range.py`` defines ``value-range``."""
    package = importlib.import_module(__package__)
    modules = (info.name for info in pkgutil.iter_modules(package.__path__) if not info.ispkg)
    return tuple(sorted(name.replace("_", "-") for name in modules if not name.startswith("_") and name != "base"))


@cache
def load(name: str) -> Property:
    """The property ``name``, importing its module only (a check loads only the properties it runs)."""
    if name not in names():
        raise KeyError(f"unknown property {name!r} (properties: {', '.join(names())})")
    module = importlib.import_module(f"{__package__}.{name.replace('-', '_')}")
    prop = getattr(module, "PROPERTY", None)
    if not isinstance(prop, Property) or prop.name != name:
        raise ImportError(f"{module.__name__} must define PROPERTY, a Property named {name!r}")
    return prop


def registry() -> dict[str, Property]:
    """Every property, by name (imports them all: for listings and the JSON schema)."""
    return {name: load(name) for name in names()}

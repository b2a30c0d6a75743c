"""The property protocol, shared helpers, and the registry of property modules.

A property module defines one ``Property`` subclass and a module-level instance ``PROPERTY``. It says what the
property means and nothing about how it is run:

* ``options``: its options in the schema language, converted by ``check=typed(Options)`` into a frozen
  dataclass (cross-field mistakes raise ``OptionError``, which the spec loader locates);
* ``fit(model, arithmetic, domain, options)``: whether the property applies to this model and domain at all
  (raises ``OptionError``; the spec loader reports it as an input error with file, line and key);
* the definition, for the engines it lists (``engines/base.py`` has the protocols): ``input_space`` and
  ``violation`` (interpret, enumerate, search), ``batched_violations`` (enumerate, search), ``smt_queries`` /
  ``build_query`` / ``replay_query`` (smt), ``values`` and friends for distinct-values properties,
  ``before_induction`` / ``conclude`` for architecture-level ones.

Everything about running (enumeration order, units, deadline, progress, replay, verdicts) is in the drivers.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

from ..domain import Domain, StringDomain
from ..engines.base import CountingGoal, Task
from ..ir import AlphabetTokens, Model
from ..schema.dsl import Field, Obj, String
from ..schema.errors import OptionError
from ..semantics import Arithmetic
from ..spaces import InputSpace

EACH_INPUT, DISTINCT_VALUES, ARCHITECTURE = "each-input", "distinct-values", "architecture"


def typed(cls: type) -> Callable[[dict], Any]:
    """The ``check`` of an options schema: validated values (hyphenated keys) -> the frozen dataclass ``cls``."""
    names = {f.name for f in dataclasses.fields(cls)}

    def build(values: dict) -> Any:
        return cls(**{key.replace("-", "_"): value for key, value in values.items() if key.replace("-", "_") in names})

    return build


@dataclasses.dataclass(frozen=True)
class NoOptions:
    pass


class Property:
    """Base class: defaults every property may override. Instances are stateless (safe to pickle)."""

    name: str = ""
    summary: str = ""
    options: Obj = Obj({}, check=typed(NoOptions))
    engines: tuple[str, ...] = ()  # supported engines, the preferred exhaustive one first
    form: str = EACH_INPUT
    needs_domain: bool = True

    def fit(self, model: Model, arithmetic: Arithmetic, domain: Domain | None, options: Any) -> None:
        """Raise ``OptionError`` when the property does not apply to this model or domain."""

    def input_space(self, task: Task) -> InputSpace:
        return InputSpace(task.domain)

    def batched_check(self, task: Task, evaluators: Any, length: int) -> None:
        """Compile the batched programs this property needs for ``length`` (raises ``Unsupported``)."""
        evaluators.of().check(length)

    def __repr__(self) -> str:
        return f"<property {self.name}>"


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
            "domain: the strings of the domain; all: every length (engine counting: the domain's lengths by "
            "counting, then induction over positions; the domain's max-length bounds the first part only)",
            LENGTHS,
        ),
        default="domain",
    )


def engines_by_lengths(engines: tuple[str, ...], lengths: str) -> tuple[str, ...]:
    """``lengths: all`` is decided by the counting engine alone."""
    return ("counting",) if lengths == "all" else engines


def require_strings_for_every_length(domain: Domain | None, lengths: str) -> None:
    require(
        lengths != "all" or isinstance(domain, StringDomain),
        "lengths",
        "lengths: all needs a strings domain (every length of strings over its alphabet)",
        "e.g. domain: {strings: {alphabet: [a, b], max-length: 8}}",
    )


def prefix_goal(task: Task, reference: object = None, **checked: object) -> CountingGoal:
    """The counting engine's goal over the task's strings domain (``engines.base.CountingGoal``)."""
    domain = task.domain
    assert isinstance(domain, StringDomain)
    return CountingGoal(
        domain.alphabet,
        domain.min_length,
        domain.max_length,
        getattr(task.options, "lengths", "domain") == "all",
        reference=reference,
        **checked,  # type: ignore[arg-type]
    )


def require(condition: bool, key: str, message: str, hint: str | None = None) -> None:
    if not condition:
        raise OptionError(key, message, hint)


@cache
def registry() -> dict[str, Property]:
    found: dict[str, Property] = {}
    package = importlib.import_module(__package__)
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.name == "base":
            continue
        module = importlib.import_module(f"{__package__}.{info.name}")
        prop = getattr(module, "PROPERTY", None)
        if isinstance(prop, Property):
            found[prop.name] = prop
    return found

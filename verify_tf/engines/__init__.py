"""Engines: the ways a property's question is answered, one package each, found by the registry below.

An engine is a package ``verify_tf/engines/<name>/`` whose ``__init__.py`` is its *card*:

* ``ENGINE = "<name>"`` (the package's own name);
* ``check(task: Task, run: Run) -> Verdict``: the driver (``engines.base`` has ``Run`` and the ``Merge``);
* ``NEEDS``: the capabilities (``contract.Capability``) a property must offer for this engine to run it — a tuple
  of capability classes, or a tuple of such tuples when any one of several sets will do (interpret: each input, or
  distinct values); ``USES``: capabilities it takes advantage of when a property offers them (split: a bounds
  rule, solver queries); ``PREFERENCE``: where it comes in a property's list of engines (lower first: the
  preferred exhaustive engine first);
* optionally ``ROLE`` and ``predict(task, estimate) -> Prediction`` (``engines.cost``): how ``engine: auto``
  may use it and, for an exhaustive engine, how long a complete run would take; ``refusal(task) -> str | None``:
  why it would refuse this task's reading (``auto`` never picks such an engine);
* optionally ``CERTIFICATES``, the kinds of certificate its proofs get (``verdict.CERTIFICATE_KINDS``; its
  driver fills the proof's ``verdict.Evidence`` under ``--certify``, its module ``certificate.py`` says what the
  certificate holds, trusts and re-checks (``engines.certificates``; found by ``certificate(name)``),
  ``verify_tf.certify`` writes it with the query evidence, and audit refuses a certificate of another kind for
  this engine), and ``derive_queries(task, deadline)``, the queries
  a proof asks derived without solving them (for audit; an engine with query evidence and no such hook is run
  again to re-derive them);
* optionally ``LANGUAGE_DOMAINS = True``: it reads a strings domain only through the property's input space
  (``spaces.InputSpace``), so it honours a domain restricted to a regular language (``regular``); every other
  engine is refused for such a domain with an input error, never run over Σ^n.

Dropping such a folder here is all it takes: spec validation, ``--engine``, ``auto``'s candidates, which
properties it runs (``supporting``: matched on capabilities) and the import contract that keeps engines
independent all derive from ``names()`` (docs/architecture.md, "Add an engine"). Names are read from the folder
without importing anything; ``load(name)`` imports one card when it is needed (a card is small: matching a
property loads every card, never a driver). A card imports only what its ``predict`` needs; its
``check`` imports the driver (``driver.py``) when it runs. An engine never imports another engine: shared code
lives below them (``engines.base``, ``scan``, ``evaluators``, ``cost``, the kernels).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING

from ..contract import CAPABILITIES, Capability, Property, capabilities_of
from ..verdict import CERTIFICATE_KINDS

if TYPE_CHECKING:
    from ..contract import Task
    from ..verdict import Verdict
    from ..work import Deadline
    from .base import Run
    from .cost import Estimate, Prediction


@dataclass(frozen=True)
class Engine:
    """One engine's card, as loaded: its name, its driver and its optional ``auto`` hooks."""

    name: str
    check: Callable[[Task, Run], Verdict]
    role: str | None = None  # engines.cost.ROLES; None: auto runs it only when it is the property's only engine
    predict: Callable[[Task, Estimate], Prediction] | None = None
    certificates: tuple[str, ...] = ()  # the kinds of certificate its proofs get; none: its proofs get none
    derive_queries: Callable[[Task, Deadline], list[tuple[str, str]]] | None = None  # (name, SMT-LIB text)
    language_domains: bool = False  # honours a strings domain restricted to a regular language
    needs: tuple[frozenset[type[Capability]], ...] = ()  # any one of these sets of capabilities lets it run a claim
    uses: frozenset[type[Capability]] = frozenset()  # capabilities it takes advantage of when offered
    preference: int = 100  # its place in a property's list of engines (lower first)
    refusal: Callable[[Task], str | None] | None = None  # why it refuses this task (its reading), or None

    def runs(self, offered: frozenset[type[Capability]]) -> bool:
        """Whether a property offering these capabilities can be run by this engine."""
        return any(needed <= offered for needed in self.needs)


class NotAnEngine(ImportError):
    """A package under verify_tf/engines/ whose card does not follow the interface above."""


@cache
def names() -> tuple[str, ...]:
    """Every engine's name, sorted: the packages in this folder (modules such as ``base.py`` are shared code)."""
    return tuple(
        sorted(info.name for info in pkgutil.iter_modules(__path__) if info.ispkg and not info.name.startswith("_"))
    )


@cache
def load(name: str) -> Engine:
    """Import the card of engine ``name`` (not its driver) and check it follows the interface."""
    if name not in names():
        raise KeyError(f"unknown engine {name!r} (engines: {', '.join(names())})")
    card = importlib.import_module(f"{__name__}.{name}")
    declared, check = getattr(card, "ENGINE", None), getattr(card, "check", None)
    if declared != name or not callable(check):
        raise NotAnEngine(f"{card.__name__} must define ENGINE = {name!r} and check(task, run)")
    role, predict = getattr(card, "ROLE", None), getattr(card, "predict", None)
    certificates = tuple(getattr(card, "CERTIFICATES", ()))
    if not set(certificates) <= set(CERTIFICATE_KINDS):
        raise NotAnEngine(f"{card.__name__}.CERTIFICATES: kinds of certificate are {', '.join(CERTIFICATE_KINDS)}")
    return Engine(
        name,
        check,
        role,
        predict,
        certificates,
        getattr(card, "derive_queries", None),
        bool(getattr(card, "LANGUAGE_DOMAINS", False)),
        _needs(card),
        frozenset(getattr(card, "USES", ())),
        int(getattr(card, "PREFERENCE", 100)),
        getattr(card, "refusal", None),
    )


def certificate(name: str) -> ModuleType | None:
    """Engine ``name``'s certificate module (``engines/<name>/certificate.py``: see ``engines.certificates``),
    imported when a certificate is written or re-checked; None for a name that is no engine or whose proofs
    get no certificate."""
    if name not in names() or not load(name).certificates:
        return None
    return importlib.import_module(f"{__name__}.{name}.certificate")


def _needs(card: object) -> tuple[frozenset[type[Capability]], ...]:
    """A card's ``NEEDS`` as alternatives: a tuple of capabilities (one set) or a tuple of such tuples."""
    declared = getattr(card, "NEEDS", None)
    if not isinstance(declared, tuple) or not declared:
        raise NotAnEngine(f"{getattr(card, '__name__', card)} must declare NEEDS, the capabilities it needs")
    alternatives = declared if all(isinstance(item, tuple) for item in declared) else (declared,)
    for alternative in alternatives:
        if not alternative or not all(item in CAPABILITIES for item in alternative):
            raise NotAnEngine(f"{getattr(card, '__name__', card)}.NEEDS: capabilities of verify_tf.contract")
    return tuple(frozenset(alternative) for alternative in alternatives)


def supporting(prop: Property, options: object = None, domain: object = None) -> tuple[str, ...]:
    """The engines that can check ``prop`` with these options over ``domain``: those whose card's ``NEEDS`` the
    property's offered capabilities meet (``Property.offers``; without options, every capability its class
    extends), in the cards' ``PREFERENCE`` order, kept by ``for_domain``."""
    offered = capabilities_of(type(prop)) if options is None else prop.offers(options)
    cards = sorted((load(name) for name in names()), key=lambda card: (card.preference, card.name))
    return for_domain(tuple(card.name for card in cards if card.runs(offered)), domain)


def for_domain(engines: tuple[str, ...], domain: object) -> tuple[str, ...]:
    """The engines (of ``engines``) that can check a property over ``domain``: all of them, except that a strings
    domain restricted to a regular language keeps only the engines whose card says ``LANGUAGE_DOMAINS``."""
    if getattr(domain, "language", None) is None:
        return engines
    return tuple(name for name in engines if load(name).language_domains)


# ---------------------------------------------------------------- the capability table of docs/architecture.md


def capability_table() -> str:
    """docs/architecture.md's table of the property base and the capability protocols, generated from the classes
    (``verify_tf.contract``) and the engines' cards: what each capability means, which engines need or use it,
    its required hooks (in bold) and its optional ones. ``tests/test_contract.py`` compares the docs with it."""
    cards = sorted((load(name) for name in names()), key=lambda card: (card.preference, card.name))
    rows = [
        "| capability | engines | hooks (**required**, the others have defaults) |",
        "|---|---|---|",
        f"| `Property`: {_summary(Property)} | every engine, auto, the spec loader, the CLI, certify | "
        f"{_hooks(Property)} |",
    ]
    for kind in CAPABILITIES:
        needed = [card.name for card in cards if any(kind in alternative for alternative in card.needs)]
        used = [card.name for card in cards if kind in card.uses]
        engines = "; ".join(part for part in (", ".join(needed), f"used by {', '.join(used)}" if used else "") if part)
        rows.append(f"| `{kind.__name__}`: {_summary(kind)} | {engines or '-'} | {_hooks(kind)} |")
    return "\n".join(rows) + "\n"


def _summary(kind: type) -> str:
    """The first sentence of a class's docstring, on one line."""
    text = " ".join((kind.__doc__ or "").split())
    named, _, rest = text.partition(": ")
    text = rest if rest and len(named) < 25 else text  # "Batched: the claim ..." (the table names the class)
    return text.split(". ")[0].rstrip(".").replace("``", "`").replace("|", "\\|")


def _hooks(kind: type) -> str:
    """A class's own public members as the table shows them: ``name(args)``, required ones in bold."""
    shown = []
    for member, value in vars(kind).items():
        if member.startswith("_"):
            continue
        if callable(value):
            parameters = [p for p in inspect.signature(value).parameters if p != "self"]
            text = f"`{member}({', '.join(parameters)})`"
        else:
            text = f"`{member}`"
        shown.append(f"**{text}**" if getattr(value, "__isabstractmethod__", False) else text)
    return ", ".join(shown)

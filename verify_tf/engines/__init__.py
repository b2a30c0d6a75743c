"""Engines: the ways a property's question is answered, one package each, found by the registry below.

An engine is a package ``verify_tf/engines/<name>/`` whose ``__init__.py`` is its *card*:

* ``ENGINE = "<name>"`` (the package's own name);
* ``check(task: Task, run: Run) -> Verdict``: the driver (``engines.base`` has ``Run`` and the verdict helpers);
* optionally ``ROLE`` and ``predict(task, estimate) -> Prediction`` (``engines.cost``): how ``engine: auto``
  may use it and, for an exhaustive engine, how long a complete run would take;
* optionally ``CERTIFICATES``, the kinds of certificate its proofs get (``verdict.CERTIFICATE_KINDS``; its
  driver fills the proof's ``verdict.Evidence`` under ``--certify``, ``verify_tf.certify`` writes it, and audit
  refuses a certificate of another kind for this engine), and ``derive_queries(task, deadline)``, the queries
  a proof asks derived without solving them (for audit; an engine with query evidence and no such hook is run
  again to re-derive them);
* optionally ``LANGUAGE_DOMAINS = True``: it reads a strings domain only through the property's input space
  (``spaces.InputSpace``), so it honours a domain restricted to a regular language (``regular``); every other
  engine is refused for such a domain with an input error, never run over Σ^n.

Dropping such a folder here is all it takes: spec validation, ``--engine``, ``auto``'s candidates and the
import contract that keeps engines independent all derive from ``names()`` (docs/architecture.md, "Add an
engine"). Names are read from the folder without importing anything; ``load(name)`` imports one card when it
is needed, so a check imports only the engines it uses. A card imports only what its ``predict`` needs; its
``check`` imports the driver (``driver.py``) when it runs. An engine never imports another engine: shared code
lives below them (``engines.base``, ``scan``, ``evaluators``, ``cost``, the kernels).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

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
    )


def for_domain(engines: tuple[str, ...], domain: object) -> tuple[str, ...]:
    """The engines (of ``engines``) that can check a property over ``domain``: all of them, except that a strings
    domain restricted to a regular language keeps only the engines whose card says ``LANGUAGE_DOMAINS``."""
    if getattr(domain, "language", None) is None:
        return engines
    return tuple(name for name in engines if load(name).language_domains)

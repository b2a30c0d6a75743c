"""The property protocol and the registry of property modules."""

from __future__ import annotations

import importlib
import pkgutil
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from ..domain import Domain
from ..ir import Model
from ..semantics import Arithmetic
from ..verdict import PROVED, REFUTED, UNKNOWN, Verdict


@dataclass
class CheckRequest:
    """Everything one property check needs; a pure function of this (so it can run in another process)."""

    model: Model
    arithmetic: Arithmetic
    domain: Domain | None
    options: dict[str, Any]
    label: str  # the property's name as written in the spec
    engine: str = "auto"
    timeout: float = 60.0
    seed: int = 0
    minimize: bool = False
    smt2_dir: Path | None = None
    device: str = "auto"
    progress: Callable[[int, int | None], None] | None = field(default=None, compare=False)

    def tick(self, done: int, total: int | None) -> None:
        if self.progress is not None:
            self.progress(done, total)


@dataclass(frozen=True)
class PropertyDef:
    name: str
    summary: str
    options: Any  # a spec.schema.Obj describing the property's options
    engines: tuple[str, ...]  # engines this property supports, in order of preference for "auto"
    run: Callable[[CheckRequest], Verdict]  # receives a request whose engine is concrete (never "auto")
    needs_domain: bool = True
    choose_engine: Callable[[CheckRequest], str] | None = None

    def pick_engine(self, request: CheckRequest) -> str:
        if request.engine != "auto":
            return request.engine
        if self.choose_engine is not None:
            return self.choose_engine(request)
        return self.engines[0]


def check_each_input(request: CheckRequest, violation: Callable[[CheckRequest, tuple], dict | None]) -> Verdict:
    """The exhaustive ``interpret`` engine for properties of one input at a time.

    ``violation(request, tokens)`` evaluates one input on the interpreter and returns the (replayed) witness
    or None. Every input of the domain is visited in ``domain.inputs()`` order, so the first witness is the
    smallest in that order; a timeout gives ``unknown`` with how far it got.
    """
    start = time.perf_counter()
    deadline = start + request.timeout
    total = request.domain.size()
    for index, tokens in enumerate(request.domain.inputs()):
        if time.perf_counter() > deadline:
            return Verdict(request.label, UNKNOWN, "interpret", detail=f"timeout after {index} of {total} inputs",
                           seconds=time.perf_counter() - start, tried=[f"exhaustive enumeration ({index}/{total})"],
                           statistics={"inputs_checked": index, "domain_size": total})
        witness = violation(request, tokens)
        if witness is not None:
            return Verdict(request.label, REFUTED, "interpret", method="exhaustive", detail=witness["summary"],
                           seconds=time.perf_counter() - start, counterexample=witness,
                           statistics={"inputs_checked": index + 1, "domain_size": total})
        request.tick(index + 1, total)
    return Verdict(request.label, PROVED, "interpret", method="exhaustive", detail=f"all {total} inputs",
                   seconds=time.perf_counter() - start, statistics={"domain_size": total})


def batched_evaluator(request: CheckRequest):
    """The exact batched evaluator for this request, compiled for every length (raises ``Unsupported``)."""
    from ..engines.batched import BatchedEvaluator

    evaluator = BatchedEvaluator(request.model, request.arithmetic, request.domain.tokens, device=request.device)
    for length in request.domain.lengths:
        evaluator.check(length)
    return evaluator


@lru_cache(maxsize=None)
def registry() -> dict[str, PropertyDef]:
    found: dict[str, PropertyDef] = {}
    package = importlib.import_module(__package__)
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.name == "base":
            continue
        module = importlib.import_module(f"{__package__}.{info.name}")
        prop = getattr(module, "PROPERTY", None)
        if isinstance(prop, PropertyDef):
            found[prop.name] = prop
    return found

"""The property protocol and the registry of property modules."""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from ..domain import Domain
from ..ir import Model
from ..semantics import Arithmetic
from ..verdict import Verdict


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

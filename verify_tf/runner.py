"""Run the properties of a loaded spec: pick engines, apply overrides, contain failures as verdicts.

A check never crashes the CLI: an engine bug becomes verdict ``error`` with its message, and a
``ReplayMismatch`` (an engine claimed a violation the interpreter does not reproduce) becomes ``error``
with both values. Nothing here prints.
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from pathlib import Path
from typing import Callable

from .properties import CheckRequest, registry
from .semantics import UnsupportedInMode
from .spec import PropertySpec, Spec
from .verdict import ERROR, UNKNOWN, Verdict
from .witness import ReplayMismatch


@dataclasses.dataclass
class Overrides:
    engine: str | None = None
    timeout: float | None = None
    minimize: bool = False
    smt2_dir: Path | None = None
    device: str = "auto"


def build_request(spec: Spec, prop: PropertySpec, overrides: Overrides,
                  progress: Callable[[int, int | None], None] | None = None) -> CheckRequest:
    definition = registry()[prop.name]
    engine = overrides.engine or prop.engine or spec.engine
    if engine != "auto" and engine not in definition.engines:
        engine = "auto"  # a global override the property cannot honour falls back to its own choice
    timeout = overrides.timeout or prop.timeout or spec.timeout
    request = CheckRequest(model=spec.model, arithmetic=spec.arithmetic, domain=spec.domain, options=prop.options,
                           label=prop.label, engine=engine, timeout=timeout, seed=spec.seed,
                           minimize=overrides.minimize, smt2_dir=overrides.smt2_dir, device=overrides.device,
                           progress=progress)
    request.engine = definition.pick_engine(request)
    return request


def check_property(spec: Spec, prop: PropertySpec, overrides: Overrides,
                   progress: Callable[[int, int | None], None] | None = None) -> Verdict:
    start = time.perf_counter()
    engine = "?"
    try:
        request = build_request(spec, prop, overrides, progress)
        engine = request.engine
        verdict = registry()[prop.name].run(request)
    except ReplayMismatch as exc:
        verdict = Verdict(prop.label, ERROR, engine, detail=f"engine bug: {exc}",
                          statistics={"claimed": str(exc.claimed), "replayed": str(exc.replayed)})
    except UnsupportedInMode as exc:
        verdict = Verdict(prop.label, UNKNOWN, engine, detail=str(exc), tried=[engine])
    except Exception as exc:  # contain it: report, never crash the run
        verdict = Verdict(prop.label, ERROR, engine, detail=f"internal error: {type(exc).__name__}: {exc}",
                          statistics={"traceback": traceback.format_exc(limit=8)})
    verdict.seconds = verdict.seconds or (time.perf_counter() - start)
    verdict.spec = str(spec.path)
    verdict.index = prop.index
    return verdict


def expectation_met(verdict: Verdict, expect: str | None) -> bool | None:
    """None when the property states no expectation."""
    return None if expect is None else verdict.status == expect

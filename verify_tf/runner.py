"""Run the properties of loaded specs: spec → task → engine driver → verdict, with failures contained.

``check_property`` turns one property of a spec into a ``Task`` (plain data), creates the one deadline of the
check from the timeout, resolves ``auto`` (``verify_tf.auto``: falsification, then the cost model) and hands
the task to the engine's driver with an executor. A check never crashes the CLI: an engine bug becomes
verdict ``error`` with its message, and a ``ReplayMismatch`` (an engine claimed a violation the interpreter
does not reproduce) becomes ``error`` with both values.

``check_all`` is the CLI's entry point: it serves definite verdicts from the proof cache and checks the rest,
one after another in this process (``jobs == 1``) or several at once (``jobs > 1``: properties run in threads
of this process and all their work units go to one shared pool of worker processes). Nothing here prints.
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from . import auto
from .cache import key_material, key_of, served_from_cache
from .certify import certify
from .engines import architecture, counting, enumerate as enumerate_engine, interpret, search, smt, split
from .engines.base import ProgressEvent, Run, Settings, Task, no_progress
from .executors import InProcess, ProcessPool
from .properties import registry
from .semantics import UnsupportedInMode
from .spec import PropertySpec, Spec
from .spec.loader import supported_engines
from .symbolic.solve import DRIVER_Z3_LOCK
from .verdict import ERROR, REFUTED, UNKNOWN, Verdict
from .witness import ReplayMismatch
from .work import Deadline, Executor

DRIVERS: dict[str, Callable[[Task, Run], Verdict]] = {
    "interpret": interpret.check,
    "enumerate": enumerate_engine.check,
    "smt": smt.check,
    "search": search.check,
    "architecture": architecture.check,
    "counting": counting.check,
    "split": split.check,
}


@dataclasses.dataclass
class Overrides:
    engine: str | None = None
    timeout: float | None = None
    minimize: bool = False
    smt2_dir: Path | None = None
    device: str = "auto"
    cache_dir: Path | None = None  # where auto's calibration is stored (the proof cache folder)
    certify_dir: Path | None = None  # --certify: every proved verdict gets a certificate in this folder


def requested_engine(spec: Spec, prop: PropertySpec, overrides: Overrides) -> str:
    """The engine asked for: the command line, then the property, then the spec ("auto" when none applies)."""
    engines = supported_engines(registry()[prop.name], prop.options)
    for choice in (overrides.engine, prop.engine, spec.engine):
        if choice is not None and choice != "auto":
            return choice if choice in engines else "auto"  # a global override it cannot honour: its own choice
        if choice == "auto":
            return "auto"
    return "auto"


def timeout_of(spec: Spec, prop: PropertySpec, overrides: Overrides) -> float:
    return overrides.timeout or prop.timeout or spec.timeout


def make_task(spec: Spec, prop: PropertySpec, overrides: Overrides) -> Task:
    settings = Settings(
        seed=spec.seed,
        minimize=overrides.minimize,
        device=overrides.device,
        solver=prop.solver,
        rlimit=prop.rlimit,
        samples=prop.samples or 100_000,
        smt2_dir=str(overrides.smt2_dir) if overrides.smt2_dir is not None else None,
        certify=overrides.certify_dir is not None,
    )
    return Task.make(
        prop.label, registry()[prop.name], prop.options, spec.model, spec.arithmetic, spec.domain, settings
    )


def check_property(
    spec: Spec,
    prop: PropertySpec,
    overrides: Overrides,
    progress: Callable[[ProgressEvent], None] | None = None,
    executor: Executor | None = None,
) -> Verdict:
    deadline = Deadline(timeout_of(spec, prop, overrides))
    engine = requested_engine(spec, prop, overrides)
    run = Run(executor or InProcess(), deadline, progress or no_progress)
    task = None
    if executor is None and progress is not None:
        run.executor = InProcess(
            report=lambda unit, phase, *progress: run.progress(ProgressEvent(engine, phase, *progress))
        )
    try:
        task = make_task(spec, prop, overrides)
        verdict = run_engine(task, run, engine, overrides.cache_dir)
    except ReplayMismatch as exc:
        verdict = Verdict(
            prop.label,
            ERROR,
            engine,
            detail=f"engine bug: {exc}",
            statistics={"claimed": str(exc.claimed), "replayed": str(exc.replayed)},
        )
    except UnsupportedInMode as exc:
        verdict = Verdict(prop.label, UNKNOWN, engine, detail=str(exc), tried=[engine])
    except Exception as exc:  # contain it: report, never crash the run
        verdict = Verdict(
            prop.label,
            ERROR,
            engine,
            detail=f"internal error: {type(exc).__name__}: {exc}",
            statistics={"traceback": traceback.format_exc(limit=8)},
        )
    verdict.seconds = deadline.elapsed()
    verdict.spec = str(spec.path)
    verdict.index = prop.index
    verdict.kind = prop.name
    # certification: its own budget, as long as the proof's; its time is reported separately
    if overrides.certify_dir is not None and task is not None:
        try:  # in this thread, with z3: properties that run side by side (-j N, --cluster) take turns
            with DRIVER_Z3_LOCK:
                certify(task, verdict, overrides.certify_dir, timeout_of(spec, prop, overrides))
        except Exception as exc:  # a certification bug must not turn a proof into a crash: say so instead
            verdict.statistics["certificate"] = {
                "complete": False,
                "failed": True,
                "error": f"{type(exc).__name__}: {exc}",
            }
    return verdict


def run_engine(task: Task, run: Run, engine: str, cache_dir: Path | None = None) -> Verdict:
    """Run one engine, or for ``auto`` the falsification pass and then the engine the cost model picks."""
    if engine != "auto":
        return DRIVERS[engine](task, run)
    engines = supported_engines(task.prop, task.options)
    notes: dict[str, Any] = {}
    if auto.worth_falsifying(task, engines):
        share = auto.falsify_seconds(run.deadline.remaining())
        quick = Run(run.executor, Deadline(share), run.progress)
        found = search.check(task, quick, samples=max(1024, min(task.settings.samples, 1 << 16)))
        notes["falsification"] = (
            f"search, {found.statistics.get('samples', 0)} samples in {quick.deadline.elapsed():.2f} s"
        )
        if found.status in (REFUTED, ERROR):
            found.statistics["auto"] = notes
            return found
    chosen, why = auto.choose(task, engines, run.deadline.remaining(), auto.load(cache_dir))
    notes.update(why)
    verdict = DRIVERS[chosen](task, run)
    verdict.statistics["auto"] = notes
    if verdict.status == UNKNOWN and "falsification" in notes:
        verdict.tried = [f"auto: {notes['falsification']}: no counterexample"] + list(verdict.tried)
    return verdict


ProgressFactory = Callable[[Spec, PropertySpec], Callable[[ProgressEvent], None]]


def check_all(
    specs: Sequence[Spec],
    overrides: Overrides,
    *,
    jobs: int = 1,
    cache: Any = None,
    progress: ProgressFactory | None = None,
    executor: Executor | None = None,
    on_verdict: Callable[[Verdict], None] | None = None,
) -> list[Verdict]:
    """Verdicts for every property of every spec, in spec order then property order.

    ``cache`` is a ``cache.ProofCache`` or None. ``progress(spec, prop)`` returns the progress callback of one
    check (it may have a ``close()``); ``on_verdict`` is called as each verdict arrives. ``executor``: where
    work units run (default: this process for ``jobs == 1``, else a pool of ``jobs`` worker processes).
    """
    work = [(spec, prop) for spec in specs for prop in spec.properties]
    verdicts: list[Verdict | None] = [None] * len(work)
    keys: list[str | None] = [None] * len(work)
    pending: list[int] = []
    for slot, (spec, prop) in enumerate(work):
        if cache is not None:
            start = time.perf_counter()
            material = key_material(spec, prop, overrides, requested_engine(spec, prop, overrides))
            if material is not None:
                keys[slot] = key_of(material)
                hit = cache.get(keys[slot])
                if hit is not None:
                    verdicts[slot] = served_from_cache(hit, prop, str(spec.path), time.perf_counter() - start)
                    if on_verdict is not None:
                        on_verdict(verdicts[slot])
                    continue
        pending.append(slot)

    def one(slot: int, shared: Executor | None) -> Verdict:
        spec, prop = work[slot]
        tick = progress(spec, prop) if progress is not None else None
        try:
            return check_property(spec, prop, overrides, tick, shared)
        finally:
            if hasattr(tick, "close"):
                tick.close()

    def finish(slot: int, verdict: Verdict) -> None:
        verdicts[slot] = verdict
        if cache is not None and keys[slot] is not None:
            cache.put(keys[slot], verdict)
        if on_verdict is not None:
            on_verdict(verdict)

    own = executor is None and jobs > 1
    shared = ProcessPool(jobs) if own else executor
    try:
        parallel = shared is not None and shared.workers > 1 and len(pending) > 1
        if parallel:
            with ThreadPoolExecutor(max_workers=shared.workers) as threads:
                futures = {threads.submit(one, slot, shared): slot for slot in pending}
                for future in as_completed(futures):  # on_verdict as each property finishes, in any order
                    finish(futures[future], future.result())
        else:
            for slot in pending:
                finish(slot, one(slot, shared))
    finally:
        if own:
            shared.close()
    return [v for v in verdicts if v is not None]

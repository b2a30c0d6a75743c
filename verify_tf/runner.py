"""Run the properties of loaded specs: spec → task → engine driver → verdict, with failures contained.

``check_property`` is the whole route of one property, in one screen: its ``Task`` (plain data, ``make_task``
the one place its settings are set), the one deadline of the check, the property's premise (what must hold of
the input before any engine runs: a mistake there is ``error (input error)``, located), the engine (``auto``:
``verify_tf.auto``,
falsification then the cost model; any other name: ``verify_tf.engines.load(name)``), the driver's verdict
(built once by the driver, naming its spec, index and kind) and with ``--certify`` the certificate. A check
never crashes the CLI (``contained``): an engine bug becomes verdict ``error`` with its message, and a
``ReplayMismatch`` (an engine claimed a violation the interpreter does not reproduce) becomes ``error`` with
both values.

``check_all`` is the CLI's entry point: it serves definite verdicts from the proof cache and checks the rest,
one after another in this process (``jobs == 1``) or several at once (``jobs > 1``: properties run in threads
of this process and all their work units go to one shared pool of worker processes). Nothing here prints.
"""

from __future__ import annotations

import dataclasses
import signal
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from . import auto
from .builders.torch_reading import with_arithmetic
from .cache import key_material, key_of, served_from_cache
from .contract import DEFAULT_SAMPLES, Settings, Task
from .domain import Domain
from .engines import for_domain, load as load_engine
from .engines.base import ProgressEvent, Run, no_progress
from .executors import InProcess, ProcessPool
from .ir import Model
from .properties import load as load_property
from .schema.dsl import join
from .schema.errors import MissingDependency, OptionError, SpecError
from .semantics import Arithmetic, UnsupportedInMode
from .spec import PropertySpec, Spec
from .spec.loader import supported_engines
from .verdict import ERROR, INPUT_ERROR, INTERRUPTED, SKIPPED, UNKNOWN, Verdict
from .witness import ReplayMismatch
from .work import (
    Z3_LOCK,
    CannotCheck,
    Deadline,
    DeadlineExpired,
    Executor,
    ResourceExhausted,
    deadline_in_force,
    interrupted,
    out_of_memory_message,
)


@dataclasses.dataclass
class Overrides:
    engine: str | None = None
    timeout: float | None = None
    minimize: bool = False
    smt2_dir: Path | None = None
    device: str = "auto"
    cache_dir: Path | None = None  # where auto's calibration is stored (the proof cache folder)
    certify_dir: Path | None = None  # --certify: every proved verdict gets a certificate in this folder
    memory: int | None = None  # --memory: working memory per process in bytes (None: Settings' default)
    spill_dir: Path | None = None  # --spill-dir: where sorted runs are spilled (None: TMPDIR)


def requested_engine(spec: Spec, prop: PropertySpec, overrides: Overrides) -> str:
    """The engine asked for: the command line, then the property, then the spec ("auto" when none applies)."""
    for choice in (overrides.engine, prop.engine, spec.engine):
        if choice is not None and choice != "auto":
            return choice if choice in prop.engines else "auto"  # a global override it cannot honour: its own choice
        if choice == "auto":
            return "auto"
    return "auto"


def timeout_of(spec: Spec, prop: PropertySpec, overrides: Overrides) -> float:
    return overrides.timeout or prop.timeout or spec.timeout


def make_task(
    label: str,
    name: str,
    options: Any,
    model: Model,
    arithmetic: Arithmetic,
    domain: Domain | None,
    settings: Settings | None = None,
    spec: str = "",
    index: int = 0,
) -> Task:
    """The task of one property check (typed options already validated) under ``settings`` (the run options: from
    a spec and the command line, ``settings_of``, or from the Python API, ``api.make_task``)."""
    model = with_arithmetic(model, arithmetic)  # an imported torch model's reading names the arithmetic (API too)
    return Task.make(
        label, load_property(name), options, model, arithmetic, domain, settings or Settings(), spec, index
    )


def settings_of(spec: Spec, prop: PropertySpec, overrides: Overrides) -> Settings:
    """The run options of property ``prop`` of ``spec`` under the command line's ``overrides``."""
    return Settings(
        seed=spec.seed,
        minimize=overrides.minimize,
        device=overrides.device,
        solver=prop.solver,
        rlimit=prop.rlimit,
        samples=prop.samples or DEFAULT_SAMPLES,
        smt2_dir=str(overrides.smt2_dir) if overrides.smt2_dir is not None else None,
        certify=overrides.certify_dir is not None,
        memory=overrides.memory,
        spill_dir=str(overrides.spill_dir) if overrides.spill_dir is not None else None,
    )


def task_of(spec: Spec, prop: PropertySpec, overrides: Overrides) -> Task:
    """The task of property ``prop`` of ``spec`` under the command line's ``overrides``."""
    settings = settings_of(spec, prop, overrides)
    return make_task(
        prop.label,
        prop.name,
        prop.options,
        spec.model,
        spec.arithmetic,
        spec.domain,
        settings,
        str(spec.path),
        prop.index,
    )


def check_property(
    spec: Spec,
    prop: PropertySpec,
    overrides: Overrides,
    progress: Callable[[ProgressEvent], None] | None = None,
    executor: Executor | None = None,
) -> Verdict:
    """One property of a loaded spec, start to end: its task, its premise (``Property.premise``, under the same
    deadline: ``error (input error)`` when it does not hold), the engine (``auto``: a short falsification, then
    the engine the cost model picks), the driver's verdict, and with ``--certify`` the certificate."""
    deadline = Deadline(timeout_of(spec, prop, overrides))
    engine = requested_engine(spec, prop, overrides)
    run = Run(executor or InProcess(), deadline, progress or no_progress)
    if executor is None and progress is not None:
        run.executor = InProcess(
            report=lambda unit, phase, *progress: run.progress(ProgressEvent(engine, phase, *progress))
        )
    task = None
    try:
        task = task_of(spec, prop, overrides)
        with deadline_in_force(deadline):  # also for code below the drivers (planning, bounds): check_deadline
            try:  # what must hold of the input, before any engine runs (out of time: unknown, as below)
                task.prop.premise(task)
            except OptionError as exc:  # the user's mistake, located as the loader locates one
                return input_error(exc, spec, prop, engine, deadline)
            verdict = run_engine(task, run, engine, overrides.cache_dir, prop.engines)
    except Exception as exc:  # contain it: report, never crash the run
        return contained(exc, spec, prop, engine, deadline, task)
    if overrides.certify_dir is not None:  # its own budget, as long as the proof's; its time is reported apart
        certified(spec, prop, task, verdict, overrides.certify_dir, timeout_of(spec, prop, overrides), run.progress)
    return verdict


def contained(
    exc: Exception, spec: Spec, prop: PropertySpec, engine: str, deadline: Deadline, task: Task | None = None
) -> Verdict:
    """The verdict for a check that raised: ``error`` (an engine that claimed a violation the interpreter does
    not reproduce, or any bug: never a crash of the run), or ``unknown`` for an operation the arithmetic does
    not define, a deadline met where no driver catches it (planning, bounds), memory or spill disk run out, or an
    input the check cannot judge (``CannotCheck``: a RASP program undefined there)."""
    status, detail, statistics, tried, trace = ERROR, f"internal error: {type(exc).__name__}: {exc}", {}, [], ""
    if isinstance(exc, ReplayMismatch):
        detail, statistics = f"engine bug: {exc}", {"claimed": str(exc.claimed), "replayed": str(exc.replayed)}
    elif isinstance(exc, UnsupportedInMode):
        status, detail, tried = UNKNOWN, str(exc), [engine]
    elif isinstance(exc, (DeadlineExpired, ResourceExhausted, CannotCheck)):  # planning, a spill, the input
        status, detail, tried = UNKNOWN, str(exc), [f"{engine}: {exc}"]
    elif isinstance(exc, MemoryError):
        message = out_of_memory_message()
        status, detail, tried = UNKNOWN, message, [f"{engine}: {message}"]
    else:
        trace = traceback.format_exc(limit=8)
    reading, as_run = task.prop.reading(task) if task is not None else ("", None)
    return Verdict(
        prop.label,
        status,
        engine,
        detail=detail,
        seconds=deadline.elapsed(),
        statistics=statistics,
        tried=tried,
        spec=str(spec.path),
        index=prop.index,
        kind=prop.name,
        traceback=trace,
        reading=reading,
        as_run=as_run,
        quantization=task.model.quantization.to_json() if task is not None and task.model.quantization else None,
    )


def input_error(exc: OptionError, spec: Spec, prop: PropertySpec, engine: str, deadline: Deadline) -> Verdict:
    """``error (input error)``: the property's premise does not hold (``Property.premise``: a RASP program
    undefined on an input of the domain), which is the user's mistake: the detail is the located error, as the
    loader words one (``file:line: key: message``) with its hint, and ``statistics["input_error"]`` its parts (the
    CLI prints it on stderr and exits 2: ``reporting.report.combined_exit_code``). Not about the model's reading,
    so none is stated."""
    where = f"properties[{prop.index}].{prop.name}"
    error = SpecError(
        exc.message,
        file=str(spec.path),
        line=prop.line_of(exc.key),
        path=join(where, exc.key) if exc.key else where,
        hint=exc.hint,
    )
    located = {"file": error.file, "line": error.line, "key": error.path, "message": error.message, "hint": error.hint}
    return Verdict(
        prop.label,
        ERROR,
        engine,
        method=INPUT_ERROR,
        detail=str(error).replace("\n  hint: ", "; hint: "),
        seconds=deadline.elapsed(),
        statistics={"input_error": located},
        spec=str(spec.path),
        index=prop.index,
        kind=prop.name,
    )


def certified(
    spec: Spec,
    prop: PropertySpec,
    task: Task,
    verdict: Verdict,
    directory: Path,
    seconds: float,
    progress: Callable[[ProgressEvent], None] = no_progress,
) -> None:
    """Certify a proved verdict into ``directory`` (``verify_tf.certify``; its modules load only here)."""
    try:  # in this thread, with z3: properties that run side by side (-j N, --cluster) take turns
        from .certify import certify

        with Z3_LOCK:
            certify(spec, prop, task, verdict, directory, seconds, progress)
    except Exception as exc:  # a certification bug must not turn a proof into a crash: say so instead
        verdict.statistics["certificate"] = {"complete": False, "failed": True, "error": f"{type(exc).__name__}: {exc}"}


def run_engine(
    task: Task, run: Run, engine: str, cache_dir: Path | None = None, engines: tuple[str, ...] | None = None
) -> Verdict:
    """Run one engine, or for ``auto`` the falsification pass and then the engine the cost model picks among
    ``engines`` (default: the property's, for its options)."""
    language = getattr(task.domain, "language", None)
    if language is not None and not task.prop.language_domains:  # the loader refuses it too, located
        raise ValueError(f"{task.prop.name!r} does not support a domain restricted to a language ({language.name})")
    if engine != "auto":
        if language is not None and not load_engine(engine).language_domains:
            raise ValueError(
                f"engine {engine!r} on {task.prop.name!r} would check every string, not the words of "
                f"{language.name} (docs/semantics.md, Domains)"
            )
        return load_engine(engine).check(task, run)
    return auto.run(
        task, run, for_domain(engines or supported_engines(task.prop, task.options), task.domain), cache_dir
    )


def interrupted_verdict(
    spec: Spec, prop: PropertySpec, overrides: Overrides, stopped: Verdict | None, detail: str = ""
) -> Verdict:
    """``unknown (interrupted)`` for a property that SIGINT/SIGTERM kept from finishing: an interrupt is never
    a verdict, so whatever the check had when it stopped (a timeout, a failed unit) is not reported as one.
    ``detail``: what to say instead of "interrupted before it finished" / "not started"."""
    name = signal.Signals(interrupted() or signal.SIGINT).name
    return Verdict(
        prop.label,
        UNKNOWN,
        stopped.engine if stopped is not None else requested_engine(spec, prop, overrides),
        method=INTERRUPTED,
        detail=detail
        or (f"interrupted ({name}) before it finished" if stopped is not None else f"not started ({name})"),
        seconds=stopped.seconds if stopped is not None else 0.0,
        statistics={"interrupted": name},
        tried=list(stopped.tried) if stopped is not None else [],
        spec=str(spec.path),
        index=prop.index,
        kind=prop.name,
    )


def not_run(path: str | Path, missing: MissingDependency) -> list[Verdict]:
    """The verdicts of a spec that cannot run here (an optional package is missing): every property ``skipped
    (needs PACKAGE)``, saying which package is missing and how to install it, so that the other specs of the run
    still run (docs/cli.md, "Exit codes": a skipped property fails the run only under --fail-on skipped)."""
    return [
        Verdict(
            prop.label,
            SKIPPED,
            "none",
            method=f"needs {missing.package}",
            detail=f"{missing.message}; {missing.install}",
            statistics={"missing": {"package": missing.package, "install": missing.install}},
            spec=str(path),
            index=prop.index,
            kind=prop.name,
        )
        for prop in missing.properties
    ]


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
    keys: list[tuple[str, dict] | None] = [None] * len(work)
    pending: list[int] = []
    for slot, (spec, prop) in enumerate(work):
        if cache is not None:
            start = time.perf_counter()
            material = key_material(spec, prop, overrides, requested_engine(spec, prop, overrides))
            if material is not None:
                keys[slot] = key_of(material), material
                hit = cache.get(key_of(material), material, task_of(spec, prop, overrides))
                if hit is not None:
                    served = served_from_cache(hit, prop, str(spec.path), time.perf_counter() - start)
                    verdicts[slot] = served
                    if on_verdict is not None:
                        on_verdict(served)
                    continue
        pending.append(slot)

    def one(slot: int, shared: Executor | None) -> Verdict:
        spec, prop = work[slot]
        if interrupted() is not None:  # SIGINT/SIGTERM: what has not started never starts
            return interrupted_verdict(spec, prop, overrides, None)
        tick = progress(spec, prop) if progress is not None else None
        try:
            return check_property(spec, prop, overrides, tick, shared)
        finally:
            close = getattr(tick, "close", None)  # a progress display that holds a terminal or a thread
            if close is not None:
                close()

    def finish(slot: int, verdict: Verdict) -> None:
        if interrupted() is not None and verdict.status in (UNKNOWN, ERROR) and verdict.method != INTERRUPTED:
            verdict = interrupted_verdict(*work[slot], overrides, verdict)  # it stopped because of the interrupt
        verdicts[slot] = verdict
        stored = keys[slot]
        if cache is not None and stored is not None:
            cache.put(stored[0], stored[1], verdict)
        if on_verdict is not None:
            on_verdict(verdict)

    pool = ProcessPool(jobs) if executor is None and jobs > 1 else None
    shared = pool or executor
    try:
        if shared is not None and shared.workers > 1 and len(pending) > 1:
            with ThreadPoolExecutor(max_workers=shared.workers) as threads:
                futures = {threads.submit(one, slot, shared): slot for slot in pending}
                for future in as_completed(futures):  # on_verdict as each property finishes, in any order
                    finish(futures[future], future.result())
        else:
            for slot in pending:
                finish(slot, one(slot, shared))
    finally:
        if pool is not None:
            pool.close()
    return [v for v in verdicts if v is not None]

"""What every engine driver shares: the run context (executor, deadline, progress) and verdict assembly.

The task and the property's hooks are the contract (``verify_tf.contract``, below both properties and
engines). Properties are declarative: they say what a violation is, what to enumerate and which solver queries
to ask. Engines (``engines/<name>/``, discovered by ``verify_tf.engines``) own everything about *running*:
enumeration order, work units, the deadline, progress, the solver lifecycle, replay of every counterexample
on the reference interpreter, minimisation and the verdict. An engine never imports another engine or a
property; it sees a property only through ``contract.Property`` (the property object travels inside the
``Task``, pickled by reference to its class).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Task, Settings, QueryPlan, CountingGoal and Witness are the contract's; re-exported for engines written
# against the earlier layout (new code imports them from verify_tf.contract)
from ..contract import (
    CountingGoal as CountingGoal,
    QueryPlan as QueryPlan,
    Settings as Settings,
    Task as Task,
    Witness as Witness,
)
from ..ir import Token
from ..verdict import ERROR, PROVED, REFUTED, UNKNOWN, Evidence, Verdict
from ..witness import ReplayMismatch
from ..work import Deadline, Executor, UnitError


@dataclass(frozen=True)
class ProgressEvent:
    engine: str
    phase: str  # e.g. "enumerating", "encoding query 3/15", "solving query 3/15"
    done: float = 0
    total: float | None = None
    unit: str = ""  # inputs, queries, steps, cubes, samples


Progress = Callable[[ProgressEvent], None]


def no_progress(event: ProgressEvent) -> None:
    pass


@dataclass
class Run:
    """The context of one property check: where units run, the one deadline, where progress goes."""

    executor: Executor
    deadline: Deadline
    progress: Progress = no_progress


# ---------------------------------------------------------------- verdict assembly


def verdict(
    task: Task,
    run: Run,
    status: str,
    engine: str,
    *,
    method: str = "",
    detail: str = "",
    witness: Witness | None = None,
    statistics: dict[str, Any] | None = None,
    tried: Sequence[str] = (),
    traceback: str = "",
    evidence: Evidence | None = None,
) -> Verdict:
    reading, as_run = task.prop.reading(task)
    return Verdict(
        task.label,
        status,
        engine,
        method=method,
        detail=detail,
        seconds=run.deadline.elapsed(),
        counterexample=witness,
        statistics=dict(statistics or {}),
        tried=list(tried),
        spec=task.spec,
        index=task.index,
        kind=task.prop.name,
        traceback=traceback,
        evidence=evidence,
        reading=reading,
        as_run=as_run,
        quantization=task.model.quantization.to_json() if task.model.quantization else None,
    )


def proved(
    task: Task,
    run: Run,
    engine: str,
    method: str,
    detail: str,
    statistics: dict[str, Any] | None = None,
    evidence: Evidence | None = None,
) -> Verdict:
    """Verdict ``proved``; ``evidence``: what the proof keeps for its certificate (``--certify`` only)."""
    return verdict(task, run, PROVED, engine, method=method, detail=detail, statistics=statistics, evidence=evidence)


def refuted(
    task: Task, run: Run, engine: str, method: str, witness: Witness, statistics: dict[str, Any] | None = None
) -> Verdict:
    return verdict(
        task,
        run,
        REFUTED,
        engine,
        method=method,
        detail=witness.get("summary", "counterexample"),
        witness=witness,
        statistics=statistics,
    )


def unknown(
    task: Task,
    run: Run,
    engine: str,
    detail: str,
    tried: Sequence[str],
    statistics: dict[str, Any] | None = None,
    method: str = "",
) -> Verdict:
    return verdict(
        task, run, UNKNOWN, engine, method=method, detail=detail, statistics=statistics, tried=tried or [detail]
    )


def error(task: Task, run: Run, engine: str, detail: str, statistics: dict[str, Any] | None = None) -> Verdict:
    return verdict(task, run, ERROR, engine, detail=detail, statistics=statistics)


def unit_failed(
    task: Task, run: Run, engine: str, failure: UnitError, statistics: dict[str, Any] | None = None
) -> Verdict:
    """Verdict ``error`` for a work unit that raised (or whose worker died): it names the unit and keeps the
    worker's traceback; never ``proved``, whatever the other units found."""
    detail = f"work unit failed: {failure.key}: {failure.message}"
    return verdict(task, run, ERROR, engine, detail=detail, statistics=statistics, traceback=failure.remote_traceback)


def replayed(task: Task, tokens: tuple[Token, ...], claim: str) -> Witness:
    """The property's witness for ``tokens`` from the reference interpreter; an engine bug if there is none."""
    witness = task.prop.violation(task, tokens)
    if witness is None:
        raise ReplayMismatch(
            f"{task.label}: {claim}, but the reference interpreter finds no violation",
            claimed=claim,
            replayed="no violation",
        )
    return witness


def smt2_path(task: Task, index: int, name: str) -> Path | None:
    if task.settings.smt2_dir is None:
        return None
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{task.label}-{index}-{name}")[:120]
    return Path(task.settings.smt2_dir) / f"{stem}.smt2"

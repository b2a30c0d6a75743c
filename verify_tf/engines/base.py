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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

# Task, Settings, QueryPlan, CountingGoal and Witness are the contract's; re-exported for engines written
# against the earlier layout (new code imports them from verify_tf.contract)
from ..contract import (
    CountingGoal as CountingGoal,
    Inputs,
    Proof as Proof,
    QueryPlan as QueryPlan,
    Settings as Settings,
    Task as Task,
    Witness as Witness,
)
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


# ---------------------------------------------------------------- verdict assembly: the merge rule


class Merge:
    """The merge rule, once for every driver: what the units of one check found, and the verdict it makes.

    * a **replayed refutation wins**: the least in the driver's order (``refute(..., order=)``; a driver that
      stops at its first refutation passes none), whatever else happened;
    * else a **failed unit** (``absorb`` a schedule's summary, or ``fail``) is ``error``: it names the unit and
      keeps the worker's traceback, never ``proved`` whatever the other units found;
    * else anything **not proved** (``undecided``: a timeout, an encoding that is not exact, a model the batched
      evaluator cannot run) makes it ``unknown``, with the first such detail and everything that was tried;
    * else ``proved``: the property words the verdict from what the proof did (``describe_proof(task, proof)``).

    ``statistics`` is the verdict's (the driver fills it as it goes); ``verdict(proof)`` applies the rule.
    """

    def __init__(self, task: Task, run: Run, engine: str, statistics: dict[str, Any] | None = None) -> None:
        self.task, self.run, self.engine = task, run, engine
        self.statistics: dict[str, Any] = statistics if statistics is not None else {}
        self.errors: list[UnitError] = []
        self._refutations: dict[Any, tuple[Witness, str, str]] = {}
        self._undecided: list[tuple[str, str]] = []  # (detail, method) of what was not proved
        self._tried: list[str] = []

    # -- what the units found
    def refute(self, witness: Witness, method: str, order: Any = 0, detail: str | None = None) -> None:
        """A refutation, already replayed on the interpreter, at ``order`` in the driver's order; its detail is the
        witness's summary unless the property worded it (``detail``: an architecture conclusion)."""
        if order not in self._refutations:
            self._refutations[order] = (
                witness,
                method,
                witness.get("summary", "counterexample") if detail is None else detail,
            )

    def replay(self, tokens: Inputs, claim: str, method: str, order: Any = 0) -> Witness:
        """Replay ``tokens`` on the interpreter (``replayed``) and keep the refutation; its witness."""
        witness = replayed(self.task, tokens, claim)
        self.refute(witness, method, order)
        return witness

    def absorb(self, summary: Any) -> None:
        """The failed units of one ``work.schedule`` run (its summary's ``errors``)."""
        self.errors += summary.errors

    def fail(self, failure: UnitError) -> None:
        self.errors.append(failure)

    def undecided(self, detail: str, tried: Sequence[str] = (), method: str = "") -> None:
        """Something the proof needed did not finish or could not be decided; ``tried`` says what ran."""
        self._undecided.append((detail, method))
        self._tried += list(tried) or [detail]

    @property
    def refuted(self) -> bool:
        return bool(self._refutations)

    @property
    def settled(self) -> bool:
        """Whether the verdict can no longer be ``proved`` (a refutation, a failed unit or something undecided)."""
        return bool(self._refutations or self.errors or self._undecided)

    # -- the verdict
    def verdict(
        self, proof: Proof | None = None, method: str = "", evidence: Evidence | None = None, detail: str | None = None
    ) -> Verdict:
        """The merge rule (class docstring). ``proof``: what a complete run proved (its ``method``, e.g.
        "exhaustive"; ``evidence``: what the proof keeps for its certificate under ``--certify``); ``detail``: a
        proof already worded (the property concluded it itself), else the property's ``describe_proof``."""
        if self._refutations:
            witness, found_by, said = self._refutations[min(self._refutations)]
            return self._make(REFUTED, found_by, said, witness=witness)
        if self.errors:
            failure = self.errors[0]
            return self._make(
                ERROR, "", f"work unit failed: {failure.key}: {failure.message}", traceback=failure.remote_traceback
            )
        if self._undecided:
            first, how = self._undecided[0]
            return self._make(UNKNOWN, how, first, tried=self._tried)
        if proof is None:
            raise ValueError(f"{self.engine}: a verdict needs a proof when nothing refuted it or was left undecided")
        if detail is None:
            detail = self.task.prop.describe_proof(self.task, replace(proof, statistics=self.statistics))
        return self._make(PROVED, method, detail, evidence=evidence)

    def unknown(self, detail: str, tried: Sequence[str] = (), method: str = "") -> Verdict:
        """``undecided`` and the verdict: for a check that ends before (or without) a proof."""
        self.undecided(detail, tried, method)
        return self.verdict()

    def error(self, detail: str, method: str = "") -> Verdict:
        """Verdict ``error`` with ``detail``: the property's own conclusion that something is inconsistent."""
        return self._make(ERROR, method, detail)

    def _make(
        self,
        status: str,
        method: str,
        detail: str,
        *,
        witness: Witness | None = None,
        tried: Sequence[str] = (),
        traceback: str = "",
        evidence: Evidence | None = None,
    ) -> Verdict:
        task = self.task
        reading, as_run = task.prop.reading(task)
        return Verdict(
            task.label,
            status,
            self.engine,
            method=method,
            detail=detail,
            seconds=self.run.deadline.elapsed(),
            counterexample=witness,
            statistics=dict(self.statistics),
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


def replayed(task: Task, tokens: Inputs, claim: str) -> Witness:
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

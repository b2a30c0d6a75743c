"""The driver of engine ``counting`` (what the engine does: its card, ``__init__.py``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...contract import CountingGoal, Task
from ...verdict import Evidence, Verdict
from ...witness import ReplayMismatch
from ...work import CONTINUE, Deadline, UnitError, WorkUnit, schedule
from ..base import ProgressEvent, Run, proved, refuted, unit_failed, unknown
from .explore import Exploration, explore
from .induction import FAILED, PROVED, InductionResult, prove_all_lengths
from .stream import CountingModel, NotApplicable, value_bounds

ENGINE = "counting"
INFERENCE_LENGTH = 8  # the exact exploration the invariant is inferred from: lengths 0..8 ...
INFERENCE_STATES = 4000  # ... or this many states, whichever comes first
BOUNDS_SHARE, BOUNDS_SECONDS = 0.25, 3.0  # the value bounds (z3) may use this share of the time, at most this
EXTENSION_FLOOR = 64  # when the induction fails: explore at least to this length (and 4x the domain's)


@dataclass
class Bounded:
    """The bounded unit's answer (plain data)."""

    not_applicable: str = ""
    exploration: Exploration | None = None
    increments: list[Any] | None = None  # per head coordinate: mantissa range of its value, or None
    coordinates: int = 0
    counters: int = 0


def bounded_unit(
    task: Task, max_length: int, *, deadline: Deadline, cancelled: Callable[[], bool], report: Callable[[str], None]
) -> Bounded:
    """Explore the joint states of every string up to ``max_length`` (a work unit)."""
    goal: CountingGoal = task.prop.counting_goal(task)
    if goal.machine.not_applicable:
        return Bounded(not_applicable=goal.machine.not_applicable)
    try:
        counting = CountingModel.of(task.model, task.arithmetic)
    except NotApplicable as exc:
        return Bounded(not_applicable=str(exc))
    report("value bounds")
    start, _, _ = counting.start()
    seconds = min(BOUNDS_SECONDS, BOUNDS_SHARE * deadline.remaining())
    increments = value_bounds(counting, goal.alphabet, start, seconds, deadline)
    report(f"exploring lengths up to {max_length}")
    exploration = explore(counting, goal, max_length, increments, deadline=deadline, cancelled=cancelled)
    return Bounded("", exploration, increments, len(counting.coordinates), len(goal.machine.names))


def induction_unit(
    task: Task,
    increments: list[Any] | None,
    *,
    deadline: Deadline,
    cancelled: Callable[[], bool],
    report: Callable[[str], None],
) -> InductionResult:
    """Infer an invariant from the exact states of short strings and check it inductive (a work unit)."""
    goal: CountingGoal = task.prop.counting_goal(task)
    counting = CountingModel.of(task.model, task.arithmetic)
    report("inferring the invariant")
    exact = explore(
        counting,
        goal,
        INFERENCE_LENGTH,
        None,
        deadline=deadline.share(0.3),
        cancelled=cancelled,
        exact=True,
        state_limit=INFERENCE_STATES,
    )
    report("induction over positions")
    return prove_all_lengths(
        counting,
        goal,
        exact.points,
        exact.points[0],
        increments,
        deadline=deadline,
        cancelled=cancelled,
        record=task.settings.certify,
    )


def check(task: Task, run: Run) -> Verdict:
    goal: CountingGoal = task.prop.counting_goal(task)
    statistics: dict[str, Any] = {**task.prop.statistics(task)}
    answers: dict[str, Any] = {}

    def run_unit(key: str, function: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        def on_result(unit: WorkUnit, value: Any) -> str:
            answers[key] = value
            run.progress(ProgressEvent(ENGINE, unit.key, 1, 1, "steps"))
            return CONTINUE

        summary = schedule(run.executor, [WorkUnit(f"counting: {key}", function, args)], run.deadline, on_result)
        if summary.errors:
            raise _UnitFailed(summary.errors[0])
        return answers.get(key)

    try:
        bounded: Bounded | None = run_unit("bounded", bounded_unit, (task, goal.max_length))
        if bounded is None:
            return unknown(
                task,
                run,
                ENGINE,
                "timeout before the exploration finished",
                [f"counting: timeout ({run.deadline.seconds:g} s)"],
                statistics,
            )
        if bounded.not_applicable:
            return unknown(
                task,
                run,
                ENGINE,
                f"the counting engine does not apply: {bounded.not_applicable}",
                [f"counting: not applicable: {bounded.not_applicable}"],
                statistics,
            )
        exploration = bounded.exploration
        assert exploration is not None  # applicable: the unit explored
        statistics.update(_exploration_statistics(bounded, exploration))
        if exploration.disagreement is not None:
            return _refuted(task, run, exploration, statistics)
        if exploration.stopped:
            return unknown(
                task,
                run,
                ENGINE,
                f"explored lengths up to {exploration.complete_up_to} of {goal.max_length} ({exploration.stopped})",
                [f"counting: lengths 0..{exploration.complete_up_to} agree, then {exploration.stopped}"],
                statistics,
            )
        bounded_text = f"every string up to length {goal.max_length} agrees ({exploration.states} states by counting)"
        covered = {  # what the exploration covered, for the certificate (certify.counting)
            "max_length": goal.max_length,
            "alphabet": list(goal.alphabet),
            "states": exploration.states,
            "strings_per_length": exploration.strings,
        }
        evidence = Evidence("counting", covered=covered) if task.settings.certify else None
        if not goal.all_lengths:
            default = f"{exploration.states} states of lengths 0..{goal.max_length} explored by counting"
            detail = task.prop.describe_proof(task, ENGINE, default, statistics)
            return proved(task, run, ENGINE, "counting", detail, statistics, evidence)
        induction: InductionResult | None = run_unit("induction", induction_unit, (task, bounded.increments))
        if induction is None:
            return unknown(
                task,
                run,
                ENGINE,
                f"{bounded_text}; the induction did not finish (timeout)",
                [f"counting: {bounded_text}", "induction: timeout"],
                statistics,
            )
        statistics["induction"] = {
            "status": induction.status,
            "invariant": induction.invariant,
            "refinement_rounds": induction.rounds,
            "queries": induction.queries,
            "solver_seconds": induction.solver_seconds,
        }
        if induction.status == PROVED:
            if evidence is not None:  # and the induction's queries
                evidence.queries = induction.asked
            default = (
                f"induction over positions: an invariant of {len(induction.invariant)} facts, "
                f"{induction.queries} z3 queries; {bounded_text}"
            )
            detail = task.prop.describe_proof(task, ENGINE, default, statistics)
            return proved(task, run, ENGINE, "all lengths", detail, statistics, evidence)
        statistics["induction"]["failed"] = induction.detail
        if induction.counterexample is not None:
            statistics["induction"]["counterexample"] = induction.counterexample
        # the claim is about every length: a disagreement beyond the domain's lengths refutes it
        longer = max(EXTENSION_FLOOR, 4 * goal.max_length)
        if induction.status == FAILED and induction.counterexample is not None:
            longer = max(longer, induction.counterexample["state"]["i"] + 1)
        extended: Bounded | None = (
            run_unit("longer strings", bounded_unit, (task, longer)) if not run.deadline.expired() else None
        )
        if extended is not None and extended.exploration is not None:
            more = extended.exploration
            statistics["extended_exploration"] = {
                "max_length": longer,
                "complete_up_to": more.complete_up_to,
                "states": more.states,
                "stopped": more.stopped,
            }
            if more.disagreement is not None:
                return _refuted(task, run, more, statistics)
            if more.complete_up_to > goal.max_length:
                bounded_text = (
                    f"every string up to length {more.complete_up_to} agrees ({more.states} states by counting)"
                )
        what = "failed" if induction.status == FAILED else "undecided"
        return unknown(
            task,
            run,
            ENGINE,
            f"{bounded_text}; not proved for every length: {induction.detail}",
            [f"counting: {bounded_text}", f"induction ({what}): {induction.detail}"],
            statistics,
            method="counting",
        )
    except _UnitFailed as failed:
        first = failed.error
        return unit_failed(task, run, ENGINE, first, statistics)


class _UnitFailed(Exception):
    def __init__(self, error: UnitError) -> None:
        super().__init__(str(error))
        self.error = error


def _exploration_statistics(bounded: Bounded, exploration: Exploration) -> dict[str, Any]:
    return {
        "states": exploration.states,
        "widest_length": exploration.widest,
        "explored_up_to": exploration.complete_up_to,
        "head_coordinates": bounded.coordinates,
        "counters": bounded.counters,
        "value_bounds": None if bounded.increments is None else [list(b) for b in bounded.increments],
    }


def _refuted(task: Task, run: Run, exploration: Exploration, statistics: dict[str, Any]) -> Verdict:
    tokens = exploration.disagreement
    assert tokens is not None  # refuted: the shortlex-least disagreeing string
    witness = task.prop.violation(task, tokens)  # the reference interpreter and the program's interpreter
    if witness is None:
        raise ReplayMismatch(
            f"{task.label}: the counting engine claims a disagreement on {''.join(tokens)!r} "
            "that the interpreters do not reproduce",
            claimed="".join(tokens),
            replayed="no violation",
        )
    return refuted(task, run, ENGINE, "counting", witness, statistics)


__all__ = ["ENGINE", "bounded_unit", "check", "induction_unit"]

"""The driver of engine ``counting`` (what the engine does: its card, ``__init__.py``; the argument:
docs/counting.md).

1. **Bounded** (one work unit): breadth-first over the joint states length by length with equal states merged
   (``explore``): the same verdict as all |Σ|^N strings, in time polynomial in N wherever the classes stay few.
   A violation comes back as the shortlex-least witness string and is replayed on the reference interpreter (the
   property's ``violation``) before ``refuted`` is reported. When merging does not pay (the states grow like the
   strings) the unit stops early and the verdict is ``unknown`` saying so, with the class and state counts.
2. **Every length** (``all_lengths``; one work unit): an invariant inferred from the exactly explored states is
   checked inductive with z3 over unbounded integer counts (``induction``): ``proved (all lengths)``. When the
   induction fails the exploration goes on to longer strings within the deadline (a violation there refutes the
   claim about every length); otherwise the verdict is ``unknown``, stating the bounded result and the step of
   the induction that failed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...contract import Counted, CountingGoal, Task, capability
from ...domain import StringDomain
from ...verdict import Evidence, Verdict
from ...witness import ReplayMismatch
from ...work import CONTINUE, Deadline, UnitError, WorkUnit, schedule
from ..base import Merge, ProgressEvent, Proof, Run
from ..cost import HAND_OVER
from .counters import NotApplicable
from .explore import NOT_PAYING, Exploration, explore
from .induction import FAILED, PROVED, InductionResult, prove_all_lengths
from .joint import Joint
from .symbolic import value_bounds

ENGINE = "counting"  # (the card's name, repeated: an engine never imports its own card's package from here)
INFERENCE_LENGTH = 8  # the exact exploration the invariant is inferred from: lengths 0..8 ...
INFERENCE_STATES = 4000  # ... or this many states, whichever comes first
BOUNDS_SHARE, BOUNDS_SECONDS = 0.25, 3.0  # the value bounds (z3) may use this share of the time, at most this
GRID_DOMAIN = "the domain is a grid of vectors, not strings over an alphabet (a counter machine counts letters)"
EXTENSION_FLOOR = 64  # when the induction fails: explore at least to this length (and 4x the domain's)


@dataclass
class Bounded:
    """The bounded unit's answer (plain data)."""

    not_applicable: str = ""
    exploration: Exploration | None = None
    increments: tuple[Any, ...] = (None, None)  # per side: per slot, the mantissa ranges of its values (or None)
    statistics: dict[str, Any] = field(default_factory=dict)


def _joint(task: Task, goal: CountingGoal) -> Joint:
    return Joint(task.model, task.arithmetic, goal)


def _violates(task: Task) -> Callable[[Any, Any], bool]:
    prop = capability(task.prop, Counted)
    return lambda ours, theirs: prop.prefix_violates(task, ours, theirs)


def bounded_unit(
    task: Task, max_length: int, *, deadline: Deadline, cancelled: Callable[[], bool], report: Callable[..., None]
) -> Bounded:
    """Explore the joint states of every string up to ``max_length`` (a work unit)."""
    goal: CountingGoal = capability(task.prop, Counted).counting_goal(task)
    try:
        joint = _joint(task, goal)
    except NotApplicable as exc:
        return Bounded(not_applicable=str(exc))
    report("value bounds")
    seconds = min(BOUNDS_SECONDS, BOUNDS_SHARE * deadline.remaining())
    found = [value_bounds(side, goal.alphabet, seconds / len(joint.sides), deadline) for side in joint.sides]
    increments: tuple[Sequence[Any] | None, Sequence[Any] | None] = (found[0], found[1] if len(found) > 1 else None)
    longest = joint.longest()
    if longest is not None:  # an absolute positional encoding: the model reads no longer string
        max_length = min(max_length, longest)
    report(f"exploring lengths up to {max_length}")
    exploration = explore(
        joint,
        goal,
        _violates(task),
        max_length,
        increments,
        deadline=deadline,
        cancelled=cancelled,
        report=report,
    )
    return Bounded("", exploration, increments, _model_statistics(joint))


def induction_unit(
    task: Task, *, deadline: Deadline, cancelled: Callable[[], bool], report: Callable[..., None]
) -> InductionResult:
    """Infer an invariant from the exact states of short strings and check it inductive (a work unit)."""
    goal: CountingGoal = capability(task.prop, Counted).counting_goal(task)
    joint = _joint(task, goal)
    report("inferring the invariant")
    exact = explore(
        joint,
        goal,
        _violates(task),
        INFERENCE_LENGTH,
        deadline=deadline.share(0.3),
        cancelled=cancelled,
        exact=True,
        state_limit=INFERENCE_STATES,
    )
    start = min(joint.settled_from(), exact.complete_up_to, goal.max_length)
    report("induction over positions" + (f" from length {start}" if start else ""))
    return prove_all_lengths(
        joint,
        goal,
        _violates(task),
        exact.visited,
        encode_violation=lambda builder, ours, theirs: capability(task.prop, Counted).encode_prefix_violation(
            task, builder, ours, theirs
        ),
        deadline=deadline,
        cancelled=cancelled,
        record=task.settings.certify,
        report=report,
        start=max(start, 0),
    )


def check(task: Task, run: Run) -> Verdict:
    statistics: dict[str, Any] = {**task.prop.statistics(task)}
    merge = Merge(task, run, ENGINE, statistics)
    if not isinstance(task.domain, StringDomain):  # a grid's vectors are not letters: nothing to count
        return merge.unknown(
            f"the counting engine does not apply: {GRID_DOMAIN}", [f"counting: not applicable: {GRID_DOMAIN}"]
        )
    goal: CountingGoal = capability(task.prop, Counted).counting_goal(task)
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
            return merge.unknown(
                "timeout before the exploration finished", [f"counting: timeout ({run.deadline.seconds:g} s)"]
            )
        if bounded.not_applicable:
            return merge.unknown(
                f"the counting engine does not apply: {bounded.not_applicable}",
                [f"counting: not applicable: {bounded.not_applicable}"],
            )
        exploration = bounded.exploration
        assert exploration is not None
        statistics.update(bounded.statistics)
        statistics.update(_exploration_statistics(bounded, exploration))
        if exploration.disagreement is not None:
            return _refuted(task, merge, exploration)
        if exploration.stopped:
            return _stopped(merge, statistics, goal, exploration)
        evidence = _evidence(task, goal, exploration)
        if exploration.closed_at is not None and goal.all_lengths:
            return _closed(merge, exploration, evidence)
        bounded_text = f"every string up to length {goal.max_length} holds ({exploration.states} states by counting)"
        if not goal.all_lengths:
            default = f"{exploration.states} states of lengths 0..{goal.max_length} explored by counting"
            if exploration.closed_at is not None:
                default = (
                    f"{exploration.states} states of lengths 0..{exploration.closed_at} explored by counting, "
                    f"the same states at every length from {exploration.closed_at} on"
                )
            return merge.verdict(Proof(default, counted=exploration.states), "counting", evidence)
        induction: InductionResult | None = run_unit("induction", induction_unit, (task,))
        if induction is None:
            return merge.unknown(
                f"{bounded_text}; the induction did not finish (timeout)",
                [f"counting: {bounded_text}", "induction: timeout"],
            )
        statistics["induction"] = induction.statistics()
        if induction.status == PROVED:
            if evidence is not None:  # and the induction's queries
                evidence.queries = induction.asked
            default = (
                f"induction over positions{f' from length {induction.start}' if induction.start else ''}: an "
                f"invariant of {len(induction.invariant)} facts, {induction.queries} z3 queries; {bounded_text}"
            )
            proof = Proof(default, counted=exploration.states, queries=induction.queries, induction="positions")
            return merge.verdict(proof, "all lengths", evidence)
        # the claim is about every length: a violation beyond the domain's lengths refutes it
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
                return _refuted(task, merge, more)
            if more.closed_at is not None:
                return _closed(merge, more, _evidence(task, goal, more))
            if more.complete_up_to > goal.max_length:
                bounded_text = (
                    f"every string up to length {more.complete_up_to} holds ({more.states} states by counting)"
                )
        what = "failed" if induction.status == FAILED else "undecided"
        return merge.unknown(
            f"{bounded_text}; not proved for every length: {induction.detail}",
            [f"counting: {bounded_text}", f"induction ({what}): {induction.detail}"],
            method="counting",
        )
    except _UnitFailed as failed:
        merge.fail(failed.error)
        return merge.verdict()


def _stopped(merge: Merge, statistics: dict[str, Any], goal: CountingGoal, exploration: Exploration) -> Verdict:
    """The exploration stopped before it closed or reached the domain's lengths: unknown, saying how far it got
    and why (a stop because exploring further does not pay hands the property over to the next engine)."""
    what = exploration.why if exploration.stopped == NOT_PAYING else exploration.stopped
    if exploration.stopped == NOT_PAYING:
        statistics["not_paying"] = statistics[HAND_OVER] = True
    explored = f"explored lengths up to {exploration.complete_up_to} of {goal.max_length}"
    if goal.language is not None:
        explored = (
            f"every word of {goal.language.name} up to length {exploration.complete_up_to} checked "
            f"(of {goal.max_length})"
        )
    return merge.unknown(
        f"{explored}: {_stop_text(exploration)}",
        [f"counting: lengths 0..{exploration.complete_up_to} hold, then {exploration.stopped}: {what}"],
    )


class _UnitFailed(Exception):
    def __init__(self, error: UnitError) -> None:
        super().__init__(str(error))
        self.error = error


def _stop_text(exploration: Exploration) -> str:
    if exploration.stopped == NOT_PAYING:
        return f"{NOT_PAYING} ({exploration.why})"
    return exploration.stopped


def _model_statistics(joint: Joint) -> dict[str, Any]:
    """Classes per head and streams per layer (the position classes), for the model and the other model."""
    found: dict[str, Any] = {}
    for name, side in zip(("model", "other_model"), joint.sides):
        found[name] = {
            "head_kinds": {str(slot): slot.kind for slot in side.slots},
            "classes_per_head": side.class_counts(),
            "streams_per_layer": side.stream_counts(),
        }
    return found


def _exploration_statistics(bounded: Bounded, exploration: Exploration) -> dict[str, Any]:
    return {
        "states": exploration.states,
        "states_per_length": exploration.per_length,
        "widest_length": exploration.widest,
        "largest_count": exploration.largest_count,
        "explored_up_to": exploration.complete_up_to,
        "exploration_seconds": round(exploration.seconds, 4),
        "value_bounds": [
            None if side is None else [None if s is None else list(s) for s in side] for side in bounded.increments
        ],
    }


def _evidence(task: Task, goal: CountingGoal, exploration: Exploration) -> Evidence | None:
    """What the exploration covered, for the certificate (``certificate.py``; ``--certify`` only): every length up
    to the domain's, or, when the states repeat, up to the length where they do (``closed_at``)."""
    if not task.settings.certify:
        return None
    covered: dict[str, Any] = {
        "max_length": exploration.complete_up_to if exploration.closed_at is not None else goal.max_length,
        "alphabet": list(goal.alphabet),
        "states": exploration.states,
        "strings_per_length": exploration.strings,
    }
    if goal.language is not None:  # the prefixes of the language's words, not every string
        covered["language"] = goal.language.name
        covered["language_sha256"] = goal.language.digest()
    if exploration.closed_at is not None:
        covered["closed_at"] = exploration.closed_at
    return Evidence("counting", covered=covered)


def _closed(merge: Merge, exploration: Exploration, evidence: Evidence | None) -> Verdict:
    """Every length is decided: the states of length L are those of length L − 1 and no transition depends on the
    length (``explore``, "When the states repeat")."""
    merge.statistics["closed_at"] = exploration.closed_at
    default = (
        f"the reachable states repeat from length {exploration.closed_at} on ({exploration.states} states by "
        "counting, no transition depending on the length): every length is decided by exploration"
    )
    proof = Proof(default, counted=exploration.states, induction="repeating states")
    return merge.verdict(proof, "all lengths", evidence)


def _refuted(task: Task, merge: Merge, exploration: Exploration) -> Verdict:
    tokens = exploration.disagreement
    assert tokens is not None
    witness = task.prop.violation(task, tokens)  # the reference interpreter (and the program's interpreter)
    if witness is None:
        raise ReplayMismatch(
            f"{task.label}: the counting engine claims a violation on {''.join(tokens)!r} "
            "that the interpreters do not reproduce",
            claimed="".join(tokens),
            replayed="no violation",
        )
    merge.refute(witness, "counting")
    return merge.verdict()


__all__ = ["bounded_unit", "check", "induction_unit"]

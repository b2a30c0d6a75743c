"""The driver of engine ``split`` (what the engine does: its card, ``__init__.py``)."""

from __future__ import annotations

import dataclasses
import heapq
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import z3

from ...batched import Unsupported
from ...bounds import Bounds, cube_bounds
from ...contract import DISTINCT_VALUES, HOLDS, VIOLATED, Task
from ...ir import Model
from ...semantics import Fixed
from ...spaces import InputSpace
from ...symbolic.solve import decode as decode_answer, input_variables, solve
from ...symbolic.values import Builder, NotEncodable
from ...verdict import Evidence, Verdict
from ...witness import ReplayMismatch
from ...work import CONTINUE, STOP, Deadline, DeadlineExpired, UnitError, WorkUnit, schedule
from ..base import ProgressEvent, Run, proved, refuted, replayed, unit_failed, unknown
from ..evaluators import Evaluators
from .cubes import Limits, SplitCube, bounds_cube, center_row, coordinate_sizes, roots, rows, whole_bounds
from .distinct import check_distinct

ENGINE = "split"
PHASES = ("bounds", "enumeration", "smt", "candidates")


@dataclass
class Outcome:
    """What happened to one cube (plain data: it may come back from another process)."""

    cube: SplitCube
    how: str  # bounds | enumeration | smt | split | refuted | open
    children: list[tuple[float, SplitCube]] = field(default_factory=list)  # (priority, cube): higher first
    candidate: tuple[Any, ...] | None = None  # refuted: the input (tokens) to replay
    plan: Any = None  # refuted by smt: the query plan (the property replays the decoded answer)
    decoded: Any = None
    claim: str = ""
    note: str = ""  # open: why (timeout, not encodable, ...)
    bounded: bool = False  # whether its bounds were computed


@dataclass
class BatchResult:
    outcomes: list[Outcome]
    seconds: dict[str, float]
    bounded: list[tuple[int, bool]] = field(default_factory=list)  # per bounded cube: (volume, closed by them)


# ---------------------------------------------------------------- one work unit


def cube_batch(
    task: Task,
    space: InputSpace,
    cubes: list[SplitCube],
    limits: Limits,
    *,
    deadline: Deadline,
    cancelled: Callable[[], bool],
    report: Callable[[str], None],
) -> BatchResult:
    """Bound, decide, enumerate, solve or split each cube of the batch (a work unit)."""
    seconds = dict.fromkeys(PHASES, 0.0)
    outcomes: list[Outcome] = []
    evaluators = Evaluators(task, space)
    split_rows: list[tuple[int, np.ndarray]] = []
    for cube in cubes:
        if deadline.expired() or cancelled():
            outcomes.append(Outcome(cube, "open", note="timeout" if deadline.expired() else "cancelled"))
            continue
        outcome = _one_cube(task, space, cube, limits, evaluators, seconds, deadline, cancelled)
        outcomes.append(outcome)
        if outcome.how == "split":
            row = center_row(space, cube)
            if row is not None:
                split_rows.append((len(outcomes) - 1, row))
    if split_rows and not deadline.expired():
        start = time.perf_counter()
        for length in sorted({row.shape[1] for _, row in split_rows}):  # one batched call per input length
            same = [(index, row) for index, row in split_rows if row.shape[1] == length]
            candidates = np.concatenate([row for _, row in same])
            flagged = _flag(task, space, evaluators, candidates)
            hit = next((k for k in range(len(same)) if flagged[k]), None)
            if hit is not None:
                index = same[hit][0]
                outcomes[index] = Outcome(
                    outcomes[index].cube,
                    "refuted",
                    candidate=space.decode(candidates[hit]),
                    claim="the center of a cube violates the property",
                )
                break
        seconds["candidates"] += time.perf_counter() - start
    return BatchResult(outcomes, seconds, [(o.cube.volume(), o.how == "bounds") for o in outcomes if o.bounded])


def _flag(task: Task, space: InputSpace, evaluators: Evaluators, batch: np.ndarray) -> np.ndarray:
    """Which rows violate: the property's exact batched check, or the interpreter where that cannot run."""
    if task.prop.defines("batched_violations"):
        try:
            return np.asarray(task.prop.batched_violations(task, evaluators, batch)[0], dtype=bool)
        except Unsupported:
            pass
    return np.array([task.prop.violation(task, space.decode(row)) is not None for row in batch], dtype=bool)


def _one_cube(
    task: Task,
    space: InputSpace,
    cube: SplitCube,
    limits: Limits,
    evaluators: Evaluators,
    seconds: dict[str, float],
    deadline: Deadline,
    cancelled: Callable[[], bool],
) -> Outcome:
    if cube.volume() <= limits.enumerate_at:
        start = time.perf_counter()
        members = rows(space, cube)
        flagged = _flag(task, space, evaluators, members) if len(members) else np.zeros(0, dtype=bool)
        seconds["enumeration"] += time.perf_counter() - start
        hits = np.flatnonzero(flagged)
        if len(hits):
            return Outcome(
                cube,
                "refuted",
                candidate=space.decode(members[int(hits[0])]),
                claim="the batched evaluator flags a violation in an enumerated cube",
            )
        return Outcome(cube, "enumeration")
    score = 0.0
    exact = bounds_cube(space, cube)
    memo: dict[int, Bounds] = {}

    def bounds_of(model: Model | None = None) -> Bounds:  # computed only when the property's rule asks
        model = task.model if model is None else model
        if id(model) not in memo:  # a root cube's were likely computed already, by auto's prediction
            bound = whole_bounds if cube.depth == 0 else cube_bounds
            memo[id(model)] = bound(model, task.arithmetic, exact)
        return memo[id(model)]

    start = time.perf_counter()
    decision = task.prop.decide_on_bounds(task, bounds_of)
    if decision is not None:  # None: the property has no bounds rule
        status, score = decision
        seconds["bounds"] += time.perf_counter() - start
        if status == HOLDS:
            return Outcome(cube, "bounds", bounded=True)
        if status == VIOLATED:
            row = center_row(space, cube)
            if row is not None:
                return Outcome(
                    cube,
                    "refuted",
                    candidate=space.decode(row[0]),
                    bounded=True,
                    claim="the cube's bounds lie outside the property for every input",
                )
    note = ""
    if limits.smt_at and cube.volume() <= limits.smt_at and task.prop.defines("build_query"):
        start = time.perf_counter()
        outcome = _smt_leaf(task, space, cube, limits, deadline, cancelled)
        seconds["smt"] += time.perf_counter() - start
        if outcome.how != "open":
            return outcome
        note = outcome.note
    where = cube.widest()
    if where is None:  # a single input the bounds could not decide: enumerate it
        start = time.perf_counter()
        members = rows(space, cube)
        flagged = _flag(task, space, evaluators, members) if len(members) else np.zeros(0, dtype=bool)
        seconds["enumeration"] += time.perf_counter() - start
        if flagged.any():
            return Outcome(
                cube, "refuted", candidate=space.decode(members[0]), claim="the batched evaluator flags a violation"
            )
        return Outcome(cube, "enumeration")
    first, second = cube.halves(*where)
    return Outcome(cube, "split", children=[(score, first), (score, second)], note=note, bounded=decision is not None)


def _smt_leaf(
    task: Task, space: InputSpace, cube: SplitCube, limits: Limits, deadline: Deadline, cancelled: Callable[[], bool]
) -> Outcome:
    """The property's solver queries of the cube's length, the inputs restricted to the cube: all unsat closes."""
    plans = [plan for plan in task.prop.smt_queries(task) if plan.key[:1] == (cube.length,)]
    if not plans:
        return Outcome(cube, "open", note="no solver query of this length")
    values, coordinates = coordinate_sizes(space)
    for plan in plans:
        budget = Deadline(min(limits.smt_seconds, deadline.remaining()))
        builder = Builder(deadline=budget)
        try:
            query = task.prop.build_query(task, plan, builder)
        except NotEncodable as exc:
            return Outcome(cube, "open", note=f"not encodable: {exc}")
        except DeadlineExpired:
            return Outcome(cube, "open", note="timeout while encoding")
        restriction = []
        for inp in query.inputs:
            if len(inp.index_terms) != cube.length * coordinates:
                return Outcome(cube, "open", note="the query's inputs cannot be restricted to the cube")
            ranges = [r for position in cube.ranges for r in position]
            restriction += [
                z3.And(term >= a, term <= b)
                for term, (a, b) in zip(inp.index_terms, ranges)
                if (a, b) != (0, values - 1)
            ]
        answer = solve(
            query.assertions + restriction,
            input_variables(query),
            task.settings.solver,
            budget.remaining(),
            task.settings.seed,
            task.settings.rlimit,
            cancelled,
        )
        if answer.status == "sat":
            decoded = decode_answer(query, answer)
            if decoded is None:
                return Outcome(cube, "open", note="sat without values for every input")
            return Outcome(
                cube,
                "refuted",
                plan=plan,
                decoded=decoded,
                claim=f"{answer.solver} finds a violation in the cube ({plan.name})",
            )
        if answer.status != "unsat":
            return Outcome(cube, "open", note=f"{answer.solver} {answer.status} ({answer.reason})")
    return Outcome(cube, "smt")


# ---------------------------------------------------------------- the driver


def check(task: Task, run: Run, limits: Limits | None = None) -> Verdict:
    refusal = _refusal(task)
    if refusal is not None:
        return unknown(task, run, ENGINE, refusal, [f"split: {refusal}"], {}, method="branch and bound")
    if task.prop.form == DISTINCT_VALUES:
        return check_distinct(task, run, limits or Limits())
    return check_each_input(task, run, limits or Limits())


@dataclass
class Tally:
    """The statistics of one run."""

    created: int = 0
    closed: dict[str, int] = field(default_factory=lambda: {"bounds": 0, "enumeration": 0, "smt": 0})
    max_depth: int = 0
    max_queue: int = 0
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    units: int = 0
    near_leaf: list[int] = field(default_factory=lambda: [0, 0])  # bounded cubes near the leaf size, closed
    enumerate_at: int = 0  # the enumeration size reached (when raised)
    leaves: list[SplitCube] | None = None  # every closed cube (kept only when asked, for tests)

    def as_dict(self) -> dict[str, Any]:
        return {
            "cubes_created": self.created,
            "closed_by_bounds": self.closed["bounds"],
            "closed_by_enumeration": self.closed["enumeration"],
            "closed_by_smt": self.closed["smt"],
            "max_depth": self.max_depth,
            "max_open_cubes": self.max_queue,
            "units": self.units,
            **{f"{phase}_seconds": round(value, 4) for phase, value in self.seconds.items()},
        }


def check_each_input(task: Task, run: Run, limits: Limits, tally: Tally | None = None) -> Verdict:
    space = task.prop.input_space(task)
    tally = tally or Tally()
    queue: list[tuple[int, float, int, SplitCube]] = []  # (-depth, -priority, order, cube): depth first
    order = 0

    def push(cube: SplitCube, priority: float, again: bool = False) -> None:
        nonlocal order
        heapq.heappush(queue, (-cube.depth, -priority, order, cube))
        order += 1
        tally.created += 0 if again else 1
        tally.max_depth = max(tally.max_depth, cube.depth)

    for root in roots(space):
        push(root, 0.0)
    total = sum(root.volume() for root in roots(space))
    closed_volume = 0
    found: list[tuple[Outcome, dict[str, Any]]] = []
    open_notes: list[str] = []
    errors: list[UnitError] = []
    workers = run.executor.workers

    def on_result(unit: WorkUnit, result: BatchResult) -> str:
        nonlocal closed_volume
        for phase, value in result.seconds.items():
            tally.seconds[phase] += value
        for volume, closed in result.bounded:
            if volume <= 4 * current.enumerate_at:
                tally.near_leaf[0] += 1
                tally.near_leaf[1] += closed
        for outcome in result.outcomes:
            if outcome.how in tally.closed:
                tally.closed[outcome.how] += 1
                closed_volume += outcome.cube.volume()
                if tally.leaves is not None:
                    tally.leaves.append(outcome.cube)
            elif outcome.how == "split":
                for priority, child in outcome.children:
                    push(child, priority)
            elif outcome.how == "refuted":
                found.append((outcome, _replay(task, outcome)))
                return STOP
            else:
                open_notes.append(outcome.note)
                push(outcome.cube, 0.0, again=True)  # still open
        tally.max_queue = max(tally.max_queue, len(queue))
        run.progress(
            ProgressEvent(
                ENGINE, f"split: {tally.created} cubes, depth {tally.max_depth}", closed_volume, total, "inputs closed"
            )
        )
        return CONTINUE

    # where bounds close none of the (at least 16) cubes they saw near the leaf size, larger cubes are enumerated
    # (x4 each time): bounds too loose for the property at this size cost time and save nothing, and
    # enumeration is exact at any size
    current = limits
    while queue and not found and not run.deadline.expired() and not errors:
        if len(queue) > limits.queue:
            break
        per_unit = max(1, min(limits.batch, -(-len(queue) // workers)))
        units = []
        for k in range(max(1, workers)):
            batch = [heapq.heappop(queue)[3] for _ in range(min(per_unit, len(queue)))]
            if batch:
                units.append(
                    WorkUnit(
                        f"split: {len(batch)} cubes (depth {batch[0].depth})",
                        cube_batch,
                        (task, space, batch, current),
                        order=tally.units + k,
                        weight=sum(c.volume() for c in batch),
                    )
                )
        tally.units += len(units)
        summary = schedule(run.executor, units, run.deadline, on_result)
        errors += summary.errors
        if summary.expired or summary.cancelled or summary.not_started:
            break
        if tally.near_leaf[0] >= 16 and not tally.near_leaf[1] and current.enumerate_at < limits.enumerate_max:
            tally.near_leaf = [0, 0]
            current = dataclasses.replace(current, enumerate_at=min(limits.enumerate_max, 4 * current.enumerate_at))
            tally.enumerate_at = current.enumerate_at
    statistics = {
        **tally.as_dict(),
        "space": space.describe(),
        "closed_share": _share(closed_volume, total),
        "closed_inputs": closed_volume,
        "domain_inputs": total,
        "enumerate_at": tally.enumerate_at or limits.enumerate_at,
        "smt_at": limits.smt_at,
        "executor": run.executor.name,
        **task.prop.statistics(task),
    }
    if found:
        outcome, witness = found[0]
        statistics["witness_cube_depth"] = outcome.cube.depth
        return refuted(task, run, ENGINE, "branch and bound", witness, statistics)
    if errors:
        return unit_failed(task, run, ENGINE, errors[0], statistics)
    if not queue and closed_volume == total:
        text = (
            f"{sum(tally.closed.values())} cubes closed ({tally.closed['bounds']} by bounds, "
            f"{tally.closed['enumeration']} by enumeration, {tally.closed['smt']} by smt), depth "
            f"{tally.max_depth}"
        )
        detail = task.prop.describe_proof(task, ENGINE, text, statistics)
        evidence = Evidence("split") if task.settings.certify else None  # the cover is in the statistics
        return proved(task, run, ENGINE, "branch and bound", detail, statistics, evidence)
    why = (
        "timeout" if run.deadline.expired() else ("open-cube limit reached" if len(queue) > limits.queue else "stopped")
    )
    detail = f"{_share(closed_volume, total)} of the domain closed, {len(queue)} cubes open ({why})"
    return unknown(task, run, ENGINE, detail, [f"split: {detail}"], statistics, method="branch and bound")


def _refusal(task: Task) -> str | None:
    """Why neither the bounds nor the interpreter can evaluate the task's models (exact LayerNorm), or None."""
    other = getattr(task.options, "model", None)  # a property comparing with another model (equivalent-to)
    models = [task.model, *([other] if isinstance(other, Model) else [])]
    if not isinstance(task.arithmetic, Fixed) and any(next(m.norms(), None) is not None for m in models):
        return "LayerNorm is defined in fixed arithmetic only (an irrational square root in exact arithmetic)"
    return None


def _share(closed: int, total: int) -> str:
    return f"{100 * closed / total:.4g}%" if total else "100%"


def _replay(task: Task, outcome: Outcome) -> dict[str, Any]:
    """The interpreter's witness for a cube's candidate (an engine bug if it does not reproduce)."""
    if outcome.plan is not None:
        witness = task.prop.replay_query(task, outcome.plan, outcome.decoded)
        if witness is None:
            raise ReplayMismatch(
                f"{task.label}: {outcome.claim}, but the reference interpreter finds no violation",
                claimed=str(outcome.decoded),
                replayed="no violation",
            )
        return witness
    assert outcome.candidate is not None  # refuted by evaluation: the candidate input
    return replayed(task, outcome.candidate, outcome.claim)

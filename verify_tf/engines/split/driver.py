"""The driver of engine ``split`` (what the engine does: its card, ``__init__.py``)."""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...contract import HOLDS, OPEN, VIOLATED, Cubes, DistinctValues, Solvable, Task, Witness, capability
from ...semantics import Fixed
from ...spaces import InputSpace
from ...verdict import Evidence, Verdict
from ...witness import ReplayMismatch
from ...work import CONTINUE, STOP, UnitError, WorkUnit, schedule
from ..base import Merge, ProgressEvent, Proof, Run, replayed
from ..evaluators import CompiledEvaluators
from .batch import PHASES, BatchResult, Outcome, cube_batch, flag_violations
from .cubes import DISTINCT_LIMITS, Limits, SplitCube, coordinate_sizes, member_mask, roots
from .distinct import check_distinct
from .leaves import LeafPolicy, Rates

ENGINE = "split"
__all__ = ["ENGINE", "HOLDS", "OPEN", "VIOLATED", "Limits", "Tally", "check", "check_each_input"]


def check(task: Task, run: Run, limits: Limits | None = None) -> Verdict:
    refusal = _refusal(task)
    if refusal is not None:
        return Merge(task, run, ENGINE).unknown(refusal, [f"split: {refusal}"], method="branch and bound")
    if isinstance(task.prop, DistinctValues):
        return check_distinct(task, run, limits or DISTINCT_LIMITS)
    return check_each_input(task, run, limits or Limits())


@dataclass
class Tally:
    """The statistics of one run."""

    created: int = 0
    closed: dict[str, int] = field(default_factory=lambda: {"bounds": 0, "enumeration": 0, "smt": 0})
    max_depth: int = 0
    max_queue: int = 0
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    cpu: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    units: int = 0
    attacked: int = 0
    rates: Rates = field(default_factory=Rates)
    domains: set[str] = field(default_factory=set)
    leaves: list[SplitCube] | None = None  # every closed cube (kept only when asked, for tests)

    def as_dict(self) -> dict[str, Any]:
        bounded = self.rates.bounded
        return {
            "cubes_created": self.created,
            "closed_by_bounds": self.closed["bounds"],
            "closed_by_enumeration": self.closed["enumeration"],
            "closed_by_smt": self.closed["smt"],
            "cubes_bounded": bounded,
            "bound_ms_per_cube": round(1000 * self.seconds["bounds"] / bounded, 3) if bounded else None,
            "bound_cpu_ms_per_cube": round(1000 * self.cpu["bounds"] / bounded, 3) if bounded else None,
            "enumerated_inputs": self.rates.enumerated,
            "enumeration_inputs_per_second": (
                round(self.rates.enumerated / self.seconds["enumeration"]) if self.seconds["enumeration"] else None
            ),
            "attack_rows": self.attacked,
            "bound_domain": ", ".join(sorted(self.domains)) or "none",
            "max_depth": self.max_depth,
            "max_open_cubes": self.max_queue,
            "units": self.units,
            **{f"{phase}_seconds": round(value, 4) for phase, value in self.seconds.items()},
            **{f"{phase}_cpu_seconds": round(value, 4) for phase, value in self.cpu.items()},
        }


class _Queue:
    """The open cubes: best-first by priority (the property's score) while fewer than ``limit`` are open, then
    depth-first (the deepest first, bounded memory); the order switches by re-heaping."""

    def __init__(self, limit: int):
        self.limit, self.best_first = limit, True
        self.heap: list[tuple[tuple[float, float], int, float, SplitCube]] = []
        self.order = 0

    def key(self, cube: SplitCube, priority: float) -> tuple[float, float]:
        return (-priority, -cube.depth) if self.best_first else (-cube.depth, -priority)

    def push(self, cube: SplitCube, priority: float) -> None:
        heapq.heappush(self.heap, (self.key(cube, priority), self.order, priority, cube))
        self.order += 1

    def pop(self) -> tuple[SplitCube, float]:
        _, _, priority, cube = heapq.heappop(self.heap)
        return cube, priority

    def rebalance(self) -> None:
        best_first = len(self.heap) < self.limit
        if best_first != self.best_first:
            self.best_first = best_first
            self.heap = [(self.key(c, p), o, p, c) for _, o, p, c in self.heap]
            heapq.heapify(self.heap)

    def __len__(self) -> int:
        return len(self.heap)


def check_each_input(task: Task, run: Run, limits: Limits, tally: Tally | None = None) -> Verdict:
    space = task.prop.input_space(task)
    tally = tally or Tally()
    queue = _Queue(limits.best_first)

    def push(cube: SplitCube, priority: float, again: bool = False) -> None:
        queue.push(cube, priority)
        tally.created += 0 if again else 1
        tally.max_depth = max(tally.max_depth, cube.depth)

    for root in roots(space):
        push(root, 0.0)
    total = sum(root.volume() for root in roots(space))
    closed_volume = 0
    found: list[tuple[Outcome, Witness]] = []
    open_notes: list[str] = []
    errors: list[UnitError] = []
    workers = max(1, run.executor.workers)
    sample = _calibrate(task, space, tally)  # the enumeration rate, and a random sample checked on the way
    if sample is not None:
        found.append((sample, _replay(task, sample)))
    policy = tally.rates.policy() if limits.adaptive else LeafPolicy()

    def on_result(unit: WorkUnit, result: BatchResult) -> str:
        nonlocal closed_volume
        for phase, value in result.seconds.items():
            tally.seconds[phase] += value
        for phase, value in result.cpu.items():
            tally.cpu[phase] += value
        rates = tally.rates
        rates.record_bounds(result.seconds["bounds"], result.cpu.get("bounds", 0.0), result.bounded)
        rates.record_enumeration(result.seconds["enumeration"], result.cpu.get("enumeration", 0.0), result.enumerated)
        tally.attacked += result.attacked
        if result.domain:
            tally.domains.add(result.domain)
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

    while queue and not found and not run.deadline.expired() and not errors:
        if len(queue) > limits.queue:
            break
        queue.rebalance()
        units: list[WorkUnit] = []
        for batch in _round(queue, limits, policy, tally.rates, workers, run.deadline.remaining()):
            units.append(
                WorkUnit(
                    f"split: {len(batch)} cubes of length {batch[0].length} (depth {batch[0].depth})",
                    cube_batch,
                    (task, space, batch, limits, policy),
                    order=tally.units + len(units),
                    weight=sum(c.volume() for c in batch),
                )
            )
        tally.units += len(units)
        summary = schedule(run.executor, units, run.deadline, on_result)
        errors += summary.errors
        if summary.expired or summary.cancelled or summary.not_started:
            break
        if limits.adaptive:
            policy = tally.rates.policy()
    return _conclude(task, run, limits, tally, policy, queue, found, errors, (closed_volume, total))


def _conclude(
    task: Task,
    run: Run,
    limits: Limits,
    tally: Tally,
    policy: LeafPolicy,
    queue: _Queue,
    found: list[tuple[Outcome, Witness]],
    errors: list[UnitError],
    volumes: tuple[int, int],
) -> Verdict:
    """The verdict of a search that stopped: a replayed refutation, a failed unit, a proof when every cube closed,
    else unknown with the closed share (``volumes``: closed inputs, the domain's)."""
    closed_volume, total = volumes
    space = task.prop.input_space(task)
    statistics = {
        **tally.as_dict(),
        "space": space.describe(),
        "closed_share": _share(closed_volume, total),
        "closed_inputs": closed_volume,
        "domain_inputs": total,
        "enumerate_at": limits.enumerate_at,
        "adaptive_enumeration_up_to": policy.largest() if limits.adaptive else None,
        "smt_at": limits.smt_at,
        "executor": run.executor.name,
        **task.prop.statistics(task),
    }
    merge = Merge(task, run, ENGINE, statistics)
    if found:
        outcome, witness = found[0]
        statistics["witness_cube_depth"] = outcome.cube.depth
        statistics["refuted_by"] = outcome.claim
        merge.refute(witness, "branch and bound")
    for error in errors:
        merge.fail(error)
    if queue or closed_volume != total:
        why = (
            "timeout"
            if run.deadline.expired()
            else ("open-cube limit reached" if len(queue) > limits.queue else "stopped")
        )
        detail = f"{_share(closed_volume, total)} of the domain closed, {len(queue)} cubes open ({why})"
        merge.undecided(detail, [f"split: {detail}"], method="branch and bound")
    text = (
        f"{sum(tally.closed.values())} cubes closed ({tally.closed['bounds']} by bounds, "
        f"{tally.closed['enumeration']} by enumeration, {tally.closed['smt']} by smt), depth "
        f"{tally.max_depth}"
    )
    evidence = Evidence("split") if task.settings.certify else None  # the cover is in the statistics
    return merge.verdict(Proof(text), "branch and bound", evidence)


CALIBRATION_ROWS = 4096


def _calibrate(task: Task, space: InputSpace, tally: Tally) -> Outcome | None:
    """Evaluate up to ``CALIBRATION_ROWS`` random members of the domain exactly (seeded): the enumeration rate the
    leaf policy starts from, and a violation among them is a candidate (replayed by the caller). Its time counts
    as enumeration time (the inputs it evaluated count as enumerated)."""
    rng = np.random.default_rng(task.settings.seed)
    length = max(space.lengths)
    if length == 0:
        return None
    rows = rng.integers(0, len(space.domain.tokens), size=(CALIBRATION_ROWS, length), dtype=np.int64)
    rows = rows[member_mask(space, rows)]
    if not len(rows):
        return None
    start, cpu = time.perf_counter(), time.process_time()
    flagged = flag_violations(task, space, CompiledEvaluators(task, space), rows)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    tally.rates.record_enumeration(wall, cpu, len(rows))
    tally.seconds["enumeration"] += wall
    tally.cpu["enumeration"] += cpu
    hits = np.flatnonzero(flagged)
    if not len(hits):
        return None
    cube = SplitCube(tuple(tuple((0, 0) for _ in range(coordinate_sizes(space)[1])) for _ in range(length)))
    return Outcome(cube, "refuted", candidate=space.decode(rows[int(hits[0])]), claim="a random member violates")


UNIT_SECONDS = 10.0  # predicted wall time per unit at most (a fifth of the time left when that is less)
DEFAULT_PER_INPUT, DEFAULT_PER_CUBE = 2e-5, 0.02  # seconds, until this run has measured its own rates


def _round(
    queue: _Queue, limits: Limits, policy: LeafPolicy, rates: Rates, workers: int, remaining: float
) -> list[list[SplitCube]]:
    """The next round: up to ``workers`` units, each of cubes of one length whose predicted wall time (enumeration
    at the measured rate where the policy enumerates at once, else one bound) stays within ``UNIT_SECONDS`` and a
    fifth of the time left, at most ``Limits.batch`` cubes; the first cube of a unit is taken whatever its cost."""
    per_input = rates.per_input or DEFAULT_PER_INPUT
    per_cube = rates.per_cube or DEFAULT_PER_CUBE
    budget = max(0.05, min(UNIT_SECONDS, remaining / 5))
    units: list[list[SplitCube]] = []
    current: list[SplitCube] = []
    cost = 0.0
    while queue:
        cube, priority = queue.pop()
        volume = cube.volume()
        enumerated = volume <= limits.enumerate_at or (limits.adaptive and policy.enumerate_now(volume))
        work = volume * per_input if enumerated else per_cube
        if current and (len(current) >= limits.batch or cost + work > budget or cube.length != current[0].length):
            units.append(current)
            current, cost = [], 0.0
            if len(units) == workers:
                queue.push(cube, priority)
                break
        current.append(cube)
        cost += work
    if current:
        units.append(current)
    return units


def _refusal(task: Task) -> str | None:
    """Why neither the bounds nor the interpreter can evaluate the task's models (exact LayerNorm), or None."""
    models = [task.model, *capability(task.prop, Cubes).other_models(task)]
    if not isinstance(task.arithmetic, Fixed) and any(next(m.norms(), None) is not None for m in models):
        return "LayerNorm is defined in fixed arithmetic only (an irrational square root in exact arithmetic)"
    return None


def _share(closed: int, total: int) -> str:
    return f"{100 * closed / total:.4g}%" if total else "100%"


def _replay(task: Task, outcome: Outcome) -> Witness:
    """The interpreter's witness for a cube's candidate (an engine bug if it does not reproduce)."""
    if outcome.plan is not None:
        witness = capability(task.prop, Solvable).replay_query(task, outcome.plan, outcome.decoded)
        if witness is None:
            raise ReplayMismatch(
                f"{task.label}: {outcome.claim}, but the reference interpreter finds no violation",
                claimed=str(outcome.decoded),
                replayed="no violation",
            )
        return witness
    assert outcome.candidate is not None  # refuted by evaluation: the candidate input
    return replayed(task, outcome.candidate, outcome.claim)

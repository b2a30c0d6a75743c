"""One work unit of ``split``: a batch of cubes of one input length, bounded, decided, attacked, enumerated or split.

1. Cubes the leaf policy enumerates at once (``Limits.enumerate_at``, ``leaves.LeafPolicy``) are evaluated exactly,
   all of them in one batched call per chunk of rows.
2. The others are bounded together (``bounder``: the linear domain in one vectorised call, or intervals) and the
   property decides each: ``holds`` closes it, ``violated`` (every input of the cube violates) hands its center
   to the replay, ``open`` goes on.
3. **Attack**: every open cube's corners under its linear bound (and its center) are evaluated exactly, all in one
   batched call: a violation is a refutation (replayed by the driver).
4. Open cubes are enumerated where the leaf policy says that is cheaper than their subtree, handed to SMT where
   configured, else split on the widest range, ties broken by the largest linear coefficient × width.

Plain data in and out (``Limits``, ``LeafPolicy``, ``SplitCube``s; ``BatchResult``), so every executor applies.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import z3

from ...batched import Unsupported
from ...bounds import Bounds
from ...contract import HOLDS, OPEN, VIOLATED, Batched, Bounded, Solvable, Task, capability
from ...ir import Model, Token
from ...spaces import InputSpace
from ...symbolic.solve import decode as decode_answer, input_variables, solve
from ...symbolic.values import Builder, NotEncodable
from ...work import Deadline, DeadlineExpired
from ..evaluators import CompiledEvaluators
from .bounder import BatchBounds, Bounder, CubeBounds
from .cubes import Limits, SplitCube, center_row, coordinate_sizes, member_mask, rows, whole_bounds
from .leaves import LeafPolicy

PHASES = ("bounds", "enumeration", "smt", "attack")
CHUNK = 1 << 16  # rows per batched evaluation call, at most ...
FIRST_CHUNK = 256  # ... and at first; then what the measured rate evaluates in CALL_SECONDS
CALL_SECONDS = 0.5  # between two readings of the deadline
ENUMERATE_CAP = 1 << 20  # larger cubes are split first, whatever the leaf policy says (progress, deadlines)


@dataclass
class Outcome:
    """What happened to one cube (plain data: it may come back from another process)."""

    cube: SplitCube
    how: str  # bounds | enumeration | smt | split | refuted | open
    children: list[tuple[float, SplitCube]] = field(default_factory=list)  # (priority, cube): higher first
    candidate: tuple[Token, ...] | None = None  # refuted: the input (tokens) to replay
    plan: Any = None  # refuted by smt: the query plan (the property replays the decoded answer)
    decoded: Any = None
    claim: str = ""
    note: str = ""  # open: why (timeout, not encodable, ...)


@dataclass
class BatchResult:
    outcomes: list[Outcome]
    seconds: dict[str, float]  # wall seconds per phase
    cpu: dict[str, float] = field(default_factory=dict)  # this unit's process time per phase (load-independent)
    bounded: list[tuple[int, bool]] = field(default_factory=list)  # per bounded cube: (volume, closed by bounds)
    enumerated: int = 0  # inputs evaluated by enumeration (the rate's denominator)
    attacked: int = 0  # corner rows evaluated
    domain: str = ""  # "linear" or why the intervals were used


def flag_violations(task: Task, space: InputSpace, evaluators: CompiledEvaluators, batch: np.ndarray) -> np.ndarray:
    """Which rows violate: the property's exact batched check, or the interpreter where that cannot run."""
    if isinstance(task.prop, Batched):
        try:
            return np.asarray(task.prop.batched_violations(task, evaluators, batch)[0], dtype=bool)
        except Unsupported:
            pass
    return np.array([task.prop.violation(task, space.decode(row)) is not None for row in batch], dtype=bool)


class _Unit:
    def __init__(
        self, task: Task, space: InputSpace, limits: Limits, deadline: Deadline, cancelled: Callable[[], bool]
    ):
        self.task, self.space, self.limits = task, space, limits
        self.deadline, self.cancelled = deadline, cancelled
        self.evaluators = CompiledEvaluators(task, space)
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.cpu = dict.fromkeys(PHASES, 0.0)
        self.enumerated = 0
        self.attacked = 0
        self.step = FIRST_CHUNK  # rows of the next evaluation call: sized by the measured rate (``pace``)

    @contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        start, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.seconds[phase] += time.perf_counter() - start
            self.cpu[phase] += time.process_time() - cpu

    def stopped(self) -> str | None:
        if self.deadline.expired():
            return "timeout"
        return "cancelled" if self.cancelled() else None

    def pace(self, done: int, seconds: float) -> None:
        """Size the next call to about CALL_SECONDS at the rate just measured (a two-layer softmax model took tens of
        seconds for one call of CHUNK rows, so the deadline was read once a minute: 69-74 s at --timeout 30)."""
        if seconds > 0:
            self.step = max(FIRST_CHUNK, min(CHUNK, int(done / seconds * CALL_SECONDS)))

    def enumerate(self, cubes: list[SplitCube], claim: str) -> list[Outcome]:
        """Every member of every cube, evaluated exactly in chunks: closed, or the first violation found."""
        with self.timed("enumeration"):
            return self._enumerate(cubes, claim)

    def _enumerate(self, cubes: list[SplitCube], claim: str) -> list[Outcome]:
        outcomes: list[Outcome] = []
        pending: list[tuple[SplitCube, np.ndarray]] = [(cube, rows(self.space, cube)) for cube in cubes]
        refuted: Outcome | None = None
        index = 0
        while index < len(pending) and refuted is None:
            why = self.stopped()
            if why is not None:
                outcomes += [Outcome(cube, "open", note=why) for cube, _ in pending[index:]]
                index = len(pending)
                break
            group: list[tuple[SplitCube, np.ndarray]] = []
            size = 0  # cubes whose rows fit one chunk (a large cube is a chunk of its own, cut below)
            while index < len(pending) and (not group or size + len(pending[index][1]) <= CHUNK):
                group.append(pending[index])
                size += len(pending[index][1])
                index += 1
            members = np.concatenate([r for _, r in group]) if size else np.zeros((0, group[0][0].length), np.int64)
            flagged = np.zeros(len(members), dtype=bool)
            offset = 0
            while offset < len(members):
                if self.stopped() is not None:
                    break
                step = self.step
                started = time.perf_counter()
                flagged[offset : offset + step] = flag_violations(
                    self.task, self.space, self.evaluators, members[offset : offset + step]
                )
                done_rows = min(step, len(members) - offset)
                self.enumerated += done_rows
                offset += done_rows
                self.pace(done_rows, time.perf_counter() - started)
            done = self.stopped() is None or not len(members) or bool(flagged.any())
            hits = np.flatnonzero(flagged)
            at = 0
            for cube, members_of in group:
                mine = hits[(hits >= at) & (hits < at + len(members_of))]
                if len(mine) and refuted is None:
                    refuted = Outcome(cube, "refuted", candidate=self.space.decode(members[int(mine[0])]), claim=claim)
                    outcomes.append(refuted)
                elif done:
                    outcomes.append(Outcome(cube, "enumeration"))
                else:
                    outcomes.append(Outcome(cube, "open", note="timeout"))
                at += len(members_of)
        outcomes += [Outcome(cube, "open", note="stopped") for cube, _ in pending[index:]]
        return outcomes

    def attack(self, candidates: list[tuple[int, np.ndarray]]) -> tuple[int, tuple[Token, ...]] | None:
        """(index of the cube, the violating input) among the candidate rows (index, rows), or None."""
        if not candidates:
            return None
        with self.timed("attack"):
            return self._attack(candidates)

    def _attack(self, candidates: list[tuple[int, np.ndarray]]) -> tuple[int, tuple[Token, ...]] | None:
        owners = np.concatenate([np.full(len(r), i) for i, r in candidates])
        stacked = np.concatenate([r for _, r in candidates])
        stacked, first = np.unique(stacked, axis=0, return_index=True)
        owners = owners[first]
        keep = member_mask(self.space, stacked)
        stacked, owners = stacked[keep], owners[keep]
        self.attacked = len(stacked)
        found = None
        if len(stacked):
            flagged = flag_violations(self.task, self.space, self.evaluators, stacked)
            hits = np.flatnonzero(flagged)
            if len(hits):
                found = int(owners[hits[0]]), self.space.decode(stacked[int(hits[0])])
        return found


def cube_batch(
    task: Task,
    space: InputSpace,
    cubes: list[SplitCube],
    limits: Limits,
    policy: LeafPolicy,
    *,
    deadline: Deadline,
    cancelled: Callable[[], bool],
    report: Callable[[str], None],
) -> BatchResult:
    """Bound, decide, attack, enumerate, solve or split each cube of the batch (one input length; a work unit)."""
    unit = _Unit(task, space, limits, deadline, cancelled)
    decides = isinstance(task.prop, Bounded)
    at_once = [c for c in cubes if _enumerate_now(c, limits, policy, decides)]
    chosen = {id(c) for c in at_once}
    rest = [c for c in cubes if id(c) not in chosen]
    outcomes = unit.enumerate(at_once, "the batched evaluator flags a violation in an enumerated cube")
    bounded: list[tuple[int, bool]] = []
    domain = ""
    if rest and unit.stopped() is None:
        if not decides:
            outcomes += _after_bounds(unit, rest, [None] * len(rest), [0.0] * len(rest), policy)
        else:
            with unit.timed("bounds"):
                closed_roots = _closed_roots(task, space, rest)
                outcomes += [Outcome(cube, "bounds") for cube in closed_roots]
                bounded += [(cube.volume(), True) for cube in closed_roots]
                rest = [cube for cube in rest if cube not in closed_roots]
                bounder = Bounder(task, space, limits.linear)
                domain = bounder.why_not_linear() or "linear"
                batch = BatchBounds(bounder, rest) if rest else None
                decide = capability(task.prop, Bounded).decide_on_bounds
                decisions = [decide(task, _bounds_of(batch, k)) for k in range(len(rest)) if batch]
            still: list[SplitCube] = []
            views: list[CubeBounds | None] = []
            scores: list[float] = []
            for k, (cube, decision) in enumerate(zip(rest, decisions)):
                status, score = decision if decision is not None else (OPEN, 0.0)
                bounded.append((cube.volume(), status == HOLDS))
                if status == HOLDS:
                    outcomes.append(Outcome(cube, "bounds"))
                elif status == VIOLATED and (row := center_row(space, cube)) is not None:
                    claim = "the cube's bounds lie outside the property for every input"
                    outcomes.append(Outcome(cube, "refuted", candidate=space.decode(row[0]), claim=claim))
                else:
                    still.append(cube)
                    views.append(batch.views[k] if batch is not None else None)
                    scores.append(score)
            outcomes += _after_bounds(unit, still, views, scores, policy)
    elif rest:
        outcomes += [Outcome(c, "open", note=unit.stopped() or "stopped") for c in rest]
    return BatchResult(outcomes, unit.seconds, unit.cpu, bounded, unit.enumerated, unit.attacked, domain)


def _bounds_of(batch: BatchBounds | None, index: int) -> Callable[..., Bounds]:
    def bounds_of(model: Model | None = None) -> Bounds:
        assert batch is not None
        return batch.of(index, model)

    return bounds_of


def _closed_roots(task: Task, space: InputSpace, cubes: list[SplitCube]) -> list[SplitCube]:
    """The root cubes (every input of one length) whose exact intervals already decide ``holds``: those intervals
    are the ones auto's prediction for split computed (``cubes.whole_bounds``, once per process), so a domain that
    prediction found decided costs no second bound."""
    closed = []
    for cube in cubes:
        if cube.depth:
            continue

        def bounds_of(model: Model | None = None, n: int = cube.length) -> Bounds:
            return whole_bounds(task.model if model is None else model, task.arithmetic, space, n)

        decision = capability(task.prop, Bounded).decide_on_bounds(task, bounds_of)
        if decision is not None and decision[0] == HOLDS:
            closed.append(cube)
    return closed


def _enumerate_now(cube: SplitCube, limits: Limits, policy: LeafPolicy, bounds: bool) -> bool:
    """Small cubes always; without bounds (no decide_on_bounds) every cube up to the cap; else as the policy says."""
    volume = cube.volume()
    if volume <= max(1, limits.enumerate_at):  # a single input is always evaluated, never bounded
        return True
    if volume > ENUMERATE_CAP:
        return False
    return not bounds or (limits.adaptive and policy.enumerate_now(volume))


def _after_bounds(
    unit: _Unit, cubes: list[SplitCube], views: list[CubeBounds | None], scores: list[float], policy: LeafPolicy
) -> list[Outcome]:
    """Attack the open cubes, then enumerate, solve or split each."""
    space, limits = unit.space, unit.limits
    outcomes: list[Outcome] = []
    candidates = []
    for k, (cube, view) in enumerate(zip(cubes, views)):
        found = [r for r in (center_row(space, cube),) if r is not None]
        if limits.attack and view is not None and view.corners is not None:
            found.append(np.asarray(view.corners, dtype=np.int64).reshape(-1, cube.length))
        if found:
            candidates.append((k, np.concatenate(found)))
    hit = unit.attack(candidates) if unit.stopped() is None else None
    if hit is not None:
        k, tokens = hit
        claim = "a corner of the cube under its linear bound violates the property"
        return [Outcome(cubes[k], "refuted", candidate=tokens, claim=claim)]
    leaves = [c for c in cubes if limits.adaptive and c.volume() <= ENUMERATE_CAP and policy.enumerate_open(c.volume())]
    if leaves:
        outcomes += unit.enumerate(leaves, "the batched evaluator flags a violation in an enumerated cube")
        if any(o.how == "refuted" for o in outcomes):
            return [o for o in outcomes if o.how == "refuted"]
    enumerated = {id(c) for c in leaves}
    for cube, view, score in zip(cubes, views, scores):
        if id(cube) in enumerated:
            continue
        note = ""
        if limits.smt_at and cube.volume() <= limits.smt_at and isinstance(unit.task.prop, Solvable):
            with unit.timed("smt"):
                outcome = _smt_leaf(unit.task, space, cube, limits, unit.deadline, unit.cancelled)
            if outcome.how != "open":
                outcomes.append(outcome)
                continue
            note = outcome.note
        where = cube.most_influential(view.scores) if view is not None and view.scores is not None else cube.widest()
        if where is None:  # a single input the bounds could not decide
            outcomes += unit.enumerate([cube], "the batched evaluator flags a violation")
            continue
        first, second = cube.halves(*where)
        outcomes.append(Outcome(cube, "split", children=[(score, first), (score, second)], note=note))
    return outcomes


def _smt_leaf(
    task: Task, space: InputSpace, cube: SplitCube, limits: Limits, deadline: Deadline, cancelled: Callable[[], bool]
) -> Outcome:
    """The property's solver queries of the cube's length, the inputs restricted to the cube: all unsat closes."""
    prop = capability(task.prop, Solvable)
    plans = [plan for plan in prop.smt_queries(task) if plan.key[:1] == (cube.length,)]
    if not plans:
        return Outcome(cube, "open", note="no solver query of this length")
    values, coordinates = coordinate_sizes(space)
    for plan in plans:
        budget = Deadline(min(limits.smt_seconds, deadline.remaining()))
        builder = Builder(deadline=budget)
        try:
            query = prop.build_query(task, plan, builder)
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

"""Equivalence at every length: induction over positions, with the position, the sums and the counts unbounded.

The joint state after i letters is the point p = (i, S, C, L): the model's value sums S (mantissas, one per
head coordinate), the counter machine's counts C and the letter counts L, all integers. An invariant Inv(p)
is proved inductive with z3 over unbounded integers (QF_LIA):

* **base**: Inv holds at the state after BOS (evaluated exactly);
* **step**, for every letter σ: Inv(p) ∧ p' = T_σ(p) ⇒ Inv(p'), where T_σ is one position of the model
  (``stream.CountingModel.encode_position``) and of the machine (``encode_step``). The one non-linear
  operation, a head's rounded average sat(⌊M/(n+1)⌋) with a symbolic position, is encoded exactly and
  linearly (``stream.rounded_average``: the quotient's bits against (n+1)·constant), so facts such as the
  compiler's sign lemma (L ≥ 0 ⇔ ⌊L·2^f/(i+1)⌋ ≥ 0) are not assumed anywhere: z3 derives what it needs
  from the definition of the floor;
* **decisions**: Inv(p) ∧ p' = T_σ(p) ∧ i + 1 ≥ the first checked prefix length ⇒ the model accepts after
  reading σ iff the machine does.

Together: at every reachable state of every length the decisions agree (the empty prefix is checked
concretely by the exploration). **The invariant is inferred, then checked**: the affine equalities that hold on every
state the exact exploration reached (a basis of the null space of those points, exact linear algebra over
Fractions; for a compiled model they say S = A·C + d), plus the bounds 0 ≤ C, L ≤ i and the sums' ranges
S − S_0 ∈ [lo·i, hi·i] from the value bounds. Houdini-style refinement keeps only what is inductive: a
counterexample to the step drops the bounds its successor violates and adds the successor to the points
(which removes exactly the equalities it violates; inductive equalities always survive). If the decisions
still fail, the verdict names that part and the state (which may be unreachable).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import z3

from ...contract import CountingGoal
from ...semantics.arithmetic import Fixed
from ...symbolic.solve import canonical_smt2
from ...symbolic.values import Builder, NotEncodable, Sym, to_z3
from ...work import Deadline, DeadlineExpired
from .explore import Point
from .stream import CountingModel, rounded_average

PROVED, FAILED, UNDECIDED = "proved", "failed", "undecided"
UNBOUNDED = (
    "the position, the sums and the counts are unbounded integers (induction over every length): the "
    "query has no equivalent bit-vector form, so no LRAT proof"
)
MAX_ROUNDS = 200


@dataclass
class InductionResult:
    """How the induction ended (plain data)."""

    status: str  # proved | failed | undecided
    detail: str = ""  # what failed or was not decided
    invariant: list[str] = field(default_factory=list)
    rounds: int = 0  # refinement rounds
    queries: int = 0
    solver_seconds: float = 0.0
    counterexample: dict[str, Any] | None = None  # failed: the state and letter of the failing step
    # record=True and proved: the queries of the proof (the last refinement round's steps, the decisions) as
    # verdict.Evidence.queries entries
    asked: list[dict[str, Any]] = field(default_factory=list)


def word_position(letters_before: int) -> str:
    """How a witness names the position of the letter read after ``letters_before`` letters: positions count
    the word's letters from 0, BOS excluded (as crasp-equivalence's witnesses do)."""
    return f"position {letters_before}"


# ---------------------------------------------------------------- exact linear algebra


def null_space(points: Sequence[Point]) -> list[tuple[int, ...]]:
    """Integer vectors r (over (1, p)) with r_0 + Σ r_k p_k = 0 for every point: a basis, exactly."""
    width = 1 + len(points[0])
    pivots: dict[int, list[Fraction]] = {}  # pivot column -> reduced row (reduced row echelon form)
    for point in dict.fromkeys(points):
        row = [Fraction(1), *map(Fraction, point)]
        for column, basis in pivots.items():
            if row[column] != 0:
                factor = row[column]
                row = [a - factor * b for a, b in zip(row, basis)]
        lead = next((c for c, a in enumerate(row) if a != 0), None)
        if lead is None:
            continue
        row = [a / row[lead] for a in row]
        for column, basis in pivots.items():
            if basis[lead] != 0:
                factor = basis[lead]
                pivots[column] = [a - factor * b for a, b in zip(basis, row)]
        pivots[lead] = row
    relations = []
    for free in range(width):
        if free in pivots:
            continue
        vector = [Fraction(0)] * width
        vector[free] = Fraction(1)
        for column, basis in pivots.items():
            vector[column] = -basis[free]
        scale = math.lcm(*(a.denominator for a in vector))
        integers = [int(a * scale) for a in vector]
        divisor = math.gcd(*integers)
        relations.append(tuple(a // divisor for a in integers))
    return relations


def _holds(relation: tuple[int, ...], point: Point) -> bool:
    return relation[0] + sum(r * x for r, x in zip(relation[1:], point)) == 0


# ---------------------------------------------------------------- the symbolic state and one step


@dataclass
class _Layout:
    names: list[str]  # of the point's entries: i, sums, counts, letter counts
    sums: slice
    counts: slice
    letters: slice


def _layout(counting: CountingModel, goal: CountingGoal) -> _Layout:
    sums = [f"S[{c}]" for c in counting.coordinates]
    counts = list(goal.machine.names)
    letters = [f"|w|_{a}" for a in goal.alphabet]
    a, b = 1 + len(sums), 1 + len(sums) + len(counts)
    return _Layout(["i", *sums, *counts, *letters], slice(1, a), slice(a, b), slice(b, b + len(letters)))


@dataclass
class _Step:
    post: list[Any]  # z3 terms of the successor point
    model_accepts: Any
    machine_accepts: Any
    side: list[Any]  # side constraints of the encoding


def _encode_step(
    counting: CountingModel, goal: CountingGoal, layout: _Layout, pre: list[Any], symbol: str, deadline: Deadline
) -> _Step:
    arith = counting.arith
    if not isinstance(arith, Fixed):
        raise NotEncodable("exact arithmetic: a head's average S/n is not on a grid")
    if arith.attention_rounding == "per-probability":
        raise NotEncodable(
            "per-probability rounding: a head's weight floor(1/n) times its sum is a product of two unknowns"
        )
    builder = Builder(deadline=deadline)
    i = pre[0]
    keys = i + (1 if counting.bos is not None else 0) + 1  # stream positions up to and including the new one
    sums = pre[layout.sums]
    post_sums: list[Any] = [None] * len(sums)

    def head_output(k: int, value: Sym) -> Sym:
        post_sums[k] = sums[k] + to_z3(value.scaled_num(arith.scale))
        return rounded_average(builder, arith, post_sums[k], keys)

    readout, _ = counting.encode_position(builder, symbol, head_output)
    assert readout is not None  # the whole position was encoded
    counts, output = goal.machine.encode_step(list(pre[layout.counts]), symbol)
    letters = [x + (1 if a == symbol else 0) for x, a in zip(pre[layout.letters], goal.alphabet)]
    model_accepts = z3.Not(builder.ge(Sym.const(goal.threshold), readout))
    return _Step([i + 1, *post_sums, *counts, *letters], model_accepts, output, list(builder.assertions))


# ---------------------------------------------------------------- candidate bounds


@dataclass(frozen=True)
class _Bound:
    """Σ coefficient·entry + constant ≥ 0 over the point's entries (entry 0 is i)."""

    coefficients: tuple[tuple[int, int], ...]
    constant: int
    text: str

    def holds(self, point: Point) -> bool:
        return self.constant + sum(c * point[k] for k, c in self.coefficients) >= 0

    def term(self, values: list[Any]) -> Any:
        return z3.Sum([to_z3(self.constant), *(c * values[k] for k, c in self.coefficients)]) >= 0


def _candidate_bounds(layout: _Layout, start: Point, increments: Sequence[tuple[int, int]] | None) -> list[_Bound]:
    names = layout.names
    bounds = []
    for k in list(range(layout.counts.start, layout.counts.stop)) + list(
        range(layout.letters.start, layout.letters.stop)
    ):
        bounds.append(_Bound(((k, 1),), 0, f"{names[k]} >= 0"))
        bounds.append(_Bound(((0, 1), (k, -1)), 0, f"{names[k]} <= i"))
    if increments is not None:
        for offset, (lo, hi) in enumerate(increments):
            k = layout.sums.start + offset
            s0 = start[k]
            bounds.append(_Bound(((k, 1), (0, -lo)), -s0, f"{names[k]} >= {_line(s0, lo)}"))
            bounds.append(_Bound(((k, -1), (0, hi)), s0, f"{names[k]} <= {_line(s0, hi)}"))
    return [b for b in bounds if b.holds(start)]


def _line(constant: int, slope: int) -> str:
    if slope == 0:
        return str(constant)
    step = "i" if abs(slope) == 1 else f"{abs(slope)}·i"
    if constant == 0:
        return step if slope > 0 else f"-{step}"
    return f"{constant} {'+' if slope > 0 else '-'} {step}"


def _relation_text(relation: tuple[int, ...], names: list[str]) -> str:
    parts = [f"{r}·{n}" if abs(r) != 1 else (n if r == 1 else f"-{n}") for r, n in zip(relation[1:], names) if r]
    text = " + ".join(parts).replace("+ -", "- ")
    return f"{text} = {-relation[0]}"


# ---------------------------------------------------------------- the induction


def prove_all_lengths(
    counting: CountingModel,
    goal: CountingGoal,
    points: list[Point],
    start: Point,
    increments: Sequence[tuple[int, int]] | None,
    *,
    deadline: Deadline,
    cancelled: Callable[[], bool] = lambda: False,
    record: bool = False,
) -> InductionResult:
    """Base, step and decisions (module docstring); ``points``: every state the exact exploration reached.
    ``record``: keep the proof's queries as SMT-LIB text (``InductionResult.asked``) for a certificate."""
    layout = _layout(counting, goal)
    result = InductionResult(UNDECIDED)
    if not points:
        result.detail = "no reachable state to infer an invariant from"
        return result
    names = layout.names
    pre = [z3.Int(f"p{k}") for k in range(len(names))]  # p0 = i
    try:
        steps = {symbol: _encode_step(counting, goal, layout, pre, symbol, deadline) for symbol in goal.alphabet}
    except NotEncodable as exc:
        result.detail = f"not encodable: {exc}"
        return result
    except DeadlineExpired:
        result.detail = "timeout while encoding the induction step"
        return result
    points = list(dict.fromkeys(points))
    relations = null_space(points)
    bounds = _candidate_bounds(layout, start, increments)
    began = time.perf_counter()

    def invariant(values: list[Any], rels: list[Any], bnds: list[Any]) -> list[Any]:
        return (
            [z3.Sum([to_z3(r[0]), *(c * v for c, v in zip(r[1:], values) if c)]) == 0 for r in rels]
            + [b.term(values) for b in bnds]
            + [values[0] >= 0]
        )

    this_round: list[dict[str, Any]] = []  # record: the current refinement round's step queries

    def ask(assertions: list[Any], name: str = "") -> tuple[str, Any]:
        solver = z3.Solver()
        solver.set("timeout", max(1, int(1000 * deadline.remaining())))
        solver.add(*assertions)
        start_time = time.perf_counter()
        answer = solver.check()
        result.solver_seconds += time.perf_counter() - start_time
        result.queries += 1
        if record:
            this_round.append(
                {
                    "name": name,
                    "smt2": canonical_smt2(solver.assertions()),
                    "answer": str(answer),
                    "no_bit_vector_form": UNBOUNDED,
                }
            )
        if answer == z3.sat:
            return "sat", solver.model()
        return ("unsat", None) if answer == z3.unsat else ("unknown", solver.reason_unknown())

    def evaluate(model: Any, terms: list[Any]) -> Point:
        return tuple(model.eval(to_z3(t), model_completion=True).as_long() for t in terms)

    # step: refine until Inv ∧ T ⇒ Inv' for every letter
    while True:
        if deadline.expired() or cancelled():
            result.detail = "timeout during the induction step (refining the invariant)"
            return _finish(result, relations, bounds, names, began)
        if result.rounds >= MAX_ROUNDS:
            result.detail = f"no inductive invariant after {MAX_ROUNDS} refinement rounds"
            return _finish(result, relations, bounds, names, began)
        changed = False
        this_round.clear()
        for symbol, step in steps.items():
            claim = invariant(step.post, relations, bounds)
            answer, model = ask(
                [*invariant(pre, relations, bounds), *step.side, z3.Not(z3.And(claim))],
                f"induction step, letter {symbol!r}",
            )
            if answer == "unknown":
                result.detail = f"z3 could not decide the step for letter {symbol!r} ({model})"
                return _finish(result, relations, bounds, names, began)
            if answer == "sat":
                successor = evaluate(model, step.post)
                bounds = [b for b in bounds if b.holds(successor)]
                if not all(_holds(r, successor) for r in relations):
                    points.append(successor)
                    relations = null_space(points)
                result.rounds += 1
                changed = True
                break
        if not changed:
            break
    # decisions: Inv ∧ T ∧ (i + 1 checked) ⇒ same decision
    for symbol, step in steps.items():
        if deadline.expired() or cancelled():
            result.detail = "timeout while checking the decisions"
            return _finish(result, relations, bounds, names, began)
        answer, model = ask(
            [
                *invariant(pre, relations, bounds),
                *step.side,
                pre[0] + 1 >= goal.first_position,
                step.model_accepts != step.machine_accepts,
            ],
            f"decisions, letter {symbol!r}",
        )
        if answer == "unknown":
            result.detail = f"z3 could not decide the decisions for letter {symbol!r} ({model})"
            return _finish(result, relations, bounds, names, began)
        if answer == "sat":
            state = evaluate(model, pre)
            accepts = z3.is_true(model.eval(step.model_accepts, model_completion=True))
            verb = {True: "accepts", False: "rejects"}
            result.status = FAILED
            shown = ", ".join(f"{n} = {v}" for n, v in zip(names, state))
            result.detail = (
                f"the induction step fails: in a state that satisfies the invariant ({shown}), "
                f"reading {symbol!r} at {word_position(state[0])} the model {verb[accepts]} and the "
                f"program {verb[not accepts]} (the state may be unreachable)"
            )
            result.counterexample = {"state": dict(zip(names, state)), "letter": symbol, "model_accepts": accepts}
            return _finish(result, relations, bounds, names, began)
    result.status = PROVED
    result.asked = list(this_round)  # the last round's steps (all unsat) and the decisions
    return _finish(result, relations, bounds, names, began)


def _finish(
    result: InductionResult, relations: list[Any], bounds: list[Any], names: list[str], began: float
) -> InductionResult:
    result.invariant = [_relation_text(r, names) for r in relations] + [b.text for b in bounds]
    result.solver_seconds = round(result.solver_seconds, 4)
    return result


__all__ = ["FAILED", "PROVED", "UNDECIDED", "InductionResult", "null_space", "prove_all_lengths"]

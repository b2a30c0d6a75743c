"""The attention step of the depth-signature argument: a causal head without positional information reads its
keys as a multiset.

Claim, for one arithmetic and one count m of keys: for EVERY head of every scoring the semantics offers under
that arithmetic (uniform, hardmax, and softmax in fixed point, with its attention rounding) and every choice of
weights, the output at the last of m positions does not change when the columns at positions 0..m-2 are
permuted. The two generators of the permutations of m - 1 elements are checked, the transposition (0 1) and
the cycle (0 1 ... m-2), one z3 query each; ``unsat`` means the output is invariant for every weight choice.

The encoding over-approximates the class, so ``unsat`` is a proof for the class:
  * columns are elements of an uninterpreted sort (any width, any values);
  * a score is an arbitrary function S(query column, key column) (W_Q, W_K, their biases and rounding), a value
    coordinate an arbitrary function V(key column) (every coordinate is the same formula, so one suffices);
  * the normalisation follows docs/semantics.md, §2, with every rounding, exponential table and saturation an
    arbitrary function: uniform 1/m; hardmax the average over the keys of maximal score; softmax
    ``exact-sums`` E(M - s_j) / Σ_k E(M - s_k) with M the row maximum; ``per-probability`` floors each such
    weight; ``rounded-terms`` round(Σ_j T(s_j, v_j) / Σ_j H(s_j)), the uniform average when the denominator is 0;
  * the head output is round(Σ_j a_j·v_j) (the identity in exact arithmetic).
An RPE bias, a URPE table or an absolute positional encoding would make scores depend on positions; the class
excludes them (``fit`` refuses such models) and tests show the query is satisfiable for RPE.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import z3

from ...classes import scorings
from ...contract import StepResult
from ...semantics import Arithmetic, Fixed
from ...symbolic.solve import SAT, UNSAT, Session
from ...work import Deadline, never_cancelled
from .induction import FAILS, HOLDS, UNDECIDED

GENERATORS = ("transposition", "cycle")


@dataclass(frozen=True)
class SymmetryStep:
    scoring: str
    keys: int  # m: the query is the last of m positions
    generator: str  # transposition | cycle

    @property
    def name(self) -> str:
        return f"{self.scoring} head, {self.keys} keys, {self.generator}"


def symmetry_steps(arithmetic: Arithmetic, max_keys: int) -> list[SymmetryStep]:
    """Every step needed for rows of up to ``max_keys`` keys (the query's own included)."""
    return [
        SymmetryStep(scoring, m, g)
        for scoring in scorings(arithmetic)
        for m in range(3, max_keys + 1)
        for g in GENERATORS
        if not (m == 3 and g == "cycle")
    ]  # with 2 keys before the query both coincide


class _Head:
    """One abstract head: its arbitrary functions, shared by both orders of the keys."""

    def __init__(self, arithmetic: Arithmetic) -> None:
        real = z3.RealSort()
        self.column = z3.DeclareSort("Column")
        self.fixed = isinstance(arithmetic, Fixed)
        self.rounding = arithmetic.attention_rounding if isinstance(arithmetic, Fixed) else "exact"
        self.score = z3.Function("S", self.column, self.column, real)
        self.value = z3.Function("V", self.column, real)
        self.exp = z3.Function("E", real, real)  # the exp table (exact-sums, per-probability)
        self.floor = z3.Function("floor_weight", real, real)  # per-probability's floor of each weight
        self.term = z3.Function("T", real, real, real)  # rounded-terms: round(e^s · v)
        self.denominator_term = z3.Function("H", real, real)  # rounded-terms: round(e^s)
        self._round = z3.Function("round", real, real)
        self.constraints: list[Any] = []
        self._maxima: dict[tuple[str, ...], z3.ArithRef] = {}

    def maximum(self, scores: list[Any]) -> z3.ArithRef:
        """The row maximum as a variable M with M >= every score and M equal to one of them; one variable per
        set of score terms, so both orders of the same keys share it."""
        key = tuple(sorted(s.sexpr() for s in scores))
        if key not in self._maxima:
            top = z3.Real(f"M{len(self._maxima)}")
            self.constraints += [top >= s for s in scores] + [z3.Or([top == s for s in scores])]
            self._maxima[key] = top
        return self._maxima[key]

    def round(self, x: z3.ArithRef) -> z3.ArithRef:
        return self._round(x) if self.fixed else x

    def output(self, scoring: str, columns: list[Any], relative_bias: bool = False) -> z3.ArithRef:
        """The head's output at the last position (a value coordinate), keys = ``columns`` in this order.
        ``relative_bias``: add an RPE bias B[j - i] to each score (outside the class: for tests)."""
        query = columns[-1]
        m = len(columns)
        scores = [
            self.score(query, c) + (z3.Real(f"B[{j - m + 1}]") if relative_bias else 0) for j, c in enumerate(columns)
        ]
        values = [self.value(c) for c in columns]
        if scoring == "uniform":
            weights = [z3.RealVal(1) / m] * m
        elif scoring == "hardmax":
            top = self.maximum(scores)
            chosen = [z3.If(s == top, z3.RealVal(1), z3.RealVal(0)) for s in scores]
            weights = [c / z3.Sum(chosen) for c in chosen]
        elif self.rounding == "rounded-terms":
            numerator = z3.Sum([self.term(s, v) for s, v in zip(scores, values)])
            denominator = z3.Sum([self.denominator_term(s) for s in scores])
            return z3.If(denominator == 0, self.round(z3.Sum(values) / m), self.round(numerator / denominator))
        else:
            top = self.maximum(scores)
            exps = [self.exp(top - s) for s in scores]
            weights = [e / z3.Sum(exps) for e in exps]
        if self.rounding == "per-probability":
            weights = [self.floor(w) for w in weights]
        return self.round(z3.Sum([w * v for w, v in zip(weights, values)]))


def permuted(columns: list[Any], generator: str) -> list[Any]:
    """The keys before the query (all but the last) permuted by the generator; the query stays last."""
    keys, query = columns[:-1], columns[-1]
    if generator == "transposition":
        keys = [keys[1], keys[0]] + keys[2:]
    else:
        keys = keys[1:] + keys[:1]
    return keys + [query]


def run_symmetry_step(
    arithmetic: Arithmetic,
    step: SymmetryStep,
    *,
    seconds: float,
    seed: int = 0,
    relative_bias: bool = False,
    cancelled: Callable[[], bool] = never_cancelled,
) -> tuple[StepResult, str]:
    """One query: output(keys) != output(permuted keys) for some head of the class; unsat = the step holds."""
    if seconds <= 0:
        return StepResult(step.name, "attention", None, UNDECIDED, 0.0, "not attempted: timeout"), ""
    head = _Head(arithmetic)
    columns = [z3.Const(f"z{j}", head.column) for j in range(step.keys)]
    session = Session(Deadline(seconds), seed=seed, cancelled=cancelled)
    session.add(
        head.output(step.scoring, columns, relative_bias)
        != head.output(step.scoring, permuted(columns, step.generator), relative_bias)
    )
    session.add(head.constraints)
    answer = session.check()
    if answer == UNSAT:
        status, note = HOLDS, ""
    elif answer == SAT:
        status, note = FAILS, "the output depends on the order of the keys"
    else:
        status, note = UNDECIDED, f"z3: {session.reason}"
    return StepResult(step.name, "attention", None, status, session.statistics.seconds, note), session.smt2()

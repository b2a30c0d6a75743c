"""Solving one encoded query: a fresh solver, a hard time limit, cooperative cancellation, decoding.

A ``Query`` asks for a *violation*: ``unsat`` means no input violates the property (a proof, since the
encoding is exact), ``sat`` gives values for the input variables, which the engine decodes and replays on
the reference interpreter, ``unknown`` carries the solver's reason.

Solvers: ``z3`` in-process (a fresh ``z3.Solver()`` per query: push/pop switches z3 to its weaker incremental
core, ../shared/research/smt-encoding.md), or ``cvc5`` / ``bitwuzla`` / ``portfolio`` on the exported
SMT-LIB text in child processes (the optional ``solvers`` extra). z3's own ``timeout`` parameter is backed by
a watchdog thread that interrupts the solver at the deadline or when the unit is cancelled, so a solve never
outlives its budget.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import z3

from ..work import on_interrupt
from . import foreign
from .bounds import BoundStats
from .inputs import SymbolicInput

SOLVERS = ("z3", "cvc5", "bitwuzla", "portfolio")
LOGIC = "QF_LIA"  # every encoding is linear integer arithmetic with Booleans (docs/smt.md)


ORDER = (
    "lexicographically smallest index vector: positions left to right, coordinates in order; "
    "index k is the k-th grid value (or alphabet symbol) of the domain"
)


@dataclass
class Query:
    """One encoded solver question: is there an input (or pair of inputs) violating the property?"""

    assertions: list  # the encoding's side constraints plus the violation formula
    inputs: Sequence[SymbolicInput]  # decoded in this order
    stats: BoundStats = field(default_factory=BoundStats)
    # turns the solver's model into the plain data handed to the property's replay (default: the inputs)
    decode: Callable[[Callable[[Any], Any]], Any] | None = None


@dataclass
class Answer:
    status: str  # "sat" | "unsat" | "unknown"
    values: dict[str, int] | None = None  # input variable name -> value (sat only)
    reason: str = ""
    seconds: float = 0.0
    solver: str = "z3"
    statistics: dict[str, Any] = field(default_factory=dict)
    model: Any = None  # z3's model (z3 only), for query-specific decoding


def input_variables(query: Query) -> list[z3.ArithRef]:
    return [v for inp in query.inputs for v in inp.index_terms]


def count_constants(assertions: list) -> int:
    seen: set[int] = set()
    names: set[str] = set()
    stack = list(assertions)
    while stack:
        e = stack.pop()
        if e.get_id() in seen:
            continue
        seen.add(e.get_id())
        if z3.is_const(e) and e.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            names.add(e.decl().name())
        stack.extend(e.children())
    return len(names)


def smt2_text(assertions: Sequence) -> str:
    """An encoder query (QF_LIA) as SMT-LIB2, the same text in every process (``canonical_smt2``)."""
    return f"(set-logic {LOGIC})\n" + canonical_smt2(assertions)


def canonical_smt2(assertions: Sequence) -> str:
    """Assertions as SMT-LIB2 text that depends on the assertions only: z3 names shared subterms by AST id, and
    ids depend on everything the process built before, so the assertions are first copied into a fresh context
    (``verify-tf audit`` re-derives a certificate's queries and compares the digests of their text)."""
    context = z3.Context()
    solver = z3.Solver(ctx=context)
    solver.add([a.translate(context) for a in assertions])
    return solver.to_smt2()


on_interrupt(lambda: z3.main_ctx().interrupt())  # SIGINT/SIGTERM: stop any z3 call of this process now


class _Watchdog:
    """Interrupts z3 at the deadline (a backstop for its own timeout) or as soon as ``cancelled()`` is true."""

    def __init__(self, seconds: float, cancelled: Callable[[], bool]):
        self.seconds, self.cancelled = seconds, cancelled
        self.stop = threading.Event()
        self.fired = ""
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        end = time.perf_counter() + self.seconds
        while not self.stop.wait(0.02):
            if self.cancelled():
                self.fired = "cancelled"
            elif time.perf_counter() > end:
                self.fired = "timeout (interrupted)"
            else:
                continue
            z3.main_ctx().interrupt()
            return

    def __enter__(self) -> _Watchdog:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


def solve_z3(
    assertions: list,
    variables: list[z3.ArithRef],
    timeout_s: float,
    seed: int,
    rlimit: int | None,
    cancelled: Callable[[], bool] = lambda: False,
) -> Answer:
    if timeout_s <= 0:
        return Answer("unknown", reason="timeout (no time left)")
    solver = z3.Solver()
    # z3's own timeout first; the watchdog interrupts at the deadline if z3 is slow to notice (it can be, in
    # preprocessing), and z3 takes a moment to unwind from an interrupt: hence the margins
    solver.set("timeout", max(1, int((timeout_s * 0.9 - 0.1) * 1000)))
    solver.set("random_seed", seed)
    if rlimit:
        solver.set("rlimit", rlimit)
    solver.add(assertions)
    start = time.perf_counter()
    with _Watchdog(max(0.01, timeout_s - 0.2), cancelled) as watchdog:
        result = solver.check()
    seconds = time.perf_counter() - start
    stats = {k: v for k, v in solver.statistics()}
    keep = {k: stats[k] for k in ("conflicts", "decisions", "arith-conflicts", "rlimit count") if k in stats}
    if result == z3.sat:
        model = solver.model()
        values = {v.decl().name(): model.eval(v, model_completion=True).as_long() for v in variables}
        return Answer("sat", values, seconds=seconds, statistics=keep, model=model)
    if result == z3.unsat:
        return Answer("unsat", seconds=seconds, statistics=keep)
    reason = watchdog.fired or solver.reason_unknown()
    return Answer("unknown", reason=reason, seconds=seconds, statistics=keep)


def solve(
    assertions: list,
    variables: list[z3.ArithRef],
    solver: str,
    timeout_s: float,
    seed: int,
    rlimit: int | None,
    cancelled: Callable[[], bool] = lambda: False,
) -> Answer:
    if solver == "z3":
        return solve_z3(assertions, variables, timeout_s, seed, rlimit, cancelled)
    if timeout_s <= 0:
        return Answer("unknown", reason="timeout (no time left)", solver=solver)
    names = [v.decl().name() for v in variables]
    text = smt2_text(assertions)
    solvers = ["z3", *foreign.available()] if solver == "portfolio" else [solver]
    raced = foreign.race(text, names, solvers, timeout_s, seed, cancelled)
    return Answer(raced.status, raced.values, reason=raced.reason, seconds=raced.seconds, solver=raced.solver)


def lexicographically_smaller(terms: list[z3.ArithRef], values: list[int]):
    """The index vector ``terms`` is lexicographically smaller than ``values``."""
    options = []
    for p in range(len(terms)):
        prefix = [terms[q] == values[q] for q in range(p)]
        options.append(z3.And(prefix + [terms[p] < values[p]]))
    return z3.Or(options) if options else z3.BoolVal(False)


def decode_inputs(query: Query, values: dict[str, int]) -> list[tuple]:
    def value_of(var: z3.ArithRef) -> int:
        return values[var.decl().name()]

    return [inp.decode(value_of) for inp in query.inputs]


def decode(query: Query, answer: Answer) -> Any:
    """The plain data of a ``sat`` answer (None when a solver gave no value for some input variable).

    A query's own ``decode`` evaluates terms in z3's model, or (foreign solvers) by substituting the input
    values: every term the encodings decode is a function of the inputs.
    """
    variables = input_variables(query)
    if answer.values is None or any(v.decl().name() not in answer.values for v in variables):
        return None
    if query.decode is None:
        return decode_inputs(query, answer.values)
    if answer.model is not None:
        model = answer.model
        return query.decode(lambda term: model.eval(term, model_completion=True))
    pairs = [(v, z3.IntVal(answer.values[v.decl().name()])) for v in variables]
    return query.decode(lambda term: z3.simplify(z3.substitute(term, *pairs)))

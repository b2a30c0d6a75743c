"""Solving: the one z3 session every z3 use goes through, one encoded query's answer, decoding.

``Session`` is how verify-tf runs z3, in every engine and property (a test, tests/test_architecture.py, finds no
``z3.Solver``, ``z3.Optimize`` or tactic solver elsewhere): the deadline (each check gets what is left; z3's own
``timeout`` and a watchdog thread that interrupts z3 at the deadline, so a check never outlives its budget), the
interrupt (SIGINT/SIGTERM and ``cancelled()`` stop a check at once; z3's own SIGINT handler is off while
verify-tf's handlers take the signals, so Ctrl-C always reaches verify-tf) and the statistics (checks, seconds,
z3's counters).

A ``Query`` asks for a *violation*: ``unsat`` means no input violates the property (a proof, since the
encoding is exact), ``sat`` gives values for the input variables, which the engine decodes and replays on
the reference interpreter, ``unknown`` carries the solver's reason.

Solvers: ``z3`` in-process (a fresh session per query: push/pop switches z3 to its weaker incremental
core, ../shared/research/smt-encoding.md), or ``cvc5`` / ``bitwuzla`` / ``portfolio`` on the exported
SMT-LIB text in child processes (the optional ``solvers`` extra; z3's child runs ``solve_text``, a session too).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import z3

from ..work import Deadline, DeadlineExpired, interrupted, never_cancelled, on_interrupt, signals_taken
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


_CONTEXTS: set[z3.Context] = set()  # contexts other than z3's main one that a call is running in now
_CONTEXTS_LOCK = threading.Lock()


def _interrupt_every_context() -> None:
    with _CONTEXTS_LOCK:
        for context in [z3.main_ctx(), *_CONTEXTS]:
            context.interrupt()


on_interrupt(_interrupt_every_context)  # SIGINT/SIGTERM: stop any z3 call of this process now


@contextlib.contextmanager
def interruptible(context: z3.Context) -> Iterator[None]:
    """While the block runs, an interrupt of the process (SIGINT/SIGTERM) also stops z3 calls in ``context`` (a
    fresh context, e.g. the certificate's bit-blaster's); raises ``DeadlineExpired`` at once when it already came.
    Sessions need none of this: they run in the main context and their watchdog looks at the interrupt."""
    with _CONTEXTS_LOCK:
        _CONTEXTS.add(context)
    try:
        if interrupted() is not None:
            raise DeadlineExpired("interrupted")
        yield
    finally:
        with _CONTEXTS_LOCK:
            _CONTEXTS.discard(context)


SAT, UNSAT, UNKNOWN = "sat", "unsat", "unknown"
TACTICS_SMT = ("simplify", "propagate-values", "solve-eqs", "smt")  # preprocessing, then the SMT core
WATCH_SECONDS = 0.02  # how often a session's watchdog looks at the interrupt and ``cancelled``


class _Watchdog:
    """Interrupts z3 after ``seconds`` (a backstop for its own timeout), or as soon as ``cancelled()`` is true or
    the process is interrupted; it goes on interrupting until the check returns (an interrupt that arrives
    before z3 has entered its search is lost, so one would not be enough). ``seconds`` is measured on
    ``time.perf_counter``, never on ``work.clock`` (a test's injected clock must see no readings from here)."""

    def __init__(self, seconds: float, cancelled: Callable[[], bool], context: z3.Context):
        self.seconds, self.cancelled, self.context = seconds, cancelled, context
        self.stop = threading.Event()
        self.fired = ""
        self.thread = threading.Thread(target=self._watch, name="verify-tf z3 watchdog", daemon=True)

    def _watch(self) -> None:
        end = time.perf_counter() + self.seconds
        while not self.stop.wait(WATCH_SECONDS):
            if not self.fired:
                if interrupted() is not None:
                    self.fired = "interrupted"
                elif self.cancelled():
                    self.fired = "cancelled"
                elif time.perf_counter() > end:
                    self.fired = "timeout (interrupted)"
            if self.fired:
                self.context.interrupt()

    def __enter__(self) -> _Watchdog:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


def _clear_interrupt(context: z3.Context) -> None:
    """Forget an interrupt of ``context`` that no check received: z3 keeps it as a pending cancellation until a
    check starts (each check resets it), so one trivial check clears it."""
    solver = z3.Solver(ctx=context)
    solver.set("ctrl_c", not signals_taken())
    solver.check()


@dataclass
class SessionStatistics:
    """What a session's checks cost: how many ran, their seconds, z3's counters added up over them."""

    checks: int = 0
    seconds: float = 0.0
    counters: dict[str, float] = field(default_factory=dict)

    KEPT = ("conflicts", "decisions", "arith-conflicts", "rlimit count")

    def add(self, seconds: float, statistics: Any) -> None:
        self.checks += 1
        self.seconds += seconds
        for key, value in statistics:
            if key in self.KEPT:
                self.counters[key] = self.counters.get(key, 0) + value


class Session:
    """The one way verify-tf runs z3: a solver, its deadline, its interrupt and its statistics.

    ``deadline`` bounds every ``check`` (each gets what is left of it, capped by ``seconds`` when given); z3's own
    ``timeout`` is set a little short of it and a watchdog interrupts z3 at the deadline, when ``cancelled()`` turns
    true or when the process is interrupted (SIGINT/SIGTERM: ``work.request_interrupt``). z3's own SIGINT handler
    is turned off (``ctrl_c``) while verify-tf's own handlers take the signals (``work.signals_taken``): it would
    take Ctrl-C from verify-tf and end the query "interrupted from keyboard" while the run went on (issue 38).
    ``tactics``: a tactic pipeline's solver (e.g. ``TACTICS_SMT``) instead of z3's default; ``optimize``: a
    ``z3.Optimize`` (``minimize``). ``seed``/``rlimit``: z3's ``random_seed`` and ``rlimit`` (None: z3's defaults).
    Not thread-safe, as z3's context is not (``work.Z3_LOCK``).
    """

    def __init__(
        self,
        deadline: Deadline,
        *,
        seed: int | None = 0,
        rlimit: int | None = None,
        cancelled: Callable[[], bool] = never_cancelled,
        tactics: Sequence[str] = (),
        optimize: bool = False,
    ) -> None:
        self.deadline, self.cancelled = deadline, cancelled
        if optimize:
            self.solver: Any = z3.Optimize()
        elif tactics:
            self.solver = z3.Then(*tactics).solver() if len(tactics) > 1 else z3.Tactic(tactics[0]).solver()
        else:
            self.solver = z3.Solver()
        # z3's SIGINT handler would take Ctrl-C from verify-tf's (issue 38); where verify-tf takes no signal (the
        # Python API, a notebook) z3's own still ends a query at Ctrl-C
        self.solver.set("ctrl_c", not signals_taken())
        if seed is not None:
            self.solver.set("random_seed", seed)
        if rlimit:
            self.solver.set("rlimit", rlimit)
        self.statistics = SessionStatistics()
        self.reason = ""  # why the last check was unknown
        self.last_model: Any = None  # the model of the last sat check (kept across the pop of ``check(*extra)``)

    def add(self, *assertions: Any) -> None:
        self.solver.add(*assertions)

    def minimize(self, term: Any) -> None:
        self.solver.minimize(term)

    def assertions(self) -> Any:
        return self.solver.assertions()

    def smt2(self) -> str:
        """The session's assertions as SMT-LIB2, the same text in every process (``canonical_smt2``)."""
        return canonical_smt2(self.solver.assertions())

    def check(self, *extra: Any, seconds: float | None = None) -> str:
        """``sat``, ``unsat`` or ``unknown`` (``reason`` says why) for the assertions, plus ``extra`` for this check
        only (pushed and popped). ``last_model`` holds a sat check's model."""
        remaining = self.deadline.remaining()  # one reading of the deadline's clock per check
        self.last_model = None
        if interrupted() is not None or self.cancelled():
            self.reason = "interrupted" if interrupted() is not None else "cancelled"
            return UNKNOWN
        if remaining <= 0:
            self.reason = "timeout (no time left)"
            return UNKNOWN
        # z3's own timeout first; the watchdog interrupts at the deadline if z3 is slow to notice (it can be, in
        # preprocessing), and z3 takes a moment to unwind from an interrupt: hence the margins. A cap of the
        # caller's (``seconds``) well inside the deadline is z3's timeout as given.
        own = remaining * 0.9 - 0.1
        timeout = seconds if seconds is not None and seconds < own else max(0.001, own)
        self.solver.set("timeout", max(1, int(1000 * timeout)))
        if extra:
            self.solver.push()
            self.solver.add(*extra)
        start = time.perf_counter()
        try:
            # the watchdog: at the deadline (never before z3's own timeout has had its chance)
            with _Watchdog(max(remaining - 0.2, timeout + 0.1), self.cancelled, self.solver.ctx) as watchdog:
                result = self.solver.check()
            if watchdog.fired:  # an interrupt that came as the check returned would fail the next z3 call
                _clear_interrupt(self.solver.ctx)
            elapsed = time.perf_counter() - start
            self.statistics.add(elapsed, self.solver.statistics())
            status = SAT if result == z3.sat else UNSAT if result == z3.unsat else UNKNOWN
            if status == SAT:
                try:
                    self.last_model = self.solver.model()
                except z3.Z3Exception:  # z3 found a model as it was interrupted and did not finish converting it
                    status = UNKNOWN
            self.reason = (watchdog.fired or self.solver.reason_unknown()) if status == UNKNOWN else ""
        finally:
            if extra:
                self.solver.pop()
        return status

    def model(self) -> Any:
        """The model of the last sat check."""
        if self.last_model is None:
            raise ValueError("no model: the last check was not sat")
        return self.last_model


def solve_z3(
    assertions: list,
    variables: list[z3.ArithRef],
    timeout_s: float,
    seed: int,
    rlimit: int | None,
    cancelled: Callable[[], bool] = never_cancelled,
) -> Answer:
    """One query in a fresh session (a fresh solver: push/pop would switch z3 to its weaker incremental core)."""
    session = Session(Deadline(timeout_s), seed=seed, rlimit=rlimit, cancelled=cancelled)
    session.add(assertions)
    status = session.check()
    stats = session.statistics
    keep = {k: v for k, v in stats.counters.items()}
    if status == SAT:
        model = session.model()
        values = {v.decl().name(): model.eval(v, model_completion=True).as_long() for v in variables}
        return Answer(SAT, values, seconds=stats.seconds, statistics=keep, model=model)
    if status == UNSAT:
        return Answer(UNSAT, seconds=stats.seconds, statistics=keep)
    return Answer(UNKNOWN, reason=session.reason, seconds=stats.seconds, statistics=keep)


def solve_text(text: str, names: list[str], timeout_s: float, seed: int) -> tuple[str, dict | None, str]:
    """An SMT-LIB query's answer from z3 (``foreign.race`` runs it in a child process beside other solvers):
    (status, the named integer variables' values when sat, the reason when unknown)."""
    session = Session(Deadline(timeout_s), seed=seed)
    session.solver.from_string(text)
    status = session.check()
    if status == SAT:
        model = session.model()
        return SAT, {n: model.eval(z3.Int(n), model_completion=True).as_long() for n in names}, ""
    return status, None, session.reason


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
    raced = foreign.race(text, names, solvers, timeout_s, seed, cancelled, {**foreign.CHILDREN, "z3": solve_text})
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

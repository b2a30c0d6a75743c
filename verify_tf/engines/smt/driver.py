"""The driver of engine ``smt`` (what the engine does: its card, ``__init__.py``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...contract import QueryPlan, Solvable, Task, capability
from ...symbolic.bounds import BoundStats
from ...symbolic.solve import (
    LOGIC,
    ORDER,
    Query,
    decode,
    input_variables,
    lexicographically_smaller,
    smt2_text,
    solve,
    solve_z3,
)
from ...symbolic.values import Builder, NotEncodable
from ...verdict import Evidence, Verdict
from ...witness import ReplayMismatch
from ...work import CONTINUE, STOP, Deadline, DeadlineExpired, WorkUnit, schedule
from ..base import Merge, ProgressEvent, Proof, Run, smt2_path

ENGINE = "smt"
SOLVED, TIMEOUT, OTHER = "solved", "timeout", "other"


@dataclass
class QueryResult:
    """How one query ended, as plain data (it may come back from another process)."""

    plan: QueryPlan
    status: str  # sat | unsat | unknown | not-encodable
    decoded: Any = None  # sat: the query's decoded answer (handed to the property's replay)
    indices: list[int] | None = None  # sat: the input index vector (minimisation order)
    minimal: bool | None = None  # with --minimize: whether no lexicographically smaller violation exists
    reason: str = ""
    timed_out: bool = False
    solver: str = "z3"
    encode_seconds: float = 0.0
    solve_seconds: float = 0.0
    variables: int = 0
    assertions: int = 0
    bounds: dict[str, Any] = field(default_factory=dict)
    solver_stats: dict[str, Any] = field(default_factory=dict)
    smt2: str | None = None
    rounds: int = 0
    exact: bool = True  # False: an over-approximating encoding, whose sat answers may not replay


def solve_query(
    task: Task, plan: QueryPlan, *, deadline: Deadline, cancelled: Callable[[], bool], report: Callable[[str], None]
) -> QueryResult:
    """Encode one query, solve it, decode (and with --minimize, shrink) a sat answer: a work unit."""
    settings = task.settings
    report(f"encoding {plan.name}")
    builder = Builder(deadline=deadline)
    start = deadline.elapsed()
    try:
        query: Query = capability(task.prop, Solvable).build_query(task, plan, builder)
    except NotEncodable as exc:
        return QueryResult(plan, "not-encodable", reason=str(exc))
    except DeadlineExpired:
        return QueryResult(
            plan, "unknown", reason="timeout while encoding", timed_out=True, encode_seconds=deadline.elapsed() - start
        )
    encoded = deadline.elapsed() - start
    result = QueryResult(
        plan,
        "unknown",
        encode_seconds=encoded,
        variables=len(builder.bounded_ints),
        assertions=len(query.assertions),
        bounds=query.stats.as_dict(),
        exact=not builder.inexact,
    )
    if settings.smt2_dir is not None or settings.certify:
        result.smt2 = smt2_text(query.assertions)
    report(f"solving {plan.name}")
    variables = input_variables(query)
    answer = solve(
        query.assertions, variables, settings.solver, deadline.remaining(), settings.seed, settings.rlimit, cancelled
    )
    result.solve_seconds, result.solver, result.solver_stats = answer.seconds, answer.solver, answer.statistics
    result.status, result.reason = answer.status, answer.reason
    result.timed_out = answer.status == "unknown" and (
        "timeout" in answer.reason or "canceled" in answer.reason or deadline.expired()
    )
    if answer.status != "sat":
        return result
    result.decoded = decode(query, answer)
    if result.decoded is None:
        result.status, result.reason = "unknown", f"{answer.solver} answered sat without values for every input"
        return result
    assert answer.values is not None  # sat answers carry values
    result.indices = [answer.values[v.decl().name()] for v in variables]
    if settings.minimize and variables:
        _minimise(task, plan, query, result, deadline, cancelled)
    return result


def _solving_text(turns: list[float]) -> str:
    """The solver time of one query over all its turns, as statistics.solver_seconds counts it."""
    text = f"{sum(turns):.2f} s of solving"
    return text if len(turns) == 1 else f"{text} in {len(turns)} turns"


def encoded_queries(task: Task, deadline: Deadline) -> list[tuple[str, str]]:
    """Every query of the property as SMT-LIB text, encoded as ``solve_query`` encodes it and never solved:
    what ``verify-tf audit`` compares a certificate's query files with (``certify.rederive``)."""
    out = []
    prop = capability(task.prop, Solvable)
    for plan in prop.smt_queries(task):
        query: Query = prop.build_query(task, plan, Builder(deadline=deadline))
        out.append((plan.name, smt2_text(query.assertions)))
    return out


def _minimise(
    task: Task, plan: QueryPlan, query: Query, result: QueryResult, deadline: Deadline, cancelled: Callable[[], bool]
) -> None:
    """Iterative tightening: assert "lexicographically smaller" and re-solve until unsat or out of time.

    Every improvement is replayed here too, so the final witness is a violation whatever happens to time.
    """
    variables = input_variables(query)
    result.minimal = False
    while not deadline.expired() and not cancelled() and result.indices is not None:
        answer = solve_z3(
            query.assertions + [lexicographically_smaller(variables, result.indices)],
            variables,
            deadline.remaining(),
            task.settings.seed,
            task.settings.rlimit,
            cancelled,
        )
        result.rounds += 1
        result.solve_seconds += answer.seconds
        if answer.status == "unsat":
            result.minimal = True
            return
        if answer.status != "sat":
            return
        decoded = decode(query, answer)
        replay = capability(task.prop, Solvable).replay_query
        if decoded is None or answer.values is None or replay(task, plan, decoded) is None:
            return  # keep the last replayed answer; the driver replays it again
        result.decoded = decoded
        result.indices = [answer.values[v.decl().name()] for v in variables]


def check(task: Task, run: Run) -> Verdict:
    prop = capability(task.prop, Solvable)
    plans = list(prop.smt_queries(task))
    workers = run.executor.workers
    results: dict[int, QueryResult] = {}
    solving: dict[int, list[float]] = {}  # per query, the solver seconds of each turn (tried sums them)
    second_turn: list[int] = []
    found: list[tuple[QueryResult, dict[str, Any]]] = []
    totals = BoundStats()
    statistics = _statistics(task, len(plans))

    def unit(index: int, share: float, turn: int) -> WorkUnit:
        return WorkUnit(
            f"smt: {plans[index].name}" + (" (second turn)" if turn else ""),
            solve_query,
            (task, plans[index]),
            order=index,
            share=share,
        )

    def on_result(work: WorkUnit, result: QueryResult) -> str:
        index = work.order
        results[index] = result
        solving.setdefault(index, []).append(result.solve_seconds)
        statistics["solver_seconds"] += result.solve_seconds
        statistics["encode_seconds"] += result.encode_seconds
        statistics["variables"] += result.variables
        statistics["assertions"] += result.assertions
        if result.bounds:
            totals.merge(BoundStats(**result.bounds))
        statistics["answered_by"] = result.solver
        for key, value in result.solver_stats.items():
            statistics[f"{result.solver}_{key}"] = statistics.get(f"{result.solver}_{key}", 0) + value
        if result.smt2 is not None and task.settings.smt2_dir is not None:
            path = smt2_path(task, index + 1, result.plan.name)
            assert path is not None  # smt2_dir is set
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(result.smt2, encoding="utf-8")
        run.progress(
            ProgressEvent(ENGINE, f"smt: {result.plan.name}: {result.status}", len(results), len(plans), "queries")
        )
        if result.status == "sat":
            witness = prop.replay_query(task, result.plan, result.decoded)
            if witness is None and not result.exact:
                result.status, result.reason = (
                    "unknown",
                    "the over-approximated encoding admits a violation that "
                    "does not replay (a rounded-terms floor too close to an integer)",
                )
                return CONTINUE
            if witness is None:
                raise ReplayMismatch(
                    f"{result.plan.name}: the solver ({result.solver}) claims a violation on "
                    f"{result.decoded} that the interpreter does not reproduce",
                    claimed=str(result.decoded),
                    replayed="no violation",
                )
            found.append((result, witness))
            return STOP
        if result.timed_out and not work.key.endswith("(second turn)"):
            second_turn.append(index)
        return CONTINUE

    first = [unit(i, min(1.0, workers / (len(plans) - i)), 0) for i in range(len(plans))]
    summary = schedule(run.executor, first, run.deadline, on_result)
    if not found and second_turn and not run.deadline.expired() and not summary.errors:
        statistics["second_turns"] = len(second_turn)
        retry = [unit(i, min(1.0, workers / (len(second_turn) - k)), 1) for k, i in enumerate(second_turn)]
        summary = schedule(run.executor, retry, run.deadline, on_result)
    statistics.update(totals.as_dict())
    statistics["solver_seconds"] = round(statistics["solver_seconds"], 4)
    statistics["encode_seconds"] = round(statistics["encode_seconds"], 4)
    merge = Merge(task, run, ENGINE, statistics)
    if found:
        result, witness = found[0]
        if task.settings.minimize:
            witness = dict(witness, order=ORDER, minimal=bool(result.minimal), index_vector=result.indices)
            statistics["minimisation_rounds"] = result.rounds
        merge.refute(witness, "smt")
    merge.absorb(summary)
    tried, reasons = _not_proved(plans, results, solving, run.deadline.seconds)
    if reasons:
        merge.undecided(f"{len(reasons)} of {len(plans)} queries unknown ({reasons[0]})", tried, method="smt")
    if merge.settled:
        return merge.verdict()
    count = len(plans)
    text = f"{count} {statistics['theory']} quer{'y' if count == 1 else 'ies'} unsat ({task.settings.solver})"
    evidence = None
    if task.settings.certify:  # every query, unsat: what the certificate re-proves
        queries = [{"name": results[i].plan.name, "smt2": results[i].smt2, "answer": "unsat"} for i in range(count)]
        evidence = Evidence("smt", queries=queries)
    return merge.verdict(Proof(text, queries=count), "smt", evidence)


def _statistics(task: Task, queries: int) -> dict[str, Any]:
    """The verdict's statistics before any query ran: the theory and solver, the counters the results add to."""
    return {
        "theory": "QF_BV (translated from QF_LIA)" if task.settings.solver == "bitwuzla" else LOGIC,
        "solver": task.settings.solver,
        "queries": queries,
        "variables": 0,
        "assertions": 0,
        "solver_seconds": 0.0,
        "encode_seconds": 0.0,
        **task.prop.statistics(task),
    }


def _not_proved(
    plans: list[QueryPlan], results: dict[int, QueryResult], solving: dict[int, list[float]], seconds: float
) -> tuple[list[str], list[str]]:
    """(what was tried, why it did not prove) for every query not answered unsat: not attempted in the budget of
    ``seconds``, not encodable exactly, or the solver's unknown or timeout after the turns it had."""
    tried, reasons = [], []
    for index, plan in enumerate(plans):
        ended = results.get(index)
        if ended is None:
            tried.append(f"{plan.name}: not attempted (timeout {seconds:g} s spent)")
            reasons.append("timeout")
        elif ended.status == "not-encodable":
            tried.append(f"{plan.name}: not encodable exactly ({ended.reason})")
            reasons.append(f"not encodable: {ended.reason}")
        elif ended.status != "unsat":
            spent = _solving_text(solving[index])
            tried.append(f"{plan.name}: {ended.solver} {ended.status} after {spent} ({ended.reason})")
            reasons.append(ended.reason)
    return tried, reasons

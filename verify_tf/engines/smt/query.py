"""Solving encoded queries: one fresh solver per query, decoding, replay, minimisation, SMT-LIB export.

A property hands over ``Query`` objects asking for a *violation*: ``unsat`` means no input of the domain
violates the property (proved, since the encoding is exact), ``sat`` gives concrete inputs that are
decoded, **replayed on the reference interpreter** and reported only if the replay shows the violation
(otherwise ``ReplayMismatch``: an encoder bug, never hidden), ``unknown`` / timeout gives ``unknown`` with
the time, the solver's reason and statistics.

Solvers: ``z3`` in-process (a fresh ``z3.Solver()`` per query: push/pop switches z3 to its weaker
incremental core, ../shared/research/smt-encoding.md), or ``cvc5`` / ``bitwuzla`` / ``portfolio`` on the
exported SMT-LIB text in child processes (the optional ``solvers`` extra); a foreign ``sat`` counts only
with model values for every input variable, which are replayed like z3's.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import z3

from ...verdict import PROVED, REFUTED, UNKNOWN, Verdict
from ...witness import ReplayMismatch
from . import foreign
from .bounds import BoundStats
from .inputs import SymbolicInput
from .values import NotEncodable

SOLVERS = ("z3", "cvc5", "bitwuzla", "portfolio")
LOGIC = "QF_LIA"  # every encoding is linear integer arithmetic with Booleans (docs/smt.md)

ORDER = ("lexicographically smallest index vector: positions left to right, coordinates in order; "
         "index k is the k-th grid value (or alphabet symbol) of the domain")


@dataclass
class Query:
    """One solver question: is there an input (or pair of inputs) violating the property?"""

    name: str  # shown in statistics and used for the .smt2 file name
    assertions: list  # the encoding's side constraints plus the violation formula
    inputs: Sequence[SymbolicInput]  # decoded in this order and handed to ``replay``
    replay: Callable[[list[tuple]], dict | None]  # witness when the interpreter confirms a violation
    stats: BoundStats = field(default_factory=BoundStats)
    encode_seconds: float = 0.0


@dataclass
class Answer:
    status: str  # "sat" | "unsat" | "unknown"
    values: dict[str, int] | None = None  # input variable name -> value (sat only)
    reason: str = ""
    seconds: float = 0.0
    solver: str = "z3"
    statistics: dict[str, Any] = field(default_factory=dict)


def input_variables(query: Query) -> list[z3.ArithRef]:
    return [v for inp in query.inputs for v in inp.index_terms]


def _count_constants(assertions: list) -> int:
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


def smt2_text(assertions: list) -> str:
    solver = z3.Solver()
    solver.add(assertions)
    return f"(set-logic {LOGIC})\n" + solver.to_smt2()


def solve_z3(assertions: list, variables: list[z3.ArithRef], timeout_s: float, seed: int,
             rlimit: int | None) -> Answer:
    solver = z3.Solver()
    solver.set("timeout", max(1, int(timeout_s * 1000)))
    solver.set("random_seed", seed)
    if rlimit:
        solver.set("rlimit", rlimit)
    solver.add(assertions)
    start = time.perf_counter()
    result = solver.check()
    seconds = time.perf_counter() - start
    stats = {k: v for k, v in solver.statistics()}
    keep = {k: stats[k] for k in ("conflicts", "decisions", "arith-conflicts", "rlimit count") if k in stats}
    if result == z3.sat:
        model = solver.model()
        values = {v.decl().name(): model.eval(v, model_completion=True).as_long() for v in variables}
        return Answer("sat", values, seconds=seconds, statistics=keep)
    if result == z3.unsat:
        return Answer("unsat", seconds=seconds, statistics=keep)
    return Answer("unknown", reason=solver.reason_unknown(), seconds=seconds, statistics=keep)


def solve(assertions: list, variables: list[z3.ArithRef], solver: str, timeout_s: float, seed: int,
          rlimit: int | None) -> Answer:
    if solver == "z3":
        return solve_z3(assertions, variables, timeout_s, seed, rlimit)
    names = [v.decl().name() for v in variables]
    text = smt2_text(assertions)
    if solver == "portfolio":
        return foreign.race(text, names, ["z3", *foreign.available()], timeout_s, seed)
    return foreign.race(text, names, [solver], timeout_s, seed)


def lexicographically_smaller(terms: list[z3.ArithRef], values: list[int]):
    """The index vector ``terms`` is lexicographically smaller than ``values``."""
    options = []
    for p in range(len(terms)):
        prefix = [terms[q] == values[q] for q in range(p)]
        options.append(z3.And(prefix + [terms[p] < values[p]]))
    return z3.Or(options) if options else z3.BoolVal(False)


def _decode(query: Query, values: dict[str, int]) -> list[tuple]:
    def value_of(var: z3.ArithRef) -> int:
        return values[var.decl().name()]
    return [inp.decode(value_of) for inp in query.inputs]


def _replayed(query: Query, answer: Answer) -> tuple[dict, list[int]]:
    if answer.values is None or any(v.decl().name() not in answer.values for v in input_variables(query)):
        raise _NoModel(f"{answer.solver} answered sat without values for every input variable")
    inputs = _decode(query, answer.values)
    witness = query.replay(inputs)
    if witness is None:
        raise ReplayMismatch(
            f"{query.name}: the solver ({answer.solver}) claims a violation on {inputs} that the interpreter "
            "does not reproduce", claimed=f"violation on {inputs}", replayed="no violation")
    indices = [answer.values[v.decl().name()] for v in input_variables(query)]
    return witness, indices


class _NoModel(Exception):
    pass


def run_queries(request, queries: Iterable[Query] | Iterator[Query], *, engine: str = "smt") -> Verdict:
    """Solve every query in turn (built lazily, so encoding time counts against the timeout).

    All unsat → proved; the first replayed sat → refuted; otherwise unknown with what was tried.
    """
    start = time.perf_counter()
    deadline = start + request.timeout
    solver_name = request.options.get("solver") or "z3"
    rlimit = request.options.get("rlimit")
    totals = BoundStats()
    theory = "QF_BV (translated from QF_LIA)" if solver_name == "bitwuzla" else LOGIC
    statistics: dict[str, Any] = {"theory": theory, "solver": solver_name, "queries": 0, "variables": 0,
                                  "assertions": 0, "solver_seconds": 0.0, "encode_seconds": 0.0}
    tried: list[str] = []
    unknown_reasons: list[str] = []
    export_index = 0

    def finish(status: str, detail: str, **extra) -> Verdict:
        statistics.update(totals.as_dict())
        statistics["solver_seconds"] = round(statistics["solver_seconds"], 4)
        statistics["encode_seconds"] = round(statistics["encode_seconds"], 4)
        return Verdict(request.label, status, engine, method="smt", detail=detail,
                       seconds=time.perf_counter() - start, statistics=statistics, tried=tried, **extra)

    iterator = iter(queries)
    while True:
        encode_start = time.perf_counter()
        try:
            query = next(iterator)
        except StopIteration:
            break
        except NotEncodable as exc:
            tried.append(f"smt encoding: not encodable exactly ({exc})")
            return finish(UNKNOWN, f"not encodable: {exc}")
        statistics["encode_seconds"] += time.perf_counter() - encode_start
        statistics["queries"] += 1
        statistics["variables"] += _count_constants(query.assertions)
        statistics["assertions"] += len(query.assertions)
        totals.merge(query.stats)
        if request.smt2_dir is not None:
            export_index += 1
            _export(request.smt2_dir, request.label, export_index, query)
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            tried.append(f"{query.name}: not attempted (timeout {request.timeout:g} s spent)")
            unknown_reasons.append("timeout")
            continue
        answer = solve(query.assertions, input_variables(query), solver_name, remaining, request.seed, rlimit)
        statistics["solver_seconds"] += answer.seconds
        statistics["answered_by"] = answer.solver
        for key, value in answer.statistics.items():
            statistics[f"{answer.solver}_{key}"] = statistics.get(f"{answer.solver}_{key}", 0) + value
        if answer.status == "unsat":
            continue
        if answer.status == "unknown":
            tried.append(f"{query.name}: {answer.solver} unknown after {answer.seconds:.2f} s ({answer.reason})")
            unknown_reasons.append(answer.reason)
            continue
        try:
            witness, indices = _replayed(query, answer)
        except _NoModel as exc:
            tried.append(f"{query.name}: {exc}")
            unknown_reasons.append(str(exc))
            continue
        if request.minimize:
            witness = _minimise(request, query, witness, indices, deadline, statistics)
        return finish(REFUTED, witness.get("summary", "counterexample found"), counterexample=witness)
    if tried:
        return finish(UNKNOWN, f"{len(unknown_reasons)} of {statistics['queries']} queries unknown "
                               f"({unknown_reasons[0]})" if unknown_reasons else "unknown")
    return finish(PROVED, f"{statistics['queries']} {theory} quer{'y' if statistics['queries'] == 1 else 'ies'} "
                          f"unsat ({solver_name})")


def _minimise(request, query: Query, witness: dict, indices: list[int], deadline: float,
              statistics: dict) -> dict:
    """Iterative tightening: assert "lexicographically smaller" and re-solve until unsat or out of time."""
    variables = input_variables(query)
    minimal = False
    rounds = 0
    while True:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            break
        answer = solve_z3(query.assertions + [lexicographically_smaller(variables, indices)], variables,
                          remaining, request.seed, request.options.get("rlimit"))
        statistics["solver_seconds"] += answer.seconds
        rounds += 1
        if answer.status == "unsat":
            minimal = True
            break
        if answer.status != "sat":
            break
        witness, indices = _replayed(query, answer)
    witness = dict(witness)
    witness["order"] = ORDER
    witness["minimal"] = minimal
    witness["index_vector"] = indices
    statistics["minimisation_rounds"] = rounds
    return witness


def _export(directory: Path, label: str, index: int, query: Query) -> None:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{label}-{index}-{query.name}")[:120]
    (directory / f"{stem}.smt2").write_text(smt2_text(query.assertions), encoding="utf-8")


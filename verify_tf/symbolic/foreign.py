"""Running an exported SMT-LIB query on other solvers (cvc5, bitwuzla, z3 from text) in child processes.

Each solver runs in its own spawned process with the query text (z3's child, ``solve.solve_text``, is handed
in by ``solve.solve``: every z3 use runs in a ``solve.Session``); ``race`` returns the first definite
answer (``sat`` with values for the named input variables, or ``unsat``) and terminates the others. A
``sat`` without values for every input variable is reported as ``unknown`` by the caller (it cannot be
replayed). cvc5 and bitwuzla are optional (``pip install 'verify-tf[solvers]'``); ``available()`` says
which are installed.

bitwuzla reads bit-vectors only: the query is translated from QF_LIA to QF_BV by ``bv.translate`` with a
width that interval analysis proves wide enough for every subterm, so no value overflows.
"""

from __future__ import annotations

import importlib.util
import multiprocessing
import queue as queue_module
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .bv import NotTranslatable, translate

FOREIGN = ("cvc5", "bitwuzla")


def available() -> list[str]:
    return [name for name in FOREIGN if importlib.util.find_spec(name) is not None]


def _cvc5_child(text: str, names: list[str], timeout_s: float, seed: int) -> tuple[str, dict | None, str]:
    import cvc5

    tm = cvc5.TermManager()
    solver = cvc5.Solver(tm)
    solver.setOption("produce-models", "true")
    solver.setOption("tlimit-per", str(max(1, int(timeout_s * 1000))))
    solver.setOption("seed", str(seed))
    parser = cvc5.InputParser(solver)
    parser.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, text.replace("(check-sat)", ""), "query")
    symbols = parser.getSymbolManager()
    while True:
        command = parser.nextCommand()
        if command.isNull():
            break
        command.invoke(solver, symbols)
    result = solver.checkSat()
    if result.isSat():
        declared = {str(t).strip("|"): t for t in symbols.getDeclaredTerms()}
        values = {n: int(solver.getValue(declared[n]).getIntegerValue()) for n in names if n in declared}
        return "sat", values, ""
    if result.isUnsat():
        return "unsat", None, ""
    return "unknown", None, str(result.getUnknownExplanation())


def _bitwuzla_child(text: str, names: list[str], timeout_s: float, seed: int) -> tuple[str, dict | None, str]:
    import bitwuzla

    tm = bitwuzla.TermManager()
    options = bitwuzla.Options()
    options.set(bitwuzla.Option.PRODUCE_MODELS, True)
    options.set(bitwuzla.Option.TIME_LIMIT_PER, max(1, int(timeout_s * 1000)))
    options.set(bitwuzla.Option.SEED, seed)
    parser = bitwuzla.Parser(tm, options)
    parser.parse(text.replace("(check-sat)", ""), True, False)
    solver = parser.bitwuzla()
    result = solver.check_sat()
    if result == bitwuzla.Result.SAT:
        declared = {str(t.symbol()).strip("|"): t for t in parser.get_declared_funs()}
        values = {}
        for n in names:
            if n in declared:
                bits = solver.get_value(declared[n]).value(2)  # two's complement binary string
                value = int(bits, 2)
                values[n] = value - (1 << len(bits)) if bits[0] == "1" else value
        return "sat", values, ""
    if result == bitwuzla.Result.UNSAT:
        return "unsat", None, ""
    return "unknown", None, "bitwuzla: unknown (time limit)"


Child = Callable[[str, list[str], float, int], tuple[str, "dict | None", str]]
# z3's child is ``solve.solve_text`` (a session, as every z3 use), handed to ``race`` by its caller
CHILDREN: dict[str, Child] = {"cvc5": _cvc5_child, "bitwuzla": _bitwuzla_child}


def _run(name: str, child: Child, text: str, names: list[str], timeout_s: float, seed: int, out) -> None:
    start = time.perf_counter()
    try:
        status, values, reason = child(text, names, timeout_s, seed)
    except Exception as exc:  # a solver that rejects the text answers unknown, with the reason
        status, values, reason = "unknown", None, f"{name} failed: {type(exc).__name__}: {exc}"
    out.put((name, status, values, reason, time.perf_counter() - start))


@dataclass
class Raced:
    status: str  # sat | unsat | unknown
    values: dict | None = None
    reason: str = ""
    seconds: float = 0.0
    solver: str = ""


def race(
    lia_text: str,
    names: list[str],
    solvers: list[str],
    timeout_s: float,
    seed: int,
    cancelled: Callable[[], bool] = lambda: False,
    children: Mapping[str, Child] = CHILDREN,
) -> Raced:
    """The first definite answer of ``solvers`` on the query (child processes; the others are terminated).
    ``children``: the function each solver's child process runs (module-level, so that it pickles)."""
    missing = [s for s in solvers if s not in children or (s in FOREIGN and s not in available())]
    solvers = [s for s in solvers if s not in missing]
    if not solvers:
        return Raced(
            "unknown",
            reason=f"solver {', '.join(missing)} not installed (pip install 'verify-tf[solvers]')",
            solver=",".join(missing),
        )
    texts = {}
    reasons = []
    for s in solvers:
        try:
            texts[s] = translate(lia_text) if s == "bitwuzla" else lia_text
        except NotTranslatable as exc:
            reasons.append(f"{s}: {exc}")
    solvers = [s for s in solvers if s in texts]
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    processes = {
        s: context.Process(target=_run, args=(s, children[s], texts[s], names, timeout_s, seed, out), daemon=True)
        for s in solvers
    }
    start = time.perf_counter()
    for p in processes.values():
        p.start()
    answer = None
    pending = len(solvers)
    try:
        while pending:
            if cancelled():
                reasons.append("cancelled")
                break
            if time.perf_counter() - start > timeout_s + 2:
                reasons.append("timeout (solver processes stopped)")
                break
            try:
                name, status, values, reason, _seconds = out.get(timeout=0.05)
            except queue_module.Empty:
                continue
            pending -= 1
            if status in ("sat", "unsat"):
                answer = Raced(status, values, seconds=time.perf_counter() - start, solver=name)
                break
            reasons.append(f"{name}: {reason or status}")
    finally:
        for p in processes.values():
            if p.is_alive():
                p.terminate()
            p.join(timeout=5)
    if answer is not None:
        return answer
    return Raced(
        "unknown",
        reason="; ".join(reasons) or "no solver answered in time",
        seconds=time.perf_counter() - start,
        solver="+".join(solvers),
    )

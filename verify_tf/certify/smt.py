"""Evidence for one exported SMT query that z3 answered ``unsat``: cvc5 re-proves it, and a SAT proof of its
bit-blasted form is checked by our own LRAT checker.

The LRAT chain: the QF_LIA query → QF_BV (``symbolic.bv.translation``: a width proved wide enough by interval
analysis over our encoder's declared bounds, so both queries have the same models) → CNF (z3's bit-blaster and
Tseitin transformation) → CaDiCaL 1.9.5 (python-sat) writes an LRAT proof of unsatisfiability →
``certify.lrat`` checks it. Architecture queries (reals, uninterpreted functions) have no exact bit-vector form:
for them the chain is skipped with the reason, and cvc5's re-proof is the only second opinion.

Each function returns a plain JSON-ready record: ``{"check": ..., "tool": ..., "ok": bool | None, ...}``
(``ok`` None: not attempted or ran out of budget; the record says why).
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.metadata
import importlib.util
import multiprocessing
import os
import queue as queue_module
import re
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..symbolic.bv import NotTranslatable, translation
from ..symbolic.solve import interruptible
from ..work import Deadline, DeadlineExpired, interrupted
from .lrat import LratError, check_lrat, parse_dimacs

# Proofs larger than this (uncompressed) are not kept: the certificate says so and carries cvc5's evidence only
LRAT_MAX_BYTES = 256 << 20
BITBLAST = ("simplify", "bit-blast", "tseitin-cnf")


def sha256(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def version_of(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


# ---------------------------------------------------------------- cvc5


_TOKEN = re.compile(r'\|[^|]*\||"(?:[^"]|"")*"|;[^\n]*|[()]|[^\s()|";]+')


def for_cvc5(text: str) -> str:
    """z3's SMT-LIB text as cvc5 reads it: no unary ``(+ t)`` (z3.Sum of one term prints it), no comments, a
    ``set-logic`` (ALL when z3 wrote none: architecture queries mix reals and uninterpreted functions)."""
    out: list[str] = []
    opened: list[int] = []
    for token in _TOKEN.findall(text):
        if token.startswith(";"):
            continue
        if token == "(":
            opened.append(len(out))
            out.append(token)
        elif token == ")":
            start = opened.pop()
            body = out[start + 1 :]
            if len(body) >= 2 and body[0] == "+" and _single_term(body[1:]):
                del out[start : start + 2]  # keep the one argument, drop "(", "+" and this ")"
            else:
                out.append(token)
        else:
            out.append(token)
    joined = " ".join(out).replace("( ", "(").replace(" )", ")")
    return joined if "(set-logic" in joined else "(set-logic ALL)\n" + joined


def _single_term(tokens: list[str]) -> bool:
    if len(tokens) == 1:
        return tokens[0] not in ("(", ")")
    depth = 0
    for k, token in enumerate(tokens):
        depth += token == "("
        depth -= token == ")"
        if depth == 0 and k != len(tokens) - 1:
            return False
    return tokens[0] == "(" and depth == 0


CVC5_CHECK = "second solver re-proves the query"


def cvc5_reprove(text: str, deadline: Deadline) -> dict:
    """cvc5 on the exported query, ``ok`` when it answers unsat: in a child process (cvc5 cannot be interrupted
    from another thread, and its own time limit does not bound its preprocessing), killed at the deadline or at
    once when the process is interrupted (SIGINT/SIGTERM: the deadline expires)."""
    record: dict[str, Any] = {"check": CVC5_CHECK, "tool": f"cvc5 {version_of('cvc5')}"}
    if importlib.util.find_spec("cvc5") is None:
        return {**record, "ok": None, "note": "cvc5 not installed (pip install 'verify-tf[certify]')"}
    seconds = deadline.remaining()
    if seconds <= 0:
        return {**record, "ok": None, "note": _spent()}
    start = time.perf_counter()
    context = multiprocessing.get_context("spawn")
    answers = context.Queue()
    child = context.Process(target=_cvc5_child, args=(for_cvc5(text), seconds, answers), daemon=True)
    child.start()
    try:
        answer = _wait_for(answers, child, deadline, grace=CVC5_GRACE)
    finally:
        if child.is_alive():
            child.kill()
        child.join()
    elapsed = round(time.perf_counter() - start, 3)
    if answer is None:
        note = "interrupted" if interrupted() is not None else "cvc5 stopped at the certification budget"
        return {**record, "ok": None, "answer": "unknown", "seconds": elapsed, "note": note}
    status, explanation, cpu = answer
    record.update(seconds=elapsed, cpu_seconds=cpu)  # on a loaded machine far below the wall time
    if status == "rejected":
        return {**record, "ok": False, "note": f"cvc5 rejected the query: {explanation[:200]}"}
    if status == "unsat":
        return {**record, "ok": True, "answer": "unsat"}
    if status == "sat":  # a disagreement between solvers: never a pass
        return {**record, "ok": False, "answer": "sat", "note": "cvc5 finds the query sat"}
    note = f"cvc5 unknown ({explanation}) within the certification budget"
    return {**record, "ok": None, "answer": "unknown", "note": note}


def _spent() -> str:
    """Why a check was not attempted: the interrupt, or the certification budget."""
    stopped = interrupted()
    return (
        f"not attempted: interrupted ({signal.Signals(stopped).name})"
        if stopped
        else ("not attempted: certification budget spent")
    )


CVC5_GRACE = 2.0  # seconds past the deadline for cvc5 to return by its own time limit before it is killed
POLL_SECONDS = 0.05  # how often a wait on a child process looks at the deadline (and so at an interrupt)


def _wait_for(answers: Any, child: Any, deadline: Deadline, grace: float = 0.0) -> Any:
    """The child's answer from ``answers``, or None when the deadline (plus ``grace``, for a child that stops by
    its own time limit) passes, the process is interrupted, or the child died without one."""
    over = None
    while True:
        try:
            return answers.get(timeout=POLL_SECONDS)
        except queue_module.Empty:
            pass
        if interrupted() is not None:
            return None
        if not child.is_alive():  # its answer, if it put one, is in the pipe by now
            try:
                return answers.get(timeout=1.0)
            except queue_module.Empty:
                return None
        if deadline.expired():
            over = time.perf_counter() if over is None else over
            if time.perf_counter() - over > grace:
                return None


def _cvc5_child(text: str, seconds: float, answers: Any) -> None:
    """In the child: cvc5 on the query, (status, unknown explanation or rejection, CPU seconds) onto ``answers``."""
    import cvc5

    cpu = time.process_time()
    manager = cvc5.TermManager()
    solver = cvc5.Solver(manager)
    solver.setOption("tlimit-per", str(max(1, int(seconds * 1000))))
    # ITE simplification: our encodings are ite-heavy (ReLU, argmax, rounding); on specs/smt-output-bounds.yaml
    # it halves cvc5's time (48.9 s -> 24.9 s CPU, docs/trust.md). A preprocessing option: the answer is cvc5's.
    solver.setOption("ite-simp", "true")
    parser = cvc5.InputParser(solver)
    parser.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, text.replace("(check-sat)", ""), "query")
    symbols = parser.getSymbolManager()
    try:
        while True:
            command = parser.nextCommand()
            if command.isNull():
                break
            command.invoke(solver, symbols)
        result = solver.checkSat()
    except RuntimeError as exc:
        answers.put(("rejected", str(exc), round(time.process_time() - cpu, 3)))
        return
    status = "unsat" if result.isUnsat() else "sat" if result.isSat() else "unknown"
    explanation = str(result.getUnknownExplanation()) if status == "unknown" else ""
    answers.put((status, explanation, round(time.process_time() - cpu, 3)))


# ---------------------------------------------------------------- LIA → BV → CNF → LRAT


def bitblast(text: str) -> tuple[str, dict]:
    """The query's CNF (DIMACS, header recomputed) and the width argument. Raises NotTranslatable."""
    import z3

    bv = translation(text)
    ctx = z3.Context()  # fresh: the CNF's variable numbering is then the same in every run
    goal = z3.Goal(ctx=ctx)
    goal.add(z3.parse_smt2_string(bv.text, ctx=ctx))
    try:
        with interruptible(ctx):  # SIGINT/SIGTERM stop the bit-blaster too (z3 then raises: "canceled")
            result = z3.Then(*BITBLAST, ctx=ctx)(goal)
    except z3.Z3Exception:
        if interrupted() is not None:
            raise DeadlineExpired("interrupted") from None
        raise
    if interrupted() is not None:
        raise DeadlineExpired("interrupted")
    if len(result) != 1:
        raise NotTranslatable(f"the bit-blaster split the goal into {len(result)} subgoals")
    sub = result[0]
    if sub.inconsistent():
        dimacs = "p cnf 0 1\n0\n"
    else:
        body = [line for line in sub.dimacs(include_names=False).splitlines()[1:] if line and line[0] != "c"]
        top = max((abs(int(t)) for line in body for t in line.split()), default=0)
        dimacs = f"p cnf {top} {len(body)}\n" + "\n".join(body) + "\n"  # z3 can under-count variables
    width = {
        "width": bv.width,
        "widest_interval": [bv.widest[0], bv.widest[1]],
        "bounded_variables": bv.bounded_variables,
        "argument": bv.argument(),
        "bv_sha256": sha256(bv.text),
    }
    return dimacs, width


class SatRun:
    """CaDiCaL 1.9.5 (python-sat) with an LRAT trace, in a child process started at once: it runs while the
    caller does other work (cvc5's re-proof of the same query), and is killed at the deadline.

    A child process, because python-sat's CaDiCaL 1.9.5 keeps the GIL and ignores an interrupt from another
    thread, so an in-process solve could overrun the budget by any amount."""

    def __init__(self, clauses: list[tuple[int, ...]]) -> None:
        self.folder = tempfile.TemporaryDirectory(prefix="verify-tf-lrat-")
        self.trace = Path(self.folder.name) / "proof.lrat"
        self.child = multiprocessing.get_context("spawn").Process(
            target=_cadical_child, args=(clauses, str(self.trace)), daemon=True
        )
        self.child.start()
        self.cpu_seconds: float | None = None  # the child's own CPU time, once it has finished

    def result(self, deadline: Deadline) -> tuple[bool | None, bytes]:
        """(False, proof) when unsat, (True, b"") when sat, (None, b"") when not done by ``deadline`` (or when the
        process is interrupted: the wait looks at the deadline every ``POLL_SECONDS``)."""
        try:
            while self.child.is_alive() and not deadline.expired():
                self.child.join(POLL_SECONDS)
            if self.child.is_alive():
                return None, b""
            if self.child.exitcode not in (10, 20):
                raise RuntimeError(f"the CaDiCaL child process ended with exit code {self.child.exitcode}")
            cpu = Path(f"{self.trace}.cpu")
            self.cpu_seconds = round(float(cpu.read_text()), 3) if cpu.is_file() else None
            if self.child.exitcode == 10:
                return True, b""
            size = self.trace.stat().st_size
            return False, (self.trace.read_bytes() if size <= LRAT_MAX_BYTES else b"too large: %d" % size)
        finally:
            self.close()

    def close(self) -> None:
        if self.child.is_alive():
            self.child.kill()
        self.child.join()
        self.folder.cleanup()


def _cadical_child(clauses: list[tuple[int, ...]], trace_path: str) -> None:
    """In the child: solve, write the LRAT trace to ``trace_path``, exit 10 (sat) or 20 (unsat)."""
    import pysolvers  # type: ignore[import-not-found]
    from pysat.solvers import Cadical195  # type: ignore[import-untyped]

    solver = Cadical195()
    solver.configure({"binary": 0, "lrat": 1})
    with open(trace_path, "w+b") as trace:
        # python-sat's with_proof installs its tracer before configure() could switch LRAT on: install our own
        solver.prfile, solver.prfp = trace, pysolvers.cadical195_tracepr(solver.cadical, trace)
        for clause in clauses:
            solver.add_clause(list(clause))
        status = solver.solve()
        pysolvers.flushpr(solver.prfp)
    Path(f"{trace_path}.cpu").write_text(repr(time.process_time()))
    os._exit(10 if status else 20)  # no interpreter teardown: the parent only reads the exit code and the file


LRAT_RECORD = {
    "check": "LRAT proof of the bit-blasted query checked by verify_tf.certify.lrat",
    "tool": f"z3 {version_of('z3-solver')} bit-blaster; CaDiCaL 1.9.5 (python-sat "
    f"{version_of('python-sat')}); verify-tf LRAT checker",
}


@dataclass
class LratJob:
    """The LRAT chain of one query, started: the CNF, the SAT solver running on it, the record so far."""

    record: dict[str, Any]
    deadline: Deadline
    variables: int = 0
    clauses: list[tuple[int, ...]] = field(default_factory=list)
    sat: SatRun | None = None


def start_lrat(text: str, deadline: Deadline) -> LratJob:
    """Bit-blast the query and start CaDiCaL on its CNF (``finish_lrat`` collects it); ``deadline`` is the chain's
    budget, counted from now. When the chain cannot run, the job's record already says why (``ok: None``)."""
    record: dict[str, Any] = dict(LRAT_RECORD)
    try:
        import pysolvers  # noqa: F401
    except ImportError:
        return LratJob(
            {**record, "ok": None, "note": "python-sat not installed (pip install 'verify-tf[certify]')"}, deadline
        )
    start = time.perf_counter()
    try:
        dimacs, width = bitblast(text)
    except DeadlineExpired:
        return LratJob({**record, "ok": None, "note": _spent()}, deadline)
    except (NotTranslatable, Exception) as exc:  # z3 parse errors of reals/UF queries land here too
        return LratJob({**record, "ok": None, "note": f"no exact bit-vector form: {str(exc)[:160]}"}, deadline)
    variables, clauses = parse_dimacs(dimacs)
    record.update(
        width,
        cnf_variables=variables,
        cnf_clauses=len(clauses),
        cnf_sha256=sha256(dimacs),
        bitblast_seconds=round(time.perf_counter() - start, 3),
    )
    if deadline.remaining() <= 0:
        return LratJob({**record, "ok": None, "note": _spent()}, deadline)
    record["sat_started"] = time.perf_counter()
    return LratJob(record, deadline, variables, clauses, SatRun(clauses))


def finish_lrat(job: LratJob, proof_path: Path | None) -> dict:
    """Wait for the job's SAT solver (within its budget), check its LRAT proof with our checker, and write the
    gzipped proof to ``proof_path`` when it checks."""
    record, deadline = job.record, job.deadline
    if job.sat is None:
        return record
    status, proof = job.sat.result(deadline)
    record.update(
        sat_seconds=round(time.perf_counter() - record.pop("sat_started"), 3), sat_cpu_seconds=job.sat.cpu_seconds
    )
    if status is None:
        why = "interrupted" if interrupted() is not None else "certification budget spent"
        return {**record, "ok": None, "note": f"CaDiCaL interrupted: {why}"}
    if status is True:
        return {**record, "ok": False, "note": "CaDiCaL finds the bit-blasted query satisfiable"}
    if proof.startswith(b"too large"):
        return {
            **record,
            "ok": None,
            "note": f"LRAT proof {proof.split()[-1].decode()} bytes, over the {LRAT_MAX_BYTES} byte limit: not kept",
        }
    record["lrat_bytes"] = len(proof)
    check_start = time.perf_counter()
    try:
        stats = check_lrat(job.variables, job.clauses, proof.splitlines(), expired=deadline.expired)
    except TimeoutError as exc:
        return {**record, "ok": None, "note": f"{exc}: certification budget spent"}
    except (LratError, ValueError, IndexError) as exc:
        return {**record, "ok": False, "note": f"LRAT check failed: {exc}"}
    record.update(check_seconds=round(time.perf_counter() - check_start, 3), lrat_steps=stats.get("added", 0))
    if proof_path is not None:
        packed = gzip.compress(proof, compresslevel=6, mtime=0)
        proof_path.write_bytes(packed)
        record.update(proof=proof_path.name, proof_sha256=sha256(packed))
    return {**record, "ok": True}


def recheck_lrat(text: str, record: dict, proof_path: Path, expired: Callable[[], bool]) -> list[str]:
    """Audit: re-derive the width and the CNF from the query, compare with the record, re-check the proof.
    Returns the problems found (empty: it checks)."""
    problems = []
    try:
        dimacs, width = bitblast(text)
    except Exception as exc:
        return [f"the query no longer bit-blasts: {exc}"]
    if width["width"] != record.get("width"):
        problems.append(f"bit-width re-derived as {width['width']}, certificate says {record.get('width')}")
    if width["bv_sha256"] != record.get("bv_sha256"):
        problems.append("the QF_BV translation differs from the certified one")
    if sha256(dimacs) != record.get("cnf_sha256"):
        problems.append("the CNF re-derived from the query differs from the certified one")
    if not proof_path.is_file():
        return problems + [f"proof file {proof_path.name} missing"]
    packed = proof_path.read_bytes()
    if sha256(packed) != record.get("proof_sha256"):  # not the certified proof: never parsed (nor quoted)
        return problems + [f"proof file {proof_path.name} does not match its sha256"]
    try:
        variables, clauses = parse_dimacs(dimacs)
        check_lrat(variables, clauses, gzip.decompress(packed).splitlines(), expired=expired)
    except TimeoutError as exc:
        problems.append(f"LRAT re-check ran out of time: {exc}")
    except (LratError, ValueError, IndexError, OSError, EOFError) as exc:
        problems.append(f"LRAT re-check failed: {exc}")
    return problems

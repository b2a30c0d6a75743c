"""Certificates for ``proved`` verdicts (``verify-tf check --certify DIR``) and their re-check (``verify-tf audit``).

``certify(spec, prop, task, verdict, directory, timeout)`` is called by the runner, once, after a property is
proved. It reads what the engine kept for it under ``--certify``, the verdict's ``evidence``
(``verdict.Evidence``: its kind, every solver query, the chunk digests of an exhaustive run, what the counting
exploration covered), and what the verdict reports (its statistics); it writes a folder per property
(``certificate.json``, each query as ``query-K.smt2``, each LRAT proof as ``query-K.lrat.gz``) and puts a
summary in ``verdict.statistics["certificate"]``: the file, its sha256, every check with the tool and version
that made it, and whether the evidence is complete. Which kinds of certificate an engine's proofs get is its
card's ``CERTIFICATES`` (``verify_tf.engines``); what a certificate holds, trusts and re-checks is the engine's
own ``certificate.py`` (``engines.certificates``); this package keeps what is shared — the subject binding,
digests, the query files and their cvc5 / LRAT evidence — and names no engine. A check that could not run
within the budget is recorded as such (``ok: null`` with the reason), never dropped. The certificate is bound to
what it proves: its ``subject`` (``certify.subject``: digests of the spec text, the model as loaded, the
arithmetic, the domain, the property and its options) and the tool and solver ``versions``.

``recheck(...)`` first re-derives what the certificate is about from the re-loaded spec (its subject, every
query through the encoder, the input space: ``certify.rederive``) and fails, naming what differs, before it
re-does any check of the evidence; docs/trust.md says what each check rules out and what stays trusted.
"""

from __future__ import annotations

import importlib.util
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import engines
from ..engines.base import Progress, ProgressEvent, Task, no_progress
from ..fingerprint import tool_versions
from ..verdict import PROVED, Evidence, Verdict
from ..work import Deadline, Executor, deadline_in_force
from .rederive import proof_differences, query_differences, space_differences
from .smt import CVC5_CHECK, LRAT_RECORD, cvc5_reprove, finish_lrat, recheck_lrat, sha256, start_lrat
from .subject import differences, subject_of, version_notes

FORMAT = "verify-tf-certificate/2"
# the two kinds of SMT evidence run side by side (cvc5 here, CaDiCaL in a child process), each within this
# many times the proof's own time, so that certifying costs at most about ten times proving (docs/trust.md)
BUDGET_FACTOR = 8.0
BUDGET_FLOOR = 60.0


def slug(verdict: Verdict) -> str:
    stem = Path(verdict.spec).stem if verdict.spec else "spec"
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{stem}-{verdict.index}-{verdict.property}").strip("-")


CERTIFYING = "certifying (cvc5 / LRAT / sample)"  # the progress phase while a certificate is made
# the certify extra: module -> distribution (cvc5 re-proves the queries, python-sat's CaDiCaL writes LRAT proofs)
EXTRA_PACKAGES = {"cvc5": "cvc5", "pysat": "python-sat"}


def missing_packages() -> list[str]:
    """The certify extra's distributions that are not installed (found without importing them)."""
    return [dist for module, dist in EXTRA_PACKAGES.items() if not _importable(module)]


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken or blocked installation is a missing one
        return False


def evidence_budget(timeout: float, proof_seconds: float) -> float:
    """Seconds each kind of evidence (cvc5's re-proof, the LRAT chain) may take over all of a proof's queries:
    ``BUDGET_FACTOR`` times the proof's own time, at least ``BUDGET_FLOOR`` (start-up and fixed costs dominate
    small proofs), at most the property's timeout. Evidence that does not fit is recorded as not completed."""
    return min(timeout, max(BUDGET_FLOOR, BUDGET_FACTOR * proof_seconds))


def certify(
    spec, prop, task: Task, verdict: Verdict, directory: Path, timeout: float, progress: Progress = no_progress
) -> None:
    """Attach a certificate to a proved ``verdict`` in place (see the module docstring); nothing for any other
    verdict. ``spec`` and ``prop`` are the loaded spec and property; the evidence's budget comes from
    ``timeout`` and the proof's time (``evidence_budget``). ``progress`` hears ``CERTIFYING`` with the queries
    done."""
    if verdict.status != PROVED:
        return
    seconds = evidence_budget(timeout, verdict.seconds)
    evidence = verdict.evidence
    queries = evidence.queries if evidence is not None else []
    progress(ProgressEvent("certify", CERTIFYING, 0, len(queries) if queries else None, "queries"))
    start = time.perf_counter()
    folder = directory / slug(verdict)
    folder.mkdir(parents=True, exist_ok=True)
    body: dict = {
        "format": FORMAT,
        "subject": subject_of(spec.path, prop.index, prop.name, prop.label, task, spec.seed, verdict.engine),
        "versions": tool_versions(),
        "method": verdict.method,
        "detail": verdict.detail,  # what the proof says of itself: audit compares the report's with it
        "evidence_budget_seconds": round(seconds, 3),
    }
    if evidence is None:
        body.update(kind="none", checks=[], note=f"no certificate for {verdict.engine} ({verdict.method}) proofs")
    else:
        body.update(_evidence_body(task, verdict, evidence, folder, seconds, progress))
    checks = [c for c in body.get("checks", [])] + [c for q in body.get("queries", []) for c in q["evidence"]]
    body["complete"] = bool(checks) and all(c["ok"] is True for c in checks) and body.get("kind") != "none"
    body["failed"] = any(c["ok"] is False for c in checks)
    body["seconds"] = round(time.perf_counter() - start, 3)
    text = json.dumps(body, indent=1, default=str)
    path = folder / "certificate.json"
    path.write_text(text)
    checked_by = sorted({f"{c['check']}: {c['tool']}" for c in checks if c["ok"] is True})
    partial = sorted({f"{c['check']}: {c.get('note', '')}" for c in checks if c["ok"] is not True})
    verdict.statistics["certificate"] = {
        "path": str(path),
        "sha256": sha256(text),
        "kind": body["kind"],
        "complete": body["complete"],
        "failed": body["failed"],
        "checked_by": checked_by,
        "not_checked": partial[:20],
        "seconds": body["seconds"],
    }


def _evidence_body(
    task: Task, verdict: Verdict, evidence: Evidence, folder: Path, seconds: float, progress: Progress
) -> dict:
    """The certificate's evidence for a proof: the engine's own (its ``certificate.py``), then every solver query
    it kept, written and re-proved here."""
    module = engines.certificate(verdict.engine)
    if module is None:
        return {"kind": "none", "checks": [], "note": f"no certificate for {verdict.engine} ({verdict.method}) proofs"}
    budget = Deadline(seconds)  # in force while the engine builds its evidence (a sample sizes itself to it) ...
    with deadline_in_force(budget):
        body = module.evidence(task, verdict)
    if evidence.queries:  # ... and the queries' evidence gets what it left
        body["queries"] = _smt_certificate(evidence.queries, folder, budget.remaining(), progress)
    return body


def _smt_certificate(queries: list[dict], folder: Path, seconds: float, progress: Progress = no_progress) -> list[dict]:
    """Every query written as SMT-LIB with its evidence (cvc5's re-proof, the LRAT chain). Each kind of evidence
    has its own budget of ``seconds`` over all the queries: a second solver that runs out of time does not keep
    the LRAT chain from being tried."""
    left = {"cvc5": seconds, "lrat": seconds}  # each evidence's budget, spent only while that evidence runs

    def within(budget: str, check, *args) -> dict:
        start = time.perf_counter()
        try:
            return check(*args[:1], Deadline(max(0.0, left[budget])), *args[1:])
        finally:
            left[budget] -= time.perf_counter() - start

    out = []
    for k, query in enumerate(queries, 1):
        progress(ProgressEvent("certify", f"{CERTIFYING}: {query['name']}", k - 1, len(queries), "queries"))
        entry = {"name": query["name"], "z3_answer": query["answer"]}
        text = query.get("smt2") or ""
        if not text:
            entry.update(evidence=[], note="no solver query (the step holds without one)")
            out.append(entry)
            continue
        file = folder / f"query-{k}.smt2"
        file.write_text(text)
        entry.update(file=file.name, sha256=sha256(text))
        if query["answer"] != "unsat":  # not a proof obligation: a failing step the property concluded from
            entry.update(evidence=[], note=f"z3 answered {query['answer']}: not a step of the proof")
        elif query.get("no_bit_vector_form"):
            entry["evidence"] = [
                within("cvc5", cvc5_reprove, text),
                {**LRAT_RECORD, "ok": None, "note": query["no_bit_vector_form"]},
            ]
        else:  # the SAT solver of the LRAT chain runs in its own process while cvc5 re-proves the query here
            lrat = Deadline(max(0.0, left["lrat"]))
            job = start_lrat(text, lrat)
            try:
                second = within("cvc5", cvc5_reprove, text)
                entry["evidence"] = [second, finish_lrat(job, folder / f"query-{k}.lrat.gz")]
            finally:
                if job.sat is not None:
                    job.sat.close()
                left["lrat"] -= lrat.elapsed()
        out.append(entry)
    return out


def certificate_kinds(engine: str) -> tuple[str, ...]:
    """The kinds of certificate ``engine``'s proofs get (its card's ``CERTIFICATES``); none for a name that is
    no engine (a report may name anything)."""
    return engines.load(engine).certificates if engine in engines.names() else ()


@dataclass
class Recheck:
    """What re-checking one certificate found: problems (it fails), partial evidence, and notes."""

    problems: list[str] = field(default_factory=list)
    partial: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def recheck(
    subject: dict, task: Task, path: Path, recorded_sha256: str | None, seconds: float, executor: Executor
) -> Recheck:
    """Re-check a certificate offline against ``subject``, what the re-loaded spec says the result is about
    (``certify.subject.subject_of``): first that the certificate is about it (subject, kind, every query or
    the input space re-derived; engines that must run again to re-derive their queries run on ``executor``),
    then every piece of evidence."""
    out = Recheck()
    if not path.is_file():
        out.problems.append(f"certificate {path.name} missing")
        return out
    data = path.read_bytes()
    if recorded_sha256 is None or sha256(data) != recorded_sha256:
        out.problems.append(f"certificate {path.name} does not match the sha256 in the report")
        return out
    try:
        body = json.loads(data)
    except ValueError:
        out.problems.append(f"certificate {path.name} (sha256 {sha256(data)[:12]}…) is not JSON")
        return out
    if not isinstance(body, dict) or body.get("format") != FORMAT:
        found = body.get("format") if isinstance(body, dict) else None
        out.problems.append(
            f"certificate {path.name}: format {found!r}, expected {FORMAT!r} (certificates of "
            "verify-tf-certificate/1 are not bound to what they prove: certify again)"
        )
        return out
    kind, engine = body.get("kind"), subject["engine"]
    out.problems += differences(body.get("subject"), subject)
    kinds = certificate_kinds(engine)
    if kind not in kinds:
        allowed = " or ".join(kinds) or "none (this engine's proofs have no certificate)"
        out.problems.append(f"a certificate of kind {kind!r} for a proof by engine {engine!r} (expected {allowed})")
    if out.problems:
        return out
    out.notes += version_notes(body.get("versions"))
    if (
        kind == "smt"
        and not body.get("checks")
        and not any(q.get("z3_answer") == "unsat" for q in body.get("queries", []))
    ):
        out.problems.append("an SMT certificate without any query")
        return out
    module = engines.certificate(engine)
    assert module is not None  # the engine's card lists this kind
    if module.REDERIVE == "queries":
        out.problems += query_differences(task, engine, body, seconds, executor)
    else:  # the space, then the engine proves it again (certify.rederive)
        out.problems += space_differences(task, body.get("space"))
        if not out.problems:
            out.problems += proof_differences(task, engine, body, seconds, executor)
    if out.problems:
        return out
    problems, partial = module.recheck(task, body)  # the engine's own evidence
    out.problems += problems
    out.partial += partial
    _recheck_queries(body, path.parent, Deadline(seconds), out.problems, out.partial)
    return out


def _evidence_file(folder: Path, name: Any) -> Path | None:
    """A file the certificate names: a plain name inside its own folder (never a path that leaves it)."""
    if not isinstance(name, str) or name in ("", ".", "..") or Path(name).name != name or "\\" in name:
        return None
    return folder / name


def _recheck_queries(body: dict, folder: Path, deadline: Deadline, problems: list[str], partial: list[str]) -> None:
    """Every proof step (a query z3 answered unsat) needs at least one independent check that passes again now."""
    for query in body.get("queries", []):
        name = query["name"]
        if query.get("z3_answer") != "unsat":
            continue  # not a step of the proof (z3 answered sat: the property concluded from the failure)
        evidence = query.get("evidence") or []
        if not query.get("sha256"):  # the step holds without a solver query (re-derived so above)
            partial.append(f"{name}: {query.get('note', 'no solver query')}")
            continue
        if not any(record.get("ok") is True for record in evidence):
            notes = "; ".join(str(r.get("note", "")) for r in evidence) or "none recorded"
            problems.append(f"{name}: no independent check of this step completed when certified ({notes})")
            continue
        file = _evidence_file(folder, query.get("file"))
        if file is None:
            problems.append(f"{name}: the query file is not named as a file in the certificate's folder")
            continue
        if not file.is_file():
            problems.append(f"{name}: query file {file.name} missing")
            continue
        text = file.read_text()
        if sha256(text) != query.get("sha256"):
            problems.append(f"{name}: query file {query['file']} does not match its sha256")
            continue
        for record in evidence:
            if record.get("ok") is False:
                problems.append(f"{name}: {record['check']} failed when certified: {record.get('note', '')}")
            elif record.get("ok") is None:
                partial.append(f"{name}: {record['check']}: {record.get('note', 'not checked')}")
            elif record["check"] == CVC5_CHECK:
                again = cvc5_reprove(text, deadline)
                if again["ok"] is not True:
                    problems.append(f"{name}: cvc5 re-proof: {again.get('note', again.get('answer'))}")
            elif record["check"] == LRAT_RECORD["check"]:
                proof = _evidence_file(folder, record.get("proof"))
                if proof is None:
                    problems.append(f"{name}: the LRAT proof is not named as a file in the certificate's folder")
                    continue
                problems += [f"{name}: {p}" for p in recheck_lrat(text, record, proof, deadline.expired)]
            else:
                problems.append(f"{name}: unknown kind of evidence {record['check']!r}")

"""Certificates for ``proved`` verdicts (``verify-tf check --certify DIR``) and their re-check (``verify-tf audit``).

``certify(task, verdict, directory, seconds)`` is called by the runner, once, after a property is proved. It
reads what the engine kept in the verdict's statistics under ``--certify`` (``engines.base.CERTIFY_QUERIES``:
every solver query; ``OUTPUTS_DIGEST`` and the chunk digests of an exhaustive run), writes a folder per
property (``certificate.json``, each query as ``query-K.smt2``, each LRAT proof as ``query-K.lrat.gz``) and puts
a summary in ``verdict.statistics["certificate"]``: the file, its sha256, every check with the tool and
version that made it, and whether the evidence is complete. A check that could not run within the budget is
recorded as such (``ok: null`` with the reason), never dropped: ``audit`` reports partial evidence as partial.

``recheck(task, path)`` re-does every check of a certificate from its files; docs/trust.md says what each
check rules out and what stays trusted.
"""

from __future__ import annotations

import importlib.util
import json
import re
import time
from pathlib import Path

from ..engines.base import CERTIFY_COUNTING, CERTIFY_QUERIES, OUTPUTS_DIGEST, Progress, ProgressEvent, Task, no_progress
from ..engines.scan import CERTIFY_CHUNKS
from ..verdict import PROVED, Verdict
from ..work import Deadline
from .conclusion import conclusion_checks
from .counting import counting_evidence, recheck_counting
from .exhaustive import exhaustive_evidence, recheck_exhaustive
from .smt import LRAT_RECORD, cvc5_reprove, lrat_evidence, recheck_lrat, sha256
from .split import recheck_split, split_evidence

FORMAT = "verify-tf-certificate/1"
TRUSTED = {
    "smt": [
        "the encoder (verify_tf.symbolic): the query says what the property means",
        "for the LRAT check: the LIA-to-BV width argument (verify_tf.symbolic.bv) and z3's bit-blaster",
        "the LRAT checker (verify_tf.certify.lrat, ~120 lines)",
    ],
    "exhaustive": [
        "the input space's numbering (verify_tf.spaces) beyond the sampled inputs",
        "the batched evaluator on inputs outside the sample (differential tests cover it)",
    ],
    "counting": [
        "that strings reaching the same joint state agree on every continuation (engines.counting.explore)",
        "the counting model on strings outside the sample (the engine's differential tests cover it)",
        "for every length: the encoder of one position (engines.counting.induction) and z3's answers as "
        "re-proved by cvc5 (unbounded integers: no LRAT chain)",
    ],
    "split": [
        "the interval bounds (verify_tf.bounds) that closed cubes without evaluating them",
        "the batched evaluator on enumerated leaves outside the sample (differential tests cover it)",
    ],
}


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


def certify(task: Task, verdict: Verdict, directory: Path, seconds: float, progress: Progress = no_progress) -> None:
    """Attach a certificate to ``verdict`` in place (see the module docstring); drops the engine's raw material
    from the statistics whatever the verdict. ``progress`` hears ``CERTIFYING`` with the queries done."""
    queries = verdict.statistics.pop(CERTIFY_QUERIES, None)
    chunks = verdict.statistics.pop(CERTIFY_CHUNKS, None)
    covered = verdict.statistics.pop(CERTIFY_COUNTING, None)
    if verdict.status != PROVED:
        return
    progress(ProgressEvent("certify", CERTIFYING, 0, len(queries) if queries else None, "queries"))
    start = time.perf_counter()
    folder = directory / slug(verdict)
    folder.mkdir(parents=True, exist_ok=True)
    body: dict = {
        "format": FORMAT,
        "property": verdict.property,
        "kind_of_property": verdict.kind,
        "spec": verdict.spec,
        "index": verdict.index,
        "engine": verdict.engine,
        "method": verdict.method,
    }
    if covered is not None:  # engine counting: its exploration, and for every length its induction queries
        body.update(counting_evidence(task, covered, task.settings.seed))
        body["trusted"] = TRUSTED["counting"]
        if queries is not None:
            body["queries"] = _smt_certificate(queries, folder, seconds, progress)["queries"]
    elif queries is not None:
        body.update(_smt_certificate(queries, folder, seconds, progress))
        if not any(q.get("z3_answer") == "unsat" for q in body["queries"]):
            body["checks"] = conclusion_checks(task, verdict.statistics)
    elif verdict.engine == "split":  # before the exhaustive case: split's enumeration leaves keep no digest
        body.update(split_evidence(task, verdict.statistics, task.settings.seed))
        body["trusted"] = TRUSTED["split"]
    elif verdict.statistics.get(OUTPUTS_DIGEST) is not None:
        body.update(exhaustive_evidence(task, {**verdict.statistics, CERTIFY_CHUNKS: chunks or []}, task.settings.seed))
        body["trusted"] = TRUSTED["exhaustive"]
    else:
        body.update(kind="none", checks=[], note=f"no certificate for {verdict.engine} ({verdict.method}) proofs")
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


def _smt_certificate(queries: list[dict], folder: Path, seconds: float, progress: Progress = no_progress) -> dict:
    """Each kind of evidence has its own budget of ``seconds`` over all the queries: a second solver that runs
    out of time does not keep the LRAT chain from being tried."""
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
        else:
            entry["evidence"] = [
                within("cvc5", cvc5_reprove, text),
                within("lrat", lrat_evidence, text, folder / f"query-{k}.lrat.gz"),
            ]
        out.append(entry)
    return {"kind": "smt", "queries": out, "trusted": TRUSTED["smt"]}


def recheck(task: Task, path: Path, recorded_sha256: str | None, seconds: float) -> tuple[list[str], list[str]]:
    """Re-check a certificate offline: (problems, partial evidence notes). No problems: it checks."""
    if not path.is_file():
        return [f"certificate {path} missing"], []
    text = path.read_text()
    if recorded_sha256 is not None and sha256(text) != recorded_sha256:
        return [f"certificate {path.name} does not match the sha256 in the report"], []
    try:
        body = json.loads(text)
    except ValueError as exc:
        return [f"certificate {path.name} is not JSON: {exc}"], []
    if body.get("format") != FORMAT:
        return [f"certificate {path.name}: unknown format {body.get('format')!r}"], []
    deadline = Deadline(seconds)
    problems: list[str] = []
    partial: list[str] = []
    if body.get("kind") == "exhaustive":
        problems += [f"exhaustive: {p}" for p in recheck_exhaustive(task, body)]
    elif body.get("kind") == "split":
        problems += [f"split: {p}" for p in recheck_split(task, body)]
        partial += [f"{c['check']}: {c['note']}" for c in body.get("checks", []) if c.get("ok") is None]
    elif body.get("kind") == "counting":
        problems += [f"counting: {p}" for p in recheck_counting(task, body)]
        _recheck_queries(body, path.parent, deadline, problems, partial)
    elif body.get("kind") == "smt":
        if not any(r.get("ok") is True for q in body.get("queries", []) for r in q.get("evidence", [])):
            partial.append("no solver query of this proof was certified (it asked none, or none could be)")
            for check in body.get("checks", []):
                again = conclusion_checks(task, check) if check.get("pair") else [check]
                if check.get("ok") is False or again[0].get("ok") is False:
                    problems.append(f"{check['check']}: does not check")
                elif check.get("ok") is None:
                    partial.append(f"{check['check']}: {check.get('note', 'not checked')}")
        _recheck_queries(body, path.parent, deadline, problems, partial)
    else:
        partial.append(body.get("note", "no certificate"))
    return problems, partial


def _recheck_queries(body: dict, folder: Path, deadline: Deadline, problems: list[str], partial: list[str]) -> None:
    for query in body.get("queries", []):
        name = query["name"]
        if not query.get("evidence"):
            if query.get("z3_answer") == "unsat":
                partial.append(f"{name}: no evidence recorded")
            continue
        file = folder / query["file"]
        if not file.is_file():
            problems.append(f"{name}: query file {query['file']} missing")
            continue
        text = file.read_text()
        if sha256(text) != query.get("sha256"):
            problems.append(f"{name}: query file {query['file']} does not match its sha256")
            continue
        if not any(record.get("ok") is True for record in query["evidence"]):  # none ran (budget): partial
            partial.append(f"{name}: no independent check completed when certified (see the notes)")
        for record in query["evidence"]:
            if record.get("ok") is False:
                problems.append(f"{name}: {record['check']} failed when certified: {record.get('note', '')}")
            elif record.get("ok") is None:
                partial.append(f"{name}: {record['check']}: {record.get('note', 'not checked')}")
            elif record["check"].startswith("second solver"):
                again = cvc5_reprove(text, deadline)
                if again["ok"] is not True:
                    problems.append(f"{name}: cvc5 re-proof: {again.get('note', again.get('answer'))}")
            else:
                problems += [
                    f"{name}: {p}" for p in recheck_lrat(text, record, folder / record["proof"], deadline.expired)
                ]

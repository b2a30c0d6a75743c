"""``verify-tf audit REPORT.json``: re-check a JSON report offline, trusting none of its numbers.

Every result is re-checked against the spec as it is now (whose sha256 must still match the report's):

* ``proved``: its certificate (``verify_tf.certify.recheck``). First, what the certificate is about: its subject
  (digests of the spec text, the model as loaded, the arithmetic, the domain, the property and its options, the
  engine) must equal the one re-derived from the re-loaded spec, its kind must be one the engine's proofs get,
  and every query is re-derived through the encoder (every exhaustive domain's size and order from the domain)
  and must have the certificate's digest. Only then the evidence: the query files against their digests, cvc5
  re-proves each query, each LRAT proof is re-checked against a CNF re-derived from the query; exhaustive: the
  size recomputed, the digest recombined, the seeded sample re-evaluated on the interpreter. A ``proved``
  without a certificate fails the audit;
* ``refuted``: the counterexample is replayed on the reference interpreter through the property's own
  violation predicate (``engines.replay``; witnesses of other shapes: the check is re-run and must give the
  same counterexample);
* cached verdicts are audited the same way (a cache hit carries no certificate, so a cached ``proved`` fails).

Paths in the report (the spec, the certificate) are resolved against the report's folder, never the current
one; absolute paths are taken as written. Audit names files and digests, and never shows a file's contents.

Each result ends ``ok``, ``partial`` (every proof step has at least one independent check that passed, some
evidence missing, e.g. an LRAT proof over budget: the reason is listed) or ``failed`` (what failed is named).
Nothing here prints: the CLI does.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..certify import recheck
from ..certify.subject import subject_of
from ..engines.replay import NOT_REPLAYABLE, replay_stored
from ..executors import InProcess
from ..runner import Overrides, check_property, task_of
from ..spec import SpecError, load_spec
from ..verdict import PROVED, REFUTED, Verdict

OK, PARTIAL, FAILED = "ok", "partial", "failed"


class AuditError(Exception):
    """The report itself cannot be read (missing, not JSON, not a verify-tf report)."""


@dataclass
class Audited:
    spec: str
    property: str
    verdict: str
    outcome: str = OK
    problems: list[str] = field(default_factory=list)
    partial: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    cached: bool = False


def resolve(stored: Any, report_dir: Path) -> Path | None:
    """A path written in a report, resolved against the report's folder (absolute paths as written)."""
    if not isinstance(stored, str) or not stored:
        return None
    return report_dir / stored  # an absolute ``stored`` replaces report_dir


def _locate(entry: dict[str, Any], report_dir: Path) -> Path | None:
    candidates = [resolve(entry.get("spec_resolved"), report_dir), resolve(entry.get("spec"), report_dir)]
    return next((c for c in candidates if c is not None and c.is_file()), None)


def audit_report(path: str | Path, seconds: float = 600.0) -> list[Audited]:
    path = Path(path)
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise AuditError(f"cannot read {path}: {type(exc).__name__}") from None
    if not isinstance(report, dict) or not str(report.get("format", "")).startswith("verify-tf-report/"):
        raise AuditError(f"{path} is not a verify-tf JSON report")
    results = report.get("results", [])
    if not isinstance(results, list):
        raise AuditError(f"{path} is not a verify-tf JSON report (its results are not a list)")
    return [audit_entry(entry, path.resolve().parent, seconds) for entry in results]


def audit_entry(entry: Any, report_dir: Path, seconds: float) -> Audited:
    if not isinstance(entry, dict):
        return _fail(Audited("", "?", "?"), "a result that is not a JSON object")
    item = Audited(
        str(entry.get("spec", "")),
        str(entry.get("property", "?")),
        str(entry.get("verdict", "?")),
        cached=bool(entry.get("cached")),
    )
    if item.verdict not in (PROVED, REFUTED):
        item.checked.append(f"{item.verdict}: nothing to check")
        return item
    spec_path = _locate(entry, report_dir)
    if spec_path is None:
        return _fail(item, f"spec {Path(str(entry.get('spec'))).name!r} not found next to the report")
    digest = hashlib.sha256(spec_path.read_bytes()).hexdigest()
    if entry.get("spec_sha256") != digest:
        recorded = str(entry.get("spec_sha256"))[:12]
        return _fail(item, f"spec {spec_path.name} (sha256 {digest[:12]}…) is not the report's (sha256 {recorded}…)")
    try:
        spec = load_spec(spec_path)
    except SpecError:  # its message quotes the file: never shown here
        return _fail(item, f"spec {spec_path.name} (sha256 {digest[:12]}…) does not load (`verify-tf check` shows why)")
    props = [p for p in spec.properties if p.index == entry.get("index")]
    if not props:
        return _fail(item, f"spec {spec_path.name} has no property number {entry.get('index')!r}")
    prop = props[0]
    if (prop.label, prop.name) != (entry.get("property"), entry.get("kind")):
        return _fail(
            item,
            f"property {entry.get('index')} of {spec_path.name} is {prop.label!r} ({prop.name}), the report says "
            f"{entry.get('property')!r} ({entry.get('kind')})",
        )
    task = task_of(spec, prop, Overrides())
    try:
        if item.verdict == PROVED:
            _audit_proof(item, entry, spec, prop, task, report_dir, seconds)
        else:
            _replay(item, entry, spec, prop, task)
    except Exception as exc:  # a malformed certificate or witness: named, never a crash of the audit
        item.problems.append(f"could not be re-checked: {type(exc).__name__}: {exc}"[:300])
    item.outcome = FAILED if item.problems else (PARTIAL if item.partial else OK)
    return item


def _audit_proof(item: Audited, entry: dict, spec, prop, task, report_dir: Path, seconds: float) -> None:
    summary = (entry.get("statistics") or {}).get("certificate")
    if not isinstance(summary, dict) or "path" not in summary:
        item.problems.append("proved without a certificate" + (" (a cached verdict)" if item.cached else ""))
        return
    path = resolve(summary["path"], report_dir)
    if path is None:
        item.problems.append("the certificate's path is not a path")
        return
    subject = subject_of(spec.path, prop.index, prop.name, prop.label, task, spec.seed, str(entry.get("engine")))
    found = recheck(subject, task, path, summary.get("sha256"), seconds, InProcess())
    item.problems += [f"certificate: {p}" for p in found.problems]
    item.partial += found.partial
    if not found.problems:
        item.checked.append(f"certificate {path.parent.name}/{path.name}: bound to this result, evidence re-checked")
    item.checked += found.notes


def _replay(item: Audited, entry: dict[str, Any], spec, prop, task) -> None:
    witness = entry.get("counterexample") or {}
    replays, why = replay_stored(task, witness)
    if replays:
        item.checked.append("counterexample replayed on the interpreter")
        return
    if why != NOT_REPLAYABLE:
        item.problems.append(f"counterexample: {why}")
        return
    # another witness shape (architecture members, pairs of words): the check is re-run and must refute again
    rerun: Verdict = check_property(spec, prop, Overrides(engine=entry.get("engine")))
    if rerun.status != REFUTED:
        item.problems.append(f"counterexample: re-running the check gives {rerun.status}: {rerun.detail}"[:300])
    elif rerun.counterexample != witness:
        # a solver-chosen member depends on the solver's state (what the process asked before): the re-run's own
        # witness replayed, the report's is not re-checked
        item.partial.append(
            "counterexample: the check, re-run, refutes with another solver-chosen witness (replayed); the "
            "report's own witness cannot be replayed from the witness alone"
        )
    else:
        item.checked.append("counterexample re-derived by re-running the check")


def _fail(item: Audited, problem: str) -> Audited:
    item.problems.append(problem)
    item.outcome = FAILED
    return item


def audit_exit_code(items: list[Audited], strict: bool = False) -> int:
    """0 when everything checks (partial evidence counts as checked unless ``strict``), 1 otherwise."""
    bad = {FAILED, PARTIAL} if strict else {FAILED}
    return 1 if any(i.outcome in bad for i in items) else 0

"""``verify-tf audit REPORT.json``: re-check a JSON report offline, trusting none of its numbers.

Every result is re-checked against the spec as it is now (whose sha256 must still match the report's):

* ``proved``: its certificate (``verify_tf.certify.recheck``): the query files against their digests, cvc5
  re-proves each query, each LRAT proof is re-checked against a CNF re-derived from the query (bit-width
  included); exhaustive: the size recomputed, the digest recombined, the seeded sample re-evaluated on the
  interpreter. A ``proved`` without a certificate fails the audit;
* ``refuted``: the counterexample is replayed on the reference interpreter through the property's own
  violation predicate (witnesses of other shapes: the check is re-run and must give the same counterexample);
* cached verdicts are audited the same way (a cache hit carries no certificate, so a cached ``proved`` fails).

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
from ..runner import Overrides, check_property, make_task
from ..spec import SpecError, load_spec
from ..verdict import PROVED, REFUTED, Verdict
from ..witness import input_from_json

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


def _locate(entry: dict[str, Any], report_dir: Path) -> Path | None:
    candidates = [Path(entry["spec_resolved"])] if entry.get("spec_resolved") else []
    if entry.get("spec"):
        candidates += [report_dir / entry["spec"], Path(entry["spec"])]
    return next((c for c in candidates if c.is_file()), None)


def _certificate_path(stored: str, report_dir: Path) -> Path:
    path = Path(stored)
    return path if path.is_absolute() or path.is_file() else report_dir / path


def audit_report(path: str | Path, seconds: float = 600.0) -> list[Audited]:
    path = Path(path)
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise AuditError(f"cannot read {path}: {exc}") from None
    if not isinstance(report, dict) or not str(report.get("format", "")).startswith("verify-tf-report/"):
        raise AuditError(f"{path} is not a verify-tf JSON report")
    return [audit_entry(entry, path.parent, seconds) for entry in report.get("results", [])]


def audit_entry(entry: dict[str, Any], report_dir: Path, seconds: float) -> Audited:
    item = Audited(
        entry.get("spec", ""), entry.get("property", "?"), entry.get("verdict", "?"), cached=bool(entry.get("cached"))
    )
    if item.verdict not in (PROVED, REFUTED):
        item.checked.append(f"{item.verdict}: nothing to check")
        return item
    spec_path = _locate(entry, report_dir)
    if spec_path is None:
        return _fail(item, f"spec {entry.get('spec')!r} not found")
    if entry.get("spec_sha256") and hashlib.sha256(spec_path.read_bytes()).hexdigest() != entry["spec_sha256"]:
        return _fail(item, f"spec {spec_path} changed since the report (sha256 differs)")
    try:
        spec = load_spec(spec_path)
    except SpecError as exc:
        return _fail(item, f"spec no longer loads: {exc}")
    props = [p for p in spec.properties if p.index == entry.get("index")]
    if not props:
        return _fail(item, f"spec has no property number {entry.get('index')}")
    task = make_task(spec, props[0], Overrides())
    if item.verdict == PROVED:
        summary = (entry.get("statistics") or {}).get("certificate")
        if not summary or "path" not in summary:
            return _fail(item, "proved without a certificate" + (" (a cached verdict)" if item.cached else ""))
        problems, partial = recheck(
            task, _certificate_path(summary["path"], report_dir), summary.get("sha256"), seconds
        )
        item.problems += [f"certificate: {p}" for p in problems]
        item.partial += partial
        item.checked.append(f"certificate {Path(summary['path']).parent.name}")
    else:
        _replay(item, entry, spec, props[0], task)
    item.outcome = FAILED if item.problems else (PARTIAL if item.partial else OK)
    return item


def _replay(item: Audited, entry: dict[str, Any], spec, prop, task) -> None:
    witness = entry.get("counterexample") or {}
    if "input" in witness and hasattr(task.prop, "violation"):
        # a pair witness (equivariance: X and the transposed X) is named by its smaller input; the violation
        # may show on the other one
        inputs = [witness["input"]] + [witness[k] for k in ("permuted_input", "other") if k in witness]
        try:
            again = None
            for data in inputs:
                again = again or task.prop.violation(task, input_from_json(data))
        except Exception as exc:  # a tampered input the model cannot read
            item.problems.append(f"counterexample: the input cannot be replayed: {type(exc).__name__}: {exc}")
            return
        if again is None:
            item.problems.append(f"counterexample: the interpreter finds no violation on {witness['input']}")
        else:
            item.checked.append("counterexample replayed on the interpreter")
        return
    # another witness shape (pairs, architecture members): the check again must give the same counterexample
    rerun: Verdict = check_property(spec, prop, Overrides(engine=entry.get("engine")))
    if rerun.status != REFUTED or rerun.counterexample != witness:
        item.problems.append(
            f"counterexample: re-running the check gives {rerun.status} with a different counterexample"
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

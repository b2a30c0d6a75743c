"""``verify-tf audit REPORT.json``: re-check a JSON report offline, trusting none of its numbers.

The report is bound to its specs as they are now (each spec's sha256 must still match the report's):

* **every property exactly once**: each spec the report names is re-loaded, and each of its properties must have
  exactly one result (none missing, none listed twice, no result for a property the spec lacks);
* **each verdict re-derived**:

  - ``proved``: its certificate (``verify_tf.certify.recheck``). First, what the certificate is about: its subject
    (digests of the spec text, the model as loaded, the arithmetic, the domain, the property and its options, the
    engine) must equal the one re-derived from the re-loaded spec, its kind must be one the engine's proofs get,
    and every query is re-derived through the encoder (every exhaustive domain's size and order from the domain)
    and must have the certificate's digest. Only then the evidence: the query files against their digests, cvc5
    re-proves each query, each LRAT proof is re-checked against a CNF re-derived from the query; exhaustive: the
    size recomputed, the digest recombined, the seeded sample re-evaluated on the interpreter. The result's
    ``method`` (and ``detail``) must be the certificate's. A ``proved`` without a certificate fails the audit;
  - ``refuted``: the counterexample is replayed on the reference interpreter through the property's own
    violation predicate (``engines.replay``; witnesses of other shapes: the check is re-run and must refute again);
  - ``unknown`` (and ``skipped``, a spec not run for a missing package, where it loads here): nothing stronger
    than the report claims may hold, so the check is re-run within the budget the report's run gave it (the spec's
    timeout, or the report's ``--timeout``); a refutation there fails the audit (an ``unknown`` or ``skipped`` that
    hides a refutation turns a failing run into a passing one). A result the report's interrupt kept from
    finishing claims nothing: it is not re-run;
  - ``error``: nothing to re-derive (it fails the run: exit 4, or 2 for an ``input error`` met at check time);
* **what the verdicts come to, recomputed**: each result's ``expect`` (the spec's), ``counts_as``, the reading it is
  about (``reading``, ``as_run``, ``quantization``: a proof about a reading that is not the model as run says so),
  and the report's ``fail_on``, ``interrupted``, ``exit_code`` and ``summary``.

Any difference fails, naming the field. Cached verdicts are audited the same way (a cache hit carries no
certificate, so a cached ``proved`` fails). Paths in the report (the spec, the certificate) are resolved against
the report's folder, never the current one; absolute paths are taken as written. Audit names files and digests,
and never shows a file's contents.

Each result ends ``ok``, ``partial`` (every proof step has at least one independent check that passed, some
evidence missing, e.g. an LRAT proof over budget: the reason is listed) or ``failed`` (what failed is named); the
report's own fields end ok or failed. Nothing here prints: the CLI does.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ..certify import recheck
from ..certify.subject import subject_of
from ..engines.replay import NOT_REPLAYABLE, replay_stored
from ..executors import InProcess
from ..runner import Overrides, check_property, requested_engine, task_of, timeout_of
from ..schema.errors import MissingDependency
from ..spec import SpecError, load_spec
from ..verdict import (
    ERROR,
    EXIT_INPUT_ERROR,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    INPUT_ERROR,
    INTERRUPTED,
    PROVED,
    REFUTED,
    STATUSES,
    Verdict,
)
from .report import FAIL_ON, combined_exit_code, outcome, summarize

OK, PARTIAL, FAILED = "ok", "partial", "failed"
SIGNALS = {"SIGINT": 2, "SIGTERM": 15}  # the interrupts a report may name (verdict.EXIT_INTERRUPTED's keys)


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


@dataclass
class Audit:
    """A whole report audited: each result (``results``), and the report's own fields recomputed from the specs
    and the results (``problems``: each names the field; ``checked``: what held)."""

    results: list[Audited]
    problems: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    specs: list[str] = field(default_factory=list)  # the specs the report covers, by name

    @property
    def failed(self) -> bool:
        return bool(self.problems) or any(i.outcome == FAILED for i in self.results)


@dataclass
class _Spec:
    """One spec a report names, located and loaded once: the spec, or the package it needs, or why not."""

    path: Path | None
    sha256: str | None = None
    spec: Any = None
    missing: MissingDependency | None = None
    problem: str = ""


@dataclass(frozen=True)
class _Run:
    """What the report says of its run as a whole: how an unknown verdict is re-derived, and its interrupt."""

    engine: str | None  # --engine (None: each property's own)
    timeout: float | None  # --timeout (None: each property's own)
    interrupted: str | None


def resolve(stored: Any, report_dir: Path) -> Path | None:
    """A path written in a report, resolved against the report's folder (absolute paths as written)."""
    if not isinstance(stored, str) or not stored:
        return None
    return report_dir / stored  # an absolute ``stored`` replaces report_dir


def _locate(entry: dict[str, Any], report_dir: Path) -> Path | None:
    candidates = [resolve(entry.get("spec_resolved"), report_dir), resolve(entry.get("spec"), report_dir)]
    return next((c for c in candidates if c is not None and c.is_file()), None)


def audit_report(path: str | Path, seconds: float = 600.0) -> Audit:
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
    report_dir = path.resolve().parent
    audit = Audit([])
    run = _run_of(report, audit.problems)
    specs: dict[Path, _Spec] = {}
    located: list[_Spec | None] = []
    for entry in results:
        spec = _spec_of(entry, report_dir, specs) if isinstance(entry, dict) else None
        located.append(spec)
        audit.results.append(audit_entry(entry, spec, report_dir, seconds, run))
    audit.specs = [p.name for p in specs]
    if not results:
        audit.problems.append("results: none (a check reports every property of every spec it was given)")
    _check_coverage(results, located, specs, audit)
    _check_totals(report, results, located, run, audit)
    return audit


def _run_of(report: dict[str, Any], problems: list[str]) -> _Run:
    options: dict[str, Any] = report["run"] if isinstance(report.get("run"), dict) else {}
    engine, timeout = options.get("engine"), options.get("timeout")
    if engine is not None and not isinstance(engine, str):
        problems.append(f"run.engine: {engine!r} is not an engine's name")
        engine = None
    if timeout is not None and (not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0):
        problems.append(f"run.timeout: {timeout!r} is not a number of seconds")
        timeout = None
    stopped = report.get("interrupted")
    if stopped is not None and stopped not in SIGNALS:
        problems.append(f"interrupted: {stopped!r} is not SIGINT or SIGTERM")
        stopped = None
    return _Run(engine, timeout, stopped)


def _spec_of(entry: dict[str, Any], report_dir: Path, specs: dict[Path, _Spec]) -> _Spec:
    """The spec a result names, located next to the report and, when its sha256 is the result's, loaded (once per
    file: a file that is not the report's spec is never parsed)."""
    path = _locate(entry, report_dir)
    if path is None:
        return _Spec(None, problem=f"spec {Path(str(entry.get('spec'))).name!r} not found next to the report")
    key = path.resolve()
    if key not in specs:
        specs[key] = _Spec(path, hashlib.sha256(path.read_bytes()).hexdigest())
    found = specs[key]
    if entry.get("spec_sha256") != found.sha256:
        recorded, digest = str(entry.get("spec_sha256"))[:12], str(found.sha256)[:12]
        return _Spec(
            path, found.sha256, problem=f"spec {path.name} (sha256 {digest}…) is not the report's (sha256 {recorded}…)"
        )
    if found.spec is None and found.missing is None and not found.problem:
        try:
            found.spec = load_spec(path)
        except MissingDependency as missing:  # it needs a package not installed here
            found.missing = missing
        except SpecError:  # its message quotes the file: never shown here
            found.problem = (
                f"spec {path.name} (sha256 {str(found.sha256)[:12]}…) does not load (`verify-tf check` shows why)"
            )
    return found


def audit_entry(entry: Any, located: _Spec | None, report_dir: Path, seconds: float, run: _Run) -> Audited:
    if not isinstance(entry, dict):
        return _fail(Audited("", "?", "?"), "a result that is not a JSON object")
    item = Audited(
        str(entry.get("spec", "")),
        str(entry.get("property", "?")),
        str(entry.get("verdict", "?")),
        cached=bool(entry.get("cached")),
    )
    assert located is not None  # every JSON object is located (or says why not)
    if located.path is None or located.problem:
        return _fail(item, located.problem)
    properties = located.spec.properties if located.spec is not None else located.missing.properties  # type: ignore
    props = [p for p in properties if p.index == entry.get("index")]
    if not props:
        return _fail(item, f"spec {located.path.name} has no property number {entry.get('index')!r}")
    prop = props[0]
    if (prop.label, prop.name) != (entry.get("property"), entry.get("kind")):
        return _fail(
            item,
            f"property {entry.get('index')} of {located.path.name} is {prop.label!r} ({prop.name}), the report says "
            f"{entry.get('property')!r} ({entry.get('kind')})",
        )
    _check_expectation(item, entry, prop.expect)
    if item.verdict not in STATUSES:
        item.problems.append(f"verdict: {item.verdict!r} is not a verdict ({', '.join(STATUSES)})")
    elif located.missing is not None:
        _not_loadable(item, entry, located.missing)
    else:
        try:
            _rederive(item, entry, located.spec, prop, report_dir, seconds, run)
        except Exception as exc:  # a malformed certificate or witness: named, never a crash of the audit
            item.problems.append(f"could not be re-checked: {type(exc).__name__}: {exc}"[:300])
    item.outcome = FAILED if item.problems else (PARTIAL if item.partial else OK)
    return item


def _check_expectation(item: Audited, entry: dict[str, Any], expect: str | None) -> None:
    """``expect`` is the spec's, ``counts_as`` what the verdict counts as under it (``report.outcome``)."""
    if entry.get("expect") != expect:
        item.problems.append(f"expect: the report says {entry.get('expect')!r}, the spec {expect!r}")
    if item.verdict in STATUSES:
        counts_as = outcome(_verdict_of(entry, item.verdict), expect)
        if entry.get("counts_as") != counts_as:
            item.problems.append(
                f"counts_as: the report says {entry.get('counts_as')!r}; {item.verdict} under the spec's expect "
                f"{expect!r} counts as {counts_as!r}"
            )


def _not_loadable(item: Audited, entry: dict[str, Any], missing: MissingDependency) -> None:
    """A spec that needs a package not installed here: a result saying it was not run for that reason is what
    this machine would say too; any other verdict cannot be re-checked here."""
    said = (entry.get("statistics") or {}).get("missing") or {}
    if item.verdict not in (PROVED, REFUTED, ERROR) and said.get("package") == missing.package:  # unknown, skipped
        item.checked.append(f"not run: {missing.package} is not installed here either")
        return
    item.problems.append(
        f"cannot be re-checked here: the spec needs {missing.package}, which is not installed ({missing.install})"
    )


def _rederive(item: Audited, entry: dict, spec, prop, report_dir: Path, seconds: float, run: _Run) -> None:
    task = task_of(spec, prop, Overrides())
    if item.verdict in (PROVED, REFUTED):
        _check_reading(item, entry, task)
    if item.verdict == PROVED:
        _audit_proof(item, entry, spec, prop, task, report_dir, seconds)
    elif item.verdict == REFUTED:
        _replay(item, entry, spec, prop, task)
    elif item.verdict == ERROR:
        # the user's mistake met at check time, else a bug
        code = EXIT_INPUT_ERROR if entry.get("method") == INPUT_ERROR else EXIT_INTERNAL
        item.checked.append(f"error: nothing to re-derive (it fails the run: exit {code})")
    else:
        _rederive_unknown(item, entry, spec, prop, seconds, run)


def _check_reading(item: Audited, entry: dict[str, Any], task) -> None:
    """The reading a verdict is about, and whether that is the model as run, re-derived from the spec's model:
    a proof about a reading that is not how the model runs must say so next to the verdict (docs/semantics.md)."""
    reading, as_run = task.prop.reading(task)
    said = (entry.get("reading", ""), entry.get("as_run"))
    if reading and said != (reading, as_run):
        item.problems.append(
            f"reading: the report says {said[0]!r} (as_run {said[1]!r}), the model {reading!r} (as_run {as_run!r})"
        )
    elif not reading and "reading" in entry:
        item.problems.append(f"reading: the report says {said[0]!r}; the model is its own reading")
    quantization = task.model.quantization.to_json() if task.model.quantization else None
    if entry.get("quantization") != quantization:
        item.problems.append("quantization: the report's weight rounding is not the model's")


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
        certified = json.loads(path.read_bytes())  # its sha256 is the report's (recheck)
        for key in ("method", "detail"):  # what the proof says of itself (certificates before 0.2: no detail)
            if key in certified and certified[key] != entry.get(key):
                item.problems.append(f"{key}: the report says {entry.get(key)!r}, the certificate {certified[key]!r}")
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


def _rederive_unknown(item: Audited, entry: dict[str, Any], spec, prop, seconds: float, run: _Run) -> None:
    """Nothing stronger than ``unknown`` may hold: the check re-run within the budget the report's run gave it
    (``timeout_of`` under the report's ``--timeout``), capped by the audit's own ``seconds``."""
    if entry.get("method") == INTERRUPTED:
        if run.interrupted is None:
            item.problems.append("method: 'interrupted' in a report that was not interrupted (no 'interrupted')")
        else:
            item.checked.append(f"unknown: {run.interrupted} kept it from finishing; nothing to re-derive")
        return
    overrides = Overrides(engine=run.engine, timeout=run.timeout)
    budget, engine = timeout_of(spec, prop, overrides), requested_engine(spec, prop, overrides)
    given = min(budget, seconds)
    rerun = check_property(spec, prop, Overrides(engine=run.engine, timeout=given))
    within = f"re-checked within {given:g} s (engine {engine})"
    if rerun.status == REFUTED:
        item.problems.append(
            f"verdict: the report says {item.verdict}, but {within} it is refuted, the counterexample replayed on "
            f"the interpreter: {rerun.detail}"[:400]
        )
        return
    if rerun.status == PROVED:
        item.checked.append(f"unknown: {within} it is proved (the report claims less)")
        return
    item.checked.append(f"unknown: {within}: {rerun.status} again, nothing stronger than the report claims")
    if given < budget:
        item.partial.append(f"unknown: re-checked for {given:g} s of its {budget:g} s budget (audit --timeout)")
    own_budget, own_engine = timeout_of(spec, prop, Overrides()), requested_engine(spec, prop, Overrides())
    if budget < own_budget or engine != own_engine:  # the report's run asked less than the spec does
        item.partial.append(
            f"unknown: the report's run gave it {budget:g} s with engine {engine}; the spec gives {own_budget:g} s "
            f"with engine {own_engine} (--timeout, --engine)"
        )


def _verdict_of(entry: dict[str, Any], status: str) -> Verdict:
    """The plain verdict a result states (for the report's own fields: counts, expectations, exit code)."""
    names = {f.name for f in fields(Verdict)} - {"status", "evidence", "counterexample"}
    data = {k: v for k, v in entry.items() if k in names}
    data.setdefault("property", "?")
    data.setdefault("engine", "?")
    return Verdict(status=status, counterexample={"stated": True} if status == REFUTED else None, **data)


def _check_coverage(results: list, located: list[_Spec | None], specs: dict[Path, _Spec], audit: Audit) -> None:
    """Every property of every spec the report names has exactly one result."""
    listed: dict[Path, Counter] = {key: Counter() for key in specs}
    for entry, spec in zip(results, located):
        if spec is not None and spec.path is not None:
            listed[spec.path.resolve()][entry.get("index")] += 1
    for key, spec in specs.items():
        if spec.spec is None and spec.missing is None:  # not loaded: no result is about it as it is now
            continue
        properties = spec.spec.properties if spec.spec is not None else spec.missing.properties  # type: ignore
        name = key.name
        for prop in properties:
            times = listed[key][prop.index]
            if times == 0:
                audit.problems.append(f"results: property {prop.index} ({prop.label}) of {name} is not in the report")
            elif times > 1:
                audit.problems.append(
                    f"results: property {prop.index} ({prop.label}) of {name} is listed {times} times"
                )
        if not audit.problems:
            audit.checked.append(f"{key.name}: each of its {len(properties)} properties has exactly one result")


def _check_totals(report: dict, results: list, located: list[_Spec | None], run: _Run, audit: Audit) -> None:
    """``fail_on``, ``exit_code`` and ``summary`` recomputed from the results' verdicts and the specs' expects."""
    fail_on = report.get("fail_on")
    if fail_on not in FAIL_ON:
        audit.problems.append(f"fail_on: {fail_on!r} is not one of {', '.join(FAIL_ON)}")
        return
    verdicts, expectations = [], []
    for entry, spec in zip(results, located):
        if not isinstance(entry, dict) or spec is None or entry.get("verdict") not in STATUSES:
            audit.problems.append("exit_code, summary: not recomputed (a result is not a verdict)")
            return
        props = spec.spec.properties if spec.spec is not None else spec.missing.properties if spec.missing else ()
        expect = next((p.expect for p in props if p.index == entry.get("index")), entry.get("expect"))
        verdicts.append(_verdict_of(entry, entry["verdict"]))
        expectations.append(expect)
    if any(v.method == INTERRUPTED for v in verdicts) and run.interrupted is None:
        audit.problems.append("interrupted: some results were interrupted, the report does not say by what")
    code = EXIT_INTERRUPTED[SIGNALS[run.interrupted]] if run.interrupted else None
    if code is None:
        code = combined_exit_code(verdicts, expectations, fail_on)
    if report.get("exit_code") != code:
        audit.problems.append(
            f"exit_code: the report says {report.get('exit_code')!r}, its results give {code} "
            f"(fail_on {fail_on}{', ' + run.interrupted if run.interrupted else ''})"
        )
    stated: dict[str, Any] = report["summary"] if isinstance(report.get("summary"), dict) else {}
    seconds = stated.get("seconds")
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds < 0:
        audit.problems.append(f"summary.seconds: {seconds!r} is not a duration")
        seconds = 0.0
    summary = summarize(verdicts, expectations, float(seconds)).to_json()
    for key, value in summary.items():
        if key != "seconds" and stated.get(key) != value:
            audit.problems.append(f"summary.{key}: the report says {stated.get(key)!r}, its results give {value!r}")
    if not audit.problems:
        audit.checked.append(f"exit_code {code} and the summary recomputed from the results")


def _fail(item: Audited, problem: str) -> Audited:
    item.problems.append(problem)
    item.outcome = FAILED
    return item


def audit_exit_code(audit: Audit, strict: bool = False) -> int:
    """0 when everything checks (partial evidence counts as checked unless ``strict``), 1 otherwise."""
    bad = {FAILED, PARTIAL} if strict else {FAILED}
    return 1 if audit.problems or any(i.outcome in bad for i in audit.results) else 0

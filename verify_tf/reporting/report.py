"""Reports: what a run came to (``outcome``, the summary, the exit-code rule) and the JSON report. Pure functions
of verdicts; the terminal's verdict table is ``reporting.table``.

Every rule about statuses lives here: how ``expect:`` applies (``outcome``), which outcomes fail the run under
``--fail-on`` (``combined_exit_code``), how seriously each counts (``SERIOUSNESS``). The table, the JUnit report
and the summary ask these functions, never a status by name.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from ..verdict import (
    ERROR,
    EXIT_INPUT_ERROR,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    INPUT_ERROR,
    PROVED,
    REFUTED,
    SKIPPED,
    STATUSES,
    UNKNOWN,
    Verdict,
    exit_code,
)

# format 2 (issue 39): a result's `verdict` may be `skipped` (format 1 wrote such a property as `unknown`, method
# `not run`), `summary.counts` has a `skipped` count and `fail_on` may be `skipped`; readers accept both
REPORT_FORMAT = "verify-tf-report/2"
READABLE_FORMATS = ("verify-tf-report/1", REPORT_FORMAT)

# --fail-on: the weakest outcome that fails the run, weakest first
FAIL_ON = ("skipped", "unknown", "refuted")


@dataclass(frozen=True)
class RunSummary:
    """What a run came to: counts by verdict, and the verdicts that did not come out as their spec expects.

    A verdict is *as expected* when it counts as proved (``outcome``): proved with no ``expect:``, or the verdict
    ``expect:`` names. A skipped property (an optional package missing) is neither. Everything else is
    *unexpected*, listed errors first, then refutations, then unknowns.
    """

    counts: dict[str, int]  # by verdict status, every status present (0 included)
    as_expected: int
    unexpected: tuple[tuple[Verdict, str | None], ...]  # (verdict, its expect), most serious first
    specs: int
    seconds: float

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def line(self) -> str:
        """``122 properties in 81 specs, 412.3 s: 78 proved, 42 refuted, 2 unknown, 0 error; 118 as expected,
        4 unexpected`` (skipped properties are counted only where there are some: ``..., 0 error, 5 skipped; ...``;
        they are neither as expected nor unexpected)."""
        counts = ", ".join(f"{n} {status}" for status, n in self.counts.items() if n or status != SKIPPED)
        properties = f"{self.total} propert{'y' if self.total == 1 else 'ies'}"
        specs = f"{self.specs} spec{'' if self.specs == 1 else 's'}"
        return (
            f"{properties} in {specs}, {self.seconds:.1f} s: {counts}; "
            f"{self.as_expected} as expected, {len(self.unexpected)} unexpected"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "counts": dict(self.counts),
            "as_expected": self.as_expected,
            "unexpected": [{"spec": v.spec, "index": v.index, "property": v.property} for v, _ in self.unexpected],
            "seconds": round(self.seconds, 3),
        }


# how seriously an outcome counts: the unexpected verdicts are listed in this order (errors first)
SERIOUSNESS = {ERROR: 0, REFUTED: 1, UNKNOWN: 2, SKIPPED: 3, PROVED: 4}


def as_expected(verdict: Verdict, expect: str | None) -> bool:
    """Whether a verdict came out as its spec expects: it counts as proved (``outcome``)."""
    return outcome(verdict, expect) == PROVED


def summarize(verdicts: Sequence[Verdict], expectations: Sequence[str | None], seconds: float) -> RunSummary:
    counts = {status: 0 for status in STATUSES}
    for v in verdicts:
        counts[v.status] += 1
    pairs = list(zip(verdicts, expectations))
    unexpected = [(v, expect) for v, expect in pairs if outcome(v, expect) not in (PROVED, SKIPPED)]
    unexpected.sort(key=lambda pair: SERIOUSNESS[outcome(*pair)])  # stable: spec order within each kind
    return RunSummary(
        counts=counts,
        as_expected=sum(as_expected(v, expect) for v, expect in pairs),
        unexpected=tuple(unexpected),
        specs=len({v.spec for v in verdicts}),
        seconds=seconds,
    )


def describe_unexpected(verdict: Verdict, expect: str | None) -> str:
    """One line per unexpected verdict: ``spec: property: refuted (expected proved): detail``."""
    wanted = f" (expected {expect})" if expect is not None else ""
    spec = Path(verdict.spec).name if verdict.spec else ""
    return f"{spec}: {verdict.property}: {verdict.label}{wanted}: {verdict.detail}"


def describe_minimization(counterexample: dict[str, Any], statistics: dict[str, Any]) -> str:
    """How a ``--minimize`` witness was chosen, in words (the table says it too); empty when it was not."""
    if "minimal" in counterexample:  # the SMT engine: lexicographically smaller asserted until unsat
        order = counterexample.get("order", "the engine's order")
        proof = (
            "minimal: no smaller counterexample (unsat)"
            if counterexample["minimal"]
            else "not proved minimal (the time ran out)"
        )
        return f"{proof}; the order: {order}"
    search = statistics.get("minimisation")
    if isinstance(search, dict):  # a scan: every input before the first one found, in the property's order
        complete = "every one checked" if search.get("complete") else "not all checked before the time ran out"
        return (
            f"the least counterexample in the domain's order (the inputs before it, {search.get('space')}: {complete})"
        )
    return ""


def outcome(verdict: Verdict, expect: str | None) -> str:
    """The status a verdict counts as once its property's ``expect`` is applied.

    A verdict matching ``expect`` counts as proved; a definite verdict (proved/refuted) contradicting it counts
    as refuted; unknown and error keep their own status (an unmet expectation is not a contradiction), and so
    does a skipped property (it did not run: nothing was expected of it here).
    """
    if expect is None or verdict.status == SKIPPED:
        return verdict.status
    if verdict.status == expect:
        return PROVED
    if verdict.status in (PROVED, REFUTED):
        return REFUTED
    return verdict.status


def combined_exit_code(
    verdicts: Sequence[Verdict], expectations: Sequence[str | None], fail_on: str = "unknown"
) -> int:
    """Exit code over all verdicts: 0 all proved, 1 refuted, 3 unknown (nothing refuted), 4 error; 2 when the only
    errors are input errors (``error (input error)``: the user's mistake met at check time, ``Property.premise``),
    as for a mistake met at load: 4 beats 2 beats 1 beats 3 beats 0 (docs/cli.md, "Exit codes").

    Statuses are taken after ``expect`` (see ``outcome``). ``fail_on`` names the weakest outcome that fails
    the run: ``unknown`` (the default, the documented codes above: a skipped property passes), ``skipped``
    (a skipped property fails the run as an unknown one does: 3), or ``refuted``, under which neither an unknown
    verdict nor a skipped property fails the run (it exits 0 when nothing was refuted and nothing errored).
    """
    if fail_on not in FAIL_ON:
        raise ValueError(f"fail_on must be one of {FAIL_ON}")
    failing = FAIL_ON[FAIL_ON.index(fail_on) :]
    statuses = [outcome(v, expect) for v, expect in zip(verdicts, expectations)]
    statuses = [
        UNKNOWN if s == SKIPPED and SKIPPED in failing else PROVED if s == UNKNOWN and UNKNOWN not in failing else s
        for s in statuses
    ]
    code = exit_code([s for s, v in zip(statuses, verdicts) if not _input_error(v)])
    if code != EXIT_INTERNAL and any(_input_error(v) for v in verdicts):
        return EXIT_INPUT_ERROR
    return code


def _input_error(verdict: Verdict) -> bool:
    return verdict.status == ERROR and verdict.method == INPUT_ERROR


def json_report(
    verdicts: Sequence[Verdict],
    expectations: Sequence[str | None],
    fail_on: str = "unknown",
    seconds: float | None = None,
    folder: Path | None = None,
    interrupted: str | None = None,
    run: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON report (format ``verify-tf-report/2``, documented in docs/cli.md).

    Every result carries ``spec`` (as given), ``spec_resolved`` (absolute), ``spec_sha256`` and ``index`` (the
    property's position in the spec), so ``verify-tf explain`` can re-load the spec and replay a witness. A
    certificate's path is written relative to ``folder``, the report's own folder, where ``verify-tf audit``
    resolves it (so a report moved with its certificates still audits).
    ``summary`` is ``summarize``'s (``seconds``: the run's wall time; by default the properties' seconds added).
    ``interrupted``: the signal that stopped the run (``SIGINT``/``SIGTERM``): the report then says so and its
    exit code is the interrupt's (130/143), never a verdict's. ``run``: the command line's options that decide
    a verdict (``engine``, ``timeout``: None where each property's own apply), which ``verify-tf audit`` re-runs an
    unknown verdict under.
    """
    digests: dict[str, str | None] = {}
    results = []
    for v, expect in zip(verdicts, expectations):
        entry = v.to_json()
        certificate = entry["statistics"].get("certificate")
        if folder is not None and isinstance(certificate, dict) and certificate.get("path"):
            entry["statistics"]["certificate"] = {**certificate, "path": _relative(certificate["path"], folder)}
        entry["expect"] = expect
        entry["counts_as"] = outcome(v, expect)
        if v.spec:
            if v.spec not in digests:
                digests[v.spec] = _sha256(Path(v.spec))
            entry["spec_resolved"] = str(Path(v.spec).resolve())
            entry["spec_sha256"] = digests[v.spec]
        results.append(entry)
    return {
        "format": REPORT_FORMAT,
        "tool": "verify-tf",
        "version": __version__,
        "fail_on": fail_on,
        "run": {"engine": None, "timeout": None, **(run or {})},
        "exit_code": (
            EXIT_INTERRUPTED[getattr(signal, interrupted)]
            if interrupted
            else combined_exit_code(verdicts, expectations, fail_on)
        ),
        **({"interrupted": interrupted} if interrupted else {}),
        "summary": summarize(verdicts, expectations, _run_seconds(verdicts, seconds)).to_json(),
        "results": results,
    }


def _run_seconds(verdicts: Sequence[Verdict], seconds: float | None) -> float:
    return seconds if seconds is not None else sum(v.seconds for v in verdicts)


def _relative(path: str, folder: Path) -> str:
    try:
        return os.path.relpath(Path(path).resolve(), folder.resolve())
    except ValueError:  # another drive (Windows): keep it absolute
        return str(Path(path).resolve())


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def write_json(
    path: str | Path,
    verdicts: Sequence[Verdict],
    expectations: Sequence[str | None],
    fail_on: str = "unknown",
    seconds: float | None = None,
    interrupted: str | None = None,
    run: dict[str, Any] | None = None,
) -> None:
    report = json_report(verdicts, expectations, fail_on, seconds, Path(path).parent, interrupted, run)
    Path(path).write_text(json.dumps(report, indent=2, default=str) + "\n")

"""Reports: the verdict table (rich), the JSON report, and the exit-code rule. Pure functions of verdicts."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from .. import __version__
from ..verdict import PROVED, REFUTED, UNKNOWN, Verdict, exit_code

STYLE = {"proved": "green", "refuted": "red", "unknown": "yellow", "error": "bold magenta"}
REPORT_FORMAT = "verify-tf-report/1"


def verdict_table(verdicts: Sequence[Verdict], expectations: Sequence[str | None], title: str | None = None) -> Table:
    table = Table(title=title, show_lines=False, header_style="bold")
    table.add_column("spec", overflow="fold")
    table.add_column("property", overflow="fold")
    table.add_column("engine")
    table.add_column("verdict")
    table.add_column("seconds", justify="right")
    table.add_column("detail", overflow="fold", ratio=1)
    for v, expect in zip(verdicts, expectations):
        label = f"[{STYLE[v.status]}]{v.label}[/]"
        if expect is not None:
            label += " [dim](as expected)[/]" if v.status == expect else f" [bold red](expected {expect})[/]"
        if v.cached:
            label += " [dim](cached)[/]"
        table.add_row(Path(v.spec).name if v.spec else "", v.property, v.engine, label, f"{v.seconds:.2f}", v.detail)
    return table


FAIL_ON = ("unknown", "refuted")


def outcome(verdict: Verdict, expect: str | None) -> str:
    """The status a verdict counts as once its property's ``expect`` is applied.

    A verdict matching ``expect`` counts as proved; a definite verdict (proved/refuted) contradicting it counts
    as refuted; unknown and error keep their own status (an unmet expectation is not a contradiction).
    """
    if expect is None:
        return verdict.status
    if verdict.status == expect:
        return PROVED
    if verdict.status in (PROVED, REFUTED):
        return REFUTED
    return verdict.status


def combined_exit_code(
    verdicts: Sequence[Verdict], expectations: Sequence[str | None], fail_on: str = "unknown"
) -> int:
    """Exit code over all verdicts: 0 all proved, 1 refuted, 3 unknown (nothing refuted), 4 error.

    Statuses are taken after ``expect`` (see ``outcome``). ``fail_on`` names the weakest outcome that fails
    the run: ``unknown`` (the default, the documented codes above) or ``refuted``, under which an unknown
    verdict no longer fails the run (it exits 0 when nothing was refuted and nothing errored).
    """
    if fail_on not in FAIL_ON:
        raise ValueError(f"fail_on must be one of {FAIL_ON}")
    statuses = [outcome(v, expect) for v, expect in zip(verdicts, expectations)]
    if fail_on == "refuted":
        statuses = [PROVED if s == UNKNOWN else s for s in statuses]
    return exit_code(statuses)


def json_report(
    verdicts: Sequence[Verdict], expectations: Sequence[str | None], fail_on: str = "unknown"
) -> dict[str, Any]:
    """The JSON report (format ``verify-tf-report/1``, documented in docs/cli.md).

    Every result carries ``spec`` (as given), ``spec_resolved`` (absolute), ``spec_sha256`` and ``index`` (the
    property's position in the spec), so ``verify-tf explain`` can re-load the spec and replay a witness.
    """
    digests: dict[str, str | None] = {}
    results = []
    for v, expect in zip(verdicts, expectations):
        entry = v.to_json()
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
        "exit_code": combined_exit_code(verdicts, expectations, fail_on),
        "results": results,
    }


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def write_json(
    path: str | Path, verdicts: Sequence[Verdict], expectations: Sequence[str | None], fail_on: str = "unknown"
) -> None:
    Path(path).write_text(json.dumps(json_report(verdicts, expectations, fail_on), indent=2, default=str) + "\n")

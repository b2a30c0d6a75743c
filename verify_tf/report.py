"""Reports: the verdict table (rich), the JSON report, and the exit-code rule. Pure functions of verdicts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from rich.table import Table

from . import __version__
from .verdict import PROVED, REFUTED, Verdict, exit_code

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
        table.add_row(Path(v.spec).name if v.spec else "", v.property, v.engine, label, f"{v.seconds:.2f}",
                      v.detail)
    return table


def combined_exit_code(verdicts: Sequence[Verdict], expectations: Sequence[str | None]) -> int:
    """Exit code over all verdicts; a verdict matching its property's ``expect`` counts as proved.

    A definite verdict (proved/refuted) contradicting the expectation counts as refuted (exit 1);
    unknown and error keep their own codes.
    """
    statuses = []
    for v, expect in zip(verdicts, expectations):
        if expect is None:
            statuses.append(v.status)
        elif v.status == expect:
            statuses.append(PROVED)
        elif v.status in (PROVED, REFUTED):
            statuses.append(REFUTED)
        else:
            statuses.append(v.status)
    return exit_code(statuses)


def json_report(verdicts: Sequence[Verdict], expectations: Sequence[str | None]) -> dict[str, Any]:
    results = []
    for v, expect in zip(verdicts, expectations):
        entry = v.to_json()
        entry["expect"] = expect
        results.append(entry)
    return {"format": REPORT_FORMAT, "tool": "verify-tf", "version": __version__,
            "exit_code": combined_exit_code(verdicts, expectations), "results": results}


def write_json(path: str | Path, verdicts: Sequence[Verdict], expectations: Sequence[str | None]) -> None:
    Path(path).write_text(json.dumps(json_report(verdicts, expectations), indent=2, default=str) + "\n")

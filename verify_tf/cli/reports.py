"""The commands that read a JSON report of ``check``: ``audit`` (re-check it offline) and ``explain`` (replay
its counterexamples), and the counterexample display they share with ``check --explain``/``--html``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.markup import escape

from ..work import MAX_TIMEOUT
from . import output
from .interrupts import Interrupts


def show_explained(explained, print_traces: bool, html_path: Path | None, source: str) -> None:
    """Print the explained counterexamples' traces and/or write them as a self-contained HTML report."""
    from ..explain import print_explained, write_html

    if print_traces:
        if not explained:
            output.console.print("no refuted property: nothing to explain")
        else:
            unexpected = sum(item.unexpected for item in explained)
            output.console.print(
                f"{len(explained)} counterexample(s): {unexpected} unexpected (shown first), "
                f"{len(explained) - unexpected} as expected",
                highlight=False,
            )
        for item in explained:
            print_explained(output.console, item)
    if html_path is not None:
        html_path.parent.mkdir(parents=True, exist_ok=True)
        write_html(html_path, explained, source)
        output.err_console.print(  # one line: a path is never broken
            f"wrote {html_path} ({len(explained)} counterexample(s))", highlight=False, markup=False, soft_wrap=True
        )


@click.command()
@click.argument("report_path", metavar="REPORT", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True, max=MAX_TIMEOUT),
    default=600.0,
    show_default=True,
    help="Seconds per result for re-checking it (a certificate, or the re-run of an unknown verdict).",
)
@click.option("--strict", is_flag=True, help="Partial evidence (e.g. an LRAT proof over budget) fails too.")
def audit(report_path, timeout, strict) -> None:
    """Re-check a JSON report offline against its specs: every property exactly once, every verdict re-derived
    (a proof by its certificate, a refutation by replaying its counterexample, an unknown by re-running the
    check within its budget), and expect, counts_as, the reading, fail_on, exit_code and the summary recomputed.

    Exit codes: 0 everything checks (with --strict: and no evidence is partial), 1 something failed (named, with
    the field), 2 the report cannot be read.
    """
    from ..reporting.audit import FAILED, PARTIAL, AuditError, audit_exit_code, audit_report

    # SIGINT/SIGTERM exit at once (130/143): audit writes nothing, and its re-checks (z3, cvc5) stop with it
    with Interrupts() as interrupts, interrupts.exiting_at_once("auditing: nothing is written"):
        try:
            audit = audit_report(report_path, timeout)
        except AuditError as exc:
            output.fail_input(str(exc))
    style = {"ok": "green", PARTIAL: "yellow", FAILED: "bold red"}
    items = audit.results
    for item in items:  # every text from the report or a check is escaped: "pip install 'verify-tf[certify]'"
        cached = " (cached)" if item.cached else ""
        output.console.print(
            f"[{style[item.outcome]}]{item.outcome}[/] "
            + escape(f"{Path(item.spec).name}: {item.property} ({item.verdict}{cached})"),
            highlight=False,
        )
        for line in item.checked:
            output.console.print(f"    checked: {escape(line)}", highlight=False)
        for line in item.partial:
            output.console.print(f"    [yellow]partial:[/] {escape(line)}", highlight=False)
        for line in item.problems:
            output.console.print(f"    [red]FAILED:[/] {escape(line)}", highlight=False)
    whole = FAILED if audit.problems else "ok"
    output.console.print(
        f"[{style[whole]}]{whole}[/] " + escape(f"the report as a whole ({', '.join(audit.specs) or 'no spec'})"),
        highlight=False,
    )
    for line in audit.checked:
        output.console.print(f"    checked: {escape(line)}", highlight=False)
    for line in audit.problems:
        output.console.print(f"    [red]FAILED:[/] {escape(line)}", highlight=False)
    failed = sum(i.outcome == FAILED for i in items)
    partial = sum(i.outcome == PARTIAL for i in items)
    output.console.print(
        f"{len(items)} results: {len(items) - failed - partial} ok, {partial} partial, {failed} failed; "
        f"the report: {whole}",
        highlight=False,
    )
    sys.exit(audit_exit_code(audit, strict))


@click.command()
@click.argument("report_path", metavar="REPORT", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write a self-contained HTML report with attention heatmaps instead of printing the traces.",
)
@click.option("--print", "also_print", is_flag=True, help="With --html: print the traces too.")
@click.option("--property", "only", multiple=True, help="Only these properties (by name; repeatable).")
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors.")
def explain(report_path, html_path, also_print, only, quiet) -> None:
    """Replay each refuted property's witness from a JSON REPORT and explain it: the answer first (the inputs, the
    colliding or failing values, where the inputs first differ), then the layer-by-layer traces.

    The report is the one written by `verify-tf check --json`; its results name the spec and the
    property's index, so the spec is re-loaded and the witness inputs are re-evaluated on the interpreter.
    With --html only the page is written (add --print for the terminal's explanation too).
    """
    from ..explain import ExplainError, explain_report

    try:
        explained = explain_report(report_path, only=set(only) or None)
    except ExplainError as exc:
        output.fail_input(str(exc))
    print_traces = not quiet and (html_path is None or also_print)
    show_explained(explained, print_traces=print_traces, html_path=html_path, source=str(report_path))

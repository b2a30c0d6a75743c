"""Output that says what matters (issue 27): the run summary, expected refutations told apart from unexpected
ones (unexpected first, in the terminal and in HTML), differences marked without colour, and every user string
printed as written (rich markup never eats `[t_l, t_r]`)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from rich.console import Console

from test_explain import POSITIONS
from verify_tf.cli import main
from verify_tf.explain import explain_report, print_explained, render_html
from verify_tf.reporting.report import describe_unexpected, summarize
from verify_tf.reporting.table import VerdictTable
from verify_tf.verdict import Verdict

# Two copies of one refuted property (test_explain's model: permutation-equivariance fails once positions are
# encoded, hand-checked there): the first expects its refutation, the second does not. Labels carry rich markup.
SPEC = POSITIONS.split("properties:")[0] + (
    "properties:\n"
    '  - permutation-equivariance: {engine: interpret, expect: refuted, name: "known [bold]gap[/bold]"}\n'
    '  - permutation-equivariance: {engine: interpret, name: "claim (4): q(L) outside [t_l, t_r]"}\n'
)
EXPECTED_LABEL = "known [bold]gap[/bold]"
UNEXPECTED_LABEL = "claim (4): q(L) outside [t_l, t_r]"


@pytest.fixture
def report(tmp_path):
    spec = tmp_path / "two.yaml"
    spec.write_text(SPEC)
    path = tmp_path / "report.json"
    result = CliRunner().invoke(main, ["check", "--no-cache", "-q", str(spec), "--json", str(path)])
    assert result.exit_code == 1  # the unexpected refutation fails the run
    return path


def verdict(status, name, expect=None, **extra):
    if status == "refuted":
        extra.setdefault("counterexample", {"summary": "X = [0]"})
    return Verdict(name, status, "interpret", spec="specs/s.yaml", **extra), expect


def test_the_summary_counts_by_verdict_and_lists_the_unexpected_most_serious_first():
    pairs = [
        verdict("proved", "a"),
        verdict("refuted", "b", "refuted"),  # as expected
        verdict("unknown", "c", detail="timeout"),  # unexpected: it fails the run by default
        verdict("refuted", "d", "proved", detail="X = [1]"),  # unexpected: contradicts expect
        verdict("unknown", "e", "unknown"),  # as expected
        verdict("error", "f", detail="engine bug"),
        verdict("proved", "g", "refuted"),  # unexpected: a proof where a refutation was expected
    ]
    summary = summarize([v for v, _ in pairs], [e for _, e in pairs], seconds=12.345)
    assert summary.counts == {"proved": 2, "refuted": 2, "unknown": 2, "error": 1, "skipped": 0}
    assert summary.as_expected == 3
    assert [v.property for v, _ in summary.unexpected] == ["f", "d", "g", "c"]  # error, refuted x2, unknown
    assert summary.line() == (
        "7 properties in 1 spec, 12.3 s: 2 proved, 2 refuted, 2 unknown, 1 error; 3 as expected, 4 unexpected"
    )
    assert describe_unexpected(*pairs[3]) == "s.yaml: d: refuted (expected proved): X = [1]"
    assert summary.to_json()["unexpected"][0] == {"spec": "specs/s.yaml", "index": 0, "property": "f"}


def test_explain_puts_unexpected_refutations_first_and_marks_both_kinds(report):
    items = explain_report(report)
    assert [(i.property, i.unexpected) for i in items] == [(UNEXPECTED_LABEL, True), (EXPECTED_LABEL, False)]
    page = render_html(items)
    assert "2 refuted properties: 1 unexpected, 1 as expected" in page
    assert page.index("<h3>Unexpected") < page.index("<h3>As expected")
    assert page.index('badge unexpected">unexpected') < page.index('badge expected">as expected')
    assert "outside [t_l, t_r]" in page and "known [bold]gap[/bold]" in page  # HTML-escaped, not markup


def render(item, colour: bool) -> str:
    console = Console(record=True, width=200, force_terminal=colour, color_system="standard" if colour else None)
    print_explained(console, item)
    return console.export_text()


def test_the_terminal_marks_expected_apart_and_differences_without_colour(report):
    unexpected, expected = explain_report(report)
    plain = render(unexpected, colour=False)
    assert f"{UNEXPECTED_LABEL} — refuted (unexpected)" in plain  # the label as written: markup escaped
    assert f"{EXPECTED_LABEL} — refuted (as expected)" in render(expected, colour=False)
    # f(X) = [1, 7] and f(τX) = [4, 4] at the readout (hand computation, tests/test_explain.py): without colour
    # every differing value carries the symbol, and the tables say so
    assert "a value that differs from X's aligned value is marked *" in " ".join(plain.split())
    assert "[4*]" in plain and "[1]" in plain
    coloured = render(unexpected, colour=True)
    assert "in red" in " ".join(coloured.split()) and "[4*]" not in coloured


def test_the_verdict_table_prints_labels_and_details_as_written():
    rows = [
        Verdict(UNEXPECTED_LABEL, "unknown", "smt", detail="hint: pip install 'verify-tf[certify]'"),
        Verdict("[red]x[/red]", "proved", "enumerate", method="exhaustive", detail="all [lo, hi] fine"),
    ]
    console = Console(record=True, width=250)
    console.print(VerdictTable(rows, [None, "proved"]))
    text = console.export_text()
    assert UNEXPECTED_LABEL in text and "pip install 'verify-tf[certify]'" in text
    assert " ✓ [red]x[/red] " in text and "all [lo, hi] fine" in text


def test_the_json_report_has_the_summary(report):
    data = json.loads(report.read_text())
    assert data["summary"]["counts"] == {"proved": 0, "refuted": 2, "unknown": 0, "error": 0, "skipped": 0}
    assert data["summary"]["as_expected"] == 1
    assert [u["property"] for u in data["summary"]["unexpected"]] == [UNEXPECTED_LABEL]


def run_cli(*args: str, env: dict | None = None):
    return CliRunner(env={"COLUMNS": "250", **(env or {})}).invoke(main, list(args))


def test_a_run_ends_with_its_summary_the_unexpected_listed_first(tmp_path):
    spec = tmp_path / "two.yaml"
    spec.write_text(SPEC)
    result = run_cli("check", "--no-cache", str(spec), "specs/equivariance-standard-hardmax.yaml")
    assert result.exit_code == 1
    lines = result.stdout.rstrip().splitlines()
    assert lines[-3:-1] == [
        "unexpected (1):",
        f"  two.yaml: {UNEXPECTED_LABEL}: refuted (exhaustive): X = [0, 1], swap positions 0,1: at position 0 "
        "f(τX) = [4] but τf(X) = [7]",
    ]
    assert lines[-1].startswith("summary: 3 properties in 2 specs, ")
    assert lines[-1].endswith(" s: 1 proved, 2 refuted, 0 unknown, 0 error; 2 as expected, 1 unexpected")
    assert "claim (4): q(L) outside [t_l, t_r]" in result.stdout  # the table prints the label as written
    assert "known [bold]gap[/bold]" in result.stdout


def test_notes_are_one_line_for_the_run_unless_verbose():
    """Issue 39: 26 tracr specs printed 26 lines of notes; now one line for the whole run, every note with -v."""
    spec = "specs/tracr-negative-map.yaml"  # four import notes (model, snap, reading, decoding)
    folded = run_cli("check", "--no-cache", spec, "specs/tracr-length.yaml", "specs/crasp-L1.yaml")
    assert folded.exit_code == 0, folded.output
    assert folded.stderr.splitlines() == [
        "8 model notes (2 specs): how the models were imported and are read; -v prints them"
    ]
    alone = run_cli("check", "--no-cache", spec)
    assert alone.stderr.splitlines() == [
        "4 model notes (tracr-negative-map.yaml): how the models were imported and are read; -v prints them"
    ]
    verbose = run_cli("check", "--no-cache", "-v", spec)
    every = [line for line in verbose.stderr.splitlines() if line.startswith("tracr-negative-map.yaml:")]
    assert len(every) == 4 and any("reading: hardmax" in line for line in every)


def test_properties_and_audit_print_brackets_as_written(monkeypatch, tmp_path):
    listed = run_cli("properties")
    assert "[lo, hi]" in listed.stdout  # value-range's summary: "every readout value inside (or outside) [lo, hi]"

    from verify_tf.reporting import audit as audit_module

    item = SimpleNamespace(
        outcome="partial",
        spec="specs/[x].yaml",
        property="p [q]",
        verdict="proved",
        cached=False,
        checked=["sample: 64 inputs [0, 63]"],
        partial=["cvc5: not run: cvc5 not installed (pip install 'verify-tf[certify]')"],
        problems=[],
    )
    checked = ["[y].yaml: each of its 1 properties has exactly one result"]
    whole = audit_module.Audit([item], checked=checked)  # type: ignore[list-item]
    monkeypatch.setattr(audit_module, "audit_report", lambda path, timeout: whole)
    audited = run_cli("audit", str(tmp_path / "report.json"))
    assert "partial [x].yaml: p [q] (proved)" in audited.stdout
    assert "pip install 'verify-tf[certify]'" in audited.stdout and "[0, 63]" in audited.stdout
    assert "checked: [y].yaml: each of its 1 properties" in audited.stdout  # the report's own checks, escaped too


def test_certify_without_the_certify_extra_is_an_input_error_unless_partial(monkeypatch, tmp_path):
    import verify_tf.certify as certify

    monkeypatch.setattr(certify, "missing_packages", lambda: ["cvc5", "python-sat"])
    spec = "specs/equivariance-standard-hardmax.yaml"
    refused = run_cli("check", "--no-cache", spec, "--certify", str(tmp_path / "certs"))
    assert refused.exit_code == 2
    assert "--certify needs the certify extra: cvc5 and python-sat are not installed" in refused.stderr
    assert "pip install 'verify-tf[certify]'" in refused.stderr and "--certify-partial" in refused.stderr
    partial = run_cli(
        "check",
        "--no-cache",
        spec,
        "--certify",
        str(tmp_path / "certs"),
        "--certify-partial",
        env={"VERIFY_TF_PROGRESS_SECONDS": "60"},
    )
    assert partial.exit_code == 0, partial.output
    # certification says so as it starts (a log line at once, not only with the next heartbeat)
    assert "permutation-equivariance: certifying (cvc5 / LRAT / sample)" in partial.stderr


def test_certification_has_a_bar_of_its_own(monkeypatch):
    from verify_tf.cli import output
    from verify_tf.cli.progress import ProgressDisplay
    from verify_tf.engines.base import ProgressEvent

    monkeypatch.setattr(output, "err_console", Console(record=True, width=200, force_terminal=True))
    display = ProgressDisplay("s.yaml: p [x]", "bar")
    display.start -= 2  # past the first second, when bars appear
    display(ProgressEvent("smt", "smt: length 3: unsat", 1, 1, "queries"))
    display(ProgressEvent("certify", "certifying (cvc5 / LRAT / sample)", 0, 2, "queries"))
    tasks = display.progress.tasks
    assert [t.description for t in tasks] == [
        "s.yaml: p \\[x]: smt: length 3: unsat",
        "s.yaml: p \\[x]: certifying (cvc5 / LRAT / sample)",
    ]  # escaped: rich shows "p [x]"
    assert (tasks[1].completed, tasks[1].total) == (0, 2)
    display.close()

"""Output that says what matters (issue 27): the run summary, expected refutations told apart from unexpected
ones (unexpected first, in the terminal and in HTML), differences marked without colour, and every user string
printed as written (rich markup never eats `[t_l, t_r]`)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from rich.console import Console

from verify_tf.cli import main
from verify_tf.explain import explain_report, print_explained, render_html
from verify_tf.report import describe_unexpected, summarize, verdict_table
from verify_tf.verdict import Verdict

# Two copies of one refuted property (permutation-equivariance fails once positions are encoded, hand-checked in
# tests/test_explain.py): the first expects its refutation, the second does not. Labels carry rich markup.
SPEC = """
model:
  tokens: {grid: 1}
  positional-encoding: [[0], [1]]
  layers:
    - attention:
        heads:
          - {scoring: uniform, query: [[0]], key: [[0]], value: [[1]], output: [[1]]}
      feed-forward: {w1: [[1]], b1: [-1], w2: [[2]], b2: [0]}
  readout: [1]
arithmetic: exact
domain:
  grid: {values: [0, 1]}
  length: 2
  distinct-tokens: true
properties:
  - permutation-equivariance: {engine: interpret, expect: refuted, name: "known [bold]gap[/bold]"}
  - permutation-equivariance: {engine: interpret, name: "claim (4): q(L) outside [t_l, t_r]"}
"""
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
    assert summary.counts == {"proved": 2, "refuted": 2, "unknown": 2, "error": 1}
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
    assert "values that differ from input marked *" in " ".join(plain.split())  # titles wrap
    assert "[4*]" in plain and "[1]" in plain
    coloured = render(unexpected, colour=True)
    assert "in red" in " ".join(coloured.split()) and "[4*]" not in coloured


def test_the_verdict_table_prints_labels_and_details_as_written():
    rows = [
        Verdict(UNEXPECTED_LABEL, "unknown", "smt", detail="hint: pip install 'verify-tf[certify]'"),
        Verdict("[red]x[/red]", "proved", "enumerate", method="exhaustive", detail="all [lo, hi] fine"),
    ]
    console = Console(record=True, width=250)
    console.print(verdict_table(rows, [None, "proved"]))
    text = console.export_text()
    assert UNEXPECTED_LABEL in text and "pip install 'verify-tf[certify]'" in text
    assert "[red]x[/red]" in text and "all [lo, hi] fine" in text and "(as expected)" in text


def test_the_json_report_has_the_summary(report):
    data = json.loads(report.read_text())
    assert data["summary"]["counts"] == {"proved": 0, "refuted": 2, "unknown": 0, "error": 0}
    assert data["summary"]["as_expected"] == 1
    assert [u["property"] for u in data["summary"]["unexpected"]] == [UNEXPECTED_LABEL]

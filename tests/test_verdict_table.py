"""The verdict table at 80 and 120 columns (issue 39): one verdict word and its method per row, the expectation as a
mark, the reading and the detail on lines of their own, words never cut ("…") nor broken, every line within the
width; the JSON keeps every word complete.

The verdicts are real: ``tests/data/verdict-table-sample.json`` holds one result per (verdict, method, reading)
of the shipped specs (27 kinds, the longest detail of each, written by ``verify-tf check specs/*.yaml --json``).
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.cells import cell_len
from rich.console import Console

from verify_tf.cli import main
from verify_tf.reporting.report import json_report
from verify_tf.reporting.table import VerdictTable, phrase_lines, seconds_text
from verify_tf.verdict import Verdict

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = json.loads((ROOT / "tests" / "data" / "verdict-table-sample.json").read_text(encoding="utf-8"))


def sample() -> tuple[list[Verdict], list[str | None]]:
    fields = {"expect"}
    verdicts = [Verdict.from_json({k: v for k, v in r.items() if k not in fields}) for r in SAMPLE["results"]]
    return verdicts, [r.get("expect") for r in SAMPLE["results"]]


def render(verdicts, expectations, width: int, verbose: bool = False) -> str:
    console = Console(width=width, record=True, color_system=None, file=io.StringIO())
    console.print(VerdictTable(verdicts, expectations, verbose))
    return console.export_text()


@pytest.mark.parametrize("width", [80, 120])
def test_every_line_fits_and_no_word_is_cut_or_broken(width):
    verdicts, expectations = sample()
    text = render(verdicts, expectations, width, verbose=True)
    lines = text.splitlines()
    assert "…" not in text
    assert max(cell_len(line) for line in lines) <= width
    assert all(line == line.rstrip() for line in lines)  # no padding after the last word (logs, diffs)
    words = set(text.split())
    for v in verdicts:  # every word of a property, its detail and its reading is printed whole
        for said in (v.property, v.detail, v.stated_reading, v.method):
            missing = [w for w in said.split() if w not in words]
            assert not missing, (v.property, missing)
    # one block per spec: its path alone on a line, as given
    for spec in {v.spec for v in verdicts}:
        assert spec in lines


def test_a_row_is_mark_property_verdict_word_method_and_time():
    verdicts, expectations = sample()
    lines = render(verdicts, expectations, 80).splitlines()
    rows = [line for line in lines if line.startswith(" ✓ ") or line.startswith(" ✗ ")]
    assert len(rows) == len(verdicts)  # every property of the sample is as expected: ✓, one row each
    for row, v in zip(rows, verdicts):
        assert row.startswith(" ✓ ")
        assert re.search(rf"\b{v.status}\b", row), row
        assert row.endswith(seconds_text(v.seconds))
    # the verdict words stand in one column, whatever the property's length
    columns = {row.index(v.status) for row, v in zip(rows, verdicts) if len(v.property) <= 30}
    assert len(columns) == 1


def test_the_reading_stands_under_its_row_and_says_not_as_run():
    verdicts, expectations = sample()
    lines = render(verdicts, expectations, 80).splitlines()
    hardmax = next(v for v in verdicts if v.as_run is False and "hardmax" in v.reading)
    row = lines.index(hardmax.spec) + 1
    # the sample's first hardmax tracr result: its reading is the line under its row (before the detail)
    assert lines[row].startswith(" ✓ rasp-equivalence ")
    assert lines[row + 1].strip().startswith("reading: hardmax, tracr's intended computation")
    assert "NOT the model as run" in " ".join(lines[row + 1 : row + 3])


def test_the_same_reading_twice_in_a_spec_says_as_above():
    quantization = {"largest_error_float": 0.00195295, "largest_error_at": "readout[0][3]"}
    rows = [
        Verdict(name, "proved", "enumerate", method="exhaustive", detail="d", spec="s.yaml", reading="fixed point")
        for name in ("a", "b")
    ]
    for row in rows:
        row.as_run, row.quantization = False, quantization
    text = " ".join(render(rows, [None, None], 80).split())
    assert "reading: fixed point, NOT the model as run; weights rounded by at most 0.00195 (at readout[0][3])" in text
    assert "reading: as above, NOT the model as run" in text


def test_marks_for_unexpected_skipped_cached_and_interrupted():
    rows = [
        Verdict("p", "proved", "smt", method="smt", detail="holds", spec="s.yaml"),
        Verdict("q", "proved", "smt", method="smt", detail="holds", spec="s.yaml"),
        Verdict("r", "unknown", "smt", method="interrupted", detail="interrupted (SIGINT) before it finished"),
        Verdict("s", "skipped", "none", method="needs torch", detail="a torch state dict needs PyTorch; install it"),
        Verdict("t", "proved", "enumerate", method="exhaustive", detail="all 4 inputs", cached=True),
    ]
    for row in rows[2:]:
        row.spec = "t.yaml"
    rows[4].statistics["cached_check_seconds"] = 1.5
    text = render(rows, [None, "refuted", None, "proved", None], 80, verbose=True)
    lines = text.splitlines()
    assert lines[1].startswith(" ✓ p ") and lines[1].endswith(" s")
    assert lines[4].startswith(" ✗ q ")  # a proof where the spec expects a refutation
    assert lines[5].strip() == "expected refuted"
    row_r = next(line for line in lines if line.startswith(" ✗ r "))
    assert "unknown interrupted" in " ".join(row_r.split())
    row_s = next(line for line in lines if line.startswith(" – s "))
    assert "skipped needs torch" in " ".join(row_s.split())
    assert "install it" not in text  # the install hint is said once, after the table (cli.check.print_skipped)
    row_t = next(line for line in lines if line.startswith(" ✓ t "))
    assert row_t.endswith("cached")
    assert "engine: enumerate (served from the proof cache; the check took 1.5 s)" in text
    # a console that cannot print ✓ (not UTF-8) gets ASCII marks
    console = Console(width=80, color_system=None, file=io.StringIO())
    ascii_only = console.options.copy()
    ascii_only.encoding = "ascii"  # what rich sets for a stream that is not UTF-8
    rendered = "".join(seg.text for seg in console.render(VerdictTable(rows[:2], [None, "refuted"]), ascii_only))
    assert " + p " in rendered and " x q " in rendered and "✓" not in rendered


def test_a_table_whose_verdicts_have_no_method_prints():
    """Found importing the shipped GPT-2 and checking the starter spec (`verify-tf import
    examples/checkpoints/gpt2-majority -o s.yaml --readout-token a`, 510 strings): its one verdict, unknown with no
    method (the enclosure too wide at aaabb), made the method column 0 wide and the table a traceback
    (textwrap's "invalid width 0")."""
    row = Verdict("readout range", "unknown", "enumerate", detail="too wide to decide", spec="s.yaml")
    assert row.method == ""
    lines = render([row], [None], 80).splitlines()
    assert lines[0] == "s.yaml"
    assert lines[1].startswith(" ✗ readout range ") and lines[1].split()[-3:] == ["unknown", "0.00", "s"]
    assert lines[2] == "     too wide to decide"


def test_the_json_keeps_every_word():
    verdicts, expectations = sample()
    report = json_report(verdicts, expectations)
    for entry, original in zip(report["results"], SAMPLE["results"]):
        assert entry["detail"] == original["detail"] and entry["method"] == original["method"]
        assert entry.get("reading", "") == original.get("reading", "")


def test_summary_lines_break_after_commas_only():
    text = (
        "summary: 5 properties in 3 specs, 2.6 s: 4 proved, 1 refuted, 0 unknown, 0 error; 5 as expected, 0 unexpected"
    )
    assert phrase_lines(text, 80) == [
        "summary: 5 properties in 3 specs, 2.6 s: 4 proved, 1 refuted, 0 unknown,",
        "  0 error; 5 as expected, 0 unexpected",
    ]
    assert phrase_lines(text, 200) == [text]


def test_the_issue_39_run_fits_in_45_lines_of_80_columns(tmp_path):
    """Issue 39's must-show: `check specs/crasp-L1.yaml specs/yun-lemma6-claim4-as-recalled.yaml
    specs/luo-rope-blind.yaml` at 80 columns printed 104 lines with cut cells before; now no "…", at most 45 lines."""
    specs = ["specs/crasp-L1.yaml", "specs/yun-lemma6-claim4-as-recalled.yaml", "specs/luo-rope-blind.yaml"]
    result = CliRunner(env={"COLUMNS": "80"}).invoke(main, ["check", "--no-cache", *specs])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "…" not in result.output and len(lines) <= 45
    assert max(cell_len(line) for line in lines) <= 80
    assert lines[0] == "specs/crasp-L1.yaml" and lines[-1].endswith("5 as expected, 0 unexpected")

"""The counterexample explorer: witness convention, replay on the interpreter, aligned differences, collisions,
terminal and HTML rendering, robustness to moved/changed specs and foreign witnesses."""

import json
from fractions import Fraction as F

import pytest
from click.testing import CliRunner

from verify_tf.cli import main
from verify_tf.explain import ExplainError, explain_report, explain_verdict, render_html, roles_of
from verify_tf.explain.replay import differing_cells, differing_weights, focus_collision, stages, trace_alignment
from verify_tf.semantics import evaluate
from verify_tf.spec import load_spec
from verify_tf.verdict import Verdict

POSITIONS = """
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
  distinct-tokens: true   # the first witness is then X = [0, 1], two different inputs to align
properties:
  - permutation-equivariance: {engine: interpret}   # pinned: witness order differs between engines
"""

UNIFORM = """
model:
  tokens: {grid: 1}
  layers:
    - attention:
        heads:
          - {scoring: uniform, query: [[0]], key: [[0]], value: [[1]], output: [[1]]}
  readout: [1]
arithmetic: exact
domain:
  grid: {step: 1/2}
  length: 2
properties:
  - permutation-equivariance: {}
"""


def test_roles_convention():
    roles = roles_of({"input": [["0"]], "other_input": [["1"]], "permuted_input": [["2"]], "summary": "s"})
    assert roles.names == ["input", "other_input", "permuted_input"]
    explicit = roles_of({"inputs": {"left": "ab", "right": "ba"}, "positions": [0, 1]})
    assert explicit.names == ["left", "right"] and explicit.inputs == ["ab", "ba"]
    assert explicit.focus == {"left": 0, "right": 1}
    swapped = roles_of(
        {
            "input": [["0"], ["1"], ["2"]],
            "permuted_input": [["1"], ["0"], ["2"]],
            "transposition": [0, 1],
            "position": 0,
        }
    )
    assert swapped.alignment == {"permuted_input": [1, 0, 2]}
    assert swapped.focus == {"input": 1, "permuted_input": 0}  # f(τX) at 0 against f(X) at τ(0) = 1
    assert roles_of({"summary": "no inputs here"}).names == []


@pytest.fixture
def refuted_report(tmp_path):
    spec = tmp_path / "positions.yaml"
    spec.write_text(POSITIONS)
    report = tmp_path / "report.json"
    result = CliRunner().invoke(main, ["check", "--no-cache", str(spec), "--json", str(report)])
    assert result.exit_code == 1
    return spec, report


def test_replay_and_aligned_differences(refuted_report):
    spec_path, report = refuted_report
    [item] = explain_report(report)
    assert item.summary == "X = [0, 1], swap positions 0,1: at position 0 f(τX) = [4] but τf(X) = [7]"
    first, second = item.roles
    spec = load_spec(spec_path)
    assert first.trace == evaluate(spec.model, spec.arithmetic, ((F(0),), (F(1),)))
    assert [q for q in first.trace.readout] == [1, 7] and [q for q in second.trace.readout] == [4, 4]
    mapping = trace_alignment(second, first)
    assert mapping == {0: 1, 1: 0}
    readout_first, readout_second = stages(first.trace)[-1][1], stages(second.trace)[-1][1]
    assert differing_cells(readout_first, readout_second, mapping) == {(0, 0), (1, 0)}
    weights = [t.blocks[0].heads[0].weights for t in (first.trace, second.trace)]
    assert differing_weights(weights[0], weights[1], mapping) == set()  # uniform attention: all 1/2
    assert second.focus == 0 and first.focus == 1
    assert not item.notes


def test_collision_between_two_inputs(tmp_path):
    spec_path = tmp_path / "uniform.yaml"
    spec_path.write_text(UNIFORM)
    spec = load_spec(spec_path)
    witness = {
        "input": [["0"], ["1/2"]],
        "other_input": [["1/2"], ["0"]],
        "positions": [0, 1],
        "summary": "q(L)_0 = q(L')_1",
    }
    item = explain_verdict(spec, Verdict("made-up", "refuted", "interpret", counterexample=witness))
    assert focus_collision(item.roles)
    assert [r.trace.readout for r in item.roles] == [[F(1, 4), F(3, 4)], [F(3, 4), F(1, 4)]]
    page = render_html([item])
    assert page.count('<span class="collision">[') == 2  # q(L)_0 and q(L')_1


def test_cli_explain_prints_traces_and_writes_html(refuted_report, tmp_path):
    _, report = refuted_report
    html = tmp_path / "cx.html"
    result = CliRunner(env={"COLUMNS": "200"}).invoke(main, ["explain", str(report), "--html", str(html)])
    assert result.exit_code == 0, result.output
    assert "X = [0, 1], swap positions 0,1" in result.output
    assert "layer 0 head 0:" in result.output  # trace_view's per-head attention table
    assert "aligned side by side" in result.output
    page = html.read_text()
    assert "f(τX) = [4] but τf(X) = [7]" in page
    assert page.count("<svg") == 2  # one heatmap per input for the single layer/head
    assert "<script" not in page and "src=" not in page and 'href="http' not in page
    # 11 differing cells, counted on the page when this was written (a regression pin, not a derivation): the
    # hand computation gives f(X) = [1, 7] and f(τX) = [4, 4], so every stage but the uniform average differs
    assert page.count('class="differs"') == 11


def test_check_explain_flag(refuted_report, tmp_path):
    spec, _ = refuted_report
    html = tmp_path / "from-check.html"
    result = CliRunner(env={"COLUMNS": "200"}).invoke(
        main, ["check", "--no-cache", str(spec), "--explain", "--html", str(html)]
    )
    assert result.exit_code == 1
    assert "permuted_input" in result.output and html.exists()


def test_robust_to_changed_moved_and_foreign(refuted_report, tmp_path):
    spec, report = refuted_report
    spec.write_text(POSITIONS.replace("[[0], [1]]", "[[0], [2]]"))
    [item] = explain_report(report)
    assert any("changed since the report" in n for n in item.notes)
    assert item.roles[0].trace.readout == [F(5, 2), F(23, 2)]  # replays the current spec, says so
    data = json.loads(report.read_text())
    data["results"][0]["spec_resolved"] = str(tmp_path / "gone.yaml")
    data["results"][0]["spec"] = "gone.yaml"
    report.write_text(json.dumps(data))
    [moved] = explain_report(report)
    assert "not found" in moved.notes[0] and moved.roles == []
    assert "X = [0, 1]" in render_html([moved])
    foreign = explain_verdict(load_spec(spec), Verdict("p", "refuted", "e", counterexample={"summary": "opaque"}))
    assert foreign.roles == [] and "names no inputs" in foreign.notes[0]
    bad_input = explain_verdict(
        load_spec(spec), Verdict("p", "refuted", "e", counterexample={"input": [["0", "1"]], "summary": "s"})
    )
    assert "dimension 1" in bad_input.roles[0].problem


def test_reports_that_cannot_be_read(tmp_path):
    with pytest.raises(ExplainError, match="file not found"):
        explain_report(tmp_path / "none.json")
    (tmp_path / "x.json").write_text('{"format": "other"}')
    with pytest.raises(ExplainError, match="not a verify-tf JSON report"):
        explain_report(tmp_path / "x.json")
    result = CliRunner().invoke(main, ["explain", str(tmp_path / "x.json")])
    assert result.exit_code == 2 and "Traceback" not in result.output

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


def test_cli_explain_opens_with_the_answer_and_writes_html(refuted_report, tmp_path):
    """Issue 39: the answer first (the inputs by the summary's names, the failing values, where the inputs first
    differ), then the side-by-side stages, then each input's trace. Hand computation (POSITIONS): X = [0, 1]
    embeds to [0, 2] (positions [[0], [1]] added), τX = [1, 0] to [1, 1]: aligned by the swap (τX's position 0
    with X's 1), both positions differ already at the embedding; the readout is f(X) = [1, 7], f(τX) = [4, 4]."""
    _, report = refuted_report
    html = tmp_path / "cx.html"
    result = CliRunner(env={"COLUMNS": "100"}).invoke(main, ["explain", str(report), "--html", str(html), "--print"])
    assert result.exit_code == 0, result.output
    all_lines = result.output.splitlines()
    at = all_lines.index("witness: X = [0, 1], swap positions 0,1: at position 0 f(τX) = [4] but τf(X) = [7]")
    assert at <= 4  # the count, the heading (on lines of its own when it is long) and its rule come first
    lines = all_lines[at - 2 :]
    assert [line.split(":", 1)[0].strip() for line in lines[3:7]] == ["X", "τX", "at the positions", "first differ"]
    assert lines[3].split() == ["X:", "[0]", "[1]"] and lines[4].split() == ["τX:", "[1]", "[0]"]
    assert lines[5].endswith("q(X) at position 1 = 7, q(τX) at position 0 = 4")
    assert lines[6].endswith("first differ:     embedding, at positions 0, 1")
    assert "permuted_input" not in result.output  # the roles are named as the summary names them
    side_by_side, trace = result.output.index("X and τX side by side"), result.output.index("the trace of X: [0] [1]")
    assert side_by_side < trace and "layer 0 head 0: attention weights" in result.output[trace:]
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
    assert "τX:" in result.output and "the trace of τX" in result.output and html.exists()


def test_explain_html_alone_writes_only_the_page(refuted_report, tmp_path):
    _, report = refuted_report
    html = tmp_path / "cx.html"
    result = CliRunner().invoke(main, ["explain", str(report), "--html", str(html)])
    assert result.exit_code == 0 and result.stdout == "" and html.exists()
    assert result.stderr == f"wrote {html} (1 counterexample(s))\n"


def test_explain_shows_the_collision_in_its_first_40_lines_at_80_columns(tmp_path):
    """Issue 39's must-show: a 3-token contextual-mapping witness of a 6-layer network printed 541 lines, the
    collision at the very end. Now it is in the answer: q(L)_2 = q(L′)_0 = 88.8 (the spec's own comment), equal
    from layer 5 on, the inputs differing from the embedding on (positions 1 and 2: 0.2, 0.4 against 0.6, 0.8)."""
    report = tmp_path / "r.json"
    spec = "specs/yun-lemma6-global-shift-reduced-refuted.yaml"
    assert CliRunner().invoke(main, ["check", "--no-cache", spec, "--json", str(report)]).exit_code == 0
    result = CliRunner(env={"COLUMNS": "80"}).invoke(main, ["explain", str(report)])
    head = result.output.splitlines()[:40]
    assert "  collision:    q(L) at position 2 = 88.8, q(L′) at position 0 = 88.8: equal" in head
    assert "  equal from:   layer 5: after attention on" in head
    assert "  first differ: embedding, at positions 1, 2" in head
    assert head[5:7] == ["  L:            [0] [0.2] [0.4]", "  L′:           [0] [0.6] [0.8]"]


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

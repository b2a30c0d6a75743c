"""tracr import and property rasp-equivalence on the committed exports (no tracr needed): proofs, the four
miscompilations refuted at their least inputs with both outputs, ties, snapping reported, located errors,
and the explorer's replay of a witness.

The least failing inputs and both outputs were found independently by /tmp/research's scripts (tracr's float32
jax model and a separate exact evaluator) and are recorded in docs/tracr.md."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from fractions import Fraction as F
from pathlib import Path

import pytest

from helpers import task, verdict
from verify_tf.builders.tracr_import import TracrImportError, import_tracr, parse_export, read_export
from verify_tf.domain import StringDomain
from verify_tf.explain import explain_report
from verify_tf.explain.replay import witness_table
from verify_tf.ir import Block, FeedForward
from verify_tf.runner import Overrides, check_property
from verify_tf.semantics import Exact
from verify_tf.spec import SpecError, load_spec_text

ROOT = Path(__file__).resolve().parent.parent
EXPORTS = ROOT / "examples" / "tracr"


def spec(
    name: str,
    max_length: int,
    *,
    model_extra: str = "",
    program: str | None = None,
    engine: str = "",
    reading: str = "hardmax",
) -> str:
    """A spec for an export; ``reading`` is the tracr reading (these tests are about hardmax unless they say)."""
    path = EXPORTS / f"{name}.json"
    if reading and "attention:" not in model_extra:
        model_extra = f"  attention: {reading}\n{model_extra}"
    engine_text = f", engine: {engine}" if engine else ""
    return (
        f"model:\n  tracr: {path}\n{model_extra}"
        f"domain:\n  strings: {{max-length: {max_length}}}\n"
        f"properties:\n  - rasp-equivalence: {{program: {EXPORTS / (program or name)}.json{engine_text}}}\n"
    )


def check(text: str):
    loaded = load_spec_text(text, "tracr.yaml", ROOT)
    return check_property(loaded, loaded.properties[0], Overrides())


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["enumerate", "interpret", "smt"])
def test_length_is_proved_by_every_engine(engine):
    result = check(spec("length", 3, engine=engine))
    assert result.status == "proved", result.detail
    assert "39 strings of length 1..3 over {a, b, c}" in result.detail  # 3 + 9 + 27


@pytest.mark.parametrize(
    "name, max_length, summary",
    [
        (
            "frac-gt-half",
            5,
            "input aab at position 2: the program gives 1, the model 0 (RASP [1, 1, 1], model [1, 1, 0]",
        ),
        ("negative-map", 5, "input a at position 0: the program gives -1, the model 0 (RASP [-1], model [0]"),
        (
            "length-10",
            10,
            "input aaaaaaaaaa at position 0: the program gives 10, the model 9 (RASP [10, 10, 10, 10, 10, "
            "10, 10, 10, 10, 10], model [9, 9, 9, 9, 9, 9, 9, 9, 9, 9]",
        ),
        ("bos-leak", 5, "input a at position 0: the program gives 0, the model 1 (RASP [0], model [1]"),
    ],
)
@pytest.mark.slow
@pytest.mark.parametrize("engine", ["enumerate", "interpret"])
def test_miscompilations_are_refuted_at_their_least_input(name, max_length, summary, engine):
    result = check(spec(name, max_length, engine=engine))
    assert result.status == "refuted"
    assert result.counterexample["summary"].startswith(summary)


def test_smt_refutes_a_miscompilation():
    result = check(spec("negative-map", 3, engine="smt"))
    assert result.status == "refuted" and result.counterexample["program_output"][0] == "-1"


def test_witness_names_both_outputs_and_the_program_trace():
    witness = check(spec("frac-gt-half", 3, engine="enumerate")).counterexample
    assert witness["input"] == ["a", "a", "b"] and witness["position"] == 2
    assert witness["program_output"] == ["1", "1", "1"] and witness["model_output"] == ["1", "1", "0"]
    last = witness["trace"][2]
    frac = next(label for label in last["program"] if label.startswith("frac_prevs"))
    assert last["token"] == "b" and last["program"][frac] == "2/3"  # the mean tracr's MLP misreads


def test_undefined_positions_are_dont_care():
    """sort_unique with duplicate keys: RASP gives None where nothing is selected; the model's output vector is
    all zero there (a tie), which is not a finding. [3, 3, 3] -> RASP [3, None, None]."""
    loaded = load_spec_text(spec("sort-unique", 3), "t.yaml", ROOT)
    t = task(
        loaded.model,
        loaded.arithmetic,
        loaded.domain,
        "rasp-equivalence",
        {"program": str(EXPORTS / "sort-unique.json")},
    )
    expected, got, _, _ = t.prop.sides(t, ("3", "3", "3"))
    assert expected == [3, None, None]
    assert got[0].value == 3 and got[1].tie == (1, 2, 3, 4) and got[1].score == 0
    assert t.prop.violation(t, ("3", "3", "3")) is None


def test_a_tie_between_output_coordinates_is_a_finding_of_its_own():
    model = import_tracr(EXPORTS / "length.json", attention="hardmax")
    ff = model.blocks[0].feed_forward
    silent = dataclasses.replace(
        model,
        blocks=(
            Block(
                model.blocks[0].attention,
                FeedForward(ff.w1, ff.b1, tuple(tuple(F(0) for _ in row) for row in ff.w2), ff.b2),
            ),
        ),
    )
    for engine in ("enumerate", "interpret", "smt"):
        result = verdict(
            silent,
            Exact(),
            StringDomain(("a", "b", "c"), 1, 2),
            "rasp-equivalence",
            {"program": str(EXPORTS / "length.json")},
            engine=engine,
        )
        assert result.status == "refuted", engine
        assert result.counterexample["summary"].startswith(
            "input a at position 0: the model's output is a tie between 0, 1, 2, 3, 4, 5, 6, 7, 8 (each 0), "
            "the program gives 1"
        )
        # the output space of length at max_seq_len 8 is 0..8, every coordinate 0 without the MLP
        assert result.counterexample["tie"] == [str(k) for k in range(9)]


def test_import_reads_tracrs_layout_and_reports_the_snapping():
    model = import_tracr(EXPORTS / "sort-unique.json")
    export = read_export(EXPORTS / "sort-unique.json")
    assert model.tokens.symbols == ("1", "2", "3", "4", "BOS") and model.tokens.bos == "BOS"
    assert model.dim == 23 and model.max_length == 6 and len(model.blocks) == 2  # research table: D = 23, 2 layers
    one = export.residual_labels.index("one")
    assert all(row[one] == 1 for row in model.tokens.embedding)  # the constant coordinate rides on every token
    assert all(x == 0 for x in model.positional_encoding[0])  # BOS gets no position
    assert model.positional_encoding[1][export.residual_labels.index("indices:0")] == 1
    notes = " ".join(model.notes)
    assert "denominators {1, 2, 3, 6}" in notes and "1/786432" in notes and "hardmax" in notes
    assert F(-125, 3) in {w for _, w in model.parameters()}  # a selector-width threshold weight, snapped
    # at max_seq_len 8 the thresholds 50(2k+1)/(k(k+1)) bring denominators 21, 28, 36 (k = 6, 7, 8)
    assert "denominators {1, 2, 3, 6, 21, 28, 36}" in " ".join(import_tracr(EXPORTS / "length.json").notes)


def test_snap_false_keeps_float32_values_and_the_batched_evaluator_still_proves_it():
    model = import_tracr(EXPORTS / "reverse.json", snap=False)
    assert "snap: false" in " ".join(model.notes)
    assert all((w.denominator & (w.denominator - 1)) == 0 for _, w in model.parameters())  # dyadic
    # the float32 weights' denominators once made the batched evaluator refuse (int64 bounds); with the tighter
    # bounds and the tie-free program it runs in int64 (the interpret engine agrees: proved, 120 strings, ~30 s)
    result = check(spec("reverse", 4, model_extra="  snap: false\n", engine="enumerate"))
    assert result.status == "proved" and result.statistics["inputs_checked"] == 120
    assert check(spec("length", 3, model_extra="  snap: false\n", engine="enumerate")).status == "proved"


@pytest.mark.slow
def test_softmax_reading_needs_quantize_and_fixed_arithmetic():
    with pytest.raises(SpecError, match="needs quantize"):
        load_spec_text(spec("length", 3, model_extra="  attention: softmax\n"), "t.yaml", ROOT)
    text = (
        spec("reverse", 3, model_extra="  attention: softmax\n  quantize: {bits: 24, frac: 8}\n")
        + "arithmetic: {mode: fixed, bits: 24, frac: 8}\n"
    )
    loaded = load_spec_text(text, "t.yaml", ROOT)
    assert {h.scoring for _, _, h in loaded.model.heads()} == {"softmax"}
    result = check_property(loaded, loaded.properties[0], Overrides())
    assert result.status == "proved", result.detail  # logit gaps >= 50/sqrt(12) leave e^-gap below 2^-8


@pytest.mark.parametrize(
    "text, where, message",
    [
        (spec("sort", 6), "properties[0].rasp-equivalence.program", "exceed the program's maximum length 5"),
        (spec("length", 3, program="reverse"), "properties[0].rasp-equivalence.program", "is not the export's"),
        (spec("length", 3, model_extra="  snap: maybe\n"), "model.snap", "expected"),
        ("model: {random: {seed: 0}, snap: true}\n", "model.snap", "applies only to a tracr source"),
    ],
)
def test_spec_mistakes_are_located(text, where, message):
    with pytest.raises(SpecError) as info:
        load_spec_text(text, "t.yaml", ROOT)
    assert where in str(info.value) and message in str(info.value)


def test_a_corrupted_export_is_refused(tmp_path):
    document = json.loads((EXPORTS / "length.json").read_text())
    edited = json.loads(json.dumps(document))
    edited["params"]["transformer/layer_0/mlp/linear_1"]["w"]["nonzero"][0][-2] = "7/3"
    with pytest.raises(TracrImportError, match="does not round to its float32"):
        from verify_tf.builders.tracr_import import model_from_export

        model_from_export(parse_export(edited))
    edited = json.loads(json.dumps(document))
    edited["config"]["layer_norm"] = True
    with pytest.raises(TracrImportError, match="layer norm"):
        from verify_tf.builders.tracr_import import model_from_export

        model_from_export(parse_export(edited))
    (tmp_path / "not.json").write_text("{}")
    with pytest.raises(SpecError, match="not a tracr export"):
        load_spec_text(f"model: {{tracr: {tmp_path / 'not.json'}}}\n", "t.yaml", tmp_path)


@pytest.mark.slow
def test_explain_replays_the_witness(tmp_path):
    spec_file = tmp_path / "frac.yaml"
    spec_file.write_text(spec("frac-gt-half", 3, engine="enumerate"))
    report = tmp_path / "report.json"
    subprocess.run(
        [sys.executable, "-m", "verify_tf", "check", "--no-cache", str(spec_file), "--json", str(report)],
        capture_output=True,
        text=True,
        check=False,
    )
    [item] = explain_report(report)
    [role] = item.roles
    assert role.tokens == ("a", "a", "b") and role.focus == 2 and role.offset == 1
    stream = role.trace.output[1 + 2]
    assert stream[read_export(EXPORTS / "frac-gt-half.json").output_index] == 0  # the model's wrong 0
    columns, rows = witness_table(item.counterexample)  # the program's values beside the model's, per position
    assert "model_output" in columns and rows[2][columns.index("model_output")] == "0"

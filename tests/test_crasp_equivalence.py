"""Property crasp-equivalence: proofs for compiled programs, replayed refutations of mutated models."""

from __future__ import annotations

import dataclasses
import itertools
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from helpers import verdict
from test_crasp_compiler import boolean_expressions
from verify_tf.builders.crasp_compiler import compile_program
from verify_tf.crasp import Definition, Program, lk_program, load_program, run_program
from verify_tf.crasp.arrays import program_outputs_batched
from verify_tf.crasp.formulas import program_outputs_symbolic
from verify_tf.domain import StringDomain
from verify_tf.ir import AttentionLayer, Block
from verify_tf.ir.edit import apply_settings
from verify_tf.runner import Overrides, check_property
from verify_tf.semantics import Fixed, evaluate
from verify_tf.spec import SpecError, load_spec_text

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "crasp"
FIRST_COUNT = "layers[0].attention.heads[0].value-bias[0]"


def spec_text(
    program: str, max_length: int, *, settings: str = "", options: str = "", min_length: int = 1, bits: int = 4
) -> str:
    return (
        f"model: {{construct: crasp-program, program: {EXAMPLES / program}{settings}}}\n"
        f"arithmetic: {{mode: fixed, bits: {bits}, frac: 0, attention-rounding: exact-sums}}\n"
        f"domain: {{strings: {{min-length: {min_length}, max-length: {max_length}}}}}\n"
        f"properties:\n  - crasp-equivalence: {{program: {EXAMPLES / program}{options}}}\n"
    )


def check(text: str, tmp_path: Path):
    spec = load_spec_text(text, "spec.yaml", tmp_path)
    return check_property(spec, spec.properties[0], Overrides())


def test_compiled_l3_is_proved_equivalent_up_to_length_7(tmp_path: Path) -> None:
    # enumeration's causal shortcut (engine auto picks counting here: test_counting_engine.py)
    verdict = check(spec_text("L3.cr", 7, options=", engine: enumerate"), tmp_path)
    assert (verdict.status, verdict.label) == ("proved", "proved (exhaustive)")
    assert verdict.statistics["domain_size"] == 254
    assert verdict.statistics["inputs_checked"] == 128  # the causal shortcut: length-7 strings only
    assert "254 strings of length 1..7 agree with L3.cr at the last position" in verdict.detail


def test_mutated_l3_is_refuted_with_the_least_distinguishing_string(tmp_path: Path) -> None:
    # The first count coordinate is -#a (has_a = not(-#a >= 0)); value bias 1 makes it i + 1 - #a >= 0:
    # has_a never holds, so the model never sees an a-block and rejects "aba".
    text = spec_text("L3.cr", 7, settings=f", set: ['{FIRST_COUNT}=1']")
    verdict = check(text, tmp_path)
    assert verdict.status == "refuted"
    witness = verdict.counterexample
    assert (witness["string"], witness["position"]) == ("aba", 2)  # its last letter
    assert (witness["program_output"], witness["model_output"], witness["model_readout"]) == (True, False, "0")
    assert witness["summary"] == (
        "string 'aba' at position 2: the program accepts, the model rejects (readout 0, accepts iff > 0)"
    )
    last = witness["trace"][-1]
    assert last["program"]["has_aba"] is True and last["program"]["has_bab"] is False
    assert [row["model_output"] for row in witness["trace"]] == [False, False, False]
    # Replay by hand: the interpreter and the program disagree exactly there.
    spec = load_spec_text(text, "spec.yaml", tmp_path)
    trace = evaluate(spec.model, spec.arithmetic, tuple("aba"))
    assert trace.readout[3] == 0 and run_program(lk_program(3), "aba").accepted


def test_prefix_mode_proves_every_position_and_refutes_at_the_first_wrong_one(tmp_path: Path) -> None:
    proved = check(spec_text("dyck1.cr", 6, options=", mode: prefix"), tmp_path)
    assert proved.status == "proved" and "at every position" in proved.detail
    # dyck1's first coordinate is #) - #( - 1 >= 0, i.e. balance < 0 (and, negated, balance >= 0). Value bias -1
    # subtracts i + 1 from it: at ")" the model believes balance >= 0 and accepts; the program rejects.
    refuted = check(
        spec_text("dyck1.cr", 6, settings=f", set: ['{FIRST_COUNT}=-1']", options=", mode: prefix"), tmp_path
    )
    assert refuted.status == "refuted"
    assert (refuted.counterexample["string"], refuted.counterexample["position"]) == (")", 0)
    assert (refuted.counterexample["program_output"], refuted.counterexample["model_output"]) == (False, True)


def test_prefix_mode_witness_is_padded_into_the_domain(tmp_path: Path) -> None:
    text = spec_text("L3.cr", 5, settings=f", set: ['{FIRST_COUNT}=1']", options=", mode: prefix", min_length=4)
    witness = check(text, tmp_path).counterexample
    assert (witness["string"], witness["position"]) == ("abaa", 2)


def test_the_empty_word_is_rejected_by_both(tmp_path: Path) -> None:
    verdict = check(spec_text("L1.cr", 4, min_length=0), tmp_path)
    assert verdict.status == "proved" and verdict.statistics["domain_size"] == 31


def test_threshold_moves_the_decision(tmp_path: Path) -> None:
    verdict = check(spec_text("L1.cr", 3, options=", threshold: 1"), tmp_path)
    assert verdict.status == "refuted"  # accepted strings have readout exactly 1, not > 1
    assert (verdict.counterexample["string"], verdict.counterexample["model_readout"]) == ("a", "1")


def test_three_bits_saturate_yet_the_decisions_of_l3_survive(tmp_path: Path) -> None:
    # The compiler asks for 4 bits so that nothing ever saturates; in 3 bits some masked pre-activations clip
    # (-5 becomes -4, still <= 0), which the property judges by behaviour: still equivalent.
    compiled = compile_program(lk_program(3))
    assert evaluate(compiled.model, Fixed(3, 0), tuple("abbab")).saturations > 0
    assert check(spec_text("L3.cr", 6, bits=3), tmp_path).status == "proved"


def test_non_causal_head_agrees_at_the_last_position_but_not_on_prefixes() -> None:
    compiled = compile_program(lk_program(1))
    block = compiled.model.blocks[0]
    head = dataclasses.replace(block.attention.heads[0], causal=False)
    model = dataclasses.replace(
        compiled.model, blocks=(Block(AttentionLayer((head,), block.attention.output_bias), block.feed_forward),)
    )

    def run(mode: str):
        return verdict(
            model,
            compiled.arithmetic,
            StringDomain(("a", "b"), 1, 3),
            "crasp-equivalence",
            {"program": EXAMPLES / "L1.cr", "mode": mode},
            engine="interpret",
        )

    accept = run("accept")  # at the last position every key is allowed anyway
    assert accept.status == "proved" and accept.statistics["inputs_checked"] == 14
    prefix = run("prefix")  # position 1 of "ab" sees the b
    assert prefix.status == "refuted"
    assert (prefix.counterexample["string"], prefix.counterexample["position"]) == ("ab", 0)


def test_timeout_gives_unknown_saying_what_was_tried() -> None:
    compiled = compile_program(lk_program(6))
    result = verdict(
        compiled.model,
        compiled.arithmetic,
        StringDomain(("a", "b"), 1, 12),
        "crasp-equivalence",
        {"program": EXAMPLES / "L6.cr"},
        engine="interpret",
        timeout=0.5,
    )
    assert result.status == "unknown" and result.tried[0].startswith("exhaustive interpret: ")
    assert "of 4096 inputs examined, no violation so far" in result.tried[0]


def test_program_and_domain_mismatches_are_clear(tmp_path: Path) -> None:
    bad = tmp_path / "bad.cr"
    bad.write_text("alphabet a b\nx = #a\n")
    head, _, _ = spec_text("L1.cr", 3).rpartition("program: ")
    with pytest.raises(SpecError, match=r"spec\.yaml:5: .*invalid C-RASP program: .*bad\.cr:2:6: undefined name 'a'"):
        load_spec_text(f"{head}program: {bad}}}\n", "spec.yaml", tmp_path)
    with pytest.raises(SpecError, match=r"spec\.yaml:1: model: .*bad\.cr:2:6: undefined name 'a'"):
        load_spec_text(spec_text("L1.cr", 3).replace(str(EXAMPLES / "L1.cr"), str(bad)), "spec.yaml", tmp_path)
    other = tmp_path / "other.cr"
    other.write_text('alphabet a c\nx = #"a" > 0\n')
    compiled = compile_program(lk_program(1))
    message = "domain symbol 'b' is not in the program's alphabet {a, c}"
    with pytest.raises(SpecError, match=re.escape(message)) as error:
        verdict(
            compiled.model,
            Fixed(3, 0),
            StringDomain(("a", "b"), 1, 2),
            "crasp-equivalence",
            {"program": other},
            engine="interpret",
        )
    assert error.value.path == "crasp-equivalence.program"


def test_majority_counterexample_names_both_outputs_at_every_position(tmp_path: Path) -> None:
    program = load_program(EXAMPLES / "majority.cr")
    verdict = check(spec_text("majority.cr", 4, settings=", set: ['readout[1]=-1']"), tmp_path)
    witness = verdict.counterexample
    assert verdict.status == "refuted" and witness["string"] == "a"
    assert witness["trace"] == [
        {
            "position": 0,
            "letter": "a",
            "program": {"na": 1, "nb": 0, "majority": True},
            "program_output": True,
            "model_readout": "0",
            "model_output": False,
        }
    ]
    assert program.names == ("na", "nb", "majority")


# ---------------------------------------------------------------- the three engines


def run_crasp(
    program: str,
    max_length: int,
    engine: str,
    *,
    settings: tuple[str, ...] = (),
    mode: str = "accept",
    queries: str = "one",
):
    compiled = compile_program(load_program(EXAMPLES / program))
    return verdict(
        apply_settings(compiled.model, settings),
        compiled.arithmetic,
        StringDomain(("a", "b"), 1, max_length),
        "crasp-equivalence",
        {"program": EXAMPLES / program, "mode": mode, "queries": queries},
        engine=engine,
    )


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["interpret", "enumerate", "smt"])
def test_every_engine_proves_l3_and_refutes_the_mutant(engine: str) -> None:
    proved = run_crasp("L3.cr", 6, engine)
    assert (proved.status, proved.engine) == ("proved", engine)
    refuted = run_crasp("L3.cr", 6, engine, settings=(f"{FIRST_COUNT}=1",))
    assert refuted.status == "refuted"
    witness = refuted.counterexample
    if engine == "smt":  # any disagreeing string, cut to its first wrong position
        assert witness["string"].endswith("a") and (witness["program_output"], witness["model_output"]) == (True, False)
    else:
        assert (witness["string"], witness["position"]) == ("aba", 2)  # its last letter


@pytest.mark.slow
def test_smt_per_length_queries_agree_with_one_query() -> None:
    one = run_crasp("L2.cr", 6, "smt")
    per_length = run_crasp("L2.cr", 6, "smt", queries="per-length")
    assert one.status == per_length.status == "proved"
    assert (one.statistics["queries"], per_length.statistics["queries"]) == (1, 6)


@pytest.mark.slow
def test_counting_is_the_automatic_engine_and_enumeration_reaches_length_14_for_l6() -> None:
    # auto picks counting wherever it applies (issue 32); enumeration still decides N = 14 (2^14 strings)
    automatic = run_crasp("L6.cr", 14, "auto")
    assert automatic.engine == "counting" and automatic.auto["chosen"] == "counting"
    assert automatic.status == "proved" and automatic.statistics["states_per_length"][14] == 13  # 2·6 + 1 classes
    result = run_crasp("L6.cr", 14, "enumerate")
    assert result.status == "proved" and result.statistics["inputs_checked"] == 2**14


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_batched_and_symbolic_programs_agree_with_the_interpreter(data: st.DataObject) -> None:
    import z3

    from verify_tf.symbolic.inputs import string_input
    from verify_tf.symbolic.values import Builder

    program = Program((Definition("out", data.draw(boolean_expressions(3))),), "out", ("a", "b"))
    words = ["".join(letters) for letters in itertools.product("ab", repeat=4)]
    rows = np.array([["ab".index(c) for c in word] for word in words])
    batched = program_outputs_batched(program, ("a", "b"), rows)
    for word, row in zip(words, batched):
        expected = run_program(program, word).output
        assert tuple(bool(x) for x in row) == (False, *expected), word
        symbolic = program_outputs_symbolic(program, string_input(("a", "b"), 4, Builder(), dict(enumerate(word))))
        assert tuple(z3.is_true(z3.simplify(x)) for x in symbolic) == expected, word

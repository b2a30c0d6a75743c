"""The C-RASP compiler: compiled transformers decide exactly what their programs decide, in the stated bits.

Every check runs the reference interpreter (verify_tf.semantics.evaluate) on the compiled model in the
arithmetic the compiler states, and compares the decision (readout > 0) with the C-RASP interpreter at every
position. The compiled models are causal, so one run on a string decides all of its prefixes.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from verify_tf.builders.crasp_compiler import BOS, compile_program, required_bits
from verify_tf.builders.files import load_model
from verify_tf.crasp import (
    ArithOp,
    BoolConst,
    BoolOp,
    Compare,
    Conditional,
    Count,
    CountConst,
    CraspError,
    Definition,
    Letter,
    MinMax,
    Neg,
    Not,
    Program,
    in_lk,
    lk_program,
    load_program,
    parse_program,
    program_depth,
    run_program,
)
from verify_tf.crasp.ast import COMPARISON_OPERATORS
from verify_tf.ir.edit import EditError, apply_settings, with_parameter
from verify_tf.semantics import Fixed, evaluate
from verify_tf.spec import load_spec_text

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "crasp"


def decisions(compiled, word: str) -> tuple[bool, ...]:
    """The compiled model's decision at positions 1..n (readout > 0), with no saturation anywhere."""
    trace = evaluate(compiled.model, compiled.arithmetic, tuple(word))
    assert trace.saturations == 0, word
    assert trace.tokens[0] == BOS
    return tuple(q > 0 for q in trace.readout[1:])


def assert_equivalent(program: Program, length: int, **options) -> None:
    """Model and program agree at every position of every string up to ``length`` (prefixes included)."""
    compiled = compile_program(program, **options)
    for letters in itertools.product(program.alphabet, repeat=length):
        word = "".join(letters)
        assert decisions(compiled, word) == run_program(program, word).output, word


@pytest.mark.slow
def test_l3_compiled_model_accepts_exactly_l3_up_to_length_6() -> None:
    compiled = compile_program(lk_program(3))
    accepted = set()
    for letters in itertools.product("ab", repeat=6):
        word = "".join(letters)
        for i, accepts in enumerate(decisions(compiled, word), start=1):
            assert accepts == in_lk(3, word[:i]), word[:i]
            if accepts:
                accepted.add(word[:i])
    assert len(accepted) == sum(1 for n in range(1, 7) for c in itertools.combinations(range(1, n), 2))  # C(n-1, 2)
    assert {"aba", "aabba", "abaa"} <= accepted and "abab" not in accepted


@pytest.mark.parametrize("k", range(1, 7))
def test_lk_attention_layers_equal_depth_in_four_bits(k: int) -> None:
    compiled = compile_program(lk_program(k))
    assert compiled.program_depth == k
    assert compiled.attention_layers == k == sum(block.attention is not None for block in compiled.model.blocks)
    assert compiled.feed_forward_layers == k and len(compiled.model.blocks) == k == compiled.blocks  # one per level
    assert (compiled.model.dim, compiled.averages, compiled.thresholds, compiled.gates) == (4 * k + 3, 2 * k, 2 * k, 0)
    assert compiled.bits == (3 if k == 1 else 4) and compiled.frac == 0
    assert compiled.arithmetic == Fixed(compiled.bits, 0, "exact-sums")
    for _, _, head in compiled.model.heads():
        assert (head.scoring, head.causal, head.value_dim) == ("uniform", True, 2)


@pytest.mark.slow
@pytest.mark.parametrize("k", [2, 6])
def test_lk_compiled_models_decide_every_prefix_up_to_length_5(k: int) -> None:
    assert_equivalent(lk_program(k), 5)


def test_nested_gates_add_a_feed_forward_only_block() -> None:
    # examples/crasp/nested-gates.cr: depth 2 (#both inside #), but `both` conjoins two level-1 thresholds,
    # which come out of the level-1 feed-forward layer: the conjunction needs a second feed-forward sublayer,
    # a block without attention between the two attention layers
    compiled = compile_program(load_program(EXAMPLES / "nested-gates.cr"))
    assert (compiled.program_depth, compiled.attention_layers, compiled.blocks) == (2, 2, 3)
    assert [block.attention is not None for block in compiled.model.blocks] == [True, False, True]
    assert compiled.describe()[1] == "3 blocks: 2 with attention, 1 feed-forward only"


@pytest.mark.slow
@pytest.mark.parametrize("heads", ["uniform", "softmax"])
def test_softmax_heads_with_zero_scores_equal_uniform_heads_under_yang_et_al_rounding(heads: str) -> None:
    # under rounded-terms a zero-score softmax head computes round(Σ round(e^0·v_j) / Σ round(e^0)) =
    # round(Σ v_j / n) (e^0 = 1 exactly, v_j on the grid): the uniform average; checked at every prefix
    program = lk_program(3)
    compiled = compile_program(program, heads=heads)
    assert {head.scoring for _, _, head in compiled.model.heads()} == {heads}
    arithmetic = Fixed(compiled.bits, 0, "rounded-terms")
    for letters in itertools.product("ab", repeat=6):
        word = "".join(letters)
        trace = evaluate(compiled.model, arithmetic, tuple(word))
        assert tuple(q > 0 for q in trace.readout[1:]) == run_program(program, word).output, word


@pytest.mark.slow
@pytest.mark.parametrize("name, length", [("majority", 7), ("dyck1", 6), ("nested-gates", 6)])
def test_example_programs_compile_exactly(name: str, length: int) -> None:
    assert_equivalent(load_program(EXAMPLES / f"{name}.cr"), length)


def test_dyck1_shares_head_coordinates_and_folds_signs_of_counts() -> None:
    compiled = compile_program(load_program(EXAMPLES / "dyck1.cr"))
    # balance < 0 is the negation of #( - #) >= 0 (one coordinate), balance == 0 adds #( - #) - 1 >= 0;
    # dips == 0 is -#dips >= 0 alone, since #dips >= 0 always holds (counts are non-negative).
    assert (compiled.attention_layers, compiled.averages, compiled.thresholds, compiled.gates) == (2, 3, 4, 0)


OPERATOR_PROGRAMS = {
    "constants": 'x = #"a" + 2 >= 3 + #"b"',
    "min-max": 'x = min(#"a", #"b") + 1 == max(#"a" - #"b", 2)',
    "conditional": 'x = ("a" ? #"b" : -#"a") + #("a" && "b" || !"b") < 1',
    "or-of-counts": 'x = #"a" > 2 || #"b" != #"a"',
    "nested-count": 'p = #"a" <= #"b"\nx = #(p && "b") - #!p >= 0 && !(#p == 0)',
    "negation": 'x = -(#"a" - 3) > -#"b"',
    "constant-output": "x = true",
    "constant-false": "x = 1 > 2",
    "letter-only": 'x = "a" && !"b" || false',
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(OPERATOR_PROGRAMS))
def test_every_operator_compiles_exactly(name: str) -> None:
    program = parse_program("alphabet a b\n" + OPERATOR_PROGRAMS[name] + "\n", f"{name}.cr")
    assert_equivalent(program, 5)
    assert compile_program(program).attention_layers == program_depth(program)


def test_constant_folding_removes_layers_below_the_depth() -> None:
    program = parse_program('alphabet a b\nx = #"a" - #"a" > 0\n', "fold.cr")
    compiled = compile_program(program)
    assert program_depth(program) == 1 and compiled.attention_layers == 0 and compiled.model.blocks == ()
    assert decisions(compiled, "aab") == (False, False, False)


def test_no_length_bound_majority_at_length_81() -> None:
    compiled = compile_program(load_program(EXAMPLES / "majority.cr"))
    assert compiled.bits == 3  # 3-bit integers decide majority at every length
    for word, expected in (("a" * 41 + "b" * 40, True), ("a" * 40 + "b" * 41, False), ("b" + "ab" * 40, False)):
        trace = evaluate(compiled.model, compiled.arithmetic, tuple(word))
        assert trace.saturations == 0
        assert (trace.readout[-1] > 0) is expected


@pytest.mark.slow
@pytest.mark.parametrize("frac, bits", [(1, 5), (2, 6), (3, 8)])
def test_fractional_bits_cost_bits_but_stay_exact(frac: int, bits: int) -> None:
    compiled = compile_program(lk_program(2), frac=frac)
    assert compiled.bits == bits  # the step weight 2^f must be representable: p >= 2f + 2
    assert_equivalent(lk_program(2), 5, frac=frac)


def test_too_few_bits_are_refused() -> None:
    with pytest.raises(CraspError, match="needs at least 4 bits with 0 fractional bits, got 3"):
        compile_program(lk_program(3), bits=3)
    assert compile_program(lk_program(3), bits=9).bits == 9


def test_required_bits_covers_both_ends_of_the_range() -> None:
    assert required_bits([Fraction(7)], 0) == 4 and required_bits([Fraction(8)], 0) == 5
    assert required_bits([Fraction(-8)], 0) == 4 and required_bits([Fraction(-1, 4)], 2) == 3


def test_with_parameter_changes_exactly_one_weight() -> None:
    model = compile_program(lk_program(2)).model
    changed = with_parameter(model, "layers[0].attention.heads[0].value-bias[0]", Fraction(1))
    before, after = dict(model.parameters()), dict(changed.parameters())
    assert [name for name in before if before[name] != after[name]] == ["layers[0].attention.heads[0].value-bias[0]"]
    assert dict(with_parameter(model, "embedding[0][1]", Fraction(5)).parameters())["embedding[0][1]"] == 5
    with pytest.raises(EditError, match="no parameter 'layers\\[9\\]"):
        with_parameter(model, "layers[9].feed-forward.b1[0]", Fraction(0))
    with pytest.raises(EditError, match="cannot read the setting"):
        apply_settings(model, ["readout[0]"])


@pytest.mark.slow
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_programs_compile_exactly(data: st.DataObject) -> None:
    expression = data.draw(boolean_expressions(3))
    program = Program((Definition("out", expression),), "out", ("a", "b"))
    compiled = compile_program(program)
    assert compiled.attention_layers <= program_depth(program)
    for letters in itertools.product("ab", repeat=4):
        word = "".join(letters)
        assert decisions(compiled, word) == run_program(program, word).output, word


def boolean_expressions(budget: int) -> st.SearchStrategy:
    leaves = st.one_of(st.builds(Letter, st.sampled_from("ab")), st.builds(BoolConst, st.booleans()))
    if budget == 0:
        return leaves
    inner, counts = boolean_expressions(budget - 1), count_expressions(budget - 1)
    return st.one_of(
        leaves,
        st.builds(Not, inner),
        st.builds(BoolOp, st.sampled_from(["&&", "||"]), inner, inner),
        st.builds(Compare, st.sampled_from(COMPARISON_OPERATORS), counts, counts),
    )


def count_expressions(budget: int) -> st.SearchStrategy:
    constants = st.builds(CountConst, st.integers(-2, 2))
    counted = st.builds(Count, boolean_expressions(budget))
    if budget == 0:
        return st.one_of(constants, st.builds(Count, st.builds(Letter, st.sampled_from("ab"))))
    inner = count_expressions(budget - 1)
    return st.one_of(
        constants,
        counted,
        st.builds(Neg, inner),
        st.builds(ArithOp, st.sampled_from(["+", "-"]), inner, inner),
        st.builds(MinMax, st.sampled_from(["min", "max"]), inner, inner),
        st.builds(Conditional, boolean_expressions(budget - 1), inner, inner),
    )


# ---------------------------------------------------------------- the spec construction and the command line


def test_crasp_program_construction_in_a_spec(tmp_path: Path) -> None:
    spec = load_spec_text(
        f"model: {{construct: crasp-program, program: {EXAMPLES / 'L2.cr'}, "
        f"set: ['layers[1].feed-forward.b1[0]=3']}}\n"
        "arithmetic: {mode: fixed, bits: 4, frac: 0}\n"
        "domain: {strings: {max-length: 3}}\n"
        "properties: [{permutation-equivariance: {}}]\n",
        "s.yaml",
        tmp_path,
    )
    plain = compile_program(lk_program(2)).model
    assert dict(spec.model.parameters())["layers[1].feed-forward.b1[0]"] == 3
    assert dict(plain.parameters())["layers[1].feed-forward.b1[0]"] != 3
    assert spec.model.name.startswith("C-RASP L2.cr")


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "verify_tf", "crasp", *args], capture_output=True, text=True)


@pytest.mark.slow
def test_cli_compile_refuses_too_few_bits_and_bad_settings(tmp_path: Path) -> None:
    result = run_cli("compile", str(EXAMPLES / "L3.cr"), "-o", str(tmp_path / "m.safetensors"), "--bits", "3")
    assert result.returncode == 2 and "needs at least 4 bits" in result.stderr and "Traceback" not in result.stderr
    result = run_cli("compile", str(EXAMPLES / "L3.cr"), "-o", str(tmp_path / "m.safetensors"), "--set", "x=1")
    assert result.returncode == 2 and "no parameter 'x'" in result.stderr


def test_cli_compile_writes_the_model_it_describes(tmp_path: Path) -> None:
    target = tmp_path / "L3.safetensors"
    result = run_cli("compile", str(EXAMPLES / "L3.cr"), "-o", str(target))
    assert result.returncode == 0, result.stderr
    assert "3 attention layers (program depth 3)" in result.stdout
    assert "bits: 4, frac: 0" in result.stdout
    assert load_model(target) == compile_program(lk_program(3), name="C-RASP L3.cr").model

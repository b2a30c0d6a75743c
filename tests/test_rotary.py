"""RoPE's rotation tables (semantics/rotary.py), RoPE and ALiBi in the IR and in the reference interpreter.

Independent checks: mpmath at 60 digits for the tables (a different library, different algorithms), and
hand computations for the interpreter (each written out next to its assertion).
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest

from verify_tf.ir import (
    Alibi,
    AlphabetTokens,
    AttentionLayer,
    Block,
    Frequency,
    Head,
    Model,
    Rotary,
    alibi_slopes,
    validate_shapes,
    zeros,
)
from verify_tf.ir.plain import model_from_dict, model_to_dict
from verify_tf.semantics import Exact, Fixed, evaluate
from verify_tf.semantics.arithmetic import UnsupportedInMode
from verify_tf.semantics.rotary import rotation_entry, rotation_table

mpmath = pytest.importorskip("mpmath")  # in the test extra


def exact_angle(frequency: Frequency, position: int):
    mpmath.mp.dps = 60
    if frequency.kind == "radians":
        theta = mpmath.mpf(frequency.value.numerator) / frequency.value.denominator
    elif frequency.kind == "turns":
        theta = 2 * mpmath.pi * frequency.value.numerator / frequency.value.denominator
    else:
        exponent = mpmath.mpf(frequency.exponent.numerator) / frequency.exponent.denominator
        theta = mpmath.power(mpmath.mpf(frequency.value.numerator) / frequency.value.denominator, -exponent)
    return theta * position


FREQUENCIES = [
    *Rotary.standard(8, 10000).frequencies,  # θ = 1, 1/10, 1/100, 1/1000 (10000^(-k/4))
    *Rotary.standard(6, 500000).frequencies,  # Llama 3's base; irrational θ
    Frequency("radians", F(3, 7)),
    Frequency("radians", F(-5, 2)),
    Frequency("turns", F(1, 7)),
    Frequency("turns", F(5, 12)),
]


@pytest.mark.parametrize("frac", [0, 3, 8, 16])
def test_tables_are_cos_and_sin_rounded_to_nearest(frac: int) -> None:
    """2,750 entries per f against mpmath; a value within 10^-50 of a tie is a tie (only 5/12 turns have them,
    at f = 0) and goes to the even mantissa."""
    checked = ties = 0
    for frequency in FREQUENCIES:
        for position in range(0, 125):
            angle = exact_angle(frequency, position)
            for sine, function in ((False, mpmath.cos), (True, mpmath.sin)):
                value = function(angle) * 2**frac
                expected = int(mpmath.floor(value + mpmath.mpf(1) / 2))
                if abs(abs(value - expected) - mpmath.mpf(1) / 2) < mpmath.mpf(10) ** -50:
                    ties += 1
                    below = int(mpmath.floor(mpmath.nint(value * 2) / 2))  # the tie lies between below and below + 1
                    expected = below if below % 2 == 0 else below + 1
                assert rotation_entry(frequency, position, frac, sine) == expected, (frequency, position, sine)
                checked += 1
    assert checked == 2750  # 11 frequencies, 125 positions, cos and sin
    # 5/12 turns visit every twelfth of a turn; cos is ±1/2 at 4 of the 12 (60°, 120°, 240°, 300°) and sin at 4 (30°,
    # 150°, 210°, 330°): positions 0..124 give 83 ties, all at f = 0 (at f ≥ 1, ±1/2 is on the grid)
    assert ties == (83 if frac == 0 else 0)


def test_exact_values_and_ties_to_even() -> None:
    """Niven's rational cases are rounded exactly; the only ties, ±1/2 at f = 0, go to the even mantissa 0."""
    sixth = Frequency("turns", F(1, 6))
    # positions 0..5 are 0°, 60°, ..., 300°: cos = 1, 1/2, -1/2, -1, -1/2, 1/2 and sin = 0, .87, .87, 0, -.87, -.87
    assert rotation_table(sixth, 6, 0) == ((1, 0), (0, 1), (0, 1), (-1, 0), (0, -1), (0, -1))
    assert rotation_table(sixth, 6, 1) == ((2, 0), (1, 2), (-1, 2), (-2, 0), (-1, -2), (1, -2))
    quarter = Frequency("turns", F(1, 4))
    assert rotation_table(quarter, 5, 4) == ((16, 0), (0, 16), (-16, 0), (0, -16), (16, 0))
    twelfth = Frequency("turns", F(1, 12))  # sin 30° = 1/2: a tie at f = 0, exact at f = 1
    assert rotation_entry(twelfth, 1, 0, True) == 0 and rotation_entry(twelfth, 1, 1, True) == 1
    assert rotation_entry(Frequency("radians", F(0)), 7, 5, False) == 32  # θ = 0: cos = 1 exactly


def test_tables_are_odd_and_even_like_sin_and_cos() -> None:
    """Rounding to nearest is odd-symmetric: the tables of t and 1 − t turns are conjugate at every position."""
    for t in (F(1, 7), F(2, 9), F(1, 10)):
        ahead, behind = Frequency("turns", t), Frequency("turns", 1 - t)
        for position in range(20):
            for frac in (0, 5):
                c, s = rotation_entry(ahead, position, frac, False), rotation_entry(ahead, position, frac, True)
                assert (
                    rotation_entry(behind, position, frac, False),
                    rotation_entry(behind, position, frac, True),
                ) == (
                    c,
                    -s,
                )


def test_turns_tables_repeat_with_their_period() -> None:
    frequency = Frequency("turns", F(2, 7))
    assert rotation_table(frequency, 7, 6) == rotation_table(frequency, 14, 6)[7:]


def test_standard_frequencies_and_pairs() -> None:
    rope = Rotary.standard(4, 10000)
    assert [(f.kind, f.value, f.exponent) for f in rope.frequencies] == [
        ("power", 10000, 0),
        ("power", 10000, F(1, 2)),
    ]
    assert rope.pairs(4) == ((0, 2), (1, 3))
    assert Rotary(rope.frequencies, "interleaved").pairs(4) == ((0, 1), (2, 3))
    with pytest.raises(ValueError, match="even key dimension"):
        Rotary.standard(3)


def test_alibi_standard_slopes() -> None:
    """Press et al.'s get_slopes: 2^(-8h/n) for n a power of two; else those of the largest power of two below,
    then every other slope of twice that."""
    assert alibi_slopes(1) == (F(1, 256),)
    assert alibi_slopes(4) == (F(1, 4), F(1, 16), F(1, 64), F(1, 256))
    assert alibi_slopes(8) == tuple(F(1, 2**h) for h in range(1, 9))
    assert alibi_slopes(3) == (F(1, 16), F(1, 256), F(1, 4))
    assert alibi_slopes(6) == (F(1, 4), F(1, 16), F(1, 64), F(1, 256), F(1, 2), F(1, 8))
    with pytest.raises(ValueError, match="irrational"):
        alibi_slopes(16)
    assert Alibi(F(1, 4)).bias(-3) == F(-3, 4) and Alibi(F(1, 4), "symmetric").bias(2) == F(-1, 2)


# --------------------------------------------------------------------------- the interpreter


def one_head_model(head: Head, dim: int = 1) -> Model:
    """Alphabet {a}, BOS, width ``dim``, one attention layer with ``head`` writing into the stream."""
    embedding = ((F(1),) + (F(0),) * (dim - 1),)
    tokens = AlphabetTokens(("a", "^"), embedding + (zeros(dim),), "^", zeros(dim))
    layer = AttentionLayer((head,), zeros(dim))
    return Model(tokens=tokens, dim=dim, blocks=(Block(layer, None),), readout=(F(1),) + (F(0),) * (dim - 1))


def constant_head(query: tuple, key: tuple, **changes) -> Head:
    k = len(query)
    return Head(
        query=((F(0),),) * k,
        key=((F(0),),) * k,
        value=((F(1),),),
        output=((F(1),),),
        query_bias=tuple(F(x) for x in query),
        key_bias=tuple(F(x) for x in key),
        value_bias=zeros(1),
        **({"scoring": "hardmax", "causal": True} | changes),
    )


def test_rope_scores_by_hand() -> None:
    """Quarter turns (exact tables): q = k = (1, 0) rotated by p·90° score cos(90°·(i − j)): 1, 0, −1, 0."""
    head = constant_head((1, 0), (1, 0), positional="rope", rope=Rotary((Frequency("turns", F(1, 4)),)))
    trace = evaluate(one_head_model(head), Fixed(8, 2), ["a"] * 4)
    scores = trace.blocks[0].heads[0].scores
    assert scores[4][:5] == [1, 0, -1, 0, 1]  # stream position 4 against 0..4
    assert scores[2][:3] == [-1, 0, 1]


def test_rope_rounds_each_rotated_coordinate_once() -> None:
    """f = 1, a sixth of a turn: the table at p = 1 is (cos, sin) = (1/2, 1) (0.866 rounds to 1 at f = 1). The query
    (1, 1/2) at p = 1 becomes (round(1·1/2 − 1/2·1), round(1·1 + 1/2·1/2)) = (0, round(5/4)) = (0, 1)."""
    head = constant_head((1, F(1, 2)), (1, 0), positional="rope", rope=Rotary((Frequency("turns", F(1, 6)),)))
    trace = evaluate(one_head_model(head), Fixed(8, 1), ["a"])
    # the key (1, 0) at p = 0 stays (1, 0): the score of query 1 against key 0 is q_rot · k = 0
    # and against key 1 (rotated to (1/2, 1)) it is 0·1/2 + 1·1 = 1
    assert trace.blocks[0].heads[0].scores[1] == [0, 1]


def test_exact_arithmetic_refuses_rope_with_a_hint() -> None:
    head = constant_head((1, 0), (1, 0), positional="rope", rope=Rotary((Frequency("turns", F(1, 4)),)))
    with pytest.raises(UnsupportedInMode, match="arithmetic: fixed"):
        evaluate(one_head_model(head), Exact(), ["a"])


def test_alibi_adds_slope_times_distance() -> None:
    """Slope 1/2, causal: scores q·k + (j − i)/2 with q·k = 1: at query 3, keys 0..3 score −1/2, 0, 1/2, 1."""
    head = constant_head((1,), (1,), positional="alibi", alibi=Alibi(F(1, 2)))
    for arith in (Exact(), Fixed(8, 2)):
        trace = evaluate(one_head_model(head), arith, ["a"] * 3)
        assert trace.blocks[0].heads[0].scores[3] == [F(-1, 2), 0, F(1, 2), 1]
    symmetric = constant_head((1,), (1,), positional="alibi", alibi=Alibi(F(1, 2), "symmetric"), causal=False)
    trace = evaluate(one_head_model(symmetric), Exact(), ["a"] * 2)
    assert trace.blocks[0].heads[0].scores[1] == [F(1, 2), 1, F(1, 2)]


def test_shapes_and_plain_data_round_trip() -> None:
    rope = constant_head((1, 0), (1, 0), positional="rope", rope=Rotary.standard(2, 10000, "interleaved"))
    alibi = constant_head((1,), (1,), positional="alibi", alibi=Alibi(F(1, 16), "symmetric"))
    for head, dim in ((rope, 1), (alibi, 1)):
        model = one_head_model(head, dim)
        assert validate_shapes(model) == []
        assert model_from_dict(model_to_dict(model)) == model
    assert "alibi-slope" in dict(one_head_model(alibi).parameters()).__repr__()
    odd = constant_head((1, 0, 0), (1, 0, 0), positional="rope", rope=Rotary((Frequency("turns", F(1, 4)),)))
    assert any("odd" in problem for problem in validate_shapes(one_head_model(odd)))
    missing = constant_head((1,), (1,), positional="alibi")
    assert validate_shapes(one_head_model(missing)) == ["layers[0].attention.heads[0]: positional alibi needs a slope"]
    stray = constant_head((1,), (1,), alibi=Alibi(F(1)))
    assert any("has no ALiBi slope" in problem for problem in validate_shapes(one_head_model(stray)))


# --------------------------------------------------------------------------- specs


SPEC = """\
model:
  tokens: {alphabet: [a, b], embedding: [[1, 0], [0, 1]]}
  layers:
    - attention:
        heads:
%s
arithmetic: %s
domain:
  strings: {alphabet: [a, b], max-length: 2}
properties:
  - output-bounds: {lo: -10, hi: 10}
"""
ROPE_HEAD = "          - {%s query: [[1, 0], [0, 1]], key: [[1, 0], [0, 1]], value: [[1, 0]], output: [[1], [0]]}"
ALIBI_HEAD = "          - {%s query: [[1, 0]], key: [[1, 0]], value: [[1, 0]], output: [[1], [0]]}"


def test_specs_declare_rope_and_alibi() -> None:
    from verify_tf.spec import load_spec_text

    heads = "\n".join(
        [
            ROPE_HEAD % "positional: rope, rope: {base: 100, pairing: interleaved},",
            ROPE_HEAD % "positional: rope, rope: {turns: [1/6]},",
            ALIBI_HEAD % "positional: alibi,",
            ALIBI_HEAD % "positional: alibi, alibi: {slope: 1/2, distance: symmetric},",
        ]
    )
    spec = load_spec_text(SPEC % (heads, "{mode: fixed, bits: 16, frac: 8}"), "spec.yaml")
    first, turns, standard, explicit = spec.model.blocks[0].attention.heads
    assert first.rope == Rotary((Frequency("power", F(100), F(0)),), "interleaved")
    assert turns.rope == Rotary((Frequency("turns", F(1, 6)),), "half")
    # the third of four heads takes the third standard slope for four heads: 1/64
    assert standard.alibi == Alibi(F(1, 64)) and explicit.alibi == Alibi(F(1, 2), "symmetric")


@pytest.mark.parametrize(
    ("head", "arithmetic", "message"),
    [
        (
            ROPE_HEAD % "positional: rope, scoring: hardmax,",
            "exact",
            "spec.yaml:6: model.layers[0].attention.heads[0].positional: RoPE rotates by cos and sin",
        ),
        (
            ALIBI_HEAD % "positional: rope,",
            "{mode: fixed, bits: 16, frac: 8}",
            "RoPE rotates pairs of coordinates; the key dimension 1 is odd",
        ),
        (
            ALIBI_HEAD % "positional: alibi,",
            "{mode: fixed, bits: 16, frac: 4}",
            "model.layers[0].attention.heads[0].alibi-slope: weight 1/256 is not a multiple of 2^-4",
        ),
        (
            ALIBI_HEAD % "positional: standard, alibi: {slope: 1},",
            "exact",
            "positional standard has no ALiBi slope (set positional: alibi)",
        ),
        (
            ALIBI_HEAD % "positional: alibi, alibi: {slope: -1},",
            "exact",
            "expected a number >= 0, got -1",
        ),
        (
            ROPE_HEAD % "positional: rope, rope: {base: 10, turns: [1]},",
            "{mode: fixed, bits: 16, frac: 8}",
            "keys 'base' and 'turns' cannot be combined",
        ),
    ],
)
def test_spec_errors_are_located(head: str, arithmetic: str, message: str) -> None:
    from verify_tf.spec import SpecError, load_spec_text

    with pytest.raises(SpecError) as caught:
        load_spec_text(SPEC % (head, arithmetic), "spec.yaml")
    assert message in str(caught.value)


def test_run_traces_show_the_rotated_queries_and_the_positions_a_head_sees(tmp_path) -> None:
    from click.testing import CliRunner

    from verify_tf.cli import main

    heads = "\n".join(
        [
            ROPE_HEAD % "positional: rope, scoring: hardmax, rope: {turns: [1/4]},",
            ALIBI_HEAD % "positional: alibi, alibi: {slope: 1/2},",
        ]
    )
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC % (heads, "{mode: fixed, bits: 16, frac: 8}"))
    result = CliRunner().invoke(main, ["run", str(path), "--input", "ab", "--json"])
    assert result.exit_code == 0, result.output
    import json

    layer = json.loads(result.stdout)["layers"][0]
    rope, alibi = layer["heads"]
    # quarter turns at f = 8: q = (1, 0) for a, (0, 1) for b; at stream position 1 a quarter turn maps (0, 1) to
    # (-1, 0); the keys are the same vectors
    assert rope["rotated_queries"] == [["1", "0"], ["-1", "0"]] and rope["rotated_keys"] == rope["rotated_queries"]
    assert "rotated_queries" not in alibi
    assert alibi["scores"][1] == ["-1/2", "0"]  # the query of b is 0, so the scores are 1/2·(j − i) for j = 0, 1
    text = CliRunner().invoke(main, ["run", str(path), "--input", "ab"], env={"COLUMNS": "200"}).stdout
    assert "layer 0 head 0: bidirectional, RoPE (half pairs; θ = 2π·1/4 rad)" in text
    assert "layer 0 head 1: bidirectional, ALiBi (slope 1/2, causal distance)" in text

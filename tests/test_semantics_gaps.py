"""The decisions docs/semantics.md left open until issue 26 (item 6), one test each.

An independent re-implementation written from docs/ alone had to guess these; each is now written down in
docs/semantics.md (the section named in each test) and pinned here. Every expected number is a hand computation
written next to it.
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest

from helpers import head, one_layer
from verify_tf.ir import Block, FeedForward, GridTokens, LayerNorm, Model, matrix, vector, zeros
from verify_tf.runner import Overrides, check_property
from verify_tf.schema.errors import SpecError
from verify_tf.semantics import Fixed, evaluate
from verify_tf.spec import load_spec_text

ROUNDED_TERMS = Fixed(8, 2, "rounded-terms")  # range [-32, 127/4], steps of 1/4


def statuses(text: str, engine: str = "interpret") -> list:
    spec = load_spec_text(text)
    return [check_property(spec, p, Overrides(engine=engine, timeout=60)) for p in spec.properties]


# ---------------------------------------------------------------- §3 rounded-terms: saturation, traces, hardmax


def test_rounded_terms_counts_a_saturated_denominator_and_numerator_term():
    # one token z = 2: q = k = v = 2, s = q·k = 4 exact, e^4 = 54.598...: round(e^4) saturates to 127/4 (one
    # event), round(e^4 · 2) = 109.19... saturates to 127/4 (one event); head = round((127/4)/(127/4)) = 1,
    # no saturation; residual 2 + 1 = 3 in range. Two events in all (main bfa436e counted none).
    model = one_layer(head(1, 1, 1, 1, scoring="softmax"))
    trace = evaluate(model, ROUNDED_TERMS, ((F(2),),))
    assert trace.output == [(F(3),)]
    assert trace.saturations == 2
    # two tokens z = 2: per row 2 denominator and 2 numerator terms saturate: 8 events, head 1 each
    trace = evaluate(model, ROUNDED_TERMS, ((F(2),), (F(2),)))
    assert trace.output == [(F(3),), (F(3),)] and trace.saturations == 8


def test_rounded_terms_counts_a_saturated_head_output():
    # z = 1, q = 1, k = -1: s = -1, round(e^-1) = floor(0.3678·4)/4 = 1/4; v = 127/4 · 1 = 127/4,
    # round(e^-1 · 127/4) = floor(46.71)/4 = 46/4 (in range); head = round((46/4) / (1/4)) = 46 saturates to
    # 127/4: exactly one event, at the head output (main bfa436e counted none).
    model = one_layer(head(1, -1, F(127, 4), 1, scoring="softmax"), residual=False)
    trace = evaluate(model, ROUNDED_TERMS, ((F(1),),))
    assert trace.blocks[0].heads[0].output == [(F(127, 4),)]
    assert trace.saturations == 1


def test_rounded_terms_traces_show_the_denominator_share_times_urpe_c():
    # q = k = 0: s = 0 everywhere, round(e^0) = 1 per key, shares 1/2 each; C = [1/2, 1, 1/2] over offsets
    # -1, 0, 1: row 0 shows (1/2·1, 1/2·1/2) = (1/2, 1/4), row 1 (1/2·1/2, 1/2·1) = (1/4, 1/2).
    # Output row 0: terms round(1·1) + round(1·1/2) = 3/2, over 2: 3/4 (v = 1 at both keys).
    model = one_layer(head(0, 0, 1, 1, scoring="softmax", positional="urpe", rpe=[0, 0, 0], urpe=[F(1, 2), 1, F(1, 2)]))
    trace = evaluate(model, ROUNDED_TERMS, ((F(1),), (F(1),)))
    h = trace.blocks[0].heads[0]
    assert h.weights == [[F(1, 2), F(1, 4)], [F(1, 4), F(1, 2)]]
    assert h.scores == [[0, 0], [0, 0]]
    assert h.output == [(F(3, 4),), (F(3, 4),)]


@pytest.mark.parametrize("scoring", ["hardmax", "uniform"])
def test_hardmax_and_uniform_under_rounded_terms_are_exact_sums(scoring):
    # three equal tokens z = 1, q = k = 0: a three-way tie (hardmax) or uniform: a = 1/3 each, v = 1:
    # exact-sums round(3 · 1/3 · 1) = 1; per-probability would give 3 · floor(1/3·4)/4 = 3/4.
    model = one_layer(head(0, 0, 1, 1, scoring=scoring), residual=False)
    tokens = ((F(1),),) * 3
    for rounding, expected in [("rounded-terms", F(1)), ("exact-sums", F(1)), ("per-probability", F(3, 4))]:
        trace = evaluate(model, Fixed(8, 2, rounding), tokens)
        assert trace.output == [(expected,)] * 3, rounding
    assert evaluate(model, ROUNDED_TERMS, tokens).blocks[0].heads[0].weights == [[F(1, 3)] * 3] * 3


# ---------------------------------------------------------------- §2 LayerNorm: defaults, residual: false, traces

NORM_SPEC = """
model:
  tokens: {grid: 2}
  layers:
    - feed-forward: {w1: [[1, 0], [0, 1]], b1: [0, 0], w2: [[1, 0], [0, 1]], b2: [0, 0], norm: {gamma: [1, 1]}}
arithmetic: fixed
domain: {grid: {values: [0, 1/256]}, length: 1}
properties:
  - output-bounds: {hi: 100}
"""


def test_layernorm_defaults_to_beta_zero_and_torchs_epsilon():
    spec = load_spec_text(NORM_SPEC)
    norm = spec.model.blocks[0].feed_forward.norm
    assert norm.beta == (0, 0) and norm.eps == F(1, 100000)
    # z = (1/256, 0) at f = 8 after the identity FFN with residual: 2·z = (2/256, 0): x = (2, 0), S = 2,
    # y = (2, -2), Q = 8, V = floor(8·65536/8 + 16^8/100000) = floor(65536 + 42949.67) = 108485, s = 329
    # (329² = 108241, 330² = 108900), n = floor(±2·65536/(2·329)) = (199, -200) (65536/329 = 199.19).
    trace = evaluate(spec.model, spec.arithmetic, ((F(1, 256), F(0)),))
    assert trace.output == [(F(199, 256), F(-200, 256))]
    # with eps: 0 the same input gives V = 65536, s = 256, n = (±256)/256 = (1, -1): the default mattered
    spec0 = load_spec_text(NORM_SPEC.replace("{gamma: [1, 1]}", "{gamma: [1, 1], eps: 0}"))
    assert evaluate(spec0.model, spec0.arithmetic, ((F(1, 256), F(0)),)).output == [(F(1), F(-1))]


def _swap_ffn(residual: bool, norm_first: bool) -> Model:
    # relu(z) then swap the two coordinates: o(z) = (relu z_2, relu z_1)
    ff = FeedForward(
        matrix([[1, 0], [0, 1]]),
        zeros(2),
        matrix([[0, 1], [1, 0]]),
        zeros(2),
        residual=residual,
        norm=LayerNorm(vector([1, 1]), zeros(2), F(0)),
        norm_first=norm_first,
    )
    return Model(tokens=GridTokens(2), dim=2, blocks=(Block(None, ff),), readout=vector([1, 0]))


@pytest.mark.parametrize(
    "residual,norm_first,expected,norm_trace",
    [
        # z = (1, 0), f = 2, eps 0. post-LN, no residual: LN(o) = LN(0, 1) = (-1, 1)
        (False, False, (F(-1), F(1)), (F(-1), F(1))),
        # post-LN with residual: LN(z + o) = LN(1, 1) = (0, 0) (a constant position normalises to 0)
        (True, False, (F(0), F(0)), (F(0), F(0))),
        # pre-LN, no residual: o(LN z) = swap(relu(1, -1)) = (0, 1); the norm trace is LN(z) = (1, -1)
        (False, True, (F(0), F(1)), (F(1), F(-1))),
        # pre-LN with residual: z + o(LN z) = (1, 1)
        (True, True, (F(1), F(1)), (F(1), F(-1))),
    ],
)
def test_layernorm_with_and_without_residual(residual, norm_first, expected, norm_trace):
    trace = evaluate(_swap_ffn(residual, norm_first), Fixed(8, 2), ((F(1), F(0)),))
    assert trace.output == [expected]
    assert trace.blocks[0].feed_forward_norm == [norm_trace]
    if not norm_first:  # post-LN: the norm's output is the block's stream
        assert trace.blocks[0].feed_forward_norm == trace.blocks[0].after_feed_forward


def test_before_final_norm_is_the_last_blocks_output():
    model = _swap_ffn(False, False)
    model = Model(
        tokens=model.tokens,
        dim=2,
        blocks=model.blocks,
        readout=model.readout,
        final_norm=LayerNorm(vector([2, 2]), vector([F(1, 4), 0]), F(0)),
    )
    trace = evaluate(model, Fixed(8, 2), ((F(1), F(0)),))
    assert trace.before_final_norm == trace.blocks[-1].output == [(F(-1), F(1))]
    # final LN(-1, 1) = (-1, 1), then 2·n + β = (-2 + 1/4, 2): the readout reads the final norm's output
    assert trace.output == [(F(-7, 4), F(2))] and trace.readout == [F(-7, 4)]


# ---------------------------------------------------------------- §4 domains: plus with values, distinct tokens

PLUS_SPEC = """
model: {tokens: {grid: 1}, layers: []}
arithmetic: exact
domain: {grid: {values: [0, 1/2], plus: -4}, length: 2, distinct-tokens: %s}
properties:
  - output-bounds: {lo: -4, hi: 1}
"""


def test_plus_extends_a_values_grid_and_distinct_tokens_counts_the_added_value():
    domain = load_spec_text(PLUS_SPEC % "false").domain
    assert domain.values == (-4, 0, F(1, 2)) and domain.outside == (-4,)
    assert domain.size() == 9 == len(list(domain.inputs()))  # 3^2
    distinct = load_spec_text(PLUS_SPEC % "true").domain
    inputs = list(distinct.inputs())
    assert distinct.size() == 6 == len(inputs)  # 3·2 ordered pairs of different tokens
    assert ((F(-4),), (F(0),)) in inputs  # the added value is one of the tokens kept apart, not excluded
    assert not distinct.in_grid((F(-4),)) and distinct.in_grid((F(0),))


def test_plus_true_needs_a_step():
    with pytest.raises(SpecError, match="plus: true needs a regular grid") as error:
        load_spec_text(PLUS_SPEC.replace("plus: -4", "plus: true") % "false")
    assert error.value.line == 4


YUN_SPEC = """
model: {tokens: {grid: 1}, layers: []}
arithmetic: exact
domain: {grid: %s, length: 2}
properties:
  - value-range: {interval: yun-lemma6}
"""


@pytest.mark.parametrize("grid", ["{step: 1/4, hi: 1/2}", "{values: [0, 1]}", "{step: 1/2, lo: 1/2, hi: 1}"])
def test_yun_lemma6_on_another_grid_is_an_input_error_at_interval(grid):
    with pytest.raises(SpecError, match="yun-lemma6 needs the grid") as error:
        load_spec_text(YUN_SPEC % grid)
    assert "interval" in error.value.path and error.value.line == 6


def test_yun_lemma6_accepts_g_delta_however_written():
    # {0, 1/2} as values and as a step: δ = 1/2, d = 1, n = 2: [t_l, t_r] = [32, 528] (test_value_range)
    for grid in ["{values: [0, 1/2]}", "{step: 1/2}", "{values: [0, 1/2], plus: -16}"]:
        (verdict,) = statuses(YUN_SPEC % grid)
        assert verdict.statistics["interval"] == ["32", "528"] and verdict.status == "refuted"  # q = x < 32


# ---------------------------------------------------------------- §1 crasp-equivalence: the empty prefix

CRASP_SPEC = """
model:
  tokens: {alphabet: [a, b], embedding: [[1], [0]], bos: "^", bos-embedding: [1]}
  layers: []
arithmetic: exact
domain: {strings: {min-length: %d, max-length: 3}}
properties:
  - crasp-equivalence: {program: ends-in-a.cr, mode: %s}
"""


@pytest.mark.parametrize("engine", ["interpret", "enumerate", "smt"])
def test_crasp_equivalence_compares_the_empty_prefix_in_accept_mode_only(tmp_path, engine):
    # the model's readout is 1 at a and at the BOS, 0 at b: it accepts after each a, and on the empty prefix,
    # where the program (ends in a) rejects. accept mode with the empty word in the domain sees it at "BOS";
    # prefix mode compares the user's positions only (the non-empty prefixes) and agrees everywhere.
    (tmp_path / "ends-in-a.cr").write_text('alphabet a b\naccept = "a"\noutput accept\n')

    def run(min_length: int, mode: str):
        spec = load_spec_text(CRASP_SPEC % (min_length, mode), base_dir=tmp_path)
        return check_property(spec, spec.properties[0], Overrides(engine=engine, timeout=60))

    refuted = run(0, "accept")
    assert refuted.status == "refuted"
    assert refuted.counterexample["string"] == "" and refuted.counterexample["position"] == "BOS"
    assert run(1, "accept").status == "proved"
    assert run(0, "prefix").status == "proved"

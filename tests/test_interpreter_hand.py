"""Hand-computed traces: one tiny model per attention variant and arithmetic mode.

Each expected value is derived in the comment above its assertion, from docs/semantics.md alone.
"""

from fractions import Fraction as F

import pytest

from helpers import alphabet_model, column, ffn_only, head, one_layer, seq
from verify_tf.semantics import Exact, Fixed, UnsupportedInMode, evaluate
from verify_tf.semantics.exp_table import exp_mantissa, exp_table

EXACT = Exact()


def out(model, arith, tokens):
    return column(evaluate(model, arith, tokens).output)


def test_hardmax_ties_are_averaged_uniformly():
    # s_ij = x_i x_j, x = (1, 1, 0). Rows 0,1: scores (1, 1, 0) -> argmax {0,1} -> (1+1)/2 = 1.
    # Row 2: scores (0, 0, 0) -> all tie -> (1+1+0)/3 = 2/3. Residual adds x.
    assert out(one_layer(head(1, 1)), EXACT, seq(1, 1, 0)) == [2, 2, 1 + F(-1, 3)]


def test_causal_uniform_is_prefix_mean():
    assert out(one_layer(head(scoring="uniform", causal=True), residual=False), EXACT, seq(1, 2, 3)) == [1, F(3, 2), 2]


def test_causal_hardmax_ignores_future_keys():
    # s_ij = x_i x_j with x = (1, 3, 2), causal. Row 0 sees only key 0 -> 1. Row 1: (3, 9) -> 3.
    # Row 2: (2, 6, 4) -> key 1 -> 3.
    assert out(one_layer(head(1, 1, causal=True), residual=False), EXACT, seq(1, 3, 2)) == [1, 3, 3]


def test_rpe_bias_moves_the_argmax_and_clips_beyond_its_radius():
    # scores are the bias alone (W_Q = W_K = 0); B = {-1: 0, 0: 0, 1: 1}, offsets beyond +-1 clip.
    # Row 0: B(0), B(1), B(2->1) = 0, 1, 1 -> keys {1, 2} -> (3 + 6)/2 = 9/2.
    # Row 1: B(-1), B(0), B(1) = 0, 0, 1 -> key 2 -> 6.   Row 2: 0, 0, 0 -> mean 3.
    model = one_layer(head(positional="rpe", rpe=[0, 0, 1]), residual=False)
    assert out(model, EXACT, seq(0, 3, 6)) == [F(9, 2), 6, 3]


def test_urpe_multiplies_normalised_weights_without_renormalising():
    # uniform a_ij = 1/3, C = {-1: 0, 0: 1, 1: 2} (clipped), constant input 1:
    # row 0: (1 + 2 + 2)/3 = 5/3; row 1: (0 + 1 + 2)/3 = 1; row 2: (0 + 0 + 1)/3 = 1/3.
    model = one_layer(head(scoring="uniform", positional="urpe", rpe=[0, 0, 0], urpe=[0, 1, 2]), residual=False)
    assert out(model, EXACT, seq(1, 1, 1)) == [F(5, 3), 1, F(1, 3)]


def test_absolute_positional_encoding_is_added_to_the_embedding():
    model = one_layer(head(0, 0, v=0), pe=[[10], [20]])
    trace = evaluate(model, EXACT, seq(1, 2))
    assert column(trace.embedded) == [11, 22]


def test_alphabet_with_bos_prepends_the_bos_embedding():
    # seen: ^ a b with embeddings 5, 1, 0; causal uniform prefix means: 5, 3, 2.
    trace = evaluate(alphabet_model(head(scoring="uniform", causal=True)), EXACT, "ab")
    assert trace.tokens == ("^", "a", "b")
    assert column(trace.output) == [5, 3, 2]


def test_fixed_rounds_negative_averages_toward_minus_infinity():
    # frac = 2: mean(-1/4, 0) = -1/8 -> floor to a multiple of 1/4 = -1/4 (not 0).
    model = one_layer(head(scoring="uniform"), residual=False)
    assert out(model, Fixed(8, 2), seq("-1/4", 0)) == [F(-1, 4), F(-1, 4)]


def test_fixed_floor_in_affine_maps_of_negatives():
    # frac = 2: W1 x = 1/2 * (-3/4) = -3/8 -> floor -1/2 -> relu 0; residual keeps -3/4.
    model = ffn_only([[F(1, 2)]], [0], [[1]], [0])
    trace = evaluate(model, Fixed(8, 2), seq("-3/4"))
    assert column(trace.blocks[0].hidden) == [0]
    assert column(trace.output) == [F(-3, 4)]
    # and with W1 = -1/2: 3/8 -> floor 1/4 -> out = -3/4 + 1/4 = -1/2
    trace = evaluate(ffn_only([[F(-1, 2)]], [0], [[1]], [0]), Fixed(8, 2), seq("-3/4"))
    assert column(trace.output) == [F(-1, 2)]


def test_fixed_saturates_and_counts_it():
    # 4 bits, frac 0: range [-8, 7]; 5 + relu(5) = 10 -> 7, one saturation.
    trace = evaluate(ffn_only([[1]], [0], [[1]], [0]), Fixed(4, 0), seq(5))
    assert column(trace.output) == [7]
    assert trace.saturations == 1


def test_fixed_softmax_uses_the_exp_table_and_one_rounding():
    # frac = 2, s_ij = x_i x_j, x = (0, 1). Row 0: scores (0, 0) -> weights 1/2, 1/2 -> v mean 1/2.
    # Row 1: scores (0, 1); E[(1-0)*4] = floor(4 e^-1) = 1, E[0] = 4 -> weights 1/5, 4/5 -> 4/5 -> floor 3/4.
    model = one_layer(head(1, 1, scoring="softmax"), residual=False)
    assert out(model, Fixed(16, 2), seq(0, 1)) == [F(1, 2), F(3, 4)]


def test_per_probability_rows_need_not_sum_to_one():
    # values all 1 (W_V = 0, b_V = 1). exact-sums: every row averages 1 exactly.
    # per-probability, row 1: floor(4 * 1/5)/4 + floor(4 * 4/5)/4 = 0 + 3/4 -> output 3/4.
    model = one_layer(head(1, 1, v=0, value_bias=1, scoring="softmax"), residual=False)
    assert out(model, Fixed(16, 2, "exact-sums"), seq(0, 1)) == [1, 1]
    assert out(model, Fixed(16, 2, "per-probability"), seq(0, 1)) == [1, F(3, 4)]


def test_per_probability_also_floors_hardmax_tie_weights():
    # frac = 2, three-way tie: weight floor(4/3)/4 = 1/4 each, values 1 -> 3/4 (exact-sums gives 1).
    model = one_layer(head(0, 0, v=0, value_bias=1), residual=False)
    assert out(model, Fixed(16, 2, "per-probability"), seq(0, 0, 0)) == [F(3, 4)] * 3
    assert out(model, Fixed(16, 2, "exact-sums"), seq(0, 0, 0)) == [1] * 3


def test_softmax_is_rejected_in_exact_mode():
    with pytest.raises(UnsupportedInMode, match="softmax"):
        evaluate(one_layer(head(scoring="softmax")), EXACT, seq(0, 1))


def test_exp_table_values():
    table = exp_table(8)
    assert table[0] == 256
    assert table[1] == 255  # 256 e^(-1/256) = 255.0004...
    assert table[256] == 94  # 256 / e = 94.177...
    assert len(table) == 1420  # last t with 256 e^(-t/256) >= 1 is floor(256 ln 256) = 1419
    assert exp_mantissa(1419, 8) == 1 and exp_mantissa(1420, 8) == 0
    assert exp_table(2) == (4, 3, 2, 1, 1, 1)  # floor(4 e^(-t/4)), t = 0..5


def test_yun_lemma6_worked_example():
    from verify_tf.builders.yun import yun_contextual_mapping

    model = yun_contextual_mapping(1, F(1, 2), 2)
    assert evaluate(model, EXACT, seq(0, F(1, 2))).readout == [49, F(99, 2)]


def test_equivariance_checks_transpositions_of_equal_tokens():
    # Regression: with X = (1, 1), τX = X, yet absolute PE makes f(X)_0 != f(X)_1; that is a violation.
    from helpers import verdict as check
    from verify_tf.domain import GridDomain

    model = one_layer(head(0, 0, v=0), pe=[[0], [1]])
    domain = GridDomain(1, (F(1),), 2)
    verdict = check(model, EXACT, domain, "permutation-equivariance", {"on": "output"}, engine="interpret")
    assert verdict.status == "refuted"
    assert verdict.counterexample["input"] == [["1"], ["1"]]
    assert verdict.counterexample["f_of_permuted"] == [["1"], ["2"]]


def test_yang_et_al_rounded_terms_differ_from_exact_sums_on_a_hand_example():
    """Issue 16's example, f = 1: scores (0, 2), values (4, 0) (query 1, keys x = (0, 2), v = 4 - 2x).

    exact-sums (max-stabilised): w = (E[(2-0)·2], E[0]) = (floor(2e^-2), 2) = (0, 2): head = round(0/2) = 0.
    rounded-terms (Yang et al.): Σ round(e^s) = 1 + floor(2e^2)/2 = 1 + 14/2 = 8 and Σ round(e^s·v) = 4 + 0,
    scores exact: head = round(4/8) = 1/2.
    """
    from verify_tf.ir import AttentionLayer, Block, GridTokens, Head, Model, matrix, vector, zeros

    h = Head(
        query=matrix([[0]]),
        key=matrix([[1]]),
        value=matrix([[-2]]),
        output=matrix([[1]]),
        query_bias=vector([1]),
        key_bias=zeros(1),
        value_bias=vector([4]),
        scoring="softmax",
    )
    model = Model(GridTokens(1), 1, (Block(AttentionLayer((h,), zeros(1), residual=False)),), vector([1]))
    tokens = seq(0, 2)
    ours = evaluate(model, Fixed(5, 1, "exact-sums"), tokens)
    theirs = evaluate(model, Fixed(5, 1, "rounded-terms"), tokens)
    assert ours.blocks[0].heads[0].weights[0] == [F(0), F(1)] and ours.readout == [0, 0]
    assert theirs.blocks[0].heads[0].scores[0] == [F(0), F(2)]
    assert theirs.blocks[0].heads[0].weights[0] == [F(1, 8), F(7, 8)]  # round(e^s) / Σ: 1/8, (14/2)/8
    assert theirs.readout == [F(1, 2), F(1, 2)]


# ---------------------------------------------------------------- LayerNorm and i-GELU (docs/semantics.md §2–3)


def norm_model(gamma, beta, eps, *, first=False, ff=None, final=None):
    """A feed-forward-only model whose LayerNorm sits before (first) or after the sublayer; ff defaults to 0."""
    from verify_tf.ir import Block, FeedForward, GridTokens, LayerNorm, Model

    d = len(gamma)
    zero = FeedForward(((F(0),) * d,), (F(0),), tuple((F(0),) for _ in range(d)), (F(0),) * d)
    norm = LayerNorm(tuple(map(F, gamma)), tuple(map(F, beta)), F(eps))
    sub = ff or zero
    block = Block(None, FeedForward(sub.w1, sub.b1, sub.w2, sub.b2, True, sub.activation, norm, first))
    return Model(
        GridTokens(d),
        d,
        (block,),
        (F(1),) + (F(0),) * (d - 1),
        final_norm=LayerNorm(tuple(map(F, final)), (F(0),) * d, F(0)) if final else None,
    )


def test_layernorm_integer_steps_at_two_fractional_bits():
    # z = (1, 0) at f = 2: mantissas x = (4, 0), S = 4, y = d·x − S = (4, −4), Σy² = 32 = d³·4^f·Var -> Var = 1/4.
    # eps = 0: V = ⌊(1/4)·2^(4f)⌋ = 64, s = ⌊√64⌋ = 8 (σ = 8/2^(2f) = 1/2, exact);
    # n·2^f = ⌊y·4^f / (d·s)⌋ = ⌊±64/16⌋ = ±4 -> n = (1, −1); γ = 1, β = 0, zero feed-forward: out (1, −1).
    arith = Fixed(8, 2)
    assert evaluate(norm_model([1, 1], [0, 0], 0), arith, [(F(1), F(0))]).output == [(F(1), F(-1))]
    # torch's eps = 1e-5 inside the root: V = ⌊64 + 256/100000⌋ = 64, the same.
    assert evaluate(norm_model([1, 1], [0, 0], F(1, 100000)), arith, [(F(1), F(0))]).output == [(F(1), F(-1))]
    # eps = 1/4: V = ⌊(1/4 + 1/4)·256⌋ = 128, s = 11 (121 <= 128 < 144); n·4 = ⌊64/22⌋ = 2 and ⌊−64/22⌋ = −3,
    # n = (1/2, −3/4) (torch: ±0.5/√0.5 = ±0.707, floored to quarters); γ = (2, 1), β = (1/4, 0):
    # out = (2·1/2 + 1/4, −3/4) = (5/4, −3/4).
    model = norm_model([2, 1], [F(1, 4), 0], F(1, 4))
    assert evaluate(model, arith, [(F(1), F(0))]).output == [(F(5, 4), F(-3, 4))]


def test_layernorm_floors_sigma_to_2f_bits_and_saturates_n():
    # z = (1, 0, 0, 0) at f = 2: x = (4, 0, 0, 0), y = (12, −4, −4, −4), Σy² = 192 = 4³·4²·Var -> Var = 3/16.
    # V = ⌊(3/16)·256⌋ = 48, s = 6 (σ = 6/16 = 0.375 < √3/4 ≈ 0.433: floored to 2f = 4 bits);
    # n·4 = ⌊12·16/24⌋ = 8 and ⌊−64/24⌋ = −3: n = (2, −3/4, −3/4, −3/4).
    token = [(F(1), F(0), F(0), F(0))]
    wide = evaluate(norm_model([1] * 4, [0] * 4, 0), Fixed(8, 2), token)
    assert wide.output == [(F(2), F(-3, 4), F(-3, 4), F(-3, 4))] and wide.saturations == 0
    # 4 bits hold at most 7/4: n_0 = 2 saturates (one event), then γ·n + β = 7/4.
    narrow = evaluate(norm_model([1] * 4, [0] * 4, 0), Fixed(4, 2), token)
    assert narrow.output == [(F(7, 4), F(-3, 4), F(-3, 4), F(-3, 4))] and narrow.saturations == 1


def test_layernorm_of_a_constant_vector_is_beta():
    # z = (1, 1, 1): y = 0, Var = 0; eps = 0 gives V = 0, s = 0, and max(s, 1) = 1 keeps n = 0/3 = 0 -> out = β.
    out_ = evaluate(norm_model([3, 3, 3], [F(1, 4), F(-1, 2), 0], 0), Fixed(8, 2), [(F(1),) * 3]).output
    assert out_ == [(F(1, 4), F(-1, 2), F(0))]


def test_pre_and_post_layernorm_differ_and_the_final_norm_comes_last():
    # the sublayer adds the constant b2 = (1, 0) whatever its input. Post-LN: LN((1, 0) + (1, 0)) = LN((2, 0))
    # = (1, −1) (eps = 0, as above). Pre-LN: (1, 0) + ff(LN(1, 0)) = (2, 0).
    from verify_tf.ir import FeedForward

    constant = FeedForward(((F(0), F(0)),), (F(0),), ((F(0),), (F(0),)), (F(1), F(0)))
    arith, token = Fixed(8, 2), [(F(1), F(0))]
    assert evaluate(norm_model([1, 1], [0, 0], 0, first=False, ff=constant), arith, token).output == [(F(1), F(-1))]
    pre = evaluate(norm_model([1, 1], [0, 0], 0, first=True, ff=constant), arith, token)
    assert pre.output == [(F(2), F(0))] and pre.blocks[0].feed_forward_norm == [(F(1), F(-1))]
    # a final norm with γ = (1/2, 1) after the pre-LN block: LN((2, 0)) = (1, −1) -> (1/2, −1)
    final = evaluate(norm_model([1, 1], [0, 0], 0, first=True, ff=constant, final=[F(1, 2), 1]), arith, token)
    assert final.before_final_norm == [(F(2), F(0))] and final.output == [(F(1, 2), F(-1))]


def test_layernorm_is_refused_in_exact_arithmetic():
    with pytest.raises(UnsupportedInMode, match="LayerNorm divides by a square root"):
        evaluate(norm_model([1, 1], [0, 0], 0), EXACT, [(F(1), F(0))])


def test_igelu_values():
    from verify_tf.semantics.nonlinear import igelu

    # I-BERT's i-GELU(x) = x(1 + L(x/k))/2, L(u) = sgn(u)[a(min(|u|, −b) + b)² + 1], a = −0.2888, b = −1.769,
    # k = 1.4142. x = 1: u = 5000/7071, u + b = −7508599/7071000, (u + b)² = 56379058942801/49999041000000,
    # L = 1 + a(u + b)² = 42145960971648839/62498801250000000, i-GELU(1) = (1 + L)/2:
    assert igelu(F(1)) == F(104644762221648839, 124997602500000000)  # 0.83717 (GELU(1) = 0.84134)
    # x = −1: 1 + L(−1) = −a(u + b)² = 1 − L(1), so i-GELU(−1) = −(1 − L(1))/2 = (1 + L(1))/2 − 1 = i-GELU(1) − 1
    assert igelu(F(-1)) == igelu(F(1)) - 1  # −0.16283 (GELU(−1) = −0.15866)
    # |x| >= k·(−b) = 2.5017198: L = ±1, so i-GELU is the identity above and 0 below
    assert (igelu(F(3)), igelu(F(-3)), igelu(F(0))) == (3, 0, 0)


def test_igelu_feed_forward_rounds_its_output_once():
    from verify_tf.ir import FeedForward

    # hidden h = W1 z = z (on the f = 4 grid), i-GELU(1) = 0.83717 -> ⌊13.39⌋/16 = 13/16, i-GELU(−1) = −0.16283
    # -> ⌊−2.605⌋/16 = −3/16; W2 = 1, no residual: the output is the rounded i-GELU.
    ff = FeedForward(((F(1),),), (F(0),), ((F(1),),), (F(0),), residual=False, activation="i-gelu")
    model = one_layer(head(0, 0, v=0, o=0), residual=True, ff=ff)
    assert column(evaluate(model, Fixed(12, 4), seq(1, -1)).output) == [F(13, 16), F(-3, 16)]
    # exact arithmetic keeps the rational polynomial
    assert column(evaluate(model, EXACT, seq(1)).output) == [F(104644762221648839, 124997602500000000)]


# ---------------------------------------------------------------- floor(e^s · x) for Yang et al.'s rounded terms


def _floor_exp_times_by_decimal(s: F, x: F, digits: int) -> int:
    """An independent computation: Python's decimal exp at ``digits`` digits (no caching, no margin check)."""
    from decimal import ROUND_FLOOR, Context, Decimal, localcontext

    with localcontext(Context(prec=digits)):
        value = (Decimal(s.numerator) / Decimal(s.denominator)).exp() * Decimal(x.numerator) / Decimal(x.denominator)
        return int(value.to_integral_value(rounding=ROUND_FLOOR))


@pytest.mark.parametrize(
    "s,x",
    [
        (F(324241, 2048), F(64)),  # e^158.3·64 ≈ 3.66·10^70: refused as "too close to an integer" before the fix
        (F(-349881, 4096), F(64)),  # e^-85.4·64 ≈ 10^-35: a positive value below 1 floors to 0
        (F(-349881, 4096), F(-64)),  # ... and its negative to -1
        (F(1, 3), F(5, 7)),
        (F(-7, 2), F(1000)),
        (F(199), F(-3, 4)),
    ],
)
def test_floor_exp_times_agrees_with_an_independent_decimal_computation(s, x):
    from verify_tf.semantics.exp_table import floor_exp_times

    assert floor_exp_times(s, x) == _floor_exp_times_by_decimal(s, x, 400)

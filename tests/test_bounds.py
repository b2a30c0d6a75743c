"""``verify_tf.bounds``: every concrete input's interpreter values lie inside its cube's bounds at every stage, on
random models of every variant (LayerNorm pre/post/final and i-GELU included) and random cubes; a one-input
cube collapses to the interpreter's values; and the tightness the batched evaluator and the split engine rely on
(hull of the winners, 1-D hardmax, Lemma 6)."""

from __future__ import annotations

import itertools
from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from verify_tf.bounds import Cube, cube_bounds
from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.builders.yun import yun_contextual_mapping
from verify_tf.domain import GridDomain, StringDomain
from verify_tf.semantics import Exact, Fixed, evaluate
from verify_tf.semantics.interpreter import (
    _Counter,
    affine as interpreter_affine,
    residual as interpreter_residual,
    rotate as interpreter_rotate,
)


@st.composite
def cases(draw):
    alphabet = draw(st.booleans())
    scoring = draw(st.sampled_from(["hardmax", "hardmax", "uniform", "softmax"]))
    if draw(st.booleans()):
        arith = Exact()
        scoring = "hardmax" if scoring == "softmax" else scoring
    else:
        bits = draw(st.sampled_from([6, 8, 12, 16]))
        arith = Fixed(
            bits,
            draw(st.integers(0, min(bits - 2, 6))),
            draw(st.sampled_from(["exact-sums", "per-probability", "rounded-terms"])),
        )
    # LayerNorm exists in fixed arithmetic only (the interpreter refuses it in exact) and needs its inputs on the
    # grid: no alphabet embeddings or absolute PE (random denominators), grid steps of 2^-f; i-GELU everywhere
    layernorm = draw(st.sampled_from(["none", "none", "pre", "post"])) if isinstance(arith, Fixed) else "none"
    final_norm = isinstance(arith, Fixed) and draw(st.booleans())
    norms = layernorm != "none" or final_norm
    alphabet = alphabet and not norms
    length = draw(st.integers(1, 4))
    bos = "^" if alphabet and draw(st.booleans()) else None
    positions = length + (1 if bos else 0)
    absolute_pe = draw(st.booleans()) and not norms
    config = RandomConfig(
        seed=draw(st.integers(0, 10**6)),
        width=draw(st.integers(1, 3)),
        layers=draw(st.integers(1, 2)),
        heads=draw(st.integers(1, 2)),
        key_dim=draw(st.sampled_from([None, 1])),
        ffn_width=draw(st.sampled_from([0, 0, 2, 3])),
        scoring=scoring,
        positional=draw(st.sampled_from(["standard", "rpe", "urpe"])),
        causal=draw(st.booleans()),
        absolute_pe=absolute_pe,
        max_length=max(positions, draw(st.integers(1, 5))) if absolute_pe else draw(st.integers(1, 5)),
        weight_range=F(draw(st.sampled_from([1, 2, 4]))),
        denominator=draw(st.sampled_from([1, 1, 2, 3, 4])),
        alphabet=("a", "b", "c") if alphabet else None,
        bos=bos,
        activation=draw(st.sampled_from(["relu", "relu", "i-gelu"])),
        layernorm=layernorm,
        final_norm=final_norm,
        layernorm_eps=draw(st.sampled_from([F(1, 100000), F(0), F(1, 3)])),
    )
    model = random_model(config)
    if alphabet:
        domain = StringDomain(("a", "b", "c"), length, length)
    else:
        # LayerNorm needs its inputs on the fixed-point grid (the interpreter refuses others): no thirds then
        steps = [F(1), F(1, 2), F(1, 3)] if not norms else [F(1), F(1, 2)] if arith.frac else [F(1)]
        step = draw(st.sampled_from(steps))
        lo = draw(st.sampled_from([F(-2), F(-1), F(0)]))
        domain = GridDomain(config.width, tuple(lo + k * step for k in range(draw(st.integers(1, 3)))), length)
    tokens = list(domain.tokens)
    picks = [
        draw(st.lists(st.integers(0, len(tokens) - 1), min_size=1, max_size=3, unique=True)) for _ in range(length)
    ]
    cube = Cube(tuple(tuple(tokens[k] for k in pick) for pick in picks))
    return model, arith, cube, draw(st.integers(0, 2**32 - 1))


def _inside(value: F, interval) -> bool:
    return interval[0] <= value <= interval[1]


def _check_vectors(values, boxes, what: str) -> None:
    assert len(values) == len(boxes), what
    for p, (vector, box) in enumerate(zip(values, boxes)):
        for c, (x, iv) in enumerate(zip(vector, box)):
            assert _inside(x, iv), f"{what}[{p}][{c}] = {x} outside {iv}"


def _check_input(model, arith, bounds, tokens) -> None:
    """Every stage of the interpreter's trace on ``tokens`` lies inside ``bounds``."""
    trace = evaluate(model, arith, tokens)
    counter = _Counter(arith)
    _check_vectors(trace.embedded, bounds.embedded, "embedded")
    stream = trace.embedded
    for index, (block, bt, bb) in enumerate(zip(model.blocks, trace.blocks, bounds.blocks)):
        stream_in = stream
        if block.attention is not None:
            if block.attention.norm is not None:
                _check_vectors(bt.attention_norm, bb.attention_norm, f"block {index} attention norm")
                if block.attention.norm_first:
                    stream = bt.attention_norm  # the heads' input
            for h, (head, ht, hb) in enumerate(zip(block.attention.heads, bt.heads, bb.heads)):
                where = f"block {index} head {h}"
                for name, weights, bias, boxes in (
                    ("query", head.query, head.query_bias, hb.query),
                    ("key", head.key, head.key_bias, hb.key),
                    ("value", head.value, head.value_bias, hb.value),
                ):
                    vectors = [interpreter_affine(weights, z, bias, counter) for z in stream]
                    _check_vectors(vectors, boxes, f"{where} {name}")
                    rotated = {"query": hb.rotated_query, "key": hb.rotated_key}.get(name)
                    if rotated is not None:
                        vectors = [interpreter_rotate(head, x, p, counter) for p, x in enumerate(vectors)]
                        _check_vectors(vectors, rotated, f"{where} {name} after RoPE")
                for i, (row, brow) in enumerate(zip(ht.scores, hb.scores)):
                    for j, (s, iv) in enumerate(zip(row, brow)):
                        assert (s is None) == (iv is None)
                        if s is not None:
                            assert _inside(s, iv), f"{where} score[{i}][{j}] = {s} outside {iv}"
                    live = [s for s in row if s is not None]
                    if head.scoring == "hardmax":
                        argmax = {j for j, s in enumerate(row) if s is not None and s == max(live)}
                        assert argmax <= set(hb.winners[i]), f"{where} row {i}: argmax {argmax} ⊄ {hb.winners[i]}"
                    nonzero = {j for j, a in enumerate(ht.weights[i]) if a != 0}
                    assert nonzero <= set(hb.winners[i]), f"{where} row {i}: weights {nonzero} ⊄ {hb.winners[i]}"
                    for j, a in enumerate(ht.weights[i]):
                        assert _inside(a, hb.weights[i][j]), f"{where} weight[{i}][{j}]"
                _check_vectors(ht.output, hb.output, f"{where} output")
            _check_vectors(bt.attention_output, bb.attention_output, f"block {index} attention output")
            if block.attention.norm is not None and not block.attention.norm_first:
                _check_vectors(
                    interpreter_residual(stream_in, bt.attention_output, block.attention.residual, counter),
                    bb.before_attention_norm,
                    f"block {index} residual sum",
                )
            _check_vectors(bt.after_attention, bb.after_attention, f"block {index} after attention")
        if block.feed_forward is not None:
            if block.feed_forward.norm is not None:
                _check_vectors(bt.feed_forward_norm, bb.feed_forward_norm, f"block {index} feed-forward norm")
            ff_in = bt.after_attention if block.attention is not None else stream_in
            ff_inputs = (
                bt.feed_forward_norm if block.feed_forward.norm is not None and block.feed_forward.norm_first else ff_in
            )
            _check_vectors(
                [interpreter_affine(block.feed_forward.w1, z, block.feed_forward.b1, counter) for z in ff_inputs],
                bb.pre_activation,
                f"block {index} pre-activation",
            )
            _check_vectors(bt.hidden, bb.hidden, f"block {index} hidden")
            if block.feed_forward.norm is not None and not block.feed_forward.norm_first:
                update = [
                    interpreter_affine(block.feed_forward.w2, h, block.feed_forward.b2, counter) for h in bt.hidden
                ]
                _check_vectors(
                    interpreter_residual(ff_in, update, block.feed_forward.residual, counter),
                    bb.before_feed_forward_norm,
                    f"block {index} feed-forward residual sum",
                )
            _check_vectors(bt.after_feed_forward, bb.after_feed_forward, f"block {index} after feed-forward")
        stream = bt.output
    if model.final_norm is not None:
        _check_vectors(trace.before_final_norm, bounds.before_final_norm, "before the final norm")
    _check_vectors(trace.output, bounds.output, "output")
    for q, iv in zip(trace.readout, bounds.readout):
        assert _inside(q, iv), f"readout {q} outside {iv}"


def _all_points(bounds) -> bool:
    boxes = [bounds.embedded, bounds.output, [tuple(bounds.readout)]]
    for bb in bounds.blocks:
        for hb in bb.heads:
            boxes += [
                hb.query,
                hb.key,
                hb.value,
                hb.output,
                [tuple(s for s in row if s is not None) for row in hb.scores],
            ]
        boxes += [
            b
            for b in (
                bb.attention_output,
                bb.after_attention,
                bb.hidden,
                bb.after_feed_forward,
                bb.attention_norm,
                bb.feed_forward_norm,
            )
            if b
        ]
    return all(lo == hi for stage in boxes for vector in stage for lo, hi in vector)


@pytest.mark.slow
@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(cases())
def test_every_input_of_a_cube_lies_inside_its_bounds(case):
    model, arith, cube, seed = case
    bounds = cube_bounds(model, arith, cube)
    inputs = list(cube.inputs())
    rng = np.random.default_rng(seed)
    chosen = inputs if len(inputs) <= 12 else [inputs[int(k)] for k in rng.choice(len(inputs), 12, replace=False)]
    event(f"cube of {min(len(inputs), 13)}{'+' if len(inputs) > 12 else ''} inputs")
    norms = (
        [b.attention.norm for b in model.blocks if b.attention]
        + [b.feed_forward.norm for b in model.blocks if b.feed_forward]
        + [model.final_norm]
    )
    if any(n is not None for n in norms):
        event("LayerNorm")
    if any(b.feed_forward and b.feed_forward.activation == "i-gelu" for b in model.blocks):
        event("i-GELU")
    for tokens in chosen:
        _check_input(model, arith, bounds, tokens)
    # a cube with one input: every stage is a point, equal to the interpreter's value
    single = cube_bounds(model, arith, Cube.point(chosen[0]))
    _check_input(model, arith, single, chosen[0])
    assert _all_points(single)
    # ... and the winners are exactly the keys the interpreter gives weight to (hardmax: its argmax set)
    trace = evaluate(model, arith, chosen[0])
    for block, bt, bb in zip(model.blocks, trace.blocks, single.blocks):
        for head, ht, hb in zip(block.attention.heads if block.attention else (), bt.heads, bb.heads):
            for i, row in enumerate(ht.scores):
                live = [j for j, s in enumerate(row) if s is not None]
                top = max(row[j] for j in live)
                if head.scoring == "hardmax":
                    assert hb.winners[i] == tuple(j for j in live if row[j] == top)
                elif head.scoring == "uniform":
                    assert hb.winners[i] == tuple(live)
                elif arith.attention_rounding == "exact-sums":  # softmax: before URPE's C, w_j / W != 0
                    raw = arith.attention_weights(row, "softmax")
                    assert hb.winners[i] == tuple(j for j in live if raw[j] != 0)


def test_hull_of_the_winners_not_n_times_the_largest_value():
    """Hardmax over keys whose values are all in [0, 1]: the head output is in [0, 1], whatever n."""
    model = yun_contextual_mapping(1, F(1, 4), 3)
    bounds = cube_bounds(model, Exact(), Cube.whole(GridDomain.regular(1, F(1, 4), 3).tokens, 3))
    first = bounds.blocks[0].heads[0]
    assert first.value[0] == ((F(0), F(3, 4)),)
    assert all(out == ((F(0), F(3, 4)),) for out in first.output)
    # the two heads' difference, times δ^-d = 4: the attention output is within ±4·(3/4), not ±4·(3·3/4)
    assert bounds.blocks[0].attention_output[0] == ((F(-3), F(3)),)


def test_one_dimensional_hardmax_picks_the_largest_key_without_products():
    """A 1-D query that is positive on the cube selects the keys that can be the largest: here position 2 only."""
    model = yun_contextual_mapping(1, F(1, 4), 3)
    cube = Cube((((F(0),),), ((F(1, 4),), (F(1, 2),)), ((F(3, 4),),)))
    bounds = cube_bounds(model, Exact(), cube)
    head = bounds.blocks[0].heads[0]  # ψ(Z; -1/8): the query u^T z + 1/8 is positive everywhere
    assert all(q[0][0] > 0 for q in head.query)
    assert head.winners == [(2,), (2,), (2,)]
    assert all(out == ((F(3, 4), F(3, 4)),) for out in head.output)
    # the score intervals alone overlap in row 1 (q in [3/8, 5/8], k_1 in [1/4, 1/2], k_2 = 3/4): only the
    # comparison without a product, q (k_1 - k_2) < 0, drops key 1
    assert head.scores[1][1][1] >= head.scores[1][2][0]


def test_lemma6_bounds_contain_every_input_and_a_singleton_cube_is_exact():
    """Every input of G_δ for (1, 1/4, 3) (64 inputs) against the whole-domain bounds, and one point cube."""
    model = yun_contextual_mapping(1, F(1, 4), 3)
    domain = GridDomain.regular(1, F(1, 4), 3)
    bounds = cube_bounds(model, Exact(), Cube.whole(domain.tokens, 3))
    for tokens in itertools.product(domain.tokens, repeat=3):
        _check_input(model, Exact(), bounds, tokens)
    tokens = ((F(0),), (F(1, 4),), (F(1, 2),))
    single = cube_bounds(model, Exact(), Cube.point(tokens))
    assert [lo for lo, hi in single.readout] == evaluate(model, Exact(), tokens).readout
    assert _all_points(single)


def test_per_probability_flooring_loses_mass_below_the_hull():
    """Three tied hardmax keys at f = 2: each weight floors 1/3 to 1/4, so the head outputs 3/4 of the value.

    Hand computation: query = key = z, value = z + 10; on (0, 0, 0) every score is 0, the tie of 3 gives
    p = floor(4/3)/4 = 1/4 per key and head = 3 · 1/4 · 10 = 7.5, below the values' hull [10, 11].
    """
    from verify_tf.ir import AttentionLayer, Block, GridTokens, Head, Model

    one, zero = ((F(1),),), (F(0),)
    head = Head(
        query=one,
        key=one,
        value=one,
        output=one,
        query_bias=zero,
        key_bias=zero,
        value_bias=(F(10),),
        scoring="hardmax",
    )
    model = Model(GridTokens(1), 1, (Block(AttentionLayer((head,), zero)),), (F(1),))
    arith = Fixed(12, 2, "per-probability")
    cube = Cube.whole([(F(0),), (F(1),)], 3)
    bounds = cube_bounds(model, arith, cube)
    assert evaluate(model, arith, ((F(0),),) * 3).blocks[0].heads[0].output[0] == (F(15, 2),)
    assert bounds.blocks[0].heads[0].output[0][0][0] <= F(15, 2)
    for tokens in cube.inputs():
        _check_input(model, arith, bounds, tokens)


def test_knapsack_is_the_linear_programs_optimum():
    """Hand computation: weights a_0 ∈ [0, 1/2], a_1 ∈ [1/4, 1], a_2 ∈ [0, 1], Σ a = 1, values (3, 1, −2). The
    maximum puts 1/2 on item 0 and the rest (1/2) on item 1: 3/2 + 1/2 = 2; the minimum keeps a_1 at its 1/4 and
    puts 3/4 on item 2: 1/4 − 3/2 = −5/4. Both lie inside the hull [−2, 3] and are strictly tighter."""
    from verify_tf.bounds import knapsack_max

    box = [(F(0), F(1, 2)), (F(1, 4), F(1)), (F(0), F(1))]
    assert knapsack_max(box, [F(3), F(1), F(-2)], F(1), F(1)) == 2
    assert -knapsack_max(box, [F(-3), F(-1), F(2)], F(1), F(1)) == F(-5, 4)
    # a mass that may fall short of 1 (per-probability flooring): the maximum stops where values turn negative
    assert knapsack_max(box, [F(-1), F(-1), F(-1)], F(1, 2), F(1)) == F(-1, 2)


def test_softmax_weight_box_from_the_exp_table():
    """f = 2: the table is E = (4, 3, 2, 1, 1, 1) (floor(4·e^(−t/4))). Scores s_0 = 0 and s_1 ∈ [−1/4, 1/4]: d ∈
    [0, 1] for both keys, w_0 ∈ [E[1], E[0]] = [3, 4], w_1 ∈ [E[2], E[0]] = [2, 4] (s_1 can be 1/4 below the top);
    a_0 ∈ [3/(3 + 4), 4/max(4, 4 + 2)] = [3/7, 2/3], a_1 ∈ [2/(2 + 4), 4/max(4, 4 + 3)] = [1/3, 4/7]. The true weights
    (s_1 = −1/4, 0, 1/4 give (4/7, 3/7), (1/2, 1/2), (3/7, 4/7)) lie inside."""
    from verify_tf.bounds import _Rounding, softmax_weight_box

    arith = Fixed(8, 2)
    box = softmax_weight_box(_Rounding(arith), [(F(0), F(0)), (F(-1, 4), F(1, 4))], [0, 1])
    assert box == {0: (F(3, 7), F(2, 3)), 1: (F(1, 3), F(4, 7))}
    for s1 in (F(-1, 4), F(0), F(1, 4)):
        weights = arith.attention_weights([F(0), s1], "softmax")
        assert all(box[j][0] <= weights[j] <= box[j][1] for j in (0, 1))


def test_rounded_terms_heads_are_bounded_inside_the_format():
    """A rounded-terms softmax head on a cube of 9 inputs: the output is now a knapsack over the weight box plus the
    terms' rounding error (docstring of bounds._rounded_terms_row), far inside the format's range [−8, 8 − 2^-4]
    that bounded it before, and it still contains every input's value."""
    model = random_model(RandomConfig(seed=3, width=1, layers=1, scoring="softmax", weight_range=F(1), denominator=2))
    arith = Fixed(8, 4, "rounded-terms")
    cube = Cube((((F(0),), (F(1, 2),), (F(1),)), ((F(-1),), (F(0),), (F(1, 2),))))
    bounds = cube_bounds(model, arith, cube)
    lo, hi = bounds.blocks[0].heads[0].output[0][0]
    assert hi - lo < 4, (lo, hi)
    for tokens in cube.inputs():
        _check_input(model, arith, bounds, tokens)

"""``verify_tf.linear``: on random models of every head kind and random cubes, every input's interpreter values lie
inside each stage's interval *and* between its two linear forms evaluated at that input's variables; the knapsack
and the weight boxes against hand computations; models the domain does not cover are refused by name."""

from __future__ import annotations

import itertools
from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.ir import AlphabetTokens
from verify_tf.linear import CoordinateTable, LinearModel, optimise, refusal, scale_for
from verify_tf.linear.attention import knapsack_max
from verify_tf.linear.backward import DEFAULT, PLANE_STEPS, Slopes, _planes, refined_bound, score_bounds, streams
from verify_tf.semantics import Exact, Fixed, evaluate
from verify_tf.semantics.interpreter import _Counter, affine as interpreter_affine


@st.composite
def cases(draw):
    """A random supported model (no LayerNorm, ReLU, no rounded-terms softmax), a cube (per position and
    coordinate an index range) and the inputs to check."""
    alphabet = draw(st.booleans())
    scoring = draw(st.sampled_from(["hardmax", "hardmax", "uniform", "softmax", "softmax"]))
    if draw(st.booleans()) and scoring != "softmax":
        arith = Exact()
    else:
        bits = draw(st.sampled_from([8, 12, 16]))
        arith = Fixed(
            bits, draw(st.integers(1, min(bits - 4, 6))), draw(st.sampled_from(["exact-sums", "per-probability"]))
        )
    length = draw(st.integers(1, 4))
    bos = "^" if alphabet and draw(st.booleans()) else None
    positions = length + (1 if bos else 0)
    config = RandomConfig(
        seed=draw(st.integers(0, 10**6)),
        width=draw(st.integers(1, 3)),
        layers=draw(st.integers(1, 2)),
        heads=draw(st.integers(1, 2)),
        key_dim=draw(st.sampled_from([None, 1])),
        ffn_width=draw(st.sampled_from([0, 2, 3])),
        scoring=scoring,
        positional=draw(st.sampled_from(["standard", "rpe", "urpe", "alibi"])),
        causal=draw(st.booleans()),
        absolute_pe=draw(st.booleans()),
        max_length=max(positions, 5),
        weight_range=F(draw(st.sampled_from([1, 2]))),
        denominator=draw(st.sampled_from([2, 4] if isinstance(arith, Fixed) else [1, 2, 3, 4])),
        alphabet=("a", "b", "c") if alphabet else None,
        bos=bos,
    )
    model = random_model(config)
    if alphabet:
        symbols = ("a", "b", "c")
        table = CoordinateTable.alphabet(model, symbols, scale_for(arith))
        assert isinstance(model.tokens, AlphabetTokens)
        columns = [list(model.tokens.embed(s)) for s in symbols]
        ranges = [[sorted(draw(st.tuples(st.integers(0, 2), st.integers(0, 2))))] for _ in range(length)]
        decode = lambda picks: tuple(symbols[k[0]] for k in picks)  # noqa: E731
    else:
        if isinstance(arith, Fixed):
            step = F(1, 2 ** draw(st.integers(0, min(arith.frac, 2))))
        else:
            step = draw(st.sampled_from([F(1), F(1, 2), F(1, 3)]))
        values = tuple(F(-1) + k * step for k in range(draw(st.integers(2, 4))))
        table = CoordinateTable.grid(values, scale_for(arith))
        columns = [[v] for v in values]
        ranges = [
            [sorted(draw(st.tuples(st.integers(0, len(values) - 1), st.integers(0, len(values) - 1))))
             for _ in range(config.width)]
            for _ in range(length)
        ]  # fmt: skip
        decode = lambda picks: tuple(tuple(values[k] for k in token) for token in picks)  # noqa: E731
    per_position = [list(itertools.product(*(range(a, b + 1) for a, b in position))) for position in ranges]
    inputs = list(itertools.product(*per_position))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    chosen = inputs if len(inputs) <= 10 else [inputs[int(k)] for k in rng.choice(len(inputs), 10, replace=False)]
    return model, arith, table, columns, np.array([ranges]), [(decode(x), x) for x in chosen]


def _variables(model, columns, ranges, picks):
    """The input's variables t (one per user position and embedding coordinate): (x − lo) / (hi − lo), lo and hi
    the coordinate's extremes over the position's allowed tokens (``columns``: each token's coordinates)."""
    out = []
    for position, pick in zip(ranges[0], picks):
        for c in range(model.dim):
            if len(position) == model.dim:  # grid: coordinate c has its own range into the values
                (a, b), k, column = position[c], pick[c], 0
            else:  # alphabet: one range of symbols, each with d coordinates
                (a, b), k, column = position[0], pick[0], c
            lo = min(columns[m][column] for m in range(a, b + 1))
            hi = max(columns[m][column] for m in range(a, b + 1))
            out.append(F(0) if hi == lo else (columns[k][column] - lo) / (hi - lo))
    return out


def _check(name, values, stage, index, t, scale):
    """Every value inside the stage's interval and between its forms at t (None: no value there, a masked key)."""
    one = scale.one
    for position, vector in enumerate(values):
        for c, y in enumerate(vector if isinstance(vector, tuple) else (vector,)):
            if y is None:
                continue
            at = (0, position, c) if stage.lo.ndim == 3 else (0, position)
            lo, hi = F(int(stage.lo[at]), one), F(int(stage.hi[at]), one)
            lower = F(int(stage.lb[at]), one) + sum(F(int(k), one) * v for k, v in zip(stage.lc[at], t))
            upper = F(int(stage.ub[at]), one) + sum(F(int(k), one) * v for k, v in zip(stage.uc[at], t))
            assert lo <= y <= hi, f"{name}[{position}][{c}] = {y} outside [{lo}, {hi}] ({index})"
            assert lower <= y <= upper, f"{name}[{position}][{c}] = {y} outside its forms [{lower}, {upper}] ({index})"


def check_case(model, arith, table, columns, ranges, chosen, backward=False, variants=(DEFAULT,), choose=None):
    """Every chosen input inside every stage of the forward pass (``backward``: of ``backward.refined_bound``, whose
    query, key, value, pre-activation, stream and readout stages are intersected with their backward bounds, each
    the best of the ``variants``' slopes and, with ``choose``, of a pass with its per-element slopes at every
    stage)."""
    length = ranges.shape[1]
    linear = LinearModel(model, arith, length)
    scale = linear.scale
    inputs = table.inputs(ranges, model.dim)
    if backward:
        result = refined_bound(linear, inputs, variants, None, choose, everywhere=choose is not None)
    else:
        result = linear.bound(inputs, trace=True)
    counter = _Counter(arith)
    for tokens, picks in chosen:
        t = [_variables(model, columns, ranges, picks)[v] for v in result.variables]
        trace = evaluate(model, arith, tokens)
        _check("embedded", trace.embedded, result.embedded, tokens, t, scale)
        stream = trace.embedded
        for b, (block, bt, bb) in enumerate(zip(model.blocks, trace.blocks, result.blocks)):
            if block.attention is not None:
                for h, (head, ht, hb) in enumerate(zip(block.attention.heads, bt.heads, bb.heads)):
                    where = f"block {b} head {h}"
                    pairs = [("value", head.value, head.value_bias, hb.value)]
                    if head.scoring != "uniform":
                        pairs += [
                            ("query", head.query, head.query_bias, hb.query),
                            ("key", head.key, head.key_bias, hb.key),
                        ]
                    for name, weights, bias, stage in pairs:
                        values = [interpreter_affine(weights, z, bias, counter) for z in stream]
                        _check(f"{where} {name}", values, stage, tokens, t, scale)
                    one = scale.one
                    for i, row in enumerate(ht.scores):
                        normalised = arith.attention_weights(row, head.scoring)
                        _check(
                            f"{where} weights of row {i}",
                            [tuple(normalised)],
                            hb.weights[:, i : i + 1],
                            tokens,
                            t,
                            scale,
                        )
                        if hb.differences is not None:
                            live = [j for j, s in enumerate(row) if s is not None]
                            differences = [
                                tuple(row[k] - row[j] if k in live and j in live else None for j in range(len(row)))
                                for k in range(len(row))
                            ]
                            _check(
                                f"{where} differences of row {i}", differences, hb.differences[:, i], tokens, t, scale
                            )
                        total = sum(normalised, F(0))
                        lo, hi = (F(int(x[0, i]), one) for x in hb.mass)
                        assert lo <= total <= hi, f"{where} mass of row {i} = {total} outside [{lo}, {hi}]"
                    _check(f"{where} output", ht.output, hb.output, tokens, t, scale)
                _check(
                    f"block {b} attention output", bt.attention_output, bb.stages["attention_output"], tokens, t, scale
                )
                _check(f"block {b} after attention", bt.after_attention, bb.stages["after_attention"], tokens, t, scale)
            if block.feed_forward is not None:
                ff = block.feed_forward
                ff_in = bt.after_attention if block.attention is not None else stream
                pre = [interpreter_affine(ff.w1, z, ff.b1, counter) for z in ff_in]
                _check(f"block {b} pre-activation", pre, bb.stages["pre_activation"], tokens, t, scale)
                _check(f"block {b} hidden", bt.hidden, bb.stages["hidden"], tokens, t, scale)
                update = [interpreter_affine(ff.w2, hid, ff.b2, counter) for hid in bt.hidden]
                _check(f"block {b} feed-forward output", update, bb.stages["feed_forward_output"], tokens, t, scale)
                _check(
                    f"block {b} after feed-forward",
                    bt.after_feed_forward,
                    bb.stages["after_feed_forward"],
                    tokens,
                    t,
                    scale,
                )
            stream = bt.output
        _check("output", trace.output, result.output, tokens, t, scale)
        _check("readout", trace.readout, result.readout, tokens, t, scale)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(cases())
def test_every_stage_contains_every_input_of_the_cube(case):
    model, arith, table, columns, ranges, chosen = case
    kinds = {h.scoring for b in model.blocks if b.attention for h in b.attention.heads}
    event(f"{'/'.join(sorted(kinds))} {getattr(arith, 'attention_rounding', 'exact')}")
    check_case(model, arith, table, columns, ranges, chosen)


@pytest.mark.slow  # ~40 s of CPU: a backward pass per refined stage
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(cases())
def test_every_backward_stage_contains_every_input_of_the_cube(case):
    """Issue 43: the backward (CROWN-style) bounds, at every stage they tighten (each head's query, key and value,
    each pre-activation, each sublayer's output stream, the readout), contain every chosen input's interpreter
    value, inside the interval and between the forms at that input's variables."""
    model, arith, table, columns, ranges, chosen = case
    kinds = {h.scoring for b in model.blocks if b.attention for h in b.attention.heads}
    event(f"{'/'.join(sorted(kinds))} {getattr(arith, 'attention_rounding', 'exact')}")
    check_case(model, arith, table, columns, ranges, chosen, backward=True)


SLOPES = [Slopes(relu, plane) for relu in ("adaptive", "zero", "one") for plane in (0, 1, 2)]


@pytest.mark.slow  # ~40 s of CPU, like the test above
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(cases(), st.lists(st.sampled_from(SLOPES), min_size=1, max_size=2, unique=True))
def test_every_backward_stage_contains_every_input_of_the_cube_whatever_the_slopes(case, variants):
    """Issue 43's optimised slopes: the backward bounds with any choice of ReLU lower slope and product planes,
    alone (so that a wrong choice is not hidden behind a right one) or the better of two, contain every chosen
    input's interpreter value at every stage they tighten."""
    model, arith, table, columns, ranges, chosen = case
    event(" + ".join(f"{s.relu}/{s.plane}" for s in variants))
    check_case(model, arith, table, columns, ranges, chosen, backward=True, variants=tuple(variants))


def _wild_slopes(seed):
    """A ``backward.Choose`` that returns seeded random per-element slopes, a third of them outside their valid
    ranges (below 0, above one or PLANE_STEPS): the exact pass must clamp them, so every array is sound."""
    rng = np.random.default_rng(seed)

    def choose(linear, result, lam, blocks, attention_only):
        params = optimise._start(linear, result, np.shape(lam)[1], blocks, attention_only)
        one = linear.scale.one
        alpha = {
            k: rng.integers(-one // 2, 3 * one // 2 + 1, np.shape(v)) for k, v in params.items() if isinstance(k, int)
        }
        theta = {k: rng.integers(-8, PLANE_STEPS + 9, np.shape(v)) for k, v in params.items() if isinstance(k, tuple)}
        return Slopes(alpha=alpha, theta=theta)

    return choose


@pytest.mark.slow  # ~60 s of CPU: two backward passes per refined stage
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(cases(), st.integers(0, 2**32 - 1))
def test_every_backward_stage_contains_every_input_of_the_cube_whatever_the_per_element_slopes(case, seed):
    """alpha-CROWN's per-element slopes (``Slopes.alpha``, ``Slopes.theta``): with seeded random arrays, in and out
    of their ranges, at every stage, the bounds contain every chosen input's interpreter value, exactly."""
    model, arith, table, columns, ranges, chosen = case
    check_case(model, arith, table, columns, ranges, chosen, backward=True, choose=_wild_slopes(seed))


@pytest.mark.slow  # ~60 s of CPU: an optimisation (13 float passes) and an exact pass per refined stage
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(cases())
def test_every_backward_stage_contains_every_input_of_the_cube_with_optimised_slopes(case):
    """Issue 43: the slopes ``optimise.choose`` picks by gradient on the float twin, at every stage (the engine's
    readout and the "every stage" configuration), keep every chosen input inside every bound, exactly."""
    model, arith, table, columns, ranges, chosen = case
    kinds = {h.scoring for b in model.blocks if b.attention for h in b.attention.heads}
    event(f"{'/'.join(sorted(kinds))} {getattr(arith, 'attention_rounding', 'exact')}")
    check_case(model, arith, table, columns, ranges, chosen, backward=True, choose=optimise.choose)


@pytest.mark.slow  # ~40 s of CPU, like the backward test above, plus the score passes
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(cases())
def test_every_backward_stage_contains_every_input_of_the_cube_with_the_scores_bounded_backward(case):
    """Issue 43: with each head's scores and score differences bounded backward through q·k too
    (``backward.SCORES``: off in the engine, measured in docs/performance.md), every stage still contains every
    chosen input's interpreter value (the differences' check covers the saturation's fallback, which the refined
    score intervals decide)."""
    import verify_tf.linear.backward as backward

    model, arith, table, columns, ranges, chosen = case
    before = backward.SCORES
    backward.SCORES = ("scores", "differences")
    try:
        check_case(model, arith, table, columns, ranges, chosen, backward=True)
    finally:
        backward.SCORES = before


@pytest.mark.slow  # ~30 s of CPU: four backward passes per head
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(cases())
def test_the_backward_score_bounds_alone_contain_every_input_of_the_cube(case):
    """Issue 43: ``backward.score_bounds`` on its own (not intersected with the forward bounds, so that a wrong
    bound is not hidden behind a right one), with either pair of McCormick planes: every chosen input's scores
    before rounding (q_i·k_j + B[j − i], the interpreter's affine maps) lie inside the score bounds, and its rounded
    differences s_ik − s_ij (the interpreter's trace) inside the difference bounds wherever no score of the row
    can be clipped (the bounds' stated domain: the caller keeps the plain intervals there)."""
    model, arith, table, columns, ranges, chosen = case
    linear = LinearModel(model, arith, ranges.shape[1])
    inputs = table.inputs(ranges, model.dim)
    result = refined_bound(linear, inputs)
    jj, kk = linear.rounding.pairs
    counter = _Counter(arith)
    checked = 0
    for index, (block, forms_) in enumerate(zip(model.blocks, result.blocks)):
        if block.attention is None:
            continue
        z = streams(linear, result)[index]
        for h, (head, plan, hb) in enumerate(zip(block.attention.heads, linear.heads[index], forms_.heads)):
            if hb.query is None:
                continue
            found = {
                (pairs, first): score_bounds(linear, result, index, z, plan, hb.query, hb.key, pairs, first)
                for pairs in (True, False)
                for first in (True, False)
            }
            for tokens, picks in chosen:
                t = [_variables(model, columns, ranges, picks)[v] for v in result.variables]
                trace = evaluate(model, arith, tokens)
                stream = trace.embedded if index == 0 else trace.blocks[index - 1].output
                q = [interpreter_affine(head.query, x, head.query_bias, counter) for x in stream]
                k = [interpreter_affine(head.key, x, head.key_bias, counter) for x in stream]
                raw = [
                    [sum((a * b for a, b in zip(q[i], k[j])), F(0)) + head.relative_bias(j - i) for j in range(len(k))]
                    for i in range(len(q))
                ]
                rows = trace.blocks[index].heads[h].scores
                for first in (True, False):
                    _check(f"block {index} head {h} scores", [tuple(r) for r in raw], found[False, first], tokens, t,
                           linear.scale)  # fmt: skip
                    low, high = getattr(arith, "min_value", None), getattr(arith, "max_value", None)
                    for i, row in enumerate(rows):
                        inside = low is None or all(low <= x <= high for x in raw[i])
                        values = tuple(row[k_] - row[j] if inside and row[j] is not None and row[k_] is not None
                                       else None for j, k_ in zip(jj, kk))  # fmt: skip
                        _check(f"block {index} head {h} differences", [values], found[True, first][:, i : i + 1],
                               tokens, t, linear.scale)  # fmt: skip
                        checked += 1
    event(f"rows checked: {min(checked, 10)}{'+' if checked > 10 else ''}")


@pytest.mark.parametrize(
    "theta, upper, lower",
    [
        # a ∈ [1, 3], g ∈ [−2, 4], doubled: 2θ = 2 is McCormick's (a − 3)(g + 2) <= 0, i.e. a·g <= 3g − 2a + 6, and
        # (a − 1)(g + 2) >= 0, i.e. a·g >= g − 2a + 2; 2θ = 0 the others, (a − 1)(g − 4) <= 0: a·g <= g + 4a − 4,
        # and (a − 3)(g − 4) >= 0: a·g >= 3g + 4a − 12; 2θ = 1 their halves' sum (the midpoint planes, by hand)
        (2, (6, -4, 12), (2, -4, 4)),
        (0, (2, 8, -8), (6, 8, -24)),
        (1, (4, 2, 2), (4, 2, -10)),
    ],
)
def test_product_planes_by_hand(theta, upper, lower):
    """``backward._planes``: the doubled (slope on g, slope on a, constant) of each side for each choice of θ."""
    a_lo, a_hi = np.array([[1]]), np.array([[3]])  # with the trailing value axis, as a head's weights come
    g_lo, g_hi = np.array([[-2]]), np.array([[4]])
    up, down = _planes(a_lo, a_hi, g_lo, g_hi, theta)
    assert tuple(int(np.asarray(x).reshape(-1)[0]) for x in up) == upper
    assert tuple(int(np.asarray(x).reshape(-1)[0]) for x in down) == lower
    for a, g in itertools.product(range(1, 4), range(-2, 5)):  # the planes hold over the box's integer points
        assert upper[0] * g + upper[1] * a + upper[2] >= 2 * a * g >= lower[0] * g + lower[1] * a + lower[2]


def test_the_vectorised_knapsack_agrees_with_the_exact_one():
    """``attention.knapsack_max`` on integers over 2^K against ``bounds.knapsack_max`` in Fractions: the hand
    example of tests/test_bounds.py (maximum 2, minimum −5/4), and random boxes that contain a point of the simplex."""
    import random

    from verify_tf.bounds import knapsack_max as exact

    one = 1 << 16
    box = [(F(0), F(1, 2)), (F(1, 4), F(1)), (F(0), F(1))]
    lo = np.array([[int(a * one) for a, _ in box]])
    hi = np.array([[int(b * one) for _, b in box]])
    values = np.array([[3 * one, one, -2 * one]])
    ones = np.array([one])
    assert knapsack_max(lo, hi, values, ones, ones, one)[0] == 2 * one
    assert -knapsack_max(lo, hi, -values, ones, ones, one)[0] == -5 * one // 4
    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(1, 5)
        point = [rng.random() for _ in range(n)]
        point = [F(round(p / sum(point) * 64), 64) for p in point]  # on 1/64: a point with Σ = 1 (up to rounding)
        point[-1] = 1 - sum(point[:-1], F(0))
        if point[-1] < 0:
            continue
        box = [(max(F(0), p - F(rng.randint(0, 8), 64)), min(F(1), p + F(rng.randint(0, 8), 64))) for p in point]
        value = [F(rng.randint(-64, 64), 16) for _ in range(n)]
        want = exact(box, value, F(1), F(1))
        got = knapsack_max(
            np.array([[int(a * one) for a, _ in box]]),
            np.array([[int(b * one) for _, b in box]]),
            np.array([[int(v * one) for v in value]]),
            ones,
            ones,
            one,
        )[0]
        assert got == -((-want * one).numerator // (want * one).denominator)  # the exact maximum, rounded up


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"layernorm": "pre"}, "LayerNorm is bounded by intervals only"),
        ({"activation": "i-gelu", "ffn_width": 2}, "activation i-gelu is bounded by intervals only"),
        ({"positional": "rope"}, "RoPE is bounded by intervals only"),
    ],
)
def test_models_the_domain_does_not_model_are_refused_by_name(change, why):
    model = random_model(RandomConfig(seed=1, width=2, scoring="softmax", **change))
    assert refusal(model, Fixed(12, 4)) == why
    with pytest.raises(ValueError, match=why):
        LinearModel(model, Fixed(12, 4), 2)
    softmax = random_model(RandomConfig(seed=1, width=2, scoring="softmax"))
    assert refusal(softmax, Fixed(12, 4, "rounded-terms")) == "rounded-terms softmax is bounded by intervals only"
    assert refusal(softmax, Exact()) == "softmax needs fixed arithmetic"
    assert refusal(softmax, Fixed(12, 4)) is None

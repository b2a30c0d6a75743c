"""``verify_tf.linear``: on random models of every head kind and random cubes, every input's interpreter values lie
inside each stage's interval *and* between its two linear forms evaluated at that input's variables; the knapsack
and the weight boxes against hand computations; models the domain does not cover are refused by name."""

from __future__ import annotations

import itertools
from fractions import Fraction as F

import numpy as np
from hypothesis import HealthCheck, event, given, settings, strategies as st

from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.ir import AlphabetTokens
from verify_tf.linear import CoordinateTable, LinearModel, scale_for
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
        positional=draw(st.sampled_from(["standard", "rpe", "urpe"])),
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
    """Every value inside the stage's interval and between its forms at t."""
    one = scale.one
    for position, vector in enumerate(values):
        for c, y in enumerate(vector if isinstance(vector, tuple) else (vector,)):
            at = (0, position, c) if stage.lo.ndim == 3 else (0, position)
            lo, hi = F(int(stage.lo[at]), one), F(int(stage.hi[at]), one)
            lower = F(int(stage.lb[at]), one) + sum(F(int(k), one) * v for k, v in zip(stage.lc[at], t))
            upper = F(int(stage.ub[at]), one) + sum(F(int(k), one) * v for k, v in zip(stage.uc[at], t))
            assert lo <= y <= hi, f"{name}[{position}][{c}] = {y} outside [{lo}, {hi}] ({index})"
            assert lower <= y <= upper, f"{name}[{position}][{c}] = {y} outside its forms [{lower}, {upper}] ({index})"


def check_case(model, arith, table, columns, ranges, chosen):
    length = ranges.shape[1]
    linear = LinearModel(model, arith, length)
    scale = linear.scale
    result = linear.bound(table.inputs(ranges, model.dim), trace=True)
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
                        if hb.differences is not None:
                            for j, k in itertools.product(range(len(row)), repeat=2):
                                if row[j] is None or row[k] is None:
                                    continue
                                lo, hi = (F(int(x[0, i, k, j]), one) for x in (hb.differences.lo, hb.differences.hi))
                                assert lo <= row[k] - row[j] <= hi, f"{where} s[{i}][{k}] - s[{i}][{j}] ({tokens})"
                        normalised = arith.attention_weights(row, head.scoring)
                        for j, a in enumerate(normalised):
                            lo, hi = (F(int(x[0, i, j]), one) for x in (hb.weights.lo, hb.weights.hi))
                            assert lo <= a <= hi, f"{where} weight[{i}][{j}] = {a} outside [{lo}, {hi}] ({tokens})"
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

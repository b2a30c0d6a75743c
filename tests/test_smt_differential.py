"""Differential soundness tests of the SMT encoder against the reference interpreter.

For random small models (every scoring incl. hardmax ties from small integer weights, causal or not,
standard / RPE / URPE, absolute PE, feed-forward, exact and fixed arithmetic incl. softmax and
per-probability rounding) and a random concrete input, the solver must find
  "every encoded value == the interpreter's value"          satisfiable, and
  "some encoded value != the interpreter's value"           unsatisfiable,
at every position of every recorded layer (embedding, scores, weights, head outputs, attention output,
residual streams, hidden ReLU layer, final output, readout). Some positions are pinned as constants (the
encoder's constant-folding path), the rest are symbolic variables constrained to the input.

LayerNorm (pre-LN, post-LN, a final norm; eps 0, torch's 1e-5 and large) and i-GELU feed-forwards have their
own strategy (``norm_cases``), in fixed arithmetic (LayerNorm) and exact arithmetic (i-GELU alone).

Sized for CI: 560 models in total across the variants (measured ~75 s on one core, the suite runs under
``-n 2``); derandomised so CI failures reproduce.
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction as F

import pytest
import z3
from hypothesis import HealthCheck, given, settings, strategies as st

from helpers import alphabet_model, ffn_only, head, one_layer, seq
from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.domain import GridDomain
from verify_tf.ir import Model
from verify_tf.semantics import Exact, Fixed, evaluate
from verify_tf.semantics.interpreter import Trace
from verify_tf.symbolic.encoder import SymTrace, encode_model
from verify_tf.symbolic.inputs import grid_input, string_input
from verify_tf.symbolic.values import Builder, Sym

pytestmark = pytest.mark.slow  # differential: the z3 encoding against the interpreter on random models

SETTINGS = dict(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def pairs(sym: SymTrace, ref: Trace):
    """(encoded value, interpreter value) for every recorded value of both traces."""

    def vectors(a, b):
        assert len(a) == len(b)
        for va, vb in zip(a, b):
            assert len(va) == len(vb)
            yield from zip(va, vb)

    yield from vectors(sym.embedded, ref.embedded)
    assert len(sym.blocks) == len(ref.blocks)
    for sb, rb in zip(sym.blocks, ref.blocks):
        for sh, rh in zip(sb.heads, rb.heads):
            for srow, rrow in zip(sh.scores, rh.scores):
                for s, r in zip(srow, rrow):
                    assert (s is None) == (r is None)
                    if s is not None:
                        yield s, r
            for srow, rrow in zip(sh.weights, rh.weights):
                for s, r in zip(srow, rrow):
                    if s is not None:  # softmax exact-sums weights are not linear terms
                        yield s, r
            yield from vectors(sh.output, rh.output)
        for name in (
            "attention_norm",
            "attention_output",
            "after_attention",
            "hidden",
            "feed_forward_norm",
            "after_feed_forward",
        ):
            a, b = getattr(sb, name), getattr(rb, name)
            assert (a is None) == (b is None), name
            if a is not None:
                yield from vectors(a, b)
    assert (sym.before_final_norm is None) == (ref.before_final_norm is None)
    if sym.before_final_norm is not None:
        yield from vectors(sym.before_final_norm, ref.before_final_norm)
    yield from vectors(sym.output, ref.output)
    yield from zip(sym.readout, ref.readout)


def assert_encoding_matches(model: Model, arith, tokens: tuple, symbolic_positions: set[int]) -> None:
    builder = Builder()
    fixed = {i: t for i, t in enumerate(tokens) if i not in symbolic_positions}
    if isinstance(tokens[0], str):
        alphabet = tuple(s for s in model.tokens.symbols if s != model.tokens.bos)
        inp = string_input(alphabet, len(tokens), builder, fixed=fixed)
        pins = (
            [v == alphabet.index(tokens[i]) for i, v in zip(sorted(symbolic_positions), inp.index_terms)]
            if len(alphabet) > 1
            else []
        )
    else:
        values = sorted({c for t in tokens for c in t})
        domain = GridDomain(len(tokens[0]), tuple(values), len(tokens))
        inp = grid_input(domain, builder, fixed=fixed)
        wanted = [values.index(c) for i in sorted(symbolic_positions) for c in tokens[i]]
        pins = [v == k for v, k in zip(inp.index_terms, wanted)]
    trace = encode_model(model, arith, inp, builder)
    reference = evaluate(model, arith, tokens)
    equalities = [builder.eq(s, Sym.const(r)) for s, r in pairs(trace, reference)]
    base = builder.assertions + pins
    solver = z3.Solver()
    solver.add(base + equalities)
    assert solver.check() == z3.sat, "the encoding excludes the interpreter's own behaviour"
    solver = z3.Solver()
    solver.add(base + [z3.Not(z3.And(equalities))])
    result = solver.check()
    if result == z3.sat:
        m = solver.model()
        bad = [
            (str(r), m.eval(z3.IntVal(0) + s.num if not s.is_const else z3.IntVal(s.num)), s.den)
            for s, r in pairs(trace, reference)
            if z3.is_false(m.eval(builder.eq(s, Sym.const(r))))
        ]
        pytest.fail(f"encoding differs from the interpreter: {bad[:5]}")
    assert result == z3.unsat


# ---------------------------------------------------------------- strategies


@st.composite
def configs(draw, scorings, alphabet=False):
    scoring = draw(st.sampled_from(scorings))
    return RandomConfig(
        seed=draw(st.integers(0, 10_000)),
        width=draw(st.integers(1, 2)),
        layers=draw(st.integers(1, 2)),
        heads=draw(st.integers(1, 2)),
        key_dim=draw(st.sampled_from([None, 1])),
        ffn_width=draw(st.integers(0, 2)),
        scoring=scoring,
        positional=draw(st.sampled_from(["standard", "rpe", "urpe"])),
        causal=draw(st.booleans()),
        absolute_pe=draw(st.booleans()),
        max_length=4,
        weight_range=F(draw(st.sampled_from([1, 2]))),
        denominator=draw(st.sampled_from([1, 2])),  # small integer weights: ties happen often
        alphabet=("a", "b", "c") if alphabet else None,
        bos="^" if alphabet and draw(st.booleans()) else None,
    )


GRID = [F(-1), F(-1, 2), F(0), F(1, 2), F(1)]


@st.composite
def grid_cases(draw, scorings):
    config = draw(configs(scorings))
    n = draw(st.integers(1, 3))
    tokens = tuple(tuple(draw(st.sampled_from(GRID)) for _ in range(config.width)) for _ in range(n))
    symbolic = set(draw(st.lists(st.integers(0, n - 1), unique=True, min_size=1)))
    return random_model(config), tokens, symbolic


@st.composite
def string_cases(draw, scorings):
    config = draw(configs(scorings, alphabet=True))
    n = draw(st.integers(1, 3))
    tokens = tuple(draw(st.sampled_from("abc")) for _ in range(n))
    symbolic = set(draw(st.lists(st.integers(0, n - 1), unique=True, min_size=1)))
    return random_model(config), tokens, symbolic


fixed_modes = st.builds(
    Fixed,
    bits=st.integers(5, 10),
    frac=st.integers(1, 3),
    attention_rounding=st.sampled_from(["exact-sums", "per-probability"]),
)


# ---------------------------------------------------------------- random models (560 in total)


@settings(max_examples=150, **SETTINGS)
@given(grid_cases(["hardmax", "uniform"]))
def test_exact_grid_models(case) -> None:
    model, tokens, symbolic = case
    assert_encoding_matches(model, Exact(), tokens, symbolic)


@settings(max_examples=150, **SETTINGS)
@given(grid_cases(["hardmax", "uniform"]), fixed_modes)
def test_fixed_grid_models(case, arith) -> None:
    model, tokens, symbolic = case
    assert_encoding_matches(model, arith, tokens, symbolic)  # saturation happens at 5-6 bits


@settings(max_examples=120, **SETTINGS)
@given(grid_cases(["softmax"]), fixed_modes)
def test_fixed_softmax_models(case, arith) -> None:
    model, tokens, symbolic = case
    assert_encoding_matches(model, arith, tokens, symbolic)


@settings(max_examples=140, **SETTINGS)
@given(string_cases(["hardmax", "uniform", "softmax"]), st.one_of(st.just(Exact()), fixed_modes))
def test_alphabet_models(case, arith) -> None:
    model, tokens, symbolic = case
    if isinstance(arith, Exact) and any(h.scoring == "softmax" for _, _, h in model.heads()):
        arith = Fixed(8, 2)
    assert_encoding_matches(model, arith, tokens, symbolic)


@st.composite
def norm_cases(draw, layernorm=True):
    """Models with LayerNorm on every sublayer (pre or post), an optional final norm, ReLU or i-GELU."""
    config = draw(configs(["hardmax", "uniform", "softmax"] if layernorm else ["hardmax", "uniform"]))
    config = replace(
        config,
        width=draw(st.integers(1, 3)),
        layers=1,
        ffn_width=draw(st.integers(1, 2)),
        activation=draw(st.sampled_from(["relu", "i-gelu"])) if layernorm else "i-gelu",
        layernorm=draw(st.sampled_from(["pre", "post"])) if layernorm else "none",
        final_norm=layernorm and draw(st.booleans()),
        layernorm_eps=draw(st.sampled_from([F(0), F(1, 100000), F(1, 3), F(5)])),
    )
    n = draw(st.integers(1, 3))
    tokens = tuple(tuple(draw(st.sampled_from(GRID)) for _ in range(config.width)) for _ in range(n))
    symbolic = set(draw(st.lists(st.integers(0, n - 1), unique=True, min_size=1)))
    return random_model(config), tokens, symbolic


@settings(max_examples=70, **SETTINGS)
@given(
    norm_cases(),
    st.builds(
        Fixed,
        bits=st.integers(6, 12),
        frac=st.integers(1, 4),
        attention_rounding=st.sampled_from(["exact-sums", "per-probability"]),
    ),
)
def test_fixed_layernorm_and_igelu_models(case, arith) -> None:
    model, tokens, symbolic = case
    assert_encoding_matches(model, arith, tokens, symbolic)


@settings(max_examples=30, **SETTINGS)
@given(norm_cases(layernorm=False))
def test_exact_igelu_models(case) -> None:
    model, tokens, symbolic = case
    assert_encoding_matches(model, Exact(), tokens, symbolic)


# ---------------------------------------------------------------- hand-written ties and rounding


def test_hardmax_three_way_tie_is_averaged() -> None:
    model = one_layer(head(q=0, k=1, v=1), residual=False)  # all scores 0: a three-way tie
    assert evaluate(model, Exact(), seq(1, 2, 6)).output == [(F(3),)] * 3
    assert_encoding_matches(model, Exact(), seq(1, 2, 6), {0, 1, 2})
    assert_encoding_matches(model, Exact(), seq(1, 2, 6), {1})


def test_hardmax_tie_per_probability_weights_lose_mass() -> None:
    model = one_layer(head(q=0, k=1, v=1), residual=False)
    arith = Fixed(8, 2, "per-probability")  # 1/3 floors to 1/4: output (1+2+3)/4 = 3/2
    assert evaluate(model, arith, seq(1, 2, 3)).output == [(F(3, 2),)] * 3
    assert_encoding_matches(model, arith, seq(1, 2, 3), {0, 1, 2})


def test_negative_values_round_toward_minus_infinity() -> None:
    model = ffn_only([[F(1, 2)]], [0], [[1]], [0])  # relu(x/2) then identity, residual
    arith = Fixed(8, 2)
    # x = -1/4: W1 x = -1/8 floors to -1/4 (not 0), relu gives 0, output -1/4
    assert evaluate(model, arith, seq(F(-1, 4))).output == [(F(-1, 4),)]
    assert_encoding_matches(model, arith, seq(F(-1, 4), F(3, 4)), {0, 1})
    shrink = ffn_only([[F(-1, 2)]], [F(-1, 4)], [[F(3, 4)]], [0])
    assert_encoding_matches(shrink, arith, seq(F(-1, 4), F(3, 4), F(1, 4)), {0, 2})


def test_saturation_clips_both_ends() -> None:
    model = ffn_only([[4]], [0], [[4]], [0])
    arith = Fixed(6, 1)  # range [-16, 31/2]
    assert evaluate(model, arith, seq(3)).output == [(F(31, 2),)]
    assert_encoding_matches(model, arith, seq(3, -3, F(1, 2)), {0, 1, 2})


def test_softmax_per_probability_rows_do_not_sum_to_one() -> None:
    # Research note: RPE bias [11, 4, 0, -8, -7] (mantissas, f = 2 here scaled) and n = 3 gives row sums
    # below 1 that differ by position; the encoder must reproduce each floored probability.
    bias = [F(11, 4), 1, 0, -2, F(-7, 4)]
    model = one_layer(head(q=0, k=0, v=1, scoring="softmax", positional="rpe", rpe=bias), residual=False)
    arith = Fixed(10, 2, "per-probability")
    trace = evaluate(model, arith, seq(1, 1, 1))
    assert len({row for row in trace.output}) > 1  # a constant input, different outputs by position
    assert_encoding_matches(model, arith, seq(1, 1, 1), {0, 1, 2})
    assert_encoding_matches(model, Fixed(10, 2), seq(1, 2, 3), {0, 2})


def test_causal_urpe_hardmax_with_bos() -> None:
    model = alphabet_model(head(q=1, k=1, v=1, causal=True, positional="urpe", rpe=[0, 0, 0], urpe=[2, 1, 3]))
    assert_encoding_matches(model, Exact(), ("a", "b", "a"), {0, 1, 2})
    assert_encoding_matches(model, Fixed(8, 2), ("b", "b", "a"), {2})


@st.composite
def rounded_terms_cases(draw):
    """Softmax models small enough that every exact score takes few values (the encoding's limit)."""
    config = RandomConfig(
        seed=draw(st.integers(0, 10_000)),
        width=1,
        layers=1,
        heads=draw(st.integers(1, 2)),
        key_dim=1,
        ffn_width=draw(st.integers(0, 2)),
        scoring="softmax",
        positional=draw(st.sampled_from(["standard", "rpe", "urpe"])),
        causal=draw(st.booleans()),
        max_length=4,
        weight_range=F(1),
        denominator=2,
    )
    n = draw(st.integers(1, 3))
    tokens = tuple((draw(st.sampled_from(GRID)),) for _ in range(n))
    symbolic = set(draw(st.lists(st.integers(0, n - 1), unique=True, min_size=1)))
    return random_model(config), tokens, symbolic


@settings(max_examples=40, **SETTINGS)
@given(rounded_terms_cases(), st.sampled_from([Fixed(6, 1, "rounded-terms"), Fixed(7, 2, "rounded-terms")]))
def test_rounded_terms_softmax_models(case, arith) -> None:
    """Yang et al.'s rounding: exact scores, each exponential term floored; the floor of e^s·x is encoded by a
    60-digit bracket, so the encoding must still pin every value to the interpreter's."""
    model, tokens, symbolic = case
    assert_encoding_matches(model, arith, tokens, symbolic)


# i-GELU's clip c = k·(−b) = 1.4142 · 1.769 = 2.5017198 (nonlinear.IGELU_CLIP): c·2^4 = 40.03 and c·2^6 = 160.11, so
# the zero region is m <= ⌊−c·2^f⌋ = −41 (f = 4) / −161 (f = 6), the identity region m >= 41 / 161.
IGELU_EDGES = {4: (-41, 41), 6: (-161, 161)}


@pytest.mark.parametrize("encoding", ["table", "cubic"])
@pytest.mark.parametrize("arith", [Fixed(10, 4), Fixed(12, 6)], ids=["f4", "f6"])
def test_fixed_igelu_encoding_matches_the_interpreter_at_every_mantissa(arith, encoding, monkeypatch) -> None:
    """Every mantissa of ranges that end at or just inside the zero region's edge ⌊−c·2^f⌋, straddle 0, end at or
    just inside the clip c, reach past the largest value (saturation), or cover the whole of (−c, c): the value
    the solver must give equals the interpreter's round(igelu(x)), and lies within the encoded bounds. "table"
    is the ite chain over the mantissa (encoder._igelu_table), "cubic" the polynomial (the table switched off)."""
    from verify_tf.semantics.nonlinear import IGELU_CLIP, igelu
    from verify_tf.symbolic import encoder

    scale = arith.scale
    zero_below, identity_from = IGELU_EDGES[arith.frac]
    assert (zero_below, identity_from) == (math.floor(-IGELU_CLIP * scale), math.ceil(IGELU_CLIP * scale))
    if encoding == "cubic":
        monkeypatch.setattr(encoder, "IGELU_TABLE_ENTRIES", 0)
    top = arith.max_mantissa
    ranges = [
        (zero_below - 4, zero_below + 1),
        (zero_below, zero_below + 2),
        (zero_below - 3, zero_below),
        (-3, 3),
        (identity_from - 2, identity_from + 1),
        (identity_from - 1, identity_from),
        (top - 3, top + 3),
        (identity_from - 2, top + 3),
        (zero_below - 2, identity_from + 2),
    ]
    for lo, hi in ranges:
        builder = Builder()
        x = builder.fresh_int("x", lo, hi)
        out = encoder.encode_activation(
            "i-gelu", Sym(x, scale, F(lo, scale), F(hi, scale)), encoder.Rounding(arith, builder)
        )
        if encoding == "table" and lo < identity_from and hi > zero_below:
            assert builder.stats.bits_decomposed == 0  # the table was used, not the cubic
        solver = z3.Solver()
        solver.add(builder.assertions)
        for m in range(lo, hi + 1):
            expected = arith.round(igelu(F(m, scale)))
            assert out.lo <= expected <= out.hi, (lo, hi, m)
            solver.push()
            solver.add(x == m)
            assert solver.check() == z3.sat
            assert F(solver.model().eval(z3.IntVal(0) + out.num).as_long(), out.den) == expected, (lo, hi, m)
            solver.pop()


def test_igelu_table_is_refused_beyond_its_size() -> None:
    """12 fractional bits: (−c, c) holds 2·10247 − 1 = 20493 mantissas, over IGELU_TABLE_ENTRIES; the cubic is used."""
    from verify_tf.symbolic.encoder import IGELU_TABLE_ENTRIES, Rounding, _igelu_table

    arith = Fixed(16, 12)
    builder = Builder()
    lo, hi = -11000, 11000
    x = builder.fresh_int("x", lo, hi)
    assert IGELU_TABLE_ENTRIES < 20493
    assert _igelu_table(Sym(x, 4096, F(lo, 4096), F(hi, 4096)), Rounding(arith, builder)) is None
    assert _igelu_table(Sym(x, 4096, F(-100, 4096), F(100, 4096)), Rounding(arith, builder)) is not None

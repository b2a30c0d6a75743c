"""Property position-blind (Luo et al. 2022): constant inputs give equal outputs at every position."""

from __future__ import annotations

from decimal import ROUND_CEILING, Context, Decimal, localcontext
from fractions import Fraction as F

import pytest
from hypothesis import given, settings, strategies as st

from helpers import alphabet_model, head, one_layer, seq
from verify_tf.api import check as api_check
from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.domain import GridDomain, StringDomain
from verify_tf.ir.plain import model_from_dict
from verify_tf.semantics import Exact, Fixed, evaluate

EXACT = Exact()
GRID = GridDomain.regular(1, F(1, 2), 3)  # {0, 1/2}, n = 3
STRINGS = StringDomain(("a", "b"), 1, 3)
RESEARCH_BIAS = [11, 4, 0, -8, -7]  # ../shared/research/smt-encoding.md, "Per-probability rounding", b[-2..2]


def check(model, arith=EXACT, domain=GRID, engine="auto", **options):
    return api_check(model, arith, domain, "position-blind", options, engine=engine, timeout=60)


def grid_domain(width: int) -> GridDomain:
    return GridDomain.regular(width, F(1, 2), 3, lo=F(-1, 2), hi=F(1, 2))


# ---------------------------------------------------------------- blind models, any weights


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    scoring=st.sampled_from(["hardmax", "uniform"]),
    positional=st.sampled_from(["standard", "rpe"]),
    causal=st.booleans(),
    ffn=st.sampled_from([0, 2]),
)
def test_standard_and_rpe_models_are_blind_in_exact_arithmetic(seed, scoring, positional, causal, ffn):
    model = random_model(
        RandomConfig(
            seed=seed,
            width=2,
            layers=2,
            heads=2,
            ffn_width=ffn,
            scoring=scoring,
            positional=positional,
            causal=causal,
            max_length=3,
        )
    )
    verdict = check(model, domain=grid_domain(2))
    assert verdict.status == "proved", verdict.detail
    assert verdict.statistics["epsilon"] == "0" and verdict.statistics["space_size"] == 9


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), scoring=st.sampled_from(["hardmax", "uniform", "softmax"]), causal=st.booleans())
def test_rpe_models_are_blind_in_fixed_point_with_exact_sums(seed, scoring, causal):
    model = random_model(
        RandomConfig(
            seed=seed,
            width=2,
            layers=1,
            heads=2,
            ffn_width=2,
            scoring=scoring,
            positional="rpe",
            causal=causal,
            max_length=3,
        )
    )
    verdict = check(model, Fixed(16, 4), domain=grid_domain(2))
    assert verdict.status == "proved" and verdict.statistics["epsilon"] == "0", verdict.detail


def test_readout_option_and_method():
    model = random_model(RandomConfig(seed=5, width=2, positional="rpe", max_length=3))
    verdict = check(model, on="readout", domain=grid_domain(2))
    assert verdict.label == "proved (exhaustive)"


# ---------------------------------------------------------------- URPE and absolute PE


def test_urpe_with_lower_triangular_c_is_refuted_with_replayed_witness():
    # uniform rows 1/3, C[j-i] = 1 for j <= i: position i outputs x (i+1)/3 (Luo et al.'s i/n)
    model = one_layer(head(scoring="uniform", positional="urpe", rpe=[0] * 5, urpe=[1, 1, 1, 0, 0]), residual=False)
    verdict = check(model)
    assert verdict.status == "refuted" and verdict.method == "exhaustive"
    cex = verdict.counterexample
    assert cex["input"] == [["1/2"]] * 3
    assert cex["positions"] == [0, 2] and cex["outputs"] == [["1/6"], ["1/2"]] and cex["deviation"] == "1/3"
    assert cex["row_sums"] == "rows of layers[0].heads[0] sum to 1/3, 2/3, 1"
    assert verdict.statistics["epsilon"] == "1/3"


def test_urpe_with_constant_c_is_blind():
    model = one_layer(head(scoring="hardmax", positional="urpe", rpe=[3, 0, 1], urpe=[2, 2, 2]))
    assert check(model).status == "proved"


def test_absolute_pe_is_refuted():
    model = one_layer(head(v=0, o=0), pe=[[0], [1], [3]])
    verdict = check(model)
    assert verdict.status == "refuted"
    assert verdict.counterexample["deviation"] == "3" and verdict.counterexample["positions"] == [0, 2]


def test_tolerance_accepts_small_deviations():
    model = one_layer(head(scoring="uniform", positional="urpe", rpe=[0] * 5, urpe=[1, 1, 1, 0, 0]), residual=False)
    verdict = check(model, tolerance=F(1, 3))
    assert verdict.status == "proved" and "position-blind up to ε = 1/3" in verdict.detail


# ---------------------------------------------------------------- per-probability rounding (the finding)


def research_model(bias, value=1):
    return one_layer(head(scoring="softmax", positional="rpe", rpe=bias, v=value), residual=False)


def row_sums_in_256ths(model, arith, x=1):
    trace = evaluate(model, arith, seq(x, x, x))
    return [sum(row) * 256 for row in trace.blocks[0].heads[0].weights]


def test_research_example_row_sums_against_the_interpreter():
    """The research note says rows sum to 254, 254, 255 (/256). The interpreter disagrees; exactly how:"""
    per_probability = Fixed(16, 8, "per-probability")
    as_mantissas = research_model([F(b, 256) for b in RESEARCH_BIAS])  # bias b·2^-8 (scores as 8-bit mantissas)
    assert row_sums_in_256ths(as_mantissas, per_probability) == [255, 255, 254]
    as_integers = research_model(RESEARCH_BIAS)  # bias b (most exp-table entries underflow to 0)
    assert row_sums_in_256ths(as_integers, per_probability) == [256, 255, 256]
    # the note's numbers come back with an exp table rounded UP, E[t] = ceil(256 e^(-t/256)); ours floors
    assert _row_sums_with_ceiling_table(RESEARCH_BIAS) == [254, 254, 255]
    assert row_sums_in_256ths(as_mantissas, Fixed(16, 8, "exact-sums")) == [256, 256, 256]


def _row_sums_with_ceiling_table(bias):
    def ceil_exp(t: int) -> int:
        with localcontext(Context(prec=50)):
            return int(((Decimal(-t) / 256).exp() * 256).to_integral_value(rounding=ROUND_CEILING))

    sums = []
    for i in range(3):
        scores = [bias[j - i + 2] for j in range(3)]
        e = [ceil_exp(max(scores) - s) for s in scores]
        sums.append(sum(256 * w // sum(e) for w in e))
    return sums


def test_per_probability_rpe_model_leaks_position():
    model = research_model([F(b, 256) for b in RESEARCH_BIAS], value=8)
    arith = Fixed(16, 8, "per-probability")
    domain = GridDomain(1, (F(1), F(2), F(4)), 3)
    verdict = check(model, arith, domain)
    assert verdict.status == "refuted"
    assert verdict.statistics["epsilon"] == "1/8"  # v = 32 at x = 4: 32·255/256 - 32·254/256
    assert "per-probability rounding" in verdict.detail
    cex = verdict.counterexample
    assert cex["input"] == [["4"]] * 3 and cex["outputs"] == [["255/8"], ["127/4"]]
    assert cex["row_sums"] == "rows of layers[0].heads[0] sum to 0.99609375, 0.99609375, 0.9921875"
    up_to = check(model, arith, domain, tolerance=F(1, 8))
    assert up_to.status == "proved" and "position-blind up to ε = 0.125" in up_to.detail
    assert check(model, Fixed(16, 8, "exact-sums"), domain).status == "proved"  # one division: blind again


def test_per_probability_is_not_proved_at_architecture_level():
    model = research_model([F(b, 256) for b in RESEARCH_BIAS], value=8)
    domain = GridDomain(1, (F(1), F(2), F(4)), 3)
    verdict = check(model, Fixed(16, 8, "per-probability"), domain, scope="architecture")
    # the induction does not apply, and the model itself is a member of its class that separates positions
    assert verdict.status == "refuted" and verdict.method == "induction + this model"
    assert verdict.counterexample["deviation"] == "1/8" and verdict.counterexample["input"] == [["4"]] * 3
    blind = check(research_model([F(0)] * 5, value=8), Fixed(16, 8, "per-probability"), domain, scope="architecture")
    assert blind.status == "unknown" and "not applicable" in blind.detail  # a blind member proves nothing here
    assert blind.statistics["model_epsilon"] == "0"


# ---------------------------------------------------------------- BOS: the input is not constant


def test_bos_without_positions_stays_blind():
    model = alphabet_model(head(scoring="hardmax"), bos_embedding=(5,))
    assert check(model, domain=STRINGS).status == "proved"
    assert check(model, domain=STRINGS, scope="architecture").status == "proved"


def test_bos_with_causal_mask_separates_positions():
    # user position i averages BOS (5) with i+1 copies of x: b (embedding 0) gives 5/2, 5/3, 5/4
    model = alphabet_model(head(scoring="uniform", causal=True), bos_embedding=(5,))
    verdict = check(model, domain=STRINGS)
    assert verdict.status == "refuted" and "BOS" in verdict.detail
    assert verdict.counterexample["input"] == ["b", "b", "b"]
    assert verdict.counterexample["outputs"] == [["5/2"], ["5/4"]]


def test_bos_with_rpe_separates_positions():
    # bias 1 at offsets <= -1 (clipped): hardmax picks every earlier key, BOS included
    model = alphabet_model(head(scoring="hardmax", positional="rpe", rpe=[1, 0, 0]), bos_embedding=(5,))
    verdict = check(model, domain=STRINGS)
    assert verdict.status == "refuted" and verdict.counterexample["outputs"] == [["5"], ["5/3"]]


# ---------------------------------------------------------------- architecture scope


def _replay_member(verdict, arith):
    member = model_from_dict(verdict.counterexample["model"])
    tokens = tuple(t if isinstance(t, str) else tuple(F(c) for c in t) for t in verdict.counterexample["input"])
    out = evaluate(member, arith, tokens).output
    a, b = verdict.counterexample["positions"]
    off = len(out) - len(tokens)
    return out[off + a], out[off + b]


def test_architecture_scope_proves_rpe_and_refutes_urpe_with_a_solver_chosen_layer():
    rpe = random_model(
        RandomConfig(seed=4, width=2, layers=2, heads=2, ffn_width=2, positional="rpe", causal=True, max_length=3)
    )
    proved = check(rpe, domain=grid_domain(2), scope="architecture")
    assert proved.status == "proved" and proved.label == "proved (induction)" and proved.engine == "architecture"
    urpe = random_model(RandomConfig(seed=4, width=2, positional="urpe", max_length=3))
    refuted = check(urpe, domain=grid_domain(2), scope="architecture")
    assert refuted.status == "refuted" and refuted.counterexample["layer"] == "layers[0].attention.heads[0]"
    a, b = _replay_member(refuted, EXACT)
    assert a != b and [list(map(str, a)), list(map(str, b))] == refuted.counterexample["outputs"]


@pytest.mark.slow
def test_architecture_scope_in_fixed_point_and_for_absolute_pe():
    arith = Fixed(16, 8)
    urpe = one_layer(head(scoring="softmax", positional="urpe", rpe=[0] * 5, urpe=[1] * 5))
    refuted = check(urpe, arith, scope="architecture")
    assert refuted.status == "refuted"
    a, b = _replay_member(refuted, arith)
    assert a != b
    pe = one_layer(head(), pe=[[0], [0], [0]])  # this model is blind, its class is not
    assert check(pe).status == "proved"
    verdict = check(pe, scope="architecture")
    assert verdict.status == "refuted" and verdict.counterexample["layer"] == "positional-encoding"


def test_architecture_engine_with_model_scope_proves_through_the_class_or_says_unknown():
    rpe = one_layer(head(scoring="hardmax", positional="rpe", rpe=[2, 0, 1]))
    assert check(rpe, engine="architecture").status == "proved"
    urpe = one_layer(head(scoring="hardmax", positional="urpe", rpe=[0, 0, 0], urpe=[1, 1, 1]))
    verdict = check(urpe, engine="architecture")
    assert verdict.status == "unknown" and "evaluate its constant inputs (engine: auto)" in verdict.detail


def test_the_architecture_proof_covers_any_depth_because_deeper_layers_add_no_query(monkeypatch):
    rpe = random_model(
        RandomConfig(seed=4, width=2, layers=2, heads=2, ffn_width=2, positional="rpe", causal=True, max_length=3)
    )
    proved = check(rpe, domain=grid_domain(2), scope="architecture")
    assert proved.statistics["any_depth"] is True and "any number of layers" in proved.detail
    # a step query that depended on where its layer sits would limit the proof to the spec's own stack
    from verify_tf.engines.architecture import induction

    original = induction._build

    def depth_dependent(model, arithmetic, length, name, sublayer, block):
        query = original(model, arithmetic, length, name, sublayer, block)
        query.add(induction.z3.Real("depth") == (block or 0))  # e.g. a per-layer positional term
        return query

    monkeypatch.setattr(induction, "_build", depth_dependent)
    assert induction.deeper_layers_add_no_query(rpe, EXACT, 3) is False
    limited = check(rpe, domain=grid_domain(2), scope="architecture")
    assert limited.status == "proved" and limited.statistics["any_depth"] is False
    assert "these 2 layers only" in limited.detail

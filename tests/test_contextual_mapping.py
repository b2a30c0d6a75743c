"""Property ``contextual-mapping``: proofs of Yun et al.'s Lemma 6 network, refutations with replayed pairs,
the sorted-key scan against a quadratic oracle, and every engine against the definition itself.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from helpers import task, verdict as check
from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.builders.yun import yun_contextual_mapping
from verify_tf.domain import GridDomain, StringDomain
from verify_tf.engines.scan import closest_pair
from verify_tf.properties.contextual_mapping import PROPERTY as CONTEXTUAL_MAPPING, equivariance_obstacle
from verify_tf.schema.errors import SpecError
from verify_tf.semantics import Exact, Fixed, evaluate
from verify_tf.spec import load_spec_text
from verify_tf.witness import ReplayMismatch, input_from_json

YUN = {"exempt-permutations": True}


def request(model, domain, engine="interpret", arithmetic=None, timeout=60.0, device="cpu", **options):
    return dict(
        model=model, arith=arithmetic or Exact(), domain=domain, options=options, engine=engine, timeout=timeout
    )


class PROPERTY:  # reads like the property: PROPERTY.run(request(...))
    @staticmethod
    def run(req):
        return check(
            req["model"],
            req["arith"],
            req["domain"],
            "contextual-mapping",
            req["options"],
            engine=req["engine"],
            timeout=req["timeout"],
        )


def setup(req):
    return task(req["model"], req["arith"], req["domain"], "contextual-mapping", req["options"]).options


def replay(req, config, first, i, second, j):
    return CONTEXTUAL_MAPPING.pair_witness(
        task(req["model"], req["arith"], req["domain"], "contextual-mapping", req["options"]), first, i, second, j
    )


def grid(d, inverse_delta, n, distinct=True):
    return GridDomain.regular(d, Fraction(1, inverse_delta), n, distinct_tokens=distinct)


def yun(d, inverse_delta, n, **kwargs):
    return yun_contextual_mapping(d, Fraction(1, inverse_delta), n, **kwargs)


def definition_oracle(model, arithmetic, domain, readout=None, margin=None, exempt=False):
    """Definition 3.1 read literally: every pair of (input, position) keys, O(N^2). Returns (holds, min gap)."""
    values = {}
    for tokens in domain.inputs():
        trace = evaluate(model, arithmetic, tokens)
        stream = trace.output
        values[tokens] = (
            trace.readout
            if readout is None
            else [sum((u * x for u, x in zip(readout, z)), Fraction(0)) for z in stream]
        )
    keys = [(tokens, i, q) for tokens, qs in values.items() for i, q in enumerate(qs)]
    smallest = None
    for (l1, _i, a), (l2, _j, b) in itertools.combinations(keys, 2):
        if l1 != l2 and exempt and sorted(l1) == sorted(l2):
            continue
        gap = abs(a - b)
        smallest = gap if smallest is None else min(smallest, gap)
    if smallest is None:
        return True, None
    return (smallest > 0 if margin is None else smallest >= margin), smallest


# ---------------------------------------------------------------- Yun et al.'s construction

# (d, 1/δ, n) -> smallest gap, min q, max q (exact, G~_δ, permutations exempt). Not numbers printed in the paper:
# derived by hand from Yun et al. Lemma 6's construction; cross-checked by paper_q in tests/test_value_range.py
# (test_figures_agree_with_paper_q below recomputes all three from paper_q's equations).
PROVED = [
    ((1, 2, 2), Fraction(1, 2), Fraction(49), Fraction(99, 2)),
    ((1, 3, 3), Fraction(10, 3), Fraction(10694), Fraction(32120, 3)),
    ((2, 2, 2), Fraction(9, 2), Fraction(1666), Fraction(10023, 2)),
    ((2, 2, 3), Fraction(21, 2), Fraction(84484), Fraction(262827, 2)),
    ((1, 4, 3), Fraction(21, 4), Fraction(84482), Fraction(525483, 4)),
]


@pytest.mark.parametrize("instance,gap,low,high", PROVED, ids=[str(p[0]) for p in PROVED])
def test_lemma6_network_is_a_contextual_mapping_with_margin_delta(instance, gap, low, high):
    d, k, n = instance
    verdict = PROPERTY.run(request(yun(d, k, n), grid(d, k, n), margin=Fraction(1, k), **YUN))
    assert verdict.status == "proved", verdict.detail
    assert verdict.method == "exhaustive"
    assert verdict.statistics["smallest_gap"] == str(gap)
    assert (verdict.statistics["min_q"], verdict.statistics["max_q"]) == (str(low), str(high))
    assert verdict.statistics["enumerated"] == "multisets"  # equivariant: one evaluation per multiset


def test_paper_example_range():
    # (1, 1/2, 2): [0, 1/2] gives q = (49, 99/2), derived by hand from Yun et al. Lemma 6's construction;
    # cross-checked by paper_q in tests/test_value_range.py (not a number the paper prints)
    verdict = PROPERTY.run(request(yun(1, 2, 2), grid(1, 2, 2), **YUN))
    assert "q in [49, 49.5]" in verdict.detail and "smallest gap 0.5" in verdict.detail


@pytest.mark.parametrize("instance,gap,low,high", PROVED, ids=[str(p[0]) for p in PROVED])
def test_figures_agree_with_paper_q(instance, gap, low, high):
    """The PROVED figures from the independent paper_q (Yun et al.'s equations, not the builder): min and max q
    over G~_δ, and the smallest gap between two values that are not the same value of permuted inputs."""
    from test_value_range import paper_q

    d, k, n = instance
    delta = Fraction(1, k)
    keyed = {}
    for tokens in grid(d, k, n).inputs():
        keyed.setdefault(tuple(sorted(tokens)), set()).update(paper_q(tokens, d, delta, n))
    values = sorted((q, multiset) for multiset, qs in keyed.items() for q in qs)
    assert (values[0][0], values[-1][0]) == (low, high)
    # every two distinct (value, multiset) entries: other multisets and other positions of the same one
    assert min(b - a for (a, _), (b, _) in itertools.pairwise(values)) == gap


def check_replays(model, verdict, arithmetic=None):
    """The reported pair really collides on the interpreter."""
    cx = verdict.counterexample
    first, second = input_from_json(cx["input"]), input_from_json(cx["other_input"])
    i, j = cx["positions"]
    qa = evaluate(model, arithmetic or Exact(), first).readout[i]
    qb = evaluate(model, arithmetic or Exact(), second).readout[j]
    assert [str(qa), str(qb)] == cx["values"]
    return first, second, qa, qb


def test_reduced_global_shift_is_refuted_with_a_colliding_pair():
    model = yun(1, 5, 3, global_shift_scale=1)
    verdict = PROPERTY.run(request(model, grid(1, 5, 3), **YUN))
    assert verdict.status == "refuted"
    first, second, qa, qb = check_replays(model, verdict)
    assert qa == qb == Fraction(444, 5)
    assert sorted(first) != sorted(second)
    assert verdict.counterexample["condition"] == 2


def test_dropped_selective_shift_is_refuted():
    model = yun(2, 2, 2, drop_layer=0)
    verdict = PROPERTY.run(request(model, grid(2, 2, 2), **YUN))
    assert verdict.status == "refuted"
    _, _, qa, qb = check_replays(model, verdict)
    assert qa == qb == Fraction(3855, 2)


def test_margin_larger_than_the_smallest_gap_is_refuted_with_the_closest_pair():
    model = yun(1, 4, 3)
    verdict = PROPERTY.run(request(model, grid(1, 4, 3), margin=Fraction(6), **YUN))
    assert verdict.status == "refuted"
    _, _, qa, qb = check_replays(model, verdict)
    assert abs(qa - qb) == Fraction(21, 4)
    assert verdict.counterexample["gap"] == "21/4"


def test_without_the_exemption_an_equivariant_model_fails_on_a_permutation():
    model = yun(1, 2, 2)
    verdict = PROPERTY.run(request(model, grid(1, 2, 2)))
    assert verdict.status == "refuted"
    first, second, qa, qb = check_replays(model, verdict)
    assert sorted(first) == sorted(second) and first != second and qa == qb == 49  # q of [0, 1/2], as above


def test_repeated_tokens_refute_condition_one():
    model = yun(1, 3, 3)
    verdict = PROPERTY.run(request(model, grid(1, 3, 3, distinct=False), **YUN))
    assert verdict.status == "refuted"
    cx = verdict.counterexample
    assert cx["condition"] == 1 and cx["input"] == cx["other_input"]
    tokens = input_from_json(cx["input"])
    i, j = cx["positions"]
    assert tokens[i] == tokens[j]  # equal tokens get equal values in an equivariant model


# ---------------------------------------------------------------- equivariance from the IR


@pytest.mark.parametrize(
    "config,obstacle",
    [
        (RandomConfig(seed=1, width=2, scoring="hardmax"), None),
        (RandomConfig(seed=1, width=2, scoring="uniform"), None),
        (RandomConfig(seed=1, width=2, causal=True), "causal"),
        (RandomConfig(seed=1, width=2, positional="rpe"), "rpe"),
        (RandomConfig(seed=1, width=2, positional="urpe"), "urpe"),
        (RandomConfig(seed=1, width=2, absolute_pe=True), "positional encoding"),
    ],
)
def test_equivariance_is_decided_from_the_ir(config, obstacle):
    found = equivariance_obstacle(random_model(config))
    assert (found is None) if obstacle is None else (obstacle in found)


def test_models_with_positions_enumerate_every_sequence():
    model = random_model(RandomConfig(seed=3, width=1, positional="rpe", max_length=3))
    verdict = PROPERTY.run(request(model, grid(1, 2, 2, distinct=False), **YUN))
    assert verdict.statistics["enumerated"] == "sequences"


# ---------------------------------------------------------------- the engine against the definition

ORACLE_CASES = [
    # (model, domain, arithmetic, options)
    (yun(1, 3, 3), grid(1, 3, 3), Exact(), {"margin": Fraction(1, 3), **YUN}),
    (yun(2, 2, 2), grid(2, 2, 2), Exact(), {"margin": Fraction(5), **YUN}),
    (yun(2, 2, 2), grid(2, 2, 2), Exact(), {"margin": Fraction(9, 2), **YUN}),
    (yun(1, 4, 3, global_shift_scale=2), grid(1, 4, 3), Exact(), YUN),
    (yun(1, 2, 2), grid(1, 2, 2, distinct=False), Exact(), {"readout": [Fraction(3)], **YUN}),
]
for seed in range(6):
    positional = ("standard", "rpe", "urpe")[seed % 3]
    ORACLE_CASES.append(
        (
            random_model(
                RandomConfig(
                    seed=seed,
                    width=1,
                    layers=2,
                    heads=2,
                    positional=positional,
                    max_length=3,
                    scoring=("hardmax", "uniform")[seed % 2],
                )
            ),
            grid(1, 3, 2, distinct=seed % 2 == 0),
            Exact(),
            {"exempt-permutations": seed < 3},
        )
    )
    ORACLE_CASES.append(
        (
            random_model(
                RandomConfig(
                    seed=seed, width=2, causal=seed % 2 == 1, scoring="softmax", absolute_pe=seed == 4, max_length=3
                )
            ),
            grid(2, 2, 2, distinct=seed > 2),
            Fixed(12, 4),
            {"margin": Fraction(1, 16)},
        )
    )


@pytest.mark.parametrize("case", range(len(ORACLE_CASES)))
def test_interpret_engine_agrees_with_the_definition(case):
    model, domain, arithmetic, options = ORACLE_CASES[case]
    holds, smallest = definition_oracle(
        model,
        arithmetic,
        domain,
        options.get("readout"),
        options.get("margin"),
        options.get("exempt-permutations", False),
    )
    verdict = PROPERTY.run(request(model, domain, arithmetic=arithmetic, **options))
    assert verdict.status == ("proved" if holds else "refuted"), verdict.detail
    if holds and smallest is not None:
        assert verdict.statistics["smallest_gap"] == str(smallest)
    if not holds:
        config = setup(request(model, domain, arithmetic=arithmetic, **options))
        cx = verdict.counterexample
        assert config.gap_violates(Fraction(cx["gap"]))


def test_non_equivariant_exemption_needs_the_group_scan():
    # a model with positions where L and its permutation share a value: exempt, so the scan must look past
    # the exempt neighbour to the next key; the oracle decides
    for seed in range(12):
        model = random_model(RandomConfig(seed=seed, width=1, positional="rpe", max_length=2))
        domain = grid(1, 4, 2)
        holds, smallest = definition_oracle(model, Exact(), domain, exempt=True)
        verdict = PROPERTY.run(request(model, domain, **YUN))
        assert verdict.status == ("proved" if holds else "refuted")
        if holds and smallest is not None:
            assert verdict.statistics["smallest_gap"] == str(smallest)


# ---------------------------------------------------------------- the sorted-key scan


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(-6, 6), st.integers(0, 3)), min_size=1, max_size=8), st.integers(1, 3), st.booleans()
)
def test_scan_finds_the_closest_non_exempt_pair(inputs, n, wide):
    # inputs: per input one base value and a group; input k's values are base, base+1, ... scaled
    values, groups = [], []
    for index, (base, group) in enumerate(inputs):
        values.extend(base * 3 + ((p * 7 + index) % 5) for p in range(n))
        groups.append(group)
    dtype = object if wide else np.int64
    result = closest_pair(np.array(values, dtype=dtype), np.array(groups, dtype=np.int64), n, 2)
    best = None
    for a, b in itertools.combinations(range(len(values)), 2):
        ia, ib = a // n, b // n
        if ia != ib and groups[ia] == groups[ib]:
            continue
        gap = abs(values[a] - values[b])
        best = gap if best is None else min(best, gap)
    assert (result.gap is None) == (best is None)
    if best is not None:
        assert result.gap == Fraction(best, 2)
        (ia, pa), (ib, pb) = result.pair
        assert abs(values[ia * n + pa] - values[ib * n + pb]) == best
    assert result.smallest == Fraction(min(values), 2) and result.largest == Fraction(max(values), 2)


# ---------------------------------------------------------------- replay, errors, timeouts


def test_replay_rejects_a_pair_that_does_not_collide():
    model = yun(1, 4, 3)
    config = setup(request(model, grid(1, 4, 3), **YUN))
    t = lambda *v: tuple((Fraction(x),) for x in v)  # noqa: E731
    with pytest.raises(ReplayMismatch):
        replay(request(model, grid(1, 4, 3), **YUN), config, t(0, "1/4", "1/2"), 0, t(0, "1/2", "3/4"), 0)
    with pytest.raises(ReplayMismatch, match="exempt"):
        replay(request(model, grid(1, 4, 3), **YUN), config, t(0, "1/4", "1/2"), 0, t("1/4", 0, "1/2"), 1)


def test_wrong_readout_length_is_an_input_error():
    with pytest.raises(SpecError, match="readout has 2 entries, expected the model width 1") as error:
        PROPERTY.run(request(yun(1, 2, 2), grid(1, 2, 2), readout=[Fraction(1), Fraction(2)]))
    assert error.value.path == "contextual-mapping.readout"


def test_string_domain_is_an_input_error():
    with pytest.raises(SpecError, match="needs a grid domain"):
        PROPERTY.run(request(yun(1, 2, 2), StringDomain(("a",), 1, 2)))


def test_timeout_gives_unknown_saying_how_far_it_got():
    verdict = PROPERTY.run(request(yun(1, 8, 4), grid(1, 8, 4), timeout=1e-9, **YUN))
    assert verdict.status == "unknown"
    assert verdict.tried and "0 of 70 inputs evaluated" in verdict.tried[0]


def test_spec_round_trip():
    spec = load_spec_text("""
model: {construct: yun2019-contextual-mapping, d: 1, delta: 1/4, n: 3}
domain: {grid: {step: 1/4}, length: 3, distinct-tokens: true}
properties:
  - contextual-mapping: {exempt-permutations: true, margin: 1/4, expect: proved}
""")
    prop = spec.properties[0]
    assert prop.options.margin == Fraction(1, 4) and prop.options.exempt_permutations is True
    verdict = PROPERTY.run(request(spec.model, spec.domain, margin=Fraction(1, 4), **YUN))
    assert verdict.status == "proved"


# ---------------------------------------------------------------- enumerate (batched) and smt engines


@pytest.mark.parametrize("case", range(len(ORACLE_CASES)))
def test_enumerate_engine_agrees_with_the_interpreter(case):
    model, domain, arithmetic, options = ORACLE_CASES[case]
    exhaustive = PROPERTY.run(request(model, domain, arithmetic=arithmetic, **options))
    batched = PROPERTY.run(request(model, domain, engine="enumerate", arithmetic=arithmetic, device="cpu", **options))
    assert batched.status == exhaustive.status, batched.detail
    assert batched.statistics.get("smallest_gap") == exhaustive.statistics.get("smallest_gap")
    assert batched.statistics.get("min_q") == exhaustive.statistics.get("min_q")
    if batched.status == "refuted":
        assert config_of(model, domain, arithmetic, options).gap_violates(Fraction(batched.counterexample["gap"]))


def config_of(model, domain, arithmetic, options):
    return setup(request(model, domain, arithmetic=arithmetic, **options))


def test_enumerate_runs_what_int64_bounds_could_not_hold():
    # Lemma 6's selective shifts compound interval bounds layer by layer (2^67 for (1, 8, 4)), though the true
    # values stay below n·δ^-(n+1)d (Lemma 10): the guarded steps run in int64 on the chunks' true values
    verdict = PROPERTY.run(request(yun(1, 8, 4), grid(1, 8, 4), engine="enumerate", device="cpu", **YUN))
    reference = PROPERTY.run(request(yun(1, 8, 4), grid(1, 8, 4), engine="interpret", **YUN))
    assert verdict.status == reference.status == "proved"
    assert verdict.statistics["smallest_gap"] == reference.statistics["smallest_gap"]


def test_enumerate_values_beyond_int64_are_exact():
    # a global shift of 3^45 (about 2^71) pushes every value past int64: the wide path computes them exactly and
    # the scan finds the same extremes and gaps as the interpreter
    model = yun(1, 4, 3, global_shift_scale=3**45)
    verdict = PROPERTY.run(request(model, grid(1, 4, 3), engine="enumerate", device="cpu", **YUN))
    reference = PROPERTY.run(request(model, grid(1, 4, 3), engine="interpret", **YUN))
    assert verdict.status == reference.status
    for key in ("smallest_gap", "min_q", "max_q"):
        assert verdict.statistics[key] == reference.statistics[key]
    assert Fraction(verdict.statistics["max_q"]) > 2**63


@pytest.mark.parametrize("engine", ["enumerate", "interpret"])
def test_a_tiny_scan_memory_spills_every_run_and_changes_nothing(engine, monkeypatch):
    """Every sorted run spilled to disk and merged back: the same verdicts, gaps and pairs as in memory."""
    import verify_tf.engines.scan as scan

    cases = [
        (yun(1, 4, 3, global_shift_scale=2), grid(1, 4, 3), {}),  # refuted (165/2 twice)
        (yun(2, 2, 3), grid(2, 2, 3), {"margin": Fraction(1, 2)}),  # proved
        (random_model(RandomConfig(seed=1, width=2)), grid(2, 2, 2, distinct=False), {}),
    ]  # sequences, exempt
    expected = [PROPERTY.run(request(m, d, engine=engine, **YUN, **o)) for m, d, o in cases]
    assert [v.status for v in expected] == ["refuted", "proved", "refuted"]
    monkeypatch.setattr(scan, "SCAN_MEMORY", 1)
    for (model, domain, options), before in zip(cases, expected):
        after = PROPERTY.run(request(model, domain, engine=engine, **YUN, **options))
        assert (after.status, after.counterexample) == (before.status, before.counterexample)
        assert after.statistics.get("smallest_gap") == before.statistics.get("smallest_gap")
        if "keys" in after.statistics:  # the scan ran (not a clash within one input, found by a unit)
            assert after.statistics["spilled_bytes"] > 0


def test_enumerate_reports_a_pair_it_found_across_chunks():
    model = yun(1, 4, 3, global_shift_scale=2)
    verdict = PROPERTY.run(request(model, grid(1, 4, 3), engine="enumerate", device="cpu", **YUN))
    assert verdict.status == "refuted"
    _, _, qa, qb = check_replays(model, verdict)
    assert qa == qb == Fraction(165, 2)


def needs_smt_encoder():
    pytest.importorskip("verify_tf.symbolic.encoder")  # a separate package; its absence skips only these


def test_smt_proves_the_smallest_instance_with_fix0():
    needs_smt_encoder()
    verdict = PROPERTY.run(request(yun(1, 2, 2), grid(1, 2, 2), engine="smt", margin=Fraction(1, 2), **YUN))
    assert verdict.status == "proved" and verdict.method == "smt"
    assert verdict.statistics["symmetry_breaking"].startswith("fix0")


@pytest.mark.parametrize("seed,positional", [(1, "standard"), (2, "standard"), (1, "rpe"), (3, "rpe")])
def test_smt_agrees_with_exhaustive_on_random_hardmax_models(seed, positional):
    needs_smt_encoder()
    model = random_model(
        RandomConfig(seed=seed, width=2, heads=1, scoring="hardmax", positional=positional, max_length=2)
    )
    domain = grid(2, 2, 2)
    exhaustive = PROPERTY.run(request(model, domain, **YUN))
    solved = PROPERTY.run(request(model, domain, engine="smt", timeout=30, **YUN))
    assert solved.status == exhaustive.status
    if positional != "standard":
        assert solved.statistics["symmetry_breaking"].startswith("none")  # fix0 only for equivariant models
    if solved.status == "refuted":
        check_replays(model, solved)


@pytest.mark.slow
def test_auto_picks_an_exhaustive_engine_for_tiny_instances_and_smt_when_nothing_else_can_finish():
    tiny = PROPERTY.run(request(yun(1, 4, 3), grid(1, 4, 3), engine="auto", **YUN))
    assert tiny.status == "proved" and tiny.auto["chosen"] in ("interpret", "enumerate")
    # (1, 64, 3): 41,664 multisets, beyond int64 in places: the batched evaluator's wide path runs it (it used to
    # refuse, and auto fell back to SMT), so enumeration is predicted to finish
    wide = PROPERTY.run(request(yun(1, 64, 3), grid(1, 64, 3), engine="auto", timeout=30.0, **YUN))
    assert (wide.status, wide.auto["chosen"]) == ("proved", "enumerate")
    # (2, 64, 3): 4,096 tokens, C(4098, 3) ≈ 1.1·10^10 multisets: no exhaustive engine finishes in 1 s, SMT is left
    big = PROPERTY.run(request(yun(2, 64, 3), grid(2, 64, 3), engine="auto", timeout=1.0, **YUN))
    assert big.auto["chosen"] == "smt"


@pytest.mark.slow
@pytest.mark.parametrize("seed,causal,expected", [(24, False, "proved"), (10, False, "proved"), (3, True, "refuted")])
def test_smt_agrees_with_exhaustive_in_fixed_point_softmax(seed, causal, expected):
    needs_smt_encoder()
    model = random_model(RandomConfig(seed=seed, width=2, scoring="softmax", causal=causal, max_length=3))
    arithmetic = Fixed(12, 4)
    exhaustive = PROPERTY.run(request(model, grid(2, 2, 2), arithmetic=arithmetic, **YUN))
    solved = PROPERTY.run(request(model, grid(2, 2, 2), engine="smt", arithmetic=arithmetic, timeout=60, **YUN))
    assert exhaustive.status == solved.status == expected, solved.detail
    if expected == "refuted":
        check_replays(model, solved, arithmetic)

"""value-range and Yun et al.'s Lemma 6 claims (3) and (4).

Where the numbers come from:
* t_l, t_r: the formulas of Lemma 6 (../shared/research/papers.md), evaluated by hand below;
* ``paper_q``: an independent implementation of the construction straight from the paper's equations (the
  selective shift ψ(·; b) applied for every column id l, then the global shift), written without the IR, the
  builder or the interpreter; the tests first show it agrees with our interpreter on every input of G⁺_δ;
* the counterexample [-4, 0] -> q = (-132, 264) and the violation counts: ``paper_q`` by hand enumeration.
"""

from __future__ import annotations

import itertools
from fractions import Fraction as F

import pytest

from verify_tf.builders.yun import yun_contextual_mapping
from verify_tf.domain import GridDomain
from verify_tf.properties.value_range import yun_lemma6_interval
from verify_tf.runner import Overrides, check_property
from verify_tf.schema.errors import SpecError
from verify_tf.semantics import Exact, evaluate
from verify_tf.spec.loader import load_spec_text

EXACT = Exact()


def paper_q(tokens, d, delta, n):
    """q(L) of Yun et al.'s Lemma 6 from their equations: u = (1, δ^-1, ..., δ^-(d-1)), one selective shift
    ψ(·; l - δ/2) - ψ(·; l + δ/2) per column id l (scaled by δ^-d, hardmax attention of u·z against u·z_j - b),
    then the global shift with weight n·δ^(-(n+1)d-1) and b = 0."""

    def hardmax(scores, values):
        top = max(scores)
        chosen = [v for s, v in zip(scores, values) if s == top]
        return sum(chosen, F(0)) / len(chosen)

    def psi(v, b):
        return [hardmax([vk * (vj - b) for vk in v], v) for vj in v]

    u = [delta**-i for i in range(d)]
    ids = sorted(
        {
            sum(ui * ci for ui, ci in zip(u, c))
            for c in itertools.product([k * delta for k in range(int(1 / delta))], repeat=d)
        }
    )
    v = [sum(ui * ci for ui, ci in zip(u, token)) for token in tokens]
    for col in ids:
        low, high = psi(v, col - delta / 2), psi(v, col + delta / 2)
        v = [vj + delta**-d * (a - b) for vj, a, b in zip(v, low, high)]
    g = psi(v, F(0))
    return [vj + n * delta ** (-(n + 1) * d - 1) * gj for vj, gj in zip(v, g)]


def g_plus(d, delta, n, outside):
    return GridDomain(d, tuple(sorted([outside] + [k * delta for k in range(int(1 / delta))])), n, False, (outside,))


def test_interval_by_hand():
    # d=1, δ=1/2, n=2: t_l = 2·2^4·(2-1) = 32; t_r = 4·2^7 + 2·2^3 = 528
    assert yun_lemma6_interval(1, F(1, 2), 2) == (32, 528)
    # d=2, δ=1/2, n=2: t_l = 2·2^8·(4-1) = 1536; t_r = 4·2^13 + 2·2^6 = 32896
    assert yun_lemma6_interval(2, F(1, 2), 2) == (1536, 32896)
    # d=1, δ=1/3, n=3: t_l = 3·3^6·2 = 4374; t_r = 9·3^9 + 3·3^4 = 177147 + 243
    assert yun_lemma6_interval(1, F(1, 3), 3) == (4374, 177390)


@pytest.mark.parametrize("d,inverse,n", [(1, 2, 2), (1, 3, 2), (2, 2, 2), (1, 2, 3)])
def test_builder_computes_the_papers_q_on_all_of_g_plus(d, inverse, n):
    delta = F(1, inverse)
    model = yun_contextual_mapping(d, delta, n)
    domain = g_plus(d, delta, n, -(delta ** (-n * d)))
    count = 0
    for tokens in domain.inputs():
        assert evaluate(model, EXACT, tokens).readout == paper_q(tokens, d, delta, n), tokens
        count += 1
    assert count == ((inverse + 1) ** d) ** n  # every coordinate in {outside, 0, δ, ..., 1 - δ}


def _yun_spec(d, delta, n, *, plus=None, distinct=True, prop):
    plus_text = f", plus: {plus}" if plus is not None else ""
    return load_spec_text(f"""
model: {{construct: yun2019-contextual-mapping, d: {d}, delta: {delta}, n: {n}}}
domain: {{grid: {{step: {delta}{plus_text}}}, length: {n}, distinct-tokens: {str(distinct).lower()}}}
properties:
  - value-range: {prop}
""")


def _check(spec, engine):
    return check_property(spec, spec.properties[0], Overrides(engine=engine, device="cpu"))


@pytest.mark.parametrize("engine", ["interpret", "enumerate", "search"])
def test_claim_3_holds_on_the_distinct_grid(engine):
    spec = _yun_spec(2, "1/2", 2, prop="{interval: yun-lemma6}")
    result = _check(spec, engine)
    assert result.status == ("unknown" if engine == "search" else "proved"), result.detail
    if engine != "search":
        assert "every value inside [1536, 32896]" in result.detail


@pytest.mark.parametrize("engine", ["interpret", "enumerate", "search"])
def test_claim_4_fails_with_the_papers_outside_value(engine):
    # G⁺_δ with -δ^-nd = -4: [-4, 0] gives q = (-132, 264) (paper_q), and 264 lies in [32, 528]
    spec = _yun_spec(
        1, "1/2", 2, plus="true", distinct=False, prop="{interval: yun-lemma6, inside: false, except-distinct: true}"
    )
    assert spec.domain.outside == (F(-4),)
    assert paper_q(((F(-4),), (F(0),)), 1, F(1, 2), 2) == [-132, 264]
    result = _check(spec, engine)
    assert result.status == "refuted", result.detail
    assert result.counterexample["value"] in ("264", "627/2")  # the two violations of paper_q with a -4 first
    if engine != "search":  # the exhaustive engines report the least input
        assert result.counterexample["input"] == [["-4"], ["0"]] and result.counterexample["position"] == 1


def _violations(d, delta, n, outside):
    t_l, t_r = yun_lemma6_interval(d, delta, n)
    domain = g_plus(d, delta, n, outside)
    bad = 0
    for tokens in domain.inputs():
        distinct = len(set(tokens)) == n and domain.in_grid(tokens[0]) and all(domain.in_grid(t) for t in tokens)
        if not distinct and any(t_l <= q <= t_r for q in paper_q(tokens, d, delta, n)):
            bad += 1
    return bad


@pytest.mark.parametrize(
    "d,inverse,n,multiple,expected",
    [
        # violations of claim (4) among the inputs of G⁺_δ \ G̃_δ (paper_q, exact), outside value -c·δ^-nd
        ((1, 2, 2, 1, 4)),
        ((1, 2, 2, 2, 2)),
        ((1, 2, 2, 3, 0)),
        ((2, 2, 2, 1, 20)),
        ((2, 2, 2, 2, 6)),
        ((2, 2, 2, 3, 0)),
        ((1, 2, 3, 3, 6)),
        ((1, 2, 3, 4, 0)),
    ],
)
def test_claim_4_needs_an_outside_value_n_plus_1_times_larger(d, inverse, n, multiple, expected):
    delta = F(1, inverse)
    outside = -multiple * delta ** (-n * d)
    assert _violations(d, delta, n, outside) == expected
    spec = _yun_spec(
        d,
        str(delta),
        n,
        plus=str(outside),
        distinct=False,
        prop="{interval: yun-lemma6, inside: false, except-distinct: true}",
    )
    assert _check(spec, "enumerate").status == ("proved" if expected == 0 else "refuted")


@pytest.mark.slow
def test_hu_et_al_outside_value_makes_claim_4_hold():
    # Hu et al.'s corrected value -J, J = n + 3n·δ^-nd (../shared/research/papers.md): d=2, δ=1/2, n=3 → -579
    spec = _yun_spec(
        2, "1/2", 3, plus="-579", distinct=False, prop="{interval: yun-lemma6, inside: false, except-distinct: true}"
    )
    result = _check(spec, "interpret")  # q·k reaches 2^70: beyond the int64 batched evaluator
    assert result.status == "proved", result.detail
    assert "all 729 inputs" in result.detail  # 3 values per coordinate, 3^2 tokens, 9^3 inputs


def test_explicit_interval_and_inside():
    spec = _yun_spec(1, "1/2", 2, prop="{interval: [50, 528]}")
    result = _check(spec, "interpret")
    # [0, 1/2] gives q = (49, 99/2) by paper_q: 49 < 50
    assert paper_q(((F(0),), (F(1, 2),)), 1, F(1, 2), 2) == [49, F(99, 2)]
    assert result.status == "refuted" and result.counterexample["value"] == "49"
    assert _check(_yun_spec(1, "1/2", 2, prop="{interval: [49, 50]}"), "interpret").status == "proved"


@pytest.mark.parametrize(
    "text,key,needle",
    [
        ("{interval: [2, 1]}", "interval", "lo <= hi"),
        ("{interval: [1]}", "interval", "2"),
        ("{interval: lemma7}", "interval", "yun-lemma6"),
    ],
)
def test_option_mistakes_are_located(text, key, needle):
    with pytest.raises(SpecError) as caught:
        _yun_spec(1, "1/2", 2, prop=text)
    assert key in str(caught.value) and needle in str(caught.value)


def test_yun_interval_needs_g_delta():
    with pytest.raises(SpecError) as caught:
        load_spec_text("""
model: {construct: yun2019-contextual-mapping, d: 1, delta: 1/2, n: 2}
domain: {grid: {step: 1/2, lo: 1/2, hi: 1}, length: 2}
properties:
  - value-range: {interval: yun-lemma6}
""")
    assert "G_δ" in str(caught.value)


@pytest.mark.parametrize("plus,needle", [("0", "already a grid value"), ("[1]", "true (Yun et al.'s")])
def test_plus_mistakes(plus, needle):
    with pytest.raises(SpecError) as caught:
        _yun_spec(1, "1/2", 2, plus=plus, distinct=False, prop="{interval: yun-lemma6}")
    assert "plus" in str(caught.value) and needle in str(caught.value)

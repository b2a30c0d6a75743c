"""permutation-equivariance, engine ``search``: replayed refutations on domains far too large to enumerate,
``unknown`` (never proved) when nothing is found, reproducible with the spec's seed."""

from __future__ import annotations

from fractions import Fraction as F

from helpers import task, verdict as check
from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.domain import GridDomain, StringDomain
from verify_tf.properties.permutation_equivariance import PROPERTY
from verify_tf.semantics import Fixed
from verify_tf.witness import input_from_json

HUGE = GridDomain.regular(2, F(1, 16), 6, lo=F(-1), hi=F(1))  # 33^2 = 1089 tokens, length 6: ~1.7e18 inputs


def request(model, arith, domain, seed=0, samples=20_000, timeout=60.0):
    return dict(model=model, arith=arith, domain=domain, seed=seed, samples=samples, timeout=timeout)


def check_search(req):
    return check(
        req["model"],
        req["arith"],
        req["domain"],
        "permutation-equivariance",
        engine="search",
        timeout=req["timeout"],
        seed=req["seed"],
        samples=req["samples"],
    )


def violation(req, tokens, k):
    return PROPERTY.swap_violation(
        task(req["model"], req["arith"], req["domain"], "permutation-equivariance"), tokens, k
    )


def test_search_refutes_rpe_on_a_huge_domain_with_a_replayed_witness():
    model = random_model(RandomConfig(seed=3, width=2, positional="rpe", max_length=6))
    req = request(model, Fixed(16, 6), HUGE)
    verdict = check_search(req)
    assert (verdict.status, verdict.method) == ("refuted", "search")
    witness = verdict.counterexample
    assert violation(req, input_from_json(witness["input"]), witness["transposition"][0]) == witness
    again = check_search(request(model, Fixed(16, 6), HUGE))
    assert again.counterexample == witness  # same seed, same search


def test_search_never_proves():
    model = random_model(RandomConfig(seed=3, width=2, heads=2, ffn_width=3))
    verdict = check_search(request(model, Fixed(16, 6), HUGE, samples=5000))
    assert (verdict.status, verdict.method) == ("unknown", "sampled")
    assert verdict.detail == "no counterexample in 5000 samples (seed 0, sample budget)"
    assert verdict.statistics["samples"] == 5000


def test_search_runs_the_wide_path_when_int64_cannot_hold_the_model():
    model = random_model(RandomConfig(seed=1, width=1, causal=True, alphabet=("a", "b"), bos="^"))
    wide = Fixed(64, 40)  # q.k products need ~2^90: those steps run on Python integers, exactly
    req = request(model, wide, StringDomain(("a", "b"), 2, 3), samples=200)
    verdict = check_search(req)
    assert not verdict.statistics["evaluator"].startswith("interpreter")
    assert verdict.status == "refuted"
    witness = verdict.counterexample
    assert violation(req, input_from_json(witness["input"]), witness["transposition"][0]) == witness

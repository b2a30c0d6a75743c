"""permutation-equivariance, engine ``enumerate``: exhaustive proofs and replayed refutations on the batched
evaluator, agreeing with the interpreter engine; the ``auto`` choice between enumerate and the rest."""

from __future__ import annotations

import sys
from fractions import Fraction as F
from pathlib import Path

import pytest

from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.domain import GridDomain, StringDomain
from verify_tf.properties.permutation_equivariance import PROPERTY
from verify_tf.semantics import Exact, Fixed
from verify_tf.witness import input_from_json

sys.path.insert(0, str(Path(__file__).parent))
from helpers import head, one_layer, task, verdict as check


def request(model, arith, domain, on="output"):
    return (model, arith, domain, "permutation-equivariance", {"on": on})


def check_enumerate(req, **kw):
    return check(*req, engine="enumerate", **kw)


def check_interpret(req, **kw):
    return check(*req, engine="interpret", **kw)


def assert_replays(req, verdict):
    witness = verdict.counterexample
    k = witness["transposition"][0]
    assert PROPERTY.swap_violation(task(*req), input_from_json(witness["input"]), k) == witness


GRID = GridDomain.regular(2, F(1, 2), 3, lo=F(-1), hi=F(1))  # 25 tokens, 15,625 inputs


@pytest.mark.parametrize("scoring", ["hardmax", "uniform", "softmax"])
def test_models_without_positions_are_proved(scoring):
    model = random_model(RandomConfig(seed=3, width=2, heads=2, ffn_width=2, scoring=scoring))
    verdict = check_enumerate(request(model, Fixed(12, 4), GRID))
    assert (verdict.status, verdict.method) == ("proved", "exhaustive")
    assert verdict.statistics["space_size"] == verdict.statistics["inputs_checked"] == 15_625


@pytest.mark.parametrize(
    "config", [dict(positional="rpe"), dict(positional="urpe"), dict(causal=True), dict(absolute_pe=True, max_length=3)]
)
def test_positional_models_are_refuted_with_a_replayed_witness(config):
    model = random_model(RandomConfig(seed=3, width=2, **config))
    req = request(model, Fixed(12, 4), GRID)
    verdict = check_enumerate(req)
    assert verdict.status == "refuted"
    assert_replays(req, verdict)


def test_swapping_equal_tokens_counts():
    """X = (1, 1), π = swap: πX = X, so equivariance needs f(X)_0 = f(X)_1; absolute PE breaks that."""
    model = one_layer(head(q=0, k=0, v=1, o=1), pe=[[0], [1]])
    req = request(model, Fixed(), GridDomain(1, (F(1),), 2))
    verdict = check_enumerate(req)
    assert verdict.status == "refuted"
    assert verdict.counterexample["input"] == [["1"], ["1"]]
    assert verdict.counterexample["f_of_permuted"] == [["5/2"], ["7/2"]]
    assert_replays(req, verdict)


def test_bos_stays_first_and_only_user_positions_permute():
    alphabet = ("a", "b", "c")
    plain = random_model(RandomConfig(seed=9, width=2, alphabet=alphabet, bos="^", ffn_width=2))
    causal = random_model(RandomConfig(seed=9, width=2, alphabet=alphabet, bos="^", causal=True))
    domain = StringDomain(alphabet, 0, 5)
    assert check_enumerate(request(plain, Exact(), domain)).status == "proved"
    req = request(causal, Exact(), domain)
    verdict = check_enumerate(req)
    assert verdict.status == "refuted"
    assert_replays(req, verdict)


@pytest.mark.slow
def test_enumerate_agrees_with_the_interpreter_engine_on_random_models():
    domain = GridDomain.regular(1, F(1, 2), 3, lo=F(-1), hi=F(1))
    statuses = []
    for seed in range(6):
        for config in (dict(), dict(positional="rpe"), dict(scoring="uniform", causal=True)):
            model = random_model(RandomConfig(seed=seed, width=1, denominator=1, weight_range=F(1), **config))
            for on in ("output", "readout"):
                a = check_enumerate(request(model, Fixed(8, 2), domain, on=on)).status
                b = check_interpret(request(model, Fixed(8, 2), domain, on=on)).status
                assert a == b, (seed, config, on)
                statuses.append(a)
    assert {"proved", "refuted"} <= set(statuses)


def test_timeout_gives_unknown_never_proved():
    model = random_model(RandomConfig(seed=1, width=2))
    verdict = check_enumerate(request(model, Fixed(), GRID), timeout=1e-9)
    assert verdict.status == "unknown" and "0 of 15625 inputs examined" in verdict.detail


def test_unsupported_models_are_unknown_on_enumerate():
    model = random_model(RandomConfig(seed=1, scoring="softmax"))
    verdict = check_enumerate(request(model, Exact(), GRID))  # (a spec with this model is an input error)
    assert verdict.status == "unknown" and "softmax is not exactly representable" in verdict.detail


@pytest.mark.slow
def test_auto_prefers_enumerate_when_the_domain_fits_the_timeout():
    model = random_model(RandomConfig(seed=1, width=2))
    verdict = check(*request(model, Fixed(), GRID), engine="auto")
    assert verdict.status == "proved" and verdict.auto["chosen"] == "enumerate"
    huge = GridDomain.regular(2, F(1, 64), 8)  # 4096 tokens, length 8: about 8e28 inputs
    verdict = check(*request(model, Fixed(), huge), engine="auto", timeout=3)
    assert verdict.auto["chosen"] == "smt" and verdict.engine == "smt"
    assert verdict.status in ("proved", "unknown")  # one hardmax layer: z3 often proves it within the 3 s

"""Adversarial soundness audit: engine verdicts against a brute-force oracle, and regressions for wrong verdicts.

The oracle is written here, directly on ``verify_tf.semantics.evaluate`` over the whole domain; every engine's
``proved`` / ``refuted`` must agree with it (``unknown`` is always allowed). Each regression test below failed
before its fix.
"""

from __future__ import annotations

import random
from fractions import Fraction as F

import pytest

from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.domain import GridDomain, StringDomain
from verify_tf.ir import AttentionLayer, Block, FeedForward, GridTokens, Head, Model, matrix, vector, zeros
from verify_tf.properties.base import CheckRequest, registry
from verify_tf.semantics import Exact, Fixed, evaluate

from helpers import head, one_layer

EXACT = Exact()


def check(name, model, domain, arith=EXACT, engine="interpret", timeout=60, **options):
    base = {"solver": "z3", "rlimit": None}
    base.update(options)
    request = CheckRequest(model=model, arithmetic=arith, domain=domain, options=base, label=name, engine=engine,
                           timeout=timeout)
    return registry()[name].run(request)


# -- constant inputs of a distinct-tokens domain ---------------------------------------------------------------

def _causal_position_counter() -> Model:
    """Causal uniform attention + ReLU layer: readout (1, 2) on both inputs of {0,1}^2 with distinct tokens.

    z_i = x_i - mean(x_0..x_i): 0 at position 0, ±1/2 at position 1; then 1 + |z|·2 via relu(z) + 3 relu(-z) + z.
    """
    h = Head(query=matrix([[0]]), key=matrix([[0]]), value=matrix([[-1]]), output=matrix([[1]]), query_bias=zeros(1),
             key_bias=zeros(1), value_bias=zeros(1), scoring="uniform", causal=True)
    ff = FeedForward(matrix([[1], [-1]]), vector([0, 0]), matrix([[1, 3]]), vector([1]))
    return Model(GridTokens(1), 1, (Block(AttentionLayer((h,), zeros(1)), ff),), vector([1]))


DISTINCT_PAIRS = GridDomain(1, (F(0), F(1)), 2, distinct_tokens=True)


def test_inexpressible_never_certifies_a_bound_from_inputs_outside_a_distinct_domain():
    model = _causal_position_counter()
    assert all(evaluate(model, EXACT, x).readout == [1, 2] for x in DISTINCT_PAIRS.inputs())  # error 0 everywhere
    verdict = check("inexpressible", model, DISTINCT_PAIRS, engine="smt", target="position-index")
    assert verdict.status != "proved"  # was: proved with ε* = 1/2 from x* = [0, 0], not an input of the domain


def test_position_blind_has_no_constant_input_of_length_two_in_a_distinct_domain():
    model = one_layer(head(v=1, positional="urpe", rpe=[0, 0, 0], urpe=[1, 2, 3]))  # separates positions
    for scope, engine in (("model", "interpret"), ("architecture", "smt")):
        verdict = check("position-blind", model, DISTINCT_PAIRS, engine=engine, scope=scope, on="output",
                        tolerance=F(0))
        assert verdict.status == "proved", scope  # vacuous: (x, x) is not an input of the domain


# -- the empty input ------------------------------------------------------------------------------------------

def test_enumerate_handles_the_empty_input_of_an_exact_uniform_model():
    model = one_layer(head(scoring="uniform"))
    domain = GridDomain(1, (F(0), F(1)), 0)
    for name, options in (("permutation-equivariance", {"on": "output", "samples": 10}),):
        assert check(name, model, domain, engine="enumerate", **options).status == "proved"


# -- interval bounds: per-probability tie weights lose mass ---------------------------------------------------

def test_per_probability_head_output_below_the_value_hull_feeds_a_product_exactly():
    """A three-way hardmax tie at f = 2 weighs each value 1/4: the head output (3/4 of the mean) lies below every
    value, so an interval taken as the hull of the values would be too tight; layer 2 multiplies it (q·k
    through a bit decomposition based on that interval). The random differential tests do not reach this."""
    from test_smt_differential import assert_encoding_matches

    tie = head(q=0, k=0, v=1, o=1, scoring="hardmax")
    square = head(q=1, k=1, v=1, o=1, scoring="hardmax")
    model = Model(GridTokens(1), 1, (Block(AttentionLayer((tie,), zeros(1), residual=False)),
                                     Block(AttentionLayer((square,), zeros(1)))), vector([1]))
    arith = Fixed(8, 2, "per-probability")
    tokens = ((F(2),), (F(3),), (F(2),))
    assert evaluate(model, arith, tokens).blocks[0].heads[0].output[0] == (F(7, 4),)  # below min value 2
    assert_encoding_matches(model, arith, tokens, {0, 1, 2})

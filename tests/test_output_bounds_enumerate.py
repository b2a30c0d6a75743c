"""output-bounds on the `enumerate` engine agrees with a brute-force oracle computed on the interpreter."""

from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000), st.sampled_from(["exact", "fixed"]), st.booleans())
def test_output_bounds_enumerate_matches_the_brute_force_oracle(seed, mode, causal):
    from helpers import verdict as check
    from verify_tf.builders.random_model import RandomConfig, random_model
    from verify_tf.domain import GridDomain
    from verify_tf.semantics import Exact, Fixed, evaluate

    scoring = "softmax" if mode == "fixed" else "hardmax"
    model = random_model(
        RandomConfig(seed=seed, width=1, layers=1, ffn_width=2, scoring=scoring, causal=causal, max_length=3)
    )
    arith = Exact() if mode == "exact" else Fixed(16, 4)
    domain = GridDomain(1, (Fraction(-1, 2), Fraction(0), Fraction(1, 2)), 3)
    values = [q for x in domain.inputs() for q in evaluate(model, arith, x).readout]
    lo, hi = min(values), max(values)
    for bounds, expected in (
        ({"lo": lo, "hi": hi}, "proved"),
        ({"lo": lo + Fraction(1, 16), "hi": hi}, "refuted"),
        ({"lo": lo, "hi": hi - Fraction(1, 16)}, "refuted"),
    ):
        if bounds["lo"] > bounds["hi"]:
            continue  # lo > hi is an input error, not a property (tests/test_spec_errors.py)
        verdict = check(model, arith, domain, "output-bounds", bounds, engine="enumerate")
        assert verdict.status == expected, verdict.detail
        if expected == "proved":
            assert Fraction(verdict.statistics["readout_min"]) == lo
            assert Fraction(verdict.statistics["readout_max"]) == hi


def test_output_bounds_beyond_int64_are_compared_exactly():
    """Lemma 6 (1, 1/4, 3) with a global shift of 3^45: every readout value exceeds 2^63, so the thresholds are
    compared as Python integers (an int64 clamp would make every bound look satisfied)."""
    from helpers import verdict as check
    from verify_tf.builders.yun import yun_contextual_mapping
    from verify_tf.domain import GridDomain
    from verify_tf.semantics import Exact, evaluate

    model = yun_contextual_mapping(1, Fraction(1, 4), 3, global_shift_scale=3**45)
    domain = GridDomain.regular(1, Fraction(1, 4), 3, distinct_tokens=True)
    values = [q for x in domain.inputs() for q in evaluate(model, Exact(), x).readout]
    lo, hi = min(values), max(values)
    assert lo > 2**63
    assert check(model, Exact(), domain, "output-bounds", {"lo": lo, "hi": hi}, engine="enumerate").status == "proved"
    for bounds in ({"lo": lo + 1, "hi": hi}, {"lo": lo, "hi": hi - 1}):
        assert check(model, Exact(), domain, "output-bounds", bounds, engine="enumerate").status == "refuted"

"""Properties on the SMT engine: real verdicts and witnesses, replay, minimisation, export, solvers, and
agreement with the exhaustive ``interpret`` engine on domains small enough to enumerate."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from fractions import Fraction, Fraction as F
from pathlib import Path

import pytest

from helpers import head, one_layer, verdict
from verify_tf.domain import GridDomain
from verify_tf.runner import Overrides, check_property
from verify_tf.semantics import Exact
from verify_tf.spec.loader import load_spec, load_spec_text


def check(text: str, **overrides):
    spec = load_spec_text(text)
    return [check_property(spec, p, Overrides(**overrides)) for p in spec.properties]


FFN = """
model:
  layers:
    - feed-forward: {w1: [[2], [-1]], b1: [0, 1], w2: [[1, 1]], b2: [0]}
  tokens: {grid: 1}
arithmetic: ARITHMETIC
domain: {grid: {step: 1/4, lo: -1, hi: 1}, length: 2}
properties:
  - output-bounds: {lo: LO, hi: HI, engine: ENGINE}
"""


def ffn_spec(lo, hi, engine, arithmetic="exact") -> str:
    return FFN.replace("ARITHMETIC", arithmetic).replace("LO", str(lo)).replace("HI", str(hi)).replace("ENGINE", engine)


def test_output_bounds_proved_by_smt_and_by_enumeration() -> None:
    # q = z + relu(2z) + relu(1 - z) on z in [-1, 1]: 1 for z <= 0, 2z + 1 for z >= 0; range [1, 3]
    for engine in ("smt", "interpret"):
        (verdict,) = check(ffn_spec(1, 3, engine))
        assert verdict.status == "proved", verdict
    (tight,) = check(ffn_spec(F(1), F(11, 4), "smt"))
    assert tight.status == "refuted"
    assert tight.counterexample["value"] == "3"
    assert tight.counterexample["input"][tight.counterexample["position"]] == ["1"]


def test_output_bounds_statistics_report_bounds_decisions() -> None:
    (verdict,) = check(ffn_spec(1, 3, "smt"))
    stats = verdict.statistics
    assert stats["theory"] == "QF_LIA" and stats["solver"] == "z3"
    assert stats["queries"] == 1 and stats["variables"] == 2  # one grid index per position, no auxiliaries
    # relu(2z) needs a case split; relu(1 - z) >= 0 on z in [-1, 1] is decided by the bounds (2 positions)
    assert stats["relus_total"] == 4 and stats["relus_fixed"] == 2


def test_minimised_witness_is_lexicographically_smallest() -> None:
    # q = 2z + 1 > 2 exactly when z >= 3/4 (index 7 or 8 of the grid -1..1 step 1/4)
    (verdict,) = check(ffn_spec(1, 2, "smt"), minimize=True)
    cx = verdict.counterexample
    assert verdict.status == "refuted"
    assert cx["minimal"] is True
    assert cx["index_vector"] == [0, 7]  # position 0 as small as possible (-1), then the first violating z
    assert cx["input"] == [["-1"], ["3/4"]]


def test_smt2_export_writes_one_file_per_query(tmp_path) -> None:
    check(ffn_spec(1, 3, "smt"), smt2_dir=tmp_path)
    (path,) = tmp_path.glob("*.smt2")
    text = path.read_text()
    assert text.startswith("(set-logic QF_LIA)") and "(check-sat)" in text


@pytest.mark.skipif(importlib.util.find_spec("cvc5") is None, reason="cvc5 not installed (optional extra)")
def test_cvc5_agrees_and_its_model_is_replayed() -> None:
    text = ffn_spec(1, 3, "smt").replace("engine: smt}", "engine: smt, solver: cvc5}")
    (verdict,) = check(text)
    assert verdict.status == "proved" and verdict.statistics["answered_by"] == "cvc5"
    (refuted,) = check(ffn_spec(1, F(5, 2), "smt").replace("engine: smt}", "engine: smt, solver: cvc5}"))
    assert refuted.status == "refuted" and refuted.counterexample["value"] == "3"


@pytest.mark.skipif(importlib.util.find_spec("bitwuzla") is None, reason="bitwuzla not installed (optional extra)")
def test_bitwuzla_on_the_bit_vector_translation() -> None:
    text = ffn_spec(1, F(5, 2), "smt", "{mode: fixed, bits: 8, frac: 2}")
    (refuted,) = check(text.replace("engine: smt}", "engine: smt, solver: bitwuzla}"))
    assert refuted.status == "refuted" and refuted.statistics["theory"].startswith("QF_BV")
    (proved,) = check(
        ffn_spec(1, 3, "smt", "{mode: fixed, bits: 8, frac: 2}").replace(
            "engine: smt}", "engine: smt, solver: bitwuzla}"
        )
    )
    assert proved.status == "proved"


def test_missing_foreign_solver_gives_unknown(monkeypatch) -> None:
    from verify_tf.symbolic import foreign

    monkeypatch.setattr(foreign, "available", lambda: [])
    (verdict,) = check(ffn_spec(1, 3, "smt").replace("engine: smt}", "engine: smt, solver: cvc5}"))
    assert verdict.status == "unknown" and "not installed" in verdict.detail


def test_timeout_gives_unknown_with_reason() -> None:
    text = ffn_spec(1, 3, "smt").replace("engine: smt}", "engine: smt, rlimit: 1}")
    (verdict,) = check(text)
    assert verdict.status == "unknown"
    assert verdict.tried and "unknown" in verdict.tried[0]


# ---------------------------------------------------------------- shipped specs, both engines
# (each smt-*.yaml's own `expect:` verdicts are tests/test_shipped_specs.py's, which runs every shipped spec)

SPECS = sorted((Path(__file__).resolve().parent.parent / "specs").glob("smt-*.yaml"))


def _small(spec):
    """The spec on a domain small enough to enumerate (<= ~2,000 inputs): shorter, then a coarser grid."""
    domain = spec.domain
    if isinstance(domain, GridDomain):
        if domain.size() > 2000:
            domain = replace(domain, length=2)
        while domain.size() > 2000:
            domain = replace(domain, values=domain.values[::2])
    return replace(spec, domain=domain)


@pytest.mark.slow
@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_smt_and_exhaustive_enumeration_agree_on_shipped_specs(path) -> None:
    spec = _small(load_spec(path))
    for prop in spec.properties:
        by_smt = check_property(spec, prop, Overrides(engine="smt"))
        by_enumeration = check_property(spec, prop, Overrides(engine="interpret"))
        assert by_smt.status in ("proved", "refuted"), by_smt
        assert by_smt.status == by_enumeration.status, (prop.label, by_smt, by_enumeration)


# ---------------------------------------------------------------- equivalent-to and permutation-equivariance


def test_equivalence_miter_witness_shows_both_values() -> None:
    spec = load_spec(SPECS[[p.stem for p in SPECS].index("smt-equivalence-refuted")])
    (verdict,) = [check_property(spec, p, Overrides(minimize=True)) for p in spec.properties]
    cx = verdict.counterexample
    # b1[1] = -1/2 vs -1/4 differ exactly where relu(x1 + x2 - 1/4) > 0 reaches the readout; the smallest
    # index vector moves position 0 as low as possible
    assert verdict.status == "refuted" and cx["minimal"] is True
    assert cx["value"] != cx["other_value"]
    assert Fraction(cx["other_value"][0]) - Fraction(cx["value"][0]) == Fraction(1, 4)


def test_permutation_equivariance_smt_matches_the_interpreter_on_rpe() -> None:
    model = one_layer(head(q=1, k=1, v=1, positional="rpe", rpe=[0, 0, 1]), residual=False)
    domain = GridDomain(1, (Fraction(0), Fraction(1)), 2)
    for engine in ("smt", "interpret"):
        result = verdict(model, Exact(), domain, "permutation-equivariance", {"on": "output"}, engine=engine)
        assert result.status == "refuted", result
    # X = [0, 1]: row 0 sees scores (0, 0 + B[1] = 1) and picks 1; swapping gives a different f at position 0
    assert result.counterexample["transposition"] == [0, 1]


def test_output_bounds_on_strings_with_bos_and_negative_positions() -> None:
    text = """
model:
  tokens: {alphabet: [a, b], embedding: [[1], [0]], bos: "^", bos-embedding: [0]}
  layers:
    - attention:
        heads: [{scoring: uniform, causal: true, query: [[0]], key: [[0]], value: [[1]], output: [[1]]}]
        residual: false
  readout: [1]
arithmetic: exact
domain: {strings: {max-length: 4}}
properties:
  - output-bounds: {lo: 0, hi: 4/5, positions: [-1], engine: ENGINE}
  - output-bounds: {lo: 0, hi: 3/4, positions: [-1], engine: ENGINE}
"""
    # the last position averages BOS (0) and n symbols: the fraction of a's among n + 1 entries, at most n/(n+1)
    for engine in ("smt", "interpret"):
        proved, refuted = check(text.replace("ENGINE", engine))
        assert proved.status == "proved", proved
        assert refuted.status == "refuted" and refuted.counterexample["value"] == "4/5"
        assert refuted.counterexample["input"] == ["a", "a", "a", "a"]


class _Term:
    """A stand-in for a z3 term with a chosen structural hash, counting how often it is printed."""

    printed = 0

    def __init__(self, hashed: int, text: str):
        self.hashed, self.text = hashed, text

    def hash(self) -> int:
        return self.hashed

    def eq(self, other: _Term) -> bool:
        return self.text == other.text

    def sexpr(self) -> str:
        _Term.printed += 1
        return self.text


def test_canonical_order_prints_only_the_terms_that_share_a_hash() -> None:
    """The order is the definition's, sorted by (structural hash, text), while only terms whose hash collides are
    printed (printing a large term writes its DAG out as a tree: 16 ms a term in the SMT differential tests)."""
    from verify_tf.symbolic.values import canonical_order

    terms = [_Term(5, "c"), _Term(1, "z"), _Term(3, "b"), _Term(3, "a"), _Term(9, "y"), _Term(3, "a")]
    _Term.printed = 0
    ordered = canonical_order(terms)
    assert [(t.hashed, t.text) for t in ordered] == sorted((t.hashed, t.text) for t in terms)
    assert _Term.printed == 3  # the three terms of hash 3, once each; none of the unique hashes
    _Term.printed = 0
    assert canonical_order([_Term(2, "q"), _Term(1, "p")])[0].text == "p" and _Term.printed == 0

"""indistinguishable: depth signatures, the symmetry queries, the lemma on real models, and the verdicts.

Where the numbers come from: the pairs are found by hand from the definition sig_1(i) = (letter, multiset of the
letters so far): abb and bab both end in b with one a and two b's; ab and ba end in different letters. At depth
2 the signature of the last position lists (letter, prefix counts) for every prefix, and the prefix counts of a
prefix give its length, so it determines the word: 2^1 + ... + 2^8 = 510 words have 510 signatures.
"""

from __future__ import annotations

import pytest

from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.classes import Signatures
from verify_tf.contract import STEP_FAILS as FAILS, STEP_HOLDS as HOLDS
from verify_tf.crasp.languages import in_lk
from verify_tf.engines.architecture.signatures import find_pair
from verify_tf.engines.architecture.symmetry import SymmetryStep, run_symmetry_step, symmetry_steps
from verify_tf.properties import indistinguishable
from verify_tf.runner import Overrides, check_property
from verify_tf.schema.errors import SpecError
from verify_tf.semantics import Exact, Fixed, evaluate
from verify_tf.spec.loader import load_spec_text

ARITHMETICS = [Exact(), Fixed(8, 2, "exact-sums"), Fixed(8, 2, "per-probability"), Fixed(8, 2, "rounded-terms")]


def words(max_length):
    import itertools

    for n in range(1, max_length + 1):
        for letters in itertools.product("ab", repeat=n):
            yield "".join(letters)


# ---------------------------------------------------------------- signatures


@pytest.mark.parametrize("bos", [False, True])
def test_signatures_by_hand(bos):
    one = Signatures(1, bos)
    assert one.last("abb") == one.last("bab")  # ends in b, multiset {a, b, b}
    assert one.last("abb") != one.last("bba") and one.last("ab") != one.last("ba")
    zero = Signatures(0, bos)
    assert zero.last("a") == zero.last("ba") == zero.last("bba") != zero.last("ab")


def test_depth_two_signatures_determine_the_word():
    signatures = Signatures(2, True)
    assert len({signatures.last(w) for w in words(8)}) == 510


@pytest.mark.parametrize(
    "k,depth,pair", [(1, 0, ("a", "ba")), (2, 1, ("abb", "bab")), (3, 1, ("aba", "baa")), (4, 1, ("abab", "aabb"))]
)
def test_search_finds_the_first_pair(k, depth, pair):
    # L_1 = a+, L_2 = a+b+, L_3 = a+b+a+, L_4 = a+b+a+b+ (in_lk is a regular-expression test). By hand for L_4:
    # the words ending in b with two a's and two b's, in order: aabb (not in L_4), abab (in L_4)
    search = find_pair(words(6), depth, True, lambda w: in_lk(k, w))
    assert search.pair == pair
    assert in_lk(k, pair[0]) and not in_lk(k, pair[1])


def test_search_without_a_pair_counts_the_signatures():
    search = find_pair(words(8), 2, True, lambda w: in_lk(3, w))
    assert search.pair is None and search.words == 510 and search.distinct == 510


# ---------------------------------------------------------------- symmetry queries


@pytest.mark.parametrize("arithmetic", ARITHMETICS, ids=lambda a: getattr(a, "attention_rounding", "exact"))
def test_every_scoring_reads_its_keys_as_a_multiset(arithmetic):
    steps = symmetry_steps(arithmetic, 6)
    # keys m = 3..6, transposition for every m and the cycle from m = 4: 7 steps per scoring
    assert len(steps) == 7 * (3 if isinstance(arithmetic, Fixed) else 2)
    assert all(run_symmetry_step(arithmetic, s, seconds=30)[0].status == HOLDS for s in steps)


@pytest.mark.parametrize(
    "arithmetic,scoring",
    [(a, s) for a in ARITHMETICS for s in ("hardmax", "softmax") if s == "hardmax" or isinstance(a, Fixed)],
)  # softmax: fixed only
def test_a_relative_bias_breaks_the_symmetry(arithmetic, scoring):
    step = SymmetryStep(scoring, 4, "transposition")
    assert run_symmetry_step(arithmetic, step, seconds=30, relative_bias=True)[0].status == FAILS
    # a uniform head ignores its scores, bias or not
    uniform = SymmetryStep("uniform", 4, "transposition")
    assert run_symmetry_step(arithmetic, uniform, seconds=30, relative_bias=True)[0].status == HOLDS


# ---------------------------------------------------------------- the lemma on real models


def _model(seed, layers, scoring, positional="standard"):
    return random_model(
        RandomConfig(
            seed=seed,
            width=3,
            layers=layers,
            heads=2,
            ffn_width=3,
            scoring=scoring,
            causal=True,
            positional=positional,
            alphabet=("a", "b"),
            bos="^",
            max_length=8,
        )
    )


def _last_column(model, arithmetic, word):
    return evaluate(model, arithmetic, tuple(word)).output[-1]


@pytest.mark.slow
@pytest.mark.parametrize(
    "scoring,arithmetic",
    [
        ("hardmax", Exact()),
        ("uniform", Exact()),
        ("softmax", Fixed(16, 6, "exact-sums")),
        ("softmax", Fixed(16, 6, "rounded-terms")),
        ("softmax", Fixed(16, 6, "per-probability")),
    ],
)
def test_depth_one_models_cannot_tell_the_pairs_apart_but_depth_two_can(scoring, arithmetic):
    separated = 0
    for seed in range(8):
        one = _model(seed, 1, scoring)
        for u, v in [("abb", "bab"), ("aba", "baa"), ("abab", "baab")]:
            assert _last_column(one, arithmetic, u) == _last_column(one, arithmetic, v), (seed, u, v)
        two = _model(seed, 2, scoring)
        separated += _last_column(two, arithmetic, "abb") != _last_column(two, arithmetic, "bab")
    if scoring != "uniform":  # uniform depth-2 models also see counts only: (1, 2) twice, then equal averages
        assert separated > 0


def test_relative_position_encodings_leave_the_class():
    # softmax: the RPE bias moves weight between the a and the b before the last position (6 of 8 seeds)
    arithmetic = Fixed(16, 6, "exact-sums")
    separated = sum(
        _last_column(m, arithmetic, "abb") != _last_column(m, arithmetic, "bab")
        for m in (_model(seed, 1, "softmax", "rpe") for seed in range(8))
    )
    assert separated > 0


# ---------------------------------------------------------------- verdicts


SPEC = """
model: {{construct: crasp-program, program: {program}}}
arithmetic: {{mode: fixed, bits: 4, frac: 0, attention-rounding: exact-sums}}
domain: {{strings: {{alphabet: [a, b], max-length: 8}}}}
properties:
  - indistinguishable: {options}
"""


def _spec(options, program="L1.cr", tmp_path=None):
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "examples" / "crasp"
    return load_spec_text(SPEC.format(program=root / program, options=options.replace("LANG", str(root))))


def _verdict(spec):
    return check_property(spec, spec.properties[0], Overrides())


def test_l2_is_not_recognised_at_depth_one():
    result = _verdict(_spec("{depth: 1, language: LANG/L2.cr}"))
    assert result.status == "proved", result.detail
    assert result.statistics["pair"] == ["abb", "bab"] and result.statistics["in_language"] == [True, False]
    assert result.statistics["symmetry_queries"] == 3 * 3  # keys 3 and 4 (BOS + 3 letters): 1 + 2 per scoring


def test_a_pair_the_model_separates_is_refuted_with_the_columns():
    result = _verdict(_spec("{depth: 1, pair: [ab, ba]}"))
    assert result.status == "refuted"
    assert result.counterexample["input"] == ["a", "b"] and result.counterexample["other"] == ["b", "a"]
    assert result.counterexample["columns"][0] != result.counterexample["columns"][1]


def test_depth_two_search_stops_and_says_why():
    result = _verdict(_spec("{depth: 2, language: LANG/L3.cr}", program="L2.cr"))
    assert result.status == "unknown"
    assert "510 distinct signatures (one per word" in result.detail


def test_a_contradiction_with_the_model_is_an_error_never_a_proof(monkeypatch):
    # pretend the signatures of ab and ba agree: the replay on the model must catch it
    monkeypatch.setattr(indistinguishable.Signatures, "last", lambda self, word: 0)
    result = _verdict(_spec("{depth: 1, pair: [ab, ba]}"))
    assert result.status == "error" and "internal inconsistency" in result.detail


@pytest.mark.parametrize(
    "options,program,needle",
    [
        ("{depth: 1}", "L1.cr", "needs 'pair', 'language' or both"),
        ("{depth: 0, pair: [ab, ba]}", "L1.cr", "more than depth 0"),
        ("{depth: 1, pair: [ab, bc]}", "L1.cr", "letter 'c'"),
    ],
)
def test_mistakes_are_input_errors(options, program, needle):
    with pytest.raises(SpecError) as caught:
        _spec(options, program)
    assert needle in str(caught.value)


def test_models_with_positions_are_refused():
    with pytest.raises(SpecError) as caught:
        load_spec_text("""
model: {random: {seed: 1, width: 2, layers: 1, scoring: hardmax, causal: true, positional: rpe,
                 alphabet: [a, b], max-length: 4}}
arithmetic: exact
properties:
  - indistinguishable: {depth: 1, pair: [abb, bab]}
""")
    assert "no positional information" in str(caught.value)

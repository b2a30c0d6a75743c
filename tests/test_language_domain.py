"""Strings domains restricted to a regular language (``strings: {..., language: {regex: ...}}``).

Where the numbers come from: the count of L_k's words up to N is C(N, k) (a word of L_k of length n is a
composition of n into k positive blocks, C(n − 1, k − 1) of them, and Σ_{n ≤ N} C(n − 1, k − 1) = C(N, k):
``math.comb``); the words themselves and their order are compared with an independent brute force that filters
Σ^n through Python's own ``re`` (the test may filter; the product never does); the least failing word of the
mutated L_3 model is computed independently by running the reference interpreter and the program's interpreter
on every string in shortlex order, filtered by ``re``.
"""

import itertools
import math
import re

import numpy as np
import pytest
from click.testing import CliRunner

from helpers import L3_PROGRAM, least_failing_prefix, mutated_l3
from verify_tf.cli import main
from verify_tf.contract import Task
from verify_tf.crasp import in_lk, lk_regex
from verify_tf.crasp.parser import load_program
from verify_tf.domain import StringDomain
from verify_tf.engines.scan import examined_prefix
from verify_tf.fingerprint import digest
from verify_tf.regular import RegexError, RegexLanguage
from verify_tf.runner import Overrides, check_all, run_engine
from verify_tf.spaces import InputSpace
from verify_tf.spec import SpecError, load_spec_text

L3 = L3_PROGRAM


def mutated(regex: str, n: int, *properties: str) -> str:
    return mutated_l3(f'{{regex: "{regex}"}}', n, *properties)


def brute_force(regex: str, alphabet: str, longest: int, shortest: int = 1) -> list[str]:
    """Every string of Σ^n, n in range, that Python's ``re`` matches, in the domain's order (length, then the
    alphabet's order as listed: itertools.product's order)."""
    pattern = re.compile(regex.replace(".", f"[{alphabet}]"))
    return [
        "".join(w)
        for n in range(shortest, longest + 1)
        for w in itertools.product(alphabet, repeat=n)
        if pattern.fullmatch("".join(w))
    ]


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
def test_the_words_of_lk_up_to_100_are_counted_exactly(k):
    domain = StringDomain(("a", "b"), 1, 100, RegexLanguage.compile(lk_regex(k), "ab"))
    assert domain.size() == InputSpace(domain).count() == math.comb(100, k)  # 100; 4,950; ...; 75,287,520


@pytest.mark.parametrize(
    "regex, alphabet",
    [
        ("a+b+a+", "ab"),
        ("(a+b+){2}a+", "ab"),
        ("(ab|ba)*c?", "abc"),
        ("a{2,3}(b|c){1,}", "abc"),
        (".b{2}.?", "ab"),
        ("(a|b)*", "ba"),  # the alphabet's order as listed: b before a
        ("()|a(b)?", "ab"),
        ("((a|b)(a|b))*", "ab"),
    ],
)
def test_enumeration_order_and_words_equal_a_brute_force_filter(regex, alphabet):
    domain = StringDomain(tuple(alphabet), 1, 7, RegexLanguage.compile(regex, alphabet))
    space = InputSpace(domain)
    expected = brute_force(regex, alphabet, 7)
    assert ["".join(w) for w in space.inputs()] == expected
    assert ["".join(w) for w in domain.inputs()] == expected  # the automaton's walk, not the unranking
    assert space.count() == domain.size() == len(expected)
    # any chunk is unranked directly: a middle slice equals the slice of the whole
    if len(expected) > 10:
        middle = [space.decode(r) for rows in space.rows(3, len(expected) - 4) for r in rows]
        assert ["".join(w) for w in middle] == expected[3:-4]


def test_constant_inputs_of_a_language_are_its_constant_words():
    domain = StringDomain(("a", "b"), 1, 5, RegexLanguage.compile("a*|b{2}", "ab"))
    constant = ["".join(w) for w in InputSpace(domain, order="constant").inputs()]
    assert constant == ["a", "aa", "bb", "aaa", "aaaa", "aaaaa"]
    assert constant == ["".join(w) for w in domain.constant_inputs()]


@pytest.mark.parametrize(
    "regex, column, message",
    [
        ("a(b", 2, "'(' without its ')'"),
        ("ab)", 3, "unexpected ')'"),
        ("*a", 1, "'*' repeats nothing"),
        ("ac", 2, "'c' is not a letter of the alphabet {a, b}"),
        ("a{3,1}", 2, "n (1) is below m (3)"),
        ("a{x}", 2, "expected {m}, {m,n} or {m,}"),
        ("a||b", 3, "an empty alternative"),
        ("a b", 2, "' ' is not a letter"),
        ("", 1, "the regex is empty"),
    ],
)
def test_regex_errors_name_their_column(regex, column, message):
    with pytest.raises(RegexError) as info:
        RegexLanguage.compile(regex, "ab")
    assert info.value.column == column and message in info.value.message


def test_a_bad_regex_is_a_located_input_error_with_exit_2(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(mutated("a+(b", 8, f"crasp-equivalence: {{program: {L3}}}"))
    result = CliRunner().invoke(main, ["check", str(spec)])
    assert result.exit_code == 2
    assert (
        f"{spec}:7: domain.strings.language.regex: '(' without its ')' (column 3 of 'a+(b')\n  hint: close every group"
        in result.output
    )


def test_a_language_with_no_word_in_range_is_refused_not_proved_vacuously():
    with pytest.raises(SpecError) as info:
        load_spec_text(mutated("a{20}b", 8, f"crasp-equivalence: {{program: {L3}}}"), "spec.yaml")
    assert str(info.value).startswith(
        "spec.yaml:7: domain.strings.language.regex: no word of a{20}b has a length in 1..8"
    )


@pytest.mark.parametrize(
    "properties, where, message",
    [
        (
            [f"crasp-equivalence: {{program: {L3}, engine: smt}}"],
            "spec.yaml:9: properties[0].crasp-equivalence.engine",
            "engine 'smt' would check every string, not the words of a+b+a+",
        ),
        (
            [f"crasp-equivalence: {{program: {L3}, engine: split}}"],
            "spec.yaml:9: properties[0].crasp-equivalence.engine",
            "engine 'split' would check every string",
        ),
        (
            [f"crasp-equivalence: {{program: {L3}, lengths: all}}"],
            "spec.yaml:9: properties[0].crasp-equivalence.lengths",
            "lengths: all claims every string of every length, not the words of a language",
        ),
        (
            ["output-bounds: {hi: 1000}"],
            "spec.yaml:7: domain.strings.language",
            "property 'output-bounds' does not support a domain restricted to a language",
        ),
    ],
)
def test_engines_and_properties_that_would_read_every_string_refuse_a_language(properties, where, message):
    with pytest.raises(SpecError) as info:
        load_spec_text(mutated("a+b+a+", 8, *properties), "spec.yaml")
    assert str(info.value).startswith(f"{where}: {message}")


def test_a_language_domain_keeps_only_the_engines_that_honour_it():
    spec = load_spec_text(mutated("a+b+a+", 8, f"crasp-equivalence: {{program: {L3}}}"), "spec.yaml")
    assert spec.properties[0].engines == ("enumerate", "interpret", "counting")


def test_the_runner_refuses_an_engine_that_would_read_every_string():
    """The Python path (a task built without the loader) is guarded too."""
    spec = load_spec_text(mutated("a+b+a+", 8, f"crasp-equivalence: {{program: {L3}}}"), "spec.yaml")
    prop = spec.properties[0]
    from verify_tf.properties import load as load_property

    task = Task.make(prop.label, load_property(prop.name), prop.options, spec.model, spec.arithmetic, spec.domain)
    with pytest.raises(ValueError, match="would check every string, not the words of a\\+b\\+a\\+"):
        run_engine(task, None, "smt")  # type: ignore[arg-type]


def test_the_python_api_refuses_what_the_loader_refuses():
    from verify_tf import api
    from verify_tf.spec import SpecError as ApiError

    spec = load_spec_text(mutated("a+b+a+", 8, f"crasp-equivalence: {{program: {L3}}}"), "spec.yaml")
    with pytest.raises(ApiError, match="does not support engine 'smt'"):
        api.check(spec.model, spec.arithmetic, spec.domain, "crasp-equivalence", {"program": str(L3)}, engine="smt")
    with pytest.raises(ValueError, match="'output-bounds' does not support a domain restricted to a language"):
        api.check(spec.model, spec.arithmetic, spec.domain, "output-bounds", {"hi": 1000})
    verdict = api.check(spec.model, spec.arithmetic, spec.domain, "crasp-equivalence", {"program": str(L3)})
    assert verdict.status == "proved" and verdict.detail.startswith("56 words of a+b+a+")  # C(8, 3) = 56


def test_cache_keys_and_certificate_digests_tell_a_language_from_every_string():
    everything = StringDomain(("a", "b"), 1, 8)
    words = StringDomain(("a", "b"), 1, 8, RegexLanguage.compile("a+b+a+", "ab"))
    other = StringDomain(("a", "b"), 1, 8, RegexLanguage.compile("a+b+a+b+", "ab"))
    assert len({digest(everything), digest(words), digest(other)}) == 3
    assert len({repr(everything), repr(words), repr(other)}) == 3  # Task.make's fingerprint reads repr(domain)
    assert words.describe() == "words of a+b+a+ over {a, b} up to length 8"


def least_failing_word(regex: str, longest: int) -> tuple[str, int]:
    """Independent: every string in shortlex order, kept when ``re`` matches, each position compared on the
    reference interpreter (readout > 0) and the program's interpreter; the first disagreement."""
    spec = load_spec_text(mutated(regex, longest, f"crasp-equivalence: {{program: {L3}}}"), "spec.yaml")
    return least_failing_prefix(spec, load_program(L3), brute_force(regex, "ab", longest))


@pytest.mark.parametrize("engine", ["enumerate", "interpret", "counting"])
def test_the_least_failing_word_of_a_language_is_found_by_every_engine_that_honours_it(engine):
    """Over the words of L_3 or L_5 the mutated model fails first on 'ababa' (a word of L_5: the program rejects
    at position 3, where the model, blind to the 4th block, accepts); the independent scan agrees."""
    regex = "(a+b+){1,2}a+"
    assert least_failing_word(regex, 7) == ("ababa", 3)
    text = mutated(regex, 9, f"crasp-equivalence: {{program: {L3}, mode: prefix, engine: {engine}}}")
    (verdict,) = check_all([load_spec_text(text, "spec.yaml")], Overrides())
    assert verdict.status == "refuted"
    assert verdict.counterexample["string"] == "ababa" and verdict.counterexample["position"] == 3


@pytest.mark.parametrize("engine", ["enumerate", "counting"])
def test_the_words_of_l3_are_all_labelled_right_by_the_mutated_model(engine):
    """The mutation matters only past the 3rd block: on every word of L_3 up to 12 (C(12, 3) = 220 words) every
    prefix label is right, while on every string it is refuted (at 'abab', specs/crasp-L3-mutated.yaml)."""
    text = mutated("a+b+a+", 12, f"crasp-equivalence: {{program: {L3}, mode: prefix, engine: {engine}}}")
    (verdict,) = check_all([load_spec_text(text, "spec.yaml")], Overrides())
    assert verdict.status == "proved", verdict.detail
    assert verdict.detail.startswith("220 words of a+b+a+ over {a, b} up to length 12 agree with L3.cr")


def test_accept_mode_on_a_language_checks_the_words_themselves():
    """accept: only the last position of each word of the domain; 'ababa' is the least word of L_3 or L_5 the
    model accepts and the program rejects (its prefix 'abab' is no word of the domain, so not checked)."""
    for engine in ("enumerate", "counting"):
        text = mutated("(a+b+){1,2}a+", 9, f"crasp-equivalence: {{program: {L3}, engine: {engine}}}")
        (verdict,) = check_all([load_spec_text(text, "spec.yaml")], Overrides())
        assert (verdict.status, verdict.counterexample["string"], verdict.counterexample["position"]) == (
            "refuted",
            "ababa",
            4,
        )


def test_how_far_an_unfinished_scan_got_is_read_in_the_spaces_order():
    domain = StringDomain(("a", "b"), 1, 4, RegexLanguage.compile("a+b+", "ab"))  # lengths 2, 3, 4: 1, 2, 3 words
    space = InputSpace(domain)
    assert [s.count for s in space.segments()] == [0, 1, 2, 3]
    assert examined_prefix(space, [(0, 2), (4, 6)]) == {"inputs_in_order": 2, "every_input_up_to_length": 2}
    assert examined_prefix(space, [(2, 3), (0, 2)]) == {"inputs_in_order": 3, "every_input_up_to_length": 3}
    assert examined_prefix(space, [(1, 6)]) == {"inputs_in_order": 0, "every_input_up_to_length": 1}  # no word of 1


def test_lk_regex_is_lk():
    for k in range(1, 7):
        language = RegexLanguage.compile(lk_regex(k), "ab")
        for n in range(9):
            for w in itertools.product("ab", repeat=n):
                assert language.accepts(w) == in_lk(k, "".join(w))
    assert lk_regex(5) == "(a+b+){2}a+" and lk_regex(3) == "a+b+a+"


def test_unranking_is_vectorised_and_exact_at_the_edges():
    language = RegexLanguage.compile("(a+b+){2}a+", "ab")
    n = 100
    count = language.count(n)
    assert count == math.comb(99, 4)
    rows = language.unrank(n, np.array([0, count - 1]))
    assert "".join("ab"[i] for i in rows[0]) == "a" * 96 + "baba"  # the least word of length 100: a's first
    assert "".join("ab"[i] for i in rows[1]) == "a" + "b" * 96 + "aba"  # the greatest: b's as early as can be

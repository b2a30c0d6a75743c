"""Strings domains restricted to the words of a C-RASP program (``strings: {..., language: {crasp: L3.cr}}``).

Where the numbers come from: the words of L_k up to N number C(N, k) (a word of length n is a composition of n
into k positive blocks, C(n − 1, k − 1) of them, summed over n ≤ N: ``math.comb``), and the regex form (tested
against Python's ``re`` in test_language_domain.py) must give the same words in the same order; majority's words
of length n number Σ_{j > n/2} C(n, j) (for n = 100: (2^100 − C(100, 50)) / 2), #a = #b's C(n, n/2); every
non-regular language is compared with a brute-force filter of Σ^n through a plain Python predicate (the test may
filter; the domain never does); the least failing words are found independently by running the reference
interpreter and the program's interpreter on every string in shortlex order, filtered by the same predicate.
"""

import itertools
import math
import pickle
from pathlib import Path

import numpy as np
import pytest

from helpers import least_failing_prefix, mutated_l3
from verify_tf.contract import CountingGoal
from verify_tf.crasp import lk_program, lk_regex
from verify_tf.crasp.interpreter import accepts
from verify_tf.crasp.parser import load_program, parse_program
from verify_tf.crasp.words import ProgramLanguageError, program_language
from verify_tf.domain import StringDomain
from verify_tf.engines.certificates import language_sizes
from verify_tf.engines.counting.certificate import closed_counts
from verify_tf.fingerprint import digest
from verify_tf.regular import RegexLanguage
from verify_tf.runner import Overrides, check_all
from verify_tf.spaces import InputSpace
from verify_tf.spec import SpecError, load_spec_text

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "crasp"
L3 = EXAMPLES / "L3.cr"
MAJORITY = EXAMPLES / "majority.cr"
EQUAL = 'alphabet a b\nequal = #"a" == #"b"\noutput equal\n'  # #a = #b: not regular


def words_of(language, longest: int, shortest: int = 1) -> list[str]:
    return ["".join(w) for n in range(shortest, longest + 1) for w in language.words(n)]


def brute_force(holds, alphabet: str, longest: int) -> list[str]:
    """Every string of Σ^n, 1 <= n <= longest, for which ``holds`` is true, in the domain's order."""
    return [
        "".join(w) for n in range(1, longest + 1) for w in itertools.product(alphabet, repeat=n) if holds("".join(w))
    ]


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
def test_the_lk_programs_words_are_the_regex_forms_words_in_the_same_order(k):
    language = program_language(lk_program(k), "ab", 100, f"L{k}.cr")
    regex = RegexLanguage.compile(lk_regex(k), "ab")
    assert language.horizon is None  # L_k compares counts with 0 only: the exploration closes, every length exact
    # hand: the empty prefix; 1..k+1 blocks after a first a; 1..k after a first b (k + 1 blocks: the same counts)
    assert len(language.delta) == 2 * k + 2
    domain = StringDomain(("a", "b"), 1, 100, language)
    assert domain.size() == InputSpace(domain).count() == math.comb(100, k)  # 100; 4,950; ...; 75,287,520
    assert [language.count(n) for n in range(101)] == [regex.count(n) for n in range(101)]
    assert words_of(language, 10) == words_of(regex, 10)
    ranks = np.arange(0, regex.count(30), 97)  # chunks anywhere in the order, as the engines draw them
    assert (language.unrank(30, ranks) == regex.unrank(30, ranks)).all()


@pytest.mark.parametrize(
    ("source", "alphabet", "holds"),
    [
        (MAJORITY.read_text(), "ab", lambda w: w.count("a") > w.count("b")),
        (MAJORITY.read_text(), "ba", lambda w: w.count("a") > w.count("b")),  # the alphabet's listed order
        (EQUAL, "ab", lambda w: w.count("a") == w.count("b")),
        (
            (EXAMPLES / "dyck1.cr").read_text(),
            "()",
            lambda w: (
                w.count("(") == w.count(")")
                and all(w[: i + 1].count("(") >= w[: i + 1].count(")") for i in range(len(w)))
            ),
        ),
    ],
)
def test_a_non_regular_language_is_its_brute_force_filter(source, alphabet, holds):
    language = program_language(parse_program(source), alphabet, 10, "program.cr")
    expected = brute_force(holds, alphabet, 10)
    domain = StringDomain(tuple(alphabet), 1, 10, language)
    assert ["".join(w) for w in domain.inputs()] == expected  # the walk
    space = InputSpace(domain)
    assert space.count() == len(expected)
    assert ["".join(w) for w in space.inputs()] == expected  # the unranking, in chunks by length
    middle = len(expected) // 2
    assert ["".join(w) for w in space.inputs(middle, middle + 7)] == expected[middle : middle + 7]
    assert all(language.accepts(w) == accepts(parse_program(source), w) for w in expected[:50])
    assert language_sizes(space) == (len(expected), len(expected))  # the exhaustive certificate's two counts


def test_majoritys_words_are_counted_exactly_and_unranked_at_the_edges():
    language = program_language(load_program(MAJORITY), "ab", 100, "majority.cr")
    assert language.horizon == 100 and len(language.delta) == 5151  # (#a, #b) with #a + #b <= 100: C(102, 2)
    count = language.count(100)
    assert count == (2**100 - math.comb(100, 50)) // 2  # hand: Σ_{j > 50} C(100, j), exact beyond 2^62
    count = language.count(60)  # unranking numbers words in int64 (spaces.LIMIT): length 60 has ~5.4·10^17
    assert count == (2**60 - math.comb(60, 30)) // 2
    rows = language.unrank(60, np.array([0, 1, count // 2, count - 1]))
    words = ["".join("ab"[i] for i in row) for row in rows]
    assert words[0] == "a" * 60 and words[1] == "a" * 59 + "b"  # the least words: a's first
    assert words[3] == "b" * 29 + "a" * 31  # the greatest: as many b's first as a majority allows
    assert words[2].count("a") > 30 and words[2] < words[3]


def test_the_empty_word_is_never_a_word_of_a_program():
    language = program_language(parse_program("alphabet a b\nyes = true\noutput yes\n"), "ab", 3, "yes.cr")
    assert language.count(0) == 0 and not accepts(language.program, "")
    assert [language.count(n) for n in range(1, 4)] == [2, 4, 8]
    assert StringDomain(("a", "b"), 0, 3, language).size() == 14


def test_the_state_budget_is_located_with_a_hint(tmp_path, monkeypatch):
    monkeypatch.setattr("verify_tf.crasp.words.MAX_STATES", 100)  # majority up to 20: C(22, 2) = 231 states
    with pytest.raises(ProgramLanguageError, match="need more than 100 states"):
        program_language(load_program(MAJORITY), "ab", 20, "majority.cr")
    with pytest.raises(SpecError) as error:
        load_spec_text(mutated_l3(f"{{crasp: {MAJORITY}}}", 20, f"crasp-equivalence: {{program: {L3}}}"), "spec.yaml")
    assert str(error.value).startswith("spec.yaml:7: domain.strings.language.crasp: the words of ")
    assert "hint: lower max-length" in str(error.value)
    monkeypatch.setattr("verify_tf.crasp.words.MAX_CELLS", 1000)  # L_3's 8 states × 200 lengths: 1600 counts
    with pytest.raises(ProgramLanguageError, match=r"more than 1000 exact counts \(states × 200\)"):
        program_language(lk_program(3), "ab", 199, "L3.cr")


@pytest.mark.parametrize(
    ("language", "files", "message"),
    [
        ('{crasp: L.cr, regex: "a+"}', {}, "domain.strings.language: keys 'regex' and 'crasp' cannot be combined"),
        ("{}", {}, "domain.strings.language: expected 'regex' or 'crasp'"),
        ("{crasp: L.cr}", {}, "domain.strings.language.crasp: file not found: L.cr"),
        ("{crasp: L.cr}", {"L.cr": "alphabet a b\nx = #a >\n"}, "domain.strings.language.crasp: invalid C-RASP"),
        (
            "{crasp: L.cr}",
            {"L.cr": 'alphabet a\nx = #"a" > 0\noutput x\n'},
            "domain.strings.language.crasp: domain symbol 'b' is not in the program's alphabet {a}",
        ),
        (
            "{crasp: L.cr}",
            {"L.cr": 'alphabet a b\nprev(i, j) = j == i - 1\nx = #[prev] "a" > 0\noutput x\n'},
            "domain.strings.language.crasp: L.cr: the program uses positional predicates",
        ),
        (
            "{crasp: L.cr}",
            {"L.cr": 'alphabet a b\nx = #"a" > #"b" + 50\noutput x\n'},
            "domain.strings.language.crasp: no word of L.cr has a length in 1..8",
        ),
    ],
)
def test_language_errors_are_located_input_errors(tmp_path, language, files, message):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    text = mutated_l3(language, 8, f"crasp-equivalence: {{program: {L3}}}")
    with pytest.raises(SpecError) as error:
        load_spec_text(text, "spec.yaml", tmp_path)
    assert str(error.value).startswith(f"spec.yaml:7: {message}"), str(error.value)
    assert "hint: " in str(error.value)


def least_failing_word(holds, longest: int) -> tuple[str, int]:
    """Independent: every string in shortlex order for which ``holds``, each position compared on the reference
    interpreter (readout > 0) and the program's interpreter; the first disagreement."""
    spec = load_spec_text(mutated_l3('{regex: "(a|b)+"}', longest, f"crasp-equivalence: {{program: {L3}}}"), "s.yaml")
    return least_failing_prefix(spec, load_program(L3), brute_force(holds, "ab", longest))


@pytest.mark.parametrize("engine", ["enumerate", "counting"])
def test_crasp_equivalence_over_a_programs_words_is_refuted_at_the_least_failing_word(engine):
    """The mutated L_3 model (blind to a 4th block) against L_3, at every prefix of every word of majority (#a >
    #b): the first failing prefix needs 4 blocks and the word a majority of a's, so 'aabab' at position 4
    ('aabab' has 3 a's against 2 b's; 'abab' has no majority, 'ababa' fails at 3 but sorts after 'aabab');
    the independent scan agrees."""
    assert least_failing_word(lambda w: w.count("a") > w.count("b"), 6) == ("aabab", 4)
    text = mutated_l3(
        f"{{crasp: {MAJORITY}}}", 9, f"crasp-equivalence: {{program: {L3}, mode: prefix, engine: {engine}}}"
    )
    (verdict,) = check_all([load_spec_text(text, "spec.yaml")], Overrides())
    assert verdict.status == "refuted", verdict.detail
    assert (verdict.counterexample["string"], verdict.counterexample["position"]) == ("aabab", 4)


@pytest.mark.parametrize("engine", ["enumerate", "counting"])
def test_crasp_equivalence_over_the_words_of_l3_is_proved(engine):
    """On every word of L_3 up to 12 (C(12, 3) = 220) every prefix label of the mutated model is right."""
    text = mutated_l3(f"{{crasp: {L3}}}", 12, f"crasp-equivalence: {{program: {L3}, mode: prefix, engine: {engine}}}")
    (verdict,) = check_all([load_spec_text(text, "spec.yaml")], Overrides())
    assert verdict.status == "proved", verdict.detail
    assert verdict.detail.startswith(f"220 words of {L3} over {{a, b}} up to length 12 agree with L3.cr")


def test_cache_keys_and_digests_tell_a_program_from_its_regex_and_from_another_program():
    regex = StringDomain(("a", "b"), 1, 8, RegexLanguage.compile("a+b+a+", "ab"))
    program = StringDomain(("a", "b"), 1, 8, program_language(lk_program(3), "ab", 8, "L3.cr"))
    other = StringDomain(("a", "b"), 1, 8, program_language(lk_program(4), "ab", 8, "L3.cr"))  # same file name
    assert len({digest(regex), digest(program), digest(other)}) == 3
    assert len({repr(regex), repr(program), repr(other)}) == 3  # Task.make's fingerprint reads repr(domain)
    assert program.describe() == "words of L3.cr over {a, b} up to length 8"
    assert pickle.loads(pickle.dumps(program.language)) == program.language  # to a cluster worker
    # a regex's digest (certificates' language_sha256) is the one the code before the C-RASP form gave (4f6b521)
    assert regex.language is not None and regex.language.digest() == "fc42fff136c0172d"


@pytest.mark.parametrize("shortest", [1, 4])
def test_the_counting_certificates_closed_form_counts_the_prefixes_of_a_programs_words(shortest):
    """closed_counts (what a counting certificate checks the exploration against) and ``completable`` (which
    prefixes the counting engine follows) against the set of prefixes of the brute-force words of majority."""
    language = program_language(load_program(MAJORITY), "ab", 8, "majority.cr")
    goal = CountingGoal(("a", "b"), shortest, 8, language=language)
    words = [w for w in brute_force(lambda w: w.count("a") > w.count("b"), "ab", 8) if len(w) >= shortest]
    prefixes = [{w[:n] for w in words if len(w) >= n} for n in range(9)]
    assert closed_counts(goal, 8) == [len(p) for p in prefixes]  # n = 0: the empty prefix
    assert closed_counts(goal, 8)[8] == 56 + 28 + 8 + 1  # hand: the words of length 8, Σ_{j >= 5} C(8, j)
    live = language.completable(shortest, 8)
    for n, found in enumerate(prefixes):
        for w in itertools.product("ab", repeat=n):
            state = 0
            for letter in w:
                state = language.delta[state]["ab".index(letter)]
            assert live[n][state] == ("".join(w) in found)

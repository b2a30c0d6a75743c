"""Exhaustive tests of the depth-k C-RASP programs for L_k (k alternating blocks a+b+a+...)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from verify_tf.crasp import (
    accepts,
    definition_depths,
    in_lk,
    lk_program,
    lk_source,
    load_program,
    parse_program,
    program_depth,
    run_program,
)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "crasp"
KS = range(1, 7)


def words(length: int) -> list[str]:
    return ["".join(letters) for letters in itertools.product("ab", repeat=length)]


def test_in_lk_on_hand_picked_words() -> None:
    assert in_lk(1, "aaa") and not in_lk(1, "ab") and not in_lk(1, "")
    assert in_lk(2, "aab") and not in_lk(2, "ba") and not in_lk(2, "aba")
    assert in_lk(3, "abba") and not in_lk(3, "abab") and not in_lk(3, "bab")
    assert in_lk(4, "abab") and not in_lk(4, "aba")
    assert sum(in_lk(3, word) for word in words(5)) == 6  # compositions of 5 into 3 positive parts
    with pytest.raises(ValueError):
        in_lk(0, "a")


@pytest.mark.slow
@pytest.mark.parametrize("k", KS)
def test_lk_program_is_correct_on_every_word_up_to_length_10(k: int) -> None:
    program = lk_program(k)
    for length in range(1, 11):
        for word in words(length):
            assert accepts(program, word) == in_lk(k, word), word
    assert not accepts(program, "")


@pytest.mark.parametrize("k", KS)
def test_lk_per_prefix_output_decides_every_prefix(k: int) -> None:
    program = lk_program(k)
    for word in words(10):
        output = run_program(program, word).output
        assert output == tuple(in_lk(k, word[: i + 1]) for i in range(len(word))), word


@pytest.mark.parametrize("k", KS)
def test_lk_program_has_depth_exactly_k(k: int) -> None:
    program = lk_program(k)
    assert program_depth(program) == k
    assert max(definition_depths(program).values()) == k
    assert program.alphabet == ("a", "b")


@pytest.mark.parametrize("k", KS)
def test_lk_source_parses_to_lk_program(k: int) -> None:
    assert parse_program(lk_source(k)) == lk_program(k)


@pytest.mark.parametrize("k", KS)
def test_example_files_equal_the_generator(k: int) -> None:
    path = EXAMPLES / f"L{k}.cr"
    assert path.read_text(encoding="utf-8") == lk_source(k)
    assert load_program(path) == lk_program(k)


def test_l3_source_is_readable() -> None:
    assert lk_source(3).splitlines()[4:] == [
        "alphabet a b",
        'has_a = #"a" > 0',
        'has_ab = #("b" && has_a) > 0',
        'has_aba = #("a" && has_ab) > 0',
        'has_b = #"b" > 0',
        'has_ba = #("a" && has_b) > 0',
        'has_bab = #("b" && has_ba) > 0',
        "accept = has_aba && !has_bab",
        "output accept",
    ]


def test_lk_program_rejects_k_below_1() -> None:
    with pytest.raises(ValueError):
        lk_program(0)

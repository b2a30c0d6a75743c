"""Tabulated RASP programs (verify_tf.rasp): hand-computed outputs, the batched and symbolic evaluators against
the interpreter on every input of the committed exports, and malformed programs refused by name.

The committed exports (examples/tracr/*.json) were written by examples/tracr/export_library.py, which checked
each tabulated program against tracr's rasp.evaluate on every input (tests/test_tracr.py repeats that)."""

from __future__ import annotations

import copy
import itertools
import json
from fractions import Fraction as F
from pathlib import Path

import numpy as np
import pytest
import z3

from verify_tf.numbers import float32_from_bits, float32_interval, simplest_between, snap_float32, snap_float64
from verify_tf.rasp import ProgramError, RaspError, program_from_json, program_to_json, run
from verify_tf.rasp.batched import run_batched
from verify_tf.rasp.symbolic import program_outputs_symbolic
from verify_tf.symbolic.inputs import string_input
from verify_tf.symbolic.values import Builder

EXPORTS = Path(__file__).resolve().parent.parent / "examples" / "tracr"
NAMES = sorted(p.stem for p in EXPORTS.glob("*.json"))


def program(name: str):
    return program_from_json(json.loads((EXPORTS / f"{name}.json").read_text())["program"])


def test_every_library_program_and_miscompilation_is_exported():
    assert {
        "length",
        "reverse",
        "hist",
        "sort",
        "sort-unique",
        "sort-freq",
        "frac-prevs",
        "pair-balance",
        "shuffle-dyck",
        "shuffle-dyck2",
        "frac-gt-half",
        "negative-map",
        "length-10",
        "bos-leak",
    } <= set(NAMES)


@pytest.mark.parametrize(
    "name, word, expected",
    [
        ("length", "abc", [3, 3, 3]),
        ("hist", "aba", [2, 1, 2]),
        ("reverse", "abc", ["c", "b", "a"]),
        ("frac-prevs", "aab", [1, 1, F(2, 3)]),  # fraction of a's among positions <= i
        ("frac-gt-half", "aab", [1, 1, 1]),  # 2/3 > 1/2: the value tracr's compiler misses
        ("negative-map", "ab", [-1, 1]),
        ("bos-leak", "a", [0]),  # position 0 selects nothing: the default
        ("pair-balance", "(()", [1, 1, F(1, 3)]),  # (opens - closes) / (i + 1)
        ("shift-by-1", "abc", [None, "a", "b"]),
        ("sort-unique", [3, 1, 2], [1, 2, 3]),
        ("sort-unique", [3, 3, 3], [3, None, None]),  # duplicate keys: positions 1, 2 select nothing (default None)
        ("sort", [3, 3, 1], [1, 3, 3]),
    ],
)
def test_hand_computed_outputs(name, word, expected):
    assert run(program(name), list(word)).output == expected


def test_json_round_trip():
    for name in NAMES:
        data = json.loads((EXPORTS / f"{name}.json").read_text())["program"]
        assert program_to_json(program_from_json(data)) == data


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_batched_and_interpreter_agree_on_every_input(name):
    p = program(name)
    vocabulary = p.vocabulary
    for length in range(1, min(p.max_length, 5) + 1):
        words = list(itertools.product(range(len(vocabulary)), repeat=length))
        codes, errors = run_batched(p, np.array(words))
        assert not errors.any()
        for row, word in enumerate(words):
            trace = run(p, [vocabulary[c] for c in word])
            for node in p.sops:
                assert list(codes[node.label][row]) == trace.codes[node.label], (node.label, word)


@pytest.mark.parametrize("name", ["frac-gt-half", "sort-unique", "pair-balance", "shift-by-1", "hist"])
def test_symbolic_program_agrees_with_the_interpreter(name):
    """Fix every input of length 3 in turn: the solver's output codes are the interpreter's."""
    p = program(name)
    alphabet = tuple(str(v) for v in p.vocabulary)
    builder = Builder()
    inp = string_input(alphabet, 3, builder)
    codes, undefined = program_outputs_symbolic(p, inp, list(p.vocabulary))
    solver = z3.Solver()
    solver.add(builder.assertions)
    for word in itertools.product(range(len(alphabet)), repeat=3):
        solver.push()
        solver.add([term == c for term, c in zip(inp.index_terms, word)])
        assert solver.check() == z3.sat
        model = solver.model()
        got = [model.eval(c, model_completion=True).as_long() if not isinstance(c, int) else c for c in codes]
        assert got == run(p, [p.vocabulary[c] for c in word]).codes[p.output], word
        assert z3.is_false(model.eval(undefined, model_completion=True))
        solver.pop()


def test_undefined_programs_raise():
    data = json.loads((EXPORTS / "length.json").read_text())["program"]
    broken = copy.deepcopy(data)
    broken["nodes"][1]["kind"] = "select"
    broken["nodes"][1]["table"] = [[-1] * 3] * 3  # the predicate raised on every pair
    with pytest.raises(RaspError, match="the predicate raised on key a, query a"):
        run(program_from_json(broken), ["a"])
    # a categorical mean of strings: RASP's _mean raises on several selected non-numbers
    reverse = json.loads((EXPORTS / "hist.json").read_text())["program"]
    with pytest.raises(RaspError, match="not in the vocabulary"):
        run(program_from_json(reverse), ["z"])


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d["nodes"][2].update(kind="mystery"), "kind 'mystery'"),
        (lambda d: d["nodes"][2].update(inputs=["nowhere"]), "expected 1 input"),
        (lambda d: d["nodes"][2]["values"].append(["int", 0]), "listed twice"),
        (lambda d: d.update(output="nowhere"), "output: 'nowhere'"),
        (lambda d: d["nodes"][2].update(values=[["frac", "x"]]), "malformed typed value"),
    ],
)
def test_malformed_programs_are_refused_by_name(edit, message):
    data = json.loads((EXPORTS / "length.json").read_text())["program"]
    edit(data)
    with pytest.raises(ProgramError, match=message):
        program_from_json(data)


def test_float32_snapping():
    # the weights tracr stores for -125/3 (0xc226aaab) and the step threshold 325/21 at max_seq_len 6
    assert snap_float32(0xC226AAAB) == F(-125, 3)
    assert float32_from_bits(0xC226AAAB) == F(float(np.float32(-125 / 3))) == F(-10922667, 262144)
    assert abs(snap_float32(0xC226AAAB) - float32_from_bits(0xC226AAAB)) == F(1, 786432)
    assert snap_float32(0x41779E7A) == F(325, 21)  # bits of np.float32(325 / 21)
    assert snap_float32(0x3F800000) == 1 and snap_float32(0x80000000) == 0
    lo, hi = float32_interval(0x3F800000)  # 1.0: the gap below a power of two is half the gap above
    assert (lo, hi) == (1 - F(1, 2**25), 1 + F(1, 2**24))
    assert simplest_between(F(1, 3), F(1, 2)) == F(1, 2) and simplest_between(F(3, 10), F(7, 20)) == F(1, 3)
    assert snap_float64(0.8 - 0.2) != F(3, 5)  # two roundings: not the float nearest 3/5 (LinearSequenceMap is exact)
    assert snap_float64(1 / 3) == F(1, 3)

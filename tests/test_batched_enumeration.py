"""Input spaces and streaming: unranking agrees with ``domain.inputs()`` / itertools, chunks cover the space
exactly once in bounded memory, and ``stream_outputs`` gives the interpreter's values."""

from __future__ import annotations

import itertools
from fractions import Fraction as F

import numpy as np
import pytest

from verify_tf.batched import BatchedEvaluator, stream_outputs
from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.domain import GridDomain, StringDomain
from verify_tf.semantics import Fixed, evaluate
from verify_tf.spaces import InputSpace, SpaceTooLarge, rows_to_inputs, unrank


@pytest.mark.parametrize("vocabulary,length", [(1, 3), (2, 1), (3, 3), (5, 2), (4, 4), (6, 3)])
@pytest.mark.parametrize("distinct", [False, True])
def test_unrank_matches_itertools(vocabulary, length, distinct):
    tokens = range(vocabulary)
    expected_all = list(
        itertools.permutations(tokens, length) if distinct else itertools.product(tokens, repeat=length)
    )
    expected_sorted = list(
        itertools.combinations(tokens, length) if distinct else itertools.combinations_with_replacement(tokens, length)
    )
    for order, expected in (("all", expected_all), ("sorted", expected_sorted)):
        rows = unrank(vocabulary, length, np.arange(len(expected)), distinct=distinct, order=order)
        assert [tuple(r) for r in rows.tolist()] == expected, order


def test_unrank_large_multiset_ranks():
    # 64 tokens, length 5: 10,424,128 multisets (the research doc's d=2, 64-value case has 64^2 tokens)
    count = InputSpace(GridDomain(1, tuple(F(k) for k in range(64)), 5), "sorted").count()
    assert count == 10_424_128
    rows = unrank(64, 5, np.array([0, 1, count - 2, count - 1]), order="sorted")
    assert rows.tolist() == [[0] * 5, [0, 0, 0, 0, 1], [62, 63, 63, 63, 63], [63] * 5]


def test_stream_inputs_follows_domain_order_across_lengths_and_chunks():
    domain = StringDomain(("a", "b", "c"), 0, 4)
    seen = []
    for chunk in InputSpace(domain).chunks(7):
        assert chunk.stop - chunk.start == len(chunk.rows) <= 7
        seen.extend(rows_to_inputs(domain.tokens, chunk.rows))
    assert seen == list(domain.inputs())
    assert [s.count for s in InputSpace(domain).segments()] == [1, 3, 9, 27, 81]


def test_stream_inputs_sub_range_and_distinct_grid():
    domain = GridDomain.regular(1, F(1, 4), 3, distinct_tokens=True)
    everything = list(domain.inputs())
    part = [t for c in InputSpace(domain).chunks(4, start=5, stop=19) for t in rows_to_inputs(domain.tokens, c.rows)]
    assert part == everything[5:19]


def test_constant_and_restricted_spaces():
    domain = StringDomain(("a", "b"), 0, 3)
    assert list(InputSpace(domain, "constant").inputs()) == [
        ("a",),
        ("b",),
        ("a", "a"),
        ("b", "b"),
        ("a",) * 3,
        ("b",) * 3,
    ]  # no empty input: it is not constant
    assert list(InputSpace(domain, only_lengths=(2,)).inputs()) == [("a", "a"), ("a", "b"), ("b", "a"), ("b", "b")]
    distinct = GridDomain.regular(1, F(1, 4), 3, distinct_tokens=True)
    assert InputSpace(distinct, "constant").count() == 0  # (x, x, x) repeats a token


def test_too_large_space_is_refused():
    with pytest.raises(SpaceTooLarge, match="int64"):
        unrank(1 << 20, 4, np.array([0]))


@pytest.mark.slow
def test_stream_outputs_matches_interpreter_with_progress():
    model = random_model(RandomConfig(seed=5, width=2, positional="rpe", ffn_width=2, max_length=3))
    arith = Fixed(12, 4)
    domain = GridDomain.regular(2, F(1, 2), 3, lo=F(-1, 2), hi=F(1, 2))
    ticks = []
    total = 0
    evaluator = BatchedEvaluator(model, arith, domain.tokens)
    for chunk in stream_outputs(
        evaluator, InputSpace(domain), layer="readout", chunk=100, progress=lambda done, of: ticks.append((done, of))
    ):
        for row, numerators in zip(chunk.rows, chunk.values.numerators):
            trace = evaluate(model, arith, tuple(domain.tokens[int(t)] for t in row))
            assert [F(int(x), chunk.values.den) for x in numerators] == trace.readout
        total += len(chunk.rows)
    assert total == domain.size() == 729
    assert ticks[-1] == (729, 729) and len(ticks) == 8
    assert all(a[0] < b[0] for a, b in itertools.pairwise(ticks))


def test_chunk_size_respects_the_memory_budget():
    model = random_model(RandomConfig(seed=1, width=3, heads=2, ffn_width=3, max_length=8))
    domain = GridDomain.regular(3, F(1, 2), 6)
    evaluator = BatchedEvaluator(model, Fixed(), domain.tokens, backend="numpy")
    per_input = evaluator.bytes_per_input(6)
    for budget in (1 << 16, 1 << 24):
        chunk = evaluator.chunk_size(6, budget)
        assert chunk * per_input <= budget and (chunk + 1) * per_input > budget
    sizes = {len(c.rows) for c in stream_outputs(evaluator, InputSpace(domain), memory=1 << 16, stop=3000)}
    assert max(sizes) == evaluator.chunk_size(6, 1 << 16)

"""The bounded-memory distinct-values scan (``engines.runs``): sorted runs, spilling, the k-way merge and the
streamed closest pair agree with the in-memory ``scan.closest_pair`` on the same keys, whatever the chunking,
the memory budget (down to a few bytes: every run spilled, one key per block) and the width of the keys."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from verify_tf.engines.runs import ClosestPair, RunStore, from_limbs, limbs_needed, merged, sorted_run, to_limbs
from verify_tf.engines.scan import closest_pair


def _scan(values: np.ndarray, groups, den: int, cuts: list[int], memory: int, block: int):
    """The streamed scan of (B, n) ``values`` cut into runs at ``cuts``."""
    count, n = values.shape
    bounds = [0] + sorted(set(c for c in cuts if 0 < c < count)) + [count]
    with RunStore(memory) as store:
        for a, b in itertools.pairwise(bounds):
            store.add(sorted_run(values[a:b], den, a, None if groups is None else groups[a:b]))
        spilled = len(store.spilled)
        closest = ClosestPair(n)
        blocks = 0
        for piece in merged(store, block):
            closest.add(piece)
            blocks += 1
        return closest.result(den), spilled, blocks


@st.composite
def keys(draw):
    count = draw(st.integers(1, 40))
    n = draw(st.integers(1, 3))
    wide = draw(st.booleans())
    spread = draw(st.sampled_from([3, 50, 10**6]))
    base = draw(st.sampled_from([0, 2**61 - 10, 2**80, -(2**70)])) if wide else 0
    values = np.array(
        [[base + draw(st.integers(-spread, spread)) for _ in range(n)] for _ in range(count)],
        dtype=object if wide else np.int64,
    )
    exempting = draw(st.booleans())
    groups = np.array([draw(st.integers(0, 3)) for _ in range(count)], dtype=np.int64) if exempting else None
    cuts = draw(st.lists(st.integers(0, count), max_size=6))
    return values, groups, draw(st.sampled_from([1, 3])), cuts


@pytest.mark.slow
@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(keys(), st.sampled_from([1, 200, 1 << 20]), st.sampled_from([1, 64, 1 << 16]))
def test_streamed_scan_agrees_with_closest_pair(case, memory, block):
    values, groups, den, cuts = case
    count, n = values.shape
    reference_groups = groups if groups is not None else np.arange(count, dtype=np.int64)
    expected = closest_pair(values.reshape(-1), reference_groups, n, den)
    found, spilled, _blocks = _scan(values, groups, den, cuts, memory, block)
    assert (found.gap, found.smallest, found.largest, found.keys) == (
        expected.gap,
        expected.smallest,
        expected.largest,
        expected.keys,
    )
    if found.gap is not None:
        (a, i), (b, j) = found.pair
        assert Fraction(int(values[b, j]) - int(values[a, i]), den) == found.gap
        assert a == b or reference_groups[a] != reference_groups[b]  # never an exempt pair
    if memory == 1:
        assert spilled == len(set(c for c in cuts if 0 < c < count)) + 1  # every run went to disk


def test_the_pair_does_not_depend_on_the_blocking():
    """Equal gaps: the pair whose lower key comes first in the sorted stream, for any run and block sizes."""
    values = np.array([[0, 10], [20, 30], [40, 50], [5, 15]], dtype=np.int64)  # gaps of 5 everywhere
    seen = set()
    for cuts in ([], [1], [1, 2, 3], [2]):
        for block in (1, 16, 1 << 20):
            found, _, _ = _scan(values, None, 1, cuts, 1 if cuts else 1 << 20, block)
            seen.add((found.gap, found.pair))
    assert seen == {(Fraction(5), ((0, 0), (3, 0)))}  # keys 0 (input 0) and 5 (input 3)


def test_limbs_keep_the_numeric_order_of_wide_keys():
    values = np.array([-(2**100), -(2**62) - 1, -1, 0, 5, 2**62, 2**62 + 1, 3**70], dtype=object)
    limbs = to_limbs(values, limbs_needed(values))
    assert limbs.shape == (8, 2)
    order = np.lexsort(tuple(limbs[:, k] for k in range(limbs.shape[1] - 1, -1, -1)))
    assert order.tolist() == list(range(8))
    assert list(from_limbs(limbs)) == list(values)
    assert limbs_needed(np.array([2**61], dtype=np.int64)) == 2  # differences of int64 keys must fit int64


def test_a_tiny_budget_scans_many_runs_in_bounded_blocks():
    """20,000 inputs in 200 runs, every run spilled, merged in blocks of at most a few hundred keys."""
    rng = np.random.default_rng(5)
    values = rng.integers(-(10**12), 10**12, size=(20_000, 2))
    values[7, 1] = values[12_345, 0] + 3  # the closest pair, planted
    expected = closest_pair(values.reshape(-1), np.arange(20_000), 2, 1)
    found, spilled, blocks = _scan(values, None, 1, list(range(100, 20_000, 100)), 4096, 16 << 10)
    assert spilled == 199 and blocks > 100  # the last run (3,200 bytes) fits the budget
    assert (found.gap, found.smallest, found.largest) == (expected.gap, expected.smallest, expected.largest)


def test_equal_gaps_pick_the_lower_key_first_in_the_stream():
    """Inputs 0, 1, 2 exempt from each other (one group), input 3 not; n = 1. Sorted keys: 0 (input 1), 1 (input
    0), 1 (input 2), 3 (input 3). Input 2's key meets input 3 at offset 1, gap 2; input 0's key meets it at offset 2
    with the same gap 2 and comes first in the stream: it wins, however the stream is cut into runs and blocks."""
    values = np.array([[1], [0], [1], [3]], dtype=np.int64)
    groups = np.array([0, 0, 0, 1], dtype=np.int64)
    for cuts, memory, block in (([], 1 << 20, 1 << 20), ([1], 1, 1), ([2], 1, 16), ([1, 3], 1 << 20, 32)):
        found, _, _ = _scan(values, groups, 1, cuts, memory, block)
        assert (found.gap, found.pair) == (Fraction(2), ((0, 0), (3, 0)))

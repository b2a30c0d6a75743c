"""The search engine: seeded and reproducible, hill climbing finds what uniform sampling cannot, distinct-token
spaces stay distinct, budgets and timeouts are honoured."""

from __future__ import annotations

import numpy as np

from verify_tf.engines.search.sampling import SearchSpace, mutate, random_rows, search

TARGET = np.array([3, 41, 7, 29, 0, 18])


def distance_objective(rows):
    """Closer to TARGET scores higher; only TARGET itself 'violates'."""
    distance = np.abs(rows - TARGET).sum(axis=1)
    return -distance.astype(np.float64), distance == 0


def test_hill_climbing_finds_a_needle_that_sampling_misses():
    space = SearchSpace(vocabulary=50, lengths=(6,))  # 1.6e10 rows: uniform sampling has no chance
    climbed = search(space, distance_objective, seed=1, samples=400_000, batch=512)
    assert climbed.stopped == "found"
    assert [r.tolist() for r in climbed.candidates] == [TARGET.tolist()]
    assert climbed.samples < 400_000
    sampled = search(space, distance_objective, seed=1, samples=20_000, batch=512, elite=0)
    assert sampled.stopped == "budget" and sampled.candidates == [] and sampled.samples == 20_000


def test_same_seed_same_search_and_different_seed_differs():
    space = SearchSpace(vocabulary=50, lengths=(6,))

    def run(seed):
        history = []

        def objective(rows):
            history.append(rows.copy())
            return distance_objective(rows)

        result = search(space, objective, seed=seed, samples=300_000, batch=256)
        return result, np.concatenate(history)

    (first, rows_first), (again, rows_again), (other, rows_other) = run(7), run(7), run(8)
    assert first.stopped == again.stopped == other.stopped == "found"
    assert first.samples == again.samples and np.array_equal(rows_first, rows_again)
    assert first.samples != other.samples or not np.array_equal(rows_first, rows_other)


def test_distinct_spaces_stay_distinct():
    rng = np.random.default_rng(0)
    for vocabulary in (5, 5000):
        space = SearchSpace(vocabulary=vocabulary, lengths=(5,), distinct=True)
        rows = random_rows(rng, space, 5, 2000)
        for _ in range(20):
            rows = mutate(rng, space, rows)
        ordered = np.sort(rows, axis=1)
        assert not (ordered[:, 1:] == ordered[:, :-1]).any()
        assert rows.min() >= 0 and rows.max() < vocabulary


def test_lengths_are_cycled_and_timeout_stops():
    seen_lengths = []

    def objective(rows):
        seen_lengths.append(rows.shape[1])
        return np.zeros(len(rows)), np.zeros(len(rows), dtype=bool)

    result = search(SearchSpace(3, (1, 2, 3)), objective, samples=600, batch=100)
    assert seen_lengths == [1, 2, 3, 1, 2, 3] and result.samples == 600 and result.stopped == "budget"
    timed = search(SearchSpace(3, (2,)), objective, samples=10**9, batch=100, seconds=0.2)
    assert timed.stopped == "timeout" and 0 < timed.samples < 10**9

"""Seeded random sampling plus local search (hill climbing) for violations: the ``search`` engine's algorithm.

For domains too large to enumerate. The engine knows nothing about models: a property hands it a
``SearchSpace`` (token-index rows: vocabulary, lengths, distinct tokens or not) and an ``objective`` that
scores a batch of rows (higher = closer to a violation) and says which rows it believes violate the property.
The engine returns those rows as *candidates*; the property replays each one on the reference interpreter
before it reports ``refuted``. Finding nothing is evidence, never a proof: properties answer ``unknown``
with "no counterexample in N samples".

Each round evaluates one batch: fresh uniform samples, plus mutations of the best rows seen so far (change a
position to a random token; for distinct-token spaces the displaced token moves to where the new one was, so
rows stay distinct). Every random choice comes from ``numpy.random.default_rng(seed)``: with the same seed, the
same objective and a sample budget (not a timeout) as the stopping rule, a search is reproduced exactly.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

# rows (B, n) int64 -> (scores: float64 (B,), higher is closer to a violation; violated: bool (B,))
Objective = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class SearchSpace:
    vocabulary: int  # rows hold token indices 0..vocabulary-1
    lengths: tuple[int, ...]
    distinct: bool = False  # no token twice in a row

    def __post_init__(self) -> None:
        if self.vocabulary < 1 or not self.lengths:
            raise ValueError("a search space needs at least one token and one length")
        if self.distinct and max(self.lengths) > self.vocabulary:
            raise ValueError("distinct tokens: a length exceeds the vocabulary")


@dataclass
class SearchResult:
    candidates: list[np.ndarray] = field(default_factory=list)  # claimed violations, in discovery order
    samples: int = 0  # rows the objective scored
    rounds: int = 0
    best_score: float = float("-inf")
    best_row: np.ndarray | None = None
    stopped: str = "budget"  # found | budget | timeout

    def describe(self) -> str:
        return f"{self.samples} samples in {self.rounds} rounds, best objective {self.best_score:g}"


def random_rows(rng: np.random.Generator, space: SearchSpace, length: int, count: int) -> np.ndarray:
    if not space.distinct:
        return rng.integers(0, space.vocabulary, size=(count, length), dtype=np.int64)
    if space.vocabulary * count <= 1 << 22:
        return np.argsort(rng.random((count, space.vocabulary)), axis=1)[:, :length].astype(np.int64)
    rows = rng.integers(0, space.vocabulary, size=(count, length), dtype=np.int64)
    while True:  # vocabulary >> length here: a few redraws of the rows that repeat a token
        ordered = np.sort(rows, axis=1)
        repeated = (ordered[:, 1:] == ordered[:, :-1]).any(axis=1)
        if not repeated.any():
            return rows
        rows[repeated] = rng.integers(0, space.vocabulary, size=(int(repeated.sum()), length), dtype=np.int64)


def mutate(rng: np.random.Generator, space: SearchSpace, parents: np.ndarray) -> np.ndarray:
    """One random position of each parent gets a random token (distinct spaces: the two tokens swap places)."""
    children = parents.copy()
    count, length = children.shape
    if length == 0:
        return children
    index = np.arange(count, dtype=np.int64)
    position = rng.integers(0, length, size=count)
    token = np.asarray(rng.integers(0, space.vocabulary, size=count, dtype=np.int64))
    if space.distinct:
        old = children[index, position]
        holder = children == token[:, None]  # where the new token already sits, if anywhere
        children[holder] = np.repeat(old, holder.sum(axis=1))
    children[index, position] = token
    return children


def search(
    space: SearchSpace,
    objective: Objective,
    *,
    seed: int = 0,
    samples: int = 100_000,
    batch: int = 1024,
    elite: int = 32,
    seconds: float | None = None,
    max_candidates: int = 8,
    progress: Callable[[int, int | None], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> SearchResult:
    """Sample and hill-climb until a violation is claimed, ``samples`` rows were scored, or ``seconds`` ran out."""
    rng = np.random.default_rng(seed)
    deadline = None if seconds is None else time.perf_counter() + seconds
    best: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # per length: elite rows and their scores
    seen: set[tuple[int, ...]] = set()
    result = SearchResult()
    while result.samples < samples:
        if (deadline is not None and time.perf_counter() > deadline) or (stop is not None and stop()):
            result.stopped = "timeout"
            break
        length = space.lengths[result.rounds % len(space.lengths)]
        size = min(batch, samples - result.samples)
        parents = best.get(length)
        climbing = 0 if parents is None or elite == 0 else size // 2  # elite 0: plain random sampling
        fresh = random_rows(rng, space, length, size - climbing)
        if climbing:
            elite_rows = parents[0] if parents is not None else fresh[:0]
            chosen = elite_rows[rng.integers(0, len(elite_rows), size=climbing)]
            rows = np.concatenate([fresh, mutate(rng, space, chosen)])
        else:
            rows = fresh
        scores, violated = objective(rows)
        scores = np.asarray(scores, dtype=np.float64)
        result.samples += len(rows)
        result.rounds += 1
        for row in rows[np.asarray(violated, dtype=bool)]:
            key = tuple(int(t) for t in row)
            if key not in seen and len(result.candidates) < max_candidates:
                seen.add(key)
                result.candidates.append(row.copy())
        top = int(np.argmax(scores)) if len(scores) else 0
        if len(scores) and scores[top] > result.best_score:
            result.best_score, result.best_row = float(scores[top]), rows[top].copy()
        pool_rows = rows if parents is None else np.concatenate([parents[0], rows])
        pool_scores = scores if parents is None else np.concatenate([parents[1], scores])
        keep = np.argsort(-pool_scores, kind="stable")[:elite]
        best[length] = (pool_rows[keep], pool_scores[keep])
        if progress is not None:
            progress(result.samples, samples)
        if result.candidates:
            result.stopped = "found"
            break
    return result

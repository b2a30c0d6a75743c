"""Streaming enumeration of a finite domain: index ranges [a, b) become batches of token-index rows.

Inputs are numbered in the order ``domain.inputs()`` yields them (lengths ascending for string domains),
so index i here is the i-th input there. ``order="sorted"`` numbers only the sorted rows instead (token
indices non-decreasing: one representative per multiset; strictly increasing for distinct-token domains),
in the order of ``itertools.combinations_with_replacement`` / ``combinations``: enough for models that are
exactly permutation-equivariant, and a factor up to n! smaller.

Unranking is vectorised (mixed radix; factorial base for distinct tokens; the combinatorial number system
with a binary search for sorted rows), so any chunk of any domain is produced directly, memory stays
bounded by the chunk, and chunks are independent units of work.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ...domain import Domain, GridDomain
from ...ir import Model, Token
from ...semantics.arithmetic import Arithmetic
from .evaluator import DEFAULT_MEMORY, BatchedEvaluator, Values
from .program import LIMIT, Unsupported

ORDERS = ("all", "sorted")


@dataclass(frozen=True)
class Segment:
    """The inputs of one length: indices [offset, offset + count) of the whole domain."""

    length: int
    offset: int
    count: int


@dataclass
class InputChunk:
    start: int  # index of the first input of the chunk in the domain's numbering
    stop: int
    rows: np.ndarray  # (stop - start, length) int64 token indices into domain.tokens

    @property
    def length(self) -> int:
        return int(self.rows.shape[1])


@dataclass
class OutputChunk(InputChunk):
    values: Values  # exact outputs of these inputs (numpy numerators unless native)


def domain_tokens(domain: Domain) -> list[Token]:
    """The token list that rows index into: grid points (product order) or alphabet symbols."""
    return list(domain.tokens)


def _distinct(domain: Domain) -> bool:
    return isinstance(domain, GridDomain) and domain.distinct_tokens


def segment_count(vocabulary: int, length: int, *, distinct: bool, order: str) -> int:
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    if order == "all":
        return math.perm(vocabulary, length) if distinct else vocabulary ** length
    return math.comb(vocabulary, length) if distinct else math.comb(vocabulary + length - 1, length)


def segments(domain: Domain, order: str = "all") -> list[Segment]:
    vocabulary = len(domain.tokens)
    out, offset = [], 0
    for length in domain.lengths:
        count = segment_count(vocabulary, length, distinct=_distinct(domain), order=order)
        out.append(Segment(length, offset, count))
        offset += count
    return out


def input_count(domain: Domain, order: str = "all") -> int:
    """How many rows ``order`` enumerates (``domain.size()`` for order 'all')."""
    return sum(s.count for s in segments(domain, order))


def _check_int64(count: int) -> None:
    if count > LIMIT:
        raise Unsupported(f"a domain of {count} inputs cannot be numbered in int64 (and is far too large to "
                          "enumerate); use the smt or search engine")


def _comb_table(top: int, k: int) -> np.ndarray:
    """C(m, k) for m = 0..top, capped at 2^62 (larger values never decide an unranking step)."""
    return np.array([min(math.comb(m, k), LIMIT) for m in range(top + 1)], dtype=np.int64)


def unrank(vocabulary: int, length: int, ranks: np.ndarray, *, distinct: bool = False,
           order: str = "all") -> np.ndarray:
    """Token-index rows (len(ranks), length) for ranks within one length's numbering."""
    _check_int64(segment_count(vocabulary, length, distinct=distinct, order=order))
    ranks = np.asarray(ranks, dtype=np.int64)
    rows = np.empty((len(ranks), length), dtype=np.int64)
    if len(ranks) == 0:
        return rows
    if order == "sorted":
        # multisets x_0 <= ... <= x_{n-1} are the combinations y_p = x_p + p of vocabulary + n - 1 values
        universe = vocabulary if distinct else vocabulary + length - 1
        _unrank_combinations(universe, length, ranks, rows)
        if not distinct:
            rows -= np.arange(length, dtype=np.int64)
        return rows
    r = ranks.copy()
    if not distinct:  # mixed radix, first position most significant (itertools.product order)
        for p in range(length - 1, -1, -1):
            rows[:, p] = r % vocabulary
            r //= vocabulary
        return rows
    # permutations in itertools order: factorial-base digits pick the d-th unused token
    for p in range(length):
        weight = math.perm(vocabulary - p - 1, length - p - 1)
        token = r // weight
        r = r % weight
        for used in np.sort(rows[:, :p], axis=1).T:  # ascending: each used token <= t shifts t up by one
            token = token + (used <= token)
        rows[:, p] = token
    return rows


def _unrank_combinations(universe: int, length: int, ranks: np.ndarray, rows: np.ndarray) -> None:
    """Strictly increasing rows from [0, universe), lexicographic (itertools.combinations) order."""
    r = ranks.copy()
    low = np.zeros(len(ranks), dtype=np.int64)
    for p in range(length):
        k = length - p
        table = _comb_table(universe, k)
        completions = table[universe - low]  # C(universe - low, k): combinations whose first item >= low
        needed = completions - r  # the first item v is the largest with C(universe - v, k) >= needed
        m = np.searchsorted(table, needed, side="left")
        value = universe - m
        r = r - (completions - table[m])
        rows[:, p] = value
        low = value + 1


def stream_inputs(domain: Domain, *, order: str = "all", chunk: int = 1 << 16, start: int = 0,
                  stop: int | None = None) -> Iterator[InputChunk]:
    """Chunks of at most ``chunk`` rows covering inputs [start, stop); a chunk never mixes two lengths."""
    if chunk < 1:
        raise ValueError("chunk must be at least 1")
    vocabulary = len(domain.tokens)
    total = input_count(domain, order)
    stop = total if stop is None else min(stop, total)
    for segment in segments(domain, order):
        a = max(start, segment.offset)
        b = min(stop, segment.offset + segment.count)
        while a < b:
            c = min(b, a + chunk)
            ranks = np.arange(a - segment.offset, c - segment.offset, dtype=np.int64)
            rows = unrank(vocabulary, segment.length, ranks, distinct=_distinct(domain), order=order)
            yield InputChunk(a, c, rows)
            a = c


def stream_outputs(model: Model, arith: Arithmetic, domain: Domain, *, layer: str = "output",
                   backend: str = "auto", device: str = "auto", order: str = "all", chunk: int | None = None,
                   memory: int = DEFAULT_MEMORY, start: int = 0, stop: int | None = None,
                   progress: Callable[[int, int | None], None] | None = None,
                   evaluator: BatchedEvaluator | None = None, native: bool = False) -> Iterator[OutputChunk]:
    """Exact outputs of every input in [start, stop), chunk by chunk, in bounded memory.

    ``layer``: 'output' (final stream, (B, n, d)) or 'readout' ((B, n)). ``chunk``: rows per chunk, else
    sized from ``memory`` bytes. ``progress(done, total)`` is called after each chunk (``request.tick``).
    Raises ``Unsupported`` (before any work) when the model cannot be evaluated exactly in int64.
    """
    evaluator = evaluator or BatchedEvaluator(model, arith, domain_tokens(domain), backend=backend, device=device)
    total = input_count(domain, order)
    _check_int64(total)
    stop = total if stop is None else min(stop, total)
    for length in domain.lengths:
        evaluator.check(length)
    size = chunk or min(evaluator.chunk_size(length, memory) for length in domain.lengths)
    done = 0
    for piece in stream_inputs(domain, order=order, chunk=size, start=start, stop=stop):
        values = evaluator.values(piece.rows, layer, native=native)
        done += piece.stop - piece.start
        if progress is not None:
            progress(done, stop - start)
        yield OutputChunk(piece.start, piece.stop, piece.rows, values)


def rows_to_inputs(tokens: Sequence[Token], rows: np.ndarray) -> list[tuple[Token, ...]]:
    return [tuple(tokens[int(t)] for t in row) for row in rows]


class Deadline:
    """A wall-clock limit shared by the enumerate engines: ``expired()`` after ``seconds``."""

    def __init__(self, seconds: float):
        self.start = time.perf_counter()
        self.end = self.start + seconds

    def expired(self) -> bool:
        return time.perf_counter() > self.end

    def elapsed(self) -> float:
        return time.perf_counter() - self.start


def estimate_throughput(evaluator: BatchedEvaluator, length: int, rows: Any = None, repeats: int = 1) -> float:
    """Measured inputs per second on a small batch of this length (used to predict enumeration time)."""
    vocabulary = len(evaluator.tokens)
    batch = min(4096, evaluator.chunk_size(length))
    sample = rows if rows is not None else np.random.default_rng(0).integers(0, max(vocabulary, 1),
                                                                             size=(batch, length))
    evaluator.run(sample[:8])  # compile and warm up
    begin = time.perf_counter()
    for _ in range(repeats):
        evaluator.run(sample)
    elapsed = max(time.perf_counter() - begin, 1e-9)
    return repeats * len(sample) / elapsed

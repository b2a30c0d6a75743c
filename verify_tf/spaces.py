"""Input spaces: a finite, ordered set of inputs of a domain, numbered 0..count-1, cut into chunks.

A property quantifies over an input space: the whole domain (``order="all"``, numbered as
``domain.inputs()`` yields it, lengths ascending), one sorted representative per multiset (``"sorted"``:
enough for exactly permutation-equivariant models, up to n! fewer), or the constant inputs (x, ..., x)
(``"constant"``), optionally restricted to some lengths. Inputs are token-index rows into ``space.tokens``
(grid points in product order, or alphabet symbols).

Unranking is vectorised (mixed radix; factorial base for distinct tokens; the combinatorial number system with
a binary search for sorted rows; a language's automaton counts for a strings domain restricted to a language,
a regex's or a C-RASP program's), so any chunk of any space is produced directly: memory stays bounded by the
chunk, and chunks are independent work units.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from .domain import Domain, GridDomain, StringDomain, format_input
from .ir import Token
from .regular import Language

ORDERS = ("all", "sorted", "constant")
LIMIT = 1 << 62  # ranks and counts must fit int64 with a margin


class SpaceTooLarge(ValueError):
    """The space cannot be numbered in int64 (and is far too large to enumerate)."""


@dataclass(frozen=True)
class Segment:
    """The inputs of one length: indices [offset, offset + count) of the space."""

    length: int
    offset: int
    count: int


@dataclass(frozen=True)
class Chunk:
    start: int  # index of the first input in the space's numbering
    stop: int
    rows: np.ndarray  # (stop - start, length) int64 token indices

    @property
    def length(self) -> int:
        return int(self.rows.shape[1])


def segment_count(vocabulary: int, length: int, *, distinct: bool, order: str) -> int:
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    if order == "all":
        return math.perm(vocabulary, length) if distinct else vocabulary**length
    if order == "constant":
        if length == 0:
            return 0  # the empty input is not constant input of any token
        return vocabulary if (length == 1 or not distinct) else 0
    return math.comb(vocabulary, length) if distinct else math.comb(vocabulary + length - 1, length)


@dataclass(frozen=True)
class InputSpace:
    domain: Domain
    order: str = "all"
    only_lengths: tuple[int, ...] | None = None  # None: every length of the domain

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}, got {self.order!r}")

    @property
    def tokens(self) -> list[Token]:
        return list(self.domain.tokens)

    @property
    def distinct(self) -> bool:
        return isinstance(self.domain, GridDomain) and self.domain.distinct_tokens

    @property
    def language(self) -> Language | None:
        """The language a strings domain is restricted to (its words are numbered by its automaton)."""
        return self.domain.language if isinstance(self.domain, StringDomain) else None

    def _count(self, length: int) -> int:
        language = self.language
        if language is None:
            return segment_count(len(self.domain.tokens), length, distinct=self.distinct, order=self.order)
        if self.order == "all":
            return language.count(length)
        if self.order == "constant":
            return len(self._constant_letters(length))
        raise ValueError("sorted representatives of a language-restricted domain are not defined")

    def _constant_letters(self, length: int) -> list[int]:
        """The letters a with a^length a word of the language (a list of |Σ| checks, nothing enumerated)."""
        language = self.language
        assert language is not None
        if length == 0:
            return []
        return [i for i, a in enumerate(language.alphabet) if language.accepts((a,) * length)]

    def _unrank(self, length: int, ranks: np.ndarray) -> np.ndarray:
        language = self.language
        if language is None:
            return unrank(len(self.domain.tokens), length, ranks, distinct=self.distinct, order=self.order)
        if self.order == "constant":
            letters = np.array(self._constant_letters(length), dtype=np.int64)
            return np.repeat(letters[ranks][:, None], length, axis=1)
        return language.unrank(length, ranks)

    @property
    def lengths(self) -> tuple[int, ...]:
        lengths = self.domain.lengths
        return lengths if self.only_lengths is None else tuple(n for n in lengths if n in self.only_lengths)

    def segments(self) -> list[Segment]:
        out, offset = [], 0
        for length in self.lengths:
            count = self._count(length)
            out.append(Segment(length, offset, count))
            offset += count
        return out

    def count(self) -> int:
        return sum(s.count for s in self.segments())

    def chunks(self, size: int, start: int = 0, stop: int | None = None) -> Iterator[Chunk]:
        """Chunks of at most ``size`` rows covering [start, stop); a chunk never mixes two lengths."""
        if size < 1:
            raise ValueError("chunk size must be at least 1")
        total = self.count()
        if total > LIMIT:
            raise SpaceTooLarge(
                f"a space of {total} inputs cannot be numbered in int64 (and is far too large to enumerate)"
            )
        stop = total if stop is None else min(stop, total)
        for segment in self.segments():
            a = max(start, segment.offset)
            b = min(stop, segment.offset + segment.count)
            while a < b:
                c = min(b, a + size)
                ranks = np.arange(a - segment.offset, c - segment.offset, dtype=np.int64)
                yield Chunk(a, c, self._unrank(segment.length, ranks))
                a = c

    def rows(self, start: int, stop: int) -> list[np.ndarray]:
        return [c.rows for c in self.chunks(max(1, stop - start), start, stop)]

    def decode(self, row: Sequence[int] | np.ndarray) -> tuple[Token, ...]:
        tokens = self.domain.tokens
        return tuple(tokens[int(t)] for t in row)

    def inputs(self, start: int = 0, stop: int | None = None) -> Iterator[tuple[Token, ...]]:
        for chunk in self.chunks(4096, start, stop):
            for row in chunk.rows:
                yield self.decode(row)

    def describe(self) -> str:
        what = {"all": "inputs", "sorted": "sorted multisets", "constant": "constant inputs"}[self.order]
        lengths = "" if self.only_lengths is None else f" of length {', '.join(map(str, self.lengths))}"
        return f"{self.count()} {what}{lengths} of {self.domain.describe()}"


def rows_to_inputs(tokens: Sequence[Token], rows: np.ndarray) -> list[tuple[Token, ...]]:
    return [tuple(tokens[int(t)] for t in row) for row in rows]


def show(tokens: tuple[Token, ...]) -> str:
    return format_input(tokens)


def _comb_table(top: int, k: int) -> np.ndarray:
    """C(m, k) for m = 0..top, capped at 2^62 (larger values never decide an unranking step)."""
    return np.array([min(math.comb(m, k), LIMIT) for m in range(top + 1)], dtype=np.int64)


def unrank(
    vocabulary: int, length: int, ranks: np.ndarray, *, distinct: bool = False, order: str = "all"
) -> np.ndarray:
    """Token-index rows (len(ranks), length) for ranks within one length's numbering."""
    if segment_count(vocabulary, length, distinct=distinct, order=order) > LIMIT:
        raise SpaceTooLarge(f"{vocabulary}^{length} inputs cannot be numbered in int64")
    ranks = np.asarray(ranks, dtype=np.int64)
    rows = np.empty((len(ranks), length), dtype=np.int64)
    if len(ranks) == 0:
        return rows
    if order == "constant":
        return np.repeat(ranks[:, None], length, axis=1)
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

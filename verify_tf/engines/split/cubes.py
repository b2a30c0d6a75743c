"""Cubes of the ``split`` engine: products of per-position, per-coordinate index ranges, and how they split.

A ``SplitCube`` of length n holds, for every user position (BOS excluded) and every coordinate of its token,
an inclusive range ``(a, b)`` of indices into the coordinate's values: grid coordinates index
``domain.values``, an alphabet position has one coordinate indexing ``domain.alphabet``. The inputs of a cube
are the product of its ranges; ``halves`` cuts one range in two, so the leaves of any split tree partition the
root exactly (tests count inputs over all leaves against the space's size).

Constraints that are not products (distinct tokens, sorted multisets, constant inputs: the input space's
``order`` and ``distinct``) are applied when a cube's rows are listed (``rows``): a cube stands for the members
of the space inside it. Its bounds (``verify_tf.bounds``) are computed on the product, a superset: sound.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from ...bounds import Bounds, Cube, cube_bounds
from ...domain import Domain, GridDomain
from ...ir import Model, Token
from ...semantics import Arithmetic
from ...spaces import InputSpace

Range = tuple[int, int]  # inclusive index range into a coordinate's values


@dataclass(frozen=True)
class SplitCube:
    """Per position, per coordinate, an inclusive index range; ``depth`` counts the splits above it."""

    ranges: tuple[tuple[Range, ...], ...]
    depth: int = 0

    @property
    def length(self) -> int:
        return len(self.ranges)

    def volume(self) -> int:
        """Inputs of the product (the space's members inside it may be fewer)."""
        total = 1
        for position in self.ranges:
            for a, b in position:
                total *= b - a + 1
        return total

    def widest(self, weights: tuple[tuple[Fraction, ...], ...] | None = None) -> tuple[int, int] | None:
        """The (position, coordinate) whose range spans the most values (times its weight), or None for a point.

        ``weights[p][c]`` scales position p's coordinate c (its influence on the property); ties go to the
        earliest position and coordinate, so splits are deterministic.
        """
        best, where = Fraction(0), None
        for p, position in enumerate(self.ranges):
            for c, (a, b) in enumerate(position):
                if b == a:
                    continue
                score = Fraction(b - a + 1) * (weights[p][c] if weights is not None else 1)
                if where is None or score > best:
                    best, where = score, (p, c)
        return where

    def most_influential(self, scores: np.ndarray) -> tuple[int, int] | None:
        """The widest splittable (position, coordinate), ties broken by the larger score (``scores[p, c]``: a
        bound's linear coefficient on it times its width); None for a point. (The score alone, without the
        width first, grew Knuth's tree estimate twentyfold on a 4-head softmax model: a coefficient says nothing
        of the relaxations' gaps, which shrink with every range's width; docs/performance.md.)"""
        best: tuple[int, float] | None = None
        where = None
        for p, position in enumerate(self.ranges):
            for c, (a, b) in enumerate(position):
                key = (b - a + 1, float(scores[p, c]))
                if b > a and (best is None or key > best):
                    best, where = key, (p, c)
        return where

    def halves(self, p: int, c: int) -> tuple[SplitCube, SplitCube]:
        """The two cubes of range (p, c) cut at its middle: together exactly this cube, no input in both."""
        a, b = self.ranges[p][c]
        middle = (a + b) // 2

        def with_range(new: Range) -> SplitCube:
            position = self.ranges[p][:c] + (new,) + self.ranges[p][c + 1 :]
            return SplitCube(self.ranges[:p] + (position,) + self.ranges[p + 1 :], self.depth + 1)

        return with_range((a, middle)), with_range((middle + 1, b))

    def center(self) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple((a + b) // 2 for a, b in position) for position in self.ranges)


def coordinate_sizes(space: InputSpace) -> tuple[int, int]:
    """(values per coordinate, coordinates per token) of the space's tokens."""
    domain = space.domain
    if isinstance(domain, GridDomain):
        return len(domain.values), domain.dim
    return len(domain.alphabet), 1


def roots(space: InputSpace) -> list[SplitCube]:
    """One cube per length of the space: every token at every position."""
    values, coordinates = coordinate_sizes(space)
    return [
        SplitCube(tuple(tuple((0, values - 1) for _ in range(coordinates)) for _ in range(n))) for n in space.lengths
    ]


def token_indices(space: InputSpace, position: tuple[Range, ...]) -> np.ndarray:
    """Indices into ``space.tokens`` of the tokens one position's ranges allow (ascending).

    Grid tokens are numbered in ``itertools.product`` order (the first coordinate most significant).
    """
    values, _ = coordinate_sizes(space)
    index = np.zeros(1, dtype=np.int64)
    for a, b in position:
        index = (index[:, None] * values + np.arange(a, b + 1, dtype=np.int64)[None, :]).reshape(-1)
    return index


def bounds_cube(space: InputSpace, cube: SplitCube) -> Cube:
    """The ``verify_tf.bounds`` cube of the product (per position, its tokens)."""
    tokens = space.tokens
    return Cube(tuple(tuple(tokens[int(t)] for t in token_indices(space, position)) for position in cube.ranges))


def whole_bounds(model: Model, arithmetic: Arithmetic, space: InputSpace, length: int) -> Bounds:
    """The bounds of a root cube (every input of one length): auto's prediction for split (the engine's card)
    and the engine's first step ask for the same ones; in one process they are computed once (``domain_bounds``).
    The key is the domain (a few values), not the cube: hashing a cube of a 390,625-token grid hashed its
    1.5·10^6 Fractions on every call, 15 s of a 10 s budget (issue 38)."""
    try:
        hash(space.domain)
    except TypeError:  # a domain whose language is not hashable: computed every time
        return cube_bounds(model, arithmetic, Cube.whole(space.tokens, length))
    return domain_bounds(model, arithmetic, space.domain, length)


@lru_cache(maxsize=8)
def domain_bounds(model: Model, arithmetic: Arithmetic, domain: Domain, length: int) -> Bounds:
    """``cube_bounds`` of every input of ``length`` tokens of ``domain`` (cached by value)."""
    return cube_bounds(model, arithmetic, Cube.whole(domain.tokens, length))


def member_mask(space: InputSpace, rows: np.ndarray) -> np.ndarray:
    """Which rows belong to the space (distinct tokens, sorted multisets, constant inputs)."""
    keep = np.ones(len(rows), dtype=bool)
    if rows.shape[1] < 2:
        return keep
    if space.order == "sorted":
        keep &= (
            (rows[:, 1:] > rows[:, :-1]).all(axis=1) if space.distinct else (rows[:, 1:] >= rows[:, :-1]).all(axis=1)
        )
    elif space.order == "constant":
        keep &= (rows == rows[:, :1]).all(axis=1)
    if space.distinct:
        ordered = np.sort(rows, axis=1)
        keep &= (ordered[:, 1:] != ordered[:, :-1]).all(axis=1)
    return keep


def rows(space: InputSpace, cube: SplitCube) -> np.ndarray:
    """The space's members inside the cube as token-index rows, in the space's order (lexicographic)."""
    per_position = [token_indices(space, position) for position in cube.ranges]
    if not per_position:
        return np.zeros((1, 0), dtype=np.int64)
    grids = np.meshgrid(*per_position, indexing="ij")
    out = np.stack([g.reshape(-1) for g in grids], axis=1).astype(np.int64)
    kept: np.ndarray = out[member_mask(space, out)]
    return kept


def members(space: InputSpace, cube: SplitCube) -> int:
    """How many of the space's inputs lie in the cube (exact; lists the rows unless the cube is a product)."""
    if space.order == "all" and not space.distinct:
        return cube.volume()
    return len(rows(space, cube))


def center_row(space: InputSpace, cube: SplitCube) -> np.ndarray | None:
    """One member of the space inside the cube near its center, or None when the cube has none nearby.

    (A concrete candidate only: it is evaluated and, if it violates, replayed; it never proves anything.)
    """
    middle = [
        int(token_indices(space, tuple(((a + b) // 2, (a + b) // 2) for a, b in position))[0])
        for position in cube.ranges
    ]
    row = np.array([middle], dtype=np.int64)
    if member_mask(space, row)[0]:
        return row
    # distinct / sorted spaces: try a few members of the cube in order
    per_position = [token_indices(space, position) for position in cube.ranges]
    for combination in itertools.islice(itertools.product(*per_position), 64):
        row = np.array([combination], dtype=np.int64)
        if member_mask(space, row)[0]:
            return row
    return None


def decode(space: InputSpace, row: np.ndarray) -> tuple[Token, ...]:
    return space.decode(row)


@dataclass(frozen=True)
class Limits:
    """How the engine splits (plain data, part of every unit)."""

    enumerate_at: int = 64  # cubes with at most this many inputs are always enumerated exactly
    adaptive: bool = True  # above it, enumerate where the measured rates say that is cheaper (``leaves.py``)
    smt_at: int = 0  # cubes with at most this many inputs (and more than enumerate_at) go to SMT; 0: never
    smt_seconds: float = 2.0  # per SMT leaf (an unknown answer splits the cube instead)
    batch: int = 256  # cubes per work unit, at most
    queue: int = 1 << 20  # open cubes held at most
    best_first: int = 1 << 16  # best-first by the property's score while fewer cubes are open, then depth-first
    attack: bool = True  # evaluate each open cube's corners under its linear bound
    linear: bool = True  # the linear domain where it models the network (False: exact intervals only)


DISTINCT_LIMITS = Limits(enumerate_at=4096)  # contextual mapping's leaf cubes (distinct.py), when none are given

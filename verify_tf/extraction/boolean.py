"""Stage 4: small Boolean formulas for the truth tables the levels hand over.

A table maps the feature vectors met at the observed positions (the letter, one test per letter, and the
atoms' truth values) to a Boolean; every other vector is a *don't care*: no position showed it (the proof stage
decides whether that was right at every length). ``simplify`` first drops every feature the table does not need
(greedily: the deepest atoms first, letters last, so that definitions merge and depth falls), then writes a
small DNF over the rest: each true row grows into a prime implicant (a conjunction that covers no false row),
and a greedy cover picks among them; the negation of the false rows' DNF is taken when it is shorter.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

Row = tuple[Any, ...]  # Booleans; a head coordinate's (group, output) where coordinates are the features
Literal = tuple[int, bool]  # (feature index, polarity)


class Conflict(Exception):
    """Two positions with the same features but different values: the features do not determine the table."""


@dataclass(frozen=True)
class Formula:
    """A DNF over features (``negated``: the negation of that DNF). No cubes: false; an empty cube: true."""

    cubes: tuple[tuple[Literal, ...], ...]
    negated: bool = False

    def features(self) -> set[int]:
        return {i for cube in self.cubes for i, _ in cube}

    @property
    def size(self) -> int:
        return sum(max(len(cube), 1) for cube in self.cubes) + (1 if self.negated else 0)


def table(rows: Sequence[tuple[Row, bool]]) -> dict[Row, bool]:
    """The rows as a truth table (``Conflict`` when one vector has both values)."""
    found: dict[Row, bool] = {}
    for row, value in rows:
        if found.setdefault(row, value) != value:
            raise Conflict(row)
    return found


def _consistent(rows: dict[Row, bool], kept: Sequence[int]) -> bool:
    seen: dict[Hashable, bool] = {}
    return all(seen.setdefault(tuple(row[i] for i in kept), value) == value for row, value in rows.items())


def needed(rows: dict[Row, bool], allowed: Sequence[int], drop_order: Sequence[int]) -> list[int]:
    """The features of ``allowed`` still needed after dropping, in ``drop_order``, every one the table can do
    without."""
    kept = list(allowed)
    for feature in drop_order:
        if feature not in kept:
            continue
        trial = [i for i in kept if i != feature]
        if _consistent(rows, trial):
            kept = trial
    return kept


def _dnf(on: list[Row], off: list[Row], kept: Sequence[int]) -> tuple[tuple[Literal, ...], ...]:
    """A small DNF over ``kept`` true on every ``on`` row and false on every ``off`` row."""
    if not on:
        return ()
    if not off:
        return ((),)
    implicants: list[tuple[Literal, ...]] = []
    for row in on:
        cube = [(i, row[i]) for i in kept]
        for literal in list(cube):
            trial = [x for x in cube if x != literal]
            if not any(all(other[i] == v for i, v in trial) for other in off):
                cube = trial
        implicants.append(tuple(cube))
    implicants = sorted(set(implicants), key=lambda c: (len(c), c))
    chosen: list[tuple[Literal, ...]] = []
    uncovered = set(range(len(on)))
    while uncovered:
        best = max(
            implicants,
            key=lambda c: (sum(1 for k in uncovered if all(on[k][i] == v for i, v in c)), -len(c)),
        )
        chosen.append(best)
        uncovered = {k for k in uncovered if not all(on[k][i] == v for i, v in best)}
    return tuple(sorted(chosen, key=lambda c: (len(c), c)))


def simplify(rows: dict[Row, bool], allowed: Sequence[int], drop_order: Sequence[int]) -> Formula:
    """A small formula over ``allowed`` agreeing with every row (module docstring)."""
    kept = needed(rows, allowed, drop_order)
    reduced = table([(tuple(row[i] for i in kept), value) for row, value in rows.items()])
    local_on = [r for r, v in reduced.items() if v]
    local_off = [r for r, v in reduced.items() if not v]

    def lift(cubes: tuple[tuple[Literal, ...], ...]) -> tuple[tuple[Literal, ...], ...]:
        return tuple(tuple((kept[i], v) for i, v in cube) for cube in cubes)

    index = range(len(kept))
    positive = Formula(lift(_dnf(local_on, local_off, index)))
    negative = Formula(lift(_dnf(local_off, local_on, index)), negated=True)
    return negative if negative.size < positive.size else positive


__all__ = ["Conflict", "Formula", "Row", "needed", "simplify", "table"]

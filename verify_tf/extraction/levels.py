"""Stage 3: per layer, what a position's class is, as Booleans over the letter and the atoms of lower layers.

The features of a position are one test per letter and the truth value of every atom (``heads``) at it. A
position's class at layer 0 is a function of its letter; at layer l + 1 a function of its class at l and the
outputs of layer l's heads, which the atoms of layer l determine; the model's decision is a function of its class
after the last layer. So every Boolean the program needs is a table over the features met at the observed
positions:

* the decision: over every feature (``accept``);
* an atom Σ_c a_c·n_c + k ≥ 0 of layer l, written over the program's counts: n_c = #C_c + [c is BOS's class],
  Σ_c #C_c = #true, so with the most common coefficient a_0 it reads
  a_0·#true + Σ_a a·#(the classes with a_c − a_0 = a) + (k + a_BOS) ≥ 0, one count per distinct coefficient;
  each "position's class is among these" is a table over the letters and the atoms of layers < l.

Classes with the same coefficient in every atom that is used are never told apart: they merge. Only the atoms
the decision needs, and the atoms those need, are kept (a work list from the decision down).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..work import Deadline
from .boolean import Conflict, Formula, needed, simplify, table
from .heads import Atom, Boundaries, Coordinate, ExtractionError
from .observe import Budget, Observed


@dataclass(frozen=True)
class Term:
    """``factor·#operand``."""

    factor: int
    operand: Formula


@dataclass(frozen=True)
class Comparison:
    """``base·#true + Σ term + constant ≥ 0``: an atom over the program's counts."""

    atom: Atom
    base: int
    terms: tuple[Term, ...]
    constant: int


@dataclass(frozen=True)
class Levels:
    """The extracted definitions, as data: the comparisons the decision needs, by layer, and the decision."""

    alphabet: tuple[str, ...]
    atoms: tuple[Atom, ...]  # every atom made, indexed as features after the letters
    comparisons: tuple[Comparison, ...]  # the needed ones, by layer then name
    accept: Formula
    coordinates: int  # head output coordinates the kept definitions read


class _Tables:
    """The truth tables over the observed positions, and their formulas (module docstring).

    A table is reduced in two steps: first over the head coordinates' values (a coordinate's output and its
    group: few features, whatever the number of boundaries), then over the boundaries of the coordinates kept."""

    def __init__(self, observed: Observed, boundaries: Boundaries, deadline: Deadline) -> None:
        self.observed, self.boundaries, self.deadline = observed, boundaries, deadline
        self.letters = len(observed.alphabet)
        count = len(observed.positions)
        self.letter_rows = [tuple(p.letter == a for a in observed.alphabet) for p in observed.positions]
        self.values = {
            c: [boundaries.value(i, c) for i in range(count)] for c in boundaries.coordinates
        }  # per coordinate, per position
        self._truth: dict[int, list[bool]] = {}
        self.used: set[Coordinate] = set()

    def truth(self, atom: int) -> list[bool]:
        found = self._truth.get(atom)
        if found is None:
            a = self.boundaries.all[atom]
            found = self._truth[atom] = [a.holds(dict(p.counts[a.layer])) for p in self.observed.positions]
        return found

    def formula(self, values: list[bool], below: int) -> Formula:
        if self.deadline.expired():
            raise Budget("writing the definitions")
        coordinates = [c for c in self.boundaries.coordinates if c.layer < below]
        kept = self._coordinates(values, coordinates)
        self.used.update(kept)
        try:  # the boundaries where the table changes (``_cuts``), else every boundary of the kept coordinates
            return self._over(values, self._presence(kept) + self._cuts(values, kept))
        except Conflict:
            pass
        try:
            return self._over(values, self._presence(kept) + [a for c in kept for a in self.boundaries.atoms(c)])
        except Conflict:
            every = [a for c in coordinates for a in self.boundaries.atoms(c)]
            try:
                return self._over(values, self._presence(coordinates) + every)
            except Conflict as conflict:
                raise ExtractionError(f"the boundaries do not determine a table: {conflict}") from None

    def _presence(self, coordinates: list[Coordinate]) -> list[int]:
        return [a for c in coordinates for a in self.boundaries.presence(c.layer, c.where)]

    def _over(self, values: list[bool], atoms: list[int]) -> Formula:
        atoms = list(dict.fromkeys(atoms))
        columns = [self.truth(index) for index in atoms]
        rows = [letters + tuple(column[i] for column in columns) for i, letters in enumerate(self.letter_rows)]
        truth = table(list(zip(rows, values)))
        local = simplify(truth, range(self.letters + len(atoms)), self._drop_order(atoms))
        return _renumbered(local, self.letters, atoms)

    def _cuts(self, values: list[bool], kept: list[Coordinate]) -> list[int]:
        """Per kept coordinate and group, the outputs merged into intervals from the least up, as long as the table
        stays a function (the other coordinates as coarse as already made): a boundary only where it must be."""
        symbols = {c: list(self.values[c]) for c in kept}
        found: list[int] = []
        for c in kept:
            others = [
                (letters, tuple(symbols[o][i] for o in kept if o != c)) for i, letters in enumerate(self.letter_rows)
            ]
            at: dict[tuple[Any, ...], list[int]] = defaultdict(list)
            for i, symbol in enumerate(symbols[c]):
                at[symbol].append(i)
            outputs: dict[Any, list[int]] = defaultdict(list)
            for group, y in at:
                outputs[group].append(y)
            coarse: dict[tuple[Any, ...], tuple[Any, ...]] = {}
            for group in sorted(outputs, key=str):
                ys = sorted(outputs[group])
                current: dict[Any, bool] = {}
                start = ys[0]
                for y in ys:
                    block = {others[i]: values[i] for i in at[(group, y)]}
                    if y != ys[0] and any(current.get(k, v) != v for k, v in block.items()):
                        index = self.boundaries.cut(c, group, y)
                        if index is not None:
                            found.append(index)
                        start, current = y, {}
                    current.update(block)
                    coarse[(group, y)] = (group, start)
            symbols[c] = [coarse[symbol] for symbol in symbols[c]]
        return found

    def _coordinates(self, values: list[bool], coordinates: list[Coordinate]) -> list[Coordinate]:
        """The coordinates the table needs (the letters kept), dropped greedily from the first layer up."""
        columns = [self.values[c] for c in coordinates]
        rows = [letters + tuple(column[i] for column in columns) for i, letters in enumerate(self.letter_rows)]
        try:
            truth = table(list(zip(rows, values)))
        except Conflict as conflict:
            raise ExtractionError(f"the heads' outputs do not determine a table: {conflict}") from None
        features = list(range(self.letters, self.letters + len(coordinates)))
        kept = needed(truth, list(range(self.letters)) + features, features)
        return [coordinates[f - self.letters] for f in kept if f >= self.letters]

    def _drop_order(self, atoms: list[int]) -> list[int]:
        every = self.boundaries.all
        order = sorted(range(len(atoms)), key=lambda k: (every[atoms[k]].layer, every[atoms[k]].index))
        return [self.letters + k for k in order] + list(range(self.letters))


def _renumbered(formula: Formula, letters: int, atoms: list[int]) -> Formula:
    """A formula over (letters, the table's atoms) as one over (letters, every atom)."""

    def feature(i: int) -> int:
        return i if i < letters else letters + atoms[i - letters]

    cubes = tuple(tuple((feature(i), v) for i, v in cube) for cube in formula.cubes)
    return Formula(cubes, formula.negated)


def build(observed: Observed, boundaries: Boundaries, deadline: Deadline) -> Levels:
    """The decision and the comparisons it needs (module docstring)."""
    letters = len(observed.alphabet)
    tables = _Tables(observed, boundaries, deadline)
    accept = tables.formula([p.accepts for p in observed.positions], len(observed.blocks))
    comparisons: dict[int, Comparison] = {}
    work = sorted(f - letters for f in accept.features() if f >= letters)
    while work:
        index = work.pop()
        if index in comparisons:
            continue
        comparison = _comparison(observed, boundaries.all[index], tables.formula)
        comparisons[index] = comparison
        for term in comparison.terms:
            work.extend(f - letters for f in term.operand.features() if f >= letters)
    kept = sorted(comparisons.values(), key=lambda c: (c.atom.layer, c.atom.head, c.atom.index))
    levels = Levels(tuple(observed.alphabet), tuple(boundaries.all), tuple(kept), accept, len(tables.used))
    return _positive(levels)


def _positive(levels: Levels) -> Levels:
    """Each comparison used more often negated than not is written negated (Σ a·n + k ≥ 0 becomes
    Σ −a·n − k − 1 ≥ 0 over the integers), and its uses flip: ``#"a" > #"b"`` rather than ``!(#"b" >= #"a")``."""
    letters = len(levels.alphabet)
    formulas = [levels.accept] + [t.operand for c in levels.comparisons for t in c.terms]
    balance: dict[int, int] = defaultdict(int)
    for formula in formulas:
        for cube in formula.cubes:
            for feature, polarity in cube:
                balance[feature] += 1 if polarity else -1
    flipped = {letters + levels.atoms.index(c.atom) for c in levels.comparisons} & {
        f for f, b in balance.items() if b < 0
    }
    if not flipped:
        return levels

    def flip(formula: Formula) -> Formula:
        cubes = tuple(tuple((f, v != (f in flipped)) for f, v in cube) for cube in formula.cubes)
        return Formula(cubes, formula.negated)

    atoms = list(levels.atoms)
    comparisons = []
    for c in levels.comparisons:
        terms = tuple(Term(t.factor, flip(t.operand)) for t in c.terms)
        feature = letters + levels.atoms.index(c.atom)
        if feature in flipped:
            atom = c.atom
            negated = Atom(
                atom.layer,
                atom.head,
                atom.index,
                tuple((k, -a) for k, a in atom.coefficients),
                -atom.constant - 1,
                atom.what.replace(">=", "<").replace("present", "absent"),
            )
            atoms[feature - letters] = negated
            comparisons.append(
                Comparison(negated, -c.base, tuple(Term(-t.factor, t.operand) for t in terms), -c.constant - 1)
            )
        else:
            comparisons.append(Comparison(c.atom, c.base, terms, c.constant))
    return Levels(levels.alphabet, tuple(atoms), tuple(comparisons), flip(levels.accept), levels.coordinates)


def _comparison(observed: Observed, atom: Atom, formula: Callable[[list[bool], int], Formula]) -> Comparison:
    classes = observed.classes_of(atom.layer)
    coefficient = dict(atom.coefficients)
    word_classes = {p.classes[atom.layer] for p in observed.positions}
    used = [coefficient.get(c, 0) for c in classes if c in word_classes]

    def width(base: int) -> int:
        return len({a - base for a in used} - {0}) + (base != 0)

    base = min(sorted(set(used) | {0}, key=abs), key=lambda a: (width(a), a != 0))
    constant = atom.constant
    if observed.bos_classes is not None:
        constant += coefficient.get(observed.bos_classes[atom.layer], 0)
    groups: dict[int, set[int]] = {}
    for c in classes:
        if c not in word_classes:  # BOS's alone: its count is the constant above
            continue
        a = coefficient.get(c, 0) - base
        if a != 0:
            groups.setdefault(a, set()).add(c)
    terms = []
    for a in sorted(groups, key=lambda a: (-a > 0, -abs(a))):
        members = groups[a]
        operand = formula([p.classes[atom.layer] in members for p in observed.positions], atom.layer)
        terms.append(Term(a, operand))
    return Comparison(atom, base, tuple(terms), constant)


__all__ = ["Comparison", "Levels", "Term", "build"]

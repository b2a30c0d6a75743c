"""Stage 2: every rounding boundary of every head, as a linear inequality over the layer's class counts.

At attention layer l a position of stream class z reads its prefix only through the counts n_c of the layer's
stream classes c (BOS and itself included; ``observe``). With v_c the head's value at class c (integer
mantissas) and t an integer mantissa, in fixed-point arithmetic with exact sums (docs/semantics.md):

* uniform scoring, or scores that do not depend on the key (the counting engine's ``average`` heads):
  y = ⌊Σ n_c v_c / Σ n_c⌋, so y ≥ t ⟺ Σ n_c (v_c − t) ≥ 0;
* hardmax over key-dependent scores s_c (z's query against c's key, rounded as the interpreter rounds them):
  with m the top score among the classes present, y ≥ t ⟺ Σ_{s_c = m} n_c (v_c − t) ≥ 0;
* softmax: w_c = E[m − s_c] (``exp_table``: an integer), y = ⌊Σ w_c n_c v_c / Σ w_c n_c⌋, so
  y ≥ t ⟺ Σ_{s_c ≤ m} w_c n_c (v_c − t) ≥ 0;

then saturated, which keeps y ≥ t for every t inside the range. Which m applies is decided by which key
classes are present: ``present`` atoms Σ_{c ∈ κ} n_c ≥ 1. Only the t that separate output values observed in
one group (same scores, same m) are kept: the boundaries the model's positions actually cross. Every atom is
checked against the observed outputs at every position of its group (``ExtractionError`` on a mismatch: a bug
here, never a guess). Integers and Fractions throughout; floats never enter.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ..engines.counting.counters import AVERAGE, TERMS, WEIGHTED, WINDOW, CounterModel
from ..semantics.arithmetic import Fixed
from ..semantics.exp_table import exp_mantissa
from .observe import Observed, Position


class ExtractionError(Exception):
    """The extraction contradicted the model it observed: a bug, reported as an error."""


class DoesNotApply(Exception):
    """Extraction does not apply to this model; the message says why and what would make it apply."""


@dataclass(frozen=True)
class Atom:
    """Σ_c a_c·n_c + constant ≥ 0 over the counts n_c of attention layer ``layer``'s classes (BOS included)."""

    layer: int
    head: int
    index: int  # its number among the head's atoms (the name's c)
    coefficients: tuple[tuple[int, int], ...]  # (class id, a_c), a_c != 0, by class id
    constant: int
    what: str  # which boundary: "output[d] >= t" or "key class k present"

    @property
    def name(self) -> str:
        return f"t{self.layer}_h{self.head}_c{self.index}"

    def holds(self, counts: dict[int, int]) -> bool:
        return sum(a * counts.get(c, 0) for c, a in self.coefficients) + self.constant >= 0


def normalised(coefficients: dict[int, int], constant: int) -> tuple[tuple[tuple[int, int], ...], int] | None:
    """Σ a·n + k ≥ 0 divided by the gcd g of the a's: Σ (a/g)·n + ⌊k/g⌋ ≥ 0 (the same set of integer n);
    None when every a is 0 (a constant truth)."""
    items = tuple(sorted((c, a) for c, a in coefficients.items() if a != 0))
    if not items:
        return None
    g = math.gcd(*(a for _, a in items))
    return tuple((c, a // g) for c, a in items), constant // g


@dataclass(frozen=True)
class _Head:
    layer: int
    block: int
    head: int
    slot: int
    kind: str


def _heads(observed: Observed) -> list[_Head]:
    counter = observed.counter
    found = []
    for layer, block in enumerate(observed.blocks):
        for slot in counter.by_layer[block]:
            found.append(_Head(layer, block, counter.slots[slot].index, slot, counter.slots[slot].kind))
    return found


def check_applies(counter: CounterModel) -> None:
    """``DoesNotApply`` unless every head's boundaries are linear in the counts (module docstring)."""
    arith = counter.arith
    if not isinstance(arith, Fixed):
        raise DoesNotApply(
            f"the arithmetic is {arith.describe()}: a head's output is then an exact ratio of counts, which takes "
            "unboundedly many values; extraction needs fixed-point rounding (arithmetic: {mode: fixed, ...})"
        )
    if arith.attention_rounding != "exact-sums":
        raise DoesNotApply(
            f"attention rounding {arith.attention_rounding}: each weight or term is rounded on its own, so a "
            "boundary is not a linear inequality over counts; extraction applies with attention-rounding: exact-sums"
        )
    for slot in counter.slots:
        if slot.kind == TERMS:  # (not reachable under exact-sums; kept for a future rounding mode)
            raise DoesNotApply(f"{slot} rounds each term on its own; extraction applies with exact-sums")
        if slot.kind == AVERAGE and any(counter.weight(slot.head.scoring, n) != Fraction(1, n) for n in range(1, 65)):
            raise DoesNotApply(f"{slot}: equal scores do not weigh exactly 1/n in {arith.describe()}")
    for slot in counter.slots:  # the counting engine keeps these as windows and phases; C-RASP here has no positions
        if slot.kind == WINDOW:
            raise DoesNotApply(
                f"{slot} uses {slot.head.positional}: its weights depend on the distance j - i (the counting engine "
                "keeps a window of the last keys beside the counts); extraction writes C-RASP without positional "
                "predicates and applies to models without relative positions"
            )
        if slot.kind != AVERAGE and slot.head.positional == "rope":
            raise DoesNotApply(
                f"{slot} uses rope: its scores turn with the position (a phase modulo {counter.period}); extraction "
                "writes C-RASP without positional predicates and applies to models without relative positions"
            )
    if counter.length_dependent:
        raise DoesNotApply(
            "the model has an absolute positional encoding: a position's computation depends on its index, not "
            "only on counts; C-RASP without positional predicates cannot say that. It applies to models without "
            "positional encoding (causal masks give the counts)"
        )


class _Reader:
    """One head's values, key classes and scores per stream class (memoised)."""

    def __init__(self, observed: Observed, head: _Head) -> None:
        counter = observed.counter
        self.counter, self.head = counter, head
        layer = counter.model.blocks[head.block].attention
        assert layer is not None
        arith = counter.arith
        assert isinstance(arith, Fixed)
        self.arith = arith
        self.classes = observed.classes_of(head.layer)
        position = counter.by_layer[head.block].index(head.slot)
        self.values: dict[int, tuple[int, ...]] = {}
        self.keys: dict[int, int] = {}
        self.queries: dict[int, Any] = {}
        for c in self.classes:
            q, k, v = counter.head_vectors(head.block, layer, c)[position]
            self.values[c] = tuple(int(x * arith.scale) for x in v)
            if head.kind == WEIGHTED:
                self.keys[c] = counter.class_id(head.slot, k)
                self.queries[c] = q
        self._scores: dict[int, tuple[int, ...]] = {}

    def scores(self, z: int) -> tuple[int, ...]:
        """The score mantissas of class z's query against every key class (by key class id)."""
        found = self._scores.get(z)
        if found is None:
            rounded = self.counter.scores(self.head.slot, self.queries[z])
            found = self._scores[z] = tuple(self.arith.mantissa(s) for s in rounded)
        return found

    def group(self, position: Position) -> tuple[Any, ...]:
        """What, besides the counts, a boundary depends on at this position: nothing (average heads), or the
        query's scores and the top score among the key classes present."""
        if self.head.kind == AVERAGE:
            return ()
        scores = self.scores(position.classes[self.head.layer])
        present = {self.keys[c] for c, n in position.counts[self.head.layer] if n > 0}
        return scores, max(scores[k] for k in present)

    def boundary(self, group: tuple[Any, ...], d: int, t: int) -> dict[int, int]:
        """The coefficients a_c of output[d] ≥ t ⟺ Σ a_c n_c ≥ 0 in this group (module docstring)."""
        if self.head.kind == AVERAGE:
            return {c: self.values[c][d] - t for c in self.classes}
        scores, top = group
        hardmax = self.counter.slots[self.head.slot].head.scoring == "hardmax"
        found = {}
        for c in self.classes:
            s = scores[self.keys[c]]
            if s > top:
                continue  # absent wherever this group applies
            if hardmax:
                weight = 1 if s == top else 0
            else:
                weight = exp_mantissa(top - s, self.arith.frac)
            found[c] = weight * (self.values[c][d] - t)
        return found


@dataclass(frozen=True)
class Coordinate:
    """One output coordinate of one head: ``where`` is the head's place among its block's heads."""

    layer: int
    head: int
    where: int
    d: int


class Boundaries:
    """The atoms of every head coordinate, made when first asked for (``atoms``) and checked against every
    observed position of their group then: a model has many coordinates, a decision reads few of them."""

    def __init__(self, observed: Observed) -> None:
        self.observed = observed
        self.all: list[Atom] = []  # every atom made so far: its index is its feature number
        self.readers: dict[tuple[int, int], _Reader] = {}
        self.groups: dict[tuple[int, int], list[tuple[Any, ...]]] = {}  # per head: each position's group
        self.coordinates: list[Coordinate] = []
        self._forms: dict[tuple[int, int], dict[tuple[Any, ...], int]] = {}
        self._made: dict[Any, list[int]] = {}
        for head in _heads(observed):
            reader = _Reader(observed, head)
            where = _index_in_block(observed, head)
            self.readers[(head.layer, where)] = reader
            self.groups[(head.layer, where)] = [reader.group(p) for p in observed.positions]
            self._forms[(head.layer, where)] = {}
            width = len(observed.positions[0].outputs[head.layer][where]) if observed.positions else 0
            self.coordinates += [Coordinate(head.layer, head.head, where, d) for d in range(width)]

    def value(self, index: int, coordinate: Coordinate) -> tuple[Any, ...]:
        """What coordinate ``coordinate`` shows at observed position ``index``: (its group, its output)."""
        position = self.observed.positions[index]
        group = self.groups[(coordinate.layer, coordinate.where)][index]
        return group, position.outputs[coordinate.layer][coordinate.where][coordinate.d]

    def _add(self, layer: int, where: int, coefficients: dict[int, int], constant: int, what: str) -> int | None:
        form = normalised(coefficients, constant)
        if form is None:
            return None
        forms = self._forms[(layer, where)]
        if form not in forms:
            reader = self.readers[(layer, where)]
            forms[form] = len(self.all)
            number = sum(1 for a in self.all if (a.layer, a.head) == (layer, reader.head.head))
            self.all.append(Atom(layer, reader.head.head, number, form[0], form[1], what))
        return forms[form]

    def presence(self, layer: int, where: int) -> list[int]:
        """The atoms "key class κ present" of a ``weighted`` head (none for the others)."""
        memo = ("present", layer, where)
        if memo not in self._made:
            reader = self.readers[(layer, where)]
            made = []
            if reader.head.kind == WEIGHTED:
                for key in sorted(set(reader.keys.values())):
                    members = {c: 1 for c in reader.classes if reader.keys[c] == key}
                    index = self._add(layer, where, members, -1, f"key class {key} present")
                    if index is not None:
                        made.append(index)
            self._made[memo] = made
        return self._made[memo]

    def cut(self, coordinate: Coordinate, group: tuple[Any, ...], t: int) -> int | None:
        """The atom output[d] >= t of one group of this coordinate, checked at that group's positions."""
        reader = self.readers[(coordinate.layer, coordinate.where)]
        coefficients = reader.boundary(group, coordinate.d, t)
        index = self._add(coordinate.layer, coordinate.where, coefficients, 0, f"output[{coordinate.d}] >= {t}")
        form = None if index is None else (self.all[index].coefficients, self.all[index].constant)
        members = [
            p
            for i, p in enumerate(self.observed.positions)
            if self.groups[(coordinate.layer, coordinate.where)][i] == group
        ]
        _check(coordinate, members, t, form)
        return index

    def atoms(self, coordinate: Coordinate) -> list[int]:
        """The boundaries between the outputs observed in each group of this coordinate, checked."""
        if coordinate in self._made:
            return self._made[coordinate]
        key = (coordinate.layer, coordinate.where)
        values: dict[tuple[Any, ...], set[int]] = defaultdict(set)
        members: dict[tuple[Any, ...], list[Position]] = defaultdict(list)
        for number, position in enumerate(self.observed.positions):
            group, y = self.value(number, coordinate)
            values[group].add(y)
            members[group].append(position)
        made = []
        reader = self.readers[key]
        for group in sorted(values, key=str):
            for t in sorted(values[group])[1:]:
                coefficients = reader.boundary(group, coordinate.d, t)
                index = self._add(coordinate.layer, coordinate.where, coefficients, 0, f"output[{coordinate.d}] >= {t}")
                form = None if index is None else (self.all[index].coefficients, self.all[index].constant)
                _check(coordinate, members[group], t, form)
                if index is not None and index not in made:
                    made.append(index)
        self._made[coordinate] = made
        return made


def _index_in_block(observed: Observed, head: _Head) -> int:
    return observed.counter.by_layer[head.block].index(head.slot)


def _check(coordinate: Coordinate, positions: list[Position], t: int, form: Any) -> None:
    for position in positions:
        y = position.outputs[coordinate.layer][coordinate.where][coordinate.d]
        counts = dict(position.counts[coordinate.layer])
        # every coefficient 0: the boundary reads 0 >= 0
        holds = form is None or sum(a * counts.get(c, 0) for c, a in form[0]) + form[1] >= 0
        if holds != (y >= t):
            raise ExtractionError(
                f"layer {coordinate.layer} head {coordinate.head} output[{coordinate.d}] = {y} at {position.word!r}, "
                f"but its boundary >= {t} says {'yes' if holds else 'no'}"
            )


__all__ = ["Atom", "Boundaries", "Coordinate", "DoesNotApply", "ExtractionError", "check_applies", "normalised"]

"""Every length: induction over positions, with the position, the sums and the counts unbounded integers.

The joint state after i letters is the point p = (i, the model's counters, the reference's counters, the letter
counts): per head of each model its value sums (``average``), its per-key counts and value sums (``weighted``)
or its per-class counts (``terms``), all integers (mantissas), and a counter machine's counts. An invariant
Inv(p) is proved inductive with z3 over unbounded integers (QF_LIA):

* **base**: Inv holds at every state the exact exploration reached (the empty prefix's among them);
* **coverage**: a position's computation is a tree of *stream classes*: the stream entering each attention
  block is one of finitely many vectors (the classes the exploration met; ``paths``). Inside one class the
  heads' keys and values are constants, so the heads' outputs are exact linear-integer functions of the
  counters: a rounded quotient ⌊A/W⌋ whose numerator and divisor are linear in the counts (``rounded_quotient``,
  built bit by bit; max-stabilised softmax and hardmax split on which score level is the top one present).
  Everything after the heads is the interpreter's per-position computation over z3 terms (``symbolic``).
  Coverage asks whether a state satisfying Inv can send a position's stream outside the known classes of the
  next block; if so the new class (evaluated from z3's model) joins the tree, and the layout gains its counters;
* **step**, for every letter σ: Inv(p) ∧ p' = T_σ(p) ⇒ Inv(p');
* **decisions**: Inv(p) ∧ p' = T_σ(p) ∧ the prefix of length i + 1 is constrained ⇒ no violation there: the
  property's own predicate over the symbolic observation (``encode_prefix_violation``).

Together: at every reachable state of every length nothing is violated (the empty prefix is checked concretely
by the exploration). **The invariant is inferred, then checked**: the affine equalities that hold on every
state the exact exploration reached (a basis of the null space of those points, exact linear algebra over
Fractions), plus bounds: counts between 0 and the number of positions, sums between the least and the greatest
value per position. Houdini-style refinement keeps only what is inductive: a counterexample to the step drops
the bounds its successor violates and adds the successor to the points (which removes exactly the equalities
it violates). If the decisions still fail, the verdict names the state (which may be unreachable).

**Positions** (docs/counting.md, "Positions"). A ``window`` head's last R keys are one-hot variables
win[m][c] ∈ {0, 1} (the key at distance m is of class c), its farther keys counts far[c]; a step shifts the
window (win'[1][own] = 1, win'[m + 1] = win[m], far'[c] = far[c] + win[R][c]), and the head's output splits on
the top score level present, as ``weighted`` does, over those groups. One-hot variables make the relations
between a model's window and a program's window of booleans affine, so the inferred invariant can state them.
RoPE with a periodic table: the coverage trees are kept per (letter, phase), each guarded by (i + BOS) mod M =
phase, with the rotations at that phase. A positional program's step reads the position i itself (z3's mod by
a constant stays in linear integer arithmetic).

**From a length on** (``start``, positional models and programs): a window holds BOS, and a program's
predicates take their special values, only at the first positions, which no affine fact separates from the later
ones (e.g. "the key at distance 4 exists iff i ≥ 4"). So the invariant is inferred from the explored states of
length ≥ start only and claimed as i ≥ start ⇒ Inv: its base is every reachable state of length start (the exact
exploration completed that length: all of them are among the points), and the lengths up to start were decided
by the bounded exploration before the induction runs.

Not encoded (``undecided``, the reason named): exact arithmetic (averages off the grid), per-probability
rounding (⌊w/W⌋ times a count is a product of two unknowns), an absolute positional encoding (its table ends).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import z3

from ...ir import Vector
from ...semantics.arithmetic import Fixed
from ...semantics.exp_table import exp_mantissa
from ...semantics.interpreter import rotation
from ...symbolic.encoder import Rounding, SymVector, encode_affine
from ...symbolic.solve import SAT, TACTICS_SMT, UNKNOWN, UNSAT, Session
from ...symbolic.values import Builder, NotEncodable, Sym, to_z3
from ...work import Deadline, DeadlineExpired
from ..base import CountingGoal
from .counters import AVERAGE, WEIGHTED, WINDOW, CounterModel
from .joint import MACHINE, MODEL, Joint
from .symbolic import (
    constant,
    encode_from,
    encode_observation,
    encode_read,
    encode_until_attention,
    rounded_quotient,
)

PROVED, FAILED, UNDECIDED = "proved", "failed", "undecided"
UNBOUNDED = (
    "the position, the sums and the counts are unbounded integers (induction over every length): the "
    "query has no equivalent bit-vector form, so no LRAT proof"
)
MAX_ROUNDS = 400

Point = tuple[int, ...]
Key = tuple[Any, ...]  # a variable of the layout, e.g. ("i",), ("sum", side, slot, c), ("letter", a)


@dataclass
class InductionResult:
    """How the induction ended (plain data)."""

    status: str  # proved | failed | undecided
    detail: str = ""  # what failed or was not decided
    invariant: list[str] = field(default_factory=list)
    rounds: int = 0  # refinement rounds (coverage and step)
    queries: int = 0
    solver_seconds: float = 0.0
    counterexample: dict[str, Any] | None = None  # failed: the state and letter of the failing step
    classes: int = 0  # stream classes in the coverage trees at the end
    variables: int = 0
    start: int = 0  # the invariant is claimed from this length on (the exploration decided the shorter ones)
    # record=True and proved: the queries of the proof (the last refinement round's steps, the decisions) as
    # verdict.Evidence.queries entries
    asked: list[dict[str, Any]] = field(default_factory=list)

    def statistics(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "status": self.status,
            "invariant": self.invariant,
            "refinement_rounds": self.rounds,
            "queries": self.queries,
            "solver_seconds": self.solver_seconds,
            "stream_classes": self.classes,
            "variables": self.variables,
            "from_length": self.start,
        }
        if self.status != PROVED:
            found["failed"] = self.detail
        if self.counterexample is not None:
            found["counterexample"] = self.counterexample
        return found


def word_position(letters_before: int) -> str:
    """How a witness names the position of the letter read after ``letters_before`` letters: positions count
    the word's letters from 0, BOS excluded."""
    return f"position {letters_before}"


# ---------------------------------------------------------------- exact linear algebra


def null_space(points: Sequence[Point], deadline: Deadline | None = None) -> list[tuple[int, ...]]:
    """Integer vectors r (over (1, p)) with r_0 + Σ r_k p_k = 0 for every point: a basis, exactly.
    ``deadline``: checked at every point (``DeadlineExpired``: thousands of points of a wide model take minutes)."""
    width = 1 + len(points[0])
    pivots: dict[int, list[Fraction]] = {}  # pivot column -> reduced row (reduced row echelon form)
    for point in dict.fromkeys(points):
        if len(pivots) == width:  # full rank: only r = 0, whatever the other points
            break
        if deadline is not None:
            deadline.check("while inferring the invariant")
        row = [Fraction(1), *map(Fraction, point)]
        for column, basis in pivots.items():
            if row[column] != 0:
                factor = row[column]
                row = [a - factor * b for a, b in zip(row, basis)]
        lead = next((c for c, a in enumerate(row) if a != 0), None)
        if lead is None:
            continue
        row = [a / row[lead] for a in row]
        for column, basis in pivots.items():
            if basis[lead] != 0:
                factor = basis[lead]
                pivots[column] = [a - factor * b for a, b in zip(basis, row)]
        pivots[lead] = row
    relations = []
    for free in range(width):
        if free in pivots:
            continue
        vector = [Fraction(0)] * width
        vector[free] = Fraction(1)
        for column, basis in pivots.items():
            vector[column] = -basis[free]
        scale = math.lcm(*(a.denominator for a in vector))
        integers = [int(a * scale) for a in vector]
        divisor = math.gcd(*integers)
        relations.append(tuple(a // divisor for a in integers))
    return relations


def _holds(relation: tuple[int, ...], point: Point) -> bool:
    return relation[0] + sum(r * x for r, x in zip(relation[1:], point)) == 0


# ---------------------------------------------------------------- the layout of a point


class _Layout:
    """The integer variables of a joint state, by key, in a fixed order (grows when classes are discovered)."""

    def __init__(self, joint: Joint) -> None:
        self.keys: list[Key] = [("i",)]
        self.names: list[str] = ["i"]
        for side_index, side in enumerate(joint.sides):
            prefix = "" if side_index == 0 else "other."
            for k, slot in enumerate(side.slots):
                if slot.kind == AVERAGE:
                    for c in range(slot.head.value_dim):
                        self._add(("sum", side_index, k, c), f"{prefix}S[{slot}[{c}]]")
                elif slot.kind == WEIGHTED:
                    for kappa in range(len(side.classes[k])):
                        self._add(("kn", side_index, k, kappa), f"{prefix}n[{slot}][key {kappa}]")
                        for c in range(slot.head.value_dim):
                            self._add(("ks", side_index, k, kappa, c), f"{prefix}S[{slot}][key {kappa}][{c}]")
                elif slot.kind == WINDOW:
                    for cls in range(len(side.classes[k])):
                        for m in range(1, side.reach[k] + 1):
                            self._add(("win", side_index, k, m, cls), f"{prefix}win[{slot}][{m}][class {cls}]")
                        self._add(("far", side_index, k, cls), f"{prefix}far[{slot}][class {cls}]")
                else:
                    for cls in range(len(side.classes[k])):
                        self._add(("cn", side_index, k, cls), f"{prefix}n[{slot}][class {cls}]")
        if joint.kind == MACHINE:
            for j, name in enumerate(joint.machine.names):
                self._add(("machine", j), name)
        for a, symbol in enumerate(joint.goal.alphabet):
            self._add(("letter", a), f"|w|_{symbol}")
        self.index = {key: k for k, key in enumerate(self.keys)}

    def _add(self, key: Key, name: str) -> None:
        self.keys.append(key)
        self.names.append(name)

    def point(self, values: dict[Key, int]) -> Point:
        return tuple(values.get(key, 0) for key in self.keys)


def _state_values(joint: Joint, length: int, state: tuple[Any, ...], letters: Sequence[int]) -> dict[Key, int]:
    """The integer variables of a concrete joint state (exact: no frozen sums, no capped counts)."""
    values: dict[Key, int] = {("i",): length}
    ours, theirs = state
    for side_index, (side, kept) in enumerate(zip(joint.sides, (ours, theirs))):
        for k, (slot, entry) in enumerate(zip(side.slots, kept)):
            if slot.kind == AVERAGE:
                for c, total in enumerate(entry):
                    values[("sum", side_index, k, c)] = int(total)
            elif slot.kind == WEIGHTED:
                for kappa, item in enumerate(entry):
                    if item is not None:
                        values[("kn", side_index, k, kappa)] = item[0]
                        for c, total in enumerate(item[1:]):
                            values[("ks", side_index, k, kappa, c)] = int(total)
            elif slot.kind == WINDOW:
                recent, far = entry if entry else ((), ())
                for m, cls in enumerate(recent, start=1):
                    values[("win", side_index, k, m, cls)] = 1
                for cls, n in enumerate(far):
                    values[("far", side_index, k, cls)] = n
            else:
                for cls, n in enumerate(entry):
                    values[("cn", side_index, k, cls)] = n
    if joint.kind == MACHINE:
        for j, count in enumerate(theirs):
            values[("machine", j)] = count
    for a, count in enumerate(letters):
        values[("letter", a)] = count
    return values


# ---------------------------------------------------------------- candidate bounds


@dataclass(frozen=True)
class _Bound:
    """Σ coefficient·variable + constant ≥ 0 over the layout's variables (by key)."""

    coefficients: tuple[tuple[Key, int], ...]
    constant: int
    text: str

    def holds(self, values: dict[Key, int]) -> bool:
        return self.constant + sum(c * values.get(key, 0) for key, c in self.coefficients) >= 0

    def term(self, layout: _Layout, variables: list[Any]) -> Any:
        return (
            z3.Sum([z3.IntVal(self.constant), *(c * variables[layout.index[key]] for key, c in self.coefficients)]) >= 0
        )


# ---------------------------------------------------------------- the coverage trees


Reads = tuple[Any, ...]  # per head of a block that needs them concretely (``weighted``, ``terms``): its (q, k, v)


@dataclass
class _Node:
    """What the concretely read heads of attention block ``block`` read at a position (``reads``), and the reads
    seen at the next block where the computation branches (``side_branches``)."""

    block: int
    reads: Reads
    children: dict[Reads, _Node] = field(default_factory=dict)


def _reads(side: CounterModel, block: int, z: Vector, phase: int = 0) -> Reads:
    layer = side.model.blocks[block].attention
    assert layer is not None
    vectors = side.head_vectors(block, layer, z, phase)
    return tuple(qkv for k, qkv in zip(side.by_layer[block], vectors) if side.slots[k].kind != AVERAGE)


Root = tuple[str, int]  # (letter, phase): a coverage tree's root


def _insert(roots: dict[Root, _Node], side: CounterModel, path: tuple[Any, ...]) -> None:
    """Add a position's computation (its letter, the streams entering every attention block, its phase) to the
    tree of (letter, phase)."""
    letter, entering, phase = path
    if not entering:
        return
    branches = side_branches(side)
    chosen = [
        (block, _reads(side, block, z, phase)) for block, z in zip(sorted(side.by_layer), entering) if block in branches
    ]
    node = roots.setdefault((letter, phase), _Node(*chosen[0]))
    for block, reads in chosen[1:]:
        node = node.children.setdefault(reads, _Node(block, reads))


def _classes(roots: dict[Root, _Node]) -> int:
    def count(node: _Node) -> int:
        return 1 + sum(count(child) for child in node.children.values())

    return sum(count(root) for root in roots.values())


@dataclass(frozen=True)
class SymObservation:
    """``counters.Observation`` over z3 terms: what the property's ``encode_prefix_violation`` reads."""

    readout: Sym
    stream: SymVector


@dataclass
class _Leaf:
    guard: Any  # z3 Bool over the pre-state
    post: dict[Key, Any]  # the updated variables
    observation: SymObservation


@dataclass
class _Escape:
    guard: Any
    reads: tuple[tuple[SymVector, ...], ...]  # what block ``block``'s heads read after ``node``, symbolically
    node: _Node
    block: int


@dataclass
class _Side:
    leaves: list[_Leaf] = field(default_factory=list)
    escapes: list[_Escape] = field(default_factory=list)


class _Encoder:
    """One side's position over z3 terms, for one letter, along its coverage tree (module docstring)."""

    def __init__(self, joint: Joint, side_index: int, layout: _Layout, pre: list[Any], builder: Builder) -> None:
        self.joint, self.side_index = joint, side_index
        self.side: CounterModel = joint.sides[side_index]
        self.layout, self.pre, self.builder = layout, pre, builder
        arith = self.side.arith
        assert isinstance(arith, Fixed)
        self.arith = arith
        self.r = Rounding(arith, builder)

    def var(self, key: Key) -> Any:
        return self.pre[self.layout.index[key]]

    def encode(self, letter: str, roots: dict[int, _Node]) -> _Side:
        """The position reading ``letter``, along its trees (one per phase: ``roots``)."""
        found = _Side()
        side = self.side
        z, first = encode_until_attention(side, self.r, constant(side.embedding(letter)))
        if first is None:
            readout, stream = encode_observation(side, self.builder, self.r, z)
            found.leaves.append(_Leaf(z3.BoolVal(True), {}, SymObservation(readout, stream)))
            return found
        assert roots, f"no computation of letter {letter!r} was explored"
        if side.period == 1:
            self.node(roots[0], z, z3.BoolVal(True), {}, found, 0)
            return found
        position = self.var(("i",)) + (1 if side.bos is not None else 0)  # the new position's stream index
        for phase in range(side.period):
            guard = position % side.period == phase
            self.node(roots[phase], z, guard, {}, found, phase)
        return found

    def node(self, node: _Node, z: SymVector, guard: Any, post: dict[Key, Any], found: _Side, phase: int = 0) -> None:
        """The position from ``node``'s block on (``z``: the stream entering it, symbolic): the heads that need
        concrete reads from ``node.reads``, the others (``average``) from symbolic values, block after block,
        until the next block that branches: one child per reads seen there, and an escape for any other."""
        side, b, r = self.side, self.builder, self.r
        post = dict(post)
        keys = self.var(("i",)) + (1 if side.bos is not None else 0) + 1  # positions, the new one included
        block, given = node.block, iter(node.reads)
        while True:
            read = encode_read(side, r, block, z)
            outputs = []
            for k in side.by_layer[block]:
                head = side.slots[k].head
                if side.slots[k].kind == AVERAGE:
                    outputs.append(self.average(k, encode_affine(head.value, read, head.value_bias, r), post, keys))
                else:
                    q, key, value = next(given)
                    outputs.append(self.head(k, q, key, value, post, keys))
            z, following = encode_from(side, r, block, z, outputs)
            if following is None:
                readout, final = encode_observation(side, b, r, z)
                found.leaves.append(_Leaf(guard, post, SymObservation(readout, final)))
                return
            if following in side_branches(side):
                break
            block = following
        read = encode_read(side, r, following, z)
        symbolic = tuple(
            _rotated(
                head,
                phase,
                tuple(
                    encode_affine(matrix, read, bias, r)
                    for matrix, bias in (
                        (head.query, head.query_bias),
                        (head.key, head.key_bias),
                        (head.value, head.value_bias),
                    )
                ),
                side,
                r,
            )
            for head in (side.slots[k].head for k in side.by_layer[following] if side.slots[k].kind != AVERAGE)
        )
        others = []
        for reads, child in node.children.items():
            equal = z3.And(
                [
                    b.eq(x, Sym.const(v))
                    for sym_vectors, vectors in zip(symbolic, reads)
                    for sym_vector, vector in zip(sym_vectors, vectors)
                    for x, v in zip(sym_vector, vector)
                ]
            )
            others.append(equal)
            self.node(child, z, z3.And(guard, equal), post, found, phase)
        found.escapes.append(
            _Escape(z3.And(guard, z3.Not(z3.Or(others))) if others else guard, symbolic, node, following)
        )

    def head(self, k: int, q: Vector, key: Vector, value: Vector, post: dict[Key, Any], keys: Any) -> SymVector:
        """A ``weighted`` or ``terms`` head's output at the new position (symbolic) from its concrete reads,
        recording its counters' updates in ``post``."""
        side, arith, s = self.side, self.arith, self.side_index
        slot = side.slots[k]
        mantissas = [arith.mantissa(v) for v in value]
        if slot.kind == WINDOW:
            return self.grid(self.window(k, q, side.class_id(k, (key, value)), post))
        if slot.kind == WEIGHTED:
            kappa = side.class_id(k, key)
            count: dict[int, Any] = {}
            sums: dict[int, list[Any]] = {}
            for other in range(len(side.classes[k])):
                n = self.var(("kn", s, k, other))
                vector = [self.var(("ks", s, k, other, c)) for c in range(len(mantissas))]
                if other == kappa:
                    n = n + 1
                    vector = [v + m for v, m in zip(vector, mantissas)]
                    post[("kn", s, k, other)] = n
                    for c, v in enumerate(vector):
                        post[("ks", s, k, other, c)] = v
                count[other], sums[other] = n, vector
            return self.grid(self.weighted(k, q, kappa, count, sums))
        cls = side.class_id(k, (key, value))
        counts = {}
        for other in range(len(side.classes[k])):
            n = self.var(("cn", s, k, other))
            if other == cls:
                n = n + 1
                post[("cn", s, k, other)] = n
            counts[other] = n
        return self.grid(self.terms(k, q, cls, counts))

    def average(self, k: int, value: SymVector, post: dict[Key, Any], keys: Any) -> SymVector:
        """An ``average`` head: its sums grow by the (possibly symbolic) value; output ⌊S/n⌋ per coordinate."""
        arith, s = self.arith, self.side_index
        lo, hi = arith.min_mantissa, arith.max_mantissa
        out = []
        for c, v in enumerate(value):
            total = self.var(("sum", s, k, c)) + to_z3(v.scaled_num(arith.scale))
            post[("sum", s, k, c)] = total
            out.append(rounded_quotient(self.builder, arith, total, keys, lo, hi))
        return self.grid(out)

    def grid(self, mantissas: list[Any]) -> SymVector:
        arith = self.arith
        return tuple(
            Sym(m, arith.scale, Fraction(arith.min_mantissa, arith.scale), Fraction(arith.max_mantissa, arith.scale))
            for m in mantissas
        )

    def weighted(self, k: int, q: Vector, own: int, count: dict[int, Any], sums: dict[int, list[Any]]) -> list[Any]:
        """Hardmax or max-stabilised softmax (exact-sums) over per-key counts and sums: split on the top score
        level present (the new position's own key is present, so no level below its score is the top)."""
        side, arith = self.side, self.arith
        scores = side.scores(k, q)
        levels = sorted({s for s in scores if s >= scores[own]}, reverse=True)
        hardmax = side.slots[k].head.scoring == "hardmax"
        width = side.slots[k].head.value_dim
        cases: list[tuple[Any, Any, list[Any]]] = []  # (condition, divisor, numerators)
        for level in levels:
            above = [kappa for kappa, s in enumerate(scores) if s > level]
            at = [kappa for kappa, s in enumerate(scores) if s == level]
            condition = z3.And(z3.Or([count[kappa] >= 1 for kappa in at]), *[count[kappa] == 0 for kappa in above])
            if hardmax:
                weights = {kappa: 1 for kappa in at}
            else:
                weights = {
                    kappa: exp_mantissa(arith.mantissa(level - s), arith.frac)
                    for kappa, s in enumerate(scores)
                    if s <= level
                }
                weights = {kappa: w for kappa, w in weights.items() if w}
            divisor = z3.Sum([w * count[kappa] for kappa, w in weights.items()])
            numerators = [z3.Sum([w * sums[kappa][c] for kappa, w in weights.items()]) for c in range(width)]
            cases.append((condition, divisor, numerators))
        return self.top_level_quotients(cases, width)

    def window(self, k: int, q: Vector, own: int, post: dict[Key, Any]) -> list[Any]:
        """A ``window`` head (module docstring, "Positions"): the groups at distance 0, 1..R and beyond, their
        top score level present, and the shifted window and far counts recorded in ``post``."""
        side, s = self.side, self.side_index
        reach, classes = side.reach[k], side.classes[k]
        scores = side.window_scores(k, side._intern(q))
        values = [[self.arith.mantissa(v) for v in value] for _, value in classes]
        one = z3.IntVal(1)
        groups: list[tuple[int, Any, list[Any]]] = [(scores[own][0], one, [z3.IntVal(v) for v in values[own]])]
        for cls in range(len(classes)):
            for m in range(1, reach + 1):
                x = self.var(("win", s, k, m, cls))
                groups.append((scores[cls][m], x, [v * x for v in values[cls]]))
            n = self.var(("far", s, k, cls))
            groups.append((scores[cls][reach + 1], n, [v * n for v in values[cls]]))
        for cls in range(len(classes)):
            if reach == 0:
                post[("far", s, k, cls)] = self.var(("far", s, k, cls)) + (1 if cls == own else 0)
                continue
            post[("win", s, k, 1, cls)] = z3.IntVal(1 if cls == own else 0)
            for m in range(2, reach + 1):
                post[("win", s, k, m, cls)] = self.var(("win", s, k, m - 1, cls))
            post[("far", s, k, cls)] = self.var(("far", s, k, cls)) + self.var(("win", s, k, reach, cls))
        return self.grouped(k, groups, scores[own][0])

    def grouped(self, k: int, groups: list[tuple[int, Any, list[Any]]], own: int) -> list[Any]:
        """Hardmax or max-stabilised softmax over groups (score mantissa, count, value sums): split on the top
        score level present (the current key's group is present, so no level below its score is the top)."""
        arith = self.arith
        hardmax = self.side.slots[k].head.scoring == "hardmax"
        width = self.side.slots[k].head.value_dim
        levels = sorted({score for score, _, _ in groups if score >= own}, reverse=True)
        cases: list[tuple[Any, Any, list[Any]]] = []
        for level in levels:
            above = [n for score, n, _ in groups if score > level]
            at = [n for score, n, _ in groups if score == level]
            condition = z3.And(z3.Or([n >= 1 for n in at]), *[n == 0 for n in above])
            if hardmax:
                weighted = [(1, n, sums) for score, n, sums in groups if score == level]
            else:
                weighted = [
                    (exp_mantissa(level - score, arith.frac), n, sums) for score, n, sums in groups if score <= level
                ]
                weighted = [(w, n, sums) for w, n, sums in weighted if w]
            divisor = z3.Sum([w * n for w, n, _ in weighted])
            numerators = [z3.Sum([w * sums[c] for w, _, sums in weighted]) for c in range(width)]
            cases.append((condition, divisor, numerators))
        return self.top_level_quotients(cases, width)

    def top_level_quotients(self, cases: list[tuple[Any, Any, list[Any]]], width: int) -> list[Any]:
        """Per value component c, round(numerator_c / divisor) of the first case (condition, divisor, numerators)
        whose condition holds, the last case when none does: the cases are the score levels, highest first."""
        arith = self.arith
        out = []
        for c in range(width):
            divisor, numerator = cases[-1][1], cases[-1][2][c]
            for condition, d, n in reversed(cases[:-1]):
                divisor, numerator = z3.If(condition, d, divisor), z3.If(condition, n[c], numerator)
            out.append(
                rounded_quotient(self.builder, arith, numerator, divisor, arith.min_mantissa, arith.max_mantissa)
            )
        return out

    def terms(self, k: int, q: Vector, own: int, counts: dict[int, Any]) -> list[Any]:
        """Yang et al.'s rounded-terms softmax over per-class counts: round(Σ n·round(e^s·v) / Σ n·round(e^s)),
        the uniform average when every present class has round(e^s) = 0."""
        side, arith = self.side, self.arith
        scores = side.scores(k, q)
        scale = arith.scale
        classes = side.classes[k]
        width = side.slots[k].head.value_dim
        exps = {c: arith.mantissa(side.rounded_term(scores[c], Fraction(1))) for c in counts}
        positive = [c for c in counts if exps[c] > 0]
        divisor = z3.Sum([exps[c] * counts[c] for c in positive]) if positive else z3.IntVal(0)
        total = z3.Sum(list(counts.values()))
        out = []
        for coordinate in range(width):
            numerator = z3.Sum(
                [arith.mantissa(side.rounded_term(scores[c], classes[c][1][coordinate])) * counts[c] for c in counts]
            )
            uniform_numerator = z3.Sum([arith.mantissa(classes[c][1][coordinate]) * counts[c] for c in counts])
            lo, hi = arith.min_mantissa, arith.max_mantissa
            weighted = rounded_quotient(self.builder, arith, scale * numerator, divisor, lo, hi) if positive else None
            uniform = rounded_quotient(self.builder, arith, uniform_numerator, total, lo, hi)
            out.append(uniform if weighted is None else z3.If(divisor >= 1, weighted, uniform))
        return out


# ---------------------------------------------------------------- the induction


def _unsupported(joint: Joint) -> str:
    for side in joint.sides:
        arith = side.arith
        if not isinstance(arith, Fixed):
            return "exact arithmetic: a head's average is not on a grid"
        if arith.attention_rounding == "per-probability":
            return "per-probability rounding: a floored weight ⌊w/W⌋ times a count is a product of two unknowns"
        if side.model.positional_encoding is not None:
            return (
                "the model has an absolute positional encoding: its table ends, so no statement about every "
                "length can be made"
            )
    return ""


class _Asker:
    """The induction's z3 queries, each in its own session under the deadline: counted, timed, and (``record``)
    kept as SMT-LIB text for a certificate; ``round`` holds the current refinement round's queries."""

    def __init__(self, result: InductionResult, deadline: Deadline, cancelled: Callable[[], bool], record: bool):
        self.result, self.deadline, self.cancelled, self.record = result, deadline, cancelled, record
        self.round: list[dict[str, Any]] = []

    def __call__(self, assertions: list[Any], name: str) -> tuple[str, Any]:
        if self.deadline.expired() or self.cancelled():
            return "unknown", "timeout"
        session = Session(self.deadline, seed=None, cancelled=self.cancelled, tactics=TACTICS_SMT)
        session.add(*assertions)
        answer = session.check()
        self.result.solver_seconds += session.statistics.seconds
        self.result.queries += 1
        if self.record:
            self.round.append(
                {
                    "name": name,
                    "smt2": session.smt2(),  # the same text in every process (audit)
                    "answer": answer,
                    "no_bit_vector_form": UNBOUNDED,
                }
            )
        if answer == SAT:
            return SAT, session.model()
        return (UNSAT, None) if answer == UNSAT else (UNKNOWN, session.reason)


def _stream_roots(joint: Joint, alphabet: Sequence[str]) -> list[dict[Root, _Node]]:
    """Per side, the coverage trees of the stream classes the exploration met, one root per (letter, phase)."""
    roots: list[dict[Root, _Node]] = []
    for side in joint.sides:
        trees: dict[Root, _Node] = {}
        for path in _every_phase(side, side.seen_paths()):
            if path[0] in alphabet:
                _insert(trees, side, path)
        roots.append(trees)
    return roots


def _extend_coverage(encoded: dict[str, Any], ask: _Asker, assumptions: list[Any]) -> tuple[bool, str]:
    """Coverage: can a state of Inv send a position's stream outside the known classes of the next block? The
    first such class found (evaluated from z3's model) joins its tree. (changed, why undecided)."""
    for letter, sides in encoded.items():
        for encoded_side in sides:
            for escape in encoded_side.escapes:
                answer, model = ask(
                    [*assumptions, escape.guard], f"coverage, letter {letter!r}, block {escape.node.block}"
                )
                if answer == "unknown":
                    return False, f"z3 could not decide the coverage for letter {letter!r} ({model})"
                if answer == "sat":
                    reads = tuple(
                        tuple(tuple(_evaluate_sym(model, x) for x in vector) for vector in vectors)
                        for vectors in escape.reads
                    )
                    escape.node.children[reads] = _Node(escape.block, reads)
                    return True, ""
    return False, ""


@dataclass
class _Round:
    """One refinement round's encoding: the layout, the pre-state variables, the inferred relations and bounds,
    the encoded letters and the invariant with its side constraints."""

    layout: _Layout
    pre: list[Any]
    relations: list[tuple[int, ...]]
    bounds: list[_Bound]
    encoded: dict[str, Any]
    builder: Builder
    invariant: list[Any]
    side_constraints: list[Any]


def _strengthen(joint: Joint, state: _Round, ask: _Asker, start: int, points: list[dict[Key, int]]) -> tuple[bool, str]:
    """Step, Inv ∧ T ⇒ Inv': a counterexample's successor drops the bounds it violates and joins the points (so
    the next round's relations lose exactly the equalities it violates). (changed, why undecided)."""
    for letter, sides in state.encoded.items():
        post, cover = _post(joint, state.layout, state.pre, letter, sides)
        claim = _invariant(state.layout, post, state.relations, state.bounds, start)
        answer, model = ask(
            [*state.invariant, *state.side_constraints, *cover, z3.Not(z3.And(claim))],
            f"induction step, letter {letter!r}",
        )
        if answer == "unknown":
            return False, f"z3 could not decide the step for letter {letter!r} ({model})"
        if answer == "sat":
            successor = {key: _evaluate_int(model, term) for key, term in zip(state.layout.keys, post)}
            state.bounds[:] = [b for b in state.bounds if b.holds(successor)]
            points.append(successor)
            return True, ""
    return False, ""


def _check_decisions(
    joint: Joint,
    goal: CountingGoal,
    state: _Round,
    ask: _Asker,
    encode_violation: Callable[[Builder, SymObservation, Any], Any],
    start: int,
    result: InductionResult,
) -> str:
    """Decisions: Inv ∧ T ∧ (the prefix of length i + 1 is constrained) ⇒ no violation. '' when none is
    possible; else why undecided, or (``result.status`` FAILED) the state in which the step fails."""
    few, start_from = goal.ever_checked()
    layout, pre, builder = state.layout, state.pre, state.builder
    for letter, sides in state.encoded.items():
        if ask.deadline.expired() or ask.cancelled():
            return "timeout while checking the decisions"
        _, cover = _post(joint, layout, pre, letter, sides)
        observations = [_observation(builder, encoded_side) for encoded_side in sides]
        theirs: Any = None
        if joint.kind == MACHINE:
            counts = [pre[layout.index[("machine", j)]] for j in range(len(joint.machine.names))]
            _, theirs = joint.machine.encode_step(counts, letter, pre[0])
        elif joint.kind == MODEL:
            theirs = observations[1]
        length = pre[0] + 1
        constrained = z3.Or(
            [length == p for p in few if p >= 1] + ([length >= start_from] if start_from is not None else [])
        )
        violation = encode_violation(builder, observations[0], theirs)
        answer, model = ask(
            [*state.invariant, *builder.assertions, *cover, constrained, violation], f"decisions, letter {letter!r}"
        )
        if answer == "unknown":
            return f"z3 could not decide the decisions for letter {letter!r} ({model})"
        if answer == "sat":
            values = [_evaluate_int(model, v) for v in pre]
            result.status = FAILED
            shown = ", ".join(f"{n} = {v}" for n, v in zip(layout.names, values))
            result.counterexample = {"state": dict(zip(layout.names, values)), "letter": letter}
            return (
                f"the induction step fails: in a state that satisfies the invariant ({shown}), reading {letter!r} "
                f"at {word_position(values[0])} violates the property (the state may be unreachable)"
            )
    return ""


class _RoundFailed(Exception):
    """A round's encoding could not be made: why, and what of the round was built (for the result's invariant)."""

    def __init__(self, detail: str, layout: _Layout, relations: list[tuple[int, ...]]):
        super().__init__(detail)
        self.detail, self.layout, self.relations = detail, layout, relations


def _encode_round(
    joint: Joint,
    roots: list[dict[Root, _Node]],
    points: list[dict[Key, int]],
    bounds: list[_Bound],
    start: int,
    deadline: Deadline,
) -> _Round:
    """A round's encoding from the current trees, points and bounds (``_RoundFailed`` says why it could not)."""
    _register(joint, roots)
    layout = _Layout(joint)
    try:
        relations = null_space([layout.point(p) for p in points], deadline)
    except DeadlineExpired:
        raise _RoundFailed(
            "timeout while inferring the invariant (the affine relations of the explored states)", layout, []
        ) from None
    pre = [z3.Int(f"p{k}") for k in range(len(layout.keys))]
    builder = Builder(deadline=deadline)  # a deep model's encoding alone may outlive the budget
    try:
        encoded = _encode_letters(joint, layout, pre, builder, roots)
    except NotEncodable as exc:
        raise _RoundFailed(f"not encodable: {exc}", layout, relations) from None
    except DeadlineExpired:
        raise _RoundFailed("timeout while encoding the induction step", layout, relations) from None
    invariant = _invariant(layout, pre, relations, bounds, start)
    return _Round(layout, pre, relations, bounds, encoded, builder, invariant, list(builder.assertions))


def prove_all_lengths(
    joint: Joint,
    goal: CountingGoal,
    violates: Callable[[Any, Any], bool],
    visited: list[tuple[int, tuple[Any, ...], tuple[int, ...]]],
    *,
    encode_violation: Callable[[Builder, SymObservation, Any], Any],
    deadline: Deadline,
    cancelled: Callable[[], bool] = lambda: False,
    record: bool = False,
    report: Callable[..., None] = lambda phase, *progress: None,
    start: int = 0,
) -> InductionResult:
    """Base, coverage, step and decisions (module docstring); ``visited``: every state the exact exploration
    reached. ``record``: keep the proof's queries as SMT-LIB text (``InductionResult.asked``) for a
    certificate. ``start`` (module docstring, "From a length on"): the invariant is inferred from and claimed
    for the states of length ≥ start only; ``visited`` must hold every reachable state of length ``start``
    and the caller must have decided every length up to ``start`` otherwise."""
    result = InductionResult(UNDECIDED, start=start)
    reason = _unsupported(joint)
    if reason:
        result.detail = f"not encodable: {reason}"
        return result
    if not visited:
        result.detail = "no reachable state to infer an invariant from"
        return result
    roots = _stream_roots(joint, goal.alphabet)
    points: list[dict[Key, int]] = [
        _state_values(joint, n, state, letters) for n, state, letters in visited if n >= start
    ]
    bounds = _candidate_bounds(joint, goal, roots, points)
    began = time.perf_counter()
    ask = _Asker(result, deadline, cancelled, record)
    while True:
        if deadline.expired() or cancelled():
            result.detail = "timeout during the induction step (refining the invariant)"
            return _finish(result, None, [], bounds, roots, began)
        if result.rounds >= MAX_ROUNDS:
            result.detail = (
                f"no inductive invariant after {MAX_ROUNDS} refinement rounds ({_classes_text(roots)} stream classes)"
            )
            return _finish(result, None, [], bounds, roots, began)
        try:
            state = _encode_round(joint, roots, points, bounds, start, deadline)
        except _RoundFailed as failed:
            result.detail = failed.detail
            return _finish(result, failed.layout, failed.relations, bounds, roots, began)
        layout, relations = state.layout, state.relations
        ask.round.clear()
        report(f"induction: round {result.rounds + 1}, {_classes_text(roots)} stream classes")
        changed, undecided = _extend_coverage(state.encoded, ask, [*state.invariant, *state.side_constraints])
        if not changed and not undecided:
            changed, undecided = _strengthen(joint, state, ask, start, points)
            bounds = state.bounds
        if undecided:
            result.detail = undecided
            return _finish(result, layout, relations, bounds, roots, began)
        if not changed:
            break
        result.rounds += 1
    result.detail = _check_decisions(joint, goal, state, ask, encode_violation, start, result)
    if not result.detail:
        result.status = PROVED
        result.asked = list(ask.round)
    return _finish(result, layout, relations, bounds, roots, began)


def _every_phase(side: CounterModel, paths: list[Any]) -> list[Any]:
    """The explored paths, and for every letter and phase none of them shows the letter's first stream at that
    phase (the stream entering the first attention block depends on the letter only): every tree has a root."""
    found = list(paths)
    seen = {(letter, phase) for letter, _, phase in paths}
    first: dict[str, Any] = {}
    for letter, entering, _ in paths:
        if entering:
            first.setdefault(letter, entering[:1])
    for letter, entering in first.items():
        for phase in range(side.period):
            if (letter, phase) not in seen:
                found.append((letter, entering, phase))
    return found


def _rotated(head: Any, phase: int, qkv: tuple[Any, ...], side: CounterModel, r: Rounding) -> tuple[Any, ...]:
    """RoPE: the symbolic query and key rotated at ``phase`` (the interpreter's ``rotate``: one rounding per
    coordinate of the rotation, an affine map with the table's entries); other heads unchanged."""
    if head.positional != "rope" or head.rope is None or head.scoring == "uniform":
        return qkv
    q, k, v = qkv
    matrix = _rotation_matrix(head, phase, len(q), side)
    zero = tuple(Fraction(0) for _ in q)
    rows = tuple(tuple(row) for row in matrix)
    return encode_affine(rows, q, zero, r), encode_affine(rows, k, zero, r), v


def _rotation_matrix(head: Any, phase: int, width: int, side: CounterModel) -> list[list[Fraction]]:
    arith = side.arith
    assert isinstance(arith, Fixed) and head.rope is not None
    matrix = [[Fraction(int(a == b)) for b in range(width)] for a in range(width)]
    for frequency, (a, b) in zip(head.rope.frequencies, head.rope.pairs(width)):
        c, s = rotation(arith, frequency, phase)
        matrix[a] = [Fraction(0)] * width
        matrix[b] = [Fraction(0)] * width
        matrix[a][a], matrix[a][b] = c, -s
        matrix[b][a], matrix[b][b] = s, c
    return matrix


def _register(joint: Joint, roots: list[dict[Root, _Node]]) -> None:
    """Give every class of every stream in the coverage trees its id, so that the layout has its counters."""

    def visit(side: CounterModel, node: _Node) -> None:
        concrete = [k for k in side.by_layer[node.block] if side.slots[k].kind != AVERAGE]
        for k, (_, key, value) in zip(concrete, node.reads):
            side.class_id(k, key if side.slots[k].kind == WEIGHTED else (key, value))
        for child in node.children.values():
            visit(side, child)

    for side, trees in zip(joint.sides, roots):
        for root in trees.values():
            visit(side, root)


def side_branches(side: CounterModel) -> list[int]:
    """The attention blocks where a position's computation branches on its concrete stream: the first (its
    stream is the letter's) and every block with a head that needs a concrete key (``weighted``, ``terms``)."""
    blocks = sorted(side.by_layer)
    return blocks[:1] + [b for b in blocks[1:] if any(side.slots[k].kind != AVERAGE for k in side.by_layer[b])]


def _classes_text(roots: list[dict[Root, _Node]]) -> str:
    return " + ".join(str(_classes(trees)) for trees in roots)


def _encode_letters(
    joint: Joint, layout: _Layout, pre: list[Any], builder: Builder, roots: list[dict[Root, _Node]]
) -> dict[str, list[_Side]]:
    encoded: dict[str, list[_Side]] = {}
    for letter in joint.goal.alphabet:
        encoded[letter] = [
            _Encoder(joint, s, layout, pre, builder).encode(
                letter, {phase: node for (a, phase), node in roots[s].items() if a == letter}
            )
            for s in range(len(joint.sides))
        ]
    return encoded


def _post(
    joint: Joint, layout: _Layout, pre: list[Any], letter: str, sides: list[_Side]
) -> tuple[list[Any], list[Any]]:
    """(the successor's variables as terms, the coverage facts: some leaf's guard holds on each side)."""
    post = list(pre)
    post[0] = pre[0] + 1
    cover = []
    for side in sides:
        cover.append(z3.Or([leaf.guard for leaf in side.leaves]))
        changed = {key for leaf in side.leaves for key in leaf.post}
        for key in changed:
            term = pre[layout.index[key]]
            for leaf in reversed(side.leaves):
                term = z3.If(leaf.guard, leaf.post.get(key, pre[layout.index[key]]), term)
            post[layout.index[key]] = term
    if joint.kind == MACHINE:
        counts = [pre[layout.index[("machine", j)]] for j in range(len(joint.machine.names))]
        new, _ = joint.machine.encode_step(counts, letter, pre[0])
        for j, term in enumerate(new):
            post[layout.index[("machine", j)]] = term
    a = joint.goal.alphabet.index(letter)
    post[layout.index[("letter", a)]] = pre[layout.index[("letter", a)]] + 1
    return post, cover


def _observation(builder: Builder, side: _Side) -> SymObservation:
    """The side's observation at the new position: the leaves' observations selected by their guards."""
    leaves = side.leaves
    if len(leaves) == 1:
        return leaves[0].observation
    readout = builder.select(
        [(leaf.guard, leaf.observation.readout) for leaf in leaves[:-1]], leaves[-1].observation.readout
    )
    width = len(leaves[0].observation.stream)
    stream = tuple(
        builder.select(
            [(leaf.guard, leaf.observation.stream[c]) for leaf in leaves[:-1]], leaves[-1].observation.stream[c]
        )
        for c in range(width)
    )
    return SymObservation(readout, stream)


def _invariant(
    layout: _Layout, values: list[Any], relations: list[tuple[int, ...]], bounds: list[_Bound], start: int = 0
) -> list[Any]:
    facts = [
        z3.Sum([z3.IntVal(r[0]), *(c * v for c, v in zip(r[1:], values) if c)]) == 0 for r in relations if any(r[1:])
    ]
    facts += [b.term(layout, values) for b in bounds]
    return facts + [values[0] >= start]


def _candidate_bounds(
    joint: Joint, goal: CountingGoal, roots: list[dict[Root, _Node]], points: list[dict[Key, int]]
) -> list[_Bound]:
    """Counts between 0 and the positions, sums between the least and the greatest value per position (over the
    classes seen), kept only where they hold at every explored state."""
    bounds: list[_Bound] = []
    i: Key = ("i",)
    for a, symbol in enumerate(goal.alphabet):
        key: Key = ("letter", a)
        bounds += [_Bound(((key, 1),), 0, f"|w|_{symbol} >= 0"), _Bound(((i, 1), (key, -1)), 0, f"|w|_{symbol} <= i")]
    if joint.kind == MACHINE:
        for j, name in enumerate(joint.machine.names):
            key = ("machine", j)
            bounds += [_Bound(((key, 1),), 0, f"{name} >= 0"), _Bound(((i, 1), (key, -1)), 0, f"{name} <= i")]
            bounds.append(_Bound(((key, -1),), 1, f"{name} <= 1"))  # a window's boolean (kept where it holds)
    for s, side in enumerate(joint.sides):
        bos = 1 if side.bos is not None else 0
        prefix = "" if s == 0 else "other."
        for k, slot in enumerate(side.slots):
            values = _values_seen(side, k)
            if slot.kind == AVERAGE:
                start = points[0]
                for c in range(slot.head.value_dim):
                    key = ("sum", s, k, c)
                    column = [v[c] for v in values.get(None, [])]
                    if not column:
                        continue
                    lo, hi, s0 = min(column), max(column), start.get(key, 0)
                    name = f"{prefix}S[{slot}[{c}]]"
                    bounds.append(_Bound(((key, 1), (i, -lo)), -s0, f"{name} >= {_line(s0, lo)}"))
                    bounds.append(_Bound(((key, -1), (i, hi)), s0, f"{name} <= {_line(s0, hi)}"))
            elif slot.kind == WEIGHTED:
                for kappa in range(len(side.classes[k])):
                    n: Key = ("kn", s, k, kappa)
                    name = f"{prefix}n[{slot}][key {kappa}]"
                    bounds += [
                        _Bound(((n, 1),), 0, f"{name} >= 0"),
                        _Bound(((i, 1), (n, -1)), bos, f"{name} <= i + {bos}"),
                    ]
                    by_key = values.get(kappa, [])
                    for c in range(slot.head.value_dim):
                        if not by_key:
                            continue
                        lo, hi = min(v[c] for v in by_key), max(v[c] for v in by_key)
                        key = ("ks", s, k, kappa, c)
                        label = f"{prefix}S[{slot}][key {kappa}][{c}]"
                        bounds.append(_Bound(((key, 1), (n, -lo)), 0, f"{label} >= {lo}·{name}"))
                        bounds.append(_Bound(((key, -1), (n, hi)), 0, f"{label} <= {hi}·{name}"))
            elif slot.kind == WINDOW:
                bounds += _window_bounds(side, s, k, prefix, bos)
            else:
                for cls in range(len(side.classes[k])):
                    n = ("cn", s, k, cls)
                    name = f"{prefix}n[{slot}][class {cls}]"
                    bounds += [
                        _Bound(((n, 1),), 0, f"{name} >= 0"),
                        _Bound(((i, 1), (n, -1)), bos, f"{name} <= i + {bos}"),
                    ]
    return [b for b in bounds if all(b.holds(p) for p in points)]


def _window_bounds(side: CounterModel, s: int, k: int, prefix: str, bos: int) -> list[_Bound]:
    """A window's one-hot variables in [0, 1] and at most one class per distance; far counts in [0, i + BOS]."""
    i: Key = ("i",)
    slot, classes, found = side.slots[k], range(len(side.classes[k])), []
    for m in range(1, side.reach[k] + 1):
        keys = [("win", s, k, m, cls) for cls in classes]
        for key in keys:
            found += [_Bound(((key, 1),), 0, f"{prefix}win[{slot}][{m}][{key[-1]}] >= 0")]
        found.append(_Bound(tuple((key, -1) for key in keys), 1, f"{prefix}Σ win[{slot}][{m}] <= 1"))
    for cls in classes:
        n: Key = ("far", s, k, cls)
        name = f"{prefix}far[{slot}][class {cls}]"
        found += [_Bound(((n, 1),), 0, f"{name} >= 0"), _Bound(((i, 1), (n, -1)), bos, f"{name} <= i + {bos}")]
    return found


def _line(constant: int, slope: int) -> str:
    if slope == 0:
        return str(constant)
    step = "i" if abs(slope) == 1 else f"{abs(slope)}·i"
    if constant == 0:
        return step if slope > 0 else f"-{step}"
    return f"{constant} {'+' if slope > 0 else '-'} {step}"


def _values_seen(side: CounterModel, k: int) -> dict[Any, list[tuple[int, ...]]]:
    """The value mantissas slot k has seen at word positions: by key class (``weighted``), else under None."""
    arith = side.arith
    assert isinstance(arith, Fixed)
    slot = side.slots[k]
    layer = side.model.blocks[slot.layer].attention
    assert layer is not None
    found: dict[Any, list[tuple[int, ...]]] = {}
    position = side.by_layer[slot.layer].index(k)
    for z in side.streams.get(slot.layer, ()):
        _, key, value = side.head_vectors(slot.layer, layer, z)[position]
        group = side.class_ids[k].get(key) if slot.kind == WEIGHTED else None
        found.setdefault(group, []).append(tuple(arith.mantissa(v) for v in value))
    return found


def _evaluate_int(model: Any, term: Any) -> int:
    return int(model.eval(to_z3(term), model_completion=True).as_long())


def _evaluate_sym(model: Any, value: Sym) -> Fraction:
    return Fraction(_evaluate_int(model, value.num), value.den)


def _finish(
    result: InductionResult,
    layout: _Layout | None,
    relations: list[tuple[int, ...]],
    bounds: list[_Bound],
    roots: list[dict[Root, _Node]],
    began: float,
) -> InductionResult:
    names = layout.names if layout is not None else []
    result.invariant = [_relation_text(r, names) for r in relations if any(r[1:])] + [b.text for b in bounds]
    if result.start:
        result.invariant.append(f"i >= {result.start}")
    result.solver_seconds = round(result.solver_seconds, 4)
    result.classes = sum(_classes(trees) for trees in roots)
    result.variables = len(names)
    return result


def _relation_text(relation: tuple[int, ...], names: list[str]) -> str:
    parts = [f"{r}·{n}" if abs(r) != 1 else (n if r == 1 else f"-{n}") for r, n in zip(relation[1:], names) if r]
    text = " + ".join(parts).replace("+ -", "- ")
    return f"{text} = {-relation[0]}"


__all__ = ["FAILED", "PROVED", "UNDECIDED", "InductionResult", "null_space", "prove_all_lengths"]

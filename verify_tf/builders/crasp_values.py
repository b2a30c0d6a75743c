"""The symbolic values of the C-RASP compiler: what a program's booleans and counts become before they are laid
out in a transformer (plain frozen data, shared by ``crasp_compiler`` and ``crasp_positional``).

* A **form** is an affine combination of stream dimensions that takes the values 0/1 and is 0 at BOS: how a
  boolean lives in the residual stream.
* A **linear** count L = Σ c·#form + k; an **atom** L ≥ 0.
* Booleans before lowering are in negation normal form: letter tables, atoms, conjunctions, disjunctions, and
  booleans already in the stream (``Materialized``: copied from an earlier position or read from a positional
  head).
* Counts before normalisation: linear leaves, ``min``/``max`` and conditionals.
* Stream nodes: what one stream dimension holds (an input indicator, a head coordinate, a feed-forward unit).
"""

from __future__ import annotations

from dataclasses import dataclass

NodeId = int


@dataclass(frozen=True, order=True)
class Form:
    """An affine combination Σ coeff·z[node] + const of stream values, taking values 0/1 (0 at BOS)."""

    terms: tuple[tuple[NodeId, int], ...]
    const: int = 0

    @staticmethod
    def of(coefficients: dict[NodeId, int], const: int = 0) -> Form:
        return Form(tuple(sorted((n, c) for n, c in coefficients.items() if c != 0)), const)

    def scaled(self, factor: int) -> Form:
        return Form(tuple((n, c * factor) for n, c in self.terms), self.const * factor)

    def plus(self, other: Form) -> Form:
        merged = dict(self.terms)
        for node, c in other.terms:
            merged[node] = merged.get(node, 0) + c
        return Form.of(merged, self.const + other.const)

    @property
    def nodes(self) -> tuple[NodeId, ...]:
        return tuple(n for n, _ in self.terms)


@dataclass(frozen=True, order=True)
class Linear:
    """L = Σ coeff·#form + const: an integer combination of prefix counts of (lowered) booleans."""

    terms: tuple[tuple[Form, int], ...]
    const: int = 0

    @staticmethod
    def of(coefficients: dict[Form, int], const: int = 0) -> Linear:
        return Linear(tuple(sorted((f, c) for f, c in coefficients.items() if c != 0)), const)

    def plus(self, other: Linear) -> Linear:
        merged = dict(self.terms)
        for form, c in other.terms:
            merged[form] = merged.get(form, 0) + c
        return Linear.of(merged, self.const + other.const)

    def negated(self) -> Linear:
        return Linear(tuple((f, -c) for f, c in self.terms), -self.const)

    def shifted(self, amount: int) -> Linear:
        return Linear(self.terms, self.const + amount)


# ---------------------------------------------------------------- booleans before lowering (negation normal form)


@dataclass(frozen=True)
class Table:
    """A depth-0 boolean: the set of letters at which it holds."""

    letters: frozenset[str]


@dataclass(frozen=True)
class Atom:
    """L ≥ 0."""

    linear: Linear


@dataclass(frozen=True)
class Conj:
    items: tuple[BoolValue, ...]


@dataclass(frozen=True)
class Disj:
    items: tuple[BoolValue, ...]


@dataclass(frozen=True)
class Materialized:
    """A boolean that already lives in the stream as ``form`` (0/1, 0 at BOS)."""

    form: Form


BoolValue = Table | Atom | Conj | Disj | Materialized


# ---------------------------------------------------------------- counts before normalisation


@dataclass(frozen=True)
class Leaf:
    linear: Linear


@dataclass(frozen=True)
class Extremum:
    op: str  # "min" | "max"
    left: CountValue
    right: CountValue


@dataclass(frozen=True)
class Choice:
    condition: BoolValue
    if_true: CountValue
    if_false: CountValue


CountValue = Leaf | Extremum | Choice


# ---------------------------------------------------------------- stream nodes


@dataclass(frozen=True)
class InputNode:
    symbol: str | None  # None: the BOS indicator


@dataclass(frozen=True)
class AverageNode:
    """One coordinate of a uniform causal head: ⌊L_i / (i+1)⌋_f."""

    linear: Linear


@dataclass(frozen=True)
class ThresholdNode:
    """[sign·y (− 2^-f if sign < 0) ≥ 0] ∧ all guards ∧ not BOS."""

    average: NodeId
    sign: int
    guards: tuple[Form, ...]


@dataclass(frozen=True)
class GateNode:
    """relu(Σ forms − (r − 1)): the conjunction of r ≥ 2 booleans."""

    forms: tuple[Form, ...]


@dataclass(frozen=True)
class ShiftNode:
    """A copy head's coordinate: the boolean ``form`` at the position ``distance`` ≥ 1 earlier (0 before the
    word starts)."""

    form: Form
    distance: int


@dataclass(frozen=True)
class PeriodicNode:
    """A RoPE head's coordinate: 1 iff the stream position t ≡ ``residue`` (mod ``modulus``) (so 1 at BOS when
    residue = 0)."""

    modulus: int
    residue: int


StreamNode = InputNode | AverageNode | ThresholdNode | GateNode | ShiftNode | PeriodicNode

"""What a C-RASP program's positional predicates need a counter machine to keep: windows, periods, far counts.

A guarded count ``#[g] P`` at position i sums P(j) over the j ≤ i with g(i, j). Every atom of g depends on i
alone, on j alone or on the distance d = i − j alone (``positions.dependence``; anything else is refused), and
from a threshold T on it depends on its variable modulo a period M only (``positions.atom_shape``). So with

* **the window** W = max(1, T_d): the distances d < W are read from the last W − 1 values of P kept in the
  state (and the current one), with g evaluated at the exact pair (i, i − d);
* **the far counts**: every j ≤ i − W has d ≥ T_d, so g(i, j) depends on i, on j's *class* — j itself below
  T_j, else j mod M_g with M_g = lcm(M_j, M_d) — and on (i − j) mod M_d, which the class and i fix. The state
  keeps, per class, how many j ≤ i − W in it have P(j) (``FarClass``); a position leaves the window into its
  class. Classes whose far guard is never true are left out; when none is, there are no far counts;
* **the position** i itself, which every exploration level and the induction's ``i`` already carry: unary
  predicates and the i-atoms are evaluated at i exactly.

Reads of the first letters (``j == 0``, ``j <= 2``) are far classes "at x" (x < T_j), each a count of at most 1.

**Size by formula, before anything is enumerated** (``shape``): the finite part of the state is the window bits
Σ(W_g − 1), and the position's class (below the largest threshold, or modulo the lcm of every period). The
product (T + M) × 2^bits × (1 + far classes) is checked against ``STATE_LIMIT`` (and W, M against their own
limits) from the atoms' coefficients only, so ``j == i - 1000000`` or ``i % 1000003 == 5`` is refused at once,
with the predicate's file:line.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from .ast import GuardedCount, PositionTest, Program, subexpressions
from .positions import (
    PosBool,
    PosCompare,
    PosConstBool,
    PosLogic,
    PosNot,
    Predicate,
    atom_shape,
    atoms,
)

MAX_WINDOW = 64
"""The longest window (distances kept exactly) of one guarded count."""
MAX_MODULUS = 4096
"""The largest period of the positions (lcm of every modulus of every predicate)."""
STATE_LIMIT = 1 << 24
"""The largest (T + M) × 2^window bits × (1 + far classes) of a program."""

__all__ = [
    "CONCRETE",
    "MAX_MODULUS",
    "MAX_WINDOW",
    "STATE_LIMIT",
    "FarClass",
    "GuardShape",
    "PositionShape",
    "TooLarge",
    "shape",
    "truth",
]


class TooLarge(Exception):
    """The program's positional state is past a limit (the message says which, where, and the number)."""


@dataclass(frozen=True)
class FarClass:
    """A class of counted positions j beyond the window: j == ``at`` (a first letter), or j ≥ threshold with
    j ≡ ``residue`` (mod modulus)."""

    at: int | None
    residue: int | None

    def __str__(self) -> str:
        return f"j={self.at}" if self.at is not None else f"j%{self.residue}"


@dataclass(frozen=True)
class GuardShape:
    """One guard's thresholds and periods per variable, its window and its far classes."""

    guard: Predicate
    t_i: int
    m_i: int
    t_j: int
    m_j: int
    t_d: int
    m_d: int
    window: int  # W: distances 0 .. W − 1 read exactly
    modulus: int  # M_g = lcm(M_j, M_d): the residues of the far classes
    far: tuple[FarClass, ...] = ()

    def classes(self) -> tuple[FarClass, ...]:
        return (
            *(FarClass(x, None) for x in range(self.t_j)),
            *(FarClass(None, r) for r in range(self.modulus)),
        )

    def representative(self, cls: FarClass) -> int:
        """A j of the class (for its j-atoms: every j of it gives them the same values)."""
        if cls.at is not None:
            return cls.at
        assert cls.residue is not None
        return self.t_j + (cls.residue - self.t_j) % self.modulus

    def member(self, cls: FarClass, j: Any, ops: Any) -> Any:
        """Whether position j (int or z3 term) is in the class."""
        if cls.at is not None:
            return j == cls.at
        return ops.logic["&&"](j >= self.t_j, j % self.modulus == cls.residue)

    def far_holds(self, i: Any, cls: FarClass, ops: Any) -> Any:
        """g(i, j) for every j of the class with i − j ≥ W (module docstring)."""
        j = self.representative(cls)
        if cls.at is not None:
            d = i - cls.at
        else:
            d = self.window + (i - j - self.window) % self.m_d if self.m_d > 1 else self.window
        return truth(self.guard.body, lambda atom, kind: atom.holds(_at(kind, i, j, d)), ops)

    def holds(self, i: Any, j: Any, ops: Any) -> Any:
        """g(i, j) at an exact pair (window distances)."""
        return truth(self.guard.body, lambda atom, kind: atom.holds((i, j)), ops)


def _at(kind: str, i: Any, j: Any, d: Any) -> tuple[Any, Any]:
    if kind == "i":
        return (i, 0)
    if kind == "j":
        return (0, j)
    if kind == "d":
        return (d, 0)
    return (0, 0)


def truth(body: PosBool, atom_value: Callable[[PosCompare, str], Any], ops: Any) -> Any:
    """A condition's value with each atom's value given (Python bools or z3 terms, through ``ops``)."""
    match body:
        case PosConstBool(value):
            return ops.boolean(value)
        case PosCompare():
            kind, _, _ = atom_shape(body)
            return atom_value(body, kind)
        case PosNot(operand):
            return ops.negate(truth(operand, atom_value, ops))
        case PosLogic(op, left, right):
            return ops.logic[op](truth(left, atom_value, ops), truth(right, atom_value, ops))
    raise TypeError(body)


@dataclass(frozen=True)
class PositionShape:
    """The whole program's positional needs: one ``GuardShape`` per distinct guarded count, the largest
    threshold and the period of the positions, and the formula's size."""

    guards: tuple[tuple[GuardedCount, GuardShape], ...]
    threshold: int
    modulus: int
    window_bits: int
    far_classes: int
    size: int

    @property
    def window(self) -> int:
        return max((g.window for _, g in self.guards), default=0)

    def describe(self) -> str:
        return (
            f"window {self.window}, modulus {self.modulus}, {self.far_classes} far classes: "
            f"(T + M) × 2^{self.window_bits} × (1 + classes) = {self.size} finite parts"
        )


def _variables(predicate: Predicate) -> dict[str, tuple[int, int]]:
    """Per variable (i, j, d): (threshold, period) over the predicate's atoms."""
    found = {"i": (0, 1), "j": (0, 1), "d": (0, 1)}
    for atom in atoms(predicate.body):
        kind, threshold, period = atom_shape(atom)
        if kind == "mixed":
            raise TooLarge(
                f"{_where(predicate)}: {predicate.source()} relates i and j other than through i − j; its counter "
                "machine would need every position"
            )
        if kind in found:
            t, m = found[kind]
            found[kind] = (max(t, threshold), math.lcm(m, period))
    return found


def _where(predicate: Predicate) -> str:
    return predicate.where or f"predicate '{predicate.name}'"


def _check(predicate: Predicate, what: str, value: int, limit: int) -> None:
    if value > limit:
        raise TooLarge(
            f"{_where(predicate)}: {predicate.source()} needs a {what} of {value} positions, past the limit "
            f"{limit}: the counting engine refuses it before exploring"
        )


def shape(program: Program) -> PositionShape:
    """The program's positional state by formula (module docstring); ``TooLarge`` past a limit."""
    guards: list[tuple[GuardedCount, GuardShape]] = []
    threshold, modulus = 0, 1
    seen: set[GuardedCount] = set()
    for definition in program.definitions:
        for node in subexpressions(definition.expr):
            if isinstance(node, PositionTest):
                t, m = _variables(node.predicate)["i"]
                _check(node.predicate, "period", m, MAX_MODULUS)
                threshold, modulus = max(threshold, t), math.lcm(modulus, m)
            if isinstance(node, GuardedCount) and node not in seen:
                seen.add(node)
                v = _variables(node.guard)
                (t_i, m_i), (t_j, m_j), (t_d, m_d) = v["i"], v["j"], v["d"]
                window = max(1, t_d)
                _check(node.guard, "window", window, MAX_WINDOW)
                _check(node.guard, "first-letter window", t_j, MAX_WINDOW)
                period = math.lcm(m_j, m_d)
                for m in (m_i, period):
                    _check(node.guard, "period", m, MAX_MODULUS)
                threshold = max(threshold, t_i, t_j + window)
                modulus = math.lcm(modulus, m_i, period)
                _check(node.guard, "period of the positions", modulus, MAX_MODULUS)
                guards.append((node, GuardShape(node.guard, t_i, m_i, t_j, m_j, t_d, m_d, window, period)))
    if modulus > MAX_MODULUS:
        raise TooLarge(
            f"the positions' period (the lcm of every predicate's moduli) is {modulus}, past the limit {MAX_MODULUS}: "
            "the counting engine refuses it before exploring"
        )
    bits = sum(g.window - 1 for _, g in guards)
    classes = sum(len(g.classes()) for _, g in guards)
    size = (threshold + modulus) * (1 << min(bits, 64)) * (1 + classes)
    if size > STATE_LIMIT:
        raise TooLarge(
            f"the positional state has (T + M) × 2^window bits × (1 + classes) = ({threshold} + {modulus}) × "
            f"2^{bits} × {1 + classes} = {size} finite parts, past the limit {STATE_LIMIT}"
        )
    # the far classes a guard can ever be true on (finitely many cases: every i class × every far class)
    kept = []
    for node, g in guards:
        far = tuple(cls for cls in g.classes() if any(g.far_holds(i, cls, CONCRETE) for i in _i_cases(g, cls)))
        kept.append((node, replace(g, far=far)))
    classes = sum(len(g.far) for _, g in kept)
    return PositionShape(tuple(kept), threshold, modulus, bits, classes, size)


def _i_cases(g: GuardShape, cls: FarClass) -> range:
    """Positions i covering every case of the far guard on ``cls``: i ≥ j + W, i-atoms from their threshold on
    periodic, and (i − j) mod M_d."""
    first = g.representative(cls) + g.window
    return range(first, first + g.t_i + math.lcm(g.m_i, g.m_d, g.modulus) + 1)


@dataclass(frozen=True)
class _Concrete:
    logic: dict[str, Callable[[Any, Any], Any]]

    @staticmethod
    def boolean(value: bool) -> bool:
        return bool(value)

    @staticmethod
    def negate(value: Any) -> bool:
        return not value


CONCRETE = _Concrete({"&&": lambda a, b: a and b, "||": lambda a, b: a or b})

"""Positional predicates of C-RASP: what they say, and the shape the compiler and the engines rely on.

A **unary** predicate u(i) holds or not at a position i; a **binary** one g(i, j) relates the current position
i to a counted position j ≤ i and guards a count: ``#[g] P`` at i is the number of j ≤ i with g(i, j) and P(j)
(Huang et al. 2025's φ and ψ, as the coli-saar/c-rasp interpreter writes them). Positions count from 0.

A predicate is written in the ``.cr`` file itself (docs/crasp.md, "Positions")::

    prev(i, j) = j == i - 1          # binary: i the current position, j the counted one
    pos_even(i) = i % 2 == 0         # unary

Bodies are integer terms over the parameters (constants, ``+``, ``-``, a constant times a term, ``t % m`` for
a constant m ≥ 1, with Python's non-negative remainder), compared with ``== != < <= > >=`` and combined with
``! && ||``.

**Shape.** Every such term is, in one variable x, a·x plus a part bounded by a constant B (a remainder lies in
[0, m)), so an atom comparing it with 0 is constant once x > B/|a|, and the remainders repeat with the least
common multiple M of the moduli: a predicate in one variable is *ultimately periodic*, decided by its values at
x = 0 .. T + M − 1 (``Profile``). An atom of a binary predicate depends on i only, on j only, or on the distance
d = i − j only (when the coefficients of i and j cancel, also inside every remainder); anything else (``j <= i /
2`` cannot be written, but ``2*j <= i`` can) has no relative positional encoding and the compiler refuses it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import ClassVar

__all__ = [
    "COUNTED",
    "CURRENT",
    "MAX_EXTENT",
    "PosBool",
    "PosCompare",
    "PosConst",
    "PosConstBool",
    "PosInt",
    "PosLogic",
    "PosMod",
    "PosNot",
    "PosScale",
    "PosSum",
    "PosVar",
    "Predicate",
    "Profile",
    "atom_shape",
    "atoms",
    "dependence",
    "extent",
    "format_condition",
    "profile",
]

CURRENT, COUNTED = 0, 1
"""Parameter roles: the position where the predicate is evaluated (i), and the counted position (j)."""


class PosInt:
    """An integer term over the positions."""

    level: ClassVar[int] = 9

    def value(self, positions: tuple[int, ...]) -> int:
        raise NotImplementedError


class PosBool:
    """A condition over the positions."""

    def holds(self, positions: tuple[int, ...]) -> bool:
        raise NotImplementedError


@dataclass(frozen=True)
class PosVar(PosInt):
    role: int  # CURRENT or COUNTED

    def value(self, positions: tuple[int, ...]) -> int:
        return positions[self.role]


@dataclass(frozen=True)
class PosConst(PosInt):
    number: int

    def value(self, positions: tuple[int, ...]) -> int:
        return self.number


@dataclass(frozen=True)
class PosSum(PosInt):
    op: str  # "+" | "-"
    left: PosInt
    right: PosInt

    def value(self, positions: tuple[int, ...]) -> int:
        a, b = self.left.value(positions), self.right.value(positions)
        return a + b if self.op == "+" else a - b


@dataclass(frozen=True)
class PosScale(PosInt):
    factor: int
    operand: PosInt

    def value(self, positions: tuple[int, ...]) -> int:
        return self.factor * self.operand.value(positions)


@dataclass(frozen=True)
class PosMod(PosInt):
    """``t % m``: the remainder in [0, m) (Python's %, also for negative t)."""

    operand: PosInt
    modulus: int

    def __post_init__(self) -> None:
        if self.modulus < 1:
            raise ValueError("a modulus must be at least 1")

    def value(self, positions: tuple[int, ...]) -> int:
        return self.operand.value(positions) % self.modulus


_COMPARE: dict[str, Callable[[int, int], bool]] = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


@dataclass(frozen=True)
class PosConstBool(PosBool):
    truth: bool

    def holds(self, positions: tuple[int, ...]) -> bool:
        return self.truth


@dataclass(frozen=True)
class PosCompare(PosBool):
    op: str
    left: PosInt
    right: PosInt

    def holds(self, positions: tuple[int, ...]) -> bool:
        return _COMPARE[self.op](self.left.value(positions), self.right.value(positions))


@dataclass(frozen=True)
class PosLogic(PosBool):
    op: str  # "&&" | "||"
    left: PosBool
    right: PosBool

    def holds(self, positions: tuple[int, ...]) -> bool:
        if self.op == "&&":
            return self.left.holds(positions) and self.right.holds(positions)
        return self.left.holds(positions) or self.right.holds(positions)


@dataclass(frozen=True)
class PosNot(PosBool):
    operand: PosBool

    def holds(self, positions: tuple[int, ...]) -> bool:
        return not self.operand.holds(positions)


@dataclass(frozen=True)
class Predicate:
    """``name(i) = body`` or ``name(i, j) = body``; ``parameters`` are the names as written (for printing)."""

    name: str
    parameters: tuple[str, ...]
    body: PosBool
    where: str = field(default="", compare=False)  # "file:line" of its definition, for messages ("" if unknown)
    line: int | None = field(default=None, compare=False)

    @property
    def arity(self) -> int:
        return len(self.parameters)

    def holds(self, i: int, j: int | None = None) -> bool:
        """The predicate at current position i (and counted position j for a binary one)."""
        return self.body.holds((i,) if j is None else (i, j))

    def source(self) -> str:
        return f"{self.name}({', '.join(self.parameters)}) = {format_condition(self.body, self.parameters)}"


# --------------------------------------------------------------------------- printing

_OR, _AND, _NOT, _CMP, _SUM, _PROD, _ATOM = range(1, 8)


def format_condition(body: PosBool, names: tuple[str, ...]) -> str:
    return _format_bool(body, names)[0]


def _format_bool(node: PosBool, names: tuple[str, ...]) -> tuple[str, int]:
    match node:
        case PosConstBool(truth):
            return ("true" if truth else "false"), _ATOM
        case PosCompare(op, left, right):
            return f"{_int_operand(left, names, _SUM)} {op} {_int_operand(right, names, _SUM)}", _CMP
        case PosNot(operand):
            text, level = _format_bool(operand, names)
            return "!" + (text if level >= _NOT and not isinstance(operand, PosCompare) else f"({text})"), _NOT
        case PosLogic(op, left, right):
            level = _OR if op == "||" else _AND
            lt, ll = _format_bool(left, names)
            rt, rl = _format_bool(right, names)
            lt = lt if ll >= level else f"({lt})"
            rt = rt if rl > level else f"({rt})"
            return f"{lt} {op} {rt}", level
    raise TypeError(node)


def _format_int(node: PosInt, names: tuple[str, ...]) -> tuple[str, int]:
    match node:
        case PosVar(role):
            return names[role], _ATOM
        case PosConst(number):
            return str(number), (_ATOM if number >= 0 else _PROD)
        case PosSum(op, left, right):
            return f"{_int_operand(left, names, _SUM)} {op} {_int_operand(right, names, _PROD)}", _SUM
        case PosScale(factor, operand):
            return f"{factor}*{_int_operand(operand, names, _ATOM)}", _PROD
        case PosMod(operand, modulus):
            return f"{_int_operand(operand, names, _ATOM)} % {modulus}", _PROD
    raise TypeError(node)


def _int_operand(node: PosInt, names: tuple[str, ...], minimum: int) -> str:
    text, level = _format_int(node, names)
    return text if level >= minimum else f"({text})"


# --------------------------------------------------------------------------- shape


def atoms(body: PosBool) -> Iterator[PosCompare]:
    """The comparisons of a condition, left to right."""
    match body:
        case PosCompare():
            yield body
        case PosNot(operand):
            yield from atoms(operand)
        case PosLogic(_, left, right):
            yield from atoms(left)
            yield from atoms(right)


def moduli(term: PosInt) -> Iterator[int]:
    match term:
        case PosMod(operand, modulus):
            yield modulus
            yield from moduli(operand)
        case PosSum(_, left, right):
            yield from moduli(left)
            yield from moduli(right)
        case PosScale(_, operand):
            yield from moduli(operand)


def _linear(term: PosInt) -> tuple[int, int, int, frozenset[str]]:
    """(a_i, a_j, B, kinds): term = a_i·i + a_j·j + r with |r| ≤ B, and the dependence of every remainder
    inside it (``i``, ``j``, ``d`` for i − j only, ``mixed``)."""
    match term:
        case PosVar(role):
            return (1, 0, 0, frozenset()) if role == CURRENT else (0, 1, 0, frozenset())
        case PosConst(number):
            return 0, 0, abs(number), frozenset()
        case PosSum(op, left, right):
            ai, aj, b, k = _linear(left)
            ci, cj, c, m = _linear(right)
            sign = 1 if op == "+" else -1
            return ai + sign * ci, aj + sign * cj, b + c, k | m
        case PosScale(factor, operand):
            ai, aj, b, k = _linear(operand)
            return factor * ai, factor * aj, abs(factor) * b, k
        case PosMod(operand, modulus):
            return 0, 0, modulus - 1, frozenset({_dependence(*_linear(operand))})
    raise TypeError(term)


def _dependence(ai: int, aj: int, _bound: int, kinds: frozenset[str]) -> str:
    own = "const" if ai == aj == 0 else "i" if aj == 0 else "j" if ai == 0 else "d" if ai == -aj else "mixed"
    found = {own, *kinds} - {"const"}
    if not found:
        return "const"
    return found.pop() if len(found) == 1 else "mixed"


def atom_shape(atom: PosCompare) -> tuple[str, int, int]:
    """(dependence, threshold, period) of an atom in its one variable (i, j or d = i − j): from the threshold on
    its truth depends on the variable modulo the period only (module docstring, "Shape"); O(size of the atom)."""
    ai, aj, bound, _ = _linear(PosSum("-", atom.left, atom.right))
    kind = dependence(atom)
    a = aj if kind == "j" else ai
    threshold = bound // abs(a) + 1 if a != 0 else 0
    period = 1
    for m in (*moduli(atom.left), *moduli(atom.right)):
        period = math.lcm(period, m)
    return kind, threshold, period


def dependence(atom: PosCompare) -> str:
    """``const``, ``i`` (current position only), ``j`` (counted position only), ``d`` (the distance i − j only)
    or ``mixed``."""
    return _dependence(*_linear(PosSum("-", atom.left, atom.right)))


@dataclass(frozen=True)
class Profile:
    """An ultimately periodic set of integers x ≥ 0: ``head[x]`` for x < T = len(head), and for x ≥ T membership
    is ``cycle[(x − T) % M]`` (M = len(cycle))."""

    head: tuple[bool, ...]
    cycle: tuple[bool, ...]

    def __contains__(self, x: int) -> bool:
        if x < len(self.head):
            return self.head[x]
        return self.cycle[(x - len(self.head)) % len(self.cycle)]

    @property
    def finite(self) -> bool:
        return not any(self.cycle)

    @property
    def cofinite(self) -> bool:
        return all(self.cycle)

    def members_below_threshold(self, truth: bool = True) -> tuple[int, ...]:
        return tuple(x for x, member in enumerate(self.head) if member == truth)


MAX_EXTENT = 4096  # positions a predicate may take to settle (its threshold plus its period): the longest input


def extent(body: PosBool) -> int:
    """An upper bound, by formula, on the threshold plus the period of every profile of ``body`` (in i, in j or
    in the distance), i.e. on the values ``profile`` evaluates: the largest B/|a| + 1 of its atoms plus the least
    common multiple of its moduli. Nothing is evaluated, so a 1000-digit offset or modulus costs nothing."""
    threshold, period = 0, 1
    for atom in atoms(body):
        ai, aj, bound, _ = _linear(PosSum("-", atom.left, atom.right))
        for a in (ai, aj):
            if a != 0:
                threshold = max(threshold, bound // abs(a) + 1)
        for m in (*moduli(atom.left), *moduli(atom.right)):
            period = math.lcm(period, m)
    return threshold + period


def profile(condition: Callable[[int], bool], atoms_in_x: list[PosCompare], role: int | None = None) -> Profile:
    """The profile of a condition in one integer variable x ≥ 0, given the atoms it is built from (in that
    variable: ``role`` picks its coefficient, or the distance coefficient a_i when None)."""
    threshold = 0
    period = 1
    for atom in atoms_in_x:
        ai, aj, bound, _ = _linear(PosSum("-", atom.left, atom.right))
        a = ai if role in (None, CURRENT) else aj
        if a != 0:
            threshold = max(threshold, bound // abs(a) + 1)
        for m in (*moduli(atom.left), *moduli(atom.right)):
            period = math.lcm(period, m)
    values = [condition(x) for x in range(threshold + period)]
    head, cycle = values[:threshold], values[threshold:]
    # shorten: drop a head suffix that the cycle continues, and a cycle that repeats a shorter one
    while head and head[-1] == cycle[-1]:
        head, cycle = head[:-1], [cycle[-1], *cycle[:-1]]
    for size in range(1, len(cycle) + 1):
        if len(cycle) % size == 0 and cycle == cycle[:size] * (len(cycle) // size):
            cycle = cycle[:size]
            break
    return Profile(tuple(head), tuple(cycle))

"""A C-RASP program as a counter machine: its state after a prefix is the value of every count ``#P`` in it.

Every definition at position i is a function of the letter w_i and of the counts at i, and a count at i is
its value at i − 1 plus [P holds at i]. So the program reads a word letter by letter with the tuple of its
counts as state (``ProgramMachine.step``), and the output at i is a function of that state and w_i. The
``counting`` engine explores and proves over these states instead of strings (docs/crasp.md, "Every length").

**Capping (exact).** A count K whose every use is a comparison that involves no other count, after the
comparison's sides are flattened into Σ a·K + k (only ``+``, ``-``, negation, constants and names of such
sums; ``min``, ``max`` and ``? :`` make every count in them exact), decides those comparisons through
min(K, T_K) only: a·K + k has the sign of a for every K ≥ T_K = ⌊|k|/|a|⌋ + 1, and counts never decrease,
so once K ≥ T_K every such comparison is constant forever. Two states whose keys (``key``: capped counts
for those K, exact values for the rest) agree have the same outputs on every continuation. The L_k programs
compare each count with 0 only, so their keys take finitely many values; Dyck-1's balance stays exact.

``encode_step`` is the same step over z3 integer terms (counts unbounded), used by the induction.

**Positions** (``guards.py`` has the argument). A program with positional predicates is read with the position
i of each letter (0-based) beside its letter; its state is flat, counts first, then per guarded count #[g] P its
window (the values of P at the last W − 1 positions, most recent first, 0 before the word) and its far counts
(per far class, the j ≤ i − W of that class with P(j)). Unary predicates and the guards' i-atoms are evaluated
at i itself; no count of a guarded count's state is capped.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import z3

from .ast import (
    ArithOp,
    BoolConst,
    BoolOp,
    Compare,
    Conditional,
    Count,
    CountConst,
    Expr,
    GuardedCount,
    Letter,
    MinMax,
    Neg,
    Not,
    PositionTest,
    Program,
    Ref,
    Scale,
    Type,
    format_expr,
)
from .guards import PositionShape, TooLarge, shape, truth
from .interpreter import BINARY_OPERATORS

Counts = tuple[int, ...]


@dataclass(frozen=True)
class _Ops:
    """The operators of one evaluation backend (Python values or z3 terms)."""

    boolean: Callable[[bool], Any]
    integer: Callable[[int], Any]
    letter: Callable[[str, str], Any]
    logic: dict[str, Callable[[Any, Any], Any]]
    negate: Callable[[Any], Any]
    ite: Callable[[Any, Any, Any], Any]
    indicator: Callable[[Any], Any]


_CONCRETE = _Ops(
    boolean=bool,
    integer=int,
    letter=lambda symbol, letter: symbol == letter,
    logic=BINARY_OPERATORS,  # the C-RASP interpreter's own operators
    negate=operator.not_,
    ite=lambda c, a, b: a if c else b,
    indicator=int,
)

_SYMBOLIC = _Ops(
    boolean=z3.BoolVal,
    integer=z3.IntVal,
    letter=lambda symbol, letter: z3.BoolVal(symbol == letter),
    logic={
        "&&": lambda a, b: z3.And(a, b),
        "||": lambda a, b: z3.Or(a, b),
        "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b,
        ">=": lambda a, b: a >= b,
        "==": lambda a, b: a == b,
        "!=": lambda a, b: a != b,
        "+": lambda a, b: a + b,
        "-": lambda a, b: a - b,
        "min": lambda a, b: z3.If(a <= b, a, b),
        "max": lambda a, b: z3.If(a >= b, a, b),
    },
    negate=z3.Not,
    ite=z3.If,
    indicator=lambda p: z3.If(p, z3.IntVal(1), z3.IntVal(0)),
)


class ProgramMachine:
    """``program`` read letter by letter; the state is the tuple of its counts (``names`` says which)."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.positional = program.positional
        self.not_applicable = ""
        self.shape: PositionShape | None = None
        if self.positional:
            try:
                self.shape = shape(program)
            except TooLarge as exc:
                self.not_applicable = str(exc)
        self.counts: tuple[Count, ...] = tuple(_count_nodes(program))
        self.index = {node: k for k, node in enumerate(self.counts)}
        names = [f"#{_shown(node.operand)}" for node in self.counts]
        caps: list[int | None] = list(_caps(program, self.counts))
        self.guarded: dict[GuardedCount, tuple[int, Any]] = {}  # node -> (offset of its part of the state, shape)
        for node, g in self.shape.guards if self.shape is not None else ():
            self.guarded[node] = (len(names), g)
            shown = f"#[{node.guard.name}]{_shown(node.operand)}"
            names += [f"{shown}@i-{d}" for d in range(1, g.window)] + [f"{shown}far[{cls}]" for cls in g.far]
            caps += [None] * (g.window - 1 + len(g.far))
        self.names = tuple(names)
        self.caps: tuple[int | None, ...] = tuple(caps)
        self.initial: Counts = (0,) * len(self.names)

    def __reduce__(self):  # rebuilt from the program in another process
        return ProgramMachine, (self.program,)

    def step(self, counts: Counts, letter: str, position: int | None = None) -> tuple[Counts, bool]:
        """The counts and the output at the next position, whose letter is ``letter`` (at word ``position``,
        0-based: needed when the program is positional)."""
        new, output = self._step(_CONCRETE, counts, letter, position)
        return tuple(new), bool(output)

    def encode_step(self, counts: list, letter: str, position: Any = None) -> tuple[list, Any]:
        """``step`` over z3 integer terms: the next counts and the output as z3 terms (``position``: a z3 term)."""
        return self._step(_SYMBOLIC, counts, letter, position)

    def key(self, counts: Counts) -> tuple:
        """What the future outputs depend on: capped counts where capping is exact (module docstring)."""
        return tuple(value if cap is None else min(value, cap) for value, cap in zip(counts, self.caps))

    def _step(self, ops: _Ops, counts, letter: str, position: Any = None):
        new: dict[Count | GuardedCount, Any] = {}
        values: dict[str, Any] = {}
        moved: dict[int, Any] = {}  # the guarded counts' next window and far entries, by state index
        if self.positional and position is None:
            raise ValueError("a positional program is read with the position of every letter")

        def value(expr: Expr) -> Any:
            match expr:
                case BoolConst(constant):
                    return ops.boolean(constant)
                case CountConst(constant):
                    return ops.integer(constant)
                case Letter(symbol):
                    return ops.letter(symbol, letter)
                case Ref(name):
                    return values[name]
                case Not(operand):
                    return ops.negate(value(operand))
                case Neg(operand):
                    return -value(operand)
                case Scale(factor, operand):
                    return factor * value(operand)
                case Count(operand):
                    if expr not in new:
                        new[expr] = counts[self.index[expr]] + ops.indicator(value(operand))
                    return new[expr]
                case GuardedCount(_, operand):
                    if expr not in new:
                        new[expr] = self._guarded(ops, expr, counts, value(operand), position, moved)
                    return new[expr]
                case PositionTest(predicate):
                    return _predicate_at(predicate, position, ops)
                case (
                    BoolOp(op, left, right)
                    | Compare(op, left, right)
                    | ArithOp(op, left, right)
                    | MinMax(op, left, right)
                ):
                    return ops.logic[op](value(left), value(right))
                case Conditional(condition, if_true, if_false):
                    return ops.ite(value(condition), value(if_true), value(if_false))
            raise TypeError(f"not a C-RASP expression: {expr!r}")

        for definition in self.program.definitions:
            values[definition.name] = value(definition.expr)
        # a count no definition reaches at this position (unused) keeps its value
        result = [new.get(node, counts[k]) for k, node in enumerate(self.counts)]
        result += [moved.get(k, counts[k]) for k in range(len(result), len(self.names))]
        return result, values[self.program.output]

    def _guarded(self, ops: _Ops, node: GuardedCount, counts, counted: Any, i: Any, moved: dict[int, Any]) -> Any:
        """#[g] P at position i from the window and the far counts (guards.py); records their next values."""
        base, g = self.guarded[node]
        w = g.window
        window = [counts[base + d - 1] for d in range(1, w)]  # P(i − d), d = 1 .. W − 1 (0 before the word)
        far = [counts[base + w - 1 + k] for k in range(len(g.far))]
        now = ops.indicator(counted)
        total = ops.ite(g.holds(i, i, ops), now, ops.integer(0))
        for d, bit in enumerate(window, start=1):
            total = total + ops.ite(ops.logic["&&"](i - d >= 0, g.holds(i, i - d, ops)), bit, ops.integer(0))
        for cls, n in zip(g.far, far):
            total = total + ops.ite(g.far_holds(i, cls, ops), n, ops.integer(0))
        # the next position's state: P(i) enters the window, P(i − W + 1) leaves it into its far class
        leaving, j = (window[-1] if window else now), i - (w - 1)
        for d, bit in enumerate([now, *window[:-1]] if window else [], start=1):
            moved[base + d - 1] = bit
        for k, (cls, n) in enumerate(zip(g.far, far)):
            enters = ops.logic["&&"](j >= 0, g.member(cls, j, ops))
            moved[base + w - 1 + k] = n + ops.ite(enters, leaving, ops.integer(0))
        return total


def _predicate_at(predicate: Any, i: Any, ops: _Ops) -> Any:
    """A unary predicate at position i (an int or a z3 term)."""
    return truth(predicate.body, lambda atom, kind: atom.holds((i,)), ops)


def _shown(expr: Expr) -> str:
    text = format_expr(expr)
    return text if isinstance(expr, (Letter, Ref)) else f"({text})"


def _count_nodes(program: Program) -> list[Count]:
    """Every distinct ``#P`` of the program, inner counts before outer ones, in definition order."""
    found: list[Count] = []

    def visit(expr: Expr) -> None:
        for child in expr.children:
            visit(child)
        if isinstance(expr, Count) and expr not in found:
            found.append(expr)

    for definition in program.definitions:
        visit(definition.expr)
    return found


def _caps(program: Program, counts: tuple[Count, ...]) -> tuple[int | None, ...]:
    """T_K for every count that only single-count linear comparisons use (module docstring), else None."""
    # a name's linear form and counts, computed once in definition order: a name is read through its entry, not
    # re-expanded (a chain of 5,000 definitions each naming the one before recursed 5,000 deep)
    linear_of: dict[str, tuple[dict[Count, int], int] | None] = {}
    counts_of: dict[str, set[Count]] = {}
    exact: set[Count] = set()
    thresholds: dict[Count, int] = {}

    def linear(expr: Expr) -> tuple[dict[Count, int], int] | None:
        """expr as Σ a·K + k, or None when min, max or ? : occur in it."""
        match expr:
            case CountConst(constant):
                return {}, constant
            case Count():
                return {expr: 1}, 0
            case Ref(name):
                return linear_of[name]
            case Neg(operand):
                inner = linear(operand)
                return None if inner is None else ({k: -a for k, a in inner[0].items()}, -inner[1])
            case Scale(factor, operand):
                inner = linear(operand)
                if inner is None:
                    return None
                return {k: factor * a for k, a in inner[0].items() if factor * a != 0}, factor * inner[1]
            case ArithOp(op, left, right):
                a, b = linear(left), linear(right)
                if a is None or b is None:
                    return None
                sign = 1 if op == "+" else -1
                merged = dict(a[0])
                for k, c in b[0].items():
                    merged[k] = merged.get(k, 0) + sign * c
                return {k: c for k, c in merged.items() if c != 0}, a[1] + sign * b[1]
        return None

    def counts_in(expr: Expr) -> set[Count]:
        """Every count whose value the count expression ``expr`` reads (through names too)."""
        match expr:
            case Count():
                return {expr}
            case Ref(name):
                return counts_of[name] if expr.type is Type.COUNT else set()
            case Conditional(_, if_true, if_false):  # the condition is a boolean: visited on its own
                return counts_in(if_true) | counts_in(if_false)
        found: set[Count] = set()
        for child in expr.children:
            found |= counts_in(child)
        return found

    def visit(expr: Expr) -> None:
        if isinstance(expr, Compare):
            difference = linear(ArithOp("-", expr.left, expr.right))
            used = counts_in(expr.left) | counts_in(expr.right)
            if difference is not None and len(difference[0]) == 1:
                ((count, a),) = difference[0].items()
                thresholds[count] = max(thresholds.get(count, 0), abs(difference[1]) // abs(a) + 1)
            elif difference is None or len(difference[0]) > 1:
                exact.update(used)
        for child in expr.children:
            visit(child)

    for definition in program.definitions:
        visit(definition.expr)
        linear_of[definition.name] = linear(definition.expr)
        counts_of[definition.name] = counts_in(definition.expr)
    # a count no comparison reads cannot influence the output: cap 0
    return tuple(None if node in exact else thresholds.get(node, 0) for node in counts)


__all__ = ["Counts", "ProgramMachine"]

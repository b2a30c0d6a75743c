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
    Letter,
    MinMax,
    Neg,
    Not,
    Program,
    Ref,
    Scale,
    Type,
    format_expr,
)
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
        # Positional predicates make the output depend on the position and on a window of earlier values, which
        # this state does not hold: the counting engine answers "does not apply" for such programs.
        self.not_applicable = (
            "the program uses positional predicates (guarded counts or position tests); its counter machine "
            "holds counts only"
            if program.positional
            else ""
        )
        self.counts: tuple[Count, ...] = tuple(_count_nodes(program))
        self.index = {node: k for k, node in enumerate(self.counts)}
        self.names = tuple(f"#{_shown(node.operand)}" for node in self.counts)
        self.caps: tuple[int | None, ...] = _caps(program, self.counts)
        self.initial: Counts = (0,) * len(self.counts)

    def __reduce__(self):  # rebuilt from the program in another process
        return ProgramMachine, (self.program,)

    def step(self, counts: Counts, letter: str) -> tuple[Counts, bool]:
        """The counts and the output at the next position, whose letter is ``letter``."""
        new, output = self._step(_CONCRETE, counts, letter)
        return tuple(new), bool(output)

    def encode_step(self, counts: list, letter: str) -> tuple[list, Any]:
        """``step`` over z3 integer terms: the next counts and the output as z3 terms."""
        return self._step(_SYMBOLIC, counts, letter)

    def key(self, counts: Counts) -> tuple:
        """What the future outputs depend on: capped counts where capping is exact (module docstring)."""
        return tuple(value if cap is None else min(value, cap) for value, cap in zip(counts, self.caps))

    def _step(self, ops: _Ops, counts, letter: str):
        new: dict[Count, Any] = {}
        values: dict[str, Any] = {}

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
        return [new.get(node, counts[k]) for k, node in enumerate(self.counts)], values[self.program.output]


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

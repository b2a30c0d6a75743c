"""The C-RASP interpreter's rules as z3 formulas over a symbolic string: the program's output at every position.

A position's symbol is an index variable into the alphabet (``symbolic.inputs.string_input``); letters compare
it, ``#`` is a running sum of If(P, 1, 0). Used by the ``smt`` engine of ``crasp-equivalence``.
"""

from __future__ import annotations

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
)


def program_outputs_symbolic(program: Program, inp) -> list:
    """The program's output at positions 0..L-1 of a symbolic string (``engines.smt.inputs.SymbolicInput``), as
    z3 formulas: letters compare the position's symbol index, ``#`` is a running sum of If(P, 1, 0)."""
    length = len(inp.tokens)
    values: dict[str, list] = {}

    def letter(symbol: str, token) -> Any:
        if token.symbol is not None:
            return z3.BoolVal(token.symbol == symbol)
        if symbol not in token.alphabet:
            return z3.BoolVal(False)
        return token.symbol_index == token.alphabet.index(symbol)

    def value(expr: Expr) -> list:
        match expr:
            case BoolConst(constant):
                return [z3.BoolVal(constant)] * length
            case CountConst(constant):
                return [z3.IntVal(constant)] * length
            case Letter(symbol):
                return [letter(symbol, token) for token in inp.tokens]
            case Ref(name):
                return values[name]
            case Not(operand):
                return [z3.Not(x) for x in value(operand)]
            case Neg(operand):
                return [-x for x in value(operand)]
            case Count(operand):
                running, out = z3.IntVal(0), []
                for x in value(operand):
                    running = running + z3.If(x, 1, 0)
                    out.append(running)
                return out
            case GuardedCount(guard, operand):
                counted = value(operand)
                return [
                    z3.Sum([z3.IntVal(0)] + [z3.If(counted[j], 1, 0) for j in range(i + 1) if guard.holds(i, j)])
                    for i in range(length)
                ]
            case PositionTest(predicate):
                return [z3.BoolVal(predicate.holds(i)) for i in range(length)]
            case Scale(factor, operand):
                return [factor * x for x in value(operand)]
            case (
                BoolOp(op, left, right) | Compare(op, left, right) | ArithOp(op, left, right) | MinMax(op, left, right)
            ):
                return [_SYMBOLIC_OPERATORS[op](a, b) for a, b in zip(value(left), value(right))]
            case Conditional(condition, if_true, if_false):
                return [z3.If(c, a, b) for c, a, b in zip(value(condition), value(if_true), value(if_false))]
        raise TypeError(f"not a C-RASP expression: {expr!r}")

    for definition in program.definitions:
        values[definition.name] = value(definition.expr)
    return values[program.output]


_SYMBOLIC_OPERATORS = {
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
}

"""The C-RASP interpreter's rules on whole numpy arrays: a program's output at every position of many strings.

Used by the batched ``crasp-equivalence`` check; ``tests/test_crasp_equivalence.py`` checks it against
``interpreter.run_program`` on random programs.
"""

from __future__ import annotations

import numpy as np

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


def program_outputs_batched(program: Program, alphabet: tuple[str, ...], rows: np.ndarray) -> np.ndarray:
    """The program's output at positions 0..L of every row (B, L) of symbol indices into ``alphabet``.

    The C-RASP interpreter's rules on whole arrays: letters compare indices, ``#`` is a cumulative sum along
    the positions (the current one included), everything else is elementwise. Column 0 is the empty prefix.
    """
    values: dict[str, np.ndarray] = {}

    def value(expr: Expr) -> np.ndarray:
        match expr:
            case BoolConst(constant):
                return np.full(rows.shape, constant, dtype=bool)
            case CountConst(constant):
                return np.full(rows.shape, constant, dtype=np.int64)
            case Letter(symbol):
                return rows == alphabet.index(symbol) if symbol in alphabet else np.zeros(rows.shape, dtype=bool)
            case Ref(name):
                return values[name]
            case Not(operand):
                return ~value(operand)
            case Neg(operand):
                return -value(operand)
            case Count(operand):
                return np.cumsum(value(operand), axis=1, dtype=np.int64)
            case GuardedCount(guard, operand):
                length = rows.shape[1]
                allowed = np.array(
                    [[j <= i and guard.holds(i, j) for j in range(length)] for i in range(length)], dtype=np.int64
                ).reshape(length, length)
                return value(operand).astype(np.int64) @ allowed.T
            case PositionTest(predicate):
                tests = np.array([predicate.holds(i) for i in range(rows.shape[1])], dtype=bool)
                return np.broadcast_to(tests, rows.shape).copy()
            case Scale(factor, operand):
                return factor * value(operand)
            case (
                BoolOp(op, left, right) | Compare(op, left, right) | ArithOp(op, left, right) | MinMax(op, left, right)
            ):
                return _ARRAY_OPERATORS[op](value(left), value(right))
            case Conditional(condition, if_true, if_false):
                return np.where(value(condition), value(if_true), value(if_false))
        raise TypeError(f"not a C-RASP expression: {expr!r}")

    for definition in program.definitions:
        values[definition.name] = value(definition.expr)
    output = values[program.output]
    return np.concatenate([np.zeros((rows.shape[0], 1), dtype=bool), output], axis=1)


_ARRAY_OPERATORS = {
    "&&": np.logical_and,
    "||": np.logical_or,
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
    "==": np.equal,
    "!=": np.not_equal,
    "+": np.add,
    "-": np.subtract,
    "min": np.minimum,
    "max": np.maximum,
}

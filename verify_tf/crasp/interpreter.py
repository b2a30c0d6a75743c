"""Reference interpreter for C-RASP programs.

Positions are 0..n-1 for a word w_0..w_{n-1} (the numbering of every witness,
of ``crasp run`` and of the peer interpreter); every expression evaluates to a
tuple with one value per position (index i holds position i).  ``#P`` at
position i counts the positions j <= i, the current one included, where P
holds; ``#[g] P`` counts those with g(i, j) too; a unary predicate u is the
vector (u(0), ..., u(n-1)).  A word is accepted iff the output holds at its
last position, so the empty word is rejected; the output at position i decides
whether the prefix w_0..w_i is accepted (the per-prefix output).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from verify_tf.crasp.ast import (
    ArithOp,
    BoolConst,
    BoolOp,
    Compare,
    Conditional,
    Count,
    CountConst,
    CraspError,
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
    format_alphabet,
)

__all__ = ["Trace", "Vector", "accepts", "evaluate", "run_program"]

Vector = tuple[int, ...] | tuple[bool, ...]
"""Per-position values of one expression: booleans or integers."""

BINARY_OPERATORS: dict[str, Callable[[int, int], int | bool]] = {
    "&&": lambda left, right: left and right,
    "||": lambda left, right: left or right,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
    "+": operator.add,
    "-": operator.sub,
    "min": min,
    "max": max,
}


@dataclass(frozen=True)
class Trace:
    """The run of a program on a word: the vector of every definition, in program order."""

    program: Program
    word: str
    values: Mapping[str, Vector]

    @property
    def output(self) -> tuple[bool, ...]:
        """The output at every position: entry i says whether the prefix w_0..w_i is accepted."""
        return self.values[self.program.output]  # type: ignore[return-value]

    @property
    def accepted(self) -> bool:
        """Whether the output holds at the last position (the empty word is rejected)."""
        return bool(self.output) and self.output[-1]


def evaluate(expr: Expr, word: str, environment: Mapping[str, Vector]) -> Vector:
    """The vector of ``expr`` on ``word``; ``environment`` holds the vectors of the names it uses."""
    length = len(word)
    match expr:
        case BoolConst(value) | CountConst(value):
            return (value,) * length
        case Letter(symbol):
            return tuple(letter == symbol for letter in word)
        case Ref(name):
            return environment[name]
        case Not(operand):
            return tuple(not value for value in evaluate(operand, word, environment))
        case Neg(operand):
            return tuple(-value for value in evaluate(operand, word, environment))
        case Count(operand):
            return tuple(itertools.accumulate(int(value) for value in evaluate(operand, word, environment)))
        case GuardedCount(guard, operand):
            counted = evaluate(operand, word, environment)
            return tuple(sum(1 for j in range(i + 1) if counted[j] and guard.holds(i, j)) for i in range(length))
        case PositionTest(predicate):
            return tuple(predicate.holds(i) for i in range(length))
        case Scale(factor, operand):
            return tuple(factor * value for value in evaluate(operand, word, environment))
        case BoolOp(op, left, right) | Compare(op, left, right) | ArithOp(op, left, right) | MinMax(op, left, right):
            function = BINARY_OPERATORS[op]
            left_values = evaluate(left, word, environment)
            right_values = evaluate(right, word, environment)
            return tuple(function(a, b) for a, b in zip(left_values, right_values))
        case Conditional(condition, if_true, if_false):
            selectors = evaluate(condition, word, environment)
            true_values = evaluate(if_true, word, environment)
            false_values = evaluate(if_false, word, environment)
            return tuple(a if chosen else b for chosen, a, b in zip(selectors, true_values, false_values))
    raise TypeError(f"not a C-RASP expression: {expr!r}")


def run_program(program: Program, word: str) -> Trace:
    """Run ``program`` on ``word``; raises :class:`CraspError` for a letter outside the alphabet."""
    for position, letter in enumerate(word):
        if letter not in program.alphabet:
            raise CraspError(
                f"letter '{letter}' at position {position} is not in the alphabet {format_alphabet(program.alphabet)}"
            )
    values: dict[str, Vector] = {}
    for definition in program.definitions:
        values[definition.name] = evaluate(definition.expr, word, values)
    return Trace(program, word, values)


def accepts(program: Program, word: str) -> bool:
    """Whether ``program`` accepts ``word``."""
    return run_program(program, word).accepted

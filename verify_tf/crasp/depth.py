"""Depth of C-RASP expressions and programs.

dp(letter) = dp(constant) = dp(unary positional predicate) = 0,
dp(#P) = dp(#[g] P) = dp(P) + 1, every other operator takes the maximum over its
operands, and a name has the depth of its definition.
The depth of a program is the depth of its output definition.
"""

from __future__ import annotations

from collections.abc import Mapping

from verify_tf.crasp.ast import Count, Expr, GuardedCount, Program, Ref

__all__ = ["definition_depths", "expression_depth", "program_depth"]


def expression_depth(expr: Expr, name_depths: Mapping[str, int]) -> int:
    """The depth of ``expr``, given the depths of the names it uses."""
    if isinstance(expr, Ref):
        return name_depths[expr.name]
    deepest_operand = max((expression_depth(child, name_depths) for child in expr.children), default=0)
    return deepest_operand + 1 if isinstance(expr, Count | GuardedCount) else deepest_operand


def definition_depths(program: Program) -> dict[str, int]:
    """The depth of every definition, in program order."""
    depths: dict[str, int] = {}
    for definition in program.definitions:
        depths[definition.name] = expression_depth(definition.expr, depths)
    return depths


def program_depth(program: Program) -> int:
    """The depth of the program's output."""
    return definition_depths(program)[program.output]

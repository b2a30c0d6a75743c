"""Stage 5: the levels as a C-RASP program in the project's ``.cr`` syntax (``crasp.ast`` and its printer).

Each needed atom becomes one Boolean definition named after its head and boundary (``t<layer>_h<head>_c<k>``)
with a comment saying which head and boundary it came from, grouped by layer; the decision is ``accept``. A
comparison base·#true + Σ a·#P + k ≥ 0 is written with the positive terms on the left:
``L > R + c`` (c = −k − 1 ≥ 0), ``L + k >= R``, or ``R <= k`` when nothing is positive. The text is parsed
back (``parse_program``) before it is returned, so what is written is what the parser reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..crasp.ast import (
    ArithOp,
    BoolConst,
    BoolOp,
    Compare,
    Count,
    CountConst,
    Expr,
    Letter,
    Not,
    Program,
    Ref,
    Scale,
    Type,
    format_expr,
)
from ..crasp.depth import program_depth
from ..crasp.parser import parse_program
from .boolean import Formula
from .levels import Comparison, Levels

OUTPUT = "accept"


@dataclass(frozen=True)
class Written:
    text: str
    program: Program
    definitions: int
    depth: int


def _literal(levels: Levels, feature: int, polarity: bool) -> Expr:
    alphabet = levels.alphabet
    if feature < len(alphabet):
        if not polarity and len(alphabet) == 2:
            return Letter(alphabet[1 - feature])
        letter: Expr = Letter(alphabet[feature])
        return letter if polarity else Not(letter)
    atom = levels.atoms[feature - len(alphabet)]
    ref: Expr = Ref(atom.name, Type.BOOL)
    return ref if polarity else Not(ref)


def _join(op: str, parts: list[Expr]) -> Expr:
    result = parts[0]
    for part in parts[1:]:
        result = BoolOp(op, result, part)
    return result


def formula_expr(levels: Levels, formula: Formula) -> Expr:
    """The formula as an expression (a negative letter test beside a positive one is implied, and dropped)."""
    letters = len(levels.alphabet)
    cubes = []
    for cube in formula.cubes:
        if any(i < letters and v for i, v in cube):
            cube = tuple((i, v) for i, v in cube if i >= letters or v)
        literals = sorted(cube, key=lambda lit: (lit[0] >= letters, lit[0]))
        cubes.append(_join("&&", [_literal(levels, i, v) for i, v in literals]) if literals else BoolConst(True))
    expr = _join("||", cubes) if cubes else BoolConst(False)
    if formula.negated:
        expr = Not(expr) if not isinstance(expr, BoolConst) else BoolConst(not expr.value)
    return expr


def _sum(parts: list[Expr]) -> Expr:
    result = parts[0]
    for part in parts[1:]:
        result = ArithOp("+", result, part)
    return result


def comparison_expr(levels: Levels, comparison: Comparison) -> Expr:
    terms: list[tuple[int, Expr]] = []
    if comparison.base:
        terms.append((comparison.base, Count(BoolConst(True))))
    terms += [(t.factor, Count(formula_expr(levels, t.operand))) for t in comparison.terms]

    def scaled(factor: int, count: Expr) -> Expr:
        return count if factor == 1 else Scale(factor, count)

    left = [scaled(a, c) for a, c in terms if a > 0]
    right = [scaled(-a, c) for a, c in terms if a < 0]
    k = comparison.constant
    if not left:
        return Compare("<=", _sum(right), CountConst(k))
    if not right:
        return Compare(">=", _sum(left), CountConst(-k))
    c = -k - 1
    if c >= 0:
        return Compare(">", _sum(left), _sum(right + [CountConst(c)]) if c else _sum(right))
    return Compare(">=", _sum(left + [CountConst(k)]) if k else _sum(left), _sum(right))


def write(levels: Levels, title: str, heads: dict[int, str]) -> Written:
    """The program's text and its parsed ``Program`` (``heads``: per layer, which block it is)."""
    symbols = " ".join(a if a.isalnum() and a.isascii() else f'"{a}"' for a in levels.alphabet)
    lines = [f"# {title}", f"alphabet {symbols}"]
    layer = None
    for comparison in levels.comparisons:
        atom = comparison.atom
        if atom.layer != layer:
            layer = atom.layer
            lines.append(f"# layer {layer}: {heads[layer]}")
        lines.append(f"{atom.name} = {format_expr(comparison_expr(levels, comparison))}  # h{atom.head}: {atom.what}")
    lines.append(f"{OUTPUT} = {format_expr(formula_expr(levels, levels.accept))}")
    lines.append(f"output {OUTPUT}")
    text = "\n".join(lines) + "\n"
    program = parse_program(text)
    return Written(text, program, len(program.definitions), program_depth(program))


__all__ = ["OUTPUT", "Written", "comparison_expr", "formula_expr", "write"]

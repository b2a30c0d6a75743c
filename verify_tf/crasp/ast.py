"""Abstract syntax of C-RASP programs, and the pretty-printer back to source.

A C-RASP expression denotes a vector with one entry per input position and has
one of two types: :attr:`Type.BOOL` (letter tests, boolean connectives,
comparisons) or :attr:`Type.COUNT` (prefix counts ``#``, constants, ``+``,
``-``, ``min``, ``max``, and the conditional ``? :``).

Every node is a frozen dataclass that knows its type (``expr.type``) and whose
constructor rejects ill-typed operands, so any :class:`Program` value is
well-typed: names are defined before use, letters belong to the alphabet and
the output is boolean.  The parser performs the same checks first in order to
report them with a line and column.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

from ..userfiles import abridge
from .positions import Predicate


class CraspError(Exception):
    """An invalid C-RASP program or input, optionally located in a source file."""

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        filename: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        message = abridge(message)
        super().__init__(message)
        self.message = message
        self.hint = abridge(hint) if hint is not None else None
        self.filename = filename
        self.line = line
        self.column = column

    def located(self, filename: str, line: int, column: int) -> CraspError:
        """The same error, reported at ``filename:line:column``."""
        return CraspError(self.message, hint=self.hint, filename=filename, line=line, column=column)

    def __str__(self) -> str:
        location = ":".join(str(part) for part in (self.filename, self.line, self.column) if part is not None)
        text = f"{location}: {self.message}" if location else self.message
        return f"{text}\n  hint: {self.hint}" if self.hint else text


class Type(enum.Enum):
    """The two types of C-RASP vectors."""

    BOOL = "boolean"
    COUNT = "count"


KEYWORDS = frozenset({"alphabet", "output", "true", "false", "min", "max", "Q", "if", "else"})
"""Words that cannot name a definition."""

LOGIC_OPERATORS = ("&&", "||")
COMPARISON_OPERATORS = ("<", "<=", ">", ">=", "==", "!=")
ARITHMETIC_OPERATORS = ("+", "-")
EXTREMUM_OPERATORS = ("min", "max")

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Expr:
    """Base class of expressions; ``type`` is the type of the denoted vector."""

    type: ClassVar[Type]

    @property
    def children(self) -> tuple[Expr, ...]:
        """The direct subexpressions, left to right."""
        return ()


def require_type(expr: Expr, expected: Type) -> None:
    """Raise a :class:`CraspError` (without location) unless ``expr`` has type ``expected``."""
    if expr.type is expected:
        return
    shown = format_expr(expr)
    short = len(shown) <= _SHOWN_LENGTH
    if expected is Type.BOOL:
        example = f"{_operand(expr, _SUM)} > 0" if short else "(...) > 0"
        hint = f"compare the count with a number, e.g. {example}"
    else:
        example = f"#{_operand(expr, _ATOM)}" if short else "#(...)"
        hint = f"count the positions where it holds, e.g. {example}"
    if not short:
        shown = shown[: _SHOWN_LENGTH - 3] + "..."
    raise CraspError(f"expected a {expected.value} expression, got {expr.type.value} '{shown}'", hint=hint)


_SHOWN_LENGTH = 40
"""Longest expression text quoted in full by a type error."""


# --------------------------------------------------------------------------- boolean nodes


@dataclass(frozen=True)
class BoolConst(Expr):
    """``true`` or ``false`` at every position."""

    type: ClassVar[Type] = Type.BOOL
    value: bool


@dataclass(frozen=True)
class Letter(Expr):
    """The letter test Q_σ: true at position i iff w_i = ``symbol``."""

    type: ClassVar[Type] = Type.BOOL
    symbol: str

    def __post_init__(self) -> None:
        if len(self.symbol) != 1 or self.symbol.isspace() or self.symbol in "\"'":
            raise CraspError(f"a letter is a single non-blank character other than a quote, got {self.symbol!r}")


@dataclass(frozen=True)
class Not(Expr):
    """Pointwise negation ``!P``."""

    type: ClassVar[Type] = Type.BOOL
    operand: Expr

    def __post_init__(self) -> None:
        require_type(self.operand, Type.BOOL)

    @property
    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class BoolOp(Expr):
    """Pointwise ``P && Q`` or ``P || Q``."""

    type: ClassVar[Type] = Type.BOOL
    op: str
    left: Expr
    right: Expr

    def __post_init__(self) -> None:
        if self.op not in LOGIC_OPERATORS:
            raise ValueError(f"unknown boolean operator {self.op!r}")
        require_type(self.left, Type.BOOL)
        require_type(self.right, Type.BOOL)

    @property
    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class Compare(Expr):
    """Pointwise comparison of two counts, e.g. ``C1 < C2``."""

    type: ClassVar[Type] = Type.BOOL
    op: str
    left: Expr
    right: Expr

    def __post_init__(self) -> None:
        if self.op not in COMPARISON_OPERATORS:
            raise ValueError(f"unknown comparison operator {self.op!r}")
        require_type(self.left, Type.COUNT)
        require_type(self.right, Type.COUNT)

    @property
    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class PositionTest(Expr):
    """A unary positional predicate used as a boolean: true at position i iff u(i) (positions from 0)."""

    type: ClassVar[Type] = Type.BOOL
    predicate: Predicate

    def __post_init__(self) -> None:
        if self.predicate.arity != 1:
            raise CraspError(
                f"'{self.predicate.name}' relates two positions; it guards a count: #[{self.predicate.name}] P"
            )


# --------------------------------------------------------------------------- count nodes


@dataclass(frozen=True)
class CountConst(Expr):
    """An integer constant at every position."""

    type: ClassVar[Type] = Type.COUNT
    value: int


@dataclass(frozen=True)
class Count(Expr):
    """The prefix count ``#P``: at position i, the number of j <= i where P(j) holds."""

    type: ClassVar[Type] = Type.COUNT
    operand: Expr

    def __post_init__(self) -> None:
        require_type(self.operand, Type.BOOL)

    @property
    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class GuardedCount(Expr):
    """The guarded count ``#[g] P``: at position i, the number of j <= i with g(i, j) and P(j)."""

    type: ClassVar[Type] = Type.COUNT
    guard: Predicate
    operand: Expr

    def __post_init__(self) -> None:
        if self.guard.arity != 2:
            raise CraspError(f"'{self.guard.name}' is unary; a guard relates two positions (i, j)")
        require_type(self.operand, Type.BOOL)

    @property
    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class Scale(Expr):
    """A constant multiple ``k*C`` of a count."""

    type: ClassVar[Type] = Type.COUNT
    factor: int
    operand: Expr

    def __post_init__(self) -> None:
        require_type(self.operand, Type.COUNT)

    @property
    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class Neg(Expr):
    """Pointwise negation ``-C`` of a count."""

    type: ClassVar[Type] = Type.COUNT
    operand: Expr

    def __post_init__(self) -> None:
        require_type(self.operand, Type.COUNT)

    @property
    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class ArithOp(Expr):
    """Pointwise ``C1 + C2`` or ``C1 - C2``."""

    type: ClassVar[Type] = Type.COUNT
    op: str
    left: Expr
    right: Expr

    def __post_init__(self) -> None:
        if self.op not in ARITHMETIC_OPERATORS:
            raise ValueError(f"unknown arithmetic operator {self.op!r}")
        require_type(self.left, Type.COUNT)
        require_type(self.right, Type.COUNT)

    @property
    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class MinMax(Expr):
    """Pointwise ``min(C1, C2)`` or ``max(C1, C2)``."""

    type: ClassVar[Type] = Type.COUNT
    op: str
    left: Expr
    right: Expr

    def __post_init__(self) -> None:
        if self.op not in EXTREMUM_OPERATORS:
            raise ValueError(f"unknown extremum {self.op!r}")
        require_type(self.left, Type.COUNT)
        require_type(self.right, Type.COUNT)

    @property
    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class Conditional(Expr):
    """Pointwise ``P ? C1 : C2``: C1 where P holds, C2 elsewhere."""

    type: ClassVar[Type] = Type.COUNT
    condition: Expr
    if_true: Expr
    if_false: Expr

    def __post_init__(self) -> None:
        require_type(self.condition, Type.BOOL)
        require_type(self.if_true, Type.COUNT)
        require_type(self.if_false, Type.COUNT)

    @property
    def children(self) -> tuple[Expr, ...]:
        return (self.condition, self.if_true, self.if_false)


# --------------------------------------------------------------------------- names


@dataclass(frozen=True)
class Ref(Expr):
    """A use of an earlier definition; ``value_type`` is the type of that definition."""

    name: str
    value_type: Type

    @property
    def type(self) -> Type:  # type: ignore[override]
        return self.value_type


def subexpressions(expr: Expr) -> Iterator[Expr]:
    """``expr`` and all its subexpressions, in pre-order (iteratively: any depth)."""
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


def expression_depth(expr: Expr) -> int:
    """The nesting depth of ``expr`` (a leaf is 1), computed iteratively."""
    deepest, stack = 0, [(expr, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in node.children)
    return deepest


# Input limits (docs/crasp.md, "Limits"): every later stage (interpreter, compiler, SMT formulas) recurses over
# expressions, so the parser refuses deeper ones with a located error instead of a RecursionError.
MAX_NESTING = 100  # nested parentheses, prefix operators (! - #) and chained operators (a + b + ...), together
MAX_CONSTANT_DIGITS = 1000  # as for numbers in specs (verify_tf.numbers.MAX_DIGITS)


# --------------------------------------------------------------------------- programs


@dataclass(frozen=True)
class Definition:
    """A named definition ``name = expr``."""

    name: str
    expr: Expr

    @property
    def type(self) -> Type:
        return self.expr.type


@dataclass(frozen=True)
class Program:
    """Ordered definitions, the name of the boolean output definition, and the alphabet.

    A word is accepted iff the output holds at its last position.
    """

    definitions: tuple[Definition, ...]
    output: str
    alphabet: tuple[str, ...]
    predicates: tuple[Predicate, ...] = ()

    def __post_init__(self) -> None:
        for symbol in self.alphabet:
            Letter(symbol)
        if len(set(self.alphabet)) != len(self.alphabet):
            raise CraspError(f"the alphabet {format_alphabet(self.alphabet)} repeats a symbol")
        if not self.definitions:
            raise CraspError("a program needs at least one definition")
        types: dict[str, Type] = {}
        predicates = {predicate.name: predicate for predicate in self.predicates}
        if len(predicates) != len(self.predicates):
            raise CraspError("a positional predicate is defined twice")
        for predicate in self.predicates:
            check_definition_name(predicate.name)
        for definition in self.definitions:
            check_definition_name(definition.name)
            if expression_depth(definition.expr) > MAX_NESTING:
                raise CraspError(f"'{definition.name}' nests deeper than {MAX_NESTING} levels")
            if definition.name in types or definition.name in predicates:
                raise CraspError(f"'{definition.name}' is defined twice")
            for node in subexpressions(definition.expr):
                if isinstance(node, Ref) and types.get(node.name) is not node.value_type:
                    raise CraspError(f"'{node.name}' is not an earlier {node.value_type.value} definition")
                if isinstance(node, GuardedCount | PositionTest):
                    used = node.guard if isinstance(node, GuardedCount) else node.predicate
                    if predicates.get(used.name) != used:
                        raise CraspError(f"the positional predicate '{used.name}' is not defined in the program")
                if isinstance(node, Letter) and node.symbol not in self.alphabet:
                    raise CraspError(f"letter '{node.symbol}' is not in the alphabet {format_alphabet(self.alphabet)}")
            types[definition.name] = definition.type
        if self.output not in types:
            raise CraspError(f"the output '{self.output}' is not defined")
        if types[self.output] is not Type.BOOL:
            raise CraspError(f"the output '{self.output}' must be boolean, but it is a count")

    @property
    def names(self) -> tuple[str, ...]:
        """The definition names, in program order."""
        return tuple(definition.name for definition in self.definitions)

    @property
    def positional(self) -> bool:
        """True when the program uses positional predicates (guarded counts or unary position tests)."""
        return any(
            isinstance(node, GuardedCount | PositionTest)
            for definition in self.definitions
            for node in subexpressions(definition.expr)
        )

    def definition(self, name: str) -> Definition:
        """The definition called ``name``."""
        for definition in self.definitions:
            if definition.name == name:
                return definition
        raise KeyError(name)


def check_definition_name(name: str) -> None:
    """Raise a :class:`CraspError` unless ``name`` may name a definition."""
    if not _IDENTIFIER.fullmatch(name):
        raise CraspError(f"'{name}' is not a valid name")
    if name in KEYWORDS:
        raise CraspError(f"'{name}' is a reserved word and cannot name a definition")


def format_alphabet(alphabet: tuple[str, ...] | list[str]) -> str:
    """``{a, b}``."""
    return "{" + ", ".join(alphabet) + "}"


# --------------------------------------------------------------------------- pretty-printing

# Precedence levels, lowest to highest; they mirror the grammar in parser.py.
_CONDITIONAL, _OR, _AND, _COMPARISON, _SUM, _PRODUCT, _UNARY, _ATOM = range(1, 9)
_BINARY_LEVEL = {"||": _OR, "&&": _AND, "+": _SUM, "-": _SUM}


def format_expr(expr: Expr) -> str:
    """C-RASP source text for ``expr``, with the fewest parentheses that parse back to it."""
    return _format(expr)[0]


def format_program(program: Program) -> str:
    """C-RASP source text for ``program``: alphabet line, definitions, output line."""
    symbols = " ".join(_format_symbol(symbol) for symbol in program.alphabet)
    lines = [f"alphabet {symbols}".rstrip()]
    lines += [predicate.source() for predicate in program.predicates]
    lines += [f"{definition.name} = {format_expr(definition.expr)}" for definition in program.definitions]
    lines.append(f"output {program.output}")
    return "\n".join(lines) + "\n"


def _format_symbol(symbol: str) -> str:
    return symbol if symbol.isalnum() and symbol.isascii() else f'"{symbol}"'


def _format(expr: Expr) -> tuple[str, int]:
    """The text of ``expr`` and its precedence level."""
    match expr:
        case BoolConst(value):
            return ("true" if value else "false"), _ATOM
        case Letter(symbol):
            return f'"{symbol}"', _ATOM
        case Ref(name):
            return name, _ATOM
        case CountConst(value):
            return str(value), (_ATOM if value >= 0 else _UNARY)
        case MinMax(op, left, right):
            return f"{op}({format_expr(left)}, {format_expr(right)})", _ATOM
        case Not(operand):
            return "!" + _operand(operand, _UNARY), _UNARY
        case Count(operand):
            return "#" + _operand(operand, _ATOM), _UNARY
        case GuardedCount(guard, operand):
            return f"#[{guard.name}] " + _operand(operand, _ATOM), _UNARY
        case PositionTest(predicate):
            return predicate.name, _ATOM
        case Scale(factor, operand):
            return f"{factor}*{_operand(operand, _UNARY)}", _PRODUCT
        case Neg(CountConst(value)):
            # Parenthesized so that the parser does not fold "-3" into the literal -3.
            return f"-({value})", _UNARY
        case Neg(operand):
            return "-" + _operand(operand, _UNARY), _UNARY
        case BoolOp(op, left, right) | ArithOp(op, left, right):
            level = _BINARY_LEVEL[op]
            return f"{_operand(left, level)} {op} {_operand(right, level + 1)}", level
        case Compare(op, left, right):
            return f"{_operand(left, _SUM)} {op} {_operand(right, _SUM)}", _COMPARISON
        case Conditional(condition, if_true, if_false):
            text = f"{_operand(condition, _OR)} ? {format_expr(if_true)} : {format_expr(if_false)}"
            return text, _CONDITIONAL
    raise TypeError(f"not a C-RASP expression: {expr!r}")


def _operand(expr: Expr, minimum_level: int) -> str:
    text, level = _format(expr)
    return text if level >= minimum_level else f"({text})"

"""Parser and type checker for C-RASP source files (``.cr``).

A hand-written tokenizer and recursive-descent parser.  One statement per
line; every error is a :class:`~verify_tf.crasp.ast.CraspError` carrying the
file name, line and column (both 1-based) and, where useful, a hint.

Grammar (EBNF; ``{ }`` repetition, ``[ ]`` option; precedence from lowest to
highest: ``? :``, ``||``, ``&&``, comparisons, ``+ -``, unary ``! - #``, atoms)::

    program    = { line } ;
    line       = [ statement ] [ comment ] NEWLINE ;
    statement  = "alphabet" symbol { symbol }          (* at most once, before the definitions *)
               | "output" NAME                         (* at most once, anywhere *)
               | NAME "(" NAME [ "," NAME ] ")" "=" condition    (* a positional predicate *)
               | NAME "=" expr ;
    expr       = or_expr [ "?" expr ":" expr ]         (* condition boolean, branches counts *)
               | or_expr "if" or_expr "else" expr ;    (* count if condition else count (the peer's form) *)
    or_expr    = and_expr { "||" and_expr } ;
    and_expr   = comparison { "&&" comparison } ;
    comparison = sum [ ( "<" | "<=" | ">" | ">=" | "==" | "!=" ) sum ] ;   (* no chaining *)
    sum        = product { ( "+" | "-" ) product } ;
    product    = unary { "*" unary } ;                 (* one side of each * an integer constant *)
    unary      = ( "!" | "-" | "#" | "#" "[" NAME "]" ) unary | atom ;
    atom       = letter | INTEGER | "true" | "false" | NAME
               | ( "min" | "max" ) "(" expr "," expr ")"
               | "(" expr ")" ;
    condition  = the same operators over the predicate's parameters, integers, "*" by a constant and
                 "%" by a positive constant (see ``crasp.positions``) ;
    letter     = STRING | "Q" "(" symbol ")" ;         (* "a" is primary, Q(a) an alias *)
    symbol     = STRING | a one-character NAME or INTEGER ;
    STRING     = '"' char '"' | "'" char "'" ;         (* one non-blank character, not a quote *)
    NAME       = /[A-Za-z_][A-Za-z0-9_]*/ ;            (* not a keyword *)
    INTEGER    = /[0-9]+/ ;
    comment    = ( "#" | "//" ) { any character } ;

Keywords: ``alphabet output true false min max Q if else``.  ``-`` directly followed
by an integer is the negative literal (``-3``); ``-(3)`` is the negation of 3.
``#`` is the counting operator where an operand is expected (after ``=``, an
operator, ``(`` or ``,``) and starts a comment everywhere else, i.e. at the
start of a line or after a complete operand; ``//`` always starts a comment.
``#import NAME`` (the peer interpreter's way to bring in a predicate written in
Python) is an error that says how to define the predicate here instead.  The output is the definition
named by the ``output`` line, or else the last definition.  Without an
``alphabet`` line the alphabet is the sorted set of letters used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from verify_tf.crasp.ast import (
    COMPARISON_OPERATORS,
    KEYWORDS,
    MAX_CONSTANT_DIGITS,
    MAX_NESTING,
    ArithOp,
    BoolConst,
    BoolOp,
    Compare,
    Conditional,
    Count,
    CountConst,
    CraspError,
    Definition,
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
    check_definition_name,
    expression_depth,
    format_alphabet,
    require_type,
)
from verify_tf.crasp.positions import (
    COUNTED,
    CURRENT,
    MAX_EXTENT,
    PosBool,
    PosCompare,
    PosConst,
    PosConstBool,
    PosInt,
    PosLogic,
    PosMod,
    PosNot,
    PosScale,
    PosSum,
    PosVar,
    Predicate,
    extent,
)
from verify_tf.userfiles import UserFileError, read_user_text

__all__ = ["load_program", "parse_program"]


_INVISIBLE = {
    "\ufeff": "a byte-order mark (BOM), invisible: save the file as UTF-8 without BOM",
    "\x00": "a NUL byte, invisible",
    "\u200b": "a zero-width space, invisible",
    "\u00a0": "a no-break space",
    "\t": "a tab",
}


def _shown_character(character: str) -> str:
    """``'@'``, or for a character that does not show, its code point and what it is: ``U+FEFF (a byte-order mark
    (BOM), invisible: ...)``."""
    if character in _INVISIBLE:
        return f"U+{ord(character):04X} ({_INVISIBLE[character]})"
    if not character.isprintable() or character.isspace():
        return f"U+{ord(character):04X} (invisible)"
    return f"'{character}'"


def _constant_product(expr: Expr) -> int | None:
    """The value of k1*k2*...*c (nested ``Scale`` of a constant), or None when a count occurs in it."""
    factor = 1
    while isinstance(expr, Scale):
        factor *= expr.factor
        expr = expr.operand
    return factor * expr.value if isinstance(expr, CountConst) else None


def _magnitude(number: int) -> str:
    """``1,000,004`` or ``about 10^999``: a number short enough to quote."""
    digits = len(str(number))
    return f"{number:,}" if digits <= 24 else f"about 10^{digits - 1}"


def parse_program(source: str, filename: str = "<input>") -> Program:
    """Parse and type-check C-RASP ``source``; errors are reported against ``filename``."""
    return _Parser(_tokenize(source, filename), filename).program()


def load_program(path: str | Path) -> Program:
    """Parse and type-check the C-RASP file at ``path``."""
    path = Path(path)
    try:
        source = read_user_text(path, "the program")
    except UserFileError as error:
        raise CraspError(f"cannot read {path}: {error}") from None
    return parse_program(source, path.name)


# --------------------------------------------------------------------------- tokens

NAME, INTEGER, STRING, OPERATOR, NEWLINE = "name", "integer", "letter", "operator", "end of line"


@dataclass(frozen=True)
class _Token:
    """A token and the 1-based line and column where it starts."""

    kind: str
    text: str
    line: int
    column: int

    def describe(self) -> str:
        if self.kind == NEWLINE:
            return "end of line"
        return f'letter "{self.text}"' if self.kind == STRING else f"'{self.text}'"


_TWO_CHARACTER_OPERATORS = ("&&", "||", "<=", ">=", "==", "!=")
_ONE_CHARACTER_OPERATORS = "()?:,!#+-<>=*%[]"
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+")
# After one of these an operand is complete, so a following "#" starts a comment.
_OPERAND_ENDINGS = (NAME, INTEGER, STRING)


def _tokenize(source: str, filename: str) -> list[_Token]:
    """Tokens of every line, each line ending with a NEWLINE token."""
    tokens: list[_Token] = []
    for line_number, line in enumerate(source.splitlines(), start=1):
        line_tokens: list[_Token] = []
        column = 0
        while column < len(line):
            character = line[column]
            position = (line_number, column + 1)
            if character.isspace():
                column += 1
                continue
            if line.startswith("//", column):
                break
            if line.startswith("#import", column) and line[column + 7 : column + 8] in ("", " ", "\t"):
                raise _import_error(line[column + 7 :].split(), filename, *position)
            if character == "#" and _operand_complete(line_tokens):
                break
            if line[column : column + 2] in _TWO_CHARACTER_OPERATORS:
                line_tokens.append(_Token(OPERATOR, line[column : column + 2], *position))
                column += 2
            elif character in _ONE_CHARACTER_OPERATORS:
                line_tokens.append(_Token(OPERATOR, character, *position))
                column += 1
            elif character in "\"'":
                end = line.find(character, column + 1)
                if end < 0:
                    raise CraspError("unterminated letter", hint=f"close it with {character}").located(
                        filename, *position
                    )
                line_tokens.append(_Token(STRING, line[column + 1 : end], *position))
                column = end + 1
            elif match := _WORD.match(line, column):
                kind = INTEGER if match.group().isdigit() else NAME
                line_tokens.append(_Token(kind, match.group(), *position))
                column = match.end()
            else:
                hint = {"&": "'and' is written &&", "|": "'or' is written ||"}.get(character)
                raise CraspError(f"unexpected character {_shown_character(character)}", hint=hint).located(
                    filename, *position
                )
        tokens += line_tokens
        tokens.append(_Token(NEWLINE, "", line_number, len(line) + 1))
    return tokens


def _import_error(words: list[str], filename: str, line: int, column: int) -> CraspError:
    name = words[0] if words else "NAME"
    return CraspError(
        f"imports are not supported; define {name} with a positional predicate in this file",
        hint=(
            f"write {name}(i) = i % 2 == 0 for a unary one (a boolean at each position i) or "
            f"{name}(i, j) = j == i - 1 for a binary one (a guard: #[{name}] P counts the j <= i where it "
            'holds); positions count from 0 (docs/crasp.md, "Positions")'
        ),
        filename=filename,
        line=line,
        column=column,
    )


def _operand_complete(line_tokens: list[_Token]) -> bool:
    if not line_tokens:
        return True
    last = line_tokens[-1]
    return last.kind in _OPERAND_ENDINGS or last.text == ")"


# --------------------------------------------------------------------------- parser


class _Located(NamedTuple):
    """A parsed expression with the position where its source text starts."""

    expr: Expr
    line: int
    column: int


class _Defined(NamedTuple):
    """Where a definition is and what type it has."""

    line: int
    type: Type


class _Parser:
    """Recursive descent over the tokens, one method per grammar rule, type-checking as it builds."""

    def __init__(self, tokens: list[_Token], filename: str) -> None:
        self.tokens = tokens
        self.filename = filename
        self.index = 0
        self.declared_alphabet: tuple[str, ...] | None = None
        self.letters_used: set[str] = set()
        self.definitions: list[Definition] = []
        self.defined: dict[str, _Defined] = {}
        self.predicates: dict[str, Predicate] = {}
        self.predicate_lines: dict[str, int] = {}
        self.output: _Token | None = None
        self.nesting = 0  # open parentheses and prefix operators around the current token

    def nest(self, token: _Token) -> None:
        """One level deeper (a parenthesis or a prefix operator): refused past MAX_NESTING, before Python's own
        recursion limit could be hit."""
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise self.error(
                token,
                f"the expression nests deeper than {MAX_NESTING} levels",
                "split it into several definitions (docs/crasp.md, limits)",
            )

    # ----- helpers

    @property
    def current(self) -> _Token:
        return self.tokens[self.index]

    def advance(self) -> _Token:
        token = self.tokens[self.index]
        if token.kind != NEWLINE:
            self.index += 1
        return token

    def at(self, text: str) -> bool:
        return self.current.kind in (OPERATOR, NAME) and self.current.text == text

    def error(self, token: _Token | _Located, message: str, hint: str | None = None) -> CraspError:
        return CraspError(message, hint=hint, filename=self.filename, line=token.line, column=token.column)

    def expect(self, text: str, hint: str | None = None) -> _Token:
        if not self.at(text):
            raise self.error(self.current, f"expected '{text}', got {self.current.describe()}", hint)
        return self.advance()

    def require(self, operand: _Located, expected: Type) -> Expr:
        try:
            require_type(operand.expr, expected)
        except CraspError as error:
            raise error.located(self.filename, operand.line, operand.column) from None
        return operand.expr

    # ----- statements

    def program(self) -> Program:
        while self.index < len(self.tokens):
            if self.current.kind != NEWLINE:
                self.statement()
                if self.current.kind != NEWLINE:
                    unexpected = self.current.describe()
                    raise self.error(self.current, f"unexpected {unexpected} after the end of the statement")
            self.index += 1
        if not self.definitions:
            raise CraspError(
                "the program has no definitions",
                hint='add one, e.g. na = #"a"',
                filename=self.filename,
                line=1,
                column=1,
            )
        alphabet = self.declared_alphabet
        if alphabet is None:
            alphabet = tuple(sorted(self.letters_used))
        return Program(tuple(self.definitions), self.output_name(), alphabet, tuple(self.predicates.values()))

    def statement(self) -> None:
        token = self.current
        if token.kind == NAME and token.text == "alphabet":
            self.alphabet_line()
        elif token.kind == NAME and token.text == "output":
            self.output_line()
        elif token.kind == NAME and self.tokens[self.index + 1].text == "(":
            self.predicate_definition()
        elif token.kind == NAME:
            self.definition()
        else:
            raise self.error(token, f"expected a definition 'name = expression', got {token.describe()}")

    def alphabet_line(self) -> None:
        keyword = self.advance()
        if self.declared_alphabet is not None:
            raise self.error(keyword, "the alphabet is declared twice")
        if self.definitions:
            raise self.error(keyword, "the alphabet line must come before the definitions")
        symbols: list[str] = []
        while self.current.kind != NEWLINE:
            token = self.current
            symbol = self.symbol()
            if symbol in symbols:
                raise self.error(token, f"letter '{symbol}' is listed twice in the alphabet")
            symbols.append(symbol)
        if not symbols:
            raise self.error(keyword, "the alphabet line lists no letters", "e.g. alphabet a b")
        self.declared_alphabet = tuple(symbols)

    def output_line(self) -> None:
        keyword = self.advance()
        if self.output is not None:
            raise self.error(keyword, f"the output is already declared on line {self.output.line}")
        if self.current.kind != NAME:
            raise self.error(self.current, f"expected the name of the output definition, got {self.current.describe()}")
        self.output = self.advance()

    def output_name(self) -> str:
        if self.output is None:
            token = None
            name = self.definitions[-1].name
        else:
            token = self.output
            name = token.text
            if name not in self.defined:
                raise self.error(token, f"the output '{name}' is not defined")
        if self.defined[name].type is not Type.BOOL:
            line = self.defined[name].line if token is None else token.line
            column = 1 if token is None else token.column
            raise CraspError(
                f"the output '{name}' must be boolean, but it is a count",
                hint=f"compare it, e.g. {name} > 0, or choose a boolean definition with 'output NAME'",
                filename=self.filename,
                line=line,
                column=column,
            )
        return name

    def definition(self) -> None:
        name = self.new_name()
        self.expect("=", hint="a definition is written name = expression")
        start = self.current
        expr = self.expr().expr
        if expression_depth(expr) > MAX_NESTING:  # long operator chains build deep trees without recursing here
            raise self.error(
                start,
                f"the expression nests deeper than {MAX_NESTING} levels (a chain of operators counts one per operator)",
                "split it into several definitions (docs/crasp.md, limits)",
            )
        self.definitions.append(Definition(name.text, expr))
        self.defined[name.text] = _Defined(name.line, expr.type)

    def new_name(self) -> _Token:
        """The name token of a new definition or predicate, checked."""
        name = self.advance()
        try:
            check_definition_name(name.text)
        except CraspError as error:
            raise error.located(self.filename, name.line, name.column) from None
        line = self.defined[name.text].line if name.text in self.defined else self.predicate_lines.get(name.text)
        if line is not None:
            raise self.error(
                name,
                f"'{name.text}' is already defined on line {line}",
                "choose a new name; definitions cannot be reassigned",
            )
        return name

    # ----- positional predicates

    def predicate_definition(self) -> None:
        name = self.new_name()
        self.expect("(")
        parameters: list[_Token] = []
        while True:
            token = self.current
            if token.kind != NAME or token.text in KEYWORDS:
                raise self.error(token, f"expected a parameter name, got {token.describe()}", "e.g. pred(i, j)")
            if any(p.text == token.text for p in parameters):
                raise self.error(token, f"the parameter '{token.text}' is listed twice")
            parameters.append(self.advance())
            if not self.at(","):
                break
            self.advance()
        self.expect(")", hint="a predicate has one parameter (the position i) or two (i and the counted j)")
        if len(parameters) > 2:
            raise self.error(
                parameters[2], "a positional predicate has one or two parameters: (i) or (i, j)", "e.g. pred(i, j)"
            )
        self.expect("=", hint=f"a predicate is written {name.text}(i, j) = condition")
        start, first = self.current, self.index
        body = _PositionParser(self, tuple(p.text for p in parameters)).condition()
        operators = sum(1 for token in self.tokens[first : self.index] if token.kind == OPERATOR)
        if operators > MAX_NESTING:  # the body's tree is at most this deep; every later stage recurses over it
            raise self.error(
                start,
                f"the condition has {operators} operators; at most {MAX_NESTING} are allowed",
                "split the condition or simplify it (docs/crasp.md, limits)",
            )
        settles = extent(body)
        if settles > MAX_EXTENT:  # by formula: the compiler and the engines tabulate this many positions
            raise self.error(
                start,
                f"the condition settles only after {_magnitude(settles)} positions (its largest offset over its "
                f"coefficient, plus the period of its remainders); at most {MAX_EXTENT} (the longest input)",
                "the compiler and the counting engine tabulate a predicate until it settles: write smaller "
                "offsets or moduli (docs/crasp.md, limits)",
            )
        where = f"{self.filename}:{name.line}"
        predicate = Predicate(name.text, tuple(p.text for p in parameters), body, where, name.line)
        self.predicates[name.text] = predicate
        self.predicate_lines[name.text] = name.line

    # ----- expressions, lowest precedence first

    def expr(self) -> _Located:
        condition = self.or_expr()
        if self.at("if"):
            return self.python_conditional(condition)
        if not self.at("?"):
            return condition
        self.advance()
        if_true = self.expr()
        self.expect(":", hint="a conditional is written condition ? count : count")
        if_false = self.expr()
        expr = Conditional(
            self.require(condition, Type.BOOL), self.require(if_true, Type.COUNT), self.require(if_false, Type.COUNT)
        )
        return _Located(expr, condition.line, condition.column)

    def python_conditional(self, if_true: _Located) -> _Located:
        """``count if condition else count`` (the peer interpreter's spelling of ``condition ? count : count``)."""
        self.advance()
        condition = self.or_expr()
        self.expect("else", hint="a conditional is written count if condition else count")
        if_false = self.expr()
        expr = Conditional(
            self.require(condition, Type.BOOL), self.require(if_true, Type.COUNT), self.require(if_false, Type.COUNT)
        )
        return _Located(expr, if_true.line, if_true.column)

    # or_expr and and_expr each loop in place (no shared helper taking a parser): every nesting level costs one
    # Python frame per precedence level, and MAX_NESTING levels must fit in the interpreter's recursion limit
    def or_expr(self) -> _Located:
        left = self.and_expr()
        while self.at("||"):
            self.advance()
            left = self.bool_op("||", left, self.and_expr())
        return left

    def and_expr(self) -> _Located:
        left = self.comparison()
        while self.at("&&"):
            self.advance()
            left = self.bool_op("&&", left, self.comparison())
        return left

    def bool_op(self, op: str, left: _Located, right: _Located) -> _Located:
        expr = BoolOp(op, self.require(left, Type.BOOL), self.require(right, Type.BOOL))
        return _Located(expr, left.line, left.column)

    def comparison(self) -> _Located:
        left = self.sum()
        if self.current.kind != OPERATOR or self.current.text not in COMPARISON_OPERATORS:
            return left
        op = self.advance().text
        right = self.sum()
        if self.current.kind == OPERATOR and self.current.text in COMPARISON_OPERATORS:
            raise self.error(self.current, "comparisons do not chain", "combine two comparisons with &&")
        expr = Compare(op, self.require(left, Type.COUNT), self.require(right, Type.COUNT))
        return _Located(expr, left.line, left.column)

    def sum(self) -> _Located:
        left = self.product()
        while self.at("+") or self.at("-"):
            op = self.advance().text
            right = self.product()
            expr = ArithOp(op, self.require(left, Type.COUNT), self.require(right, Type.COUNT))
            left = _Located(expr, left.line, left.column)
        return left

    def product(self) -> _Located:
        left = self.unary()
        while self.at("*"):
            star = self.advance()
            right = self.unary()
            left = _Located(self.multiple(left, right, star), left.line, left.column)
        return left

    def multiple(self, left: _Located, right: _Located, star: _Token) -> Expr:
        """k*C or C*k for an integer constant k: multiplication by a constant only (counts stay linear)."""
        for factor, operand in ((left, right), (right, left)):
            if isinstance(factor.expr, CountConst):  # not folded when both are: the printer round-trips
                return Scale(factor.expr.value, self.require(operand, Type.COUNT))
        for factor, operand in ((left, right), (right, left)):
            constant = _constant_product(factor.expr)
            if constant is not None:  # 3*2*C reads (3*2)*C: the constant product is a constant, as in 3*(2*C)
                return Scale(self.folded(constant, star), self.require(operand, Type.COUNT))
        raise self.error(
            star,
            "counts are multiplied by integer constants only",
            "write k*C with an integer k, e.g. 2*num; the product of two counts is not C-RASP",
        )

    def unary(self) -> _Located:
        token = self.current
        if self.at("-") and self.tokens[self.index + 1].kind == INTEGER:
            self.advance()
            return _Located(CountConst(-self.integer(self.advance())), token.line, token.column)
        if not (self.at("!") or self.at("-") or self.at("#")):
            return self.atom()
        self.nest(token)
        try:
            return self.prefixed(token)
        finally:
            self.nesting -= 1

    def prefixed(self, token: _Token) -> _Located:
        if self.at("!"):
            self.advance()
            expr: Expr = Not(self.require(self.unary(), Type.BOOL))
        elif self.at("-"):
            self.advance()
            expr = Neg(self.require(self.unary(), Type.COUNT))
        else:
            self.advance()
            if self.at("["):
                guard = self.guard()
                expr = GuardedCount(guard, self.require(self.unary(), Type.BOOL))
            else:
                expr = Count(self.require(self.unary(), Type.BOOL))
        return _Located(expr, token.line, token.column)

    def integer(self, token: _Token) -> int:
        if len(token.text) > MAX_CONSTANT_DIGITS:
            raise self.error(
                token,
                f"a constant of {len(token.text)} digits; at most {MAX_CONSTANT_DIGITS} are allowed",
                "counts never come near such numbers (docs/crasp.md, limits)",
            )
        return int(token.text)

    def folded(self, number: int, token: _Token) -> int:
        """A product of constants, within the constants' limit."""
        if len(str(abs(number))) > MAX_CONSTANT_DIGITS:
            raise self.error(token, f"a product of constants with more than {MAX_CONSTANT_DIGITS} digits")
        return number

    def guard(self) -> Predicate:
        """``[NAME]`` after ``#``: a binary predicate defined earlier."""
        self.advance()
        token = self.current
        if token.kind != NAME:
            raise self.error(token, f"expected the name of a binary predicate, got {token.describe()}")
        self.advance()
        predicate = self.predicates.get(token.text)
        if predicate is None:
            hint = f"define it first, e.g. {token.text}(i, j) = j == i - 1 (positions count from 0)"
            raise self.error(token, f"undefined predicate '{token.text}'", hint)
        if predicate.arity != 2:
            raise self.error(
                token,
                f"'{token.text}' is unary; a guard relates the current position i and the counted j",
                f"use it as a boolean, e.g. #({token.text} && P), or define a binary predicate",
            )
        self.expect("]", hint="a guarded count is written #[pred] P")
        return predicate

    def atom(self) -> _Located:
        token = self.current
        if token.kind == STRING:
            return _Located(self.letter(), token.line, token.column)
        if token.kind == INTEGER:
            self.advance()
            return _Located(CountConst(self.integer(token)), token.line, token.column)
        if self.at("("):
            self.nest(token)
            self.advance()
            inner = self.expr()
            self.expect(")")
            self.nesting -= 1
            return _Located(inner.expr, token.line, token.column)
        if token.kind == NAME:
            return _Located(self.named_atom(), token.line, token.column)
        raise self.error(token, f"expected an expression, got {token.describe()}")

    def named_atom(self) -> Expr:
        token = self.current
        if token.text in ("true", "false"):
            self.advance()
            return BoolConst(token.text == "true")
        if token.text == "Q":
            return self.letter()
        if token.text in ("min", "max"):
            self.advance()
            self.expect("(", hint=f"write {token.text}(count, count)")
            left = self.expr()
            self.expect(",", hint=f"write {token.text}(count, count)")
            right = self.expr()
            self.expect(")")
            return MinMax(token.text, self.require(left, Type.COUNT), self.require(right, Type.COUNT))
        if token.text in KEYWORDS:
            raise self.error(token, f"'{token.text}' is a reserved word and cannot be used here")
        self.advance()
        predicate = self.predicates.get(token.text)
        if predicate is not None:
            if predicate.arity != 1:
                raise self.error(
                    token,
                    f"'{token.text}' relates two positions; it guards a count",
                    f"write #[{token.text}] P to count the j <= i where it holds",
                )
            return PositionTest(predicate)
        if token.text not in self.defined:
            if len(token.text) == 1:
                hint = f'to test for the letter {token.text}, write "{token.text}"'
            else:
                hint = "names must be defined on an earlier line"
            raise self.error(token, f"undefined name '{token.text}'", hint)
        return Ref(token.text, self.defined[token.text].type)

    def letter(self) -> Letter:
        """A letter test, written "a" or Q(a)."""
        if self.at("Q"):
            self.advance()
            self.expect("(", hint='a letter test is written Q(a) or "a"')
            token = self.current
            symbol = self.symbol()
            self.expect(")")
        else:
            token = self.current
            symbol = self.symbol()
        if self.declared_alphabet is not None and symbol not in self.declared_alphabet:
            raise self.error(
                token,
                f"letter '{symbol}' is not in the alphabet {format_alphabet(self.declared_alphabet)}",
                "add it to the alphabet line",
            )
        self.letters_used.add(symbol)
        return Letter(symbol)

    def symbol(self) -> str:
        """One alphabet symbol: a quoted character or a one-character name or digit."""
        token = self.current
        if token.kind not in (STRING, NAME, INTEGER):
            raise self.error(token, f"expected a letter, got {token.describe()}")
        try:
            Letter(token.text)
        except CraspError as error:
            raise error.located(self.filename, token.line, token.column) from None
        return self.advance().text


# --------------------------------------------------------------------------- positional conditions


class _PositionParser:
    """The body of a positional predicate: integer terms over its parameters, compared and combined.

    Same tokens and precedence as C-RASP expressions (``||`` < ``&&`` < comparisons < ``+ -`` < ``* %`` <
    unary ``! -``), typed as it parses: a comparison joins two integer terms, ``! && ||`` join conditions.
    """

    def __init__(self, parser: _Parser, parameters: tuple[str, ...]) -> None:
        self.p = parser
        self.roles = {name: role for name, role in zip(parameters, (CURRENT, COUNTED))}

    def condition(self) -> PosBool:
        token = self.p.current
        node = self.or_()
        if not isinstance(node, PosBool):
            raise self.p.error(token, "a predicate must be a condition", "compare positions, e.g. i % 2 == 0")
        return node

    def _bool(self, node: PosBool | PosInt, token: _Token) -> PosBool:
        if not isinstance(node, PosBool):
            raise self.p.error(token, "expected a condition, got an integer term", "compare it, e.g. i - j == 1")
        return node

    def _int(self, node: PosBool | PosInt, token: _Token) -> PosInt:
        if not isinstance(node, PosInt):
            raise self.p.error(token, "expected an integer term, got a condition")
        return node

    def or_(self) -> PosBool | PosInt:
        token = self.p.current
        left = self.and_()
        while self.p.at("||"):
            self.p.advance()
            right_token = self.p.current
            left = PosLogic("||", self._bool(left, token), self._bool(self.and_(), right_token))
        return left

    def and_(self) -> PosBool | PosInt:
        token = self.p.current
        left = self.comparison()
        while self.p.at("&&"):
            self.p.advance()
            right_token = self.p.current
            left = PosLogic("&&", self._bool(left, token), self._bool(self.comparison(), right_token))
        return left

    def comparison(self) -> PosBool | PosInt:
        token = self.p.current
        left = self.sum()
        current = self.p.current
        if current.kind != OPERATOR or current.text not in COMPARISON_OPERATORS:
            return left
        op = self.p.advance().text
        right_token = self.p.current
        right = self.sum()
        nxt = self.p.current
        if nxt.kind == OPERATOR and nxt.text in COMPARISON_OPERATORS:
            raise self.p.error(nxt, "comparisons do not chain", "combine two comparisons with &&")
        return PosCompare(op, self._int(left, token), self._int(right, right_token))

    def sum(self) -> PosBool | PosInt:
        token = self.p.current
        left = self.product()
        while self.p.at("+") or self.p.at("-"):
            op = self.p.advance().text
            right_token = self.p.current
            left = PosSum(op, self._int(left, token), self._int(self.product(), right_token))
        return left

    def product(self) -> PosBool | PosInt:
        token = self.p.current
        left = self.unary()
        while self.p.at("*") or self.p.at("%"):
            op = self.p.advance()
            right_token = self.p.current
            right = self._int(self.unary(), right_token)
            term = self._int(left, token)
            if op.text == "%":
                if not isinstance(right, PosConst) or right.number < 1:
                    raise self.p.error(right_token, "the modulus must be a positive integer constant", "e.g. i % 2")
                left = PosMod(term, right.number)
            elif isinstance(term, PosConst) and isinstance(right, PosConst):  # 3*2*i reads (3*2)*i: fold 3*2
                left = PosConst(self.p.folded(term.number * right.number, op))
            elif isinstance(term, PosConst):
                left = PosScale(term.number, right)
            elif isinstance(right, PosConst):
                left = PosScale(right.number, term)
            else:
                raise self.p.error(op, "positions are multiplied by integer constants only", "e.g. 2*j <= i")
        return left

    def unary(self) -> PosBool | PosInt:
        token = self.p.current
        if not (self.p.at("!") or self.p.at("-")):
            return self.atom()
        self.p.nest(token)
        try:
            self.p.advance()
            if token.text == "!":
                return PosNot(self._bool(self.unary(), self.p.current))
            operand = self._int(self.unary(), token)
            return PosConst(-operand.number) if isinstance(operand, PosConst) else PosScale(-1, operand)
        finally:
            self.p.nesting -= 1

    def atom(self) -> PosBool | PosInt:
        token = self.p.current
        if token.kind == INTEGER:
            self.p.advance()
            return PosConst(self.p.integer(token))
        if self.p.at("("):
            self.p.nest(token)
            self.p.advance()
            inner = self.or_()
            self.p.expect(")")
            self.p.nesting -= 1
            return inner
        if token.kind == NAME and token.text in ("true", "false"):
            self.p.advance()
            return PosConstBool(token.text == "true")
        if token.kind == NAME and token.text in self.roles:
            self.p.advance()
            return PosVar(self.roles[token.text])
        if token.kind == NAME:
            names = " and ".join(self.roles)
            raise self.p.error(
                token,
                f"'{token.text}' is not a parameter of this predicate",
                f"a predicate speaks about its parameters ({names}) and integer constants only",
            )
        raise self.p.error(token, f"expected a condition over positions, got {token.describe()}")

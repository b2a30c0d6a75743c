"""The tabulated RASP interpreter's rules as z3 terms over a symbolic string: every SOp's code at every position.

A position's symbol is an index variable into the domain's alphabet (``symbolic.inputs.string_input``). Codes
are integer terms (or Python ints where the value is known); a table lookup is an ite chain; a select is a
disjunction over the (key code, query code) pairs its predicate holds on; a mean is a case split on the number
of selected keys, so everything stays linear. Where the program is undefined (a function raised, a mean of
non-numbers) the condition is collected in ``undefined``: the property lets the solver find such an input,
whose replay then reports the program's error. Used by the ``smt`` engine of ``rasp-equivalence``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import z3

from .program import RAISED, Node, RaspProgram, Value, canonical, is_number

Code = Any  # int or z3 ArithRef


def _lookup(table: Sequence[int], code: Code) -> Code:
    if isinstance(code, int):
        return table[code]
    if len(set(table)) == 1:
        return table[0]
    out: Code = z3.IntVal(table[-1])
    for c in range(len(table) - 2, -1, -1):
        out = z3.If(code == c, table[c], out)
    return out


def _is(code: Code, value: int) -> Any:
    return z3.BoolVal(code == value) if isinstance(code, int) else code == value


def _any(terms: list) -> Any:
    terms = [t for t in terms if not z3.is_false(t)]
    if any(z3.is_true(t) for t in terms):
        return z3.BoolVal(True)
    return z3.Or(terms) if terms else z3.BoolVal(False)


class _Encoder:
    def __init__(self, program: RaspProgram, inp: Any, alphabet_values: Sequence[Value], tick: Any = None):
        self.program, self.inp, self.tick = program, inp, tick or (lambda: None)
        self.alphabet_values = list(alphabet_values)
        self.length = len(inp.tokens)
        self.codes: dict[str, list[Code]] = {}
        self.selectors: dict[str, list[list[Any]]] = {}
        self.undefined: list[Any] = []

    def run(self) -> None:
        for node in self.program.nodes:
            self.tick()  # the property's deadline bounds the encoding too
            args = [self.codes[i] if i in self.codes else self.selectors[i] for i in node.inputs]
            if node.is_selector:
                self.selectors[node.label] = self.selector(node, args)
            else:
                self.codes[node.label] = self.sop(node, args)

    def token_code(self, token: Any, tokens_node: Node) -> Code:
        table = [tokens_node.code_of[v] for v in self.alphabet_values]
        if token.symbol is not None:
            return tokens_node.code_of[self.alphabet_values[list(token.alphabet).index(token.symbol)]]
        return _lookup(table, token.symbol_index)

    def raised(self, table: Sequence[int], code: Code) -> Any:
        bad = [c for c, t in enumerate(table) if t == RAISED]
        return _any([_is(code, c) for c in bad])

    def sop(self, node: Node, args: list) -> list[Code]:
        n = self.length
        kind = node.kind
        if kind == "tokens":
            return [self.token_code(t, node) for t in self.inp.tokens]
        if kind == "indices":
            return list(range(n))
        if kind == "length":
            return [n - 1] * n
        if kind == "full":
            return [0] * n
        if kind == "map":
            out = []
            for code in args[0]:
                self.undefined.append(self.raised(node.table, code))
                out.append(_lookup([max(t, 0) for t in node.table], code))
            return out
        if kind == "sequence_map":
            rows = [[max(t, 0) for t in row] for row in node.table]
            out = []
            for a, b in zip(args[0], args[1]):
                self.undefined.append(
                    _any([z3.And(_is(a, i), self.raised(row, b)) for i, row in enumerate(node.table) if RAISED in row])
                )
                out.append(_lookup(rows[a], b) if isinstance(a, int) else self._lookup2(rows, a, b))
            return out
        if kind == "selector_width":
            return [z3.Sum([z3.If(s, 1, 0) for s in row]) if row else 0 for row in args[0]]
        if kind == "aggregate":
            return [self.aggregate(node, row, args[1]) for row in args[0]]
        raise ValueError(f"unknown kind {kind!r}")

    @staticmethod
    def _lookup2(rows: list[list[int]], a: Code, b: Code) -> Code:
        out: Code = _lookup(rows[-1], b)
        for i in range(len(rows) - 2, -1, -1):
            out = z3.If(a == i, _lookup(rows[i], b), out)
        return out

    def selector(self, node: Node, args: list) -> list[list[Any]]:
        if node.kind == "select":
            keys, queries = args
            return [[self.select(node, k, q) for k in keys] for q in queries]
        if node.kind == "selector_not":
            return [[z3.Not(x) for x in row] for row in args[0]]
        both = z3.And if node.kind == "selector_and" else z3.Or
        return [[both(a, b) for a, b in zip(ra, rb)] for ra, rb in zip(args[0], args[1])]

    def select(self, node: Node, key: Code, query: Code) -> Any:
        self.tick()
        chosen, raised = [], []
        for kc, row in enumerate(node.table):
            holds = [qc for qc, x in enumerate(row) if x == 1]
            bad = [qc for qc, x in enumerate(row) if x == RAISED]
            if holds:
                chosen.append(z3.And(_is(key, kc), _any([_is(query, qc) for qc in holds])))
            if bad:
                raised.append(z3.And(_is(key, kc), _any([_is(query, qc) for qc in bad])))
        self.undefined.append(_any(raised))
        return z3.simplify(_any(chosen))

    def aggregate(self, node: Node, row: list[Any], source_codes: list[Code]) -> Code:
        source = self.program.node(node.inputs[1])
        count = z3.Sum([z3.If(s, 1, 0) for s in row]) if row else z3.IntVal(0)
        single = [node.code_of.get(canonical(v, node.numerical), RAISED) for v in source.values]
        picked = z3.Sum([z3.If(s, _lookup([max(x, 0) for x in single], c), 0) for s, c in zip(row, source_codes)])
        self.undefined.append(
            z3.And(count == 1, _any([z3.And(s, self.raised(single, c)) for s, c in zip(row, source_codes)]))
        )
        numeric = [is_number(v) for v in source.values]
        fractions = [Fraction(v) if ok else Fraction(0) for v, ok in zip(source.values, numeric)]
        den = math.lcm(*(f.denominator for f in fractions))
        numerators = [int(f * den) for f in fractions]
        total = (
            z3.Sum([z3.If(s, _lookup(numerators, c), 0) for s, c in zip(row, source_codes)]) if row else z3.IntVal(0)
        )
        non_numeric = _any(
            [
                z3.And(s, _is(c, i)) if isinstance(c, int) else z3.And(s, c == i)
                for s, c in zip(row, source_codes)
                for i, ok in enumerate(numeric)
                if not ok
            ]
        )
        mean: Code = z3.IntVal(RAISED)
        for m in range(len(row), 1, -1):
            for c, value in enumerate(node.values):
                scaled = Fraction(value) * m * den if is_number(value) else None
                if scaled is not None and scaled.denominator == 1:  # else no m numbers of this node average to it
                    mean = z3.If(z3.And(count == m, total == int(scaled)), c, mean)
        self.undefined.append(z3.And(count >= 2, z3.Or(non_numeric, mean == RAISED)))
        return z3.If(count == 0, node.default, z3.If(count == 1, picked, mean))


def program_outputs_symbolic(
    program: RaspProgram, inp: Any, alphabet_values: Sequence[Value], tick: Any = None
) -> tuple[list[Code], Any]:
    """The output node's code at every position of a symbolic string, and the condition under which the
    program is undefined somewhere. ``alphabet_values[i]`` is the vocabulary value of the domain's i-th symbol;
    ``tick()`` is called as the encoding proceeds (``Builder.tick``: it raises once the deadline passes)."""
    encoder = _Encoder(program, inp, alphabet_values, tick)
    encoder.run()
    return encoder.codes[program.output], _any(encoder.undefined)

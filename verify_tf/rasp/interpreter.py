"""The exact interpreter of tabulated RASP programs: one input, every node's value at every position.

It follows tracr's ``rasp.evaluate`` (``DefaultRASPEvaluator``) operation by operation, with exact rationals
where RASP computes in floats: a numerical mean of 0/1 values over 3 positions is 2/3, not 0.666...
``tests/test_tracr.py`` checks it against ``rasp.evaluate`` on every input up to the maximum length of every
tracr library program.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from .program import RAISED, Node, RaspError, RaspProgram, Value, canonical, is_number, show


@dataclass
class ProgramTrace:
    tokens: tuple[Value, ...]
    codes: dict[str, list[int]]  # SOp label -> the code of its value at each position
    selectors: dict[str, list[list[bool]]]  # selector label -> [query][key]
    program: RaspProgram

    def values(self, label: str) -> list[Value]:
        node = self.program.node(label)
        return [node.values[c] for c in self.codes[label]]

    @property
    def output(self) -> list[Value]:
        return self.values(self.program.output)


def tokens_from_symbols(program: RaspProgram, symbols: Sequence[str]) -> tuple[Value, ...]:
    """Alphabet symbols (as the model reads them) -> the vocabulary values the program reads."""
    from .program import symbol_of

    by_symbol = {symbol_of(v): v for v in program.vocabulary}
    try:
        return tuple(by_symbol[s] for s in symbols)
    except KeyError as exc:
        raise RaspError(f"symbol {exc.args[0]!r} is not in the program's vocabulary") from None


def run(program: RaspProgram, tokens: Sequence[Value]) -> ProgramTrace:
    """Evaluate every node on ``tokens`` (vocabulary values). Raises ``RaspError`` where RASP is undefined."""
    n = len(tokens)
    if n > program.max_length:
        raise RaspError(f"input of length {n} exceeds the program's tabulated maximum length {program.max_length}")
    codes: dict[str, list[int]] = {}
    selectors: dict[str, list[list[bool]]] = {}
    for node in program.nodes:
        args = [codes.get(i) if i in codes else selectors.get(i) for i in node.inputs]
        if node.is_selector:
            selectors[node.label] = _selector(program, node, args)
        else:
            codes[node.label] = _sop(program, node, args, tokens)
    return ProgramTrace(tuple(tokens), codes, selectors, program)


def _sop(program: RaspProgram, node: Node, args: list, tokens: Sequence[Value]) -> list[int]:
    n = len(tokens)
    if node.kind == "tokens":
        try:
            return [node.code_of[t] for t in tokens]
        except KeyError as exc:
            raise RaspError(f"token {exc.args[0]!r} is not in the vocabulary {list(node.values)}") from None
    if node.kind == "indices":
        return list(range(n))
    if node.kind == "length":
        return [n - 1] * n
    if node.kind == "full":
        return [0] * n
    if node.kind == "map":
        out = [node.table[c] for c in args[0]]
        _check_raised(program, node, out, lambda p: show(program.node(node.inputs[0]).values[args[0][p]]))
        return out
    if node.kind == "sequence_map":
        out = [node.table[a][b] for a, b in zip(args[0], args[1])]
        first, second = (program.node(i) for i in node.inputs)
        _check_raised(
            program, node, out, lambda p: f"{show(first.values[args[0][p]])}, {show(second.values[args[1][p]])}"
        )
        return out
    if node.kind == "selector_width":
        return [sum(row) for row in args[0]]
    if node.kind == "aggregate":
        source = program.node(node.inputs[1])
        return [
            aggregate_code(node, [source.values[c] for c, chosen in zip(args[1], row) if chosen]) for row in args[0]
        ]
    raise RaspError(f"node {node.label!r}: unknown kind {node.kind!r}")


def aggregate_code(node: Node, selected: Sequence[Value]) -> int:
    """RASP's ``_mean``: the default for none, the value itself for one, the mean of several numbers."""
    if not selected:
        return node.default
    if len(selected) == 1:
        value = canonical(selected[0], node.numerical)
    elif all(is_number(v) for v in selected):
        value = canonical(sum((Fraction(v) for v in selected), Fraction(0)) / len(selected), node.numerical)
    else:
        raise RaspError(
            f"aggregate {node.label!r}: the mean of {', '.join(show(v) for v in selected)} is undefined "
            "(RASP averages numbers only)"
        )
    code = node.code_of.get(value)
    if code is None:
        raise RaspError(f"aggregate {node.label!r}: value {show(value)} is not in its tabulated value set")
    return code


def _selector(program: RaspProgram, node: Node, args: list) -> list[list[bool]]:
    if node.kind == "select":
        keys, queries = args
        rows = [[node.table[k][q] for k in keys] for q in queries]
        if any(RAISED in row for row in rows):
            i = next(i for i, row in enumerate(rows) if RAISED in row)
            j = rows[i].index(RAISED)
            key_node, query_node = (program.node(x) for x in node.inputs)
            raise RaspError(
                f"select {node.label!r}: the predicate raised on key {show(key_node.values[keys[j]])}, "
                f"query {show(query_node.values[queries[i]])}"
            )
        return [[bool(x) for x in row] for row in rows]
    if node.kind == "selector_not":
        return [[not x for x in row] for row in args[0]]
    combine = (lambda a, b: a and b) if node.kind == "selector_and" else (lambda a, b: a or b)
    return [[combine(a, b) for a, b in zip(ra, rb)] for ra, rb in zip(args[0], args[1])]


def _check_raised(program: RaspProgram, node: Node, out: list[int], shown) -> None:
    if RAISED in out:
        position = out.index(RAISED)
        raise RaspError(f"{node.kind} {node.label!r}: the function raised on {shown(position)} (position {position})")

"""A RASP program as plain data: a DAG of operations whose functions are tables over finite value sets.

A RASP program (tracr's ``rasp`` module) holds Python functions, so it cannot be stored or loaded without
running code. ``verify_tf.tracr_export`` turns one into this form, where every function is replaced by its
table over the finite set of values its inputs can take (up to the program's maximum length):

* every sequence operation (SOp) node has a ``values`` list; a position's value is a *code*, an index into
  that list. ``tokens`` lists the vocabulary, ``indices`` 0..N-1, ``selector_width`` 0..N;
* ``map``: ``table[c]`` is the output code for input code ``c``; ``sequence_map``: ``table[c1][c2]``;
  ``select``: ``table[key code][query code]`` is 1 (selected), 0, or ``RAISED`` (the predicate raised);
* ``aggregate``: the mean of the selected values (RASP's ``_mean``: the default when nothing is selected,
  the value itself when one is, the arithmetic mean of numbers otherwise), looked up in ``values``.

``RAISED`` (-1) in a table marks a value on which the user's function raised an exception: reaching it is an
error of the program (RASP's own evaluator would raise there too), never a value.

Values are canonical Python values: ``str``, ``int``, ``bool``, ``None`` (RASP's "undefined"), tuples, and
``Fraction`` for non-integral numbers. Numerical nodes hold ``Fraction``s (and possibly ``None``). The JSON
form writes each value typed: ``["str", "a"]``, ``["int", 3]``, ``["bool", true]``, ``["frac", "2/3"]``,
``["none", null]``, ``["tuple", [...]]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import Any

from ..domain import MAX_LENGTH

Value = Any  # str | int | bool | Fraction | None | tuple
RAISED = -1

SOP_KINDS = ("tokens", "indices", "length", "full", "map", "sequence_map", "selector_width", "aggregate")
SELECTOR_KINDS = ("select", "selector_and", "selector_or", "selector_not")
KINDS = SOP_KINDS + SELECTOR_KINDS
ARITY = {
    "tokens": 0,
    "indices": 0,
    "length": 0,
    "full": 0,
    "map": 1,
    "sequence_map": 2,
    "selector_width": 1,
    "aggregate": 2,
    "select": 2,
    "selector_and": 2,
    "selector_or": 2,
    "selector_not": 1,
}
ENCODINGS = ("categorical", "numerical")


class ProgramError(ValueError):
    """A program document that is not a well-formed tabulated RASP program (the message says where)."""


class RaspError(Exception):
    """The RASP program itself is undefined on an input (a function raised, a mean of non-numbers)."""


# ---------------------------------------------------------------- values


def is_number(value: Value) -> bool:
    return isinstance(value, (int, bool, Fraction)) and value is not None


def canonical(value: Value, numerical: bool = False) -> Value:
    """The canonical form of a value: integral numbers as int (Fraction in numerical nodes), None kept."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, tuple):
        return tuple(canonical(v) for v in value)
    if isinstance(value, bool):
        return Fraction(int(value)) if numerical else value
    if isinstance(value, int):
        return Fraction(value) if numerical else value
    if isinstance(value, Fraction):
        if numerical:
            return value
        return int(value) if value.denominator == 1 else value
    raise ProgramError(
        f"value {value!r} of type {type(value).__name__} is not a RASP value verify-tf reads "
        "(str, int, bool, None, tuples, rationals)"
    )


def sort_key(value: Value) -> tuple:
    """A total order on values: numbers (numerically), strings, tuples, None last."""
    if value is None:
        return (3, 0)
    if isinstance(value, str):
        return (1, value)
    if isinstance(value, tuple):
        return (2, tuple(sort_key(v) for v in value))
    return (0, Fraction(value))


def value_to_json(value: Value) -> list:
    if value is None:
        return ["none", None]
    if isinstance(value, bool):
        return ["bool", value]
    if isinstance(value, int):
        return ["int", value]
    if isinstance(value, Fraction):
        return ["frac", str(value)]
    if isinstance(value, str):
        return ["str", value]
    if isinstance(value, tuple):
        return ["tuple", [value_to_json(v) for v in value]]
    raise ProgramError(f"cannot write value {value!r}")


def value_from_json(data: Any) -> Value:
    if not (isinstance(data, list) and len(data) == 2 and isinstance(data[0], str)):
        raise ProgramError(f"expected a typed value [type, value], got {data!r}")
    kind, raw = data
    try:
        if kind == "none":
            return None
        if kind == "bool" and isinstance(raw, bool):
            return raw
        if kind == "int" and isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        if kind == "frac" and isinstance(raw, str):
            return Fraction(raw)
        if kind == "str" and isinstance(raw, str):
            return raw
        if kind == "tuple" and isinstance(raw, list):
            return tuple(value_from_json(v) for v in raw)
    except (ValueError, ZeroDivisionError):
        pass
    raise ProgramError(f"malformed typed value {data!r}")


def show(value: Value) -> str:
    """A value for humans: 2/3, True, 'a' as a, None."""
    if isinstance(value, tuple):
        return "(" + ", ".join(show(v) for v in value) + ")"
    return str(value)


def symbol_of(value: Value) -> str:
    """The alphabet symbol verify-tf uses for a vocabulary value (its text; ints and strings only)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ProgramError(f"vocabulary value {value!r} is neither a string nor an integer")
    text = str(value)
    if not text or any(c.isspace() for c in text):
        raise ProgramError(f"vocabulary value {value!r} cannot be an alphabet symbol (empty or with whitespace)")
    return text


# ---------------------------------------------------------------- the program


@dataclass(frozen=True)
class Node:
    label: str
    kind: str
    inputs: tuple[str, ...] = ()
    encoding: str | None = None  # SOps: categorical | numerical; selectors: None
    values: tuple[Value, ...] = ()  # SOps: the value list codes index into
    table: tuple = ()  # map: codes; sequence_map, select: rows of codes
    default: int | None = None  # aggregate: the code of its default value

    @property
    def is_selector(self) -> bool:
        return self.kind in SELECTOR_KINDS

    @property
    def numerical(self) -> bool:
        return self.encoding == "numerical"

    @cached_property
    def code_of(self) -> dict[Value, int]:
        """Value -> code (numbers compare by value: 1, 1.0 and True are one value, as in Python and RASP)."""
        return {v: c for c, v in enumerate(self.values)}


@dataclass(frozen=True)
class RaspProgram:
    nodes: tuple[Node, ...]  # topological order: every node after its inputs
    output: str  # the label of the program's output SOp
    max_length: int  # the tables cover every input of length 1..max_length
    source: str = ""  # the RASP source text, for humans
    by_label: dict[str, Node] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_label", {n.label: n for n in self.nodes})

    def node(self, label: str) -> Node:
        return self.by_label[label]

    @property
    def output_node(self) -> Node:
        return self.by_label[self.output]

    @property
    def tokens_node(self) -> Node | None:
        return next((n for n in self.nodes if n.kind == "tokens"), None)

    @property
    def vocabulary(self) -> tuple[Value, ...]:
        tokens = self.tokens_node
        return tokens.values if tokens is not None else ()

    @property
    def sops(self) -> list[Node]:
        return [n for n in self.nodes if not n.is_selector]


def program_to_json(program: RaspProgram) -> dict:
    nodes = []
    for n in program.nodes:
        entry: dict[str, Any] = {"label": n.label, "kind": n.kind, "inputs": list(n.inputs)}
        if not n.is_selector:
            entry["encoding"] = n.encoding
            entry["values"] = [value_to_json(v) for v in n.values]
        if n.kind in ("map",):
            entry["table"] = list(n.table)
        elif n.kind in ("sequence_map", "select"):
            entry["table"] = [list(row) for row in n.table]
        if n.kind == "aggregate":
            entry["default"] = n.default
        nodes.append(entry)
    return {"output": program.output, "max_length": program.max_length, "source": program.source, "nodes": nodes}


def _quoted(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


def program_from_json(data: Any) -> RaspProgram:
    """Read and check a tabulated program (raises ``ProgramError`` naming the node and what is wrong)."""
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise ProgramError("expected a mapping with 'nodes', 'output' and 'max_length'")
    max_length = data.get("max_length")
    if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 1:
        raise ProgramError(f"max_length: expected a positive integer, got {_quoted(max_length)}")
    if max_length > MAX_LENGTH:  # before its tables are read: the indices node alone lists max_length values
        raise ProgramError(
            f"max_length: {_quoted(max_length)} is past the longest input verify-tf checks ({MAX_LENGTH} positions)"
        )
    seen: dict[str, Node] = {}
    nodes = []
    for index, entry in enumerate(data["nodes"]):
        where = f"nodes[{index}]"
        if not isinstance(entry, dict):
            raise ProgramError(f"{where}: expected a mapping")
        node = _node_from_json(entry, where, seen, max_length)
        seen[node.label] = node
        nodes.append(node)
    output = data.get("output")
    if output not in seen or seen[output].is_selector:
        raise ProgramError(f"output: {output!r} is not a sequence operation of the program")
    if sum(n.kind == "tokens" for n in nodes) > 1:
        raise ProgramError("more than one 'tokens' node")
    return RaspProgram(tuple(nodes), output, max_length, str(data.get("source") or ""))


def _node_from_json(entry: dict, where: str, seen: dict[str, Node], max_length: int) -> Node:
    label, kind = entry.get("label"), entry.get("kind")
    if not isinstance(label, str) or not label or label in seen:
        raise ProgramError(f"{where}.label: expected a new, non-empty label, got {label!r}")
    where = f"node {label!r}"
    if kind not in KINDS:
        raise ProgramError(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
    inputs = entry.get("inputs") or []
    if not isinstance(inputs, list) or len(inputs) != ARITY[kind] or any(i not in seen for i in inputs):
        raise ProgramError(f"{where}: expected {ARITY[kind]} input(s) among the nodes before it, got {inputs!r}")
    ins = [seen[i] for i in inputs]
    wants_selector = {
        "select": (False, False),
        "selector_and": (True, True),
        "selector_or": (True, True),
        "selector_not": (True,),
        "selector_width": (True,),
        "aggregate": (True, False),
        "map": (False,),
        "sequence_map": (False, False),
    }.get(kind, ())
    for child, selector in zip(ins, wants_selector):
        if child.is_selector != selector:
            raise ProgramError(f"{where}: input {child.label!r} must {'' if selector else 'not '}be a selector")
    if kind in SELECTOR_KINDS:
        table: tuple = ()
        if kind == "select":
            table = _table2(entry.get("table"), len(ins[0].values), len(ins[1].values), (0, 1, RAISED), where)
        return Node(label, kind, tuple(inputs), None, (), table)
    encoding = entry.get("encoding")
    if encoding not in ENCODINGS:
        raise ProgramError(f"{where}.encoding: expected categorical or numerical, got {encoding!r}")
    raw_values = entry.get("values")
    if not isinstance(raw_values, list) or not raw_values:
        raise ProgramError(f"{where}.values: expected a non-empty list of typed values")
    values = tuple(canonical(value_from_json(v), encoding == "numerical") for v in raw_values)
    if len(set(values)) != len(values):
        raise ProgramError(f"{where}.values: a value is listed twice")
    if encoding == "numerical" and not all(v is None or isinstance(v, Fraction) for v in values):
        raise ProgramError(f"{where}.values: a numerical node holds numbers (or None) only")
    codes = tuple(range(len(values)))
    table = ()
    default = None
    if kind == "indices" and values != tuple(canonical(i, encoding == "numerical") for i in range(max_length)):
        raise ProgramError(f"{where}.values: expected 0..{max_length - 1}")
    if kind == "selector_width" and values != tuple(
        canonical(i, encoding == "numerical") for i in range(max_length + 1)
    ):
        raise ProgramError(f"{where}.values: expected 0..{max_length}")
    if kind == "length" and values != tuple(canonical(i, encoding == "numerical") for i in range(1, max_length + 1)):
        raise ProgramError(f"{where}.values: expected 1..{max_length}")
    if kind == "full" and len(values) != 1:
        raise ProgramError(f"{where}.values: a constant has one value")
    if kind == "map":
        raw = entry.get("table")
        if (
            not isinstance(raw, list)
            or len(raw) != len(ins[0].values)
            or any(c not in codes and c != RAISED for c in raw)
        ):
            raise ProgramError(
                f"{where}.table: expected one output code per value of {ins[0].label!r} "
                f"({len(ins[0].values)} entries in 0..{len(values) - 1}, or {RAISED})"
            )
        table = tuple(raw)
    elif kind == "sequence_map":
        table = _table2(entry.get("table"), len(ins[0].values), len(ins[1].values), codes + (RAISED,), where)
    elif kind == "aggregate":
        default = entry.get("default")
        if default not in codes:
            raise ProgramError(f"{where}.default: expected the code of the default value, got {default!r}")
    return Node(label, kind, tuple(inputs), encoding, values, table, default)


def _table2(raw: Any, rows: int, cols: int, allowed: Iterable[int], where: str) -> tuple:
    allowed = set(allowed)
    if (
        not isinstance(raw, list)
        or len(raw) != rows
        or any(not isinstance(r, list) or len(r) != cols or any(c not in allowed for c in r) for r in raw)
    ):
        raise ProgramError(f"{where}.table: expected {rows} rows of {cols} entries")
    return tuple(tuple(r) for r in raw)


def format_values(values: Sequence[Value]) -> str:
    return "[" + ", ".join(show(v) for v in values) + "]"

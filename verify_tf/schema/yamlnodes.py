"""YAML -> a tree of located nodes (every value remembers its line), using PyYAML's safe composer.

We never construct arbitrary Python objects (SafeLoader, and only the node tree is used), and scalars keep
their source text so numbers like ``0.1`` can be read exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml

from .errors import SpecError

_NULL = "tag:yaml.org,2002:null"
_BOOL = "tag:yaml.org,2002:bool"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_STR = "tag:yaml.org,2002:str"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_CORE_TAGS = {_NULL, _BOOL, _INT, _FLOAT, _STR, "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"}


@dataclass
class Node:
    kind: str  # "map" | "seq" | "scalar" ("object": a Python value passed through the API)
    value: dict | list | str | None  # map: {key text: Node}; seq: [Node]; scalar: source text
    line: int  # 1-based
    tag: str = _STR
    key_lines: dict | None = None  # map only: key text -> line of the key

    def mapping(self) -> dict[str, Node]:
        """A map node's children by key text ({} for any other node)."""
        return self.value if self.kind == "map" and isinstance(self.value, dict) else {}

    @property
    def is_null(self) -> bool:
        return self.kind == "scalar" and self.tag == _NULL

    def plain(self):
        """The Python value this node denotes (for messages and free-form data)."""
        if self.kind == "map":
            return {k: v.plain() for k, v in self.value.items()}
        if self.kind == "seq":
            return [v.plain() for v in self.value]
        if self.tag == _NULL:
            return None
        if self.tag == _BOOL:
            return self.value.lower() in ("true", "yes", "on")
        if self.tag == _INT:
            try:
                return int(self.value.replace("_", ""), 0)
            except ValueError:
                return self.value
        return self.value

    def find(self, path: str) -> Node:
        """The deepest node along a key path like ``layers[0].attention.heads[1].query[0][2]`` (best effort)."""
        node = self
        for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path):
            if name and node.kind == "map" and name in node.value:
                node = node.value[name]
            elif index and node.kind == "seq" and int(index) < len(node.value):
                node = node.value[int(index)]
            else:
                break
        return node

    @property
    def scalar_kind(self) -> str:
        return {_NULL: "null", _BOOL: "bool", _INT: "int", _FLOAT: "float"}.get(self.tag, "str")


def from_plain(value: Any, line: int = 0) -> Node:
    """A node tree for plain Python data (the API's options): scalars keep an exact text form.

    Numbers become their text (a Fraction ``1/3`` stays exact), booleans and None their YAML forms; any other
    object is wrapped as a node of kind "object" (e.g. a Model for a model-valued option).
    """
    if isinstance(value, dict):
        return Node(
            "map",
            {str(k): from_plain(v, line) for k, v in value.items()},
            line,
            key_lines={str(k): line for k in value},
        )
    if isinstance(value, (list, tuple)):
        return Node("seq", [from_plain(v, line) for v in value], line)
    if value is None:
        return Node("scalar", "null", line, tag=_NULL)
    if isinstance(value, bool):
        return Node("scalar", "true" if value else "false", line, tag=_BOOL)
    if isinstance(value, int):
        return Node("scalar", str(value), line, tag=_INT)
    if isinstance(value, Fraction):
        return Node("scalar", str(value), line, tag=_INT if value.denominator == 1 else _STR)
    if isinstance(value, float):
        return Node("scalar", repr(value), line, tag=_FLOAT)
    if isinstance(value, (str, Path)):
        return Node("scalar", str(value), line, tag=_STR)
    return Node("object", value, line)


_MAX_NESTING = 100  # lists/mappings inside each other; real specs use fewer than 10 (PyYAML recurses per level)


def _too_deep(text: str) -> int | None:
    """The line where flow brackets or indentation nest deeper than _MAX_NESTING, if any (quotes and comments
    are skipped roughly: a false alarm needs 100 brackets inside a string)."""
    depth = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if len(line) - len(line.lstrip(" ")) > 2 * _MAX_NESTING:
            return number
        quote = None
        for char in line:
            if quote:
                quote = None if char == quote else quote
            elif char in "'\"":
                quote = char
            elif char == "#":
                break
            elif char in "[{":
                depth += 1
                if depth > _MAX_NESTING:
                    return number
            elif char in "]}":
                depth = max(0, depth - 1)
    return None


def parse_yaml(text: str, file: str) -> Node:
    deep = _too_deep(text)
    if deep is not None:
        raise SpecError(
            f"lists or mappings nested more than {_MAX_NESTING} deep",
            file=file,
            line=deep,
            hint="specs hold shallow plain data; look for unbalanced brackets",
        )
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        problem = exc.problem or "malformed YAML"
        raise SpecError(
            f"malformed YAML: {problem}",
            file=file,
            line=line,
            hint="check indentation and that every 'key: value' has a space after the colon",
        ) from None
    except yaml.YAMLError as exc:
        raise SpecError(f"malformed YAML: {exc}", file=file, line=1) from None
    except RecursionError:
        raise SpecError(
            "nested too deeply to read",
            file=file,
            line=1,
            hint="specs hold shallow plain data; look for unbalanced brackets",
        ) from None
    if root is None:
        raise SpecError("the spec is empty", file=file, line=1, hint="run `verify-tf init` for a starter spec")
    # aliases may repeat values, but an expansion 100 times beyond the distinct values the text holds is an alias
    # bomb ("billion laughs"), stopped before it costs time
    return _convert(root, file, [0, min(_MAX_NODES, 100 * _distinct_nodes(root) + 10_000)])


_MAX_NODES = 2_000_000  # never more values than this, whatever the text


def _distinct_nodes(root: yaml.Node) -> int:
    """The values written in the text (an alias counts its anchor's node once)."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            stack.extend(child for pair in node.value for child in pair)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return len(seen)


def _convert(node: yaml.Node, file: str, count: list[int]) -> Node:  # count: [values so far, budget]
    line = node.start_mark.line + 1
    if node.tag == _TIMESTAMP and isinstance(node, yaml.ScalarNode):
        # YAML 1.1 reads a plain 2001-12-14 as a date: here it is the text the user wrote, which the field then
        # accepts or refuses in its own words ("seed: expected an integer"), never "a YAML tag"
        node = yaml.ScalarNode(_STR, node.value, node.start_mark, node.end_mark, node.style)
    if node.tag not in _CORE_TAGS:
        raise SpecError(
            f"YAML tags such as {node.tag!r} are not allowed",
            file=file,
            line=line,
            hint="specs hold plain data: mappings, lists, numbers and strings",
        )
    count[0] += 1
    if count[0] > count[1]:
        raise SpecError(
            "the spec expands to too many values (recursive or repeated YAML aliases?)", file=file, line=line
        )
    if isinstance(node, yaml.MappingNode):
        items: dict[str, Node] = {}
        key_lines: dict[str, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise SpecError(
                    "mapping keys must be plain words or numbers", file=file, line=key_node.start_mark.line + 1
                )
            key = key_node.value
            if key in items:
                raise SpecError(
                    f"duplicate key {key!r}",
                    file=file,
                    line=key_node.start_mark.line + 1,
                    hint="each key may appear once in a mapping",
                )
            items[key] = _convert(value_node, file, count)
            key_lines[key] = key_node.start_mark.line + 1
        return Node("map", items, line, key_lines=key_lines)
    if isinstance(node, yaml.SequenceNode):
        return Node("seq", [_convert(v, file, count) for v in node.value], line)
    if isinstance(node, yaml.ScalarNode):
        return Node("scalar", node.value, line, tag=node.tag)
    raise SpecError("unsupported YAML construct (aliases/anchors are not allowed)", file=file, line=line)

"""A small declarative schema language: validates located YAML nodes into typed Python values, raising
``SpecError`` with file, line, key path, expectation and hint, and emits the same rules as JSON Schema
(``verify-tf schema``), so the editor schema and the validator can never disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..numbers import MAX_DIGITS, NotANumber, TooLarge, parse_rational
from ..userfiles import file_problem
from .errors import OptionError, SpecError, closest, describe_found
from .yamlnodes import Node

LIMITS_HINT = 'verify-tf\'s input limits are listed in docs/cli.md ("Input limits")'


@dataclass
class Context:
    file: str
    base_dir: Path
    # builds a whole model section (``ModelSection``); the spec loader provides it
    model_section: Callable[[Node, Context, str], Any] | None = None

    def error(self, node: Node | None, path: str, message: str, hint: str | None = None) -> SpecError:
        return SpecError(message, file=self.file, line=node.line if node else None, path=path, hint=hint)

    def expected(self, node: Node, path: str, what: str, hint: str | None = None) -> SpecError:
        return self.error(node, path, f"expected {what}, got {describe_found(node.plain())}", hint)


def join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


class Schema:
    """Base class: ``validate`` turns a node into a value; ``json`` gives the JSON Schema fragment."""

    description: str = ""
    what: str = "a value"

    def validate(self, node: Node, ctx: Context, path: str) -> Any:
        raise NotImplementedError

    def json(self) -> dict:
        raise NotImplementedError

    def _doc(self, schema: dict) -> dict:
        if self.description:
            schema["description"] = self.description
        return schema


class Number(Schema):
    """An exact rational: 3, -2, 0.25 (read as 1/4 exactly), or the text '1/3'."""

    def __init__(
        self,
        description: str = "",
        minimum: Fraction | None = None,
        positive: bool = False,
        maximum: Fraction | None = None,
    ):
        self.description = description
        self.minimum = minimum
        self.maximum = maximum
        self.positive = positive
        self.what = "a positive number" if positive else "a number"

    def validate(self, node: Node, ctx: Context, path: str) -> Fraction:
        if node.kind != "scalar" or node.scalar_kind in ("null", "bool"):
            raise ctx.expected(
                node, path, self.what, "write an integer, a decimal such as 0.25, or a ratio such as 1/4"
            )
        if node.scalar_kind == "float" and node.value.lower().lstrip("+-") in (".inf", ".nan"):
            raise ctx.error(
                node,
                path,
                f"expected a finite number, got {node.value}",
                "infinities and NaN have no exact value; verify-tf numbers are exact rationals",
            )
        try:
            value = parse_rational(node.value)
        except TooLarge as exc:
            raise ctx.error(
                node, path, f"expected {self.what} of at most {MAX_DIGITS} digits, got {exc}", LIMITS_HINT
            ) from None
        except NotANumber as exc:
            raise ctx.error(node, path, f"expected {self.what}, got {describe_found(node.value)}", str(exc)) from None
        if self.positive and value <= 0:
            raise ctx.error(node, path, f"expected {self.what}, got {node.value}")
        if self.minimum is not None and value < self.minimum:
            raise ctx.error(node, path, f"expected a number >= {self.minimum}, got {node.value}")
        if self.maximum is not None and value > self.maximum:
            raise ctx.error(node, path, f"expected a number <= {self.maximum}, got {describe_found(node.value)}")
        return value

    def json(self) -> dict:
        return self._doc({"anyOf": [{"type": "number"}, {"type": "string", "pattern": r"^\s*[+-]?\d+\s*/\s*\d+\s*$"}]})


class Integer(Schema):
    def __init__(self, description: str = "", minimum: int | None = None, maximum: int | None = None):
        self.description = description
        self.minimum, self.maximum = minimum, maximum
        bounds = []
        if minimum is not None:
            bounds.append(f">= {minimum}")
        if maximum is not None:
            bounds.append(f"<= {maximum}")
        self.what = "an integer" + (" " + " and ".join(bounds) if bounds else "")

    def validate(self, node: Node, ctx: Context, path: str) -> int:
        if node.kind == "scalar" and node.scalar_kind == "int" and len(node.value) > MAX_DIGITS:
            raise ctx.error(
                node, path, f"expected {self.what}, got an integer of more than {MAX_DIGITS} digits", LIMITS_HINT
            )
        value = node.plain() if node.kind == "scalar" and node.scalar_kind == "int" else None
        if not isinstance(value, int) or isinstance(value, bool):
            raise ctx.expected(node, path, self.what)
        if (self.minimum is not None and value < self.minimum) or (self.maximum is not None and value > self.maximum):
            raise ctx.expected(node, path, self.what)
        return value

    def json(self) -> dict:
        s: dict = {"type": "integer"}
        if self.minimum is not None:
            s["minimum"] = self.minimum
        if self.maximum is not None:
            s["maximum"] = self.maximum
        return self._doc(s)


class Boolean(Schema):
    what = "true or false"

    def __init__(self, description: str = ""):
        self.description = description

    def validate(self, node: Node, ctx: Context, path: str) -> bool:
        if node.kind != "scalar" or node.scalar_kind != "bool":
            raise ctx.expected(node, path, self.what)
        return bool(node.plain())

    def json(self) -> dict:
        return self._doc({"type": "boolean"})


class String(Schema):
    def __init__(self, description: str = "", choices: Sequence[str] | None = None):
        self.description = description
        self.choices = tuple(choices) if choices else None
        self.what = ("one of " + ", ".join(repr(c) for c in self.choices)) if self.choices else "a string"

    def validate(self, node: Node, ctx: Context, path: str) -> str:
        if node.kind != "scalar" or node.is_null:
            raise ctx.expected(node, path, self.what)
        text = node.value
        if self.choices and text not in self.choices:
            guess = closest(text, self.choices)
            raise ctx.expected(node, path, self.what, f"did you mean {guess!r}?" if guess else None)
        return text

    def json(self) -> dict:
        s: dict = {"type": "string"}
        if self.choices:
            s["enum"] = list(self.choices)
        return self._doc(s)


class FilePath(Schema):
    """A path resolved relative to the spec's directory; it must exist."""

    what = "a path to an existing file"

    def __init__(self, description: str = ""):
        self.description = description

    def json(self) -> dict:
        return self._doc({"type": "string"})

    def validate(self, node: Node, ctx: Context, path: str) -> Path:
        if node.kind != "scalar" or node.is_null:
            raise ctx.expected(node, path, self.what)
        text = node.value
        if "\0" in text:  # no file name holds one (os calls raise ValueError)
            raise ctx.error(node, path, f"file not found: {text!r} contains a NUL character")
        try:
            resolved = (ctx.base_dir / text).resolve()
        except (OSError, RuntimeError) as exc:  # a symbolic link loop
            raise ctx.error(node, path, f"cannot resolve {text}: {exc}") from None
        problem = file_problem(resolved)
        if problem == "file not found":
            raise ctx.error(
                node, path, f"file not found: {text}", f"paths are relative to the spec's folder ({ctx.base_dir})"
            )
        if problem is not None:
            raise ctx.error(node, path, f"{text}: {problem}", "name a regular file")
        return resolved


class ListOf(Schema):
    def __init__(
        self,
        item: Schema,
        description: str = "",
        length: int | None = None,
        min_length: int = 0,
        what: str | None = None,
    ):
        self.item, self.description = item, description
        self.length, self.min_length = length, min_length
        count = f"{length} " if length is not None else ""
        self.what = what or f"a list of {count}{_plural(item.what)}"

    def validate(self, node: Node, ctx: Context, path: str) -> list:
        if node.kind != "seq":
            raise ctx.expected(node, path, self.what)
        if self.length is not None and len(node.value) != self.length:
            raise ctx.expected(node, path, self.what)
        if len(node.value) < self.min_length:
            raise ctx.error(node, path, f"expected at least {self.min_length} item(s), got {len(node.value)}")
        return [self.item.validate(child, ctx, join(path, i)) for i, child in enumerate(node.value)]

    def json(self) -> dict:
        s: dict = {"type": "array", "items": self.item.json()}
        if self.length is not None:
            s["minItems"] = s["maxItems"] = self.length
        elif self.min_length:
            s["minItems"] = self.min_length
        return self._doc(s)


def _plural(what: str) -> str:
    for article in ("a ", "an "):
        if what.startswith(article):
            noun = what[len(article) :]
            head, _, tail = noun.partition(" ")
            return (head + "s " + tail).strip() if not head.endswith("s") else noun
    return what


class MatrixOf(Schema):
    """A rectangular list of lists of numbers."""

    what = "a matrix (a list of rows, each a list of numbers)"

    def __init__(self, description: str = ""):
        self.description = description
        self.row = ListOf(Number())

    def validate(self, node: Node, ctx: Context, path: str) -> list[list[Fraction]]:
        if node.kind != "seq" or not node.value:
            raise ctx.expected(node, path, self.what)
        rows = [self.row.validate(child, ctx, join(path, i)) for i, child in enumerate(node.value)]
        widths = {len(r) for r in rows}
        if len(widths) != 1:
            bad = next(i for i, r in enumerate(rows) if len(r) != len(rows[0]))
            raise ctx.error(
                node.value[bad],
                join(path, bad),
                f"expected a row of {len(rows[0])} numbers like row 0, got {len(rows[bad])}",
            )
        return rows

    def json(self) -> dict:
        return self._doc({"type": "array", "items": self.row.json()})


@dataclass
class Field:
    schema: Schema
    required: bool = False
    default: Any = None


class Obj(Schema):
    """A mapping with known keys. Unknown keys are errors that suggest the closest known key."""

    what = "a mapping"

    def __init__(
        self,
        fields: dict[str, Field],
        description: str = "",
        convert: Callable[[dict, Node, Context, str], Any] | None = None,
        exclusive: Sequence[Sequence[str]] = (),
        check: Callable[[dict], Any] | None = None,
    ):
        self.fields, self.description, self.convert = fields, description, convert
        self.exclusive = exclusive  # groups of keys of which at most one may appear
        # check(values) -> value: a typed conversion/cross-field check that never sees a node; an OptionError
        # it raises is located at its key (spec-internal ``convert`` callbacks get the node and context)
        self.check = check

    def validate(self, node: Node, ctx: Context, path: str) -> Any:
        if node.is_null:
            node = Node("map", {}, node.line, key_lines={})
        if node.kind != "map":
            wanted = f"a mapping with keys {', '.join(self.fields)}" if self.fields else "a mapping"
            raise ctx.expected(node, path, wanted)
        for key in node.value:
            if key not in self.fields:
                guess = closest(key, self.fields)
                line = node.key_lines.get(key, node.line) if node.key_lines else node.line
                hint = f"did you mean {guess!r}?" if guess else f"known keys: {', '.join(self.fields)}"
                raise SpecError(f"unknown key {key!r}", file=ctx.file, line=line, path=path, hint=hint)
        for group in self.exclusive:
            present = [k for k in group if k in node.value]
            if len(present) > 1:
                raise ctx.error(
                    node,
                    path,
                    f"keys {' and '.join(repr(k) for k in present)} cannot be combined",
                    f"choose one of: {', '.join(group)}",
                )
        out: dict[str, Any] = {}
        for key, f in self.fields.items():
            if key in node.value:
                out[key] = f.schema.validate(node.value[key], ctx, join(path, key))
            elif f.required:
                raise ctx.error(
                    node, path, f"missing required key {key!r}", f.schema.description or f"expected {f.schema.what}"
                )
            else:
                out[key] = f.default
        if self.check is not None:
            try:
                return self.check(out)
            except OptionError as exc:
                located = locate(node, exc.key)
                raise ctx.error(located, join(path, exc.key) if exc.key else path, exc.message, exc.hint) from None
        out["__node__"] = node
        if self.convert is not None:
            return self.convert(out, node, ctx, path)
        return out

    def json(self) -> dict:
        props = {k: f.schema.json() for k, f in self.fields.items()}
        for k, f in self.fields.items():
            if f.default is not None and not isinstance(f.default, (Fraction, Path)):
                props[k].setdefault("default", f.default)
        s = {"type": "object", "properties": props, "additionalProperties": False}
        req = [k for k, f in self.fields.items() if f.required]
        if req:
            s["required"] = req
        return self._doc(s)


class ModelSection(Schema):
    """A whole model section, written exactly like the spec's top-level ``model:`` (built by the spec loader)."""

    what = "a model section (inline, file, random or construct)"

    def __init__(self, description: str = ""):
        self.description = description

    def validate(self, node: Node, ctx: Context, path: str) -> Any:
        if ctx.model_section is None:
            raise ctx.error(node, path, "a model section cannot be read here")
        return ctx.model_section(node, ctx, path)

    def json(self) -> dict:
        return self._doc({"$ref": "#/$defs/model"})


def locate(node: Node, key: str) -> Node:
    """The node at a dotted key path below ``node`` (the deepest that exists), for locating an OptionError."""
    return node.find(key) if key else node


class Either(Schema):
    """The first alternative whose ``accepts(node)`` is true validates; otherwise an error naming all."""

    def __init__(self, alternatives: Sequence[tuple[Callable[[Node], bool], Schema]], what: str, description: str = ""):
        self.alternatives, self.what, self.description = alternatives, what, description

    def validate(self, node: Node, ctx: Context, path: str) -> Any:
        for accepts, schema in self.alternatives:
            if accepts(node):
                return schema.validate(node, ctx, path)
        raise ctx.expected(node, path, self.what)

    def json(self) -> dict:
        return self._doc({"anyOf": [s.json() for _, s in self.alternatives]})


class TaggedUnion(Schema):
    """A one-key mapping ``{name: options}`` (or a bare ``name``) choosing one of several schemas."""

    def __init__(self, variants: Mapping[str, Schema], what: str, description: str = ""):
        self.variants, self.what, self.description = variants, what, description

    def validate(self, node: Node, ctx: Context, path: str) -> tuple[str, Any, Node]:
        if node.kind == "scalar" and not node.is_null:
            name, options = node.value, Node("map", {}, node.line, key_lines={})
        elif node.kind == "map" and len(node.value) == 1:
            name, options = next(iter(node.value.items()))
        else:
            raise ctx.expected(node, path, self.what, f"write e.g. '- {next(iter(self.variants))}: {{}}'")
        if name not in self.variants:
            guess = closest(name, self.variants)
            raise ctx.error(
                node,
                path,
                f"unknown {self.what.split(' ', 1)[-1]} {name!r}",
                f"did you mean {guess!r}?" if guess else f"known: {', '.join(self.variants)}",
            )
        return name, self.variants[name].validate(options, ctx, join(path, name)), node

    def json(self) -> dict:
        alts = [{"type": "string", "enum": list(self.variants)}]
        for name, schema in self.variants.items():
            alts.append(
                {
                    "type": "object",
                    "properties": {name: schema.json()},
                    "required": [name],
                    "additionalProperties": False,
                }
            )
        return self._doc({"anyOf": alts})

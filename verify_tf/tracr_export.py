"""Export a tracr-compiled transformer and its RASP program to one self-describing JSON file (needs ``tracr``).

Run this in Python, where the RASP program lives (``pip install 'verify-tf[tracr]'``)::

    from tracr.compiler import compiling, lib
    from verify_tf.tracr_export import write_export

    program = lib.make_length()
    model = compiling.compile_rasp_to_model(program, vocab={"a", "b"}, max_seq_len=5, compiler_bos="BOS")
    write_export("length.json", model, program)

then name the file in a spec (``model: {tracr: length.json}``, property ``rasp-equivalence: {program:
length.json}``). Loading the file never runs code: the program's Python functions are *tabulated* here, over
the finite set of values their inputs can take on inputs of length 1..max_seq_len (docs/tracr.md):

* ``tokens``: the vocabulary; ``indices``: 0..N-1; ``selector_width``: 0..N; ``full``: its fill value;
* ``map`` / ``sequence_map``: the image of the input value set(s) under the function;
* ``select``: the predicate on every (key value, query value) pair;
* ``aggregate``: the selected value itself, the default, and for numbers every mean of 2..N of them
  (a numerical mean of 0/1 values over 3 positions can be 2/3; tracr's own value sets miss such values).

Numbers are exact: a function's float result is read as the simplest rational that rounds to it (1/3 for
0.333...), and means are exact rationals. The tabulated program is then checked against tracr's
``rasp.evaluate`` on every input up to max_seq_len (``check=True``); the count is recorded in the file.

The model part holds the config, residual labels, encoders and every weight as the simplest rational inside
its float32 rounding interval together with the raw float32 bits (``verify_tf.builders.tracr_import`` reads
either). The format is ``verify-tf-tracr/1``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
from collections.abc import Callable, Iterable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from .numbers import float32_from_bits, snap_float32, snap_float64
from .rasp.batched import least_undefined
from .rasp.interpreter import run
from .rasp.program import (
    RAISED,
    Node,
    ProgramError,
    RaspError,
    RaspProgram,
    Value,
    canonical,
    is_number,
    program_to_json,
    show,
    sort_key,
    symbol_of,
    value_to_json,
)

FORMAT = "verify-tf-tracr/1"
MAX_MEAN_SUMS = 200_000  # distinct partial sums an aggregate's value closure may reach before the export refuses


class ExportError(ValueError):
    """The program or model cannot be exported exactly (the message says which operation and why)."""


# ---------------------------------------------------------------- the RASP program, tabulated


def _python_value(value: Value) -> Any:
    """A canonical value as RASP hands it to a user function: non-integral numbers as floats."""
    if isinstance(value, tuple):
        return tuple(_python_value(v) for v in value)
    if isinstance(value, Fraction):
        return int(value) if value.denominator == 1 else float(value)
    return value


def _read_result(result: Any, numerical: bool, where: str) -> Value:
    """A user function's result as a canonical value (floats -> the simplest rational rounding to them)."""
    if isinstance(result, np.generic):
        result = result.item()
    if isinstance(result, float):
        if not math.isfinite(result):
            raise ExportError(f"{where} returned {result!r}: not a finite number")
        result = snap_float64(result)
    elif isinstance(result, tuple):
        result = tuple(_read_result(r, False, where) for r in result)
    try:
        value = canonical(result, numerical)
    except ProgramError as exc:
        raise ExportError(f"{where}: {exc}") from None
    if numerical and not (value is None or isinstance(value, Fraction)):
        raise ExportError(f"{where} returned {result!r}, not a number, in a numerical operation")
    return value


def _sorted(values: Iterable[Value]) -> tuple[Value, ...]:
    return tuple(sorted(set(values), key=sort_key))


def _post_order(root: Any) -> list[Any]:
    from tracr.rasp import rasp

    order, seen, labels = [], set(), {}

    def visit(expr: Any) -> None:
        if id(expr) in seen:
            return
        other = labels.get(expr.label)
        if other is not None and other is not expr:
            raise ExportError(f"two different operations are both named {expr.label!r}: RASP labels must be unique")
        labels[expr.label] = expr
        for child in expr.children:
            visit(child)
        seen.add(id(expr))
        order.append(expr)

    if not isinstance(root, rasp.SOp):
        raise ExportError(f"the program must be a RASP SOp, got {type(root).__name__}")
    visit(root)
    return order


def tabulate(program: Any, vocab: Iterable[Any], max_length: int, source: str = "") -> RaspProgram:
    """The RASP program ``program`` as plain data, for inputs over ``vocab`` of length 1..``max_length``."""
    from tracr.rasp import rasp

    nodes: dict[str, Node] = {}
    order = []
    for expr in _post_order(program):
        label = expr.label
        kind_of = [
            (rasp.TokensType, "tokens"),
            (rasp.IndicesType, "indices"),
            (rasp.LengthType, "length"),
            (rasp.Full, "full"),
            (rasp.Map, "map"),
            (rasp.SequenceMap, "sequence_map"),
            (rasp.SelectorWidth, "selector_width"),
            (rasp.Aggregate, "aggregate"),
            (rasp.Select, "select"),
            (rasp.SelectorAnd, "selector_and"),
            (rasp.SelectorOr, "selector_or"),
            (rasp.SelectorNot, "selector_not"),
        ]
        kind = next((name for cls, name in kind_of if isinstance(expr, cls)), None)
        if kind is None:
            raise ExportError(f"{label!r}: {type(expr).__name__} is not supported (tracr cannot compile it either)")
        inputs = tuple(child.label for child in expr.children)
        ins = [nodes[i] for i in inputs]
        if kind in ("select", "selector_and", "selector_or", "selector_not"):
            table: tuple = ()
            if kind == "select":
                keys, queries = nodes[expr.keys.label], nodes[expr.queries.label]
                inputs = (keys.label, queries.label)
                table = tuple(tuple(_predicate(expr.predicate, k, q) for q in queries.values) for k in keys.values)
            node = Node(label, kind, inputs, None, (), table)
        else:
            numerical = rasp.is_numerical(expr)
            encoding = "numerical" if numerical else "categorical"
            node = _tabulate_sop(expr, kind, label, inputs, ins, encoding, numerical, vocab, max_length, nodes)
        nodes[label] = node
        order.append(node)
    return RaspProgram(tuple(order), program.label, max_length, source)


def _predicate(predicate: Callable, key: Value, query: Value) -> int:
    try:
        return 1 if predicate(_python_value(key), _python_value(query)) else 0
    except Exception:
        return RAISED


def _tabulate_sop(
    expr: Any,
    kind: str,
    label: str,
    inputs: tuple,
    ins: list[Node],
    encoding: str,
    numerical: bool,
    vocab: Iterable[Any],
    max_length: int,
    nodes: dict[str, Node],
) -> Node:
    where = f"{kind} {label!r}"
    if kind == "tokens":
        values = _sorted(_read_result(v, numerical, "the vocabulary") for v in vocab)
        return Node(label, kind, (), encoding, values)
    if kind == "indices":
        return Node(label, kind, (), encoding, tuple(canonical(i, numerical) for i in range(max_length)))
    if kind == "length":
        return Node(label, kind, (), encoding, tuple(canonical(i, numerical) for i in range(1, max_length + 1)))
    if kind == "selector_width":
        return Node(label, kind, inputs, encoding, tuple(canonical(i, numerical) for i in range(max_length + 1)))
    if kind == "full":
        return Node(label, kind, (), encoding, (_read_result(expr.fill, numerical, where),))
    if kind == "map":
        results = [_apply(expr.f, (v,), numerical, where) for v in ins[0].values]
        values = _sorted(r for r in results if r is not _RAISED_MARK)
        code = {v: c for c, v in enumerate(values)}
        return Node(
            label, kind, inputs, encoding, values, tuple(RAISED if r is _RAISED_MARK else code[r] for r in results)
        )
    if kind == "sequence_map":
        first, second = nodes[expr.fst.label], nodes[expr.snd.label]
        inputs = (first.label, second.label)
        from tracr.rasp import rasp

        function, exact = expr.f, False
        if isinstance(expr, rasp.LinearSequenceMap):  # tracr compiles a*x + b*y exactly: tabulate it exactly
            function, exact = _linear(expr.fst_fac, expr.snd_fac), True
        results = [[_apply(function, (a, b), numerical, where, exact) for b in second.values] for a in first.values]
        values = _sorted(r for row in results for r in row if r is not _RAISED_MARK)
        code = {v: c for c, v in enumerate(values)}
        return Node(
            label,
            kind,
            inputs,
            encoding,
            values,
            tuple(tuple(RAISED if r is _RAISED_MARK else code[r] for r in row) for row in results),
        )
    # aggregate: inputs are (selector, sop)
    selector, source = nodes[expr.selector.label], nodes[expr.sop.label]
    inputs = (selector.label, source.label)
    default = _read_result(expr.default, numerical, f"{where}'s default")
    values = (
        {canonical(v, numerical) for v in source.values}
        | {default}
        | _means(source.values, numerical, max_length, where)
    )
    values = _sorted(values)
    return Node(label, kind, inputs, encoding, values, (), values.index(default))


_RAISED_MARK = object()


def _linear(first: float, second: float) -> Callable:
    a, b = _read_result(first, True, "a LinearSequenceMap factor"), _read_result(second, True, "a factor")
    return lambda x, y: a * Fraction(x) + b * Fraction(y)


def _apply(function: Callable, args: tuple, numerical: bool, where: str, exact: bool = False) -> Any:
    if any(a is None for a in args):
        return None  # RASP does not call the function on an undefined value
    try:
        result = function(*(args if exact else (_python_value(a) for a in args)))
    except Exception:
        return _RAISED_MARK
    return _read_result(result, numerical, f"{where} on {', '.join(show(a) for a in args)}")


def _means(values: Iterable[Value], numerical: bool, max_length: int, where: str) -> set[Value]:
    """Every mean of 2..max_length of the numbers among ``values`` (with repetition)."""
    numbers = sorted({Fraction(v) for v in values if is_number(v)})
    means: set[Value] = set()
    sums = set(numbers)
    for count in range(2, max_length + 1):
        if not numbers:
            break
        sums = {s + x for s in sums for x in numbers}
        if len(sums) > MAX_MEAN_SUMS:
            raise ExportError(
                f"{where}: the means of up to {max_length} of its {len(numbers)} numbers take more than "
                f"{MAX_MEAN_SUMS} values; lower max_seq_len"
            )
        means |= {canonical(s / count, numerical) for s in sums}
    return means


def check_against_rasp(
    program: Any, table: RaspProgram, vocab: Iterable[Any], max_length: int
) -> tuple[int, tuple[Value, ...] | None]:
    """Compare the tabulated program with tracr's ``rasp.evaluate`` on every input of length 1..max_length.

    Numbers are compared up to 1e-9 (RASP computes in floats); raises ``ExportError`` at the first difference.
    Returns the number of inputs compared and the first input (shortlex) on which both are undefined, if any.
    """
    from tracr.rasp import rasp

    tokens = table.tokens_node.values if table.tokens_node is not None else _sorted(vocab)
    python_tokens = [_python_value(t) for t in tokens]
    count = 0
    undefined: tuple[Value, ...] | None = None
    for length in range(1, max_length + 1):
        for word in itertools.product(python_tokens, repeat=length):
            count += 1
            try:
                expected = rasp.evaluate(program, list(word))
            except Exception as exc:
                expected = exc
            try:
                got: Any = run(table, [canonical(t) for t in word]).output
            except RaspError as exc:
                got = exc
            if isinstance(expected, Exception) or isinstance(got, Exception):
                if isinstance(expected, Exception) and isinstance(got, Exception):
                    if undefined is None:
                        undefined = tuple(canonical(t) for t in word)
                    continue
                raise ExportError(
                    f"input {list(word)!r}: rasp.evaluate gives {expected!r}, the tabulated program {got!r}"
                )
            for position, (want, have) in enumerate(zip(expected, got)):
                if not _same(want, have):
                    raise ExportError(
                        f"input {list(word)!r}, position {position}: rasp.evaluate gives {want!r}, "
                        f"the tabulated program {show(have)}"
                    )
    return count, undefined


def _scan_undefined(table: RaspProgram, max_length: int) -> tuple[tuple[Value, ...] | None, int]:
    """The shortlex-least input on which the tabulated program is undefined among the lengths with at most
    ``rasp.batched.SCAN_LIMIT`` inputs (scanned in order), and the length up to which every input was scanned."""
    tokens = table.tokens_node.values if table.tokens_node is not None else (None,)  # no tokens node: one input
    found, unscanned = least_undefined(table, range(len(tokens)), range(1, max_length + 1))
    scanned = (min(unscanned) - 1) if unscanned else max_length
    if found is None or (unscanned and len(found) > scanned):
        return None, scanned
    return tuple(tokens[c] for c in found), scanned


def _reason(table: RaspProgram, values: tuple[Value, ...] | None) -> tuple[str, str, tuple[Value, ...]] | None:
    """(the input shown, why the program is undefined there, the input) for an undefined input, or None."""
    if values is None:
        return None
    try:
        run(table, values)
    except RaspError as exc:
        return "[" + ", ".join(show(v) for v in values) + "]", str(exc), values
    raise AssertionError(f"the RASP evaluators disagree on {values}")  # pragma: no cover (tests/test_rasp.py)


def _same(rasp_value: Any, ours: Value) -> bool:
    if rasp_value is None or ours is None:
        return rasp_value is None and ours is None
    if isinstance(rasp_value, (int, float, np.number)) and is_number(ours) and not isinstance(rasp_value, str):
        return abs(Fraction(float(rasp_value)) - Fraction(ours)) <= Fraction(1, 10**9)
    if isinstance(rasp_value, tuple) and isinstance(ours, tuple):
        return len(rasp_value) == len(ours) and all(_same(a, b) for a, b in zip(rasp_value, ours))
    return rasp_value == ours


# ---------------------------------------------------------------- the compiled model


def _matrix(array: Any) -> dict:
    """A weight array as ``{"shape", "nonzero": [[i, (j,) "p/q", "0xBITS"], ...]}`` (+0.0 entries omitted)."""
    data = np.asarray(array, dtype=np.float32)
    if not np.all(np.isfinite(data)):
        raise ExportError("a weight is not finite")
    bits = data.view(np.uint32)
    nonzero = []
    for index in zip(*np.nonzero(bits)):
        word = int(bits[index])
        snapped = snap_float32(word)
        nonzero.append([*(int(i) for i in index), _fraction_text(snapped), f"0x{word:08x}"])
    return {"shape": list(data.shape), "nonzero": nonzero}


def _fraction_text(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def _snap_summary(params: dict) -> dict:
    worst, denominators = Fraction(0), set()
    for module in params.values():
        for matrix in module.values():
            for entry in matrix["nonzero"]:
                snapped, exact = Fraction(entry[-2]), float32_from_bits(int(entry[-1], 16))
                worst = max(worst, abs(snapped - exact))
                denominators.add(snapped.denominator)
    return {"max_abs_error": _fraction_text(worst), "denominators": sorted(denominators)}


def _output(model: Any, sink: str, labels: list[str]) -> dict:
    """The model's output: categorical (the residual coordinate of each value of the output space, in the output
    encoder's order) or numerical (the one coordinate of the program's output)."""
    from tracr.craft import bases

    output_encoder = model.output_encoder
    if output_encoder is None or not hasattr(output_encoder, "encoding_map"):
        if sink not in labels:
            raise ExportError(f"the numerical output {sink!r} is not a residual coordinate")
        return {"kind": "numerical", "residual_index": labels.index(sink)}
    space = []
    for value, _index in sorted(output_encoder.encoding_map.items(), key=lambda kv: kv[1]):
        label = str(bases.BasisDirection(sink, value))
        if label not in labels:
            raise ExportError(f"output direction {label!r} is not a residual coordinate")
        space.append(
            {
                "value": value_to_json(_read_result(value, False, "the output space")),
                "residual_index": labels.index(label),
            }
        )
    return {"kind": "categorical", "space": space}


def _config(config: Any, width: int) -> dict:
    """The compiled model's configuration, as the export records it (``width``: the residual stream's)."""
    return {
        "num_layers": config.num_layers,
        "num_heads": config.num_heads,
        "key_size": config.key_size,
        "mlp_hidden_size": config.mlp_hidden_size,
        "d_model": width,
        "layer_norm": bool(config.layer_norm),
        "causal": bool(config.causal),
        "activation": getattr(config.activation_function, "__name__", str(config.activation_function)),
    }


def export(
    model: Any,
    program: Any,
    *,
    source: str = "",
    compile_settings: dict | None = None,
    check: bool = True,
    undefined: str = "error",
    progress: Callable[[str], None] | None = None,
) -> dict:
    """The export document (a JSON-ready dict) of a compiled tracr model and the RASP program it was compiled from.

    ``undefined``: what to do when the program is undefined on some input up to max_seq_len (a function raises,
    a categorical aggregate averages several values: tracr's ``rasp.evaluate`` raises there too). ``"error"``
    (default) raises ``ExportError`` naming the least such input; ``"dont-care"`` exports anyway and records the
    policy and the least input (``rasp-equivalence`` then skips those inputs, as tracr promises nothing there).
    ``progress`` (``print``, say) is told each step: tabulating and checking take seconds for larger vocabularies.
    """
    if undefined not in ("error", "dont-care"):
        raise ExportError(f"undefined: expected 'error' or 'dont-care', got {undefined!r}")
    say = progress or (lambda message: None)

    config = model.model_config
    encoder = model.input_encoder
    if encoder is None or not hasattr(encoder, "encoding_map"):
        raise ExportError("the model has no categorical input encoder (tracr models always have one)")
    bos, pad = encoder.bos_token, encoder.pad_token
    if bos is None:
        raise ExportError("the model has no BOS token")
    max_positions = encoder._max_seq_len  # includes the BOS position
    max_length = max_positions - 1
    vocab = [v for v in encoder.encoding_map if v not in (bos, pad)]
    say(f"tabulating the program over {len(vocab)} tokens up to length {max_length}")
    table = tabulate(program, vocab, max_length, source)
    if check:
        inputs = sum(len(vocab) ** length for length in range(1, max_length + 1))
        say(f"checking the table against tracr's rasp.evaluate on {inputs:,} inputs")
    checked, found = check_against_rasp(program, table, vocab, max_length) if check else (0, None)
    scanned = max_length
    if not check:  # no exhaustive pass ran: scan the lengths that are cheap to scan (the spec's load checks all)
        found, scanned = _scan_undefined(table, max_length)
    least = _reason(table, found)
    if least is not None and undefined == "error":
        word, reason, _ = least
        raise ExportError(
            f"the RASP program is undefined on {word!r} ({reason}); tracr's rasp.evaluate raises there too. Pass "
            "undefined='dont-care' to export it with such inputs as don't-care, or fix the program"
        )
    labels = [str(label) for label in model.residual_labels]
    token_ids = {canonical(v): i for v, i in encoder.encoding_map.items() if v not in (bos, pad)}
    symbols = {v: symbol_of(v) for v in table.vocabulary}
    if len(set(symbols.values()) | {str(bos)}) != len(symbols) + 1:
        raise ExportError(f"the vocabulary's symbols {sorted(symbols.values())} and BOS {bos!r} are not distinct")
    output = _output(model, program.label, labels)
    if output["kind"] != table.output_node.encoding:
        raise ExportError(f"the program's output is {table.output_node.encoding} but the model's is {output['kind']}")
    params = {
        module: {name: _matrix(value) for name, value in sorted(model.params[module].items())}
        for module in sorted(model.params)
    }
    return {
        "format": FORMAT,
        "generator": _versions(),
        "source": source,
        "compile": dict(compile_settings or {}),
        "config": _config(config, len(labels)),
        "residual_labels": labels,
        "input": {
            "bos": str(bos),
            "pad": None if pad is None else str(pad),
            "max_seq_len": max_length,
            "bos_id": encoder.encoding_map[bos],
            "vocabulary": [
                {"value": value_to_json(v), "symbol": symbols[v], "id": token_ids[v]} for v in table.vocabulary
            ],
        },
        "output": output,
        "snap": _snap_summary(params),
        "params": params,
        "program": program_to_json(table),
        "undefined": {
            "policy": undefined,
            "least": None if least is None else [symbol_of(v) for v in least[2]],
            "searched_up_to": scanned,  # every input up to this length was looked at
        },
        "checked": {
            "inputs": checked,
            "max_length": max_length if check else 0,
            "against": "tracr rasp.evaluate" if check else "not checked",
        },
    }


def write_export(
    path: str | Path, model: Any, program: Any, progress: Callable[[str], None] | None = None, **options: Any
) -> dict:
    """``export(...)`` written to ``path`` as compact JSON; returns the document. ``progress``: as ``export``."""
    document = export(model, program, progress=progress, **options)
    _write(path, document, progress)
    return document


def _write(path: str | Path, document: dict, progress: Callable[[str], None] | None) -> None:
    text = json.dumps(document, separators=(",", ":")) + "\n"
    Path(path).write_text(text, encoding="utf-8")
    if progress is not None:
        progress(
            f"wrote {path} ({len(text.encode()) / 1024:.1f} KiB; {document['checked']['inputs']:,} inputs checked)"
        )


def compile_and_export(
    program: Any,
    vocab: Iterable[Any],
    max_seq_len: int,
    path: str | Path | None = None,
    *,
    compiler_bos: str = "BOS",
    compiler_pad: str = "PAD",
    mlp_exactness: int = 100,
    causal: bool = False,
    source: str = "",
    check: bool = True,
    undefined: str = "error",
    progress: Callable[[str], None] | None = None,
) -> tuple[Any, dict]:
    """Compile ``program`` with tracr and export it (written to ``path`` when given): (model, document).
    ``progress`` (``print``, say) is told each step."""
    from tracr.compiler import compiling

    settings = {
        "vocab": sorted((value_to_json(canonical(v)) for v in vocab), key=str),
        "max_seq_len": max_seq_len,
        "compiler_bos": compiler_bos,
        "compiler_pad": compiler_pad,
        "mlp_exactness": mlp_exactness,
        "causal": causal,
    }
    if progress is not None:
        progress(f"compiling with tracr (max_seq_len {max_seq_len})")
    model = compiling.compile_rasp_to_model(
        program,
        vocab=set(vocab),
        max_seq_len=max_seq_len,
        compiler_bos=compiler_bos,
        compiler_pad=compiler_pad,
        mlp_exactness=mlp_exactness,
        causal=causal,
    )
    document = export(
        model,
        program,
        source=source,
        compile_settings=settings,
        check=check,
        undefined=undefined,
        progress=progress,
    )
    if path is not None:
        _write(path, document, progress)
    return model, document


def _versions() -> dict:
    import importlib.metadata as metadata

    out = {}
    for package in ("tracr-pypi", "jax", "jaxlib", "dm-haiku", "numpy", "verify-tf"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[package] = metadata.version(package)
    return out

"""Import a tracr-compiled transformer (``model: {tracr: export.json, snap: true, attention: hardmax}``).

The file is written by ``verify_tf.tracr_export`` (format ``verify-tf-tracr/1``, docs/tracr.md). tracr's
model is read into the IR exactly as haiku runs it (tracr/compiler/assemble.py, tracr/transformer/model.py):

* tokens: the vocabulary's symbols and BOS, each embedding row ``token_embed[id]`` (it carries the constant
  coordinate ``one``); positions: ``pos_embed`` as the absolute positional table, row 0 for BOS (all zero);
* one IR block per tracr layer: the attention sublayer (head h reads columns ``[h·key_size, (h+1)·key_size)``
  of query/key/value and the same rows of the output projection), then the ReLU MLP; both residual; no layer
  norm (a model with one is refused). Heads and hidden units that contribute exactly zero are left out (tracr
  pads every layer to the same number of heads and hidden units), as are key/value columns that are zero;
* the readout: the numerical output coordinate (categorical outputs are decoded by ``rasp-equivalence``
  from the output space's coordinates; the readout is then zero).

Weights: ``snap: true`` (default) takes each weight as the simplest rational inside its float32 rounding
interval (the value tracr meant: -125/3, not -41.66666793823242), after checking that the rational does round
to the stored float32 bits; the largest change and the denominators that occur go into the model's notes.
``snap: false`` takes every float32 exactly (dyadic rationals with large denominators: the int64 batched
evaluator may refuse them, and the engines then say so).

Attention: ``hardmax`` (default) reads tracr's *intended* computation exactly: its logits are 100 where the
selector holds, 0 elsewhere and 50 for the BOS key, times 1/sqrt(key_size) > 0, so the argmax set and the
uniform average over ties do not depend on the scale. The model tracr ships runs a float32 softmax instead,
which leaks weight off the argmax set; the notes bound that leak head by head (``head_leaks``), and
``float_network`` gives the model as it runs (``verify_tf.floats``). ``softmax`` reads it as the fixed-point
softmax of docs/semantics.md; it needs ``quantize: {bits, frac}`` (every weight rounded to the grid,
1/sqrt(key_size) folded into the queries) and a matching ``arithmetic: {mode: fixed, ...}``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..floats import FloatAttention, FloatHead, FloatMLP, FloatNetwork
from ..ir import AlphabetTokens, AttentionLayer, Block, FeedForward, Head, Model, zeros
from ..numbers import float32_from_bits, float32_interval, fmt
from ..rasp.program import ProgramError, RaspProgram, Value, program_from_json, value_from_json
from ..semantics.exp_table import exp_bracket
from ..userfiles import UserFileError, read_user_text

FORMAT = "verify-tf-tracr/1"
ATTENTION_READINGS = ("float", "hardmax", "softmax")
READINGS = {  # what the IR computes for each, beside the float model that tracr runs (Model.reading)
    "float": "hardmax, tracr's intended computation",  # the IR; rasp-equivalence checks the float model itself
    "hardmax": "hardmax, tracr's intended computation",
    "softmax": "fixed-point softmax of the quantized weights",
}


class TracrImportError(ValueError):
    """The export file cannot be read into the IR exactly (the message names the part and what is wrong)."""


@dataclass(frozen=True)
class TracrExport:
    """The parts of an export file that the importer and ``rasp-equivalence`` read."""

    path: str
    document: dict
    program: RaspProgram
    symbols: tuple[str, ...]  # the vocabulary's alphabet symbols, in vocabulary order
    ids: tuple[int, ...]  # their rows of token_embed
    bos: str
    bos_id: int
    max_seq_len: int
    output_kind: str  # categorical | numerical
    output_space: tuple[tuple[Value, int], ...]  # categorical: (value, residual index), in output order
    output_index: int | None  # numerical: the residual index
    residual_labels: tuple[str, ...]
    # what the exporter was told to do with inputs where the program is undefined ("error" or "dont-care"); the
    # rasp-equivalence property's `undefined` option overrides it
    undefined_policy: str = "error"

    @property
    def weights_digest(self) -> str:
        """sha256 of the model's configuration and every weight's float32 bits: which float model this is."""
        doc = self.document
        data = json.dumps({"config": doc["config"], "params": doc["params"]}, sort_keys=True)
        return hashlib.sha256(data.encode()).hexdigest()

    @property
    def d_model(self) -> int:
        return len(self.residual_labels)


def read_export(path: str | Path) -> TracrExport:
    """Read and check an export file (cached per path and modification time)."""
    path = Path(path)
    try:
        stamp = os.stat(path).st_mtime_ns
    except OSError as exc:
        raise TracrImportError(f"cannot read {path}: {exc.strerror or exc}") from None
    return _read_export(str(path.resolve()), stamp)


@lru_cache(maxsize=16)
def _read_export(path: str, stamp: int) -> TracrExport:
    try:
        document = strict_json(read_user_text(Path(path), "the export"))
    except UserFileError as exc:
        raise TracrImportError(f"{Path(path).name}: {exc}") from None
    except (json.JSONDecodeError, RecursionError) as exc:
        raise TracrImportError(f"{Path(path).name} is not a JSON export: {exc}") from None
    except _NotStrict as exc:
        raise TracrImportError(f"{Path(path).name}: {exc}") from None
    return parse_export(document, path)


class _NotStrict(ValueError):
    """JSON that Python's reader accepts and the JSON standard does not (NaN, a key written twice)."""


def _refuse_constant(name: str) -> None:
    raise _NotStrict(f"{name} is not a JSON number (an export holds finite numbers only)")


def _distinct_keys(pairs: list[tuple[str, Any]]) -> dict:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _NotStrict(f"the key {key[:60]!r} is written twice in one object (which one counts is ambiguous)")
        seen[key] = value
    return seen


def strict_json(text: str) -> Any:
    """``json.loads`` without its extensions: NaN, Infinity and duplicate keys are refused (``_NotStrict``)."""
    return json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_distinct_keys)


def parse_export(document: Any, path: str = "<export>") -> TracrExport:
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise TracrImportError(
            f"{Path(path).name}: not a tracr export (expected format {FORMAT!r}; write one with "
            "verify_tf.tracr_export.write_export)"
        )
    try:
        program = program_from_json(document.get("program"))
        labels = document["residual_labels"]
        inp, out = document["input"], document["output"]
        vocabulary = inp["vocabulary"]
        symbols = tuple(str(entry["symbol"]) for entry in vocabulary)
        values = tuple(value_from_json(entry["value"]) for entry in vocabulary)
        ids = tuple(int(entry["id"]) for entry in vocabulary)
        bos, bos_id, max_seq_len = str(inp["bos"]), int(inp["bos_id"]), int(inp["max_seq_len"])
        kind = out["kind"]
        if kind == "categorical":
            space = tuple((value_from_json(e["value"]), int(e["residual_index"])) for e in out["space"])
            index = None
        elif kind == "numerical":
            space, index = (), int(out["residual_index"])
        else:
            raise TracrImportError(f"output.kind: expected categorical or numerical, got {kind!r}")
    except ProgramError as exc:
        raise TracrImportError(f"{Path(path).name}: program: {exc}") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise TracrImportError(f"{Path(path).name}: malformed export ({type(exc).__name__}: {exc})") from None
    if tuple(values) != program.vocabulary:
        raise TracrImportError(
            f"{Path(path).name}: the model's vocabulary {list(values)} is not the program's {list(program.vocabulary)}"
        )
    if len(set(symbols)) != len(symbols) or bos in symbols:
        raise TracrImportError(
            f"{Path(path).name}: the vocabulary's symbols {list(symbols)} and BOS {bos!r} are not distinct"
        )
    d = len(labels)
    indices = [i for _, i in space] + ([index] if index is not None else [])
    if any(not 0 <= i < d for i in indices):
        raise TracrImportError(f"{Path(path).name}: an output coordinate is outside the residual stream of width {d}")
    if program.max_length != max_seq_len:
        raise TracrImportError(
            f"{Path(path).name}: the program is tabulated up to length {program.max_length}, the "
            f"model takes {max_seq_len}"
        )
    if kind != program.output_node.encoding:
        raise TracrImportError(
            f"{Path(path).name}: the program's output is {program.output_node.encoding}, the model's {kind}"
        )
    undefined = document.get("undefined") or {}
    policy = undefined.get("policy", "error") if isinstance(undefined, dict) else None
    if policy not in ("error", "dont-care"):
        raise TracrImportError(f"{Path(path).name}: undefined.policy: expected 'error' or 'dont-care', got {policy!r}")
    return TracrExport(
        path,
        document,
        program,
        symbols,
        ids,
        bos,
        bos_id,
        max_seq_len,
        kind,
        space,
        index,
        tuple(str(x) for x in labels),
        policy,
    )


# ---------------------------------------------------------------- weights


class _Weights:
    """Dense exact matrices from the export's sparse entries, snapped or not, and what snapping changed."""

    def __init__(self, params: dict, snap: bool, quantize: dict | None):
        self.params, self.snap, self.quantize = params, snap, quantize
        self.count, self.worst, self.worst_where, self.denominators = 0, Fraction(0), "", set()
        self.q_worst, self.q_where = Fraction(0), ""

    def matrix(self, module: str, name: str, shape: tuple[int, ...]) -> list:
        try:
            entry = self.params[module][name]
        except KeyError:
            raise TracrImportError(f"params: missing {module}/{name}") from None
        if tuple(entry.get("shape", ())) != shape:
            raise TracrImportError(f"params: {module}/{name} has shape {entry.get('shape')}, expected {list(shape)}")
        dense: Any = (
            [Fraction(0)] * shape[0] if len(shape) == 1 else [[Fraction(0)] * shape[1] for _ in range(shape[0])]
        )
        for item in entry["nonzero"]:
            *index, text, bits_text = item
            if len(index) != len(shape) or any(not 0 <= i < n for i, n in zip(index, shape)):
                raise TracrImportError(f"params: {module}/{name}: entry {item} is outside the shape {list(shape)}")
            value = self._value(text, bits_text, f"{module}/{name}{index}")
            if len(shape) == 1:
                dense[index[0]] = value
            else:
                dense[index[0]][index[1]] = value
        return dense

    def _value(self, text: str, bits_text: str, where: str) -> Fraction:
        try:
            bits = int(bits_text, 16)
            exact = float32_from_bits(bits)
            snapped = Fraction(text)
        except (ValueError, ZeroDivisionError):
            raise TracrImportError(f"params: {where}: malformed entry {text!r} {bits_text!r}") from None
        lo, hi = float32_interval(bits)
        if not lo <= snapped <= hi:
            raise TracrImportError(
                f"params: {where}: {text} does not round to its float32 {float(exact)!r} "
                f"({bits_text}); the export was edited or is corrupt"
            )
        self.count += 1
        value = snapped if self.snap else exact
        if abs(snapped - exact) > self.worst:
            self.worst, self.worst_where = abs(snapped - exact), where
        self.denominators.add(value.denominator)
        return value

    def grid(self, value: Fraction, where: str, divisor_square: int = 1) -> Fraction:
        """``value / sqrt(divisor_square)`` rounded to the nearest multiple of 2^-frac (integer square roots)."""
        if self.quantize is None:
            return value
        scale = 1 << self.quantize["frac"]
        target = value * scale  # the grid point nearest target / sqrt(divisor_square)
        root = math.isqrt(divisor_square)
        if root * root == divisor_square:
            mantissa = round(target / root)
        else:
            square = target * target / divisor_square
            floor = math.isqrt(square.numerator // square.denominator)
            mantissa = floor + (1 if square >= (Fraction(2 * floor + 1, 2)) ** 2 else 0)
            mantissa = mantissa if value >= 0 else -mantissa
        bound = 1 << (self.quantize["bits"] - 1)
        if not -bound <= mantissa <= bound - 1:
            raise TracrImportError(
                f"{where} = {fmt(value)} is outside the {self.quantize['bits']}-bit range of quantize"
            )
        result = Fraction(mantissa, scale)
        if root * root == divisor_square and abs(result - value / root) > self.q_worst:
            self.q_worst, self.q_where = abs(result - value / root), where
        return result


# ---------------------------------------------------------------- the float model as it runs


def float_network(export: TracrExport) -> FloatNetwork:
    """The model of an export as tracr runs it: every weight the float32 it is stored as (``floats.network``)."""
    cached = _FLOAT_NETWORKS.get(id(export))
    if cached is None or cached[0] is not export:
        if len(_FLOAT_NETWORKS) > 16:
            _FLOAT_NETWORKS.clear()
        cached = _FLOAT_NETWORKS[id(export)] = (export, _float_network(export))
    return cached[1]


_FLOAT_NETWORKS: dict[int, tuple[TracrExport, FloatNetwork]] = {}


def _float_network(export: TracrExport) -> FloatNetwork:
    doc = export.document
    config, params = doc["config"], doc["params"]
    _check_config_sizes(config, params, export.d_model)
    layers, heads, key_size = int(config["num_layers"]), int(config["num_heads"]), int(config["key_size"])

    def dense(module: str, name: str) -> np.ndarray:
        entry = params[module][name]
        bits = np.zeros(tuple(entry["shape"]), dtype=np.uint32)
        for *index, _text, word in entry["nonzero"]:
            bits[tuple(index)] = int(word, 16)
        return bits.view(np.float32)

    blocks = []
    for layer in range(layers):
        prefix = f"transformer/layer_{layer}"
        q, k, v, o = (dense(f"{prefix}/attn/{part}", "w") for part in ("query", "key", "value", "linear"))
        bq, bk, bv, bo = (dense(f"{prefix}/attn/{part}", "b") for part in ("query", "key", "value", "linear"))
        value_size = v.shape[1] // heads
        head_list = []
        for h in range(heads):
            keys, values = slice(h * key_size, (h + 1) * key_size), slice(h * value_size, (h + 1) * value_size)
            head_list.append(
                FloatHead(q[:, keys], bq[keys], k[:, keys], bk[keys], v[:, values], bv[values], o[values, :])
            )
        attention = FloatAttention(tuple(head_list), bo, key_size, bool(config["causal"]))
        mlp = FloatMLP(
            dense(f"{prefix}/mlp/linear_1", "w"),
            dense(f"{prefix}/mlp/linear_1", "b"),
            dense(f"{prefix}/mlp/linear_2", "w"),
            dense(f"{prefix}/mlp/linear_2", "b"),
        )
        blocks.append((attention, mlp))
    ids = dict(zip(export.symbols, export.ids))
    ids[export.bos] = export.bos_id
    return FloatNetwork(
        dense("token_embed", "embeddings"),
        dense("pos_embed", "embeddings"),
        tuple(blocks),
        ids,
        export.bos,
        runs_as(key_size),
    )


def runs_as(key_size: int) -> str:
    """How a tracr model runs, in one line (every verdict about it states this)."""
    return f"float32, as tracr compiled it: softmax attention with every head's logits x 1/sqrt({key_size})"


# ---------------------------------------------------------------- the IR


def import_tracr(
    path: str | Path,
    snap: bool = True,
    attention: str = "float",
    quantize: dict | None = None,
    name: str | None = None,
) -> Model:
    """The IR of the tracr model in an export file (see the module docstring)."""
    export = read_export(path)
    return model_from_export(export, snap=snap, attention=attention, quantize=quantize, name=name or Path(path).stem)


def import_tracr_model(
    model: Any,
    program: Any,
    *,
    snap: bool = True,
    attention: str = "float",
    quantize: dict | None = None,
    name: str = "tracr",
    check: bool = True,
) -> Model:
    """For notebooks: the IR of a compiled tracr model object (``AssembledTransformerModel``) directly.

    Needs ``tracr`` (``pip install 'verify-tf[tracr]'``): the program is tabulated as ``tracr_export`` does.
    """
    from ..tracr_export import export

    return model_from_export(
        parse_export(export(model, program, check=check)), snap=snap, attention=attention, quantize=quantize, name=name
    )


def model_from_export(
    export: TracrExport,
    *,
    snap: bool = True,
    attention: str = "float",
    quantize: dict | None = None,
    name: str = "tracr",
) -> Model:
    if attention not in ATTENTION_READINGS:
        raise TracrImportError(f"attention: expected one of {', '.join(ATTENTION_READINGS)}, got {attention!r}")
    if attention == "softmax" and quantize is None:
        raise TracrImportError(
            "attention: softmax is read as the fixed-point softmax: it needs quantize: {bits, frac} "
            "(and arithmetic: {mode: fixed} with the same bits and frac)"
        )
    doc = export.document
    try:
        config = doc["config"]
        layers, heads, key_size = int(config["num_layers"]), int(config["num_heads"]), int(config["key_size"])
        hidden, layer_norm, causal = int(config["mlp_hidden_size"]), config["layer_norm"], bool(config["causal"])
        activation = config.get("activation", "relu")
        params = doc["params"]
    except (KeyError, TypeError, ValueError) as exc:
        raise TracrImportError(f"config: malformed ({type(exc).__name__}: {exc})") from None
    if layer_norm:
        raise TracrImportError(
            "config.layer_norm: the model uses layer norm, which the IR cannot express exactly "
            "(tracr compiles without it)"
        )
    if activation != "relu":
        raise TracrImportError(f"config.activation: {activation!r}: only ReLU MLPs are exact")
    d = export.d_model
    _check_config_sizes(config, params, d)
    expected = {"token_embed", "pos_embed"} | {
        f"transformer/layer_{layer}/{part}"
        for layer in range(layers)
        for part in ("attn/query", "attn/key", "attn/value", "attn/linear", "mlp/linear_1", "mlp/linear_2")
    }
    if set(params) != expected:
        extra, missing = sorted(set(params) - expected), sorted(expected - set(params))
        raise TracrImportError(
            f"params: {'unexpected ' + extra[0] if extra else 'missing ' + missing[0]} "
            f"(a tracr model of {layers} layers has exactly {len(expected)} modules)"
        )
    weights = _Weights(params, snap, quantize)
    scoring = "softmax" if attention == "softmax" else "hardmax"  # float: the IR is tracr's intended computation
    width = heads * key_size
    vocab_rows = len(params["token_embed"]["embeddings"]["shape"]) and params["token_embed"]["embeddings"]["shape"][0]
    token_embed = weights.matrix("token_embed", "embeddings", (vocab_rows, d))
    pos_embed = weights.matrix("pos_embed", "embeddings", (export.max_seq_len + 1, d))
    if any(not 0 <= i < vocab_rows for i in export.ids + (export.bos_id,)):
        raise TracrImportError(f"input: a token id is outside token_embed's {vocab_rows} rows")
    blocks, dropped_heads, dropped_units = [], 0, 0
    for layer in range(layers):
        prefix = f"transformer/layer_{layer}"
        mats = {
            part: (
                weights.matrix(f"{prefix}/attn/{part}", "w", (d, width) if part != "linear" else (width, d)),
                weights.matrix(f"{prefix}/attn/{part}", "b", (width,) if part != "linear" else (d,)),
            )
            for part in ("query", "key", "value", "linear")
        }
        layer_heads = []
        for h in range(heads):
            head = _head(mats, h, key_size, d, scoring, causal, weights, f"layers[{layer}].heads[{h}]")
            if head is None:
                dropped_heads += 1
            else:
                layer_heads.append(head)
        output_bias = tuple(weights.grid(x, f"layers[{layer}].attention.output-bias") for x in mats["linear"][1])
        if not layer_heads and any(output_bias):
            layer_heads.append(
                _head(mats, 0, key_size, d, scoring, causal, weights, f"layers[{layer}].heads[0]", keep=True)
            )
        attention_layer = AttentionLayer(tuple(layer_heads), output_bias) if layer_heads else None
        feed_forward, dropped = _feed_forward(weights, layer, d, hidden)
        dropped_units += dropped
        blocks.append(Block(attention_layer, feed_forward))
    g = weights.grid
    embedding = tuple(tuple(g(x, "embedding") for x in token_embed[i]) for i in export.ids)
    bos_embedding = tuple(g(x, "bos-embedding") for x in token_embed[export.bos_id])
    tokens = AlphabetTokens(export.symbols + (export.bos,), embedding + (bos_embedding,), export.bos, bos_embedding)
    positional = tuple(tuple(g(x, "positional-encoding") for x in row) for row in pos_embed)
    readout = zeros(d)
    if export.output_index is not None:
        readout = tuple(Fraction(1 if i == export.output_index else 0) for i in range(d))
    notes = _notes(export, weights, attention, quantize, key_size, dropped_heads, dropped_units, layers, heads, hidden)
    return Model(
        tokens=tokens,
        dim=d,
        blocks=tuple(blocks),
        readout=readout,
        positional_encoding=positional,
        name=name,
        notes=tuple(notes),
        runs_as=runs_as(key_size),
        reading=READINGS[attention],
        float_source=export.weights_digest if attention == "float" else "",
    )


LAYER_MODULES = 6  # per layer: attn/query, attn/key, attn/value, attn/linear, mlp/linear_1, mlp/linear_2


def _check_config_sizes(config: dict, params: dict, d: int) -> None:
    """The configuration's sizes against what the file holds, by formula, before anything is listed or allocated
    (a 5 KB export claiming 10^6 layers took 29.5 s and 1.19 GB to refuse)."""
    layers = int(config["num_layers"])
    if layers < 0 or LAYER_MODULES * layers + 2 != len(params):
        raise TracrImportError(
            f"config.num_layers: {layers} layers need {LAYER_MODULES} * {layers} + 2 modules in params; the file has "
            f"{len(params)}"
        )
    if "d_model" in config and int(config["d_model"]) != d:
        raise TracrImportError(
            f"config.d_model: {int(config['d_model'])} is not the residual width of the export ({d} residual labels)"
        )
    for key in ("num_heads", "key_size", "mlp_hidden_size"):
        if not 0 <= int(config[key]) <= MAX_CONFIG_SIZE:
            raise TracrImportError(f"config.{key}: {int(config[key])} is outside 0..{MAX_CONFIG_SIZE:,}")


MAX_CONFIG_SIZE = 1 << 16  # heads, key size, MLP width: tracr's largest library programs use under 2,000


def _feed_forward(weights: _Weights, layer: int, d: int, hidden: int) -> tuple[FeedForward | None, int]:
    """Layer ``layer``'s MLP without its dead units (no weight in or no weight out), and how many were dropped;
    None when nothing is left and the output bias is zero."""
    prefix = f"transformer/layer_{layer}/mlp"
    w1, b1 = (
        weights.matrix(f"{prefix}/linear_1", "w", (d, hidden)),
        weights.matrix(f"{prefix}/linear_1", "b", (hidden,)),
    )
    w2, b2 = weights.matrix(f"{prefix}/linear_2", "w", (hidden, d)), weights.matrix(f"{prefix}/linear_2", "b", (d,))
    units = [u for u in range(hidden) if (any(w1[r][u] for r in range(d)) or b1[u]) and any(w2[u])]
    dropped = hidden - len(units)
    if not units and not any(b2):
        return None, dropped
    units = units or [0]
    g = weights.grid
    feed_forward = FeedForward(
        tuple(tuple(g(w1[r][u], f"layers[{layer}].w1") for r in range(d)) for u in units),
        tuple(g(b1[u], f"layers[{layer}].b1") for u in units),
        tuple(tuple(g(w2[u][r], f"layers[{layer}].w2") for u in units) for r in range(d)),
        tuple(g(x, f"layers[{layer}].b2") for x in b2),
    )
    return feed_forward, dropped


def _head(
    mats: dict,
    h: int,
    key_size: int,
    d: int,
    attention: str,
    causal: bool,
    weights: _Weights,
    where: str,
    keep: bool = False,
) -> Head | None:
    cols = range(h * key_size, (h + 1) * key_size)
    (wq, bq), (wk, bk), (wv, bv), (wo, _) = mats["query"], mats["key"], mats["value"], mats["linear"]

    def used(w: list, b: list, c: int) -> bool:
        return any(w[r][c] for r in range(d)) or bool(b[c])

    key_cols = [c for c in cols if used(wq, bq, c) and used(wk, bk, c)]
    value_cols = [c for c in cols if used(wv, bv, c) and any(wo[c])]
    if keep:
        key_cols, value_cols = list(cols), list(cols)
    if not value_cols:
        return None  # its output is exactly zero: every value it averages is projected to nothing
    key_cols = key_cols or [cols[0]]  # all logits zero: uniform attention, kept with one zero column
    g = weights.grid
    square = key_size if attention == "softmax" else 1  # softmax: haiku's 1/sqrt(key_size), folded into W_Q
    query = tuple(tuple(g(wq[r][c], f"{where}.query", square) for r in range(d)) for c in key_cols)
    query_bias = tuple(g(bq[c], f"{where}.query-bias", square) for c in key_cols)
    key = tuple(tuple(g(wk[r][c], f"{where}.key") for r in range(d)) for c in key_cols)
    value = tuple(tuple(g(wv[r][c], f"{where}.value") for r in range(d)) for c in value_cols)
    output = tuple(tuple(g(wo[c][r], f"{where}.output") for c in value_cols) for r in range(d))
    return Head(
        query=query,
        key=key,
        value=value,
        output=output,
        query_bias=query_bias,
        key_bias=tuple(g(bk[c], f"{where}.key-bias") for c in key_cols),
        value_bias=tuple(g(bv[c], f"{where}.value-bias") for c in value_cols),
        scoring=attention,
        causal=causal,
    )


def head_leaks(export: TracrExport) -> list[str]:
    """One note per attention head: its logit levels on one-hot inputs, the smallest gap after tracr's scale, and
    the leak bound (n-1)·e^(-gap) off the argmax set at the longest input (n keys, BOS included), for residual
    states that are one-hot per block (tracr's intended states). The float reading of ``rasp-equivalence``
    measures the leak of the float model itself on every input (its verdict's statistics).

    The levels are the sums of W_Q·W_K^T entries a query and a key of one-hot residual blocks can produce
    (blocks: the residual labels ``name:value`` of one SOp, plus ``one``), computed exactly from the float32
    weights (integers over a power of two); the scale is exactly 1/float32(sqrt(key_size)), haiku's divisor; the
    exponential is bounded above by exact rationals (``semantics.exp_table.exp_bracket``). They describe tracr's
    intended (hardmax) logits on one-hot inputs.
    """
    network = float_network(export)
    blocks: dict[str, list[int]] = {}
    for index, label in enumerate(export.residual_labels):
        blocks.setdefault(label.split(":", 1)[0], []).append(index)
    n = export.max_seq_len + 1
    out = []
    for layer, (attention, _mlp) in enumerate(network.layers):
        divisor = Fraction(float(attention.divisor))
        for h, head in enumerate(attention.heads):
            if not head.output.any():
                continue
            levels = _levels(head.query, head.key, blocks)
            where = f"layer {layer} head {h}"
            if levels is None:
                out.append(f"{where}: too many one-hot logit combinations to list its levels")
                continue
            shown = ", ".join(fmt(x) for x in levels[:6]) + (", ..." if len(levels) > 6 else "")
            if len(levels) == 1:
                out.append(f"{where}: one logit level ({shown}): uniform attention, no leak")
                continue
            gap = min(b - a for a, b in itertools.pairwise(levels))
            scaled = gap / divisor
            bound = (n - 1) * exp_bracket(-scaled, 12)[1]
            out.append(
                f"{where}: logit levels {{{shown}}} x 1/sqrt({attention.key_size}); smallest gap {fmt(gap)} -> "
                f"{float(scaled):.3g} after the scale; on one-hot residuals it leaks <= (n-1)·e^-gap = "
                f"{n - 1}·e^-{float(scaled):.3g} <= {float(bound):.2g}"
            )
    return out


def _levels(query: np.ndarray, key: np.ndarray, blocks: dict[str, list[int]]) -> list[Fraction] | None:
    """The distinct exact logits q·k of one-hot query and key states (at most one direction per residual block,
    the ``one`` coordinate included), or None if there are too many combinations to list."""
    rows = [r for r in range(query.shape[0]) if query[r].any()]
    cols = [c for c in range(key.shape[0]) if key[c].any()]
    if not rows or not cols:
        return [Fraction(0)]
    q, q_bits = _exact(query[rows])
    k, k_bits = _exact(key[cols])
    if q.dtype == np.int64 and k.dtype == np.int64 and int(abs(q).max()) * int(abs(k).max()) * q.shape[1] < 1 << 63:
        qk = q.dot(k.T).astype(object)  # every partial sum is below 2^63 in magnitude: exact in int64
    else:
        qk = q.astype(object).dot(k.astype(object).T)  # exact Python integers
    denominator = 1 << (q_bits + k_bits)
    row_at, col_at = {r: i for i, r in enumerate(rows)}, {c: i for i, c in enumerate(cols)}
    q_groups = [[row_at[i] for i in members if i in row_at] for members in blocks.values()]
    k_groups = [[col_at[i] for i in members if i in col_at] for members in blocks.values()]
    q_groups, k_groups = [g for g in q_groups if g], [g for g in k_groups if g]
    if math.prod(len(g) + 1 for g in q_groups) > 1 << 16:
        return None
    values: set[int] = set()
    for qs in itertools.product(*[[*g, None] for g in q_groups]):
        picked = [i for i in qs if i is not None]
        reachable = {0}  # a Minkowski sum over the key's blocks: each adds one of its directions' logits, or none
        for group in k_groups:
            options = {0} | {sum((qk[i][j] for i in picked), 0) for j in group}
            reachable = {a + b for a in reachable for b in options}
        values |= reachable
    return sorted(Fraction(int(v), denominator) for v in values)


def _exact(array: np.ndarray) -> tuple[np.ndarray, int]:
    """A float32 matrix as exact integers over 2^bits, bits as small as the entries allow: (ints, bits); int64
    when every entry is below 2^31 in magnitude, else Python integers."""
    data = np.asarray(array, dtype=np.float64)  # float32 -> float64 is exact
    bits = 0
    while bits < 200 and not np.all(np.ldexp(data, bits) == np.floor(np.ldexp(data, bits))):
        bits += 1  # a float32 has 24 significant bits: a handful of steps for tracr's weights
    scaled = np.ldexp(data, bits)  # exact: a power-of-two scaling of integers' worth of mantissa
    if np.all(np.abs(scaled) < 2**31):
        return scaled.astype(np.int64), bits
    ints = np.empty(data.shape, dtype=object)
    for index, value in np.ndenumerate(data):
        ints[index] = int(Fraction(float(value)) * (1 << bits))
    return ints, bits


def _notes(
    export: TracrExport,
    weights: _Weights,
    attention: str,
    quantize: dict | None,
    key_size: int,
    dropped_heads: int,
    dropped_units: int,
    layers: int,
    heads: int,
    hidden: int,
) -> list[str]:
    name = Path(export.path).name
    notes = [
        f"tracr model {name}: {layers} layer(s) of {heads} head(s) (key size {key_size}) and a ReLU MLP of "
        f"{hidden} units, residual width {export.d_model}; vocabulary {{{', '.join(export.symbols)}}}, BOS "
        f"{export.bos!r} at position 0, inputs of length 1..{export.max_seq_len} (never padded: tracr does not "
        f"mask PAD); {export.output_kind} output"
    ]
    dens = sorted(weights.denominators)
    shown = ", ".join(str(x) for x in dens[:8]) + (f", ... ({len(dens)} in all)" if len(dens) > 8 else "")
    worst = (
        f"{fmt(weights.worst)} (about {float(weights.worst):.3g}, at {weights.worst_where})" if weights.worst else "0"
    )
    if weights.snap:
        notes.append(
            f"snap: {weights.count} non-zero weights read as the simplest rationals inside their float32 "
            f"rounding intervals; denominators {{{shown}}}; largest |snapped - float32| = {worst}"
        )
    else:
        notes.append(
            f"snap: false: {weights.count} non-zero weights taken as their exact float32 values "
            f"(denominators {{{shown}}}); snapping would move them by at most {worst}"
        )
    leaks = head_leaks(export)
    if attention == "float":
        notes.append(
            "reading: float, the model as tracr compiled it (float32 softmax, every head's logits x "
            f"1/sqrt({key_size}), the largest head's key size): rasp-equivalence checks it; other properties "
            "check tracr's intended hardmax computation and say so beside their verdicts"
        )
    elif attention == "hardmax":
        notes.append(
            "reading: hardmax, tracr's intended computation (the argmax set of each head's logits, ties "
            f"averaged); the model tracr ships runs in float32 softmax with logits x 1/sqrt({key_size}) and leaks "
            "weight off the argmax set (per head below): this reading does not bound that"
        )
    else:
        notes.append(
            f"reading: the fixed-point softmax of the spec's arithmetic, with 1/sqrt({key_size}) folded into W_Q "
            "(not the float32 model tracr runs)"
        )
    notes.extend(leaks)
    if quantize is not None:
        notes.append(
            f"quantize: every weight rounded to the nearest multiple of 2^-{quantize['frac']}; largest "
            f"rounding error (rational weights) {fmt(weights.q_worst)}"
        )
    if dropped_heads or dropped_units:
        notes.append(
            f"left out as exactly zero: {dropped_heads} head(s) and {dropped_units} hidden unit(s) tracr "
            "pads layers with"
        )
    return notes

"""Turning a user-typed input into tokens, and a Trace into tables or JSON (used by `run` and `explain`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ..ir import AlphabetTokens, Model, Token
from ..numbers import fmt, fmt_vector
from ..schema.dsl import Context, ListOf, Number
from ..schema.errors import SpecError
from ..schema.yamlnodes import parse_yaml
from ..semantics import Arithmetic
from ..semantics.interpreter import Trace


def parse_input(model: Model, text: str) -> tuple[Token, ...]:
    """'abba' (or 'a b b a') for alphabet models; a YAML list of tokens for grid models."""
    if isinstance(model.tokens, AlphabetTokens):
        symbols = [s for s in model.tokens.symbols if s != model.tokens.bos]
        parts = text.split() if " " in text.strip() else list(text.strip())
        unknown = [p for p in parts if p not in symbols]
        if unknown:
            raise SpecError(f"symbol {unknown[0]!r} is not in the alphabet {symbols}", file="--input")
        return tuple(parts)
    dim = model.tokens.dim
    node = parse_yaml(text, "--input")
    ctx = Context("--input", Path.cwd())
    if dim == 1 and node.kind == "seq" and all(c.kind == "scalar" for c in node.value):
        values = ListOf(Number()).validate(node, ctx, "input")
        return tuple((v,) for v in values)
    rows = ListOf(ListOf(Number(), length=dim)).validate(node, ctx, "input")
    return tuple(tuple(r) for r in rows)


def position_labels(model: Model, trace: Trace) -> list[str]:
    """The one numbering of docs/semantics.md: "BOS" for a model's BOS position, then the user's 0, 1, ..."""
    offset = 1 if isinstance(model.tokens, AlphabetTokens) and model.tokens.bos is not None else 0
    return ["BOS"] * offset + [str(i) for i in range(len(trace.tokens) - offset)]


def _titled(console: Console, title: str, table: Table) -> None:
    """A table under its title, the title a line of its own (a title never wraps to a narrow table's width)."""
    console.print(Text(title, style="bold"), highlight=False)
    console.print(table)


def _vectors_table(labels: list[str], tokens, vectors) -> Table:
    table = Table(header_style="bold")
    table.add_column("pos", justify="right")
    table.add_column("token")
    table.add_column("value")
    for label, t, v in zip(labels, tokens, vectors):
        table.add_row(label, escape(t) if isinstance(t, str) else fmt_vector(t), fmt_vector(v))
    return table


def print_trace(console: Console, model: Model, arith: Arithmetic, trace: Trace) -> None:
    labels = position_labels(model, trace)
    console.print(f"[bold]{escape(model.name)}[/] — {escape(arith.describe())}")
    _titled(console, "embedding", _vectors_table(labels, trace.tokens, trace.embedded))
    norm_first = {
        i: (
            b.attention is not None and b.attention.norm_first,
            b.feed_forward is not None and b.feed_forward.norm_first,
        )
        for i, b in enumerate(model.blocks)
    }
    for index, block in enumerate(trace.blocks):
        if block.attention_norm is not None and norm_first[index][0]:
            _titled(
                console,
                f"layer {index}: LayerNorm (attention input)",
                _vectors_table(labels, trace.tokens, block.attention_norm),
            )
        layer = model.blocks[index].attention
        for h, head in enumerate(block.heads):
            if layer is not None:  # one line, never wrapped to a table's width
                console.print(f"layer {index} head {h}: {layer.heads[h].describe_positions()}", soft_wrap=True)
            if head.rotated_queries is not None and head.rotated_keys is not None:
                _titled(
                    console,
                    f"layer {index} head {h}: q after RoPE",
                    _vectors_table(labels, trace.tokens, head.rotated_queries),
                )
                _titled(
                    console,
                    f"layer {index} head {h}: k after RoPE",
                    _vectors_table(labels, trace.tokens, head.rotated_keys),
                )
            table = Table(header_style="bold")
            table.add_column("i\\j", justify="right")
            for label in labels:
                table.add_column(label, justify="right")
            for label, scores, row in zip(labels, head.scores, head.weights):
                table.add_row(label, *[fmt(w) if scores[j] is not None else "·" for j, w in enumerate(row)])
            _titled(console, f"layer {index} head {h}: attention weights (rows: query i, cols: key j)", table)
        if block.after_attention is not None:
            _titled(
                console,
                f"layer {index}: after attention"
                + (" and LayerNorm" if block.attention_norm is not None and not norm_first[index][0] else ""),
                _vectors_table(labels, trace.tokens, block.after_attention),
            )
        if block.feed_forward_norm is not None and norm_first[index][1]:
            _titled(
                console,
                f"layer {index}: LayerNorm (feed-forward input)",
                _vectors_table(labels, trace.tokens, block.feed_forward_norm),
            )
        if block.after_feed_forward is not None:
            _titled(
                console,
                f"layer {index}: after feed-forward"
                + (" and LayerNorm" if block.feed_forward_norm is not None and not norm_first[index][1] else ""),
                _vectors_table(labels, trace.tokens, block.after_feed_forward),
            )
    if trace.before_final_norm is not None:
        _titled(console, "final LayerNorm", _vectors_table(labels, trace.tokens, trace.output))
    table = Table(header_style="bold")
    table.add_column("pos", justify="right")
    table.add_column("q")
    for label, q in zip(labels, trace.readout):
        table.add_row(label, fmt(q))
    _titled(console, "readout q = u·z", table)
    if trace.saturations:
        console.print(f"[yellow]{trace.saturations} value(s) saturated to the fixed-point range[/]")


def trace_to_json(trace: Trace, model: Model | None = None) -> dict[str, Any]:
    def vecs(vs):
        return [[str(c) for c in v] for v in vs] if vs is not None else None

    labels = position_labels(model, trace) if model is not None else [str(i) for i in range(len(trace.tokens))]
    return {
        "positions": [label if label == "BOS" else int(label) for label in labels],
        "tokens": [t if isinstance(t, str) else [str(c) for c in t] for t in trace.tokens],
        "embedded": vecs(trace.embedded),
        "layers": [
            {
                "heads": [
                    {
                        "scores": [[None if s is None else str(s) for s in row] for row in h.scores],
                        "weights": [[str(w) for w in row] for row in h.weights],
                        "output": vecs(h.output),
                    }
                    | (
                        {"rotated_queries": vecs(h.rotated_queries), "rotated_keys": vecs(h.rotated_keys)}
                        if h.rotated_queries is not None
                        else {}
                    )
                    for h in b.heads
                ],
                "attention_output": vecs(b.attention_output),
                "after_attention": vecs(b.after_attention),
                "hidden": vecs(b.hidden),
                "after_feed_forward": vecs(b.after_feed_forward),
                "attention_norm": vecs(b.attention_norm),
                "feed_forward_norm": vecs(b.feed_forward_norm),
            }
            for b in trace.blocks
        ],
        "before_final_norm": vecs(trace.before_final_norm),
        "output": vecs(trace.output),
        "readout": [str(q) for q in trace.readout],
        "saturations": trace.saturations,
    }

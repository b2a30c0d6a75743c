"""The model IR as canonical plain data: every number an exact ``p/q`` string, JSON-ready.

Used by model files (``builders.files``), cache keys, witnesses that carry a model, and IR edits.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from . import (
    Alibi,
    AlphabetTokens,
    AttentionLayer,
    Block,
    FeedForward,
    Frequency,
    GridTokens,
    Head,
    LayerNorm,
    Matrix,
    Model,
    RelativeTable,
    Rotary,
    Vector,
    matrix,
    vector,
)

FORMAT = "verify-tf-model/1"


def model_to_dict(model: Model) -> dict[str, Any]:
    """A canonical plain-data form (numbers as 'p/q' strings): used for files and for cache keys."""

    def vec(v: Vector) -> list[str]:
        return [str(x) for x in v]

    def mat(m: Matrix) -> list[list[str]]:
        return [vec(r) for r in m]

    def table(t: RelativeTable | None) -> list[str] | None:
        return None if t is None else vec(t.values)

    def norm(n: LayerNorm | None) -> dict[str, Any] | None:
        return None if n is None else {"gamma": vec(n.gamma), "beta": vec(n.beta), "eps": str(n.eps)}

    if isinstance(model.tokens, GridTokens):
        tokens: dict[str, Any] = {"grid": model.tokens.dim}
    else:
        t = model.tokens
        tokens = {
            "alphabet": list(t.symbols),
            "embedding": mat(t.embedding),
            "bos": t.bos,
            "bos-embedding": vec(t.bos_embedding) if t.bos_embedding is not None else None,
        }
    layers = []
    for block in model.blocks:
        layer: dict[str, Any] = {"attention": None, "feed-forward": None}
        if block.attention is not None:
            layer["attention"] = {
                "heads": [
                    _positional_items(h)
                    | {
                        "scoring": h.scoring,
                        "causal": h.causal,
                        "positional": h.positional,
                        "query": mat(h.query),
                        "key": mat(h.key),
                        "value": mat(h.value),
                        "output": mat(h.output),
                        "query-bias": vec(h.query_bias),
                        "key-bias": vec(h.key_bias),
                        "value-bias": vec(h.value_bias),
                        "rpe-bias": table(h.rpe_bias),
                        "urpe-c": table(h.urpe_c),
                    }
                    for h in block.attention.heads
                ],
                "output-bias": vec(block.attention.output_bias),
                "residual": block.attention.residual,
            }
            if block.attention.norm is not None:  # absent keys keep pre-LayerNorm files and cache keys unchanged
                layer["attention"]["norm"] = norm(block.attention.norm)
                layer["attention"]["norm-first"] = block.attention.norm_first
        if block.feed_forward is not None:
            f = block.feed_forward
            layer["feed-forward"] = {
                "w1": mat(f.w1),
                "b1": vec(f.b1),
                "w2": mat(f.w2),
                "b2": vec(f.b2),
                "residual": f.residual,
            }
            if f.activation != "relu":
                layer["feed-forward"]["activation"] = f.activation
            if f.norm is not None:
                layer["feed-forward"]["norm"] = norm(f.norm)
                layer["feed-forward"]["norm-first"] = f.norm_first
        layers.append(layer)
    data = {
        "format": FORMAT,
        "name": model.name,
        "tokens": tokens,
        "positional-encoding": mat(model.positional_encoding) if model.positional_encoding else None,
        "layers": layers,
        "readout": vec(model.readout),
    }
    if model.final_norm is not None:
        data["final-norm"] = norm(model.final_norm)
    if model.runs_as:  # absent keys keep the files and cache keys of models that are their own reading unchanged
        data["runs-as"] = model.runs_as
        data["reading"] = model.reading
    if model.float_source:
        data["float-source"] = model.float_source
    return data


def _positional_items(head: Head) -> dict[str, Any]:
    """RoPE and ALiBi keys, only where present (absent keys keep older files and cache keys unchanged)."""
    items: dict[str, Any] = {}
    if head.rope is not None:
        items["rope"] = {
            "pairing": head.rope.pairing,
            "frequencies": [
                {"kind": f.kind, "value": str(f.value), "exponent": str(f.exponent)} for f in head.rope.frequencies
            ],
        }
    if head.alibi is not None:
        items["alibi-slope"] = str(head.alibi.slope)
        items["alibi-distance"] = head.alibi.distance
    return items


def _rotary(data: dict[str, Any] | None) -> Rotary | None:
    if data is None:
        return None
    frequencies = tuple(
        Frequency(f["kind"], Fraction(f["value"]), Fraction(f.get("exponent", "0"))) for f in data["frequencies"]
    )
    return Rotary(frequencies, data.get("pairing", "half"))


def _alibi(head: dict[str, Any]) -> Alibi | None:
    if head.get("alibi-slope") is None:
        return None
    return Alibi(Fraction(head["alibi-slope"]), head.get("alibi-distance", "causal"))


def model_from_dict(data: dict[str, Any]) -> Model:
    def vec(v: list[str]) -> Vector:
        return vector([Fraction(x) for x in v])

    def mat(m: list[list[str]]) -> Matrix:
        return matrix([[Fraction(x) for x in r] for r in m])

    def table(t: list[str] | None) -> RelativeTable | None:
        return None if t is None else RelativeTable(vec(t))

    def norm(n: dict[str, Any] | None) -> LayerNorm | None:
        return None if n is None else LayerNorm(vec(n["gamma"]), vec(n["beta"]), Fraction(n["eps"]))

    tok = data["tokens"]
    if "grid" in tok:
        tokens: Any = GridTokens(int(tok["grid"]))
        dim = tokens.dim
    else:
        emb = mat(tok["embedding"])
        tokens = AlphabetTokens(
            tuple(tok["alphabet"]),
            emb,
            tok.get("bos"),
            vec(tok["bos-embedding"]) if tok.get("bos-embedding") is not None else None,
        )
        dim = len(emb[0])
    blocks = []
    for layer in data["layers"]:
        attention = None
        if layer.get("attention"):
            a = layer["attention"]
            heads = tuple(
                Head(
                    query=mat(h["query"]),
                    key=mat(h["key"]),
                    value=mat(h["value"]),
                    output=mat(h["output"]),
                    query_bias=vec(h["query-bias"]),
                    key_bias=vec(h["key-bias"]),
                    value_bias=vec(h["value-bias"]),
                    scoring=h["scoring"],
                    causal=bool(h["causal"]),
                    positional=h["positional"],
                    rpe_bias=table(h.get("rpe-bias")),
                    urpe_c=table(h.get("urpe-c")),
                    rope=_rotary(h.get("rope")),
                    alibi=_alibi(h),
                )
                for h in a["heads"]
            )
            attention = AttentionLayer(
                heads,
                vec(a["output-bias"]),
                bool(a.get("residual", True)),
                norm(a.get("norm")),
                bool(a.get("norm-first", False)),
            )
        ff = None
        if layer.get("feed-forward"):
            f = layer["feed-forward"]
            ff = FeedForward(
                mat(f["w1"]),
                vec(f["b1"]),
                mat(f["w2"]),
                vec(f["b2"]),
                bool(f.get("residual", True)),
                f.get("activation", "relu"),
                norm(f.get("norm")),
                bool(f.get("norm-first", False)),
            )
        blocks.append(Block(attention, ff))
    pe = mat(data["positional-encoding"]) if data.get("positional-encoding") else None
    return Model(
        tokens=tokens,
        dim=dim,
        blocks=tuple(blocks),
        readout=vec(data["readout"]),
        positional_encoding=pe,
        final_norm=norm(data.get("final-norm")),
        name=data.get("name", "model"),
        runs_as=str(data.get("runs-as", "")),
        reading=str(data.get("reading", "")),
        float_source=str(data.get("float-source", "")),
    )

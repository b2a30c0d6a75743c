"""Build a Model from a validated inline ``model:`` section (plain dicts from the spec schema)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ..ir import (
    DEFAULT_LAYERNORM_EPS,
    Alibi,
    AlphabetTokens,
    AttentionLayer,
    Block,
    FeedForward,
    Frequency,
    GridTokens,
    Head,
    LayerNorm,
    Model,
    RelativeTable,
    Rotary,
    alibi_slopes,
    matrix,
    vector,
    zeros,
)


def relative_table(value: Any, neutral: Fraction) -> RelativeTable | None:
    """A list [t_-r, ..., t_0, ..., t_r] (2r + 1 entries, offsets -r..r), or a mapping {offset: value} whose
    radius is the largest |offset| given; offsets inside the radius that it leaves out get the table's
    neutral value (0 for the RPE bias B, 1 for the URPE table C). Offsets beyond the radius clip to the
    nearest end (docs/semantics.md, "Relative tables")."""
    if value is None:
        return None
    if isinstance(value, dict):
        radius = max((abs(k) for k in value), default=0)
        return RelativeTable(tuple(Fraction(value.get(k, neutral)) for k in range(-radius, radius + 1)))
    return RelativeTable(vector(value))


def build_rotary(section: dict[str, Any] | None, key_dim: int) -> Rotary:
    """``rope: {base: B}`` (default 10000), ``{turns: [...]}`` or ``{radians: [...]}``, with a ``pairing``."""
    section = section or {}
    pairing = section.get("pairing") or "half"
    for kind in ("turns", "radians"):
        if section.get(kind) is not None:
            return Rotary(tuple(Frequency(kind, Fraction(v)) for v in section[kind]), pairing)
    if key_dim % 2:
        raise ValueError(f"RoPE rotates pairs of coordinates; the key dimension {key_dim} is odd")
    return Rotary.standard(key_dim, section.get("base") or 10000, pairing)


def build_head(h: dict[str, Any], standard_slope: Fraction | None = None) -> Head:
    """One head; an ALiBi head without a slope gets ``standard_slope`` (its place in the layer's geometric
    sequence)."""
    key_dim = len(h["query"])
    value_dim = len(h["value"])
    return Head(
        query=matrix(h["query"]),
        key=matrix(h["key"]),
        value=matrix(h["value"]),
        output=matrix(h["output"]),
        query_bias=vector(h["query-bias"]) if h["query-bias"] is not None else zeros(key_dim),
        key_bias=vector(h["key-bias"]) if h["key-bias"] is not None else zeros(key_dim),
        value_bias=vector(h["value-bias"]) if h["value-bias"] is not None else zeros(value_dim),
        scoring=h["scoring"],
        causal=h["causal"],
        positional=h["positional"],
        rpe_bias=relative_table(h["rpe-bias"], Fraction(0)),
        urpe_c=relative_table(h["urpe-c"], Fraction(1)),
        rope=build_rotary(h.get("rope"), key_dim) if h["positional"] == "rope" or h.get("rope") else None,
        alibi=_alibi(h, standard_slope),
    )


def _alibi(h: dict[str, Any], standard_slope: Fraction | None) -> Alibi | None:
    section = h.get("alibi")
    if h["positional"] != "alibi" and section is None:
        return None
    section = section or {}
    slope = section.get("slope")
    if slope is None:
        if standard_slope is None:
            raise ValueError("an ALiBi head needs a slope")
        slope = standard_slope
    return Alibi(Fraction(slope), section.get("distance") or "causal")


def build_heads(heads: list[dict[str, Any]]) -> tuple[Head, ...]:
    """A layer's heads; ALiBi heads without a slope get the standard slopes for the layer's number of heads."""
    if any(h["positional"] == "alibi" and (h.get("alibi") or {}).get("slope") is None for h in heads):
        slopes: tuple[Fraction | None, ...] = alibi_slopes(len(heads))
    else:
        slopes = (None,) * len(heads)
    return tuple(build_head(h, slope) for h, slope in zip(heads, slopes))


def build_norm(n: dict[str, Any] | None) -> LayerNorm | None:
    """gamma as given; beta defaults to zeros and eps to torch's 1e-5."""
    if n is None:
        return None
    gamma = vector(n["gamma"])
    return LayerNorm(
        gamma,
        vector(n["beta"]) if n["beta"] is not None else zeros(len(gamma)),
        Fraction(n["eps"]) if n["eps"] is not None else DEFAULT_LAYERNORM_EPS,
    )


def build_inline(section: dict[str, Any]) -> Model:
    tokens_section = section["tokens"]
    if "grid" in tokens_section and tokens_section["grid"] is not None:
        tokens: Any = GridTokens(tokens_section["grid"])
        dim = tokens_section["grid"]
    else:
        embedding = matrix(tokens_section["embedding"])
        dim = len(embedding[0])
        bos = tokens_section["bos"]
        bos_embedding = tokens_section["bos-embedding"]
        tokens = AlphabetTokens(
            tuple(tokens_section["alphabet"]),
            embedding,
            bos,
            vector(bos_embedding) if bos_embedding is not None else None,
        )
    blocks = []
    for layer in section["layers"] or []:
        attention = None
        if layer["attention"] is not None:
            a = layer["attention"]
            heads = build_heads(a["heads"])
            attention = AttentionLayer(
                heads,
                vector(a["output-bias"]) if a["output-bias"] is not None else zeros(dim),
                a["residual"],
                build_norm(a["norm"]),
                a["norm-first"],
            )
        ff = None
        if layer["feed-forward"] is not None:
            f = layer["feed-forward"]
            ff = FeedForward(
                matrix(f["w1"]),
                vector(f["b1"]) if f["b1"] is not None else zeros(len(f["w1"])),
                matrix(f["w2"]),
                vector(f["b2"]) if f["b2"] is not None else zeros(dim),
                f["residual"],
                f["activation"],
                build_norm(f["norm"]),
                f["norm-first"],
            )
        blocks.append(Block(attention, ff))
    readout = (
        vector(section["readout"])
        if section["readout"] is not None
        else tuple(Fraction(1 if c == 0 else 0) for c in range(dim))
    )
    pe = matrix(section["positional-encoding"]) if section["positional-encoding"] is not None else None
    return Model(
        tokens=tokens,
        dim=dim,
        blocks=tuple(blocks),
        readout=readout,
        positional_encoding=pe,
        final_norm=build_norm(section["final-norm"]),
        name=section.get("name") or "inline model",
    )

"""Model source ``layers``: the weights written in the spec (``model: {tokens: ..., layers: [...], readout: ...}``).

Its schema (``TOKENS``, ``LAYER``, ``HEAD``, ...) and ``build_inline``, which turns the validated section (plain
dicts) into a Model.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ..ir import (
    ACTIVATIONS,
    ALIBI_DISTANCES,
    DEFAULT_LAYERNORM_EPS,
    POSITIONALS,
    ROPE_PAIRINGS,
    SCORINGS,
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
from ..schema.dsl import Boolean, Context, Either, Field, Integer, ListOf, MatrixOf, Number, Obj, String, join
from ..schema.yamlnodes import Node
from .sources import ModelSource


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


# ---------------------------------------------------------------- the schema of an inline section


def _rel_table_schema(what: str) -> Either:
    as_list = ListOf(Number(), what="a list of an odd number of numbers (offsets -r..r)")
    as_map = _OffsetMap()
    return Either(
        [(lambda n: n.kind == "seq", as_list), (lambda n: n.kind == "map", as_map)],
        what=f"{what}: a list [b(-r), ..., b(0), ..., b(r)] or a mapping {{offset: value}}",
        description=f"{what} indexed by the relative offset j - i",
    )


class _OffsetMap(Obj):
    def __init__(self):
        super().__init__({})

    def validate(self, node: Node, ctx: Context, path: str) -> dict[int, Fraction]:
        out = {}
        for key, child in node.mapping().items():
            try:
                offset = int(key)
            except ValueError:
                raise ctx.error(
                    child, join(path, key), f"expected an integer offset j - i as key, got {key!r}"
                ) from None
            out[offset] = Number().validate(child, ctx, join(path, key))
        return out

    def json(self) -> dict:
        return {"type": "object", "additionalProperties": Number().json()}


ROPE = Obj(
    {
        "base": Field(Number("θ_k = base^(-2k/d), RoPE's standard frequencies (default 10000)", positive=True)),
        "turns": Field(ListOf(Number(), "θ_k = 2π·t_k exactly, one per coordinate pair")),
        "radians": Field(ListOf(Number(), "θ_k in radians, one per coordinate pair")),
        "pairing": Field(
            String("half: pairs (k, k + d/2), Llama's rotate_half; interleaved: (2k, 2k + 1)", ROPE_PAIRINGS),
            default="half",
        ),
    },
    "RoPE: q and k rotated by θ_k·p at stream position p (docs/semantics.md, RoPE)",
    exclusive=[("base", "turns", "radians")],
)

ALIBI = Obj(
    {
        "slope": Field(Number("m >= 0; default: the head's standard geometric slope 2^(-8h/n)", minimum=Fraction(0))),
        "distance": Field(
            String("causal: m·(j - i); symmetric: -m·|i - j| (docs/semantics.md, ALiBi)", ALIBI_DISTANCES),
            default="causal",
        ),
    },
    "ALiBi: the slope times the distance added to the scores",
)

HEAD = Obj(
    {
        "scoring": Field(String("how logits become weights", SCORINGS), default="softmax"),
        "causal": Field(Boolean("mask keys j > i"), default=False),
        "positional": Field(String("positional flavour inside attention", POSITIONALS), default="standard"),
        "query": Field(MatrixOf("W_Q (k x d)"), required=True),
        "key": Field(MatrixOf("W_K (k x d)"), required=True),
        "value": Field(MatrixOf("W_V (v x d)"), required=True),
        "output": Field(MatrixOf("W_O (d x v)"), required=True),
        "query-bias": Field(ListOf(Number(), "b_Q (k)")),
        "key-bias": Field(ListOf(Number(), "b_K (k)")),
        "value-bias": Field(ListOf(Number(), "b_V (v)")),
        "rpe-bias": Field(_rel_table_schema("RPE bias B[j-i] added to the logits")),
        "urpe-c": Field(_rel_table_schema("URPE Toeplitz C[j-i] multiplied into the normalised weights")),
        "rope": Field(ROPE),
        "alibi": Field(ALIBI),
    },
    "one attention head",
)

NORM = Obj(
    {
        "gamma": Field(ListOf(Number(), "γ (d): the elementwise scale"), required=True),
        "beta": Field(ListOf(Number(), "β (d): the elementwise shift")),
        "eps": Field(Number("ε inside the square root (torch's default 1e-5)")),
    },
    "LayerNorm (z − mean)/√(var + eps)·γ + β, fixed arithmetic only (docs/semantics.md)",
)
NORM_FIRST = Field(
    Boolean("true: z + f(LN(z)) (pre-LN); false: LN(z + f(z)) (post-LN, torch's default)"), default=False
)

LAYER = Obj(
    {
        "attention": Field(
            Obj(
                {
                    "heads": Field(ListOf(HEAD, min_length=1), required=True),
                    "output-bias": Field(ListOf(Number(), "b_O (d)")),
                    "residual": Field(Boolean("add the attention output to the stream"), default=True),
                    "norm": Field(NORM),
                    "norm-first": NORM_FIRST,
                },
                "multi-head attention sublayer",
            )
        ),
        "feed-forward": Field(
            Obj(
                {
                    "w1": Field(MatrixOf("W1 (r x d)"), required=True),
                    "b1": Field(ListOf(Number(), "b1 (r)")),
                    "w2": Field(MatrixOf("W2 (d x r)"), required=True),
                    "b2": Field(ListOf(Number(), "b2 (d)")),
                    "residual": Field(Boolean(), default=True),
                    "activation": Field(
                        String("relu, or I-BERT's integer polynomial i-gelu", ACTIVATIONS), default="relu"
                    ),
                    "norm": Field(NORM),
                    "norm-first": NORM_FIRST,
                },
                "feed-forward sublayer: z + W2 act(W1 z + b1) + b2",
            )
        ),
    },
    "one block: attention then feed-forward, each optional",
)

TOKENS = Obj(
    {
        "grid": Field(Integer("continuous tokens of this dimension", minimum=1, maximum=64)),
        "alphabet": Field(ListOf(String(), "symbols", min_length=1)),
        "embedding": Field(MatrixOf("one row per alphabet symbol")),
        "bos": Field(String("a beginning-of-sequence symbol prepended to every input")),
        "bos-embedding": Field(ListOf(Number(), "embedding of the BOS symbol")),
    },
    "token embedding: {grid: d} or {alphabet: [...], embedding: [[...]]}",
    exclusive=[("grid", "alphabet")],
)


def _inline_model(section: dict[str, Any], node: Node, ctx: Context, path: str) -> Model:
    """``model: {tokens: ..., layers: [...]}``: the weights written in the spec."""
    if section.get("tokens") is None:
        raise ctx.error(node, path, "an inline model needs 'tokens'", "e.g. tokens: {grid: 2}")
    tokens = section["tokens"]
    if tokens["grid"] is None and tokens["alphabet"] is None:
        raise ctx.error(tokens["__node__"], join(path, "tokens"), "expected 'grid' or 'alphabet'")
    if tokens["alphabet"] is not None and tokens["embedding"] is None:
        raise ctx.error(tokens["__node__"], join(path, "tokens"), "an alphabet needs an 'embedding' table")
    return build_inline(section)


SOURCE = ModelSource(
    key="layers",
    fields={
        "tokens": Field(TOKENS),
        "positional-encoding": Field(MatrixOf("absolute PE table (max_len x d), added to the embeddings")),
        "layers": Field(ListOf(LAYER, "blocks, in order")),
        "final-norm": Field(NORM),
        "readout": Field(ListOf(Number(), "u: the readout q_i = u . z_i (default e1)")),
    },
    build=_inline_model,
    label="an inline model (layers)",
    usage="an inline model writes its weights: model: {tokens: ..., layers: [...], final-norm: ..., readout: ...}; "
    "a random model takes random: {final-norm: true}; a torch import reads the final norm from the state dict",
    example="inline `layers` (below)",
)

"""Seeded random models with exact dyadic weights: w = k / denominator, k uniform in [-range*den, range*den].

Deterministic across platforms (numpy PCG64 integer draws), so a spec with ``random: {seed: 3}`` names
one fixed model forever. LayerNorm parameters are drawn after everything else, so switching ``layernorm`` on
keeps every other weight of the seed's model; so are random ALiBi slopes (RoPE draws nothing).

Model source ``random`` (``model: {random: {seed: 3, width: 2, ...}}``): ``RANDOM`` is its schema.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import numpy as np

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
    GridTokens,
    Head,
    LayerNorm,
    Matrix,
    Model,
    RelativeTable,
    Rotary,
    Vector,
    alibi_slopes,
)
from ..schema.dsl import Boolean, Context, Field, Integer, ListOf, Number, Obj, String
from ..schema.yamlnodes import Node
from .sources import ModelSource

LAYERNORMS = ("none", "pre", "post")


@dataclass(frozen=True)
class RandomConfig:
    seed: int = 0
    width: int = 2
    layers: int = 1
    heads: int = 1
    key_dim: int | None = None
    value_dim: int | None = None
    ffn_width: int = 0
    scoring: str = "hardmax"
    positional: str = "standard"
    causal: bool = False
    absolute_pe: bool = False
    max_length: int = 8
    weight_range: Fraction = Fraction(2)
    denominator: int = 4
    alphabet: tuple[str, ...] | None = None
    bos: str | None = None
    activation: str = "relu"  # relu | i-gelu
    layernorm: str = "none"  # none | pre (z + f(LN(z))) | post (LN(z + f(z))), on every sublayer
    final_norm: bool = False  # a LayerNorm after the last block
    layernorm_eps: Fraction = DEFAULT_LAYERNORM_EPS
    rope_base: Fraction = Fraction(10000)  # positional rope: θ_k = base^(-2k/d) (the key dimension must be even)
    rope_pairing: str = "half"
    alibi_slopes: str = "random"  # positional alibi: "random" (drawn, on the weight grid) or "standard"
    alibi_distance: str = "causal"


class _Draw:
    def __init__(self, config: RandomConfig):
        self.rng = np.random.Generator(np.random.PCG64(config.seed))
        self.den = config.denominator
        self.bound = int(config.weight_range * config.denominator)

    def vector(self, n: int, nonnegative: bool = False) -> Vector:
        lo = 0 if nonnegative else -self.bound
        ints = self.rng.integers(lo, self.bound + 1, size=n)
        return tuple(Fraction(int(k), self.den) for k in ints)

    def matrix(self, rows: int, cols: int) -> Matrix:
        return tuple(self.vector(cols) for _ in range(rows))


def random_model(config: RandomConfig) -> Model:
    draw = _Draw(config)
    d = config.width
    k = config.key_dim or d
    v = config.value_dim or d
    radius = config.max_length - 1
    blocks = []
    for _ in range(config.layers):
        heads = []
        for _ in range(config.heads):
            rpe = RelativeTable(draw.vector(2 * radius + 1)) if config.positional in ("rpe", "urpe") else None
            urpe = RelativeTable(draw.vector(2 * radius + 1, nonnegative=True)) if config.positional == "urpe" else None
            heads.append(
                Head(
                    query=draw.matrix(k, d),
                    key=draw.matrix(k, d),
                    value=draw.matrix(v, d),
                    output=draw.matrix(d, v),
                    query_bias=draw.vector(k),
                    key_bias=draw.vector(k),
                    value_bias=draw.vector(v),
                    scoring=config.scoring,
                    causal=config.causal,
                    positional=config.positional,
                    rpe_bias=rpe,
                    urpe_c=urpe,
                )
            )
        attention = AttentionLayer(tuple(heads), draw.vector(d))
        ff = None
        if config.ffn_width:
            r = config.ffn_width
            ff = FeedForward(
                draw.matrix(r, d), draw.vector(r), draw.matrix(d, r), draw.vector(d), activation=config.activation
            )
        blocks.append(Block(attention, ff))
    if config.alphabet:
        tokens: GridTokens | AlphabetTokens = AlphabetTokens(
            config.alphabet, draw.matrix(len(config.alphabet), d), config.bos, draw.vector(d) if config.bos else None
        )
    else:
        tokens = GridTokens(d)
    pe = draw.matrix(config.max_length, d) if config.absolute_pe else None
    readout = draw.vector(d)

    def norm() -> LayerNorm:
        return LayerNorm(draw.vector(d), draw.vector(d), config.layernorm_eps)

    if config.layernorm not in LAYERNORMS:
        raise ValueError(f"layernorm must be one of {LAYERNORMS}, got {config.layernorm!r}")
    if config.layernorm != "none":
        first = config.layernorm == "pre"
        blocks = [
            Block(
                replace(b.attention, norm=norm(), norm_first=first) if b.attention else None,
                replace(b.feed_forward, norm=norm(), norm_first=first) if b.feed_forward else None,
            )
            for b in blocks
        ]
    final = norm() if config.final_norm else None
    if config.positional in ("rope", "alibi"):
        blocks = [Block(_positional(b.attention, config, draw), b.feed_forward) for b in blocks]
    return Model(
        tokens=tokens,
        dim=d,
        blocks=tuple(blocks),
        readout=readout,
        positional_encoding=pe,
        final_norm=final,
        name=f"random(seed={config.seed})",
    )


def _positional(layer: AttentionLayer | None, config: RandomConfig, draw: _Draw) -> AttentionLayer | None:
    """RoPE (standard frequencies) or ALiBi slopes on every head of ``layer``."""
    if layer is None:
        return None
    if config.positional == "rope":
        heads = tuple(
            replace(h, rope=Rotary.standard(h.key_dim, config.rope_base, config.rope_pairing)) for h in layer.heads
        )
    else:
        if config.alibi_slopes == "standard":
            slopes = alibi_slopes(len(layer.heads))
        else:
            slopes = draw.vector(len(layer.heads), nonnegative=True)
        heads = tuple(replace(h, alibi=Alibi(m, config.alibi_distance)) for h, m in zip(layer.heads, slopes))
    return replace(layer, heads=heads)


# ---------------------------------------------------------------- the model source


RANDOM = Obj(
    {
        "seed": Field(Integer(minimum=0), default=0),
        "width": Field(Integer("model width d", minimum=1, maximum=64), default=2),
        "layers": Field(Integer(minimum=0, maximum=32), default=1),
        "heads": Field(Integer(minimum=1, maximum=16), default=1),
        "key-dim": Field(Integer(minimum=1, maximum=64)),
        "value-dim": Field(Integer(minimum=1, maximum=64)),
        "ffn-width": Field(Integer("0 = no feed-forward", minimum=0, maximum=256), default=0),
        "scoring": Field(String(choices=SCORINGS), default="hardmax"),
        "positional": Field(String(choices=POSITIONALS), default="standard"),
        "causal": Field(Boolean(), default=False),
        "absolute-pe": Field(Boolean("learned absolute positional encoding"), default=False),
        "max-length": Field(Integer("positions covered by PE / RPE tables", minimum=1, maximum=1024), default=8),
        "range": Field(Number("weights drawn from [-range, range]", positive=True), default=Fraction(2)),
        "denominator": Field(Integer("weights are multiples of 1/denominator", minimum=1, maximum=1 << 20), default=4),
        "alphabet": Field(ListOf(String(), min_length=1)),
        "bos": Field(String()),
        "activation": Field(String(choices=ACTIVATIONS), default="relu"),
        "layernorm": Field(String("LayerNorm on every sublayer: pre-LN, post-LN or none", LAYERNORMS), default="none"),
        "final-norm": Field(Boolean("a LayerNorm after the last block"), default=False),
        "rope-base": Field(Number("positional: rope: θ_k = base^(-2k/d)", positive=True), default=Fraction(10000)),
        "rope-pairing": Field(String("positional: rope: coordinate pairs", ROPE_PAIRINGS), default="half"),
        "alibi-slopes": Field(
            String("positional: alibi: slopes drawn on the weight grid, or the standard ones", ("random", "standard")),
            default="random",
        ),
        "alibi-distance": Field(String("positional: alibi", ALIBI_DISTANCES), default="causal"),
    },
    "a seeded random model with exact dyadic weights",
)


def _random_model(section: dict[str, Any], node: Node, ctx: Context, path: str) -> Model:
    """``model: {random: {seed: ..., width: ...}}``: a seeded random model with exact dyadic weights."""
    r = section["random"]
    config = RandomConfig(
        seed=r["seed"],
        width=r["width"],
        layers=r["layers"],
        heads=r["heads"],
        key_dim=r["key-dim"],
        value_dim=r["value-dim"],
        ffn_width=r["ffn-width"],
        scoring=r["scoring"],
        positional=r["positional"],
        causal=r["causal"],
        absolute_pe=r["absolute-pe"],
        max_length=r["max-length"],
        weight_range=r["range"],
        denominator=r["denominator"],
        alphabet=tuple(r["alphabet"]) if r["alphabet"] else None,
        bos=r["bos"],
        activation=r["activation"],
        layernorm=r["layernorm"],
        final_norm=r["final-norm"],
        rope_base=r["rope-base"],
        rope_pairing=r["rope-pairing"],
        alibi_slopes=r["alibi-slopes"],
        alibi_distance=r["alibi-distance"],
    )
    return random_model(config)


SOURCE = ModelSource(
    key="random",
    fields={"random": Field(RANDOM)},
    build=_random_model,
    label="a random model",
    usage="write model: {random: {seed: 0, width: 2, layers: 1}}",
    example="`random: {seed: 0, ...}`",
)

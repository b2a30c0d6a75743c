"""The reference interpreter: what a model computes on one concrete input. This file IS the semantics.

One function per layer kind. Every other engine (SMT encoder, numpy/torch enumeration) mirrors these
functions and is tested against them bit for bit. docs/semantics.md describes the same rules in prose.

Rounding points (Fixed mode; Exact mode rounds nowhere):
  * every affine map (q, k, v, attention output projection, both feed-forward maps): exact sum of exact
    products plus bias, then one ``round`` (floor to f bits, saturate);
  * RoPE (fixed only): each rotated query/key coordinate x_a·cos − x_b·sin (resp. x_a·sin + x_b·cos) exact
    from the rounded q or k and the rotation table (``rotary.py``: cos and sin rounded to nearest), one ``round``;
  * every attention score: q_i . k_j + B[j-i] exact (B: an RPE table or ALiBi's slope · distance), one ``round``;
  * every attention head output: sum_j a'_ij v_j exact (a' as the arithmetic defines it), one ``round``;
  * every residual addition and the embedding + positional-encoding sum: ``saturate`` only (the sum of two
    representable values is on the grid already);
  * i-GELU: the exact rational polynomial of the rounded pre-activation, one ``round``;
  * LayerNorm (fixed only): the normalised value (z_c - mean) / sigma floored once (an integer square root,
    one floor division, ``nonlinear.py``) and saturated, then gamma_c n_c + beta_c with one ``round``.
The readout q_i = u . z_i is an exact measurement of the final stream, never rounded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import cast

from ..ir import AlphabetTokens, AttentionLayer, FeedForward, Frequency, Head, LayerNorm, Matrix, Model, Token, Vector
from .arithmetic import Arithmetic, Exact, Fixed, UnsupportedInMode
from .nonlinear import igelu, layer_norm_mantissas


@dataclass
class HeadTrace:
    scores: list[list[Fraction | None]]  # [query i][key j]; None where the causal mask hides j
    weights: list[list[Fraction]]  # a'_ij: normalised (and, for urpe, multiplied by C[j-i])
    output: list[Vector]  # head_i = round(sum_j a'_ij v_j)
    rotated_queries: list[Vector] | None = None  # RoPE heads: q_i and k_j after the rotation (what the score uses)
    rotated_keys: list[Vector] | None = None


@dataclass
class BlockTrace:
    heads: list[HeadTrace] = field(default_factory=list)
    attention_output: list[Vector] | None = None  # o_i before the residual
    after_attention: list[Vector] | None = None
    hidden: list[Vector] | None = None  # act(W1 z + b1)
    after_feed_forward: list[Vector] | None = None
    attention_norm: list[Vector] | None = None  # LayerNorm output: the heads' input (pre-LN) or after_attention
    feed_forward_norm: list[Vector] | None = None

    @property
    def output(self) -> list[Vector]:
        output = self.after_feed_forward if self.after_feed_forward is not None else self.after_attention
        assert output is not None, "the block has not been evaluated"  # both sublayer branches set after_attention
        return output


@dataclass
class Trace:
    tokens: tuple[Token, ...]  # as the network sees them (BOS included)
    embedded: list[Vector]
    blocks: list[BlockTrace]
    output: list[Vector]  # final residual stream, one vector per position
    readout: list[Fraction]  # q_i = u . z_i
    saturations: int = 0  # how many stored values were clipped to the fixed-point range
    before_final_norm: list[Vector] | None = None  # the last block's output when the model has a final norm


class _Counter:
    """Applies an arithmetic's rounding and counts saturation events (the report states them)."""

    def __init__(self, arith: Arithmetic) -> None:
        self.arith = arith
        self.saturations = 0

    def round(self, x: Fraction) -> Fraction:
        floored = self.arith.round(x) if isinstance(self.arith, Exact) else self.arith.floor(x)
        return self.saturate(floored)

    def saturate(self, x: Fraction) -> Fraction:
        y = self.arith.saturate(x)
        if y != x:
            self.saturations += 1
        return y


def affine(weights: Matrix, x: Vector, bias: Vector, r: _Counter) -> Vector:
    """round(W x + b), one rounding per output coordinate."""
    return tuple(r.round(sum((w * xi for w, xi in zip(row, x)), b)) for row, b in zip(weights, bias))


def embed(model: Model, tokens: Sequence[Token], r: _Counter) -> list[Vector]:
    """Token vectors (grid tokens as given, alphabet tokens through the table) plus absolute PE."""
    pe = model.positional_encoding
    if pe is not None and len(tokens) > len(pe):
        raise ValueError(f"input length {len(tokens)} exceeds the positional encoding's {len(pe)} positions")
    return [embed_position(model, token, i, r) for i, token in enumerate(tokens)]


def embed_position(model: Model, token: Token, position: int, r: _Counter) -> Vector:
    """One stream position's input: the token's vector, plus row ``position`` of the absolute PE (saturated)."""
    if isinstance(model.tokens, AlphabetTokens):
        vector = model.tokens.embed(cast(str, token))
    else:
        vector = tuple(Fraction(c) for c in token)
    pe = model.positional_encoding
    if pe is None:
        return vector
    return tuple(r.saturate(a + b) for a, b in zip(vector, pe[position]))


def attention_head(head: Head, z: list[Vector], r: _Counter) -> HeadTrace:
    n = len(z)
    uniform = head.scoring == "uniform"  # its weights ignore the scores: q and k are not computed at all
    # Yang et al.'s rounding keeps softmax scores exact and rounds each exponential term instead
    rounded_terms = head.scoring == "softmax" and isinstance(r.arith, Fixed) and r.arith.rounded_terms
    queries = [] if uniform else [affine(head.query, zi, head.query_bias, r) for zi in z]
    keys = [] if uniform else [affine(head.key, zi, head.key_bias, r) for zi in z]
    rotated = head.positional == "rope" and not uniform
    if rotated:
        queries = [rotate(head, q, p, r) for p, q in enumerate(queries)]
        keys = [rotate(head, k, p, r) for p, k in enumerate(keys)]
    values = [affine(head.value, zi, head.value_bias, r) for zi in z]
    scores: list[list[Fraction | None]] = []
    weights: list[list[Fraction]] = []
    outputs: list[Vector] = []
    for i in range(n):
        row: list[Fraction | None] = []
        for j in range(n):
            if head.causal and j > i:
                row.append(None)
            elif uniform:
                row.append(Fraction(0))  # equal logits: the trace shows 0 for every allowed key
            else:
                dot = sum((a * b for a, b in zip(queries[i], keys[j])), Fraction(0)) + head.relative_bias(j - i)
                row.append(dot if rounded_terms else r.round(dot))
        if rounded_terms:
            contributions = [tuple(head.relative_scale(j - i) * x for x in values[j]) for j in range(n)]
            assert isinstance(r.arith, Fixed)  # rounded_terms implies it
            shown, row_output = r.arith.rounded_terms_row(row, contributions, r.saturate)  # counts saturations
            scores.append(row)
            weights.append([a * head.relative_scale(j - i) for j, a in enumerate(shown)])  # a'_ij, as URPE shows
            outputs.append(tuple(row_output))
            continue
        normalised = r.arith.attention_weights(row, head.scoring)
        scaled = [a * head.relative_scale(j - i) for j, a in enumerate(normalised)]  # URPE: softmax ⊙ C
        out = tuple(
            r.round(sum((scaled[j] * values[j][c] for j in range(n)), Fraction(0))) for c in range(head.value_dim)
        )
        scores.append(row)
        weights.append(scaled)
        outputs.append(out)
    return HeadTrace(scores, weights, outputs, queries if rotated else None, keys if rotated else None)


def rotation(arith: Fixed, frequency: Frequency, position: int) -> tuple[Fraction, Fraction]:
    """(cos, sin) of ``frequency`` at stream position ``position``: the table entries, saturated."""
    from .rotary import rotation_entry  # the rotation tables: only for a RoPE model (start-up)

    cos, sin = (rotation_entry(frequency, position, arith.frac, sine) for sine in (False, True))
    return arith.saturate(Fraction(cos, arith.scale)), arith.saturate(Fraction(sin, arith.scale))


def rotate(head: Head, x: Vector, position: int, r: _Counter) -> Vector:
    """RoPE: pair (a, b) of ``x`` becomes (round(x_a·c − x_b·s), round(x_a·s + x_b·c)), (c, s) the rounded table
    entries of the pair's frequency at the stream position (fixed arithmetic only)."""
    arith = r.arith
    if not isinstance(arith, Fixed):
        raise UnsupportedInMode(ROPE_IN_EXACT)
    assert head.rope is not None
    out = list(x)
    for frequency, (a, b) in zip(head.rope.frequencies, head.rope.pairs(len(x))):
        c, s = rotation(arith, frequency, position)
        out[a] = r.round(x[a] * c - x[b] * s)
        out[b] = r.round(x[a] * s + x[b] * c)
    return tuple(out)


ROPE_IN_EXACT = (
    "RoPE rotates by cos and sin of θ·p, which are irrational; exact arithmetic cannot represent them. Use "
    "arithmetic: fixed (rotation tables rounded to the grid, docs/semantics.md)"
)


def layer_norm(norm: LayerNorm, z: list[Vector], r: _Counter) -> list[Vector]:
    """LayerNorm per position (fixed arithmetic only): n_c = sat(floor((z_c - mean) / sigma)) on the grid, with
    sigma = floor(sqrt(var + eps) * 2^2f) / 2^2f (``nonlinear.layer_norm_mantissas``), then
    round(gamma_c n_c + beta_c)."""
    arith = r.arith
    if not isinstance(arith, Fixed):
        raise UnsupportedInMode(
            "LayerNorm divides by a square root, which is irrational in exact arithmetic; use "
            "arithmetic: fixed (integer square root, docs/semantics.md)"
        )
    out = []
    for zi in z:
        mantissas = layer_norm_mantissas([arith.mantissa(c) for c in zi], arith.frac, norm.eps)
        normalized = [r.saturate(Fraction(m, arith.scale)) for m in mantissas]
        out.append(tuple(r.round(g * n + b) for g, n, b in zip(norm.gamma, normalized, norm.beta)))
    return out


def attention_layer(layer: AttentionLayer, z: list[Vector], r: _Counter, trace: BlockTrace) -> list[Vector]:
    if layer.norm is not None and layer.norm_first:  # pre-LN: z + attn(LN(z))
        trace.attention_norm = layer_norm(layer.norm, z, r)
        heads = [attention_head(h, trace.attention_norm, r) for h in layer.heads]
    else:
        heads = [attention_head(h, z, r) for h in layer.heads]
    trace.heads = heads
    projected = [project_heads(layer, [ht.output[i] for ht in heads], r) for i in range(len(z))]
    trace.attention_output = projected
    out = residual(z, projected, layer.residual, r)
    if layer.norm is not None and not layer.norm_first:  # post-LN: LN(z + attn(z))
        out = trace.attention_norm = layer_norm(layer.norm, out, r)
    return out


def project_heads(layer: AttentionLayer, outputs: Sequence[Vector], r: _Counter) -> Vector:
    """One position's attention output o_i = round(Σ_h W_O^h head^h_i + b_O) from its heads' outputs."""
    return tuple(
        r.round(
            bias
            + sum((w * x for head, out in zip(layer.heads, outputs) for w, x in zip(head.output[c], out)), Fraction(0))
        )
        for c, bias in enumerate(layer.output_bias)
    )


def activation(name: str, h: Fraction, r: _Counter) -> Fraction:
    """relu (exact on the grid: no rounding), or i-gelu: the exact polynomial, rounded once."""
    if name == "relu":
        return max(h, Fraction(0))
    if name == "i-gelu":
        return r.round(igelu(h))
    raise ValueError(f"unknown activation {name!r}")


def feed_forward(ff: FeedForward, z: list[Vector], r: _Counter, trace: BlockTrace) -> list[Vector]:
    inputs = z
    if ff.norm is not None and ff.norm_first:  # pre-LN: z + ff(LN(z))
        inputs = trace.feed_forward_norm = layer_norm(ff.norm, z, r)
    hidden = [tuple(activation(ff.activation, h, r) for h in affine(ff.w1, zi, ff.b1, r)) for zi in inputs]
    trace.hidden = hidden
    out = residual(z, [affine(ff.w2, h, ff.b2, r) for h in hidden], ff.residual, r)
    if ff.norm is not None and not ff.norm_first:  # post-LN: LN(z + ff(z))
        out = trace.feed_forward_norm = layer_norm(ff.norm, out, r)
    return out


def residual(z: list[Vector], update: list[Vector], add: bool, r: _Counter) -> list[Vector]:
    """z + update, saturated (``add``: the sublayer is residual), or the update alone."""
    if not add:
        return update
    return [tuple(r.saturate(a + b) for a, b in zip(zi, ui)) for zi, ui in zip(z, update)]


def readout(model: Model, z: list[Vector]) -> list[Fraction]:
    return [sum((u * x for u, x in zip(model.readout, zi)), Fraction(0)) for zi in z]


def evaluate(model: Model, arith: Arithmetic, tokens: Sequence[Token]) -> Trace:
    """Run ``model`` on ``tokens`` (BOS is prepended here when the model declares one)."""
    r = _Counter(arith)
    seen = model.prepare_input(tokens)
    z = embed(model, seen, r)
    embedded = z
    blocks: list[BlockTrace] = []
    for block in model.blocks:
        bt = BlockTrace()
        if block.attention is not None:
            z = attention_layer(block.attention, z, r, bt)
            bt.after_attention = z
        if block.feed_forward is not None:
            z = feed_forward(block.feed_forward, z, r, bt)
            bt.after_feed_forward = z
        if bt.after_attention is None and bt.after_feed_forward is None:
            bt.after_attention = z
        blocks.append(bt)
    before_final = None
    if model.final_norm is not None:
        before_final, z = z, layer_norm(model.final_norm, z, r)
    return Trace(seen, embedded, blocks, z, readout(model, z), r.saturations, before_final)


def outputs(model: Model, arith: Arithmetic, tokens: Sequence[Token]) -> list[Vector]:
    """The final residual stream only (a convenience for properties)."""
    return evaluate(model, arith, tokens).output

"""Built-in model ``yun2019-contextual-mapping``: the Lemma 6 network of Yun et al. (ICLR 2020).

Exact arithmetic, hardmax attention, no positional information. With u = (1, δ^-1, ..., δ^-d+1):

    ψ(Z; b) = e1 · uᵀZ · σ_H[(uᵀZ)ᵀ (uᵀZ − b·1ᵀ)]        one hardmax head with key/query/value uᵀz,
                                                         query bias −b, output to row 1
    selective shift for l = 0, δ, ..., δ^-d+1 − δ:      Z ← Z + δ^-d (ψ(Z; l − δ/2) − ψ(Z; l + δ/2))
    global shift:                                       Z ← Z + n δ^-(n+1)d-1 ψ(Z; 0)
    readout                                             q = uᵀZ

At column j, ψ outputs max_k uᵀZ_k when uᵀZ_j > b and min_k uᵀZ_k when uᵀZ_j < b (Lemma 6's proof).
Facts (tests): d=1, δ=1/2, n=2: [0, 1/2] ↦ q = (49, 49.5); all values are at least δ apart.
"""

from __future__ import annotations

from fractions import Fraction

from ..ir import AttentionLayer, Block, GridTokens, Head, Model, matrix, vector, zeros


def column_id_vector(d: int, delta: Fraction) -> tuple[Fraction, ...]:
    """u = (1, δ^-1, ..., δ^-(d-1)): uᵀx is a bijection from grid tokens to {0, δ, ..., δ^-d+1 − δ}."""
    return tuple(Fraction(1) / delta**k for k in range(d))


def _psi_head(u: tuple[Fraction, ...], b: Fraction, scale: Fraction) -> Head:
    d = len(u)
    e1_scaled = [[scale if r == 0 else Fraction(0)] for r in range(d)]
    return Head(
        query=matrix([u]),
        key=matrix([u]),
        value=matrix([u]),
        output=matrix(e1_scaled),
        query_bias=vector([-b]),
        key_bias=zeros(1),
        value_bias=zeros(1),
        scoring="hardmax",
        causal=False,
        positional="standard",
    )


def yun_contextual_mapping(
    d: int, delta: Fraction, n: int, global_shift_scale: Fraction | None = None, drop_layer: int | None = None
) -> Model:
    """The Lemma 6 network. ``global_shift_scale`` / ``drop_layer`` build deliberately broken variants."""
    delta = Fraction(delta)
    if d < 1 or n < 1:
        raise ValueError("d and n must be positive")
    if delta <= 0 or (1 / delta).denominator != 1:
        raise ValueError("delta must be 1/k for a positive integer k")
    u = column_id_vector(d, delta)
    inv = 1 / delta
    blocks = []
    count = int(inv**d)  # column ids 0, δ, ..., δ^-d+1 − δ: δ^-d values
    if drop_layer is not None and not 0 <= drop_layer < count:
        raise ValueError(f"drop-layer must be in 0..{count - 1} (there are {count} selective-shift layers)")
    for index in range(count):
        if index == drop_layer:
            continue
        l = index * delta  # noqa: E741 - the paper's name for the left end
        heads = (
            _psi_head(u, l - delta / 2, inv**d),
            _psi_head(u, l + delta / 2, -(inv**d)),
        )
        blocks.append(Block(attention=AttentionLayer(heads, zeros(d))))
    global_scale = n * inv ** ((n + 1) * d + 1) if global_shift_scale is None else Fraction(global_shift_scale)
    blocks.append(Block(attention=AttentionLayer((_psi_head(u, Fraction(0), global_scale),), zeros(d))))
    return Model(
        tokens=GridTokens(d),
        dim=d,
        blocks=tuple(blocks),
        readout=u,
        name=f"yun2019-contextual-mapping(d={d}, delta={delta}, n={n})"
        + (f" with global shift {global_scale}" if global_shift_scale is not None else "")
        + (f" without selective-shift layer {drop_layer}" if drop_layer is not None else ""),
    )

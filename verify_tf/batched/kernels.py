"""Run a compiled ``Program`` on a batch of inputs: the interpreter's functions, vectorised over the batch.

Tensors are (batch, positions, width) integer numerators (int32 where the program proves it safe, else
int64); the denominators and the proof that nothing overflows live in the program (``program.py``). Each
function mirrors the interpreter function of the same name (``verify_tf/semantics/interpreter.py``); the
differential tests check them bit for bit. Functions ending in ``_`` update a fresh temporary in place (half
the memory traffic; numpy and torch alike).
"""

from __future__ import annotations

from typing import Any

from . import normalization
from .program import AffinePlan, AttentionPlan, EmbedPlan, FeedForwardPlan, HeadPlan, Program, Requantize, \
    ResidualPlan


def requantize_(x, plan: Requantize, ops):
    """The interpreter's ``round`` on numerators: floor to f bits (exact integer floor division), saturate."""
    if plan.divisor != 1:
        if plan.shift is not None:
            x >>= plan.shift  # arithmetic shift: floor for negative numerators too
        else:
            x //= plan.divisor
    if plan.clamp is not None:
        ops.clamp_(x, *plan.clamp)
    return x


def affine(plan: AffinePlan, x, ops):
    acc = ops.matmul(x, plan.weight, plan.float_ok)
    acc += plan.bias
    return requantize_(acc, plan.requantize, ops)


def embed(plan: EmbedPlan, rows, ops):
    if plan.bos_index is not None:
        rows = ops.prepend_column(rows, plan.bos_index)
    z = plan.table[rows]
    if plan.positional is not None:
        z += plan.positional
        if plan.clamp is not None:
            ops.clamp_(z, *plan.clamp)
    return z


def attention_head(plan: HeadPlan, z, ops):
    q = affine(plan.query, z, ops)
    k = affine(plan.key, z, ops)
    v = affine(plan.value, z, ops)
    acc = ops.matmul(q, ops.swap_last(k), plan.scores_float_ok)
    if plan.dot_scale != 1:
        acc *= plan.dot_scale
    if plan.score_bias is not None:
        acc += plan.score_bias
    scores = requantize_(acc, plan.score_requantize, ops)

    # a_ij >= 0 and the row total T_i: the weight of key j is a_ij / T_i (before per-probability rounding)
    if plan.scoring == "uniform":
        weights = ops.as_int(plan.live, scores)
    else:
        visible = ops.where(plan.live, scores, plan.masked) if plan.causal else scores
        top = ops.max_last(visible)
        if plan.scoring == "hardmax":
            weights = ops.as_int(visible == top, scores)  # the argmax set; ties averaged (Yun's sigma_H)
        else:  # softmax: E[(max - s_j) 2^f], 0 beyond the table
            weights = plan.exp[ops.clamp_(top - scores, 0, len(plan.exp) - 1)]
            if plan.causal:
                weights = ops.where(plan.live, weights, 0)
    totals = ops.sum_last(weights)
    if plan.per_probability:
        weights = (weights << plan.frac) // totals  # floor(a_ij 2^f / T_i): the floored probability
    if plan.relative_scale is not None:
        weights = weights * plan.relative_scale  # URPE: a'_ij = a_ij * C[j - i], no renormalisation
    mixed = ops.matmul(weights, v, plan.mix_float_ok)

    if plan.count_multiplier is not None:  # exact: sum_j a'_ij v_j / T_i over the common lcm denominator
        return mixed * plan.count_multiplier[totals]
    if plan.per_probability:
        out = mixed >> plan.out_shift if plan.out_shift is not None else mixed // plan.out_div
    else:
        out = (mixed * plan.out_mul if plan.out_mul != 1 else mixed) // (totals * plan.out_div)
    return ops.clamp_(out, *plan.out_clamp)


def attention_layer(plan: AttentionPlan, z, ops):
    normed = normalization.layer_norm(plan.norm, z, ops) if plan.norm is not None and plan.norm_first else z
    heads = [attention_head(h, normed, ops) for h in plan.heads]
    projected = affine(plan.output, ops.concat_last(heads), ops)
    out = residual(plan.residual, z, projected, ops)
    return normalization.layer_norm(plan.norm, out, ops) if plan.norm is not None and not plan.norm_first else out


def feed_forward(plan: FeedForwardPlan, z, ops):
    normed = normalization.layer_norm(plan.norm, z, ops) if plan.norm is not None and plan.norm_first else z
    hidden = normalization.activation(plan.activation, affine(plan.hidden, normed, ops), ops)
    out = residual(plan.residual, z, affine(plan.output, hidden, ops), ops)
    return normalization.layer_norm(plan.norm, out, ops) if plan.norm is not None and not plan.norm_first else out


def residual(plan: ResidualPlan, z, update, ops):
    if not plan.residual:
        return update
    total = (z * plan.stream_scale if plan.stream_scale != 1 else z) + \
        (update * plan.update_scale if plan.update_scale != 1 else update)
    return ops.clamp_(total, *plan.clamp) if plan.clamp is not None else total


def readout(program: Program, z, ops):
    return ops.matmul(z, program.readout_weight[:, None], program.readout_float_ok)[..., 0]


def run(program: Program, rows, ops) -> tuple[Any, Any]:
    """(final stream numerators (B, n, d), readout numerators (B, n)) for token-index rows (B, length)."""
    if program.positions == 0:
        batch = rows.shape[0]
        return ops.zeros((batch, 0, program.width)), ops.zeros((batch, 0))
    z = embed(program.embed, rows, ops)
    for block in program.blocks:
        if block.attention is not None:
            z = attention_layer(block.attention, z, ops)
        if block.feed_forward is not None:
            z = feed_forward(block.feed_forward, z, ops)
    if program.final_norm is not None:
        z = normalization.layer_norm(program.final_norm, z, ops)
    return z, readout(program, z, ops)

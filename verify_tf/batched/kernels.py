"""Run a compiled ``Program`` on a batch of inputs: the interpreter's functions, vectorised over the batch.

Tensors are (batch, positions, width) integer numerators (int32 where the program proves it safe, else
int64); the denominators and the bounds live in the program (``plans.py``, made by ``planner.py``). Each public
function mirrors the interpreter function of the same name (``verify_tf/semantics/interpreter.py``); the
differential tests check them bit for bit. Functions ending in ``_`` update a fresh temporary in place.

**Width per step.** Every step (an affine map, the scores-to-output part of a head, a residual sum, the
readout) runs in the back end's native integers when its static bound allows; a *guarded* step (static bound
above 2^62) first measures the largest |operand| per coordinate of this chunk and applies the step's bound
formula to it (``AffinePlan.acc_bound``, ``HeadPlan.intermediate_bound``, ...): native when that allows,
otherwise the same function runs on numpy object arrays of Python integers (``WIDE``, the wide twin of the
plan). A wide result is narrowed back to int64 as soon as its values fit, so only the steps (and chunks) that
need width pay for it. On torch (CPU or CUDA) a wide step copies its operands to the host.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from . import normalization
from .backends import WIDE
from .plans import (
    FLOAT_EXACT,
    LIMIT,
    AffinePlan,
    AttentionPlan,
    EmbedPlan,
    FeedForwardPlan,
    HeadPlan,
    Program,
    ReadoutPlan,
    Requantize,
    ResidualPlan,
    RotationPlan,
)

if TYPE_CHECKING:
    from .normalization import IGeluPlan, LayerNormPlan


class Context:
    """One run of a program: the native back end, the wide twins of the plans, and the rows flagged by
    tie-free heads (an inexact division by a tie count: the evaluator recomputes them on the full program)."""

    def __init__(self, ops, twins: dict[int, Any]):
        self.ops = ops
        self.twins = twins
        self.flagged = None  # (B,) bool, native
        self.wide_steps = 0  # steps that ran on Python integers (statistics, tests)

    def wide_plan(self, plan):
        return self.twins[id(plan)]

    @staticmethod
    def is_wide(x) -> bool:
        return isinstance(x, np.ndarray) and x.dtype == object

    def magnitudes(self, x) -> tuple[int, ...]:
        return tuple(WIDE.magnitudes(x) if self.is_wide(x) else self.ops.magnitudes(x))

    def to_wide(self, x):
        if self.is_wide(x):
            return x
        return self.ops.to_numpy(x).astype(np.int64).astype(object)

    def narrow(self, x) -> tuple[Any, tuple[int, ...]]:
        """(x back on the native back end as soon as every value fits int64 with the usual margin, or still
        wide; its exact bound per last-axis coordinate)."""
        self.wide_steps += 1
        bound = tuple(WIDE.magnitudes(x))
        if max(bound, default=0) <= LIMIT:
            return self.ops.from_int64(x.astype(np.int64)), bound
        return x, bound

    def flag(self, rows) -> None:
        if self.is_wide(rows) or (isinstance(rows, np.ndarray) and self.ops.name != "numpy"):
            rows = self.ops.from_bool(np.asarray(rows, dtype=bool))
        self.flagged = rows if self.flagged is None else self.flagged | rows


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


def _affine(plan: AffinePlan, x, ops, float_ok: bool):
    acc = ops.matmul(x, plan.weight, float_ok)
    acc += plan.bias
    return requantize_(acc, plan.requantize, ops)


def _fits(ctx: Context, operands: list, known: list, bound) -> tuple[bool, list]:
    """Can a guarded step run natively? Try the known bounds of its operands first, then measure them."""
    if bound(*known) <= LIMIT:
        return True, known
    measured = [ctx.magnitudes(x) if x is not None else () for x in operands]
    return bound(*measured) <= LIMIT, measured


def affine(plan: AffinePlan, x, mx, ctx: Context):
    """(round(W x + b), its bound per coordinate); ``mx``: a bound of |x| per coordinate."""
    if plan.native and not ctx.is_wide(x):
        if not plan.guarded:
            return _affine(plan, x, ctx.ops, plan.float_ok), plan.out_bound
        ok, (mx,) = _fits(ctx, [x], [mx], plan.acc_bound)
        if ok:
            return _affine(plan, x, ctx.ops, plan.acc_bound(mx) < FLOAT_EXACT), plan.output_bound(mx)
    return ctx.narrow(_affine(ctx.wide_plan(plan), ctx.to_wide(x), WIDE, False))


def rotate(plan: RotationPlan | None, x, mx, ctx: Context):
    """``interpreter.rotate`` (RoPE) on mantissas; ``mx`` bounds |x| per coordinate."""
    if plan is None:
        return x, mx
    if plan.native and not ctx.is_wide(x):
        if not plan.guarded:
            return _rotate(plan, x, ctx.ops), plan.out_bound
        ok, (mx,) = _fits(ctx, [x], [mx], plan.acc_bound)
        if ok:
            return _rotate(plan, x, ctx.ops), plan.out_bound
    return ctx.narrow(_rotate(ctx.wide_plan(plan), ctx.to_wide(x), WIDE))


def _rotate(plan: RotationPlan, x, ops):
    columns = [x[..., c] for c in range(x.shape[-1])]
    for k, (a, b) in enumerate(plan.pairs):
        c, s = plan.cos[:, k], plan.sin[:, k]  # (n,): one entry per position, broadcast over the batch
        xa, xb = columns[a], columns[b]
        columns[a] = (xa * c - xb * s) >> plan.shift  # arithmetic shift: floor, as the interpreter rounds
        columns[b] = (xa * s + xb * c) >> plan.shift
    return ops.clamp_(ops.stack(columns, -1), *plan.clamp)


def embed(plan: EmbedPlan, rows, ctx: Context):
    ops = ctx.ops
    if not plan.native:
        ops, plan, rows = WIDE, ctx.wide_plan(plan), ctx.ops.to_numpy(rows)
    if plan.bos_index is not None:
        rows = ops.prepend_column(rows, plan.bos_index)
    z = plan.table[rows]
    if plan.positional is not None:
        z += plan.positional
        if plan.clamp is not None:
            ops.clamp_(z, *plan.clamp)
    return (z, plan.out_bound) if ops is ctx.ops else ctx.narrow(z)


def _score_accumulator(plan: HeadPlan, q, k, ops, dot_float_ok: bool):
    """acc_ij: the exact score q_i . k_j + B[j - i] over the plan's accumulator denominator."""
    acc = ops.matmul(q, ops.swap_last(k), dot_float_ok)
    if plan.dot_scale != 1:
        acc *= plan.dot_scale
    if plan.score_bias is not None:
        acc += plan.score_bias
    return acc


def _rounded_terms(plan: HeadPlan, q, k, v, ops, dot_float_ok: bool):
    """Yang et al.'s head (``Fixed.rounded_terms_row``): c_i = round(S_i / T_i) with S_i = sum_j round(e^{s_ij} x_ij)
    and T_i = sum_j round(e^{s_ij}) over the live keys, s exact, x_ij = C[j - i] v_j; T_i = 0 falls back to
    round(sum_j x_ij / count). The exponential terms are the interpreter's own (``RoundedTerms``), on the host."""

    def host(x):  # int64 (int32 programs too: the host sums below widen anyway) or Python integers
        x = x if ops is WIDE else ops.to_numpy(x)
        return x if x.dtype == object or x.dtype == bool else x.astype(np.int64)

    like = v
    acc, v = host(_score_accumulator(plan, q, k, ops, dot_float_ok)), host(v)  # (B, n, n), (B, n, c)
    live = np.asarray(host(plan.live), dtype=bool)  # (n, n)
    x = v[:, None, :, :]  # (B, 1, n, c) -> (B, n, n, c) with C
    if plan.relative_scale is not None:
        x = x * host(plan.relative_scale)[None, :, :, None]
    x = np.broadcast_to(x, acc.shape + v.shape[-1:])
    acc = np.where(live, acc, 0)  # masked keys: no exponential to compute
    x = np.where(live[None, :, :, None], x, 0)
    terms = plan.terms
    sums = terms.mantissas(np.broadcast_to(acc[..., None], x.shape), x).sum(axis=2)  # (B, n, c)
    one = np.full(acc.shape, terms.value_den, dtype=acc.dtype)  # x = 1
    totals = np.where(live, terms.mantissas(acc, one), 0).sum(axis=2, keepdims=True)  # (B, n, 1)
    if acc.dtype == object or x.dtype == object:
        sums, totals = sums.astype(object), totals.astype(object)
    counts = live.sum(axis=1).astype(np.int64)[None, :, None]  # (1, n, 1)
    shifted = sums << plan.frac
    ratio = shifted // np.where(totals > 0, totals, 1)
    fallback = (x.sum(axis=2) << plan.frac) // (plan.out_div * counts)
    out = np.where(totals > 0, ratio, fallback)
    out = np.minimum(np.maximum(out, plan.out_clamp[0]), plan.out_clamp[1])
    return out if ops is WIDE else ops.as_int(ops.from_int64(out.astype(np.int64)), like)


def _weights_and_totals(plan: HeadPlan, q, k, ops, dot_float_ok: bool, like):
    """a_ij >= 0 and the row totals T_i: the weight of key j is a_ij / T_i (before per-probability rounding)."""
    if plan.mode == "uniform":
        weights = ops.as_int(plan.live, like)
        return weights, ops.sum_last(weights), None
    scores = requantize_(_score_accumulator(plan, q, k, ops, dot_float_ok), plan.score_requantize, ops)
    # key 0 is visible from every query: standing in for the masked keys it cannot change the row maximum
    visible = ops.where(plan.live, scores, scores[..., :, 0:1]) if plan.causal else scores
    top = ops.max_last(visible)
    if plan.scoring == "hardmax":
        hits = visible == top  # the argmax set; ties averaged (Yun's sigma_H)
        weights = ops.as_int(hits & plan.live if plan.causal else hits, scores)
    else:  # softmax: E[(max - s_j) 2^f], 0 beyond the table
        weights = ops.take(plan.exp, ops.clamp_(top - scores, 0, len(plan.exp) - 1))
        if plan.causal:
            weights = ops.where(plan.live, weights, 0)
    return weights, ops.sum_last(weights), scores


def _argmax1d(plan: HeadPlan, q, k, v, ops):
    """Exact 1-D hardmax without products: per query, (sum of the values of its argmax keys, their count).

    q_i k_j is largest at the largest keys when q_i > 0, at the smallest when q_i < 0, everywhere when q_i = 0.
    Without a causal mask the three sets are shared by all queries; with one they grow key by key.
    """
    keys, sign = k[..., 0], q[..., 0]  # (B, n)
    n = plan.positions
    if not plan.causal:
        ends = (ops.max_last(keys), ops.min_last(keys))  # (B, 1)
        sums, counts = [v[:, 0, :] * 0, v[:, 0, :] * 0], [keys[:, 0:1] * 0, keys[:, 0:1] * 0]
        everything = v[:, 0, :]
        for j in range(n):
            key, value = keys[:, j : j + 1], v[:, j, :]
            if j:
                everything = everything + value
            for side in (0, 1):
                hits = key == ends[side]  # (B, 1)
                sums[side] = sums[side] + hits * value
                counts[side] = counts[side] + hits
        # one of the three cases per query, selected by multiplying with 0/1 (a broadcast where is slower)
        positive, negative = (sign > 0)[..., None], (sign < 0)[..., None]
        zero = ~(positive | negative)
        total = positive * sums[0][:, None, :] + negative * sums[1][:, None, :] + zero * everything[:, None, :]
        count = positive * counts[0][:, None, :] + negative * counts[1][:, None, :] + zero * n
        return total, count
    totals, counts = [], []
    for i in range(n):
        key, value = keys[:, i : i + 1], v[:, i, :]
        if i == 0:
            best = [key, key]
            sums = [value, value]
            tallies = [key * 0 + 1, key * 0 + 1]
            everything = value
        else:
            for side, beats in ((0, key > best[0]), (1, key < best[1])):
                ties = key == best[side]
                sums[side] = ops.where(beats, value, sums[side] + ties * value)
                tallies[side] = ops.where(beats, 1, tallies[side] + ties)
                best[side] = ops.where(beats, key, best[side])
            everything = everything + value
        s = sign[:, i : i + 1]
        totals.append(ops.where(s > 0, sums[0], ops.where(s < 0, sums[1], everything)))
        counts.append(ops.where(s > 0, tallies[0], ops.where(s < 0, tallies[1], i + 1)))
    return ops.stack(totals, 1), ops.stack(counts, 1)


def _head(plan: HeadPlan, q, k, v, ops, dot_float_ok: bool, mix_float_ok: bool):
    """The scores-to-output part of a head: (head output, rows flagged by a tie-free division or None)."""
    if plan.mode == "rounded-terms":
        return _rounded_terms(plan, q, k, v, ops, dot_float_ok), None
    if plan.mode == "argmax1d":
        mixed, totals = _argmax1d(plan, q, k, v, ops)
    else:
        # the scores stay referenced until the head is done: freeing them before the mix made numpy's allocator
        # return and re-fault large blocks (measured: 35% more page faults, 5% slower on bench_eval's d8 model)
        weights, totals, _scores = _weights_and_totals(plan, q, k, ops, dot_float_ok, v)
        if plan.per_probability:
            weights = (weights << plan.frac) // totals  # floor(a_ij 2^f / T_i): the floored probability
        if plan.relative_scale is not None:
            weights = weights * plan.relative_scale  # URPE: a'_ij = a_ij * C[j - i], no renormalisation
        mixed = ops.matmul(weights, v, mix_float_ok)
    if plan.tie_free:  # exact: sum / T_i over the tie-free denominator; rows with a remainder are flagged
        flagged = ops.any_rows(mixed % totals != 0)
        return mixed // totals, flagged
    if plan.count_multiplier is not None:  # exact: sum_j a'_ij v_j / T_i over the common lcm denominator
        return mixed * ops.take(plan.count_multiplier, totals), None
    if plan.per_probability:
        out = mixed >> plan.out_shift if plan.out_shift is not None else mixed // plan.out_div
    else:
        out = (mixed * plan.out_mul if plan.out_mul != 1 else mixed) // (totals * plan.out_div)
    return ops.clamp_(out, *plan.out_clamp), None


def attention_head(plan: HeadPlan, z, mz, ctx: Context):
    q, mq = affine(plan.query, z, mz, ctx) if plan.query is not None else (None, ())
    k, mk = affine(plan.key, z, mz, ctx) if plan.key is not None else (None, ())
    if q is not None and k is not None:
        q, mq = rotate(plan.query_rotation, q, mq, ctx)
        k, mk = rotate(plan.key_rotation, k, mk, ctx)
    v, mv = affine(plan.value, z, mz, ctx)
    operands = [x for x in (q, k, v) if x is not None]
    out = flagged = None
    if plan.native and not any(ctx.is_wide(x) for x in operands):
        if not plan.guarded:
            out, flagged = _head(plan, q, k, v, ctx.ops, plan.scores_float_ok, plan.mix_float_ok)
            bound = plan.out_bound
        else:
            ok, (mq, mk, mv) = _fits(ctx, [q, k, v], [mq, mk, mv], plan.intermediate_bound)
            if ok:
                out, flagged = _head(plan, q, k, v, ctx.ops, plan.dot_float_ok(mq, mk), plan.mix_ok(mv))
                bound = plan.output_bound(mv)
    if out is None:
        wide = [ctx.to_wide(x) if x is not None else None for x in (q, k, v)]
        out, flagged = _head(ctx.wide_plan(plan), *wide, WIDE, False, False)
        out, bound = ctx.narrow(out)
    if flagged is not None:
        ctx.flag(flagged)
    return out, bound


def layer_norm(plan: LayerNormPlan | None, z, mz, ctx: Context):
    """``interpreter.layer_norm`` (normalization.py), natively, guarded or on Python integers like every step."""
    if plan is None:
        return z, mz
    if plan.native and not ctx.is_wide(z):
        if not plan.guarded:
            return normalization.layer_norm(plan, z, ctx.ops, plan.root_end), plan.out_bound
        ok, (mz,) = _fits(ctx, [z], [mz], plan.intermediate_bound)
        if ok:
            return normalization.layer_norm(plan, z, ctx.ops, plan.root_end_for(mz)), plan.output_bound(mz)
        if ctx.ops.name == "numpy":  # the radicand exceeds int64, its base-4^f digits do not
            out = normalization.layer_norm_split(plan, z)
            if out is not None:
                return out, plan.output_bound(mz)
    return ctx.narrow(normalization.layer_norm(ctx.wide_plan(plan), ctx.to_wide(z), WIDE, None))


def activation(plan: IGeluPlan | None, h, mh, ctx: Context):
    """``interpreter.activation``: ReLU (plan None) in place, or i-GELU (normalization.py)."""
    if plan is None:
        return (WIDE.relu_(h) if ctx.is_wide(h) else ctx.ops.relu_(h)), mh
    if plan.native and not ctx.is_wide(h):
        if not plan.guarded:
            return normalization.activation(plan, h, ctx.ops), plan.out_bound
        ok, (mh,) = _fits(ctx, [h], [mh], plan.intermediate_bound)
        if ok:
            return normalization.activation(plan, h, ctx.ops), plan.output_bound(mh)
    return ctx.narrow(normalization.activation(ctx.wide_plan(plan), ctx.to_wide(h), WIDE))


def attention_layer(plan: AttentionPlan, z, mz, ctx: Context, head=None):
    """``head(index, head_plan, z, mz) -> (output, bound)`` runs one head (default: ``attention_head`` over the
    whole sequence; the prefix tree's reads the keys and values its ancestors cached)."""
    normed, mn = layer_norm(plan.norm, z, mz, ctx) if plan.norm_first else (z, mz)
    if head is None:
        heads = [attention_head(h, normed, mn, ctx) for h in plan.heads]
    else:
        heads = [head(index, h, normed, mn) for index, h in enumerate(plan.heads)]
    bound = tuple(b for _, mh in heads for b in mh)
    outs = [h for h, _ in heads]
    if any(ctx.is_wide(h) for h in outs):
        joined = WIDE.concat_last([ctx.to_wide(h) for h in outs])
    else:
        joined = ctx.ops.concat_last(outs)
    projected, mp = affine(plan.output, joined, bound, ctx)
    out, mo = residual(plan.residual, z, mz, projected, mp, ctx)
    return (out, mo) if plan.norm_first else layer_norm(plan.norm, out, mo, ctx)


def feed_forward(plan: FeedForwardPlan, z, mz, ctx: Context):
    normed, mn = layer_norm(plan.norm, z, mz, ctx) if plan.norm_first else (z, mz)
    hidden, mh = affine(plan.hidden, normed, mn, ctx)
    hidden, mh = activation(plan.activation, hidden, mh, ctx)
    update, mu = affine(plan.output, hidden, mh, ctx)
    out, mo = residual(plan.residual, z, mz, update, mu, ctx)
    return (out, mo) if plan.norm_first else layer_norm(plan.norm, out, mo, ctx)


def _residual(plan: ResidualPlan, z, update, ops):
    total = (z * plan.stream_scale if plan.stream_scale != 1 else z) + (
        update * plan.update_scale if plan.update_scale != 1 else update
    )
    return ops.clamp_(total, *plan.clamp) if plan.clamp is not None else total


def residual(plan: ResidualPlan, z, mz, update, mu, ctx: Context):
    if not plan.residual:
        return update, mu
    if plan.native and not ctx.is_wide(z) and not ctx.is_wide(update):
        if not plan.guarded:
            return _residual(plan, z, update, ctx.ops), plan.out_bound
        ok, (mz, mu) = _fits(ctx, [z, update], [mz, mu], plan.sum_bound)
        if ok:
            return _residual(plan, z, update, ctx.ops), plan.output_bound(mz, mu)
    return ctx.narrow(_residual(ctx.wide_plan(plan), ctx.to_wide(z), ctx.to_wide(update), WIDE))


def readout(plan: ReadoutPlan, z, mz, ctx: Context):
    if plan.native and not ctx.is_wide(z):
        if not plan.guarded:
            return ctx.ops.matmul(z, plan.weight, plan.float_ok)[..., 0]
        ok, (mz,) = _fits(ctx, [z], [mz], plan.sum_bound)
        if ok:
            return ctx.ops.matmul(z, plan.weight, plan.sum_bound(mz) < FLOAT_EXACT)[..., 0]
    out, _ = ctx.narrow(WIDE.matmul(ctx.to_wide(z), ctx.wide_plan(plan).weight, False)[..., 0])
    return out


def run(program: Program, rows, ctx: Context) -> tuple[Any, Any]:
    """(final stream numerators (B, n, d), readout numerators (B, n)) for token-index rows (B, length).

    Native tensors of the back end, or numpy object arrays where the values exceed int64.
    """
    ops = ctx.ops
    if program.positions == 0:
        batch = rows.shape[0]
        return ops.zeros((batch, 0, program.width)), ops.zeros((batch, 0))
    z, mz = embed(program.embed, rows, ctx)
    for block in program.blocks:
        if block.attention is not None:
            z, mz = attention_layer(block.attention, z, mz, ctx)
        if block.feed_forward is not None:
            z, mz = feed_forward(block.feed_forward, z, mz, ctx)
    z, mz = layer_norm(program.final_norm, z, mz, ctx)
    return z, readout(program.readout_plan, z, mz, ctx)

"""Attention heads in the linear domain (``forms.Lin``), over a batch of cubes: ``semantics.interpreter.
attention_head`` step by step.

1. q, k, v: exact affine maps, rounded and saturated (``forms``).
2. **Score differences.** Every weight depends on the scores only through s_ik − s_ij (softmax shifts by the row
   maximum; hardmax compares). For each query i and pair j < k: q_i·(k_k − k_j) + B_k − B_j by McCormick's
   planes on the factors' forms (``forms.product_interval``): the query is shared, so a query interval spent
   twice (once per score) is spent once. Each score is rounded on its own, so the rounded difference lies in
   [floor(lo), ceil(hi)] on the grid (floor(a) − floor(b) > a − b − 2^-f and < a − b + 2^-f). Where a score can
   saturate, only the difference of the individual (saturated) score intervals is used.
3. **Weight boxes** a_ij ∈ [a_lo, a_hi], with Σ_j a_ij ∈ [m_lo, m_hi]:
   softmax (``Fixed._softmax_weights``): d_j = max_k (s_k − s_j) ∈ [dl, dh] from the differences, w_j = E[d_j] ∈
   [E[dh], E[dl]] (the exp table is non-increasing), a_j = w_j / (w_j + R_j) with R_j = Σ_{k≠j} w_k, and
   W = Σ w >= E[0] = 2^f (the row maximum contributes it): a_j >= wl_j / (wl_j + Σ_{k≠j} wh_k), a_j <=
   wh_j / max(2^f, wh_j + Σ_{k≠j} wl_k). hardmax: key j can win only if no key beats it for sure (lo(s_k − s_j)
   <= 0 for every k), and is the sure unique winner when it beats every other key for sure; then a_j = 1 and
   the head is that key's value, exactly. uniform: 1/L. Per-probability flooring: both ends floored, and the
   mass loses less than 2^-f per winner but one (a multiple of 2^-f above 1 − m·2^-f).
4. **The head output** Σ_j a_j e_j (e_j = C[j−i]·v_j, URPE's C folded in): its interval is the fractional knapsack
   over the weight box ∩ the mass range (exact greedy, ``knapsack_max``), which lies inside the hull of the
   winners' values. Its forms write, for any linear λ, Σ_j a_j e_j = λ·Σ_j a_j + Σ_j a_j (e_j − λ), with λ the
   anchor key's own form plus a constant μ (the anchor: the key with the largest sure weight; μ: the knapsack's
   dual price at the cube's center; floats choose both). The differences U(e_j) − λ are exact forms (no exp
   relaxation anywhere), each a_j·(·) is bounded by ``forms.box_upper``/``box_lower`` over the weight box, and
   λ·Σ a_j over the mass range. With one sure winner the form is that key's value form itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ir import Head
from . import forms, ints
from .forms import Lin
from .ints import Array, Scale
from .softmax import softmax_forms

NEVER = -(1 << 62)  # a difference bound for masked keys (below every real one)


@dataclass
class HeadForms:
    """One head's stages over a batch of cubes in the linear domain (intervals and forms; ``verify_tf.bounds.
    HeadBounds`` is the exact-interval record of one cube)."""

    query: Lin | None  # (B, P, k); None for uniform heads (the interpreter computes no scores)
    key: Lin | None
    value: Lin  # (B, P, v)
    differences: Lin | None  # (B, P, P, P): [i, k, j] bounds of s_ik − s_ij
    weights: Lin  # (B, P, P): a_ij (softmax: with forms; hardmax, uniform: boxes)
    mass: tuple[Array, Array]  # (B, P): Σ_j a_ij
    output: Lin  # (B, P, v): head_i, rounded
    memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)  # ``backward``'s per-head data


@dataclass
class HeadPlan:
    """A head's constants as integers (plain data, built once per model and length)."""

    head: Head
    query: tuple[np.ndarray, int, np.ndarray, np.ndarray]  # (weights, den, bias_lo, bias_hi)
    key: tuple[np.ndarray, int, np.ndarray, np.ndarray]
    value: tuple[np.ndarray, int, np.ndarray, np.ndarray]
    live: np.ndarray  # (P, P) bool: key j visible to query i
    bias: tuple[np.ndarray, np.ndarray]  # (P, P): B[j − i] (units, floor / ceil)
    bias_difference: tuple[np.ndarray, np.ndarray]  # (P, pairs): B[k − i] − B[j − i]
    urpe: tuple[np.ndarray, int] | None  # (P, P) numerators of C[j − i], their den


def plan_head(head: Head, positions: int, scale: Scale, pairs: tuple[np.ndarray, np.ndarray]) -> HeadPlan:
    def affine(weights: Any, bias: Any) -> tuple[np.ndarray, int, np.ndarray, np.ndarray]:
        matrix, den = forms.rational_matrix(weights)
        lo, hi = forms.bias_bounds(bias, scale)
        return matrix, den, lo, hi

    offsets = np.subtract.outer(np.arange(positions), np.arange(positions)).T  # [i, j] -> j − i
    live = np.ones((positions, positions), dtype=bool) if not head.causal else offsets <= 0
    relative = np.vectorize(head.relative_bias, otypes=[object])(offsets)
    jj, kk = pairs
    urpe = None
    if head.positional == "urpe":
        matrix, den = forms.rational_matrix(np.vectorize(head.relative_scale, otypes=[object])(offsets))
        urpe = (matrix, den)
    return HeadPlan(
        head,
        affine(head.query, head.query_bias),
        affine(head.key, head.key_bias),
        affine(head.value, head.value_bias),
        live,
        forms.bias_bounds(relative, scale),
        forms.bias_bounds(relative[:, kk] - relative[:, jj], scale),
        urpe,
    )


Affine = tuple[np.ndarray, int, np.ndarray, np.ndarray]  # (weights, den, bias_lo, bias_hi)
Refine = Callable[[Affine, Lin], Lin]  # a stage round(W z + b) -> bounds at least as tight (``backward``)
# (plan, query, key, pairs) -> bounds of the rounded score differences s_ik − s_ij, j < k (B, P, pairs), or with
# ``pairs`` false of the scores before rounding (B, P, P) (``backward.score_bounds``: CROWN's bound through q·k);
# intersected with the forward's
RefinePairs = Callable[[HeadPlan, Lin, Lin, bool], Lin | None]  # None: not refined


def _affine(z: Lin, plan: Affine, arith: Any, refine: Refine | None = None) -> Lin:
    stage = arith.store(forms.affine(z, *plan))
    return stage if refine is None else refine(plan, stage)


def attention_head(
    plan: HeadPlan, z: Lin, arith: Any, refine: Refine | None = None, refine_pairs: RefinePairs | None = None
) -> HeadForms:
    """interpreter.attention_head on a batch of cubes (module docstring). ``arith``: ``propagate.Rounding``;
    ``refine``: tightens the query, key and value stages before they are used (CROWN's intermediate bounds);
    ``refine_pairs``: the score differences likewise (before the saturation's fallback)."""
    head, scale = plan.head, arith.scale
    value = _affine(z, plan.value, arith, refine)
    query = key = differences = None
    if head.scoring == "uniform":
        a_lo, a_hi, m_lo, m_hi = _uniform_weights(plan, arith, value.lo.shape[0])
    else:
        query, key = _affine(z, plan.query, arith, refine), _affine(z, plan.key, arith, refine)
        differences = _score_differences(plan, query, key, arith, refine_pairs)
        if head.scoring == "hardmax":
            a_lo, a_hi, m_lo, m_hi = _hardmax_weights(plan, differences, arith)
        else:
            a_lo, a_hi, m_lo, m_hi = _softmax_weights(plan, differences, arith)
    effective = _effective_values(plan, value)
    output = combination(effective, a_lo, a_hi, m_lo, m_hi, scale)
    weights = forms.constant(a_lo, a_hi, value.lc.shape[-1])
    if differences is not None and head.scoring == "softmax":
        weights = softmax_forms(differences, plan.live, (a_lo, a_hi), arith.per_probability, scale)
        output = forms.better(output, linear_combination(effective, weights, m_lo, m_hi, scale))
    return HeadForms(query, key, value, differences, weights, (m_lo, m_hi), arith.store(output))


# ---------------------------------------------------------------- scores


def _score_intervals(
    plan: HeadPlan, query: Lin, key: Lin, arith: Any, refine_pairs: RefinePairs | None = None
) -> tuple[Array, Array, np.ndarray]:
    """Each score's interval (interval products, intersected with ``refine_pairs``'s bounds of the scores), rounded
    and saturated as the interpreter does, and where the saturation can act."""
    one = arith.scale.one
    q_lo, q_hi = query.lo[:, :, None, :], query.hi[:, :, None, :]
    k_lo, k_hi = key.lo[:, None, :, :], key.hi[:, None, :, :]
    corners = [ints.mul(a, b) for a in (q_lo, q_hi) for b in (k_lo, k_hi)]
    lo = ints.total(ints.floordiv(forms._reduce_all(ints.minimum, corners), one), -1)
    hi = ints.total(ints.ceildiv(forms._reduce_all(ints.maximum, corners), one), -1)
    lo, hi = ints.add(lo, plan.bias[0]), ints.add(hi, plan.bias[1])
    if refine_pairs is not None:
        refined = refine_pairs(plan, query, key, False)
        if refined is not None:
            lo, hi = ints.maximum(lo, refined.lo), ints.minimum(hi, refined.hi)
    if not arith.rounds_scores(plan.head):
        return lo, hi, np.zeros(np.shape(lo), dtype=bool)
    step = arith.scale.grid_shift
    lo, hi = ints.floor_to(lo, step), ints.floor_to(hi, step)
    acting = np.asarray((lo < arith.low) | (hi > arith.high), dtype=bool)
    low, high = np.int64(arith.low), np.int64(arith.high)
    clamp = lambda x: ints.minimum(ints.maximum(x, low), high)  # noqa: E731  (saturate is monotone)
    return clamp(lo), clamp(hi), acting


def _negated(x: Lin) -> Lin:
    return Lin(-x.hi, -x.lo, -x.uc, -x.ub, -x.lc, -x.lb)


def _score_differences(
    plan: HeadPlan, query: Lin, key: Lin, arith: Any, refine_pairs: RefinePairs | None = None
) -> Lin:
    """[i, k, j] bounds of s_ik − s_ij, (B, P, P, P) (module docstring, step 2)."""
    scale = arith.scale
    batch, positions, variables = query.lo.shape[0], query.lo.shape[1], query.lc.shape[-1]
    jj, kk = arith.pairs
    s_lo, s_hi, acting = _score_intervals(plan, query, key, arith, refine_pairs)
    # the individual intervals' difference, always valid
    plain_lo = ints.sub(s_lo[:, :, kk], s_hi[:, :, jj])
    plain_hi = ints.sub(s_hi[:, :, kk], s_lo[:, :, jj])
    if len(jj):
        key_difference = forms.sub(key[:, kk], key[:, jj])  # (B, pairs, k)
        q = query.map(lambda a: a[:, :, None], lambda c: c[:, :, None])  # (B, P, 1, k)
        d = key_difference.map(lambda a: a[:, None], lambda c: c[:, None])  # (B, 1, pairs, k)
        dot = forms.dot(q, d, scale)
        pairs = forms.shift(dot, *plan.bias_difference)
        if arith.rounds_scores(plan.head):  # each score floored on its own: the difference moves by < 2^-f
            step = scale.grid_shift
            grid = np.int64(1 << step)
            pairs = Lin(
                ints.floor_to(pairs.lo, step),
                ints.ceil_to(pairs.hi, step),
                pairs.lc,
                ints.sub(pairs.lb, grid),
                pairs.uc,
                ints.add(pairs.ub, grid),
            )
        if refine_pairs is not None:  # where a score can saturate, the plain intervals below replace both
            refined = refine_pairs(plan, query, key, True)
            pairs = pairs if refined is None else forms.better(pairs, refined)
        saturating = acting[:, :, kk] | acting[:, :, jj]
        plain = forms.constant(plain_lo, plain_hi, variables)
        pairs = Lin(
            ints.maximum(pairs.lo, plain_lo), ints.minimum(pairs.hi, plain_hi), pairs.lc, pairs.lb, pairs.uc, pairs.ub
        )
        pairs = forms.where(saturating, plain, pairs)
        pairs = forms.tighten(pairs, scale.grid_shift if arith.rounds_scores(plan.head) else None)
    else:
        pairs = forms.constant(plain_lo, plain_hi, variables)
    dtype = object if any(ints.wide(a) for a in (pairs.lo, pairs.hi, pairs.lc, pairs.uc)) else np.int64
    shapes = ((), (), (variables,), (), (variables,), ())
    out = Lin(*(np.zeros((batch, positions, positions, positions, *extra), dtype=dtype) for extra in shapes))
    names = ("lo", "hi", "lc", "lb", "uc", "ub")
    for name in names:  # [i, k, j] for j < k, and its negation at [i, j, k]; the diagonal stays 0
        getattr(out, name)[:, :, kk, jj] = getattr(pairs, name)
        getattr(out, name)[:, :, jj, kk] = getattr(_negated(pairs), name)
    return out.map(ints.narrow, ints.narrow)


# ---------------------------------------------------------------- weight boxes


def _masked(differences: Lin, live: np.ndarray) -> tuple[Array, Array]:
    """Differences [i, k, j] with masked keys k pushed below every real one (they never win)."""
    keep = live[None, :, :, None]
    return forms._pick(keep, differences.lo, np.int64(NEVER)), forms._pick(keep, differences.hi, np.int64(NEVER))


def _per_probability(a_lo: Array, a_hi: Array, winners: Array, arith: Any) -> tuple[Array, Array, Array, Array] | None:
    if not arith.per_probability:
        return None
    step, one = arith.scale.grid_shift, arith.scale.one
    least = np.maximum(0, one - (np.asarray(winners) - 1) * (1 << step))
    return ints.floor_to(a_lo, step), ints.floor_to(a_hi, step), least, np.full_like(least, one)


def _softmax_weights(plan: HeadPlan, differences: Lin, arith: Any) -> tuple[Array, Array, Array, Array]:
    scale = arith.scale
    lo, hi = _masked(differences, plan.live)
    step = scale.grid_shift
    # d_j = max_k (s_k − s_j) >= 0 (k = j gives 0), in mantissa units of the exp table
    d_lo = np.maximum(np.asarray(lo.max(axis=2)), 0) >> step
    d_hi = np.maximum(np.asarray(hi.max(axis=2)), 0) >> step
    table = arith.exp_table
    top = len(table) - 1  # the table's last entry is 0 (beyond it every entry is 0)
    w_lo = table[np.minimum(d_hi, top).astype(np.int64)] * plan.live[None]
    w_hi = table[np.minimum(d_lo, top).astype(np.int64)] * plan.live[None]
    sum_lo, sum_hi = w_lo.sum(axis=-1, keepdims=True), w_hi.sum(axis=-1, keepdims=True)
    one = scale.one
    low_den = np.maximum(w_lo + sum_hi - w_hi, 1)
    a_lo = np.where(w_lo > 0, (w_lo * one) // low_den, 0)
    high_den = np.maximum(w_hi + sum_lo - w_lo, table[0])
    a_hi = -((-(w_hi * one)) // high_den)
    winners = (w_hi > 0).sum(axis=-1)
    floored = _per_probability(a_lo, a_hi, winners, arith)
    if floored is not None:
        return floored
    ones = np.full(winners.shape, one, dtype=np.int64)
    return a_lo, a_hi, ones, ones


def _hardmax_weights(plan: HeadPlan, differences: Lin, arith: Any) -> tuple[Array, Array, Array, Array]:
    lo, hi = _masked(differences, plan.live)
    one = arith.scale.one
    possible = np.asarray((lo <= 0).all(axis=2), dtype=bool) & plan.live[None]
    beaten = np.asarray(hi < 0, dtype=bool) | np.eye(lo.shape[1], dtype=bool)[None, None] | ~plan.live[None, :, :, None]
    sure = beaten.all(axis=2) & plan.live[None]
    a_hi = np.where(possible, one, 0).astype(np.int64)
    a_lo = np.where(sure, one, 0).astype(np.int64)
    winners = possible.sum(axis=-1)
    floored = _per_probability(a_lo, a_hi, winners, arith)
    if floored is not None:
        return floored
    ones = np.full(winners.shape, one, dtype=np.int64)
    return a_lo, a_hi, ones, ones


def _uniform_weights(plan: HeadPlan, arith: Any, batch: int) -> tuple[Array, Array, Array, Array]:
    one = arith.scale.one
    count = plan.live.sum(axis=1, keepdims=True)  # (P, 1)
    a_lo = np.broadcast_to(np.where(plan.live, one // count, 0), (batch, *plan.live.shape))
    a_hi = np.broadcast_to(np.where(plan.live, -(-one // count), 0), a_lo.shape)
    if arith.per_probability:
        exact = ints.floor_to(a_lo, arith.scale.grid_shift)
        mass = np.broadcast_to(exact.sum(axis=-1), (batch, plan.live.shape[0]))
        return exact, exact, mass, mass
    ones = np.full((batch, plan.live.shape[0]), one, dtype=np.int64)
    return a_lo, a_hi, ones, ones


def _effective_values(plan: HeadPlan, value: Lin) -> Lin:
    """e_ij = C[j − i]·v_j: (B, P, P, v), or v itself broadcast as (B, 1, P, v) without URPE."""
    spread = value.map(lambda a: a[:, None], lambda c: c[:, None])
    if plan.urpe is None:
        return spread
    numerators, den = plan.urpe
    return forms.scaled(spread, numerators[None, :, :, None], den)


# ---------------------------------------------------------------- the convex combination


def knapsack_max(a_lo: Array, a_hi: Array, values: Array, m_lo: Array, m_hi: Array, one: int) -> Array:
    """max Σ_j a_j·v_j over a_lo <= a <= a_hi, m_lo <= Σ a <= m_hi (last axis: j; units; rounded up).

    The fractional knapsack's greedy is exact for this LP: start at a_lo, fill the items in decreasing v up to the
    optimal total mass, which is the mass of every positive item filled, clipped into [m_lo, m_hi]."""
    order = np.argsort(-np.asarray(values, dtype=np.float64), axis=-1, kind="stable")
    shape = np.broadcast_shapes(np.shape(a_lo), np.shape(values))
    v = np.take_along_axis(np.broadcast_to(values, shape), order, axis=-1)
    low = np.take_along_axis(np.broadcast_to(a_lo, shape), order, axis=-1)
    cap = np.take_along_axis(np.broadcast_to(ints.sub(a_hi, a_lo), shape), order, axis=-1)
    base = low.sum(axis=-1)
    positive = np.where(np.asarray(v > 0, dtype=bool), cap, 0).sum(axis=-1)
    target = np.minimum(np.maximum(base + positive, m_lo), m_hi)
    room = np.maximum(target - base, 0)[..., None]
    before = np.cumsum(cap, axis=-1) - cap
    fill = np.minimum(np.maximum(room - before, 0), cap)
    return ints.ceildiv(ints.total(ints.mul(low + fill, v), -1), one)


def _dual_price(a_lo: Array, a_hi: Array, g: np.ndarray, m_lo: Array, m_hi: Array, upper: bool) -> np.ndarray:
    """A multiplier μ for Σ_j a_j (g_j − μ) + μ Σ a_j (the LP dual of the knapsack at values g, floats): the best
    of μ = 0 and μ = each g_j."""
    al, ah = np.asarray(a_lo, dtype=np.float64)[..., None, :], np.asarray(a_hi, dtype=np.float64)[..., None, :]
    lo_mass = np.asarray(m_lo, dtype=np.float64)[..., None]
    hi_mass = np.asarray(m_hi, dtype=np.float64)[..., None]
    candidates = np.concatenate([np.zeros((*g.shape[:-1], 1)), g], axis=-1)  # (..., c)
    shifted = g[..., None, :] - candidates[..., :, None]  # (..., c, j)
    if upper:
        value = candidates * np.where(candidates >= 0, hi_mass, lo_mass) + np.maximum(al * shifted, ah * shifted).sum(
            axis=-1
        )
        best = np.argmin(value, axis=-1)
    else:
        value = candidates * np.where(candidates >= 0, lo_mass, hi_mass) + np.minimum(al * shifted, ah * shifted).sum(
            axis=-1
        )
        best = np.argmax(value, axis=-1)
    return np.round(np.take_along_axis(candidates, best[..., None], axis=-1)[..., 0]).astype(np.int64)


def combination(e: Lin, a_lo: Array, a_hi: Array, m_lo: Array, m_hi: Array, scale: Scale) -> Lin:
    """Σ_j a_ij e_ij for a in the weight box and Σ_j a_ij in [m_lo, m_hi] (module docstring, step 4): e (B, P|1, P,
    v) -> (B, P, v), before rounding."""
    one = scale.one
    batch, positions = a_lo.shape[0], a_lo.shape[1]
    dims = e.lo.shape[-1]
    # items last: values (B, P|1, v, P); boxes (B, P, 1, P); mass (B, P, 1)
    e_items = e.map(lambda a: np.swapaxes(a, -1, -2), lambda c: np.swapaxes(c, -2, -3))
    box_lo, box_hi = a_lo[:, :, None, :], a_hi[:, :, None, :]
    mass_lo, mass_hi = np.asarray(m_lo)[:, :, None], np.asarray(m_hi)[:, :, None]
    hi = knapsack_max(box_lo, box_hi, e_items.hi, mass_lo, mass_hi, one)
    lo = -knapsack_max(box_lo, box_hi, -np.asarray(e_items.lo), mass_lo, mass_hi, one)
    # the anchor: per query, the key with the largest sure weight (ties: the largest possible one)
    rank = np.asarray(a_lo, dtype=np.float64) * 4 + np.asarray(a_hi, dtype=np.float64) / one
    anchor = np.argmax(rank, axis=-1)  # (B, P)
    n = e.lc.shape[-1]
    full = e_items.map(
        lambda a: np.broadcast_to(a, (batch, positions, dims, a.shape[-1])),
        lambda c: np.broadcast_to(c, (batch, positions, dims, c.shape[-2], n)),
    )
    pick = anchor[:, :, None, None]
    sides = []
    for upper in (True, False):
        coefficients, constants = (full.uc, full.ub) if upper else (full.lc, full.lb)
        anchor_c = np.take_along_axis(coefficients, pick[..., None], axis=-2)  # (B, P, v, 1, N)
        anchor_b = np.take_along_axis(constants, pick, axis=-1)  # (B, P, v, 1)
        difference_c = ints.sub(coefficients, anchor_c)
        difference_b = ints.sub(constants, anchor_b)
        middle = np.asarray(difference_b, dtype=np.float64) + np.asarray(difference_c, dtype=np.float64).sum(-1) / 2
        mu = _dual_price(box_lo, box_hi, middle, mass_lo, mass_hi, upper)  # (B, P, v)
        lam_c, lam_b = anchor_c[..., 0, :], ints.add(anchor_b[..., 0], mu)
        shifted_b = ints.sub(difference_b, mu[..., None])
        bound = forms.box_upper if upper else forms.box_lower
        term_c, term_b = bound(difference_c, shifted_b, box_lo, box_hi, scale)
        mass_c, mass_b = bound(lam_c, lam_b, mass_lo, mass_hi, scale)
        sides.append((ints.add(mass_c, ints.total(term_c, -2)), ints.add(mass_b, ints.total(term_b, -1))))
    (uc, ub), (lc, lb) = sides
    return forms.tighten(Lin(lo, hi, lc, lb, uc, ub))


def linear_combination(e: Lin, weights: Lin, m_lo: Array, m_hi: Array, scale: Scale) -> Lin:
    """Σ_j a_ij e_ij with weights that have forms (softmax): Σ_j a_j (e_j − λ) + λ·Σ_j a_j for a fixed linear λ (the
    anchor key's middle form: the key with the largest sure weight), each a_j·(e_j − λ) by McCormick's planes
    (``forms.product``), λ·Σ a over the mass range."""
    one = scale.one
    batch, positions = weights.lo.shape[0], weights.lo.shape[1]
    e_items = e.map(lambda a: np.swapaxes(a, -1, -2), lambda c: np.swapaxes(c, -2, -3))  # (B, P|1, v, P)
    dims, n = e.lo.shape[-1], e.lc.shape[-1]
    full = e_items.map(
        lambda a: np.broadcast_to(a, (batch, positions, dims, a.shape[-1])),
        lambda c: np.broadcast_to(c, (batch, positions, dims, c.shape[-2], n)),
    )
    rank = np.asarray(weights.lo, dtype=np.float64) * 4 + np.asarray(weights.hi, dtype=np.float64) / one
    pick = np.argmax(rank, axis=-1)[:, :, None, None]  # (B, P, 1, 1)
    lam_c = ints.floordiv(ints.add(*(np.take_along_axis(c, pick[..., None], axis=-2) for c in (full.lc, full.uc))), 2)
    lam_b = ints.floordiv(ints.add(*(np.take_along_axis(b, pick, axis=-1) for b in (full.lb, full.ub))), 2)
    lam_lo, lam_hi = forms.form_min(lam_c, lam_b), forms.form_max(lam_c, lam_b)  # (B, P, v, 1)
    g = Lin(
        ints.sub(full.lo, lam_hi),
        ints.sub(full.hi, lam_lo),
        ints.sub(full.lc, lam_c),
        ints.sub(full.lb, lam_b),
        ints.sub(full.uc, lam_c),
        ints.sub(full.ub, lam_b),
    )
    a = weights.map(lambda x: x[:, :, None, :], lambda c: c[:, :, None, :, :])
    terms = forms.dot(a, forms.tighten(g), scale)  # (B, P, v)
    lam_c, lam_b, lam_lo, lam_hi = lam_c[..., 0, :], lam_b[..., 0], lam_lo[..., 0], lam_hi[..., 0]
    mass_lo, mass_hi = np.asarray(m_lo)[:, :, None], np.asarray(m_hi)[:, :, None]
    uc, ub = forms.box_upper(lam_c, lam_b, mass_lo, mass_hi, scale)
    lc, lb = forms.box_lower(lam_c, lam_b, mass_lo, mass_hi, scale)
    ends = [ints.mul(m, x) for m in (mass_lo, mass_hi) for x in (lam_lo, lam_hi)]
    mass = Lin(
        ints.floordiv(forms._reduce_all(ints.minimum, ends), one),
        ints.ceildiv(forms._reduce_all(ints.maximum, ends), one),
        lc,
        lb,
        uc,
        ub,
    )
    return forms.add(terms, mass)

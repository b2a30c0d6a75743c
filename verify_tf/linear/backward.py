"""Backward (CROWN-style) linear bounds over a batch of cubes, in exact integers (issue 43).

The forward pass (``propagate.LinearModel.bound`` with ``trace``) gives every stage an interval and two forms
over the cube's input variables t ∈ [0, 1]^N. This pass starts from objectives (±1 on each readout position, or
on each element of a block's output stream) and carries a row vector Λ over one stage at a time back to the
embedding, as CROWN does (Zhang et al. 2018; for transformers Shi et al. 2020): each step replaces Λ·y by an upper
bound of it in terms of the step's inputs, so no linear map ever takes both forms of its input (the forward pass's
W⁺U − W⁻L doubles every gap at every affine map; here the gaps enter only where a relaxation is made):

* affine maps y = W x / den + b: Λ·y = (ΛW/den)·x + Λ·b exactly, b's interval by Λ's sign;
* the interpreter's ``round`` (floor to 2^-f, then saturate): y ∈ [x − 2^-f, x], so Λ·y <= Λ·x + |Λ⁻|·2^-f; where
  the stored interval touches the format's range (the clamp may act) the element is concretized by its interval;
* ReLU: above by the chord's line over the pre-activation's interval (slope chosen in floats, offset exact at both
  ends), below by 0 or x, by Λ's sign;
* residuals: Λ goes to both summands;
* a softmax head (exact sums, no URPE): o_i = λ_i + Σ_j a_ij (v_j − λ_i) with λ_i = Σ_k m_ik v_k a fixed mixture of
  the values (m >= 0, Σ m = 1: the weight box's midpoints); each a·g with a ∈ [a_lo, a_hi] and g = v_j − λ_i ∈
  [g_lo, g_hi] is ā·g + ḡ·a + r with ā, ḡ the midpoints and r ∈ [−āḡ − ρ_a ρ_g, −āḡ + ρ_a ρ_g] (the midpoint
  planes: (a − ā)(g − ḡ) lies within the radii's product); the
  weights a are then concretized by their forward forms (the exp and reciprocal relaxations of ``softmax.py``),
  the values carried on back through their affine map. Other heads are concretized by their output's forms.
* the embedding: concretized by its forms (exact up to the table's rounding).

``score_bounds`` bounds a head's scores q_i·k_j + B and score differences q_i·(k_k − k_j) + B backward the same
way: McCormick's planes of each product over the factors' intervals are linear in the query and the keys, so in
the block's input stream, from which the pass above goes on. ``refined_bound`` intersects them with the forward
bounds where ``SCORES`` names them; it names neither in the engine (measured in docs/performance.md, issue 43:
d2's median bound / true width 2.52× → 2.22× at the same CPU per cube, but Knuth's tree only 6% smaller for 17%
more CPU in its probes; d3 0.4% tighter; the 4-head model 3% tighter for 2.8× the CPU per cube).

The relaxations' free choices (``Slopes``, alpha-style: the ReLU's lower slope, the planes' θ) are one per pass,
or per objective and element (``Slopes.alpha``, ``Slopes.theta``: chosen by ``optimise.choose``, a float twin's
gradient steps, alpha-CROWN; clamped here to their valid ranges, so any array is sound); a bound may be the best of
several passes per element (``forms.better``: each is sound, so is the tighter). split's readout takes the best of
five (``READOUT_SLOPES``), its intermediate bounds one; ``refined_bound``'s ``choose`` adds the optimised pass.

Every Λ is an integer array in units (2^-K); a product with a slope or a weight is divided back to units by a floor
division whose remainder r >= 0 is paid for at once: (r/d)·y <= (r/d)·hi(y) (``_settle``). Constants and the
final coefficients over t are in units squared. Floats choose the ReLU slopes and the mixture; every offset is
computed exactly for the choice, so no float decides a bound.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import forms, ints
from .forms import Lin
from .ints import Array
from .propagate import BlockForms, Result


@dataclass(frozen=True)
class Slopes:
    """The relaxations' free choices, one per backward pass (alpha-style: any choice is sound, floats or a measured
    table only choose, every offset is exact for it): ``relu`` the lower slope of a crossing ReLU where Λ < 0
    ("adaptive": CROWN's 1 where hi >= −lo else 0; "zero"; "one"); ``plane`` 2θ ∈ {0, 1, 2}, the weight of the
    first McCormick plane of each product a·g (1: the midpoint planes)."""

    relu: str = "adaptive"
    plane: int = 1
    # per-element choices (``optimise.choose``: alpha-CROWN), per objective: block index -> the crossing ReLUs'
    # lower slopes (B, O, P, h) in units (clamped to [0, one] here); (block, head) -> the planes' θ (B, O, P, P, v)
    # in steps of 1/PLANE_STEPS (clamped to [0, PLANE_STEPS]). Where absent, ``relu`` and ``plane`` decide.
    alpha: dict[int, Array] = field(default_factory=dict, compare=False)
    theta: dict[tuple[int, int], Array] = field(default_factory=dict, compare=False)


DEFAULT = Slopes()
PLANE_STEPS = 16  # a per-element θ is a multiple of 1/16 (finer buys nothing measurable; coarser keeps int64)
# Choose(linear, result, Λ (B, O, P, d) units on the stream entering the backward pass, blocks, attention_only):
# per-element slopes for that pass (floats may choose: every choice is sound)
Choose = Callable[[Any, Any, Array, int, bool], Slopes]
# split's readout: the best of five passes per objective (bench/bench_branching.py, docs/performance.md: at the
# readout they cost ~5% and shrink Knuth's tree 3–13%; in every intermediate pass 3× for 22%, which does not pay)
# what of each head's scores is bounded backward through q·k too (``score_bounds``), intersected with the forward's:
# "scores" (each score's interval: what decides where the saturation can act), "differences" (the weights' input)
SCORES: tuple[str, ...] = ()
READOUT_SLOPES = (DEFAULT, Slopes(plane=0), Slopes(plane=2), Slopes(relu="zero"), Slopes(relu="one"))


@dataclass
class _Pass:
    """The bound built so far, per cube and objective: Σ_n T·t_n + C (units squared) plus Λ on the current stage."""

    coefficients: Array  # (B, O, N)
    constant: Array  # (B, O)
    one: int

    def add(self, value: Array) -> None:
        self.constant = ints.add(self.constant, value)


def _sum_to_objectives(x: Array) -> Array:
    """Σ over every axis after (B, O)."""
    x = np.asarray(x)
    return ints.total(x.reshape(*x.shape[:2], -1), -1)


def _per_element(x: Array, shape: tuple[int, ...]) -> Array:
    """A stage array (B, *S) broadcast and given the objective axis: (B, 1, *S)."""
    return np.broadcast_to(np.asarray(x), shape)[:, None]


def _settle(numerators: Array, den: int, lo: Array, hi: Array, state: _Pass) -> Array:
    """Λ = numerators / den, floored to units; the remainder r >= 0 contributes at most r·hi(y)/den (the stage's
    interval ``lo``, ``hi``: (B, *S)), added to the constant."""
    if den == 1:
        return numerators
    quotient = ints.floordiv(numerators, den)
    remainder = ints.sub(numerators, ints.mul(quotient, np.int64(den)))
    shape = np.shape(numerators)[:1] + np.shape(numerators)[2:]
    state.add(ints.ceildiv(_sum_to_objectives(ints.mul(remainder, _per_element(hi, shape))), den))
    return quotient


def _box(lam: Array, lo: Array, hi: Array, state: _Pass) -> None:
    """Λ·y <= Σ Λ⁺·hi + Λ⁻·lo over y's interval."""
    shape = np.shape(lam)[:1] + np.shape(lam)[2:]
    upper = ints.mul(ints.maximum(lam, np.int64(0)), _per_element(hi, shape))
    lower = ints.mul(ints.minimum(lam, np.int64(0)), _per_element(lo, shape))
    state.add(_sum_to_objectives(ints.add(upper, lower)))


def cash_out(lam: Array, stage: Lin, state: _Pass) -> None:
    """Λ·y <= Σ Λ⁺·(uc·t + ub) + Λ⁻·(lc·t + lb): the stage's forward forms, into the bound over t; an element
    whose forms span more than twice its interval (the interval was cut by something the forms do not know, such
    as the exp table's box) is concretized by its interval instead (floats choose, both are sound)."""
    span = np.asarray(forms.form_max(stage.uc, stage.ub), dtype=np.float64) - np.asarray(
        forms.form_min(stage.lc, stage.lb), dtype=np.float64
    )
    loose = span > 2 * (np.asarray(stage.hi, dtype=np.float64) - np.asarray(stage.lo, dtype=np.float64)) + 1
    if loose.any():
        mask = np.broadcast_to(np.asarray(loose)[:, None], np.shape(lam))
        _box(forms._pick(mask, lam, np.int64(0)), stage.lo, stage.hi, state)
        lam = forms._pick(mask, np.int64(0), lam)
    batch, objectives = np.shape(lam)[:2]
    values = int(np.prod(np.shape(lam)[2:], dtype=np.int64))
    n = np.shape(stage.lc)[-1]
    shape = (batch, *np.shape(lam)[2:])
    flat = np.asarray(lam).reshape(batch, objectives, values)
    positive, negative = ints.maximum(flat, np.int64(0)), ints.minimum(flat, np.int64(0))

    def coefficients(c: Array) -> Array:
        return np.broadcast_to(np.asarray(c), (*shape, n)).reshape(batch, values, n)

    def constants(b: Array) -> Array:
        return np.broadcast_to(np.asarray(b), shape).reshape(batch, values)

    state.coefficients = ints.add(
        state.coefficients,
        ints.add(
            ints.contract(positive, coefficients(stage.uc), "bom,bmn->bon"),
            ints.contract(negative, coefficients(stage.lc), "bom,bmn->bon"),
        ),
    )
    state.add(
        ints.add(
            ints.contract(positive, constants(stage.ub), "bom,bm->bo"),
            ints.contract(negative, constants(stage.lb), "bom,bm->bo"),
        )
    )


def _clamped(lam: Array, stage: Lin, rounding: Any, state: _Pass) -> Array:
    """Where the format's clamp may act (the stored interval touches its range): concretized by the interval, and
    Λ there set to 0; elsewhere the clamp is the identity."""
    if rounding.low is None:
        return lam
    acting = np.asarray((np.asarray(stage.lo) <= rounding.low) | (np.asarray(stage.hi) >= rounding.high), dtype=bool)
    if not acting.any():
        return lam
    mask = np.broadcast_to(acting[:, None], np.shape(lam))
    kept = forms._pick(mask, np.int64(0), lam)
    _box(forms._pick(mask, lam, np.int64(0)), stage.lo, stage.hi, state)
    return kept


def through_store(lam: Array, stage: Lin, rounding: Any, state: _Pass) -> Array:
    """y = round(x) (floor to the grid, then the clamp): Λ on y -> Λ on x (``stage``: y's forward bounds)."""
    lam = _clamped(lam, stage, rounding, state)
    step = rounding.scale.grid_shift
    if step is not None:
        state.add(_sum_to_objectives(ints.mul(ints.minimum(lam, np.int64(0)), np.int64(-(1 << step)))))
    return lam


def through_affine(lam: Array, plan: tuple[np.ndarray, int, Array, Array], x: Lin, state: _Pass) -> Array:
    """y = W x / den + b over the last value axis (W integers (out, in), b ∈ [b_lo, b_hi] units): Λ on y -> Λ on x."""
    weights, den, bias_lo, bias_hi = plan
    positive, negative = ints.maximum(lam, np.int64(0)), ints.minimum(lam, np.int64(0))
    state.add(
        _sum_to_objectives(ints.add(ints.mul(positive, np.asarray(bias_hi)), ints.mul(negative, np.asarray(bias_lo))))
    )
    numerators = ints.contract(lam, weights, "bo...k,ki->bo...i")
    return _settle(numerators, den, x.lo, x.hi, state)


def crown_slope_one(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """CROWN's adaptive lower slope of an unstable ReLU over [low, high]: 1 where high >= −low (the line x loses
    less area than 0 there), else 0; a boolean array (``through_relu``; the optimiser's starting point)."""
    return np.asarray(high >= -low, dtype=bool)


def through_relu(lam: Array, pre: Lin, state: _Pass, slopes: Slopes = DEFAULT, chosen: Array | None = None) -> Array:
    """h = max(x, 0) over x ∈ [lo, hi]: above by the chord's line (slope σ in units chosen in floats, offset β exact
    at both ends: valid for the convex ReLU), below by s·x with s ∈ {0, 1} (``slopes.relu``; CROWN's adaptive
    choice: 1 where hi >= −lo) or, with ``chosen`` (B, O, *S) units, any s ∈ [0, 1] per objective and element
    (clamped here, so any array is sound: s·x <= max(x, 0) for s ∈ [0, 1])."""
    one = state.one
    lo, hi = pre.lo, pre.hi
    low, high = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    crossing = (low < 0) & (high > 0)
    dead = high <= 0
    chord = high / np.where(crossing, high - low, 1.0)
    sigma = np.where(crossing, np.round(chord * one), np.where(dead, 0, one)).astype(np.int64)
    relu_lo, relu_hi = ints.maximum(lo, np.int64(0)), ints.maximum(hi, np.int64(0))
    beta = ints.maximum(
        ints.sub(ints.mul(relu_lo, np.int64(one)), ints.mul(sigma, lo)),
        ints.sub(ints.mul(relu_hi, np.int64(one)), ints.mul(sigma, hi)),
    )  # units squared
    if slopes.relu == "adaptive":
        pick = np.where(crown_slope_one(low, high), one, 0)
    else:
        pick = np.full(np.shape(high), one if slopes.relu == "one" else 0)
    alpha = np.where(crossing, pick, np.where(dead, 0, one)).astype(np.int64)
    shape = np.shape(lam)[:1] + np.shape(lam)[2:]
    lower = _per_element(alpha, shape)
    if chosen is not None:
        free = np.clip(np.asarray(chosen, dtype=np.int64), 0, one)
        lower = np.where(_per_element(crossing, shape), free, lower)
    positive, negative = ints.maximum(lam, np.int64(0)), ints.minimum(lam, np.int64(0))
    state.add(ints.ceildiv(_sum_to_objectives(ints.mul(positive, _per_element(beta, shape))), one))
    numerators = ints.add(ints.mul(positive, _per_element(sigma, shape)), ints.mul(negative, lower))
    return _settle(numerators, one, lo, hi, state)


def anchored(head: Any, plan: Any, heads: Any) -> bool:
    """Whether ``through_softmax_head`` applies: a softmax head without URPE whose weights sum to exactly 1."""
    if head.scoring != "softmax" or plan.urpe is not None:
        return False
    m_lo, m_hi = heads.mass
    one = np.int64(np.max(np.asarray(m_hi)))
    return bool(np.all(np.asarray(m_lo) == one) and np.all(np.asarray(m_hi) == one))


def _planes(
    a_lo: Array, a_hi: Array, g_lo: Array, g_hi: Array, theta: Array = 1, steps: int = 2
) -> tuple[tuple[Array, Array, Array], ...]:
    """``steps``-fold (slope on g (B, P, P, 1), slope on a (B, P, P, v), constant (B, P, P, v), units squared) of an
    upper and a lower plane of a·g over the box: a·g <= (sa·g + sg·a + c)/steps and >= likewise; ``theta``
    (steps·θ, an integer or an integer array broadcast against the box, in [0, steps]) weighs McCormick's first plane
    of each side, (a − a_hi)(g − g_lo) <= 0 above and (a − a_lo)(g − g_lo) >= 0 below, against the second (any θ
    ∈ [0, 1] is a convex combination of two valid planes, so valid). θ = 1/2 is the midpoint planes ((a − ā)(g − ḡ)
    within ±ρ_a·ρ_g: both sides share the slopes 2ā, 2ḡ; on the three models of issue 43 10–15% tighter than either
    pair of corner planes alone). The factors' bounds come broadcastable against each other (a head's weights
    with a trailing value axis)."""
    t = np.asarray(theta, dtype=np.int64)
    rest = np.int64(steps) - t
    sg = ints.add(ints.mul(g_lo, t), ints.mul(g_hi, rest))  # the slope on a: the same on both sides
    su = ints.add(ints.mul(a_hi, t), ints.mul(a_lo, rest))
    sl = ints.add(ints.mul(a_lo, t), ints.mul(a_hi, rest))
    upper = ints.sub(np.int64(0), ints.add(ints.mul(ints.mul(a_hi, g_lo), t), ints.mul(ints.mul(a_lo, g_hi), rest)))
    lower = ints.sub(np.int64(0), ints.add(ints.mul(ints.mul(a_lo, g_lo), t), ints.mul(ints.mul(a_hi, g_hi), rest)))
    return (su, sg, upper), (sl, sg, lower)


def through_softmax_head(
    lam: Array, heads: Any, rounding: Any, state: _Pass, theta: int = 1, chosen: Array | None = None
) -> Array:
    """Λ on a softmax head's rounded output (B, O, P, v) -> Λ on its values (module docstring; ``theta``: the
    planes, ``_planes``; ``chosen``: per objective and element θ·PLANE_STEPS (B, O, P, P, v), clamped here); the
    weights are concretized by their forward forms on the way."""
    one = state.one
    lam = through_store(lam, heads.output, rounding, state)
    weights, value = heads.weights, heads.value
    if chosen is None:
        mix, g_lo, g_hi, slope_up, slope_down, slope_a, upper, lower = head_planes(heads, one, theta)
        den, spec = 2 * one, "boic,bijc->boij"
    else:
        mix, g_lo, g_hi, slope_up, slope_down, slope_a, upper, lower = _chosen_planes(heads, one, chosen)
        den, spec = PLANE_STEPS * one, "boic,boijc->boij"
    positive, negative = ints.maximum(lam, np.int64(0)), ints.minimum(lam, np.int64(0))
    on_g = ints.add(
        ints.mul(np.asarray(positive)[:, :, :, None, :], slope_up),
        ints.mul(np.asarray(negative)[:, :, :, None, :], slope_down),
    )
    lam_g = _settle(on_g, den, g_lo, g_hi, state)
    lam_a = _settle(ints.contract(lam, slope_a, spec), den, weights.lo, weights.hi, state)
    rest = ints.add(ints.mul(positive, upper), ints.mul(negative, lower))
    state.add(ints.ceildiv(_sum_to_objectives(rest), den))
    cash_out(lam_a, weights, state)
    to_anchor = ints.sub(lam, ints.total(lam_g, 3))  # (B, O, P_i, v): on λ_i
    spread = _settle(ints.contract(to_anchor, mix, "boic,bik->bokc"), one, value.lo, value.hi, state)
    return ints.add(ints.total(lam_g, 2), spread)


def _chosen_planes(heads: Any, one: int, chosen: Array) -> tuple[Array, ...]:
    """``head_planes`` with θ per objective and element (B, O, P, P, v), in steps of 1/PLANE_STEPS: every array
    carries the objective axis."""
    mix, g_lo, g_hi = head_planes(heads, one, 1)[:3]
    theta = np.clip(np.asarray(chosen, dtype=np.int64), 0, PLANE_STEPS)
    a_lo, a_hi = np.asarray(heads.weights.lo)[:, None], np.asarray(heads.weights.hi)[:, None]
    (slope_up, slope_a, upper), (slope_down, _, lower) = _planes(
        a_lo[..., None], a_hi[..., None], np.asarray(g_lo)[:, None], np.asarray(g_hi)[:, None], theta, PLANE_STEPS
    )
    return mix, g_lo, g_hi, slope_up, slope_down, slope_a, ints.total(upper, 3), ints.total(lower, 3)


def head_planes(heads: Any, one: int, theta: int = 1) -> tuple[Array, ...]:
    """What ``through_softmax_head`` needs of a head whatever the objectives, computed once per head and choice of
    planes (kept on it): the mixture, g = v_j − λ_i's interval, the planes' doubled slopes on g (upper, lower) and
    on a, and their constants summed over the keys (B, 1, P, v)."""
    key = f"planes {theta}"
    if key not in heads.memo:
        value, a_lo, a_hi = heads.value, heads.weights.lo, heads.weights.hi
        mix = _mixture(a_lo, a_hi, one)  # (B, P_i, P_k): integers >= 0 summing to one
        mixed = _mixed(value, mix, one)
        g = forms.tighten(
            forms.sub(
                value.map(lambda a: np.asarray(a)[:, None], lambda c: np.asarray(c)[:, None]),
                mixed.map(lambda a: a[:, :, None], lambda c: c[:, :, None]),
            )
        )  # (B, P_i, P_j, v): v_j − λ_i
        (slope_up, slope_a, upper), (slope_down, _, lower) = _planes(
            np.asarray(a_lo)[..., None], np.asarray(a_hi)[..., None], g.lo, g.hi, theta
        )
        heads.memo[key] = (
            mix,
            g.lo,
            g.hi,
            np.asarray(slope_up)[:, None],
            np.asarray(slope_down)[:, None],
            slope_a,
            np.asarray(ints.total(upper, 2))[:, None],
            np.asarray(ints.total(lower, 2))[:, None],
        )
    planes: tuple[Array, ...] = heads.memo[key]
    return planes


def _mixture(a_lo: Array, a_hi: Array, one: int) -> np.ndarray:
    """Per query, weights over the keys in units, >= 0 and summing to exactly ``one``: the weight box's midpoints,
    normalised (floats choose; any such weights are sound, since Σ_j a_ij = 1). On issue 43's models this bounds
    2–9% tighter than the single anchor key (the largest sure weight) on d2 and the 4-head model, 2% looser on d3."""
    middle = (np.asarray(a_lo, dtype=np.float64) + np.asarray(a_hi, dtype=np.float64)) / 2
    middle = middle / np.maximum(middle.sum(axis=-1, keepdims=True), 1e-300)
    mix = np.floor(middle * one).astype(np.int64)
    top = np.argmax(mix, axis=-1)[..., None]
    np.put_along_axis(mix, top, np.take_along_axis(mix, top, -1) + (one - mix.sum(-1))[..., None], -1)
    return mix


def _mixed(value: Lin, mix: np.ndarray, one: int) -> Lin:
    """λ_i = Σ_k mix_ik·v_k / one (B, P, v): non-negative weights carry each side's form."""
    lc, lb = forms._reduce(
        ints.contract(mix, np.asarray(value.lc), "bik,bkcn->bicn"),
        ints.contract(mix, np.asarray(value.lb), "bik,bkc->bic"),
        one,
        upper=False,
    )
    uc, ub = forms._reduce(
        ints.contract(mix, np.asarray(value.uc), "bik,bkcn->bicn"),
        ints.contract(mix, np.asarray(value.ub), "bik,bkc->bic"),
        one,
        upper=True,
    )
    lo = ints.floordiv(ints.contract(mix, np.asarray(value.lo), "bik,bkc->bic"), one)
    hi = ints.ceildiv(ints.contract(mix, np.asarray(value.hi), "bik,bkc->bic"), one)
    return forms.tighten(Lin(lo, hi, lc, lb, uc, ub))


def through_attention(
    linear: Any, index: int, lam: Array, z: Lin, trace: Any, state: _Pass, slopes: Slopes = DEFAULT
) -> Array:
    """Λ on an attention layer's output -> Λ on its input stream ``z`` (the residual, then every head)."""
    layer = linear.model.blocks[index].attention
    rounding = linear.rounding
    lam = _clamped(lam, trace.stages["after_attention"], rounding, state)
    before = lam if layer.residual else None
    projected = trace.stages["attention_output"]
    lam = through_store(lam, projected, rounding, state)
    concatenated = _concatenate_heads([h.output for h in trace.heads])
    lam = through_affine(lam, linear.layers[index]["attention"], concatenated, state)
    out = before if before is not None else np.zeros_like(np.asarray(lam)[..., :0])
    offset = 0
    for h, (plan, heads) in enumerate(zip(linear.heads[index], trace.heads)):
        width = np.shape(heads.output.lo)[-1]
        part = np.asarray(lam)[..., offset : offset + width]
        offset += width
        if not anchored(plan.head, plan, heads):
            cash_out(part, heads.output, state)
            continue
        on_values = through_softmax_head(part, heads, rounding, state, slopes.plane, slopes.theta.get((index, h)))
        on_values = through_store(on_values, heads.value, rounding, state)
        into = through_affine(on_values, plan.value, z, state)
        out = into if np.shape(out)[-1] == 0 else ints.add(out, into)
    if np.shape(out)[-1] == 0:
        return np.zeros((*np.shape(lam)[:-1], np.shape(z.lo)[-1]), dtype=np.int64)
    return out


def through_feed_forward(
    linear: Any, index: int, lam: Array, z: Lin, trace: Any, state: _Pass, slopes: Slopes = DEFAULT
) -> Array:
    """Λ on a feed-forward layer's output -> Λ on its input stream ``z``."""
    ff = linear.model.blocks[index].feed_forward
    rounding, stages = linear.rounding, trace.stages
    lam = _clamped(lam, stages["after_feed_forward"], rounding, state)
    before = lam if ff.residual else None
    lam = through_store(lam, stages["feed_forward_output"], rounding, state)
    lam = through_affine(lam, linear.layers[index]["w2"], stages["hidden"], state)
    lam = through_relu(lam, stages["pre_activation"], state, slopes, slopes.alpha.get(index))
    lam = through_store(lam, stages["pre_activation"], rounding, state)
    lam = through_affine(lam, linear.layers[index]["w1"], z, state)
    return lam if before is None else ints.add(before, lam)


def _concatenate_heads(outputs: list[Lin]) -> Lin:
    def join(arrays: list[Array], axis: int) -> Array:
        if any(ints.wide(a) for a in arrays):
            arrays = [np.asarray(a).astype(object) for a in arrays]
        return np.concatenate([np.asarray(a) for a in arrays], axis=axis)

    return Lin(
        join([o.lo for o in outputs], -1),
        join([o.hi for o in outputs], -1),
        join([o.lc for o in outputs], -2),
        join([o.lb for o in outputs], -1),
        join([o.uc for o in outputs], -2),
        join([o.ub for o in outputs], -1),
    )


def streams(linear: Any, result: Any) -> list[Lin]:
    """The stream entering each block (the embedding, then each block's output), from a traced forward pass."""
    out = [result.embedded]
    for trace in result.blocks:
        stage = out[-1]
        stage = trace.stages.get("after_attention", stage)
        stage = trace.stages.get("after_feed_forward", stage)  # a block being bounded may lack it yet
        out.append(stage)
    return out


def backward(
    linear: Any, result: Any, lam: Array, blocks: int, attention_only: bool = False, slopes: Slopes = DEFAULT
) -> _Pass:
    """Upper bounds of the objectives Λ·(the output stream of block ``blocks`` − 1; with ``attention_only``, of its
    attention sublayer) (Λ: (B, O, P, d) units), as a bound Σ T·t + C (units squared) per cube and objective."""
    batch, objectives = np.shape(lam)[:2]
    n = np.shape(result.embedded.lc)[-1]
    state = _Pass(np.zeros((batch, objectives, n), dtype=np.int64), np.zeros((batch, objectives), dtype=np.int64),
                  linear.scale.one)  # fmt: skip
    stages = streams(linear, result)
    for index in range(blocks - 1, -1, -1):
        block, trace = linear.model.blocks[index], result.blocks[index]
        if block.feed_forward is not None and not (attention_only and index == blocks - 1):
            z = trace.stages["after_attention"] if block.attention is not None else stages[index]
            lam = through_feed_forward(linear, index, lam, z, trace, state, slopes)
        if block.attention is not None:
            lam = through_attention(linear, index, lam, stages[index], trace, state, slopes)
    cash_out(lam, result.embedded, state)  # the embedding's forms already account for its clamp
    return state


def _as_bounds(state: _Pass, objectives: int, scale: Any) -> Lin:
    """Objectives 0..K−1 bound +y, K..2K−1 bound −y: y's interval and forms (units, rounded outward)."""
    one = scale.one
    coefficients, constant = state.coefficients, state.constant
    up_c, up_b = coefficients[:, :objectives], constant[:, :objectives]
    down_c, down_b = (
        ints.sub(np.int64(0), coefficients[:, objectives:]),
        ints.sub(np.int64(0), constant[:, objectives:]),
    )
    uc, ub = forms._reduce(up_c, up_b, one, upper=True)
    lc, lb = forms._reduce(down_c, down_b, one, upper=False)
    hi, lo = forms.form_max(uc, ub), forms.form_min(lc, lb)
    return Lin(lo, hi, lc, lb, uc, ub)


def _best(bounds: list[Lin]) -> Lin:
    """Bounds of the same quantities by several choices of slopes: per element the tighter of each (``better``)."""
    return functools.reduce(forms.better, bounds)


def readout_bounds(
    linear: Any, result: Any, variants: tuple[Slopes, ...] = (DEFAULT,), choose: Choose | None = None
) -> Lin:
    """The readout (B, P) bounded backward from ±1 on each position (``result``: a forward pass with ``trace``), per
    element the best of the ``variants``' passes and, with ``choose``, of one pass with its per-element slopes."""
    return _best([_readout_bounds(linear, result, slopes) for slopes in (*variants, *((choose,) if choose else ()))])


def _readout_bounds(linear: Any, result: Any, slopes: Slopes | Choose) -> Lin:
    final = streams(linear, result)[-1]
    batch, positions, _ = np.shape(final.lo)
    lam = np.zeros((batch, 2 * positions, positions, 1), dtype=np.int64)
    for p in range(positions):
        lam[:, p, p, 0] = linear.scale.one
        lam[:, positions + p, p, 0] = -linear.scale.one
    state = _Pass(np.zeros((batch, 2 * positions, np.shape(final.lc)[-1]), dtype=np.int64),
                  np.zeros((batch, 2 * positions), dtype=np.int64), linear.scale.one)  # fmt: skip
    on_stream = through_affine(lam, linear.readout, final, state)
    blocks = len(linear.model.blocks)
    if not isinstance(slopes, Slopes):
        slopes = slopes(linear, result, on_stream, blocks, False)
    rest = backward(linear, result, on_stream, blocks, slopes=slopes)
    rest.coefficients = ints.add(rest.coefficients, state.coefficients)
    rest.add(state.constant)
    return _as_bounds(rest, positions, linear.scale)


def stream_bounds(
    linear: Any,
    result: Any,
    blocks: int,
    attention_only: bool = False,
    variants: tuple[Slopes, ...] = (DEFAULT,),
    choose: Choose | None = None,
) -> Lin:
    """The output stream (B, P, d) of block ``blocks`` − 1 (or of its attention sublayer) bounded backward from ±1
    on each element (the best of the ``variants``' passes and of ``choose``'s)."""
    stage = result.blocks[blocks - 1].stages["after_attention"] if attention_only else streams(linear, result)[blocks]
    batch, positions, dim = np.shape(stage.lo)
    count = positions * dim
    lam = np.zeros((batch, 2 * count, positions, dim), dtype=np.int64)
    for k in range(count):
        p, c = divmod(k, dim)
        lam[:, k, p, c] = linear.scale.one
        lam[:, count + k, p, c] = -linear.scale.one
    chosen = (choose(linear, result, lam, blocks, attention_only),) if choose else ()
    bounds = _best(
        [
            _as_bounds(backward(linear, result, lam, blocks, attention_only, s), count, linear.scale)
            for s in (*variants, *chosen)
        ]
    )
    return bounds.map(lambda a: np.asarray(a).reshape(batch, positions, dim),
                      lambda c: np.asarray(c).reshape(batch, positions, dim, -1))  # fmt: skip


def affine_stage_bounds(
    linear: Any,
    result: Any,
    plan: Any,
    stage: Lin,
    z: Lin,
    blocks: int,
    attention_only: bool,
    variants: tuple[Slopes, ...] = (DEFAULT,),
    choose: Choose | None = None,
) -> Lin:
    """A stage round(W z + b) (B, P, k) of a sublayer, bounded backward from ±1 on each element (``z``: the
    sublayer's input stream, the output of block ``blocks`` − 1 or of its attention sublayer; the best of the
    ``variants``' passes and of ``choose``'s)."""
    batch, positions, width = np.shape(stage.lo)
    count = positions * width
    lam = np.zeros((batch, 2 * count, positions, width), dtype=np.int64)
    for k in range(count):
        p, c = divmod(k, width)
        lam[:, k, p, c] = linear.scale.one
        lam[:, count + k, p, c] = -linear.scale.one
    state = _Pass(np.zeros((batch, 2 * count, np.shape(z.lc)[-1]), dtype=np.int64),
                  np.zeros((batch, 2 * count), dtype=np.int64), linear.scale.one)  # fmt: skip
    lam = through_store(lam, stage, linear.rounding, state)
    lam = through_affine(lam, plan, z, state)
    found = []
    for slopes in (*variants, *((choose(linear, result, lam, blocks, attention_only),) if choose else ())):
        rest = backward(linear, result, lam, blocks, attention_only, slopes)
        rest.coefficients = ints.add(rest.coefficients, state.coefficients)
        rest.add(state.constant)
        found.append(_as_bounds(rest, count, linear.scale))
    bounds = _best(found)
    shift = linear.scale.grid_shift
    refined = forms.better(stage, bounds.map(lambda a: np.asarray(a).reshape(batch, positions, width),
                                             lambda c: np.asarray(c).reshape(batch, positions, width, -1)))  # fmt: skip
    return forms.tighten(refined, shift)


def _pair_planes(query: Lin, delta: Lin, upper: bool, first: bool) -> tuple[Array, ...]:
    """McCormick's plane of q_i·Δ_p per component, for the upper or the lower side, the first or the second
    (``_planes`` with one plane: θ = 1 the first, 0 the second): (slope on Δ (B, P, 1, k), slope on q (B, 1, pairs,
    k), the constant a·b summed over the components (B, P, pairs)), all in units; q·Δ <= (or >=) a·Δ + b·q − a·b
    over the box."""
    q_lo, q_hi = np.asarray(query.lo)[:, :, None], np.asarray(query.hi)[:, :, None]
    d_lo, d_hi = np.asarray(delta.lo)[:, None], np.asarray(delta.hi)[:, None]
    above, below = _planes(q_lo, q_hi, d_lo, d_hi, int(first), steps=1)
    on_delta, on_query, constant = above if upper else below  # constant: −a·b per component
    return on_delta, on_query, ints.total(ints.sub(np.int64(0), constant), -1)


def score_bounds(
    linear: Any,
    result: Any,
    index: int,
    z: Lin,
    plan: Any,
    query: Lin,
    key: Lin,
    pairs: bool = True,
    first: bool = True,
) -> Lin:
    """Bounds, backward, of a head of block ``index``: with ``pairs`` its rounded score differences s_ik − s_ij
    (j < k; (B, P, pairs), valid where no score saturates: the caller keeps the plain intervals there), else its
    scores before rounding q_i·k_j + B[j − i] ((B, P, P)). McCormick's planes of each product q_i·Δ (Δ = k_k − k_j,
    or k_j) over the factors' intervals are linear in q_i and the keys, so in the block's input stream ``z``
    (through their stores and affine maps), and on back to the input coordinates as every backward bound; the
    relative bias by its interval, each score's floor by ±2^-f."""
    one = linear.scale.one
    batch, positions, width = np.shape(query.lo)
    if pairs:
        jj, kk = linear.rounding.pairs
        delta = forms.tighten(forms.sub(key[:, kk], key[:, jj]))  # (B, pairs, k)
        bias_lo, bias_hi = (np.asarray(b, dtype=object) for b in plan.bias_difference)  # (P, pairs)
        grid = one << linear.scale.grid_shift if linear.rounding.rounds_scores(plan.head) else 0
    else:
        jj, kk = None, np.arange(positions)
        delta, grid = key, 0
        bias_lo, bias_hi = (np.asarray(b, dtype=object) for b in plan.bias)  # (P, P)
    count = positions * len(kk)
    if count == 0:  # one position: no pairs
        return forms.constant(np.zeros((batch, positions, 0), dtype=np.int64), np.zeros((batch, positions, 0),
                              dtype=np.int64), np.shape(z.lc)[-1])  # fmt: skip
    rows = np.arange(count)
    i_of, p_of = np.divmod(rows, len(kk))
    lam_q = np.zeros((batch, 2 * count, positions, width), dtype=object)
    lam_k = np.zeros_like(lam_q)
    constant = np.zeros((batch, 2 * count), dtype=object)
    spread = np.zeros((count, positions), dtype=np.int64)  # row r = (i, p): +1 on key k_p, −1 on key j_p
    spread[rows, kk[p_of]] = 1
    if jj is not None:
        spread[rows, jj[p_of]] = -1
    for side, upper in ((0, True), (1, False)):
        a, b, ab = (np.asarray(x, dtype=object) for x in _pair_planes(query, delta, upper, first))
        sign = 1 if upper else -1  # the lower side bounds −y from above
        o = side * count + rows
        a_full = np.broadcast_to(a, (batch, positions, len(kk), width))[:, i_of, p_of]  # (B, count, k)
        b_full = np.broadcast_to(b, (batch, positions, len(kk), width))[:, i_of, p_of]
        lam_q[:, o, i_of] = sign * b_full
        lam_k[:, o] = sign * a_full[:, :, None, :] * spread[None, :, :, None]
        bias = (bias_hi if upper else -bias_lo)[i_of, p_of] * one
        constant[:, o] = -sign * np.broadcast_to(ab, (batch, positions, len(kk)))[:, i_of, p_of] + bias + grid
    state = _Pass(np.zeros((batch, 2 * count, np.shape(z.lc)[-1]), dtype=np.int64), ints.narrow(constant), one)
    rounding = linear.rounding
    on_z = ints.add(
        through_affine(through_store(ints.narrow(lam_q), query, rounding, state), plan.query, z, state),
        through_affine(through_store(ints.narrow(lam_k), key, rounding, state), plan.key, z, state),
    )
    rest = backward(linear, result, on_z, index)
    rest.coefficients = ints.add(rest.coefficients, state.coefficients)
    rest.add(state.constant)
    bounds = _as_bounds(rest, count, linear.scale)
    return bounds.map(lambda x: np.asarray(x).reshape(batch, positions, len(kk)),
                      lambda c: np.asarray(c).reshape(batch, positions, len(kk), -1))  # fmt: skip


def refined_bound(
    linear: Any,
    inputs: Any,
    variants: tuple[Slopes, ...] = (DEFAULT,),
    readout: tuple[Slopes, ...] | None = None,
    choose: Choose | None = None,
    everywhere: bool = False,
) -> Any:
    """``LinearModel.bound`` (with its trace) where every sublayer's affine stages (query, key, value, the
    pre-activation) and output stream are intersected with their backward bounds before they are read (CROWN's
    intermediate bounds), and the readout bounded backward too (intersected with the forward's); every backward
    bound the best of the ``variants``' passes (the readout's: of ``readout``, default the same) and, with
    ``choose``, of a pass with its per-element slopes: at the readout, and with ``everywhere`` at every stage."""
    z, variables = linear.embed(inputs)
    embedded = z
    blocks: list[Any] = []
    result = Result(embedded, embedded, variables, embedded, blocks)  # readout and output filled in at the end
    inner = choose if everywhere else None
    for index, block in enumerate(linear.model.blocks):
        record = BlockForms()
        blocks.append(record)
        if block.attention is not None:
            entering = z

            def on_heads(plan: Any, stage: Lin, z: Lin = entering, index: int = index) -> Lin:
                return affine_stage_bounds(linear, result, plan, stage, z, index, False, variants, inner)

            def on_pairs(
                plan: Any, query: Lin, key: Lin, pairs: bool, z: Lin = entering, index: int = index
            ) -> Lin | None:
                if ("differences" if pairs else "scores") not in SCORES:
                    return None
                return score_bounds(linear, result, index, z, plan, query, key, pairs)

            z = linear.attention_layer(index, block.attention, z, record, on_heads, on_pairs if SCORES else None)
            bounds = stream_bounds(linear, result, index + 1, True, variants, inner)
            z = record.stages["after_attention"] = forms.better(z, bounds)
        if block.feed_forward is not None:
            attention = block.attention is not None
            entering = z

            def on_pre(
                plan: Any, stage: Lin, z: Lin = entering, index: int = index, attention: bool = attention
            ) -> Lin:
                blocks = index + 1 if attention else index
                return affine_stage_bounds(linear, result, plan, stage, z, blocks, attention, variants, inner)

            z = linear.feed_forward(index, block.feed_forward, z, record, on_pre)
            z = record.stages["after_feed_forward"] = forms.better(
                z, stream_bounds(linear, result, index + 1, variants=variants, choose=inner)
            )
    forward = forms.affine(z, *linear.readout).map(lambda a: a[..., 0], lambda c: c[..., 0, :])
    result.output = z
    backward_readout = readout_bounds(linear, result, variants if readout is None else readout, choose)
    result.readout = forms.better(forward, backward_readout)
    return result

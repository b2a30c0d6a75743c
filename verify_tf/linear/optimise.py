"""Per-element optimised slopes for the backward bounds (alpha-CROWN; Xu et al. 2021), issue 43.

``backward.backward`` takes its relaxations' free choices per pass (``backward.Slopes``). Here they are chosen
per cube, objective and element by projected gradient descent on a *float twin* of that pass: the same steps in
float64 (no rounding of Λ, no remainders), each returning Λ on the stage below and a closure that maps the
adjoint of that Λ back to the adjoint of its own Λ. Every step is piecewise linear and positively homogeneous in
Λ, so the adjoint of a Λ is the stage's value at the pass's "primal point" (the cube corner t* that maximises the
final form, carried forward through the chosen relaxations), and the gradient of the bound in a slope is read off
where the slope acts:

* a crossing ReLU's lower slope s ∈ [0, 1] (Λ⁻·s·x): ∂U/∂s = Λ⁻·x̄ (x̄ the pre-activation's primal value);
* a product a·g's plane weight θ ∈ [0, 1] (``backward._planes``): the plane's derivative in θ at (ḡ, ā).

The softmax weights are concretized by their forward forms (``softmax.py``): the exp and reciprocal tangent points
live in the forward pass, not in this one, so they are not parameters here.

Floats only choose: ``choose`` returns integer slopes (units for s, 1/PLANE_STEPS for θ) that the exact pass clamps
to their valid ranges and then bounds with, in integers; the caller keeps the better of that bound and the others.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .backward import PLANE_STEPS, Slopes, anchored, crown_slope_one, head_planes, streams

ITERATIONS = 12  # gradient steps per pass (docs/performance.md: the bound stops moving after ~10)
STEP = 0.3  # Adam's step on slopes in [0, 1]

Back = Callable[[np.ndarray], np.ndarray]


def _real(x: Any, one: int) -> np.ndarray:
    return np.asarray(x, dtype=np.float64) / one


def _sum(x: np.ndarray) -> np.ndarray:
    return x.reshape(*x.shape[:2], -1).sum(-1)


@dataclass
class _Twin:
    """One float pass: the bound Σ T·t + C per cube and objective, the slopes and their gradients."""

    linear: Any
    result: Any
    alpha: dict[int, np.ndarray]
    theta: dict[tuple[int, int], np.ndarray]
    coefficients: np.ndarray
    constant: np.ndarray
    gradients: dict[Any, np.ndarray] = field(default_factory=dict)
    corner: np.ndarray | None = None  # t* (B, O, N), set before the adjoint sweep
    memo: dict[Any, Any] = field(default_factory=dict)  # what does not depend on the slopes, shared by iterations

    @property
    def one(self) -> int:
        return int(self.linear.scale.one)

    def real(self, x: Any) -> np.ndarray:
        """A stage's integer array as reals (units / one), converted once per ``memo``."""
        key = ("real", id(x))
        if key not in self.memo:
            self.memo[key] = (x, _real(x, self.one))  # the array kept alive, so its id stays its own
        converted: np.ndarray = self.memo[key][1]
        return converted


def _box(twin: _Twin, lam: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> Callable[[], np.ndarray]:
    twin.constant += _sum(np.maximum(lam, 0) * hi[:, None] + np.minimum(lam, 0) * lo[:, None])
    return lambda: np.where(lam > 0, hi[:, None], lo[:, None])


def _cash_out(twin: _Twin, lam: np.ndarray, stage: Any) -> Callable[[], np.ndarray]:
    """``backward.cash_out`` in floats; the closure gives the stage's primal value (needs ``twin.corner``)."""
    one = twin.one
    lo, hi = twin.real(stage.lo), twin.real(stage.hi)
    lc, lb, uc, ub = (twin.real(a) for a in (stage.lc, stage.lb, stage.uc, stage.ub))
    shape = (lam.shape[0], *lam.shape[2:])
    n = lc.shape[-1]
    span = ub + np.maximum(uc, 0).sum(-1) - lb - np.minimum(lc, 0).sum(-1)
    loose = np.broadcast_to(span > 2 * (hi - lo) + 1 / one, shape)[:, None]
    lo, hi = np.broadcast_to(lo, shape), np.broadcast_to(hi, shape)
    boxed = _box(twin, np.where(loose, lam, 0), lo, hi)
    kept = np.where(loose, 0, lam)
    batch, objectives = lam.shape[:2]
    values = int(np.prod(shape[1:], dtype=np.int64))
    flat = kept.reshape(batch, objectives, values)
    pos, neg = np.maximum(flat, 0), np.minimum(flat, 0)
    uc, lc = (np.broadcast_to(c, (*shape, n)).reshape(batch, values, n) for c in (uc, lc))
    ub, lb = (np.broadcast_to(b, shape).reshape(batch, values) for b in (ub, lb))
    twin.coefficients += np.einsum("bom,bmn->bon", pos, uc) + np.einsum("bom,bmn->bon", neg, lc)
    twin.constant += (pos * ub[:, None]).sum(-1) + (neg * lb[:, None]).sum(-1)

    def back() -> np.ndarray:
        t = twin.corner
        assert t is not None  # set by ``_pass`` before the adjoint sweep
        upper = np.einsum("bmn,bon->bom", uc, t) + ub[:, None]
        lower = np.einsum("bmn,bon->bom", lc, t) + lb[:, None]
        value = np.where(flat > 0, upper, lower).reshape(lam.shape)
        return np.where(loose, boxed(), value)

    return back


def _clamped(twin: _Twin, lam: np.ndarray, stage: Any) -> tuple[np.ndarray, Back]:
    rounding = twin.linear.rounding
    if rounding.low is None:
        return lam, lambda x: x
    acting = np.asarray((np.asarray(stage.lo) <= rounding.low) | (np.asarray(stage.hi) >= rounding.high), dtype=bool)
    if not acting.any():
        return lam, lambda x: x
    mask = np.broadcast_to(acting[:, None], lam.shape)
    boxed = _box(twin, np.where(mask, lam, 0), twin.real(stage.lo), twin.real(stage.hi))
    return np.where(mask, 0, lam), lambda x: np.where(mask, boxed(), x)


def _store(twin: _Twin, lam: np.ndarray, stage: Any) -> tuple[np.ndarray, Back]:
    """y = round(x): Λ·y <= Λ·x − Λ⁻·2^-f (``backward.through_store``)."""
    lam, clamp = _clamped(twin, lam, stage)
    step = twin.linear.rounding.scale.grid_shift
    delta = 0.0 if step is None else (1 << step) / twin.one
    twin.constant += _sum(-np.minimum(lam, 0) * delta)
    return lam, lambda x: clamp(x - delta * (lam < 0))


def _affine(twin: _Twin, lam: np.ndarray, plan: Any) -> tuple[np.ndarray, Back]:
    weights, den, bias_lo, bias_hi = plan
    matrix = np.asarray(weights, dtype=np.float64) / den
    low, high = _real(bias_lo, twin.one), _real(bias_hi, twin.one)
    twin.constant += _sum(np.maximum(lam, 0) * high + np.minimum(lam, 0) * low)
    out = np.einsum("bo...k,ki->bo...i", lam, matrix)
    return out, lambda x: np.einsum("bo...i,ki->bo...k", x, matrix) + np.where(lam > 0, high, low)


def _relu(twin: _Twin, lam: np.ndarray, pre: Any, index: int) -> tuple[np.ndarray, Back]:
    """Above by the chord, below by s·x with s = ``twin.alpha[index]`` where the ReLU crosses 0."""
    lo, hi = twin.real(pre.lo), twin.real(pre.hi)
    crossing, dead = (lo < 0) & (hi > 0), hi <= 0
    sigma = np.where(crossing, hi / np.where(crossing, hi - lo, 1.0), np.where(dead, 0.0, 1.0))[:, None]
    beta = np.where(crossing, -sigma[:, 0] * lo, 0.0)[:, None]
    lower = np.where(crossing[:, None], twin.alpha[index], np.where(dead, 0.0, 1.0)[:, None])
    pos, neg = np.maximum(lam, 0), np.minimum(lam, 0)
    twin.constant += _sum(pos * beta)

    def back(x: np.ndarray) -> np.ndarray:
        twin.gradients[index] = np.where(crossing[:, None], neg * x, 0.0)
        return np.where(lam > 0, sigma * x + beta, np.where(lam < 0, lower * x, 0.0))

    return pos * sigma + neg * lower, back


def _head_terms(twin: _Twin, heads: Any, key: tuple[int, int]) -> tuple[np.ndarray, ...]:
    """A head's plane terms that do not depend on θ (each plane is linear in θ: s = s0 + θ·ds), once per ``memo``:
    the mixture, a's and g's ends (B, 1, P, P, 1|v) and the slopes' and constants' values at θ = 0 and rates."""
    if ("head", key) not in twin.memo:
        one = twin.one
        mix, g_lo, g_hi = head_planes(heads, one, 1)[:3]
        gl, gh = _real(g_lo, one)[:, None], _real(g_hi, one)[:, None]  # (B, 1, P, P, v)
        al, ah = (twin.real(a)[:, None, :, :, None] for a in (heads.weights.lo, heads.weights.hi))
        twin.memo["head", key] = (
            np.asarray(mix, dtype=np.float64) / one,
            (al, ah - al),  # upper plane's slope on g: al + θ·(ah − al); the lower's: ah − θ·(ah − al)
            (gh, gl - gh),  # the slope on a
            (-al * gh, al * gh - ah * gl),  # the upper constant
            (-ah * gh, ah * gh - al * gl),  # the lower constant
            ah,
        )
    terms: tuple[np.ndarray, ...] = twin.memo["head", key]
    return terms


def _softmax_head(twin: _Twin, lam: np.ndarray, heads: Any, key: tuple[int, int]) -> tuple[np.ndarray, Back]:
    """``backward.through_softmax_head`` with θ per objective and element (``twin.theta[key]``, (B, O, P, P, v))."""
    lam, store = _store(twin, lam, heads.output)
    mix, (al, da), (gh, dg), (cu0, dcu), (cl0, dcl), ah = _head_terms(twin, heads, key)
    theta = twin.theta[key]
    lam5 = lam[:, :, :, None, :]
    up = lam5 > 0
    rate_g = np.where(up, da, -da)  # d(slope on g)/dθ of the plane each element uses (its Λ's sign)
    rate_c = np.where(up, dcu, dcl)
    on_side = np.where(up, al + theta * da, ah - theta * da)
    sg = gh + theta * dg
    constant = np.where(up, cu0 + theta * dcu, cl0 + theta * dcl)
    on_g = lam5 * on_side  # (B, O, P_i, P_j, v)
    on_a = (lam5 * sg).sum(-1)  # (B, O, P_i, P_j)
    twin.constant += _sum(lam5 * constant)
    weights = _cash_out(twin, on_a, heads.weights)
    to_anchor = lam - on_g.sum(3)
    out = on_g.sum(2) + np.einsum("boic,bik->bokc", to_anchor, mix)

    def back(values: np.ndarray) -> np.ndarray:
        anchor = np.einsum("bik,bokc->boic", mix, values)
        g = values[:, :, None] - anchor[:, :, :, None]
        a = weights()[..., None]
        twin.gradients[key] = lam5 * (rate_g * g + dg * a + rate_c)
        return store(anchor + (on_side * g + sg * a + constant).sum(3))

    return out, back


def _ignoring(value: Callable[[], np.ndarray]) -> Back:
    """A head concretized by its forms: its primal value does not depend on the stream's."""
    return lambda _zbar: value()


def _composed(*steps: Back) -> Back:
    """steps[0] ∘ steps[1] ∘ …: the adjoint sweep through a head's steps, the last applied first."""

    def apply(x: np.ndarray) -> np.ndarray:
        for step in reversed(steps):
            x = step(x)
        return x

    return apply


def _attention(twin: _Twin, index: int, lam: np.ndarray, z: Any, trace: Any) -> tuple[np.ndarray, Back]:
    linear = twin.linear
    layer = linear.model.blocks[index].attention
    lam, clamp = _clamped(twin, lam, trace.stages["after_attention"])
    before = lam if layer.residual else None
    lam, store = _store(twin, lam, trace.stages["attention_output"])
    lam, project = _affine(twin, lam, linear.layers[index]["attention"])
    out = np.zeros((*lam.shape[:-1], np.shape(z.lo)[-1])) if before is None else before
    parts: list[Callable[[np.ndarray], np.ndarray]] = []
    offset = 0
    for h, (plan, heads) in enumerate(zip(linear.heads[index], trace.heads)):
        width = np.shape(heads.output.lo)[-1]
        part = lam[..., offset : offset + width]
        offset += width
        if not anchored(plan.head, plan, heads):
            parts.append(_ignoring(_cash_out(twin, part, heads.output)))
            continue
        on_values, head = _softmax_head(twin, part, heads, (index, h))
        on_values, value_store = _store(twin, on_values, heads.value)
        into, value_map = _affine(twin, on_values, plan.value)
        out = out + into
        parts.append(_composed(head, value_store, value_map))

    def back(zbar: np.ndarray) -> np.ndarray:
        heads_bar = np.concatenate([part(zbar) for part in parts], axis=-1)
        inner = store(project(heads_bar))
        return clamp(inner + zbar if before is not None else inner)

    return out, back


def _feed_forward(twin: _Twin, index: int, lam: np.ndarray, trace: Any) -> tuple[np.ndarray, Back]:
    linear, stages = twin.linear, trace.stages
    ff = linear.model.blocks[index].feed_forward
    lam, clamp = _clamped(twin, lam, stages["after_feed_forward"])
    before = lam if ff.residual else None
    lam, store = _store(twin, lam, stages["feed_forward_output"])
    lam, second = _affine(twin, lam, linear.layers[index]["w2"])
    lam, relu = _relu(twin, lam, stages["pre_activation"], index)
    lam, pre_store = _store(twin, lam, stages["pre_activation"])
    lam, first = _affine(twin, lam, linear.layers[index]["w1"])

    def back(zbar: np.ndarray) -> np.ndarray:
        inner = store(second(relu(pre_store(first(zbar)))))
        return clamp(inner + zbar if before is not None else inner)

    return (lam if before is None else before + lam), back


def _pass(twin: _Twin, lam: np.ndarray, blocks: int, attention_only: bool) -> np.ndarray:
    """The float bound per cube and objective; fills ``twin.gradients`` (``backward.backward``'s walk)."""
    linear, result = twin.linear, twin.result
    stages = streams(linear, result)
    chain: list[Back] = []
    for index in range(blocks - 1, -1, -1):
        block, trace = linear.model.blocks[index], result.blocks[index]
        if block.feed_forward is not None and not (attention_only and index == blocks - 1):
            lam, step = _feed_forward(twin, index, lam, trace)
            chain.append(step)
        if block.attention is not None:
            lam, step = _attention(twin, index, lam, stages[index], trace)
            chain.append(step)
    embedded = _cash_out(twin, lam, result.embedded)
    bound = np.maximum(twin.coefficients, 0).sum(-1) + twin.constant
    twin.corner = (twin.coefficients > 0).astype(np.float64)
    primal = embedded()
    for step in reversed(chain):
        primal = step(primal)
    return bound


def _start(linear: Any, result: Any, objectives: int, blocks: int, attention_only: bool) -> dict[Any, np.ndarray]:
    """CROWN's choices: the ReLU's adaptive slope (1 where hi >= −lo), the midpoint planes (θ = 1/2)."""
    out: dict[Any, np.ndarray] = {}
    for index in range(blocks):
        block, trace = linear.model.blocks[index], result.blocks[index]
        if block.feed_forward is not None and not (attention_only and index == blocks - 1):
            pre = trace.stages["pre_activation"]
            adaptive = crown_slope_one(np.asarray(pre.lo, dtype=np.float64), np.asarray(pre.hi, dtype=np.float64))
            out[index] = np.repeat(adaptive[:, None].astype(np.float64), objectives, axis=1)
        if block.attention is not None:
            for h, (plan, heads) in enumerate(zip(linear.heads[index], trace.heads)):
                if anchored(plan.head, plan, heads):
                    batch, positions, width = np.shape(heads.value.lo)
                    out[index, h] = np.full((batch, objectives, positions, positions, width), 0.5)
    return out


def choose(
    linear: Any, result: Any, lam: Any, blocks: int, attention_only: bool, iterations: int | None = None
) -> Slopes:
    """Per-element slopes for ``backward.backward(linear, result, lam, blocks, attention_only)`` (``backward.
    Choose``): Adam's projected steps on the float twin from CROWN's choices, per cube and objective the iterate
    with the least float bound, as integers (units; θ in steps of 1/PLANE_STEPS)."""
    iterations = ITERATIONS if iterations is None else iterations
    one = int(linear.scale.one)
    start = np.asarray(lam, dtype=np.float64) / one
    batch, objectives = start.shape[:2]
    n = np.shape(result.embedded.lc)[-1]
    params = _start(linear, result, objectives, blocks, attention_only)
    best = {k: v.copy() for k, v in params.items()}
    least = np.full((batch, objectives), np.inf)
    moments = {k: (np.zeros_like(v), np.zeros_like(v)) for k, v in params.items()}
    memo: dict[Any, Any] = {}
    for step in range(iterations + 1):
        twin = _Twin(linear, result, {k: v for k, v in params.items() if isinstance(k, int)},
                     {k: v for k, v in params.items() if isinstance(k, tuple)},
                     np.zeros((batch, objectives, n)), np.zeros((batch, objectives)), memo=memo)  # fmt: skip
        bound = _pass(twin, start.copy(), blocks, attention_only)
        improved = bound < least
        least = np.where(improved, bound, least)
        for k, v in params.items():
            mask = improved.reshape(batch, objectives, *(1,) * (v.ndim - 2))
            best[k] = np.where(mask, v, best[k])
        if step == iterations:
            break
        for k, v in params.items():
            grad = twin.gradients.get(k, np.zeros_like(v))
            first, second = moments[k]
            first[...] = 0.9 * first + 0.1 * grad
            second[...] = 0.999 * second + 0.001 * grad * grad
            corrected = first / (1 - 0.9 ** (step + 1)), second / (1 - 0.999 ** (step + 1))
            params[k] = np.clip(v - STEP * corrected[0] / (np.sqrt(corrected[1]) + 1e-12), 0.0, 1.0)
    alpha = {k: np.round(v * one).astype(np.int64) for k, v in best.items() if isinstance(k, int)}
    theta = {k: np.round(v * PLANE_STEPS).astype(np.int64) for k, v in best.items() if isinstance(k, tuple)}
    return Slopes(alpha=alpha, theta=theta)

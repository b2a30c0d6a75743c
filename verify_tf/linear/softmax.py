"""Linear forms of the softmax weights (fixed arithmetic, exact-sums or per-probability), from the score differences.

The interpreter's weight is a_j = E[d_j] / Σ_k E[d_k] with E the floored exp table and d_k the row maximum minus
s_k. Write u_k = e^{s_k − max} (so Σ u >= 1) and E[d_k] = 2^f·u_k − ε_k with 0 <= ε_k < 1 (a floor; 0 beyond the
table too, and ε = 0 for the maximum: E[0] = 2^f). Then, with p_j = u_j / Σ u = 1 / (1 + Σ_{k≠j} e^{s_k − s_j}) the
real softmax and L live keys,

    p_j − 2^-f  <=  a_j  <=  p_j · (1 + κ),   κ = (L − 1) / (2^f − (L − 1))

(the numerator loses ε_j < 1 over a denominator >= 2^f; the denominator loses Σε < L − 1 out of >= 2^f). p_j is
bounded through its pieces, each relaxed soundly with exact rational offsets:

* e^Δ for each difference Δ = s_k − s_j ∈ [l, h] (grid values): below by σ·(1 + Δ − c) for any σ <= e^c (a global
  lower bound of the convex exp: its minimum over Δ of e^Δ − σΔ is σ(1 − ln σ) >= σ(1 − c)); above by the chord
  through (l, e^l) and (h, e^h) with e^l, e^h rounded up (``_brackets``: floor/ceil of e^x·2^K for every grid x);
  for h beyond ``CAP`` no upper form is kept (p_j is then below 1/(1 + e^CAP) anyway and its lower form is 0);
* S_j = 1 + Σ_{k≠j} e^{Δ_kj}, then 1/S (convex, decreasing on S >= 1): above by the chord on [S_lo, S_hi]; below by
  the line of the same slope σ < 0 with offset min_S (1/S − σS), which is 2·√|σ| where the tangent point lies in
  the interval (a floored integer square root keeps it a lower bound), else at an end.

Floats choose the tangent point and the slopes; every offset is computed exactly for them. Hardmax weights are
not continuous and stay boxes (``attention.py``).
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal, localcontext
from functools import cache

import numpy as np

from . import forms, ints
from .forms import Lin
from .ints import Array, Scale

CAP = 8  # e^Δ for Δ > CAP gets no upper form (e^8 > 2980: p_j < 1/2981 then)


class _Brackets:
    """floor(e^x·2^bits) and ceil(e^x·2^bits) for grid points x = g·2^-frac, computed once per g (decimal, 40 digits:
    e^x is irrational for x != 0, so the floor and the ceiling differ by one) and kept for the process."""

    def __init__(self, frac: int, bits: int):
        self.frac, self.bits = frac, bits
        self.lowest = -math.ceil((bits * math.log(2) + 1) * (1 << frac))  # below: e^x·2^bits < 1
        self.highest = CAP << frac
        size = self.highest - self.lowest + 2  # index 0: every g below ``lowest``
        self.lo = np.zeros(size, dtype=np.int64)
        self.hi = np.ones(size, dtype=np.int64)
        self.known = np.zeros(size, dtype=bool)
        self.known[0] = True

    def __call__(self, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(floor, ceil) per grid index (below ``lowest``: 0 and 1; at most ``highest``)."""
        index = np.clip(grid - self.lowest + 1, 0, len(self.lo) - 1)
        missing = np.unique(index[~self.known[index]])
        if len(missing):
            with localcontext(Context(prec=40)):
                scale = Decimal(1 << self.bits)
                for k in missing.tolist():
                    value = (Decimal(k - 1 + self.lowest) / Decimal(1 << self.frac)).exp() * scale
                    self.lo[k] = int(value.to_integral_value(rounding=ROUND_FLOOR))
                    self.hi[k] = int(value.to_integral_value(rounding=ROUND_CEILING))
            self.known[missing] = True
        return self.lo[index], self.hi[index]


@cache
def _brackets(frac: int, bits: int) -> _Brackets:
    return _Brackets(frac, bits)


def exp_forms(delta: Lin, scale: Scale) -> tuple[Lin, np.ndarray]:
    """Bounds of e^Δ (units) for Δ on the grid; and where Δ can exceed CAP (the upper side is then not valid)."""
    one, step, frac = scale.one, scale.grid_shift, scale.frac
    assert step is not None and frac is not None  # softmax exists in fixed arithmetic only
    brackets = _brackets(frac, scale.bits)
    l_grid = np.asarray(delta.lo, dtype=np.int64) >> step
    h_grid = np.asarray(delta.hi, dtype=np.int64) >> step
    unbounded = h_grid > brackets.highest
    h_capped = np.minimum(h_grid, brackets.highest)
    e_l_lo, e_l_hi = brackets(l_grid)
    e_h_hi = brackets(h_capped)[1]
    t_lo, t_hi = l_grid << step, h_capped << step
    span = np.maximum(t_hi - t_lo, 1)
    chord = np.round((e_h_hi - e_l_hi).astype(np.float64) / span * one).astype(np.int64)
    beta = forms.offset(chord, t_lo, t_hi, e_l_hi, e_h_hi, one, upper=True)
    uc, ub = forms.line(delta.uc, delta.ub, chord, beta, one, upper=True)
    # below: the tangent at the chord's slope point c = ln((e^h − e^l) / (h − l)), snapped to the grid in [l, h]
    real_span = np.maximum((h_capped - l_grid).astype(np.float64), 1.0) / (1 << frac)
    mean_slope = np.maximum((e_h_hi - e_l_lo).astype(np.float64) / one / real_span, 1e-300)
    c_grid = np.clip(np.floor(np.log(mean_slope) * (1 << frac)), l_grid, h_capped).astype(np.int64)
    c_grid = np.where(h_capped > l_grid, c_grid, l_grid)
    sigma = brackets(c_grid)[0]  # <= e^c
    tangent_beta = ints.mul(sigma, np.int64(one) - (c_grid << step))
    lc, lb = forms.line(delta.lc, delta.lb, sigma, tangent_beta, one, upper=False)
    return forms.tighten(Lin(e_l_lo, e_h_hi, lc, lb, uc, ub)), unbounded


def reciprocal(s: Lin, unbounded: np.ndarray, scale: Scale) -> Lin:
    """Bounds of 1/S (units) for S >= 1 (module docstring); where S's upper side is not valid (``unbounded``), the
    upper form of 1/S is the constant 1/S_lo and its interval starts at 0."""
    one = scale.one
    s_lo = ints.maximum(s.lo, np.int64(one))
    s_hi = ints.maximum(s.hi, s_lo)
    low, high = np.asarray(s_lo, dtype=np.float64), np.asarray(s_hi, dtype=np.float64)
    sigma = np.minimum(np.round(-(float(one) ** 3) / (low * high)), -1).astype(np.int64)  # units, < 0
    square = one * one
    f_lo_up, f_hi_up = ints.ceildiv(np.int64(square), s_lo), ints.ceildiv(np.int64(square), s_hi)
    f_lo_down, f_hi_down = ints.floordiv(np.int64(square), s_lo), ints.floordiv(np.int64(square), s_hi)
    beta_up = forms.offset(sigma, s_lo, s_hi, f_lo_up, f_hi_up, one, upper=True)
    uc, ub = forms.line(s.lc, s.lb, sigma, beta_up, one, upper=True)  # σ < 0: with S's lower form
    # below: min over S of one³/S + |σ|·S (units squared): 2·√(|σ|·one³) where S* = √(one³/|σ|) is inside
    magnitude = -sigma
    root = np.floor(np.sqrt(magnitude.astype(np.float64) * one)).astype(np.int64)
    root -= root * root > magnitude * one
    root += (root + 1) * (root + 1) <= magnitude * one
    at_ends = forms.offset(sigma, s_lo, s_hi, f_lo_down, f_hi_down, one, upper=False)
    # S* outside [S_lo, S_hi] only where floats say so with a wide margin (the other case, the global minimum, is
    # valid anywhere): S_lo²·|σ| > one³ or S_hi²·|σ| < one³
    cube = float(one) ** 3
    outside = (low * low * magnitude > cube * (1 + 1e-6)) | (high * high * magnitude < cube * (1 - 1e-6))
    inside = ~outside
    beta_down = forms._pick(inside, 2 * root * one, at_ends)
    lc, lb = forms.line(s.uc, s.ub, sigma, beta_down, one, upper=False)  # σ < 0: with S's upper form
    # where S has no valid upper side: 0 <= 1/S <= 1/S_lo, constants
    flat = unbounded[..., None]
    lc, lb = forms._pick(flat, np.int64(0), lc), forms._pick(unbounded, np.int64(0), lb)
    uc, ub = forms._pick(flat, np.int64(0), uc), forms._pick(unbounded, f_lo_up, ub)
    lo = forms._pick(unbounded, np.int64(0), f_hi_down)
    return forms.tighten(Lin(lo, f_lo_up, lc, lb, uc, ub))


def softmax_forms(
    differences: Lin, live: np.ndarray, box: tuple[Array, Array], per_probability: bool, scale: Scale
) -> Lin:
    """Bounds (units) of the weights a_ij, (B, P, P), from the differences [i, k, j] = s_ik − s_ij (module
    docstring); ``box``: the weights' intervals from the exp table, intersected."""
    one, step = scale.one, scale.grid_shift
    assert step is not None and scale.frac is not None
    positions = live.shape[0]
    exps, unbounded = exp_forms(differences, scale)
    others = live[None, :, :, None] & ~np.eye(positions, dtype=bool)[None, None]  # [i, k, j]: a live k != j
    zero = forms.constant(np.int64(0), np.int64(0), exps.lc.shape[-1])
    exps = forms.where(others, exps, zero)
    s = forms.total(exps, -2)  # Σ over k
    s = forms.shift(s, np.int64(one), np.int64(one))
    p = reciprocal(s, np.asarray((unbounded & others).any(axis=2), dtype=bool), scale)
    count = live.sum(axis=1)[None, :, None]  # L per query row
    kappa_hi = -(-ints.mul(p.hi, count - 1) // np.maximum((1 << scale.frac) - (count - 1), 1))  # ceil(κ·p_hi)
    lowered = (2 if per_probability else 1) << step
    weights = Lin(
        ints.maximum(ints.sub(p.lo, np.int64(lowered)), np.int64(0)),
        ints.add(p.hi, kappa_hi),
        p.lc,
        ints.sub(p.lb, np.int64(lowered)),
        p.uc,
        ints.add(p.ub, kappa_hi),
    )
    weights = Lin(
        ints.maximum(weights.lo, box[0]), ints.minimum(weights.hi, box[1]), p.lc, weights.lb, p.uc, weights.ub
    )
    dead = ~live[None]
    nothing = forms.constant(np.int64(0), np.int64(0), weights.lc.shape[-1])
    return forms.tighten(forms.where(dead, nothing, weights))

"""LayerNorm and i-GELU for the batched evaluator: plans with proven int64 bounds, and their kernels.

The semantics is ``verify_tf/semantics/nonlinear.py`` (docs/semantics.md); read ``plan_layer_norm`` /
``layer_norm`` beside ``interpreter.layer_norm`` and ``plan_activation`` / ``activation`` beside
``interpreter.activation``. Both exist in fixed arithmetic only (exact LayerNorm is refused by the spec loader;
exact i-GELU has denominators beyond int64): elsewhere the planner refuses (``Unsupported``: the engines answer
unknown and ``auto`` uses the interpreter or smt).

Every intermediate bound passes through the planner's ``check`` (which refuses beyond 2^62 and records the
peak that decides int32 narrowing), exactly like the steps of ``program.py``. The planner is passed in rather
than imported: ``program.py`` imports this module.

LayerNorm on one position's mantissas x (B, n, d), all integer:

    S = Σ x,  y = d·x − S,  Q = Σ y² (= d³·4^f·Var),  T = Q·4^f = d³·A + R,
    V = A + table[R]  with table[R] = ⌊R/d³ + eps·16^f⌋  (so V = ⌊(Var + eps)·2^(4f)⌋ without ever forming
                      eps's numerator times T),
    s = ⌊√V⌋ bit by bit (integer only, no float square root),  n = ⌊y·4^f / (d·max(s, 1))⌋, saturated,
    out = ⌊(γ·D·n + β·2^f·D) / D⌋, saturated   (D: the least common denominator of γ and β·2^f).

i-GELU on mantissas m: 0 for m <= ⌊−c·2^f⌋, m for m >= ⌈c·2^f⌉ (c = k·(−b): i-GELU is 0 or the identity
there), and a table of the interpreter's own values in between (at most about 5·2^f entries, further cut to
the proven input range).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Sequence

import numpy as np

from ..ir import LayerNorm
from ..semantics.nonlinear import IGELU_CLIP, igelu, normalized_bound

TABLE_LIMIT = 1 << 22  # entries of a lookup table (int64: 32 MiB); beyond it the model is refused


@dataclass(frozen=True)
class LayerNormPlan:
    to_mantissa: int  # input numerators (over the stream's den) times this are the mantissas (over 2^f)
    width: int  # d
    frac: int
    cube: int  # d³
    remainder: np.ndarray  # (d³,) ⌊R/d³ + eps·16^f⌋
    root_start: int  # ⌊√V⌋ >= this for every reachable V
    root_end: int  # ... and <= this (< root_start + 2^root_bits)
    root_bits: int
    normalized_clamp: tuple[int, int]  # the p-bit mantissa range
    gamma: np.ndarray  # (d,) γ·D
    beta: np.ndarray  # (d,) β·2^f·D
    affine_den: int  # D
    out_clamp: tuple[int, int]


@dataclass(frozen=True)
class IGeluPlan:
    zero_below: int  # mantissas <= this give 0
    identity_from: int  # mantissas >= this give themselves
    start: int  # the mantissa of table[0]
    table: np.ndarray  # round(i-GELU(m / 2^f)) as mantissas, for m in start .. start + len - 1


def _fixed(planner: Any, what: str) -> None:
    if not planner.fixed:
        planner.refuse(f"{what} in exact arithmetic is evaluated by the interpreter and the smt engine only "
                       "(its denominators exceed int64)")


def plan_layer_norm(planner: Any, norm: LayerNorm, den: int, bounds: Sequence[int],
                    where: str) -> tuple[LayerNormPlan, int, tuple[int, ...]]:
    """The plan for ``interpreter.layer_norm`` on numerators over ``den`` bounded by ``bounds``.

    Returns (plan, output den = 2^f, output bounds)."""
    _fixed(planner, "LayerNorm")
    arith, scale, frac = planner.arith, planner.scale, planner.arith.frac
    d = len(bounds)
    if scale % den:
        planner.refuse(f"{where}: stream denominator {den} is not a divisor of 2^{frac}")
    to_mantissa = scale // den
    m = [planner.check(b * to_mantissa, f"{where} input mantissa") for b in bounds]
    total = planner.check(sum(m), f"{where} sum")
    y = [planner.check(d * mc + total, f"{where} centred value") for mc in m]  # |d·x_c − S| <= d·|x_c| + Σ|x|
    # Q = Σ y² <= d³·(max − min)²/4 <= d³·M² (Popoviciu; the spread is at most 2M)
    largest = max(m, default=0)
    squares = planner.check(min(sum(v * v for v in y), d ** 3 * largest * largest), f"{where} sum of squares")
    for v in y:
        planner.check(v * v, f"{where} squared centred value")
    shifted = planner.check(squares << (2 * frac), f"{where} sum of squares times 4^f")
    cube = planner.check(d ** 3, f"{where} d^3")
    if cube > TABLE_LIMIT:
        planner.refuse(f"{where}: width {d} needs a {cube}-entry remainder table")
    eps_scaled = norm.eps * (1 << (4 * frac))
    remainder = [math.floor(Fraction(r, cube) + eps_scaled) for r in range(cube)]
    planner.check(max(remainder), f"{where} eps term")
    low = math.floor(eps_scaled)
    high = planner.check(shifted // cube + remainder[-1], f"{where} radicand")
    root_start, root_end = math.isqrt(low), math.isqrt(high)
    planner.check(4 * (root_end + 1) ** 2, f"{where} square root candidate squared")
    limit = min(normalized_bound(d, frac), arith.max_mantissa + 1)
    planner.check(d * max(root_end, 1), f"{where} divisor")
    for v in y:
        planner.check(v << (2 * frac), f"{where} centred value times 4^f")
    # out = floor(γ·n + β·2^f) on the mantissa n: integers over the common denominator D of γ and β·2^f
    affine_den = math.lcm(*(Fraction(g).denominator for g in norm.gamma),
                          *((Fraction(b) * scale).denominator for b in norm.beta))
    planner.check(affine_den, f"{where} gamma/beta denominator")
    gamma = [planner.check(abs(Fraction(g) * affine_den), f"{where}.gamma") * (1 if g >= 0 else -1) for g in norm.gamma]
    beta = [int(Fraction(b) * scale * affine_den) for b in norm.beta]
    out_bounds = []
    for g, b in zip(gamma, beta):
        affine = planner.check(abs(g) * limit + abs(b), f"{where} gamma n + beta")
        out_bounds.append(min(-(-affine // affine_den), arith.max_mantissa + 1))
    clamp = (arith.min_mantissa, arith.max_mantissa)
    plan = LayerNormPlan(to_mantissa, d, frac, cube, np.array(remainder, dtype=np.int64), root_start, root_end,
                         (root_end - root_start).bit_length(), clamp, np.array(gamma, dtype=np.int64),
                         np.array(beta, dtype=np.int64), affine_den, clamp)
    return plan, scale, tuple(out_bounds)


def plan_activation(planner: Any, name: str, bounds: Sequence[int], where: str) -> tuple[IGeluPlan | None,
                                                                                       tuple[int, ...]]:
    """The plan for ``interpreter.activation`` on mantissas bounded by ``bounds`` (relu: None, bounds kept)."""
    if name == "relu":
        return None, tuple(bounds)
    if name != "i-gelu":
        planner.refuse(f"{where}: unknown activation {name!r}")
    _fixed(planner, "i-GELU")
    arith, scale = planner.arith, planner.scale
    largest = max(bounds, default=0)
    zero_below = math.floor(-IGELU_CLIP * scale)
    identity_from = math.ceil(IGELU_CLIP * scale)
    start, stop = max(zero_below + 1, -largest), min(identity_from - 1, largest)
    if stop - start + 1 > TABLE_LIMIT:
        planner.refuse(f"{where}: i-GELU at {arith.frac} fractional bits needs a {stop - start + 1}-entry table")
    table = [arith.mantissa(arith.round(igelu(Fraction(m, scale)))) for m in range(start, stop + 1)] or [0]
    table_max = max(abs(t) for t in table)
    plan = IGeluPlan(zero_below, identity_from, start, np.array(table, dtype=np.int64))
    return plan, tuple(max(table_max, b) for b in bounds)  # 0, the table, or the input itself


# ---------------------------------------------------------------- kernels (numpy and torch alike)

def isqrt(radicand, start: int, bits: int, ops):
    """⌊√V⌋ elementwise for V whose roots lie in [start, start + 2^bits): integer bisection, no floats."""
    root = radicand * 0 + start
    for k in reversed(range(bits)):
        candidate = root + (1 << k)
        root = ops.where(candidate * candidate <= radicand, candidate, root)
    return root


def layer_norm(plan: LayerNormPlan, z, ops):
    x = z * plan.to_mantissa if plan.to_mantissa != 1 else z
    total = ops.sum_last(x)
    y = x * plan.width - total
    shifted = ops.sum_last(y * y) << (2 * plan.frac)
    whole = shifted // plan.cube
    radicand = whole + plan.remainder[shifted - whole * plan.cube]
    root = isqrt(radicand, plan.root_start, plan.root_bits, ops)
    root = ops.clamp_(root, 1, max(plan.root_end, 1))  # max(s, 1)
    normalized = ops.clamp_((y << (2 * plan.frac)) // (root * plan.width), *plan.normalized_clamp)
    return ops.clamp_((normalized * plan.gamma + plan.beta) // plan.affine_den, *plan.out_clamp)


def activation(plan: IGeluPlan | None, h, ops):
    if plan is None:
        return ops.relu_(h)
    looked_up = plan.table[ops.clamp_(h - plan.start, 0, len(plan.table) - 1)]
    return ops.where(h >= plan.identity_from, h, ops.where(h <= plan.zero_below, h * 0, looked_up))

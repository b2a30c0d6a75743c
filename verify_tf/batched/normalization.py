"""LayerNorm and i-GELU for the batched evaluator: plans with their bound formulas, and their kernels.

The semantics is ``verify_tf/semantics/nonlinear.py`` (docs/semantics.md); read ``plan_layer_norm`` /
``layer_norm`` beside ``interpreter.layer_norm`` and ``plan_activation`` / ``activation`` beside
``interpreter.activation``. Both exist in fixed arithmetic only here (exact LayerNorm is refused by the
interpreter; exact i-GELU's denominators are left to the interpreter and smt): elsewhere the planner refuses
(``Unsupported``: the engines answer unknown and ``auto`` uses the interpreter or smt).

Like every step of ``plans.py``, each plan carries a static ``bound`` of its intermediates (from the input
magnitudes that ``verify_tf.bounds`` proves), the formula as a method (``intermediate_bound``) for the kernels
to re-apply to a chunk's measured operands when the step is guarded (static bound above 2^62), ``native``
(every constant fits int64) and ``out_bound`` (the output magnitudes from ``verify_tf.bounds``). A step
neither bound allows runs on Python integers (``kernels.WIDE``), where the square root is ``math.isqrt``.

LayerNorm on one position's mantissas x (B, n, d), all integer:

    S = Σ x,  y = d·x − S,  Q = Σ y² (= d³·4^f·Var),  T = Q·4^f = d³·A + R,
    V = A + table[R]  with table[R] = ⌊R/d³ + eps·16^f⌋  (so V = ⌊(Var + eps)·2^(4f)⌋ without ever forming
                      eps's numerator times T),
    s = ⌊√V⌋ bit by bit (integer only, no float square root),  n = ⌊y·4^f / (d·max(s, 1))⌋, saturated,
    out = ⌊(γ·D·n + β·2^f·D) / D⌋, saturated   (D: the least common denominator of γ and β·2^f).

i-GELU on mantissas m: 0 for m <= ⌊−c·2^f⌋, m for m >= ⌈c·2^f⌉ (c = k·(−b): i-GELU is 0 or the identity
there), and in between a table of the interpreter's own values (cut to the proven input range), or, where that
table would exceed ``IGELU_TABLE_LIMIT`` entries, the interpreter's value per distinct mantissa of the chunk (host).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import numpy as np

from ..ir import LayerNorm
from ..semantics.arithmetic import Fixed
from ..semantics.nonlinear import IGELU_CLIP, igelu, normalized_bound

TABLE_LIMIT = 1 << 22  # entries of LayerNorm's remainder table (int64: 32 MiB)
IGELU_TABLE_LIMIT = 1 << 16  # i-GELU entries computed in exact Fractions when planning (about a second at most)
INT64_MAX = (1 << 63) - 1
LIMIT = 1 << 62  # plans.LIMIT (plans.py imports this module)


def _fits(*values: int) -> bool:
    return all(abs(int(v)) <= INT64_MAX for v in values)


@dataclass(frozen=True)
class LayerNormPlan:
    to_mantissa: int  # input numerators (over the stream's den) times this are the mantissas (over 2^f)
    width: int  # d
    frac: int
    cube: int  # d³
    remainder: np.ndarray  # (d³,) ⌊R/d³ + eps·16^f⌋
    remainder_max: int
    root_start: int  # ⌊√V⌋ >= this for every V (V >= ⌊eps·16^f⌋)
    root_end: int  # ... and <= this on the whole domain (static)
    normalized_clamp: tuple[int, int]  # the format's mantissa range
    gamma: np.ndarray  # (d,) γ·D
    beta: np.ndarray  # (d,) β·2^f·D
    affine_den: int  # D
    out_clamp: tuple[int, int]
    affine_out: tuple[int, ...]  # |out| per coordinate from γ, β and the normalised range alone
    affine_bound: int  # |γ·D·n + β·2^f·D| <= this
    bound: int
    native: bool
    out_bound: tuple[int, ...]

    def root_end_for(self, magnitudes: Sequence[int]) -> int:
        """The largest ⌊√V⌋ for inputs with |numerator[..., c]| <= magnitudes[c]."""
        return math.isqrt(self._squares(magnitudes)[1] // self.cube + self.remainder_max)

    def _squares(self, magnitudes: Sequence[int]) -> tuple[list[int], int]:
        """(bounds of |y_c|, bound of Q·4^f)."""
        m = [x * self.to_mantissa for x in magnitudes]
        total = sum(m)
        y = [self.width * x + total for x in m]  # |d·x_c − S| <= d·|x_c| + Σ|x|
        largest = max(m, default=0)
        # Q = Σ y² = d³·Var <= d³·(max − min)²/4 <= d³·M² (Popoviciu; the spread is at most 2M)
        squares = min(sum(v * v for v in y), self.cube * largest * largest)
        return [*m, *y, squares], squares << (2 * self.frac)

    def intermediate_bound(self, magnitudes: Sequence[int]) -> int:
        """The largest |integer| ``layer_norm`` computes for inputs within ``magnitudes``."""
        parts, shifted = self._squares(magnitudes)
        root_end = math.isqrt(shifted // self.cube + self.remainder_max)
        bits = max(root_end - self.root_start, 0).bit_length()
        candidate = self.root_start + (1 << bits)  # bisection candidates stay below this
        y_max = max(parts[self.width : 2 * self.width], default=0)
        return max(
            [
                *parts,
                shifted,
                shifted // self.cube + self.remainder_max,
                candidate * candidate,
                self.width * max(root_end, 1),
                y_max << (2 * self.frac),
                self.affine_bound,
            ]
        )

    def output_bound(self, magnitudes: Sequence[int]) -> tuple[int, ...]:
        return tuple(min(a, s) for a, s in zip(self.affine_out, self.out_bound))

    @property
    def guarded(self) -> bool:
        return self.bound > LIMIT


class IGeluValues:
    """i-GELU's fixed-point mantissas computed by the interpreter's own functions, once per distinct mantissa
    (the fallback when the lookup table would be too large)."""

    def __init__(self, arith: Fixed):
        self.arith = arith
        self.known: dict[int, int] = {}

    def mantissa(self, m: int) -> int:
        value = self.known.get(m)
        if value is None:
            if len(self.known) >= 1 << 20:
                self.known.clear()
            value = self.known[m] = self.arith.mantissa(self.arith.round(igelu(Fraction(m, self.arith.scale))))
        return value

    def mantissas(self, h: np.ndarray) -> np.ndarray:
        if h.size == 0:
            return np.zeros(h.shape, dtype=np.int64)
        distinct, inverse = np.unique(np.asarray(h).astype(np.int64).ravel(), return_inverse=True)
        found = np.array([self.mantissa(int(m)) for m in distinct], dtype=np.int64)
        return found[inverse.reshape(-1)].reshape(h.shape)


@dataclass(frozen=True)
class IGeluPlan:
    zero_below: int  # mantissas <= this give 0
    identity_from: int  # mantissas >= this give themselves
    start: int  # the mantissa of table[0]
    table: np.ndarray | None  # round(i-GELU(m / 2^f)) as mantissas, for m in start .. start + len - 1
    values: IGeluValues | None  # instead of the table where it would be too large
    table_max: int  # |i-GELU| between the two ends
    bound: int
    native: bool
    out_bound: tuple[int, ...]

    def intermediate_bound(self, magnitudes: Sequence[int]) -> int:
        largest = max(magnitudes, default=0)
        return max(largest + abs(self.start), self.table_max, abs(self.zero_below), abs(self.identity_from))

    def output_bound(self, magnitudes: Sequence[int]) -> tuple[int, ...]:
        return tuple(min(max(m, self.table_max), s) for m, s in zip(magnitudes, self.out_bound))

    @property
    def guarded(self) -> bool:
        return self.bound > LIMIT


def plan_layer_norm(
    planner: Any, norm: LayerNorm, den: int, magnitudes: Sequence[int], out: Sequence[int], where: str
) -> LayerNormPlan:
    """The plan for ``interpreter.layer_norm`` on numerators over ``den`` bounded by ``magnitudes``; ``out``:
    the output's mantissa magnitudes (``verify_tf.bounds``)."""
    arith, scale, frac = planner.arith, planner.scale, planner.arith.frac
    d = len(magnitudes)
    if scale % den:
        planner.refuse(f"{where}: stream denominator {den} is not a divisor of 2^{frac}")
    cube = d**3
    if cube > TABLE_LIMIT:
        planner.refuse(f"{where}: width {d} needs a {cube}-entry remainder table")
    eps_scaled = norm.eps * (1 << (4 * frac))
    remainder = [math.floor(Fraction(r, cube) + eps_scaled) for r in range(cube)]
    root_start = math.isqrt(math.floor(eps_scaled))
    limit = min(normalized_bound(d, frac), arith.max_mantissa + 1)
    # out = floor(γ·n + β·2^f) on the mantissa n: integers over the common denominator D of γ and β·2^f
    affine_den = math.lcm(
        *(Fraction(g).denominator for g in norm.gamma), *((Fraction(b) * scale).denominator for b in norm.beta)
    )
    gamma = [int(Fraction(g) * affine_den) for g in norm.gamma]
    beta = [int(Fraction(b) * scale * affine_den) for b in norm.beta]
    sums = [abs(g) * limit + abs(b) for g, b in zip(gamma, beta)]
    format_max = max(-arith.min_mantissa, arith.max_mantissa)
    affine_out = tuple(min(-(-s // affine_den), format_max) for s in sums)
    clamp = (arith.min_mantissa, arith.max_mantissa)
    native = _fits(*remainder, affine_den, *gamma, *beta, *clamp)
    plan = LayerNormPlan(
        to_mantissa=scale // den,
        width=d,
        frac=frac,
        cube=cube,
        remainder=_array(remainder, native),
        remainder_max=max(remainder),
        root_start=root_start,
        root_end=0,
        normalized_clamp=clamp,
        gamma=_array(gamma, native),
        beta=_array(beta, native),
        affine_den=affine_den,
        out_clamp=clamp,
        affine_out=affine_out,
        affine_bound=max(sums, default=0),
        bound=0,
        native=native,
        out_bound=tuple(min(a, o) for a, o in zip(affine_out, out)),
    )
    bound = plan.intermediate_bound(magnitudes)
    if native:
        planner.note(
            max([bound, affine_den, *(abs(r) for r in remainder), *(abs(g) for g in gamma), *(abs(b) for b in beta)])
        )
    return replace(plan, root_end=plan.root_end_for(magnitudes), bound=bound)


def plan_activation(
    planner: Any, name: str, magnitudes: Sequence[int], out: Sequence[int], where: str
) -> IGeluPlan | None:
    """The plan for ``interpreter.activation`` (relu: None) on mantissas bounded by ``magnitudes``; ``out``:
    the activation's output magnitudes (``verify_tf.bounds``)."""
    if name == "relu":
        return None
    if name != "i-gelu":
        planner.refuse(f"{where}: unknown activation {name!r}")
    arith, scale = planner.arith, planner.scale
    largest = max(magnitudes, default=0)
    zero_below = math.floor(-IGELU_CLIP * scale)
    identity_from = math.ceil(IGELU_CLIP * scale)
    start, stop = max(zero_below + 1, -largest), min(identity_from - 1, largest)
    values = None
    if stop - start + 1 > IGELU_TABLE_LIMIT:
        values, table = IGeluValues(arith), None
        # i-GELU in (−c, c) lies in [min i-GELU, c] (|min i-GELU| < c), and round moves it less than one step
        table_max = identity_from
    else:
        entries = [arith.mantissa(arith.round(igelu(Fraction(m, scale)))) for m in range(start, stop + 1)] or [0]
        table = np.array(entries, dtype=np.int64)
        table_max = max(abs(t) for t in entries)
    plan = IGeluPlan(zero_below, identity_from, start, table, values, table_max, 0, True, tuple(out))
    bound = plan.intermediate_bound(magnitudes)
    planner.note(bound)
    return replace(plan, bound=bound)


def _array(values: Sequence[int], native: bool) -> np.ndarray:
    if native:
        return np.array(values, dtype=np.int64)
    out = np.empty(len(values), dtype=object)
    out[:] = [int(v) for v in values]
    return out


# ---------------------------------------------------------------- kernels (numpy, torch and Python integers)


def isqrt(radicand, start: int, end: int | None, ops):
    """⌊√V⌋ elementwise for V whose roots lie in [start, end]: integer bisection, no floats; ``end`` None (Python
    integers): ``math.isqrt`` per element."""
    if end is None:
        return np.frompyfunc(math.isqrt, 1, 1)(radicand) if radicand.size else radicand
    root = radicand * 0 + start
    for k in reversed(range(max(end - start, 0).bit_length())):
        candidate = root + (1 << k)
        root = ops.where(candidate * candidate <= radicand, candidate, root)
    return root


def layer_norm(plan: LayerNormPlan, z, ops, root_end: int | None):
    """``interpreter.layer_norm`` on numerators ``z`` (B, n, d); ``root_end``: the largest root this chunk can
    have (None: exact ``math.isqrt``, Python integers)."""
    x = z * plan.to_mantissa if plan.to_mantissa != 1 else z
    total = ops.sum_last(x)
    y = x * plan.width - total
    shifted = ops.sum_last(y * y) << (2 * plan.frac)
    whole = shifted // plan.cube
    radicand = whole + ops.take(plan.remainder, shifted - whole * plan.cube)
    root = isqrt(radicand, plan.root_start, root_end, ops)
    root = ops.where(root < 1, root * 0 + 1, root)  # max(s, 1)
    normalized = ops.clamp_((y << (2 * plan.frac)) // (root * plan.width), *plan.normalized_clamp)
    return ops.clamp_((normalized * plan.gamma + plan.beta) // plan.affine_den, *plan.out_clamp)


SPLIT_MAX_FRAC = 29  # layer_norm_split's digit products stay below 2^62 up to f = 29


def layer_norm_split(plan: LayerNormPlan, z: np.ndarray) -> np.ndarray | None:
    """``layer_norm`` on int64 numerators (numpy) for the formats whose radicand V exceeds int64 while its parts
    do not (24-bit mantissas, d = 32: V ≈ 2^74, Σy² < 2^62), or None when a guard fails (then the caller runs
    ``layer_norm`` on Python integers).

    With Q = Σy² = q₁·d³ + r₁: V = ⌊Q·4^f/d³⌋ + table[R] = q·4^f + w (0 <= w < 4^f) from q₁, ⌊r₁·4^f/d³⌋ and R,
    all int64. s = ⌊√V⌋ is guessed in float64, moved by one or two, then *verified* exactly: s² and (s+1)² are
    compared with V as two base-4^f digits (s = h·2^f + l gives s² = (h² + ⌊g/2^f⌋)·4^f + (g mod 2^f)·2^f +
    (l² mod 2^f) with g = 2hl + ⌊l²/2^f⌋). The float only guesses; every decision is an exact integer comparison.
    """
    f, d, cube = plan.frac, plan.width, plan.cube
    digit, base = 1 << f, 1 << (2 * f)
    if not plan.native or f > SPLIT_MAX_FRAC or cube * base > LIMIT or base + plan.remainder_max > LIMIT:
        return None
    if plan.affine_bound > LIMIT or z.dtype == object:
        return None
    x = z.astype(np.int64) * plan.to_mantissa if plan.to_mantissa != 1 else z.astype(np.int64)
    total = x.sum(axis=-1, keepdims=True)
    y = x * d - total
    largest = int(np.abs(y).max()) if y.size else 0
    if largest * largest > LIMIT // d or largest > LIMIT >> (2 * f):
        return None
    q, r = np.divmod((y * y).sum(axis=-1), cube)
    whole, remainder = np.divmod(r * base, cube)
    w = whole + plan.remainder[remainder]
    q, w = q + w // base, w % base  # V = q·4^f + w

    def above(root: np.ndarray) -> np.ndarray:  # root² > V, exactly
        h, low = root >> f, root & (digit - 1)
        g = 2 * h * low + ((low * low) >> f)
        high = h * h + (g >> f)
        rest = (g & (digit - 1)) * digit + ((low * low) & (digit - 1))
        return (high > q) | ((high == q) & (rest > w))

    guess = np.sqrt(q.astype(np.float64) * float(base) + w.astype(np.float64))
    if guess.size and not float(guess.max()) < float(1 << (30 + f)):
        return None
    root = np.floor(guess).astype(np.int64)
    for _ in range(2):
        root = np.maximum(np.where(above(root), root - 1, root), 0)
        root = np.where(above(root + 1), root, root + 1)
    if above(root).any() or not above(root + 1).all():
        return None
    root = np.maximum(root, 1)[..., None]
    if root.size and int(root.max()) * d > LIMIT:
        return None
    normalized = np.clip((y << (2 * f)) // (root * d), *plan.normalized_clamp)
    return np.clip((normalized * plan.gamma + plan.beta) // plan.affine_den, *plan.out_clamp)


def activation(plan: IGeluPlan, h, ops):
    """``interpreter.activation`` for i-GELU on mantissas ``h``."""
    if plan.table is None:
        assert plan.values is not None
        host = h if isinstance(h, np.ndarray) else ops.to_numpy(h)
        looked_up = plan.values.mantissas(host)
        looked_up = looked_up.astype(object) if host.dtype == object else ops.as_int(ops.from_int64(looked_up), h)
    else:
        looked_up = ops.take(plan.table, ops.clamp_(h - plan.start, 0, len(plan.table) - 1))
    return ops.where(h >= plan.identity_from, h, ops.where(h <= plan.zero_below, h * 0, looked_up))

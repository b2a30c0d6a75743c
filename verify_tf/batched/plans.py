"""The plans of a compiled batched program: plain data that ``kernels.py`` executes, one plan per
interpreter step, each with the formula of its bounds.

Every tensor the batched evaluator handles holds integer *numerators* over one static denominator per
tensor (``Stage.den``); the value is numerator / den, exactly. In ``fixed`` arithmetic every rounded tensor
has den = 2^f (its numerators are the mantissas); in ``exact`` arithmetic the denominators grow layer by
layer (products of weight, grid and tie-count denominators). Weights are pre-multiplied so that each step
is "integer matmul, plus integer bias, then one exact floor division" (see ``kernels.py``).

**Widths.** The value bounds of every stage come from ``verify_tf.bounds`` (intervals over the whole domain:
hull of the attention winners, differences of heads bounded by their hull's width, fixed-point rounding and
saturation as the interpreter applies them). From them each step derives the bound of its own intermediates
(products, partial sums, scaled numerators before a floor division, softmax row totals): ``bound`` on the
plan, with the formula as a method (``AffinePlan.acc_bound``, ``HeadPlan.intermediate_bound``, ...) so that
the kernels can apply the same formula to the magnitudes of the actual operands of a chunk. A step whose
static bound is at most 2^62 runs in int64 (int32 when the whole program stays below 2^31) unchecked; a step
above it is *guarded*: the kernels re-bound it from the exact operands of each chunk and run it in int64 when
that bound allows, else on Python integers (``kernels.WIDE``). Nothing is refused for width, and a model pays
for width only at the steps, and in the chunks, that need it. A matmul whose sum of absolute terms stays below
2^53 is ``float_ok``: float64 computes it exactly (CUDA has no integer matmul).

``planner.py`` makes these plans from a model (``compile_program``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..semantics.arithmetic import Fixed, UnsupportedInMode
from .normalization import IGeluPlan, LayerNormPlan

LIMIT = 1 << 62  # every intermediate numerator of an int64 step stays within ±LIMIT: a factor-2 margin
INT64_MAX = (1 << 63) - 1
FLOAT_EXACT = 1 << 53  # integers below this are exact in float64, and so are all partial sums


class Unsupported(UnsupportedInMode):
    """The batched evaluator cannot evaluate this model exactly (softmax in exact mode).

    Engines answer ``unknown`` (the runner maps UnsupportedInMode to unknown), never a wrong value.
    """


@dataclass(frozen=True)
class Stage:
    """A tensor of numerators over one denominator: value = numerator / den, |numerator[..., c]| <= bound[c]."""

    den: int
    bound: tuple[int, ...]


@dataclass(frozen=True)
class Requantize:
    """Fixed mode: floor(x / divisor) (a shift when divisor is 2^shift), then clamp to [lo, hi]."""

    divisor: int = 1
    shift: int | None = None
    clamp: tuple[int, int] | None = None


@dataclass(frozen=True)
class AffinePlan:
    weight: np.ndarray  # (inputs, outputs): transposed, so x @ weight works on (..., inputs)
    bias: np.ndarray  # (outputs,)
    float_ok: bool
    requantize: Requantize
    abs_weight: tuple[tuple[int, ...], ...]  # (outputs, inputs) |scaled weight|: the bound formula's data
    abs_bias: tuple[int, ...]
    bound: int  # static bound of every partial sum: max_r sum_c |w_rc| |x_c| + |b_r|
    native: bool  # every constant fits int64 (else the step always runs on Python integers)
    out_bound: tuple[int, ...]  # static bound of the result per coordinate (from verify_tf.bounds)

    def acc_bound(self, magnitudes: Sequence[int]) -> int:
        """The bound of the accumulator (every partial sum) for inputs with |x[..., c]| <= magnitudes[c]."""
        return max(
            (sum(w * m for w, m in zip(row, magnitudes)) + b for row, b in zip(self.abs_weight, self.abs_bias)),
            default=0,
        )

    def output_bound(self, magnitudes: Sequence[int]) -> tuple[int, ...]:
        """The bound of the rounded result per coordinate for inputs within ``magnitudes``."""
        return tuple(
            min(requantized(sum(w * m for w, m in zip(row, magnitudes)) + b, self.requantize), static)
            for row, b, static in zip(self.abs_weight, self.abs_bias, self.out_bound)
        )

    @property
    def guarded(self) -> bool:
        return self.bound > LIMIT


@dataclass(frozen=True)
class EmbedPlan:
    table: np.ndarray  # (tokens [+ BOS row], d) numerators
    bos_index: int | None  # row of the BOS vector in ``table`` (prepended to every input)
    positional: np.ndarray | None  # (n, d), added then saturated
    clamp: tuple[int, int] | None
    native: bool
    out_bound: tuple[int, ...]


@dataclass(frozen=True)
class RotationPlan:
    """RoPE on mantissas (``interpreter.rotate``): at stream position p, pair (a, b) becomes
    floor((x_a·c_p − x_b·s_p) / 2^f) and floor((x_a·s_p + x_b·c_p) / 2^f), clamped to the format, with (c_p, s_p)
    the rotation table's mantissas (``semantics.rotary``, saturated as the interpreter does)."""

    pairs: tuple[tuple[int, int], ...]
    cos: np.ndarray  # (n, pairs) mantissas
    sin: np.ndarray
    shift: int  # f
    clamp: tuple[int, int]
    table_max: int  # the largest |c|, |s|
    bound: int  # static bound of every x_a·c ± x_b·s
    native: bool
    out_bound: tuple[int, ...]

    def acc_bound(self, magnitudes: Sequence[int]) -> int:
        return max(((magnitudes[a] + magnitudes[b]) * self.table_max for a, b in self.pairs), default=0)

    @property
    def guarded(self) -> bool:
        return self.bound > LIMIT


@dataclass(frozen=True)
class HeadPlan:
    query: AffinePlan | None  # None for uniform heads (no scores)
    key: AffinePlan | None
    value: AffinePlan
    mode: str  # "general" (score matmul) | "argmax1d" (exact 1-D hardmax, no products) | "uniform" |
    # "rounded-terms" (Yang et al.'s softmax: exact scores, each term's exponential floored by the interpreter's
    # own function, RoundedTerms)
    dot_scale: int  # acc_ij = dot_scale * (q_i . k_j) + bias[i, j]
    score_bias: np.ndarray | None  # (n, n) RPE bias numerators, None for standard heads
    scores_float_ok: bool
    score_requantize: Requantize
    live: np.ndarray  # (n, n) bool: key j visible from query i (all True unless causal)
    causal: bool
    scoring: str
    exp: np.ndarray | None  # softmax: exp table mantissas followed by one 0 (index clamped to its end)
    relative_scale: np.ndarray | None  # (n, n) URPE C numerators, None when C = 1
    mix_float_ok: bool  # (weights * C) @ v exact in float64
    # fixed, exact-sums: out = floor(S * out_mul / (T_i * out_div)); per-probability: floor(S / out_div)
    # exact: out = S * count_multiplier[T_i] (full) or S / T_i, flagging rows where it is inexact (tie_free)
    per_probability: bool
    frac: int  # fixed mode's f (0 in exact mode)
    out_mul: int
    out_div: int
    out_shift: int | None
    count_multiplier: np.ndarray | None
    tie_free: bool
    out_clamp: tuple[int, int] | None
    # the bound formula: see intermediate_bound
    positions: int
    total_max: int  # largest row total T_i of the integer weights
    weight_max: int
    c_max: int
    bias_bound: int
    score_divisor: int
    score_limit: int | None  # fixed: the saturation bound of a rounded score
    common: int  # exact, full: lcm of the possible row totals
    bound: int
    native: bool
    out_bound: tuple[int, ...]
    terms: RoundedTerms | None = None  # rounded-terms softmax: the interpreter's exponential terms
    query_rotation: RotationPlan | None = None  # RoPE: q and k rotated before the scores
    key_rotation: RotationPlan | None = None

    def output_bound(self, mv: Sequence[int]) -> tuple[int, ...]:
        """The bound of head_i per coordinate for values within ``mv``: a'-weighted averages of the values."""
        if self.mode == "rounded-terms":  # no average (verify_tf/bounds.py): the format's range
            return self.out_bound
        out = []
        for m, static in zip(mv, self.out_bound):
            if self.score_limit is None:  # exact: sum / T over the (tie-free or common) denominator
                b = self.c_max * m * (1 if self.tie_free else self.common)
            elif self.per_probability:  # the floored weights sum to at most 2^f
                b = min(ceil_div((m * self.c_max) << self.frac, self.out_div), self.score_limit)
            else:
                b = min(ceil_div(m * self.c_max * self.out_mul, self.out_div), self.score_limit)
            out.append(min(b, static))
        return tuple(out)

    def score_bound(self, mq: Sequence[int], mk: Sequence[int]) -> tuple[int, int]:
        """(bound of the score accumulator, bound of a rounded score)."""
        acc = sum(a * b for a, b in zip(mq, mk)) * self.dot_scale + self.bias_bound
        if self.score_limit is None:
            return acc, acc
        return acc, min(-(-acc // self.score_divisor), self.score_limit)

    def intermediate_bound(self, mq: Sequence[int], mk: Sequence[int], mv: Sequence[int]) -> int:
        """The largest |integer| the scores-to-output part of the head computes (kernels.attention_head)."""
        top_v = max(mv, default=0)
        bounds = [self.total_max * self.out_div, self.weight_max * self.c_max]
        if self.mode == "argmax1d":
            mixed = self.positions * top_v
            bounds.append(mixed * max(self.common, 1))
            return max(bounds)
        if self.mode == "rounded-terms":
            # exact scores; x_ij = C v_j; S_i = sum of term mantissas, times 2^f; the zero-total fallback
            # sum_j x_ij times 2^f over x's denominator times the count
            acc, _ = self.score_bound(mq, mk)
            x = self.c_max * top_v
            return max(
                acc, x, self.total_max << self.frac, (self.positions * x) << self.frac, self.out_div * self.positions
            )
        if self.mode == "general":
            acc, score = self.score_bound(mq, mk)
            bounds += [acc, score + 1]
            if self.scoring == "softmax":
                bounds.append(2 * score + 1)
        if self.per_probability:
            bounds.append(self.weight_max << self.frac)
        mixed = self.total_max * self.c_max * top_v
        bounds += [mixed, mixed * self.out_mul, self.common * self.c_max * top_v]
        return max(bounds)

    def dot_float_ok(self, mq: Sequence[int], mk: Sequence[int]) -> bool:
        return sum(a * b for a, b in zip(mq, mk)) < FLOAT_EXACT

    def mix_ok(self, mv: Sequence[int]) -> bool:
        return self.total_max * self.c_max * max(mv, default=0) < FLOAT_EXACT

    @property
    def guarded(self) -> bool:
        return self.bound > LIMIT


class RoundedTerms:
    """The transcendental part of a rounded-terms head: mantissa(s, x) = round(e^s·x)·2^f, computed by the
    interpreter's own ``Fixed.rounded_term`` once per distinct (score, contribution) pair of numerators.

    Scores are ``s / score_den``, contributions ``x / value_den`` (exact integers from the kernels); every result
    is a saturated mantissa of the format, so it fits the native integers whatever the operands' width.
    """

    def __init__(self, arith: Fixed, score_den: int, value_den: int):
        self.arith, self.score_den, self.value_den = arith, score_den, value_den
        self.known: dict[tuple[int, int], int] = {}

    def mantissa(self, s: int, x: int) -> int:
        key = (s, x)
        value = self.known.get(key)
        if value is None:
            if len(self.known) >= 1 << 20:  # bounded memory: distinct pairs are usually few, never unbounded
                self.known.clear()
            term = self.arith.rounded_term(Fraction(s, self.score_den), Fraction(x, self.value_den))
            value = self.known[key] = exact_int(term * self.arith.scale)
        return value

    def mantissas(self, s: np.ndarray, x: np.ndarray) -> np.ndarray:
        """``mantissa`` elementwise over two same-shape integer arrays (int64, or object where wide)."""
        if s.size == 0:
            return np.zeros(s.shape, dtype=np.int64)
        if s.dtype != object and x.dtype != object:
            pairs, inverse = np.unique(np.stack([s.ravel(), x.ravel()], 1), axis=0, return_inverse=True)
            found = np.array([self.mantissa(int(a), int(b)) for a, b in pairs], dtype=np.int64)
            return found[inverse.reshape(-1)].reshape(s.shape)
        return np.array([self.mantissa(int(a), int(b)) for a, b in zip(s.ravel(), x.ravel())], dtype=np.int64).reshape(
            s.shape
        )


@dataclass(frozen=True)
class ResidualPlan:
    residual: bool
    stream_scale: int
    update_scale: int
    clamp: tuple[int, int] | None
    bound: int
    native: bool
    out_bound: tuple[int, ...]

    def sum_bound(self, mz: Sequence[int], mu: Sequence[int]) -> int:
        return max((a * self.stream_scale + b * self.update_scale for a, b in zip(mz, mu)), default=0)

    def output_bound(self, mz: Sequence[int], mu: Sequence[int]) -> tuple[int, ...]:
        limit = max(-self.clamp[0], self.clamp[1]) if self.clamp is not None else None
        return tuple(
            min(a * self.stream_scale + b * self.update_scale, static, *(() if limit is None else (limit,)))
            for a, b, static in zip(mz, mu, self.out_bound)
        )

    @property
    def guarded(self) -> bool:
        return self.bound > LIMIT


@dataclass(frozen=True)
class AttentionPlan:
    heads: tuple[HeadPlan, ...]
    output: AffinePlan  # over the concatenated head outputs
    residual: ResidualPlan
    norm: LayerNormPlan | None = None  # normalization.py
    norm_first: bool = False


@dataclass(frozen=True)
class FeedForwardPlan:
    hidden: AffinePlan
    output: AffinePlan
    residual: ResidualPlan
    norm: LayerNormPlan | None = None
    norm_first: bool = False
    activation: IGeluPlan | None = None  # None: relu


@dataclass(frozen=True)
class BlockPlan:
    attention: AttentionPlan | None
    feed_forward: FeedForwardPlan | None


@dataclass(frozen=True)
class ReadoutPlan:
    weight: np.ndarray  # (d, 1)
    abs_weight: tuple[int, ...]
    bound: int
    native: bool
    out_bound: int

    def sum_bound(self, mz: Sequence[int]) -> int:
        return sum(w * m for w, m in zip(self.abs_weight, mz))

    @property
    def float_ok(self) -> bool:
        return self.bound < FLOAT_EXACT

    @property
    def guarded(self) -> bool:
        return self.bound > LIMIT


@dataclass(frozen=True)
class Program:
    """Everything needed to evaluate the model on (batch, length) token-index tensors of one length."""

    length: int  # the user's sequence length
    positions: int  # length + 1 with BOS
    width: int
    embed: EmbedPlan
    blocks: tuple[BlockPlan, ...]
    output: Stage  # the final residual stream
    readout_plan: ReadoutPlan
    readout: Stage  # q_i = u . z_i, one coordinate
    largest_width: int  # widest per-position tensor (for memory estimates)
    heads: int  # most heads in one layer
    small: bool  # every intermediate fits int32 (twice the throughput of int64)
    guarded: bool  # some step needs more than int64 on the whole domain: checked per chunk at run time
    largest_bound: int  # the largest static bound of any step (its bit length: the widest integer needed)
    tie_free: bool  # exact hardmax heads divide by their tie counts; flagged rows go to ``fallback``
    fallback: Program | None = None
    final_norm: LayerNormPlan | None = None

    @property
    def steps_bits(self) -> int:
        return self.largest_bound.bit_length()


def ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def requantized(bound: int, plan: Requantize) -> int:
    """The bound after ``kernels.requantize_`` of numerators within ±bound."""
    if plan.divisor != 1:
        bound = ceil_div(bound, plan.divisor)
    if plan.clamp is not None:
        bound = min(bound, max(-plan.clamp[0], plan.clamp[1]))
    return bound


def exact_int(x: Fraction) -> int:
    if x.denominator != 1:  # the common denominators are chosen so this cannot happen
        raise AssertionError(f"batched program: {x} is not an integer numerator")
    return x.numerator

"""Compile a model into an integer program for one input length: scaled integer weights plus proven bounds.

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

**Ties in exact arithmetic.** A hardmax head averages its tied keys, so its output denominator carries the
lcm of the possible tie counts (at most the number of keys that can win, from the bounds), and those factors
compound layer by layer. When they would push the program past int64, the *tie-free* variant is compiled too:
each hardmax head divides its sum by the tie count exactly (``tie_free``) and flags the rows where that
division leaves a remainder (a tie of keys with different values); the evaluator recomputes just those rows on
the full program (``Program.fallback``). The floored value of a flagged row still lies inside the bounds, so
it cannot break the proofs of the steps after it.

**1-D hardmax** (exact arithmetic, a 1-dimensional query and key, no relative bias): the argmax of q_i k_j
over j is the largest key when q_i > 0, the smallest when q_i < 0, and every key when q_i = 0, so the head
needs no score products at all (``HeadPlan.mode == "argmax1d"``). Uniform heads compute no scores either.

One ``_Planner`` method per interpreter function (embed, affine, attention_head, attention_layer,
feed_forward, _residual, readout, layer_norm, activation); read them side by side with
``verify_tf/semantics/interpreter.py``. LayerNorm and i-GELU (fixed arithmetic only) are in ``normalization.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np

from ..bounds import Bounds, Cube, IVector, cube_bounds, magnitude
from ..ir import AlphabetTokens, AttentionLayer, FeedForward, Head, Matrix, Model, Token, Vector
from ..semantics.arithmetic import Arithmetic, Fixed, UnsupportedInMode
from ..semantics.exp_table import exp_table
from .normalization import IGeluPlan, LayerNormPlan, plan_activation, plan_layer_norm

LIMIT = 1 << 62  # every intermediate numerator of an int64 step stays within ±LIMIT: a factor-2 margin
INT64_MAX = (1 << 63) - 1
FLOAT_EXACT = 1 << 53  # integers below this are exact in float64, and so are all partial sums
VARIANTS = ("auto", "full", "tie-free")
FORCES = (None, "guarded", "wide")  # tests: every step checked per chunk, or every step on Python integers


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
            min(_requantized(sum(w * m for w, m in zip(row, magnitudes)) + b, self.requantize), static)
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

    def output_bound(self, mv: Sequence[int]) -> tuple[int, ...]:
        """The bound of head_i per coordinate for values within ``mv``: a'-weighted averages of the values."""
        if self.mode == "rounded-terms":  # no average (verify_tf/bounds.py): the format's range
            return self.out_bound
        out = []
        for m, static in zip(mv, self.out_bound):
            if self.score_limit is None:  # exact: sum / T over the (tie-free or common) denominator
                b = self.c_max * m * (1 if self.tie_free else self.common)
            elif self.per_probability:  # the floored weights sum to at most 2^f
                b = min(_ceil_div((m * self.c_max) << self.frac, self.out_div), self.score_limit)
            else:
                b = min(_ceil_div(m * self.c_max * self.out_mul, self.out_div), self.score_limit)
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
            value = self.known[key] = _exact_int(term * self.arith.scale)
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


def _lcm(values) -> int:
    result = 1
    for v in values:
        result = math.lcm(result, int(v))
    return result


def _den(values) -> int:
    return _lcm(Fraction(v).denominator for v in values)


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def _requantized(bound: int, plan: Requantize) -> int:
    """The bound after ``kernels.requantize_`` of numerators within ±bound."""
    if plan.divisor != 1:
        bound = _ceil_div(bound, plan.divisor)
    if plan.clamp is not None:
        bound = min(bound, max(-plan.clamp[0], plan.clamp[1]))
    return bound


def _array(values, shape, native: bool) -> np.ndarray:
    """int64 when every entry fits (native steps), else an object array of Python integers."""
    if native:
        return np.array(values, dtype=np.int64).reshape(shape)
    out = np.empty(int(np.prod(shape)), dtype=object)
    out[:] = [int(v) for v in np.array(values, dtype=object).reshape(-1)] if len(out) else []
    return out.reshape(shape)


def _fits(*values: int) -> bool:
    return all(abs(int(v)) <= INT64_MAX for v in values)


def _exact_int(x: Fraction) -> int:
    if x.denominator != 1:  # the common denominators are chosen so this cannot happen
        raise AssertionError(f"batched program: {x} is not an integer numerator")
    return x.numerator


def _pow2_shift(divisor: int) -> int | None:
    return divisor.bit_length() - 1 if divisor & (divisor - 1) == 0 else None


def _magnitudes(vectors: Sequence[IVector], den: int, width: int) -> tuple[int, ...]:
    """Per coordinate, the largest |numerator| over ``den`` of any position's interval."""
    distinct = list({id(v): v for v in vectors}.values())  # positions often share one interval object
    return tuple(math.ceil(max((magnitude(v[c]) for v in distinct), default=0) * den) for c in range(width))


class _Planner:
    def __init__(self, model: Model, arith: Arithmetic, positions: int, bounds: Bounds, tie_free: bool):
        self.model = model
        self.arith = arith
        self.n = positions
        self.bounds = bounds
        self.tie_free = tie_free
        self.fixed = isinstance(arith, Fixed)
        self.scale = (1 << arith.frac) if self.fixed else 1
        self.largest = model.dim
        self.peak = 0  # the largest static bound of any step (int32 suffices below 2^31)
        self.uses_ties = False  # some head divides by a tie count (the tie-free variant differs)

    def note(self, bound: int) -> int:
        self.peak = max(self.peak, bound)
        return bound

    def mantissa_bound(self) -> int:
        return 1 << (self.arith.bits - 1)

    def refuse(self, reason: str) -> None:
        raise Unsupported(f"batched evaluation: {reason}; use the interpreter or the smt engine for this model")

    # -- interpreter.layer_norm -----------------------------------------------------------------------
    def layer_norm(
        self, norm, z: Stage, out: Sequence[IVector] | None, where: str
    ) -> tuple[LayerNormPlan | None, Stage]:
        if norm is None:
            return None, z
        assert out is not None  # verify_tf.bounds bounds every norm the model has
        plan = plan_layer_norm(self, norm, z.den, z.bound, _magnitudes(out, self.scale, len(z.bound)), where)
        return plan, Stage(self.scale, plan.out_bound)

    def saturation(self, den: int) -> tuple[int, int]:
        """The fixed-point range [min_value, max_value] as numerators over ``den`` (a multiple of 2^f)."""
        factor = den // self.scale
        return self.arith.min_mantissa * factor, self.arith.max_mantissa * factor

    def round_to_grid(self, den: int) -> tuple[Requantize, int]:
        """The interpreter's ``round`` for a tensor over ``den``: floor to f bits, saturate (fixed only)."""
        if not self.fixed:
            return Requantize(), den
        divisor = den // self.scale
        return (
            Requantize(divisor, _pow2_shift(divisor), (self.arith.min_mantissa, self.arith.max_mantissa)),
            self.scale,
        )

    # -- interpreter.affine ---------------------------------------------------------------------------
    def affine(
        self, weights: Matrix, bias: Vector, dens: Sequence[int], mags: Sequence[int], out: Sequence[IVector]
    ) -> tuple[AffinePlan, Stage]:
        """round(W x + b) with one input denominator per coordinate (heads may differ in exact mode).

        ``out``: the bounds of the rounded result per position (from ``verify_tf.bounds``).
        """
        rows, cols = len(weights), len(dens)
        self.largest = max(self.largest, rows)
        acc_den = _lcm(
            [Fraction(w).denominator * dens[c] for row in weights for c, w in enumerate(row)]
            + [Fraction(b).denominator for b in bias]
            + [self.scale]
        )
        # w = p/q: w * acc_den / den_c = p * (acc_den // (q * den_c)), exact (acc_den is a multiple of q * den_c)
        scaled = [
            [Fraction(w).numerator * (acc_den // (Fraction(w).denominator * dens[c])) for c, w in enumerate(row)]
            for row in weights
        ]
        scaled_bias = [Fraction(b).numerator * (acc_den // Fraction(b).denominator) for b in bias]
        abs_weight = tuple(tuple(abs(w) for w in row) for row in scaled)
        abs_bias = tuple(abs(b) for b in scaled_bias)
        bound = max((sum(w * m for w, m in zip(row, mags)) + b for row, b in zip(abs_weight, abs_bias)), default=0)
        requantize, den = self.round_to_grid(acc_den)
        native = _fits(*(w for row in scaled for w in row), *scaled_bias, requantize.divisor)
        if native:  # int32 programs need the constants below 2^31 too (a weight may meet only zeros)
            self.note(
                max(
                    [
                        bound,
                        requantize.divisor,
                        *abs_bias,
                        *(w for row in abs_weight for w in row),
                        *(abs(c) for c in requantize.clamp or ()),
                    ]
                )
            )
        weight = _array([[scaled[r][c] for r in range(rows)] for c in range(cols)], (cols, rows), native)
        stage = Stage(den, _magnitudes(out, den, rows))
        plan = AffinePlan(
            weight,
            _array(scaled_bias, (rows,), native),
            bound < FLOAT_EXACT,
            requantize,
            abs_weight,
            abs_bias,
            bound,
            native,
            stage.bound,
        )
        return plan, stage

    # -- interpreter.embed ----------------------------------------------------------------------------
    def embed(self, tokens: Sequence[Token]) -> tuple[EmbedPlan, Stage]:
        model, d = self.model, self.model.dim
        if isinstance(model.tokens, AlphabetTokens):
            unknown = [t for t in tokens if t not in model.tokens.symbols]
            if unknown:
                raise ValueError(f"symbol {unknown[0]!r} is not in the model's alphabet {model.tokens.symbols}")
            vectors = [model.tokens.embed(t) for t in tokens]
            bos = model.tokens.embed(model.tokens.bos) if model.tokens.bos is not None else None
        else:
            vectors = [tuple(Fraction(c) for c in t) for t in tokens]
            bos = None
        rows = vectors + ([bos] if bos is not None else [])
        if any(len(v) != d for v in rows):
            raise ValueError(f"token vectors must have the model width {d}")
        pe = model.positional_encoding
        if pe is not None and self.n > len(pe):
            raise ValueError(f"input length {self.n} exceeds the positional encoding's {len(pe)} positions")
        pe_rows = list(pe[: self.n]) if pe is not None else []
        den = _den([c for v in rows + pe_rows for c in v])
        if pe is not None and self.fixed:
            den = _lcm([den, self.scale])
        table = [[_exact_int(c * den) for c in v] for v in rows]
        token_bounds = [max((abs(v[c]) for v in table), default=0) for c in range(d)]
        positional, clamp = None, None
        pe_table = [[_exact_int(Fraction(c) * den) for c in v] for v in pe_rows]
        bound = max((b + max((abs(v[c]) for v in pe_table), default=0) for c, b in enumerate(token_bounds)), default=0)
        if self.fixed and pe is not None:
            clamp = self.saturation(den)
        native = _fits(bound, *(clamp or ())) and bound <= LIMIT
        if native:
            self.note(max([bound, *(abs(c) for c in clamp or ())]))
        if pe is not None:
            positional = _array(pe_table, (self.n, d), native)
        stage = Stage(den, _magnitudes(self.bounds.embedded, den, d))
        plan = EmbedPlan(
            _array(table, (len(table), d), native),
            len(vectors) if bos is not None else None,
            positional,
            clamp,
            native,
            stage.bound,
        )
        return plan, stage

    # -- interpreter._residual ------------------------------------------------------------------------
    def residual(
        self, residual: bool, stream: Stage, update: Stage, out: Sequence[IVector]
    ) -> tuple[ResidualPlan, Stage]:
        if not residual:
            return ResidualPlan(False, 1, 1, None, 0, True, update.bound), update
        den = _lcm([stream.den, update.den] + ([self.scale] if self.fixed else []))
        s, u = den // stream.den, den // update.den
        bound = max((a * s + b * u for a, b in zip(stream.bound, update.bound)), default=0)
        clamp = self.saturation(den) if self.fixed else None
        native = _fits(s, u, *(clamp or ()))
        if native:
            self.note(max([bound, s, u, *(abs(c) for c in clamp or ())]))
        stage = Stage(den, _magnitudes(out, den, len(stream.bound)))
        return ResidualPlan(True, s, u, clamp, bound, native, stage.bound), stage

    # -- interpreter.attention_head -------------------------------------------------------------------
    def head(self, head: Head, z: Stage, hb) -> tuple[HeadPlan, Stage]:
        n, dens = self.n, [z.den] * len(z.bound)
        if head.scoring not in ("hardmax", "uniform", "softmax"):
            raise ValueError(f"unknown scoring {head.scoring!r}")
        if head.scoring == "softmax" and not self.fixed:
            raise Unsupported(
                "softmax is not exactly representable in exact arithmetic; use arithmetic: "
                "fixed, or hardmax/uniform scoring"
            )
        has_bias = head.positional != "standard" and head.rpe_bias is not None
        urpe = head.positional == "urpe" and head.urpe_c is not None
        rounded_terms = head.scoring == "softmax" and self.fixed and self.arith.rounded_terms
        if head.scoring == "uniform":
            mode = "uniform"
        elif rounded_terms:
            mode = "rounded-terms"
        elif head.scoring == "hardmax" and not self.fixed and head.key_dim == 1 and not has_bias and not urpe:
            mode = "argmax1d"
        else:
            mode = "general"
        query = key = None
        q = k = Stage(1, (0,) * head.key_dim)
        if mode != "uniform":
            query, q = self.affine(head.query, head.query_bias, dens, z.bound, hb.query)
            key, k = self.affine(head.key, head.key_bias, dens, z.bound, hb.key)
        value, v = self.affine(head.value, head.value_bias, dens, z.bound, hb.value)
        self.largest = max(self.largest, n)

        # scores: round(q_i . k_j + B[j - i])
        offsets = [[j - i for j in range(n)] for i in range(n)]
        bias = [[head.relative_bias(o) for o in row] for row in offsets]
        acc_den = _lcm([q.den * k.den, _den([b for row in bias for b in row]), self.scale])
        dot_scale = acc_den // (q.den * k.den)
        bias_num = [[_exact_int(Fraction(b) * acc_den) for b in row] for row in bias]
        bias_bound = max((abs(b) for row in bias_num for b in row), default=0)
        score_requantize, _ = self.round_to_grid(acc_den)
        live = np.array([[j <= i or not head.causal for j in range(n)] for i in range(n)], dtype=bool).reshape(n, n)

        # weights: numerators a_ij >= 0 with row total T_i (indicator/count, or exp-table entries/sum)
        exp = None
        most_winners = max((len(w) for w in hb.winners), default=1)
        if rounded_terms:  # mantissas of round(e^s·x) and round(e^s): saturated to the format
            weight_max = max(-self.arith.min_mantissa, self.arith.max_mantissa)
            total_max = n * weight_max
        elif head.scoring == "softmax":
            exp = np.array(exp_table(self.arith.frac) + (0,), dtype=np.int64)
            weight_max, total_max = self.scale, n * self.scale
        elif head.scoring == "hardmax":
            weight_max, total_max = 1, max(most_winners, 1)
        else:
            weight_max, total_max = 1, n
        c_den, c_num, c_max = 1, None, 1
        if urpe:
            c_values = [[head.relative_scale(o) for o in row] for row in offsets]
            c_den = _den([c for row in c_values for c in row])
            c_ints = [[_exact_int(Fraction(c) * c_den) for c in row] for row in c_values]
            c_max = max((abs(c) for row in c_ints for c in row), default=0)
            c_num = c_ints
        per_probability = self.fixed and self.arith.attention_rounding == "per-probability"
        if per_probability:
            total_max = max(total_max, self.scale)  # floor(a * 2^f / T) <= 2^f, and they sum to <= 2^f
            weight_max = max(weight_max, self.scale)

        count_multiplier, out_clamp, out_mul, out_div, common, tie_free = None, None, 1, 1, 1, False
        if self.fixed:
            out_clamp = (self.arith.min_mantissa, self.arith.max_mantissa)
            out_den = self.scale
            if per_probability or rounded_terms:
                out_div = c_den * v.den  # w_ij already carries 2^f; rounded-terms: x_ij's denominator
            else:
                g = math.gcd(self.scale, c_den * v.den)
                out_mul, out_div = self.scale // g, (c_den * v.den) // g
        else:
            if head.scoring == "uniform":
                # every live count of a row: n, or 1..n with a causal mask (the empty input has no row)
                counts = [n] if not head.causal and n > 0 else range(1, n + 1)
            else:
                counts = range(1, max(most_winners, 1) + 1)
            common = _lcm(counts)
            if head.scoring == "hardmax" and common > 1:
                self.uses_ties = True
                tie_free = self.tie_free
            if tie_free:
                common = 1
            count_multiplier = (
                _array([0] + [common // c for c in range(1, n + 1)], (n + 1,), _fits(common)) if not tie_free else None
            )
            out_den = common * c_den * v.den
        out = Stage(out_den, _magnitudes(hb.output, out_den, head.value_dim))
        score_limit = self.mantissa_bound() if self.fixed else None
        plan = HeadPlan(
            query=query,
            key=key,
            value=value,
            mode=mode,
            dot_scale=dot_scale,
            score_bias=None,
            scores_float_ok=False,
            score_requantize=score_requantize,
            live=live,
            causal=head.causal,
            scoring=head.scoring,
            exp=exp,
            relative_scale=None,
            mix_float_ok=False,
            per_probability=per_probability,
            frac=self.arith.frac if self.fixed else 0,
            out_mul=out_mul,
            out_div=out_div,
            out_shift=_pow2_shift(out_div) if per_probability else None,
            count_multiplier=count_multiplier,
            tie_free=tie_free,
            out_clamp=out_clamp,
            positions=n,
            total_max=total_max,
            weight_max=weight_max,
            c_max=c_max,
            bias_bound=bias_bound,
            score_divisor=score_requantize.divisor,
            score_limit=score_limit,
            common=common,
            bound=0,
            native=True,
            out_bound=out.bound,
            terms=RoundedTerms(self.arith, acc_den, c_den * v.den) if rounded_terms else None,
        )
        bound = plan.intermediate_bound(q.bound, k.bound, v.bound)
        native = _fits(
            dot_scale, bias_bound, score_requantize.divisor, c_max, out_mul, out_div, total_max * out_div, common
        ) and (score_limit is None or _fits(2 * score_limit))
        if native:
            self.note(
                max(
                    bound,
                    dot_scale,
                    bias_bound,
                    score_requantize.divisor,
                    c_max,
                    out_mul,
                    out_div,
                    common,
                    *(abs(c) for c in score_requantize.clamp or ()),
                    *(abs(c) for c in out_clamp or ()),
                )
            )
        plan = replace(
            plan,
            bound=bound,
            native=native,
            score_bias=_array(bias_num, (n, n), native) if has_bias else None,
            relative_scale=_array(c_num, (n, n), native) if urpe else None,
            scores_float_ok=plan.dot_float_ok(q.bound, k.bound),
            mix_float_ok=plan.mix_ok(v.bound),
        )
        return plan, out

    # -- interpreter.attention_layer ------------------------------------------------------------------
    def attention(self, layer: AttentionLayer, z: Stage, bb, where: str) -> tuple[AttentionPlan, Stage]:
        heads, outs = [], []
        pre, normed = self.layer_norm(layer.norm if layer.norm_first else None, z, bb.attention_norm, f"{where}.norm")
        for head, hb in zip(layer.heads, bb.heads):
            plan, out = self.head(head, normed, hb)
            heads.append(plan)
            outs.append(out)
        self.largest = max(self.largest, sum(len(o.bound) for o in outs))
        weights = tuple(tuple(w for head in layer.heads for w in head.output[c]) for c in range(self.model.dim))
        dens = [o.den for o in outs for _ in o.bound]
        bounds = [b for o in outs for b in o.bound]
        output, projected = self.affine(weights, layer.output_bias, dens, bounds, bb.attention_output)
        # post-LN: the residual's own bounds are the norm's input (after_attention is the norm's output)
        post_ln = layer.norm is not None and not layer.norm_first
        residual, stage = self.residual(
            layer.residual, z, projected, bb.before_attention_norm if post_ln else bb.after_attention
        )
        post, stage = self.layer_norm(
            None if layer.norm_first else layer.norm, stage, bb.attention_norm, f"{where}.norm"
        )
        return AttentionPlan(tuple(heads), output, residual, pre or post, layer.norm_first), stage

    # -- interpreter.feed_forward ---------------------------------------------------------------------
    def feed_forward(self, ff: FeedForward, z: Stage, bb, where: str) -> tuple[FeedForwardPlan, Stage]:
        pre, normed = self.layer_norm(ff.norm if ff.norm_first else None, z, bb.feed_forward_norm, f"{where}.norm")
        dens = [normed.den] * len(normed.bound)
        act = None
        if ff.activation == "relu":  # relu right after: its (smaller) output bounds stand for the affine's
            hidden, h = self.affine(ff.w1, ff.b1, dens, normed.bound, bb.hidden)
        else:
            if not self.fixed:
                self.refuse(
                    f"{where}: i-GELU in exact arithmetic is evaluated by the interpreter and the smt "
                    "engine only (its denominators)"
                )
            hidden, h = self.affine(ff.w1, ff.b1, dens, normed.bound, bb.pre_activation)
            act = plan_activation(
                self, ff.activation, h.bound, _magnitudes(bb.hidden, h.den, len(h.bound)), f"{where} activation"
            )
            h = Stage(h.den, act.out_bound if act is not None else h.bound)
        output, u = self.affine(ff.w2, ff.b2, [h.den] * len(h.bound), h.bound, bb.feed_forward_output)
        post_ln = ff.norm is not None and not ff.norm_first
        residual, stage = self.residual(
            ff.residual, z, u, bb.before_feed_forward_norm if post_ln else bb.after_feed_forward
        )
        post, stage = self.layer_norm(None if ff.norm_first else ff.norm, stage, bb.feed_forward_norm, f"{where}.norm")
        return FeedForwardPlan(hidden, output, residual, pre or post, ff.norm_first, act), stage

    # -- interpreter.readout --------------------------------------------------------------------------
    def readout(self, z: Stage) -> tuple[ReadoutPlan, Stage]:
        u = self.model.readout
        den = _den(u)
        weights = [_exact_int(Fraction(w) * den) for w in u]
        abs_weight = tuple(abs(w) for w in weights)
        bound = sum(w * b for w, b in zip(abs_weight, z.bound))
        native = _fits(*weights)
        if native:
            self.note(max([bound, *abs_weight]))
        stage = Stage(den * z.den, (_magnitudes([[iv] for iv in self.bounds.readout], den * z.den, 1)[0],))
        plan = ReadoutPlan(_array(weights, (len(weights), 1), native), abs_weight, bound, native, stage.bound[0])
        return plan, stage


def unsupported_reason(model: Model, arith: Arithmetic) -> str | None:
    """Why the batched evaluator cannot run ``model`` under ``arith`` at all, or None (nothing is refused for
    width any more: this is what ``compile_program`` raises ``Unsupported`` for, without compiling)."""
    if not isinstance(arith, Fixed) and any(head.scoring == "softmax" for _, _, head in model.heads()):
        return (
            "softmax is not exactly representable in exact arithmetic; use arithmetic: fixed, or "
            "hardmax/uniform scoring"
        )
    for layer, index, head in model.heads():
        if head.positional in ("rope", "alibi"):
            kind = "RoPE" if head.positional == "rope" else "ALiBi"
            return (
                f"batched evaluation: layers[{layer}] head {index} uses {kind}, which the batched evaluator does "
                "not run yet; use the interpret or smt engine"
            )
    if not isinstance(arith, Fixed):  # checked before the bounds, which refuse exact LayerNorm like the interpreter
        for what, present in (("LayerNorm", next(model.norms(), None) is not None), ("i-GELU", _has_igelu(model))):
            if present:
                return (
                    f"batched evaluation: {what} in exact arithmetic is evaluated by the interpreter and the smt "
                    "engine only; use one of them for this model"
                )
    return None


def _has_igelu(model: Model) -> bool:
    return any(b.feed_forward is not None and b.feed_forward.activation != "relu" for b in model.blocks)


def compile_program(
    model: Model,
    arith: Arithmetic,
    tokens: Sequence[Token],
    length: int,
    variant: str = "auto",
    bounds: Bounds | None = None,
    force: str | None = None,
) -> Program:
    """The integer program for inputs of ``length`` tokens drawn from ``tokens``.

    ``variant``: "full" (tie counts in the denominators), "tie-free" (exact hardmax heads divide by their tie
    counts and flag inexact rows, with the full program as ``fallback``) or "auto" (the full program unless it
    needs more than int64 somewhere and the tie-free one differs). ``force`` (tests): "guarded" checks every
    step per chunk as if its static bound exceeded int64, "wide" runs every step on Python integers.
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    if force not in FORCES:
        raise ValueError(f"force must be one of {FORCES}, got {force!r}")
    bos = isinstance(model.tokens, AlphabetTokens) and model.tokens.bos is not None
    reason = unsupported_reason(model, arith)
    if reason is not None:
        raise Unsupported(reason)
    if bounds is None:
        bounds = cube_bounds(model, arith, Cube.whole(tokens, length)) if tokens or length == 0 else None
    full, uses_ties = _compile(model, arith, tokens, length, bos, bounds, tie_free=False)
    if force is not None:
        full = _forced(full, force)
    if variant == "full" or not uses_ties or (variant == "auto" and not full.guarded):
        return full
    tie_free, _ = _compile(model, arith, tokens, length, bos, bounds, tie_free=True)
    if force is not None:
        tie_free = _forced(tie_free, force)
    return replace(tie_free, fallback=full)


def _forced(node, force: str):
    """Every step of a program marked guarded (static bound above int64) or not native (always wide)."""
    if isinstance(node, tuple):
        return tuple(_forced(n, force) for n in node)
    if not hasattr(node, "__dataclass_fields__") or isinstance(node, (Stage, Requantize)):
        return node
    changes = {name: _forced(getattr(node, name), force) for name in node.__dataclass_fields__}
    if "native" in changes:
        if force == "wide":
            changes["native"] = False
        elif "bound" in changes:  # and the known output bounds too, so that the kernels measure operands
            changes["bound"] = max(changes["bound"], LIMIT + 1)
            out = changes["out_bound"]
            changes["out_bound"] = LIMIT + 1 if isinstance(out, int) else tuple(LIMIT + 1 for _ in out)
    if isinstance(node, Program):
        changes.update(small=False, guarded=True)
    return replace(node, **changes)


def _compile(
    model: Model,
    arith: Arithmetic,
    tokens: Sequence[Token],
    length: int,
    bos: bool,
    bounds: Bounds | None,
    tie_free: bool,
) -> tuple[Program, bool]:
    positions = length + (1 if bos else 0)
    if bounds is None:  # no tokens at all: an empty domain, nothing will run
        bounds = _empty_bounds(model, positions)
    planner = _Planner(model, arith, positions, bounds, tie_free)
    embed, z = planner.embed(tokens)
    blocks = []
    heads = 1
    for index, (block, bb) in enumerate(zip(model.blocks, bounds.blocks)):
        attention = feed_forward = None
        if block.attention is not None:
            attention, z = planner.attention(block.attention, z, bb, f"layers[{index}].attention")
            heads = max(heads, len(block.attention.heads))
        if block.feed_forward is not None:
            feed_forward, z = planner.feed_forward(block.feed_forward, z, bb, f"layers[{index}].feed-forward")
        blocks.append(BlockPlan(attention, feed_forward))
    final_norm, z = planner.layer_norm(model.final_norm, z, bounds.output, "final-norm")
    readout_plan, readout = planner.readout(z)
    steps = _steps(embed, blocks, readout_plan, final_norm)
    guarded = any(not native or bound > LIMIT for native, bound in steps)
    largest = max((bound for _, bound in steps), default=0)
    small = not guarded and planner.peak < (1 << 31)
    program = Program(
        length,
        positions,
        model.dim,
        embed,
        tuple(blocks),
        z,
        readout_plan,
        readout,
        planner.largest,
        heads,
        small,
        guarded,
        largest,
        tie_free and planner.uses_ties,
        final_norm=final_norm,
    )
    return program, planner.uses_ties


def _steps(embed: EmbedPlan, blocks, readout: ReadoutPlan, final_norm: LayerNormPlan | None) -> list[tuple[bool, int]]:
    """(native, static bound) of every guarded-able step of a program."""
    out: list[tuple[bool, int]] = [(embed.native, 0), (readout.native, readout.bound)]
    for block in blocks:
        if block.attention is not None:
            for head in block.attention.heads:
                out += [(p.native, p.bound) for p in (head.query, head.key, head.value) if p is not None]
                out.append((head.native, head.bound))
            out += [
                (block.attention.output.native, block.attention.output.bound),
                (block.attention.residual.native, block.attention.residual.bound),
            ]
            if block.attention.norm is not None:
                out.append((block.attention.norm.native, block.attention.norm.bound))
        if block.feed_forward is not None:
            ff = block.feed_forward
            out += [
                (ff.hidden.native, ff.hidden.bound),
                (ff.output.native, ff.output.bound),
                (ff.residual.native, ff.residual.bound),
            ]
            out += [(p.native, p.bound) for p in (ff.norm, ff.activation) if p is not None]
    if final_norm is not None:
        out.append((final_norm.native, final_norm.bound))
    return out


def _empty_bounds(model: Model, positions: int) -> Bounds:
    """Bounds for a token list with no tokens (an empty domain): every stage 0, so that planning still works."""
    from ..bounds import BlockBounds, HeadBounds

    zero = (Fraction(0), Fraction(0))
    stream = [tuple(zero for _ in range(model.dim)) for _ in range(positions)]
    blocks = []
    for block in model.blocks:
        bb = BlockBounds()
        if block.attention is not None:
            for head in block.attention.heads:
                vec = lambda k: [tuple(zero for _ in range(k)) for _ in range(positions)]  # noqa: E731
                bb.heads.append(
                    HeadBounds(
                        vec(head.key_dim),
                        vec(head.key_dim),
                        vec(head.value_dim),
                        [[zero] * positions for _ in range(positions)],
                        [tuple(range(positions))] * positions,
                        [[zero] * positions for _ in range(positions)],
                        vec(head.value_dim),
                    )
                )
            bb.attention_output = bb.after_attention = stream
        if block.feed_forward is not None:
            bb.hidden = [tuple(zero for _ in range(block.feed_forward.width)) for _ in range(positions)]
            bb.pre_activation = bb.hidden
            bb.feed_forward_output = stream
            bb.after_feed_forward = stream
        bb.attention_norm = bb.feed_forward_norm = bb.before_attention_norm = bb.before_feed_forward_norm = stream
        blocks.append(bb)
    return Bounds(Cube(()), stream, blocks, stream, [zero] * positions)

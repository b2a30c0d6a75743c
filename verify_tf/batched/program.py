"""Compile a model into an integer program for one input length: scaled integer weights plus proven bounds.

Every tensor the batched evaluator handles holds integer *numerators* over one static denominator per
tensor (``Stage.den``); the value is numerator / den, exactly. In ``fixed`` arithmetic every rounded tensor
has den = 2^f (its numerators are the mantissas); in ``exact`` arithmetic the denominators grow layer by
layer (products of weight, grid and lcm(1..n) denominators). Weights are pre-multiplied so that each step
is "integer matmul, plus integer bias, then one exact floor division" (see ``kernels.py``).

Before anything runs, this module propagates an interval bound (max |numerator| per coordinate) through
every step, exactly as the interpreter computes: products, partial sums, scaled numerators before a floor
division, softmax row totals. If any intermediate could leave [-2^62, 2^62] it raises ``Unsupported``, so
an int64 overflow can never silently produce a wrong value. A matmul whose sum of absolute terms stays
below 2^53 is marked ``float_ok``: float64 computes it exactly (CUDA has no integer matmul).

One ``_plan_*`` function per interpreter function (embed, affine, attention_head, attention_layer,
feed_forward, _residual, readout); read them side by side with ``verify_tf/semantics/interpreter.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Sequence

import numpy as np

from ..ir import AlphabetTokens, AttentionLayer, FeedForward, Head, Matrix, Model, Token, Vector
from ..semantics.arithmetic import Arithmetic, Fixed, UnsupportedInMode
from ..semantics.exp_table import exp_table
from .normalization import IGeluPlan, LayerNormPlan, plan_activation, plan_layer_norm

LIMIT = 1 << 62  # every intermediate numerator stays within ±LIMIT: int64 with a factor-2 margin
FLOAT_EXACT = 1 << 53  # integers below this are exact in float64, and so are all partial sums


class Unsupported(UnsupportedInMode):
    """The batched evaluator cannot evaluate this model exactly (int64 overflow risk, softmax in exact mode).

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
    weight: np.ndarray  # (inputs, outputs) int64: transposed, so x @ weight works on (..., inputs)
    bias: np.ndarray  # (outputs,) int64
    float_ok: bool
    requantize: Requantize


@dataclass(frozen=True)
class EmbedPlan:
    table: np.ndarray  # (tokens [+ BOS row], d) int64 numerators
    bos_index: int | None  # row of the BOS vector in ``table`` (prepended to every input)
    positional: np.ndarray | None  # (n, d) int64, added then saturated
    clamp: tuple[int, int] | None


@dataclass(frozen=True)
class HeadPlan:
    query: AffinePlan
    key: AffinePlan
    value: AffinePlan
    dot_scale: int  # acc_ij = dot_scale * (q_i . k_j) + bias[i, j]
    score_bias: np.ndarray | None  # (n, n) int64 RPE bias numerators, None for standard heads
    scores_float_ok: bool
    score_requantize: Requantize
    live: np.ndarray  # (n, n) bool: key j visible from query i (all True unless causal)
    causal: bool
    scoring: str
    exp: np.ndarray | None  # softmax: exp table mantissas followed by one 0 (index clamped to its end)
    relative_scale: np.ndarray | None  # (n, n) int64 URPE C numerators, None when C = 1
    masked: int  # below every score: masked keys never attain the row maximum
    mix_float_ok: bool  # (weights * C) @ v exact in float64
    # fixed, exact-sums: out = floor(S * out_mul / (T_i * out_div)); per-probability: floor(S / out_div)
    # exact: out = S * count_multiplier[T_i]
    per_probability: bool
    frac: int  # fixed mode's f (0 in exact mode)
    out_mul: int
    out_div: int
    out_shift: int | None
    count_multiplier: np.ndarray | None
    out_clamp: tuple[int, int] | None


@dataclass(frozen=True)
class ResidualPlan:
    residual: bool
    stream_scale: int
    update_scale: int
    clamp: tuple[int, int] | None


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
class Program:
    """Everything needed to evaluate the model on (batch, length) token-index tensors of one length."""

    length: int  # the user's sequence length
    positions: int  # length + 1 with BOS
    width: int
    embed: EmbedPlan
    blocks: tuple[BlockPlan, ...]
    output: Stage  # the final residual stream
    readout_weight: np.ndarray  # (d,) int64
    readout_float_ok: bool
    readout: Stage  # q_i = u . z_i, one coordinate
    largest_width: int  # widest per-position tensor (for memory estimates)
    heads: int  # most heads in one layer
    small: bool  # every intermediate fits int32 (twice the throughput of int64)
    final_norm: LayerNormPlan | None = None


def _lcm(values) -> int:
    result = 1
    for v in values:
        result = math.lcm(result, int(v))
    return result


def _den(values) -> int:
    return _lcm(Fraction(v).denominator for v in values)


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def _int64(values, shape) -> np.ndarray:
    return np.array(values, dtype=np.int64).reshape(shape)


def _exact_int(x: Fraction) -> int:
    if x.denominator != 1:  # the common denominators are chosen so this cannot happen
        raise AssertionError(f"batched program: {x} is not an integer numerator")
    return x.numerator


def _pow2_shift(divisor: int) -> int | None:
    return divisor.bit_length() - 1 if divisor & (divisor - 1) == 0 else None


class _Planner:
    def __init__(self, model: Model, arith: Arithmetic, positions: int):
        self.model = model
        self.arith = arith
        self.n = positions
        self.fixed = isinstance(arith, Fixed)
        self.scale = (1 << arith.frac) if self.fixed else 1
        self.largest = model.dim
        self.peak = 0  # the largest |integer| any step can produce: int32 suffices below 2^31

    def check(self, bound: int, what: str) -> int:
        """Every intermediate and every integer constant of the program passes through here."""
        if bound > LIMIT:
            raise Unsupported(
                f"batched int64 evaluation: {what} may reach about 2^{bound.bit_length()} (> 2^62); "
                "use the interpreter or the smt engine for this model")
        self.peak = max(self.peak, bound)
        return bound

    def refuse(self, reason: str) -> None:
        raise Unsupported(f"batched evaluation: {reason}; use the interpreter or the smt engine for this model")

    def layer_norm(self, norm, z: Stage, where: str) -> tuple[LayerNormPlan | None, Stage]:
        if norm is None:
            return None, z
        plan, den, bounds = plan_layer_norm(self, norm, z.den, z.bound, where)
        return plan, Stage(den, bounds)

    def mantissa_bound(self) -> int:
        return 1 << (self.arith.bits - 1)

    def saturation(self, den: int) -> tuple[int, int]:
        """The fixed-point range [min_value, max_value] as numerators over ``den`` (a multiple of 2^f)."""
        factor = den // self.scale
        lo, hi = self.arith.min_mantissa * factor, self.arith.max_mantissa * factor
        self.check(-lo, "the saturation bound")
        return lo, hi

    def round_to_grid(self, den: int, bounds: Sequence[int]) -> tuple[Requantize, Stage]:
        """The interpreter's ``round`` for a tensor over ``den``: floor to f bits, saturate (fixed only)."""
        if not self.fixed:
            return Requantize(), Stage(den, tuple(bounds))
        divisor = self.check(den // self.scale, "a rounding divisor")
        limit = self.check(self.mantissa_bound(), "the saturation bound")
        out = tuple(min(_ceil_div(b, divisor), limit) for b in bounds)
        return (Requantize(divisor, _pow2_shift(divisor), (self.arith.min_mantissa, self.arith.max_mantissa)),
                Stage(self.scale, out))

    # -- interpreter.affine ---------------------------------------------------------------------------
    def affine(self, weights: Matrix, bias: Vector, dens: Sequence[int], bounds: Sequence[int],
               what: str) -> tuple[AffinePlan, Stage]:
        """round(W x + b) with one input denominator per coordinate (heads may differ in exact mode)."""
        rows, cols = len(weights), len(dens)
        self.largest = max(self.largest, rows)
        acc_den = _lcm([Fraction(w).denominator * dens[c] for row in weights for c, w in enumerate(row)]
                       + [Fraction(b).denominator for b in bias] + [self.scale])
        scaled = [[_exact_int(Fraction(w) * acc_den / dens[c]) for c, w in enumerate(row)] for row in weights]
        scaled_bias = [_exact_int(Fraction(b) * acc_den) for b in bias]
        acc_bounds = []
        for r in range(rows):
            for value in scaled[r] + [scaled_bias[r]]:
                self.check(abs(value), f"{what} (a scaled weight)")
            acc_bounds.append(self.check(
                sum(abs(w) * b for w, b in zip(scaled[r], bounds)) + abs(scaled_bias[r]), what))
        requantize, stage = self.round_to_grid(acc_den, acc_bounds)
        weight = _int64([[scaled[r][c] for r in range(rows)] for c in range(cols)], (cols, rows))
        plan = AffinePlan(weight, _int64(scaled_bias, (rows,)), max(acc_bounds, default=0) < FLOAT_EXACT,
                          requantize)
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
        for b in token_bounds:
            self.check(b, "a token embedding")
        positional, clamp = None, None
        bounds = token_bounds
        if pe is not None:
            pe_table = [[_exact_int(Fraction(c) * den) for c in v] for v in pe_rows]
            bounds = [self.check(token_bounds[c] + max((abs(v[c]) for v in pe_table), default=0),
                                 "token + positional encoding") for c in range(d)]
            positional = _int64(pe_table, (self.n, d))
            if self.fixed:
                clamp = self.saturation(den)
                bounds = [min(b, max(-clamp[0], clamp[1])) for b in bounds]
        plan = EmbedPlan(_int64(table, (len(table), d)), len(vectors) if bos is not None else None, positional,
                         clamp)
        return plan, Stage(den, tuple(bounds))

    # -- interpreter._residual ------------------------------------------------------------------------
    def residual(self, residual: bool, stream: Stage, update: Stage, what: str) -> tuple[ResidualPlan, Stage]:
        if not residual:
            return ResidualPlan(False, 1, 1, None), update
        den = _lcm([stream.den, update.den] + ([self.scale] if self.fixed else []))
        s = self.check(den // stream.den, f"{what} scale")
        u = self.check(den // update.den, f"{what} scale")
        bounds = [self.check(a * s + b * u, what) for a, b in zip(stream.bound, update.bound)]
        clamp = None
        if self.fixed:
            clamp = self.saturation(den)
            bounds = [min(b, max(-clamp[0], clamp[1])) for b in bounds]
        return ResidualPlan(True, s, u, clamp), Stage(den, tuple(bounds))

    # -- interpreter.attention_head -------------------------------------------------------------------
    def head(self, head: Head, z: Stage, where: str) -> tuple[HeadPlan, Stage]:
        n, dens = self.n, [z.den] * len(z.bound)
        if head.scoring == "uniform":  # its weights ignore the scores: no q and k (docs/semantics.md)
            head = replace(head, query=(), key=(), query_bias=(), key_bias=())
        query, q = self.affine(head.query, head.query_bias, dens, z.bound, f"{where} query")
        key, k = self.affine(head.key, head.key_bias, dens, z.bound, f"{where} key")
        value, v = self.affine(head.value, head.value_bias, dens, z.bound, f"{where} value")
        self.largest = max(self.largest, n)

        # scores: round(q_i . k_j + B[j - i])
        offsets = [[j - i for j in range(n)] for i in range(n)]
        has_bias = head.positional != "standard" and head.rpe_bias is not None
        bias = [[head.relative_bias(o) for o in row] for row in offsets]
        bias_den = _den([b for row in bias for b in row])
        acc_den = _lcm([q.den * k.den, bias_den, self.scale])
        dot_scale = self.check(acc_den // (q.den * k.den), f"{where} score scale")
        dot_bound = self.check(sum(a * b for a, b in zip(q.bound, k.bound)), f"{where} q.k")
        bias_num = [[_exact_int(Fraction(b) * acc_den) for b in row] for row in bias]
        bias_bound = max((abs(b) for row in bias_num for b in row), default=0)
        score_bound = self.check(self.check(dot_bound * dot_scale, f"{where} scaled q.k") + bias_bound,
                                 f"{where} attention score")
        score_requantize, score = self.round_to_grid(acc_den, [score_bound])
        masked = -self.check(score.bound[0] + 1, f"{where} masked score")
        live = np.array([[j <= i or not head.causal for j in range(n)] for i in range(n)], dtype=bool).reshape(n, n)

        # weights: numerators a_ij >= 0 with row total T_i (indicator/count, or exp-table entries/sum)
        if head.scoring not in ("hardmax", "uniform", "softmax"):
            raise ValueError(f"unknown scoring {head.scoring!r}")
        exp = None
        if head.scoring == "softmax":
            if not self.fixed:
                raise Unsupported("softmax is not exactly representable in exact arithmetic; use arithmetic: "
                                  "fixed, or hardmax/uniform scoring")
            if self.arith.attention_rounding == "rounded-terms":
                raise Unsupported("rounded-terms softmax (Yang et al.'s rounding) is evaluated by the interpreter "
                                  "and the smt engine only")
            self.check(2 * score.bound[0], f"{where} softmax score difference")
            exp = np.array(exp_table(self.arith.frac) + (0,), dtype=np.int64)
            weight_max, total_max = self.scale, n * self.scale
        else:
            weight_max, total_max = 1, n
        self.check(total_max, f"{where} attention row total")

        urpe = head.positional == "urpe" and head.urpe_c is not None
        c_den, c_num, c_max = 1, None, 1
        if urpe:
            c_values = [[head.relative_scale(o) for o in row] for row in offsets]
            c_den = _den([c for row in c_values for c in row])
            c_ints = [[_exact_int(Fraction(c) * c_den) for c in row] for row in c_values]
            c_max = self.check(max((abs(c) for row in c_ints for c in row), default=0), f"{where} URPE C")
            c_num = _int64(c_ints, (n, n))
        per_probability = self.fixed and self.arith.attention_rounding == "per-probability"
        if per_probability:
            self.check(weight_max * self.scale, f"{where} weight * 2^f")
            weight_max = total_max = self.scale  # floor(a * 2^f / T) <= 2^f, and they sum to <= 2^f
        self.check(weight_max * c_max, f"{where} weight * C")
        mix_bounds = [self.check(total_max * c_max * b, f"{where} attention-weighted value sum") for b in v.bound]
        mix_float_ok = max(mix_bounds, default=0) < FLOAT_EXACT
        value_bounds = [_ceil_div(self.scale * c_max * b, c_den * v.den) for b in v.bound]  # |sum_j a'_ij v_j|

        count_multiplier, out_clamp, out_mul, out_div = None, None, 1, 1
        if self.fixed:
            limit = self.mantissa_bound()
            out_clamp = (self.arith.min_mantissa, self.arith.max_mantissa)
            out = Stage(self.scale, tuple(min(b, limit) for b in value_bounds))
            if per_probability:
                out_div = self.check(c_den * v.den, f"{where} head divisor")  # w_ij already carries 2^f
            else:
                g = math.gcd(self.scale, c_den * v.den)
                out_mul, out_div = self.scale // g, (c_den * v.den) // g
                self.check(out_mul, f"{where} head scale")
                for b in mix_bounds:
                    self.check(b * out_mul, f"{where} scaled head sum")
                self.check(total_max * out_div, f"{where} head divisor")
        else:
            # the empty input has no row to average over (lcm([0]) would be a zero denominator)
            counts = [n] if head.scoring == "uniform" and not head.causal and n > 0 else range(1, n + 1)
            common = self.check(_lcm(counts), f"{where} lcm of the tie counts")
            count_multiplier = np.array([0] + [common // c for c in range(1, n + 1)], dtype=np.int64)
            out = Stage(common * c_den * v.den,
                        tuple(self.check(common * c_max * b, f"{where} head output") for b in v.bound))
        plan = HeadPlan(
            query=query, key=key, value=value, dot_scale=dot_scale,
            score_bias=_int64(bias_num, (n, n)) if has_bias else None, scores_float_ok=dot_bound < FLOAT_EXACT,
            score_requantize=score_requantize, live=live, causal=head.causal, scoring=head.scoring, exp=exp,
            relative_scale=c_num, masked=masked, mix_float_ok=mix_float_ok, per_probability=per_probability,
            frac=self.arith.frac if self.fixed else 0, out_mul=out_mul, out_div=out_div,
            out_shift=_pow2_shift(out_div) if per_probability else None, count_multiplier=count_multiplier,
            out_clamp=out_clamp)
        return plan, out

    # -- interpreter.attention_layer ------------------------------------------------------------------
    def attention(self, layer: AttentionLayer, z: Stage, where: str) -> tuple[AttentionPlan, Stage]:
        heads, outs = [], []
        pre, normed = self.layer_norm(layer.norm if layer.norm_first else None, z, f"{where}.norm")
        for index, head in enumerate(layer.heads):
            plan, out = self.head(head, normed, f"{where}.heads[{index}]")
            heads.append(plan)
            outs.append(out)
        self.largest = max(self.largest, sum(len(o.bound) for o in outs))
        weights = tuple(tuple(w for head in layer.heads for w in head.output[c]) for c in range(self.model.dim))
        dens = [o.den for o in outs for _ in o.bound]
        bounds = [b for o in outs for b in o.bound]
        output, projected = self.affine(weights, layer.output_bias, dens, bounds, f"{where} output projection")
        residual, stage = self.residual(layer.residual, z, projected, f"{where} residual")
        post, stage = self.layer_norm(None if layer.norm_first else layer.norm, stage, f"{where}.norm")
        return AttentionPlan(tuple(heads), output, residual, pre or post, layer.norm_first), stage

    # -- interpreter.feed_forward ---------------------------------------------------------------------
    def feed_forward(self, ff: FeedForward, z: Stage, where: str) -> tuple[FeedForwardPlan, Stage]:
        pre, normed = self.layer_norm(ff.norm if ff.norm_first else None, z, f"{where}.norm")
        dens = [normed.den] * len(normed.bound)
        hidden, h = self.affine(ff.w1, ff.b1, dens, normed.bound, f"{where} w1")
        act, act_bounds = plan_activation(self, ff.activation, h.bound, f"{where} activation")
        h = Stage(h.den, act_bounds)
        output, u = self.affine(ff.w2, ff.b2, [h.den] * len(h.bound), h.bound, f"{where} w2")
        residual, stage = self.residual(ff.residual, z, u, f"{where} residual")
        post, stage = self.layer_norm(None if ff.norm_first else ff.norm, stage, f"{where}.norm")
        return FeedForwardPlan(hidden, output, residual, pre or post, ff.norm_first, act), stage

    # -- interpreter.readout --------------------------------------------------------------------------
    def readout(self, z: Stage) -> tuple[np.ndarray, bool, Stage]:
        u = self.model.readout
        den = _den(u)
        weights = [_exact_int(Fraction(w) * den) for w in u]
        for w in weights:
            self.check(abs(w), "readout weight")
        bound = self.check(sum(abs(w) * b for w, b in zip(weights, z.bound)), "readout")
        return _int64(weights, (len(weights),)), bound < FLOAT_EXACT, Stage(den * z.den, (bound,))


def compile_program(model: Model, arith: Arithmetic, tokens: Sequence[Token], length: int) -> Program:
    """The integer program for inputs of ``length`` tokens drawn from ``tokens`` (raises ``Unsupported``)."""
    bos = isinstance(model.tokens, AlphabetTokens) and model.tokens.bos is not None
    positions = length + (1 if bos else 0)
    planner = _Planner(model, arith, positions)
    embed, z = planner.embed(tokens)
    blocks = []
    heads = 1
    for index, block in enumerate(model.blocks):
        attention = feed_forward = None
        if block.attention is not None:
            attention, z = planner.attention(block.attention, z, f"layers[{index}].attention")
            heads = max(heads, len(block.attention.heads))
        if block.feed_forward is not None:
            feed_forward, z = planner.feed_forward(block.feed_forward, z, f"layers[{index}].feed-forward")
        blocks.append(BlockPlan(attention, feed_forward))
    final_norm, z = planner.layer_norm(model.final_norm, z, "final-norm")
    weight, float_ok, readout = planner.readout(z)
    return Program(length, positions, model.dim, embed, tuple(blocks), z, weight, float_ok, readout,
                   planner.largest, heads, planner.peak < (1 << 31), final_norm)

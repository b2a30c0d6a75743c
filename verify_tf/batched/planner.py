"""Compile a model into an integer program for one input length: scaled integer weights plus proven bounds.

The program is made of the plans of ``plans.py`` (numerators over static denominators, each step with the
bound of its intermediates); this module chooses them. The value bounds of every stage come from
``verify_tf.bounds``; each step derives from them the bound of its own intermediates and whether it runs in
int64 (int32), guarded per chunk, or on Python integers (``plans.py`` explains the widths).

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
from ..semantics.arithmetic import Arithmetic, Fixed
from ..semantics.exp_table import exp_table
from ..semantics.interpreter import ROPE_IN_EXACT, rotation
from ..work import check_deadline
from .normalization import LayerNormPlan, plan_activation, plan_layer_norm
from .plans import (
    FLOAT_EXACT,
    INT64_MAX,
    LIMIT,
    AffinePlan,
    AttentionPlan,
    BlockPlan,
    EmbedPlan,
    FeedForwardPlan,
    HeadPlan,
    Program,
    ReadoutPlan,
    Requantize,
    ResidualPlan,
    RotationPlan,
    RoundedTerms,
    Stage,
    Unsupported,
    exact_int,
)

VARIANTS = ("auto", "full", "tie-free")
FORCES = (None, "guarded", "wide")  # tests: every step checked per chunk, or every step on Python integers


def _lcm(values) -> int:
    result = 1
    for v in values:
        result = math.lcm(result, int(v))
    return result


def _den(values) -> int:
    return _lcm(Fraction(v).denominator for v in values)


def _distinct(values: list) -> list:
    """The distinct objects of ``values`` (by identity: a grid's tokens share their coordinate objects)."""
    return list({id(v): v for v in values}.values())


def _integer_rows(rows: Sequence[Sequence[Fraction]], den: int) -> list[list[int]]:
    """exact_int(c·den) for every coordinate of every row, computed once per distinct coordinate object: a grid of
    390,625 tokens (d = 8) spent 100 s in Fraction arithmetic here before (issue 38)."""
    memo: dict[int, int] = {}
    out = []
    for k, row in enumerate(rows):
        if k % 4096 == 0:
            check_deadline("while planning the batched program's embedding")
        ints = []
        for c in row:
            key = id(c)
            if key not in memo:
                memo[key] = exact_int(c * den)
            ints.append(memo[key])
        out.append(ints)
    return out


def _array(values, shape, native: bool) -> np.ndarray:
    """int64 when every entry fits (native steps), else an object array of Python integers."""
    if native:
        return np.array(values, dtype=np.int64).reshape(shape)
    out = np.empty(int(np.prod(shape)), dtype=object)
    out[:] = [int(v) for v in np.array(values, dtype=object).reshape(-1)] if len(out) else []
    return out.reshape(shape)


def _fits(*values: int) -> bool:
    return all(abs(int(v)) <= INT64_MAX for v in values)


def _pow2_shift(divisor: int) -> int | None:
    return divisor.bit_length() - 1 if divisor & (divisor - 1) == 0 else None


def _magnitudes(vectors: Sequence[IVector], den: int, width: int) -> tuple[int, ...]:
    """Per coordinate, the largest |numerator| over ``den`` of any position's interval."""
    distinct = list({id(v): v for v in vectors}.values())  # positions often share one interval object
    return tuple(math.ceil(max((magnitude(v[c]) for v in distinct), default=0) * den) for c in range(width))


@dataclass(frozen=True)
class _Scores:
    """A head's scores over one denominator ``den``: acc_ij = dot_scale * (q_i . k_j) + bias[i][j]."""

    den: int
    dot_scale: int
    bias: list[list[int]]  # RPE bias numerators (all 0 for standard heads)
    bias_bound: int
    has_bias: bool  # an RPE bias table is applied (HeadPlan.score_bias)
    requantize: Requantize  # fixed: the score's rounding to the grid
    live: np.ndarray  # (n, n) bool: key j visible from query i


@dataclass(frozen=True)
class _Weights:
    """A head's integer weights a_ij >= 0 (before URPE's C) and their row totals T_i."""

    weight_max: int
    total_max: int
    exp: np.ndarray | None = None  # softmax: exp table mantissas followed by one 0
    counts: Sequence[int] = ()  # hardmax / uniform: every possible number of averaged keys in a row


@dataclass(frozen=True)
class _Division:
    """How a head's weighted sum becomes its output (HeadPlan's out_* fields), over ``out_den``."""

    out_den: int
    out_mul: int = 1
    out_div: int = 1
    out_clamp: tuple[int, int] | None = None
    common: int = 1
    count_multiplier: np.ndarray | None = None
    tie_free: bool = False


def _has_bias(head: Head) -> bool:
    return head.has_score_bias


def _urpe(head: Head) -> bool:
    return head.positional == "urpe" and head.urpe_c is not None


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
        check_deadline("while planning the batched program")
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
            vectors = [t if all(type(c) is Fraction for c in t) else tuple(Fraction(c) for c in t) for t in tokens]
            bos = None
        rows = vectors + ([bos] if bos is not None else [])
        if any(len(v) != d for v in rows):
            raise ValueError(f"token vectors must have the model width {d}")
        pe = model.positional_encoding
        if pe is not None and self.n > len(pe):
            raise ValueError(f"input length {self.n} exceeds the positional encoding's {len(pe)} positions")
        pe_rows = list(pe[: self.n]) if pe is not None else []
        den = _den(_distinct([c for v in rows + pe_rows for c in v]))
        if pe is not None and self.fixed:
            den = _lcm([den, self.scale])
        table = _integer_rows(rows, den)
        token_bounds = [max((abs(v[c]) for v in table), default=0) for c in range(d)]
        positional, clamp = None, None
        pe_table = [[exact_int(Fraction(c) * den) for c in v] for v in pe_rows]
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

    # -- interpreter.attention_head (symbolic/encoder.py: encode_attention_head and one *_row per scoring) -----
    def head(self, head: Head, z: Stage, hb) -> tuple[HeadPlan, Stage]:
        n, dens = self.n, [z.den] * len(z.bound)
        mode = self._head_mode(head)
        query = key = None
        q = k = Stage(1, (0,) * head.key_dim)
        query_rotation = key_rotation = None
        if mode != "uniform":
            query, q = self.affine(head.query, head.query_bias, dens, z.bound, hb.query)
            key, k = self.affine(head.key, head.key_bias, dens, z.bound, hb.key)
            if head.positional == "rope":
                query_rotation, q = self.rotation(head, q, hb.rotated_query)
                key_rotation, k = self.rotation(head, k, hb.rotated_key)
        value, v = self.affine(head.value, head.value_bias, dens, z.bound, hb.value)
        self.largest = max(self.largest, n)
        scores = self._scores(head, q, k)
        if mode == "rounded-terms":
            weights = self._rounded_terms_weights()
        elif head.scoring == "softmax":
            weights = self._softmax_weights()
        else:
            weights = self._average_weights(head, hb)
        c_den, c_num, c_max = self._relative_scale(head)
        per_probability = self.fixed and self.arith.attention_rounding == "per-probability"
        weight_max, total_max = weights.weight_max, weights.total_max
        if per_probability:
            total_max = max(total_max, self.scale)  # floor(a * 2^f / T) <= 2^f, and they sum to <= 2^f
            weight_max = max(weight_max, self.scale)
        division = self._division(head, weights, c_den * v.den, per_probability or mode == "rounded-terms")
        out = Stage(division.out_den, _magnitudes(hb.output, division.out_den, head.value_dim))
        score_limit = self.mantissa_bound() if self.fixed else None
        plan = HeadPlan(
            query=query,
            key=key,
            value=value,
            mode=mode,
            dot_scale=scores.dot_scale,
            score_bias=None,
            scores_float_ok=False,
            score_requantize=scores.requantize,
            live=scores.live,
            causal=head.causal,
            scoring=head.scoring,
            exp=weights.exp,
            relative_scale=None,
            mix_float_ok=False,
            per_probability=per_probability,
            frac=self.arith.frac if self.fixed else 0,
            out_mul=division.out_mul,
            out_div=division.out_div,
            out_shift=_pow2_shift(division.out_div) if per_probability else None,
            count_multiplier=division.count_multiplier,
            tie_free=division.tie_free,
            out_clamp=division.out_clamp,
            positions=n,
            total_max=total_max,
            weight_max=weight_max,
            c_max=c_max,
            bias_bound=scores.bias_bound,
            score_divisor=scores.requantize.divisor,
            score_limit=score_limit,
            common=division.common,
            bound=0,
            native=True,
            out_bound=out.bound,
            terms=RoundedTerms(self.arith, scores.den, c_den * v.den) if mode == "rounded-terms" else None,
            query_rotation=query_rotation,
            key_rotation=key_rotation,
        )
        bound = plan.intermediate_bound(q.bound, k.bound, v.bound)
        native = self._head_native(plan, bound)
        plan = replace(
            plan,
            bound=bound,
            native=native,
            score_bias=_array(scores.bias, (n, n), native) if scores.has_bias else None,
            relative_scale=_array(c_num, (n, n), native) if c_num is not None else None,
            scores_float_ok=plan.dot_float_ok(q.bound, k.bound),
            mix_float_ok=plan.mix_ok(v.bound),
        )
        return plan, out

    def rotation(self, head: Head, x: Stage, out: Sequence[IVector] | None) -> tuple[RotationPlan, Stage]:
        """interpreter.rotate: RoPE on the mantissas of q or k (fixed arithmetic only, checked by the caller)."""
        assert head.rope is not None and out is not None and self.fixed and x.den == self.scale
        arith = self.arith
        tables = [[rotation(arith, f, p) for f in head.rope.frequencies] for p in range(self.n)]
        cos = [[exact_int(c * self.scale) for c, _ in row] for row in tables]
        sin = [[exact_int(s * self.scale) for _, s in row] for row in tables]
        table_max = max((abs(v) for row in cos + sin for v in row), default=0)
        pairs = head.rope.pairs(head.key_dim)
        bound = max(((x.bound[a] + x.bound[b]) * table_max for a, b in pairs), default=0)
        clamp = (arith.min_mantissa, arith.max_mantissa)
        native = _fits(bound, table_max, *clamp)
        if native:
            self.note(max(bound, table_max))
        stage = Stage(self.scale, _magnitudes(out, self.scale, head.key_dim))
        shape = (self.n, len(pairs))
        plan = RotationPlan(
            pairs, _array(cos, shape, native), _array(sin, shape, native), arith.frac, clamp, table_max, bound, native,
            stage.bound,
        )  # fmt: skip
        return plan, stage

    def _head_mode(self, head: Head) -> str:
        """The kernel that runs the head (``HeadPlan.mode``); refuses a scoring the batched evaluator cannot run."""
        if head.scoring not in ("hardmax", "uniform", "softmax"):
            raise ValueError(f"unknown scoring {head.scoring!r}")
        if head.scoring == "softmax" and not self.fixed:
            raise Unsupported(
                "softmax is not exactly representable in exact arithmetic; use arithmetic: "
                "fixed, or hardmax/uniform scoring"
            )
        if head.scoring == "uniform":
            return "uniform"
        if head.scoring == "softmax" and self.fixed and self.arith.rounded_terms:
            return "rounded-terms"
        if (
            head.scoring == "hardmax"
            and not self.fixed
            and head.key_dim == 1
            and not _has_bias(head)
            and not _urpe(head)
        ):
            return "argmax1d"
        return "general"

    def _scores(self, head: Head, q: Stage, k: Stage) -> _Scores:
        """Scores round(q_i . k_j + B[j - i]) as dot_scale * (q_i . k_j) + bias[i, j] over one denominator."""
        n = self.n
        offsets = [[j - i for j in range(n)] for i in range(n)]
        bias = [[head.relative_bias(o) for o in row] for row in offsets]
        acc_den = _lcm([q.den * k.den, _den([b for row in bias for b in row]), self.scale])
        bias_num = [[exact_int(Fraction(b) * acc_den) for b in row] for row in bias]
        requantize, _ = self.round_to_grid(acc_den)
        live = np.array([[j <= i or not head.causal for j in range(n)] for i in range(n)], dtype=bool).reshape(n, n)
        return _Scores(
            den=acc_den,
            dot_scale=acc_den // (q.den * k.den),
            bias=bias_num,
            bias_bound=max((abs(b) for row in bias_num for b in row), default=0),
            has_bias=_has_bias(head),
            requantize=requantize,
            live=live,
        )

    # weights: numerators a_ij >= 0 with row total T_i (indicator/count, or exp-table entries/sum)
    def _average_weights(self, head: Head, hb) -> _Weights:
        """hardmax / uniform (encoder._average_row): weight 1 on each averaged key, so T_i is their count."""
        n = self.n
        most_winners = max((len(w) for w in hb.winners), default=1)
        if head.scoring == "hardmax":
            return _Weights(1, max(most_winners, 1), counts=range(1, max(most_winners, 1) + 1))
        # every live count of a row: n, or 1..n with a causal mask (the empty input has no row)
        return _Weights(1, n, counts=[n] if not head.causal and n > 0 else range(1, n + 1))

    def _softmax_weights(self) -> _Weights:
        """Fixed-point softmax (encoder._softmax_row): the exp table's mantissas, at most 2^f each."""
        exp = np.array(exp_table(self.arith.frac) + (0,), dtype=np.int64)
        return _Weights(self.scale, self.n * self.scale, exp=exp)

    def _rounded_terms_weights(self) -> _Weights:
        """Yang et al.'s softmax (encoder._rounded_terms_row): mantissas of round(e^s·x) and round(e^s), saturated
        to the format."""
        weight_max = max(-self.arith.min_mantissa, self.arith.max_mantissa)
        return _Weights(weight_max, self.n * weight_max)

    def _relative_scale(self, head: Head) -> tuple[int, list[list[int]] | None, int]:
        """URPE's C[j - i] as numerators over one denominator: (c_den, numerators or None when C = 1, max |C|)."""
        if not _urpe(head):
            return 1, None, 1
        n = self.n
        c_values = [[head.relative_scale(j - i) for j in range(n)] for i in range(n)]
        c_den = _den([c for row in c_values for c in row])
        c_ints = [[exact_int(Fraction(c) * c_den) for c in row] for row in c_values]
        return c_den, c_ints, max((abs(c) for row in c_ints for c in row), default=0)

    def _division(self, head: Head, weights: _Weights, mixed_den: int, weighted: bool) -> _Division:
        """How the weighted sum S_i of a row becomes head_i (HeadPlan's comment): over 2^f, rounded, in fixed
        arithmetic; times the tie-count multiplier (or divided by T_i, tie-free) in exact arithmetic.

        ``mixed_den``: the denominator of C v_j; ``weighted``: the weights already carry 2^f (per-probability,
        rounded terms)."""
        if self.fixed:
            if weighted:
                out_mul, out_div = 1, mixed_den
            else:
                g = math.gcd(self.scale, mixed_den)
                out_mul, out_div = self.scale // g, mixed_den // g
            return _Division(self.scale, out_mul, out_div, (self.arith.min_mantissa, self.arith.max_mantissa))
        n = self.n
        common = _lcm(weights.counts)
        tie_free = False
        if head.scoring == "hardmax" and common > 1:
            self.uses_ties = True
            tie_free = self.tie_free
        if tie_free:
            common = 1
        count_multiplier = (
            _array([0] + [common // c for c in range(1, n + 1)], (n + 1,), _fits(common)) if not tie_free else None
        )
        return _Division(common * mixed_den, common=common, count_multiplier=count_multiplier, tie_free=tie_free)

    def _head_native(self, plan: HeadPlan, bound: int) -> bool:
        """Whether every constant of the head fits int64 (then its largest static number is noted)."""
        native = _fits(
            plan.dot_scale,
            plan.bias_bound,
            plan.score_divisor,
            plan.c_max,
            plan.out_mul,
            plan.out_div,
            plan.total_max * plan.out_div,
            plan.common,
        ) and (plan.score_limit is None or _fits(2 * plan.score_limit))
        if native:
            self.note(
                max(
                    bound,
                    plan.dot_scale,
                    plan.bias_bound,
                    plan.score_divisor,
                    plan.c_max,
                    plan.out_mul,
                    plan.out_div,
                    plan.common,
                    *(abs(c) for c in plan.score_requantize.clamp or ()),
                    *(abs(c) for c in plan.out_clamp or ()),
                )
            )
        return native

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
        weights = [exact_int(Fraction(w) * den) for w in u]
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
    if not isinstance(arith, Fixed) and any(
        h.positional == "rope" and h.scoring != "uniform" for _, _, h in model.heads()
    ):
        return ROPE_IN_EXACT
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

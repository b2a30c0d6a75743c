"""Sound interval bounds for every stage of the reference interpreter, over a cube of inputs.

A **cube** is a product of per-position token sets: ``Cube(((t, t', ...), (t, ...), ...))`` allows, at each of
the user's positions (BOS excluded), any token of that position's set. The whole domain of one length is one
cube (``Cube.whole(tokens, length)``); the split engine passes small cubes (grid-index ranges per coordinate,
alphabet subsets: any finite set per position); ``Cube.point(tokens)`` is a single input. Constraints that are
not products (distinct tokens, sorted multisets) are over-approximated by the cube that contains them.

``cube_bounds(model, arithmetic, cube) -> Bounds`` mirrors ``semantics.evaluate`` stage for stage (one function
per interpreter function, read them side by side with ``semantics/interpreter.py``) and returns, for every
network position (BOS included) and coordinate, an exact ``Fraction`` interval ``(lo, hi)`` that contains the
interpreter's value at that stage for **every** input of the cube:

=====================================  ==================================================================
``Bounds``                              ``embedded``, ``blocks[b]``, ``output`` (final stream), ``readout``,
                                        ``before_final_norm`` (with a final LayerNorm)
``BlockBounds``                         ``heads[h]``, ``attention_output`` (o_i before the residual),
                                        ``after_attention``, ``hidden`` (after the ReLU or i-GELU),
                                        ``pre_activation`` (W1 z + b1 rounded),
                                        ``feed_forward_output`` (W2 h + b2 before the residual),
                                        ``after_feed_forward``, ``output``; ``attention_norm`` /
                                        ``feed_forward_norm``: a sublayer's LayerNorm output (the
                                        sublayer's input when pre-LN, its output when post-LN)
``HeadBounds``                          ``query``, ``key``, ``value`` (per position; RoPE heads also
                                        ``rotated_query``, ``rotated_key``), ``scores[i][j]`` (None where
                                        the mask hides j), ``winners[i]`` (the keys that can get a nonzero weight
                                        for query i: hardmax's possible argmax set, softmax's keys within the exp
                                        table, uniform's live keys; rounded-terms: every live key),
                                        ``weights[i][j]`` (a'_ij, after per-probability flooring and URPE's
                                        C; rounded-terms: the shown weights), ``output`` (head_i)
=====================================  ==================================================================

Each ``IVector`` is a tuple of ``(lo, hi)`` pairs, one per coordinate. What makes them tighter than plain
interval arithmetic (each point proven in the comments below, each checked by ``tests/test_bounds.py`` on random
models and random cubes):

* **hull of the winners**: hardmax, softmax and uniform weights form a convex combination, so head_i lies in the
  hull of the values of the keys that can still win (``winners[i]``), not in n times the largest value;
  per-probability flooring loses at most (m-1)·2^-f of the mass (m winners) and URPE scales each value by its
  C[j-i] first;
* **a difference of two heads over the same keys**: the output projection is evaluated on [lo, hi] intervals
  (not magnitudes), so W h1 - W h2 with h1, h2 in one hull is bounded by the hull's width, not by its magnitude;
* **1-D hardmax**: in exact arithmetic a score q_i·k_j + B is compared across keys without a product: key j is
  dropped when some key j' beats it for every q_i in its interval (q_i·(k_j - k_j') + B_j - B_j' < 0), so for a
  1-dimensional query the argmax is the largest key (q > 0) or the smallest (q < 0);
* **exact weights** when a row's scores are all points (always so for a cube with one input): then every stage
  of a one-input cube collapses to the interpreter's value (``lo == hi``);
* rounding and saturation are applied to lo and hi exactly as the interpreter applies them (both monotone);
* **LayerNorm** (fixed only, ``layer_norm_box``) is coarse but sound: the normalised value is bounded by
  2·√(d−1) (``nonlinear.normalized_bound``) and by the centred input's interval over the smallest divisor eps
  allows, then gamma/beta; a point box is the interpreter's value. **i-GELU** uses ``nonlinear.igelu_bounds``
  (increasing for x >= 0, between max(x·(−a·b²)/2, min i-GELU) and 0 for x < 0), rounded at both ends.

Other helpers for callers that bound their own intermediates (the batched evaluator's int64 planning):
``affine_interval`` (the exact pre-rounding W x + b), ``magnitude`` (largest |value| of an interval), ``hull``.
Soundness is the only contract: every interval may be wider than the true range, never narrower.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import product
from typing import Any

from .ir import AlphabetTokens, AttentionLayer, FeedForward, Head, LayerNorm, Matrix, Model, Token, Vector
from .semantics.arithmetic import SATURATING_EXPONENT, Arithmetic, Fixed, UnsupportedInMode
from .semantics.exp_table import exp_table, floor_exp_times
from .semantics.interpreter import ROPE_IN_EXACT, rotation
from .semantics.nonlinear import igelu, igelu_bounds, layer_norm_mantissas, normalized_bound
from .work import check_deadline

Interval = tuple[Fraction, Fraction]
IVector = tuple[Interval, ...]

ZERO = Fraction(0)
ONE = Fraction(1)


@dataclass(frozen=True)
class Cube:
    """Per user position (BOS excluded) a non-empty tuple of allowed tokens; the inputs are their product."""

    positions: tuple[tuple[Token, ...], ...]

    def __post_init__(self) -> None:
        if any(len(tokens) == 0 for tokens in self.positions):
            raise ValueError("every position of a cube needs at least one token")

    @classmethod
    def whole(cls, tokens: Sequence[Token], length: int) -> Cube:
        """Every input of ``length`` tokens drawn from ``tokens`` (one shared token tuple)."""
        shared = tuple(tokens)
        return cls(tuple(shared for _ in range(length)))

    @classmethod
    def point(cls, tokens: Sequence[Token]) -> Cube:
        return cls(tuple((t,) for t in tokens))

    @property
    def length(self) -> int:
        return len(self.positions)

    def count(self) -> int:
        total = 1
        for tokens in self.positions:
            total *= len(tokens)
        return total

    def contains(self, tokens: Sequence[Token]) -> bool:
        return len(tokens) == self.length and all(t in allowed for t, allowed in zip(tokens, self.positions))

    def inputs(self) -> Iterable[tuple[Token, ...]]:
        return product(*self.positions)


@dataclass
class HeadBounds:
    query: list[IVector]
    key: list[IVector]
    value: list[IVector]
    scores: list[list[Interval | None]]  # [query i][key j]; None where the causal mask hides j
    winners: list[tuple[int, ...]]  # keys that can receive a nonzero weight for query i
    weights: list[list[Interval]]  # a'_ij (0 outside winners)
    output: list[IVector]
    rotated_query: list[IVector] | None = None  # RoPE heads: q_i and k_j after the rotation (scores use these)
    rotated_key: list[IVector] | None = None


@dataclass
class BlockBounds:
    heads: list[HeadBounds] = field(default_factory=list)
    attention_output: list[IVector] | None = None
    after_attention: list[IVector] | None = None
    hidden: list[IVector] | None = None
    pre_activation: list[IVector] | None = None  # round(W1 z + b1), before the ReLU or i-GELU
    feed_forward_output: list[IVector] | None = None  # W2 h + b2 (rounded), before the residual
    after_feed_forward: list[IVector] | None = None
    attention_norm: list[IVector] | None = None  # LayerNorm output: the heads' input (pre-LN) or after_attention
    feed_forward_norm: list[IVector] | None = None
    before_attention_norm: list[IVector] | None = None  # post-LN: the residual sum the norm takes
    before_feed_forward_norm: list[IVector] | None = None

    @property
    def output(self) -> list[IVector]:
        return self.after_feed_forward if self.after_feed_forward is not None else self.after_attention


@dataclass
class Bounds:
    cube: Cube | None  # None: bounds of a ``verify_tf.linear`` batch, which fill ``readout`` and ``output`` only
    embedded: list[IVector]
    blocks: list[BlockBounds]
    output: list[IVector]
    readout: list[Interval]
    before_final_norm: list[IVector] | None = None  # the last block's output when the model has a final norm

    @property
    def positions(self) -> int:
        return len(self.embedded)


# ---------------------------------------------------------------- interval primitives


def point(x: Fraction) -> Interval:
    return (x, x)


def is_point(iv: Interval) -> bool:
    return iv[0] == iv[1]


def magnitude(iv: Interval) -> Fraction:
    """The largest |x| for x in the interval."""
    return max(-iv[0], iv[1])


def hull(items: Iterable[Interval]) -> Interval:
    items = list(items)
    return min(lo for lo, _ in items), max(hi for _, hi in items)


def scale(w: Fraction, iv: Interval) -> Interval:
    return (w * iv[0], w * iv[1]) if w >= 0 else (w * iv[1], w * iv[0])


def add(a: Interval, b: Interval) -> Interval:
    return a[0] + b[0], a[1] + b[1]


def multiply(a: Interval, b: Interval) -> Interval:
    if a[0] == a[1]:
        return scale(a[0], b)
    if b[0] == b[1]:
        return scale(b[0], a)
    corners = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
    return min(corners), max(corners)


def affine_interval(weights: Matrix, bias: Vector, x: IVector) -> IVector:
    """The exact W x + b (before any rounding) for every x in the box ``x``.

    Computed on integers over one common denominator (weights times box ends), one Fraction per result: the
    same exact values as summing Fractions term by term, without a gcd per term.
    """
    if not weights:
        return ()
    check_deadline("while computing interval bounds")  # wide models (tracr: width 719) spend minutes here
    w_den = math.lcm(*(Fraction(w).denominator for row in weights for w in row), 1)
    x_den = math.lcm(*(end.denominator for iv in x for end in iv), 1)
    lows = [(end[0] * x_den).numerator for end in x]
    highs = [(end[1] * x_den).numerator for end in x]
    den = w_den * x_den
    out = []
    for row, b in zip(weights, bias):
        lo = hi = 0
        for w, xl, xh in zip(row, lows, highs):
            wi = (Fraction(w) * w_den).numerator
            if wi > 0:
                lo += wi * xl
                hi += wi * xh
            elif wi < 0:
                lo += wi * xh
                hi += wi * xl
        out.append((Fraction(lo, den) + b, Fraction(hi, den) + b))
    return tuple(out)


def dot_interval(a: IVector, b: IVector) -> Interval:
    lo = hi = ZERO
    for x, y in zip(a, b):
        p = multiply(x, y)
        lo += p[0]
        hi += p[1]
    return lo, hi


class _Rounding:
    """The interpreter's ``round`` and ``saturate`` on intervals (both monotone, so applied to each end)."""

    def __init__(self, arith: Arithmetic):
        self.arith = arith
        self.fixed = isinstance(arith, Fixed)

    def round(self, iv: Interval) -> Interval:
        if not self.fixed:
            return iv
        return self.arith.round(iv[0]), self.arith.round(iv[1])

    def saturate(self, iv: Interval) -> Interval:
        if not self.fixed:
            return iv
        return self.arith.saturate(iv[0]), self.arith.saturate(iv[1])

    def round_vector(self, x: IVector) -> IVector:
        return tuple(self.round(iv) for iv in x)


class _Memo:
    """Positions of a cube often share their intervals (the whole domain: all of them); compute each once."""

    def __init__(self) -> None:
        self.table: dict = {}
        self.keep: dict = {}  # keys hold id()s of weight tuples: keep those alive so no id is reused

    def hold(self, obj) -> int:
        self.keep[id(obj)] = obj
        return id(obj)

    def get(self, key, compute):
        value = self.table.get(key)
        if value is None:
            value = self.table[key] = compute()
        return value


# ---------------------------------------------------------------- one function per interpreter function


def affine(weights: Matrix, bias: Vector, x: IVector, r: _Rounding, memo: _Memo) -> IVector:
    """round(W x + b) (interpreter.affine)."""
    # by identity first (positions share interval objects), then by value
    return memo.get(
        ("affine", memo.hold(weights), memo.hold(bias), memo.hold(x)),
        lambda: memo.get(
            ("affine", id(weights), id(bias), x), lambda: r.round_vector(affine_interval(weights, bias, x))
        ),
    )


def coordinate_box(vectors: Sequence[Sequence[Any]], dim: int) -> IVector:
    """Per coordinate the least and the largest value of ``vectors`` (grid tokens). A grid's tokens share their
    coordinate objects (``itertools.product`` of the grid's values), so each column is first reduced to its
    distinct objects (by identity: cheap), then compared exactly; a grid of 390,625 tokens (d = 8) took 100 s of
    Fraction comparisons before, outside any deadline (issue 38)."""
    out = []
    for c in range(dim):
        check_deadline("while computing interval bounds")
        distinct = {id(x): x for x in (v[c] for v in vectors)}
        column = [Fraction(x) for x in distinct.values()]
        out.append((min(column), max(column)))
    return tuple(out)


def embed(model: Model, cube: Cube, r: _Rounding) -> list[IVector]:
    """interpreter.embed over each position's token set (BOS as a one-token set)."""
    sets: list[tuple[Token, ...]] = list(cube.positions)
    if isinstance(model.tokens, AlphabetTokens) and model.tokens.bos is not None:
        sets = [(model.tokens.bos,)] + sets
    computed: dict[int, IVector] = {}  # positions sharing one token tuple (the whole domain): one box

    def box(tokens: tuple[Token, ...]) -> IVector:
        if isinstance(model.tokens, AlphabetTokens):
            vectors = [model.tokens.embed(t) for t in tokens]
            return tuple((min(v[c] for v in vectors), max(v[c] for v in vectors)) for c in range(model.dim))
        return coordinate_box(tokens, model.dim)

    boxes = []
    for tokens in sets:
        if id(tokens) not in computed:
            computed[id(tokens)] = box(tokens)
        boxes.append(computed[id(tokens)])
    pe = model.positional_encoding
    if pe is None:
        return boxes
    if len(boxes) > len(pe):
        raise ValueError(f"input length {len(boxes)} exceeds the positional encoding's {len(pe)} positions")
    return [tuple(r.saturate(add(iv, point(p))) for iv, p in zip(box, pe[i])) for i, box in enumerate(boxes)]


def _candidates(
    head: Head, r: _Rounding, queries: list[IVector], keys: list[IVector], scores: list[list[Interval | None]], i: int
) -> tuple[int, ...]:
    live = [j for j, s in enumerate(scores[i]) if s is not None]
    if head.scoring == "uniform":
        return tuple(live)
    best_low = max(scores[i][j][0] for j in live)
    if head.scoring == "softmax":
        # w_j = E[(m - s_j) 2^f] is 0 once (m - s_j) 2^f reaches the table's length; m >= every lo(s_ij')
        reach = Fraction(len(exp_table(r.arith.frac)), r.arith.scale)
        return tuple(j for j in live if best_low - scores[i][j][1] < reach)
    # hardmax: j can be in the argmax set only if its score can reach every other key's lowest score ...
    candidates = [j for j in live if scores[i][j][1] >= best_low]
    if r.fixed or head.key_dim != 1 or len(candidates) < 2:
        return tuple(candidates)
    # ... and, in exact arithmetic, no single key j' beats it for every q_i: with a 1-dimensional query the
    # difference of two scores is q_i (k_j - k_j') + B_j - B_j', one product of two intervals
    q = queries[i][0]
    kept = []
    for j in candidates:
        dominated = False
        for other in candidates:
            if other == j or (keys[other] == keys[j] and head.relative_bias(j - i) == head.relative_bias(other - i)):
                continue  # the same interval (the whole domain: every key alike) never dominates
            difference = (keys[j][0][0] - keys[other][0][1], keys[j][0][1] - keys[other][0][0])
            shift = head.relative_bias(j - i) - head.relative_bias(other - i)
            if multiply(q, difference)[1] + shift < 0:
                dominated = True
                break
        if not dominated:
            kept.append(j)
    return tuple(kept)


def rotate(head: Head, x: IVector, position: int, r: _Rounding, memo: _Memo) -> IVector:
    """interpreter.rotate: pair (a, b) becomes round(x_a·c − x_b·s), round(x_a·s + x_b·c) with the rotation
    table's constants, exact interval arithmetic before the (monotone) rounding."""
    if not isinstance(r.arith, Fixed):
        raise UnsupportedInMode(ROPE_IN_EXACT)
    assert head.rope is not None
    rope, arith = head.rope, r.arith

    def compute() -> IVector:
        out = list(x)
        for frequency, (a, b) in zip(rope.frequencies, rope.pairs(len(x))):
            c, s = rotation(arith, frequency, position)
            out[a] = r.round(add(scale(c, x[a]), scale(-s, x[b])))
            out[b] = r.round(add(scale(s, x[a]), scale(c, x[b])))
        return tuple(out)

    # the result stays in the memo's table, so its id (the score memo's key) is never reused
    return memo.get(("rotate", memo.hold(x), position, memo.hold(rope)), compute)


def attention_head(head: Head, z: list[IVector], r: _Rounding, memo: _Memo) -> HeadBounds:
    """interpreter.attention_head: q/k/v, scores, the keys that can win, weights and the head output."""
    n = len(z)
    # the interpreter computes no q and k for a uniform head; their bounds here are unused (the scores are 0)
    unrotated_queries = queries = [affine(head.query, head.query_bias, zi, r, memo) for zi in z]
    unrotated_keys = keys = [affine(head.key, head.key_bias, zi, r, memo) for zi in z]
    rotated = head.positional == "rope" and head.scoring != "uniform"
    if rotated:
        queries = [rotate(head, q, p, r, memo) for p, q in enumerate(queries)]
        keys = [rotate(head, k, p, r, memo) for p, k in enumerate(keys)]
    values = [affine(head.value, head.value_bias, zi, r, memo) for zi in z]
    rounded_terms = head.scoring == "softmax" and r.fixed and r.arith.rounded_terms
    round_score = (lambda iv: iv) if rounded_terms else r.round  # Yang et al.'s scores stay exact
    scores: list[list[Interval | None]] = []
    for i in range(n):
        check_deadline("while computing interval bounds")
        row: list[Interval | None] = []
        for j in range(n):
            if head.causal and j > i:
                row.append(None)
            elif head.scoring == "uniform":
                row.append(point(ZERO))  # the interpreter's trace shows 0 for every allowed key
            else:
                # q_i, k_j are shared objects (the affine memo): key by identity, not by value
                bias = head.relative_bias(j - i)
                row.append(
                    memo.get(
                        ("score", id(queries[i]), id(keys[j]), bias.numerator, bias.denominator),
                        lambda: round_score(add(dot_interval(queries[i], keys[j]), point(bias))),
                    )
                )
        scores.append(row)

    winners, weights, outputs = [], [], []
    for i in range(n):
        row = scores[i]
        live = [j for j, s in enumerate(row) if s is not None]
        if rounded_terms:
            _rounded_terms_row(head, r, row, live, values, i, winners, weights, outputs)
            continue
        if head.scoring == "uniform" or all(is_point(row[j]) for j in live):
            # the weights are known exactly: the arithmetic's own rule on the (point) scores
            exact = r.arith.attention_weights([None if s is None else s[0] for s in row], head.scoring)
            a = [w * head.relative_scale(j - i) for j, w in enumerate(exact)]
            winners.append(_point_winners(head, r, row, live))
            weights.append([point(w) for w in a])
            outputs.append(tuple(r.round(_weighted(a, values, c)) for c in range(head.value_dim)))
            continue
        live_keys = tuple((j, id(keys[j]), id(scores[i][j]), head.relative_bias(j - i)) for j in live)
        chosen = memo.get(
            ("winners", head.scoring, id(queries[i]), live_keys), lambda: _candidates(head, r, queries, keys, scores, i)
        )
        winners.append(chosen)
        if len(chosen) == 1:
            # a sole possible winner takes all the mass (hardmax: |M| = 1; softmax: w_j / W = 1), before and
            # after per-probability flooring (floor(2^f) / 2^f = 1)
            a = [ONE * head.relative_scale(j - i) if j == chosen[0] else ZERO for j in range(n)]
            weights.append([point(w) for w in a])
            outputs.append(tuple(r.round(_weighted(a, values, c)) for c in range(head.value_dim)))
            continue
        least_mass = ONE
        if r.fixed and r.arith.attention_rounding == "per-probability":
            # each floored weight loses less than 2^-f, and their sum is a multiple of 2^-f
            least_mass = max(ZERO, ONE - Fraction(len(chosen) - 1, r.arith.scale))
        if head.scoring == "softmax":
            box = softmax_weight_box(r, row, chosen)
            weights.append([scale(head.relative_scale(j - i), box.get(j, point(ZERO))) for j in range(n)])
            outputs.append(_knapsack_output(head, r, box, values, i, least_mass))
            continue
        weights.append(
            [scale(head.relative_scale(j - i), (ZERO, ONE)) if j in chosen else point(ZERO) for j in range(n)]
        )
        # sum_j a_j C_j v_j with a_j >= 0, sum_j a_j in [least_mass, 1]: between least_mass and 1 times the
        # hull of the scaled values C_j v_j of the winners (each distinct (C_j, v_j) once)
        distinct = {(head.relative_scale(j - i), id(values[j])): values[j] for j in chosen}
        outputs.append(
            memo.get(
                ("hull", tuple(distinct), least_mass),
                lambda: tuple(
                    r.round((min(lo, least_mass * lo), max(hi, least_mass * hi)))
                    for lo, hi in (
                        hull(scale(c_j, v[c]) for (c_j, _), v in distinct.items()) for c in range(head.value_dim)
                    )
                ),
            )
        )
    return HeadBounds(
        unrotated_queries,
        unrotated_keys,
        values,
        scores,
        winners,
        weights,
        outputs,
        queries if rotated else None,
        keys if rotated else None,
    )


def softmax_weight_box(r: _Rounding, row: list[Interval | None], keys: Sequence[int]) -> dict[int, Interval]:
    """Each weight w_j / W of a softmax row (``Fixed._softmax_weights``) over the score intervals, before URPE's C.

    With m the row maximum and d_j = m − s_j >= 0 (mantissas): d_j ∈ [max(0, max_k lo_k − hi_j), max_k hi_k − lo_j],
    so w_j = E[d_j] ∈ [E[d_hi], E[d_lo]] (the table is non-increasing, 0 beyond it); a_j = w_j / (w_j + R_j) grows
    with w_j and falls with R_j = Σ_{k≠j} w_k, and W >= E[0] = 2^f (the maximum's own term):
    a_j ∈ [wl_j / (wl_j + Σ_{k≠j} wh_k), wh_j / max(2^f, wh_j + Σ_{k≠j} wl_k)]; per-probability floors both ends.
    ``keys``: the keys that can get a nonzero weight (the others have none)."""
    arith = r.arith
    table = exp_table(arith.frac)

    def entry(d: int) -> int:
        return table[d] if d < len(table) else 0

    low = {j: arith.mantissa(row[j][0]) for j in keys}  # type: ignore[index]
    high = {j: arith.mantissa(row[j][1]) for j in keys}  # type: ignore[index]
    top_low, top_high = max(low.values()), max(high.values())
    w_lo = {j: entry(top_high - low[j]) for j in keys}
    w_hi = {j: entry(max(0, top_low - high[j])) for j in keys}
    sum_lo, sum_hi = sum(w_lo.values()), sum(w_hi.values())
    box = {}
    for j in keys:
        lo = Fraction(w_lo[j], w_lo[j] + sum_hi - w_hi[j]) if w_lo[j] else ZERO
        hi = Fraction(w_hi[j], max(table[0], w_hi[j] + sum_lo - w_lo[j]))
        if arith.attention_rounding == "per-probability":
            lo, hi = arith.floor(lo), arith.floor(hi)
        box[j] = (lo, hi)
    return box


def knapsack_max(box: Sequence[Interval], values: Sequence[Fraction], least: Fraction, most: Fraction) -> Fraction:
    """max Σ_j a_j·v_j over a_j ∈ box[j], Σ_j a_j ∈ [least, most]: the fractional knapsack's greedy (start at the
    lower ends, fill in decreasing v up to the optimal total: every positive item's room, clipped into [least,
    most]) is exact for this linear program."""
    order = sorted(range(len(values)), key=lambda j: values[j], reverse=True)
    base = sum((box[j][0] for j in order), ZERO)
    target = min(max(base + sum((box[j][1] - box[j][0] for j in order if values[j] > 0), ZERO), least), most)
    room, total = max(target - base, ZERO), ZERO
    for j in order:
        fill = min(room, box[j][1] - box[j][0])
        room -= fill
        total += (box[j][0] + fill) * values[j]
    return total


def _knapsack_output(
    head: Head, r: _Rounding, box: dict[int, Interval], values: list[IVector], i: int, least_mass: Fraction
) -> IVector:
    """Σ_j a_j C_j v_j over the weight box with Σ_j a_j ∈ [least_mass, 1], per coordinate (inside the winners' hull,
    which it never exceeds: a convex combination's maximum is at most the largest value), rounded."""
    keys = sorted(box)
    weights = [box[j] for j in keys]
    out = []
    for c in range(head.value_dim):
        scaled = [scale(head.relative_scale(j - i), values[j][c]) for j in keys]
        hi = knapsack_max(weights, [v[1] for v in scaled], least_mass, ONE)
        lo = -knapsack_max(weights, [-v[0] for v in scaled], least_mass, ONE)
        out.append(r.round((lo, hi)))
    return tuple(out)


def _rounded_terms_row(
    head: Head,
    r: _Rounding,
    row: list[Interval | None],
    live: list[int],
    values: list[IVector],
    i: int,
    winners: list,
    weights: list,
    outputs: list,
) -> None:
    """One query row of a rounded-terms softmax head (``Fixed.rounded_terms_row``).

    Its terms round(e^s·x) are floored one by one, so the output is no exact convex combination of the values.
    With E_j = e^{s_j}, P_j = floor_f(E_j) = E_j − π_j and T_j = floor_f(E_j x_j) = E_j x_j − τ_j (π, τ ∈ [0, 2^-f),
    while nothing saturates), ΣT / ΣP = Σ_j w_j x_j + Σ_j (π_j x_j − τ_j) / ΣP with w_j = P_j / ΣP a convex
    combination: the knapsack over w's box (P is monotone in s, ``floor_exp_times``) plus that error term, whose
    numerator lies in [Σ_j 2^-f·(min(0, x_lo) − 1), Σ_j 2^-f·max(0, x_hi)]. Where a term can saturate or ΣP can be
    0 (the uniform fallback), the bound is the format's range, which the interpreter saturates the output to.
    """
    if all(is_point(row[j]) for j in live) and all(is_point(values[j][c]) for j in live for c in range(head.value_dim)):
        contributions = [tuple(head.relative_scale(j - i) * iv[0] for iv in values[j]) for j in range(len(row))]
        shown, out = r.arith.rounded_terms_row([None if s is None else s[0] for s in row], contributions)
        winners.append(tuple(j for j in live if shown[j] != 0))
        weights.append([point(w) for w in shown])
        outputs.append(tuple(point(r.arith.saturate(x)) for x in out))
        return
    winners.append(tuple(live))
    bounded = _rounded_terms_bounds(head, r, row, live, values, i)
    if bounded is None:
        weights.append([(ZERO, ONE) if s is not None else point(ZERO) for s in row])
        outputs.append(tuple((r.arith.min_value, r.arith.max_value) for _ in range(head.value_dim)))
        return
    box, output = bounded
    weights.append([box.get(j, point(ZERO)) for j in range(len(row))])
    outputs.append(output)


def _rounded_terms_bounds(
    head: Head, r: _Rounding, row: list[Interval | None], live: list[int], values: list[IVector], i: int
) -> tuple[dict[int, Interval], IVector] | None:
    """The weight box and output of a rounded-terms row (``_rounded_terms_row``), or None where a term can
    saturate or the denominator can be 0."""
    arith = r.arith
    unit = arith.scale
    if any(row[j][1] > SATURATING_EXPONENT for j in live):  # type: ignore[index]
        return None
    p_lo = {j: floor_exp_times(row[j][0], Fraction(unit)) for j in live}  # type: ignore[index]
    p_hi = {j: floor_exp_times(row[j][1], Fraction(unit)) for j in live}  # type: ignore[index]
    if sum(p_lo.values()) == 0 or max(p_hi.values()) > arith.max_mantissa:
        return None
    contributions = {j: [scale(head.relative_scale(j - i), v) for v in values[j]] for j in live}
    for j in live:
        for lo, hi in contributions[j]:
            top = max(-lo, hi)
            if top and floor_exp_times(row[j][1], top * unit) + 1 > arith.max_mantissa:  # type: ignore[index]
                return None
    total_lo, total_hi = sum(p_lo.values()), sum(p_hi.values())
    box = {
        j: (Fraction(p_lo[j], p_lo[j] + total_hi - p_hi[j]), Fraction(p_hi[j], p_hi[j] + total_lo - p_lo[j]))
        for j in live
    }
    weights = [box[j] for j in live]
    output = []
    for c in range(head.value_dim):
        xs = [contributions[j][c] for j in live]
        hi = knapsack_max(weights, [x[1] for x in xs], ONE, ONE)
        lo = -knapsack_max(weights, [-x[0] for x in xs], ONE, ONE)
        # the error term, over ΣP ∈ [total_lo, total_hi] mantissas (ΣP in values: total / 2^f)
        err_lo = sum((min(ZERO, x[0]) - 1 for x in xs), ZERO) / total_lo
        err_hi = sum((max(ZERO, x[1]) for x in xs), ZERO) / total_lo
        output.append(r.saturate(r.round((lo + err_lo, hi + err_hi))))
    return box, tuple(output)


def _point_winners(head: Head, r: _Rounding, row: list[Interval | None], live: list[int]) -> tuple[int, ...]:
    """With point scores: hardmax's argmax set, softmax's keys with a nonzero table entry, uniform's live keys."""
    if head.scoring == "uniform":
        return tuple(live)
    top = max(row[j][0] for j in live)
    if head.scoring == "hardmax":
        return tuple(j for j in live if row[j][0] == top)
    reach = Fraction(len(exp_table(r.arith.frac)), r.arith.scale)
    return tuple(j for j in live if top - row[j][0] < reach)


def _weighted(weights: list[Fraction], values: list[IVector], c: int) -> Interval:
    lo = hi = ZERO
    for w, v in zip(weights, values):
        if w:
            part = scale(w, v[c])
            lo += part[0]
            hi += part[1]
    return lo, hi


def attention_layer(
    layer: AttentionLayer, z: list[IVector], r: _Rounding, memo: _Memo, block: BlockBounds
) -> list[IVector]:
    """interpreter.attention_layer: the output projection on the heads' intervals, then the residual (and the
    LayerNorm before the heads or after the residual)."""
    inputs = z
    if layer.norm is not None and layer.norm_first:
        inputs = block.attention_norm = layer_norm(layer.norm, z, r, memo)
    block.heads = [attention_head(h, inputs, r, memo) for h in layer.heads]
    weights = tuple(tuple(w for head in layer.heads for w in head.output[c]) for c in range(len(layer.output_bias)))
    projected = []
    for i in range(len(z)):
        concatenated = tuple(iv for hb in block.heads for iv in hb.output[i])
        projected.append(affine(weights, layer.output_bias, concatenated, r, memo))
    block.attention_output = projected
    out = residual(z, projected, layer.residual, r)
    if layer.norm is not None and not layer.norm_first:
        block.before_attention_norm = out
        out = block.attention_norm = layer_norm(layer.norm, out, r, memo)
    return out


def feed_forward(ff: FeedForward, z: list[IVector], r: _Rounding, memo: _Memo, block: BlockBounds) -> list[IVector]:
    """interpreter.feed_forward: act(W1 z + b1) (ReLU is monotone; i-GELU: ``activation``), then W2 h + b2 and
    the residual (and the LayerNorm before W1 or after the residual)."""
    inputs = z
    if ff.norm is not None and ff.norm_first:
        inputs = block.feed_forward_norm = layer_norm(ff.norm, z, r, memo)
    block.pre_activation = [affine(ff.w1, ff.b1, zi, r, memo) for zi in inputs]
    hidden = [tuple(activation(ff.activation, iv, r) for iv in pre) for pre in block.pre_activation]
    block.hidden = hidden
    out = [affine(ff.w2, ff.b2, h, r, memo) for h in hidden]
    block.feed_forward_output = out
    out = residual(z, out, ff.residual, r)
    if ff.norm is not None and not ff.norm_first:
        block.before_feed_forward_norm = out
        out = block.feed_forward_norm = layer_norm(ff.norm, out, r, memo)
    return out


def activation(name: str, iv: Interval, r: _Rounding) -> Interval:
    """interpreter.activation on an interval: ReLU (monotone), or i-GELU rounded at both ends (round is monotone;
    a point is the interpreter's value)."""
    if name == "relu":
        return max(iv[0], ZERO), max(iv[1], ZERO)
    if name != "i-gelu":
        raise ValueError(f"unknown activation {name!r}")
    if is_point(iv):
        return r.round(point(igelu(iv[0])))
    return r.round(igelu_bounds(*iv))


def layer_norm(norm: LayerNorm, z: list[IVector], r: _Rounding, memo: _Memo) -> list[IVector]:
    """interpreter.layer_norm per position (fixed arithmetic only, like the interpreter)."""
    if not r.fixed:
        raise UnsupportedInMode(
            "LayerNorm divides by a square root, which is irrational in exact arithmetic; use "
            "arithmetic: fixed (integer square root, docs/semantics.md)"
        )
    return [memo.get(("norm", memo.hold(norm), memo.hold(zi)), lambda zi=zi: layer_norm_box(norm, zi, r)) for zi in z]


def layer_norm_box(norm: LayerNorm, x: IVector, r: _Rounding) -> IVector:
    """LayerNorm's output interval for one position's box ``x``: exact for a point box on the grid, else sound.

    n_c·2^f = floor(y_c·4^f / (d·max(s, 1))) with y_c = d·x_c − Σx (mantissas) and s = isqrt(V) >= isqrt(floor(eps·
    16^f)) (V >= floor(eps·16^f) since the variance term is >= 0): a floor division of y_c by a divisor at least
    d·s_min, so n_c lies between 0 and floor(y·4^f / (d·s_min)) at y_c's interval ends; and |n_c·2^f| <=
    ``normalized_bound`` always. Then saturation and round(gamma_c·n_c + beta_c), all monotone in n_c.
    """
    arith = r.arith
    d, frac, scale_ = len(x), arith.frac, arith.scale
    if all(is_point(iv) and (iv[0] * scale_).denominator == 1 for iv in x):
        mantissas = layer_norm_mantissas([arith.mantissa(iv[0]) for iv in x], frac, norm.eps)
        normalized = [arith.saturate(Fraction(m, scale_)) for m in mantissas]
        return tuple(point(arith.round(g * n + b)) for g, n, b in zip(norm.gamma, normalized, norm.beta))
    # mantissa intervals, rounded outward (the interpreter only ever sees grid values inside them)
    lows = [math.floor(lo * scale_) for lo, _ in x]
    highs = [math.ceil(hi * scale_) for _, hi in x]
    total_low, total_high = sum(lows), sum(highs)
    divisor = d * max(math.isqrt(math.floor(norm.eps * (1 << (4 * frac)))), 1)
    cap = normalized_bound(d, frac)
    out = []
    for c, (g, b) in enumerate(zip(norm.gamma, norm.beta)):
        # y_c = (d − 1)·x_c − Σ_{c' != c} x_c'
        y_low = (d - 1) * lows[c] - (total_high - highs[c])
        y_high = (d - 1) * highs[c] - (total_low - lows[c])
        n_low = max(((y_low << (2 * frac)) // divisor) if y_low < 0 else 0, -cap)
        n_high = min(((y_high << (2 * frac)) // divisor) if y_high > 0 else 0, cap)
        normalized = r.saturate((Fraction(n_low, scale_), Fraction(n_high, scale_)))
        out.append(r.round(add(scale(g, normalized), point(b))))
    return tuple(out)


def residual(z: list[IVector], update: list[IVector], enabled: bool, r: _Rounding) -> list[IVector]:
    """interpreter.residual: saturate(z + o) per coordinate (or o alone without the residual)."""
    if not enabled:
        return update
    return [tuple(r.saturate(add(a, b)) for a, b in zip(zi, ui)) for zi, ui in zip(z, update)]


def readout(model: Model, z: list[IVector]) -> list[Interval]:
    """interpreter.readout: u . z, exact."""
    return [affine_interval((model.readout,), (ZERO,), zi)[0] for zi in z]


def cube_bounds(model: Model, arith: Arithmetic, cube: Cube) -> Bounds:
    """Interval bounds of every stage of ``semantics.evaluate`` over every input of ``cube`` (module docstring)."""
    r = _Rounding(arith)
    memo = _Memo()
    z = [memo.get(("box", box), lambda: box) for box in embed(model, cube, r)]  # equal positions: one object
    embedded = z
    blocks: list[BlockBounds] = []
    for block in model.blocks:
        bb = BlockBounds()
        if block.attention is not None:
            z = attention_layer(block.attention, z, r, memo, bb)
            bb.after_attention = z
        if block.feed_forward is not None:
            z = feed_forward(block.feed_forward, z, r, memo, bb)
            bb.after_feed_forward = z
        if bb.after_attention is None and bb.after_feed_forward is None:
            bb.after_attention = z
        blocks.append(bb)
    before_final = None
    if model.final_norm is not None:
        before_final, z = z, layer_norm(model.final_norm, z, r, memo)
    return Bounds(cube, embedded, blocks, z, readout(model, z), before_final)

"""The SMT encoder: the reference interpreter (verify_tf/semantics/interpreter.py) written over z3 terms.

Read the two files side by side: ``encode_affine`` ↔ ``affine``, ``encode_embed`` ↔ ``embed``,
``encode_attention_head`` ↔ ``attention_head``, ``encode_attention_layer`` ↔ ``attention_layer``,
``encode_feed_forward`` ↔ ``feed_forward``, ``encode_activation`` ↔ ``activation``, ``encode_layer_norm`` ↔
``layer_norm``, ``encode_readout`` ↔ ``readout``, ``encode_model`` ↔ ``evaluate``. Each returns symbolic values
(``values.Sym``: an Int term over a constant denominator) with the same rounding points as the interpreter,
and ``encode_model`` returns a ``SymTrace`` with the same fields as the interpreter's ``Trace``, so a property
can constrain any layer.

Attention weights are obtained from the arithmetic object itself wherever they do not depend on the
scores (uniform; hardmax for a given argmax-set size), so the encoder cannot drift from the semantics on
tie averaging or per-probability rounding. Hardmax: argmax indicators m_ij = ∧_k s_ij ≥ s_ik over the
candidates that interval bounds cannot rule out; the average over the argmax set is written without a
symbolic division, as a case split on the argmax count with constants inside the branches
(../shared/research/smt-encoding.md: "lcm scaling beat cross-multiplication 2-10x"). Softmax (fixed only):
the exp table as an ite chain over the mantissa difference max − s_j, exact sums, and the one rounded
division by the symbolic row sum linearised through the bits of the bounded quotient. LayerNorm (fixed only):
exact integer sums and squares, the integer square root built bit by bit as a function of the radicand
(``Builder.isqrt``), and the one floor division by the symbolic d·max(s, 1) like the softmax division.
i-GELU: in fixed arithmetic an ite chain over the mantissa holding the interpreter's own values (at most
``IGELU_TABLE_ENTRIES`` mantissas inside the clip); otherwise the exact piecewise cubic, x² and x³ through the
bits of x, cases pruned by interval bounds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import z3

from ..ir import AlphabetTokens, AttentionLayer, FeedForward, Head, LayerNorm, Matrix, Model, Vector
from ..semantics.arithmetic import SATURATING_EXPONENT, Arithmetic, Exact, Fixed
from ..semantics.exp_table import exp_bracket, exp_table
from ..semantics.interpreter import ROPE_IN_EXACT, rotation
from ..semantics.nonlinear import IGELU_A, IGELU_B, IGELU_CLIP, IGELU_K, igelu, igelu_bounds, normalized_bound
from .bounds import interval_hull
from .inputs import SymbolicInput, SymToken
from .values import Builder, NotEncodable, Sym, Term, _sum, canonical_order, to_z3

SymVector = tuple[Sym, ...]


@dataclass
class SymHeadTrace:
    scores: list[list[Sym | None]]  # None where the causal mask hides j
    weights: list[list[Sym | None]]  # a'_ij; None where not linear (softmax exact-sums: e_ij / Σe)
    output: list[SymVector]


@dataclass
class SymBlockTrace:
    heads: list[SymHeadTrace] = field(default_factory=list)
    attention_output: list[SymVector] | None = None
    after_attention: list[SymVector] | None = None
    hidden: list[SymVector] | None = None
    after_feed_forward: list[SymVector] | None = None
    hidden_input: list[SymVector] | None = None  # W1 z + b1 rounded: the activation's input (its bounds are reported)
    attention_norm: list[SymVector] | None = None
    feed_forward_norm: list[SymVector] | None = None

    @property
    def output(self) -> list[SymVector]:
        return self.after_feed_forward if self.after_feed_forward is not None else self.after_attention


@dataclass
class SymTrace:
    embedded: list[SymVector]
    blocks: list[SymBlockTrace]
    output: list[SymVector]
    readout: list[Sym]
    before_final_norm: list[SymVector] | None = None


class Rounding:
    """The arithmetic's rounding on symbolic values (the interpreter's ``_Counter``)."""

    def __init__(self, arith: Arithmetic, builder: Builder) -> None:
        self.arith, self.builder = arith, builder

    def round(self, x: Sym) -> Sym:
        if isinstance(self.arith, Exact):
            return x
        return self.saturate(self.builder.floor_to(x, self.arith.scale))

    def saturate(self, x: Sym) -> Sym:
        if isinstance(self.arith, Exact):
            return x
        return self.builder.saturate(x, self.arith.min_value, self.arith.max_value)


def encode_affine(weights: Matrix, x: Sequence[Sym], bias: Vector, r: Rounding) -> SymVector:
    """round(W x + b), one rounding per output coordinate."""
    return tuple(r.round(r.builder.linear(list(zip(row, x)), b)) for row, b in zip(weights, bias))


def encode_embed(model: Model, tokens: Sequence[SymToken], r: Rounding) -> list[SymVector]:
    """Token vectors (grid coordinates, or the embedding row selected by an ite chain) plus absolute PE."""
    vectors: list[SymVector] = []
    for token in tokens:
        if token.coords is not None:
            vectors.append(token.coords)
        elif token.symbol is not None:
            vectors.append(tuple(Sym.const(c) for c in _embedding(model, token.symbol)))
        else:
            rows = [_embedding(model, s) for s in token.alphabet]
            vectors.append(
                tuple(
                    r.builder.select(
                        [(token.symbol_index == k, Sym.const(row[c])) for k, row in enumerate(rows[:-1])],
                        Sym.const(rows[-1][c]),
                    )
                    for c in range(model.dim)
                )
            )
    pe = model.positional_encoding
    if pe is None:
        return vectors
    if len(tokens) > len(pe):
        raise NotEncodable(f"input length {len(tokens)} exceeds the positional encoding's {len(pe)} positions")
    return [tuple(r.saturate(r.builder.add(a, Sym.const(b))) for a, b in zip(v, pe[i])) for i, v in enumerate(vectors)]


def _embedding(model: Model, symbol: str) -> Vector:
    assert isinstance(model.tokens, AlphabetTokens)
    return model.tokens.embed(symbol)


def encode_attention_head(head: Head, z: list[SymVector], r: Rounding) -> SymHeadTrace:
    b = r.builder
    n = len(z)
    uniform = head.scoring == "uniform"  # its weights ignore the scores: q and k are not computed at all
    rounded_terms = head.scoring == "softmax" and isinstance(r.arith, Fixed) and r.arith.rounded_terms
    queries = [] if uniform else [encode_affine(head.query, zi, head.query_bias, r) for zi in z]
    keys = [] if uniform else [encode_affine(head.key, zi, head.key_bias, r) for zi in z]
    if head.positional == "rope" and not uniform:
        queries = [encode_rotation(head, q, p, r) for p, q in enumerate(queries)]
        keys = [encode_rotation(head, k, p, r) for p, k in enumerate(keys)]
    values = [encode_affine(head.value, zi, head.value_bias, r) for zi in z]
    scores: list[list[Sym | None]] = []
    weights: list[list[Sym | None]] = []
    outputs: list[SymVector] = []
    for i in range(n):
        row: list[Sym | None] = []
        for j in range(n):
            if head.causal and j > i:
                row.append(None)
            elif uniform:
                row.append(Sym.const(0))
            else:
                products = [b.mul(qc, kc) for qc, kc in zip(queries[i], keys[j])]
                dot = b.linear([(Fraction(1), p) for p in products], head.relative_bias(j - i))
                row.append(dot if rounded_terms else r.round(dot))
        # the value each key contributes, already multiplied by URPE's C[j - i] (a constant)
        scaled_values = [tuple(b.scale(head.relative_scale(j - i), vc) for vc in values[j]) for j in range(n)]
        if rounded_terms:
            row_weights, pre = _rounded_terms_row(row, scaled_values, head.value_dim, r)
        elif head.scoring == "softmax":
            row_weights, pre = _softmax_row(row, scaled_values, head.value_dim, r)
        else:
            row_weights, pre = _average_row(row, scaled_values, head.value_dim, head.scoring, r)
        weights.append(
            [None if w is None else b.scale(head.relative_scale(j - i), w) for j, w in enumerate(row_weights)]
        )
        scores.append(row)
        outputs.append(tuple(r.round(p) for p in pre))
    return SymHeadTrace(scores, weights, outputs)


def encode_rotation(head: Head, x: SymVector, position: int, r: Rounding) -> SymVector:
    """interpreter.rotate: each pair (a, b) becomes (round(x_a·c − x_b·s), round(x_a·s + x_b·c)) with the rotation
    table's constants (c, s) at the stream position."""
    if not isinstance(r.arith, Fixed):
        raise NotEncodable(ROPE_IN_EXACT)
    assert head.rope is not None
    out = list(x)
    for frequency, (a, b) in zip(head.rope.frequencies, head.rope.pairs(len(x))):
        c, s = rotation(r.arith, frequency, position)
        out[a] = r.round(r.builder.linear([(c, x[a]), (-s, x[b])], Fraction(0)))
        out[b] = r.round(r.builder.linear([(s, x[a]), (c, x[b])], Fraction(0)))
    return tuple(out)


def _average_row(
    row: list[Sym | None], scaled_values: list[SymVector], value_dim: int, scoring: str, r: Rounding
) -> tuple[list[Sym | None], list[Sym]]:
    """hardmax / uniform: weights 1/|set| on the argmax set (or all unmasked keys), as the arithmetic rounds them.

    Returns the row's weights a_ij (before URPE scaling) and the head's pre-rounding output Σ_j a_ij C v_j.
    """
    b = r.builder
    allowed = [j for j, s in enumerate(row) if s is not None]
    # weight_for[k]: the normalised weight of each member of a k-element averaging set, from the semantics
    weight_for = {k: r.arith.attention_weights([Fraction(0)] * k, "hardmax")[0] for k in range(1, len(allowed) + 1)}
    if scoring == "uniform":
        w = weight_for[len(allowed)]
        weights = [Sym.const(w if s is not None else 0) for s in row]
        pre = [b.linear([(w, scaled_values[j][c]) for j in allowed]) for c in range(value_dim)]
        return weights, pre
    if scoring != "hardmax":
        raise NotEncodable(f"unknown scoring {scoring!r}")
    # candidates: keys whose score can still reach the row maximum (interval bounds)
    best_lower = max(row[j].lo for j in allowed)
    candidates = [j for j in allowed if row[j].hi >= best_lower]
    b.stats.argmax_candidates += len(allowed)
    b.stats.argmax_pruned += len(allowed) - len(candidates)
    den = math.lcm(*(row[j].den for j in candidates))
    mantissa = {j: to_z3(row[j].scaled_num(den)) for j in candidates}
    if len(candidates) == 1:
        member = {candidates[0]: z3.BoolVal(True)}
    else:
        member = {
            j: z3.And(canonical_order([mantissa[j] >= mantissa[k] for k in candidates if k != j])) for j in candidates
        }
    count = _sum([z3.If(member[j], z3.IntVal(1), z3.IntVal(0)) for j in candidates]) if len(candidates) > 1 else 1
    sizes = list(range(1, len(candidates) + 1))
    common = math.lcm(*(weight_for[k].denominator for k in sizes))

    def by_count(scale_of: dict[int, int], base: Term) -> Term:
        """If(count == 1, base·scale_1, If(count == 2, base·scale_2, ...)): constants inside the branches."""
        if isinstance(count, int):
            return base * scale_of[count]
        term = to_z3(base) * scale_of[sizes[-1]]
        for k in reversed(sizes[:-1]):
            term = z3.If(count == k, to_z3(base) * scale_of[k], term)
        return term

    numerators = {k: int(weight_for[k] * common) for k in sizes}
    weights: list[Sym | None] = []
    for j, _s in enumerate(row):
        if j not in member:
            weights.append(Sym.const(0))
            continue
        num = z3.If(member[j], to_z3(by_count(numerators, 1)), z3.IntVal(0))
        weights.append(Sym(num, common, Fraction(0), max(weight_for.values())))
    full = all(weight_for[k] * k == 1 for k in sizes)  # weights on the set sum to exactly 1
    pre: list[Sym] = []
    for c in range(value_dim):
        members = [scaled_values[j][c] for j in candidates]
        vden = math.lcm(*(v.den for v in members))
        chosen = [z3.If(member[j], to_z3(scaled_values[j][c].scaled_num(vden)), z3.IntVal(0)) for j in candidates]
        total = _sum(chosen)
        lo, hi = interval_hull([(v.lo, v.hi) for v in members])
        if not full:
            lo, hi = min(lo, Fraction(0)), max(hi, Fraction(0))
        pre.append(Sym(by_count(numerators, total), vden * common, lo, hi))
    return weights, pre


def _softmax_row(
    row: list[Sym | None], scaled_values: list[SymVector], value_dim: int, r: Rounding
) -> tuple[list[Sym | None], list[Sym]]:
    """Fixed-point softmax: E[(max - s_j)·2^f] from the exp table, exact sums, one rounded division."""
    arith = r.arith
    if not isinstance(arith, Fixed):
        raise NotEncodable("softmax needs fixed arithmetic")
    b = r.builder
    scale = arith.scale
    allowed = [j for j, s in enumerate(row) if s is not None]
    mant = {j: Sym(row[j].scaled_num(scale), 1, row[j].lo * scale, row[j].hi * scale) for j in allowed}
    top = _maximum(b, [mant[j] for j in allowed])
    table = exp_table(arith.frac)
    exps: dict[int, Sym] = {}
    for j in allowed:
        diff = b.linear([(Fraction(1), top), (Fraction(-1), mant[j])])  # the mantissa of max - s_j, >= 0
        exps[j] = _exp_lookup(b, diff, table)
    total = b.linear([(Fraction(1), exps[j]) for j in allowed])
    # the maximal key contributes E[0] = 2^f, the others >= 0: the row sum is at least 2^f
    total = Sym(total.num, total.den, max(total.lo, Fraction(scale)), total.hi)
    if arith.attention_rounding == "per-probability":
        probabilities = {j: b.floor_div(b.scale(scale, exps[j]), total, 0, scale) for j in allowed}
        weights = [
            Sym(probabilities[j].num, scale, Fraction(0), Fraction(1)) if j in probabilities else Sym.const(0)
            for j in range(len(row))
        ]
        pre = [
            b.linear([(Fraction(1), b.mul(weights[j], scaled_values[j][c])) for j in allowed]) for c in range(value_dim)
        ]
        return weights, pre
    # exact sums: head = floor(2^f · Σ_j e_j C v_j / Σ_j e_j) / 2^f, one division by the symbolic row sum
    pre: list[Sym] = []
    for c in range(value_dim):
        members = [scaled_values[j][c] for j in allowed]
        weighted = b.linear([(Fraction(1), b.mul(exps[j], scaled_values[j][c])) for j in allowed])
        lo, hi = interval_hull([(v.lo, v.hi) for v in members])  # a convex combination of the values
        q = b.floor_div(b.scale(scale, weighted), total, math.floor(lo * scale), math.floor(hi * scale))
        # q is already the floored mantissa; the caller's round() finds nothing left to floor
        pre.append(Sym(q.num, scale, Fraction(math.floor(lo * scale), scale), Fraction(math.floor(hi * scale), scale)))
    return [None] * len(row), pre


ROUNDED_TERMS_VALUES = 2048  # distinct values one exact score may take before the encoding gives up


def _rounded_terms_row(
    row: list[Sym | None], scaled_values: list[SymVector], value_dim: int, r: Rounding
) -> tuple[list[Sym | None], list[Sym]]:
    """Yang et al.'s head output c = round(Σ_j round(e^{s_j}·x_j) / Σ_j round(e^{s_j})) (arithmetic.py).

    Each exact score takes finitely many values (its interval over its denominator); per value the terms are
    constants or a floor of e^s times a symbolic contribution x. That floor of an irrational multiple is
    over-approximated soundly: a fresh integer t with t <= hi·X and t + 1 > lo·X for X >= 0 (lo < e^s < hi,
    60 digits; mirrored for X < 0), which admits only the true floor unless e^s·X lies within 10^-60 of an
    integer. An ``unsat`` remains a proof, and a ``sat`` is replayed (the builder is marked inexact, so a spurious
    one is unknown, never an error or a refutation). The division by the symbolic row sum is the bounded quotient of
    ``Builder.floor_div``; a zero row sum falls back to the uniform average, as the semantics says.
    """
    arith = r.arith
    assert isinstance(arith, Fixed)
    b = r.builder
    scale = arith.scale
    allowed = [j for j, s in enumerate(row) if s is not None]
    cases = {j: _score_values(row[j]) for j in allowed}
    exp_terms = {
        j: _choose(b, row[j], cases[j], lambda value: arith.rounded_term(value, Fraction(1)) * scale) for j in allowed
    }  # round(e^{s_j}) as a mantissa over 2^f
    total = b.linear([(Fraction(1), exp_terms[j]) for j in allowed])
    zero_total = total.num == 0 if not total.is_const else z3.BoolVal(total.value == 0)
    safe_total = Sym(
        z3.If(zero_total, z3.IntVal(1), to_z3(total.num)) if not total.is_const else max(total.num, 1),
        total.den,
        max(Fraction(1), total.lo),
        max(Fraction(1), total.hi),
    )
    pre: list[Sym] = []
    for c in range(value_dim):
        terms = [_rounded_product(b, arith, row[j], cases[j], scaled_values[j][c]) for j in allowed]
        summed = b.linear([(Fraction(1), t) for t in terms])  # Σ round(e^s x) as a mantissa over 2^f
        bound = max(abs(summed.lo), abs(summed.hi)) * scale
        quotient = b.floor_div(b.scale(scale, summed), safe_total, -math.ceil(bound), math.ceil(bound))
        uniform = r.round(b.linear([(Fraction(1, len(allowed)), scaled_values[j][c]) for j in allowed]))
        lo, hi = min(quotient.lo / scale, uniform.lo), max(quotient.hi / scale, uniform.hi)
        den = math.lcm(scale, uniform.den)
        chosen = z3.If(zero_total, to_z3(uniform.scaled_num(den)), to_z3(quotient.num) * (den // scale))
        pre.append(Sym(chosen, den, lo, hi))
    return [None] * len(row), pre


def _score_values(score: Sym) -> list[Fraction]:
    low, high = score.num_bounds
    if high - low + 1 > ROUNDED_TERMS_VALUES:
        raise NotEncodable(
            f"rounded-terms attention: a score ranges over {high - low + 1} values (more than {ROUNDED_TERMS_VALUES})"
        )
    return [Fraction(k, score.den) for k in range(low, high + 1)]


def _choose(b: Builder, score: Sym, values: list[Fraction], constant) -> Sym:
    """The integer ``constant(s)`` for the score's actual value s: an ite chain over its possible values."""
    if score.is_const:
        return Sym.const(constant(score.value))
    pairs = [(score.num == int(v * score.den), Sym.const(constant(v))) for v in values[:-1]]
    return b.select(pairs, Sym.const(constant(values[-1])))


def _rounded_product(b: Builder, arith: Fixed, score: Sym, values: list[Fraction], x: Sym) -> Sym:
    """round(e^s · x) as a mantissa over 2^f (saturated), s ranging over ``values``."""
    scale = arith.scale
    low, high = arith.min_mantissa, arith.max_mantissa
    if x.is_const or score.is_const:
        if x.is_const and score.is_const:
            return Sym.const(arith.rounded_term(score.value, x.value) * scale)
        if x.is_const:
            return _choose(b, score, values, lambda value: arith.rounded_term(value, x.value) * scale)
    # X = x · 2^f as num/den; t = floor(e^s · X) with lo_s·X <= e^s·X <= hi_s·X (X >= 0; reversed for X < 0)
    b.inexact = True
    t = b.fresh_int("rounded-term", -(1 << 400), 1 << 400)
    numerator = to_z3(x.scaled_num(x.den))
    upper, lower = [], []
    for value in values:
        if value > SATURATING_EXPONENT:
            continue
        lo, hi = exp_bracket(value)
        # t <= e^s·X < t + 1 with e^s·X in [lo·X, hi·X] (X >= 0) or [hi·X, lo·X] (X < 0), X = num·2^f / den,
        # cross-multiplied so every inequality is linear
        matches = score.num == int(value * score.den) if not score.is_const else z3.BoolVal(True)
        hi_num, hi_den = (hi * scale).numerator, (hi * scale).denominator * x.den
        lo_num, lo_den = (lo * scale).numerator, (lo * scale).denominator * x.den
        upper.append(
            z3.Implies(
                matches, z3.If(numerator >= 0, t * hi_den <= hi_num * numerator, t * lo_den <= lo_num * numerator)
            )
        )
        lower.append(
            z3.Implies(
                matches,
                z3.If(numerator >= 0, (t + 1) * lo_den > lo_num * numerator, (t + 1) * hi_den > hi_num * numerator),
            )
        )
    b.assertions.extend(upper + lower)
    saturate_high = [score.num == int(v * score.den) for v in values if v > SATURATING_EXPONENT]
    term = z3.If(t > high, z3.IntVal(high), z3.If(t < low, z3.IntVal(low), t))
    if saturate_high:
        huge = z3.If(numerator > 0, z3.IntVal(high), z3.If(numerator < 0, z3.IntVal(low), z3.IntVal(0)))
        term = z3.If(z3.Or(saturate_high), huge, term)
    return Sym(term, 1, Fraction(low), Fraction(high))


def _maximum(b: Builder, items: list[Sym]) -> Sym:
    """max of integer-valued symbols (den 1) as an ite fold: a function of the inputs, no fresh variable."""
    # canonical order (constants first, then by structure), so permuted rows give the same term
    terms = {x.num.get_id(): x.num for x in items if not x.is_const}
    rank = {t.get_id(): k for k, t in enumerate(canonical_order(list(terms.values())))}
    items = sorted(items, key=lambda x: (not x.is_const, x.num if x.is_const else rank[x.num.get_id()]))
    best = items[0]
    for x in items[1:]:
        if best.is_const and x.is_const:
            best = best if best.value >= x.value else x
            continue
        term = z3.If(to_z3(best.num) >= to_z3(x.num), to_z3(best.num), to_z3(x.num))
        best = Sym(term, 1, max(best.lo, x.lo), max(best.hi, x.hi))
    return best


def _exp_lookup(b: Builder, diff: Sym, table: tuple[int, ...]) -> Sym:
    """E[t] as an ite chain over t in the interval of ``diff`` (0 beyond the table)."""
    lo, hi = max(0, math.ceil(diff.lo)), math.floor(diff.hi)

    def entry(t: int) -> int:
        return table[t] if t < len(table) else 0

    if diff.is_const:
        return Sym.const(entry(int(diff.value)))
    if lo >= len(table):
        return Sym.const(0)
    last = min(hi, len(table))  # every t >= len(table) gives 0, as does t == len(table)
    values = [entry(t) for t in range(lo, last + 1)]
    term: Term = z3.IntVal(values[-1])
    for t in range(last - 1, lo - 1, -1):
        b.tick()
        term = z3.If(diff.num == t, z3.IntVal(entry(t)), term)
    return Sym(term, 1, Fraction(min(values)), Fraction(max(values)))


def encode_layer_norm(norm: LayerNorm, z: list[SymVector], r: Rounding) -> list[SymVector]:
    """LayerNorm per position (semantics/nonlinear.py): integer mean and variance, floor(√V), one floor division."""
    arith = r.arith
    if not isinstance(arith, Fixed):
        raise NotEncodable("LayerNorm needs fixed arithmetic (a square root is irrational in exact arithmetic)")
    b = r.builder
    frac, scale = arith.frac, arith.scale
    out: list[SymVector] = []
    for zi in z:
        d = len(zi)
        # integer mantissas x_c (every stored value is a multiple of 2^-f in fixed arithmetic)
        grid = [x if scale % x.den == 0 else b.floor_to(x, scale) for x in zi]
        m = [
            Sym(x.scaled_num(scale), 1, Fraction(math.ceil(x.lo * scale)), Fraction(math.floor(x.hi * scale)))
            for x in grid
        ]
        total = b.linear([(Fraction(1), mc) for mc in m])
        # Q = Σ_c (d·x_c − S)² = d²·Σ x_c² − d·S² = d³·4^f·Var, in [0, d³·(max − min)²/4] (Popoviciu)
        squares = b.linear([(Fraction(d * d), b.mul(mc, mc)) for mc in m] + [(Fraction(-d), b.mul(total, total))])
        spread = max(mc.hi for mc in m) - min(mc.lo for mc in m)
        squares = Sym(squares.num, squares.den, Fraction(0), min(squares.hi, d**3 * spread * spread / 4))
        radicand = b.floor_to(b.linear([(Fraction(1 << (2 * frac), d**3), squares)], norm.eps * (1 << (4 * frac))), 1)
        root = b.isqrt(radicand)
        if root.lo < 1:  # max(s, 1): s = 0 only when the variance is below 2^-4f
            root = Sym(z3.If(to_z3(root.num) >= 1, to_z3(root.num), z3.IntVal(1)), 1, Fraction(1), max(root.hi, 1))
        divisor = b.scale(Fraction(d), root)
        limit = normalized_bound(d, frac)
        normalized = []
        for c in range(d):
            centred = b.linear([(Fraction(d - 1 if k == c else -1), mk) for k, mk in enumerate(m)])
            numerator = b.scale(Fraction(1 << (2 * frac)), centred)
            corners = [
                numerator.lo / divisor.lo,
                numerator.lo / divisor.hi,
                numerator.hi / divisor.lo,
                numerator.hi / divisor.hi,
            ]
            lo, hi = max(math.floor(min(corners)), -limit), min(math.floor(max(corners)), limit)
            q = b.floor_div(numerator, divisor, lo, hi)
            normalized.append(r.saturate(Sym(q.num, scale, Fraction(lo, scale), Fraction(hi, scale))))
        out.append(tuple(r.round(b.linear([(g, n)], beta)) for g, n, beta in zip(norm.gamma, normalized, norm.beta)))
    return out


def encode_activation(name: str, h: Sym, r: Rounding) -> Sym:
    """relu, or i-GELU: a table over the mantissa in fixed arithmetic (``_igelu_table``), else
    If(x >= c, x, If(x <= -c, 0, If(x >= 0, P(x), N(x)))) with the exact cubics P, N, rounded."""
    b = r.builder
    if name == "relu":
        return b.relu(h)
    if name != "i-gelu":
        raise NotEncodable(f"unknown activation {name!r}")
    if h.is_const:
        return r.round(Sym.const(igelu(h.value)))
    if h.hi <= -IGELU_CLIP:
        return Sym.const(0)
    if h.lo >= IGELU_CLIP:
        return r.round(h)
    if isinstance(r.arith, Fixed):
        table = _igelu_table(h, r)
        if table is not None:
            return table
    a, beta, k = IGELU_A, IGELU_B, IGELU_K
    square = b.mul(h, h)
    cube = b.mul(square, h)
    # x >= 0: x + (a/2)·x·(x/k + b)²;  x < 0: −(a/2)·x·(x/k − b)²  (docs/semantics.md, i-GELU)
    positive = b.linear([(a / (2 * k * k), cube), (a * beta / k, square), (1 + a * beta * beta / 2, h)])
    negative = b.linear([(-a / (2 * k * k), cube), (a * beta / k, square), (-a * beta * beta / 2, h)])
    cases = []
    if h.hi >= IGELU_CLIP:
        cases.append((b.ge(h, Sym.const(IGELU_CLIP)), h))
    if h.lo <= -IGELU_CLIP:
        cases.append((b.ge(Sym.const(-IGELU_CLIP), h), Sym.const(0)))
    if h.lo < 0 <= h.hi:
        cases.append((b.ge(h, Sym.const(0)), positive))
        value = b.select(cases, negative)
    else:
        value = b.select(cases, positive if h.lo >= 0 else negative)
    lo, hi = igelu_bounds(h.lo, h.hi)
    return r.round(Sym(value.num, value.den, lo, hi))


IGELU_TABLE_ENTRIES = 4096  # fixed point: mantissas inside (−c, c) listed as an ite chain up to this many


def _igelu_table(h: Sym, r: Rounding) -> Sym | None:
    """Fixed point: i-GELU of the mantissa m as If(m <= ⌊−c·2^f⌋, 0, If(m == m_0, v_0, ... m)), the values v the
    interpreter's own (exact polynomial, rounded); far cheaper for the solver than the cubic's bit products.
    None when more than IGELU_TABLE_ENTRIES mantissas lie inside (−c, c)."""
    arith = r.arith
    assert isinstance(arith, Fixed)
    scale = arith.scale
    if scale % h.den:
        return None
    low, high = math.ceil(h.lo * scale), math.floor(h.hi * scale)
    zero_below, identity_from = math.floor(-IGELU_CLIP * scale), math.ceil(IGELU_CLIP * scale)
    first, last = max(low, zero_below + 1), min(high, identity_from - 1)
    if last - first + 1 > IGELU_TABLE_ENTRIES:
        return None
    m = to_z3(h.scaled_num(scale))
    values = {x: arith.mantissa(arith.round(igelu(Fraction(x, scale)))) for x in range(first, last + 1)}
    reachable = list(values.values())
    if high >= identity_from:  # the identity above c: the mantissa itself
        term: Term = m
        reachable += [identity_from, high]
    elif values:
        term = z3.IntVal(values.pop(last))
    else:  # every reachable mantissa is at most ⌊−c·2^f⌋
        term = z3.IntVal(0)
        reachable.append(0)
    for x in sorted(values, reverse=True):
        r.builder.tick()
        term = z3.If(m == x, z3.IntVal(values[x]), term)
    if low <= zero_below:
        term = z3.If(m <= zero_below, z3.IntVal(0), term)
        reachable.append(0)
    # the identity region is round(x) = saturate(x): a no-op for a rounded x, kept for any other input
    return r.saturate(Sym(term, scale, Fraction(min(reachable), scale), Fraction(max(reachable), scale)))


def encode_attention_layer(
    layer: AttentionLayer, z: list[SymVector], r: Rounding, trace: SymBlockTrace
) -> list[SymVector]:
    if layer.norm is not None and layer.norm_first:
        trace.attention_norm = encode_layer_norm(layer.norm, z, r)
        heads = [encode_attention_head(h, trace.attention_norm, r) for h in layer.heads]
    else:
        heads = [encode_attention_head(h, z, r) for h in layer.heads]
    trace.heads = heads
    projected = [encode_project_heads(layer, [ht.output[i] for ht in heads], r) for i in range(len(z))]
    trace.attention_output = projected
    out = encode_residual(z, projected, layer.residual, r)
    if layer.norm is not None and not layer.norm_first:
        out = trace.attention_norm = encode_layer_norm(layer.norm, out, r)
    return out


def encode_project_heads(layer: AttentionLayer, outputs: Sequence[SymVector], r: Rounding) -> SymVector:
    """One position's attention output o_i = round(Σ_h W_O^h head^h_i + b_O) from its heads' outputs."""
    return tuple(
        r.round(
            r.builder.linear(
                [(w, x) for head, out in zip(layer.heads, outputs) for w, x in zip(head.output[c], out)], bias
            )
        )
        for c, bias in enumerate(layer.output_bias)
    )


def encode_feed_forward(ff: FeedForward, z: list[SymVector], r: Rounding, trace: SymBlockTrace) -> list[SymVector]:
    inputs = z
    if ff.norm is not None and ff.norm_first:
        inputs = trace.feed_forward_norm = encode_layer_norm(ff.norm, z, r)
    trace.hidden_input = [encode_affine(ff.w1, zi, ff.b1, r) for zi in inputs]
    hidden = [tuple(encode_activation(ff.activation, h, r) for h in pre) for pre in trace.hidden_input]
    trace.hidden = hidden
    out = encode_residual(z, [encode_affine(ff.w2, h, ff.b2, r) for h in hidden], ff.residual, r)
    if ff.norm is not None and not ff.norm_first:
        out = trace.feed_forward_norm = encode_layer_norm(ff.norm, out, r)
    return out


def encode_residual(z: list[SymVector], update: list[SymVector], add: bool, r: Rounding) -> list[SymVector]:
    """z + update, saturated (``add``: the sublayer is residual), or the update alone."""
    if not add:
        return update
    return [tuple(r.saturate(r.builder.add(a, u)) for a, u in zip(zi, ui)) for zi, ui in zip(z, update)]


def encode_readout(model: Model, z: list[SymVector], builder: Builder) -> list[Sym]:
    return [builder.linear(list(zip(model.readout, zi))) for zi in z]


def encode_model(model: Model, arith: Arithmetic, inp: SymbolicInput, builder: Builder) -> SymTrace:
    """Encode ``model`` on the symbolic input (BOS prepended here when the model declares one)."""
    r = Rounding(arith, builder)
    tokens = list(inp.tokens)
    if isinstance(model.tokens, AlphabetTokens) and model.tokens.bos is not None:
        tokens.insert(0, SymToken(symbol=model.tokens.bos))
    if tokens and isinstance(model.tokens, AlphabetTokens) != any(t.coords is None for t in tokens):
        raise NotEncodable("the input's token kind (grid / alphabet) does not match the model's")
    z = encode_embed(model, tokens, r)
    embedded = z
    blocks: list[SymBlockTrace] = []
    for block in model.blocks:
        bt = SymBlockTrace()
        if block.attention is not None:
            z = encode_attention_layer(block.attention, z, r, bt)
            bt.after_attention = z
        if block.feed_forward is not None:
            z = encode_feed_forward(block.feed_forward, z, r, bt)
            bt.after_feed_forward = z
        if bt.after_attention is None and bt.after_feed_forward is None:
            bt.after_attention = z
        blocks.append(bt)
    before_final = None
    if model.final_norm is not None:
        before_final, z = z, encode_layer_norm(model.final_norm, z, r)
    return SymTrace(embedded, blocks, z, encode_readout(model, z, builder), before_final)

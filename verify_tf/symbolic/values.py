"""Exact symbolic rationals over linear integer arithmetic: the value representation of the SMT encoder.

A value is ``Sym(num, den, lo, hi)`` meaning ``num / den`` where ``num`` is a z3 Int term (or a Python
int when the value is a known constant) and ``den`` a positive Python int. Every layer's value is thus an
integer scaled by a denominator computable from the IR (weights' denominators, lcm(1..n) for averages,
2^f in fixed mode), so products with constant weights stay linear and the whole encoding is QF_LIA
(measured: LIA proves where bit-blasting times out, ../shared/research/smt-encoding.md).

Operations that are not linear are linearised exactly here, always as *functions* of the inputs (no
fresh variables: the encoding of a concrete input simplifies to constants, and the solver never has to
guess an auxiliary value):
* a product of two symbolic values: bit-expand the factor with the narrower interval,
  x = lo + Σ 2^b β_b  ⇒  x·y = lo·y + Σ 2^b If(β_b, y, 0)  (exact for integers), the bits β_b defined
  by the greedy binary expansion of x − lo;
* floor to a grid (fixed point rounding toward −∞) by a constant: SMT-LIB ``div`` by a positive
  constant (floor division);
* floor(N / D) with a symbolic positive D: the bounded quotient built bit by bit, bit k set iff
  (q_so_far + 2^k)·D ≤ N, each comparison linear;
* floor(√V) of a bounded integer V: the root built bit by bit, bit k set iff (r + 2^k)² ≤ V, with the square
  R = r² carried along as a term ((r + 2^k)² = R + 2^(k+1)·r + 4^k), so each comparison is linear too.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import z3

from ..work import Deadline
from .bounds import BoundStats, interval_product, interval_scale

Term = z3.ArithRef | int


class NotEncodable(Exception):
    """The instance is outside what the encoder can express exactly: the property answers ``unknown``."""


def _ceil(x: Fraction) -> int:
    return -((-x.numerator) // x.denominator)


def _floor(x: Fraction) -> int:
    return x.numerator // x.denominator


@dataclass(frozen=True)
class Sym:
    num: Term
    den: int
    lo: Fraction
    hi: Fraction

    @staticmethod
    def const(value: Fraction | int) -> Sym:
        v = Fraction(value)
        return Sym(v.numerator, v.denominator, v, v)

    @property
    def is_const(self) -> bool:
        return isinstance(self.num, int)

    @property
    def value(self) -> Fraction:
        assert isinstance(self.num, int)
        return Fraction(self.num, self.den)

    @property
    def num_bounds(self) -> tuple[int, int]:
        """Integer bounds of ``num`` implied by [lo, hi]."""
        return _ceil(self.lo * self.den), _floor(self.hi * self.den)

    def scaled_num(self, den: int) -> Term:
        """num expressed over the denominator ``den`` (a multiple of self.den)."""
        factor = den // self.den
        assert factor * self.den == den
        return _mul_const(self.num, factor)


def _mul_const(term: Term, c: int) -> Term:
    if c == 1:
        return term
    if isinstance(term, int):
        return term * c
    if c == 0:
        return 0
    return term * c


def canonical_order(terms: Sequence[z3.ExprRef]) -> list[z3.ExprRef]:
    """``terms`` in an order that depends on their structure only: z3's structural hash, then (for the rare equal
    hashes) their text. Never the AST id: ids depend on everything the process built before, and the encoding
    of a query must not (``verify-tf audit`` re-derives a certificate's query text and compares digests)."""
    ordered = sorted(terms, key=lambda t: t.hash())
    if any(a.hash() == b.hash() and not a.eq(b) for a, b in itertools.pairwise(ordered)):
        # the text of the terms that share a hash only: printing a term costs its whole DAG written out as a tree
        # (16 ms a term on average in the SMT differential tests), and a unique hash already decides its place
        shared = {a.hash() for a, b in itertools.pairwise(ordered) if a.hash() == b.hash()}
        ordered.sort(key=lambda t: (t.hash(), t.sexpr() if t.hash() in shared else ""))
    return ordered


def _sum(terms: Sequence[Term]) -> Term:
    """Sum of terms; constants folded; never ``Sum([t])`` (printed as ``(+ t)``, which cvc5 rejects)."""
    constant = sum(t for t in terms if isinstance(t, int))
    symbolic = [t for t in terms if not isinstance(t, int)]
    if not symbolic:
        return constant
    # canonical operand order: sums over the same terms in another order are the *same* term, so encodings of
    # permuted inputs of a position-blind model coincide syntactically (docs/smt.md)
    symbolic = canonical_order(symbolic)
    if constant != 0:
        symbolic.append(z3.IntVal(constant))
    return symbolic[0] if len(symbolic) == 1 else z3.Sum(symbolic)


def to_z3(term: Term) -> z3.ArithRef:
    return z3.IntVal(term) if isinstance(term, int) else term


def common_den(values: Sequence[Sym]) -> int:
    return math.lcm(*(v.den for v in values)) if values else 1


@dataclass
class Builder:
    """Accumulates the side constraints of one encoding, names fresh variables, counts decisions."""

    prefix: str = ""
    assertions: list = field(default_factory=list)
    stats: BoundStats = field(default_factory=BoundStats)
    bounded_ints: dict = field(default_factory=dict)  # name -> (lo, hi): every Int variable's declared range
    deadline: Deadline | None = None  # encoding stops with DeadlineExpired once this passes
    # True once a step was over-approximated (rounded-terms softmax): unsat still proves, a sat may be spurious
    inexact: bool = False
    _counter: int = 0
    _bits: dict = field(default_factory=dict)  # term id -> (term, lo, bits); the term is kept so ids stay unique
    _steps: int = 0

    def tick(self) -> None:
        """Called by every term-building operation: an encoding never outlives the property's deadline."""
        self._steps += 1
        if self.deadline is not None and self._steps % 64 == 0:
            self.deadline.check("while encoding the query")

    def fresh_int(self, kind: str, lo: int, hi: int) -> z3.ArithRef:
        self._counter += 1
        name = f"{self.prefix}{kind}!{self._counter}"
        var = z3.Int(name)
        self.bounded_ints[name] = (lo, hi)
        self.assertions.append(z3.And(var >= lo, var <= hi))
        return var

    # ---------------------------------------------------------------- linear operations

    def linear(self, pairs: Sequence[tuple[Fraction, Sym]], bias: Fraction = Fraction(0)) -> Sym:
        """Σ w_k x_k + bias, exactly."""
        self.tick()
        bias = Fraction(bias)
        pairs = [(Fraction(w), x) for w, x in pairs if w != 0]
        constant = bias
        symbolic: list[tuple[Fraction, Sym]] = []
        lo = hi = bias
        for w, x in pairs:
            if x.is_const:
                constant += w * x.value
                lo += w * x.value
                hi += w * x.value
            else:
                symbolic.append((w, x))
                a, b = interval_scale(w, x.lo, x.hi)
                lo += a
                hi += b
        if not symbolic:
            return Sym.const(constant)
        den = math.lcm(constant.denominator, *(x.den * w.denominator for w, x in symbolic))
        coefficients = [int(w * den / x.den) for w, x in symbolic]
        constant_num = int(constant * den)
        g = math.gcd(den, constant_num, *coefficients)
        den //= g
        terms: list[Term] = [_mul_const(x.num, c // g) for c, (w, x) in zip(coefficients, symbolic)]
        terms.append(constant_num // g)
        return Sym(_sum(terms), den, lo, hi)

    def add(self, a: Sym, b: Sym) -> Sym:
        return self.linear([(Fraction(1), a), (Fraction(1), b)])

    def scale(self, w: Fraction, x: Sym) -> Sym:
        return self.linear([(Fraction(w), x)])

    # ---------------------------------------------------------------- comparisons

    def compare(self, a: Sym, b: Sym) -> tuple[z3.ArithRef | int, z3.ArithRef | int]:
        den = math.lcm(a.den, b.den)
        return a.scaled_num(den), b.scaled_num(den)

    def ge(self, a: Sym, b: Sym):
        x, y = self.compare(a, b)
        if isinstance(x, int) and isinstance(y, int):
            return z3.BoolVal(x >= y)
        return to_z3(x) >= to_z3(y)

    def ne(self, a: Sym, b: Sym):
        x, y = self.compare(a, b)
        if isinstance(x, int) and isinstance(y, int):
            return z3.BoolVal(x != y)
        return to_z3(x) != to_z3(y)

    def eq(self, a: Sym, b: Sym):
        return z3.Not(self.ne(a, b))

    def select(self, cases: Sequence[tuple[object, Sym]], default: Sym) -> Sym:
        """If(c1, v1, If(c2, v2, ... default)) over a common denominator (an ite chain, not an array)."""
        self.tick()
        values = [v for _, v in cases] + [default]
        den = common_den(values)
        term: Term = default.scaled_num(den)
        for cond, v in reversed(cases):
            term = z3.If(cond, to_z3(v.scaled_num(den)), to_z3(term))
        lo = min(v.lo for v in values)
        hi = max(v.hi for v in values)
        return Sym(term, den, lo, hi)

    # ---------------------------------------------------------------- rounding (fixed point)

    def floor_to(self, x: Sym, scale: int) -> Sym:
        """floor(x · scale) / scale: rounding toward −∞ to the grid 1/scale (no saturation).

        Written with SMT-LIB ``div`` by a positive constant, which is floor division (Euclidean division
        and floor agree for a positive divisor), so the term stays a function of the inputs.
        """
        lo, hi = Fraction(_floor(x.lo * scale), scale), Fraction(_floor(x.hi * scale), scale)
        if x.is_const:
            return Sym.const(Fraction(_floor(x.value * scale), scale))
        g = math.gcd(scale, x.den)
        a, b = scale // g, x.den // g  # floor(num * scale / den) = floor(num * a / b)
        if b == 1:
            return Sym(_mul_const(x.num, a), scale, lo, hi)
        self.stats.roundings += 1
        return Sym(to_z3(_mul_const(x.num, a)) / b, scale, lo, hi)

    def saturate(self, x: Sym, lo: Fraction, hi: Fraction) -> Sym:
        """min(max(x, lo), hi), emitting only the branches the bounds cannot rule out."""
        self.stats.saturations_total += 1
        if x.lo >= lo and x.hi <= hi:
            self.stats.saturations_decided += 1
            return x
        if x.hi <= lo:
            self.stats.saturations_decided += 1
            return Sym.const(lo)
        if x.lo >= hi:
            self.stats.saturations_decided += 1
            return Sym.const(hi)
        if x.is_const:
            return Sym.const(min(max(x.value, lo), hi))
        den = math.lcm(x.den, lo.denominator, hi.denominator)
        term = to_z3(x.scaled_num(den))
        lo_num, hi_num = int(lo * den), int(hi * den)
        if x.hi > hi:
            term = z3.If(term > hi_num, z3.IntVal(hi_num), term)
        if x.lo < lo:
            term = z3.If(to_z3(x.scaled_num(den)) < lo_num, z3.IntVal(lo_num), term)
        return Sym(term, den, max(x.lo, lo), min(x.hi, hi))

    def relu(self, x: Sym) -> Sym:
        self.stats.relus_total += 1
        if x.lo >= 0:
            self.stats.relus_fixed += 1
            return x
        if x.hi <= 0:
            self.stats.relus_fixed += 1
            return Sym.const(0)
        return Sym(z3.If(x.num >= 0, x.num, z3.IntVal(0)), x.den, Fraction(0), x.hi)

    # ---------------------------------------------------------------- products of two symbolic values

    def bits_of(self, x: Sym) -> tuple[int, list[z3.BoolRef]]:
        """num(x) = lo + Σ 2^b β_b, each β_b a *function* of x (greedy binary expansion from the top bit).

        No fresh variables: β_B-1 = [2^(B-1) ≤ x − lo], then each lower bit given the higher ones; exact
        whenever x ∈ [lo, lo + 2^B − 1] ⊇ [lo, hi] (the interval bound). Cached per term (the term is kept
        alive in the cache so z3 ids cannot be reused), so a factor shared by many products (q_i against
        every k_j) is expanded once.
        """
        key = x.num.get_id()
        if key not in self._bits:
            lo, hi = x.num_bounds
            width = (hi - lo).bit_length()
            rest = x.num - lo
            bits: list[z3.BoolRef] = [None] * width  # type: ignore[list-item]
            taken: Term = 0
            for k in reversed(range(width)):
                self.tick()
                bits[k] = to_z3(_sum([taken, 1 << k])) <= rest
                taken = _sum([taken, z3.If(bits[k], z3.IntVal(1 << k), z3.IntVal(0))])
            self.stats.bits_decomposed += width
            self._bits[key] = (x.num, lo, bits)
        return self._bits[key][1:]

    def mul(self, x: Sym, y: Sym) -> Sym:
        """x · y exactly; linear when either is constant, else through the bits of the narrower factor."""
        self.tick()
        if x.is_const:
            return self.scale(x.value, y)
        if y.is_const:
            return self.scale(y.value, x)
        lo, hi = interval_product((x.lo, x.hi), (y.lo, y.hi))
        wx = x.num_bounds[1] - x.num_bounds[0]
        wy = y.num_bounds[1] - y.num_bounds[0]
        if wy < wx or (wy == wx and y.num.get_id() in self._bits and x.num.get_id() not in self._bits):
            x, y = y, x
        base, bits = self.bits_of(x)
        terms: list[Term] = [_mul_const(y.num, base)]
        zero = z3.IntVal(0)
        terms += [z3.If(b, to_z3(_mul_const(y.num, 1 << k)), zero) for k, b in enumerate(bits)]
        return Sym(_sum(terms), x.den * y.den, lo, hi)

    def floor_div(self, numerator: Sym, divisor: Sym, lo: int, hi: int) -> Sym:
        """floor(numerator / divisor) for a symbolic divisor > 0 whose quotient lies in [lo, hi].

        The quotient is built bit by bit from the top: with P = (lo + bits so far)·D, bit k is set iff
        P + 2^k·D ≤ N. Every step is linear (D times a constant), there is no fresh variable, and the
        result is exactly floor(N/D) whenever the true quotient lies in [lo, lo + 2^B − 1] ⊇ [lo, hi].
        """
        self.tick()
        if divisor.lo <= 0:
            raise NotEncodable("division by a value that may be non-positive")
        if numerator.is_const and divisor.is_const:
            return Sym.const(_floor(numerator.value / divisor.value))
        den = math.lcm(numerator.den, divisor.den)
        n_num, d_num = to_z3(numerator.scaled_num(den)), to_z3(divisor.scaled_num(den))
        width = (hi - lo).bit_length()
        product: Term = d_num * lo if lo != 0 else 0  # (quotient so far) · D, over den
        quotient: Term = lo
        bits: list[z3.BoolRef] = [None] * width  # type: ignore[list-item]
        for k in reversed(range(width)):
            self.tick()
            step = d_num * (1 << k)
            bits[k] = to_z3(_sum([product, step])) <= n_num
            product = _sum([product, z3.If(bits[k], step, z3.IntVal(0))])
            quotient = _sum([quotient, z3.If(bits[k], z3.IntVal(1 << k), z3.IntVal(0))])
        self.stats.bits_decomposed += width
        result = Sym(quotient, 1, Fraction(lo), Fraction(hi))
        if not result.is_const:
            self._bits[result.num.get_id()] = (result.num, lo, bits)
        return result

    def isqrt(self, radicand: Sym) -> Sym:
        """floor(√V) of an integer-valued V >= 0 (den 1), as a function of V without fresh variables.

        r starts at isqrt(lo(V)); from the top bit down, bit k is set iff (r + 2^k)² ≤ V, i.e. R + 2^(k+1)·r + 4^k
        ≤ V with R = r² carried along. "r² ≤ V" is downward closed in r, so the greedy choice gives the largest
        such r in [r0, r0 + 2^B − 1] ⊇ [isqrt(lo), isqrt(hi)]: exactly floor(√V).
        """
        self.tick()
        if radicand.den != 1 or radicand.lo < 0:
            raise NotEncodable("integer square root of a value that is not a non-negative integer")
        low, high = radicand.num_bounds
        r0, r1 = math.isqrt(max(low, 0)), math.isqrt(high)
        if radicand.is_const:
            return Sym.const(math.isqrt(radicand.num))
        if r0 == r1:
            return Sym.const(r0)
        v = to_z3(radicand.num)
        root: Term = r0
        square: Term = r0 * r0
        bits: list[z3.BoolRef] = [None] * (r1 - r0).bit_length()  # type: ignore[list-item]
        for k in reversed(range(len(bits))):
            self.tick()
            grown = _sum([square, _mul_const(root, 2 << k), 1 << (2 * k)])  # (r + 2^k)²
            bits[k] = to_z3(grown) <= v
            square = _sum([square, z3.If(bits[k], to_z3(_sum([_mul_const(root, 2 << k), 1 << (2 * k)])), z3.IntVal(0))])
            root = _sum([root, z3.If(bits[k], z3.IntVal(1 << k), z3.IntVal(0))])
        self.stats.bits_decomposed += len(bits)
        result = Sym(root, 1, Fraction(r0), Fraction(r1))
        self._bits[result.num.get_id()] = (result.num, r0, bits)
        return result

"""Translate a QF_LIA query into an equivalent QF_BV query (for bitwuzla), with a provably safe width.

Every Int variable of our encodings is declared with bounds (``And(v >= lo, v <= hi)`` at the top level),
every other Int term is a function of them. Interval analysis over the term DAG bounds every subterm; the
width W is one bit more than the widest signed value, so two's-complement arithmetic never wraps and the
BV query has exactly the models of the LIA query. ``div`` by a positive constant (floor) becomes
signed division (truncation) corrected by one when the remainder is negative.
"""

from __future__ import annotations

from dataclasses import dataclass

import z3


class NotTranslatable(ValueError):
    pass


@dataclass(frozen=True)
class Translation:
    """A QF_BV query with exactly the models of its QF_LIA source, and why its width suffices."""

    text: str
    width: int  # bits of every bit-vector
    widest: tuple[int, int]  # the Int subterm interval with the largest magnitude (the one that sets the width)
    bounded_variables: int  # Int variables, each bounded by top-level lo <= v <= hi conjuncts
    subterms: int  # Int subterms whose interval was derived

    def argument(self) -> str:
        lo, hi = self.widest
        return (
            f"{self.bounded_variables} Int variables, each bounded by top-level conjuncts; interval analysis over "
            f"{self.subterms} Int subterms; the widest interval [{lo}, {hi}] needs "
            f"{max(abs(lo), abs(hi)).bit_length()} magnitude bits; width = that + 1 sign bit + 1 spare = "
            f"{self.width}: every subterm's value fits in signed {self.width}-bit arithmetic, and +, -, * agree "
            f"with integers modulo 2^{self.width}, so no comparison, division or ite sees a wrapped value"
        )


def _literal(e) -> int | None:
    """The integer a numeral denotes: ``5``, or ``(- 5)`` as z3 prints a negative constant; else None."""
    if z3.is_int_value(e):
        return e.as_long()
    if e.decl().kind() == z3.Z3_OP_UMINUS and e.num_args() == 1 and z3.is_int_value(e.arg(0)):
        return -e.arg(0).as_long()
    return None


def _variable_bounds(assertions) -> dict[str, tuple[int, int]]:
    bounds: dict[str, list] = {}

    def visit(e) -> None:
        if z3.is_and(e):
            for c in e.children():
                visit(c)
            return
        if (
            (z3.is_ge(e) or z3.is_le(e))
            and z3.is_const(e.arg(0))
            and _literal(e.arg(1)) is not None
            and e.arg(0).decl().kind() == z3.Z3_OP_UNINTERPRETED
        ):
            entry = bounds.setdefault(e.arg(0).decl().name(), [None, None])
            entry[0 if z3.is_ge(e) else 1] = _literal(e.arg(1))

    for a in assertions:
        visit(a)
    return {k: (lo, hi) for k, (lo, hi) in bounds.items() if lo is not None and hi is not None}


def translate(lia_text: str) -> str:
    return translation(lia_text).text


def translation(lia_text: str) -> Translation:
    """The translation, in a fresh z3 context: its text is then the same in every run and every process."""
    ctx = z3.Context()
    assertions = list(z3.parse_smt2_string(lia_text, ctx=ctx))
    bounds = _variable_bounds(assertions)
    interval = _intervals(assertions, bounds)
    widest = max(interval.values(), key=lambda iv: max(abs(iv[0]), abs(iv[1])), default=(0, 0))
    width = max(max(abs(widest[0]), abs(widest[1])).bit_length(), 1) + 2
    solver = z3.Solver(ctx=ctx)
    solver.add(_bit_vectors(assertions, width, ctx))
    return Translation("(set-logic QF_BV)\n" + solver.to_smt2(), width, widest, len(bounds), len(interval))


def _intervals(assertions: list, bounds: dict[str, tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """The interval of every integer subterm (by z3 id), from the variables' declared bounds."""
    interval: dict[int, tuple[int, int]] = {}

    def iv(e) -> tuple[int, int]:
        key = e.get_id()
        if key in interval:
            return interval[key]
        kind = e.decl().kind()
        if z3.is_int_value(e):
            v = e.as_long()
            r = (v, v)
        elif z3.is_const(e) and kind == z3.Z3_OP_UNINTERPRETED:
            name = e.decl().name()
            if name not in bounds:
                raise NotTranslatable(f"integer variable {name} has no declared bounds")
            r = bounds[name]
        elif kind == z3.Z3_OP_ADD:
            parts = [iv(c) for c in e.children()]
            r = (sum(p[0] for p in parts), sum(p[1] for p in parts))
        elif kind == z3.Z3_OP_SUB:
            parts = [iv(c) for c in e.children()]
            lo, hi = parts[0]
            for a, b in parts[1:]:
                lo, hi = lo - b, hi - a
            r = (lo, hi)
        elif kind == z3.Z3_OP_UMINUS:
            a, b = iv(e.arg(0))
            r = (-b, -a)
        elif kind == z3.Z3_OP_MUL:
            lo, hi = 1, 1
            for c in e.children():
                a, b = iv(c)
                corners = [lo * a, lo * b, hi * a, hi * b]
                lo, hi = min(corners), max(corners)
            r = (lo, hi)
        elif kind == z3.Z3_OP_IDIV:
            (a, b), (d, d2) = iv(e.arg(0)), iv(e.arg(1))
            if d != d2 or d <= 0:
                raise NotTranslatable("division by a non-constant or non-positive divisor")
            r = (a // d, b // d)
        elif kind == z3.Z3_OP_ITE:
            (a, b), (c, d) = iv(e.arg(1)), iv(e.arg(2))
            r = (min(a, c), max(b, d))
        else:
            raise NotTranslatable(f"unsupported integer operation {e.decl().name()}")
        interval[key] = r
        for c in e.children():
            if not z3.is_int(c):
                _bool_walk(c)
        return r

    def _bool_walk(e) -> None:
        for c in e.children():
            if z3.is_int(c):
                iv(c)
            else:
                _bool_walk(c)

    for a in assertions:
        _bool_walk(a)
    return interval


def _bit_vectors(assertions: list, width: int, ctx: z3.Context) -> list:
    """The assertions over ``width``-bit signed bit-vectors (wide enough for every interval: no overflow)."""
    memo: dict[int, z3.ExprRef] = {}

    def bv(e):
        key = e.get_id()
        if key in memo:
            return memo[key]
        kind = e.decl().kind()
        kids = e.children()
        if z3.is_int_value(e):
            r = z3.BitVecVal(e.as_long(), width, ctx)
        elif z3.is_int(e) and z3.is_const(e) and kind == z3.Z3_OP_UNINTERPRETED:
            r = z3.BitVec(e.decl().name(), width, ctx)
        elif z3.is_bool(e) and z3.is_const(e) and kind == z3.Z3_OP_UNINTERPRETED:
            r = e
        elif kind == z3.Z3_OP_ADD:
            r = z3.Sum([bv(c) for c in kids]) if len(kids) > 1 else bv(kids[0])
        elif kind == z3.Z3_OP_SUB:
            r = bv(kids[0])
            for c in kids[1:]:
                r = r - bv(c)
        elif kind == z3.Z3_OP_UMINUS:
            r = -bv(kids[0])
        elif kind == z3.Z3_OP_MUL:
            r = bv(kids[0])
            for c in kids[1:]:
                r = r * bv(c)
        elif kind == z3.Z3_OP_IDIV:
            a, d = bv(kids[0]), bv(kids[1])
            q = a / d  # signed division truncates toward zero; floor differs for negative inexact a
            r = z3.If(z3.And(a < 0, q * d != a), q - 1, q)
        elif kind == z3.Z3_OP_ITE:
            r = z3.If(bv(kids[0]), bv(kids[1]), bv(kids[2]))
        elif kind == z3.Z3_OP_LE:
            r = bv(kids[0]) <= bv(kids[1])
        elif kind == z3.Z3_OP_LT:
            r = bv(kids[0]) < bv(kids[1])
        elif kind == z3.Z3_OP_GE:
            r = bv(kids[0]) >= bv(kids[1])
        elif kind == z3.Z3_OP_GT:
            r = bv(kids[0]) > bv(kids[1])
        elif kind == z3.Z3_OP_EQ:
            r = bv(kids[0]) == bv(kids[1])
        elif kind == z3.Z3_OP_DISTINCT:
            r = z3.Distinct([bv(c) for c in kids])
        elif kind in (z3.Z3_OP_AND, z3.Z3_OP_OR):
            parts = [bv(c) for c in kids]  # bitwuzla rejects (and x) / (or x) with a single argument
            r = parts[0] if len(parts) == 1 else (z3.And(parts) if kind == z3.Z3_OP_AND else z3.Or(parts))
        elif kind == z3.Z3_OP_NOT:
            r = z3.Not(bv(kids[0]))
        elif kind == z3.Z3_OP_IMPLIES:
            r = z3.Implies(bv(kids[0]), bv(kids[1]))
        elif kind in (z3.Z3_OP_TRUE, z3.Z3_OP_FALSE):
            r = e
        else:
            raise NotTranslatable(f"unsupported operation {e.decl().name()}")
        memo[key] = r
        return r

    return [bv(a) for a in assertions]

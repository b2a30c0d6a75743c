"""A model whose attention only ever averages the prefix, run position by position over running value sums.

**The class** (``CountingModel.of`` checks it on the IR and says why not): alphabet tokens, no absolute
positional encoding, and every head causal, with standard positions (no RPE/URPE) and weights that do not
depend on the keys: ``uniform`` scoring, or ``hardmax``/``softmax`` whose scores are equal for every key
(query weights and bias all zero, or key weights all zero; softmax needs fixed arithmetic, and under
``rounded-terms``, where each term round(e^s·v_j) is rounded on its own, scores exactly 0). Then the
interpreter gives every allowed key the same weight w(n) = ``arith.attention_weights`` of n equal scores
(1/n; floored with ``per-probability``), so head h at stream position n − 1 outputs
round(w(n)·S^h) with S^h = Σ_{j<n} v^h_j, its value vectors summed over the prefix (BOS included). The stream
at a position is therefore a function of its letter, n and the sums S: the model is a deterministic machine
whose state is (n, S), and ``step`` is one position of the interpreter (``semantics/interpreter.py``),
written with the interpreter's own ``affine``, ``feed_forward`` and rounding so that the two cannot drift.

**Freezing (exact).** A head coordinate whose output can no longer change is replaced by its constant
output (``Frozen``), so that states differing only in such sums merge. With weights 1/n and fixed point
(mantissas: y = sat(⌊M/n⌋) for the mantissa sum M), if every value the coordinate can take at a word
position lies in [c, c + 1] (mantissas; ``increments``, from ``value_bounds``) and c·n ≤ M < (c + 1)·n now,
then c·n' ≤ M' < (c + 1)·n' for every later n' (add at most c + 1 and at least c per position): the output
stays sat(c) forever. With ``per-probability`` a weight ⌊1/n⌋_f = 0 stays 0 for every larger n: the output
is round(0) forever. In the compiled L_k every counter freezes once it is positive.

``encode_position`` is the same position over z3 terms (``symbolic.encoder``'s affine maps, ReLUs and
rounding), with each head's output supplied by the caller: a fresh bounded variable (``value_bounds``), or
the exact rounded average of a symbolic sum (``rounded_average``, the induction).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import z3

from ...ir import AlphabetTokens, Head, Matrix, Model, Vector
from ...semantics.arithmetic import Arithmetic, Exact, Fixed
from ...semantics.interpreter import BlockTrace, _Counter, affine, feed_forward
from ...symbolic.encoder import Rounding, SymBlockTrace, encode_affine, encode_feed_forward
from ...symbolic.values import Builder, NotEncodable, Sym
from ...work import Deadline, DeadlineExpired

QUERY_SECONDS = 0.5  # the most one z3 optimisation of a value bound may take
ASKED_KEYS = 64  # up to this many keys the arithmetic itself computes the weights (see CountingModel.weight)


def _closed_form_weight(arith: Arithmetic, keys: int) -> Fraction:
    weight = Fraction(1, keys)
    return arith.floor(weight) if isinstance(arith, Fixed) and arith.attention_rounding == "per-probability" else weight


class NotApplicable(Exception):
    """The model is outside the class whose positions are functions of running sums (reason in the message)."""


@dataclass(frozen=True)
class Frozen:
    """A head coordinate whose output (a mantissa) is ``output`` at this and every later position."""

    output: int


@dataclass(frozen=True)
class Coordinate:
    """One value coordinate of one head: ``layer`` (block index), ``head``, ``index`` (value coordinate)."""

    layer: int
    head: int
    index: int

    def __str__(self) -> str:
        return f"layers[{self.layer}].heads[{self.head}][{self.index}]"


Sums = tuple[Any, ...]  # one entry per Coordinate: the running sum (Fraction) or Frozen


def _zero_scores(head: Head) -> bool:
    """Scores exactly 0 for every key: q = 0 or k = 0 (weights and bias), standard positions."""

    def zero(weights: Matrix, bias: Vector) -> bool:
        return all(w == 0 for row in weights for w in row) and all(b == 0 for b in bias)

    return zero(head.query, head.query_bias) or zero(head.key, head.key_bias)


def _key_independent(head: Head) -> bool:
    """Scores equal for every key: q = round(0) = 0, or every key round(b_K)."""
    zero_query = all(w == 0 for row in head.query for w in row) and all(b == 0 for b in head.query_bias)
    constant_key = all(w == 0 for row in head.key for w in row)
    return zero_query or constant_key


class CountingModel:
    """``model`` in ``arith`` as a machine over (stream positions n, value sums S); see the module docstring."""

    def __init__(self, model: Model, arith: Arithmetic) -> None:
        self.model, self.arith = model, arith
        self.coordinates = tuple(
            Coordinate(layer, h, c) for layer, h, head in model.heads() for c in range(head.value_dim)
        )
        tokens = model.tokens
        assert isinstance(tokens, AlphabetTokens)
        self.tokens = tokens
        self.bos = tokens.bos
        self._weights: dict[tuple[str, int], Fraction] = {}
        self.fast = _FixedProgram.of(model, arith)

    @staticmethod
    def of(model: Model, arith: Arithmetic) -> CountingModel:
        """The model as a counting machine, or ``NotApplicable`` naming the first reason it is not one."""
        if not isinstance(model.tokens, AlphabetTokens):
            raise NotApplicable("the model reads grid tokens, not letters")
        if model.positional_encoding is not None:
            raise NotApplicable("the model has an absolute positional encoding: positions are not counts")
        # the machine below computes attention, ReLU feed-forwards and residuals only
        for where, _ in model.norms():
            raise NotApplicable(f"{where} is a LayerNorm, which the counting machine does not compute")
        for layer, block in enumerate(model.blocks):
            if block.feed_forward is not None and block.feed_forward.activation != "relu":
                raise NotApplicable(
                    f"layers[{layer}].feed-forward uses {block.feed_forward.activation}, which the "
                    "counting machine does not compute (ReLU only)"
                )
        for layer, h, head in model.heads():
            where = f"layers[{layer}].heads[{h}]"
            if not head.causal:
                raise NotApplicable(f"{where} is not causal: a position reads later positions")
            if head.positional != "standard":
                raise NotApplicable(f"{where} uses {head.positional}: its weights depend on the distance j - i")
            if head.scoring != "uniform" and not _key_independent(head):
                raise NotApplicable(
                    f"{where} is {head.scoring} with scores that depend on the key: its weights "
                    "are not a function of counts"
                )
            if head.scoring == "softmax" and isinstance(arith, Exact):
                raise NotApplicable(f"{where} is softmax, which exact arithmetic cannot evaluate")
            if (
                head.scoring == "softmax"
                and isinstance(arith, Fixed)
                and arith.rounded_terms
                and not (_zero_scores(head) and arith.rounded_term(Fraction(0), Fraction(1)) == 1)
            ):
                # round(Σ round(e^s·v_j) / Σ round(e^s)) is round(S/n) only for s = 0 and 1 representable
                raise NotApplicable(
                    f"{where} is softmax under rounded-terms with scores that are not all 0 (or "
                    "1 not representable): each term is rounded on its own, not their sum"
                )
        counting = CountingModel(model, arith)
        for scoring in {head.scoring for _, _, head in model.heads()}:
            if any(counting.weight(scoring, n) != _closed_form_weight(arith, n) for n in range(1, ASKED_KEYS + 1)):
                raise NotApplicable(f"{scoring} weights of equal scores are not 1/n in {arith.describe()}")
        return counting

    # ---------------------------------------------------------------- the concrete machine

    def weight(self, scoring: str, keys: int) -> Fraction:
        """The weight of each of ``keys`` keys with equal scores, as the arithmetic normalises them.

        Asking the arithmetic costs O(keys); beyond ``ASKED_KEYS`` keys the closed form 1/keys (floored with
        per-probability) is used, which ``of`` has checked against the arithmetic for 1..ASKED_KEYS keys.
        """
        if keys > ASKED_KEYS:
            return _closed_form_weight(self.arith, keys)
        cache_key = (scoring, keys)
        if cache_key not in self._weights:
            self._weights[cache_key] = self.arith.attention_weights([Fraction(0)] * keys, scoring)[0]
        return self._weights[cache_key]

    def start(self) -> tuple[Sums, int, Fraction | None]:
        """(sums, stream positions, readout at BOS) before the first letter: after BOS, or empty."""
        empty: Sums = tuple(0 if isinstance(self.arith, Fixed) else Fraction(0) for _ in self.coordinates)
        if self.bos is None:
            return empty, 0, None
        sums, readout = self.step(empty, 0, self.bos)
        return sums, 1, readout

    def step(
        self, sums: Sums, positions: int, symbol: str, increments: Sequence[tuple[int, int] | None] | None = None
    ) -> tuple[Sums, Fraction]:
        """The sums and the readout after one more position holding ``symbol`` (``positions`` before it).

        Sums are integer mantissas (sums of values on the 2^-f grid) in fixed arithmetic, Fractions in exact
        arithmetic.
        ``increments``: per coordinate the mantissa range of its value at word positions (or None), which
        enables freezing (module docstring); the readout does not depend on it.
        """
        if self.fast is not None:
            return self.fast.step(self, sums, positions, symbol, increments)
        # the interpreter's own functions, one position (exact arithmetic, or token vectors off the grid)
        r = _Counter(self.arith)
        scale = self.arith.scale if isinstance(self.arith, Fixed) else 1
        z = self.tokens.embed(symbol)
        new = list(sums)
        keys = positions + 1
        k = 0
        for block in self.model.blocks:
            if block.attention is not None:
                outputs: list[Vector] = []
                for head in block.attention.heads:
                    value = affine(head.value, z, head.value_bias, r)
                    weight = self.weight(head.scoring, keys)
                    out = []
                    for c in range(head.value_dim):
                        total = new[k]
                        if isinstance(total, Frozen):
                            out.append(Fraction(total.output, scale))
                        else:
                            total = total + value[c] * scale
                            y = r.round(weight * total / scale)
                            out.append(y)
                            bounds = increments[k] if increments is not None else None
                            if isinstance(self.arith, Fixed) and self.frozen(
                                int(total), int(y * scale), weight, keys, bounds
                            ):
                                total = Frozen(int(y * scale))
                            new[k] = total
                        k += 1
                    outputs.append(tuple(out))
                projected = []
                layer = block.attention
                for c, bias in enumerate(layer.output_bias):
                    total = bias + sum(
                        (w * x for head, out in zip(layer.heads, outputs) for w, x in zip(head.output[c], out)),
                        Fraction(0),
                    )
                    projected.append(r.round(total))
                z = tuple(r.saturate(a + b) for a, b in zip(z, projected)) if layer.residual else tuple(projected)
            if block.feed_forward is not None:
                z = feed_forward(block.feed_forward, [z], r, BlockTrace())[0]
        readout = sum((u * x for u, x in zip(self.model.readout, z)), Fraction(0))
        return tuple(new), readout

    def frozen(
        self, mantissa: int, output: int, weight: Fraction, keys: int, increments: tuple[int, int] | None
    ) -> bool:
        """Whether a coordinate with mantissa sum ``mantissa`` over ``keys`` keys outputs ``output`` forever."""
        if weight == 0:  # per-probability: floor_f(1/n) = 0 stays 0 for every larger n
            return True
        # the argument needs weight 1/n' at every later n' too (per-probability floors them)
        per_probability = isinstance(self.arith, Fixed) and self.arith.attention_rounding == "per-probability"
        if increments is None or per_probability or weight * keys != 1:
            return False
        lo, hi = increments
        c = mantissa // keys
        return lo >= c and hi <= c + 1

    # ---------------------------------------------------------------- the same position over z3 terms

    def encode_position(
        self, builder: Builder, symbol: str, head_output: Callable[[int, Sym], Sym], until_layer: int | None = None
    ) -> tuple[Sym | None, list[Sym]]:
        """(readout, value of every coordinate) at a position holding ``symbol``, as symbolic values.

        ``head_output(k, value)`` returns the output of coordinate k given its value at this position.
        ``until_layer``: stop after that block's head values (the readout is then None). Exact arithmetic is
        not encoded (its averages are not on a grid). ``builder.deadline`` bounds the encoding.
        """
        if not isinstance(self.arith, Fixed):
            raise NotEncodable("exact arithmetic: a head's average S/n is not on a grid")
        r = Rounding(self.arith, builder)
        z = tuple(Sym.const(c) for c in self.tokens.embed(symbol))
        values: list[Sym] = []
        k = 0
        for index, block in enumerate(self.model.blocks):
            if block.attention is not None:
                outputs: list[tuple[Sym, ...]] = []
                for head in block.attention.heads:
                    value = encode_affine(head.value, z, head.value_bias, r)
                    out = []
                    for c in range(head.value_dim):
                        values.append(value[c])
                        out.append(head_output(k, value[c]))
                        k += 1
                    outputs.append(tuple(out))
                if index == until_layer:
                    return None, values
                layer = block.attention
                projected = []
                for c, bias in enumerate(layer.output_bias):
                    pairs = [(w, x) for head, out in zip(layer.heads, outputs) for w, x in zip(head.output[c], out)]
                    projected.append(r.round(builder.linear(pairs, bias)))
                z = (
                    tuple(r.saturate(builder.add(a, b)) for a, b in zip(z, projected))
                    if layer.residual
                    else tuple(projected)
                )
            if block.feed_forward is not None:
                z = encode_feed_forward(block.feed_forward, [z], r, SymBlockTrace())[0]
        readout = builder.linear(list(zip(self.model.readout, z)))
        return readout, values


_Row = tuple[tuple[tuple[int, int], ...], int, int]  # (sparse integer coefficients, constant, divisor)


def _sparse_affine(weights: Sequence[Vector], bias: Vector, scale: int) -> list[_Row]:
    """round(W x + b) on mantissas: per output (sparse integer coefficients, constant, divisor D), so that the
    output mantissa is sat(⌊(Σ coef·m + const) / D⌋) = sat(⌊2^f·(Σ w·m/2^f + b)⌋) exactly."""
    rows = []
    for row, b in zip(weights, bias):
        den = math.lcm(*(w.denominator for w in row), (b * scale).denominator)
        coefficients = tuple((k, int(w * den)) for k, w in enumerate(row) if w != 0)
        rows.append((coefficients, int(b * scale * den), den))
    return rows


class _FixedProgram:
    """The model in fixed arithmetic compiled to integer mantissa arithmetic (same rounding points as the
    interpreter: floor then saturate after every affine map, saturate after every residual sum)."""

    def __init__(self, model: Model, arith: Fixed) -> None:
        scale = arith.scale
        self.scale, self.lo, self.hi = scale, arith.min_mantissa, arith.max_mantissa
        tokens = model.tokens
        assert isinstance(tokens, AlphabetTokens)
        self.embedding = {
            symbol: tuple(int(v * scale) for v in tokens.embed(symbol))
            for symbol in tokens.symbols + ((tokens.bos,) if tokens.bos is not None else ())
        }
        self.blocks = []
        for block in model.blocks:
            attention = None
            if block.attention is not None:
                layer = block.attention
                heads = [(head.scoring, _sparse_affine(head.value, head.value_bias, scale)) for head in layer.heads]
                flat = [tuple(w for head in layer.heads for w in head.output[c]) for c in range(len(layer.output_bias))]
                attention = (heads, _sparse_affine(flat, layer.output_bias, scale), layer.residual)
            ff = None
            if block.feed_forward is not None:
                f = block.feed_forward
                ff = (_sparse_affine(f.w1, f.b1, scale), _sparse_affine(f.w2, f.b2, scale), f.residual)
            self.blocks.append((attention, ff))
        den = math.lcm(*(u.denominator for u in model.readout))
        self.readout = (tuple((k, int(u * den)) for k, u in enumerate(model.readout) if u != 0), den * scale)

    @staticmethod
    def of(model: Model, arith: Arithmetic) -> _FixedProgram | None:
        """None when the model needs the Fraction path: exact arithmetic, or token vectors off the grid."""
        if not isinstance(arith, Fixed) or not isinstance(model.tokens, AlphabetTokens):
            return None
        tokens = model.tokens
        vectors = list(tokens.embedding) + ([tokens.bos_embedding] if tokens.bos_embedding is not None else [])
        if any((v * arith.scale).denominator != 1 for vector in vectors for v in vector):
            return None
        return _FixedProgram(model, arith)

    def affine(self, rows: Sequence[tuple[Any, int, int]], x: Sequence[int]) -> list[int]:
        lo, hi = self.lo, self.hi
        out = []
        for coefficients, const, den in rows:
            m = (sum(c * x[k] for k, c in coefficients) + const) // den
            out.append(lo if m < lo else hi if m > hi else m)
        return out

    def residual(self, z: Sequence[int], update: Sequence[int]) -> list[int]:
        lo, hi = self.lo, self.hi
        return [lo if a + b < lo else hi if a + b > hi else a + b for a, b in zip(z, update)]

    def step(
        self,
        machine: CountingModel,
        sums: Sums,
        positions: int,
        symbol: str,
        increments: Sequence[tuple[int, int] | None] | None,
    ) -> tuple[Sums, Fraction]:
        lo, hi = self.lo, self.hi
        z = list(self.embedding[symbol])
        new = list(sums)
        keys = positions + 1
        k = 0
        for attention, ff in self.blocks:
            if attention is not None:
                heads, projection, residual = attention
                outputs: list[int] = []
                for scoring, value_rows in heads:
                    weight = machine.weight(scoring, keys)
                    for v in self.affine(value_rows, z):
                        total = new[k]
                        if isinstance(total, Frozen):
                            outputs.append(total.output)
                        else:
                            total += v
                            y = (weight.numerator * total) // weight.denominator  # floor(2^f·w·S/2^f) on mantissas
                            y = lo if y < lo else hi if y > hi else y
                            outputs.append(y)
                            bounds = increments[k] if increments is not None else None
                            new[k] = Frozen(y) if machine.frozen(total, y, weight, keys, bounds) else total
                        k += 1
                update = self.affine(projection, outputs)
                z = self.residual(z, update) if residual else update
            if ff is not None:
                first, second, residual = ff
                hidden = [max(h, 0) for h in self.affine(first, z)]
                update = self.affine(second, hidden)
                z = self.residual(z, update) if residual else update
        coefficients, den = self.readout
        return tuple(new), Fraction(sum(c * z[k] for k, c in coefficients), den)


def rounded_average(builder: Builder, arith: Fixed, total: Any, keys: Any) -> Sym:
    """sat(⌊total/keys⌋) as a symbolic value on the 2^-f grid, for a mantissa sum ``total`` and keys ≥ 1.

    Exact and linear (no fresh variable): the greatest c in [min, max] with c·keys ≤ total, found bit by bit
    from the top (each comparison is keys times a constant), clamped to max. The greedy search returns the
    largest q ≤ min + 2^B − 1 with q·keys ≤ total, or min when there is none (then the average is below
    min: saturation), and 2^B − 1 ≥ max − min, so min(q, max) is the saturated floor.
    """
    lo, hi = arith.min_mantissa, arith.max_mantissa
    width = (hi - lo).bit_length()
    quotient = z3.IntVal(lo)
    product = keys * lo
    for bit in reversed(range(width)):
        builder.tick()
        step = keys * (1 << bit)
        taken = product + step <= total
        product = z3.If(taken, product + step, product)
        quotient = z3.If(taken, quotient + (1 << bit), quotient)
    clamped = z3.If(quotient > hi, z3.IntVal(hi), quotient)
    return Sym(clamped, arith.scale, Fraction(lo, arith.scale), Fraction(hi, arith.scale))


def value_bounds(
    machine: CountingModel,
    letters: Sequence[str],
    bos_values: Sequence[int],
    seconds: float,
    deadline: Deadline | None = None,
) -> list[tuple[int, int]] | None:
    """Per coordinate, the mantissa range of its value at any word position of any input (None: not computed).

    ``seconds`` bounds the z3 queries that narrow the intervals (past it, the intervals are kept: sound); the
    encodings check ``deadline``, the unit's (a deep model's encoding alone outlived ``--timeout``, issue 26),
    and when it passes nothing is returned, as the unit is out of time anyway.

    Layer by layer: the values of a layer are encoded for every letter with the outputs of the earlier heads
    as free grid variables over their whole possible ranges (every output is a floored average of values the
    coordinate can take, BOS's included, and with ``per-probability`` possibly 0), and z3 finds the least and
    the greatest value. An over-approximation of what inputs reach, hence sound for freezing and as bounds.
    """
    arith = machine.arith
    if not isinstance(arith, Fixed):
        return None
    count = len(machine.coordinates)
    bounds: list[tuple[int, int] | None] = [None] * count
    ranges: list[tuple[int, int] | None] = [None] * count
    layers = sorted({c.layer for c in machine.coordinates})
    until = time.perf_counter() + seconds
    for layer in layers:
        members = [k for k, c in enumerate(machine.coordinates) if c.layer == layer]
        for symbol in letters:
            builder = Builder(deadline=deadline)
            variables: dict[int, Sym] = {}

            def output(k: int, value: Sym) -> Sym:
                if machine.coordinates[k].layer >= layer:
                    return Sym.const(0)  # not used: the encoding is cut at this layer's values
                bound = ranges[k]
                assert bound is not None  # earlier layers' ranges are known
                lo, hi = bound
                var = builder.fresh_int(f"y{k}", lo, hi)
                variables[k] = Sym(var, arith.scale, Fraction(lo, arith.scale), Fraction(hi, arith.scale))
                return variables[k]

            try:
                _, values = machine.encode_position(builder, symbol, output, until_layer=layer)
            except DeadlineExpired:
                return None  # no bounds: sound (nothing freezes early), and the unit has no time left
            for k in members:
                found = _tightest(values[k], arith.scale, builder.assertions, until)
                old = bounds[k]
                bounds[k] = (found[0], found[1]) if old is None else (min(old[0], found[0]), max(old[1], found[1]))
        for k in members:
            found_bound = bounds[k]
            assert found_bound is not None  # every member was bounded above
            lo, hi = found_bound
            lo, hi = min(lo, bos_values[k]), max(hi, bos_values[k])
            if arith.attention_rounding == "per-probability":
                lo, hi = min(lo, 0), max(hi, 0)
            ranges[k] = (max(lo, arith.min_mantissa), min(hi, arith.max_mantissa))
    return bounds  # type: ignore[return-value]


def _tightest(value: Sym, scale: int, assertions: list[Any], until: float) -> tuple[int, int]:
    """(least, greatest) mantissa of ``value`` under ``assertions``: its interval bound, narrowed by z3 only when
    the value then lies within three neighbouring grid points (only such a narrow range can let a coordinate
    freeze), and only by answers z3 proved (unsat); anything else keeps the interval, which is sound."""
    mantissa = value.scaled_num(scale)  # every value is on the 2^-f grid
    if isinstance(mantissa, int):
        return mantissa, mantissa
    interval = (math.ceil(value.lo * scale), math.floor(value.hi * scale))
    if interval[1] - interval[0] <= 1:
        return interval
    solver = z3.Solver()
    solver.add(*assertions)

    def answer(*extra) -> z3.CheckSatResult:
        left = until - time.perf_counter()
        if left <= 0:
            return z3.unknown
        solver.set("timeout", max(1, int(1000 * min(left, QUERY_SECONDS))))
        solver.push()
        solver.add(*extra)
        try:
            return solver.check()
        finally:
            solver.pop()

    left = until - time.perf_counter()
    if left <= 0:
        return interval
    solver.set("timeout", max(1, int(1000 * min(left, QUERY_SECONDS))))
    if solver.check() != z3.sat:
        return interval
    seen = solver.model().eval(mantissa, model_completion=True).as_long()
    if answer(z3.Or(mantissa <= seen - 2, mantissa >= seen + 2)) != z3.unsat:
        return interval  # wider than three grid points (or undecided): nothing to gain
    lo = seen if answer(mantissa <= seen - 1) == z3.unsat else seen - 1
    hi = seen if answer(mantissa >= seen + 1) == z3.unsat else seen + 1
    return max(lo, interval[0]), min(hi, interval[1])


__all__ = ["Coordinate", "CountingModel", "Frozen", "NotApplicable", "Sums", "rounded_average", "value_bounds"]

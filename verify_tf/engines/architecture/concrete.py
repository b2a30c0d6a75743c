"""Concrete members of an architecture class, chosen by the solver: the witness when an induction step fails.

When a step of the position-blindness induction fails (URPE, absolute PE, a BOS column weighed by position),
the generic step query's model speaks about arbitrary functions and need not be a real layer. Here the same
step is solved again with everything concrete except the parameters of ONE sublayer (the "active" one):

  * the constant input x is fixed (a token of the domain), the columns entering the active sublayer are
    computed by the reference interpreter; every other block is a pass-through (zero weights; the residual
    connection carries the stream), or, before the active block and without a residual, the spec's block;
  * in the active attention layer one head is active: W_Q = W_K = 0 and an RPE bias from a short list of
    patterns (zero, or 1 at offset -1 / +1), so its attention rows are known exactly (computed with the
    arithmetic's own ``attention_weights``); the solver chooses W_V, b_V, the URPE table C and b_O, with W_O
    copying head coordinate c to stream coordinate c; the other heads have zero weights;
  * an active embedding chooses the absolute PE table.

Parameters are integers times 2^-g (g = the fixed-point fractional bits, 0 in exact arithmetic) with small
bounded mantissas; the URPE table C holds small integers and enters products through its bits
(C·x = Σ_b 2^b If(β_b, x, 0) - 8x); fixed-point rounding is encoded exactly (floor = integer division by a
constant power of two, saturation = a clamp). Every query is linear and its model is a concrete Model of
exact rationals; among the solutions the solver prefers small parameters (an L1 objective). The caller replays
it on the interpreter before use.

Two goals: ``separate_positions`` (two user positions differ by more than a tolerance) and
``realise_targets`` (the readout equals given targets at every position, e.g. position-index 1..n).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import z3

from ...ir import AlphabetTokens, AttentionLayer, Block, FeedForward, Head, Model, RelativeTable, Token, Vector, zeros
from ...semantics import Arithmetic, Fixed, evaluate
from ...symbolic.solve import SAT, Session
from ...work import Deadline

VALUE_BITS = 3  # parameters lie in [-2^3, 2^3): small, readable witnesses
OPTIMISE_SECONDS = 5.0  # budget for preferring small parameters after a solution was found
TABLE_BITS = 4  # the URPE table C: integers in [-2^3, 2^3) (enough for the paper's 0/1 tables, few bits)


@dataclass(frozen=True)
class ConcreteMember:
    """A concrete model of the class (solver-chosen active sublayer) and what the solver claims it does."""

    model: Model
    tokens: tuple[Token, ...]  # the constant input (user tokens; BOS is added by the model)
    active: str  # e.g. "layers[0].attention.heads[0]" or "positional-encoding"
    parameters: dict[str, list[Any]]  # the solver's values for the active sublayer: (nested) lists of exact strings
    claimed_readout: list[Fraction]  # per user position, from the solver's model
    claimed_output: list[Vector]
    seconds: float


class _Unit:
    """Numbers of one arithmetic as solver terms, with the interpreter's rounding as exact linear constraints.

    Fixed point: every term is an integer mantissa (value = m·2^-f); round = floor division by a power of two
    (linear: the divisor is a constant), saturate = a clamp. Exact: real terms, no rounding; parameters are
    then integers (g = 0). Parameters are integer mantissas in [-2^(3+g), 2^(3+g)).
    """

    def __init__(self, arithmetic: Arithmetic, solver: Session) -> None:
        self.fixed = isinstance(arithmetic, Fixed)
        self.arith = arithmetic
        self.grid = arithmetic if isinstance(arithmetic, Fixed) else Fixed(16, 0)  # used in fixed point only
        self.g = self.grid.frac if self.fixed else 0
        self.scale = 1 << self.g
        self.solver = solver
        limit = 1 << (VALUE_BITS + self.g)
        self.lo, self.hi = -limit, limit - 1
        if self.fixed:
            self.lo, self.hi = max(self.lo, self.grid.min_mantissa), min(self.hi, self.grid.max_mantissa)
        self.mantissas: list[z3.ArithRef] = []  # every parameter, for the size objective

    def parameter(self, name: str) -> z3.ArithRef:
        m = z3.Int(name)
        self.solver.add(m >= self.lo, m <= self.hi)
        self.mantissas.append(m)
        return m

    def term(self, mantissa: z3.ArithRef) -> z3.ArithRef:
        """A parameter as a number term (mantissa in fixed, value in exact)."""
        return mantissa if self.fixed else z3.ToReal(mantissa)

    def const(self, x: Fraction) -> z3.ArithRef:
        return z3.IntVal(self.grid.mantissa(x)) if self.fixed else z3.RealVal(x)

    def value(self, term: z3.ArithRef) -> z3.ArithRef:
        """The real value of a number term (for the readout and the goals)."""
        return z3.ToReal(term) / self.scale if self.fixed else term

    def saturate(self, m: z3.ArithRef) -> z3.ArithRef:
        if not self.fixed:
            return m
        lo, hi = self.grid.min_mantissa, self.grid.max_mantissa
        return z3.If(m < lo, lo, z3.If(m > hi, hi, m))

    def affine(self, weights: Sequence[z3.ArithRef], column: Vector, bias: z3.ArithRef) -> z3.ArithRef:
        """round(W z + b) for parameter mantissas W, b and a concrete column z."""
        if not self.fixed:
            return z3.Sum([z3.ToReal(w) * z3.RealVal(x) for w, x in zip(weights, column)]) + z3.ToReal(bias)
        exact = z3.Sum([w * self.grid.mantissa(x) for w, x in zip(weights, column)]) + bias * self.scale
        return self.saturate(exact / self.scale)  # Int division by a positive constant is floor

    def weighted(self, row: Sequence[Fraction], products: Sequence[z3.ArithRef], product_scale: int) -> z3.ArithRef:
        """round(Σ_j a_j x_j): products are mantissas at scale 2^(product_scale·g), a_j concrete rationals."""
        live = [(a, x) for a, x in zip(row, products) if a != 0]
        if not live:
            return self.const(Fraction(0))
        if not self.fixed:
            return z3.Sum([z3.RealVal(a) * x for a, x in live])
        common = 1
        for a, _ in live:
            common = common * a.denominator // _gcd(common, a.denominator)
        numerator = z3.Sum([int(a * common) * x for a, x in live])
        return self.saturate(numerator / (common * self.scale ** (product_scale - 1)))


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


def _frac(value: z3.ExprRef) -> Fraction:
    value = z3.simplify(value)
    if z3.is_int_value(value):
        return Fraction(value.as_long())
    if z3.is_rational_value(value):
        return Fraction(value.numerator_as_long(), value.denominator_as_long())
    raise ValueError(f"solver value {value} is not rational")


def _zero_head(head: Head, dim: int) -> Head:
    k, m = head.key_dim, head.value_dim

    def zero_table(table: RelativeTable | None) -> RelativeTable | None:
        return RelativeTable.constant(Fraction(0), table.radius) if table is not None else None

    return replace(
        head,
        query=tuple(zeros(dim) for _ in range(k)),
        key=tuple(zeros(dim) for _ in range(k)),
        value=tuple(zeros(dim) for _ in range(m)),
        output=tuple(zeros(m) for _ in range(dim)),
        query_bias=zeros(k),
        key_bias=zeros(k),
        value_bias=zeros(m),
        rpe_bias=zero_table(head.rpe_bias),
        urpe_c=zero_table(head.urpe_c),
        alibi=replace(head.alibi, slope=Fraction(0)) if head.alibi is not None else None,  # slope 0: rows as computed
    )


def _pass_through(block: Block, dim: int) -> Block | None:
    """The same block with zero weights: the identity when every sublayer has its residual connection."""
    attention = block.attention
    ff = block.feed_forward
    if (attention is not None and not attention.residual) or (ff is not None and not ff.residual):
        return None
    if attention is not None:
        attention = AttentionLayer(tuple(_zero_head(h, dim) for h in attention.heads), zeros(dim), True)
    if ff is not None:
        ff = FeedForward(
            tuple(zeros(dim) for _ in range(ff.width)),
            zeros(ff.width),
            tuple(zeros(ff.width) for _ in range(dim)),
            zeros(dim),
            True,
        )
    return Block(attention, ff)


def _feed_forward_pass_through(block: Block, dim: int) -> FeedForward | None:
    """The block's feed-forward with zero weights (the identity through its residual connection), or None."""
    if block.feed_forward is None:
        return None
    through = _pass_through(Block(None, block.feed_forward), dim)
    assert through is not None  # members are built only where every sublayer has its residual connection
    return through.feed_forward


def _bias_patterns(head: Head) -> list[RelativeTable | None]:
    """RPE biases that give known, position-dependent rows: zero, or a bump of 1 just before / after i."""
    if head.rpe_bias is None or head.positional == "standard":
        return [None if head.rpe_bias is None else RelativeTable.constant(Fraction(0), head.rpe_bias.radius)]
    radius = head.rpe_bias.radius
    patterns: list[RelativeTable | None] = [RelativeTable.constant(Fraction(0), radius)]
    if head.scoring != "uniform" and radius >= 1:
        for offset in (-1, 1):
            values = [Fraction(0)] * (2 * radius + 1)
            values[offset + radius] = Fraction(1)
            patterns.append(RelativeTable(tuple(values)))
    return patterns


@dataclass
class _Plan:
    """One attempt: the skeleton model, which sublayer is active, and how to encode it."""

    skeleton: Model  # every block already concrete except the active one's chosen parameters
    active_block: int | None  # None: the positional encoding is active
    active_head: int | None
    bias: RelativeTable | None
    readout: Vector


def _skeleton(model: Model, active_block: int | None) -> Model | None:
    blocks = []
    for index, block in enumerate(model.blocks):
        if index == active_block:
            blocks.append(block)
            continue
        through = _pass_through(block, model.dim)
        if through is None:
            if active_block is not None and index < active_block:
                blocks.append(block)  # before the active layer any concrete block will do: its output is computed
                continue
            return None
        blocks.append(through)
    pe = model.positional_encoding
    if pe is not None and active_block is not None:
        pe = tuple(zeros(model.dim) for _ in pe)
    return replace(model, blocks=tuple(blocks), positional_encoding=pe, name="solver-chosen member of the class")


def _readouts(model: Model) -> list[Vector]:
    unit = [tuple(Fraction(int(c == k)) for c in range(model.dim)) for k in range(model.dim)]
    first = [model.readout] if any(model.readout) else []
    return first + [u for u in unit if u != model.readout]


def _plans(model: Model, active_block: int | None, readouts: list[Vector]) -> Iterator[_Plan]:
    skeleton = _skeleton(model, active_block)
    if skeleton is None:
        return
    if active_block is None:
        for u in readouts:
            yield _Plan(skeleton, None, None, None, u)
        return
    layer = model.blocks[active_block].attention
    ff = model.blocks[active_block].feed_forward
    if layer is None or (ff is not None and not ff.residual):
        return
    order = sorted(
        range(len(layer.heads)), key=lambda h: (layer.heads[h].positional != "urpe", not layer.heads[h].causal, h)
    )
    for h in order:
        for bias in _bias_patterns(layer.heads[h]):
            for u in readouts:
                yield _Plan(skeleton, active_block, h, bias, u)


class _Encoded:
    """The active sublayer with unknown parameters on a concrete constant input, up to the readout."""

    def __init__(self, plan: _Plan, arithmetic: Arithmetic, tokens: tuple[Token, ...], session: Session):
        self.plan = plan
        self.arith = arithmetic
        self.tokens = tokens
        self.solver = session
        self.unit = _Unit(arithmetic, self.solver)
        self.params: dict[str, list[Any]] = {}
        model = plan.skeleton
        self.bos = 1 if isinstance(model.tokens, AlphabetTokens) and model.tokens.bos is not None else 0
        if plan.active_block is None:
            columns = self._encode_pe(model, tokens)
        else:
            prefix = replace(model, blocks=model.blocks[: plan.active_block])
            entering = evaluate(prefix, arithmetic, tokens).output
            columns = self._encode_attention(model, entering, model.dim)
        self.columns = [[self.unit.value(x) for x in col] for col in columns]  # real values
        self.readout = [z3.Sum([z3.RealVal(u) * x for u, x in zip(plan.readout, col)]) for col in self.columns]

    def _matrix(self, name: str, rows: int, cols: int) -> list[list[z3.ArithRef]]:
        m = [[self.unit.parameter(f"{name}[{r}][{c}]") for c in range(cols)] for r in range(rows)]
        self.params[name] = m
        return m

    def _vector(self, name: str, rows: int) -> list[z3.ArithRef]:
        v = [self.unit.parameter(f"{name}[{r}]") for r in range(rows)]
        self.params[name] = v
        return v

    def _encode_pe(self, model: Model, tokens: tuple[Token, ...]) -> list[list[Any]]:
        unit = self.unit
        embedded = evaluate(replace(model, positional_encoding=None, blocks=()), self.arith, tokens).output
        self.pe_rows = len(model.positional_encoding or ())
        pe = self._matrix("positional-encoding", len(embedded), model.dim)
        return [
            [unit.saturate(unit.const(e[c]) + unit.term(pe[j][c])) for c in range(model.dim)]
            for j, e in enumerate(embedded)
        ]

    def _encode_attention(self, model: Model, z: list[Vector], dim: int) -> list[list[Any]]:
        plan, unit = self.plan, self.unit
        assert plan.active_block is not None and plan.active_head is not None  # an attention plan
        layer = model.blocks[plan.active_block].attention
        assert layer is not None
        head = layer.heads[plan.active_head]
        m = head.value_dim
        wv = self._matrix("value", m, dim)
        bv = self._vector("value-bias", m)
        values = [[unit.affine(wv[a], col, bv[a]) for a in range(m)] for col in z]
        rows = _rows(head, plan.bias, len(z), self.arith)
        radius = head.urpe_c.radius if head.positional == "urpe" and head.urpe_c is not None else None
        if radius is not None:
            self.c_bits = {
                o: [z3.Bool(f"C[{o}].bit{b}") for b in range(TABLE_BITS)] for o in range(-radius, radius + 1)
            }
            self.c_offset = 1 << (TABLE_BITS - 1)
            for _o, table_bits in self.c_bits.items():  # C is integer-valued: weigh it in mantissa units too
                self.unit.mantissas.append(
                    unit.scale * (z3.Sum([z3.If(b, 1 << k, 0) for k, b in enumerate(table_bits)]) - self.c_offset)
                )
        heads_out: list[list[z3.ArithRef]] = []
        for i in range(len(z)):
            coords = []
            for c in range(m):
                if radius is None:
                    coords.append(unit.weighted(rows[i], [values[j][c] for j in range(len(z))], 1))
                    continue
                products = []  # C[j-i]·v_j through the bits of C's mantissa (linear): Luo et al.'s softmax ⊙ C
                for j in range(len(z)):
                    x = values[j][c]
                    table_bits = self.c_bits[max(-radius, min(radius, j - i))]
                    zero = z3.IntVal(0) if unit.fixed else z3.RealVal(0)
                    products.append(
                        z3.Sum([z3.If(b, x * (1 << k), zero) for k, b in enumerate(table_bits)]) - x * self.c_offset
                    )
                coords.append(unit.weighted(rows[i], products, 1))
            heads_out.append(coords)
        bo = self._vector("output-bias", dim)
        after = []
        for i in range(len(z)):
            col = []
            for c in range(dim):
                head_c = heads_out[i][c] if c < m else unit.const(Fraction(0))
                projected = unit.saturate(head_c + unit.term(bo[c]))  # W_O copies coordinate c; on the grid
                col.append(unit.saturate(unit.const(z[i][c]) + projected) if layer.residual else projected)
            after.append(col)
        return after

    def user(self, values: list[Any]) -> list[Any]:
        return values[self.bos :]

    def build(self, smodel: z3.ModelRef) -> tuple[Model, str, dict[str, list[Any]]]:
        """The concrete Model (exact rationals) from the solver's values."""
        plan, unit = self.plan, self.unit
        model = plan.skeleton

        def val(term: z3.ExprRef) -> Fraction:
            return _frac(smodel.eval(term, model_completion=True)) / unit.scale

        shown: dict[str, list[Any]] = {}
        if plan.active_block is None:
            rows = [tuple(val(x) for x in row) for row in self.params["positional-encoding"]]
            rows += [zeros(model.dim) for _ in range(self.pe_rows - len(rows))]
            shown["positional-encoding"] = [[str(x) for x in r] for r in rows]
            built = replace(model, positional_encoding=tuple(rows), readout=plan.readout)
            return built, "positional-encoding", shown
        block = model.blocks[plan.active_block]
        layer = block.attention
        assert layer is not None  # the active block's attention
        heads = []
        for h, head in enumerate(layer.heads):
            if h != plan.active_head:
                heads.append(_zero_head(head, model.dim))
                continue
            m = head.value_dim
            value = tuple(tuple(val(x) for x in row) for row in self.params["value"])
            value_bias = tuple(val(x) for x in self.params["value-bias"])
            output = tuple(tuple(Fraction(int(r == c)) for c in range(m)) for r in range(model.dim))
            urpe = None
            if head.positional == "urpe" and head.urpe_c is not None:
                entries = []
                for o in range(-head.urpe_c.radius, head.urpe_c.radius + 1):
                    bits = [z3.is_true(smodel.eval(b, model_completion=True)) for b in self.c_bits[o]]
                    entries.append(Fraction(sum(1 << b for b, on in enumerate(bits) if on) - self.c_offset))
                urpe = RelativeTable(tuple(entries))
                shown["urpe-c"] = [str(x) for x in entries]
            zero = _zero_head(head, model.dim)
            heads.append(
                replace(zero, value=value, value_bias=value_bias, output=output, rpe_bias=plan.bias, urpe_c=urpe)
            )
            shown["value"] = [[str(x) for x in r] for r in value]
            shown["value-bias"] = [str(x) for x in value_bias]
            if plan.bias is not None:
                shown["rpe-bias"] = [str(x) for x in plan.bias.values]
        output_bias = tuple(val(x) for x in self.params["output-bias"])
        shown["output-bias"] = [str(x) for x in output_bias]
        new_block = Block(
            AttentionLayer(tuple(heads), output_bias, layer.residual),
            _feed_forward_pass_through(block, model.dim),
        )
        blocks = list(model.blocks)
        blocks[plan.active_block] = new_block
        built = replace(model, blocks=tuple(blocks), readout=plan.readout)
        return built, f"layers[{plan.active_block}].attention.heads[{plan.active_head}]", shown


def _rows(head: Head, bias: RelativeTable | None, total: int, arithmetic: Arithmetic) -> list[list[Fraction]]:
    """The active head's normalised rows: scores round(0 + B[j-i]) through the arithmetic's own weights."""
    rows = []
    for i in range(total):
        scores: list[Fraction | None] = []
        for j in range(total):
            if head.causal and j > i:
                scores.append(None)
            else:
                b = bias.at(j - i) if bias is not None and head.positional != "standard" else Fraction(0)
                scores.append(arithmetic.round(b))
        rows.append(arithmetic.attention_weights(scores, head.scoring))
    return rows


def _solve(
    model: Model,
    arithmetic: Arithmetic,
    active_block: int | None,
    candidates: Sequence[tuple[Token, ...]],
    goal: Callable[[_Encoded], z3.BoolRef],
    readouts: list[Vector],
    timeout: float,
    seed: int,
) -> ConcreteMember | None:
    deadline = Deadline(timeout)
    start = time.perf_counter()
    for plan in _plans(model, active_block, readouts):
        for tokens in candidates:
            if deadline.expired():
                return None
            encoded = _Encoded(plan, arithmetic, tokens, Session(deadline, seed=seed))
            encoded.solver.add(goal(encoded))
            if encoded.solver.check() != SAT:
                continue
            smodel = _smallest(encoded, Deadline(min(OPTIMISE_SECONDS, deadline.remaining()))) or encoded.solver.model()
            built, active, shown = encoded.build(smodel)
            readout = [_frac(smodel.eval(q, model_completion=True)) for q in encoded.user(encoded.readout)]
            output = [
                tuple(_frac(smodel.eval(x, model_completion=True)) for x in col)
                for col in encoded.user(encoded.columns)
            ]
            return ConcreteMember(built, tokens, active, shown, readout, output, time.perf_counter() - start)
    return None


def _smallest(encoded: _Encoded, deadline: Deadline) -> z3.ModelRef | None:
    """The same query with the simplest parameters (readable witnesses); None when it does not finish in time."""
    if deadline.expired():
        return None
    optimiser = Session(deadline, seed=None, optimize=True)
    optimiser.add(encoded.solver.assertions())
    size = encoded.unit.mantissas
    optimiser.minimize(z3.Sum([z3.If(x == 0, 0, 1) for x in size]))  # fewest non-zero parameters,
    optimiser.minimize(z3.Sum([z3.If(x < 0, 1, 0) for x in size]))  # then fewest negative ones,
    optimiser.minimize(z3.Sum([z3.If(x >= 0, x, -x) for x in size]))  # then the smallest
    return optimiser.model() if optimiser.check() == SAT else None


def _members_buildable(model: Model) -> bool:
    """Members are built from zero-weight pass-through blocks with ReLU feed-forwards and no LayerNorm, which
    belong to the model's class only when it has neither (a post-LN block is no pass-through)."""
    return next(model.norms(), None) is None and all(
        b.feed_forward is None or b.feed_forward.activation == "relu" for b in model.blocks
    )


def separate_positions(
    model: Model,
    arithmetic: Arithmetic,
    active_block: int | None,
    candidates: Sequence[tuple[Token, ...]],
    on: str = "output",
    tolerance: Fraction = Fraction(0),
    timeout: float = 30.0,
    seed: int = 0,
) -> ConcreteMember | None:
    """A member of the class whose user positions differ by more than ``tolerance`` on a constant input.

    ``active_block`` is the block whose attention the solver chooses (None: the absolute PE table).
    """
    if not _members_buildable(model):
        return None

    def goal(enc: _Encoded) -> z3.BoolRef:
        observed = [[q] for q in enc.user(enc.readout)] if on == "readout" else enc.user(enc.columns)
        tol = z3.RealVal(tolerance)
        return z3.Or([z3.Or(a - b > tol, b - a > tol) for col in observed[1:] for a, b in zip(col, observed[0])])

    readouts = _readouts(model) if on == "readout" else [model.readout]
    return _solve(model, arithmetic, active_block, candidates, goal, readouts, timeout, seed)


def realise_targets(
    model: Model,
    arithmetic: Arithmetic,
    active_block: int | None,
    tokens: tuple[Token, ...],
    targets: Sequence[Fraction],
    timeout: float = 30.0,
    seed: int = 0,
) -> ConcreteMember | None:
    """A member of the class whose readout equals ``targets`` (one per user position) on ``tokens`` exactly."""
    if not _members_buildable(model):
        return None

    def goal(enc: _Encoded) -> z3.BoolRef:
        return z3.And([q == z3.RealVal(t) for q, t in zip(enc.user(enc.readout), targets)])

    return _solve(model, arithmetic, active_block, [tokens], goal, _readouts(model), timeout, seed)

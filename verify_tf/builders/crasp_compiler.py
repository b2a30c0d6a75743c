"""Compile a C-RASP program into a fixed-precision transformer in verify-tf's model IR.

The compiled model reads the word with a BOS token prepended (position 0), uses one causal ``uniform``
attention layer per level of counting, ReLU feed-forward layers for comparisons and boolean logic, and
runs in ``fixed`` arithmetic with ``exact-sums`` attention (Yang, Cadilhac & Chiang 2025: sums inside
attention are exact, the head output is rounded once, toward −∞).  The model **accepts at position i iff
its readout q_i = u · z_i is > 0**; the compiler makes q_i ≥ 1 on acceptance and q_i ≤ 0 otherwise.

Construction (docs/crasp.md, "Compiling to a transformer", has the full argument):

* **Booleans** live in the residual stream as 0/1 values that are 0 at BOS.  A boolean is an affine
  *form* over stream dimensions.  Depth-0 booleans are functions of the current letter, hence linear in the
  one-hot letter embedding (no layer at all).  ``!P`` is the form (1 − bos) − P.
* **Counts never live in the stream.**  Every comparison is normalised to a boolean combination of
  *atoms* L ≥ 0 where L = Σ c_m·#P_m + k has integer coefficients: C1 < C2 becomes C2 − C1 − 1 ≥ 0
  (counts are integers), + and − act on L, min/max/``? :`` are pushed outward
  (min(a, b) ≥ 0 ⇔ a ≥ 0 ∧ b ≥ 0, max ⇔ ∨, (P ? a : b) ≥ 0 ⇔ (P ∧ a ≥ 0) ∨ (¬P ∧ b ≥ 0)).
* **Atom = one value coordinate of a uniform causal head**: v_j = Σ c_m·P_m(j) + k·bos_j, so at
  position i the head outputs y = ⌊(Σ_{j≤i} v_j)/(i+1)⌋_f = ⌊L_i/(i+1)⌋_f.  Since i + 1 > 0 and floor
  to f bits preserves the sign of a rational (x ≥ 0 ⇔ ⌊x⌋_f ≥ 0), **L ≥ 0 ⇔ y ≥ 0 for every length**:
  no length bound, any f ≥ 0.  All atoms whose counted booleans are available share one head.
* **Threshold** (one feed-forward sublayer, two ReLUs): [y ≥ 0] ∧ g_1 ∧ … ∧ g_r ∧ ¬BOS is
  2^f·(relu(y + 2^-f − B·pen) − relu(y − B·pen)) with pen = (r + 1) − (1 − bos) − Σ g_t and B > |y|: y is a
  multiple of 2^-f, so the difference is 2^-f or 0.  A negated atom is [y < 0] = [−y − 2^-f ≥ 0] on the
  same head output.  Conjunctions of several thresholds use a gate relu(Σ g − (r − 1)); disjunctions are
  negated conjunctions.  The output's top-level ∧ / ∨ is folded into the readout
  (Σ g − (r − 1), resp. Σ g).

Attention layers = the depth of the output (each atom's head sits one level above the booleans it
counts); fewer only when constant folding removes counts (e.g. ``#"a" - #"a" > 0``).  Every value is on
the 2^-f grid and bounded independently of the length, so the model is exact for every length in the
computed number of bits.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from itertools import chain

from verify_tf.crasp.ast import (
    ArithOp,
    BoolConst,
    BoolOp,
    Compare,
    Conditional,
    Count,
    CountConst,
    CraspError,
    Expr,
    GuardedCount,
    Letter,
    MinMax,
    Neg,
    Not,
    PositionTest,
    Program,
    Ref,
    Scale,
    Type,
)
from verify_tf.crasp.depth import program_depth
from verify_tf.crasp.parser import load_program
from verify_tf.ir import AlphabetTokens, AttentionLayer, Block, FeedForward, Head, Model, vector, zeros
from verify_tf.ir.edit import EditError, apply_settings, with_parameter
from verify_tf.semantics import Fixed
from verify_tf.semantics.exp_table import exp_mantissa

from .crasp_positional import copy_head, guarded_count, periodic_head, position_test
from .crasp_values import (
    Atom,
    AverageNode,
    BoolValue,
    Choice,
    Conj,
    CountValue,
    Disj,
    Extremum,
    Form,
    GateNode,
    InputNode,
    Leaf,
    Linear,
    Materialized,
    NodeId,
    PeriodicNode,
    ShiftNode,
    StreamNode,
    Table,
    ThresholdNode,
)

__all__ = [
    "BOS",
    "Compiled",
    "apply_settings",
    "build_construction",
    "compile_program",
    "required_bits",
    "with_parameter",
]

BOS = "<bos>"
"""The BOS symbol of compiled models."""

MAX_LEAVES = 4096
"""Largest number of linear pieces one comparison may normalise to (min/max/? : multiply them)."""


@dataclass(frozen=True)
class Compiled:
    """A compiled program: the model and what the construction guarantees about it."""

    model: Model
    bits: int  # total bits the model needs (no saturation at any length)
    frac: int
    program_depth: int
    attention_layers: int
    feed_forward_layers: int
    blocks: int  # attention layers + feed-forward-only blocks (the second sublayer nested gates need)
    averages: int  # head value coordinates (atoms L ≥ 0 up to negation)
    thresholds: int
    gates: int
    copies: int = 0  # copy-head coordinates (guarded counts and position thresholds: RPE tables)
    periodic: int = 0  # periodic heads (position tests modulo M: RoPE)

    @property
    def arithmetic(self) -> Fixed:
        return Fixed(self.bits, self.frac, "exact-sums")

    def describe(self) -> list[str]:
        depth_note = "" if self.attention_layers == self.program_depth else " (constant folding removed counts)"
        return [
            f"{self.attention_layers} attention layers (program depth {self.program_depth}){depth_note}, "
            f"{self.feed_forward_layers} feed-forward layers, width {self.model.dim}",
            f"{self.blocks} blocks: {self.attention_layers} with attention, "
            f"{self.blocks - self.attention_layers} feed-forward only",
            f"{self.averages} counting coordinates, {self.thresholds} thresholds, {self.gates} gates"
            + (
                f", {self.copies} copied booleans (hardmax heads with an RPE table), "
                f"{self.periodic} periodic position tests (hardmax heads with RoPE)"
                if self.copies or self.periodic
                else ""
            ),
            f"arithmetic: {{mode: fixed, bits: {self.bits}, frac: {self.frac}, attention-rounding: exact-sums}}"
            " (exact for every input length)",
            "accepts at position i iff readout q_i > 0",
        ]


# ============================================================================ the compiler


class _Compiler:
    def __init__(self, program: Program, frac: int) -> None:
        self.program = program
        self.alphabet = program.alphabet
        self.frac = frac
        self.unit = Fraction(1, 1 << frac)
        self.probe_arithmetic = Fixed(64, frac, "exact-sums")  # periodic heads are checked in it (no saturation)
        self.nodes: list[StreamNode] = []
        self.ids: dict[StreamNode, NodeId] = {}
        self.stage: list[int] = []  # attention layer after which the node is available (0: embedding)
        self.sub: list[int] = []  # feed-forward sublayer of that stage computing it (0: none needed)
        self.bos = self.node(InputNode(None))
        self.letters = {symbol: self.node(InputNode(symbol)) for symbol in self.alphabet}
        self.one = Form.of({self.bos: -1}, 1)  # 1 at every word position, 0 at BOS
        self.booleans: dict[str, BoolValue] = {}
        self.counts: dict[str, CountValue] = {}
        self.lowered: dict[BoolValue, Form] = {}

    # ---------------------------------------------------------------- nodes

    def node(self, node: StreamNode) -> NodeId:
        if node in self.ids:
            return self.ids[node]
        match node:
            case InputNode():
                stage, sub = 0, 0
            case AverageNode(linear):
                stage, sub = 1 + max((self._form_stage(f) for f, _ in linear.terms), default=0), 0
            case ThresholdNode(average, _, guards):
                stage, sub = self._after((average, *chain.from_iterable(g.nodes for g in guards)))
            case GateNode(forms):
                stage, sub = self._after(tuple(chain.from_iterable(f.nodes for f in forms)))
            case ShiftNode(form, _):
                stage, sub = 1 + self._form_stage(form), 0
            case PeriodicNode():
                stage, sub = 1, 0
        self.nodes.append(node)
        self.stage.append(stage)
        self.sub.append(sub)
        self.ids[node] = len(self.nodes) - 1
        return len(self.nodes) - 1

    def _form_stage(self, form: Form) -> int:
        return max((self.stage[n] for n in form.nodes), default=0)

    def _after(self, inputs: tuple[NodeId, ...]) -> tuple[int, int]:
        """(stage, sublayer) of a feed-forward unit reading ``inputs``: the first sublayer after them."""
        stage = max(self.stage[n] for n in inputs)
        return stage, 1 + max((self.sub[n] for n in inputs if self.stage[n] == stage), default=0)

    # ---------------------------------------------------------------- booleans (AST -> negation normal form)

    def boolean(self, expr: Expr) -> BoolValue:
        match expr:
            case BoolConst(value):
                return Table(frozenset(self.alphabet) if value else frozenset())
            case Letter(symbol):
                return Table(frozenset({symbol}))
            case Ref(name):
                return self.booleans[name]
            case Not(operand):
                return self.negate(self.boolean(operand))
            case BoolOp("&&", left, right):
                return self.conj((self.boolean(left), self.boolean(right)))
            case BoolOp("||", left, right):
                return self.disj((self.boolean(left), self.boolean(right)))
            case Compare(op, left, right):
                return self.compare(op, self.count(left), self.count(right))
            case PositionTest(predicate):
                return position_test(self, predicate)
        raise TypeError(f"not a boolean C-RASP expression: {expr!r}")

    def negate(self, value: BoolValue) -> BoolValue:
        match value:
            case Table(letters):
                return Table(frozenset(self.alphabet) - letters)
            case Atom(linear):
                return Atom(linear.negated().shifted(-1))  # not (L >= 0)  <=>  -L - 1 >= 0 (integers)
            case Conj(items):
                return self.disj(tuple(self.negate(item) for item in items))
            case Disj(items):
                return self.conj(tuple(self.negate(item) for item in items))
            case Materialized(form):
                return Materialized(self.one.plus(form.scaled(-1)))
        raise TypeError(value)

    def conj(self, items: tuple[BoolValue, ...]) -> BoolValue:
        return self._junction(items, Conj, lambda a, b: a & b, frozenset(self.alphabet))

    def disj(self, items: tuple[BoolValue, ...]) -> BoolValue:
        return self._junction(items, Disj, lambda a, b: a | b, frozenset())

    def _junction(self, items, kind, combine, neutral: frozenset[str]) -> BoolValue:
        """Flatten, fold letter tables and constants, drop duplicates."""
        flat: list[BoolValue] = []
        table = neutral
        for item in items:
            for part in item.items if isinstance(item, kind) else (item,):
                if isinstance(part, Table):
                    table = combine(table, part.letters)
                elif part not in flat:
                    flat.append(part)
        absorbing = frozenset(self.alphabet) - neutral
        if table == absorbing or not flat:
            return Table(table)
        if table != neutral:
            flat.insert(0, Table(table))
        return flat[0] if len(flat) == 1 else kind(tuple(flat))

    # ---------------------------------------------------------------- counts

    def count(self, expr: Expr) -> CountValue:
        match expr:
            case CountConst(value):
                return Leaf(Linear((), value))
            case Ref(name):
                return self.counts[name]
            case Count(operand):
                form = self.lower(self.boolean(operand))
                return Leaf(Linear.of({form: 1}) if form.terms else Linear(()))
            case Neg(operand):
                return self.negate_count(self.count(operand))
            case Scale(factor, operand):
                return self.scale_count(self.count(operand), factor)
            case GuardedCount(guard, operand):
                return guarded_count(self, guard, self.boolean(operand))
            case ArithOp(op, left, right):
                right_value = self.count(right)
                return self.add(self.count(left), right_value if op == "+" else self.negate_count(right_value))
            case MinMax(op, left, right):
                return self.sized(Extremum(op, self.count(left), self.count(right)))
            case Conditional(condition, if_true, if_false):
                chosen = self.boolean(condition)
                if isinstance(chosen, Table) and chosen.letters in (frozenset(), frozenset(self.alphabet)):
                    return self.count(if_true if chosen.letters else if_false)
                return self.sized(Choice(chosen, self.count(if_true), self.count(if_false)))
        raise TypeError(f"not a count C-RASP expression: {expr!r}")

    def negate_count(self, value: CountValue) -> CountValue:
        match value:
            case Leaf(linear):
                return Leaf(linear.negated())
            case Extremum(op, left, right):
                return Extremum("max" if op == "min" else "min", self.negate_count(left), self.negate_count(right))
            case Choice(condition, if_true, if_false):
                return Choice(condition, self.negate_count(if_true), self.negate_count(if_false))
        raise TypeError(value)

    def scale_count(self, value: CountValue, factor: int) -> CountValue:
        """k·value: scales every linear piece (a negative k also swaps min and max)."""
        if factor < 0:
            return self.scale_count(self.negate_count(value), -factor)
        match value:
            case Leaf(linear):
                return Leaf(Linear.of({f: c * factor for f, c in linear.terms}, linear.const * factor))
            case Extremum(op, left, right):
                return Extremum(op, self.scale_count(left, factor), self.scale_count(right, factor))
            case Choice(condition, if_true, if_false):
                return Choice(condition, self.scale_count(if_true, factor), self.scale_count(if_false, factor))
        raise TypeError(value)

    def add(self, left: CountValue, right: CountValue) -> CountValue:
        """left + right with min/max/choice pushed outward: min(a, b) + c = min(a + c, b + c)."""
        match left, right:
            case Leaf(a), Leaf(b):
                return Leaf(a.plus(b))
            case Extremum(op, a, b), _:
                return self.sized(Extremum(op, self.add(a, right), self.add(b, right)))
            case Choice(condition, a, b), _:
                return self.sized(Choice(condition, self.add(a, right), self.add(b, right)))
        return self.add(right, left)

    def sized(self, value: CountValue) -> CountValue:
        if _leaves(value) > MAX_LEAVES:
            raise CraspError(
                f"a count expression expands to more than {MAX_LEAVES} linear pieces",
                hint="min, max and ? : multiply when added together; compare smaller terms",
            )
        return value

    def compare(self, op: str, left: CountValue, right: CountValue) -> BoolValue:
        difference = self.add(left, self.negate_count(right))  # left - right
        reverse = self.negate_count(difference)
        match op:
            case ">=":
                return self.nonnegative(difference)
            case ">":
                return self.nonnegative(self.add(difference, Leaf(Linear((), -1))))
            case "<=":
                return self.nonnegative(reverse)
            case "<":
                return self.nonnegative(self.add(reverse, Leaf(Linear((), -1))))
            case "==":
                return self.conj((self.nonnegative(difference), self.nonnegative(reverse)))
            case "!=":
                return self.negate(self.conj((self.nonnegative(difference), self.nonnegative(reverse))))
        raise ValueError(op)

    def nonnegative(self, value: CountValue) -> BoolValue:
        """value ≥ 0 as a boolean combination of atoms."""
        match value:
            case Leaf(linear):
                # Counts are >= 0: with all coefficients >= 0 (<= 0) the sign of the constant decides.
                coefficients = [c for _, c in linear.terms]
                if all(c >= 0 for c in coefficients) and linear.const >= 0:
                    return Table(frozenset(self.alphabet))
                if all(c <= 0 for c in coefficients) and linear.const < 0:
                    return Table(frozenset())
                return Atom(linear)
            case Extremum(op, left, right):
                parts = (self.nonnegative(left), self.nonnegative(right))
                return self.conj(parts) if op == "min" else self.disj(parts)
            case Choice(condition, if_true, if_false):
                return self.disj(
                    (
                        self.conj((condition, self.nonnegative(if_true))),
                        self.conj((self.negate(condition), self.nonnegative(if_false))),
                    )
                )
        raise TypeError(value)

    # ---------------------------------------------------------------- lowering booleans to stream forms

    def lower(self, value: BoolValue) -> Form:
        if value not in self.lowered:
            self.lowered[value] = self._lower(value)
        return self.lowered[value]

    def _lower(self, value: BoolValue) -> Form:
        match value:
            case Table(letters):
                return Form.of({self.letters[s]: 1 for s in letters})
            case Atom():
                return self._threshold(value, ())
            case Conj(items):
                atoms = [item for item in items if isinstance(item, Atom)]
                others = [self.lower(item) for item in items if not isinstance(item, Atom)]
                if not atoms:
                    return Form.of({self.node(GateNode(tuple(others))): 1})
                # The latest atom thresholds; the others (computed earlier) guard it: one sublayer saved.
                main = max(atoms, key=lambda atom: self.stage[self._average(atom)[0]])
                others += [self._threshold(atom, ()) for atom in atoms if atom is not main]
                return self._threshold(main, tuple(others))
            case Disj(items):
                return self.one.plus(self.lower(self.conj(tuple(self.negate(i) for i in items))).scaled(-1))
            case Materialized(form):
                return form
        raise TypeError(value)

    def _average(self, atom: Atom) -> tuple[NodeId, int]:
        """The head coordinate deciding ``atom`` and the sign: L ≥ 0 and −L − 1 ≥ 0 share one coordinate."""
        linear = atom.linear
        negation = linear.negated().shifted(-1)
        if negation < linear:
            return self.node(AverageNode(negation)), -1
        return self.node(AverageNode(linear)), 1

    def _threshold(self, atom: Atom, guards: tuple[Form, ...]) -> Form:
        average, sign = self._average(atom)
        return Form.of({self.node(ThresholdNode(average, sign, tuple(sorted(set(guards))))): 1})

    def readout(self, value: BoolValue) -> Form:
        """The output form; a top-level ∧ / ∨ is folded into the (exact) readout: q > 0 iff accepted."""
        match value:
            case Conj(items):
                total = Form(())
                for item in items:
                    total = total.plus(self.lower(item))
                return total.plus(self.one.scaled(-(len(items) - 1)))
            case Disj(items):
                total = Form(())
                for item in items:
                    total = total.plus(self.lower(item))
                return total
        return self.lower(value)

    def compile_definitions(self) -> Form:
        for definition in self.program.definitions:
            if definition.type is Type.BOOL:
                self.booleans[definition.name] = self.boolean(definition.expr)
            else:
                self.counts[definition.name] = self.count(definition.expr)
        return self.readout(self.booleans[self.program.output])


def _leaves(value: CountValue) -> int:
    match value:
        case Leaf():
            return 1
        case Extremum(_, left, right):
            return _leaves(left) + _leaves(right)
        case Choice(_, if_true, if_false):
            return _leaves(if_true) + _leaves(if_false)
    raise TypeError(value)


# ============================================================================ building the model


class _Builder:
    """Lays out the reachable nodes in stream dimensions and emits the blocks."""

    def __init__(self, compiler: _Compiler, output: Form, heads: str = "uniform") -> None:
        self.c = compiler
        self.output = output
        self.heads = heads
        # softmax-bos: the weight of a non-BOS key relative to BOS's, E[1]/2^f = ⌊e^(-2^-f)·2^f⌋/2^f
        self.bos_scale = Fraction(exp_mantissa(1, compiler.frac), 1 << compiler.frac) if heads == "softmax-bos" else 1
        self.reachable = self._reachable(output)
        self.dims: dict[NodeId, int] = {compiler.bos: 0}
        for index, symbol in enumerate(compiler.alphabet):
            self.dims[compiler.letters[symbol]] = 1 + index
        computed = sorted(
            (n for n in self.reachable if not isinstance(compiler.nodes[n], InputNode)),
            key=lambda n: (compiler.stage[n], compiler.sub[n], n),
        )
        for node in computed:
            self.dims[node] = len(self.dims)
        self.computed = computed
        self.width = len(self.dims)
        # Interval of every stream dimension (booleans 0/1; head outputs within their value range).
        self.ranges: dict[int, tuple[Fraction, Fraction]] = {d: (Fraction(0), Fraction(1)) for d in self.dims.values()}
        self.extremes: list[Fraction] = [Fraction(0), Fraction(1)]  # every pre-rounding value and weight

    def _reachable(self, output: Form) -> set[NodeId]:
        seen: set[NodeId] = set()
        stack = list(output.nodes)
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            match self.c.nodes[node]:
                case AverageNode(linear):
                    stack += [n for form, _ in linear.terms for n in form.nodes]
                case ThresholdNode(average, _, guards):
                    stack += [average, *(n for g in guards for n in g.nodes)]
                case GateNode(forms):
                    stack += [n for f in forms for n in f.nodes]
                case ShiftNode(form, _):
                    stack += list(form.nodes)
        return seen

    # ---------------------------------------------------------------- affine rows

    def row(self, form: Form, scale: int | Fraction = 1) -> tuple[list[Fraction], Fraction]:
        weights = [Fraction(0)] * self.width
        for node, coefficient in form.terms:
            weights[self.dims[node]] += coefficient * scale
        return weights, Fraction(form.const * scale)

    def interval(self, weights: list[Fraction], bias: Fraction) -> tuple[Fraction, Fraction]:
        """Bounds of weights · z + bias over the box of the stream's dimension ranges."""
        lo = hi = bias
        for d, w in enumerate(weights):
            a, b = self.ranges[d]
            lo += min(w * a, w * b)
            hi += max(w * a, w * b)
        self.extremes += [lo, hi, *weights, bias]
        return lo, hi

    # ---------------------------------------------------------------- layers

    def stages(self) -> int:
        return max((self.c.stage[n] for n in self.reachable), default=0)

    def attention(self, stage: int) -> AttentionLayer:
        """The stage's heads: one uniform head for its counting coordinates, one copy head per distance, one
        periodic head per (modulus, residue)."""
        here = [n for n in self.computed if self.c.stage[n] == stage]
        heads: list[Head] = []
        averages = [n for n in here if isinstance(self.c.nodes[n], AverageNode)]
        if averages:
            heads.append(self._with_output(self.counting_head(averages), averages))
        distances = sorted({node.distance for n in here if isinstance(node := self.c.nodes[n], ShiftNode)})
        for distance in distances:
            copies = [n for n in here if isinstance(node := self.c.nodes[n], ShiftNode) and node.distance == distance]
            rows = [self.row(self.c.nodes[n].form) for n in copies]
            for weights, bias in rows:
                self.interval(weights, bias)
            self.extremes += [Fraction(3)]  # the largest copy-head score
            heads.append(self._with_output(copy_head(self.width, self.dims[self.c.bos], distance, rows), copies))
        for n in here:
            if isinstance(node := self.c.nodes[n], PeriodicNode):
                letters = [self.dims[self.c.letters[s]] for s in self.c.alphabet]
                head = periodic_head(self.width, self.dims[self.c.bos], letters, node, self.c.probe_arithmetic)
                self.extremes += [Fraction(-4), Fraction(4)]  # K·(rotated query) with |rotated query| < 2
                heads.append(self._with_output(head, [n]))
        return AttentionLayer(tuple(heads), zeros(self.width))

    def _with_output(self, head: Head, nodes: list[NodeId]) -> Head:
        """``head`` writing its value coordinate k into the stream dimension of ``nodes[k]``."""
        output = [[Fraction(0)] * len(nodes) for _ in range(self.width)]
        for column, node in enumerate(nodes):
            output[self.dims[node]][column] = Fraction(1)
        return replace(head, output=tuple(tuple(r) for r in output))

    def counting_head(self, averages: list[NodeId]) -> Head:
        value_rows, value_biases = [], []
        for node in averages:
            weights, bias = [Fraction(0)] * self.width, Fraction(0)
            linear = self.c.nodes[node].linear
            for form, coefficient in linear.terms:  # v_j = Σ c·P(j) + k·bos_j; every P is 0 at BOS
                form_weights, form_bias = self.row(form, coefficient)
                weights = [a + b for a, b in zip(weights, form_weights)]
                bias += form_bias
            # softmax-bos: BOS weighs 2^f, every other key E[1] (module docstring); BOS's value is scaled by
            # E[1]/2^f so that Σ_j w_j·v_j = E[1]·L and the head's output keeps the sign of L
            weights[self.dims[self.c.bos]] += linear.const * self.bos_scale
            self.ranges[self.dims[node]] = self.interval(weights, bias)  # the average lies in the value range
            value_rows.append(tuple(weights))
            value_biases.append(bias)
        bos_key = tuple(Fraction(1 if d == self.dims[self.c.bos] else 0) for d in range(self.width))
        keyed = self.heads == "softmax-bos"
        return Head(
            query=(zeros(self.width),),
            key=(bos_key if keyed else zeros(self.width),),
            value=tuple(value_rows),
            output=(),
            query_bias=vector([Fraction(1, 1 << self.c.frac)]) if keyed else zeros(1),
            key_bias=zeros(1),
            value_bias=tuple(value_biases),
            scoring="uniform" if self.heads == "uniform" else "softmax",
            causal=True,
        )  # softmax: zero query and key weights, every score 0 (Yang et al.'s form); softmax-bos: BOS scores 2^-f

    def feed_forward(self, stage: int, sub: int) -> FeedForward:
        units = [n for n in self.computed if self.c.stage[n] == stage and self.c.sub[n] == sub]
        w1, b1, w2_columns = [], [], []
        scale = 1 << self.c.frac
        for node in units:
            target = [Fraction(0)] * self.width
            match self.c.nodes[node]:
                case ThresholdNode(average, sign, guards):
                    low, high = self.ranges[self.dims[average]]
                    big = max(abs(low), abs(high)) + 1  # B > |y|: one failed guard pushes both ReLUs to 0
                    penalty = Form(()).plus(self.c.one)
                    for guard in guards:
                        penalty = penalty.plus(guard)
                    weights, bias = self.row(penalty, big)  # B·((1 - bos) + Σ g), at most B·(r + 1)
                    weights[self.dims[average]] += sign
                    bias += (0 if sign > 0 else -self.c.unit) - big * (len(guards) + 1)
                    for offset, coefficient in ((self.c.unit, scale), (Fraction(0), -scale)):
                        w1.append(tuple(weights))
                        b1.append(bias + offset)
                        self.interval(weights, bias + offset)
                        column = [Fraction(0)] * self.width
                        column[self.dims[node]] = Fraction(coefficient)
                        w2_columns.append(column)
                case GateNode(forms):
                    total = Form(())
                    for form in forms:
                        total = total.plus(form)
                    weights, bias = self.row(total)
                    bias -= len(forms) - 1
                    w1.append(tuple(weights))
                    b1.append(bias)
                    self.interval(weights, bias)
                    target[self.dims[node]] = Fraction(1)
                    w2_columns.append(target)
        w2 = tuple(tuple(column[d] for column in w2_columns) for d in range(self.width))
        self.extremes += [Fraction(scale), -Fraction(scale)]
        return FeedForward(tuple(w1), tuple(b1), w2, zeros(self.width))

    def model(self, name: str) -> Model:
        blocks: list[Block] = []
        for stage in range(1, self.stages() + 1):
            subs = max((self.c.sub[n] for n in self.computed if self.c.stage[n] == stage), default=0)
            attention = self.attention(stage)
            first = self.feed_forward(stage, 1) if subs >= 1 else None
            blocks.append(Block(attention, first))
            blocks += [Block(None, self.feed_forward(stage, sub)) for sub in range(2, subs + 1)]
        embedding = tuple(
            tuple(Fraction(1 if d == self.dims[self.c.letters[s]] else 0) for d in range(self.width))
            for s in self.c.alphabet
        )
        bos_embedding = tuple(Fraction(1 if d == 0 else 0) for d in range(self.width))
        # The readout has no constant: at word positions the letters sum to 1, so k = k·Σ letters, and bos
        # is 0 there. The output form F = c_bos·bos + Σ c_n·z_n + k is 0 at BOS, where the letters are 0: the bos
        # weight c_bos + k keeps q_0 = F(BOS) = 0, which rejects the empty word. (It is 0 unless a node is non-zero
        # at BOS: a periodic head says 1 there at residue 0.)
        weights, _ = self.row(Form(self.output.terms))
        weights[self.dims[self.c.bos]] += self.output.const
        for symbol in self.c.alphabet:
            weights[self.dims[self.c.letters[symbol]]] += self.output.const
        tokens = AlphabetTokens(tuple(self.c.alphabet) + (BOS,), embedding + (bos_embedding,), BOS, bos_embedding)
        return Model(tokens=tokens, dim=self.width, blocks=tuple(blocks), readout=vector(weights), name=name)


def required_bits(values: list[Fraction], frac: int) -> int:
    """The fewest total bits p whose f-fractional-bit range holds every value (mantissa in [-2^(p-1), 2^(p-1))."""
    scale = 1 << frac
    bits = frac + 1
    while True:
        top = 1 << (bits - 1)
        if all(-top <= v * scale <= top - 1 for v in values):
            return bits
        bits += 1


HEADS = ("uniform", "softmax", "softmax-bos")


def compile_program(
    program: Program, *, frac: int = 0, bits: int | None = None, name: str | None = None, heads: str = "uniform"
) -> Compiled:
    """Compile ``program`` for fixed arithmetic with ``frac`` fractional bits.

    ``bits``: the total bits to target; an error if fewer than the construction needs (it would saturate).
    Default: the fewest bits that suffice. ``heads``: ``uniform`` heads, or ``softmax`` heads with zero query
    and key weights (every score 0), which equal them only where a proof says so (e.g. under Yang et al.'s
    ``rounded-terms`` rounding: specs/crasp-L*-rounded-terms.yaml), or ``softmax-bos`` heads (``frac`` >= 1)
    whose scores depend on the key: BOS scores 2^-f, every other key 0, so under exact-sums softmax BOS weighs
    2^f and every other key E[1] = 2^f − 1; BOS's value is scaled by E[1]/2^f, so the head's numerator is
    E[1]·L and its output ⌊E[1]·L / (2^f + E[1]·i)⌋_f has the sign of L, as the uniform head's ⌊L/(i + 1)⌋_f.
    """
    if frac < 0:
        raise CraspError(f"--frac must be >= 0, got {frac}")
    if heads not in HEADS:
        raise CraspError(f"heads must be one of {', '.join(HEADS)}, got {heads!r}")
    if heads == "softmax-bos" and frac < 1:
        raise CraspError("heads: softmax-bos needs at least 1 fractional bit (E[1] = 0 at 0 bits)", hint="use --frac 1")
    compiler = _Compiler(program, frac)
    output = compiler.compile_definitions()
    builder = _Builder(compiler, output, heads)
    model = builder.model(name or "C-RASP program (accepts iff readout > 0)")
    needed = required_bits(builder.extremes + [v for _, v in model.parameters()], frac)
    if bits is not None and bits < needed:
        raise CraspError(
            f"the compiled model needs at least {needed} bits with {frac} fractional bits, got {bits}",
            hint=f"use --bits {needed} or more",
        )
    nodes = [compiler.nodes[n] for n in builder.computed]
    return Compiled(
        model=model,
        bits=bits if bits is not None else needed,
        frac=frac,
        program_depth=program_depth(program),
        attention_layers=builder.stages(),
        feed_forward_layers=sum(1 for b in model.blocks if b.feed_forward is not None),
        blocks=len(model.blocks),
        averages=sum(isinstance(n, AverageNode) for n in nodes),
        thresholds=sum(isinstance(n, ThresholdNode) for n in nodes),
        gates=sum(isinstance(n, GateNode) for n in nodes),
        copies=sum(isinstance(n, ShiftNode) for n in nodes),
        periodic=sum(isinstance(n, PeriodicNode) for n in nodes),
    )


# ============================================================================ the spec construction


def build_construction(params: dict) -> Model:
    """``model: {construct: crasp-program, program: FILE, frac: F, set: [...]}`` in a spec."""
    try:
        program = load_program(params["program"])
        compiled = compile_program(
            program,
            frac=params.get("frac") or 0,
            name=f"C-RASP {params['program'].name}",
            heads=params.get("heads") or "uniform",
        )
        return apply_settings(compiled.model, params.get("set") or ())
    except (CraspError, EditError) as error:
        raise ValueError(str(error)) from None

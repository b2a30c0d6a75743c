"""Property ``contextual-mapping`` (Yun et al., ICLR 2020, Definition 3.1) on a grid domain.

With q(L) = (u·z_1, ..., u·z_n) the readout of the model's final stream on input L, the property holds when
  (1) for every input L the n values of q(L) are pairwise distinct, and
  (2) for any two inputs L ≠ L′ every value of q(L) differs from every value of q(L′).
Options: ``readout`` (u, default the model's readout), ``margin`` m (all those values at least m apart
instead of merely distinct), ``exempt-permutations`` (pairs where L′ is a permutation of L are exempt from
(2): Yun's setting for models without positions, used with ``domain.distinct-tokens: true``, i.e. G̃_δ).

For exactly permutation-equivariant models (decided from the IR) with permutations exempt, one sorted
representative per multiset is enough (q(πL) is q(L) permuted, so it adds nothing), and the SMT queries move
the colliding positions to the front ("fix0"); other models get every sequence and free positions. Without the
exemption an equivariant model fails at once: a permutation of L shares all of L's values.

A counterexample is the pair (L, L′), the positions (i, j) (0-based) and the two values, re-evaluated on the
interpreter before it is reported.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from ..contract import Cubes, DistinctValues, Inputs, Proof, QueryPlan, Solvable, Task, Witness, closer_than
from ..domain import Domain, GridDomain, format_input
from ..ir import Model
from ..numbers import fmt
from ..schema.dsl import Boolean, Field, ListOf, Number, Obj
from ..semantics import Arithmetic, evaluate
from ..spaces import InputSpace
from ..witness import ReplayMismatch, input_to_json
from .base import require, typed

if TYPE_CHECKING:  # solver types: z3 and the encoder are imported when a solver query is built
    import z3

    from ..symbolic.inputs import SymbolicInput
    from ..symbolic.solve import Query
    from ..symbolic.values import Builder, Sym


INT64_SAFE = 1 << 62


@dataclass(frozen=True)
class Options:
    readout: tuple[Fraction, ...] | None = None  # None: the model's own readout
    margin: Fraction | None = None  # None: values must merely differ
    exempt_permutations: bool = False

    def gap_violates(self, gap: Fraction) -> bool:
        return closer_than(gap, self.margin)

    def requirement(self) -> str:
        return "distinct" if self.margin is None else f"at least {fmt(self.margin)} apart"


def equivariance_obstacle(model: Model) -> str | None:
    """None when the model is exactly permutation-equivariant by construction, else what breaks it.

    Without absolute PE, RPE/URPE and causal masks every sublayer is applied per position except attention,
    whose row i depends on the keys only through the multiset {(s_ij, v_j)}: hardmax averages its ties, uniform
    and the fixed-point softmax (exp table, exact sums, one division) are symmetric, and every rounding is
    elementwise. So f(πL) = πf(L) exactly, in both arithmetic modes.
    """
    if model.positional_encoding is not None:
        return "it has an absolute positional encoding"
    for layer, index, head in model.heads():
        if head.causal:
            return f"layers[{layer}] head {index} is causal"
        if head.positional != "standard":
            return f"layers[{layer}] head {index} uses {head.positional}"
    return None


def is_permutation(first: tuple[Any, ...], second: tuple[Any, ...]) -> bool:
    return sorted(first) == sorted(second)


class ContextualMapping(DistinctValues, Solvable, Cubes):
    name = "contextual-mapping"
    summary = (
        "Yun et al. Def 3.1: the readout values of every input are distinct, and differ from every value of "
        "every other input (optionally at least a margin apart; permutations optionally exempt)"
    )
    options = Obj(
        {
            "readout": Field(
                ListOf(
                    Number(),
                    "u: the values are q_i = u·z_i of the final stream (default: the model's readout)",
                    min_length=1,
                )
            ),
            "margin": Field(
                Number("every two values must be at least this far apart (default: merely distinct)", positive=True)
            ),
            "exempt-permutations": Field(
                Boolean(
                    "pairs where one input is a permutation of the other are exempt "
                    "from condition (2) (Yun's setting for models without positions)"
                ),
                default=False,
            ),
        },
        check=typed(Options),
    )

    def fit(self, model: Model, arithmetic: Arithmetic, domain: Domain | None, options: Options) -> None:
        require(
            isinstance(domain, GridDomain),
            "",
            "contextual-mapping needs a grid domain",
            "e.g. domain: {grid: {step: 1/2}, length: 3}",
        )
        require(
            options.readout is None or len(options.readout) == model.dim,
            "readout",
            f"readout has {len(options.readout or ())} entries, expected the model width {model.dim}",
        )

    def equivariant(self, task: Task) -> bool:
        return equivariance_obstacle(task.model) is None

    def exempt_pairs(self, task: Task) -> bool:
        options: Options = task.options
        return options.exempt_permutations

    def input_space(self, task: Task) -> InputSpace:
        sorted_ok = self.equivariant(task) and task.options.exempt_permutations
        return InputSpace(task.grid(), order="sorted" if sorted_ok else "all")

    def least_gap(self, task: Task) -> Fraction | None:
        options: Options = task.options
        return options.margin

    def requirement(self, task: Task) -> str:
        options: Options = task.options
        return options.requirement()

    def statistics(self, task: Task) -> dict[str, Any]:
        obstacle = equivariance_obstacle(task.model)
        return {
            "permutation_equivariant": True if obstacle is None else f"no: {obstacle}",
            "domain_size": task.grid().size(),
            "enumerated": "multisets" if self.input_space(task).order == "sorted" else "sequences",
            "symmetry_breaking": "fix0: colliding positions moved to 0 (and 1), the rest sorted"
            if obstacle is None
            else f"none: free (i, j), the model is not permutation-equivariant ({obstacle})",
        }

    def values(self, task: Task, tokens: tuple[Any, ...]) -> list[Fraction]:
        """q(L) on the reference interpreter."""
        trace = evaluate(task.model, task.arithmetic, tokens)
        if task.options.readout is None:
            return list(trace.readout)
        return [sum((u * x for u, x in zip(task.options.readout, z)), Fraction(0)) for z in trace.output]

    def candidate_pairs(self, task: Task) -> list[tuple[Inputs, int, Inputs, int]]:
        """For an equivariant model without the exemption: L and L with two different tokens swapped.

        f(τL) = τf(L), so q(τL) at position 1 equals q(L) at position 0: condition (2) fails for every input
        with two different tokens.
        """
        if not self.equivariant(task) or task.options.exempt_permutations:
            return []
        domain = task.grid()
        tokens, n = domain.tokens, domain.length
        if n < 2 or len(tokens) < 2:
            return []
        sequence = tuple(tokens[:n]) if domain.distinct_tokens else (tokens[0],) + (tokens[1],) * (n - 1)
        return [(sequence, 0, (sequence[1], sequence[0]) + sequence[2:], 1)]

    def pair_witness(self, task: Task, first: tuple[Any, ...], i: int, second: tuple[Any, ...], j: int) -> Witness:
        """Re-evaluate both inputs on the interpreter, confirm the violation, return the witness."""
        q1, q2 = self.values(task, first), self.values(task, second)
        same = tuple(first) == tuple(second)
        if same and i == j:
            raise ReplayMismatch("contextual-mapping: a value compared with itself", (first, i), (second, j))
        if not same and task.options.exempt_permutations and is_permutation(first, second):
            raise ReplayMismatch("contextual-mapping: the claimed pair is an exempt permutation", first, second)
        a, b = q1[i], q2[j]
        if not task.options.gap_violates(abs(a - b)):
            raise ReplayMismatch(
                f"contextual-mapping: q(L)_{i} = {a} and q(L')_{j} = {b} are {task.options.requirement()}",
                "too close",
                (str(a), str(b)),
            )
        relation = "=" if a == b else "≈"
        closeness = "" if a == b else f" (only {fmt(abs(a - b))} apart, margin {fmt(task.options.margin)})"
        summary = (
            (
                f"L = {format_input(first)}: q(L)_{i} = {fmt(a)} {relation} q(L)_{j} = {fmt(b)}{closeness}: two "
                "positions of one input"
            )
            if same
            else (
                f"L = {format_input(first)}, L′ = {format_input(second)}: q(L)_{i} = {fmt(a)} {relation} "
                f"q(L′)_{j} = {fmt(b)}{closeness}"
            )
        )
        return {
            "input": input_to_json(first),
            "other_input": input_to_json(second),
            "positions": [i, j],
            "values": [str(a), str(b)],
            "gap": str(abs(a - b)),
            "condition": 1 if same else 2,
            "summary": summary,
        }

    # -- enumerate: the same values from the batched evaluator, as integers over one denominator
    def batched_values(self, task: Task, evaluators: Any, rows: np.ndarray) -> tuple[np.ndarray, int]:
        evaluator = evaluators.of()
        if task.options.readout is None:
            values = evaluator.values(rows, "readout")
            return np.asarray(values.numerators), values.den
        values = evaluator.values(rows, "output")
        common = math.lcm(*(u.denominator for u in task.options.readout))
        weights = [int(u * common) for u in task.options.readout]
        stream = np.asarray(values.numerators)  # (B, n, d)
        if int(np.abs(stream).max(initial=0)) * sum(abs(w) for w in weights) >= INT64_SAFE // 2:
            stream = stream.astype(object)  # exact Python integers where int64 could overflow
        q = sum(w * stream[..., c] for c, w in enumerate(weights) if w != 0)
        if isinstance(q, int):  # u = 0
            q = np.zeros(stream.shape[:2], dtype=np.int64)
        return q, values.den * common

    def batched_clash(self, task: Task, values: np.ndarray, den: int) -> tuple[int, int, int] | None:
        """Condition (1) within each row: (row, i, j) of the first two positions too close."""
        if values.shape[1] < 2:
            return None
        order = np.argsort(values, axis=1, kind="stable")
        ordered = np.take_along_axis(values, order, axis=1)
        gaps = ordered[:, 1:] - ordered[:, :-1]
        margin = task.options.margin
        bad = gaps == 0 if margin is None else gaps * margin.denominator < margin.numerator * den
        hits = np.argwhere(bad)
        if not len(hits):
            return None
        row, k = (int(x) for x in hits[0])
        return row, int(order[row, k]), int(order[row, k + 1])

    # -- smt: condition (2) as a two-copy query, condition (1) as a one-copy query
    def smt_queries(self, task: Task) -> list[QueryPlan]:
        # the two-copy query first: on Lemma 6 it was usually the faster of the two (measured)
        plans = [QueryPlan("condition (2): two inputs", ("two-copy",))]
        if task.grid().length >= 2:
            plans.append(QueryPlan("condition (1): one input, two positions", ("one-copy",)))
        return plans

    def build_query(self, task: Task, plan: QueryPlan, builder: Any) -> Query:
        return (two_copy_query if plan.key[0] == "two-copy" else one_copy_query)(task, builder)

    def replay_query(self, task: Task, plan: QueryPlan, decoded: Any) -> Witness | None:
        first, i, second, j = decoded
        try:
            return self.pair_witness(task, first, i, second, j)
        except ReplayMismatch:
            return None

    def describe_proof(self, task: Task, proof: Proof) -> str:
        if proof.queries is None:
            return proof.default
        how = proof.statistics.get("symmetry_breaking", "")
        return (
            f"all values {task.options.requirement()}: no violation exists ({proof.default}; symmetry breaking: {how})"
        )


def symbolic_values(task: Task, inp: SymbolicInput, builder: Builder) -> list[Any]:
    from ..symbolic.encoder import encode_model

    trace = encode_model(task.model, task.arithmetic, inp, builder)
    if task.options.readout is None:
        return list(trace.readout)
    return [builder.linear(list(zip(task.options.readout, z))) for z in trace.output]


def too_close_formula(options: Options, builder: Builder, a: Sym, b: Sym) -> z3.BoolRef:
    """|a − b| < margin (or a = b), linear: a − b = num/den, so compare num with margin·den."""
    import z3

    difference = builder.linear([(Fraction(1), a), (Fraction(-1), b)])
    if difference.is_const:
        return z3.BoolVal(options.gap_violates(abs(difference.value)))
    if options.margin is None:
        return difference.num == 0
    bound = options.margin * difference.den  # |num| · q < p with bound = p/q
    p, q = bound.numerator, bound.denominator
    return z3.And(difference.num * q < p, difference.num * -q < p)


def token_codes(inp: SymbolicInput, domain: GridDomain) -> list[Any]:
    """One integer per position identifying its grid token (coordinate indices in base K)."""
    import z3

    K, d = len(domain.values), domain.dim
    terms = inp.index_terms
    return [z3.Sum([terms[p * d + c] * K**c for c in range(d)]) if d > 1 else terms[p] for p in range(domain.length)]


def sorted_from(codes: list[Any], start: int, strict: bool) -> list[Any]:
    return [(a < b) if strict else (a <= b) for a, b in zip(codes[start:], codes[start + 1 :])]


def claimed_pair(cases: dict[tuple[int, int], z3.BoolRef], evaluate_term: Callable[[Any], Any]) -> tuple[int, int]:
    """The (i, j) whose closeness literal the solver's model makes true (the goal is their disjunction)."""
    import z3

    return next(pair for pair, literal in cases.items() if z3.is_true(evaluate_term(literal)))


def one_copy_query(task: Task, builder: Builder) -> Query:
    """Some input has two positions with values too close: condition (1) fails."""
    import z3

    from ..symbolic.inputs import grid_input
    from ..symbolic.solve import Query

    domain = task.grid()
    inp = grid_input(domain, builder, name="x")
    q = symbolic_values(task, inp, builder)
    if equivariance_obstacle(task.model) is None:
        # f(πL) = πf(L): move the two colliding positions to 0 and 1 and sort the others; every violation
        # has such an image, so fixing (i, j) = (0, 1) keeps the query complete (research notes, "fix0")
        builder.assertions.extend(sorted_from(token_codes(inp, domain), 2, domain.distinct_tokens))
        pairs = [(0, 1)]
    else:
        pairs = [(i, j) for i, j in itertools.combinations(range(domain.length), 2)]
    cases = {pair: too_close_formula(task.options, builder, q[pair[0]], q[pair[1]]) for pair in pairs}

    def decode(evaluate_term: Callable[[Any], Any]) -> tuple[Inputs, int, Inputs, int]:
        tokens = inp.decode(lambda v: evaluate_term(v).as_long())
        i, j = claimed_pair(cases, evaluate_term)
        return tokens, i, tokens, j

    return Query(builder.assertions + [z3.Or(list(cases.values()))], [inp], builder.stats, decode)


def two_copy_query(task: Task, builder: Builder) -> Query:
    """Two inputs L ≠ L′ (not permutations of each other when exempt) with q(L)_i too close to q(L′)_j."""
    import z3

    from ..symbolic.inputs import grid_input
    from ..symbolic.solve import Query

    domain, exempt = task.grid(), task.options.exempt_permutations
    n = domain.length
    first, second = grid_input(domain, builder, name="x"), grid_input(domain, builder, name="y")
    q1, q2 = symbolic_values(task, first, builder), symbolic_values(task, second, builder)
    c1, c2 = token_codes(first, domain), token_codes(second, domain)
    if exempt:
        # not a permutation ⇔ some token w occurs a different number of times (linear, O(n) per token)
        w = builder.fresh_int("w", 0, len(domain.values) ** domain.dim - 1)
        count1, count2 = z3.Sum([z3.If(c == w, 1, 0) for c in c1]), z3.Sum([z3.If(c == w, 1, 0) for c in c2])
        builder.assertions.append(count1 != count2)
    else:
        builder.assertions.append(z3.Or([a != b for a, b in zip(c1, c2)]))
    if equivariance_obstacle(task.model) is None and exempt:
        # fix0: permute L so that i moves to 0 and sort positions 1..n-1, the same for L′; the images are still
        # non-permutations of each other, so (i, j) = (0, 0) is complete
        builder.assertions.extend(sorted_from(c1, 1, domain.distinct_tokens))
        builder.assertions.extend(sorted_from(c2, 1, domain.distinct_tokens))
        pairs = [(0, 0)]
    else:
        pairs = [(i, j) for i in range(n) for j in range(n)]
    cases = {pair: too_close_formula(task.options, builder, q1[pair[0]], q2[pair[1]]) for pair in pairs}

    def decode(evaluate_term: Callable[[Any], Any]) -> tuple[Inputs, int, Inputs, int]:
        i, j = claimed_pair(cases, evaluate_term)
        value_of = lambda v: evaluate_term(v).as_long()  # noqa: E731
        return first.decode(value_of), i, second.decode(value_of), j

    return Query(builder.assertions + [z3.Or(list(cases.values()))], [first, second], builder.stats, decode)


PROPERTY = ContextualMapping()

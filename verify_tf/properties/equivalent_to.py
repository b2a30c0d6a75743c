"""Property ``equivalent-to``: the model computes the same as another model on every input of the domain.

Option ``model:`` is a second model section (inline, file, random or construct, exactly as the top-level
``model:``); ``on: output`` compares the full final streams (same width needed), ``on: readout`` only the
readouts q, at the user's positions (and at the BOS position with ``include-bos: true``). Both models run in
the spec's arithmetic. Witness: the input, the first differing position and both values. The SMT query is a
miter: both networks encoded on the same symbolic input, "some observed value differs"; unsat proves equivalence.

Two causal models without positional information are also compared by the ``counting`` engine, both run as
counter machines side by side over strings, up to the domain's max-length or (``lengths: all``) for every
length: a prefix violates when the observed values at its last position differ.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..contract import (
    Array,
    Batched,
    Bounded,
    Capability,
    Counted,
    CountingGoal,
    Cubes,
    EachInput,
    Evaluators,
    Measures,
    Proof,
    QueryPlan,
    Sampled,
    Solvable,
    Task,
    Witness,
)
from ..domain import Domain, StringDomain, format_input
from ..ir import AlphabetTokens, GridTokens, Model
from ..numbers import fmt, fmt_vector
from ..schema.dsl import Boolean, Field, ModelSection, Obj, String
from ..semantics import Arithmetic, evaluate
from ..witness import input_to_json
from .base import (
    bos_offset,
    compared_positions,
    counted_for_every_length,
    lengths_field,
    prefix_goal,
    require,
    require_strings_for_every_length,
    typed,
)

if TYPE_CHECKING:  # solver types: z3 and the encoder are imported when a solver query is built
    from ..symbolic.solve import Query


ON = ("output", "readout")


@dataclass(frozen=True)
class Options:
    model: Model
    on: str = "output"
    include_bos: bool = False
    lengths: str = "domain"


def observed(options: Options, trace: Any) -> list[tuple[Any, ...]]:
    """Per stream position (BOS included): the readout as a 1-vector, or the final stream column."""
    return [(q,) for q in trace.readout] if options.on == "readout" else list(trace.output)


def compared(task: Task, length: int) -> list[tuple[int | str, int]]:
    return compared_positions(task.model, length, task.options.include_bos)


def cross_scaled(values: Any, other_den: int) -> np.ndarray:
    """Numerators over the common denominator lcm(den, other_den): exact, int64 while it provably fits."""
    factor = other_den // math.gcd(values.den, other_den)
    numerators = np.asarray(values.numerators)
    if factor == 1:
        return numerators
    if int(np.abs(numerators).max(initial=0)) * factor >= 1 << 62:
        numerators = numerators.astype(object)
    return numerators * factor


class EquivalentTo(EachInput, Batched, Sampled, Solvable, Cubes, Bounded, Counted):
    name = "equivalent-to"
    summary = "the model and another model give the same outputs on every input in the domain (a miter)"
    options = Obj(
        {
            "model": Field(
                ModelSection("the model to compare with (inline, file, random or construct)"), required=True
            ),
            "on": Field(
                String("compare the full final stream ('output') or only the readout q ('readout')", ON),
                default="output",
            ),
            "include-bos": Field(
                Boolean("also compare the BOS position (the user's positions are always compared)"), default=False
            ),
            "lengths": lengths_field(),
        },
        check=typed(Options),
    )

    def offers(self, options: Options) -> frozenset[type[Capability]]:
        return counted_for_every_length(super().offers(options), options.lengths)

    def other_models(self, task: Task) -> tuple[Model, ...]:
        options: Options = task.options
        return (options.model,)

    def fit(self, model: Model, arithmetic: Arithmetic, domain: Domain | None, options: Options) -> None:
        other = options.model
        require_strings_for_every_length(domain, options.lengths)
        assert domain is not None  # needs_domain: the spec loader insists
        mine, theirs = model.tokens, other.tokens
        require(
            isinstance(mine, AlphabetTokens) == isinstance(theirs, AlphabetTokens),
            "model",
            "the two models take different token kinds (grid vs alphabet)",
        )
        if isinstance(mine, AlphabetTokens) and isinstance(theirs, AlphabetTokens):
            require(
                mine.bos == theirs.bos,
                "model",
                "the two models prepend different BOS tokens, so their positions do not correspond",
            )
            alphabet = domain.alphabet if isinstance(domain, StringDomain) else ()
            missing = [s for s in alphabet if s not in theirs.symbols]
            require(
                not missing,
                "model",
                f"symbol {missing[0]!r} of the domain is not in the other model's alphabet" if missing else "",
            )
        elif isinstance(mine, GridTokens) and isinstance(theirs, GridTokens):
            require(
                theirs.dim == mine.dim,
                "model",
                f"grid tokens of dimension {mine.dim} and {theirs.dim}",
                "both models must read the same inputs",
            )
        require(
            options.on != "output" or model.dim == other.dim,
            "on",
            f"on: output compares streams of width {model.dim} and {other.dim}",
            "use on: readout",
        )
        longest = len(other.prepare_input(["?"] * max(domain.lengths)))
        require(
            other.max_length is None or longest <= other.max_length,
            "model",
            f"inputs are longer than the other model's positional encoding ({other.max_length} positions)",
        )

    def violation(self, task: Task, tokens: tuple[Any, ...]) -> Witness | None:
        options: Options = task.options
        ours = observed(options, evaluate(task.model, task.arithmetic, tokens))
        theirs = observed(options, evaluate(options.model, task.arithmetic, tokens))
        differing = [(label, p) for label, p in compared(task, len(tokens)) if ours[p] != theirs[p]]
        if not differing:
            return None
        label, p = differing[0]
        a, b = (
            (fmt(ours[p][0]), fmt(theirs[p][0]))
            if options.on == "readout"
            else (fmt_vector(ours[p]), fmt_vector(theirs[p]))
        )
        return {
            "input": input_to_json(tokens),
            "position": label,
            "value": [str(x) for x in ours[p]],
            "other_value": [str(x) for x in theirs[p]],
            "summary": f"X = {format_input(tokens)}: at position {label} the model gives {a}, the other model {b}",
        }

    # -- enumerate / search: both models on the same rows, compared exactly
    def batched_check(self, task: Task, evaluators: Any, length: int) -> None:
        evaluators.of().check(length)
        evaluators.of(task.options.model).check(length)

    def batched_violations(self, task: Task, evaluators: Evaluators, rows: Array) -> tuple[Array, Measures]:
        layer = task.options.on
        ours = evaluators.of().values(rows, layer)
        theirs = evaluators.of(task.options.model).values(rows, layer)
        columns = [p for _, p in compared(task, rows.shape[1])]
        differs = cross_scaled(ours, theirs.den)[:, columns] != cross_scaled(theirs, ours.den)[:, columns]
        return differs.reshape(len(rows), -1).any(axis=1), {}

    # -- split: both models' intervals on a cube
    def decide_on_bounds(self, task: Task, bounds_of: Any) -> tuple[str, float]:
        """``holds`` when both models' observed values are the same single point at every position (intervals
        cannot show more), ``violated`` when some coordinate's two intervals are disjoint (they differ on every
        input of the cube), else ``open``; the score is the widest interval (a float that only orders cubes)."""
        options: Options = task.options
        ours, theirs = bounds_of(), bounds_of(options.model)
        if options.on == "readout":
            pairs = list(zip(ours.readout, theirs.readout))
        else:
            pairs = [(a, b) for va, vb in zip(ours.output, theirs.output) for a, b in zip(va, vb)]
        if any(a[1] < b[0] or b[1] < a[0] for a, b in pairs):
            return "violated", 0.0
        if all(a[0] == a[1] == b[0] == b[1] for a, b in pairs):
            return "holds", 0.0
        return "open", max(float(max(a[1], b[1]) - min(a[0], b[0])) for a, b in pairs)

    # -- smt: a miter per length
    def smt_queries(self, task: Task) -> list[QueryPlan]:
        return [QueryPlan(f"length {n}", (n,)) for n in task.given_domain().lengths]

    def build_query(self, task: Task, plan: QueryPlan, builder: Any) -> Query:
        import z3

        from ..symbolic.encoder import encode_model
        from ..symbolic.inputs import input_for_length
        from ..symbolic.solve import Query

        options: Options = task.options
        inp = input_for_length(task.given_domain(), plan.key[0], builder)
        ours = encode_model(task.model, task.arithmetic, inp, builder)
        theirs = encode_model(options.model, task.arithmetic, inp, builder)
        a_side = [(q,) for q in ours.readout] if options.on == "readout" else ours.output
        b_side = [(q,) for q in theirs.readout] if options.on == "readout" else theirs.output
        differs = [builder.ne(a, b) for _, p in compared(task, plan.key[0]) for a, b in zip(a_side[p], b_side[p])]
        return Query(builder.assertions + [z3.Or(differs) if differs else z3.BoolVal(False)], [inp], builder.stats)

    def replay_query(self, task: Task, plan: QueryPlan, decoded: Any) -> Witness | None:
        return self.violation(task, decoded[0])

    # -- counting: the other model as a second counter machine beside this one
    def counting_goal(self, task: Task) -> CountingGoal:
        options: Options = task.options
        with_bos = options.include_bos and bos_offset(task.model) == 1
        return prefix_goal(task, options.model, empty_checked=with_bos)

    def prefix_violates(self, task: Task, ours: Any, theirs: Any) -> bool:
        if ours is None or theirs is None:  # the empty prefix of models without BOS: nothing to compare
            return False
        return bool(ours.readout != theirs.readout if task.options.on == "readout" else ours.stream != theirs.stream)

    def encode_prefix_violation(self, task: Task, builder: Any, ours: Any, theirs: Any) -> Any:
        import z3  # solver terms: imported when an induction is encoded

        if task.options.on == "readout":
            return builder.ne(ours.readout, theirs.readout)
        return z3.Or([builder.ne(a, b) for a, b in zip(ours.stream, theirs.stream)])

    def describe_proof(self, task: Task, proof: Proof) -> str:
        if proof.counted is None:
            return proof.default
        domain = task.strings()
        what = "readouts" if task.options.on == "readout" else "outputs"
        if task.options.lengths == "all":
            return (
                f"the two models' {what} agree on every string over {{{', '.join(domain.alphabet)}}} of every "
                f"length >= {domain.min_length} ({proof.default})"
            )
        lengths = f"{domain.min_length}..{domain.max_length}"
        return f"the two models' {what} agree on every string of length {lengths} ({proof.default})"


PROPERTY = EquivalentTo()

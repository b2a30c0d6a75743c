"""Property ``output-bounds``: for every input of the domain, the readout q_i = u·z_i lies in [lo, hi].

``positions`` are the user's positions (0 = the first token of the input; negative positions count from the
end, -1 = the last, so one spec covers every length of a string domain). A model's BOS position is checked
only with ``include-bos: true`` (witnesses name it "BOS"). The empty input has no user position: it satisfies
any bound unless its BOS is included. Witness: the input, the position and the value found there. The
exhaustive engines also report the exact readout range they saw.

A causal model without positional information over strings is also decided by the ``counting`` engine, as a
counter machine, up to the domain's max-length or (``lengths: all``) for every length: a prefix violates when
the readout at its last position is outside the bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
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
from ..domain import Domain, format_input
from ..ir import Model
from ..numbers import fmt
from ..schema.dsl import Boolean, Field, Integer, ListOf, Number, Obj
from ..schema.errors import OptionError
from ..semantics import Arithmetic, evaluate
from ..witness import input_to_json
from .base import (
    bos_offset,
    compared_positions,
    counted_for_every_length,
    lengths_field,
    prefix_goal,
    require_strings_for_every_length,
    typed,
)

if TYPE_CHECKING:  # solver types: z3 and the encoder are imported when a solver query is built
    from ..symbolic.solve import Query


@dataclass(frozen=True)
class Options:
    lo: Fraction | None = None
    hi: Fraction | None = None
    positions: tuple[int, ...] | None = None
    include_bos: bool = False
    lengths: str = "domain"

    def __post_init__(self) -> None:
        if self.lo is None and self.hi is None:
            raise OptionError("", "output-bounds needs 'lo', 'hi' or both", "e.g. {lo: -1, hi: 1}")
        if self.lo is not None and self.hi is not None and self.lo > self.hi:
            raise OptionError("lo", f"lo ({self.lo}) exceeds hi ({self.hi})")

    def outside(self, q: Fraction) -> bool:
        return (self.lo is not None and q < self.lo) or (self.hi is not None and q > self.hi)

    def shown(self) -> str:
        return f"[{fmt(self.lo) if self.lo is not None else '-inf'}, {fmt(self.hi) if self.hi is not None else 'inf'}]"


def checked(task: Task, length: int) -> list[tuple[int | str, int]]:
    """(witness label, stream index) of the positions the bound constrains on inputs of ``length`` tokens."""
    return compared_positions(task.model, length, task.options.include_bos, task.options.positions)


def _threshold(threshold: int, numerators: np.ndarray) -> int:
    """A comparison threshold for ``numerators``: clamped into int64 when they are int64 (within ±2^62, so no
    comparison changes), exact when they are Python integers (values beyond int64)."""
    if numerators.dtype == object:
        return threshold
    return max(-(1 << 63), min(threshold, (1 << 63) - 1))


class OutputBounds(EachInput, Batched, Sampled, Solvable, Cubes, Bounded, Counted):
    name = "output-bounds"
    summary = "lo <= q_i <= hi for every input in the domain and every (chosen) position"
    options = Obj(
        {
            "lo": Field(Number("smallest allowed readout value")),
            "hi": Field(Number("largest allowed readout value")),
            "positions": Field(
                ListOf(
                    Integer("a user position (0 = the first token); negative counts from the end"),
                    "positions to check (default: all)",
                )
            ),
            "include-bos": Field(Boolean("also bound the readout at the model's BOS position"), default=False),
            "lengths": lengths_field(),
        },
        "readout bounds",
        check=typed(Options),
    )

    def offers(self, options: Options) -> frozenset[type[Capability]]:
        return counted_for_every_length(super().offers(options), options.lengths)

    def fit(self, model: Model, arithmetic: Arithmetic, domain: Domain | None, options: Options) -> None:
        require_strings_for_every_length(domain, options.lengths)

    def violation(self, task: Task, tokens: tuple[Any, ...]) -> Witness | None:
        options: Options = task.options
        readout = evaluate(task.model, task.arithmetic, tokens).readout
        for label, p in checked(task, len(tokens)):
            if options.outside(readout[p]):
                return {
                    "input": input_to_json(tokens),
                    "position": label,
                    "value": str(readout[p]),
                    "readout": [str(q) for q in readout[bos_offset(task.model) :]],
                    "summary": f"X = {format_input(tokens)}: q at position {label} is {fmt(readout[p])}, "
                    f"outside {options.shown()}",
                }
        return None

    # -- enumerate / search: batches compared exactly as integers num/den; the readout range is reported
    def measure_kinds(self, task: Task) -> dict[str, str]:
        return {"readout_min": "min", "readout_max": "max"}

    def batched_violations(self, task: Task, evaluators: Evaluators, rows: Array) -> tuple[Array, Measures]:
        options: Options = task.options
        values = evaluators.of().values(rows, "readout")
        columns = [p for _, p in checked(task, rows.shape[1])]
        if not columns:
            return np.zeros(len(rows), dtype=bool), {}
        picked = values.numerators[:, columns]
        # q = num/den (den > 0), num an integer: q < lo <=> num < ceil(lo·den); q > hi <=> num > floor(hi·den)
        outside = np.zeros(len(rows), dtype=bool)
        if options.lo is not None:
            outside |= (picked < _threshold(math.ceil(options.lo * values.den), picked)).any(axis=1)
        if options.hi is not None:
            outside |= (picked > _threshold(math.floor(options.hi * values.den), picked)).any(axis=1)
        return outside, {
            "readout_min": (picked.min(axis=1), values.den),
            "readout_max": (picked.max(axis=1), values.den),
        }

    # -- smt: one query per input length, "some checked position has q < lo or q > hi"
    def smt_queries(self, task: Task) -> list[QueryPlan]:
        return [QueryPlan(f"length {n}", (n,)) for n in task.given_domain().lengths]

    def build_query(self, task: Task, plan: QueryPlan, builder: Any) -> Query:
        import z3

        from ..symbolic.encoder import encode_model
        from ..symbolic.inputs import input_for_length
        from ..symbolic.solve import Query
        from ..symbolic.values import Sym

        options: Options = task.options
        inp = input_for_length(task.given_domain(), plan.key[0], builder)
        readout = encode_model(task.model, task.arithmetic, inp, builder).readout
        outside = []
        for _, p in checked(task, plan.key[0]):
            if options.lo is not None:
                outside.append(z3.Not(builder.ge(readout[p], Sym.const(options.lo))))
            if options.hi is not None:
                outside.append(z3.Not(builder.ge(Sym.const(options.hi), readout[p])))
        return Query(builder.assertions + [z3.Or(outside) if outside else z3.BoolVal(False)], [inp], builder.stats)

    def replay_query(self, task: Task, plan: QueryPlan, decoded: Any) -> Witness | None:
        return self.violation(task, decoded[0])

    # -- split: the readout intervals of a cube against [lo, hi]
    def decide_on_bounds(self, task: Task, bounds_of: Any) -> tuple[str, float]:
        """``holds`` when every checked readout interval lies inside [lo, hi], ``violated`` when one lies wholly
        outside (every input of the cube violates), else ``open``; the score (how far an interval reaches past
        the bounds, a float that only orders cubes) sends the most suspicious cubes first."""
        options: Options = task.options
        readout = bounds_of().readout
        inside, outside, excess = True, False, 0.0
        for _, p in checked(task, len(readout) - bos_offset(task.model)):  # readout: one interval per stream position
            lo, hi = readout[p]
            if options.lo is not None:
                inside &= lo >= options.lo
                outside |= hi < options.lo
                excess = max(excess, float(options.lo - lo))
            if options.hi is not None:
                inside &= hi <= options.hi
                outside |= lo > options.hi
                excess = max(excess, float(hi - options.hi))
        return ("holds" if inside else "violated" if outside else "open"), excess

    # -- counting: the readout at the end of every constrained prefix
    def counting_goal(self, task: Task) -> CountingGoal:
        options: Options = task.options
        with_bos = options.include_bos and bos_offset(task.model) == 1
        return prefix_goal(task, positions=options.positions, empty_checked=with_bos)

    def prefix_violates(self, task: Task, ours: Any, theirs: Any) -> bool:
        return ours is not None and task.options.outside(ours.readout)

    def encode_prefix_violation(self, task: Task, builder: Any, ours: Any, theirs: Any) -> Any:
        import z3  # solver terms: imported when an induction is encoded

        from ..symbolic.values import Sym

        options: Options = task.options
        outside = []
        if options.lo is not None:
            outside.append(z3.Not(builder.ge(ours.readout, Sym.const(options.lo))))
        if options.hi is not None:
            outside.append(z3.Not(builder.ge(Sym.const(options.hi), ours.readout)))
        return z3.Or(outside)

    def describe_proof(self, task: Task, proof: Proof) -> str:
        default, statistics = proof.default, proof.statistics
        if proof.counted is not None:
            domain = task.strings()
            lengths = (
                f"of every length >= {domain.min_length}"
                if task.options.lengths == "all"
                else f"of length {domain.min_length}..{domain.max_length}"
            )
            return f"the readout lies in {task.options.shown()} on every string {lengths} ({default})"
        if "readout_min" in statistics:
            return (
                f"{default}; readout range seen [{fmt(Fraction(statistics['readout_min']))}, "
                f"{fmt(Fraction(statistics['readout_max']))}]"
            )
        return default


PROPERTY = OutputBounds()

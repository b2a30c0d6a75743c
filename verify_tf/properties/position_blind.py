"""Property ``position-blind``: on every constant input (x, x, ..., x) all positions give the same output.

Luo et al. (NeurIPS 2022): on a constant input every attention row is a convex combination of identical value
vectors and token-wise layers keep the columns identical, so a transformer whose only positional information
is a relative bias inside the normalisation (RPE) cannot tell positions apart. Standard attention, hardmax,
uniform or fixed-point softmax with ``exact-sums``, causal masks: all blind. URPE (rows times a Toeplitz C,
no renormalisation) and absolute PE are not.

With a BOS token the sequence the network sees, (BOS, x, ..., x), is not constant: the BOS position is never
compared (only the user's positions are), and Luo et al.'s hypothesis does not hold. Non-causal standard
attention stays blind (its rows are the same for every user position), but a causal mask or an RPE bias
weighs the BOS column differently per position, so such models generally separate positions.

``scope: model``: every constant input of the domain (engines interpret, enumerate), reporting the largest
deviation ε between positions (exact). With fixed-point ``per-probability`` attention rounding a row's weights
need not sum to 1, so even RPE models leak position: the verdict then reads "position-blind up to ε" (proved
when ε ≤ tolerance). ``scope: architecture`` (engine architecture): every weight choice of the model's
architecture, by induction over layers; a failing step yields a concrete solver-chosen member of the class,
replayed on the interpreter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..classes import describe_class
from ..contract import (
    ArchitectureClass,
    ArchitectureRequest,
    Array,
    Batched,
    Capability,
    Conclusion,
    EachInput,
    Evaluators,
    Induction,
    InductionOutcome,
    Inputs,
    Measures,
    Member,
    MemberSearch,
    Proof,
    Task,
    Witness,
)
from ..domain import Domain, format_input
from ..ir import Model, Vector
from ..ir.plain import model_to_dict
from ..numbers import fmt, fmt_vector
from ..schema.dsl import Field, Number, Obj, String
from ..semantics import Arithmetic, Fixed, Trace, evaluate
from ..spaces import InputSpace
from ..verdict import PROVED, REFUTED, UNKNOWN
from ..witness import input_to_json, vectors_to_json
from ..work import Deadline
from .base import bos_offset, require, typed

CLASS_SCOPE = "architecture"  # scope: every weight choice of the model's architecture class (the spec's word)


@dataclass(frozen=True)
class Options:
    on: str = "output"
    tolerance: Fraction = Fraction(0)
    scope: str = "model"


def observed(model: Model, trace: Trace, on: str) -> list[Vector]:
    """The user positions' outputs (BOS excluded): final stream columns or 1-vectors of the readout."""
    off = bos_offset(model)
    return [(q,) for q in trace.readout[off:]] if on == "readout" else list(trace.output[off:])


def deviation(outputs: Sequence[Vector]) -> tuple[Fraction, int, int]:
    """(largest |a_c - b_c| over position pairs and coordinates, the lower position, the higher position)."""
    best, first, second = Fraction(0), 0, 0
    for c in range(len(outputs[0]) if outputs else 0):
        column = [o[c] for o in outputs]
        lo = min(range(len(column)), key=lambda i: column[i])
        hi = max(range(len(column)), key=lambda i: column[i])
        if column[hi] - column[lo] > best:
            best, first, second = column[hi] - column[lo], min(lo, hi), max(lo, hi)
    return best, first, second


def row_sum_note(model: Model, trace: Trace) -> str:
    """Where attention rows (times C for URPE) do not sum to the same value over the user rows: the leak."""
    off = bos_offset(model)
    for layer, block in enumerate(trace.blocks):
        for h, head in enumerate(block.heads):
            sums = [sum(row, Fraction(0)) for row in head.weights[off:]]
            if len(set(sums)) > 1:
                return f"rows of layers[{layer}].heads[{h}] sum to {', '.join(fmt(s) for s in sums)}"
    return ""


def parameters_text(parameters: dict[str, Any]) -> str:
    """``urpe-c = (1, 1, 0), value-bias = (3)``: the solver's choices, zero RPE biases left out."""

    def show(value: Any) -> str:
        if isinstance(value, list):
            return "(" + ", ".join(show(v) for v in value) + ")"
        return fmt(Fraction(value))

    return ", ".join(
        f"{k} = {show(v)}" for k, v in parameters.items() if k != "rpe-bias" or any(Fraction(x) != 0 for x in v)
    )


class PositionBlind(EachInput, Batched, ArchitectureClass):
    name = "position-blind"
    summary = (
        "on every constant input (x, ..., x) all positions give the same output, up to a tolerance "
        "(Luo et al. 2022); scope model or architecture"
    )
    options = Obj(
        {
            "on": Field(
                String(
                    "compare the full final stream ('output') or only the readout q ('readout')", ("output", "readout")
                ),
                default="output",
            ),
            "tolerance": Field(
                Number("largest deviation between positions still accepted (exact)", minimum=Fraction(0)),
                default=Fraction(0),
            ),
            "scope": Field(
                String(
                    "'model': this model's weights, exhaustive over constant inputs; 'architecture': "
                    "every weight choice of its architecture, induction over layers (z3)",
                    ("model", CLASS_SCOPE),
                ),
                default="model",
            ),
        },
        check=typed(Options),
    )

    def offers(self, options: Options) -> frozenset[type[Capability]]:
        """``scope: architecture`` is a claim about every member of the class: only the class view decides it."""
        return frozenset({ArchitectureClass}) if options.scope == CLASS_SCOPE else super().offers(options)

    def input_space(self, task: Task) -> InputSpace:
        return InputSpace(task.given_domain(), order="constant")

    # -- scope model: the largest deviation ε over the constant inputs (a refutation shows the worst input)
    witness_measure = "epsilon"

    def measure_kinds(self, task: Task) -> dict[str, str]:
        return {"epsilon": "max"}

    def measure(self, task: Task, tokens: tuple[Any, ...]) -> dict[str, Fraction]:
        return {
            "epsilon": deviation(observed(task.model, evaluate(task.model, task.arithmetic, tokens), task.options.on))[
                0
            ]
        }

    def violation(self, task: Task, tokens: tuple[Any, ...]) -> Witness | None:
        trace = evaluate(task.model, task.arithmetic, tokens)
        outs = observed(task.model, trace, task.options.on)
        epsilon, a, b = deviation(outs)
        if epsilon <= task.options.tolerance:
            return None
        note = row_sum_note(task.model, trace)
        why = ""
        if note and isinstance(task.arithmetic, Fixed) and task.arithmetic.attention_rounding == "per-probability":
            why = " (per-probability rounding: attention rows need not sum to 1, so position leaks)"
        elif bos_offset(task.model) and task.model.has_positions:
            why = " (with a BOS token the input is not constant: Luo et al.'s hypothesis does not apply)"
        summary = (
            f"x = {format_input(tokens)}: position {a} gives {fmt_vector(outs[a])}, position {b} gives "
            f"{fmt_vector(outs[b])} (deviation {fmt(epsilon)} > tolerance {fmt(task.options.tolerance)})"
            + (f"; {note}" if note else "")
            + why
        )
        return {
            "input": input_to_json(tokens),
            "positions": [a, b],
            "outputs": vectors_to_json([outs[a], outs[b]]),
            "deviation": str(epsilon),
            "row_sums": note,
            "summary": summary,
        }

    def batched_violations(self, task: Task, evaluators: Evaluators, rows: Array) -> tuple[Array, Measures]:
        values = evaluators.of().values(rows, task.options.on)
        users = values.numerators[:, bos_offset(task.model) :]
        users = users if users.ndim == 3 else users[..., None]
        if users.shape[1] == 0:
            spread = np.zeros(len(rows), dtype=np.int64)
        else:
            spread = (users.max(axis=1) - users.min(axis=1)).max(axis=1, initial=0)
        tolerance = task.options.tolerance
        # ε = spread/den > tolerance = p/q  <=>  spread·q > p·den (exact, Python ints where int64 could overflow)
        flagged = np.asarray(
            spread.astype(object) * tolerance.denominator > tolerance.numerator * values.den, dtype=bool
        )
        return flagged, {"epsilon": (spread, values.den)}

    def describe_proof(self, task: Task, proof: Proof) -> str:
        statistics = proof.statistics
        epsilon = Fraction(statistics.get("epsilon", 0))
        count = statistics.get("space_size", 0)
        if epsilon == 0:
            return f"all {count} constant inputs: every position gives the same output (ε = 0)"
        at = statistics["epsilon_at"]
        space = self.input_space(task)
        tokens = space.decode(space.rows(at, at + 1)[0][0])
        note = row_sum_note(task.model, evaluate(task.model, task.arithmetic, tokens))
        return (
            f"position-blind up to ε = {fmt(epsilon)} (≤ tolerance {fmt(task.options.tolerance)}) over {count} "
            f"constant inputs; largest at x = {format_input(tokens)}" + (f"; {note}" if note else "")
        )

    # -- scope architecture (and scope model on the architecture engine): induction over layers
    def architecture_plan(self, task: Task) -> Induction | Conclusion:
        lengths = tuple(segment.length for segment in self.input_space(task).segments() if segment.count > 0)
        if not lengths:
            return Conclusion(PROVED, "trivial", "the domain has no constant input of length >= 1")
        return Induction(lengths, any_depth=True)

    def conclude(
        self, task: Task, request: ArchitectureRequest, answer: Any, deadline: Deadline
    ) -> MemberSearch | Conclusion:
        if isinstance(request, MemberSearch):
            return self._after_search(task, request, answer)
        assert isinstance(answer, InductionOutcome)
        klass = describe_class(task.model)
        if not answer.results:
            return Conclusion(
                UNKNOWN,
                "induction",
                f"architecture-level queries are measured up to n = {answer.limit}; the domain has length "
                f"{max(request.lengths) if isinstance(request, Induction) else 0}",
                tried=["induction over layers (z3)"],
            )
        results = answer.results
        steps = {str(n): [s.to_json() for s in r.steps] for n, r in results.items()}
        stats: dict[str, Any] = {"class": klass, "steps": steps}
        model_scope = task.options.scope == "model"
        for n, result in results.items():
            if result.proved:
                continue
            stats["length"] = n
            failed = "; ".join(f"{s.name}: {s.status}" + (f" ({s.note})" if s.note else "") for s in result.failing)
            own = None if model_scope else self.own_separation(task, n)
            if own is not None and not result.rows_sum_to_one:
                # the solver cannot build members for this rounding, but the spec's own model is a member of the
                # class: when it separates positions, so does the class
                return self._own(own, failed, stats)
            if not result.rows_sum_to_one:
                epsilon = self.model_epsilon(task, deadline)
                if epsilon is not None:
                    stats["model_epsilon"] = str(epsilon)
                rounding = task.arithmetic.attention_rounding if isinstance(task.arithmetic, Fixed) else "exact"
                return Conclusion(
                    UNKNOWN,
                    "induction",
                    f"not applicable: with {rounding} rounding a head output is "
                    f"no average of its values, so the induction step fails (n = {n}: {failed})"
                    + (f"; for this model (scope: model) ε = {fmt(epsilon)}" if epsilon is not None else ""),
                    statistics=stats,
                    tried=[f"induction over layers, n = {n}: {failed}"],
                )
            if model_scope:
                return Conclusion(
                    UNKNOWN,
                    "induction",
                    f"the architecture class is not position-blind (n = {n}: "
                    f"{failed}); this model's own weights may still be: evaluate its constant inputs (engine: auto)",
                    statistics=stats,
                    tried=[f"induction over layers, n = {n}"],
                )
            inputs = tuple(t for t in self.input_space(task).inputs() if len(t) == n)
            notes = {"stats": stats, "own": own, "failed": failed, "n": n}
            options: Options = task.options
            return MemberSearch(n, tuple(result.failing), inputs, options.on, options.tolerance, notes=notes)
        lengths = sorted(results)
        span = f"n = {lengths[0]}" if len(lengths) == 1 else f"n = {lengths[0]}..{lengths[-1]}"
        subject = "this model's architecture class" if model_scope else "every weight choice"
        total = sum(len(r.steps) for r in results.values())
        depth = (
            f"any number of layers, each like one of these {len(task.model.blocks)}, in any order (each layer's "
            "step queries are unchanged one layer deeper)"
            if answer.any_depth
            else f"these {len(task.model.blocks)} layers only"
        )
        return Conclusion(
            PROVED,
            "induction",
            f"{subject} ({klass}): columns stay equal through every layer, {span}, "
            f"{depth} ({total} step queries unsat)",
            statistics={**stats, "lengths": lengths, "rows_sum_to_one": True, "any_depth": answer.any_depth},
        )

    def _after_search(self, task: Task, search: MemberSearch, member: Member | None) -> Conclusion:
        notes = search.notes
        if member is not None:
            step = member.step
            return Conclusion(
                REFUTED,
                "induction + solver-chosen member",
                f"the class is not position-blind: induction step {step.name} fails "
                f"({step.note or step.status}); " + member.witness["summary"],
                member.witness,
                notes["stats"],
            )
        if notes["own"] is not None:
            return self._own(notes["own"], notes["failed"], notes["stats"])
        n, failed = notes["n"], notes["failed"]
        return Conclusion(
            UNKNOWN,
            "induction",
            f"induction step fails (n = {n}: {failed}) but the solver found "
            "no concrete member of the class that separates positions",
            statistics=notes["stats"],
            tried=[f"induction over layers, n = {n}", "solver-chosen member (one active sublayer)"],
        )

    @staticmethod
    def _own(own: tuple[Inputs, Witness], failed: str, stats: dict[str, Any]) -> Conclusion:
        """Refuted by the spec's own model, a member of the class (replayed by the engine at ``own[0]``)."""
        tokens, witness = own
        return Conclusion(
            REFUTED,
            "induction + this model",
            f"the class is not position-blind: this model, "
            f"a member of it, separates positions (induction: {failed}); " + witness["summary"],
            {key: value for key, value in witness.items() if key in ("layer", "model", "lengths")},
            stats,
            replay=tokens,
        )

    def member_witness(self, task: Task, search: MemberSearch, member: Member) -> Witness | None:
        """A solver-chosen member (replayed: ``member.observed``) separates positions by more than the tolerance."""
        outs = member.observed
        epsilon, a, b = deviation(outs)
        if epsilon <= search.tolerance:
            return None
        note = row_sum_note(member.model, member.trace)
        summary = (
            f"{member.active} chosen by the solver ({parameters_text(member.parameters)}): on x = "
            f"{format_input(member.tokens)} position {a} gives {fmt_vector(outs[a])}, position {b} gives "
            f"{fmt_vector(outs[b])}" + (f"; {note}" if note else "")
        )
        return {
            "input": input_to_json(member.tokens),
            "positions": [a, b],
            "outputs": vectors_to_json([outs[a], outs[b]]),
            "deviation": str(epsilon),
            "layer": member.active,
            "parameters": member.parameters,
            "model": model_to_dict(member.model),
            "lengths": f"n = {search.length}",
            "summary": summary,
        }

    def own_separation(self, task: Task, length: int) -> tuple[Inputs, Witness] | None:
        """The spec's model's worst constant input of this length and its witness, if it separates positions."""
        worst = None
        for tokens in InputSpace(task.given_domain(), order="constant", only_lengths=(length,)).inputs():
            epsilon = self.measure(task, tokens)["epsilon"]
            if epsilon > task.options.tolerance and (worst is None or epsilon > worst[0]):
                worst = (epsilon, tokens)
        if worst is None:
            return None
        witness = self.violation(task, worst[1])
        assert witness is not None  # its ε exceeds the tolerance
        return worst[1], dict(witness, layer="this model", model=model_to_dict(task.model), lengths=f"n = {length}")

    def model_epsilon(self, task: Task, deadline: Any) -> Fraction | None:
        """This model's ε over the constant inputs (few), or None when time runs out."""
        epsilon = Fraction(0)
        for tokens in self.input_space(task).inputs():
            if deadline.expired():
                return None
            epsilon = max(epsilon, self.measure(task, tokens)["epsilon"])
        return epsilon

    def fit(self, model: Model, arithmetic: Arithmetic, domain: Domain | None, options: Options) -> None:
        require(domain is not None, "", "position-blind needs a domain")


PROPERTY = PositionBlind()

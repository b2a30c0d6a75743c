"""Property ``inexpressible``: the witness certificate of Luo et al. (NeurIPS 2022) for an architecture class.

Given a target f on the domain (``position-index``: f(X)_i = i with the paper's 1-based positions, i.e.
f(X) = (1, 2, ..., n) at the 0-based indices 0..n-1; or a table of target readouts per constant input) the
certificate says: NO model of the spec's architecture class (its token kind, BOS, absolute PE, per head
scoring / causal mask / positional flavour, residual flags; the weights are irrelevant) reaches a sup-error
below

    ε* = max over constant inputs x of (max_i f(x)_i − min_i f(x)_i) / 2.

Proof: (a) at the witness x* attaining ε*, (b) every member of the class outputs the same value c at every
position of a constant input (position-blindness, proved for every weight choice by induction over layers,
engine ``architecture``), so max_i |c − f(x*)_i| ≥ (max f − min f)/2 = ε*. Errors are measured on the
readout q_i = u·z_i over the user's positions (a BOS position is never compared).

The spec's own model comes first: it is a member of the class, so when its sup-error over every input the claim
ranges over (the table's inputs, or the whole domain for position-index when it has at most ``EXHAUSTIVE_LIMIT``
inputs), measured on the reference interpreter, is below ε*, the certificate is refuted by this model before any
induction (a trained URPE or APE model that learned the target); otherwise its sup-error is reported beside the
verdict. If (b) fails (URPE, absolute PE, a BOS token weighed by position) the solver picks a concrete member of the
class (one active sublayer), preferably one that realises f exactly on x*, replayed on the interpreter; it
refutes the certificate only when its measured sup-error is below ε*. With per-probability rounding (b) is not
provable (attention rows need not sum to 1) and the verdict is unknown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ..classes import describe_class
from ..contract import (
    ArchitectureClass,
    ArchitectureRequest,
    Conclusion,
    Induction,
    InductionOutcome,
    Member,
    MemberSearch,
    Task,
    Witness,
)
from ..domain import Domain, format_input
from ..ir import Model, Token
from ..ir.plain import model_to_dict
from ..numbers import fmt, fmt_vector
from ..schema.dsl import Field, Obj
from ..schema.errors import OptionError
from ..semantics import Arithmetic, Fixed, evaluate
from ..verdict import ERROR, PROVED, REFUTED, UNKNOWN
from ..witness import input_to_json, values_to_json
from ..work import Deadline, check_deadline
from ._inexpressible_targets import TARGET, epsilon_star, targets
from .base import bos_offset
from .position_blind import deviation, parameters_text, row_sum_note

EXHAUSTIVE_LIMIT = 20_000  # inputs: measure a refuting member's sup-error over the whole domain up to this size


@dataclass(frozen=True)
class Options:
    target: Any = "position-index"  # "position-index" or ((raw token, (outputs...)), ...)


def _options(values: dict[str, Any]) -> Options:
    target = values["target"]
    if isinstance(target, dict):
        target = tuple((entry["token"], tuple(entry["outputs"])) for entry in target["table"])
    return Options(target)


def readout_error(
    arithmetic: Arithmetic, model: Model, tokens: tuple[Any, ...], values: Sequence[Fraction]
) -> Fraction:
    q = evaluate(model, arithmetic, tokens).readout[bos_offset(model) :]
    return max(abs(a - b) for a, b in zip(q, values))


class Inexpressible(ArchitectureClass):
    name = "inexpressible"
    summary = (
        "certificate (Luo et al. 2022): no model of the spec's architecture class reaches sup-error below "
        "ε* = max over constant inputs of half the target's range (witness + architecture-level proof)"
    )
    options = Obj({"target": Field(TARGET, default="position-index")}, check=_options)

    def fit(self, model: Model, arithmetic: Arithmetic, domain: Domain | None, options: Options) -> None:
        assert domain is not None  # needs_domain: the spec loader insists
        if not targets(domain, options):
            raise OptionError(
                "",
                "the domain has no constant input of length >= 1",
                "Luo et al.'s certificate compares positions of constant inputs (x, ..., x)",
            )

    def setting(self, task: Task) -> tuple[Fraction, tuple[Token, ...], list[Fraction], dict[str, Any], str]:
        eps, witness, values = epsilon_star(targets(task.given_domain(), task.options))
        stats = {
            "epsilon_star": str(eps),
            "witness": input_to_json(witness),
            "target_at_witness": values_to_json(values),
            "positions": "1-based targets: index i holds position i+1",
            "class": describe_class(task.model),
        }
        return eps, witness, values, stats, f"x* = {format_input(witness)}, f(x*) = {fmt_vector(values)}"

    def architecture_plan(self, task: Task) -> Induction | Conclusion:
        eps, witness, _values, stats, shown = self.setting(task)
        if eps == 0:
            return Conclusion(
                PROVED,
                "trivial",
                "ε* = 0: the target is constant on every constant input, so the bound is vacuous",
                statistics=stats,
            )
        # The spec's own model is a member of the class: when it beats ε* the claim is false, whatever (b) says.
        own = self.sup_error(task, task.model, None)
        if own is not None:
            stats["this_model_sup_error"], stats["this_model_sup_error_over"] = str(own[0]), own[1]
            if own[0] < eps:
                return self._own(task, own, eps, shown, stats)
        return Induction((len(witness),), notes=own)

    def conclude(
        self, task: Task, request: ArchitectureRequest, answer: Any, deadline: Deadline
    ) -> MemberSearch | Conclusion:
        eps, witness, values, stats, shown = self.setting(task)
        if isinstance(request, MemberSearch):
            return self._after_search(task, request, answer, deadline)
        assert isinstance(answer, InductionOutcome)
        if not answer.results:
            return Conclusion(
                UNKNOWN,
                "induction",
                f"ε* = {fmt(eps)} at {shown}, but architecture-level queries are measured up to n = {answer.limit}",
                statistics=stats,
                tried=["induction over layers (z3)"],
            )
        result = answer.results[len(witness)]
        stats["steps"] = [s.to_json() for s in result.steps]
        klass = stats["class"]
        own_sup = request.notes if isinstance(request, Induction) else None
        if own_sup is not None:
            stats["this_model_sup_error"], stats["this_model_sup_error_over"] = str(own_sup[0]), own_sup[1]
        if result.proved:
            own = readout_error(task.arithmetic, task.model, witness, values)
            stats["this_model_error_at_witness"] = str(own)
            if own < eps:  # the theorem says this cannot happen: never hide it
                return Conclusion(
                    ERROR,
                    "",
                    f"contradiction: (b) was proved but this model errs only {fmt(own)} < ε* = {fmt(eps)} at {shown}",
                    statistics=stats,
                )
            return Conclusion(
                PROVED,
                "witness + induction",
                f"no model of the class ({klass}) reaches sup-error below ε* = {fmt(eps)}: (a) witness "
                f"{shown}; (b) every member is position-blind on it (induction over layers, "
                f"{len(result.steps)} z3 step queries unsat in {result.seconds:.2f} s), so it outputs "
                f"one value at all {len(witness)} positions; this model errs {fmt(own)} there"
                + (f", and at most {fmt(own_sup[0])} over {own_sup[1]}" if own_sup is not None else ""),
                statistics=stats,
            )
        failed = "; ".join(f"{s.name}: {s.status}" + (f" ({s.note})" if s.note else "") for s in result.failing)
        tried = [f"induction over layers, n = {len(witness)}: {failed}"]
        if not result.rows_sum_to_one:
            rounding = task.arithmetic.attention_rounding if isinstance(task.arithmetic, Fixed) else "exact"
            return Conclusion(
                UNKNOWN,
                "induction",
                f"ε* = {fmt(eps)} at {shown}, but (b) is not provable with "
                f"{rounding} rounding (a head output is no average of its "
                f"values: {failed}); see position-blind (scope: model) for this model's ε",
                statistics=stats,
                tried=tried,
            )
        if own_sup is not None:
            tried.append(f"this model: sup-error {fmt(own_sup[0])} over {own_sup[1]} ≥ ε*")
        # a member realising f exactly on x* if any (error 0 < ε*), else one separating positions on the readout
        notes = {"stats": stats, "failed": failed, "tried": tried}
        return MemberSearch(
            len(witness), tuple(result.failing), (witness,), "readout", targets=tuple(values), notes=notes
        )

    def _after_search(self, task: Task, search: MemberSearch, member: Member | None, deadline: Deadline) -> Conclusion:
        eps, witness, _values, _stats, shown = self.setting(task)
        stats, failed, tried = search.notes["stats"], search.notes["failed"], search.notes["tried"]
        if member is None:
            return Conclusion(
                UNKNOWN,
                "induction",
                f"ε* = {fmt(eps)} at {shown}; (b) fails ({failed}) but the solver "
                "found no concrete member of the class that separates positions",
                statistics=stats,
                tried=tried + ["solver-chosen member"],
            )
        cex, step = dict(member.witness), member.step
        readout = [q for (q,) in member.observed]
        how = (
            f"it realises f exactly on x* (readout {fmt_vector(readout)}, error 0 < ε*)"
            if member.exact
            else f"its readout on x* is {fmt_vector(readout)} (positions differ)"
        )
        sup = self.sup_error(task, member.model, deadline)
        if sup is not None:
            cex["sup_error"], cex["sup_error_over"] = str(sup[0]), sup[1]
            how += f"; its sup-error over {sup[1]} is {fmt(sup[0])}" + (
                " < ε*: the class beats the bound" if sup[0] < eps else ""
            )
        cex["summary"] = (
            f"{member.active} chosen by the solver ({parameters_text(member.parameters)}) on "
            f"x* = {format_input(witness)}: {how}"
        )
        if sup is None or sup[0] >= eps:
            # The claim is "no member gets sup-error below ε*"; a member that merely separates positions
            # refutes premise (b), not the claim: evidence only.
            stats["member_separating_positions"] = cex
            measured = "not measured (domain too large or time up)" if sup is None else f"{fmt(sup[0])} ≥ ε*"
            return Conclusion(
                UNKNOWN,
                "induction + solver-chosen member",
                f"ε* = {fmt(eps)} at {shown}; (b) fails ({step.name}): {cex['summary']}; its "
                f"sup-error is {measured}, so the bound is neither certified nor beaten",
                statistics=stats,
                tried=tried + ["solver-chosen member: sup-error " + measured],
            )
        return Conclusion(
            REFUTED,
            "induction + solver-chosen member",
            f"certificate refuted for ε* = {fmt(eps)}: the class is not position-blind (induction "
            f"step {step.name} fails: {step.note or step.status}); " + cex["summary"],
            cex,
            stats,
        )

    @staticmethod
    def _own(
        task: Task, own_sup: tuple[Fraction, str, tuple[Token, ...]], eps: Fraction, shown: str, stats: dict[str, Any]
    ) -> Conclusion:
        """The spec's own model is a member of the class; its sup-error, measured on the reference interpreter over
        every input the claim ranges over, is below ε*: the class beats the bound, and this model shows it (no
        induction needed: a member below ε* refutes the claim whatever premise (b) says)."""
        sup, over, worst = own_sup
        readout = evaluate(task.model, task.arithmetic, worst).readout[bos_offset(task.model) :]
        summary = (
            f"this model, a member of the class, reaches sup-error {fmt(sup)} < ε* = {fmt(eps)} over {over} (the "
            f"reference interpreter, every input); its worst input is {format_input(worst)}, readout "
            f"{fmt_vector(readout)}"
        )
        witness = {
            "input": input_to_json(worst),
            "readout": values_to_json(readout),
            "sup_error": str(sup),
            "sup_error_over": over,
            "layer": "this model",
            "summary": summary,
        }
        return Conclusion(
            REFUTED,
            "this model",
            f"certificate refuted for ε* = {fmt(eps)} at {shown}: " + summary,
            witness,
            stats,
        )

    def member_witness(self, task: Task, search: MemberSearch, member: Member) -> Witness | None:
        """A solver-chosen member (replayed: ``member.observed``, its readout) whose positions differ on x*."""
        q = [value for (value,) in member.observed]
        spread, a, b = deviation(member.observed)
        if spread == 0:
            return None
        return {
            "input": input_to_json(member.tokens),
            "readout": values_to_json(q),
            "target": values_to_json(search.targets or ()),
            "positions": [a, b],
            "layer": member.active,
            "parameters": member.parameters,
            "model": model_to_dict(member.model),
            "row_sums": row_sum_note(member.model, member.trace),
        }

    def sup_error(
        self, task: Task, model: Model, deadline: Deadline | None
    ) -> tuple[Fraction, str, tuple[Token, ...]] | None:
        """A model's sup-error and its first worst input: over the whole domain for position-index (defined
        everywhere; None when the domain is too large), else over the table. With a ``deadline``, None once it
        passes; without, the deadline in force ends the check (``check_deadline``)."""
        if task.options.target == "position-index":
            if task.given_domain().size() > EXHAUSTIVE_LIMIT:
                return None
            pairs: Any = (
                (tokens, [Fraction(i + 1) for i in range(len(tokens))])
                for tokens in task.given_domain().inputs()
                if tokens
            )
            over = f"all {task.given_domain().size()} inputs of the domain"
        else:
            pairs = targets(task.given_domain(), task.options)
            over = f"the {len(pairs)} table inputs"
        worst: tuple[Fraction, tuple[Token, ...]] | None = None
        for tokens, values in pairs:
            if deadline is None:
                check_deadline("inexpressible: this model's sup-error")
            elif deadline.expired():
                return None
            error = readout_error(task.arithmetic, model, tokens, values)
            if worst is None or error > worst[0]:
                worst = (error, tokens)
        if worst is None:
            return None
        return worst[0], over, worst[1]


PROPERTY = Inexpressible()

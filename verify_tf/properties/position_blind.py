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

``scope: model`` (engine ``interpret``): every constant input of the domain on the reference interpreter, a
complete enumeration, reporting the largest deviation ε between positions (exact). With fixed-point
``per-probability`` attention rounding a row's weights need not sum to 1, so even RPE models leak position:
the verdict then reads "position-blind up to ε" (proved when ε ≤ tolerance). ``scope: architecture``
(engine ``smt``): every weight choice of the model's architecture, by induction over layers
(``engines/architecture``); a failing step yields a concrete solver-chosen member of the class, replayed.
"""

from __future__ import annotations

import time
from fractions import Fraction
from typing import Sequence

from ..builders.files import model_to_dict
from ..domain import format_input
from ..engines.architecture import MAX_LENGTH, describe_class, prove_position_blind, separate_positions
from ..ir import AlphabetTokens, Model, Vector
from ..numbers import fmt, fmt_vector
from ..semantics import Fixed, Trace, evaluate
from ..spec.schema import Field, Number, Obj, String
from ..verdict import PROVED, REFUTED, UNKNOWN, Verdict
from ..witness import ReplayMismatch, input_to_json, vectors_to_json
from .base import CheckRequest, PropertyDef

OPTIONS = Obj({
    "on": Field(String("compare the full final stream ('output') or only the readout q ('readout')",
                       ("output", "readout")), default="output"),
    "tolerance": Field(Number("largest deviation between positions still accepted (exact)", minimum=Fraction(0)),
                       default=Fraction(0)),
    "scope": Field(String("'model': this model's weights, exhaustive over constant inputs; 'architecture': "
                          "every weight choice of its architecture, induction over layers (z3)",
                          ("model", "architecture")), default="model"),
})


def bos_offset(model: Model) -> int:
    return 1 if isinstance(model.tokens, AlphabetTokens) and model.tokens.bos is not None else 0


def observed(model: Model, trace: Trace, on: str) -> list[Vector]:
    """The user positions' outputs (BOS excluded): final stream columns or 1-vectors of the readout."""
    off = bos_offset(model)
    if on == "readout":
        return [(q,) for q in trace.readout[off:]]
    return list(trace.output[off:])


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


def _witness(request: CheckRequest, tokens, epsilon: Fraction, first: int, second: int) -> dict:
    """Replay ``tokens`` from scratch and describe the violation; raises if the replay does not confirm it."""
    model, on = request.model, request.options.get("on", "output")
    trace = evaluate(model, request.arithmetic, tokens)
    outs = observed(model, trace, on)
    replayed, a, b = deviation(outs)
    if replayed != epsilon or (a, b) != (first, second):
        raise ReplayMismatch("position-blind: the replay gives a different deviation", claimed=str(epsilon),
                             replayed=str(replayed))
    note = row_sum_note(model, trace)
    summary = (f"x = {format_input(tokens)}: position {a} gives {fmt_vector(outs[a])}, position {b} gives "
               f"{fmt_vector(outs[b])} (deviation {fmt(epsilon)})" + (f"; {note}" if note else ""))
    return {"input": input_to_json(tokens), "positions": [a, b], "outputs": vectors_to_json([outs[a], outs[b]]),
            "deviation": str(epsilon), "row_sums": note, "summary": summary}


def model_epsilon(request: CheckRequest, deadline: float) -> tuple[Fraction, tuple | None, int, int, int] | None:
    """Largest deviation over all constant inputs: (ε, worst input, its two positions, inputs checked)."""
    on = request.options.get("on", "output")
    constant = list(request.domain.constant_inputs())
    best: tuple[Fraction, tuple | None, int, int] = (Fraction(0), None, 0, 0)
    for index, tokens in enumerate(constant):
        if time.perf_counter() > deadline:
            return None
        eps, a, b = deviation(observed(request.model, evaluate(request.model, request.arithmetic, tokens), on))
        if best[1] is None or eps > best[0]:
            best = (eps, tokens, a, b)
        request.tick(index + 1, len(constant))
    return (*best, len(constant))


def check_model(request: CheckRequest) -> Verdict:
    """Exhaustive over the constant inputs (|tokens| × lengths of them): complete for the domain."""
    start = time.perf_counter()
    tolerance = request.options.get("tolerance") or Fraction(0)
    found = model_epsilon(request, start + request.timeout)
    if found is None:
        return Verdict(request.label, UNKNOWN, "interpret", detail="timeout while evaluating the constant inputs",
                       seconds=time.perf_counter() - start, tried=["exhaustive over constant inputs (timeout)"])
    epsilon, tokens, a, b, count = found
    stats = {"epsilon": str(epsilon), "tolerance": str(tolerance), "constant_inputs": count,
             "worst_input": input_to_json(tokens) if tokens is not None else None}
    per_probability = isinstance(request.arithmetic, Fixed) and request.arithmetic.attention_rounding == "per-probability"
    if epsilon > tolerance:
        witness = _witness(request, tokens, epsilon, a, b)
        why = ""
        if per_probability and witness["row_sums"]:
            why = " — per-probability rounding: attention rows need not sum to 1, so position leaks"
        elif bos_offset(request.model) and request.model.has_positions:
            why = " — with a BOS token the input is not constant (Luo et al.'s hypothesis does not apply)"
        return Verdict(request.label, REFUTED, "interpret", method="exhaustive",
                       detail=f"not position-blind: ε = {fmt(epsilon)} > tolerance {fmt(tolerance)}{why}; "
                              + witness["summary"],
                       seconds=time.perf_counter() - start, counterexample=witness, statistics=stats)
    if epsilon == 0:
        detail = f"all {count} constant inputs: every position gives the same output (ε = 0)"
    else:
        note = row_sum_note(request.model, evaluate(request.model, request.arithmetic, tokens))
        detail = (f"position-blind up to ε = {fmt(epsilon)} (≤ tolerance {fmt(tolerance)}) over {count} constant "
                  f"inputs; largest at x = {format_input(tokens)}, positions {a} and {b}"
                  + (f"; {note}" if note else ""))
    return Verdict(request.label, PROVED, "interpret", method="exhaustive", detail=detail,
                   seconds=time.perf_counter() - start, statistics=stats)


def replay_member(request: CheckRequest, member, lengths_note: str) -> dict:
    """Re-evaluate a solver-chosen member of the class; confirm the separation the solver claims."""
    on = request.options.get("on", "output")
    tolerance = request.options.get("tolerance") or Fraction(0)
    trace = evaluate(member.model, request.arithmetic, member.tokens)
    outs = observed(member.model, trace, on)
    claimed = [(q,) for q in member.claimed_readout] if on == "readout" else member.claimed_output
    if outs != claimed:
        raise ReplayMismatch("position-blind: the solver's member of the class does not replay", claimed=claimed,
                             replayed=outs)
    epsilon, a, b = deviation(outs)
    if epsilon <= tolerance:
        raise ReplayMismatch("position-blind: the solver's member does not separate positions on replay",
                             claimed=claimed, replayed=outs)
    note = row_sum_note(member.model, trace)
    summary = (f"{member.active} chosen by the solver ({parameters_text(member.parameters)}): on x = "
               f"{format_input(member.tokens)} position {a} gives {fmt_vector(outs[a])}, position {b} gives "
               f"{fmt_vector(outs[b])}" + (f"; {note}" if note else ""))
    return {"input": input_to_json(member.tokens), "positions": [a, b],
            "outputs": vectors_to_json([outs[a], outs[b]]), "deviation": str(epsilon), "layer": member.active,
            "parameters": member.parameters, "model": model_to_dict(member.model), "lengths": lengths_note,
            "summary": summary}


def parameters_text(parameters: dict) -> str:
    """``urpe-c = (1, 1, 0), value-bias = (3)``: the solver's choices, zero RPE biases left out."""

    def show(value) -> str:
        if isinstance(value, list):
            return "(" + ", ".join(show(v) for v in value) + ")"
        return fmt(Fraction(value))

    return ", ".join(f"{k} = {show(v)}" for k, v in parameters.items()
                     if k != "rpe-bias" or any(Fraction(x) != 0 for x in v))


def check_architecture(request: CheckRequest, model_scope: bool = False) -> Verdict:
    """Every weight choice of the architecture: induction over layers, one z3 query per step and length."""
    start = time.perf_counter()
    model, arith = request.model, request.arithmetic
    constant = list(request.domain.constant_inputs())
    lengths = sorted({len(t) for t in constant})
    klass = describe_class(model)
    if not lengths:
        return Verdict(request.label, PROVED, "smt", method="trivial",
                       detail="the domain has no constant input of length >= 1")
    if max(lengths) > MAX_LENGTH:
        return Verdict(request.label, UNKNOWN, "smt", detail=f"architecture-level queries are measured up to n = "
                       f"{MAX_LENGTH}; the domain has length {max(lengths)}", tried=["induction over layers (z3)"])
    steps_json: dict[str, list] = {}
    for n in lengths:
        left = request.timeout - (time.perf_counter() - start)
        result = prove_position_blind(model, arith, n, timeout=max(left, 0.001), seed=request.seed,
                                      smt2_dir=request.smt2_dir, label=request.label)
        steps_json[str(n)] = [s.to_json() for s in result.steps]
        if result.proved:
            continue
        stats = {"class": klass, "steps": steps_json, "length": n}
        failing = result.failing
        failed_text = "; ".join(f"{s.name}: {s.status}" + (f" ({s.note})" if s.note else "") for s in failing)
        if not result.rows_sum_to_one:
            found = model_epsilon(request, time.perf_counter() + max(request.timeout - (time.perf_counter() - start), 1))
            eps_text = f"; for this model (scope: model) ε = {fmt(found[0])}" if found else ""
            if found:
                stats["model_epsilon"] = str(found[0])
            return Verdict(request.label, UNKNOWN, "smt", method="induction",
                           detail=f"not applicable: with per-probability rounding attention rows need not sum to 1, "
                                  f"so the induction step fails (n = {n}: {failed_text}){eps_text}",
                           seconds=time.perf_counter() - start, statistics=stats,
                           tried=[f"induction over layers, n = {n}: {failed_text}"])
        if model_scope:
            return Verdict(request.label, UNKNOWN, "smt", method="induction",
                           detail=f"the architecture class is not position-blind (n = {n}: {failed_text}); this "
                                  f"model's own weights may still be: use engine interpret",
                           seconds=time.perf_counter() - start, statistics=stats,
                           tried=[f"induction over layers, n = {n}"])
        candidates = [t for t in constant if len(t) == n]
        for step in failing:
            left = request.timeout - (time.perf_counter() - start)
            member = separate_positions(model, arith, step.block if step.sublayer == "attention" else None,
                                        candidates, on=request.options.get("on", "output"),
                                        tolerance=request.options.get("tolerance") or Fraction(0),
                                        timeout=max(left, 0.001), seed=request.seed)
            if member is None:
                continue
            witness = replay_member(request, member, f"n = {n}")
            return Verdict(request.label, REFUTED, "smt", method="induction + solver-chosen member",
                           detail=f"the class is not position-blind: induction step {step.name} fails "
                                  f"({step.note or step.status}); " + witness["summary"],
                           seconds=time.perf_counter() - start, counterexample=witness, statistics=stats)
        return Verdict(request.label, UNKNOWN, "smt", method="induction",
                       detail=f"induction step fails (n = {n}: {failed_text}) but the solver found no concrete member "
                              f"of the class that separates positions",
                       seconds=time.perf_counter() - start, statistics=stats,
                       tried=[f"induction over layers, n = {n}", "solver-chosen member (one active sublayer)"])
    span = f"n = {lengths[0]}" if len(lengths) == 1 else f"n = {lengths[0]}..{lengths[-1]}"
    total_steps = sum(len(v) for v in steps_json.values())
    subject = "this model's architecture class" if model_scope else "every weight choice"
    return Verdict(request.label, PROVED, "smt", method="induction",
                   detail=f"{subject} ({klass}): columns stay equal through every layer, {span} "
                          f"({total_steps} step queries unsat)",
                   seconds=time.perf_counter() - start,
                   statistics={"class": klass, "steps": steps_json, "lengths": lengths,
                               "rows_sum_to_one": True})


def run(request: CheckRequest) -> Verdict:
    if request.options.get("scope") == "architecture":
        return check_architecture(request)
    if request.engine == "smt":
        return check_architecture(request, model_scope=True)
    return check_model(request)


def _choose(request: CheckRequest) -> str:
    return "smt" if request.options.get("scope") == "architecture" else "interpret"


PROPERTY = PropertyDef(
    name="position-blind",
    summary="on every constant input (x, ..., x) all positions give the same output, up to a tolerance "
            "(Luo et al. 2022); scope model or architecture",
    options=OPTIONS,
    engines=("interpret", "smt"),
    run=run,
    choose_engine=_choose,
)

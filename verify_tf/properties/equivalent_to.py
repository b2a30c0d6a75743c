"""Property ``equivalent-to``: the model computes the same as another model on every input of the domain.

Option ``model:`` is a second model section (inline, file, random or construct, exactly as the top-level
``model:``); ``on: output`` compares the full final streams (same width needed), ``on: readout`` only the
readouts q. Both models run in the spec's arithmetic. Witness: the input, the first differing position
and both values.

Engines: ``interpret`` (every input on both models) and ``smt`` (a miter: both networks encoded on the
same symbolic input, "some observed value differs" asked of the solver; unsat proves equivalence).
"""

from __future__ import annotations

import time
from typing import Any

import z3

from ..domain import format_input
from ..ir import AlphabetTokens, Model
from ..numbers import fmt, fmt_vector
from ..semantics import evaluate
from ..spec.loader import model_schema
from ..spec.schema import Field, Obj, String
from ..verdict import ERROR, Verdict
from ..witness import input_to_json
from .base import CheckRequest, PropertyDef, check_each_input
from .output_bounds import ENUMERATION_BUDGET, solver_fields

OPTIONS = Obj({
    "model": Field(model_schema("the model to compare with (inline, file, random or construct)"), required=True),
    "on": Field(String("compare the full final stream ('output') or only the readout q ('readout')",
                       ("output", "readout")), default="output"),
    **solver_fields(),
})


def _observed(request: CheckRequest, model: Model, tokens: tuple) -> list[tuple]:
    trace = evaluate(model, request.arithmetic, tokens)
    if request.options.get("on") == "readout":
        return [(q,) for q in trace.readout]
    return list(trace.output)


def _incompatible(request: CheckRequest) -> str | None:
    a, b = request.model, request.options["model"]
    if isinstance(a.tokens, AlphabetTokens) != isinstance(b.tokens, AlphabetTokens):
        return "the two models take different token kinds (grid vs alphabet)"
    if isinstance(a.tokens, AlphabetTokens) and a.tokens.bos != b.tokens.bos:
        return "the two models prepend different BOS tokens, so their positions do not correspond"
    if request.options.get("on") == "output" and a.dim != b.dim:
        return f"on: output compares streams of width {a.dim} and {b.dim}; use on: readout"
    if isinstance(a.tokens, AlphabetTokens):
        missing = [s for s in request.domain.alphabet if s not in b.tokens.symbols]
        if missing:
            return f"symbol {missing[0]!r} of the domain is not in the other model's alphabet"
    elif b.tokens.dim != a.tokens.dim:
        return f"grid tokens of dimension {a.tokens.dim} and {b.tokens.dim}"
    longest = len(b.prepare_input(["?"] * max(request.domain.lengths)))
    if b.max_length is not None and longest > b.max_length:
        return f"inputs are longer than the other model's positional encoding ({b.max_length} positions)"
    return None


def violation(request: CheckRequest, tokens: tuple) -> dict[str, Any] | None:
    """Both models on the interpreter; the witness when an observed value differs, else None."""
    ours, theirs = _observed(request, request.model, tokens), _observed(request, request.options["model"], tokens)
    if ours == theirs:
        return None
    p = next(i for i in range(len(ours)) if ours[i] != theirs[i])
    show = fmt if request.options.get("on") == "readout" else fmt_vector
    a, b = (ours[p][0], theirs[p][0]) if request.options.get("on") == "readout" else (ours[p], theirs[p])
    return {"input": input_to_json(tokens), "position": p,
            "value": [str(x) for x in ours[p]], "other_value": [str(x) for x in theirs[p]],
            "summary": f"X = {format_input(tokens)}: at position {p} the model gives {show(a)}, "
                       f"the other model {show(b)}"}


def _error(request: CheckRequest, message: str) -> Verdict:
    return Verdict(request.label, ERROR, request.engine, detail=message)


def check_interpret(request: CheckRequest) -> Verdict:
    problem = _incompatible(request)
    if problem:
        return _error(request, problem)
    return check_each_input(request, violation)


def _queries(request: CheckRequest):
    from ..engines.smt.encoder import encode_model
    from ..engines.smt.inputs import input_for_length
    from ..engines.smt.query import Query
    from ..engines.smt.values import Builder

    readout = request.options.get("on") == "readout"
    for length in request.domain.lengths:
        start = time.perf_counter()
        builder = Builder()
        inp = input_for_length(request.domain, length, builder)
        ours = encode_model(request.model, request.arithmetic, inp, builder)
        theirs = encode_model(request.options["model"], request.arithmetic, inp, builder)
        if readout:
            differs = [builder.ne(a, b) for a, b in zip(ours.readout, theirs.readout)]
        else:
            differs = [builder.ne(a, b) for va, vb in zip(ours.output, theirs.output) for a, b in zip(va, vb)]
        yield Query(name=f"length {length}", assertions=builder.assertions + [z3.Or(differs)], inputs=[inp],
                    replay=lambda inputs: violation(request, inputs[0]), stats=builder.stats,
                    encode_seconds=time.perf_counter() - start)


def check_smt(request: CheckRequest) -> Verdict:
    from ..engines.smt.query import run_queries

    problem = _incompatible(request)
    if problem:
        return _error(request, problem)
    return run_queries(request, _queries(request))


def choose_engine(request: CheckRequest) -> str:
    work = request.domain.size() * 2 * max(1, len(request.model.blocks)) * max(request.domain.lengths)
    return "interpret" if work <= ENUMERATION_BUDGET else "smt"


ENGINES = {"interpret": check_interpret, "smt": check_smt}


def run(request: CheckRequest) -> Verdict:
    return ENGINES[request.engine](request)


PROPERTY = PropertyDef(
    name="equivalent-to",
    summary="the model and another model give the same outputs on every input in the domain (a miter)",
    options=OPTIONS,
    engines=("interpret", "smt"),
    run=run,
    choose_engine=choose_engine,
)

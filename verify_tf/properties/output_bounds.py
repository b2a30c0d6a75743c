"""Property ``output-bounds``: for every input of the domain, the readout q_i = u·z_i lies in [lo, hi].

Positions index the sequence the network sees (with a BOS token, position 0 is BOS); negative positions
count from the end (-1 = last), so one spec covers every length of a string domain. Witness: the input,
the position and the value found there.

Engines: ``interpret`` (every input on the reference interpreter) and ``smt`` (one QF_LIA query per
input length: "some checked position has q < lo or q > hi"; unsat proves the bound for the whole domain).
``choose_engine`` enumerates small domains and asks the solver otherwise (crossover in docs/smt.md).
"""

from __future__ import annotations

import time
from fractions import Fraction
from typing import Any

import z3

from ..domain import format_input
from ..numbers import fmt
from ..semantics import evaluate
from ..spec.schema import Field, Integer, ListOf, Number, Obj, String
from ..verdict import Verdict
from ..witness import input_to_json
from .base import CheckRequest, PropertyDef, check_each_input

# below this many interpreter evaluations (inputs x length x layers), enumeration is faster than
# encoding + solving (bench/bench_smt.py, docs/smt.md)
ENUMERATION_BUDGET = 5_000


def _check_options(options: dict, node, ctx, path) -> dict:
    if options["lo"] is None and options["hi"] is None:
        raise ctx.error(node, path, "output-bounds needs 'lo', 'hi' or both", "e.g. {lo: -1, hi: 1}")
    if options["lo"] is not None and options["hi"] is not None and options["lo"] > options["hi"]:
        raise ctx.error(node, path, f"lo ({options['lo']}) exceeds hi ({options['hi']})")
    return options


def solver_fields() -> dict[str, Field]:
    from ..engines.smt.query import SOLVERS

    return {
        "solver": Field(String("smt engine: z3, cvc5, bitwuzla (optional extras) or a portfolio race", SOLVERS),
                        default="z3"),
        "rlimit": Field(Integer("smt engine: z3 resource limit per query (deterministic budget)", minimum=1)),
    }


OPTIONS = Obj({
    "lo": Field(Number("smallest allowed readout value")),
    "hi": Field(Number("largest allowed readout value")),
    "positions": Field(ListOf(Integer("a position; negative counts from the end"), "positions to check "
                                                                                    "(default: all)")),
    **solver_fields(),
}, "readout bounds", convert=_check_options)


def _positions(request: CheckRequest, length: int) -> list[int]:
    """Positions (in the network's sequence, BOS included) that the property constrains."""
    chosen = request.options.get("positions")
    if chosen is None:
        return list(range(length))
    return sorted({p % length for p in chosen if -length <= p < length})


def _outside(request: CheckRequest, value: Fraction) -> bool:
    lo, hi = request.options.get("lo"), request.options.get("hi")
    return (lo is not None and value < lo) or (hi is not None and value > hi)


def violation(request: CheckRequest, tokens: tuple) -> dict[str, Any] | None:
    """Evaluate on the interpreter; the witness when some checked readout leaves [lo, hi], else None."""
    readout = evaluate(request.model, request.arithmetic, tokens).readout
    for p in _positions(request, len(readout)):
        if _outside(request, readout[p]):
            lo, hi = request.options.get("lo"), request.options.get("hi")
            bounds = f"[{fmt(lo) if lo is not None else '-inf'}, {fmt(hi) if hi is not None else 'inf'}]"
            return {"input": input_to_json(tokens), "position": p, "value": str(readout[p]),
                    "readout": [str(q) for q in readout],
                    "summary": f"X = {format_input(tokens)}: q at position {p} is {fmt(readout[p])}, outside {bounds}"}
    return None


def check_interpret(request: CheckRequest) -> Verdict:
    return check_each_input(request, violation)


def _queries(request: CheckRequest):
    from ..engines.smt.encoder import encode_model
    from ..engines.smt.inputs import input_for_length
    from ..engines.smt.query import Query
    from ..engines.smt.values import Builder, Sym

    lo, hi = request.options.get("lo"), request.options.get("hi")
    for length in request.domain.lengths:
        start = time.perf_counter()
        builder = Builder()
        inp = input_for_length(request.domain, length, builder)
        trace = encode_model(request.model, request.arithmetic, inp, builder)
        outside = []
        for p in _positions(request, len(trace.readout)):
            q = trace.readout[p]
            if lo is not None:
                outside.append(z3.Not(builder.ge(q, Sym.const(lo))))
            if hi is not None:
                outside.append(z3.Not(builder.ge(Sym.const(hi), q)))
        yield Query(name=f"length {length}", assertions=builder.assertions + [z3.Or(outside)], inputs=[inp],
                    replay=lambda inputs: violation(request, inputs[0]), stats=builder.stats,
                    encode_seconds=time.perf_counter() - start)


def check_smt(request: CheckRequest) -> Verdict:
    from ..engines.smt.query import run_queries

    return run_queries(request, _queries(request))


def enumeration_cost(request: CheckRequest) -> int:
    """Interpreter work for exhaustive checking, in units of one (input, layer) evaluation."""
    layers = max(1, len(request.model.blocks))
    return request.domain.size() * layers * max(request.domain.lengths)


def choose_engine(request: CheckRequest) -> str:
    return "interpret" if enumeration_cost(request) <= ENUMERATION_BUDGET else "smt"


ENGINES = {"interpret": check_interpret, "smt": check_smt}


def run(request: CheckRequest) -> Verdict:
    return ENGINES[request.engine](request)


PROPERTY = PropertyDef(
    name="output-bounds",
    summary="lo <= q_i <= hi for every input in the domain and every (chosen) position",
    options=OPTIONS,
    engines=("interpret", "smt"),
    run=run,
    choose_engine=choose_engine,
)

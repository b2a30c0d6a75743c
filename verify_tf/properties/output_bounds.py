"""Property ``output-bounds``: for every input of the domain, the readout q_i = u·z_i lies in [lo, hi].

Positions index the sequence the network sees (with a BOS token, position 0 is BOS); negative positions
count from the end (-1 = last), so one spec covers every length of a string domain. Witness: the input,
the position and the value found there.

Engines: ``interpret`` (every input on the reference interpreter), ``enumerate`` (every input on the exact
batched evaluator, streamed in chunks; reports the exact readout range it saw) and ``smt`` (one QF_LIA query
per input length: "some checked position has q < lo or q > hi"; unsat proves the bound for the whole
domain). ``choose_engine`` enumerates when the batched evaluator takes the model and the domain fits the
timeout at its measured rate, else uses the interpreter for tiny domains and the solver otherwise.
"""

from __future__ import annotations

import math
import time
from fractions import Fraction
from typing import Any

import z3

from ..domain import format_input
from ..numbers import fmt
from ..semantics import evaluate
from ..spec.schema import Field, Integer, ListOf, Number, Obj, String
from ..verdict import PROVED, REFUTED, UNKNOWN, Verdict
from ..witness import input_to_json
from .base import CheckRequest, PropertyDef, batched_evaluator, check_each_input

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


def _int64(threshold: int) -> int:
    """Clamp a comparison threshold into int64; numerators are within ±2^62, so every comparison is unchanged."""
    return max(-(1 << 63), min(threshold, (1 << 63) - 1))


def check_enumerate(request: CheckRequest) -> Verdict:
    """Exhaustive on the batched evaluator: integer readouts num/den compared with ceil(lo·den), floor(hi·den)."""
    import numpy as np

    from ..engines.batched import Deadline, stream_outputs
    from ..witness import ReplayMismatch

    deadline = Deadline(request.timeout)
    evaluator = batched_evaluator(request)
    total = request.domain.size()
    lo, hi = request.options.get("lo"), request.options.get("hi")
    seen_lo = seen_hi = None
    checked = 0
    for chunk in stream_outputs(request.model, request.arithmetic, request.domain, layer="readout",
                                evaluator=evaluator, progress=request.tick):
        if deadline.expired():
            return Verdict(request.label, UNKNOWN, "enumerate", detail=f"timeout after {checked} of {total} inputs "
                           "(no violation so far)", seconds=deadline.elapsed(),
                           tried=[f"exhaustive enumeration ({checked}/{total})"],
                           statistics={"inputs_checked": checked, "domain_size": total})
        values = chunk.values
        columns = _positions(request, values.numerators.shape[1])
        if columns:
            picked = values.numerators[:, columns]
            # q = num/den (den > 0) and num is an integer: q < lo <=> num < ceil(lo·den); q > hi <=> num > floor(hi·den)
            outside = np.zeros(picked.shape[0], dtype=bool)
            if lo is not None:
                outside |= (picked < _int64(math.ceil(lo * values.den))).any(axis=1)
            if hi is not None:
                outside |= (picked > _int64(math.floor(hi * values.den))).any(axis=1)
            low, high = Fraction(int(picked.min()), values.den), Fraction(int(picked.max()), values.den)
            seen_lo = low if seen_lo is None else min(seen_lo, low)
            seen_hi = high if seen_hi is None else max(seen_hi, high)
            bad = np.flatnonzero(outside)
            if len(bad):
                tokens = evaluator.decode(chunk.rows[int(bad[0])])
                witness = violation(request, tokens)  # replay on the interpreter
                if witness is None:
                    raise ReplayMismatch(f"output-bounds: the batched evaluator puts X = {format_input(tokens)} "
                                         "outside the bounds, the interpreter does not",
                                         claimed=str(picked[int(bad[0])].tolist()), replayed="inside")
                return Verdict(request.label, REFUTED, "enumerate", method="exhaustive", detail=witness["summary"],
                               seconds=deadline.elapsed(), counterexample=witness,
                               statistics={"inputs_checked": checked + int(bad[0]) + 1, "domain_size": total,
                                           "backend": evaluator.describe()})
        checked = chunk.stop
    seen = "" if seen_lo is None else f"; readout range seen [{fmt(seen_lo)}, {fmt(seen_hi)}]"
    return Verdict(request.label, PROVED, "enumerate", method="exhaustive", detail=f"all {total} inputs{seen}",
                   seconds=deadline.elapsed(),
                   statistics={"domain_size": total, "backend": evaluator.describe(),
                               "readout_min": None if seen_lo is None else str(seen_lo),
                               "readout_max": None if seen_hi is None else str(seen_hi)})


def choose_engine(request: CheckRequest) -> str:
    """enumerate when the batched evaluator takes the model and finishes well inside the timeout at its
    measured rate; otherwise the interpreter for tiny domains and the solver for the rest."""
    from ..engines.batched import Unsupported, estimate_throughput

    try:
        evaluator = batched_evaluator(request)
        rate = estimate_throughput(evaluator, max(request.domain.lengths))
    except Unsupported:
        return "interpret" if enumeration_cost(request) <= ENUMERATION_BUDGET else "smt"
    if request.domain.size() <= 0.5 * request.timeout * rate:
        return "enumerate"
    return "smt"


ENGINES = {"interpret": check_interpret, "enumerate": check_enumerate, "smt": check_smt}


def run(request: CheckRequest) -> Verdict:
    return ENGINES[request.engine](request)


PROPERTY = PropertyDef(
    name="output-bounds",
    summary="lo <= q_i <= hi for every input in the domain and every (chosen) position",
    options=OPTIONS,
    engines=("interpret", "enumerate", "smt"),
    run=run,
    choose_engine=choose_engine,
)

"""Property ``permutation-equivariance``: f(πX) = π f(X) for every input X of the domain and every π.

Adjacent transpositions generate the symmetric group, so checking f(τX) = τ f(X) for every adjacent
transposition τ (and every X, the domain being closed under permutation) is equivalent. With a BOS token
the BOS position stays first; only the user's positions are permuted.

Expected: proved for models without positional information (standard attention, no PE, no causal mask);
refuted for absolute PE, RPE and URPE models with generic weights.
"""

from __future__ import annotations

import time
from fractions import Fraction

from ..domain import format_input
from ..numbers import fmt_vector
from ..semantics import evaluate
from ..spec.schema import Field, Obj, String
from ..verdict import PROVED, REFUTED, UNKNOWN, Verdict
from ..witness import input_to_json, vectors_to_json
from .base import CheckRequest, PropertyDef

OPTIONS = Obj({
    "on": Field(String("compare the full final stream ('output') or only the readout q ('readout')",
                       ("output", "readout")), default="output"),
})


def _observed(request: CheckRequest, tokens) -> list:
    trace = evaluate(request.model, request.arithmetic, tokens)
    if request.options.get("on") == "readout":
        return [(q,) for q in trace.readout]
    return list(trace.output)


def _offset(request: CheckRequest) -> int:
    """Positions shifted by a prepended BOS token (BOS itself is never permuted)."""
    tokens = request.model.tokens
    return 1 if getattr(tokens, "bos", None) is not None else 0


def violation(request: CheckRequest, tokens: tuple, k: int) -> dict | None:
    """Evaluate X and τ_k X on the interpreter; return the witness if f(τX) != τ f(X), else None."""
    swapped = tokens[:k] + (tokens[k + 1], tokens[k]) + tokens[k + 2:]
    off = _offset(request)
    out_x = _observed(request, tokens)
    out_y = _observed(request, swapped)
    expected = list(out_x)
    expected[off + k], expected[off + k + 1] = expected[off + k + 1], expected[off + k]
    if out_y == expected:
        return None
    differing = next(i for i in range(len(out_y)) if out_y[i] != expected[i])
    return {
        "input": input_to_json(tokens),
        "transposition": [k, k + 1],
        "permuted_input": input_to_json(swapped),
        "position": differing - off,
        "f_of_permuted": vectors_to_json(out_y),
        "permuted_f": vectors_to_json(expected),
        "summary": f"X = {format_input(tokens)}, swap positions {k},{k + 1}: at position {differing - off} "
                   f"f(τX) = {fmt_vector(out_y[differing])} but τf(X) = {fmt_vector(expected[differing])}",
    }


def check_interpret(request: CheckRequest) -> Verdict:
    """Exhaustive: evaluate every input once on the interpreter, compare each with its transpositions."""
    domain = request.domain
    start = time.perf_counter()
    deadline = start + request.timeout
    total = domain.size()
    outputs: dict[tuple, list] = {}
    off = _offset(request)
    checked = 0
    for index, tokens in enumerate(domain.inputs()):
        if time.perf_counter() > deadline:
            return Verdict(request.label, UNKNOWN, "interpret", detail=f"timeout after {index} of {total} inputs",
                           seconds=time.perf_counter() - start, tried=[f"exhaustive enumeration ({index}/{total})"],
                           statistics={"inputs_checked": index, "domain_size": total})
        outputs[tokens] = _observed(request, tokens)
        request.tick(index + 1, total)
    for tokens, out_x in outputs.items():
        for k in range(len(tokens) - 1):
            if tokens[k] == tokens[k + 1]:
                continue
            swapped = tokens[:k] + (tokens[k + 1], tokens[k]) + tokens[k + 2:]
            expected = list(out_x)
            expected[off + k], expected[off + k + 1] = expected[off + k + 1], expected[off + k]
            checked += 1
            if outputs[swapped] != expected:
                witness = violation(request, tokens, k)  # replay from scratch on the interpreter
                if witness is None:  # cannot happen with a deterministic interpreter; never hide it
                    raise AssertionError("permutation-equivariance: replay disagrees with the enumeration")
                return Verdict(request.label, REFUTED, "interpret", method="exhaustive",
                               detail=witness["summary"], seconds=time.perf_counter() - start,
                               counterexample=witness,
                               statistics={"domain_size": total, "pairs_checked": checked})
    return Verdict(request.label, PROVED, "interpret", method="exhaustive",
                   detail=f"all {total} inputs × adjacent transpositions ({checked} pairs)",
                   seconds=time.perf_counter() - start,
                   statistics={"domain_size": total, "pairs_checked": checked})


PROPERTY = PropertyDef(
    name="permutation-equivariance",
    summary="f(πX) = πf(X) for every input X in the domain (checked on adjacent transpositions)",
    options=OPTIONS,
    engines=("interpret",),
    run=check_interpret,
)

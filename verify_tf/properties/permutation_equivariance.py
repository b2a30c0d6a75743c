"""Property ``permutation-equivariance``: f(πX) = π f(X) for every input X of the domain and every π.

Adjacent transpositions generate the symmetric group, so checking f(τX) = τ f(X) for every adjacent
transposition τ (and every X, the domain being closed under permutation) is equivalent. With a BOS token
the BOS position stays first; only the user's positions are permuted.

Expected: proved for models without positional information (standard attention, no PE, no causal mask);
refuted for absolute PE, RPE and URPE models with generic weights.
"""

from __future__ import annotations

import time

import numpy as np
import z3

from ..domain import format_input
from ..numbers import fmt_vector
from ..semantics import evaluate
from ..spec.schema import Field, Integer, Obj, String
from ..verdict import PROVED, REFUTED, UNKNOWN, Verdict
from ..witness import ReplayMismatch, input_to_json, vectors_to_json
from .base import CheckRequest, PropertyDef, batched_evaluator
from .output_bounds import solver_fields

OPTIONS = Obj({
    "on": Field(String("compare the full final stream ('output') or only the readout q ('readout')",
                       ("output", "readout")), default="output"),
    "samples": Field(Integer("search engine: how many inputs to try (seeded by the spec's seed)", minimum=1),
                     default=100_000),
    **solver_fields(),
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
            # no skip when X_k = X_{k+1}: then τX = X and the property still demands f(X)_k = f(X)_{k+1}
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


# -- engines enumerate and search: batched exact evaluation (verify_tf.engines.batched) ------------------------

def _batched_outputs(evaluator, request: CheckRequest, rows) -> tuple[np.ndarray, int]:
    """Exact observed values: numerators (B, positions, coordinates) and their common denominator."""
    values = evaluator.values(rows, "readout" if request.options.get("on") == "readout" else "output")
    numerators = values.numerators if values.numerators.ndim == 3 else values.numerators[..., None]
    return numerators, values.den


def _sorting_violations(request: CheckRequest, evaluator, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row X (sorted S = ρ⁻¹X): (f(X) != ρ f(S), some swap of two equal tokens of S changes f(S)).

    Both false for every X of a permutation-closed domain  <=>  f(πX) = π f(X) for all X and π: write
    X = ρS and πX = ρ'S; then ρ' = πρσ with σ fixing S, and f(πX) = ρ'f(S) = πρσ f(S) = πρ f(S) = π f(X).
    The stabiliser of a sorted S is generated by the adjacent swaps of equal tokens. Cost: two evaluations
    per input instead of n for all n-1 transpositions.
    """
    off = _offset(request)
    order = np.argsort(rows, axis=1, kind="stable")
    sorted_rows = np.take_along_axis(rows, order, axis=1)
    both, _ = _batched_outputs(evaluator, request, np.concatenate([rows, sorted_rows]))
    f_x, f_s = both[: len(rows)], both[len(rows):]
    rank = np.argsort(order, axis=1)  # X's position p holds S's token at position rank[p]
    expected = np.take_along_axis(f_s[:, off:], rank[..., None], axis=1)
    mismatch = (f_x[:, off:] != expected).any(axis=(1, 2)) | (f_x[:, :off] != f_s[:, :off]).any(axis=(1, 2))
    equal_tokens = sorted_rows[:, 1:] == sorted_rows[:, :-1]
    changed = (f_s[:, off + 1:] != f_s[:, off:-1]).any(axis=2)
    return mismatch, (equal_tokens & changed).any(axis=1)


def _replay_sorting_witness(request: CheckRequest, tokens: tuple, rows: np.ndarray) -> dict:
    """A transposition witness on the interpreter: some adjacent swap on the bubble-sort path X -> S breaks
    f(τY) = τ f(Y) (else f(X) = ρ f(S) by composition)."""
    current, order = tuple(tokens), [int(t) for t in rows]
    for _ in range(len(order)):
        for k in range(len(order) - 1):
            if order[k] > order[k + 1]:
                witness = violation(request, current, k)
                if witness is not None:
                    return witness
                order[k], order[k + 1] = order[k + 1], order[k]
                current = current[:k] + (current[k + 1], current[k]) + current[k + 2:]
    raise ReplayMismatch("permutation-equivariance: the batched evaluator found f(X) != ρ f(sort X) but no "
                         "transposition on the way replays on the interpreter", claimed=format_input(tokens))


def check_enumerate(request: CheckRequest) -> Verdict:
    """Exhaustive over the whole domain on the batched evaluator, in chunks (bounded memory): a proof."""
    from ..engines.batched import Deadline, stream_inputs

    domain = request.domain
    deadline = Deadline(request.timeout)
    evaluator = batched_evaluator(request)
    total = domain.size()
    chunk = max(1, min(evaluator.chunk_size(n) for n in domain.lengths) // 2)  # X and sort(X) together
    checked = 0
    for piece in stream_inputs(domain, chunk=chunk):
        if deadline.expired():
            return Verdict(request.label, UNKNOWN, "enumerate",
                           detail=f"timeout after {checked} of {total} inputs (no violation so far)",
                           seconds=deadline.elapsed(), tried=[f"exhaustive enumeration ({checked}/{total})"],
                           statistics={"inputs_checked": checked, "domain_size": total,
                                       "backend": evaluator.describe()})
        mismatch, stabiliser = _sorting_violations(request, evaluator, piece.rows)
        bad = np.flatnonzero(mismatch | stabiliser)
        if len(bad):
            b = int(bad[0])
            tokens = evaluator.decode(piece.rows[b])
            if stabiliser[b] and not mismatch[b]:
                ordered = evaluator.decode(np.sort(piece.rows[b]))
                witness = next((w for k in range(len(ordered) - 1) if ordered[k] == ordered[k + 1]
                                for w in [violation(request, ordered, k)] if w is not None), None)
                if witness is None:
                    raise ReplayMismatch("permutation-equivariance: swapping equal tokens changed f(S) in the "
                                         "batched evaluator but not on the interpreter",
                                         claimed=format_input(ordered))
            else:
                witness = _replay_sorting_witness(request, tokens, piece.rows[b])
            return Verdict(request.label, REFUTED, "enumerate", method="exhaustive", detail=witness["summary"],
                           seconds=deadline.elapsed(), counterexample=witness,
                           statistics={"domain_size": total, "inputs_checked": checked + b + 1,
                                       "backend": evaluator.describe()})
        checked = piece.stop
        request.tick(checked, total)
    seconds = deadline.elapsed()
    return Verdict(request.label, PROVED, "enumerate", method="exhaustive",
                   detail=f"all {total} inputs: f(X) = ρ·f(sort X), equal-token swaps fix f(sort X)",
                   seconds=seconds,
                   statistics={"domain_size": total, "inputs_checked": total, "backend": evaluator.describe(),
                               "inputs_per_second": round(total / seconds) if seconds > 0 else None})


def _transposition_gaps(request: CheckRequest, evaluator, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Search objective: max over τ_k, positions, coordinates of |f(τ_k X) - τ_k f(X)| (float64, guidance
    only), and whether f(τ_k X) != τ_k f(X) for some k (exact integer comparison)."""
    count, n = rows.shape
    if n < 2:
        return np.zeros(count), np.zeros(count, dtype=bool)
    off = _offset(request)
    variants = [rows]
    for k in range(n - 1):
        swapped = rows.copy()
        swapped[:, [k, k + 1]] = swapped[:, [k + 1, k]]
        variants.append(swapped)
    outputs, den = _batched_outputs(evaluator, request, np.concatenate(variants))
    base = outputs[:count]
    gap = np.zeros(count)
    violated = np.zeros(count, dtype=bool)
    for k in range(n - 1):
        expected = base.copy()
        expected[:, [off + k, off + k + 1]] = expected[:, [off + k + 1, off + k]]
        permuted = outputs[(k + 1) * count:(k + 2) * count]
        violated |= (permuted != expected).any(axis=(1, 2))
        gap = np.maximum(gap, np.abs(permuted.astype(np.float64) - expected).max(axis=(1, 2)) / den)
    return gap, violated


def check_search(request: CheckRequest) -> Verdict:
    """Seeded sampling + hill climbing on the transposition gap; candidates replayed on the interpreter."""
    from ..engines.batched import Unsupported
    from ..engines.search import SearchSpace, search

    domain = request.domain
    start = time.perf_counter()
    tokens = domain.tokens
    space = SearchSpace(len(tokens), domain.lengths, getattr(domain, "distinct_tokens", False))
    try:
        evaluator = batched_evaluator(request)
        objective, how, batch = (lambda rows: _transposition_gaps(request, evaluator, rows)), \
            evaluator.describe(), 1024
    except Unsupported as exc:  # slower but always exact: score each row on the interpreter

        def objective(rows):
            hits = np.array([any(violation(request, tuple(tokens[int(t)] for t in row), k) is not None
                                 for k in range(len(row) - 1)) for row in rows])
            return hits.astype(np.float64), hits

        how, batch = f"interpreter ({exc})", 64
    budget = int(request.options.get("samples") or 100_000)
    result = search(space, objective, seed=request.seed, samples=budget, seconds=request.timeout, batch=batch,
                    progress=request.tick)
    statistics = {"samples": result.samples, "rounds": result.rounds, "seed": request.seed, "evaluator": how,
                  "domain_size": domain.size()}
    for row in result.candidates:
        candidate = tuple(tokens[int(t)] for t in row)
        for k in range(len(candidate) - 1):
            witness = violation(request, candidate, k)
            if witness is not None:
                return Verdict(request.label, REFUTED, "search", method="search", detail=witness["summary"],
                               seconds=time.perf_counter() - start, counterexample=witness, statistics=statistics)
        raise ReplayMismatch("permutation-equivariance: the search objective claimed a violation that the "
                             "interpreter does not reproduce", claimed=format_input(candidate))
    stopped = "timeout" if result.stopped == "timeout" else "sample budget"
    return Verdict(request.label, UNKNOWN, "search", method="sampled",
                   detail=f"no counterexample in {result.samples} samples (seed {request.seed}, {stopped})",
                   seconds=time.perf_counter() - start, statistics=statistics,
                   tried=[f"random sampling + hill climbing, {result.samples} samples ({stopped})"])


def choose_engine(request: CheckRequest) -> str:
    """enumerate when the batched evaluator supports the model and the measured throughput finishes the whole
    domain well inside the timeout; otherwise the symbolic engine if there is one, else search (large
    domains) or the interpreter (models the batched evaluator refuses)."""
    from ..engines.batched import Unsupported, estimate_throughput

    fallback = "smt" if "smt" in PROPERTY.engines else None
    try:
        evaluator = batched_evaluator(request)
    except Unsupported:
        return fallback or "interpret"
    if request.domain.size() <= 1 << 16:
        return "enumerate"
    length = max(request.domain.lengths)
    per_second = estimate_throughput(evaluator, length) / 2  # X and sort(X)
    if request.domain.size() <= 0.5 * request.timeout * per_second:
        return "enumerate"
    return fallback or "search"


# -- engine smt: X and τ_k X encoded on the same symbolic variables (verify_tf.engines.smt) ------------------

def _smt_queries(request: CheckRequest):
    """One QF_LIA query per length and adjacent transposition τ_k: "f(τ_k X) != τ_k f(X) at some position"."""
    from ..engines.smt.encoder import encode_model
    from ..engines.smt.inputs import input_for_length, permuted
    from ..engines.smt.query import Query
    from ..engines.smt.values import Builder

    off = _offset(request)
    for length in request.domain.lengths:
        for k in range(length - 1):
            start = time.perf_counter()
            builder = Builder()
            inp = input_for_length(request.domain, length, builder)
            f_x = encode_model(request.model, request.arithmetic, inp, builder)
            f_y = encode_model(request.model, request.arithmetic, permuted(inp, k), builder)
            if request.options.get("on") == "readout":
                obs_x, obs_y = [(q,) for q in f_x.readout], [(q,) for q in f_y.readout]
            else:
                obs_x, obs_y = f_x.output, f_y.output
            expected = list(obs_x)
            expected[off + k], expected[off + k + 1] = expected[off + k + 1], expected[off + k]
            differs = [builder.ne(a, b) for va, vb in zip(obs_y, expected) for a, b in zip(va, vb)]
            yield Query(name=f"length {length}, swap {k},{k + 1}", inputs=[inp],
                        assertions=builder.assertions + [z3.Or(differs)],
                        replay=lambda inputs, k=k: violation(request, inputs[0], k), stats=builder.stats,
                        encode_seconds=time.perf_counter() - start)


def check_smt(request: CheckRequest) -> Verdict:
    from ..engines.smt.query import run_queries

    return run_queries(request, _smt_queries(request))


ENGINES = {"interpret": check_interpret, "enumerate": check_enumerate, "search": check_search, "smt": check_smt}


def run(request: CheckRequest) -> Verdict:
    return ENGINES[request.engine](request)


PROPERTY = PropertyDef(
    name="permutation-equivariance",
    summary="f(πX) = πf(X) for every input X in the domain (checked on adjacent transpositions)",
    options=OPTIONS,
    engines=("interpret", "enumerate", "search", "smt"),
    run=run,
    choose_engine=choose_engine,
)

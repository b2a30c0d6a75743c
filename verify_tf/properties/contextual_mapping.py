"""Property ``contextual-mapping`` (Yun et al., ICLR 2020, Definition 3.1) on a grid domain.

With q(L) = (u·z_1, ..., u·z_n) the readout of the model's final stream on input L, the property holds when
  (1) for every input L the n values of q(L) are pairwise distinct, and
  (2) for any two inputs L ≠ L′ every value of q(L) differs from every value of q(L′).
Options: ``readout`` (u, default the model's readout), ``margin`` m (all those values at least m apart
instead of merely distinct), ``exempt-permutations`` (pairs where L′ is a permutation of L are exempt from
(2): Yun's setting for models without positions, used with ``domain.distinct-tokens: true``, i.e. G̃_δ).

Engines (docs/contextual-mapping.md has measurements):
* ``interpret`` (exhaustive): every input on the reference interpreter; all values scaled by their common
  denominator to exact integers; the (value, input, position) keys sorted and each compared with its nearest
  non-exempt neighbour.
* ``enumerate`` (exhaustive): the same keys from the batched evaluator (exact int64, bounds proven first).
* ``smt``: condition (2) as a two-copy query (two symbolic inputs, one model), condition (1) as a one-copy
  query; both unsat proves the property (the encoder mirrors the interpreter exactly).
* ``auto``: the engine predicted to finish first from rates measured on the spot (``choose_engine``).
For exactly permutation-equivariant models (decided from the IR) with permutations exempt, the exhaustive
engines evaluate one sorted representative per multiset (q(πL) is q(L) permuted, so it adds nothing) and the
SMT queries fix the colliding positions ("fix0"); other models get every sequence and free positions.

A counterexample is the pair (L, L′), the positions (i, j) (0-based) and the two values; it is re-evaluated on
the interpreter before ``refuted`` is reported.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Iterator, Sequence

import numpy as np

from ..domain import GridDomain, format_input
from ..ir import Model
from ..numbers import fmt
from ..semantics import evaluate
from ..spec.schema import Boolean, Field, ListOf, Number, Obj
from ..verdict import ERROR, PROVED, REFUTED, UNKNOWN, Verdict
from ..witness import ReplayMismatch, input_to_json
from .base import CheckRequest, PropertyDef

OPTIONS = Obj({
    "readout": Field(ListOf(Number(), "u: the values are q_i = u·z_i of the final stream (default: the "
                            "model's readout)", min_length=1)),
    "margin": Field(Number("every two values must be at least this far apart (default: merely distinct)",
                           positive=True)),
    "exempt-permutations": Field(Boolean("pairs where one input is a permutation of the other are exempt from "
                                         "condition (2) (Yun's setting for models without positions)"),
                                 default=False),
})

INT64_SAFE = 1 << 62  # scaled values and their differences stay inside int64


# ---------------------------------------------------------------- model facts

def equivariance_obstacle(model: Model) -> str | None:
    """None when the model is exactly permutation-equivariant by construction, else what breaks it.

    Without absolute PE, RPE/URPE and causal masks every sublayer is applied per position except attention,
    whose row i depends on the keys only through the multiset {(s_ij, v_j)}: hardmax averages its ties, uniform
    and the fixed-point softmax (exp table, exact sums, one division) are symmetric, and every rounding is
    elementwise. So f(πL) = πf(L) exactly, in both arithmetic modes.
    """
    if model.positional_encoding is not None:
        return "it has an absolute positional encoding"
    for layer, index, head in model.heads():
        if head.causal:
            return f"layers[{layer}] head {index} is causal"
        if head.positional != "standard":
            return f"layers[{layer}] head {index} uses {head.positional}"
    return None


# ---------------------------------------------------------------- options and values

@dataclass(frozen=True)
class Setup:
    domain: GridDomain
    readout: tuple[Fraction, ...] | None  # None: the model's own readout
    margin: Fraction | None  # None: values must merely differ
    exempt: bool
    equivariant: bool
    obstacle: str | None

    def too_close(self, a: Fraction, b: Fraction) -> bool:
        return self.gap_violates(abs(a - b))

    def gap_violates(self, gap: Fraction) -> bool:
        return gap == 0 if self.margin is None else gap < self.margin

    def requirement(self) -> str:
        return "distinct" if self.margin is None else f"at least {fmt(self.margin)} apart"


def setup(request: CheckRequest) -> Setup | Verdict:
    """Validate what the schema cannot (needs the model and domain); a Verdict ``error`` says what is wrong."""
    options = request.options
    node = options.get("__node__")
    where = f" (line {node.line})" if node is not None and getattr(node, "line", None) else ""

    def error(message: str) -> Verdict:
        return Verdict(request.label, ERROR, request.engine, detail=message + where)

    domain = request.domain
    if not isinstance(domain, GridDomain):
        return error("contextual-mapping needs a grid domain: domain: {grid: {step: 1/2}, length: 3}")
    readout = options.get("readout")
    if readout is not None and len(readout) != request.model.dim:
        return error(f"readout has {len(readout)} entries, expected the model width {request.model.dim}")
    obstacle = equivariance_obstacle(request.model)
    return Setup(domain=domain, readout=tuple(readout) if readout is not None else None,
                 margin=options.get("margin"), exempt=bool(options.get("exempt-permutations")),
                 equivariant=obstacle is None, obstacle=obstacle)


def readout_values(request: CheckRequest, config: Setup, tokens: Sequence) -> list[Fraction]:
    """q(L) on the reference interpreter."""
    trace = evaluate(request.model, request.arithmetic, tokens)
    if config.readout is None:
        return list(trace.readout)
    return [sum((u * x for u, x in zip(config.readout, z)), Fraction(0)) for z in trace.output]


def is_permutation(first: Sequence, second: Sequence) -> bool:
    return sorted(first) == sorted(second)


# ---------------------------------------------------------------- counterexamples

def replay(request: CheckRequest, config: Setup, first: tuple, i: int, second: tuple, j: int) -> dict:
    """Re-evaluate both inputs on the interpreter, confirm the violation, return the witness JSON."""
    q1 = readout_values(request, config, first)
    q2 = readout_values(request, config, second)
    same = tuple(first) == tuple(second)
    if same and i == j:
        raise ReplayMismatch("contextual-mapping: a value compared with itself", (first, i), (second, j))
    if not same and config.exempt and is_permutation(first, second):
        raise ReplayMismatch("contextual-mapping: the claimed pair is an exempt permutation", first, second)
    a, b = q1[i], q2[j]
    if not config.too_close(a, b):
        raise ReplayMismatch(f"contextual-mapping: q(L)_{i} = {a} and q(L')_{j} = {b} are {config.requirement()}",
                             "too close", (str(a), str(b)))
    relation = "=" if a == b else "≈"
    gap = abs(a - b)
    closeness = "" if a == b else f" (only {fmt(gap)} apart, margin {fmt(config.margin)})"
    if same:
        summary = (f"L = {format_input(first)}: q(L)_{i} = {fmt(a)} {relation} q(L)_{j} = {fmt(b)}{closeness}: "
                   f"two positions of one input")
    else:
        summary = (f"L = {format_input(first)}, L′ = {format_input(second)}: q(L)_{i} = {fmt(a)} {relation} "
                   f"q(L′)_{j} = {fmt(b)}{closeness}")
    return {
        "input": input_to_json(first),
        "other_input": input_to_json(second),
        "positions": [i, j],
        "values": [str(a), str(b)],
        "gap": str(gap),
        "condition": 1 if same else 2,
        "summary": summary,
    }


def refuted(request: CheckRequest, config: Setup, engine: str, first: tuple, i: int, second: tuple, j: int,
            started: float, statistics: dict, method: str = "exhaustive") -> Verdict:
    witness = replay(request, config, first, i, second, j)
    return Verdict(request.label, REFUTED, engine, method=method, detail=witness["summary"],
                   seconds=time.perf_counter() - started, counterexample=witness, statistics=statistics)


def permutation_witness(config: Setup) -> tuple[tuple, int, tuple, int] | None:
    """For an equivariant model without the exemption: L and L with two different tokens swapped.

    f(τL) = τf(L), so q(τL) at position k equals q(L) at position 0: condition (2) fails for every input
    with two different tokens. None when the domain has no such input.
    """
    tokens, n = config.domain.tokens, config.domain.length
    if n < 2 or len(tokens) < 2:
        return None
    sequence = tuple(tokens[:n]) if config.domain.distinct_tokens else (tokens[0],) + (tokens[1],) * (n - 1)
    swapped = (sequence[1], sequence[0]) + sequence[2:]
    return sequence, 0, swapped, 1


# ---------------------------------------------------------------- the exhaustive scan

def domain_inputs(config: Setup) -> tuple[Iterator[tuple], int, str]:
    """The inputs to evaluate: sorted multisets when the model is equivariant and permutations are exempt."""
    domain = config.domain
    tokens, n = domain.tokens, domain.length
    if config.equivariant and config.exempt:
        if domain.distinct_tokens:
            return itertools.combinations(tokens, n), math.comb(len(tokens), n), "multisets"
        return (itertools.combinations_with_replacement(tokens, n), math.comb(len(tokens) + n - 1, n),
                "multisets")
    return domain.inputs(), domain.size(), "sequences"


@dataclass
class ScanResult:
    """The closest non-exempt pair of keys (input indices and positions), or None when there are < 2 keys."""

    gap: Fraction | None
    pair: tuple[tuple[int, int], tuple[int, int]] | None
    smallest: Fraction | None
    largest: Fraction | None
    keys: int = 0


def scan_scaled(scaled: np.ndarray, groups: np.ndarray, n: int, denominator: int) -> ScanResult:
    """Closest pair of keys k = input*n + position that is not exempt.

    ``scaled``: the values times ``denominator`` (exact integers, int64 or Python ints in an object array).
    Keys of two different inputs in the same group are exempt (permutations of each other); keys of one input
    never are. Sorted order makes the first non-exempt key after key i its closest partner above it, so each
    key is compared with keys at offsets 1, 2, ... until it meets a non-exempt one or the offset can no longer
    beat the best gap found.
    """
    count = len(scaled)
    if count == 0:
        return ScanResult(None, None, None, None, 0)
    order = np.argsort(scaled, kind="stable")
    values = scaled[order]
    inputs = order // n
    group = groups[inputs]
    smallest, largest = Fraction(int(values[0]), denominator), Fraction(int(values[-1]), denominator)
    best_gap, best_pair = None, None
    pending = np.arange(count - 1)
    offset = 1
    while pending.size:
        partners = pending + offset
        gaps = values[partners] - values[pending]
        if best_gap is not None:
            keep = gaps < best_gap
            pending, partners, gaps = pending[keep], partners[keep], gaps[keep]
            if not pending.size:
                break
        exempt = (group[pending] == group[partners]) & (inputs[pending] != inputs[partners])
        found = ~exempt
        if found.any():
            candidates = np.nonzero(found)[0]
            at = candidates[int(np.argmin(gaps[candidates]))]
            best_gap = gaps[at]
            best_pair = (int(order[pending[at]]), int(order[partners[at]]))
        pending = pending[exempt]
        offset += 1
        pending = pending[pending + offset < count]
    if best_pair is None:
        return ScanResult(None, None, smallest, largest, count)
    (a, b) = best_pair
    return ScanResult(Fraction(int(best_gap), denominator), ((a // n, a % n), (b // n, b % n)), smallest, largest,
                      count)


def scan_fractions(values: list[Fraction], groups: list[int], n: int) -> ScanResult:
    """Scale exact values by their common denominator and scan them as integers (int64 when bounds allow)."""
    denominator = 1
    for v in values:
        denominator = math.lcm(denominator, v.denominator)
    integers = [int(v * denominator) for v in values]
    bound = max((abs(x) for x in integers), default=0)
    dtype = np.int64 if 2 * bound < INT64_SAFE else object
    scaled = np.array(integers, dtype=dtype)
    return scan_scaled(scaled, np.array(groups, dtype=np.int64), n, denominator)


def proved_detail(config: Setup, result: ScanResult, evaluated: int, mode: str) -> str:
    gap = "no two values to compare" if result.gap is None else f"smallest gap {fmt(result.gap)}"
    span = "" if result.smallest is None else f", q in [{fmt(result.smallest)}, {fmt(result.largest)}]"
    return f"all values {config.requirement()}: {gap}{span} ({evaluated} {mode} evaluated)"


def statistics(config: Setup, result: ScanResult | None, evaluated: int, total: int, mode: str) -> dict:
    stats = {"inputs_evaluated": evaluated, "domain_size": config.domain.size(), "enumerated": mode,
             "enumeration_size": total,
             "permutation_equivariant": config.equivariant if config.obstacle is None
             else f"no: {config.obstacle}"}
    if result is not None and result.smallest is not None:
        stats.update({"min_q": str(result.smallest), "max_q": str(result.largest),
                      "smallest_gap": None if result.gap is None else str(result.gap), "keys": result.keys})
    return stats


# ---------------------------------------------------------------- engine: interpret (exhaustive)

def check_interpret(request: CheckRequest) -> Verdict:
    config = setup(request)
    if isinstance(config, Verdict):
        return config
    started = time.perf_counter()
    deadline = started + request.timeout
    if config.equivariant and not config.exempt:
        witness = permutation_witness(config)
        if witness is not None:
            return refuted(request, config, "interpret", *witness, started,
                              {"domain_size": config.domain.size(), "reason": "permutation-equivariant model: "
                               "a permutation of L shares all of L's values; set exempt-permutations: true "
                               "for Yun's setting"})
    inputs, total, mode = domain_inputs(config)
    n = config.domain.length
    seen: list[tuple] = []
    values: list[Fraction] = []
    groups: list[int] = []
    multiset_ids: dict[tuple, int] = {}
    for index, tokens in enumerate(inputs):
        if time.perf_counter() > deadline:
            return Verdict(request.label, UNKNOWN, "interpret", detail=f"timeout after {index} of {total} {mode}",
                           seconds=time.perf_counter() - started,
                           tried=[f"exhaustive enumeration on the interpreter ({index}/{total} {mode})"],
                           statistics=statistics(config, None, index, total, mode))
        q = readout_values(request, config, tokens)
        clash = _within_input_clash(config, q)
        if clash is not None:
            return refuted(request, config, "interpret", tokens, clash[0], tokens, clash[1], started,
                           statistics(config, None, index + 1, total, mode))
        seen.append(tokens)
        values.extend(q)
        if config.exempt and mode == "sequences":
            groups.append(multiset_ids.setdefault(tuple(sorted(tokens)), len(multiset_ids)))
        else:
            groups.append(index)
        request.tick(index + 1, total)
    result = scan_fractions(values, groups, n)
    stats = statistics(config, result, len(seen), total, mode)
    if result.gap is not None and config.gap_violates(result.gap):
        (a, i), (b, j) = result.pair
        return refuted(request, config, "interpret", seen[a], i, seen[b], j, started, stats)
    return Verdict(request.label, PROVED, "interpret", method="exhaustive",
                   detail=proved_detail(config, result, len(seen), mode),
                   seconds=time.perf_counter() - started, statistics=stats)


def _within_input_clash(config: Setup, q: list[Fraction]) -> tuple[int, int] | None:
    order = sorted(range(len(q)), key=q.__getitem__)
    for a, b in zip(order, order[1:]):
        if config.too_close(q[a], q[b]):
            return (a, b)
    return None


# ---------------------------------------------------------------- engine: enumerate (batched, exact int64)

KEY_MEMORY_LIMIT = 4 << 30  # bytes for the (value, group) keys kept for the final sort


def check_enumerate(request: CheckRequest) -> Verdict:
    """The exhaustive check on the batched evaluator: the same keys and scan as ``interpret``, int64 throughout.

    The evaluator proves int64 safety of every intermediate before it runs (else ``Unsupported``: unknown).
    """
    config = setup(request)
    if isinstance(config, Verdict):
        return config
    from ..engines.batched import BatchedEvaluator, Deadline, Unsupported, input_count, stream_outputs, unrank

    deadline = Deadline(request.timeout)
    started = deadline.start
    if config.equivariant and not config.exempt:
        witness = permutation_witness(config)
        if witness is not None:
            return refuted(request, config, "enumerate", *witness, started,
                           {"reason": "permutation-equivariant model: a permutation of L shares all of L's values"})
    domain, n = config.domain, config.domain.length
    order = "sorted" if config.equivariant and config.exempt else "all"
    mode = "multisets" if order == "sorted" else "sequences"
    tokens = domain.tokens
    total = input_count(domain, order)
    if 8 * total * (n + 1) * 2 > KEY_MEMORY_LIMIT:
        return Verdict(request.label, UNKNOWN, "enumerate", detail=f"{total} {mode}: too many keys to sort in memory",
                       tried=[f"enumerate: {total} {mode} × {n} keys exceed {KEY_MEMORY_LIMIT >> 30} GiB"],
                       statistics=statistics(config, None, 0, total, mode))
    try:
        evaluator = BatchedEvaluator(request.model, request.arithmetic, tokens, device=request.device)
        evaluator.check(n)
        layer = "readout" if config.readout is None else "output"
        numerators, groups, den, evaluated = [], [], 1, 0
        for chunk in stream_outputs(request.model, request.arithmetic, domain, layer=layer, order=order,
                                    evaluator=evaluator, progress=request.tick):
            if deadline.expired():
                return Verdict(request.label, UNKNOWN, "enumerate",
                               detail=f"timeout after {evaluated} of {total} {mode}",
                               seconds=deadline.elapsed(),
                               tried=[f"exhaustive batched enumeration ({evaluated}/{total} {mode})"],
                               statistics=statistics(config, None, evaluated, total, mode))
            values, den = _chunk_readout(config, chunk.values)
            clash = _first_row_clash(config, values, den)
            if clash is not None:
                row, i, j = clash
                found = rows_to_tokens(tokens, chunk.rows[row])
                return refuted(request, config, "enumerate", found, i, found, j, started,
                               statistics(config, None, evaluated + row + 1, total, mode))
            numerators.append(values.reshape(-1))
            groups.append(_groups(config, chunk, order, len(tokens)))
            evaluated = chunk.stop
    except Unsupported as exc:
        return Verdict(request.label, UNKNOWN, "enumerate", detail=str(exc), seconds=deadline.elapsed(),
                       tried=[f"enumerate: {exc}"])
    scaled = np.concatenate(numerators) if numerators else np.zeros(0, dtype=np.int64)
    result = scan_scaled(scaled, np.concatenate(groups) if groups else np.zeros(0, dtype=np.int64), n, den)
    stats = statistics(config, result, evaluated, total, mode)
    stats["backend"] = evaluator.describe()
    if result.gap is not None and config.gap_violates(result.gap):
        (a, i), (b, j) = result.pair
        distinct = domain.distinct_tokens
        rows = unrank(len(tokens), n, np.array([a, b], dtype=np.int64), distinct=distinct, order=order)
        return refuted(request, config, "enumerate", rows_to_tokens(tokens, rows[0]), i,
                       rows_to_tokens(tokens, rows[1]), j, started, stats)
    return Verdict(request.label, PROVED, "enumerate", method="exhaustive",
                   detail=proved_detail(config, result, evaluated, mode), seconds=deadline.elapsed(),
                   statistics=stats)


def rows_to_tokens(tokens: list, row) -> tuple:
    return tuple(tokens[int(t)] for t in row)


def _chunk_readout(config: Setup, values) -> tuple[np.ndarray, int]:
    """(B, n) exact numerators of q and their denominator (the model's readout, or u·z for the option's u)."""
    if config.readout is None:
        return np.asarray(values.numerators), values.den
    common = math.lcm(*(u.denominator for u in config.readout))
    weights = [int(u * common) for u in config.readout]
    stream = np.asarray(values.numerators)  # (B, n, d)
    bound = int(np.abs(stream).max(initial=0)) * sum(abs(w) for w in weights)
    if bound >= INT64_SAFE // 2:
        stream = stream.astype(object)  # exact Python integers where int64 could overflow
    q = sum(w * stream[..., c] for c, w in enumerate(weights) if w != 0)
    if isinstance(q, int):  # u = 0
        q = np.zeros(stream.shape[:2], dtype=np.int64)
    return q, values.den * common


def _first_row_clash(config: Setup, values: np.ndarray, den: int) -> tuple[int, int, int] | None:
    """Condition (1) within each input of the chunk: (row, i, j) of the first two positions too close."""
    if values.shape[1] < 2:
        return None
    order = np.argsort(values, axis=1, kind="stable")
    ordered = np.take_along_axis(values, order, axis=1)
    gaps = ordered[:, 1:] - ordered[:, :-1]
    if config.margin is None:
        bad = gaps == 0
    else:
        bad = gaps * config.margin.denominator < config.margin.numerator * den
    hits = np.argwhere(bad)
    if not len(hits):
        return None
    row, k = (int(x) for x in hits[0])
    return row, int(order[row, k]), int(order[row, k + 1])


def _groups(config: Setup, chunk, order: str, vocabulary: int) -> np.ndarray:
    """Per input: its multiset's code when permutations are exempt (sequences only), else its own index."""
    index = np.arange(chunk.start, chunk.stop, dtype=np.int64)
    if not config.exempt or order == "sorted":
        return index
    ordered = np.sort(chunk.rows, axis=1)
    n = ordered.shape[1]
    dtype = np.int64 if vocabulary ** n < INT64_SAFE else object  # object: exact Python integers
    return ordered.astype(dtype) @ np.array([vocabulary ** p for p in range(n)], dtype=dtype)


# ---------------------------------------------------------------- engine: smt (two-copy query)

def check_smt(request: CheckRequest) -> Verdict:
    """Condition (1) as a one-copy query, condition (2) as a two-copy query (two symbolic inputs, one model).

    Both unsat (the encoding is exact: verify_tf/engines/smt mirrors the interpreter) proves the property;
    a model of either is decoded, replayed on the interpreter and reported.
    """
    config = setup(request)
    if isinstance(config, Verdict):
        return config
    started = time.perf_counter()
    deadline = started + request.timeout
    if config.equivariant and not config.exempt:
        witness = permutation_witness(config)
        if witness is not None:
            return refuted(request, config, "smt", *witness, started, {"reason": "permutation-equivariant model: "
                           "a permutation of L shares all of L's values"}, method="by equivariance")
    try:
        from ..engines.smt.values import NotEncodable
    except ImportError as exc:  # the encoder package is optional at import time; say what is missing
        return Verdict(request.label, UNKNOWN, "smt", detail=f"SMT encoder unavailable: {exc}",
                       tried=["smt: encoder import failed"])
    tried: list[str] = []
    stats: dict = {"symmetry_breaking": _symmetry_breaking(config)}
    # the two-copy query first: on Lemma 6 it was usually the faster of the two (measured; z3's times vary a
    # lot); it gets 2/3 of the time, so that a timeout there still leaves time to find a counterexample to (1)
    queries = [("condition (2): two inputs", _two_copy_query),
               ("condition (1): one input, two positions", _one_copy_query)]
    if config.domain.length < 2:
        queries = queries[:1]
    for index, (name, build) in enumerate(queries):
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            tried.append(f"smt {name}: not started (timeout)")
            continue
        share = remaining if index == len(queries) - 1 else remaining * 2 / 3
        try:
            outcome = _solve(request, config, build, share, name)
        except NotEncodable as exc:
            tried.append(f"smt {name}: not encodable: {exc}")
            continue
        stats[name] = outcome.statistics
        if outcome.status == "sat":
            first, i, second, j = outcome.witness
            return refuted(request, config, "smt", first, i, second, j, started, stats, method="smt")
        if outcome.status != "unsat":
            tried.append(f"smt {name}: {outcome.reason} after {outcome.seconds:.1f} s")
    if tried:
        return _smt_unknown(request, started, tried, stats)
    return Verdict(request.label, PROVED, "smt", method="smt",
                   detail=f"all values {config.requirement()}: no violation exists (both queries unsat, "
                          f"{stats['symmetry_breaking']})",
                   seconds=time.perf_counter() - started, statistics=stats)


def _smt_unknown(request: CheckRequest, started: float, tried: list[str], stats: dict) -> Verdict:
    return Verdict(request.label, UNKNOWN, "smt", detail=tried[-1], seconds=time.perf_counter() - started,
                   tried=tried, statistics=stats)


def _symmetry_breaking(config: Setup) -> str:
    if config.equivariant:
        return "fix0: colliding positions moved to 0 (and 1), the rest sorted"
    return f"none: free (i, j), the model is not permutation-equivariant ({config.obstacle})"


@dataclass
class SolveOutcome:
    status: str  # sat | unsat | unknown
    seconds: float
    reason: str = ""
    witness: tuple | None = None  # (L, i, L', j) for sat
    statistics: dict = field(default_factory=dict)


def _solve(request: CheckRequest, config: Setup, build, seconds: float, name: str) -> SolveOutcome:
    import z3

    from ..engines.smt.values import Builder

    builder = Builder()
    start = time.perf_counter()
    goal, decode = build(request, config, builder)
    solver = z3.Solver()
    solver.set("timeout", max(1, int(seconds * 1000)))
    solver.set("random_seed", request.seed)
    solver.add(*builder.assertions)
    solver.add(goal)
    encoded = time.perf_counter() - start
    if request.smt2_dir is not None:
        request.smt2_dir.mkdir(parents=True, exist_ok=True)
        tag = "one-copy" if name.startswith("condition (1)") else "two-copy"
        path = request.smt2_dir / f"{_file_label(request.label)}-{tag}.smt2"
        path.write_text("(set-logic QF_LIA)\n" + solver.to_smt2(), encoding="utf-8")
    result = solver.check()
    elapsed = time.perf_counter() - start
    statistics = {"result": str(result), "encode_seconds": round(encoded, 3),
                  "solve_seconds": round(elapsed - encoded, 3), **builder.stats.as_dict()}
    if result == z3.sat:
        model = solver.model()
        return SolveOutcome("sat", elapsed, witness=decode(lambda term: model.eval(term, model_completion=True)),
                            statistics=statistics)
    if result == z3.unsat:
        return SolveOutcome("unsat", elapsed, statistics=statistics)
    return SolveOutcome("unknown", elapsed, reason=solver.reason_unknown(), statistics=statistics)


def _file_label(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in label)


def _symbolic_values(config: Setup, model: Model, arithmetic, inp, builder) -> list:
    from ..engines.smt.encoder import encode_model

    trace = encode_model(model, arithmetic, inp, builder)
    if config.readout is None:
        return list(trace.readout)
    return [builder.linear(list(zip(config.readout, z))) for z in trace.output]


def _too_close(config: Setup, builder, a, b):
    """|a − b| < margin (or a = b), linear: a − b = num/den, so compare num with margin·den."""
    import z3

    difference = builder.linear([(Fraction(1), a), (Fraction(-1), b)])
    if difference.is_const:
        return z3.BoolVal(config.gap_violates(abs(difference.value)))
    if config.margin is None:
        return difference.num == 0
    bound = config.margin * difference.den  # |num| · q < p with bound = p/q
    p, q = bound.numerator, bound.denominator
    return z3.And(difference.num * q < p, -difference.num * q < p)


def _token_codes(inp, domain: GridDomain) -> list:
    """One integer per position identifying its grid token (coordinate indices in base K)."""
    import z3

    K, d = len(domain.values), domain.dim
    terms = inp.index_terms
    return [z3.Sum([terms[p * d + c] * K**c for c in range(d)]) if d > 1 else terms[p] for p in range(domain.length)]


def _sorted_from(codes: list, start: int, strict: bool) -> list:
    return [(a < b) if strict else (a <= b) for a, b in zip(codes[start:], codes[start + 1:])]


def _claimed_pair(cases: dict, evaluate_term) -> tuple[int, int]:
    """The (i, j) whose closeness literal the solver's model makes true (the goal is their disjunction)."""
    import z3

    return next(pair for pair, literal in cases.items() if z3.is_true(evaluate_term(literal)))


def _one_copy_query(request: CheckRequest, config: Setup, builder):
    """Some input has two positions with values too close: condition (1) fails."""
    import z3

    from ..engines.smt.inputs import grid_input

    domain = config.domain
    inp = grid_input(domain, builder, name="x")
    q = _symbolic_values(config, request.model, request.arithmetic, inp, builder)
    n = domain.length
    if config.equivariant:
        # f(πL) = πf(L): move the two colliding positions to 0 and 1 and sort the others; every violation
        # has such an image, so fixing (i, j) = (0, 1) keeps the query complete (research notes, "fix0")
        builder.assertions.extend(_sorted_from(_token_codes(inp, domain), 2, domain.distinct_tokens))
        pairs = [(0, 1)]
    else:
        pairs = list(itertools.combinations(range(n), 2))
    cases = {pair: _too_close(config, builder, q[pair[0]], q[pair[1]]) for pair in pairs}

    def decode(evaluate_term):
        tokens = inp.decode(lambda v: evaluate_term(v).as_long())
        i, j = _claimed_pair(cases, evaluate_term)
        return tokens, i, tokens, j

    return z3.Or(list(cases.values())), decode


def _two_copy_query(request: CheckRequest, config: Setup, builder):
    """Two inputs L ≠ L′ (not permutations of each other when exempt) with q(L)_i too close to q(L′)_j."""
    import z3

    from ..engines.smt.inputs import grid_input

    domain = config.domain
    n = domain.length
    first = grid_input(domain, builder, name="x")
    second = grid_input(domain, builder, name="y")
    q1 = _symbolic_values(config, request.model, request.arithmetic, first, builder)
    q2 = _symbolic_values(config, request.model, request.arithmetic, second, builder)
    c1, c2 = _token_codes(first, domain), _token_codes(second, domain)
    if config.exempt:
        # not a permutation ⇔ some token w occurs a different number of times (linear, O(n) per token)
        w = builder.fresh_int("w", 0, len(domain.values) ** domain.dim - 1)
        count = lambda codes: z3.Sum([z3.If(c == w, 1, 0) for c in codes])  # noqa: E731
        builder.assertions.append(count(c1) != count(c2))
    else:
        builder.assertions.append(z3.Or([a != b for a, b in zip(c1, c2)]))
    if config.equivariant and config.exempt:
        # fix0 (equivariance checked in setup): permute L so that i moves to 0 and sort positions 1..n-1,
        # the same for L′; the images are still non-permutations of each other, so (i, j) = (0, 0) is complete
        builder.assertions.extend(_sorted_from(c1, 1, domain.distinct_tokens))
        builder.assertions.extend(_sorted_from(c2, 1, domain.distinct_tokens))
        pairs = [(0, 0)]
    else:
        pairs = [(i, j) for i in range(n) for j in range(n)]
    cases = {pair: _too_close(config, builder, q1[pair[0]], q2[pair[1]]) for pair in pairs}

    def decode(evaluate_term):
        i, j = _claimed_pair(cases, evaluate_term)
        value_of = lambda v: evaluate_term(v).as_long()  # noqa: E731
        return first.decode(value_of), i, second.decode(value_of), j

    return z3.Or(list(cases.values())), decode


# ---------------------------------------------------------------- engine choice (auto)

QUICK = 0.5  # seconds: below this predicted interpreter time nothing else is worth compiling


def choose_engine(request: CheckRequest) -> str:
    """The engine predicted to finish first, from measured rates on this machine.

    Exhaustive enumeration decides every instance it can finish in time, and on every instance we measured
    (docs/contextual-mapping.md) it beat SMT by orders of magnitude wherever it finished: SMT is chosen only
    when neither exhaustive engine is predicted to finish within the timeout (it may still find a
    counterexample there). Between the two exhaustive engines: the interpreter's time per input (timed on two
    inputs) against the batched evaluator's measured throughput, when the latter can run the model in int64.
    """
    config = setup(request)
    if isinstance(config, Verdict) or (config.equivariant and not config.exempt):
        return "interpret"  # the error, or the immediate permutation counterexample
    inputs, total, _ = domain_inputs(config)
    start = time.perf_counter()
    sampled = 0
    for tokens in itertools.islice(inputs, 2):
        readout_values(request, config, tokens)
        sampled += 1
    interpret_seconds = (time.perf_counter() - start) / max(sampled, 1) * total
    if interpret_seconds <= QUICK:
        return "interpret"
    enumerate_seconds = _predicted_enumeration_seconds(request, config, total)
    best, seconds = min((("interpret", interpret_seconds), ("enumerate", enumerate_seconds)), key=lambda e: e[1])
    return best if seconds <= request.timeout else "smt"


def _predicted_enumeration_seconds(request: CheckRequest, config: Setup, total: int) -> float:
    from ..engines.batched import BatchedEvaluator, Unsupported, estimate_throughput

    try:
        evaluator = BatchedEvaluator(request.model, request.arithmetic, config.domain.tokens, device=request.device)
        evaluator.check(config.domain.length)
        return total / estimate_throughput(evaluator, config.domain.length)
    except Unsupported:
        return math.inf


ENGINES = {"interpret": check_interpret, "enumerate": check_enumerate, "smt": check_smt}

PROPERTY = PropertyDef(
    name="contextual-mapping",
    summary="Yun et al. Def 3.1: the readout values of every input are distinct, and differ from every value "
            "of every other input (optionally at least a margin apart; permutations optionally exempt)",
    options=OPTIONS,
    engines=("interpret", "enumerate", "smt"),
    run=lambda request: ENGINES[request.engine](request),
    choose_engine=choose_engine,
)

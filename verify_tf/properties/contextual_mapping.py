"""Property ``contextual-mapping`` (Yun et al., ICLR 2020, Definition 3.1) on a grid domain.

With q(L) = (u·z_1, ..., u·z_n) the readout of the model's final stream on input L, the property holds when
  (1) for every input L the n values of q(L) are pairwise distinct, and
  (2) for any two inputs L ≠ L′ every value of q(L) differs from every value of q(L′).
Options: ``readout`` (u, default the model's readout), ``margin`` m (all those values at least m apart
instead of merely distinct), ``exempt-permutations`` (pairs where L′ is a permutation of L are exempt from
(2): Yun's setting for models without positions, used with ``domain.distinct-tokens: true``, i.e. G̃_δ).

Engine ``interpret`` (exhaustive): evaluate every input on the reference interpreter, scale all values by
their common denominator to exact integers, sort the (value, input, position) keys and compare each key with
its nearest non-exempt neighbour. For exactly permutation-equivariant models (decided from the IR) only
sorted multisets are evaluated: the values of a permutation πL are q(L) permuted, so they add nothing.

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
            started: float, statistics: dict) -> Verdict:
    witness = replay(request, config, first, i, second, j)
    return Verdict(request.label, REFUTED, engine, method="exhaustive", detail=witness["summary"],
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


PROPERTY = PropertyDef(
    name="contextual-mapping",
    summary="Yun et al. Def 3.1: the readout values of every input are distinct, and differ from every value "
            "of every other input (optionally at least a margin apart; permutations optionally exempt)",
    options=OPTIONS,
    engines=("interpret",),
    run=check_interpret,
)

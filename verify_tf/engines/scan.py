"""Exhaustive scans shared by the ``interpret`` and ``enumerate`` drivers (which differ only in how one chunk
of inputs is evaluated): chunk the input space into work units, merge their results in order, replay the
least violation on the interpreter, minimise, and assemble the verdict.

Two forms of property are scanned:

* **each input** (``EachInput``): a unit reports the first violating index of its chunk; the least index over
  all chunks wins (units after it are cancelled, units before it still finish), so the reported input is the
  first in the space's order whichever executor ran the units;
* **distinct values** (``DistinctValues``, contextual mapping): units return every value of their inputs as
  exact integers over one denominator, sorted into a run (``engines.runs``), with a group code per input
  (inputs of one group are exempt from being compared); the driver keeps the runs within a memory budget
  (spilling the rest to a temporary folder), merges them k ways and compares each key of the merged stream
  with its nearest non-exempt neighbours. Memory stays bounded whatever the number of values.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from ..contract import CertifiedOutputs, DistinctValues, EachInput, Task, capability
from ..numbers import fmt
from ..spaces import LIMIT, InputSpace
from ..verdict import Evidence, Verdict
from ..work import CONTINUE, STOP, STOP_AFTER, ChunkUnits, WorkUnit, schedule
from .base import Merge, ProgressEvent, Proof, Run, replayed

if TYPE_CHECKING:  # the sorted runs of a distinct-values scan: engines.runs, imported by the functions using them
    from .runs import Closest, RunStore, SortedRun

SCAN_MEMORY = 256 << 20  # bytes of sorted runs held in memory before they are spilled to disk

# ---------------------------------------------------------------- each input


@dataclass
class ChunkResult:
    """What one unit found in inputs [start, stop) of the space."""

    start: int
    stop: int
    checked: int  # inputs examined (stop - start unless stopped early)
    violation: int | None = None  # index (in the space) of the first violating input
    claim: str = ""  # what the engine saw there (for a ReplayMismatch)
    stopped: str = ""  # "timeout" | "cancelled" when the unit gave up early
    measures: dict[str, tuple[Fraction, int]] = field(default_factory=dict)  # name -> (extreme, input index)
    note: str = ""
    digests: list[Any] = field(default_factory=list)  # with --certify: (start, stop, outputs_digest) per piece


def certified_outputs(task: Task, rows: Any) -> tuple[Any, int] | None:
    """What a certificate digests for ``rows`` when the property certifies its own reading of the model
    (``CertifiedOutputs``); None: the readout."""
    prop = task.prop
    return prop.certified_outputs(task, rows) if isinstance(prop, CertifiedOutputs) else None


def outputs_digest(numerators: Any, den: int) -> str:
    """A canonical sha256 of exact values ``numerators / den`` (one row per input, in input order).

    Canonical whoever computed them: the fraction is reduced first (a batched evaluator's fixed denominator and
    the interpreter's least common denominator give the same digest), values fitting int64 are hashed as
    little-endian bytes, larger ones as decimal text.
    """
    rows = np.asarray(numerators, dtype=object) if not isinstance(numerators, np.ndarray) else numerators
    flat = [int(v) for v in rows.reshape(-1)] if rows.dtype == object else None
    common = (
        math.gcd(den, *flat)
        if flat is not None
        else math.gcd(den, int(np.gcd.reduce(rows.reshape(-1))) if rows.size else 0)
    )
    common = common or 1
    digest = hashlib.sha256(f"{den // common};{rows.shape}".encode())
    if flat is None:
        digest.update((rows // common).astype("<i8").tobytes())
    elif all(-(1 << 63) <= v < (1 << 63) for v in flat):
        digest.update(np.array([v // common for v in flat], dtype="<i8").tobytes())
    else:
        digest.update(",".join(str(v // common) for v in flat).encode())
    return digest.hexdigest()


def fractions_digest(rows: list[list[Fraction]]) -> str:
    """``outputs_digest`` of exact Fractions (the interpreter's values), one list per input. Rows of different
    lengths (inputs of several lengths): the digest of the digests of each run of equal-length rows."""
    if len({len(row) for row in rows}) > 1:
        runs = [list(group) for _, group in itertools.groupby(rows, key=len)]
        return hashlib.sha256("".join(fractions_digest(run) + "\n" for run in runs).encode()).hexdigest()
    den = math.lcm(*(v.denominator for row in rows for v in row)) if rows and rows[0] else 1
    numerators = np.empty((len(rows), len(rows[0]) if rows else 0), dtype=object)
    for k, row in enumerate(rows):
        for i, v in enumerate(row):
            numerators[k, i] = v.numerator * (den // v.denominator)
    return outputs_digest(numerators, den)


def combined_digest(chunks: list[tuple[int, int, str]]) -> str:
    """One digest over the chunk digests of a whole space, in input order."""
    return hashlib.sha256("".join(f"{a}-{b}:{d}\n" for a, b, d in sorted(chunks)).encode()).hexdigest()


def fold_measures(
    kinds: dict[str, str], into: dict[str, tuple[Fraction, int]], found: dict[str, tuple[Fraction, int]]
) -> None:
    """Keep the extreme (``kinds[name]`` is "max" or "min") of each named measure, the earliest on ties."""
    for name, (value, index) in found.items():
        best = into.get(name)
        if (
            best is None
            or (value > best[0] if kinds[name] == "max" else value < best[0])
            or (value == best[0] and index < best[1])
        ):
            into[name] = (value, index)


def chunk_size(total: int, workers: int, *, smallest: int, largest: int) -> int:
    """Enough units to balance the workers and show progress (about 64 per worker), within [smallest, largest]."""
    return max(smallest, min(largest, math.ceil(total / (64 * max(1, workers)))))


def first_violation(
    task: Task,
    run: Run,
    space: InputSpace,
    engine: str,
    evaluate_chunk: Callable[..., Any],
    size: int,
    extra: tuple[Any, ...] = (),
) -> tuple[ChunkResult | None, dict[str, Any], Any, Evidence | None]:
    """Scan ``space`` in chunks of ``size``; (the least violating chunk result or None, statistics, schedule,
    with ``--certify`` and a complete scan the evidence: every chunk's outputs digest).

    ``evaluate_chunk(task, space, start, stop, *extra, deadline=, cancelled=) -> ChunkResult`` is the engine's
    unit function (module-level, so it can run in other processes).
    """
    total = space.count()
    prop = capability(task.prop, EachInput)
    kinds = prop.measure_kinds(task)
    # a property whose claim is about a measure (position-blind's ε) is refuted with the input where the
    # measure is extreme, so the whole space is scanned; every other property stops at the least violation
    by_measure = prop.witness_measure
    units = ChunkUnits(
        total,
        size,
        lambda i, a, b: WorkUnit(
            f"{engine}: inputs {a}..{b - 1}", evaluate_chunk, (task, space, a, b, *extra), order=i, weight=b - a
        ),
    )
    done = 0
    best: ChunkResult | None = None
    incomplete: list[str] = []
    measures: dict[str, tuple[Fraction, int]] = {}
    chunks: list[tuple[int, int, str]] = []

    covered: list[tuple[int, int]] = []  # the inputs examined, as ranges (units may finish out of order)

    def on_result(unit: WorkUnit, result: ChunkResult) -> str:
        nonlocal done, best
        done += result.checked
        covered.append((result.start, result.start + result.checked))
        chunks.extend(tuple(piece) for piece in result.digests)
        run.progress(ProgressEvent(engine, f"{engine}: {space.describe()}", done, total, "inputs"))
        fold_measures(kinds, measures, result.measures)
        if result.violation is not None:
            if best is None or best.violation is None or result.violation < best.violation:
                best = result
            if by_measure is None:
                return STOP_AFTER
        if result.stopped:
            incomplete.append(f"inputs {result.start + result.checked}..{result.stop - 1} ({result.stopped})")
        return CONTINUE

    summary = schedule(run.executor, units, run.deadline, on_result)
    if best is not None and by_measure is not None and by_measure in measures:
        index = measures[by_measure][1]
        best = ChunkResult(index, index + 1, 1, violation=index, claim=f"the largest {by_measure}")
    stats = {
        "inputs_checked": done,
        "space_size": total,
        "space": space.describe(),
        "units": len(units),
        "executor": run.executor.name,
        **task.prop.statistics(task),
    }
    stats.update(examined_prefix(space, covered))
    for name, (value, index) in measures.items():
        stats[name] = str(value)
        stats[f"{name}_at"] = index
    if summary.errors:
        stats["unit_errors"] = [f"{e.key}: {e.message}" for e in summary.errors]
    complete = (
        best is None
        and not summary.errors
        and not incomplete
        and not summary.expired
        and not summary.not_started
        and not summary.cancelled
    )
    stats["complete"] = complete
    evidence = exhaustive_evidence(chunks) if task.settings.certify and complete else None
    return best, stats, summary, evidence


def examined_prefix(space: InputSpace, covered: list[tuple[int, int]]) -> dict[str, Any]:
    """How far the space was examined *in its order*: ``inputs_in_order``, the largest p with every input of
    [0, p) examined, and, for a space of several lengths, ``every_input_up_to_length``, the longest length whose
    inputs (and all shorter ones) lie in that prefix (None: not even the shortest)."""
    prefix = 0
    for a, b in sorted(covered):
        if a > prefix:
            break
        prefix = max(prefix, b)
    out: dict[str, Any] = {"inputs_in_order": prefix}
    segments = space.segments()
    if len(segments) > 1:
        done = [s.length for s in segments if s.offset + s.count <= prefix]
        out["every_input_up_to_length"] = (
            done[-1] if done and done == [s.length for s in segments][: len(done)] else None
        )
    return out


def exhaustive_evidence(chunks: list[tuple[int, int, str]]) -> Evidence:
    """What an exhaustive proof keeps for its certificate: each chunk's digest and their combined digest."""
    return Evidence("exhaustive", chunks=sorted(chunks), outputs_sha256=combined_digest(chunks))


def check_each_input(
    task: Task,
    run: Run,
    engine: str,
    evaluate_chunk: Callable[..., Any],
    size: int,
    extra: tuple[Any, ...] = (),
    method: str = "exhaustive",
) -> Verdict:
    """The exhaustive verdict for an ``EachInput`` property: proved only when every input was examined."""
    prop = capability(task.prop, EachInput)
    for tokens in prop.candidates(task):
        witness = prop.violation(task, tokens)
        if witness is not None:
            merge = Merge(task, run, engine, {"candidate": True})
            merge.refute(witness, "candidate")
            return merge.verdict()
    space = prop.input_space(task)
    if space.count() > LIMIT:
        return too_large(task, run, engine, space)
    found, stats, summary, evidence = first_violation(task, run, space, engine, evaluate_chunk, size, extra)
    merge = Merge(task, run, engine, stats)
    if found is not None and found.violation is not None:
        tokens = space.decode(space.rows(found.violation, found.violation + 1)[0][0])
        witness = replayed(task, tokens, found.claim or f"a violation at input {found.violation}")
        merge.refute(minimise(task, run, engine, evaluate_chunk, size, extra, witness, stats), method)
    merge.absorb(summary)
    if not stats["complete"]:
        what = f"{stats['inputs_checked']} of {stats['space_size']} inputs examined, no violation so far"
        if stats.get("every_input_up_to_length") is not None:
            what += f"; every input up to length {stats['every_input_up_to_length']} examined"
        merge.undecided(f"timeout: {what}", [f"exhaustive {engine}: {what} ({summary.describe()})"])
    default = (
        f"all {stats['space_size']} inputs" if space.order == "all" and space.only_lengths is None else space.describe()
    )
    return merge.verdict(Proof(default, evaluated=stats["space_size"]), method, evidence)


def too_large(task: Task, run: Run, engine: str, space: InputSpace) -> Verdict:
    """``unknown`` for a space beyond int64 numbering (2^62 inputs): no scan could finish it, so none starts; not a
    failed unit (``error``), which is what the first unit's unranking raised before."""
    what = f"{space.count():.3g} inputs, more than 2^62: too many to number in int64, far too many to enumerate"
    hint = "an engine that does not enumerate (if the property has one) or a smaller domain"
    merge = Merge(task, run, engine, {"space_size": space.count()})
    return merge.unknown(f"not enumerable: {what}; try {hint}", [f"exhaustive {engine}: {what}"])


def minimise(
    task: Task,
    run: Run,
    engine: str,
    evaluate_chunk: Callable[..., Any],
    size: int,
    extra: tuple[Any, ...],
    witness: dict[str, Any],
    stats: dict[str, Any],
) -> dict[str, Any]:
    """The least witness: scan the inputs the property says come before this one (``preceding``), if any."""
    space = capability(task.prop, EachInput).preceding(task, witness)
    if space is None or space.count() == 0 or run.deadline.expired():
        return witness
    found, inner, _, _ = first_violation(task, run, space, engine, evaluate_chunk, size, extra)
    stats["minimisation"] = {
        "space": space.describe(),
        "inputs_checked": inner["inputs_checked"],
        "complete": inner["complete"] or found is not None,
    }
    if found is None or found.violation is None:
        return witness
    tokens = space.decode(space.rows(found.violation, found.violation + 1)[0][0])
    return replayed(task, tokens, found.claim or "a smaller violation")


# ---------------------------------------------------------------- distinct values


@dataclass
class ValuesResult:
    """Every value of inputs [start, stop), sorted into a run: value = key / den (``engines.runs``)."""

    start: int
    stop: int
    run: SortedRun | None
    clash: tuple[int, int, int] | None = None  # (input index, i, j): two positions of one input too close
    stopped: str = ""
    digest: str = ""  # with --certify: outputs_digest of the chunk's values, in input order

    @staticmethod
    def of(start: int, stop: int, numerators: Any, den: int, groups: Any, certify: bool = False) -> ValuesResult:
        """``numerators[k, i] / den`` is q(x_{start+k})_i ((B, n) int64 or Python integers); ``groups``: (B,)
        codes (inputs with equal codes are exempt from each other) or None (nothing exempt)."""
        from .runs import sorted_run

        return ValuesResult(
            start,
            stop,
            sorted_run(np.asarray(numerators), den, start, groups),
            digest=outputs_digest(numerators, den) if certify else "",
        )


INT64_SAFE = 1 << 62


def closest_pair(scaled: np.ndarray, groups: np.ndarray, n: int, denominator: int) -> Closest:
    """Closest pair of keys k = input*n + position that is not exempt.

    ``scaled``: the values times ``denominator`` (exact integers, int64 or Python ints in an object array).
    Keys of two different inputs in the same group are exempt (permutations of each other); keys of one input
    never are. Sorted order makes the first non-exempt key after key i its closest partner above it, so each
    key is compared with keys at offsets 1, 2, ... until it meets a non-exempt one or the offset can no longer
    beat the best gap found.
    """
    from .runs import Closest

    count = len(scaled)
    if count == 0:
        return Closest(None, None, None, None, 0)
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
    if best_pair is None or best_gap is None:
        return Closest(None, None, smallest, largest, count)
    (a, b) = best_pair
    return Closest(Fraction(int(best_gap), denominator), ((a // n, a % n), (b // n, b % n)), smallest, largest, count)


def multiset_codes(rows: np.ndarray, vocabulary: int) -> np.ndarray:
    """One code per row, equal exactly for rows that are permutations of each other."""
    ordered = np.sort(rows, axis=1)
    n = ordered.shape[1]
    dtype = np.int64 if vocabulary**n < INT64_SAFE else object  # object: exact Python integers
    codes: np.ndarray = ordered.astype(dtype) @ np.array([vocabulary**p for p in range(n)], dtype=dtype)
    return codes


def check_distinct_values(
    task: Task,
    run: Run,
    engine: str,
    values_chunk: Callable[..., Any],
    size: int,
    extra: tuple[Any, ...] = (),
    memory: int | None = None,
) -> Verdict:
    """The exhaustive verdict for a ``DistinctValues`` property: sorted runs, a k-way merge, one closest-pair
    pass, within ``memory`` bytes of runs (default ``SCAN_MEMORY``; the rest is spilled to disk)."""
    memory = (task.settings.memory or SCAN_MEMORY) if memory is None else memory
    prop = capability(task.prop, DistinctValues)
    for first, i, second, j in prop.candidate_pairs(task):
        merge = Merge(
            task, run, engine, {"reason": "permutation-equivariant model: a permutation of L shares all of L's values"}
        )
        merge.refute(prop.pair_witness(task, first, i, second, j), "by equivariance")
        return merge.verdict()
    space = prop.input_space(task)
    total = space.count()
    if total > LIMIT:
        return too_large(task, run, engine, space)
    if len(space.lengths) > 1:
        raise ValueError("the distinct-values scan needs a single input length")
    from .runs import RunStore

    with RunStore(memory, task.settings.spill_dir) as store:
        merge, digests = _values_into(store, task, run, engine, space, values_chunk, size, extra)
        if merge.settled:
            return merge.verdict()
        found = _closest_pair_of(store, space, run, memory, merge)
        if found is None:
            return merge.verdict()
        stats = merge.statistics
        stats["runs"] = len(store.in_memory) + len(store.spilled)
        if store.spilled:
            stats["spilled_bytes"] = store.spilled_bytes
    if found.smallest is not None:
        stats.update(
            {
                "min_q": str(found.smallest),
                "max_q": str(found.largest),
                "keys": found.keys,
                "smallest_gap": None if found.gap is None else str(found.gap),
            }
        )
    if found.gap is not None and found.pair is not None and prop.too_close(task, found.gap):
        (a, i), (b, j) = found.pair
        rows = space.rows(a, a + 1)[0][0], space.rows(b, b + 1)[0][0]
        merge.refute(prop.pair_witness(task, space.decode(rows[0]), i, space.decode(rows[1]), j), "exhaustive")
    gap = "no two values to compare" if found.gap is None else f"smallest gap {fmt(found.gap)}"
    span = (
        ""
        if found.smallest is None or found.largest is None
        else f", q in [{fmt(found.smallest)}, {fmt(found.largest)}]"
    )
    default = f"all values {prop.requirement(task)}: {gap}{span} ({total} {_noun(space)} evaluated)"
    evidence = exhaustive_evidence(digests) if task.settings.certify else None
    return merge.verdict(Proof(default, evaluated=total), "exhaustive", evidence)


def _values_into(
    store: RunStore,
    task: Task,
    run: Run,
    engine: str,
    space: InputSpace,
    values_chunk: Callable[..., Any],
    size: int,
    extra: tuple[Any, ...],
) -> tuple[Merge, list[tuple[int, int, str]]]:
    """Every chunk's values as a sorted run in ``store``: the merge so far (a clash within one input refutes),
    and with --certify each chunk's (start, stop, outputs_digest)."""
    total = space.count()
    units = ChunkUnits(
        total,
        size,
        lambda k, a, b: WorkUnit(
            f"{engine}: inputs {a}..{b - 1}", values_chunk, (task, space, a, b, *extra), order=k, weight=b - a
        ),
    )
    clashes: list[tuple[int, int, int]] = []
    digests: list[tuple[int, int, str]] = []
    done = 0

    def on_result(unit: WorkUnit, result: ValuesResult) -> str:
        nonlocal done
        if result.clash is not None:
            clashes.append(result.clash)
            return STOP_AFTER
        if result.stopped or result.run is None:
            return STOP
        store.add(result.run)
        digests.append((result.start, result.stop, result.digest))
        done += result.stop - result.start
        run.progress(ProgressEvent(engine, f"{engine}: {space.describe()}", done, total, "inputs"))
        return CONTINUE

    summary = schedule(run.executor, units, run.deadline, on_result)
    stats: dict[str, Any] = {
        "inputs_evaluated": done,
        "space": space.describe(),
        "space_size": total,
        "units": len(units),
        "executor": run.executor.name,
        **task.prop.statistics(task),
    }
    merge = Merge(task, run, engine, stats)
    if clashes:
        row, i, j = min(clashes)
        x = space.decode(space.rows(row, row + 1)[0][0])
        merge.refute(capability(task.prop, DistinctValues).pair_witness(task, x, i, x, j), "exhaustive")
    merge.absorb(summary)
    if done < total:
        what = f"{done} of {total} inputs evaluated"
        merge.undecided(f"timeout: {what}", [f"exhaustive {engine}: {what} ({summary.describe()})"])
    return merge, digests


def _closest_pair_of(store: RunStore, space: InputSpace, run: Run, memory: int, merge: Merge) -> Closest | None:
    """The closest non-exempt pair of the store's values (one k-way merge); None when the deadline passes first
    (``merge`` then says how far the comparison got)."""
    n = max(space.lengths) if space.lengths else 0
    den = math.lcm(*store.dens) if store.dens else 1
    from .runs import ClosestPair, merged

    closest = ClosestPair(n)
    for block in merged(store, max(1 << 20, memory // 4)):
        if run.deadline.expired():
            what = f"all {space.count()} inputs evaluated, {closest.keys} of {store.keys} values compared"
            merge.undecided(f"timeout: {what}", [f"exhaustive {merge.engine}: {what}"])
            return None
        closest.add(block)
    return closest.result(den)


def _noun(space: InputSpace) -> str:
    return {"all": "inputs", "sorted": "multisets", "constant": "constant inputs"}[space.order]


def within_input_clash(task: Task, q: list[Fraction]) -> tuple[int, int] | None:
    """Condition (1) on one input: two positions whose values are too close (in position order)."""
    order = sorted(range(len(q)), key=q.__getitem__)
    for a, b in itertools.pairwise(order):
        if capability(task.prop, DistinctValues).too_close(task, abs(q[a] - q[b])):
            return a, b
    return None


def groups_for(task: Task, space: InputSpace, start: int, rows: np.ndarray) -> np.ndarray | None:
    """Per input: its multiset's code when permutations are exempt and the space lists sequences, else None
    (every input its own group: nothing is exempt)."""
    if capability(task.prop, DistinctValues).exempt_pairs(task) and space.order == "all":
        return multiset_codes(rows, len(space.tokens))
    return None

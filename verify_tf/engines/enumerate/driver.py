"""The driver of engine ``enumerate`` (what the engine does: its card, ``__init__.py``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from ...batched import Unsupported
from ...contract import Batched, DistinctValues, EachInput, PrefixTree, Task, capability
from ...spaces import InputSpace
from ...verdict import Verdict
from ...work import Deadline
from ..base import Merge, Run
from ..evaluators import CompiledEvaluators, batch_rows
from ..scan import (
    ChunkResult,
    ValuesResult,
    certified_outputs,
    check_distinct_values,
    check_each_input,
    chunk_size,
    fold_measures,
    groups_for,
    outputs_digest,
)

ENGINE = "enumerate"


def _prefix_scan(task: Task, run: Run) -> Verdict | str:
    """The prefix-tree scan's verdict when it applies (a causal model on the words of a language: each prefix
    evaluated once), else why not ("" when it does not apply, the reason when the batched evaluator refused)."""
    from . import prefix_scan

    if not prefix_scan.applies(task):
        return ""
    try:
        return prefix_scan.check(task, run)
    except Unsupported as exc:
        return str(exc)


def check(task: Task, run: Run) -> Verdict:
    # the prefix-tree scan, imported only for a property that offers it (start-up)
    tried = _prefix_scan(task, run) if isinstance(task.prop, PrefixTree) else ""
    if not isinstance(tried, str):
        return tried
    refused = tried
    space = task.prop.input_space(task)
    own = batch_rows(task) is not None  # the property evaluates its batches itself
    prop = task.prop
    try:
        evaluators = CompiledEvaluators(task, space)
        for length in space.lengths if not own else ():
            if isinstance(prop, Batched):
                prop.batched_check(task, evaluators, length)
            else:
                evaluators.of().check(length)
    except Unsupported as exc:
        return Merge(task, run, ENGINE).unknown(
            f"not evaluable exactly by the batched evaluator: {exc}", [f"enumerate: {exc}"]
        )
    # units of at least 8192 inputs: a deep model pays its per-step overhead once per sub-chunk of a unit
    size = chunk_size(space.count(), run.executor.workers, smallest=8192, largest=1 << 20)
    if isinstance(prop, DistinctValues):
        verdict = check_distinct_values(task, run, ENGINE, values_chunk, size)
    else:
        verdict = check_each_input(task, run, ENGINE, violation_chunk, size)
    if not own:
        verdict.statistics.update(widths(evaluators, space))
    if refused:
        verdict.statistics["prefix_tree_refused"] = refused
    return verdict


def widths(evaluators: CompiledEvaluators, space: InputSpace) -> dict[str, Any]:
    """How wide the exact integers had to be: proven int64 on the whole domain, or checked per chunk."""
    evaluator = evaluators.of()
    programs = [evaluator.program(n) for n in space.lengths]
    stats = {
        "backend": evaluator.describe(),
        "widest_step_bits": max((p.steps_bits for p in programs), default=0),
        "static_int64": not any(p.guarded for p in programs),
    }
    if any(p.tie_free for p in programs):
        stats["tie_free"] = True
    if evaluator.wide_steps:  # in this process (the in-process executor): steps that ran on Python integers
        stats["wide_steps"] = evaluator.wide_steps
    if evaluator.fallback_rows:
        stats["tie_fallback_rows"] = evaluator.fallback_rows
    return stats


def violation_chunk(
    task: Task,
    space: InputSpace,
    start: int,
    stop: int,
    *,
    deadline: Deadline,
    cancelled: Callable[[], bool],
    report: Callable[[str], None],
) -> ChunkResult:
    """The first input of [start, stop) the property's batched check flags (a work unit)."""
    prop = capability(task.prop, Batched)
    kinds = capability(task.prop, EachInput).measure_kinds(task)
    whole = capability(task.prop, EachInput).witness_measure is not None  # refuted at the extreme: every input
    evaluators = CompiledEvaluators(task, space)
    measures: dict[str, tuple[Fraction, int]] = {}
    size = min(evaluators.chunk_size(n) for n in space.lengths) if space.lengths else 1
    checked, first = 0, None
    digests: list[tuple[int, int, str]] = []  # with --certify: the readout of every input, for the certificate
    for piece in space.chunks(size, start, stop):
        if deadline.expired() or cancelled():
            return ChunkResult(
                start,
                stop,
                checked,
                violation=first,
                stopped="timeout" if deadline.expired() else "cancelled",
                measures=measures,
            )
        flagged, found = prop.batched_violations(task, evaluators, piece.rows)
        if task.settings.certify:  # the readout, or what the property certifies instead (its reading of the model)
            own = certified_outputs(task, piece.rows)
            if own is None:
                readout = evaluators.of().values(piece.rows, "readout")
                own = (readout.numerators, readout.den)
            digests.append((piece.start, piece.stop, outputs_digest(*own)))
        for name, (numerators, den) in found.items():
            pick = int(np.argmax(numerators) if kinds[name] == "max" else np.argmin(numerators))
            fold_measures(kinds, measures, {name: (Fraction(int(numerators[pick]), den), piece.start + pick)})
        hits = np.flatnonzero(flagged)
        if len(hits) and first is None:
            row = int(hits[0])
            first = piece.start + row
            if not whole:
                return ChunkResult(
                    start,
                    stop,
                    checked + row + 1,
                    violation=first,
                    claim="the batched evaluator flags a violation",
                    measures=measures,
                )
        checked += piece.stop - piece.start
    return ChunkResult(start, stop, checked, violation=first, measures=measures, digests=digests)


def values_chunk(
    task: Task,
    space: InputSpace,
    start: int,
    stop: int,
    *,
    deadline: Deadline,
    cancelled: Callable[[], bool],
    report: Callable[[str], None],
) -> ValuesResult:
    """Every value of inputs [start, stop), exact integers over one denominator, as a sorted run (a work unit)."""
    prop = capability(task.prop, DistinctValues)
    evaluators = CompiledEvaluators(task, space)
    size = min(evaluators.chunk_size(n) for n in space.lengths)
    numerators, groups, dens = [], [], []
    for piece in space.chunks(size, start, stop):
        if deadline.expired() or cancelled():
            return ValuesResult(start, stop, None, stopped="timeout")
        values, den = prop.batched_values(task, evaluators, piece.rows)
        clash = prop.batched_clash(task, values, den)
        if clash is not None:
            row, i, j = clash
            return ValuesResult(start, stop, None, clash=(piece.start + row, i, j))
        numerators.append(np.asarray(values))
        dens.append(den)
        groups.append(groups_for(task, space, piece.start, piece.rows))
    if not numerators:
        return ValuesResult.of(
            start,
            stop,
            np.zeros((0, max(space.lengths, default=0)), dtype=np.int64),
            1,
            None,
            certify=task.settings.certify,
        )
    common = math.lcm(*dens)  # a tie-free program's fallback rows may refine one chunk's denominator
    assert all(g is not None for g in groups) or all(g is None for g in groups)
    scaled = [v if d == common else v.astype(object) * (common // d) for v, d in zip(numerators, dens)]
    joined = (
        np.concatenate(scaled)
        if all(v.dtype != object for v in scaled)
        else np.concatenate([v.astype(object) for v in scaled])
    )
    group = None
    present = [g for g in groups if g is not None]
    if present:
        group = (
            np.concatenate(present)
            if all(g.dtype != object for g in present)
            else np.concatenate([g.astype(object) for g in present])
        )
    return ValuesResult.of(start, stop, joined, common, group, certify=task.settings.certify)

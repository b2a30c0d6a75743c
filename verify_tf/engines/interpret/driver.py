"""The driver of engine ``interpret`` (what the engine does: its card, ``__init__.py``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from ...contract import DistinctValues, EachInput, Task, capability
from ...semantics import evaluate
from ...spaces import InputSpace
from ...verdict import Verdict
from ...work import Deadline
from ..base import Run
from ..scan import (
    ChunkResult,
    ValuesResult,
    certified_outputs,
    check_distinct_values,
    check_each_input,
    chunk_size,
    fold_measures,
    fractions_digest,
    groups_for,
    within_input_clash,
)

ENGINE = "interpret"


def check(task: Task, run: Run) -> Verdict:
    space = task.prop.input_space(task)
    size = chunk_size(space.count(), run.executor.workers, smallest=16, largest=2048)
    if isinstance(task.prop, DistinctValues):
        return check_distinct_values(task, run, ENGINE, values_chunk, size)
    return check_each_input(task, run, ENGINE, violation_chunk, size)


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
    """The first input of [start, stop) that violates the property (a work unit)."""
    prop = capability(task.prop, EachInput)
    kinds = prop.measure_kinds(task)
    measures: dict[str, tuple[Fraction, int]] = {}
    whole = prop.witness_measure is not None  # refuted at the extreme measure: see every input
    first = None
    readouts: list[list[Fraction]] = []  # with --certify: every readout, for the certificate's digest
    for offset, tokens in enumerate(space.inputs(start, stop)):
        index = start + offset
        if deadline.expired() or cancelled():
            return ChunkResult(
                start,
                stop,
                offset,
                violation=first,
                stopped="timeout" if deadline.expired() else "cancelled",
                measures=measures,
            )
        if kinds:
            fold_measures(kinds, measures, {k: (v, index) for k, v in prop.measure(task, tokens).items()})
        if task.settings.certify:  # the readout, or what the property certifies instead (its reading of the model)
            own = certified_outputs(task, space.rows(index, index + 1)[0])
            if own is None:
                readouts.append(list(evaluate(task.model, task.arithmetic, tokens).readout))
            else:
                readouts.append([Fraction(int(v), own[1]) for v in np.asarray(own[0]).reshape(-1)])
        if first is None and prop.violation(task, tokens) is not None:
            first = index
            if not whole:
                return ChunkResult(
                    start,
                    stop,
                    offset + 1,
                    violation=index,
                    claim="the interpreter finds a violation",
                    measures=measures,
                )
    digests = [(start, stop, fractions_digest(readouts))] if task.settings.certify else []
    return ChunkResult(start, stop, stop - start, violation=first, measures=measures, digests=digests)


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
    """Every value q(x)_i of inputs [start, stop) as integers over their common denominator (a work unit)."""
    rows = np.concatenate(space.rows(start, stop)) if stop > start else np.zeros((0, 0), dtype=np.int64)
    values = []
    for offset, row in enumerate(rows):
        if deadline.expired() or cancelled():
            return ValuesResult(start, stop, None, stopped="timeout")
        q = capability(task.prop, DistinctValues).values(task, space.decode(row))
        clash = within_input_clash(task, q)
        if clash is not None:
            return ValuesResult(start, stop, None, clash=(start + offset, *clash))
        values.append(q)
    den = math.lcm(*(v.denominator for q in values for v in q)) if values else 1
    integers = [[int(v * den) for v in q] for q in values]
    bound = max((abs(x) for q in integers for x in q), default=0)
    array = np.array(integers, dtype=np.int64 if 2 * bound < (1 << 62) else object)
    if not values:
        array = np.zeros((0, max(space.lengths, default=0)), dtype=np.int64)
    return ValuesResult.of(start, stop, array, den, groups_for(task, space, start, rows), certify=task.settings.certify)

"""The driver of engine ``search`` (what the engine does: its card, ``__init__.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...batched import Unsupported
from ...contract import Batched, Sampled, Task, capability
from ...spaces import InputSpace
from ...verdict import Verdict
from ...witness import ReplayMismatch
from ...work import CONTINUE, STOP, Deadline, WorkUnit, schedule
from ..base import Merge, ProgressEvent, Run
from ..evaluators import CompiledEvaluators
from .sampling import SearchResult, SearchSpace, search

ENGINE = "search"


def _objective(task: Task, space: InputSpace) -> tuple[Callable[..., Any], str, int]:
    prop, sampled = capability(task.prop, Batched), capability(task.prop, Sampled)
    try:
        evaluators = CompiledEvaluators(task, space)
        for length in space.lengths:
            prop.batched_check(task, evaluators, length)
    except Unsupported as exc:

        def on_interpreter(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            hits = np.array([prop.violation(task, space.decode(row)) is not None for row in rows], dtype=bool)
            return hits.astype(np.float64), hits

        return on_interpreter, f"interpreter ({exc})", 64
    return (lambda rows: sampled.batched_score(task, evaluators, rows)), evaluators.of().describe(), 1024


def search_unit(
    task: Task,
    space: InputSpace,
    seed: int,
    samples: int,
    *,
    deadline: Deadline,
    cancelled: Callable[[], bool],
    report: Callable[[str], None],
) -> tuple[SearchResult, str]:
    """One seeded search (a work unit): the candidate rows it believes violate the property."""
    objective, how, batch = _objective(task, space)
    sampling = SearchSpace(len(space.tokens), space.lengths, space.distinct)
    result = search(
        sampling, objective, seed=seed, samples=samples, seconds=deadline.remaining(), batch=batch, stop=cancelled
    )
    return result, how


def check(task: Task, run: Run, *, samples: int | None = None) -> Verdict:
    space = task.prop.input_space(task)
    if space.order == "constant" or not space.lengths:
        return Merge(task, run, ENGINE).unknown(
            f"search samples whole inputs; this property's space is {space.describe()}", ["search: not applicable"]
        )
    budget = samples if samples is not None else task.settings.samples
    workers = max(1, run.executor.workers)
    seeds = [task.settings.seed + k for k in range(workers)]
    units = [
        WorkUnit(
            f"search: seed {seed}", search_unit, (task, space, seed, max(1, budget // workers)), order=k, priority=1
        )  # cheap falsification runs before other properties' exhaustive units
        for k, seed in enumerate(seeds)
    ]
    found: list[Any] = []
    totals = {"samples": 0, "rounds": 0}
    how = ""

    def on_result(unit: WorkUnit, value: tuple[SearchResult, str]) -> str:
        nonlocal how
        result, how = value
        totals["samples"] += result.samples
        totals["rounds"] += result.rounds
        run.progress(ProgressEvent(ENGINE, "search", totals["samples"], budget, "samples"))
        for row in result.candidates:
            witness = task.prop.violation(task, space.decode(row))
            if witness is not None:
                found.append(witness)
                return STOP
        if result.candidates:
            raise ReplayMismatch(
                f"{task.label}: the search objective claimed a violation that the interpreter does not reproduce",
                claimed=str(space.decode(result.candidates[0])),
            )
        return CONTINUE

    summary = schedule(run.executor, units, run.deadline, on_result)
    statistics = {
        **totals,
        "seed": task.settings.seed,
        "searches": len(units),
        "evaluator": how,
        "space_size": space.count(),
    }
    merge = Merge(task, run, ENGINE, statistics)
    if found:
        merge.refute(found[0], "search")
    merge.absorb(summary)
    stopped = "timeout" if summary.expired or totals["samples"] < budget else "sample budget"
    return merge.unknown(  # evidence, never a proof
        f"no counterexample in {totals['samples']} samples (seed {task.settings.seed}, {stopped})",
        [f"random sampling + hill climbing, {totals['samples']} samples ({stopped})"],
        method="sampled",
    )

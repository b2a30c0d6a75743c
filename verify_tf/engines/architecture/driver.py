"""The driver of engine ``architecture`` (what the engine does: its card, ``__init__.py``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from ...contract import Conclusion, SymmetryCheck, Task
from ...symbolic.solve import DRIVER_Z3_LOCK
from ...verdict import Verdict
from ...work import CONTINUE, Deadline, WorkUnit, schedule
from ..base import CERTIFY_QUERIES, ProgressEvent, Run, unit_failed, verdict
from .induction import FAILS, HOLDS, UNDECIDED, InductionResult, StepResult, rows_sum_to_one, run_step, steps
from .symmetry import SymmetryStep, run_symmetry_step, symmetry_steps

ENGINE = "architecture"


def symmetry_unit(
    task: Task, step: SymmetryStep, *, deadline: Deadline, cancelled: Callable[[], bool], report: Callable[[str], None]
) -> tuple[StepResult, str]:
    """One symmetry query (a work unit)."""
    report(step.name)
    return run_symmetry_step(task.arithmetic, step, seconds=deadline.remaining(), seed=task.settings.seed)


def step_unit(
    task: Task,
    length: int,
    name: str,
    sublayer: str,
    block: int | None,
    *,
    deadline: Deadline,
    cancelled: Callable[[], bool],
    report: Callable[[str], None],
) -> tuple[StepResult, str]:
    """One induction step query (a work unit)."""
    report(f"n = {length}: {name}")
    return run_step(
        task.model,
        task.arithmetic,
        length,
        name,
        sublayer,
        block,
        seconds=deadline.remaining(),
        seed=task.settings.seed,
        cancelled=cancelled,
    )


def check(task: Task, run: Run) -> Verdict:
    prop = task.prop
    early = prop.before_induction(task, run.deadline)
    if isinstance(early, Conclusion):
        return _verdict(task, run, early)
    if isinstance(early, SymmetryCheck):
        return _symmetry(task, run, early)
    lengths: list[int] = early
    plan = [(n, step) for n in lengths for step in steps(task.model)]
    units = [
        WorkUnit(
            f"induction n = {n}: {name}",
            step_unit,
            (task, n, name, sublayer, block),
            order=k,
            share=min(1.0, run.executor.workers / (len(plan) - k)),
        )
        for k, (n, (name, sublayer, block)) in enumerate(plan)
    ]
    found: dict[int, tuple[StepResult, str]] = {}

    def on_result(unit: WorkUnit, value: tuple[StepResult, str]) -> str:
        found[unit.order] = value
        run.progress(ProgressEvent(ENGINE, f"induction: {unit.key}", len(found), len(units), "steps"))
        n, (name, _, _) = plan[unit.order]
        _write_smt2(task, f"n{n}-{name}", value[1])
        return CONTINUE

    summary = schedule(run.executor, units, run.deadline, on_result)
    if summary.errors:
        first = summary.errors[0]
        return unit_failed(task, run, ENGINE, first)
    results = {}
    for n in lengths:
        done = [
            found[k][0] if k in found else StepResult(name, sublayer, block, UNDECIDED, 0.0, "not attempted: timeout")
            for k, (m, (name, sublayer, block)) in enumerate(plan)
            if m == n
        ]
        results[n] = InductionResult(n, tuple(done), rows_sum_to_one(task.arithmetic, task.model))
    asked = [(f"n = {plan[k][0]}: {plan[k][1][0]}", found[k]) for k in sorted(found)]
    with DRIVER_Z3_LOCK:  # conclude may ask z3 for a concrete member, in this thread (not a unit)
        conclusion = prop.conclude(task, results, run.deadline)
    return _verdict(task, run, conclusion, asked)


def _symmetry(task: Task, run: Run, request: SymmetryCheck) -> Verdict:
    plan = symmetry_steps(task.arithmetic, request.max_keys)
    units = [
        WorkUnit(
            f"symmetry: {step.name}",
            symmetry_unit,
            (task, step),
            order=k,
            share=min(1.0, run.executor.workers / (len(plan) - k)),
        )
        for k, step in enumerate(plan)
    ]
    found: dict[int, StepResult] = {}
    texts: dict[int, str] = {}

    def on_result(unit: WorkUnit, value: tuple[StepResult, str]) -> str:
        found[unit.order], texts[unit.order] = value
        run.progress(ProgressEvent(ENGINE, unit.key, len(found), len(units), "queries"))
        _write_smt2(task, f"symmetry-{plan[unit.order].name}", value[1])
        return CONTINUE

    summary = schedule(run.executor, units, run.deadline, on_result)
    if summary.errors:
        first = summary.errors[0]
        return unit_failed(task, run, ENGINE, first)
    done = tuple(
        found.get(k, StepResult(step.name, "attention", None, UNDECIDED, 0.0, "not attempted: timeout"))
        for k, step in enumerate(plan)
    )
    result = InductionResult(request.max_keys, done, True)
    asked = [(f"symmetry: {plan[k].name}", (found[k], texts[k])) for k in sorted(found)]
    return _verdict(task, run, task.prop.conclude_symmetry(task, request, result, run.deadline), asked)


def _write_smt2(task: Task, name: str, text: str) -> None:
    if task.settings.smt2_dir is None or not text:
        return
    safe = name.replace("[", "").replace("]", "").replace(",", "").replace(" ", "-")
    path = Path(task.settings.smt2_dir) / f"{task.label}-{safe}.smt2"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _verdict(
    task: Task, run: Run, conclusion: Conclusion, asked: Sequence[tuple[str, tuple[StepResult, str]]] = ()
) -> Verdict:
    statistics = conclusion.statistics
    if task.settings.certify:  # every step query with z3's answer; a step that needed no query has no text
        answers = {HOLDS: "unsat", FAILS: "sat", UNDECIDED: "unknown"}
        statistics = {
            **statistics,
            CERTIFY_QUERIES: [
                {"name": name, "smt2": text, "answer": answers[step.status]} for name, (step, text) in asked
            ],
        }
    return verdict(
        task,
        run,
        conclusion.status,
        ENGINE,
        method=conclusion.method,
        detail=conclusion.detail,
        witness=conclusion.witness,
        statistics=statistics,
        tried=conclusion.tried,
    )

"""The driver of engine ``architecture`` (what the engine does: its card, ``__init__.py``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...contract import (
    ArchitectureClass,
    ArchitectureRequest,
    Conclusion,
    Induction,
    InductionOutcome,
    LayerInduction,
    Member,
    MemberSearch,
    PairSearch,
    StepResult,
    SymmetryCheck,
    Task,
    capability,
)
from ...ir import Vector
from ...semantics import evaluate
from ...verdict import ERROR, PROVED, REFUTED, Evidence, Verdict
from ...witness import ReplayMismatch
from ...work import CONTINUE, Z3_LOCK, Deadline, UnitError, WorkUnit, schedule
from ..base import Merge, ProgressEvent, Proof, Run, replayed
from .concrete import ConcreteMember, realise_targets, separate_positions
from .induction import (
    FAILS,
    HOLDS,
    MAX_LENGTH,
    UNDECIDED,
    bos_offset,
    deeper_layers_add_no_query,
    rows_sum_to_one,
    run_step,
    steps,
)
from .signatures import find_pair
from .symmetry import SymmetryStep, run_symmetry_step, symmetry_steps

ENGINE = "architecture"


def symmetry_unit(
    task: Task, step: SymmetryStep, *, deadline: Deadline, cancelled: Callable[[], bool], report: Callable[[str], None]
) -> tuple[StepResult, str]:
    """One symmetry query (a work unit)."""
    report(step.name)
    return run_symmetry_step(
        task.arithmetic, step, seconds=deadline.remaining(), seed=task.settings.seed, cancelled=cancelled
    )


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


Asked = list[tuple[str, tuple[StepResult, str]]]  # every step query with its SMT-LIB text (certification)


class _UnitFailed(Exception):
    def __init__(self, failure: UnitError) -> None:
        super().__init__(str(failure))
        self.failure = failure


def check(task: Task, run: Run) -> Verdict:
    """Answer the property's requests (``contract``: Induction, SymmetryCheck, PairSearch, MemberSearch) until it
    concludes; every member the solver chooses is replayed on the interpreter before the property sees it."""
    prop = capability(task.prop, ArchitectureClass)
    asked: Asked = []
    step = prop.architecture_plan(task)
    try:
        while not isinstance(step, Conclusion):
            answer = _answer(task, run, step, asked)
            with Z3_LOCK:  # the property may evaluate concrete models meanwhile, in this thread
                step = prop.conclude(task, step, answer, run.deadline)
    except _UnitFailed as failed:
        merge = Merge(task, run, ENGINE)
        merge.fail(failed.failure)
        return merge.verdict()
    return _verdict(task, run, step, asked)


def _answer(task: Task, run: Run, request: ArchitectureRequest, asked: Asked) -> Any:
    if isinstance(request, Induction):
        return _induction(task, run, request, asked)
    if isinstance(request, SymmetryCheck):
        return _symmetry(task, run, request, asked)
    if isinstance(request, PairSearch):
        words = ("".join(str(token) for token in word) for word in task.given_domain().inputs())
        return find_pair(words, request.depth, request.bos, request.accepts, tick=run.deadline.check)
    with Z3_LOCK:  # the member search asks z3 in this thread (not a unit)
        return _member(task, run, request)


def _induction(task: Task, run: Run, request: Induction, asked: Asked) -> InductionOutcome:
    lengths = request.lengths
    if max(lengths, default=0) > MAX_LENGTH:
        return InductionOutcome({}, MAX_LENGTH)
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
        raise _UnitFailed(summary.errors[0])
    results = {}
    for n in lengths:
        done = [
            found[k][0] if k in found else StepResult(name, sublayer, block, UNDECIDED, 0.0, "not attempted: timeout")
            for k, (m, (name, sublayer, block)) in enumerate(plan)
            if m == n
        ]
        results[n] = LayerInduction(n, tuple(done), rows_sum_to_one(task.arithmetic, task.model))
    asked += [(f"n = {plan[k][0]}: {plan[k][1][0]}", found[k]) for k in sorted(found)]
    any_depth = None
    if request.any_depth and all(result.proved for result in results.values()):
        # the induction is per sublayer: when a layer's queries do not change one layer deeper, the proof covers
        # any number of layers of these kinds (checked for every length proved)
        with Z3_LOCK:
            any_depth = all(deeper_layers_add_no_query(task.model, task.arithmetic, n) for n in lengths if n >= 2)
    return InductionOutcome(results, MAX_LENGTH, any_depth)


def _symmetry(task: Task, run: Run, request: SymmetryCheck, asked: Asked) -> LayerInduction:
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
        raise _UnitFailed(summary.errors[0])
    done = tuple(
        found.get(k, StepResult(step.name, "attention", None, UNDECIDED, 0.0, "not attempted: timeout"))
        for k, step in enumerate(plan)
    )
    asked += [(f"symmetry: {plan[k].name}", (found[k], texts[k])) for k in sorted(found)]
    return LayerInduction(request.max_keys, done, True)


def _member(task: Task, run: Run, search: MemberSearch) -> Member | None:
    """The first failing step for which the solver builds a member (one realising the targets exactly when
    asked, else one separating positions), replayed on the interpreter."""
    for step in search.steps:
        block = step.block if step.sublayer == "attention" else None
        chosen, exact = None, False
        if search.targets is not None:
            chosen = realise_targets(
                task.model,
                task.arithmetic,
                block,
                search.inputs[0],
                search.targets,
                timeout=max(run.deadline.remaining(), 0.001),
                seed=task.settings.seed,
            )
            exact = chosen is not None
        if chosen is None:
            chosen = separate_positions(
                task.model,
                task.arithmetic,
                block,
                list(search.inputs),
                on=search.on,
                tolerance=search.tolerance,
                timeout=max(run.deadline.remaining(), 0.001),
                seed=task.settings.seed,
            )
        if chosen is not None:
            return _replay(task, search, chosen, step, exact)
    return None


def _replay(task: Task, search: MemberSearch, chosen: ConcreteMember, step: StepResult, exact: bool) -> Member:
    """Run the solver's member on the interpreter: it must give what the solver claims (an engine bug otherwise),
    and the property must agree that it breaks the claim."""
    trace = evaluate(chosen.model, task.arithmetic, chosen.tokens)
    users = bos_offset(chosen.model)
    readout = list(trace.readout[users:])
    observed: list[Vector]
    claimed: list[Vector]
    if search.on == "readout":
        observed, claimed = [(q,) for q in readout], [(q,) for q in chosen.claimed_readout]
    else:
        observed, claimed = list(trace.output[users:]), list(chosen.claimed_output)
    name = task.label
    if observed != claimed:
        raise ReplayMismatch(
            f"{name}: the solver's member of the class does not replay", claimed=claimed, replayed=observed
        )
    if exact and search.targets is not None and readout != list(search.targets):
        raise ReplayMismatch(
            f"{name}: the solver's member misses the target on replay", claimed=search.targets, replayed=readout
        )
    member = Member(
        chosen.model, chosen.tokens, chosen.active, chosen.parameters, step, exact, trace, observed, witness={}
    )
    witness = capability(task.prop, ArchitectureClass).member_witness(task, search, member)
    if witness is None:
        raise ReplayMismatch(
            f"{name}: the solver's member does not break the claim on replay", claimed=claimed, replayed=observed
        )
    return dataclasses.replace(member, witness=witness)


def _write_smt2(task: Task, name: str, text: str) -> None:
    if task.settings.smt2_dir is None or not text:
        return
    safe = name.replace("[", "").replace("]", "").replace(",", "").replace(" ", "-")
    path = Path(task.settings.smt2_dir) / f"{task.label}-{safe}.smt2"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _verdict(task: Task, run: Run, conclusion: Conclusion, asked: Asked) -> Verdict:
    """The property's conclusion as the verdict (the property words it: no ``describe_proof``)."""
    merge = Merge(task, run, ENGINE, conclusion.statistics)
    if conclusion.status == ERROR:  # the property found its own premises contradicted: never a verdict on them
        return merge.error(conclusion.detail, conclusion.method)
    if conclusion.status == REFUTED:
        witness = conclusion.witness
        if conclusion.replay is not None:  # refuted on the spec's own model: replayed here, as every refutation
            witness = {**replayed(task, conclusion.replay, conclusion.detail), **(witness or {})}
        assert witness is not None  # a refuting conclusion carries its (replayed) member's witness
        merge.refute(witness, conclusion.method, detail=conclusion.detail)
        return merge.verdict()
    if conclusion.status != PROVED:
        return merge.unknown(conclusion.detail, conclusion.tried, conclusion.method)
    evidence = None
    if task.settings.certify:  # every step query with z3's answer; a step that needed no query has no text
        answers = {HOLDS: "unsat", FAILS: "sat", UNDECIDED: "unknown"}
        queries = [{"name": name, "smt2": text, "answer": answers[step.status]} for name, (step, text) in asked]
        # a proof that asked no solver query: its conclusion is what the certificate can re-check
        evidence = Evidence("smt" if queries else "conclusion", queries=queries)
    unsat = sum(1 for _, (step, _) in asked if step.status == HOLDS)
    return merge.verdict(Proof(conclusion.detail, queries=unsat), conclusion.method, evidence, conclusion.detail)

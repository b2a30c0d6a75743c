"""``engine: auto``: a cheap falsification pass, then a pure cost model. ``run`` is the whole of it.

1. **Falsification**: when the property supports an engine of role ``SAMPLING`` (``search``) and its space is
   not tiny, that engine runs for a small share of the budget (``FALSIFY_SHARE``, at most
   ``FALSIFY_SECONDS``). A replayed counterexample ends the check at once.
2. **Cost model**: the time each ``EXHAUSTIVE`` engine would need is *predicted* (never measured on the spot) by
   its own ``predict`` hook (``engines/<name>/__init__.py``) from the size of the input space, the model's
   multiply-accumulate count per input, and a calibration of this machine's interpreter and batched-evaluator
   rates, measured once and stored under the cache directory (``calibration.json``); ``split`` is predicted to
   be instant when the interval bounds of the whole domain already decide the property, and is not chosen
   otherwise. The cheapest exhaustive engine predicted to finish in the remaining time runs; when none is
   predicted to finish, a ``SYMBOLIC`` engine (``smt``, ``architecture``) runs if the property has one (it
   may prove what enumeration cannot reach), else the cheapest exhaustive engine (its verdict then says how
   far it got). ``counting`` predicts 0 s wherever it applies (a causal model without relative positions, a
   strings domain): it is chosen whenever it applies.
3. **Hand-over**: an engine that stops early because its method does not pay on this model (``HAND_OVER`` in its
   verdict's statistics: counting when its states grow like the strings) hands the time left to the cost model's
   next choice among the other engines; the verdict says so (``auto.handed_over``, and in ``tried``).

Which engine plays which role is each engine's ``ROLE`` (``engines.cost``); nothing here names an engine.
Nothing here is part of a cache key: the key holds the engine the user asked for (``auto``), so a changed
machine load can never change which cached verdict is served.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import time
from dataclasses import asdict
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from . import __version__
from .contract import Task
from .domain import GridDomain
from .engines import load as load_engine
from .engines.base import Run
from .engines.cost import (
    EXHAUSTIVE,
    HAND_OVER,
    SAMPLING,
    SYMBOLIC,
    Calibration,
    Estimate,
    Prediction,
    multiply_accumulates,
)
from .ir import Model
from .semantics import Fixed, evaluate
from .spaces import InputSpace, SpaceTooLarge
from .verdict import ERROR, REFUTED, UNKNOWN, Verdict
from .work import Deadline

FALSIFY_SHARE = 0.1  # of the property's budget
FALSIFY_SECONDS = 2.0
FALSIFY_MIN_SPACE = 4096  # below this, the exhaustive engines are instant: no falsification pass
CALIBRATION_FILE = "calibration.json"


def _reference() -> tuple[Model, Any, list]:
    from .builders.random_model import RandomConfig, random_model  # only to calibrate (once per machine)

    model = random_model(RandomConfig(seed=1, width=2, layers=1, heads=2, ffn_width=4, scoring="softmax"))
    return model, Fixed(16, 8), GridDomain.regular(2, Fraction(1, 4), 4, Fraction(-1), Fraction(1)).tokens


def measure() -> Calibration:
    """About 0.3 s: the interpreter and the batched evaluator on a fixed reference model."""
    from .batched import BatchedEvaluator  # only to calibrate (once per machine)

    model, arith, tokens = _reference()
    macs = multiply_accumulates(model, 4)
    start, count = time.perf_counter(), 0
    while time.perf_counter() - start < 0.15:
        evaluate(model, arith, tuple(tokens[(count * 7 + k) % len(tokens)] for k in range(4)))
        count += 1
    interpret = (time.perf_counter() - start) / count / macs
    evaluator = BatchedEvaluator(model, arith, tokens, backend="numpy", device="cpu")
    rows = np.random.default_rng(0).integers(0, len(tokens), size=(4096, 4))
    evaluator.run(rows[:8])
    timings = []
    for batch in (512, 4096):
        begin = time.perf_counter()
        evaluator.run(rows[:batch])
        timings.append((time.perf_counter() - begin) / batch)
    per_row = max(timings[1], 1e-9)
    return Calibration(interpret, per_row * 0.8 / macs, per_row * 0.2, identity(), __version__)


def identity() -> str:
    """This machine and Python, as a calibration is stored for."""
    return f"{platform.node()}|{platform.machine()}|{os.cpu_count()}|{platform.python_version()}"


def load(cache_dir: Path | None) -> Calibration:
    """The stored calibration of this machine, else a fresh measurement (stored when a cache dir is given)."""
    path = Path(cache_dir) / CALIBRATION_FILE if cache_dir is not None else None
    if path is not None and path.is_file():
        try:
            data = json.loads(path.read_text())
            stored = Calibration(**data)
            if stored.machine == identity() and stored.version == __version__:
                return stored
        except (OSError, ValueError, TypeError):
            pass
    fresh = _CACHED.get("fresh") or measure()
    _CACHED["fresh"] = fresh
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(asdict(fresh), indent=1))
        except OSError:
            pass
    return fresh


_CACHED: dict[str, Calibration] = {}


def run(task: Task, run: Run, engines: tuple[str, ...], cache_dir: Path | None = None) -> Verdict:
    """Check ``task`` with ``engine: auto`` among ``engines`` (the property's, for its options): falsification,
    then the engine the cost model picks. The verdict's ``auto`` says what ran and why."""
    notes: dict[str, Any] = {}
    sampler = falsifier(task, engines)
    if sampler is not None:
        began = run.deadline.elapsed()  # the sampler's own budget, on the property's clock
        budget = Deadline(began + falsify_seconds(run.deadline.remaining()), start=run.deadline.start)
        samples = max(1024, min(task.settings.samples, 1 << 16))
        brief = dataclasses.replace(task, settings=dataclasses.replace(task.settings, samples=samples))
        found = load_engine(sampler).check(brief, Run(run.executor, budget, run.progress))
        spent = budget.elapsed() - began
        notes["falsification"] = f"{sampler}, {found.statistics.get('samples', 0)} samples in {spent:.2f} s"
        if found.status in (REFUTED, ERROR):
            return dataclasses.replace(found, auto=notes)
    calibration = load(cache_dir)
    chosen, why = choose(task, engines, run.deadline.remaining(), calibration)
    notes.update(why)
    verdict = load_engine(chosen).check(task, run)
    others = tuple(e for e in engines if e != chosen)
    if verdict.status == UNKNOWN and verdict.statistics.get(HAND_OVER) and others and not run.deadline.expired():
        # the engine stopped early because its method does not pay here: the next choice gets the time left
        first = verdict
        chosen, why = choose(task, others, run.deadline.remaining(), calibration)
        notes["handed_over"] = {"from": first.engine, "why": first.detail, **why}
        verdict = load_engine(chosen).check(task, run)
        verdict = dataclasses.replace(verdict, tried=[f"{first.engine}: {first.detail}", *verdict.tried])
    tried = verdict.tried
    if verdict.status == UNKNOWN and "falsification" in notes:
        tried = [f"auto: {notes['falsification']}: no counterexample"] + list(tried)
    return dataclasses.replace(verdict, auto=notes, tried=tried)


def role(engine: str) -> str | None:
    return load_engine(engine).role


def refusal(task: Task, engine: str) -> str | None:
    """Why ``engine`` would refuse ``task`` (its reading), or None."""
    hook = load_engine(engine).refusal
    return None if hook is None else hook(task)


def predict(
    task: Task, engines: tuple[str, ...], calibration: Calibration, remaining: float = math.inf
) -> list[Prediction]:
    """Predicted seconds of each of ``engines`` that has a ``predict`` hook (pure: nothing is evaluated;
    split's analysis of the whole domain's bounds runs only when predicted to take under a tenth of
    ``remaining``)."""
    estimate = estimate_of(task, calibration, remaining)
    hooks = [load_engine(engine).predict for engine in engines]
    return [hook(task, estimate) for hook in hooks if hook is not None]


def estimate_of(task: Task, calibration: Calibration, remaining: float = math.inf) -> Estimate:
    """What the ``predict`` hooks see of ``task``: its space, how many inputs, how many multiply-accumulates each."""
    space = task.prop.input_space(task) if task.domain is not None else None
    try:
        count = space.count() if space is not None else 0
    except SpaceTooLarge:
        count = None
    factor = task.prop.evaluations_per_input
    lengths = space.lengths if space is not None else ()
    macs = max((multiply_accumulates(task.model, n) for n in lengths), default=1) * factor
    return Estimate(space, count, macs, factor, calibration, remaining)


def choose(task: Task, engines: tuple[str, ...], remaining: float, calibration: Calibration) -> tuple[str, dict]:
    """The engine to run after falsification, and the numbers the choice rests on (for the statistics)."""
    exhaustive = tuple(e for e in engines if role(e) == EXHAUSTIVE)
    predictions = predict(task, exhaustive, calibration, remaining)
    shown = {
        p.engine: (round(p.seconds, 4) if p.seconds != math.inf else "cannot run" + (f": {p.why}" if p.why else ""))
        for p in predictions
    }
    finishing = sorted((p for p in predictions if p.seconds <= remaining), key=lambda p: p.seconds)
    if finishing:
        return finishing[0].engine, {"predicted_seconds": shown, "chosen": finishing[0].engine}
    refused = {e: why for e in engines if role(e) == SYMBOLIC and (why := refusal(task, e)) is not None}
    if refused:
        shown.update({e: f"refuses this reading: {why}" for e, why in refused.items()})
    for engine in (e for e in engines if role(e) == SYMBOLIC and e not in refused):
        why = (
            "no exhaustive engine is predicted to finish in time"
            if exhaustive
            else f"{engine} is the only engine of this property"
            if len(engines) == 1
            else "this property has no exhaustive engine"
        )
        return engine, {"predicted_seconds": shown, "chosen": engine, "why": why}
    if predictions and min(p.seconds for p in predictions) < math.inf:
        best = min(predictions, key=lambda p: p.seconds)
        return best.engine, {
            "predicted_seconds": shown,
            "chosen": best.engine,
            "why": "no engine is predicted to finish; the fastest runs until the timeout",
        }
    return engines[0], {"predicted_seconds": shown, "chosen": engines[0]}


def falsifier(task: Task, engines: tuple[str, ...]) -> str | None:
    """The sampling engine to run first, or None when the space is too small (or constant) to be worth it."""
    sampler = next((e for e in engines if role(e) == SAMPLING), None)
    if sampler is None or task.domain is None:
        return None
    space: InputSpace = task.prop.input_space(task)
    if space.order == "constant":
        return None
    try:
        return sampler if space.count() >= FALSIFY_MIN_SPACE else None
    except SpaceTooLarge:
        return sampler


def falsify_seconds(budget: float) -> float:
    return min(FALSIFY_SECONDS, FALSIFY_SHARE * budget)

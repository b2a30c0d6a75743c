"""``engine: auto``: a cheap falsification pass, then a pure cost model.

1. **Falsification**: when the property supports ``search`` and its space is not tiny, a seeded search runs for
   a small share of the budget (``FALSIFY_SHARE``, at most ``FALSIFY_SECONDS``). A replayed counterexample
   ends the check at once.
2. **Cost model**: the time each exhaustive engine would need is *predicted* (never measured on the spot) from
   the size of the input space, the model's multiply-accumulate count per input, and a calibration of this
   machine's interpreter and batched-evaluator rates, measured once and stored under the cache directory
   (``calibration.json``); ``split`` is predicted to be instant when the interval bounds of the whole domain
   already decide the property, and is not chosen otherwise. The cheapest exhaustive engine predicted to
   finish in the remaining time runs;
   when none is predicted to finish, ``smt`` runs if the property has it (it may prove what enumeration
   cannot reach), else the cheapest exhaustive engine (its verdict then says how far it got).

Nothing here is part of a cache key: the key holds the engine the user asked for (``auto``), so a changed
machine load can never change which cached verdict is served.
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from . import __version__
from .batched import BatchedEvaluator, unsupported_reason
from .bounds import Cube, cube_bounds
from .builders.random_model import RandomConfig, random_model
from .domain import GridDomain
from .engines.base import Task
from .ir import GridTokens, Model
from .semantics import Fixed, evaluate
from .spaces import InputSpace, SpaceTooLarge

FALSIFY_SHARE = 0.1  # of the property's budget
FALSIFY_SECONDS = 2.0
FALSIFY_MIN_SPACE = 4096  # below this, the exhaustive engines are instant: no falsification pass
CALIBRATION_FILE = "calibration.json"


@dataclass(frozen=True)
class Calibration:
    """Seconds per multiply-accumulate on this machine (interpreter, batched evaluator) plus fixed costs."""

    interpret_mac: float
    batched_mac: float
    batched_row: float  # per input, independent of size (indexing, rounding passes)
    machine: str
    version: str

    @staticmethod
    def identity() -> str:
        return f"{platform.node()}|{platform.machine()}|{os.cpu_count()}|{platform.python_version()}"


def _reference() -> tuple[Model, Any, list]:
    model = random_model(RandomConfig(seed=1, width=2, layers=1, heads=2, ffn_width=4, scoring="softmax"))
    return model, Fixed(16, 8), GridDomain.regular(2, Fraction(1, 4), 4, Fraction(-1), Fraction(1)).tokens


def measure() -> Calibration:
    """About 0.3 s: the interpreter and the batched evaluator on a fixed reference model."""
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
    return Calibration(interpret, per_row * 0.8 / macs, per_row * 0.2, Calibration.identity(), __version__)


def load(cache_dir: Path | None) -> Calibration:
    """The stored calibration of this machine, else a fresh measurement (stored when a cache dir is given)."""
    path = Path(cache_dir) / CALIBRATION_FILE if cache_dir is not None else None
    if path is not None and path.is_file():
        try:
            data = json.loads(path.read_text())
            stored = Calibration(**data)
            if stored.machine == Calibration.identity() and stored.version == __version__:
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


def multiply_accumulates(model: Model, length: int) -> int:
    """Multiply-accumulates of one evaluation on ``length`` user tokens (BOS included): the cost unit."""
    n = length + (0 if isinstance(model.tokens, GridTokens) or model.tokens.bos is None else 1)
    d, total = model.dim, n * model.dim
    for block in model.blocks:
        if block.attention is not None:
            for head in block.attention.heads:
                k, v = head.key_dim, head.value_dim
                total += n * d * (2 * k + v) + n * n * (k + v) + n * v * d
        if block.feed_forward is not None:
            total += 2 * n * d * block.feed_forward.width
    return max(total, 1)


@dataclass(frozen=True)
class Prediction:
    engine: str
    seconds: float  # math.inf: cannot run
    why: str = ""


def predict(
    task: Task, engines: tuple[str, ...], calibration: Calibration, remaining: float = float("inf")
) -> list[Prediction]:
    """Predicted seconds of each exhaustive engine the property supports (pure: no evaluation happens; split's
    analysis of the whole domain's bounds runs only when it is predicted to take under a tenth of ``remaining``)."""
    space = task.prop.input_space(task) if task.domain is not None else None
    try:
        count = space.count() if space is not None else 0
    except SpaceTooLarge:
        count = None
    factor = getattr(task.prop, "evaluations_per_input", 1)
    lengths = space.lengths if space is not None else ()
    macs = max((multiply_accumulates(task.model, n) for n in lengths), default=1) * factor
    out = []
    for engine in engines:
        if engine == "interpret":
            seconds = float("inf") if count is None else count * macs * calibration.interpret_mac
            out.append(Prediction(engine, seconds))
        elif engine == "enumerate":
            reason = unsupported_reason(task.model, task.arithmetic)
            if reason is not None:
                out.append(Prediction(engine, float("inf"), f"not evaluable exactly in batches: {reason}"))
                continue
            seconds = (
                float("inf")
                if count is None
                else count * (macs * calibration.batched_mac + factor * calibration.batched_row)
            )
            out.append(Prediction(engine, seconds))
        elif engine == "split":
            out.append(_predict_split(task, space, macs, calibration, remaining))
    return out


BOUNDS_COST = 20  # interval bounds of a cube cost about this many interpreter evaluations (Fractions, 2 ends)


def _predict_split(
    task: Task, space: InputSpace | None, macs: int, calibration: Calibration, remaining: float = float("inf")
) -> Prediction:
    """``split`` is predicted to finish at once only when the bounds of each whole-length cube already decide the
    property (an analysis of the model, not a run of the engine); otherwise its cost is not predictable here
    (it may close cubes by bounds deeper down, or end up enumerating): it is not chosen."""
    decide = getattr(task.prop, "decide_on_bounds", None)
    if decide is None or space is None or space.order != "all":
        return Prediction("split", float("inf"), "no bounds decision for this property")
    analysis = len(space.lengths) * BOUNDS_COST * macs * calibration.interpret_mac
    if analysis > remaining / 10:  # the budget is the user's: the choice must not spend it
        return Prediction("split", float("inf"), "the domain's bounds are too costly to analyse within the budget")
    for n in space.lengths:
        whole = Cube.whole(space.tokens, n)
        status, _ = decide(
            task,
            lambda model=None, whole=whole: cube_bounds(task.model if model is None else model, task.arithmetic, whole),
        )
        if status != "holds":
            return Prediction("split", float("inf"), "the domain's bounds do not decide the property")
    return Prediction("split", analysis)


def choose(task: Task, engines: tuple[str, ...], remaining: float, calibration: Calibration) -> tuple[str, dict]:
    """The engine to run after falsification, and the numbers the choice rests on (for the statistics)."""
    exhaustive = [e for e in engines if e in ("interpret", "enumerate", "split")]
    predictions = predict(task, tuple(exhaustive), calibration, remaining)
    shown = {
        p.engine: (round(p.seconds, 4) if p.seconds != float("inf") else "cannot run" + (f": {p.why}" if p.why else ""))
        for p in predictions
    }
    finishing = sorted((p for p in predictions if p.seconds <= remaining), key=lambda p: p.seconds)
    if finishing:
        return finishing[0].engine, {"predicted_seconds": shown, "chosen": finishing[0].engine}
    for engine in ("smt", "architecture"):
        if engine in engines:
            why = (
                "no exhaustive engine is predicted to finish in time"
                if exhaustive
                else f"{engine} is the only engine of this property"
                if len(engines) == 1
                else "this property has no exhaustive engine"
            )
            return engine, {"predicted_seconds": shown, "chosen": engine, "why": why}
    if predictions and min(p.seconds for p in predictions) < float("inf"):
        best = min(predictions, key=lambda p: p.seconds)
        return best.engine, {
            "predicted_seconds": shown,
            "chosen": best.engine,
            "why": "no engine is predicted to finish; the fastest runs until the timeout",
        }
    return engines[0], {"predicted_seconds": shown, "chosen": engines[0]}


def worth_falsifying(task: Task, engines: tuple[str, ...]) -> bool:
    if "search" not in engines or task.domain is None:
        return False
    space: InputSpace = task.prop.input_space(task)
    if space.order == "constant":
        return False
    try:
        return space.count() >= FALSIFY_MIN_SPACE
    except SpaceTooLarge:
        return True


def falsify_seconds(budget: float) -> float:
    return min(FALSIFY_SECONDS, FALSIFY_SHARE * budget)

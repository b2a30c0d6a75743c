"""Engine ``split``: complete branch and bound over the input domain.

The domain (one root cube per input length, ``cubes.roots``) is split into cubes, products of per-position,
per-coordinate index ranges (``cubes.SplitCube``). Each cube is

* **enumerated exactly** when it has at most ``Limits.enumerate_at`` inputs (the batched evaluator and the
  property's ``batched_violations``; the reference interpreter where the batched evaluator cannot run the
  model exactly);
* otherwise **bounded** (``verify_tf.bounds.cube_bounds``: exact Fraction intervals of every stage) and
  decided by the property's ``decide_on_bounds`` hook: ``holds`` closes the cube, ``violated`` (every input
  of the cube violates) hands a member to the replay, ``open`` goes on;
* handed to **SMT** when it has at most ``Limits.smt_at`` inputs (the property's own solver queries of that
  length, the input variables restricted to the cube's index ranges): ``unsat`` closes it, ``sat`` is
  replayed, anything else splits it;
* otherwise **split** in two on its widest (position, coordinate) range; the member nearest each split
  cube's center is evaluated on the way (a concrete candidate: replayed if it violates).

A batch of cubes is one work unit (``cube_batch``, plain data in and out), so ``-j`` and every executor
apply; the driver keeps the open cubes depth-first (a bounded queue), checks the deadline between rounds,
replays every candidate on the reference interpreter before reporting it, and shows the closed share of the
domain (by volume) as progress. ``proved`` only when every cube was closed by sound bounds, exact enumeration
or ``unsat``; floats are used only to order cubes. Contextual mapping (a distinct-values property) is in
``distinct.py``: a two-copy split over pairs of cubes.
"""

from __future__ import annotations

import math

from ...bounds import Bounds, Cube
from ...contract import HOLDS, Task
from ...ir import Model
from ...verdict import Verdict
from ..base import Run
from ..cost import EXHAUSTIVE, Estimate, Prediction
from .cubes import whole_bounds

ENGINE = "split"
ROLE = EXHAUSTIVE
CERTIFICATES = ("split",)


def check(task: Task, run: Run) -> Verdict:
    """Run the driver (``driver.py``: imported when the engine runs, so that a check loads only its engines)."""
    from . import driver

    return driver.check(task, run)


BOUNDS_COST = 20  # interval bounds of a cube cost about this many interpreter evaluations (Fractions, 2 ends)


def predict(task: Task, estimate: Estimate) -> Prediction:
    """Predicted to finish at once only when the bounds of each whole-length cube already decide the property
    (an analysis of the model, not a run of the engine); otherwise its cost is not predictable here (it may
    close cubes by bounds deeper down, or end up enumerating): it is not chosen."""
    space = estimate.space
    if not task.prop.defines("decide_on_bounds") or space is None or space.order != "all":
        return Prediction(ENGINE, math.inf, "no bounds decision for this property")
    analysis = len(space.lengths) * BOUNDS_COST * estimate.macs * estimate.calibration.interpret_mac
    if analysis > estimate.remaining / 10:  # the budget is the user's: the choice must not spend it
        return Prediction(ENGINE, math.inf, "the domain's bounds are too costly to analyse within the budget")
    for n in space.lengths:
        whole = Cube.whole(space.tokens, n)

        def bounds_of(model: Model | None = None, whole: Cube = whole) -> Bounds:
            return whole_bounds(task.model if model is None else model, task.arithmetic, whole)

        decision = task.prop.decide_on_bounds(task, bounds_of)
        if decision is None or decision[0] != HOLDS:
            return Prediction(ENGINE, math.inf, "the domain's bounds do not decide the property")
    return Prediction(ENGINE, analysis)

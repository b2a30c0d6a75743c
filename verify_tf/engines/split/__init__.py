"""Engine ``split``: complete branch and bound over the input domain.

The domain (one root cube per input length, ``cubes.roots``) is split into cubes, products of per-position,
per-coordinate index ranges (``cubes.SplitCube``). Rounds of cubes go out as work units (``batch.cube_batch``: a
batch of cubes of one length), where each cube is

* **enumerated exactly** when it is small (``Limits.enumerate_at``) or when the **adaptive leaf policy**
  (``leaves.py``) predicts, from this run's measured enumeration rate, bound cost and closing rate per volume,
  that enumerating it is cheaper than its expected subtree;
* otherwise **bounded** together with the rest of its batch: the linear domain (``verify_tf.linear``: intervals
  and linear forms of every stage, exact integers) in one vectorised call, its forward pass intersected at every
  sublayer with backward (CROWN-style) bounds (``linear/backward.py``; the readout's the best of five choices of
  relaxation slopes per side, ``READOUT_SLOPES``), or exact intervals cube by cube where
  that domain refuses the model (``bounder.py``); the property's ``decide_on_bounds`` closes it (``holds``), hands
  a member to the replay (``violated``: every input violates) or leaves it open;
* **attacked** when open: its corners under the linear bound and its center are evaluated exactly, all open
  cubes of the batch in one call;
* handed to **SMT** when configured (``Limits.smt_at``), else **split** on its widest range, ties (every
  coordinate starts with the same number of values) broken by the largest linear coefficient × width (the
  coefficient × width alone, or over the sides the property leaves open, grows the tree: docs/performance.md).

The driver keeps the open cubes **best-first by the property's score** (how far its bounds reach past the
property: refutations are found where they are likeliest) while fewer than ``Limits.best_first`` are open, then
depth-first (bounded memory); it recomputes the leaf policy after every round, checks the deadline between rounds,
replays every candidate on the reference interpreter before reporting it, and shows the closed share of the domain
(by volume) as progress. ``proved`` only when every cube was closed by sound bounds (no float decides any),
exact enumeration or ``unsat``. Contextual mapping (a distinct-values property) is in ``distinct.py``: a two-copy
split over pairs of cubes.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ...contract import (
    HOLDS,
    Batched,
    Bounded,
    CertifiedOutputs,
    Cubes,
    DistinctValues,
    EachInput,
    Solvable,
    Task,
    capability,
)
from ...ir import Model
from ...verdict import Verdict
from ..base import Run
from ..cost import EXHAUSTIVE, Estimate, Prediction

if TYPE_CHECKING:
    from ...bounds import Bounds

ENGINE = "split"
NEEDS = ((EachInput, Batched, Cubes), (DistinctValues, Cubes))
USES = (Bounded, Solvable, CertifiedOutputs)  # cubes closed by bounds; SMT leaves; --certify: the sample
PREFERENCE = 5
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
    if not isinstance(task.prop, Bounded) or space is None or space.order != "all":
        return Prediction(ENGINE, math.inf, "no bounds decision for this property")
    from .cubes import whole_bounds  # the interval bounds: only for a property they may decide

    analysis = len(space.lengths) * BOUNDS_COST * estimate.macs * estimate.calibration.interpret_mac
    if analysis > estimate.remaining / 10:  # the budget is the user's: the choice must not spend it
        return Prediction(ENGINE, math.inf, "the domain's bounds are too costly to analyse within the budget")
    for n in space.lengths:

        def bounds_of(model: Model | None = None, n: int = n) -> Bounds:
            return whole_bounds(task.model if model is None else model, task.arithmetic, space, n)

        decision = capability(task.prop, Bounded).decide_on_bounds(task, bounds_of)
        if decision is None or decision[0] != HOLDS:
            return Prediction(ENGINE, math.inf, "the domain's bounds do not decide the property")
    return Prediction(ENGINE, analysis)

"""Engine ``interpret``: the reference interpreter, exhaustively over the property's input space.

Each work unit evaluates a chunk of inputs one at a time with ``verify_tf.semantics.evaluate`` (through the
property's own ``violation`` / ``values``); the scan, merge, replay and verdict are ``engines.scan``'s. Slow
(hundreds to thousands of inputs per second) but the definition itself: every other engine is tested
against it.
"""

from __future__ import annotations

import math

from ...contract import Batched, CertifiedOutputs, DistinctValues, EachInput, Task
from ...verdict import Verdict
from ..base import Run
from ..cost import EXHAUSTIVE, Estimate, Prediction

ENGINE = "interpret"
NEEDS = ((EachInput,), (DistinctValues,))  # each input on the interpreter, or every value of every input
USES = (CertifiedOutputs, Batched)  # --certify: the digests of the claim's outputs; the sample vs the batched evaluator
PREFERENCE = 2
LANGUAGE_DOMAINS = True  # reads strings only through the input space
ROLE = EXHAUSTIVE
CERTIFICATES = ("exhaustive",)


def check(task: Task, run: Run) -> Verdict:
    """Run the driver (``driver.py``: imported when the engine runs, so that a check loads only its engines)."""
    from . import driver

    return driver.check(task, run)


def predict(task: Task, estimate: Estimate) -> Prediction:
    """Every input of the space, one interpreter evaluation each."""
    count, calibration = estimate.count, estimate.calibration
    return Prediction(ENGINE, math.inf if count is None else count * estimate.macs * calibration.interpret_mac)

"""Engine ``enumerate``: exact batched evaluation (``verify_tf.batched``) of the whole input space.

Each work unit evaluates a range of inputs in memory-bounded sub-chunks and applies the property's vectorised
check (``batched_violations`` / ``batched_values``); the first row it flags is replayed on the reference
interpreter by the scan (``engines.scan``) before anything is reported. A model the batched evaluator cannot
run exactly (``Unsupported``: int64 bounds, softmax in exact mode) gives ``unknown`` saying why.
"""

from __future__ import annotations

import math

from ...contract import Batched, CertifiedOutputs, Counted, DistinctValues, EachInput, PrefixTree, Task
from ...verdict import Verdict
from ..base import Run
from ..cost import EXHAUSTIVE, Estimate, Prediction

ENGINE = "enumerate"
NEEDS = ((EachInput, Batched), (DistinctValues,))
USES = (Counted, PrefixTree, CertifiedOutputs)  # the prefix-tree scan of a language's words; --certify's digests
PREFERENCE = 1  # the preferred exhaustive engine
LANGUAGE_DOMAINS = True  # reads strings only through the input space
ROLE = EXHAUSTIVE
CERTIFICATES = ("exhaustive",)


def check(task: Task, run: Run) -> Verdict:
    """Run the driver (``driver.py``: imported when the engine runs, so that a check loads only its engines)."""
    from . import driver

    return driver.check(task, run)


def predict(task: Task, estimate: Estimate) -> Prediction:
    """Every input of the space in batches, when the batched evaluator can run the model exactly."""
    from ...batched import unsupported_reason  # the kernels: only when auto weighs this engine

    reason = unsupported_reason(task.model, task.arithmetic)
    if reason is not None:
        return Prediction(ENGINE, math.inf, f"not evaluable exactly in batches: {reason}")
    count, calibration = estimate.count, estimate.calibration
    per_input = estimate.macs * calibration.batched_mac + estimate.factor * calibration.batched_row
    return Prediction(ENGINE, math.inf if count is None else count * per_input)

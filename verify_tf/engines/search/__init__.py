"""Engine ``search``: seeded random sampling plus hill climbing (``sampling``) over the property's input space.

Evidence, never a proof: finding nothing gives ``unknown`` "no counterexample in N samples". The objective is
the property's batched check (``batched_violations``, or ``batched_score`` when it has a graded one) on the
exact batched evaluator, or the interpreter row by row when the batched evaluator cannot run the model. Each
work unit is one independent search (seed, seed + 1, ... for several workers); every candidate is replayed on
the reference interpreter before it is reported.
"""

from __future__ import annotations

from ...contract import Batched, EachInput, Sampled, Task
from ...verdict import Verdict
from ..base import Run
from ..cost import SAMPLING

ENGINE = "search"
NEEDS = (EachInput, Batched, Sampled)
PREFERENCE = 3
ROLE = SAMPLING


def check(task: Task, run: Run) -> Verdict:
    """Run the driver (``driver.py``: imported when the engine runs, so that a check loads only its engines)."""
    from . import driver

    return driver.check(task, run)

"""Engine ``architecture``: statements about every model of an architecture class (weights as unknowns).

``induction``: position-blindness on constant inputs by induction over layers (Luo et al. 2022), one z3 query
per sublayer and length; each query is a work unit. ``symmetry`` and ``signatures``: depth lower bounds (no
causal transformer without positional information of depth k tells two words apart when their depth-k
signatures agree); the symmetry queries are the work units. ``concrete``: when a step fails, the solver picks the
parameters of one sublayer on a concrete constant input, giving a concrete Model of the class that separates
positions or realises given targets (e.g. position-index with URPE). The property decides what the induction
means for its claim (``conclude``); the driver replays every concrete member it reports on the interpreter.
"""

from __future__ import annotations

from ...contract import Task
from ...verdict import Verdict
from ..base import Run
from ..cost import SYMBOLIC

ENGINE = "architecture"
ROLE = SYMBOLIC


def check(task: Task, run: Run) -> Verdict:
    """Run the driver (``driver.py``: imported when the engine runs, so that a check loads only its engines)."""
    from . import driver

    return driver.check(task, run)

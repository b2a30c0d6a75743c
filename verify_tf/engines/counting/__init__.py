"""Engine ``counting``: equivalence with a counter machine over count vectors instead of strings.

For a model whose heads all average the prefix with key-independent weights (``stream``: causal uniform
attention, as the C-RASP compiler emits; checked on the IR, otherwise the verdict is ``unknown``, "not
applicable"), a position's stream is a function of its letter, the number of positions and the running value
sums of the heads. The property supplies the other side as a counter machine and what must agree
(``contract.CountingGoal``; ``crasp-equivalence`` gives its C-RASP program, ``crasp.machine``).

1. **Bounded** (one work unit): breadth-first over the joint states (sums, counts) length by length with
   duplicates merged (``explore``): the same verdict as all |Σ|^N strings, in time polynomial in N. A
   disagreement comes back as the shortlex-least string showing it and is replayed on the reference
   interpreter and the program's interpreter (the property's ``violation``) before ``refuted`` is reported.
2. **Every length** (``all_lengths``; one work unit): an invariant inferred from the exactly explored states
   is checked inductive with z3 over unbounded integers (``induction``): ``proved (all lengths)``. When the
   induction fails the exploration goes on to longer strings within the deadline (a disagreement there
   refutes the claim about every length); otherwise the verdict is ``unknown``, stating the bounded result
   and the part of the induction that failed.
"""

from __future__ import annotations

from ...contract import Task
from ...verdict import Verdict
from ..base import Run

ENGINE = "counting"
CERTIFICATES = ("counting",)


def check(task: Task, run: Run) -> Verdict:
    """Run the driver (``driver.py``: imported when the engine runs, so that a check loads only its engines)."""
    from . import driver

    return driver.check(task, run)

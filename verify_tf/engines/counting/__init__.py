"""Engine ``counting``: causal models without positional information, checked as counter machines.

In a causal model whose scores do not depend on positions, a position reads its prefix only through, per head,
the multiset of the prefix's (key, value) pairs; in fixed precision those take finitely many values, so the model
is a machine over count vectors (``counters``). The property supplies what is read beside it (``CountingGoal``: a
C-RASP program's counter machine, a second causal model, or nothing) and when a prefix violates it. The driver
(``driver.py``) explores the joint states length by length with equal states merged — the same verdict and least
witness as string enumeration, polynomial in N where the classes stay few — and proves every length by induction
over the counts (docs/counting.md).

``auto`` picks it whenever it applies and the domain is strings (``predict``); when it notices that merging does
not pay it hands the rest of the budget back (``HAND_OVER`` in the verdict's statistics).
"""

from __future__ import annotations

import math

from ...contract import Counted, Task, capability
from ...domain import StringDomain
from ...ir import Model
from ...semantics import UnsupportedInMode
from ...verdict import Verdict
from ..base import Run
from ..cost import EXHAUSTIVE, HAND_OVER, Estimate, Prediction

ENGINE = "counting"
NEEDS = (Counted,)
PREFERENCE = 6
ROLE = EXHAUSTIVE
CERTIFICATES = ("counting",)
LANGUAGE_DOMAINS = True  # the property's CountingGoal carries the language: the prefix tree of its words
__all__ = ["CERTIFICATES", "ENGINE", "HAND_OVER", "ROLE", "check", "predict"]


def check(task: Task, run: Run) -> Verdict:
    """Run the driver (``driver.py``: imported when the engine runs, so that a check loads only its engines)."""
    from . import driver

    return driver.check(task, run)


def predict(task: Task, estimate: Estimate) -> Prediction:
    """Chosen whenever it applies to a strings domain: merged states are never more than the strings, and where
    merging does not pay the engine says so within a bounded share of the budget and hands the rest back."""
    if not isinstance(task.domain, StringDomain):
        return Prediction(ENGINE, math.inf, "needs a strings domain")
    from .applies import refusal  # only for a strings domain (start-up)

    reason = refusal(task.model, task.arithmetic)
    if reason is None:
        try:
            reference = capability(task.prop, Counted).counting_goal(task).reference
        except UnsupportedInMode as exc:  # the property refuses this reading (crasp-equivalence's float reading)
            return Prediction(ENGINE, math.inf, str(exc))
        if isinstance(reference, Model):
            reason = refusal(reference, task.arithmetic)
            reason = None if reason is None else f"the other model: {reason}"
        elif reference is not None and reference.not_applicable:
            reason = f"the reference: {reference.not_applicable}"
    if reason is not None:
        return Prediction(ENGINE, math.inf, f"not a counter machine: {reason}")
    return Prediction(ENGINE, 0.0, "a causal model without relative positions: counted")

"""What ``engine: auto`` knows about a task before anything runs: the numbers each engine's ``predict`` hook
turns into predicted seconds (``verify_tf.auto`` owns the policy and the calibration's measurement).

An engine takes part in ``auto`` through its card (``engines/<name>/__init__.py``): ``ROLE`` says how auto may
use it, ``predict(task, estimate) -> Prediction`` (engines of role ``EXHAUSTIVE``) says how long a complete
run would take, from the calibration of this machine (never a measurement on the spot).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import GridTokens, Model
from ..spaces import InputSpace

# How auto may use an engine (an engine's ``ROLE``; an engine without one is run only when asked for by name
# or when it is the only engine of a property)
SAMPLING = "sampling"  # evidence only: run briefly first, to falsify cheaply
EXHAUSTIVE = "exhaustive"  # complete on finite spaces; ``predict`` says how long it would take
SYMBOLIC = "symbolic"  # may prove what enumeration cannot reach: chosen when no exhaustive run fits the budget
ROLES = (SAMPLING, EXHAUSTIVE, SYMBOLIC)
# A verdict's statistics key: the engine stopped early because its method does not pay here (the counting
# engine when its states grow like the strings); auto hands the time left to the next engine it would choose
HAND_OVER = "hand_over"


@dataclass(frozen=True)
class Calibration:
    """Seconds per multiply-accumulate on this machine (interpreter, batched evaluator) plus fixed costs."""

    interpret_mac: float
    batched_mac: float
    batched_row: float  # per input, independent of size (indexing, rounding passes)
    machine: str
    version: str


@dataclass(frozen=True)
class Estimate:
    """The size of a task's job, as ``predict`` hooks see it."""

    space: InputSpace | None  # None: the property has no domain
    count: int | None  # inputs in the space; None: too many to number
    macs: int  # multiply-accumulates of one input's evaluations (all of them: ``evaluations_per_input``)
    factor: int  # evaluations per input
    calibration: Calibration
    remaining: float  # seconds left of the property's budget


@dataclass(frozen=True)
class Prediction:
    engine: str
    seconds: float  # math.inf: cannot run
    why: str = ""


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

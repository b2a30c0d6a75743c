"""The model and the property's reference reading the same word: one joint state, one step per letter.

The reference (``CountingGoal.reference``) is nothing, a counter machine (a C-RASP program's counts), or a
second causal model run as a counter machine too (``counters.CounterModel``). Both sides' next outputs are
functions of the joint state and the letter, so two prefixes of one length that reach the same joint *key*
agree on every continuation: the exploration merges them. The key is the state itself, except that a counter
machine contributes ``machine.key(counts)`` (its capped counts, exact for its outputs) and, with ``exact=True``,
the letter counts are added (the induction infers its invariant from those states).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...ir import Model
from ...semantics import Arithmetic
from ..base import CountingGoal
from .counters import AVERAGE, CounterModel, Frozen, NotApplicable, Observation

NONE, MACHINE, MODEL = "none", "machine", "model"


class Joint:
    """``model`` beside ``goal.reference``; ``step`` moves both by one letter (module docstring)."""

    def __init__(self, model: Model, arith: Arithmetic, goal: CountingGoal) -> None:
        self.goal = goal
        reference = goal.reference
        if reference is not None and not isinstance(reference, Model) and reference.not_applicable:
            # e.g. a C-RASP program with positional predicates: said first, whatever the model
            raise NotApplicable(f"the reference: {reference.not_applicable}")
        self.model = CounterModel.of(model, arith)
        self.other: CounterModel | None = None
        self.machine: Any = None
        if reference is None:
            self.kind = NONE
        elif isinstance(reference, Model):
            self.kind = MODEL
            try:
                self.other = CounterModel.of(reference, arith)
            except NotApplicable as exc:
                raise NotApplicable(f"the other model: {exc}") from None
        else:
            self.kind = MACHINE
            self.machine = reference

    @property
    def sides(self) -> list[CounterModel]:
        return [self.model] if self.other is None else [self.model, self.other]

    def start(self) -> tuple[tuple[Any, ...], Observation | None, Any]:
        """(joint state, the model's observation, the reference's output) on the empty prefix."""
        state, _, ours, _ = self.model.start()
        if self.kind == MACHINE:
            return (state, self.machine.initial), ours, False
        if self.kind == MODEL:
            assert self.other is not None
            other, _, theirs, _ = self.other.start()
            return (state, other), ours, theirs
        return (state, None), ours, None

    def longest(self) -> int | None:
        """The longest string every side can read (an absolute positional encoding's table ends), or None."""
        limits = [
            len(side.model.positional_encoding) - (1 if side.bos is not None else 0)
            for side in self.sides
            if side.model.positional_encoding is not None
        ]
        return min(limits) if limits else None

    def positions(self, side: CounterModel, length: int) -> int:
        """Stream positions before the next letter of a prefix of ``length`` letters."""
        return length + (1 if side.bos is not None else 0)

    def step(
        self,
        state: tuple[Any, ...],
        length: int,
        letter: str,
        increments: Sequence[Any] | None = None,
        other_increments: Sequence[Any] | None = None,
    ) -> tuple[tuple[Any, ...], Observation, Any]:
        """(joint state, the model's observation, the reference's output) after one more letter."""
        ours_state, theirs_state = state
        new, ours, _ = self.model.step(ours_state, self.positions(self.model, length), letter, increments)
        if self.kind == MACHINE:
            counts, theirs = self.machine.step(theirs_state, letter, length)
            return (new, counts), ours, theirs
        if self.kind == MODEL:
            assert self.other is not None
            other, theirs, _ = self.other.step(
                theirs_state, self.positions(self.other, length), letter, other_increments
            )
            return (new, other), ours, theirs
        return (new, None), ours, None

    def largest(self, state: tuple[Any, ...]) -> int:
        """The largest class count in the state (of either model)."""
        ours, theirs = state
        best = self.model.largest(ours)
        return best if self.other is None else max(best, self.other.largest(theirs))

    def length_independent(self, states: list[tuple[Any, ...]]) -> bool:
        """Whether the next transitions of these states depend on nothing but the states: no absolute positional
        encoding, and every ``average`` coordinate frozen (its weight 1/n is the only other use of the length)."""
        if self.kind == MACHINE and self.machine.positional:
            return False  # its predicates read the position itself
        for index, side in enumerate(self.sides):
            if side.length_dependent:
                return False
            averages = [k for k, slot in enumerate(side.slots) if slot.kind == AVERAGE]
            if averages and any(
                not isinstance(total, Frozen) for state in states for k in averages for total in state[index][k]
            ):
                return False
        return True

    def settled_from(self) -> int:
        """The length from which the positions' special cases are over (the induction starts there): every window
        is full (no BOS, no missing key in it) and every threshold of a program's predicates is passed; 0 for a
        model and a reference without positions."""
        reach = [r for side in self.sides for r in side.reach.values()]
        start = max(reach) + 1 if reach else 0
        if self.kind == MACHINE and self.machine.shape is not None:
            start = max(start, self.machine.shape.threshold)
        return start

    def key(self, state: tuple[Any, ...]) -> tuple[Any, ...]:
        """What the future of both sides depends on: the state, the machine's counts capped."""
        ours, theirs = state
        return (ours, self.machine.key(theirs)) if self.kind == MACHINE else state


__all__ = ["MACHINE", "MODEL", "NONE", "Joint"]

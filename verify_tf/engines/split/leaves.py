"""Adaptive leaves: when ``split`` enumerates a cube instead of bounding or splitting it, from measured rates.

A cube of v inputs costs v·e to enumerate (e: seconds per input, measured on this run's enumerations), b to
bound (seconds per cube, measured on its bound batches), and once bounded it closes with probability p(v)
(measured per volume class 2^k <= v < 2^(k+1): cubes closed by bounds / cubes bounded, with one closed and one open
cube of prior; a class not reached yet inherits the rate of the nearest larger one, but at least ``EXPLORE``). The
expected cost of a subtree is then

    C(v) = min( v·e,  b + (1 − p(v))·min(v·e, 2·C(v/2)) ),     C(1) = e,

and a cube is **enumerated without bounds** where v·e wins the outer minimum, **enumerated after its bounds
failed** where v·e wins the inner one, and split otherwise. The classes are recomputed after every round, so the
policy follows what the bounds achieve on this model: where they close nothing, enumeration takes over at every
size and split runs at enumeration's speed plus the bound batches it tried. The policy is plain data (two tuples
of booleans per volume class), part of every work unit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

CLASSES = 64  # volume classes: v in [2^k, 2^(k+1))
BOUND_AS_INPUTS = 1024  # a bound's cost in enumerated inputs, until one is measured
EXPLORE = 0.2  # the closing rate assumed for a volume class no cube of which was bounded yet


def volume_class(volume: int) -> int:
    """k with 2^k <= volume < 2^(k+1); every volume from 2^(CLASSES−1) on shares the last class (a domain of
    5^32 inputs is one cube at the root: it crashed the policy's lookup before)."""
    return min(CLASSES - 1, max(0, volume.bit_length() - 1))


@dataclass(frozen=True)
class LeafPolicy:
    """Per volume class: enumerate at once (``before``), or once bounds did not close the cube (``after``)."""

    before: tuple[bool, ...] = (False,) * CLASSES
    after: tuple[bool, ...] = (False,) * CLASSES

    def enumerate_now(self, volume: int) -> bool:
        return self.before[volume_class(volume)]

    def enumerate_open(self, volume: int) -> bool:
        return self.after[volume_class(volume)]

    def largest(self) -> int:
        """The largest volume enumerated at once (0: none beyond the fixed leaf size)."""
        classes = [k for k, flag in enumerate(self.before) if flag]
        return (1 << (max(classes) + 1)) - 1 if classes else 0


@dataclass
class Rates:
    """What the runs measured (merged from every work unit's result): wall seconds (to size units within the
    deadline) and process time (the leaf policy's costs: what the work costs whatever else runs on the machine)."""

    bound_seconds: float = 0.0
    bound_cpu: float = 0.0
    bounded: int = 0
    enumeration_seconds: float = 0.0
    enumeration_cpu: float = 0.0
    enumerated: int = 0  # inputs
    per_class: list[list[int]] = field(default_factory=lambda: [[0, 0] for _ in range(CLASSES)])  # bounded, closed

    def record_bounds(self, seconds: float, cpu: float, outcomes: list[tuple[int, bool]]) -> None:
        self.bound_seconds += seconds
        self.bound_cpu += cpu
        self.bounded += len(outcomes)
        for volume, closed in outcomes:
            counts = self.per_class[volume_class(volume)]
            counts[0] += 1
            counts[1] += closed

    def record_enumeration(self, seconds: float, cpu: float, inputs: int) -> None:
        self.enumeration_seconds += seconds
        self.enumeration_cpu += cpu
        self.enumerated += inputs

    @property
    def per_input(self) -> float | None:
        return self.enumeration_seconds / self.enumerated if self.enumerated >= 256 else None

    @property
    def per_cube(self) -> float | None:
        return self.bound_seconds / self.bounded if self.bounded >= 16 else None

    def _cpu_per_input(self) -> float | None:
        return max(self.enumeration_cpu, 1e-9) / self.enumerated if self.enumerated >= 256 else None

    def _cpu_per_cube(self) -> float | None:
        return max(self.bound_cpu, 1e-9) / self.bounded if self.bounded >= 16 else None

    def closing(self) -> list[float]:
        """p per class: closed / bounded with one closed and one open cube of prior; a class not bounded yet takes
        the rate of the nearest larger class bounded (smaller cubes close at least as easily), but at least
        ``EXPLORE``, so the search keeps trying bounds one class further down while they are cheap against
        enumeration, and learns where they start to close."""
        p = [0.5] * CLASSES
        inherited = 0.5
        for k in range(CLASSES - 1, -1, -1):
            bounded, closed = self.per_class[k]
            if bounded:
                p[k] = inherited = (closed + 1) / (bounded + 2)
            else:
                p[k] = max(EXPLORE, inherited)
        return p

    def policy(self) -> LeafPolicy:
        """The policy from these rates (cubes up to ``Limits.enumerate_at`` are enumerated whatever it says); before a
        bound cost is measured, a bound is taken to cost as much as enumerating ``BOUND_AS_INPUTS`` inputs."""
        e = self._cpu_per_input()
        if e is None:
            return LeafPolicy()  # nothing measured yet: bound every cube above the fixed leaf size
        b = self._cpu_per_cube() or BOUND_AS_INPUTS * e
        p = self.closing()
        before, after = [], []
        cost = e  # C(1)
        for k in range(CLASSES):
            volume = 1 << k  # the class's smallest cube (the decision is made per class)
            enumerate_ = volume * e
            deeper = 2 * cost if k else enumerate_
            open_cost = min(enumerate_, deeper)
            bound_ = b + (1 - p[k]) * open_cost
            before.append(enumerate_ <= bound_)
            after.append(enumerate_ <= deeper)
            cost = min(enumerate_, bound_)
        return LeafPolicy(tuple(before), tuple(after))

"""Breadth-first exploration of the joint states (model sums, reference counts), one length at a time.

Both decisions at a position are functions of the joint state before it and its letter (``stream``, and the
property's counter machine), so two prefixes of the same length that reach the same state agree on every
continuation: the exploration keeps one prefix per state — the shortlex-least, because parents are extended
in the order of their own least prefixes and letters in the domain's order — and checks the decisions of
every (state, letter) transition. Up to length N this decides exactly what checking all |Σ|^N strings
decides, and a disagreement is found on the shortlex-least string that shows it (a parent pointer per state
gives the string back).

``exact=True`` keeps every distinct (sums, counts, letter counts) without freezing or capping: the points
from which the induction infers its affine invariant.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...contract import CountingGoal
from ...work import Deadline
from .stream import CountingModel

Point = tuple[int, ...]  # (positions so far i, every sum, every count, every letter count): integers


@dataclass
class Exploration:
    """What one exploration found (plain data)."""

    complete_up_to: int = -1  # every length 0..complete_up_to was explored
    states: int = 0
    widest: int = 0  # the most states of one length
    disagreement: tuple[str, ...] | None = None  # the shortlex-least string whose last position disagrees
    stopped: str = ""  # "", "timeout", "cancelled", "state limit"
    points: list[Point] = field(default_factory=list)  # exact=True: every reachable point
    # per length: how many strings reach the kept states, added up through the merges (a second count of the
    # strings explored, for the certificate: |Σ|^n when every transition was followed)
    strings: list[int] = field(default_factory=list)


def explore(
    counting: CountingModel,
    goal: CountingGoal,
    max_length: int,
    increments: Sequence[tuple[int, int] | None] | None,
    *,
    deadline: Deadline,
    cancelled: Callable[[], bool] = lambda: False,
    exact: bool = False,
    state_limit: int | None = None,
) -> Exploration:
    machine, alphabet = goal.machine, goal.alphabet
    result = Exploration()
    sums, positions, readout = counting.start()
    counts = machine.initial
    decision = readout is not None and readout > goal.threshold
    if goal.first_position == 0 and decision:  # the empty word: C-RASP rejects it
        result.disagreement, result.complete_up_to = (), 0
        return result
    letters0 = (0,) * len(alphabet)
    frontier: list[tuple[Any, ...]] = [(sums, counts, letters0)]
    weights: list[int] = [1]  # strings reaching each frontier state
    result.strings.append(1)
    history: list[list[tuple[int, int]]] = [[(-1, -1)]]  # per length: (parent index, letter index) per state
    result.complete_up_to, result.states, result.widest = 0, 1, 1
    if exact:
        result.points.append((0, *sums, *counts, *letters0))
    for length in range(1, max_length + 1):
        seen: dict[tuple[Any, ...], int] = {}
        states: list[tuple[Any, ...]] = []
        parents: list[tuple[int, int]] = []
        reached: list[int] = []
        checked = length >= goal.first_position
        for index, (sums, counts, letters) in enumerate(frontier):
            if index % 64 == 0 and (deadline.expired() or cancelled()):
                result.stopped = "timeout" if deadline.expired() else "cancelled"
                return result
            for a, symbol in enumerate(alphabet):
                new_sums, readout = counting.step(sums, positions, symbol, None if exact else increments)
                new_counts, output = machine.step(counts, symbol)
                key: tuple[Any, ...]
                if exact:
                    new_letters = letters[:a] + (letters[a] + 1,) + letters[a + 1 :]
                    key = (new_sums, new_counts, new_letters)
                else:
                    new_letters = letters
                    key = (new_sums, machine.key(new_counts))
                # the decisions at this position read the letter too: check every transition, not every state
                if checked and (readout > goal.threshold) != output:
                    history.append(parents + [(index, a)])
                    result.disagreement = _word(history, alphabet)
                    result.states += len(states)
                    return result
                if key in seen:
                    reached[seen[key]] += weights[index]
                    continue
                seen[key] = len(states)
                reached.append(weights[index])
                states.append((new_sums, new_counts, new_letters))
                parents.append((index, a))
                if exact:
                    result.points.append((length, *new_sums, *new_counts, *new_letters))
        frontier, weights = states, reached
        result.strings.append(sum(reached))
        history.append(parents)
        positions += 1
        result.complete_up_to = length
        result.states += len(states)
        result.widest = max(result.widest, len(states))
        if state_limit is not None and result.states > state_limit:
            result.stopped = "state limit"
            return result
    return result


def _word(history: list[list[tuple[int, int]]], alphabet: tuple[str, ...]) -> tuple[str, ...]:
    """The prefix of the last state of ``history`` (its last entry), following parent pointers back."""
    letters: list[str] = []
    index = len(history[-1]) - 1
    for level in range(len(history) - 1, 0, -1):
        parent, a = history[level][index]
        letters.append(alphabet[a])
        index = parent
    return tuple(reversed(letters))


__all__ = ["Exploration", "Point", "explore"]

"""Breadth-first exploration of the joint states (``joint.Joint``), one length at a time.

Both sides' outputs at a position are functions of the joint state before it and its letter, so two prefixes of
the same length that reach the same key agree on every continuation: the exploration keeps one prefix per key —
the shortlex-least, because parents are extended in the order of their own least prefixes and letters in the
domain's order — and checks every (state, letter) transition. Up to length N this decides exactly what checking
all |Σ|^N strings decides.

**The least witness.** The first violating transition of a length p is the shortlex-least violating prefix of
length p (V_p): any violating prefix u·σ has a kept representative r ≤ u of its state, and r·σ violates too.
With ``least: prefix`` the answer is V_p at the first length p that has one. With ``least: string`` it is the
shortlex-least string of the domain showing a violation, as string enumeration reports it: the shortest length
n >= min-length whose string can show one (some constrained prefix length p <= n has a V_p), and among those
strings the least V_p followed by the first letter n − p times.

**When merging does not pay** (``bounded`` explorations): once a length has at least ``PAY_STRINGS`` strings
(or the exploration has used ``PAY_SHARE`` of its time), if the states of that length are at least ``PAY_RATIO``
of its strings and grew by ``PAY_GROWTH`` or more over the previous length, the exploration behaves like string
enumeration; if, growing so, it would not reach the requested length within the time left at the measured rate,
it stops and says so (``stopped = NOT_PAYING``). The projection is geometric, so a state count that grows like a
high power of the length early on can be judged exponential; the verdict states the figures it judged by.

**When the states repeat** (``closed_at``): if the keys of length L are exactly those of length L − 1 and no
transition depends on the length any more (no absolute positional encoding; every ``average`` head coordinate
frozen), every later length has the same keys and the same transitions, hence the same violations as length L.
Once every length from L on is constrained alike, the exploration stops there: it has decided every length (the
state space is finite, e.g. under per-probability rounding once every weight ⌊1/n⌋_f is 0).

**A language** (``goal.language``, a strings domain restricted to a regular language): the joint state carries the
language's automaton state, and a transition is followed only when its prefix is a prefix of some word of the
language with a length in the domain's range (the automaton's counts say so: ``live``), so the exploration is the
prefix tree of those words with equal (joint, automaton) states merged. With ``least: prefix`` every followed
prefix is checked (each is a position of some word of the domain, and every position of every word is such a
prefix); with ``least: string`` only the prefixes that are words of the domain. The witness is the least failing
*word* in the domain's order (length, then lexicographic): a violating prefix u with automaton state t stands for
the words u·v with v a completion from t, so the least failing word has the least p + d over the first violating
prefix of each (length p, state t), d the shortest completion from t; it is settled once every length up to that
sum is explored, and is that prefix followed by the least completion. After length m is explored, every position
of every word of length <= m has been checked (the statistics' ``explored_up_to``). Neither "merging does not pay"
nor "the states repeat" applies (both reason about Σ^n).

``exact=True`` keeps every distinct (joint state, letter counts) without freezing or capping: the states the
induction infers its invariant from (``visited``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ... import work
from ...work import Deadline
from ..base import CountingGoal
from .counters import Observation
from .joint import Joint

PAY_STRINGS, PAY_SHARE, PAY_RATIO, PAY_GROWTH = 4096, 0.05, 0.25, 1.5
NOT_PAYING = "merging does not pay"

Violates = Callable[[Observation | None, Any], bool]


@dataclass
class Exploration:
    """What one exploration found (plain data)."""

    complete_up_to: int = -1  # every length 0..complete_up_to was explored
    states: int = 0
    widest: int = 0  # the most states of one length
    per_length: list[int] = field(default_factory=list)  # states of each length
    disagreement: tuple[str, ...] | None = None  # the witness string (module docstring)
    stopped: str = ""  # "", "timeout", "cancelled", "state limit", NOT_PAYING
    closed_at: int | None = None  # the length from which the states repeat (every longer length decided)
    why: str = ""  # NOT_PAYING: the figures behind it
    largest_count: int = 0  # the largest class count of any state
    visited: list[tuple[int, tuple[Any, ...], tuple[int, ...]]] = field(
        default_factory=list
    )  # exact: (length, state, letters)
    # per length: how many strings reach the kept states, added up through the merges (a second count of the
    # strings explored, for the certificate: |Σ|^n when every transition was followed)
    strings: list[int] = field(default_factory=list)
    seconds: float = 0.0


def explore(
    joint: Joint,
    goal: CountingGoal,
    violates: Violates,
    max_length: int,
    increments: tuple[Sequence[Any] | None, Sequence[Any] | None] = (None, None),
    *,
    deadline: Deadline,
    cancelled: Callable[[], bool] = lambda: False,
    report: Callable[..., None] = lambda phase, *progress: None,
    exact: bool = False,
    state_limit: int | None = None,
) -> Exploration:
    alphabet = goal.alphabet
    began = work.clock()
    if goal.language is not None:
        return _explore_words(joint, goal, violates, max_length, increments, deadline, cancelled, report, began)
    result = Exploration()
    few, start_from = goal.ever_checked()

    def constrained(p: int) -> bool:
        return p in few or (start_from is not None and p >= start_from)

    state, ours, theirs = joint.start()
    first_violation: dict[int, tuple[int, int]] = {}  # length p -> (parent index at p - 1, letter index)
    if constrained(0) and violates(ours, theirs):
        first_violation[0] = (-1, -1)
    letters0 = (0,) * len(alphabet)
    frontier: list[tuple[Any, ...]] = [state]
    letter_counts: list[tuple[int, ...]] = [letters0]
    weights: list[int] = [1]  # strings reaching each frontier state
    history: list[list[tuple[int, int]]] = [[(-1, -1)]]  # per length: (parent index, letter index) per state
    result.strings.append(1)
    result.per_length.append(1)
    result.complete_up_to, result.states, result.widest = 0, 1, 1
    previous: set[tuple[Any, ...]] = {joint.key(state)}
    settled = max(few, default=0) if start_from is None else max(max(few, default=0), start_from)
    if exact:
        result.visited.append((0, state, letters0))
    found = _settle(goal, 0, first_violation, history, alphabet)
    if found is not None:
        result.disagreement = found
        return _done(result, joint, began)
    for length in range(1, max_length + 1):
        report(
            f"counting: length {length}/{max_length}, {result.per_length[-1]} states", length - 1, max_length, "lengths"
        )
        seen: dict[tuple[Any, ...], int] = {}
        states: list[tuple[Any, ...]] = []
        counts: list[tuple[int, ...]] = []
        parents: list[tuple[int, int]] = []
        reached: list[int] = []
        checking = constrained(length) and length not in first_violation
        for index, state in enumerate(frontier):
            if deadline.expired() or cancelled():  # every state: one step can take seconds (softmax, exact)
                result.stopped = "timeout" if deadline.expired() else "cancelled"
                return _done(result, joint, began)
            for a, symbol in enumerate(alphabet):
                new, ours, theirs = joint.step(state, length - 1, symbol, *increments)
                # the decision at this position reads the letter too: check every transition, not every state
                if checking and violates(ours, theirs):
                    first_violation[length] = (index, a)
                    checking = False
                if exact:
                    letters = letter_counts[index]
                    letters = letters[:a] + (letters[a] + 1,) + letters[a + 1 :]
                    key: tuple[Any, ...] = (new, letters)
                else:
                    key = joint.key(new)
                at = seen.get(key)
                if at is not None:
                    reached[at] += weights[index]
                    continue
                seen[key] = len(states)
                result.largest_count = max(result.largest_count, joint.largest(new))
                reached.append(weights[index])
                states.append(new)
                parents.append((index, a))
                if exact:
                    counts.append(letters)
                    result.visited.append((length, new, letters))
        frontier, weights, letter_counts = states, reached, counts
        _close_length(result, history, parents, reached, length)
        found = _settle(goal, length, first_violation, history, alphabet)
        if found is not None:
            result.disagreement = found
            return _done(result, joint, began)
        if not exact:
            keys = set(seen)
            if length >= settled and keys == previous and joint.length_independent(frontier):
                result.closed_at = length
                return _done(result, joint, began)
            previous = keys
        if _stops_early(result, exact, length, max_length, len(alphabet), state_limit, began, deadline):
            return _done(result, joint, began)
    return _done(result, joint, began)


def _stops_early(
    result: Exploration,
    exact: bool,
    length: int,
    max_length: int,
    letters: int,
    state_limit: int | None,
    began: float,
    deadline: Deadline,
) -> bool:
    """After a length: more states than the limit, or (not exact) exploring further does not pay;
    ``result.stopped`` says which."""
    if state_limit is not None and result.states > state_limit:
        result.stopped = "state limit"
        return True
    if not exact and length < max_length:
        why = _not_paying(result, letters, max_length, work.clock() - began, deadline.remaining(), deadline.seconds)
        if why:
            result.stopped, result.why = NOT_PAYING, why
            return True
    return False


def _explore_words(
    joint: Joint,
    goal: CountingGoal,
    violates: Violates,
    max_length: int,
    increments: tuple[Sequence[Any] | None, Sequence[Any] | None],
    deadline: Deadline,
    cancelled: Callable[[], bool],
    report: Callable[..., None],
    began: float,
) -> Exploration:
    """The prefix tree of the language's words of length ``goal.min_length``..``max_length``, merged (module
    docstring, "A language")."""
    language = goal.language
    assert language is not None
    alphabet = goal.alphabet
    letters = [language.alphabet.index(symbol) for symbol in alphabet]
    counts = language.counts(max_length)

    def completions(p: int, q: int) -> list[int]:
        """The lengths m of the completions from state q of a prefix of length p (words of the domain's range)."""
        return [m for m in range(max(0, goal.min_length - p), max_length - p + 1) if counts[m][q]]

    live = language.completable(goal.min_length, max_length).tolist()  # [p][q]: completions(p, q) is not empty
    few, start_from = goal.ever_checked()
    prefix_mode = goal.least == "prefix"

    def checked(p: int, q: int) -> bool:
        if not (p in few or (start_from is not None and p >= start_from)):
            return False
        return live[p][q] if prefix_mode else language.accepting[q] and p >= goal.min_length

    result = Exploration()
    state, ours, theirs = joint.start()
    first: dict[tuple[int, int], tuple[int, int]] = {}  # (length p, automaton state) -> (parent, letter)
    if live[0][0] and checked(0, 0) and violates(ours, theirs):
        first[0, 0] = (-1, -1)
    frontier: list[tuple[Any, int]] = [(state, 0)] if live[0][0] else []
    weights: list[int] = [1] * len(frontier)
    history: list[list[tuple[int, int]]] = [[(-1, -1)]]
    result.strings.append(len(frontier))
    result.per_length.append(len(frontier))
    result.complete_up_to, result.states, result.widest = 0, len(frontier), len(frontier)
    found = _settle_words(language, counts, completions, first, history, alphabet, 0)
    if found is not None:
        result.disagreement = found
        return _done(result, joint, began)
    for length in range(1, max_length + 1):
        if not frontier:
            break
        report(
            f"counting: length {length}/{max_length}, {result.per_length[-1]} states", length - 1, max_length, "lengths"
        )
        seen: dict[tuple[Any, ...], int] = {}
        kept: list[tuple[Any, int]] = []
        parents: list[tuple[int, int]] = []
        reached: list[int] = []
        for index, (model_state, q) in enumerate(frontier):
            if deadline.expired() or cancelled():  # every state: one step can take seconds (softmax, exact)
                result.stopped = "timeout" if deadline.expired() else "cancelled"
                return _done(result, joint, began)
            for a, symbol in enumerate(alphabet):
                target = language.delta[q][letters[a]]
                if target < 0 or not live[length][target]:
                    continue  # no word of the domain has this prefix
                new, ours, theirs = joint.step(model_state, length - 1, symbol, *increments)
                if (length, target) not in first and checked(length, target) and violates(ours, theirs):
                    first[length, target] = (index, a)
                key = (joint.key(new), target)
                at = seen.get(key)
                if at is not None:
                    reached[at] += weights[index]
                    continue
                seen[key] = len(kept)
                result.largest_count = max(result.largest_count, joint.largest(new))
                reached.append(weights[index])
                kept.append((new, target))
                parents.append((index, a))
        frontier, weights = kept, reached
        _close_length(result, history, parents, reached, length)
        found = _settle_words(language, counts, completions, first, history, alphabet, length)
        if found is not None:
            result.disagreement = found
            return _done(result, joint, began)
    return _done(result, joint, began)


def _close_length(
    result: Exploration,
    history: list[list[tuple[int, int]]],
    parents: list[tuple[int, int]],
    reached: list[int],
    length: int,
) -> None:
    """Record a length explored completely: its kept states (one parent each) and the strings they stand for."""
    history.append(parents)
    result.strings.append(sum(reached))
    result.per_length.append(len(parents))
    result.complete_up_to = length
    result.states += len(parents)
    result.widest = max(result.widest, len(parents))


def _settle_words(
    language: Any,
    counts: tuple[tuple[int, ...], ...],
    completions: Callable[[int, int], list[int]],
    first: dict[tuple[int, int], tuple[int, int]],
    history: list[list[tuple[int, int]]],
    alphabet: tuple[str, ...],
    explored: int,
) -> tuple[str, ...] | None:
    """The least failing word once every length up to its length is explored (module docstring), else None."""
    if not first:
        return None
    shortest = min(p + completions(p, q)[0] for (p, q) in first)
    if shortest > explored:
        return None
    words = []
    for (p, q), last in first.items():
        m = shortest - p
        if m < 0 or not counts[m][q]:
            continue
        completion = (language.alphabet[a] for a in language.least_completion(q, m))
        words.append((*_word(history, p, last, alphabet), *completion))
    order = {symbol: i for i, symbol in enumerate(alphabet)}
    return min(words, key=lambda word: [order[s] for s in word])


def _done(result: Exploration, joint: Joint, began: float) -> Exploration:
    result.seconds = work.clock() - began
    return result


def _settle(
    goal: CountingGoal,
    length: int,
    first_violation: dict[int, tuple[int, int]],
    history: list[list[tuple[int, int]]],
    alphabet: tuple[str, ...],
) -> tuple[str, ...] | None:
    """The witness, once every length up to ``length`` has been explored and it is determined (module
    docstring), else None."""
    if goal.least == "prefix":
        if length in first_violation:
            return _word(history, length, first_violation[length], alphabet)
        return None
    if length < goal.min_length:
        return None
    candidates = [
        _word(history, p, first_violation[p], alphabet) + (alphabet[0],) * (length - p)
        for p in goal.checked(length)
        if p in first_violation
    ]
    if not candidates:
        return None
    order = {symbol: i for i, symbol in enumerate(alphabet)}
    return min(candidates, key=lambda word: [order[s] for s in word])


def _word(
    history: list[list[tuple[int, int]]], length: int, last: tuple[int, int], alphabet: tuple[str, ...]
) -> tuple[str, ...]:
    """The prefix of length ``length`` ending with the transition ``last`` (parent index, letter index)."""
    if length == 0:
        return ()
    parent, a = last
    letters = [alphabet[a]]
    index = parent
    for level in range(length - 1, 0, -1):
        parent, a = history[level][index]
        letters.append(alphabet[a])
        index = parent
    return tuple(reversed(letters))


def _not_paying(
    result: Exploration, letters: int, max_length: int, seconds: float, remaining: float, budget: float
) -> str:
    """Why the exploration should stop as exponential (module docstring), or ""."""
    length = result.complete_up_to
    strings = letters**length
    states, before = result.per_length[-1], result.per_length[-2]
    if strings < PAY_STRINGS and seconds < PAY_SHARE * budget:
        return ""
    if states < PAY_RATIO * strings or states < PAY_GROWTH * before:
        return ""
    growth = states / before
    per_state = seconds / max(result.states, 1)
    ahead = sum(states * growth**k for k in range(1, max_length - length + 1))
    if ahead * per_state <= remaining:
        return ""
    return (
        f"at length {length}, {states} states for {strings} strings ({states / strings:.0%}), {growth:.2f}x the "
        f"previous length: reaching length {max_length} would take about {_seconds(ahead * per_state)} at "
        f"{per_state * 1e6:.0f} µs per state, {remaining:.0f} s are left"
    )


def _seconds(value: float) -> str:
    if value < 1e6:
        return f"{value:.0f} s"
    return f"10^{len(str(int(value))) - 1} s"


__all__ = ["NOT_PAYING", "Exploration", "Violates", "explore"]

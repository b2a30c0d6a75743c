"""Engine ``enumerate`` over a prefix tree: every word of a regular language, each prefix evaluated once.

It applies (``applies``) when the domain is the words of a regular language (``StringDomain.language``), every
head is causal, the property states what it checks at the end of a prefix (``Property.counting_goal``, with no
chosen positions, for the domain's lengths) and flags a batch of prefixes at once
(``Property.prefix_tree_violations``), and no certificate is asked for (certificates digest the padded scan's
chunks). The nodes are the prefixes of the domain's words; a node is *checked* when the goal constrains it: in
``least: prefix`` (crasp-equivalence's prefix mode) every node of at least ``first_position`` letters, in
``least: string`` (accept mode) the nodes that are words of the domain. The model is evaluated at each node's
last position only, from its ancestors' cached keys and values (``batched.prefix_tree``): the words of L_4 up to
100 letters are 3.9 million words of 4.1 million prefixes, where the padded scan evaluates 3.9 million rows of up
to 100 positions.

**Order, memory, and the least failing word.** The tree is explored depth first in batches of at most ``BATCH``
nodes whose parents lie in one batch, so memory is bounded by depth × batch whatever the tree's size. A flagged
node begins its least word of the domain: itself in accept mode, in prefix mode its shortest, then
lexicographically least, completion (from the automaton's counts). Once a word of length L is found, nodes
deeper than L cannot begin a smaller one and are not expanded; the least of all candidates, once every node up to
that depth is explored, is the least failing word in the domain's order, and it is replayed on the interpreter.
When the budget ends first, a candidate found is still a replayed refutation (statistics say it may not be the
least); otherwise the verdict is unknown with every word up to the depth every unexplored batch lies below.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import numpy as np

from ...batched import evaluator_for
from ...batched.prefix_tree import Level, PrefixTreeEvaluator
from ...contract import Counted, CountingGoal, PrefixTree, Task, capability
from ...fingerprint import model_digest
from ...regular import Language
from ...semantics import UnsupportedInMode
from ...verdict import Verdict
from ..base import Merge, ProgressEvent, Proof, Run

ENGINE = "enumerate"
BATCH = 1024  # nodes evaluated together: (1024, 101, 32) gathered keys of a head are 26 MiB at length 100


def applies(task: Task) -> bool:
    """Whether the prefix-tree scan decides this task (module docstring); otherwise the padded scan does."""
    prop = task.prop
    if task.settings.certify or not isinstance(prop, PrefixTree) or not isinstance(prop, Counted):
        return False
    domain = task.strings()
    if domain.language is None or not isinstance(domain.language, Language):
        return False
    if not all(head.causal for _, _, head in task.model.heads()):
        return False
    try:
        goal = prop.counting_goal(task)
    except UnsupportedInMode:  # the property refuses the counter-machine view (crasp-equivalence's float reading)
        return False
    return (
        not goal.all_lengths
        and goal.positions is None
        and not goal.empty_checked
        and goal.least in ("prefix", "string")
    )


@dataclass
class _Batch:
    """Children to evaluate: ``parent[up[k]] + letters[k]``, reaching automaton states ``states[k]``."""

    parent: Level
    up: np.ndarray
    letters: np.ndarray
    states: np.ndarray


class _Tree:
    """The automaton's view of the prefix tree: which nodes exist, which are checked, each node's least word."""

    def __init__(self, language: Language, goal: CountingGoal):
        self.language, self.goal, self.longest = language, goal, goal.max_length
        self.counts = language.counts(self.longest)  # counts[l][q]: words of length l from q to acceptance
        self.delta = np.array(language.delta, dtype=np.int64).reshape(len(language.delta), len(language.alphabet))
        self.accepting = np.array(language.accepting, dtype=bool)
        states = len(language.delta)
        # alive[m, q]: a node of m letters in state q begins some word of the domain (min..max length)
        self.alive = np.zeros((self.longest + 2, states + 1), dtype=bool)  # column ``states``: the dead state
        self.alive[: self.longest + 1, :states] = language.completable(goal.min_length, self.longest)
        self.dead = states

    def expand(self, parent: Level, states: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(up, letters, states) of every child of ``parent`` that exists, in the domain's order."""
        letters = self.delta.shape[1]
        up = np.repeat(np.arange(len(states)), letters)
        letter = np.tile(np.arange(letters), len(states))
        target = self.delta[states][:, :].reshape(-1)
        target = np.where(target < 0, self.dead, target)
        keep = self.alive[parent.depth + 1, target]
        return up[keep], letter[keep], target[keep]

    def checked(self, depth: int, states: np.ndarray) -> np.ndarray:
        if depth < self.goal.first_position:
            return np.zeros(len(states), dtype=bool)
        if self.goal.least == "string":  # accept mode: the words of the domain only
            return np.asarray(self.accepting[states] & (depth >= self.goal.min_length), dtype=bool)
        return np.ones(len(states), dtype=bool)

    def least_word(self, prefix: tuple[int, ...], state: int) -> tuple[int, ...]:
        """The least word of the domain beginning with ``prefix`` (shortest, then lexicographically least)."""
        m = len(prefix)
        if self.goal.least == "string":
            return prefix
        for rest in range(max(0, self.goal.min_length - m), self.longest - m + 1):
            if self.counts[rest][state]:
                return prefix + self.language.least_completion(state, rest)
        raise AssertionError("a node of the tree begins no word")  # alive nodes only


FIRST_WALK = 8  # the first walk goes to an eighth of max-length: cheap, and it measures the evaluation's speed
SETUP_DEPTHS = 50  # a node's cost ~ (its depth + this): the per-position steps weigh about 50 keys' attention


def cumulative_weights(sizes: list[int]) -> list[int]:
    """[m]: the evaluation cost of every node up to depth m, in units of one key's attention (``SETUP_DEPTHS``)."""
    return list(itertools.accumulate(size * (depth + SETUP_DEPTHS) for depth, size in enumerate(sizes)))


def next_limit(weights: list[int], proven: int, seconds_per_weight: float, remaining: float) -> int:
    """The depth of the next walk: all of max-length when the budget is expected to cover the whole tree, else
    the deepest limit it is expected to cover (at least one more than ``proven``). A guess only: each walk
    proves what it completes, and the next one starts over from the root.

    Each walk re-evaluates the shallower nodes, but the tree of L_3 or L_4 grows like depth^2 or depth^3, so an
    eighth costs little; a single depth-first walk that the budget ends would prove almost nothing, as it leaves
    the shallow siblings of its path for last."""
    longest = len(weights) - 1
    cost = [seconds_per_weight * float(w) for w in weights]
    if cost[longest] <= remaining:
        return longest
    within = [m for m in range(proven + 1, longest + 1) if cost[m] <= 0.9 * remaining]
    return within[-1] if within else longest


def check(task: Task, run: Run) -> Verdict:
    domain = task.strings()
    language = domain.language
    assert isinstance(language, Language)  # applies()
    goal = capability(task.prop, Counted).counting_goal(task)
    tree = _Tree(language, goal)
    sizes = language.prefix_counts(goal.min_length, goal.max_length)  # the nodes of each depth
    total_nodes, weights = sum(sizes), cumulative_weights(sizes)
    tokens = list(domain.alphabet)
    # one compiled program per model, arithmetic and length in this process: the yang exports check the same
    # model twice (its words, every string), and compiling costs ~20 s at length 100
    key = f"prefix-tree:{model_digest(task.model)}:{task.arithmetic!r}"
    batched = evaluator_for(key, task.model, task.arithmetic, tokens, device="cpu", backend="numpy")
    evaluator = PrefixTreeEvaluator(task.model, task.arithmetic, tokens, domain.max_length, batched)
    best: tuple[int, ...] | None = None
    empty_checked = goal.first_position <= 0 and (goal.least == "prefix" or tree.accepting[0]) and tree.alive[0, 0]
    if empty_checked and task.prop.violation(task, ()) is not None:  # the empty word: the least of all
        best = ()
    label = f"{ENGINE}: prefixes of {domain.describe()}"
    # explored: every node up to this depth evaluated (a walk prunes below a failing word's length once one is known)
    evaluated, explored, walks = 0, 0, []
    limit = min(domain.max_length, max(1, domain.max_length // FIRST_WALK))
    while best is None or len(best) > explored:  # else no node deeper than ``explored`` begins a smaller word
        started = time.monotonic()
        planned = sum(sizes[: limit + 1])
        walked, best, expired = _walk(task, run, evaluator, tree, limit, best, label, evaluated, planned)
        evaluated += walked
        walks.append(limit)
        if expired:
            break
        explored = limit if best is None else min(limit, len(best))
        if explored == domain.max_length:
            break
        rate = (time.monotonic() - started) / max(weights[limit], 1)
        limit = next_limit(weights, explored, rate, run.deadline.remaining())
    right = explored if best is None else min(explored, len(best) - 1)  # every word up to this length is right
    stats = {
        "prefix_tree": True,
        "prefix_tree_nodes": total_nodes,
        "prefixes_evaluated": evaluated,
        "space_size": domain.size(),
        "every_input_up_to_length": right,
        "inputs_checked": sum(tree.counts[n][0] for n in range(domain.min_length, right + 1)),
        "walks": walks,
        "complete": best is None and right == domain.max_length,
        "wide_steps": evaluator.wide_steps,
        **task.prop.statistics(task),
    }
    merge = Merge(task, run, ENGINE, stats)
    if best is not None:
        stats["least"] = len(best) <= explored  # every node up to its length explored: no smaller failing word
        word = tuple(domain.alphabet[i] for i in best)
        merge.replay(word, f"the prefix-tree scan flags {''.join(word)!r}", "exhaustive")
    elif right < domain.max_length:
        what = (
            f"{evaluated} prefixes evaluated (the tree has {total_nodes}), no violation so far; every word up to "
            f"length {right} checked"
        )
        merge.undecided(f"timeout: {what}", [f"exhaustive {ENGINE} (prefix tree): {what}"])
    return merge.verdict(Proof(f"all {stats['space_size']} inputs", evaluated=stats["inputs_checked"]), "exhaustive")


def _walk(
    task: Task,
    run: Run,
    evaluator: PrefixTreeEvaluator,
    tree: _Tree,
    limit: int,
    best: tuple[int, ...] | None,
    label: str,
    before: int,
    planned: int,
) -> tuple[int, tuple[int, ...] | None, bool]:
    """Depth first over the nodes up to ``limit`` letters (and, once a failing word is known, up to its length):
    (nodes evaluated, the least failing word known, whether the budget ended the walk)."""
    pending: list[_Batch] = []
    evaluated = 0

    def push(level: Level, states: np.ndarray) -> None:
        if level.depth >= limit or (best is not None and level.depth >= len(best)):
            return
        up, letters, targets = tree.expand(level, states)
        for start in reversed(range(0, len(up), BATCH)):  # the first batch (least prefixes) is explored first
            piece = slice(start, start + BATCH)
            pending.append(_Batch(level, up[piece], letters[piece], targets[piece]))

    push(evaluator.root(), np.zeros(1, dtype=np.int64))
    while pending:
        if run.deadline.expired():
            return evaluated, best, True
        batch = pending.pop()
        if best is not None and batch.parent.depth >= len(best):
            continue
        level = evaluator.children(batch.parent, batch.up, batch.letters)
        evaluated += len(level)
        checked = tree.checked(level.depth, batch.states)
        if checked.any():
            rows = evaluator.rows(level)
            prop = capability(task.prop, PrefixTree)
            flagged = prop.prefix_tree_violations(task, rows, level.readout, evaluator.den) & checked
            for k in np.flatnonzero(flagged):
                word = tree.least_word(tuple(int(x) for x in rows[k]), int(batch.states[k]))
                if best is None or (len(word), word) < (len(best), best):
                    best = word
        run.progress(
            ProgressEvent(ENGINE, f"{label} (up to {limit})", before + evaluated, before + planned, "prefixes")
        )
        push(level, batch.states)
    return evaluated, best, False

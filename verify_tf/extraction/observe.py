"""Stage 1: run the model as the counting engine's counter machine and record what every layer sees.

``CounterModel.step(..., trace=...)`` reports, per attention block, the id of the stream class entering it and
the heads' outputs (stored units). Along every prefix the observer also keeps, per attention layer, the count of
each stream class over the positions so far (BOS and the position itself included): what a head reads. Two
prefixes with the same machine state and the same count vectors are the same node (every later position of
both sees the same classes, counts and outputs), so the exploration is breadth-first over those nodes, one length
at a time, up to ``max_length`` or until a length holds more than ``max_nodes`` nodes. Words given explicitly
(the counterexamples of earlier rounds) are walked letter by letter on top.

Every position met becomes a ``Position``: plain data for the later stages, which never step the model again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ..engines.counting.counters import CounterModel, State
from ..ir import Model
from ..work import Deadline

Counts = tuple[tuple[int, int], ...]  # (stream class id, count), sorted by id, counts > 0 only


class Budget(Exception):
    """The deadline passed during extraction (the message says in which stage)."""


@dataclass(frozen=True)
class Position:
    """One position of an explored prefix: ``word`` ends with it."""

    word: str
    classes: tuple[int, ...]  # per attention layer: the id of the stream class entering it
    counts: tuple[Counts, ...]  # per attention layer: the class counts over the prefix (BOS and this one included)
    outputs: tuple[tuple[tuple[int, ...], ...], ...]  # per attention layer, per head: the output (stored units)
    readout: Fraction
    accepts: bool  # readout > threshold

    @property
    def letter(self) -> str:
        return self.word[-1]


@dataclass
class Observed:
    """Everything the later stages need, as plain data."""

    counter: CounterModel
    blocks: tuple[int, ...]  # the block index of each attention layer
    alphabet: tuple[str, ...]
    bos_classes: tuple[int, ...] | None  # BOS's stream class per attention layer (None without BOS)
    positions: list[Position] = field(default_factory=list)
    explored_up_to: int = 0  # every prefix up to this length is represented
    nodes: int = 0
    extra_words: tuple[str, ...] = ()
    growth: list[tuple[int, ...]] = field(default_factory=list)  # per explored length: classes met so far, per layer

    def classes_of(self, layer: int) -> list[int]:
        """Every stream class met entering attention layer ``layer`` (BOS's included), by id."""
        found = {p.classes[layer] for p in self.positions}
        if self.bos_classes is not None:
            found.add(self.bos_classes[layer])
        return sorted(found)


@dataclass
class _Node:
    state: State
    counts: tuple[dict[int, int], ...]
    word: str


def _key(node: _Node) -> tuple[Any, ...]:
    return node.state, tuple(tuple(sorted(c.items())) for c in node.counts)


class _Walker:
    def __init__(self, counter: CounterModel, blocks: tuple[int, ...], threshold: Fraction) -> None:
        self.counter, self.blocks, self.threshold = counter, blocks, threshold
        self.offset = 0 if counter.bos is None else 1

    def root(self) -> tuple[_Node, tuple[int, ...] | None]:
        counter = self.counter
        empty: tuple[dict[int, int], ...] = tuple({} for _ in self.blocks)
        if counter.bos is None:
            return _Node(counter.empty(), empty, ""), None
        trace: list[tuple[int, int, tuple[Any, ...]]] = []
        state, _, _ = counter.step(counter.empty(), 0, counter.bos, trace=trace)
        classes = tuple(z for _, z, _ in trace)
        return _Node(state, tuple({z: 1} for z in classes), ""), classes

    def step(self, node: _Node, letter: str) -> tuple[_Node, Position]:
        trace: list[tuple[int, int, tuple[Any, ...]]] = []
        state, observation, _ = self.counter.step(node.state, len(node.word) + self.offset, letter, trace=trace)
        classes = tuple(z for _, z, _ in trace)
        counts = []
        for old, z in zip(node.counts, classes):
            new = dict(old)
            new[z] = new.get(z, 0) + 1
            counts.append(new)
        child = _Node(state, tuple(counts), node.word + letter)
        position = Position(
            child.word,
            classes,
            tuple(tuple(sorted(c.items())) for c in counts),
            tuple(outputs for _, _, outputs in trace),
            observation.readout,
            observation.readout > self.threshold,
        )
        return child, position


def observe(
    model: Model,
    counter: CounterModel,
    alphabet: Sequence[str],
    threshold: Fraction,
    max_length: int,
    max_nodes: int,
    deadline: Deadline,
    words: Iterable[str] = (),
) -> Observed:
    """Explore ``model`` (as ``counter``) up to ``max_length`` letters, then along ``words`` (module docstring)."""
    blocks = tuple(i for i, block in enumerate(model.blocks) if block.attention is not None)
    walker = _Walker(counter, blocks, threshold)
    root, bos_classes = walker.root()
    observed = Observed(counter, blocks, tuple(alphabet), bos_classes)
    seen: set[tuple[Any, ...]] = {_key(root)}
    met: set[tuple[Any, ...]] = set()  # positions: (node, letter, classes); one node is reached by several letters

    classes: list[set[int]] = [set() if bos_classes is None else {bos_classes[i]} for i in range(len(blocks))]

    def record(child: _Node, position: Position) -> None:
        mark = (_key(child), position.letter, position.classes)
        if mark not in met:
            met.add(mark)
            observed.positions.append(position)
            for layer, z in enumerate(position.classes):
                classes[layer].add(z)

    level = [root]
    for length in range(1, max_length + 1):
        following: list[_Node] = []
        for node in level:
            if deadline.expired():
                raise Budget(f"exploring length {length} ({observed.nodes} nodes so far)")
            for letter in alphabet:
                child, position = walker.step(node, letter)
                record(child, position)
                key = _key(child)
                if key not in seen:
                    seen.add(key)
                    following.append(child)
        observed.nodes += len(following)
        level = following
        observed.explored_up_to = length
        observed.growth.append(tuple(len(m) for m in classes))
        if len(level) > max_nodes:
            break
    extra = tuple(dict.fromkeys(words))
    for word in extra:
        node = root
        for letter in word:
            if deadline.expired():
                raise Budget(f"walking the counterexample {word!r}")
            node, position = walker.step(node, letter)
            record(node, position)
    observed.extra_words = extra
    return observed


__all__ = ["Budget", "Counts", "Observed", "Position", "observe"]

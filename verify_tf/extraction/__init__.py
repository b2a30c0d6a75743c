"""From a model back to a program: extract a C-RASP program from a causal fixed-precision transformer, proved
equal to the model (Yang, Cadilhac & Chiang 2025, the direction model → program).

A pipeline of small stages with plain data between them (docs/crasp.md, "Extract"):

1. ``observe``: the counting engine's counter machine over the prefixes, recording per attention layer each
   position's stream class, the class counts the heads read and the heads' outputs;
2. ``heads``: every rounding boundary of every head as a linear inequality over those counts (an *atom*);
3. ``levels``: each Boolean the program needs (the decision; each count's operand) as a table over the letter and
   the atoms of lower layers;
4. ``boolean``: small formulas for those tables (features dropped greedily, prime implicants);
5. ``write``: the ``.cr`` text, parsed back;
6. ``prove``: ``crasp-equivalence`` of the model against the file with ``lengths: all``.

A refutation in step 6 is a string the observation had not met: the next *round* explores every prefix up to
twice the length explored before, and at least up to the string's (merged nodes, as before), walks it, and
extracts again.
``extract`` is the top level; ``DoesNotApply`` says when the construction does not apply and what would make it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from ..engines.counting.counters import CounterModel, NotApplicable
from ..ir import AlphabetTokens, Model
from ..semantics import Arithmetic
from ..work import Deadline
from .heads import Boundaries, DoesNotApply, ExtractionError, check_applies
from .levels import build
from .observe import Budget, observe
from .prove import PROVED, REFUTED, UNKNOWN, UP_TO, Decision, against, decide
from .write import Written, write

MAX_CLASSES = 128  # stream classes per layer beyond which the classes are taken to grow with the length
GROWING = 32  # ... or this many, a third of them new at the last two lengths


@dataclass
class Round:
    """One round: what was observed and what the proof said."""

    explored_up_to: int
    positions: int
    classes: tuple[int, ...]  # stream classes per attention layer
    atoms: int
    definitions: int
    depth: int
    decision: str
    witness: str | None


@dataclass
class Extraction:
    """The extracted program, its figures and the verdicts about it."""

    written: Written
    decision: Decision
    rounds: list[Round] = field(default_factory=list)
    against: Decision | None = None


def _alphabet(model: Model) -> tuple[str, ...]:
    tokens = model.tokens
    if not isinstance(tokens, AlphabetTokens):
        raise DoesNotApply(
            "the model reads grid tokens, not letters: C-RASP reads words; extraction applies to a model with an "
            "alphabet (tokens: {alphabet: ...})"
        )
    return tuple(s for s in tokens.symbols if s != tokens.bos)


def _heads_by_layer(model: Model) -> dict[int, str]:
    found: dict[int, str] = {}
    layer = 0
    for index, block in enumerate(model.blocks):
        if block.attention is not None:
            heads = ", ".join(
                f"layers[{index}].heads[{h}] ({head.scoring})" for h, head in enumerate(block.attention.heads)
            )
            found[layer] = heads
            layer += 1
    return found


def extract(
    model: Model,
    arith: Arithmetic,
    out: Path,
    deadline: Deadline,
    *,
    threshold: Fraction = Fraction(0),
    explore: int = 10,
    max_nodes: int = 20_000,
    check_length: int = 64,
    rounds: int = 6,
    reference: Path | None = None,
    alphabet: tuple[str, ...] | None = None,
    title: str = "extracted by verify-tf crasp extract",
    progress: Callable[[str], None] = lambda line: None,
    every_length: float | None = None,
) -> Extraction:
    """Extract a program from ``model``, write it to ``out`` and decide it against the model (module docstring).

    ``explore``: the lengths observed exhaustively (merged nodes, at most ``max_nodes`` per length);
    ``check_length``: the N of the proof's exhaustive part (and of ``equal up to N``); ``rounds``: how many
    counterexamples may be walked before a remaining refutation is an error; ``reference``: a ``.cr`` file to
    decide the extracted program against at every length; ``alphabet``: the words' letters (default: the
    model's); ``every_length``: at most this many seconds for each every-length attempt (default: its share of
    the time left, ``prove.decide``).
    """
    if model.float_reading:
        raise DoesNotApply(
            "the model is read as float (reading: float): C-RASP counts exactly, and a float computation is not a "
            "function of counts with exact boundaries; extraction applies to its fixed-point reading (the import's "
            "quantize: {bits: ..., frac: ...} without reading: float)"
        )
    alphabet = alphabet or _alphabet(model)
    try:
        counter = CounterModel(model, arith)
    except NotApplicable as reason:
        raise DoesNotApply(
            f"{reason}; extraction applies to causal models without relative positions, read as counts "
            "(docs/counting.md)"
        ) from None
    check_applies(counter)
    heads = _heads_by_layer(model)
    words: list[str] = []
    length = explore  # each round explores twice as far, and at least up to the counterexample
    result: Extraction | None = None
    for number in range(1, rounds + 1):
        observed = observe(model, counter, alphabet, threshold, length, max_nodes, deadline, words)
        classes = tuple(len(observed.classes_of(layer)) for layer in range(len(observed.blocks)))
        _pays(observed.growth)
        boundaries = Boundaries(observed)
        levels = build(observed, boundaries, deadline)
        atoms = boundaries.all
        written = write(levels, title, heads)
        out.write_text(written.text, encoding="utf-8")
        if deadline.expired():
            raise Budget(f"round {number}: before the proof")
        decision = decide(
            model, arith, alphabet, out, threshold, max(check_length, explore), deadline, every_length=every_length
        )
        round_ = Round(
            observed.explored_up_to,
            len(observed.positions),
            classes,
            len(atoms),
            written.definitions,
            written.depth,
            decision.describe(),
            decision.witness,
        )
        progress(
            f"round {number}: explored up to {observed.explored_up_to} (+{len(words)} counterexamples), "
            f"{len(observed.positions)} positions, classes per layer {'/'.join(map(str, classes))}, "
            f"{len(atoms)} boundaries -> {written.definitions} definitions, depth {written.depth}: "
            f"{decision.describe()}"
        )
        result = Extraction(written, decision, (result.rounds if result else []) + [round_])
        if decision.status != REFUTED:
            break
        assert decision.witness is not None
        if decision.witness in words:
            raise ExtractionError(f"the program still differs from the model on {decision.witness!r} after walking it")
        words.append(decision.witness)
        length = max(2 * length, len(decision.witness))
    assert result is not None
    if result.decision.status == REFUTED:
        raise ExtractionError(
            f"after {rounds} rounds the extracted program still differs from the model on "
            f"{result.decision.witness!r} (an extraction bug; the program is in {out})"
        )
    if reference is not None and not deadline.expired():
        result.against = against(
            written.program, reference, alphabet, max(check_length, explore), deadline, out, every_length
        )
    return result


def _pays(growth: list[tuple[int, ...]]) -> None:
    """``DoesNotApply`` when some layer's stream classes keep growing with the length: more than ``MAX_CLASSES``,
    or at least ``GROWING`` of them with a third met at the last two lengths explored."""
    if not growth:
        return
    last, before = growth[-1], growth[max(len(growth) - 3, 0)]
    for layer, count in enumerate(last):
        if count > MAX_CLASSES or (count >= GROWING and 3 * (count - before[layer]) >= count):
            shown = ", ".join(str(g[layer]) for g in growth)
            raise DoesNotApply(
                f"merging does not pay: attention layer {layer} meets {count} stream classes by length {len(growth)} "
                f"and they keep growing with the length (classes met by each length: {shown}); each would be a "
                "definition. Coarser rounding (fewer fractional bits) or fewer layers collapses them "
                "(docs/performance.md, the counting engine's tables)"
            )


__all__ = [
    "PROVED",
    "REFUTED",
    "UNKNOWN",
    "UP_TO",
    "Budget",
    "Decision",
    "DoesNotApply",
    "Extraction",
    "ExtractionError",
    "Round",
    "extract",
]

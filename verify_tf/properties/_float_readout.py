"""``output-bounds`` on a checkpoint read as it runs in float32 (``model: {huggingface: ...}``, ``{nanogpt: ...}``).

Not a property module (its name starts with ``_``): the hooks ``output_bounds`` calls when the task's model is a
float model without an IR of its own (``Model.float_model`` with ``has_ir`` false: ``builders.huggingface``). The
rule (docs/semantics.md §7 "Float as run"), per input and checked position p, from the exact enclosure [lo, hi] of
every float32 evaluation's readout (``float_model.enclose``):

* HOLDS when [lo, hi] ⊂ [bound lo, bound hi]; VIOLATED when it lies wholly outside (every float32 evaluation
  violates); UNDECIDED otherwise;
* proved: every checked position of every input HOLDS; refuted: the first VIOLATED input (the drivers' order),
  replayed through the library's own forward pass (``float_model.replay``: transformers with SDPA and eager
  attention, or verify-tf's float32 mirror when transformers is not installed); every replayed value must lie
  inside the enclosure and outside the bounds, or the check reports an error in the enclosure, never a verdict;
  unknown: no VIOLATED input, and the first UNDECIDED one is named with its enclosure and the replayed values.

The exhaustive engines report the enclosed readout range (the least lo and the largest hi they saw).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ..contract import Array, Batched, Capability, CertifiedOutputs, EachInput, Measures, Task, Witness
from ..domain import format_input
from ..floats import decode
from ..floats.enclosure import SCALE, Box
from ..semantics import UnsupportedInMode
from ..witness import input_to_json
from .base import bos_offset, compared_positions

BATCH = 64  # rows per enclosure: exact integers in object arrays (memory, and the deadline's granularity)
UNDECIDED = "float_undecided"
HOLDS, VIOLATED, OPEN = 0, 1, 2
# what the float reading offers: each input evaluated through the enclosure, in batches, certified by its enclosure;
# the capabilities that read the IR (solver queries, cube bounds, the counter machine) it does not
CAPABILITIES: frozenset[type[Capability]] = frozenset({EachInput, Batched, CertifiedOutputs})


def reads_checkpoint(task: Task) -> bool:
    """Whether the task's model is a checkpoint read as it runs (a float model without an IR of its own)."""
    source = task.model.float_model
    return source is not None and not getattr(source, "has_ir", True)


def refuse(task: Task, view: str) -> None:
    """A view of the claim that reads the model IR (``view``: "solver queries encode", ...) on a checkpoint."""
    if reads_checkpoint(task):
        raise UnsupportedInMode(
            f"{view} the model IR; a checkpoint read as it runs has none: its float reading is decided input by "
            "input on the enclosure (docs/import.md)"
        )


def _positions(task: Task, length: int) -> list[tuple[int | str, int]]:
    return compared_positions(task.model, length, task.options.include_bos, task.options.positions)


def enclosure(task: Task, rows: Array) -> Box:
    """The readout's enclosure at every stream position (B, n + BOS) for rows of the domain's alphabet indices."""
    source = task.model.float_model
    ids = source.network.ids(np.asarray(rows, dtype=np.int64), tuple(task.strings().alphabet))
    box: Box = source.enclose(ids)
    return box


def _bounds(task: Task) -> tuple[int | None, int | None]:
    """The bounds as integers over 2^SCALE: lo rounded up, hi rounded down (a readout over 2^SCALE is then inside
    [lo, hi] iff inside the integer bounds)."""
    options = task.options
    scale = 1 << SCALE
    lo = None if options.lo is None else -((-options.lo.numerator * scale) // options.lo.denominator)
    hi = None if options.hi is None else (options.hi.numerator * scale) // options.hi.denominator
    return lo, hi


def statuses(task: Task, box: Box, columns: list[int]) -> np.ndarray:
    """HOLDS / VIOLATED / OPEN per row and checked column."""
    lo, hi = _bounds(task)
    low, high = box.lo[:, columns], box.hi[:, columns]
    inside = np.ones(low.shape, dtype=bool)
    outside = np.zeros(low.shape, dtype=bool)
    if lo is not None:
        inside &= low >= lo
        outside |= high < lo
    if hi is not None:
        inside &= high <= hi
        outside |= low > hi
    return np.where(outside, VIOLATED, np.where(inside, HOLDS, OPEN)).astype(np.int8)


def measure_kinds() -> dict[str, str]:
    return {"readout_min": "min", "readout_max": "max", UNDECIDED: "max"}


def batched(task: Task, rows: Array) -> tuple[Array, Measures]:
    """The enumerate hook: rows where every evaluation violates at some checked position are flagged; the others
    the enclosure cannot decide are measured (``UNDECIDED``, largest at the first such row)."""
    columns = [p for _, p in _positions(task, rows.shape[1])]
    if not columns:
        zero = np.zeros(len(rows), dtype=np.int64)
        return np.zeros(len(rows), dtype=bool), {UNDECIDED: (zero, 1)}
    flagged, open_, low, high = [], [], [], []
    for start in range(0, len(rows), BATCH):
        box = enclosure(task, rows[start : start + BATCH])
        status = statuses(task, box, columns)
        flagged.append((status == VIOLATED).any(axis=1))
        open_.append((status == OPEN).any(axis=1).astype(np.int64))
        low.append(box.lo[:, columns].min(axis=1))
        high.append(box.hi[:, columns].max(axis=1))
    scale = 1 << SCALE
    return np.concatenate(flagged), {
        UNDECIDED: (np.concatenate(open_), 1),
        "readout_min": (np.concatenate(low), scale),
        "readout_max": (np.concatenate(high), scale),
    }


def measure(task: Task, tokens: tuple[Any, ...]) -> dict[str, Fraction]:
    rows = _rows(task, tokens)
    _, found = batched(task, rows)
    return {name: Fraction(int(values[0]), den) for name, (values, den) in found.items()}


def _rows(task: Task, tokens: tuple[Any, ...]) -> np.ndarray:
    alphabet = task.strings().alphabet
    return np.array([[alphabet.index(t) for t in tokens]], dtype=np.int64).reshape(1, len(tokens))


def _interval(box: Box, p: int) -> tuple[Fraction, Fraction]:
    return Fraction(int(box.lo[0, p]), 1 << SCALE), Fraction(int(box.hi[0, p]), 1 << SCALE)


def shown(low: Fraction, high: Fraction) -> str:
    """An interval in decimals rounded outward (it still contains what it encloses)."""
    return f"[{decode.outward(low, down=True, places=9)}, {decode.outward(high, down=False, places=9)}]"


def shown_interval(box: Box, p: int) -> str:
    return shown(*_interval(box, p))


def _replays(task: Task, rows: np.ndarray) -> dict[str, np.ndarray]:
    source = task.model.float_model
    ids = source.network.ids(rows, tuple(task.strings().alphabet))
    replayed: dict[str, np.ndarray] = source.replay(ids)
    return replayed


def violation(task: Task, tokens: tuple[Any, ...]) -> Witness | None:
    """The first checked position where every float32 evaluation violates the bounds, replayed; None if none."""
    rows = _rows(task, tokens)
    positions = _positions(task, len(tokens))
    if not positions:
        return None
    box = enclosure(task, rows)
    status = statuses(task, box, [p for _, p in positions])[0]
    wrong = np.flatnonzero(status == VIOLATED)
    if len(wrong) == 0:
        return None
    label, p = positions[int(wrong[0])]
    low, high = _interval(box, p)
    replays = _replays(task, rows)
    values: dict[str, Fraction] = {}
    for name, array in replays.items():
        value = Fraction(array[0, p])
        if not low <= value <= high:
            raise RuntimeError(
                f"enclosure check failed: {name} gives the readout {float(value):.9g} at position {label} of "
                f"{format_input(tokens)}, outside the enclosure {shown_interval(box, p)}"
            )
        if not task.options.outside(value):
            raise RuntimeError(
                f"enclosure check failed: it says every float32 evaluation at position {label} of "
                f"{format_input(tokens)} lies outside {task.options.shown()}, but {name} gives {float(value):.9g}"
            )
        values[name] = value
    source = task.model.float_model
    shown = "; ".join(f"{name}: {float(v):.9g}" for name, v in values.items())
    first = next(iter(values.values()))
    offset = bos_offset(task.model)
    return {
        "input": input_to_json(tokens),
        "position": label,
        "value": str(first),
        "enclosure": shown_interval(box, p),
        "readout": [str(Fraction(v)) for v in next(iter(replays.values()))[0, offset:]],
        "reading": source.reading(),
        "replayed_in": {name: repr(float(v)) for name, v in values.items()},
        "summary": f"X = {format_input(tokens)}: {source.network.readout.describe} at position {label} is in "
        f"{shown_interval(box, p)} for every float32 evaluation, outside {task.options.shown()} ({shown})",
    }


def undecided_or_proof(task: Task, statistics: dict[str, Any]) -> None:
    """Raise ``UnsupportedInMode`` (the verdict becomes unknown) naming the first undecided input, if any."""
    if Fraction(statistics.get(UNDECIDED, "0")) <= 0:
        return
    space = task.prop.input_space(task)
    index = int(statistics[f"{UNDECIDED}_at"])
    tokens = tuple(space.decode(space.rows(index, index + 1)[0][0]))
    rows = _rows(task, tokens)
    positions = _positions(task, len(tokens))
    box = enclosure(task, rows)
    status = statuses(task, box, [p for _, p in positions])[0]
    label, p = positions[int(np.flatnonzero(status == OPEN)[0])]
    replayed = ", ".join(f"{float(Fraction(v[0, p])):.9g} ({name})" for name, v in _replays(task, rows).items())
    raise UnsupportedInMode(
        f"float reading: X = {format_input(tokens)} at position {label}: the enclosure of every float32 evaluation "
        f"{shown_interval(box, p)} is not inside {task.options.shown()} and not outside it; the replay gives "
        f"{replayed} (it decides nothing): too wide to decide"
    )


def proof_text(task: Task, default: str, statistics: dict[str, Any]) -> str:
    undecided_or_proof(task, statistics)
    seen = ""
    if "readout_min" in statistics:
        seen = (
            f"; readout enclosed in {shown(Fraction(statistics['readout_min']), Fraction(statistics['readout_max']))}"
        )
    return f"{default}{seen}; {task.model.float_model.proof_clause()}"


def certified_outputs(task: Task, rows: Array) -> tuple[Array, int]:
    """What a certificate of a float-reading proof digests per input: the readout's enclosure at every position."""
    parts = []
    for start in range(0, len(rows), BATCH):
        box = enclosure(task, rows[start : start + BATCH])
        parts.append(np.concatenate([box.lo, box.hi], axis=1))
    return np.concatenate(parts), 1 << SCALE


def certified_check(task: Task, tokens: tuple[Any, ...]) -> str | None:
    """The proof's claim re-checked on one sampled input: every checked position inside, the replay inside too."""
    rows = _rows(task, tokens)
    positions = _positions(task, len(tokens))
    box = enclosure(task, rows)
    status = statuses(task, box, [p for _, p in positions])[0]
    if (status != HOLDS).any():
        return f"the enclosure does not hold at position {positions[int(np.flatnonzero(status != HOLDS)[0])][0]}"
    for name, values in _replays(task, rows).items():
        for label, p in positions:
            low, high = _interval(box, p)
            if not low <= Fraction(values[0, p]) <= high:
                return f"{name} lies outside the enclosure at position {label}"
    return None

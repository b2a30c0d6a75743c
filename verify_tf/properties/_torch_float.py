"""``crasp-equivalence`` in the float reading of a torch import (``architecture: {reading: float}``): the decisions of
the float32 model as trained, from an exact enclosure of every float32 evaluation (docs/semantics.md §7).

Not a property module (its name starts with ``_``): the hooks ``crasp_equivalence`` calls when the task's model
carries a float model (``Model.float_model``). The rule is tracr's (``rasp_equivalence``'s float reading), for a
decision "the readout exceeds the threshold":

* the float model's output at a position is the trained readout ``o = u·z + b`` (its bias included, also when the IR
  dropped it with ``readout-bias: drop``); it accepts iff ``o > threshold + b_dropped`` (the IR's ``u·z >
  threshold`` with the dropped bias moved back: the exported threshold −b makes this ``o > 0``);
* per prefix: RIGHT when the enclosure of ``o`` is strictly on the program's side (``floats.decode.threshold``),
  WRONG when it is wholly on the other, UNDECIDED otherwise;
* proved: every checked prefix RIGHT; refuted: the least WRONG one, replayed in torch itself under ``no_grad`` and
  with autograd (both must decide wrong, and lie inside the enclosure, or the check reports an enclosure error);
  unknown: no WRONG one, and the least UNDECIDED is named with its enclosure.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..contract import Array, Measures, Task, Witness
from ..crasp.arrays import program_outputs_batched
from ..crasp.ast import Program
from ..crasp.interpreter import run_program
from ..crasp.parser import load_program
from ..floats import decode
from ..floats.enclosure import SCALE, Box
from ..floats.torch_enclosure import TORCH_EXP_ERROR, enclose_readout, prepare_torch
from ..numbers import fmt
from ..semantics import UnsupportedInMode
from ..witness import input_to_json

FLOAT_AS_TRAINED = "float32 as trained"  # = builders.torch_float.FLOAT_AS_TRAINED (that module imports torch)
FLOAT_BATCH = 64  # rows per enclosure (exact integers in object arrays: memory, and the deadline's granularity)
UNDECIDED_MEASURE = "float_undecided"


@lru_cache(maxsize=32)
def _program(path: Path) -> Program:
    return load_program(path)


def reads_float(task: Task) -> bool:
    """Whether the task's model carries its float model (a torch import under ``reading: float``, or a checkpoint
    read as it runs: ``builders.hf_checkpoint.CheckpointFloatModel``)."""
    return task.model.float_model is not None


def _checkpoint(task: Task) -> bool:
    """A Hugging Face or nanoGPT checkpoint (it encloses and names its replays itself), not a torch import."""
    return not getattr(task.model.float_model, "has_ir", True)


def reading(task: Task) -> str:
    """The reading beside the verdict: the checkpoint's own (``float32 as run, replayed in ...``) or the torch
    import's (``float32 as trained``)."""
    return str(task.model.float_model.reading()) if _checkpoint(task) else FLOAT_AS_TRAINED


def _exact(value: Any) -> Fraction:
    """A replayed readout as the rational it is: a float (torch's float32, as a Python float) or a Fraction (a
    checkpoint's replay, which takes logit differences exactly)."""
    return value if isinstance(value, Fraction) else Fraction(float(value))


def _named(task: Task, kernel: str) -> str:
    """How a witness names one replay: ``torch (no_grad)`` for a torch import; a checkpoint's replays are named."""
    return kernel if _checkpoint(task) else f"torch ({kernel})"


def cut(task: Task) -> Fraction:
    """The float model accepts iff its readout o = u·z + b exceeds this (module docstring)."""
    return Fraction(task.options.threshold) + Fraction(task.model.float_model.dropped_bias)


def enclosure(task: Task, rows: Array) -> Box:
    """Per row and prefix length p = 0..n: the enclosure of the readout deciding the prefix (B, n + 1); p = 0 is the
    BOS position, or (no BOS) an exact 0 never compared (the model rejects the empty prefix, as the IR does)."""
    source = task.model.float_model
    network = source.network
    ids = network.ids(np.asarray(rows, dtype=np.int64), tuple(task.strings().alphabet))
    box = source.enclose(ids) if _checkpoint(task) else enclose_readout(prepare_torch(network), ids)
    if network.bos is not None:
        return box
    zero = np.zeros((len(rows), 1), dtype=object)
    return Box(np.concatenate([zero, box.lo], axis=1), np.concatenate([zero, box.hi], axis=1))


def statuses(task: Task, rows: Array, positions: range) -> tuple[np.ndarray, Box]:
    """RIGHT / WRONG / UNDECIDED per row and prefix length 0..n (RIGHT where the property does not look), and the
    enclosure."""
    program = _program(task.options.program)
    wanted = program_outputs_batched(program, task.strings().alphabet, rows)  # (B, n + 1), column 0: empty prefix
    box = enclosure(task, rows)
    status = decode.threshold(box, cut(task), wanted)
    if task.model.float_model.network.bos is None:  # no BOS: the empty prefix is rejected, exactly
        status[:, 0] = np.where(wanted[:, 0], decode.WRONG, decode.RIGHT)
    checked = np.zeros(status.shape[1], dtype=bool)
    checked[list(positions)] = True
    return np.where(checked[None, :], status, decode.RIGHT).astype(np.int8), box


def batched(task: Task, rows: Array, positions: range, prefix_order: bool) -> tuple[Array, Measures]:
    """The enumerate hook: rows where every evaluation decides some checked prefix wrong are flagged; the others
    the enclosure cannot decide are measured (``UNDECIDED_MEASURE``: a proof needs none; its largest value is at
    the least undecided input: by prefix length first when ``prefix_order``, else the first row)."""
    flagged, undecided = [], []
    for start in range(0, len(rows), FLOAT_BATCH):
        status, _ = statuses(task, rows[start : start + FLOAT_BATCH], positions)
        flagged.append((status == decode.WRONG).any(axis=1))
        open_ = status == decode.UNDECIDED
        first = np.argmax(open_, axis=1)
        if prefix_order:
            value = np.where(open_.any(axis=1), status.shape[1] - first, 0)
        else:
            value = open_.any(axis=1).astype(np.int64)
        undecided.append(value.astype(np.int64))
    return np.concatenate(flagged), {UNDECIDED_MEASURE: (np.concatenate(undecided), 1)}


def _word_rows(task: Task, word: str) -> np.ndarray:
    alphabet = task.strings().alphabet
    return np.array([[alphabet.index(letter) for letter in word]], dtype=np.int64)


def _interval(box: Box, p: int) -> tuple[Fraction, Fraction]:
    return Fraction(int(box.lo[0, p]), 1 << SCALE), Fraction(int(box.hi[0, p]), 1 << SCALE)


def _shown_interval(box: Box, p: int) -> str:
    low, high = _interval(box, p)
    return f"[{decode.outward(low, down=True, places=9)}, {decode.outward(high, down=False, places=9)}]"


def violation(task: Task, word: str, positions: range, shown_word: Any) -> Witness | None:
    """The least checked prefix of ``word`` that every float32 evaluation decides wrong, replayed in torch; None when
    there is none. ``shown_word(p)``: the word a witness at prefix length p names (the prefix, padded)."""
    rows = _word_rows(task, word)
    status, _ = statuses(task, rows, positions)
    wrong = np.flatnonzero(status[0] == decode.WRONG)
    if len(wrong) == 0:
        return None
    p = int(wrong[0])
    shown = shown_word(p)
    rows = _word_rows(task, shown)
    box = enclosure(task, rows)
    source = task.model.float_model
    network = source.network
    offset = 1 if network.bos is not None else 0
    program_side = [False, *run_program(_program(task.options.program), shown).output]
    threshold = cut(task)
    replays: dict[str, Fraction] = {}
    if p > 0 or offset:
        outputs = source.replay(network.ids(rows, tuple(task.strings().alphabet)))
        for kernel, values in outputs.items():
            value = _exact(values[0, p - 1 + offset])
            low, high = _interval(box, p)
            if not low <= value <= high:
                raise RuntimeError(
                    f"enclosure check failed: {_named(task, kernel)} gives the readout {float(value):.9g} at position "
                    f"{_label(p)} of {shown!r}, outside the enclosure {_shown_interval(box, p)}"
                )
            if (value > threshold) == program_side[p]:
                raise RuntimeError(
                    f"enclosure check failed: it says every float32 evaluation decides position {_label(p)} of "
                    f"{shown!r} wrong, but {_named(task, kernel)} decides it right (readout {float(value):.9g})"
                )
            replays[kernel] = value
    verb = {True: "accepts", False: "rejects"}
    evaluations = "; ".join(f"{_named(task, k)}: {float(v):.9g}" for k, v in replays.items()) or "no BOS: rejected"
    model = f"the {network.architecture} checkpoint" if _checkpoint(task) else "the trained model"
    readout = network.readout.describe if _checkpoint(task) else "readout u·z + b"
    label = _label(p)
    return {
        "string": shown,
        "input": input_to_json(tuple(shown)),
        "position": label,
        "mode": task.options.mode,
        "reading": reading(task),
        "program_output": program_side[p],
        "model_output": not program_side[p],
        "model_readout": {k: repr(float(v)) for k, v in replays.items()},
        "enclosure": _shown_interval(box, p),
        "threshold": str(threshold),
        "summary": f"string {shown!r} at position {label}: the program {verb[program_side[p]]}, every float32 "
        f"evaluation of {model} {verb[not program_side[p]]} ({readout} in {_shown_interval(box, p)}, "
        f"accepts iff > {fmt(threshold)}; {evaluations})",
    }


def _label(p: int) -> int | str:
    return "BOS" if p == 0 else p - 1


def measure(task: Task, word: str, positions: range, prefix_order: bool) -> dict[str, Fraction]:
    _, found = batched(task, _word_rows(task, word), positions, prefix_order)
    numerators, den = found[UNDECIDED_MEASURE]
    return {UNDECIDED_MEASURE: Fraction(int(numerators[0]), den)}


def undecided_or_proof(task: Task, statistics: dict[str, Any], positions_of: Any, shown_word: Any) -> None:
    """Raise ``UnsupportedInMode`` (the verdict becomes unknown) naming the least undecided input, if any."""
    if Fraction(statistics.get(UNDECIDED_MEASURE, "0")) <= 0:
        return
    space = task.prop.input_space(task)
    index = int(statistics[f"{UNDECIDED_MEASURE}_at"])
    word = "".join(str(letter) for letter in space.decode(space.rows(index, index + 1)[0][0]))
    status, _ = statuses(task, _word_rows(task, word), positions_of(len(word)))
    p = int(np.flatnonzero(status[0] == decode.UNDECIDED)[0])
    shown = shown_word(word, p)
    rows = _word_rows(task, shown)
    box = enclosure(task, rows)
    program_side = [False, *run_program(_program(task.options.program), shown).output]
    torch_text = ""
    network = task.model.float_model.network
    offset = 1 if network.bos is not None else 0
    if p > 0 or offset:
        outputs = task.model.float_model.replay(network.ids(rows, tuple(task.strings().alphabet)))
        given = "; the replays give " if _checkpoint(task) else "; torch gives "
        torch_text = given + ", ".join(f"{float(_exact(v[0, p - 1 + offset])):.9g} ({k})" for k, v in outputs.items())
        torch_text += " (it decides nothing)"
    raise UnsupportedInMode(
        f"float reading: string {shown!r} at position {_label(p)}: the program "
        f"{'accepts' if program_side[p] else 'rejects'}; the enclosure of every float32 evaluation's readout "
        f"{_shown_interval(box, p)} straddles the threshold {fmt(cut(task))}{torch_text}: too wide to decide "
        "(reading: quantized checks the fixed-point reading instead)"
    )


def proof_clause(task: Task) -> str:
    """What a proof in the float reading covers, appended to the property's proof text."""
    if _checkpoint(task):
        return f"{task.model.float_model.proof_clause()}, accepting iff it exceeds {fmt(cut(task))}"
    return (
        f"for every float32 evaluation of the trained model (torch's CPU kernels: any summation order, exp within "
        f"{fmt(TORCH_EXP_ERROR)} relative, LayerNorm moments by any Welford/Chan merge tree), accepting iff its "
        f"readout u·z + b > {fmt(cut(task))}"
    )


def certified_outputs(task: Task, rows: Array) -> tuple[Array, int]:
    """What a certificate of a float-reading proof digests per input: the enclosure of the readout at every prefix
    (lower bounds, then upper bounds, over 2^SCALE), not the fixed-point IR's readout."""
    parts = []
    for start in range(0, len(rows), FLOAT_BATCH):
        box = enclosure(task, rows[start : start + FLOAT_BATCH])
        parts.append(np.concatenate([box.lo, box.hi], axis=1))
    return np.concatenate(parts), 1 << SCALE


def certified_check(task: Task, word: str, positions: range) -> str | None:
    """The proof's claim re-checked on one sampled input: every checked prefix decided right by the enclosure, and
    torch's own evaluations inside it."""
    rows = _word_rows(task, word)
    status, box = statuses(task, rows, positions)
    open_ = np.flatnonzero(status[0] != decode.RIGHT)
    if len(open_):
        return f"the enclosure does not decide position {_label(int(open_[0]))} right"
    network = task.model.float_model.network
    offset = 1 if network.bos is not None else 0
    for kernel, values in task.model.float_model.replay(network.ids(rows, tuple(task.strings().alphabet))).items():
        for p in positions:
            if p == 0 and not offset:
                continue
            low, high = _interval(box, p)
            if not low <= _exact(values[0, p - 1 + offset]) <= high:
                return f"torch's evaluation ({kernel}) lies outside the enclosure at position {_label(p)}"
    return None

"""``rasp-equivalence`` in the float reading (tracr's default): the compiled float32 model as it runs, checked
through its exact enclosure (``verify_tf.floats.enclosure``, docs/semantics.md §7) against the RASP program.

The property (``properties.rasp_equivalence``) calls these when ``model.float_reading``: the per-position status
of every float32 evaluation (``float_status``), the enumerate hook (``float_rows``), its measures, the certified
outputs and their re-check, the witness (replayed on numpy's float32 evaluation and, when tracr is installed,
on tracr's own model in JAX) and the proof's wording.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ..builders.tracr_import import TracrExport, float_network, read_export
from ..contract import Array, Measures, Task, Witness
from ..domain import StringDomain, format_input
from ..floats import decode as float_decode, enclosure
from ..floats.evaluate import evaluate as evaluate_float32
from ..numbers import fmt
from ..rasp.batched import outputs_batched
from ..rasp.interpreter import run, tokens_from_symbols
from ..rasp.program import RaspError, Value, show
from ..semantics import UnsupportedInMode
from ..witness import input_to_json
from ..work import within_deadline

FLOAT_READING = "float32 as compiled"
FLOAT_BATCH = 64  # rows per enclosure (exact integers in object arrays: memory, and the deadline's granularity)


def float_status(task: Task, rows: Array) -> tuple[np.ndarray, enclosure.Enclosure]:
    """Per (row, user position): RIGHT, WRONG or UNDECIDED (``floats.decode``) for every float32 evaluation of
    the compiled model against the program, with the enclosure (BOS at stream position 0)."""
    export = read_export(task.options.program)
    network = float_network(export)
    codes, undefined = program_codes(task, export, rows)
    found = enclosure.enclose(enclosure.prepare(network), network.ids(rows, tuple(task.strings().alphabet)))
    box = enclosure.Box(found.output.lo[:, 1:], found.output.hi[:, 1:])
    output = export.program.output_node
    if export.output_kind == "categorical":
        space_index = {v: k for k, (v, _) in enumerate(export.output_space)}
        table = [
            float_decode.DONT_CARE if v is None else space_index.get(v, float_decode.NOT_IN_SPACE)
            for v in output.values
        ]
        wanted = np.array(table, dtype=np.int64)[codes]
        status = float_decode.categorical(box, [i for _, i in export.output_space], wanted)
    else:
        assert export.output_index is not None  # a numerical output has one coordinate
        values = [None if v is None else Fraction(v) for v in output.values]
        status = float_decode.numerical(box, export.output_index, values, codes, task.options.tolerance)
    if undefined.any():  # no specification there: don't-care (policy dont-care; "error" refused the spec)
        status = np.where(undefined[:, None], float_decode.RIGHT, status)
    return status, found


def float_rows(task: Task, rows: Array) -> tuple[Array, Measures]:
    """The enumerate hook under the float reading: rows where some evaluation may decode wrong are flagged
    only if *every* evaluation does (a refutation); the others that the enclosure cannot decide are counted
    (measure ``float_undecided``: a proof needs none), and each head's leak is measured."""
    flagged: list[np.ndarray] = []
    undecided: list[np.ndarray] = []
    leaks: dict[str, list[np.ndarray]] = {}
    for start in range(0, len(rows), FLOAT_BATCH):
        status, found = float_status(task, rows[start : start + FLOAT_BATCH])
        flagged.append((status == float_decode.WRONG).any(axis=1))
        undecided.append((status == float_decode.UNDECIDED).any(axis=1))
        for name, leak in found.heads.items():
            leaks.setdefault(f"float_leak {name}", []).append(leak.leak)
    measures: Measures = {"float_undecided": (np.concatenate(undecided).astype(np.int64), 1)}
    for name, parts in leaks.items():
        measures[name] = (np.concatenate(parts), 1 << enclosure.P)
    return np.concatenate(flagged), measures


def measure_kinds(task: Task) -> dict[str, str]:
    network = enclosure.prepare(float_network(read_export(task.options.program)))
    heads = [f"layer {layer} head {h[0]}" for layer, (_, used, *_) in enumerate(network.layers) for h in used]
    return {"float_undecided": "max", **{f"float_leak {name}": "max" for name in heads}}


def measure(task: Task, tokens: tuple[Any, ...]) -> dict[str, Fraction]:
    rows = np.array([[task.strings().alphabet.index(t) for t in tokens]], dtype=np.int64)
    _, found = float_rows(task, rows)
    return {name: Fraction(int(numerators[0]), den) for name, (numerators, den) in found.items()}


def certified_outputs(task: Task, rows: Array) -> tuple[Array, int] | None:
    """Under the float reading, a certificate digests what the proof decided on: per input, the enclosure of
    every output coordinate at every user position (lower bounds, then upper bounds, over 2^SCALE); the
    hardmax IR's readout would say nothing about the float model."""
    export = read_export(task.options.program)
    columns = [i for _, i in _coordinates(export)]
    parts = []
    for start in range(0, len(rows), FLOAT_BATCH):
        _, found = float_status(task, rows[start : start + FLOAT_BATCH])
        lo, hi = found.output.lo[:, 1:, columns], found.output.hi[:, 1:, columns]
        parts.append(np.concatenate([lo.reshape(len(lo), -1), hi.reshape(len(hi), -1)], axis=1))
    return np.concatenate(parts), 1 << enclosure.SCALE


def certified_check(task: Task, tokens: tuple[Any, ...]) -> str | None:
    """Under the float reading, the proof's claim on one input: the enclosure decides every defined position
    right, and numpy's float32 evaluation (an evaluation the error model allows) lies inside the enclosure."""
    export = read_export(task.options.program)
    rows = np.array([[task.strings().alphabet.index(t) for t in tokens]], dtype=np.int64)
    status, found = float_status(task, rows)
    undecided = np.flatnonzero(status[0] != float_decode.RIGHT)
    if len(undecided):
        return f"the enclosure does not decide position {witness_position(int(undecided[0]))} right"
    network = float_network(export)
    ours = evaluate_float32(network, network.ids(rows, tuple(task.strings().alphabet))).output[0]
    exact = np.vectorize(lambda v: Fraction(float(v)) * (1 << enclosure.SCALE), otypes=[object])(ours)
    if not ((found.output.lo[0] <= exact) & (exact <= found.output.hi[0])).all():
        return "numpy's float32 evaluation lies outside the enclosure"
    return None


def float_violation(task: Task, tokens: tuple[Any, ...]) -> Witness | None:
    """A witness where every float32 evaluation of the compiled model decodes differently from the program,
    replayed on this package's float32 evaluator and, when tracr is installed, on tracr's own model in JAX."""
    export = read_export(task.options.program)
    try:
        expected = run(export.program, tokens_from_symbols(export.program, tokens)).output
    except RaspError as exc:
        if task.options.policy(export) == "dont-care":
            return None  # the program is undefined here: the whole input is don't-care
        raise RaspError(f"the RASP program is undefined on {format_input(tuple(tokens))!r}: {exc}") from None
    rows = np.array([[task.strings().alphabet.index(t) for t in tokens]], dtype=np.int64)
    status, found = float_status(task, rows)
    wrong = np.flatnonzero(status[0] == float_decode.WRONG)
    if len(wrong) == 0:
        return None
    p = int(wrong[0])
    network = float_network(export)
    ids = network.ids(rows, tuple(task.strings().alphabet))
    ours = evaluate_float32(network, ids).output[0, 1:]
    replays = {"numpy float32": [_decode_float(export, ours[i]) for i in range(len(tokens))]}
    from ..floats import jax_replay

    if jax_replay.available():
        theirs = within_deadline(  # JAX's import and first call do not poll: they get what is left of the deadline
            lambda: jax_replay.final_stream(export.document, [int(i) for i in ids[0]]),
            "the replay on tracr's model in JAX",
        )[1:]
        replays["tracr's model in JAX"] = [_decode_float(export, theirs[i]) for i in range(len(tokens))]
    box = enclosure.Box(found.output.lo[0, 1:], found.output.hi[0, 1:])
    for name, decoded in replays.items():
        right = (
            decoded[p] == expected[p]
            if export.output_kind == "categorical"
            else abs(decoded[p] - Fraction(expected[p])) <= task.options.tolerance
        )
        if right:  # the enclosure contains every float32 evaluation: this would be a bug in it
            raise RuntimeError(
                f"enclosure check failed: it says no float32 evaluation decodes {show(expected[p])} at position "
                f"{p} of {format_input(tuple(tokens))}, but {name} does"
            )
    word = format_input(tuple(tokens))
    model_text = "[" + ", ".join(_shown(v) for v in replays["numpy float32"]) + "]"
    program_text = "[" + ", ".join(show(v) for v in expected) + "]"
    if export.output_kind == "categorical":
        coords = [(v, i) for v, i in export.output_space]
        rivals = [
            v
            for v, i in coords
            if v != expected[p]
            and box.lo[p, i] > max((box.hi[p, j] for w, j in coords if w == expected[p]), default=-(1 << 400))
        ]
        finding = (
            f"the program gives {show(expected[p])}; every float32 evaluation of the compiled model ranks "
            f"{', '.join(show(v) for v in rivals) or 'another value'} above it"
        )
    else:
        assert export.output_index is not None  # a numerical output has one coordinate
        finding = (
            f"the program gives {show(expected[p])}; every float32 evaluation of the compiled model lies in "
            f"{float_decode.interval_text(box, p, export.output_index)}, farther than the tolerance "
            f"{fmt(task.options.tolerance)}"
        )
    evaluations = "; ".join(f"{name}: {_shown(values[p])}" for name, values in replays.items())
    return {
        "input": input_to_json(tuple(tokens)),
        "string": word,
        "position": witness_position(p),
        "reading": FLOAT_READING,
        "program_output": [None if v is None else show(v) for v in expected],
        "model_output": [_shown(v) for v in replays["numpy float32"]],
        "float_evaluations": {name: [_shown(v) for v in values] for name, values in replays.items()},
        "enclosure": [
            {v: float_decode.interval_text(box, i, j) for v, j in _coordinates(export)} for i in range(len(tokens))
        ],
        "summary": f"input {word} at position {witness_position(p)}: {finding} ({evaluations}; RASP "
        f"{program_text}, float model {model_text}; None: don't care)",
    }


def describe_float_proof(task: Task, statistics: dict[str, Any], how: str) -> str:
    """The float reading's proof, or ``unknown`` (raised) when some input's decoding was left undecided."""
    domain: StringDomain = task.strings()
    export = read_export(task.options.program)
    if Fraction(statistics.get("float_undecided", "0")) > 0:
        space = task.prop.input_space(task)
        index = int(statistics["float_undecided_at"])
        tokens = space.decode(space.rows(index, index + 1)[0][0])
        raise UnsupportedInMode(f"float reading: {undecided_text(task, tuple(tokens))}")
    leaks = sorted(
        (k.removeprefix("float_leak "), Fraction(v))
        for k, v in statistics.items()
        if k.startswith("float_leak ") and not k.endswith("_at")
    )
    leak_text = "; ".join(f"{name} leaks <= {float_decode.upper_text(value)}" for name, value in leaks)
    equal = "strict argmax" if export.output_kind == "categorical" else f"within {fmt(task.options.tolerance)}"
    return (
        f"{domain.size()} strings of length {domain.min_length}..{domain.max_length} over "
        f"{{{', '.join(domain.alphabet)}}}: every float32 evaluation of the compiled model (softmax, logits x "
        f"1/sqrt({float_network(export).layers[0][0].key_size if float_network(export).layers else 0}), any "
        f"summation order) decodes its {export.output_kind} output to the RASP program's ({equal}) at every "
        f"position where it is defined ({how}; weight off the argmax set: {leak_text or 'no attention'})"
    )


def undecided_text(task: Task, tokens: tuple[Any, ...]) -> str:
    """Where the enclosure cannot decide an input's decoding, and what two float32 evaluations give there."""
    export = read_export(task.options.program)
    rows = np.array([[task.strings().alphabet.index(t) for t in tokens]], dtype=np.int64)
    status, found = float_status(task, rows)
    p = int(np.flatnonzero(status[0] == float_decode.UNDECIDED)[0])
    box = enclosure.Box(found.output.lo[0, 1:], found.output.hi[0, 1:])
    expected = run(export.program, tokens_from_symbols(export.program, tokens)).output
    network = float_network(export)
    ours = evaluate_float32(network, network.ids(rows, tuple(task.strings().alphabet))).output[0, 1 + p]
    bounds = ", ".join(
        f"{show(v) if v != 'value' else 'value'} {float_decode.interval_text(box, p, i)}"
        for v, i in _coordinates(export)
    )
    return (
        f"input {format_input(tokens)} at position {witness_position(p)}: the program gives {show(expected[p])}; "
        f"the enclosure of every float32 evaluation ({bounds}) is too wide to decide the decoding (this "
        f"package's float32 evaluation gives {_shown(_decode_float(export, ours))}); a narrower enclosure or "
        "attention: hardmax (tracr's intended computation) may decide it"
    )


def program_codes(task: Task, export: TracrExport, rows: Array) -> tuple[np.ndarray, np.ndarray]:
    """The program's output codes (B, n) on rows of the domain's alphabet, and which rows it is undefined on."""
    program = export.program
    assert program.tokens_node is not None  # a tracr program reads its tokens
    token_code = np.array(
        [program.tokens_node.code_of[v] for v in tokens_from_symbols(program, task.strings().alphabet)],
        dtype=np.int64,
    )
    codes, undefined = outputs_batched(program, token_code[rows])
    return codes, undefined


def witness_position(user_index: int) -> int:
    """How a witness numbers a position: the user's input positions from 0, the BOS not counted."""
    return user_index


def _coordinates(export: TracrExport) -> list[tuple[Value, int]]:
    """The output's coordinates by value: the output space's, or the numerical output's one."""
    if export.output_kind == "categorical":
        return list(export.output_space)
    assert export.output_index is not None  # a numerical output has one coordinate
    return [("value", export.output_index)]


def _decode_float(export: TracrExport, vector: np.ndarray) -> Any:
    """One float32 evaluation's decoded output at a position: the argmax value, a tie, or the numerical value."""
    if export.output_kind == "numerical":
        assert export.output_index is not None  # a numerical output has one coordinate
        return Fraction(float(vector[export.output_index]))
    scores = [vector[i] for _, i in export.output_space]
    best = max(scores)
    winners = [v for (v, _), x in zip(export.output_space, scores) if x == best]
    return winners[0] if len(winners) == 1 else tuple(winners)


def _shown(value: Any) -> str:
    if isinstance(value, tuple):
        return "tie(" + "|".join(show(v) for v in value) + ")"
    if isinstance(value, Fraction) and value.denominator > 1000:
        return f"{float(value):.7g}"  # a float32 evaluation's value, shown (it decides nothing)
    return show(value)

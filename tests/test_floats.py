"""The "float as compiled" reading of a tracr model (``verify_tf.floats``): the float32 evaluator mirrors tracr's
own compiled haiku model, the JAX replay *is* tracr's model, the exact enclosure contains both on every input,
and the import notes bound each head's leak off the argmax set.

Reference values: tracr's ``AssembledTransformerModel.apply`` (the model ``compile_rasp_to_model`` returns)
and, for the leak bounds, hand computation from tracr's logit levels (100 selected, 50 BOS, 0 elsewhere):
50/sqrt(227) = 3.318..., 5·e^-3.318 = 0.181; 50/sqrt(7) = 18.90, 5·e^-18.90 = 3.1e-8."""

from __future__ import annotations

import itertools
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from verify_tf.builders.tracr_import import float_network, head_leaks, import_tracr, read_export
from verify_tf.floats import enclosure, jax_replay
from verify_tf.floats.evaluate import evaluate

ROOT = Path(__file__).resolve().parent.parent
EXPORTS = ROOT / "examples" / "tracr"


def every_input(export, max_length):
    for n in range(1, max_length + 1):
        rows = np.array(list(itertools.product(range(len(export.symbols)), repeat=n)), dtype=np.int64)
        yield rows


def as_fractions(box):
    lo = np.vectorize(lambda v: Fraction(int(v), 1 << enclosure.SCALE), otypes=[object])(box.lo)
    hi = np.vectorize(lambda v: Fraction(int(v), 1 << enclosure.SCALE), otypes=[object])(box.hi)
    return lo, hi


def contains(box, values):
    lo, hi = as_fractions(box)
    exact = np.vectorize(lambda v: Fraction(float(v)), otypes=[object])(values.astype(np.float64))
    return bool(((lo <= exact) & (exact <= hi)).all())


@pytest.mark.parametrize("name, max_length", [("frac-prevs", 3), ("sort-unique", 3), ("prev-a-wide", 2)])
def test_the_enclosure_contains_the_float32_evaluation_on_every_input(name, max_length):
    export = read_export(EXPORTS / f"{name}.json")
    network = float_network(export)
    prepared = enclosure.Prepared(network)
    widest = Fraction(0)
    for rows in every_input(export, max_length):
        ids = network.ids(rows, tuple(export.symbols))
        box = enclosure.enclose(prepared, ids).output
        assert contains(box, evaluate(network, ids).output)
        lo, hi = as_fractions(box)
        widest = max(widest, max(hi.ravel() - lo.ravel()))
    assert widest < Fraction(1, 10)  # tight enough to decide a decoding (the values are 0/1 or means)


def test_leak_notes_bound_each_head_by_its_gap_after_tracrs_scale():
    notes = head_leaks(read_export(EXPORTS / "sort-unique.json"))
    assert notes == [
        "layer 0 head 0: logit levels {0, 100} x 1/sqrt(7); smallest gap 100 -> 37.8 after the scale; on one-hot "
        "residuals it leaks <= (n-1)·e^-gap = 5·e^-37.8 <= 1.9e-16",
        "layer 1 head 0: logit levels {0, 50, 100, 150} x 1/sqrt(7); smallest gap 50 -> 18.9 after the scale; "
        "on one-hot residuals it leaks <= (n-1)·e^-gap = 5·e^-18.9 <= 3.1e-08",
    ]
    wide = head_leaks(read_export(EXPORTS / "prev-a-wide.json"))
    assert wide[-1].endswith(
        "smallest gap 50 -> 3.32 after the scale; on one-hot residuals it leaks <= (n-1)·e^-gap = 5·e^-3.32 <= 0.18"
    )
    model = import_tracr(EXPORTS / "sort-unique.json", attention="hardmax")
    assert any(note.startswith("reading: hardmax, tracr's intended computation") for note in model.notes)
    assert notes[1] in model.notes
    assert any(
        note.startswith("reading: float, the model as tracr compiled it")
        for note in import_tracr(EXPORTS / "sort-unique.json").notes
    )


def test_the_float_model_leaks_where_hardmax_does_not():
    """prev-a-wide at input ``a``: hardmax gives exactly 0 (the select is empty; BOS carries 0); tracr's float
    model gives BOS e^3.3 against the token's e^0 and more, so it reads about 0.067 (the enclosure says how much)."""
    export = read_export(EXPORTS / "prev-a-wide.json")
    network = float_network(export)
    ids = network.ids(np.array([[0]]), tuple(export.symbols))  # "a"
    value = evaluate(network, ids).output[0, 1, export.output_index]
    box = enclosure.enclose(enclosure.Prepared(network), ids).output
    lo, hi = as_fractions(box)
    low, high = lo[0, 1, export.output_index], hi[0, 1, export.output_index]
    assert Fraction(6, 100) < low <= Fraction(float(value)) <= high < Fraction(7, 100)


tracr_needed = pytest.mark.skipif(not jax_replay.available(), reason="needs the tracr extra")


@tracr_needed
@pytest.mark.slow  # compiles with tracr and runs haiku un-jitted
def test_jax_replay_is_tracrs_compiled_model_and_the_numpy_mirror_agrees(tmp_path):
    """A program compiled here by tracr: its own model's final residual stream (``apply``'s transformer_output)
    equals the JAX replay of the export bit for bit, the numpy float32 mirror to the last bits, and the exact
    enclosure contains both, on every input."""
    from tracr.compiler import lib
    from tracr.rasp import rasp

    from verify_tf.tracr_export import compile_and_export

    program = lib.make_frac_prevs(rasp.tokens == "a")
    model, _ = compile_and_export(program, {"a", "b"}, 2, tmp_path / "frac.json")
    export = read_export(tmp_path / "frac.json")
    network = float_network(export)
    prepared = enclosure.Prepared(network)
    for rows in every_input(export, 2):
        ids = network.ids(rows, tuple(export.symbols))
        ours = evaluate(network, ids).output
        box = enclosure.enclose(prepared, ids).output
        for r, row in enumerate(rows):
            word = [export.symbols[i] for i in row]
            theirs = np.asarray(model.apply(["BOS", *word]).transformer_output[0], dtype=np.float32)
            replayed = jax_replay.final_stream(export.document, [int(i) for i in ids[r]])
            assert np.array_equal(replayed, theirs), word
            assert np.allclose(ours[r], theirs, rtol=0, atol=1e-6), word
        assert contains(box, ours)

"""Both readings of every committed tracr export (docs/tracr.md, "Readings"): rasp-equivalence under
``attention: hardmax`` and under the default float reading, on every string up to the export's max_seq_len,
engine enumerate. Prints one JSON line per export: the verdict, the least witness and the seconds of each, and
the float enclosure's width at the decoding step (the widest interval of an output coordinate over every input
and user position, an exact rational shown rounded up; computed separately from the verdict).

    python bench/bench_readings.py [--float-only] [NAME ...]     # default: every examples/tracr/*.json
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

from verify_tf.builders.tracr_import import float_network, read_export
from verify_tf.floats import enclosure
from verify_tf.runner import Overrides, check_property
from verify_tf.spec import load_spec_text

ROOT = Path(__file__).resolve().parent.parent


def decoding_width(path: Path) -> tuple[Fraction, float]:
    """The widest enclosure of an output coordinate over every input up to max_seq_len (user positions), and
    the seconds it took."""
    export = read_export(path)
    network = float_network(export)
    prepared = enclosure.prepare(network)
    if export.output_kind == "categorical":
        columns = [i for _, i in export.output_space]
    else:
        assert export.output_index is not None  # a numerical output has one coordinate
        columns = [export.output_index]
    started = time.perf_counter()
    widest = 0
    for n in range(1, export.max_seq_len + 1):
        rows = np.array(list(itertools.product(range(len(export.symbols)), repeat=n)), dtype=np.int64)
        for start in range(0, len(rows), 64):
            ids = network.ids(rows[start : start + 64], tuple(export.symbols))
            box = enclosure.enclose(prepared, ids).output
            widest = max(widest, int((box.hi[:, 1:, columns] - box.lo[:, 1:, columns]).max()))
    return Fraction(widest, 1 << enclosure.SCALE), time.perf_counter() - started


def main(arguments: list[str]) -> None:
    readings = ("float",) if "--float-only" in arguments else ("hardmax", "float")
    names = [a for a in arguments if not a.startswith("--")]
    paths = [ROOT / "examples" / "tracr" / f"{n}.json" for n in names] or sorted(
        (ROOT / "examples" / "tracr").glob("*.json")
    )
    for path in paths:
        export = read_export(path)
        row: dict = {"name": path.stem}
        for reading in readings:
            text = (
                f"model:\n  tracr: {path}\n  attention: {reading}\n"
                f"domain:\n  strings: {{max-length: {export.max_seq_len}}}\n"
                f"properties:\n  - rasp-equivalence: {{program: {path}, engine: enumerate, timeout: 600}}\n"
            )
            spec = load_spec_text(text, "readings.yaml", ROOT)
            started = time.perf_counter()
            verdict = check_property(spec, spec.properties[0], Overrides())
            row[reading] = {
                "verdict": verdict.label,
                "witness": (verdict.counterexample or {}).get("string"),
                "seconds": round(time.perf_counter() - started, 1),
            }
        width, seconds = decoding_width(path)
        row["float_width"] = f"{float(width):.2e}"  # shown only; the exact value is the rational
        row["width_seconds"] = round(seconds, 1)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

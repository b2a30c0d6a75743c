"""Both readings of every committed tracr export (docs/tracr.md, "Readings"): rasp-equivalence under
``attention: hardmax`` and under the default float reading, on every string up to the export's max_seq_len,
engine enumerate. Prints one JSON line per export: the verdict, the least witness and the seconds of each.

    python bench/bench_readings.py [NAME ...]     # default: every examples/tracr/*.json
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from verify_tf.builders.tracr_import import read_export
from verify_tf.runner import Overrides, check_property
from verify_tf.spec import load_spec_text

ROOT = Path(__file__).resolve().parent.parent


def main(names: list[str]) -> None:
    paths = [ROOT / "examples" / "tracr" / f"{n}.json" for n in names] or sorted(
        (ROOT / "examples" / "tracr").glob("*.json")
    )
    for path in paths:
        export = read_export(path)
        row: dict = {"name": path.stem}
        for reading in ("hardmax", "float"):
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
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

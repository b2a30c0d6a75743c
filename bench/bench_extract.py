"""``verify-tf crasp extract`` (verify_tf.extraction): how long extraction and its proofs take, and what comes out.

Prints the markdown table of docs/performance.md, "Extraction": per model, the extracted program's definitions
and depth (the source's beside), the rounds, the stream classes per layer, the boundaries made, the verdict against
the model and against the reference program, CPU and wall seconds of this process (extraction, proofs and the
reference check together).

1. every shipped compiled program (examples/crasp: L1–L6, majority, dyck1, minmax, nested-gates, ends-in-a),
   compiled with ``crasp compile``'s defaults, against its source;
2. ``--trained``: the checkpoints of examples/extract/ (needs torch): the majority model at 16/8 against
   majority.cr (N = 128), the Dyck-1 model at 8/4 and 6/3 against dyck1.cr (explore 6, N = 6).

Usage: ``nice -n 10 python bench/bench_extract.py [--trained] [--only L1,majority]``. Say the machine and its load
(``uptime``) beside the table.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from fractions import Fraction
from pathlib import Path

from verify_tf.builders.crasp_compiler import compile_program
from verify_tf.crasp import load_program, program_depth
from verify_tf.extraction import extract
from verify_tf.work import Deadline

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "examples" / "crasp"
COMPILED = ["L1", "L2", "L3", "L4", "L5", "L6", "majority", "dyck1", "minmax", "nested-gates", "ends-in-a"]
TRAINED = [  # (spec, reference, explore, N)
    ("majority-16-8", "majority", 10, 128),
    ("dyck1-8-4", "dyck1", 6, 6),
    ("dyck1-6-3", "dyck1", 6, 6),
]


def _row(name: str, source: str, model, arith, threshold, reference: Path, explore: int, length: int) -> str:
    out = Path(tempfile.mkdtemp()) / f"{name}.cr"
    cpu, wall = time.process_time(), time.perf_counter()
    result = extract(
        model,
        arith,
        out,
        Deadline(300 if length > 16 else 60),  # the induction spends its share where it does not close
        threshold=threshold,
        explore=explore,
        check_length=length,
        reference=reference,
    )
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    last = result.rounds[-1]
    versus = result.against.describe() if result.against is not None else "—"
    return (
        f"| {name} | {result.written.definitions} / {result.written.depth} | {source} | {len(result.rounds)} | "
        f"{'/'.join(map(str, last.classes)) or '—'} | {last.atoms} | {result.decision.describe()} | {versus} | "
        f"{cpu:.1f} | {wall:.1f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trained", action="store_true", help="also the checkpoints of examples/extract/ (torch)")
    parser.add_argument("--only", default="", help="comma-separated names")
    args = parser.parse_args()
    only = set(filter(None, args.only.split(",")))
    print(f"{platform.node()} ({platform.machine()}, {os.cpu_count()} cores), load {os.getloadavg()[0]:.1f}")
    print()
    print(
        "| model | definitions / depth | source | rounds | classes per layer | boundaries | vs the model | "
        "vs the reference | CPU s | wall s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in COMPILED:
        if only and name not in only:
            continue
        program = load_program(PROGRAMS / f"{name}.cr")
        compiled = compile_program(program)
        source = f"{len(program.definitions)} / {program_depth(program)}"
        print(
            _row(name, source, compiled.model, compiled.arithmetic, Fraction(0), PROGRAMS / f"{name}.cr", 10, 16),
            flush=True,
        )
    if args.trained:
        from verify_tf.spec import load_spec

        for name, reference, explore, length in TRAINED:
            if only and name not in only:
                continue
            spec = load_spec(ROOT / "examples" / "extract" / f"{name}.yaml")
            threshold = spec.properties[0].options.threshold
            row = _row(
                name, "trained", spec.model, spec.arithmetic, threshold, PROGRAMS / f"{reference}.cr", explore, length
            )
            print(row, flush=True)


if __name__ == "__main__":
    main()

"""Measure the crasp-equivalence proofs of the compiled L_k (and Dyck-1) transformers (the tables in docs/crasp.md).

Bounded (``--lengths domain``, the default): for each program, compile it and prove it equivalent to itself on
all strings of length 1..N for growing N until one proof takes more than the budget (CPU seconds of this
process, so that other jobs on a shared machine do not distort it). N grows by one for the string engines
(enumerate, interpret, smt) and doubles from ``--start`` for ``counting`` (polynomial in N). Prints one row per
program: name, depth, attention layers, feed-forward layers, width, bits, the largest N proved within the
budget and its CPU seconds.

Every length (``--lengths all``): the CPU seconds of the proof for every length (engine counting), with the
domain's N (``--start``, default 14) as the bounded part.

    python examples/crasp/measure_lk.py [--budget 60] [--engine enumerate|interpret|smt|counting]
        [--programs L1 L2 ... dyck1] [--start N] [--once] [--lengths domain|all]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from verify_tf.api import check
from verify_tf.builders.crasp_compiler import compile_program
from verify_tf.crasp import load_program
from verify_tf.domain import StringDomain

HERE = Path(__file__).resolve().parent
PROGRAMS = ["L1", "L2", "L3", "L4", "L5", "L6", "dyck1"]


def prove(name: str, length: int, engine: str, budget: float, lengths: str) -> tuple[str, float, str]:
    path = HERE / f"{name}.cr"
    program = load_program(path)
    compiled = compile_program(program)
    mode = "prefix" if name.startswith("dyck") else "accept"  # Dyck-1: the prediction task
    start = time.process_time()
    verdict = check(
        compiled.model,
        compiled.arithmetic,
        StringDomain(program.alphabet, 1, length),
        "crasp-equivalence",
        {"program": path, "mode": mode, "lengths": lengths},
        engine=engine,
        timeout=4 * budget,
        device="cpu",
    )  # wall clock: a shared machine is slower
    return verdict.status, time.process_time() - start, verdict.label


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=60.0, help="CPU seconds per proof")
    parser.add_argument("--engine", default="enumerate", choices=["enumerate", "interpret", "smt", "counting"])
    parser.add_argument("--start", type=int, default=None, help="first N to try (every length: the bounded N)")
    parser.add_argument("--programs", nargs="*", default=PROGRAMS)
    parser.add_argument("--lengths", default="domain", choices=["domain", "all"])
    parser.add_argument("--once", action="store_true", help="only time N = --start (no growth)")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} at start")
    if args.lengths == "all":
        print("program  depth  attention  width  bits  verdict  seconds")
        for name in args.programs:
            compiled = compile_program(load_program(HERE / f"{name}.cr"))
            status, spent, label = prove(name, args.start or 14, "counting", args.budget, "all")
            print(
                f"{name}  {compiled.program_depth}  {compiled.attention_layers}  {compiled.model.dim}  "
                f"{compiled.bits}  {label}  {spent:.2f}",
                flush=True,
            )
        return
    counting = args.engine == "counting"
    print("program  depth  attention  feed-forward  width  bits  N  seconds")
    for name in args.programs:
        compiled = compile_program(load_program(HERE / f"{name}.cr"))
        best, seconds, length = 0, 0.0, args.start or (25 if counting else 1)
        while True:
            status, spent, _ = prove(name, length, args.engine, args.budget, "domain")
            if status != "proved" or spent > args.budget:
                break
            best, seconds = length, spent
            if args.once:
                break
            length = 2 * length if counting else length + 1
        print(
            f"{name}  {compiled.program_depth}  {compiled.attention_layers}  {compiled.feed_forward_layers}  "
            f"{compiled.model.dim}  {compiled.bits}  {best}  {seconds:.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()

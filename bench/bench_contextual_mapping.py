"""Benchmark: how far each engine proves Yun et al.'s Lemma 6 network a contextual mapping (G̃_δ, permutations
exempt, margin δ, exact arithmetic) within a time limit. Prints the markdown table of docs/contextual-mapping.md.

    python bench/bench_contextual_mapping.py [--timeout 60] [--engines interpret,enumerate,smt] [--device cpu]
    python bench/bench_contextual_mapping.py --engines enumerate --device cuda --ladder gpu   # the GPU rungs
    python bench/bench_contextual_mapping.py --sweep      # every instance with δ^-d <= 16 and n <= 5, enumerate

Each engine is warmed up once on the smallest instance first (torch / z3 imports are not counted).
Instances grow in the number of multisets C(δ^-d, n) the exhaustive engines evaluate; an engine that runs out
of time on two instances in a row is not tried on larger ones ("–"). Times are wall-clock seconds of the
whole check (compilation, enumeration, scan and replay, or SMT encoding and solving) on whatever machine runs
it; "own" (on stderr) is the verdict's own seconds. An enumerate cell says "(wide)" when some step ran on
Python integers for some chunk (values beyond int64), "(guarded)" when int64 held but was only proven chunk by
chunk (the whole-domain bounds exceed it).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from fractions import Fraction

from verify_tf.api import check
from verify_tf.builders.yun import yun_contextual_mapping
from verify_tf.domain import GridDomain
from verify_tf.semantics import Exact


def multisets(d: int, k: int, n: int) -> int:
    return math.comb(k**d, n)


def work(instance: tuple[int, int, int]) -> int:
    """Interpreter work: multisets × layers (δ^-d + 1) × attention scores per head (n²)."""
    d, k, n = instance
    return multisets(d, k, n) * (k**d + 1) * n * n


LADDERS = {
    "cpu": sorted(
        [  # (d, 1/δ, n)
            (1, 2, 2),
            (1, 3, 3),
            (2, 2, 3),
            (1, 4, 3),
            (2, 2, 2),
            (1, 4, 4),
            (2, 3, 2),
            (1, 8, 3),
            (2, 3, 4),
            (1, 8, 4),
            (2, 4, 3),
            (1, 16, 3),
            (2, 4, 4),
            (1, 16, 4),
            (1, 32, 3),
            (2, 6, 3),
            (2, 8, 3),
            (1, 64, 3),
            (2, 8, 4),
            (1, 32, 5),
            (2, 16, 3),
            (3, 4, 4),
            (1, 8, 5),
            (1, 16, 5),
            (1, 16, 6),
            (1, 32, 4),
            (4, 2, 5),
            (1, 64, 4),
        ],
        key=work,
    ),
    # the GPU rungs: (1, 1/64, 4) has 635,376 multisets and values beyond int64 (about 2^70)
    "gpu": sorted(
        [(1, 16, 5), (1, 32, 5), (1, 16, 6), (2, 4, 4), (1, 64, 4), (1, 32, 6), (2, 8, 4), (1, 128, 4)], key=work
    ),
}


def sweep_instances(largest_vocabulary: int = 16, longest: int = 5) -> list[tuple[int, int, int]]:
    """Every (d, 1/δ, n) with δ^-d <= 16 and 2 <= n <= min(5, δ^-d) (G̃_δ needs n distinct tokens)."""
    out = []
    for d in range(1, 5):
        for k in range(2, largest_vocabulary + 1):
            if k**d > largest_vocabulary:
                break
            out += [(d, k, n) for n in range(2, min(longest, k**d) + 1)]
    return sorted(out, key=work)


def run(engine: str, d: int, k: int, n: int, timeout: float, device: str):
    delta = Fraction(1, k)
    start = time.perf_counter()
    verdict = check(
        yun_contextual_mapping(d, delta, n),
        Exact(),
        GridDomain.regular(d, delta, n, distinct_tokens=True),
        "contextual-mapping",
        {"exempt-permutations": True, "margin": delta},
        engine=engine,
        timeout=timeout,
        device=device,
    )
    return verdict, time.perf_counter() - start


def cell(engine: str, verdict, seconds: float, timeout: float) -> str:
    if verdict.status == "proved":
        text = f"{seconds:.2f}"
        if engine == "enumerate" and verdict.statistics.get("wide_steps"):
            text += " (wide)"
        elif engine == "enumerate" and verdict.statistics.get("static_int64") is False:
            text += " (guarded)"
        return text
    reason = verdict.tried[-1] if verdict.tried else verdict.detail
    if verdict.status != "unknown":
        return f"{verdict.status} ({seconds:.0f} s)"
    if "int64" in reason:
        return "int64 refused"
    return f"> {timeout:.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per engine and instance")
    parser.add_argument("--engines", default="interpret,enumerate,smt")
    parser.add_argument(
        "--device", default="cpu", choices=("cpu", "cuda", "auto"), help="where the batched evaluator runs (enumerate)"
    )
    parser.add_argument("--ladder", default="cpu", choices=sorted(LADDERS))
    parser.add_argument(
        "--sweep",
        action="store_true",
        help="enumerate every instance with δ^-d <= 16, n <= 5; report the slowest and any failure",
    )
    parser.add_argument("--max-multisets", type=int, default=10**9, help="skip larger instances")
    args = parser.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f} at start", file=sys.stderr)
    if args.sweep:
        return sweep(args)
    engines = [e for e in args.engines.split(",") if e in ("interpret", "enumerate", "smt")]
    header = "| (d, 1/δ, n) | inputs in G̃_δ | multisets | " + " | ".join(f"{e} (s)" for e in engines) + " |"
    print(header)
    print("|" + "---|" * (3 + len(engines)))
    for engine in engines:  # warm-up: imports (torch for the batched evaluator, z3) are not part of a check
        run(engine, 1, 2, 2, args.timeout, args.device)
    failures = {engine: 0 for engine in engines}  # consecutive instances the engine did not prove
    for d, k, n in LADDERS[args.ladder]:
        size = multisets(d, k, n)
        if size > args.max_multisets or all(count >= 2 for count in failures.values()):
            break
        cells = []
        for engine in engines:
            if failures[engine] >= 2:
                cells.append("–")
                continue
            verdict, seconds = run(engine, d, k, n, args.timeout, args.device)
            cells.append(cell(engine, verdict, seconds, args.timeout))
            if verdict.status == "proved":
                failures[engine] = 0
                print(f"  [{engine} {d},{k},{n}: own {verdict.seconds:.3f} s]", file=sys.stderr)
                continue
            failures[engine] += 1
            reason = verdict.tried[-1] if verdict.tried else verdict.detail
            print(f"  [{engine} {d},{k},{n}: {verdict.status}: {reason}]", file=sys.stderr)
        print(f"| ({d}, {k}, {n}) | {math.perm(k**d, n):,} | {size:,} | " + " | ".join(cells) + " |", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} at the end", file=sys.stderr)
    return 0


def sweep(args) -> int:
    instances = sweep_instances()
    run("enumerate", 1, 2, 2, args.timeout, args.device)
    slowest, failed, total = (0.0, None), [], 0.0
    for d, k, n in instances:
        verdict, seconds = run("enumerate", d, k, n, args.timeout, args.device)
        total += seconds
        if verdict.status != "proved":
            failed.append(((d, k, n), verdict.status, verdict.detail))
        if seconds > slowest[0]:
            slowest = (seconds, (d, k, n))
    print(
        f"{len(instances)} instances (δ^-d <= 16, n <= 5): {len(instances) - len(failed)} proved by enumerate, "
        f"{total:.1f} s in all, slowest {slowest[1]} in {slowest[0]:.2f} s"
    )
    for instance, status, detail in failed:
        print(f"  {instance}: {status}: {detail}")
    print(f"load average {os.getloadavg()[0]:.2f} at the end", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: how far each engine proves Yun et al.'s Lemma 6 network a contextual mapping (G̃_δ, permutations
exempt, margin δ, exact arithmetic) within a time limit. Prints the markdown table of docs/contextual-mapping.md.

    python bench/bench_contextual_mapping.py [--timeout 60] [--engines interpret,enumerate,smt]

Each engine is warmed up once on the smallest instance first (torch / z3 imports are not counted).
Instances grow in the number of multisets C(δ^-d, n) the exhaustive engines evaluate; an engine that runs out
of time (or is refused) on two instances in a row is not tried on larger ones ("–"). Times are wall-clock
seconds of the whole check (enumeration, scan and replay, or SMT encoding and solving) on whatever machine runs it.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from fractions import Fraction

from verify_tf.builders.yun import yun_contextual_mapping
from verify_tf.domain import GridDomain
from verify_tf.properties.base import CheckRequest
from verify_tf.properties.contextual_mapping import PROPERTY
from verify_tf.semantics import Exact


def multisets(d: int, k: int, n: int) -> int:
    return math.comb(k**d, n)


def work(instance: tuple[int, int, int]) -> int:
    """Interpreter work: multisets × layers (δ^-d + 1) × attention scores per head (n²)."""
    d, k, n = instance
    return multisets(d, k, n) * (k**d + 1) * n * n


INSTANCES = sorted([  # (d, 1/δ, n)
    (1, 2, 2), (1, 3, 3), (2, 2, 3), (1, 4, 3), (2, 2, 2), (1, 4, 4), (2, 3, 2), (1, 8, 3), (2, 3, 4), (1, 8, 4),
    (2, 4, 3), (1, 16, 3), (2, 4, 4), (1, 16, 4), (1, 32, 3), (2, 6, 3), (2, 8, 3), (1, 64, 3), (2, 8, 4),
    (1, 32, 5), (2, 16, 3), (3, 4, 4), (1, 8, 5), (1, 16, 5),
], key=work)


def run(engine: str, d: int, k: int, n: int, timeout: float):
    delta = Fraction(1, k)
    request = CheckRequest(model=yun_contextual_mapping(d, delta, n), arithmetic=Exact(),
                           domain=GridDomain.regular(d, delta, n, distinct_tokens=True),
                           options={"exempt-permutations": True, "margin": delta}, label="contextual-mapping",
                           engine=engine, timeout=timeout)
    start = time.perf_counter()
    verdict = PROPERTY.run(request)
    return verdict, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per engine and instance")
    parser.add_argument("--engines", default="interpret,enumerate,smt")
    parser.add_argument("--max-multisets", type=int, default=10**9, help="skip larger instances")
    args = parser.parse_args(argv)
    available = PROPERTY.engines
    engines = [e for e in args.engines.split(",") if e in available]
    skipped = [e for e in args.engines.split(",") if e not in available]
    if skipped:
        print(f"(engines not available: {', '.join(skipped)})", file=sys.stderr)
    header = "| (d, 1/δ, n) | inputs in G̃_δ | multisets | " + " | ".join(f"{e} (s)" for e in engines) + " |"
    print(header)
    print("|" + "---|" * (3 + len(engines)))
    for engine in engines:  # warm-up: imports (torch for the batched evaluator, z3) are not part of a check
        run(engine, 1, 2, 2, args.timeout)
    failures = {engine: 0 for engine in engines}  # consecutive instances the engine did not prove
    for d, k, n in INSTANCES:
        size = multisets(d, k, n)
        if size > args.max_multisets or all(count >= 2 for count in failures.values()):
            break
        cells = []
        for engine in engines:
            if failures[engine] >= 2:
                cells.append("–")
                continue
            verdict, seconds = run(engine, d, k, n, args.timeout)
            if verdict.status == "proved":
                failures[engine] = 0
                cells.append(f"{seconds:.2f}")
                continue
            failures[engine] += 1
            reason = verdict.tried[-1] if verdict.tried else verdict.detail
            if verdict.status != "unknown":
                cells.append(f"{verdict.status} ({seconds:.0f} s)")
            elif "int64" in reason:
                cells.append("int64 refused")
            else:
                cells.append(f"> {args.timeout:.0f}")
            print(f"  [{engine} {d},{k},{n}: {verdict.status}: {reason}]", file=sys.stderr)
        print(f"| ({d}, {k}, {n}) | {math.perm(k**d, n)} | {size} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

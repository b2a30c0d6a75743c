"""Benchmark of the ``split`` engine (branch and bound) against batched enumeration, on issue 13's targets.

1. The two-attention-layer rungs of bench_smt's ladder (``d2 L2 n3`` exact and fixed, ``d3 L2 n4``): output
   bounds with bench_smt's bound (4·max|sample| + 4, which holds), split with a 60 s timeout, and the batched
   evaluator over the same domain (extrapolated from 3 s when larger).
2. A 2-layer, 4-head, d = 2, fixed 16/8 softmax model on a 7-point grid per coordinate (49 tokens), length 6
   (49^6 ≈ 1.4·10^10 inputs): output-bounds with a bound that holds and one that fails.
3. Yun et al.'s Lemma 6 contextual mapping at (d, 1/δ, n) = (2, 3, 3), split and enumerate.

    python bench/bench_split.py [--timeout 60]

Prints a Markdown table (docs/performance.md holds the measured one).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_smt import LADDER, enumeration_seconds

from verify_tf.api import check
from verify_tf.bounds import Cube, cube_bounds
from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.builders.yun import yun_contextual_mapping
from verify_tf.domain import GridDomain
from verify_tf.semantics import Exact, Fixed, evaluate


def row(name, size, prop, result, enumerate_s):
    stats = result.statistics
    closed = "/".join(str(stats.get(key, 0)) for key in ("closed_by_bounds", "closed_by_enumeration", "closed_by_smt"))
    cubes = stats.get("cubes_created", stats.get("leaves", "-"))
    print(
        f"| {name} | {size:,} | {prop} | {result.status} | {result.seconds:.1f} | {cubes} "
        f"| {closed} | {stats.get('max_depth', '-')} | {enumerate_s} |",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()
    print(
        "| case | inputs | property | split | split s | cubes | closed by bounds/enum/smt | depth "
        "| batched enumerate s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, width, layers, ffn, length, step, arith in LADDER:
        if layers < 2:
            continue
        model = random_model(
            RandomConfig(
                seed=5,
                width=width,
                layers=layers,
                ffn_width=ffn,
                scoring="hardmax",
                weight_range=Fraction(1),
                denominator=4,
            )
        )
        domain = GridDomain.regular(width, step, length, lo=Fraction(-1), hi=Fraction(1))
        random.seed(0)
        sample = [tuple(random.choice(domain.tokens) for _ in range(length)) for _ in range(200)]
        bound = 4 * max(abs(q) for x in sample for q in evaluate(model, arith, x).readout) + 4
        result = check(
            model,
            arith,
            domain,
            "output-bounds",
            {"lo": -bound, "hi": bound},
            engine="split",
            timeout=args.timeout,
            device="cpu",
        )
        enum_s, extrapolated = enumeration_seconds(model, arith, domain)
        row(name, domain.size(), f"\\|q\\| <= {float(bound):.3g}", result, f"{'~' if extrapolated else ''}{enum_s:.3g}")

    arith = Fixed(16, 8)
    model = random_model(
        RandomConfig(
            seed=7, width=2, layers=2, heads=4, ffn_width=4, scoring="softmax", weight_range=Fraction(1), denominator=4
        )
    )
    # 7 points per coordinate, representable in 16/8 (a 1/3 step is not: the API refuses it as the loader does)
    domain = GridDomain.regular(2, Fraction(1, 4), 6, lo=Fraction(-3, 4), hi=Fraction(3, 4))
    root = cube_bounds(model, arith, Cube.whole(domain.tokens, 6)).readout
    top = max(hi for _, hi in root)
    random.seed(0)
    sample = [tuple(random.choice(domain.tokens) for _ in range(6)) for _ in range(200)]
    seen = max(q for x in sample for q in evaluate(model, arith, x).readout)
    enum_s, _ = enumeration_seconds(model, arith, domain)
    for label, hi in (
        ("holds (root interval's top)", top),
        ("holds (half way to the sampled max)", (top + seen) / 2),
        ("fails (sampled max - 1/256)", seen - Fraction(1, 256)),
    ):
        result = check(
            model, arith, domain, "output-bounds", {"hi": hi}, engine="split", timeout=args.timeout, device="cpu"
        )
        row(
            "4-head softmax, fixed 16/8, 7-point grid, n 6",
            domain.size(),
            f"q <= {float(hi):.4g}: {label}",
            result,
            f"~{enum_s:.3g}",
        )

    model = yun_contextual_mapping(2, Fraction(1, 3), 3)
    domain = GridDomain.regular(2, Fraction(1, 3), 3, distinct_tokens=True)
    options = {"exempt-permutations": True, "margin": Fraction(1, 3)}
    result = check(
        model, Exact(), domain, "contextual-mapping", options, engine="split", timeout=args.timeout, device="cpu"
    )
    start = time.perf_counter()
    enum = check(
        model, Exact(), domain, "contextual-mapping", options, engine="enumerate", timeout=args.timeout, device="cpu"
    )
    row(
        "Lemma 6 (d, 1/δ, n) = (2, 3, 3)",
        domain.size(),
        "contextual-mapping",
        result,
        f"{enum.status} {time.perf_counter() - start:.2f}",
    )


if __name__ == "__main__":
    main()

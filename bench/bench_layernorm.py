"""What LayerNorm and i-GELU cost: SMT query time and batched throughput, each with and without them.

    python bench/bench_layernorm.py                # both tables, markdown on stdout
    python bench/bench_layernorm.py --timeout 60   # per SMT query

SMT: one small random model (the one of specs/smt-output-bounds.yaml: width 2, one layer, hardmax, a width-2
feed-forward, 10-bit fixed point with 4 fractional bits, grid {-1, -3/4, ..., 1}, length 3) in five variants:
no norm, pre-LN, post-LN, post-LN with a final norm, and i-GELU instead of ReLU. Per variant, two output-bounds
queries: the exact readout range (found by enumeration first) widened by 2^-4, which z3 proves (unsat), and the
range narrowed by 2^-4 at the top, which z3 refutes (sat). Times are whole checks (encoding and solving).

Batched: inputs per CPU second of the numpy evaluator on a width-8, 2-layer, 2-head softmax model with a
width-16 feed-forward at length 8, 16-bit fixed point, without and with LayerNorm / i-GELU.
"""

from __future__ import annotations

import argparse
import itertools
import platform
import time
from dataclasses import replace
from fractions import Fraction as F

import numpy as np

from verify_tf.api import check
from verify_tf.batched import BatchedEvaluator, NumpyOps
from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.domain import GridDomain
from verify_tf.semantics import Fixed

SMT_BASE = RandomConfig(seed=7, width=2, layers=1, ffn_width=2, scoring="hardmax", weight_range=F(1), denominator=4)
VARIANTS = [
    ("no norm, ReLU", {}),
    ("pre-LN", {"layernorm": "pre"}),
    ("post-LN", {"layernorm": "post"}),
    ("post-LN + final norm", {"layernorm": "post", "final_norm": True}),
    ("i-GELU, no norm", {"activation": "i-gelu"}),
]


def readout_range(model, arith, domain) -> tuple[F, F]:
    evaluator = BatchedEvaluator(model, arith, domain.tokens, ops=NumpyOps())
    rows = np.array(list(itertools.product(range(len(domain.tokens)), repeat=domain.length)))
    q = evaluator.values(rows, "readout")
    return F(int(q.numerators.min()), q.den), F(int(q.numerators.max()), q.den)


def smt_table(timeout: float) -> list[str]:
    arith = Fixed(10, 4)
    domain = GridDomain.regular(2, F(1, 4), 3, F(-1), F(1))
    step = F(1, 16)
    lines = ["| model | readout range | proved: range ± 2^-4 | refuted: top − 2^-4 |", "|---|---|---|---|"]
    for name, change in VARIANTS:
        model = random_model(replace(SMT_BASE, **change))
        lo, hi = readout_range(model, arith, domain)
        cells = []
        for options, expected in (
            ({"lo": lo - step, "hi": hi + step}, "proved"),
            ({"lo": lo - step, "hi": hi - step}, "refuted"),
        ):
            start = time.perf_counter()
            result = check(model, arith, domain, "output-bounds", options, engine="smt", timeout=timeout, device="cpu")
            seconds = time.perf_counter() - start
            stats = result.statistics
            cells.append(
                f"{result.status} {seconds:.1f} s (encode {stats.get('encode_seconds', 0):.1f}, "
                f"{stats.get('bits_decomposed', 0)} bits)" + ("" if result.status == expected else " ⚠")
            )
        lines.append(f"| {name} | [{float(lo):.4g}, {float(hi):.4g}] | {cells[0]} | {cells[1]} |")
    return lines


def throughput(model, arith, domain, rows, seconds: float = 3.0) -> float:
    evaluator = BatchedEvaluator(model, arith, domain.tokens, ops=NumpyOps())
    evaluator.run(rows[:16])  # compile and warm up
    done, start = 0, time.process_time()
    while time.process_time() - start < seconds:
        evaluator.run(rows)
        done += len(rows)
    return done / (time.process_time() - start)


def batched_table() -> list[str]:
    arith = Fixed(16, 8)
    base = RandomConfig(
        seed=3, width=8, layers=2, heads=2, ffn_width=16, scoring="softmax", weight_range=F(1), denominator=16
    )
    domain = GridDomain(8, (F(-1, 2), F(0), F(1, 2)), 8)
    rows = np.random.default_rng(0).integers(0, len(domain.tokens), size=(4096, 8))
    lines = ["| model (d 8, 2 layers, 2 heads, softmax, n 8) | inputs / CPU s | relative |", "|---|---|---|"]
    reference = None
    for name, change in [
        ("no norm, ReLU", {}),
        ("pre-LN", {"layernorm": "pre"}),
        ("post-LN + final norm", {"layernorm": "post", "final_norm": True}),
        ("i-GELU", {"activation": "i-gelu"}),
        ("pre-LN + final norm, i-GELU", {"layernorm": "pre", "final_norm": True, "activation": "i-gelu"}),
    ]:
        rate = throughput(random_model(replace(base, **change)), arith, domain, rows)
        reference = reference or rate
        lines.append(f"| {name} | {rate:,.0f} | {rate / reference:.2f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per SMT check")
    parser.add_argument("--skip-smt", action="store_true")
    args = parser.parse_args()
    print(f"{platform.processor() or platform.machine()}, {time.strftime('%Y-%m-%d')}\n")
    if not args.skip_smt:
        print("\n".join(smt_table(args.timeout)) + "\n")
    print("\n".join(batched_table()))


if __name__ == "__main__":
    main()

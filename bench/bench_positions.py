"""What RoPE and ALiBi cost: the rotation tables, and exact batched evaluation beside standard attention.

* **tables**: CPU seconds per rotation-table entry (cos or sin of θ·p rounded to nearest, decided by rational
  interval arithmetic, ``semantics/rotary.py``), for RoPE's standard frequencies 10000^(−2k/d) and for exact
  turns, at f = 8, 16 and 32 fractional bits, positions 0..N − 1 (fresh caches per row).
* **evaluation**: inputs per CPU second of the batched evaluator (numpy) and of the reference interpreter on one
  random causal softmax model (2 layers, 2 heads, key dimension 4, width 4, a ReLU feed-forward, alphabet of 3,
  fixed 16/8, exact-sums) with standard, ALiBi and RoPE heads, all strings of length 8 (6,561 inputs; the
  interpreter on the first 200).

    python bench/bench_positions.py            # markdown tables on stdout
    python bench/bench_positions.py --quick    # fewer positions and inputs

Speed only: the differential tests check that every path computes the interpreter's values.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import time
from fractions import Fraction as F

import numpy as np

from verify_tf.batched import BatchedEvaluator, NumpyOps
from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.ir import Frequency, Rotary
from verify_tf.semantics import Fixed, evaluate, rotary


def cpu() -> float:
    return time.process_time()


def table_rows(positions: int) -> list[str]:
    rows = ["| frequencies | f | entries | CPU s | ms per entry |", "|---|---|---|---|---|"]
    kinds = {
        "standard, d = 8 (10000^(−2k/8))": Rotary.standard(8, 10000).frequencies,
        "turns 1/7, 2/7, 3/7, 1/12": tuple(Frequency("turns", t) for t in (F(1, 7), F(2, 7), F(3, 7), F(1, 12))),
    }
    for name, frequencies in kinds.items():
        for frac in (8, 16, 32):
            rotary.rotation_entry.cache_clear()
            rotary._enclosure.cache_clear()
            rotary._cos_sin_interval.cache_clear()
            start = cpu()
            for frequency in frequencies:
                rotary.rotation_table(frequency, positions, frac)
            seconds = cpu() - start
            entries = 2 * positions * len(frequencies)
            rows.append(f"| {name} | {frac} | {entries} | {seconds:.2f} | {1000 * seconds / entries:.2f} |")
    return rows


def evaluation_rows(interpreted: int) -> list[str]:
    rows = [
        "| heads | batched numpy: inputs / CPU s | interpreter: inputs / CPU s |",
        "|---|---|---|",
    ]
    arith = Fixed(16, 8, "exact-sums")
    words = np.array(list(itertools.product(range(3), repeat=8)), dtype=np.int64)
    for positional in ("standard", "alibi", "rope"):
        config = RandomConfig(
            seed=1, width=4, layers=2, heads=2, key_dim=4, ffn_width=4, scoring="softmax", positional=positional,
            causal=True, alphabet=("a", "b", "c"), weight_range=F(1), alibi_slopes="standard",
        )  # fmt: skip
        model = random_model(config)
        evaluator = BatchedEvaluator(model, arith, ("a", "b", "c"), ops=NumpyOps())
        evaluator.run(words[:8])  # compile outside the timing
        start = cpu()
        evaluator.run(words)
        batched = len(words) / (cpu() - start)
        start = cpu()
        for row in words[:interpreted]:
            evaluate(model, arith, ["abc"[int(t)] for t in row])
        interpreter = interpreted / (cpu() - start)
        rows.append(f"| {positional} | {batched:,.0f} | {interpreter:,.1f} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; load {os.getloadavg()}")
    print()
    print("\n".join(table_rows(16 if args.quick else 64)))
    print()
    print("\n".join(evaluation_rows(40 if args.quick else 200)))


if __name__ == "__main__":
    main()

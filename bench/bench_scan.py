"""Benchmark: the contextual-mapping scan (sorted runs, spill, k-way merge, streamed closest pair) at 10^8 values
in bounded memory, on synthetic keys (no model: this measures the scan alone).

    python bench/bench_scan.py                       # 10^8 values, 256 MiB of runs in memory, the rest on disk
    python bench/bench_scan.py --values 1e7 --memory 64 --wide

Keys: n = 4 values per input, random integers (optionally beyond int64: --wide adds 2^70), with one planted
closest pair; inputs in groups of 6 (as permutations would be) so that exempt pairs occur. Prints the time of
each phase, the peak resident memory of the process and the bytes spilled, and checks the planted pair.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

import numpy as np

from verify_tf.engines.runs import ClosestPair, RunStore, merged, sorted_run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--values", type=float, default=1e8)
    parser.add_argument("--memory", type=int, default=256, help="MiB of sorted runs held in memory")
    parser.add_argument("--chunk", type=int, default=1 << 20, help="inputs per work unit (one sorted run each)")
    parser.add_argument("--wide", action="store_true", help="keys beyond int64 (two limbs)")
    args = parser.parse_args()
    n = 4
    inputs = int(args.values) // n
    rng = np.random.default_rng(0)
    planted = (inputs // 3, inputs - 7)
    print(f"load average {os.getloadavg()[0]:.2f}; {inputs * n:,} values, {args.memory} MiB budget", flush=True)
    begin = time.perf_counter()
    with RunStore(args.memory << 20) as store:
        for start in range(0, inputs, args.chunk):
            stop = min(inputs, start + args.chunk)
            values = rng.integers(-(10**17), 10**17, size=(stop - start, n), dtype=np.int64) * 8
            for k, index in enumerate(planted):  # keys 8m apart, except the planted pair (gap 3)
                if start <= index < stop:
                    values[index - start, 1] = 5 * 10**17 + 3 * k
            if args.wide:
                values = values.astype(object) + (1 << 70)
            groups = np.arange(start, stop, dtype=np.int64) // 6
            store.add(sorted_run(values, 1, start, groups))
        runs_done = time.perf_counter()
        closest = ClosestPair(n)
        for block in merged(store, max(1 << 20, (args.memory << 20) // 4)):
            closest.add(block)
        spilled = store.spilled_bytes
        result = closest.result(1)
    end = time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"sorted runs {runs_done - begin:.1f} s, merge + closest pair {end - runs_done:.1f} s, "
        f"total {end - begin:.1f} s ({inputs * n / (end - begin) / 1e6:.2f} M values/s)"
    )
    print(f"peak resident memory {peak:.0f} MiB, spilled {spilled / 2**20:.0f} MiB, keys {result.keys:,}")
    print(f"smallest gap {result.gap} between {result.pair}; load average {os.getloadavg()[0]:.2f}")
    ok = result.gap == 3 and {result.pair[0][0], result.pair[1][0]} == set(planted)
    print("planted pair found" if ok else "PLANTED PAIR NOT FOUND")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

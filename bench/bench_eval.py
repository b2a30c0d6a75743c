"""Throughput of exact evaluation (inputs per second): reference interpreter, numpy, torch CPU, torch CUDA.

A ladder of random models from the research note's reference point (d=1, n=4, hardmax+RPE then a width-8
ReLU MLP, 32 grid values) up to d=16, n=32, 4 layers. Every back end computes the same exact values (the
differential tests check it); this measures speed only. On a shared machine wall-clock rates depend on the
load, so the CPU time of this process is reported as well (rate = inputs / CPU seconds).

    python bench/bench_eval.py                 # full ladder, markdown table on stdout
    python bench/bench_eval.py --quick         # the two smallest models
    python bench/bench_eval.py --json out.json
    python bench/bench_eval.py --device cuda --gpu-memory 8192   # adds the torch CUDA column (batch sized from
                                                                # GPU memory, MiB); fails if torch sees no GPU
    python bench/bench_eval.py --backends numpy,wide             # the wide path (every step on Python integers)

Columns: interpreter, numpy, torch cpu 1/2 threads, torch cuda (with ``--device cuda``, or ``auto`` when a GPU
is present), and "wide" (numpy with every step forced onto Python integers: what values beyond int64 cost).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from dataclasses import dataclass
from fractions import Fraction as F

import numpy as np

from verify_tf.batched import BatchedEvaluator, NumpyOps, TorchOps
from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.domain import GridDomain
from verify_tf.semantics import Fixed, evaluate


@dataclass(frozen=True)
class Case:
    name: str
    config: RandomConfig
    values: int  # grid values per coordinate
    length: int
    arith: Fixed = Fixed(16, 8)


LADDER = [
    Case(
        "d1 n4 rpe+mlp8 (research ref.)",
        RandomConfig(seed=1, width=1, positional="rpe", ffn_width=8, denominator=1, weight_range=F(8), max_length=4),
        32,
        4,
    ),
    Case("d2 n6 2 heads mlp8", RandomConfig(seed=2, width=2, heads=2, ffn_width=8, max_length=6), 8, 6),
    Case(
        "d4 n8 2 layers softmax",
        RandomConfig(seed=3, width=4, layers=2, heads=2, ffn_width=16, scoring="softmax", max_length=8),
        4,
        8,
    ),
    Case(
        "d8 n16 2 layers 4 heads", RandomConfig(seed=4, width=8, layers=2, heads=4, ffn_width=32, max_length=16), 2, 16
    ),
    Case(
        "d16 n32 4 layers 4 heads",
        RandomConfig(seed=5, width=16, layers=4, heads=4, ffn_width=64, max_length=32),
        2,
        32,
        Fixed(24, 8),
    ),
]


def _tokens(case: Case, count: int, rng: np.random.Generator) -> list:
    """``count`` distinct random grid points (the full token list would have values^d entries)."""
    grid = GridDomain.regular(1, F(1, case.values), 1, lo=F(-1, 2), hi=F(1, 2) - F(1, case.values))
    picks = rng.integers(0, len(grid.values), size=(count, case.config.width))
    return [tuple(grid.values[int(i)] for i in row) for row in picks]


def _rate(run, inputs_per_call: int, seconds: float) -> tuple[float, float]:
    """(inputs per wall second, inputs per CPU second) over repeated calls lasting about ``seconds``."""
    run()  # warm up (compilation, allocations)
    calls, wall0, cpu0 = 0, time.perf_counter(), time.process_time()
    while True:
        run()
        calls += 1
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        if wall >= seconds:
            return calls * inputs_per_call / wall, calls * inputs_per_call / max(cpu, 1e-9)


BACKENDS = ("interpreter", "numpy", "int64", "torch1", "torch2", "cuda", "wide")
LABELS = {
    "interpreter": "interpreter",
    "numpy": "numpy",
    "int64": "numpy int64",
    "torch1": "torch cpu 1 thread",
    "torch2": "torch cpu 2 threads",
    "cuda": "torch cuda",
    "wide": "wide (Python integers)",
}


def measure(case: Case, seconds: float, backends: list[str], gpu_memory: int) -> dict:
    rng = np.random.default_rng(0)
    model = random_model(case.config)
    tokens = _tokens(case, 256, rng)
    result = {"model": case.name, "length": case.length, "arith": case.arith.describe()}

    inputs = [tuple(tokens[int(t)] for t in row) for row in rng.integers(0, len(tokens), size=(64, case.length))]
    position = [0]

    def interpret():
        evaluate(model, case.arith, inputs[position[0] % len(inputs)])
        position[0] += 1

    if "interpreter" in backends:
        result["interpreter"] = _rate(interpret, 1, seconds)

    chosen = []
    for name in backends:
        if name == "numpy":
            chosen.append((LABELS[name], NumpyOps(), None, {}))
        elif name in ("torch1", "torch2"):
            chosen.append((LABELS[name], TorchOps("cpu"), int(name[-1]), {}))
        elif name == "cuda":
            chosen.append((LABELS[name], TorchOps("cuda"), None, {}))
        elif name == "int64":  # numpy without the int32 narrowing: the baseline of the wide path
            chosen.append((LABELS[name], NumpyOps(), None, {"narrow": False}))
        elif name == "wide":
            chosen.append((LABELS[name], NumpyOps(), None, {"force": "wide"}))
    for label, ops, threads, how in chosen:
        if threads is not None:
            import torch

            torch.set_num_threads(threads)
        evaluator = BatchedEvaluator(model, case.arith, tokens, ops=ops, **how)
        if label == "torch cuda":  # a GPU needs far larger batches than the CPU's 64 MiB chunks to be busy
            batch = max(1, min(1 << 24, (gpu_memory << 20) // evaluator.bytes_per_input(case.length)))
        elif how.get("force"):
            batch = 4096  # Python integers: a small batch measures the rate just as well
        else:
            batch = evaluator.chunk_size(case.length, 64 << 20)
        rows = ops.rows(rng.integers(0, len(tokens), size=(batch, case.length)))
        if label == "torch cuda":
            import torch

            def run():
                evaluator.run(rows, native=True)
                torch.cuda.synchronize()
        else:

            def run():
                evaluator.run(rows, native=True)

        result[label] = _rate(run, batch, seconds)
        result[f"{label} batch"] = batch
        if not how:
            result["int32"] = bool(evaluator.program(case.length).small)
    if "wide" in backends and "numpy int64" in result:
        result["wide cost"] = result["numpy int64"][1] / result[LABELS["wide"]][1]
    return result


def machine() -> str:
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return f"{cpu}, {os.cpu_count()} cores, {gpu}; numpy {np.__version__}, torch {torch.__version__}"


def _rate_text(rate: float) -> str:
    if rate >= 1e5:
        return f"{rate / 1e6:.3g} M"
    if rate >= 1e3:
        return f"{rate / 1e3:.3g} k"
    return f"{rate:.3g}"


def table(results: list[dict], backends: list[str]) -> str:
    columns = [LABELS[b] for b in backends]
    lines = ["| model | n | int | " + " | ".join(columns) + " |", "|---|---|---|" + "---|" * len(columns)]
    for r in results:
        cells = [f"{_rate_text(r[c][0])} ({_rate_text(r[c][1])})" for c in columns]
        width = "int32" if r.get("int32") else "int64"
        lines.append(f"| {r['model']} | {r['length']} | {width} | " + " | ".join(cells) + " |")
    if any("wide cost" in r for r in results):
        lines.append("")
        lines.append(
            "wide path / numpy int64, per CPU second: "
            + ", ".join(f"{r['model']}: {r['wide cost']:.0f}x" for r in results if "wide cost" in r)
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the two smallest models")
    parser.add_argument("--seconds", type=float, default=2.0, help="measuring time per cell")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument(
        "--device",
        default="auto",
        choices=("auto", "cpu", "cuda"),
        help="cuda: add the torch CUDA column (and require a GPU); auto: when torch sees one",
    )
    parser.add_argument(
        "--backends",
        default="interpreter,numpy,torch1,torch2",
        help=f"columns among {','.join(BACKENDS)} (cuda is added by --device)",
    )
    parser.add_argument("--gpu-memory", type=int, default=4096, help="MiB of GPU memory per batch")
    args = parser.parse_args()
    import torch

    backends = [b for b in args.backends.split(",") if b in BACKENDS]
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device")
    if args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available()):
        backends = [b for b in backends if b != "cuda"] + ["cuda"]
    else:
        backends = [b for b in backends if b != "cuda"]
    cases = LADDER[:2] if args.quick else LADDER
    print(f"load average {os.getloadavg()[0]:.2f} at start", flush=True)
    results = [measure(case, args.seconds, backends, args.gpu_memory) for case in cases]
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.2f} at the end\n")
    print("inputs per second, wall clock (in parentheses: per CPU second of this process)\n")
    print(table(results, backends))
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"machine": machine(), "results": results}, out, indent=2)


if __name__ == "__main__":
    main()

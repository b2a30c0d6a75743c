"""Where split's backward bounds lose width on a model's small cubes (issue 43's d3 n4 gap): per stage, the median
bound width / sampled true width (``--samples`` members per cube, the reference interpreter's trace; a sampled width
is a lower bound of the true width, so each ratio is an upper bound of the true ratio).

    python bench/bench_crown_stages.py [--model d3] [--cubes 32] [--samples 200]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_split import FIXED, small_cubes, softmax_case

from verify_tf.api import make_task
from verify_tf.engines.split.bounder import Bounder
from verify_tf.engines.split.cubes import rows
from verify_tf.linear.backward import refined_bound
from verify_tf.semantics.interpreter import evaluate
from verify_tf.spaces import InputSpace

PROPERTIES = {"d2": {"lo": -5, "hi": 5}, "d3": {"lo": -33, "hi": 33}, "4h": {"hi": 46}}


def true_stages(model, space, cube, samples: int, rng) -> dict[str, np.ndarray]:
    """Per stage name, (samples, ...) float values over sampled members of the cube."""
    members = rows(space, cube)
    pick = members[rng.choice(len(members), size=min(samples, len(members)), replace=False)]
    out: dict[str, list] = {}
    for row in pick:
        trace = evaluate(model, FIXED, tuple(space.tokens[int(t)] for t in row))
        for b, block in enumerate(trace.blocks):
            for h, head in enumerate(block.heads):
                scores = np.array([[float(s) for s in r] for r in head.scores])
                out.setdefault(f"b{b} h{h} differences", []).append(scores[:, None, :] - scores[:, :, None])
                out.setdefault(f"b{b} h{h} weights", []).append(np.array([[float(a) for a in r] for r in head.weights]))
                out.setdefault(f"b{b} h{h} output", []).append(np.array([[float(a) for a in r] for r in head.output]))
            for name in ("after_attention", "hidden", "after_feed_forward"):
                value = getattr(block, name)
                if value is not None:
                    out.setdefault(f"b{b} {name}", []).append(np.array([[float(a) for a in r] for r in value]))
        out.setdefault("readout", []).append(np.array([float(a) for a in trace.readout]))
    return {k: np.array(v) for k, v in out.items()}


def bound_stages(result, one: int, b: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    def pair(x):
        return np.asarray(x.lo, dtype=np.float64)[b] / one, np.asarray(x.hi, dtype=np.float64)[b] / one

    out = {}
    for i, block in enumerate(result.blocks):
        for h, head in enumerate(block.heads):
            if head.differences is not None:
                out[f"b{i} h{h} differences"] = pair(head.differences)
            out[f"b{i} h{h} weights"] = pair(head.weights)
            out[f"b{i} h{h} output"] = pair(head.output)
        for name in ("after_attention", "hidden", "after_feed_forward"):
            if name in block.stages:
                out[f"b{i} {name}"] = pair(block.stages[name])
    out["readout"] = pair(result.readout)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="d3")
    parser.add_argument("--cubes", type=int, default=32)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--oracle", default="", help="ratios r, comma-separated: Knuth's tree with true ranges r-fold")
    parser.add_argument("--probes", type=int, default=20)
    parser.add_argument("--table", default="", help="every input's readout (see oracle_knuth)")
    args = parser.parse_args()
    if args.oracle:
        oracle_knuth(args.model, [float(r) for r in args.oracle.split(",")], args.probes, table=args.table)
        return
    model, domain = softmax_case(args.model)
    space = InputSpace(domain)
    task = make_task(model, FIXED, domain, "output-bounds", PROPERTIES[args.model], device="cpu")
    bounder = Bounder(task, space)
    cubes = small_cubes(domain, args.cubes)
    linear, table = bounder._linear(model, cubes[0].length)
    ranges = np.array([c.ranges for c in cubes], dtype=np.int64)
    cpu = time.process_time()
    result = refined_bound(linear, table.inputs(ranges, model.dim), readout=bounder.readout)
    print(f"load {os.getloadavg()[0]:.1f}; bound CPU {1000 * (time.process_time() - cpu) / len(cubes):.1f} ms/cube")
    rng = np.random.default_rng(0)
    found: dict[str, list[float]] = {}
    for b, cube in enumerate(cubes):
        truth = true_stages(model, space, cube, args.samples, rng)
        bounds = bound_stages(result, linear.scale.one, b)
        for name, (lo, hi) in bounds.items():
            if name not in truth:
                continue
            values = truth[name]
            width = values.max(axis=0) - values.min(axis=0)
            offset = lo.shape[-1] - width.shape[-1] if lo.ndim == 1 else 0  # a BOS position: not in the trace
            bw = (hi - lo)[offset:] if lo.ndim == 1 else hi - lo
            mask = width > 1e-9
            if mask.any():
                found.setdefault(name, []).append(float(np.median(bw[mask] / width[mask])))
            found.setdefault(name + " (abs width)", []).append(float(np.median(bw)))
    for name, values in found.items():
        print(f"{name:40s} median {np.median(values):8.2f}")


def oracle_knuth(model_name: str, ratios: list[float], probes: int, seed: int = 0, table: str = "") -> None:
    """Knuth's tree size (widest split, random dives) if a cube's bound were its true readout range widened r-fold
    about its middle (true: every member where at most 2^17, else 2^14 sampled members: optimistic), for each r:
    the smallest tree any bound of that tightness could give. ``table``: a .npy of every input's readout numerators
    (den 1024), shape (tokens,)*length + (positions,): the exact ranges at every size."""
    import random

    from verify_tf.batched import BatchedEvaluator
    from verify_tf.engines.split.cubes import roots, token_indices

    model, domain = softmax_case(model_name)
    space = InputSpace(domain)
    lo_bound, hi_bound = -4329 / 128, 4329 / 128
    evaluator = BatchedEvaluator(model, FIXED, space.tokens, backend="numpy", device="cpu")
    np_rng = np.random.default_rng(seed)

    shape = (len(domain.values),) * (domain.length * domain.dim) + (-1,)
    full = np.load(table, mmap_mode="r").reshape(shape) if table else None
    cache: dict = {}

    def truth(cube) -> tuple[np.ndarray, np.ndarray]:
        if full is not None:
            if cube not in cache:
                part = full[tuple(slice(a, b + 1) for position in cube.ranges for a, b in position)]
                flat = np.asarray(part).reshape(-1, part.shape[-1]) / 1024
                cache[cube] = (flat.min(axis=0), flat.max(axis=0))
            return cache[cube]
        if cube.volume() <= 1 << 17:
            members = rows(space, cube)
        else:
            columns = [token_indices(space, position) for position in cube.ranges]
            members = np.stack([np_rng.choice(c, size=1 << 14) for c in columns], axis=1)
        values = evaluator.values(members, "readout")
        q = values.numerators.astype(np.float64) / values.den
        return q.min(axis=0), q.max(axis=0)

    for r in ratios:
        rng = random.Random(seed)
        estimates = []
        cpu = time.process_time()
        for _ in range(probes):
            cube, estimate, weight = roots(space)[0], 0, 1
            while True:
                estimate += weight
                lo, hi = truth(cube)
                middle, half = (lo + hi) / 2, r * (hi - lo) / 2
                if (np.all(middle - half >= lo_bound) and np.all(middle + half <= hi_bound)) or cube.widest() is None:
                    break
                cube, weight = cube.halves(*cube.widest())[rng.randrange(2)], 2 * weight
            estimates.append(estimate)
        print(
            f"ratio {r:5.1f}: Knuth mean {np.mean(estimates):.3g} (median {np.median(estimates):.3g}), "
            f"{time.process_time() - cpu:.0f} CPU s",
            flush=True,
        )


if __name__ == "__main__":
    main()

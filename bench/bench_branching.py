"""Branching rules and optimised slopes for split's backward bounds (issue 43), on the three two-layer softmax models
of ``bench_split.softmax_case`` (fixed 16/8; docs/performance.md holds the measured tables).

1. ``rules``: Knuth's tree-size estimate (``--probes`` random dives down split's branching, every open cube split,
   until a cube closes by bounds) per branching rule:
   * ``engine``: the widest range first, ties by the readout forms' |coefficient| × width summed over positions and
     sides (what the engine does, ``SplitCube.most_influential``);
   * ``coefficient``: the largest |coefficient| × width alone (summed over positions and sides);
   * ``open sides``: the same, summed over only the readout sides the property still leaves open (hi above its hi,
     lo below its lo);
   * ``excess``: each open side's |coefficient| × width weighted by how far it reaches past the bound;
   * ``coefficient × range``: |coefficient| × width times the range's count of values.
2. ``slopes``: per choice of slopes (``verify_tf.linear.backward.Slopes``: the ReLU lower slope, the product
   planes' θ; and per-element slopes by ``verify_tf.linear.optimise``, alpha-CROWN, at the readout or at every
   stage), the median bound width / true width on 64 small cubes (``bench_tightness``) and CPU ms per cube, and
   Knuth's estimate with the engine's rule: what optimised slopes buy against what they cost.

    python bench/bench_branching.py [--probes 100] [--only rules,slopes] [--models d2,d3,4h] [--d3-knuth]
                                    [--sets LABEL,...] [--iterations N]

Wall seconds depend on the machine's load (printed); CPU seconds are this process's.
"""

from __future__ import annotations

import argparse
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_split import FIXED, knuth_dives, run_sections, small_cubes, softmax_case
from bench_tightness import ratios, true_ranges

from verify_tf.api import make_task
from verify_tf.engines.split.bounder import Bounder
from verify_tf.linear import optimise
from verify_tf.linear.backward import DEFAULT, Slopes
from verify_tf.spaces import InputSpace

PROPERTIES = {
    "d2": {"lo": -5, "hi": 5},
    "d3": {"lo": Fraction(-4329, 128), "hi": Fraction(4329, 128)},
    "4h": {"hi": Fraction(47661, 1024)},
}
ALL = (DEFAULT, Slopes(plane=0), Slopes(plane=2), Slopes(relu="zero"), Slopes(relu="one"))
SLOPE_SETS = {  # label: (every backward pass's variants, the readout's, where per-element slopes are optimised)
    "CROWN's (adaptive ReLU, midpoint planes)": ((DEFAULT,), None, "none"),
    "best of 3 planes (θ = 0, 1/2, 1)": ((DEFAULT, Slopes(plane=0), Slopes(plane=2)), None, "none"),
    "best of 5 (3 planes, ReLU 0 and 1)": (ALL, None, "none"),
    "best of 5 at the readout only": ((DEFAULT,), ALL, "none"),
    "best of 5 and alpha-CROWN at the readout": ((DEFAULT,), ALL, "readout"),
    "best of 5 at the readout, alpha-CROWN at every stage": ((DEFAULT,), ALL, "every stage"),
}


def side_weights(view, options, rule: str) -> np.ndarray:
    """Per readout side (upper, then lower) the weight of its coefficients: 1 (or the excess) where open."""
    positions = view.sides.shape[0] // 2
    weights = np.zeros(2 * positions)
    for p, (lo, hi) in enumerate(view.bounds.readout):
        if options.get("hi") is not None and hi > options["hi"]:
            weights[p] = float(hi - options["hi"]) if rule == "excess" else 1.0
        if options.get("lo") is not None and lo < options["lo"]:
            weights[positions + p] = float(options["lo"] - lo) if rule == "excess" else 1.0
    return weights


def choose(rule: str, cube, view, options) -> tuple[int, int]:
    """The (position, coordinate) the rule splits (floats only rank)."""
    if rule == "engine":
        where = cube.most_influential(view.scores)
        assert where is not None
        return where
    splittable = [(p, c) for p, position in enumerate(cube.ranges) for c, (a, b) in enumerate(position) if b > a]

    def values(pc: tuple[int, int]) -> int:
        a, b = cube.ranges[pc[0]][pc[1]]
        return b - a + 1

    if rule in ("open sides", "excess"):
        scores = np.tensordot(side_weights(view, options, rule), view.sides, axes=1)
    else:
        scores = view.scores
    key = (
        (lambda pc: float(scores[pc]) * values(pc)) if rule == "coefficient × range" else (lambda pc: float(scores[pc]))
    )
    best = max(splittable, key=key)
    if key(best) > 0:
        return best
    where = cube.widest()
    assert where is not None
    return where


def knuth(
    name: str, rule: str, probes: int, slopes=((DEFAULT,), None, "none"), seed: int = 0
) -> tuple[float, float, int]:
    """(mean, median, cubes bounded) of Knuth's estimate: random dives, the cubes of all probes bounded together."""
    model, domain = softmax_case(name)
    options = PROPERTIES[name]
    task = make_task(model, FIXED, domain, "output-bounds", options, device="cpu")
    space = task.prop.input_space(task)
    bounder = Bounder(task, space, True, variants=slopes[0], readout=slopes[1], optimised=slopes[2])
    estimates, bounded = knuth_dives(
        task, space, bounder, probes, lambda cube, view: choose(rule, cube, view, options), seed
    )
    return float(np.mean(estimates)), float(np.median(estimates)), bounded


def rules(args) -> None:
    print(f"\nKnuth tree-size estimates per branching rule ({args.probes} probes; mean, median in brackets)\n")
    print("| model | rule | cubes (Knuth) | cubes bounded by the probes | CPU s | wall s |")
    print("|---|---|---|---|---|---|")
    for name in args.models.split(","):
        for rule in ("engine", "coefficient", "open sides", "excess", "coefficient × range"):
            start, cpu = time.perf_counter(), time.process_time()
            mean, median, bounded = knuth(name, rule, args.probes)
            print(
                f"| {name} | {rule} | {mean:.3g} ({median:.3g}) | {bounded:,} | {time.process_time() - cpu:.1f} "
                f"| {time.perf_counter() - start:.1f} |",
                flush=True,
            )


def slopes(args) -> None:
    print(f"\nOptimised slopes: tightness on 64 small cubes, Knuth with the engine's rule ({args.probes} probes)\n")
    print("| model | slopes | median bound/true width | mean | CPU ms per cube (batch of 64) | cubes (Knuth) | CPU s |")
    print("|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        model, domain = softmax_case(name)
        space = InputSpace(domain)
        task = make_task(model, FIXED, domain, "output-bounds", PROPERTIES[name], device="cpu")
        cubes = small_cubes(domain, 64)
        truth = true_ranges(model, space, cubes)
        for label, chosen in SLOPE_SETS.items():
            if args.sets and not any(part in label for part in args.sets.split(",")):
                continue
            bounder = Bounder(task, space, True, variants=chosen[0], readout=chosen[1], optimised=chosen[2])
            cpu = time.process_time()
            views = bounder.bound(cubes)
            per_cube = 1000 * (time.process_time() - cpu) / len(cubes)
            found = [
                (np.array([float(a) for a, _ in v.bounds.readout]), np.array([float(b) for _, b in v.bounds.readout]))
                for v in views
            ]
            found_ratios = ratios(found, truth)
            tree = "-"
            cpu = time.process_time()
            if name != "d3" or args.d3_knuth:
                mean, median, _ = knuth(name, "engine", args.probes, chosen)
                tree = f"{mean:.3g} ({median:.3g})"
            print(
                f"| {name} | {label} | {np.median(found_ratios):.3f} | {np.mean(found_ratios):.3f} | {per_cube:.1f} "
                f"| {tree} | {time.process_time() - cpu:.1f} |",
                flush=True,
            )


SECTIONS = {"rules": rules, "slopes": slopes}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--probes", type=int, default=100)
    parser.add_argument("--only", default=",".join(SECTIONS))
    parser.add_argument("--models", default="d2,d3,4h")
    parser.add_argument("--d3-knuth", action="store_true", help="slopes: also d3's Knuth estimates")
    parser.add_argument("--iterations", type=int, default=None, help="slopes: optimise.ITERATIONS (default its own)")
    parser.add_argument("--sets", default="", help="slopes: only the sets whose label contains one of these (comma)")
    args = parser.parse_args()
    if args.iterations is not None:
        optimise.ITERATIONS = args.iterations
    run_sections(SECTIONS, args)


if __name__ == "__main__":
    main()

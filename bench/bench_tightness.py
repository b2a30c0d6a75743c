"""Tightness of split's bounds on small cubes (issue 43): median bound width / true width of the readout, per
bound domain, on the three two-layer softmax models of ``bench_split.softmax_case`` (fixed 16/8).

A *small cube* is a product of per-coordinate index ranges, each 1–3 consecutive grid values (seeded); the true
width of a position's readout is max − min over every input of the cube (the batched evaluator, bit for bit the
interpreter), and a cube's ratio is (bound hi − bound lo) / true width at the position where the true width is
largest (positions whose readout is constant over the cube are skipped). Medians over ``--cubes`` cubes.

Domains: ``intervals`` (``verify_tf.bounds``: exact intervals with the winners' hull and the softmax weight box),
``forward`` (``verify_tf.linear``: interval and linear forms, forward, intersected with nothing else),
``backward`` (``verify_tf.linear.backward``: the backward pass from the readout, concretized over the cube,
intersected with the forward domain: what split decides on, ``Bounder``), ``alpha readout`` and ``alpha every
stage`` (the same with per-element slopes chosen by ``verify_tf.linear.optimise``, alpha-CROWN, at the readout's
backward pass or at every backward pass: ``Bounder(optimised=...)``). With auto_LiRPA importable (never a
dependency: ``PYTHONPATH=DIR`` holding its source), ``CROWN`` and ``CROWN∩hull``: auto_LiRPA's backward bound of
the same network in real arithmetic (no rounding, real softmax: a float model beside the fixed-point one, so it is
a tightness reference, not a sound bound of the fixed-point model), intersected with ``intervals``.

    python bench/bench_tightness.py [--cubes 64] [--models d2,d3,4h] [--lirpa]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_split import FIXED, small_cubes, softmax_case

from verify_tf.api import make_task
from verify_tf.batched import BatchedEvaluator
from verify_tf.bounds import cube_bounds
from verify_tf.engines.split.bounder import Bounder
from verify_tf.engines.split.cubes import bounds_cube, rows
from verify_tf.spaces import InputSpace

PROPERTIES = {"d2": {"lo": -5, "hi": 5}, "d3": {"lo": -33, "hi": 33}, "4h": {"hi": Fraction(47661, 1024)}}


def true_ranges(model, space, cubes) -> list[tuple[np.ndarray, np.ndarray]]:
    evaluator = BatchedEvaluator(model, FIXED, space.tokens, backend="numpy", device="cpu")
    out = []
    for cube in cubes:
        values = evaluator.values(rows(space, cube), "readout")
        q = values.numerators.astype(np.float64) / values.den
        out.append((q.min(axis=0), q.max(axis=0)))
    return out


def ratios(bounds: list[tuple[np.ndarray, np.ndarray]], truth) -> list[float]:
    out = []
    for (lo, hi), (tlo, thi) in zip(bounds, truth):
        width = thi - tlo
        p = int(np.argmax(width))
        if width[p] > 0:
            ratio = float((hi[p] - lo[p]) / width[p])
            out.append(ratio if np.isfinite(ratio) else float("inf"))  # auto_LiRPA's NaN bounds: no bound
    return out


def interval_bounds(model, space, cubes):
    out = []
    for cube in cubes:
        readout = cube_bounds(model, FIXED, bounds_cube(space, cube)).readout
        out.append((np.array([float(a) for a, _ in readout]), np.array([float(b) for _, b in readout])))
    return out


def domain_bounds(task, space, cubes, domain: str, optimised: str = "none"):
    bounder = Bounder(task, space, True, domain=domain, optimised=optimised)
    views = bounder.bound(cubes)
    return [
        (np.array([float(a) for a, _ in v.bounds.readout]), np.array([float(b) for _, b in v.bounds.readout]))
        for v in views
    ]


def lirpa_bounds(model, cubes, domain):
    from lirpa_mirror import crown_bounds

    return crown_bounds(model, domain, cubes)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cubes", type=int, default=64)
    parser.add_argument("--models", default="d2,d3,4h")
    parser.add_argument("--lirpa", action="store_true", help="also auto_LiRPA's CROWN (needs it importable)")
    args = parser.parse_args()
    print(
        f"{datetime.datetime.now():%Y-%m-%d %H:%M}, {platform.node()}, {os.cpu_count()} cores, "
        f"load average at start {os.getloadavg()[0]:.1f}\n"
    )
    columns = ["intervals", "forward", "backward", "alpha readout", "alpha every stage"]
    columns += ["CROWN", "CROWN∩hull"] if args.lirpa else []
    print("| model | cubes | " + " | ".join(f"{c} (median ×)" for c in columns) + " | CPU ms/cube per column |")
    print("|---|---|" + "---|" * len(columns) + "---|")
    for name in args.models.split(","):
        model, domain = softmax_case(name)
        space = InputSpace(domain)
        task = make_task(model, FIXED, domain, "output-bounds", PROPERTIES[name], device="cpu")
        cubes = small_cubes(domain, args.cubes)
        truth = true_ranges(model, space, cubes)
        cells, costs = [], []
        found: dict[str, list] = {}
        for column in columns:
            cpu = time.process_time()
            if column == "intervals":
                found[column] = interval_bounds(model, space, cubes)
            elif column in ("forward", "backward"):
                found[column] = domain_bounds(task, space, cubes, column)
            elif column.startswith("alpha"):
                found[column] = domain_bounds(task, space, cubes, "backward", column.removeprefix("alpha "))
            elif column == "CROWN":
                found[column] = lirpa_bounds(model, cubes, domain)
            else:
                found[column] = [
                    (np.maximum(a[0], b[0]), np.minimum(a[1], b[1])) for a, b in zip(found["CROWN"], found["intervals"])
                ]
            costs.append(1000 * (time.process_time() - cpu) / len(cubes))
            cells.append(f"{np.median(ratios(found[column], truth)):.2f}")
        print(f"| {name} | {len(cubes)} | " + " | ".join(cells) + " | " + " / ".join(f"{c:.1f}" for c in costs) + " |")
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

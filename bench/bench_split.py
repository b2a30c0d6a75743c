"""Benchmark of the ``split`` engine (branch and bound) against batched enumeration: issue 13's ladder and issue 29's
targets (docs/performance.md holds the measured tables).

1. The two-attention-layer rungs of bench_smt's ladder (random hardmax models ``d2 L2 n3`` exact and fixed,
   ``d3 L2 n4``): output bounds with bench_smt's bound (4·max|sample| + 4, which holds), split within --timeout,
   and the batched evaluator over the same domain (extrapolated from 3 s when larger).
2. Issue 29's softmax models (fixed 16/8, seed 5 of the ladder with softmax heads, and the 4-head model):
   * ``d2 L2 n3`` (81 tokens, length 3, 531,441 inputs) at |q| <= 5: split as shipped (adaptive leaves), split
     with bounds only (no enumeration above single inputs), split with today's interval bounds only, and batched
     enumeration;
   * the 4-head model (49 tokens, length 6, 1.4·10^10 inputs): the failing bound (sampled max − 1/256), and the
     holding bounds q <= 60.67 and q <= "half way between the root's interval top and the sampled max", each for
     --timeout: the cube rate, the closed share, and the predicted time (Knuth's tree-size estimate / cube rate);
     with ``--cluster local:N`` the holding bound 60.67 runs on the cluster for ``--cluster-budget`` seconds;
   * ``d3 L2 n4`` (125 tokens, length 4, 2.4·10^8 inputs) at |q| <= 33.82: split's closed inputs per second against
     batched enumeration's inputs per second (the ratio predicts split's time over enumeration's).
3. Knuth tree-size estimates (random dives of split's own branching down to closed cubes, ``--probes`` each) with
   the interval bounds and with the linear domain.
4. The linear domain's bound cost per cube, in batches of 256 cubes of the search's kind, wall and CPU time.
5. Yun et al.'s Lemma 6 contextual mapping at (d, 1/δ, n) = (2, 3, 3), split and enumerate.

    python bench/bench_split.py [--timeout 60] [--probes 200] [--only ladder,d2,fourhead,d3,knuth,cost,lemma6]
                                [--cluster local:2 --cluster-budget 900] [--bounds 100,000]

Wall seconds depend on the machine's load (printed); CPU seconds are this process's (in-process executor).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import random
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_smt import LADDER, enumeration_seconds

from verify_tf.api import check, make_task
from verify_tf.bounds import Cube, cube_bounds
from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.builders.yun import yun_contextual_mapping
from verify_tf.domain import GridDomain
from verify_tf.engines.base import Run
from verify_tf.engines.split import driver as split
from verify_tf.engines.split.bounder import Bounder
from verify_tf.engines.split.cubes import SplitCube, roots
from verify_tf.executors import InProcess
from verify_tf.linear import CoordinateTable, LinearModel
from verify_tf.semantics import Exact, Fixed, evaluate
from verify_tf.work import Deadline

FIXED = Fixed(16, 8)
STATS = ("cubes_created", "closed_by_bounds", "closed_by_enumeration", "closed_by_smt")


def softmax_case(name: str):
    """(model, domain, bound options) of issue 29's softmax models."""
    if name == "d2":
        config = RandomConfig(seed=5, width=2, layers=2, ffn_width=2, scoring="softmax", weight_range=Fraction(1))
        return random_model(config), GridDomain.regular(2, Fraction(1, 4), 3, lo=Fraction(-1), hi=Fraction(1))
    if name == "d3":
        config = RandomConfig(seed=5, width=3, layers=2, ffn_width=3, scoring="softmax", weight_range=Fraction(1))
        return random_model(config), GridDomain.regular(3, Fraction(1, 2), 4, lo=Fraction(-1), hi=Fraction(1))
    config = RandomConfig(seed=7, width=2, layers=2, heads=4, ffn_width=4, scoring="softmax", weight_range=Fraction(1))
    # 7 points per coordinate, representable in 16/8 (a 1/3 step is not: the API refuses it as the loader does)
    return random_model(config), GridDomain.regular(2, Fraction(1, 4), 6, lo=Fraction(-3, 4), hi=Fraction(3, 4))


def small_cubes(domain, count: int, seed: int = 0) -> list[SplitCube]:
    """``count`` seeded cubes of a grid domain, each coordinate's range 1–3 consecutive grid values."""
    rng = random.Random(seed)
    size = len(domain.values)
    out = []
    for _ in range(count):
        position = []
        for _ in range(domain.length):
            ranges = []
            for _ in range(domain.dim):
                a = rng.randrange(size)
                ranges.append((a, min(size - 1, a + rng.randrange(3))))
            position.append(tuple(ranges))
        out.append(SplitCube(tuple(position)))
    return out


def sampled_max(model, arith, domain, count: int = 200) -> Fraction:
    random.seed(0)
    sample = [tuple(random.choice(domain.tokens) for _ in range(domain.length)) for _ in range(count)]
    return max(q for x in sample for q in evaluate(model, arith, x).readout)


def batched_sampled_max(model, arith, domain, count: int = 100_000, seed: int = 1) -> Fraction:
    """The largest readout over ``count`` random members (another seed than split's own 4,096-member sample), by
    the batched evaluator (bit for bit the interpreter's values)."""
    from verify_tf.batched import BatchedEvaluator
    from verify_tf.spaces import InputSpace

    space = InputSpace(domain)
    evaluator = BatchedEvaluator(model, arith, space.tokens, backend="numpy", device="cpu")
    rows = np.random.default_rng(seed).integers(0, len(space.tokens), size=(count, domain.length), dtype=np.int64)
    values = evaluator.values(rows, "readout")
    return Fraction(int(values.numerators.max()), values.den)


def run_split(model, arith, domain, options, limits, timeout, executor=None):
    """(verdict, wall s, CPU s) of split with ``limits`` (in-process unless an executor is given)."""
    task = make_task(model, arith, domain, "output-bounds", options, device="cpu")
    start, cpu = time.perf_counter(), time.process_time()
    verdict = split.check(task, Run(executor or InProcess(), Deadline(timeout)), limits)
    return verdict, time.perf_counter() - start, time.process_time() - cpu


def row(case, inputs, prop, mode, verdict, wall, cpu, extra=""):
    s = verdict.statistics
    closed = "/".join(str(s.get(key, 0)) for key in STATS[1:])
    status = verdict.status if verdict.status != "unknown" else f"unknown ({s.get('closed_share')} closed)"
    ms = s.get("bound_ms_per_cube")
    print(
        f"| {case} | {inputs:,} | {prop} | {mode} | {status} | {wall:.1f} | {cpu:.1f} | {s.get('cubes_created', '-')} "
        f"| {closed} | {s.get('cubes_bounded', 0)} | {'-' if ms is None else f'{ms:.1f}'} | {extra} |",
        flush=True,
    )


def header(title: str) -> None:
    print(f"\n{title}\n")
    print(
        "| case | inputs | property | mode | verdict | wall s | CPU s | cubes | closed b/e/s | bounded "
        "| bound ms/cube (wall) | notes |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")


MODES = {
    "split (adaptive)": split.Limits(),
    "split, bounds only": split.Limits(enumerate_at=1, adaptive=False),
    "split, intervals only (before issue 29)": split.Limits(enumerate_at=1, adaptive=False, linear=False),
}


def ladder(args) -> None:
    header("Issue 13's ladder (random hardmax, exact or fixed 10/4)")
    for name, width, layers, ffn, length, step, arith in LADDER:
        if layers < 2:
            continue
        config = RandomConfig(seed=5, width=width, layers=layers, ffn_width=ffn, weight_range=Fraction(1))
        model = random_model(config)
        domain = GridDomain.regular(width, step, length, lo=Fraction(-1), hi=Fraction(1))
        random.seed(0)
        sample = [tuple(random.choice(domain.tokens) for _ in range(length)) for _ in range(200)]
        bound = 4 * max(abs(q) for x in sample for q in evaluate(model, arith, x).readout) + 4
        verdict, wall, cpu = run_split(model, arith, domain, {"lo": -bound, "hi": bound}, split.Limits(), args.timeout)
        enum_s, extrapolated = enumeration_seconds(model, arith, domain)
        extra = f"batched enumerate {'~' if extrapolated else ''}{enum_s:.3g} s"
        row(name, domain.size(), f"\\|q\\| <= {float(bound):.3g}", "split (adaptive)", verdict, wall, cpu, extra)


def d2(args) -> None:
    header("d2 L2 n3 softmax, fixed 16/8, |q| <= 5 (exact range [-4.22, -0.57])")
    model, domain = softmax_case("d2")
    enum_s, _ = enumeration_seconds(model, FIXED, domain)
    for mode, limits in MODES.items():
        verdict, wall, cpu = run_split(model, FIXED, domain, {"lo": -5, "hi": 5}, limits, args.timeout)
        row(
            "d2 L2 n3 softmax",
            domain.size(),
            "\\|q\\| <= 5",
            mode,
            verdict,
            wall,
            cpu,
            f"batched enumerate {enum_s:.2f} s",
        )


def fourhead(args) -> None:
    header("4 heads, d 2, 2 layers, softmax, fixed 16/8, 49 tokens, length 6 (1.38·10^10 inputs)")
    model, domain = softmax_case("4h")
    top = max(hi for _, hi in cube_bounds(model, FIXED, Cube.whole(domain.tokens, 6)).readout)
    seen = sampled_max(model, FIXED, domain)
    enum_s, _ = enumeration_seconds(model, FIXED, domain)
    bounds = [
        ("fails: sampled max - 1/256", seen - Fraction(1, 256)),
        ("fails: max of 100,000 random members - 1/256", batched_sampled_max(model, FIXED, domain) - Fraction(1, 256)),
        ("holds: 60.67 (issue 29)", Fraction(6067, 100)),
        ("holds: 47661/1024 (issue 43)", Fraction(47661, 1024)),
        ("holds: half way to the sampled max", (top + seen) / 2),
    ]
    for label, hi in bounds:
        if args.bounds and not any(part in label for part in args.bounds.split(",")):
            continue
        verdict, wall, cpu = run_split(model, FIXED, domain, {"hi": hi}, split.Limits(), args.timeout)
        s = verdict.statistics
        extra = f"batched enumerate ~{enum_s:.3g} s"
        if verdict.status == "unknown" and s.get("cubes_bounded"):
            rate = s["cubes_bounded"] / cpu
            size = knuth(model, domain, {"hi": hi}, args.probes, linear=True, rule="engine")[0]
            extra += f"; {rate:.0f} cubes/CPU s; Knuth tree ~{size:.2g} cubes: predicted {size / rate:,.0f} CPU s"
        if verdict.status == "refuted":
            extra += f"; {s.get('refuted_by')} at depth {s.get('witness_cube_depth')}"
        row(
            "4-head softmax",
            domain.size(),
            f"q <= {float(hi):.4g}: {label}",
            "split (adaptive)",
            verdict,
            wall,
            cpu,
            extra,
        )
    if args.cluster:
        from verify_tf.executors import open_cluster

        executor = open_cluster(args.cluster)
        try:
            hi = Fraction(6067, 100)
            verdict, wall, cpu = run_split(
                model, FIXED, domain, {"hi": hi}, split.Limits(), args.cluster_budget, executor
            )
            row("4-head softmax", domain.size(), "q <= 60.67", f"split --cluster {args.cluster}", verdict, wall, cpu)
        finally:
            executor.close()


def enumeration_rate(model, arith, domain, budget_s: float = 20.0) -> tuple[float, float]:
    """(inputs per wall second, inputs per CPU second) of the batched evaluator over the domain's first chunks."""
    from verify_tf.batched import BatchedEvaluator
    from verify_tf.spaces import InputSpace

    space = InputSpace(domain)
    evaluator = BatchedEvaluator(model, arith, space.tokens, backend="numpy", device="cpu")
    done, start, cpu = 0, time.perf_counter(), time.process_time()
    for chunk in space.chunks(1 << 16):
        evaluator.values(chunk.rows, "readout")
        done += len(chunk.rows)
        if time.perf_counter() - start > budget_s:
            break
    return done / (time.perf_counter() - start), done / (time.process_time() - cpu)


def d3(args) -> None:
    header("d3 L2 n4 softmax, fixed 16/8, |q| <= 33.82 (2.4·10^8 inputs)")
    model, domain = softmax_case("d3")
    bound = Fraction(338203125, 10**7)
    for mode in ("split (adaptive)", "split, intervals only (before issue 29)"):
        wall_rate, cpu_rate = enumeration_rate(model, FIXED, domain)
        verdict, wall, cpu = run_split(model, FIXED, domain, {"lo": -bound, "hi": bound}, MODES[mode], args.timeout)
        s = verdict.statistics
        closed = s.get("closed_inputs", 0)
        split_wall, split_cpu = closed / wall, closed / cpu
        # the whole run predicted from this prefix: the bound and attack work done so far (the adaptive policy's
        # exploration, front-loaded) plus every input at split's own enumeration rate
        enumerated = s.get("closed_by_enumeration") and s.get("enumerated_inputs")  # not the first sample alone
        per_input = s["enumeration_cpu_seconds"] / s["enumerated_inputs"] if enumerated else 0.0
        overhead = s["bounds_cpu_seconds"] + s["attack_cpu_seconds"]
        predicted = overhead + domain.size() * per_input if per_input else float("inf")
        enumeration = domain.size() / cpu_rate
        extra = (
            f"closed {split_wall:,.0f} inputs/s wall, {split_cpu:,.0f}/CPU s in this prefix; batched enumeration just "
            f"before: {wall_rate:,.0f}/s wall, {cpu_rate:,.0f}/CPU s (~{enumeration:,.0f} CPU s for the domain); "
            f"split's own enumeration {1 / per_input if per_input else 0:,.0f} inputs/CPU s plus {overhead:.1f} CPU s "
            f"of bounds and attacks: predicted {predicted:,.0f} CPU s, {predicted / enumeration:.2f}× enumeration"
        )
        row("d3 L2 n4 softmax", domain.size(), "\\|q\\| <= 33.82", mode, verdict, wall, cpu, extra)


def knuth(
    model, domain, options, probes: int, linear: bool, rule: str, seed: int = 0, bound_domain: str = "backward"
) -> tuple[float, float]:
    """Knuth's estimate of split's tree size (bounds only: every open cube is split, points close): random dives,
    the cubes of all probes bounded together per level. (mean, median) over the probes. ``bound_domain``: the
    linear domain's "forward" pass alone (before issue 43) or with its "backward" bounds (the engine's)."""
    task = make_task(model, FIXED, domain, "output-bounds", options, device="cpu")
    space = task.prop.input_space(task)
    bounder = Bounder(task, space, linear, domain=bound_domain)

    def where(cube, view) -> tuple[int, int]:
        if rule == "engine" and view.scores is not None:
            return cube.most_influential(view.scores)
        if rule == "coefficient" and view.scores is not None:  # the score alone, for comparison
            ranked = [
                (float(view.scores[p, c]), (p, c))
                for p, position in enumerate(cube.ranges)
                for c, (a, b) in enumerate(position)
                if b > a
            ]
            return max(ranked)[1] if max(ranked)[0] > 0 else cube.widest()
        return cube.widest()

    estimates, _ = knuth_dives(task, space, bounder, probes, where, seed)
    return float(np.mean(estimates)), float(np.median(estimates))


def knuth_dives(task, space, bounder, probes: int, where, seed: int = 0) -> tuple[list[int], int]:
    """Knuth's random dives down split's branching (every open cube split at ``where(cube, view)``, one half drawn
    at random, until a cube closes by bounds), the cubes of all probes bounded together per level: (each probe's
    estimate of the tree size, the cubes bounded)."""
    rng = random.Random(seed)
    state = [(roots(space)[0], 0, 1) for _ in range(probes)]
    estimates, bounded = [], 0
    while state:
        views = bounder.bound([cube for cube, _, _ in state])
        bounded += len(state)
        following = []
        for view, (cube, estimate, weight) in zip(views, state):
            estimate += weight
            status, _ = task.prop.decide_on_bounds(task, lambda model=None, view=view: view.bounds)
            if status == "holds" or cube.widest() is None:
                estimates.append(estimate)
                continue
            following.append((cube.halves(*where(cube, view))[rng.randrange(2)], estimate, 2 * weight))
        state = following
    return estimates, bounded


def knuth_table(args) -> None:
    print("\nKnuth tree-size estimates (cubes; mean of the probes, median in brackets)\n")
    print(
        "| model | property | intervals, widest | forward linear, widest | forward linear, the engine's rule "
        "| backward ∩ forward (issue 43), widest | backward ∩ forward, the engine's rule | probes | s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, options, label in (
        ("d2", {"lo": -5, "hi": 5}, "\\|q\\| <= 5"),
        ("d3", {"lo": Fraction(-4329, 128), "hi": Fraction(4329, 128)}, "\\|q\\| <= 4329/128"),
        ("4h", {"hi": Fraction(6067, 100)}, "q <= 60.67"),
        ("4h", {"hi": Fraction(47661, 1024)}, "q <= 47661/1024"),
    ):
        model, domain = softmax_case(name)
        start = time.perf_counter()
        cells = []
        for linear, rule, probes, bound_domain in (
            (False, "widest", max(10, args.probes // 10), "forward"),
            (True, "widest", args.probes, "forward"),
            (True, "engine", args.probes, "forward"),
            (True, "widest", args.probes, "backward"),
            (True, "engine", args.probes, "backward"),
        ):
            if not linear and args.skip_intervals:
                cells.append("-")
                continue
            mean, median = knuth(model, domain, options, probes, linear, rule, bound_domain=bound_domain)
            cells.append(f"{mean:.2g} ({median:.2g})")
        print(
            f"| {name} | {label} | {' | '.join(cells)} | {args.probes} | {time.perf_counter() - start:.0f} |",
            flush=True,
        )


def cost(args) -> None:
    print("\nThe linear domain's bound cost per cube, batches of 256 cubes (each coordinate's range 1-3 grid values)\n")
    print("| model | variables | ms/cube wall | ms/cube CPU |")
    print("|---|---|---|---|")
    for name in ("d2", "d3", "4h"):
        model, domain = softmax_case(name)
        linear = LinearModel(model, FIXED, domain.length)
        table = CoordinateTable.grid(domain.values, linear.scale)
        inputs = table.inputs(np.array([cube.ranges for cube in small_cubes(domain, 256)]), domain.dim)
        linear.bound(inputs)
        start, cpu = time.perf_counter(), time.process_time()
        linear.bound(inputs)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        print(
            f"| {name} | {domain.length * domain.dim} | {1000 * wall / 256:.2f} | {1000 * cpu / 256:.2f} |", flush=True
        )


def lemma6(args) -> None:
    header("Yun et al.'s Lemma 6")
    model = yun_contextual_mapping(2, Fraction(1, 3), 3)
    domain = GridDomain.regular(2, Fraction(1, 3), 3, distinct_tokens=True)
    options = {"exempt-permutations": True, "margin": Fraction(1, 3)}
    start, cpu = time.perf_counter(), time.process_time()
    result = check(
        model, Exact(), domain, "contextual-mapping", options, engine="split", timeout=args.timeout, device="cpu"
    )
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    start = time.perf_counter()
    enum = check(
        model, Exact(), domain, "contextual-mapping", options, engine="enumerate", timeout=args.timeout, device="cpu"
    )
    extra = f"enumerate: {enum.status} {time.perf_counter() - start:.2f} s"
    row("Lemma 6 (d, 1/δ, n) = (2, 3, 3)", domain.size(), "contextual-mapping", "split", result, wall, cpu, extra)


SECTIONS = {
    "ladder": ladder,
    "d2": d2,
    "fourhead": fourhead,
    "d3": d3,
    "knuth": knuth_table,
    "cost": cost,
    "lemma6": lemma6,
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--probes", type=int, default=200, help="Knuth probes per estimate")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    parser.add_argument("--cluster", default="", help="e.g. local:2: also run the 4-head holding bound there")
    parser.add_argument("--cluster-budget", type=float, default=900.0)
    parser.add_argument("--bounds", default="", help="fourhead: only the bounds whose label contains one of these")
    parser.add_argument("--skip-intervals", action="store_true", help="knuth: leave out the exact-interval column")
    run_sections(SECTIONS, parser.parse_args())


def run_sections(sections, args) -> None:
    """The machine and its load, each section of ``args.only`` (comma-separated names of ``sections``), the load."""
    print(
        f"{datetime.datetime.now():%Y-%m-%d %H:%M}, {platform.node()}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, load average at start {os.getloadavg()[0]:.1f}"
    )
    for name in args.only.split(","):
        sections[name](args)
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

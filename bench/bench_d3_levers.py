"""Issue 43's d3 n4 gap: would branching on the network's decisions (ReLU phases, which key wins an attention row)
or an exact first block close its cubes? Three measurements, each against the engine's bound as shipped:

    python bench/bench_d3_levers.py oracle [--cubes 12] [--members 4000] [--signs-only]
    python bench/bench_d3_levers.py knuth --volume V [--probes 20] [--lp]
    python bench/bench_d3_levers.py block0-box [--cubes 12]

- ``oracle``: a small cube's members grouped by their block-1 winners (the argmax key of every query) and the signs
  of both blocks' ReLU inputs, as the interpreter computes them; each group's bound with its decisions imposed on
  the intermediate intervals (block 1's score differences: the group's true range, or with ``--signs-only`` only the
  winners' signs; a ReLU input: >= 1 unit of the bound's scale (1/one) active, <= 0 inactive). The true ranges tell
  the bound more than a branch and bound could impose; the signs alone are what branching on those decisions could
  give at best, told which groups are non-empty.
- ``knuth``: Knuth's tree-size estimate of the branch and bound that splits those decisions (an unstable ReLU input,
  then a row with several possible winners; each child imposes its decision on the intervals, which is sound for
  the members that take it) in cubes of at most ``V`` inputs, and the widest coordinate above (``V = 0``: input
  coordinates only, always the widest: not the engine's own choice of coordinate); ``--lp`` also bounds
  the readout's forms under the decisions' linear forms by a linear program (scipy's HiGHS, floats: an estimate of
  what a beta-CROWN-style bound would give, not a sound bound), and an infeasible program closes the node.
- ``block0-box``: block 1 bounded alone from the exact box of block 0's output over the cube's members (what a
  method exact on block 0, relational across nothing, would hand on).

The decisions are imposed by wrapping ``attention._score_differences`` and ``forms.relu`` as seen by
``propagate``: a measurement harness, not the engine's code. A row's winner is read from, and imposed on, head 0 of
its block only (d3 n4 has one head per block). Results: docs/performance.md, "Branching on decisions".
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_split import FIXED, small_cubes, softmax_case

from verify_tf.api import make_task
from verify_tf.engines.split.bounder import Bounder
from verify_tf.engines.split.cubes import roots, rows
from verify_tf.linear import attention, propagate
from verify_tf.linear.backward import refined_bound
from verify_tf.linear.propagate import Inputs, LinearModel
from verify_tf.semantics.interpreter import evaluate
from verify_tf.spaces import InputSpace

FREE = 1 << 60  # an interval end that imposes nothing


class Decisions:
    """Per batch element, what the bound may assume: differences[block] (B, P, P, P) ends of s_ik − s_ij, and
    pre[block] (B, P, F) ends of the ReLU inputs. ``empty``: some imposed interval came out empty."""

    def __init__(self) -> None:
        self.differences: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.pre: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.empty = np.zeros(0, dtype=bool)
        self.rows: set[tuple[int, int]] = set()  # (block, query) rows whose winner is decided


def _impose(x, ends: tuple[np.ndarray, np.ndarray] | None, empty: np.ndarray) -> None:
    if ends is None:
        return
    x.lo[...] = np.maximum(x.lo, ends[0])
    x.hi[...] = np.minimum(x.hi, ends[1])
    axes = tuple(range(1, np.ndim(x.lo)))
    empty |= np.asarray(x.lo > x.hi).any(axis=axes)


def install(linear: LinearModel, decisions: Decisions) -> None:
    """Wrap the two stages so that every bound of ``linear`` assumes ``decisions``."""
    head_zero_of = {id(plans[0]): b for b, plans in enumerate(linear.heads)}  # winners are decided on head 0
    differences, relu, feed_forward = attention._score_differences, propagate.forms.relu, LinearModel.feed_forward
    current = [0]

    def imposed_differences(plan, query, key, arith, refine_pairs=None):
        out = differences(plan, query, key, arith, refine_pairs)
        if id(plan) in head_zero_of:
            _impose(out, decisions.differences.get(head_zero_of[id(plan)]), decisions.empty)
        return out

    def imposed_relu(pre, scale):
        _impose(pre, decisions.pre.get(current[0]), decisions.empty)
        return relu(pre, scale)

    def tracked_feed_forward(self, index, *args, **kwargs):
        current[0] = index
        return feed_forward(self, index, *args, **kwargs)

    attention._score_differences = imposed_differences
    names = {name: getattr(propagate.forms, name) for name in dir(propagate.forms) if not name.startswith("__")}
    propagate.forms = SimpleNamespace(**{**names, "relu": imposed_relu})
    LinearModel.feed_forward = tracked_feed_forward


def setup():
    model, domain = softmax_case("d3")
    space = InputSpace(domain)
    task = make_task(model, FIXED, domain, "output-bounds", {"lo": -33, "hi": 33}, device="cpu")
    bounder = Bounder(task, space)
    linear, table = bounder._linear(model, domain.length)
    return model, domain, space, bounder, linear, table


def bound(linear, table, bounder, model, ranges: np.ndarray, decisions: Decisions):
    decisions.empty = np.zeros(len(ranges), dtype=bool)
    return refined_bound(linear, table.inputs(ranges, model.dim), readout=bounder.readout)


def member_traces(model, space, cube, limit: int):
    members = rows(space, cube)
    if len(members) > limit:
        members = members[np.random.default_rng(0).choice(len(members), limit, replace=False)]
    return [evaluate(model, FIXED, tuple(space.tokens[int(t)] for t in row)) for row in members]


def _floats(rows_of) -> np.ndarray:
    return np.array([[float(a) for a in row] for row in rows_of])


def width_ratio(lo: np.ndarray, hi: np.ndarray, readout: np.ndarray) -> float:
    """The median over readout coordinates of the bound's width over the members' true width."""
    width = readout.max(axis=0) - readout.min(axis=0)
    return float(np.median((hi - lo) / np.maximum(width, 1e-9)))


def group_decisions(traces, one: int, signs_only: bool):
    """The members' groups (block-1 winners, both blocks' ReLU signs) and each group's decisions."""
    scores = np.array([_floats(t.blocks[1].heads[0].scores) for t in traces])  # (N, P, P)
    hidden = [np.array([_floats(t.blocks[b].hidden) for t in traces]) for b in (0, 1)]  # (N, P, F)
    winners = scores.argmax(axis=2)
    keys = [
        tuple(winners[n]) + tuple((hidden[0][n] > 0).ravel()) + tuple((hidden[1][n] > 0).ravel())
        for n in range(len(traces))
    ]
    groups = sorted(set(keys))
    members = [[n for n, k in enumerate(keys) if k == g] for g in groups]
    d = scores[:, :, :, None] - scores[:, :, None, :]  # [n, i, k, j] = s_ik − s_ij
    decisions = Decisions()
    lo, hi = np.full((len(groups), *d.shape[1:]), -FREE), np.full((len(groups), *d.shape[1:]), FREE)
    for g, part in enumerate(members):
        if signs_only:
            for i, k in enumerate(winners[part[0]]):
                lo[g, i, k, :], hi[g, i, :, k] = 0, 0
        else:
            lo[g] = np.floor(d[part].min(axis=0) * one)
            hi[g] = np.ceil(d[part].max(axis=0) * one)
    decisions.differences[1] = (lo.astype(np.int64), hi.astype(np.int64))
    for b in (0, 1):
        plo = np.full((len(groups), *hidden[b].shape[1:]), -FREE, dtype=np.int64)
        phi = np.full_like(plo, FREE)
        for g, part in enumerate(members):
            active, dead = (hidden[b][part] > 0).all(axis=0), (hidden[b][part] <= 0).all(axis=0)
            plo[g][active], phi[g][dead] = 1, 0
        decisions.pre[b] = (plo, phi)
    return members, decisions


def run_oracle(args) -> None:
    model, domain, space, bounder, linear, table = setup()
    one, limit = linear.scale.one, 4329 / 128
    decisions = Decisions()
    install(linear, decisions)
    closed, ratios = [0, 0], ([], [])
    for cube in small_cubes(domain, args.cubes):
        traces = member_traces(model, space, cube, args.members)
        readout = _floats([t.readout for t in traces])
        ranges = np.array([cube.ranges], dtype=np.int64)
        plain = Decisions()
        decisions.differences, decisions.pre = plain.differences, plain.pre
        r = bound(linear, table, bounder, model, ranges, decisions)
        p_lo, p_hi = (np.asarray(e, dtype=float)[0] / one for e in (r.readout.lo, r.readout.hi))
        members, grouped = group_decisions(traces, one, args.signs_only)
        decisions.differences, decisions.pre = grouped.differences, grouped.pre
        r = bound(linear, table, bounder, model, np.repeat(ranges, len(members), axis=0), decisions)
        g_lo, g_hi = (np.asarray(e, dtype=float) / one for e in (r.readout.lo, r.readout.hi))
        closed[0] += bool(p_lo.min() >= -limit and p_hi.max() <= limit)
        closed[1] += bool(g_lo.min() >= -limit and g_hi.max() <= limit)
        ratios[0].append(width_ratio(p_lo, p_hi, readout))
        ratios[1].append(width_ratio(g_lo.min(axis=0), g_hi.max(axis=0), readout))
        print(
            f"{len(traces):5d} members, {len(members):3d} groups: true [{readout.min():6.2f}, {readout.max():6.2f}]"
            f"  engine [{p_lo.min():7.2f}, {p_hi.max():7.2f}]  grouped [{g_lo.min():7.2f}, {g_hi.max():7.2f}]",
            flush=True,
        )
    print(f"closed (|q| <= 33.82): engine {closed[0]}/{args.cubes}, grouped {closed[1]}/{args.cubes}")
    for name, r in (("engine", ratios[0]), ("grouped", ratios[1])):
        print(f"{name}: median bound width / true width {np.median(r):.1f}x (range {min(r):.1f}-{max(r):.1f}x)")
    print(f"{time.process_time():.0f} CPU s, load {os.getloadavg()[0]:.1f}")


def unstable(result, decisions: Decisions, positions: int, one: int):
    """The node's splits: (score, kind, block, index, choices) for each unstable ReLU input and each row of an
    attention with several possible winners (a key can win unless some key beats it for sure)."""
    out = []
    for b, block in enumerate(result.blocks):
        pre = block.stages["pre_activation"]
        lo, hi = np.asarray(pre.lo, dtype=float)[0], np.asarray(pre.hi, dtype=float)[0]
        for index in zip(*np.nonzero((lo < 0) & (hi > 0))):
            out.append((min(-lo[index], hi[index]) / one, "relu", b, index, (1, -1)))
        d = block.heads[0].differences
        d_lo, d_hi = np.asarray(d.lo, dtype=float)[0], np.asarray(d.hi, dtype=float)[0]
        for i in range(positions):
            if (b, i) in decisions.rows:
                continue
            can = [j for j in range(positions) if d_lo[i, :, j].max() <= 0]
            if len(can) > 1:
                out.append((float(d_hi[i].max()) / one, "winner", b, i, tuple(can)))
    return out


def decide(decisions: Decisions, kind: str, b: int, index, choice: int, shape) -> None:
    if kind == "relu":
        lo, hi = decisions.pre.setdefault(b, (np.full(shape["pre"], -FREE), np.full(shape["pre"], FREE)))
        if choice > 0:
            lo[(0, *index)] = 1
        else:
            hi[(0, *index)] = 0
        return
    decisions.rows.add((b, index))
    lo, hi = decisions.differences.setdefault(
        b, (np.full(shape["differences"], -FREE), np.full(shape["differences"], FREE))
    )
    lo[0, index, choice, :] = np.maximum(lo[0, index, choice, :], 0)
    hi[0, index, :, choice] = np.minimum(hi[0, index, :, choice], 0)


def lp_readout(result, decisions: Decisions, one: int):
    """(infeasible, lo, hi) of the readout's forms over t in [0, 1]^N under the decisions' forms (floats)."""
    from scipy.optimize import linprog  # only with --lp: never a dependency

    rows_, rhs = [], []
    for b, (lo, hi) in decisions.pre.items():
        pre = result.blocks[b].stages["pre_activation"]
        for index in zip(*np.nonzero(lo[0] == 1)):  # active: uc·t + ub >= 1 unit (1/one)
            rows_.append(-np.asarray(pre.uc[0][index], dtype=float))
            rhs.append(float(pre.ub[0][index]) - 1)
        for index in zip(*np.nonzero(hi[0] == 0)):  # inactive: lc·t + lb <= 0
            rows_.append(np.asarray(pre.lc[0][index], dtype=float))
            rhs.append(-float(pre.lb[0][index]))
    for b, (lo, _) in decisions.differences.items():
        d = result.blocks[b].heads[0].differences
        for index in zip(*np.nonzero(lo[0] == 0)):  # s_ik − s_ij >= 0: uc·t + ub >= 0
            rows_.append(-np.asarray(d.uc[0][index], dtype=float))
            rhs.append(float(d.ub[0][index]))
    if not rows_:
        return False, None, None
    readout = result.readout
    count = np.asarray(readout.uc).shape[-1]
    a, c = np.array(rows_) / one, np.array(rhs) / one
    los, his = [], []
    for p in range(np.asarray(readout.hi).shape[1]):
        for sign, form, constant, out in ((-1, readout.uc, readout.ub, his), (1, readout.lc, readout.lb, los)):
            solved = linprog(sign * np.asarray(form[0][p], dtype=float) / one, A_ub=a, b_ub=c, bounds=[(0, 1)] * count)
            if solved.status == 2:
                return True, None, None
            if solved.status != 0:  # an iteration limit or a numerical failure: no bound from this program
                return False, None, None
            out.append(sign * solved.fun + float(constant[0][p]) / one)
    return False, np.array(los) * one, np.array(his) * one


def run_knuth(args) -> None:
    model, _, space, bounder, linear, table = setup()
    one, limit = linear.scale.one, 4329 * linear.scale.one // 128
    decisions = Decisions()
    install(linear, decisions)
    root = roots(space)[0]
    rng, estimates, depths, cpu = random.Random(0), [], [], time.process_time()
    for _ in range(args.probes):
        cube, estimate, weight, depth = root, 0, 1, 0
        decisions.differences, decisions.pre, decisions.rows = {}, {}, set()
        while True:
            estimate += weight
            result = bound(linear, table, bounder, model, np.array([cube.ranges], dtype=np.int64), decisions)
            lo, hi = np.asarray(result.readout.lo)[0], np.asarray(result.readout.hi)[0]
            empty = bool(decisions.empty[0])
            if args.lp and (decisions.pre or decisions.differences):
                infeasible, l2, h2 = lp_readout(result, decisions, one)
                empty = empty or infeasible
                if l2 is not None:
                    lo, hi = np.maximum(lo, l2), np.minimum(hi, h2)
            if empty or (lo.min() >= -limit and hi.max() <= limit):
                break
            splits = unstable(result, decisions, linear.positions, one) if cube.volume() <= args.volume else []
            if splits:
                _, kind, b, index, choices = max(splits, key=lambda s: (s[1] == "relu", s[0]))
                shape = {
                    "pre": np.shape(result.blocks[b].stages["pre_activation"].lo),
                    "differences": np.shape(result.blocks[b].heads[0].differences.lo),
                }
                decide(decisions, kind, b, index, rng.choice(choices), shape)
                weight *= len(choices)
            elif cube.widest() is not None:
                cube, weight = cube.halves(*cube.widest())[rng.randrange(2)], 2 * weight
            else:
                break  # a single input, every decision made: enumeration's leaf
            depth += 1
        estimates.append(estimate)
        depths.append(depth)
    print(
        f"volume <= {args.volume}{' with LP' if args.lp else ''}: Knuth mean {np.mean(estimates):.3g} "
        f"(median {np.median(estimates):.3g}), median depth {np.median(depths):.0f}, "
        f"{time.process_time() - cpu:.0f} CPU s, load {os.getloadavg()[0]:.1f}"
    )


def run_block0_box(args) -> None:
    model, domain, space, bounder, linear, table = setup()
    one = linear.scale.one
    alone = LinearModel(
        dataclasses.replace(model, blocks=model.blocks[1:], positional_encoding=None),
        FIXED,
        domain.length,
        linear.scale,
    )
    ratios = {"engine": [], "block0-box": []}
    for cube in small_cubes(domain, args.cubes):
        traces = member_traces(model, space, cube, args.members)
        stream = np.array([_floats(t.blocks[0].output) for t in traces])
        readout = _floats([t.readout for t in traces])
        lo, hi = np.round(stream.min(axis=0) * one).astype(np.int64)[None], np.round(stream.max(axis=0) * one)
        box = refined_bound(
            alone,
            Inputs(lo, lo, hi.astype(np.int64)[None] - lo, hi.astype(np.int64)[None] - lo),
            readout=bounder.readout,
        )
        engine = refined_bound(
            linear, table.inputs(np.array([cube.ranges], dtype=np.int64), model.dim), readout=bounder.readout
        )
        line = [f"{len(traces):5d} members: true [{readout.min():6.2f}, {readout.max():6.2f}]"]
        for name, r in (("engine", engine), ("block0-box", box)):
            b_lo, b_hi = (np.asarray(e, dtype=float)[0] / one for e in (r.readout.lo, r.readout.hi))
            ratios[name].append(width_ratio(b_lo, b_hi, readout))
            line.append(f"{name} [{b_lo.min():7.2f}, {b_hi.max():7.2f}] {ratios[name][-1]:5.1f}x")
        print("  ".join(line), flush=True)
    print("median bound width / true width: " + ", ".join(f"{k} {np.median(v):.1f}x" for k, v in ratios.items()))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("oracle", "knuth", "block0-box"))
    parser.add_argument("--cubes", type=int, default=12)
    parser.add_argument("--members", type=int, default=4000)
    parser.add_argument("--signs-only", action="store_true")
    parser.add_argument("--volume", type=int, default=4096)
    parser.add_argument("--probes", type=int, default=20)
    parser.add_argument("--lp", action="store_true")
    args = parser.parse_args()
    {"oracle": run_oracle, "knuth": run_knuth, "block0-box": run_block0_box}[args.mode](args)


if __name__ == "__main__":
    main()

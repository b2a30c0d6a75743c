"""The ``split`` engine on distinct-values properties (contextual mapping) as a two-copy split.

Condition (2) compares every value of every input with every value of every other input. The domain is cut
into leaf cubes of at most ``Limits.enumerate_at`` inputs (``cubes.SplitCube.halves`` on the widest range, so
the leaves partition the space exactly); each leaf is evaluated exactly in a work unit (``leaf_values``: the
property's ``batched_values``, or its interpreter ``values`` where the batched evaluator cannot run the model),
which also checks condition (1) inside every input. A leaf's values lie in its exact hull [min, max]; a **pair
of leaves whose hulls are separated by at least the margin is closed without looking further**. Leaves whose
hulls overlap (transitively: the connected components of the overlap graph) are compared value by value: the
component's values are sorted and each is compared with its nearest neighbour of another group (an input, or
its multiset when permutations are exempt). Every pair found too close is replayed on the interpreter
(``pair_witness``) before it is reported. Values are exact integers over a common denominator throughout.

Note that a leaf with more than one input can never be closed against itself by intervals (two inputs of one
cube share its value range), so the pairs inside a leaf, and inside a component, are always settled exactly.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ...batched import Unsupported
from ...contract import DistinctValues, Task, capability
from ...spaces import InputSpace
from ...verdict import Evidence, Verdict
from ...work import CONTINUE, STOP, Deadline, WorkUnit, schedule
from ..base import Merge, ProgressEvent, Proof, Run
from ..evaluators import CompiledEvaluators
from ..scan import multiset_codes
from .cubes import Limits, SplitCube, roots, rows

ENGINE = "split"


@dataclass
class Leaf:
    """The exact values of one leaf cube: ``numerators[r, i] / den`` is q(rows[r])_i."""

    cube: SplitCube
    rows: np.ndarray
    numerators: np.ndarray  # object array of Python ints (exact whatever their size)
    den: int
    clash: tuple[int, int, int] | None = None  # condition (1): (row, i, j)
    stopped: str = ""


def leaves_of(space: InputSpace, size: int, deadline: Deadline) -> list[SplitCube]:
    """The leaves: every root split on its widest range until it has at most ``size`` inputs (a product)."""
    out, stack = [], list(reversed(roots(space)))
    while stack:
        deadline.check("splitting the domain")
        cube = stack.pop()
        where = cube.widest()
        if cube.volume() <= size or where is None:
            out.append(cube)
        else:
            first, second = cube.halves(*where)
            stack += [second, first]
    return out


def leaf_values(
    task: Task,
    space: InputSpace,
    cubes: list[SplitCube],
    *,
    deadline: Deadline,
    cancelled: Callable[[], bool],
    report: Callable[[str], None],
) -> list[Leaf]:
    """Exact values of every input of each leaf, and condition (1) inside each input (a work unit)."""
    evaluators = CompiledEvaluators(task, space)
    out = []
    for cube in cubes:
        members = rows(space, cube)
        if deadline.expired() or cancelled():
            out.append(Leaf(cube, members, np.zeros((0, cube.length), dtype=object), 1, stopped="timeout"))
            continue
        if not len(members):
            out.append(Leaf(cube, members, np.zeros((0, cube.length), dtype=object), 1))
            continue
        try:
            values, den = capability(task.prop, DistinctValues).batched_values(task, evaluators, members)
            values = np.asarray(values)
        except Unsupported:
            exact = [capability(task.prop, DistinctValues).values(task, space.decode(row)) for row in members]
            den = math.lcm(*(v.denominator for q in exact for v in q), 1)
            values = np.array([[int(v * den) for v in q] for q in exact], dtype=object)
        clash = capability(task.prop, DistinctValues).batched_clash(task, values, den)
        out.append(Leaf(cube, members, values.astype(object), int(den), clash))
    return out


def _too_close(margin: Fraction | None, gap: int, den: int) -> bool:
    """gap/den (gap >= 0) violates: equal values, or closer than the margin."""
    return gap == 0 if margin is None else gap * margin.denominator < margin.numerator * den


def check_distinct(task: Task, run: Run, limits: Limits) -> Verdict:
    space = task.prop.input_space(task)
    margin = capability(task.prop, DistinctValues).least_gap(task)
    cubes = leaves_of(space, limits.enumerate_at, run.deadline)
    statistics = {
        "leaves": len(cubes),
        "space": space.describe(),
        "enumerate_at": limits.enumerate_at,
        "executor": run.executor.name,
        **task.prop.statistics(task),
    }
    per_unit = max(1, min(64, -(-len(cubes) // (16 * max(1, run.executor.workers)))))
    units = [
        WorkUnit(
            f"split: leaves {k}..{min(len(cubes), k + per_unit) - 1}",
            leaf_values,
            (task, space, cubes[k : k + per_unit]),
            order=k,
            weight=per_unit,
        )
        for k in range(0, len(cubes), per_unit)
    ]
    leaves: list[Leaf] = []
    clash: list[tuple[Leaf, tuple[int, int, int]]] = []

    def on_result(unit: WorkUnit, result: list[Leaf]) -> str:
        leaves.extend(result)
        run.progress(ProgressEvent(ENGINE, "split: exact values of the leaves", len(leaves), len(cubes), "cubes"))
        for leaf in result:
            if leaf.clash is not None:
                clash.append((leaf, leaf.clash))
                return STOP
        return CONTINUE

    summary = schedule(run.executor, units, run.deadline, on_result)
    merge = Merge(task, run, ENGINE, statistics)
    if clash:
        leaf, (row, i, j) = clash[0]
        tokens = space.decode(leaf.rows[row])
        merge.refute(capability(task.prop, DistinctValues).pair_witness(task, tokens, i, tokens, j), "branch and bound")
    merge.absorb(summary)
    stopped = [leaf for leaf in leaves if leaf.stopped]
    if summary.expired or summary.not_started or summary.cancelled or stopped or len(leaves) != len(cubes):
        detail = f"{len(leaves) - len(stopped)} of {len(cubes)} leaves evaluated (timeout)"
        merge.undecided(detail, [f"split: {detail}"], method="branch and bound")
    if merge.settled:
        return merge.verdict()

    den = math.lcm(*(leaf.den for leaf in leaves if len(leaf.rows)), 1)
    components, hulls = _overlapping(leaves, margin, den)
    sizes = [len(c) for c in components]
    statistics.update(
        {
            "components": len(components),
            "largest_component": max(sizes, default=0),
            "leaf_pairs_closed_by_separation": math.comb(hulls, 2) - sum(math.comb(s, 2) for s in sizes),
        }
    )
    exempt = capability(task.prop, DistinctValues).exempt_pairs(task) and space.order == "all"
    next_id = 0
    for component in components:
        run.deadline.check("comparing the leaves' values")
        entries = []  # (value, group, leaf, row, position)
        for index in component:
            leaf = leaves[index]
            scaled = leaf.numerators * (den // leaf.den)
            groups = multiset_codes(leaf.rows, len(space.tokens)) if exempt else None
            for r in range(len(leaf.rows)):
                group = ("m", int(groups[r])) if groups is not None else ("i", next_id + r)
                for p in range(scaled.shape[1]):
                    entries.append((int(scaled[r, p]), group, index, r, p))
            next_id += len(leaf.rows)
        entries.sort(key=lambda e: e[0])
        found = _closest_other_group(entries, margin, den)
        if found is not None:
            (_, _, la, ra, pa), (_, _, lb, rb, pb) = found
            first, second = space.decode(leaves[la].rows[ra]), space.decode(leaves[lb].rows[rb])
            merge.refute(
                capability(task.prop, DistinctValues).pair_witness(task, first, pa, second, pb), "branch and bound"
            )
            return merge.verdict()
    text = (
        f"{len(cubes)} leaves evaluated exactly; {statistics['leaf_pairs_closed_by_separation']} leaf pairs "
        f"closed by separated value ranges, {len(components)} components compared value by value"
    )
    evidence = Evidence("split") if task.settings.certify else None  # the cover is in the statistics
    return merge.verdict(Proof(text), "branch and bound", evidence)


def _overlapping(leaves: list[Leaf], margin: Fraction | None, den: int) -> tuple[list[list[int]], int]:
    """The two-copy step: components of leaves whose exact value hulls overlap (within the margin), and how many
    leaves have values."""
    hulls = []
    for index, leaf in enumerate(leaves):
        if len(leaf.rows):
            scaled = leaf.numerators * (den // leaf.den)
            hulls.append((min(scaled.reshape(-1)), max(scaled.reshape(-1)), index))
    hulls.sort()
    components: list[list[int]] = []
    reach = None
    for lo, hi, index in hulls:
        if reach is not None and (lo <= reach if margin is None else _too_close(margin, lo - reach, den)):
            components[-1].append(index)
            reach = max(reach, hi)
        else:
            components.append([index])
            reach = hi
    return components, len(hulls)


def _closest_other_group(entries: list[Any], margin: Fraction | None, den: int) -> tuple[Any, Any] | None:
    """In value order: a pair of entries of different groups too close, or None.

    For each entry the nearest earlier entry of another group is either the previous entry or, when that one
    shares its group, the latest earlier entry of a group different from the previous one's.
    """
    last = other = None  # the previous entry; the latest entry of a group different from last's
    for entry in entries:
        if last is not None:
            partner = last if last[1] != entry[1] else other
            if partner is not None and _too_close(margin, entry[0] - partner[0], den):
                return partner, entry
            if last[1] != entry[1]:
                other = last
        last = entry
    return None

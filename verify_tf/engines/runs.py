"""The distinct-values scan in bounded memory: sorted runs, spilled to disk past a budget, merged k ways, and
the closest non-exempt pair found on the merged stream.

Contextual mapping compares every value of every input with every other (``engines.scan``). At 10^8 values
one sort in memory would need gigabytes, so:

* each work unit sorts its own values into a ``SortedRun`` (keys ascending, ties by key number input·n + position;
  the group code of each key's input; one denominator);
* ``RunStore`` keeps runs in memory up to a byte budget and spills the rest to ``.npy`` files in a temporary
  folder (removed afterwards);
* ``merged`` walks all runs at once, a block from each, and emits the keys that no unread key can precede
  (every key up to the smallest "last loaded" key among the runs), so memory is one block per run;
* ``ClosestPair`` consumes the sorted stream block by block with the rule of ``scan.closest_pair``: each key is
  compared with the following keys until it meets a non-exempt one (or the gap can no longer beat the best);
  keys still waiting at the end of a block are carried into the next. The result is canonical: the smallest
  gap, and among equal gaps the pair whose lower key comes first in the stream, whatever the blocking.

Keys beyond int64 (the wide evaluator's Python integers) are stored as int64 limbs, most significant first
(signed top limb, then limbs in [0, 2^62)), whose lexicographic order is the numeric order; multiset group
codes beyond int64 likewise. Everything is exact: no float, no hash.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..work import ResourceExhausted, forget_scratch, register_scratch

LIMB_BITS = 62
LIMB = 1 << LIMB_BITS
INT64_SAFE = 1 << 62


# ---------------------------------------------------------------- exact keys as int64 limbs


def limbs_needed(values: np.ndarray) -> int:
    """How many 62-bit limbs hold every value (1: plain int64 below 2^61, so that differences fit int64)."""
    if values.size == 0:
        return 1
    top = max(int(np.max(values)), -int(np.min(values)))
    return max(1, -(-(top.bit_length() + 1) // LIMB_BITS))


def to_limbs(values: np.ndarray, limbs: int) -> np.ndarray:
    """(N,) int64 or Python integers -> (N, limbs) int64, most significant first; numeric order = lexicographic."""
    if limbs == 1:
        return np.asarray(values).astype(np.int64).reshape(-1, 1)
    rest = np.asarray(values).astype(object)
    out = np.empty((len(rest), limbs), dtype=np.int64)
    for k in range(limbs - 1, 0, -1):
        out[:, k] = (rest & (LIMB - 1)).astype(np.int64)
        rest = rest >> LIMB_BITS
    out[:, 0] = rest.astype(np.int64)  # the signed top limb (floor shifts keep the lower limbs non-negative)
    return out


def from_limbs(limbs: np.ndarray) -> np.ndarray:
    """(N, L) limbs -> (N,) int64 when L is 1, else Python integers."""
    if limbs.shape[1] == 1:
        return limbs[:, 0]
    out = limbs[:, 0].astype(object)
    for k in range(1, limbs.shape[1]):
        out = (out << LIMB_BITS) + limbs[:, k].astype(object)
    return out


# ---------------------------------------------------------------- sorted runs


@dataclass
class SortedRun:
    """Keys of some inputs, sorted ascending (ties by ``index``): value = keys / den.

    ``keys``: (N, L) int64 limbs; ``index``: (N,) int64 key numbers input·n + position; ``groups``: (N, G) int64
    limbs of the input's group code, or None when the group is the input itself (nothing exempt).
    """

    keys: np.ndarray
    index: np.ndarray
    groups: np.ndarray | None
    den: int

    def __len__(self) -> int:
        return len(self.index)

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes + self.index.nbytes + (0 if self.groups is None else self.groups.nbytes)


def sorted_run(numerators: np.ndarray, den: int, start: int, groups: np.ndarray | None) -> SortedRun:
    """The run of a (B, n) block of values of inputs start..start+B-1 (``groups``: (B,) codes, or None)."""
    numerators = np.asarray(numerators)
    count, n = numerators.shape if numerators.ndim == 2 else (len(numerators), 1)
    flat = numerators.reshape(-1)
    keys = to_limbs(flat, limbs_needed(flat))
    index = start * n + np.arange(count * n, dtype=np.int64)
    group_limbs = None
    if groups is not None:
        groups = np.asarray(groups)
        group_limbs = np.repeat(to_limbs(groups, limbs_needed(groups)), n, axis=0)
    order = np.lexsort((index,) + tuple(keys[:, k] for k in range(keys.shape[1] - 1, -1, -1)))
    return SortedRun(keys[order], index[order], None if group_limbs is None else group_limbs[order], den)


def _size(nbytes: int) -> str:
    return f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"


class RunStore:
    """Sorted runs, in memory up to ``memory`` bytes, the rest spilled to a temporary folder."""

    def __init__(self, memory: int, folder: str | None = None):
        self.memory = memory
        self.parent = folder  # where the spill folder is made (None: the system's temporary folder, TMPDIR)
        self.in_memory: list[SortedRun] = []
        self.spilled: list[tuple[str, int, bool]] = []  # (path prefix, den, has groups)
        self.held = 0
        self._folder: tempfile.TemporaryDirectory[str] | None = None
        self.dens: set[int] = set()
        self.keys = 0
        self.limbs = 1
        self.group_limbs = 1
        self.spilled_bytes = 0

    def add(self, run: SortedRun) -> None:
        self.dens.add(run.den)
        self.keys += len(run)
        self.limbs = max(self.limbs, run.keys.shape[1])
        if run.groups is not None:
            self.group_limbs = max(self.group_limbs, run.groups.shape[1])
        self.in_memory.append(run)
        self.held += run.nbytes
        while self.held > self.memory and self.in_memory:
            self._spill(self.in_memory.pop(0))

    def _spill(self, run: SortedRun) -> None:
        parent = self.parent or tempfile.gettempdir()
        try:
            if self._folder is None:
                self._folder = tempfile.TemporaryDirectory(prefix="verify-tf-runs-", dir=self.parent)
                register_scratch(self._folder.name)  # removed by the CLI if the run is interrupted first
            prefix = os.path.join(self._folder.name, f"run{len(self.spilled)}")
            np.save(prefix + ".keys.npy", run.keys)
            np.save(prefix + ".index.npy", run.index)
            if run.groups is not None:
                np.save(prefix + ".groups.npy", run.groups)
        except OSError as exc:  # numpy reports a short write as "N requested and M written", not ENOSPC
            self.close()  # what was spilled so far is of no use: free the disk now
            raise ResourceExhausted(
                f"the spill folder {parent} is full or cannot be written ({exc.strerror or exc}): set TMPDIR or "
                f"--spill-dir to a folder with more space, or raise --memory ({_size(self.memory)} now) so "
                "fewer runs are spilled"
            ) from None
        self.spilled.append((prefix, run.den, run.groups is not None))
        self.held -= run.nbytes
        self.spilled_bytes += run.nbytes

    def runs(self) -> list[SortedRun]:
        """Every run; spilled ones memory-mapped (read block by block by ``merged``)."""
        out = list(self.in_memory)
        for prefix, den, has_groups in self.spilled:
            out.append(
                SortedRun(
                    np.load(prefix + ".keys.npy", mmap_mode="r"),
                    np.load(prefix + ".index.npy", mmap_mode="r"),
                    np.load(prefix + ".groups.npy", mmap_mode="r") if has_groups else None,
                    den,
                )
            )
        return out

    def close(self) -> None:
        if self._folder is not None:
            forget_scratch(self._folder.name)
            self._folder.cleanup()
            self._folder = None

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------- the k-way merge


@dataclass
class Block:
    """Consecutive keys of the merged stream: values (int64 or Python integers) over the common den."""

    values: np.ndarray
    index: np.ndarray
    groups: np.ndarray | None  # (N, G) limbs, or None: the group is the input


def _scaled(
    run: SortedRun, rows: slice, den: int, limbs: int, group_limbs: int, grouped: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    keys = np.asarray(run.keys[rows])
    index = np.asarray(run.index[rows])
    factor = den // run.den
    if factor != 1:
        keys = to_limbs(from_limbs(keys).astype(object) * factor, limbs)
    elif keys.shape[1] < limbs:
        keys = to_limbs(from_limbs(keys).astype(object), limbs)
    groups = None
    if grouped:
        groups = np.asarray(run.groups[rows]) if run.groups is not None else None
        if groups is None:  # cannot happen within one scan (all runs alike); kept exact anyway
            raise ValueError("runs of one scan must all have group codes or none")
        if groups.shape[1] < group_limbs:
            groups = to_limbs(from_limbs(groups).astype(object), group_limbs)
    return keys, index, groups


def _not_after(keys: np.ndarray, index: np.ndarray, key: np.ndarray, idx: int) -> np.ndarray:
    """(keys, index) <= (key, idx) lexicographically, for every row."""
    less = np.zeros(len(index), dtype=bool)
    equal = np.ones(len(index), dtype=bool)
    for k in range(keys.shape[1]):
        less |= equal & (keys[:, k] < key[k])
        equal &= keys[:, k] == key[k]
    return less | (equal & (index <= idx))


def merged(store: RunStore, block_bytes: int) -> Iterator[Block]:
    """The keys of every run of ``store`` in one ascending stream (ties by key number), block by block."""
    runs = [r for r in store.runs() if len(r)]
    if not runs:
        return
    den = math.lcm(*store.dens)
    # rescaled keys may need more limbs than any run had
    limbs = store.limbs
    if len(store.dens) > 1:
        limbs += max(1, -(-max(den // d for d in store.dens).bit_length() // LIMB_BITS))
    grouped = runs[0].groups is not None
    per_row = 8 * (limbs + 1 + (store.group_limbs if grouped else 0))
    step = max(1, block_bytes // (per_row * len(runs)))
    cursors = [0] * len(runs)
    pending: list[tuple[np.ndarray, np.ndarray, np.ndarray | None]] = [
        (
            np.zeros((0, limbs), dtype=np.int64),
            np.zeros(0, dtype=np.int64),
            np.zeros((0, store.group_limbs), dtype=np.int64) if grouped else None,
        )
        for _ in runs
    ]
    while True:
        # top up every run's pending keys to one block
        for r, run in enumerate(runs):
            keys, index, groups = pending[r]
            if len(index) < step and cursors[r] < len(run):
                stop = min(len(run), cursors[r] + step - len(index))
                more = _scaled(run, slice(cursors[r], stop), den, limbs, store.group_limbs, grouped)
                cursors[r] = stop
                pending[r] = (
                    np.concatenate([keys, more[0]]),
                    np.concatenate([index, more[1]]),
                    np.concatenate([groups, more[2]]) if grouped else None,
                )
        live = [r for r in range(len(runs)) if len(pending[r][1])]
        if not live:
            return
        # every key up to the smallest last-loaded key of a run with unread keys can be emitted
        open_runs = [r for r in live if cursors[r] < len(runs[r])]
        if open_runs:
            lasts = [(pending[r][0][-1], int(pending[r][1][-1])) for r in open_runs]
            frontier_key, frontier_index = min(lasts, key=lambda kv: (tuple(int(x) for x in kv[0]), kv[1]))
            masks = {r: _not_after(pending[r][0], pending[r][1], frontier_key, frontier_index) for r in live}
        else:
            masks = {r: np.ones(len(pending[r][1]), dtype=bool) for r in live}
        out_keys, out_index, out_groups = [], [], []
        for r in live:
            keys, index, groups = pending[r]
            take = masks[r]
            count = int(take.sum())  # sorted runs: the emitted keys are a prefix
            out_keys.append(keys[:count])
            out_index.append(index[:count])
            if groups is not None:
                out_groups.append(groups[:count])
            pending[r] = (keys[count:], index[count:], groups[count:] if groups is not None else None)
        keys = np.concatenate(out_keys)
        index = np.concatenate(out_index)
        order = np.lexsort((index,) + tuple(keys[:, k] for k in range(keys.shape[1] - 1, -1, -1)))
        groups = np.concatenate(out_groups)[order] if grouped else None
        yield Block(from_limbs(keys[order]), index[order], groups)


# ---------------------------------------------------------------- the closest non-exempt pair, streamed


@dataclass
class Closest:
    """The closest non-exempt pair of keys (input indices, positions), or None when there are < 2 keys."""

    gap: Fraction | None
    pair: tuple[tuple[int, int], tuple[int, int]] | None
    smallest: Fraction | None
    largest: Fraction | None
    keys: int = 0


class ClosestPair:
    """The closest pair of keys whose inputs are not exempt from each other, over a sorted stream of blocks.

    Exempt: two different inputs with the same group code (permutations of each other when permutations are
    exempt); two positions of one input are never exempt. Feed blocks in stream order with ``add``; read
    ``gap`` (over the stream's den), ``pair`` ((input, position) twice), ``smallest``, ``largest``, ``keys``.
    """

    def __init__(self, n: int):
        self.n = max(n, 1)
        self.best: tuple[int, int] | None = None  # (gap, stream position of the lower key)
        self.pair: tuple[tuple[int, int], tuple[int, int]] | None = None
        self.smallest: int | None = None
        self.largest: int | None = None
        self.keys = 0
        self.carry: Block | None = None
        self.carry_position = np.zeros(0, dtype=np.int64)

    def add(self, block: Block) -> None:
        if not len(block.index):
            return
        if self.smallest is None:
            self.smallest = int(block.values[0])
        self.largest = int(block.values[-1])
        positions = self.keys + np.arange(len(block.index), dtype=np.int64)
        self.keys += len(block.index)
        if self.carry is not None and len(self.carry.index):
            values = _concat(self.carry.values, block.values)
            index = np.concatenate([self.carry.index, block.index])
            groups = np.concatenate([self.carry.groups, block.groups]) if block.groups is not None else None
            positions = np.concatenate([self.carry_position, positions])
        else:
            values, index, groups = block.values, block.index, block.groups
        inputs = index // self.n
        count = len(index)
        pending = np.arange(count, dtype=np.int64)
        carried: list[np.ndarray] = []
        offset = 1
        while pending.size:
            beyond = pending + offset >= count
            if beyond.any():
                waiting = pending[beyond]
                if self.best is not None:  # later keys are >= the last one: only gaps that can still win
                    waiting = waiting[_le(values[count - 1] - values[waiting], self.best[0])]
                carried.append(waiting)
                pending = pending[~beyond]
                if not pending.size:
                    break
            partners = pending + offset
            gaps = values[partners] - values[pending]
            if self.best is not None:
                keep = _le(gaps, self.best[0])
                pending, partners, gaps = pending[keep], partners[keep], gaps[keep]
                if not pending.size:
                    break
            if groups is None:
                exempt = np.zeros(len(pending), dtype=bool)
            else:
                exempt = (groups[pending] == groups[partners]).all(axis=1) & (inputs[pending] != inputs[partners])
            found = np.flatnonzero(~exempt)
            if found.size:
                smallest_gap = int(np.min(gaps[found]))
                at = found[gaps[found] == smallest_gap]
                first = at[np.argmin(positions[pending[at]])]
                candidate = (smallest_gap, int(positions[pending[first]]))
                if self.best is None or candidate < self.best:
                    self.best = candidate
                    a, b = int(index[pending[first]]), int(index[partners[first]])
                    self.pair = ((a // self.n, a % self.n), (b // self.n, b % self.n))
            pending = pending[exempt]
            offset += 1
        kept = np.unique(np.concatenate(carried)) if carried else np.zeros(0, dtype=np.int64)
        self.carry = Block(values[kept], index[kept], groups[kept] if groups is not None else None)
        self.carry_position = positions[kept]

    def result(self, den: int) -> Closest:
        """Gap and extremes as Fractions over ``den``."""
        if not self.keys:
            return Closest(None, None, None, None, 0)
        assert self.smallest is not None and self.largest is not None  # set by the first block
        smallest, largest = Fraction(self.smallest, den), Fraction(self.largest, den)
        if self.best is None:
            return Closest(None, None, smallest, largest, self.keys)
        return Closest(Fraction(self.best[0], den), self.pair, smallest, largest, self.keys)


def _le(values: np.ndarray, bound: int) -> np.ndarray:
    return np.asarray(values <= bound, dtype=bool)


def _concat(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype == object or b.dtype == object:
        return np.concatenate([a.astype(object), b.astype(object)])
    return np.concatenate([a, b])

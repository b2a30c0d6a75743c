"""A causal model evaluated at the last position of many prefixes, each reusing its ancestors' keys and values.

When every head is causal (``interpreter.attention_head`` gives a key j > i no weight) the stream at position i
of any string depends on its first i + 1 tokens only. A prefix tree of strings is then evaluated one level at a
time: a node (a prefix) runs the per-position steps of ``kernels.py`` (embedding, affine maps, LayerNorm,
activation, residual sums, readout) on its own last position, and each head's query scores the keys, and mixes
the values, that the node's ancestors stored when they were evaluated (a key/value cache). A word of length n
costs one position, not n, and a tree of words shares every common prefix.

The arithmetic is the batched program's, plan for plan (``planner.compile_program`` at the longest length: the
bounds of a position hold for every string that long, so for every prefix of one); a head's plan is cut to its
query's row (the causal mask, an RPE/ALiBi bias, a URPE scale) and the RoPE tables to the node's position.
``tests/test_prefix_tree.py`` checks the readouts against the reference interpreter bit for bit.

A ``Level`` is one batch of nodes of one depth whose parents all lie in one parent ``Level`` (the scan,
``engines/enumerate/prefix_scan.py``, explores the tree in such batches, depth first).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir import Model, Token
from ..semantics.arithmetic import Arithmetic
from . import kernels
from .backends import WIDE, NumpyOps
from .evaluator import BatchedEvaluator
from .plans import FLOAT_EXACT, HeadPlan, Program, RotationPlan, Unsupported


@dataclass
class Level:
    """Nodes of one depth (letters in each node's prefix; BOS not counted), stored at ``ids`` of the cache."""

    depth: int
    ids: np.ndarray  # (B,) each node's row in the evaluator's cache (``_Cache``)
    lineage: np.ndarray  # (B, positions) the cache rows of each node's positions 0..its own, in order
    readout: Any  # (B,) readout numerators at the node's last position (over ``PrefixTreeEvaluator.den``)

    def __len__(self) -> int:  # the root of a model without BOS is one node with no position
        return len(self.lineage)

    @property
    def end(self) -> int:
        """The cache row after this level's: what a depth-first walk keeps while it explores below this level."""
        return int(self.ids[-1]) + 1 if len(self.ids) else 0


class _Cache:
    """Rows of keys, values and tokens, one row per evaluated node, used as a stack: a depth-first walk only
    needs the rows of the levels on its current path, so ``truncate`` frees everything after a level."""

    def __init__(self, widths: list[tuple[int, int]], dtypes: list[Any]):
        self.size = 0
        self.keys = [np.zeros((0, k), dtype=dtype) for (k, _), dtype in zip(widths, dtypes)]
        self.values = [np.zeros((0, v), dtype=dtype) for (_, v), dtype in zip(widths, dtypes)]
        self.tokens = np.zeros(0, dtype=np.int64)

    def allocate(self, count: int) -> np.ndarray:
        needed = self.size + count
        if needed > len(self.tokens):
            grown = max(needed, 2 * len(self.tokens), 1024)
            self.keys = [_grown(a, grown) for a in self.keys]
            self.values = [_grown(a, grown) for a in self.values]
            self.tokens = _grown(self.tokens, grown)
        ids = np.arange(self.size, needed)
        self.size = needed
        return ids

    def truncate(self, end: int) -> None:
        self.size = min(self.size, end)


def _grown(array: np.ndarray, rows: int) -> np.ndarray:
    out = np.zeros((rows, *array.shape[1:]), dtype=array.dtype)
    out[: len(array)] = array
    return out


class PrefixTreeEvaluator:
    """Exact readouts of a causal model at the end of prefixes up to ``longest`` letters (numpy, in process).

    Raises ``Unsupported`` when the model or its program does not fit: a non-causal head, an exact-arithmetic
    program that divides by tie counts (its flagged rows need the full program), a 1-D hardmax head (its causal
    kernel scans every position).
    """

    def __init__(
        self,
        model: Model,
        arith: Arithmetic,
        tokens: Sequence[Token],
        longest: int,
        batched: BatchedEvaluator | None = None,
    ):
        """``batched``: a numpy evaluator of the same model (a process cache may hold its compiled programs)."""
        if not all(head.causal for _, _, head in model.heads()):
            raise Unsupported("a prefix tree needs every head causal (position i must not read later positions)")
        self.batched = batched or BatchedEvaluator(model, arith, tokens, backend="numpy", device="cpu")
        compiled = self.batched.compiled(longest)
        program: Program = compiled.program
        if compiled.fallback is not None or program.tie_free:
            raise Unsupported("the program divides by tie counts (exact hardmax): its rows need the full program")
        for block in program.blocks:
            for head in block.attention.heads if block.attention is not None else ():
                if head.mode == "argmax1d":
                    raise Unsupported("a 1-D hardmax head scans every position; the prefix tree does not cut it")
        # the cut rows' twins join a copy: the compiled program (maybe cached) keeps its own table
        self.program, self.twins, self.longest = program, dict(compiled.twins), longest
        self.ops = self.batched.ops
        assert isinstance(self.ops, NumpyOps)  # the cache is gathered with numpy indexing
        self.bos = program.embed.bos_index is not None
        self.den = program.readout.den
        self._rows: dict[tuple[int, int], HeadPlan] = {}  # (id(head plan), position) -> the plan cut to that row
        self.slots: list[list[int]] = []  # [block][head] -> the head's slot in the cache
        widths: list[tuple[int, int]] = []
        dtypes: list[Any] = []
        for block in program.blocks:
            self.slots.append([])
            for head in block.attention.heads if block.attention is not None else ():
                self.slots[-1].append(len(widths))
                keys = head.key.weight.shape[1] if head.key is not None else 0
                widths.append((keys, head.value.weight.shape[1]))
                # a head whose score and mixing products are exact in float64 (``scores_float_ok``, ``mix_float_ok``:
                # every partial sum an integer < 2^53) gets its keys and values cached as float64, saving a copy of
                # every gathered row per query; the others keep int64
                exact = not head.guarded and head.scores_float_ok and head.mix_float_ok and head.mode == "general"
                dtypes.append(np.float64 if exact else np.int64)
        self.cache = _Cache(widths, dtypes)
        self.wide_steps = 0

    # -- the tree
    def root(self) -> Level:
        """The empty prefix, at the bottom of an emptied cache: with BOS, BOS evaluated at position 0 (its keys
        and values begin every node's), without BOS no position at all."""
        self.cache.truncate(0)
        if not self.bos:
            return Level(0, np.zeros(0, dtype=np.int64), np.zeros((1, 0), dtype=np.int64), None)
        bos = np.array([self.program.embed.bos_index], dtype=np.int64)
        return self._evaluate(0, bos, np.zeros((1, 0), dtype=np.int64))

    def children(self, parent: Level, up: np.ndarray, tokens: np.ndarray) -> Level:
        """The nodes ``parent[up[k]] + tokens[k]``, evaluated at their last position. The cache rows after
        ``parent``'s are reused (depth first: the levels there have been explored)."""
        if parent.depth + 1 > self.longest:
            raise ValueError(f"prefix of {parent.depth + 1} letters: the program was compiled for {self.longest}")
        self.cache.truncate(parent.end)
        return self._evaluate(parent.depth + 1, np.asarray(tokens, dtype=np.int64), parent.lineage[np.asarray(up)])

    def rows(self, level: Level) -> np.ndarray:
        """(B, depth) token indices: each node's prefix (its letters, BOS left out)."""
        return self.cache.tokens[level.lineage[:, 1:] if self.bos else level.lineage]

    # -- one position of every node
    def _evaluate(self, depth: int, tokens: np.ndarray, ancestors: np.ndarray) -> Level:
        """Nodes whose earlier positions are the cache rows ``ancestors`` (B, position), at ``position``."""
        position = ancestors.shape[1]
        ids = self.cache.allocate(len(tokens))
        self.cache.tokens[ids] = tokens
        lineage = np.concatenate([ancestors, ids[:, None]], axis=1)
        ctx = kernels.Context(self.ops, self.twins)
        program = self.program
        z, mz = self._embed(tokens, position, ctx)
        for b, block in enumerate(program.blocks):
            if block.attention is not None:
                slots = self.slots[b]

                def head(index: int, plan: HeadPlan, z, mz, slots=slots):
                    return self._head(plan, slots[index], z, mz, ctx, position, lineage)

                z, mz = kernels.attention_layer(block.attention, z, mz, ctx, head)
            if block.feed_forward is not None:
                z, mz = kernels.feed_forward(block.feed_forward, z, mz, ctx)
        z, mz = kernels.layer_norm(program.final_norm, z, mz, ctx)
        readout = kernels.readout(program.readout_plan, z, mz, ctx)
        self.wide_steps += ctx.wide_steps
        return Level(depth, ids, lineage, readout[:, 0] if ctx.is_wide(readout) else self.ops.widen(readout)[:, 0])

    def _embed(self, tokens: np.ndarray, position: int, ctx: kernels.Context):
        """``kernels.embed`` at one position: the token's row plus row ``position`` of the absolute PE."""
        plan, ops = self.program.embed, ctx.ops
        if not plan.native:
            plan, ops = ctx.wide_plan(plan), WIDE
        z = plan.table[tokens][:, None, :]
        if plan.positional is not None:
            z = z + plan.positional[position : position + 1]
            if plan.clamp is not None:
                ops.clamp_(z, *plan.clamp)
        return (z, plan.out_bound) if ops is ctx.ops else ctx.narrow(z)

    def _head(self, plan: HeadPlan, slot: int, z, mz, ctx: kernels.Context, position: int, lineage):
        """``kernels.attention_head`` for the query at ``position``: its key and value join the cached ones."""
        row = self._row(plan, position, ctx)
        q, mq = kernels.affine(plan.query, z, mz, ctx) if plan.query is not None else (None, ())
        k, mk = kernels.affine(plan.key, z, mz, ctx) if plan.key is not None else (None, ())
        if q is not None and k is not None:
            q, mq = kernels.rotate(row.query_rotation, q, mq, ctx)
            k, mk = kernels.rotate(row.key_rotation, k, mk, ctx)
        v, mv = kernels.affine(plan.value, z, mz, ctx)
        own = lineage[:, -1]
        if k is not None:
            self._store(self.cache.keys[slot], own, k)
        self._store(self.cache.values[slot], own, v)
        keys = self.cache.keys[slot][lineage] if k is not None else None  # (B, position + 1, d_k)
        values = self.cache.values[slot][lineage]
        # a static bound holds for every cached key and value: the plan's bound over the whole domain
        mk = plan.key_rotation.out_bound if plan.key_rotation is not None else (plan.key.out_bound if plan.key else ())
        mv = plan.value.out_bound
        operands = [x for x in (q, keys, values) if x is not None]
        out = flagged = None
        if row.native and not any(ctx.is_wide(x) for x in operands):
            if not row.guarded:
                out, flagged = kernels._head(row, q, keys, values, ctx.ops, row.scores_float_ok, row.mix_float_ok)
                bound = row.out_bound
            else:
                ok, (mq, mk, mv) = kernels._fits(ctx, [q, keys, values], [mq, mk, mv], row.intermediate_bound)
                if ok:
                    dot_ok = sum(a * b for a, b in zip(mq, mk)) < FLOAT_EXACT
                    out, flagged = kernels._head(row, q, keys, values, ctx.ops, dot_ok, row.mix_ok(mv))
                    bound = row.output_bound(mv)
        if out is None:
            wq, wk, wv = (ctx.to_wide(x) if x is not None else None for x in (q, keys, values))
            out, flagged = kernels._head(ctx.wide_plan(row), wq, wk, wv, WIDE, False, False)
            out, bound = ctx.narrow(out)
        assert flagged is None  # tie-free programs are refused in __init__
        return out, bound

    @staticmethod
    def _store(cache: np.ndarray, ids: np.ndarray, vectors) -> None:
        """Keys or values (B, 1, d) into their cache rows (they are rounded into the format: int64 holds them)."""
        if isinstance(vectors, np.ndarray) and vectors.dtype == object:
            raise Unsupported("a key or value beyond int64: the prefix tree caches them as int64")
        cache[ids] = vectors[:, 0]

    def _row(self, plan: HeadPlan, position: int, ctx: kernels.Context) -> HeadPlan:
        """``plan`` cut to query row ``position`` (keys 0..position), with its wide twin registered."""
        key = (id(plan), position)
        row = self._rows.get(key)
        if row is None:
            row = self._rows[key] = _cut(plan, position)
            wide = _cut(ctx.wide_plan(plan), position)
            self.twins[id(row)] = wide
            for native_rotation, wide_rotation in (
                (row.query_rotation, wide.query_rotation),
                (row.key_rotation, wide.key_rotation),
            ):
                if native_rotation is not None:
                    self.twins[id(native_rotation)] = wide_rotation
        return row


def _cut(plan: HeadPlan, position: int) -> HeadPlan:
    rows = slice(position, position + 1)
    keys = slice(0, position + 1)
    return dataclasses.replace(
        plan,
        live=plan.live[rows, keys],
        score_bias=None if plan.score_bias is None else plan.score_bias[rows, keys],
        relative_scale=None if plan.relative_scale is None else plan.relative_scale[rows, keys],
        query_rotation=_cut_rotation(plan.query_rotation, position),
        key_rotation=_cut_rotation(plan.key_rotation, position),
    )


def _cut_rotation(plan: RotationPlan | None, position: int) -> RotationPlan | None:
    if plan is None:
        return None
    return dataclasses.replace(plan, cos=plan.cos[position : position + 1], sin=plan.sin[position : position + 1])

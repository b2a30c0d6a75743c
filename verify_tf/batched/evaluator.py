"""``BatchedEvaluator``: a model, an arithmetic and a token list, evaluated exactly on many inputs at once.

Inputs are int64 token-index rows (batch, length) into ``tokens`` (grid points or alphabet symbols, in the
order of ``domain.tokens``). Outputs are exact: numerators over one denominator (``Values``), int64 arrays,
or numpy object arrays of Python integers where the values exceed int64. A program is compiled (its bounds
proven, the width of each step chosen) once per input length, then cached; a tie-free program's flagged rows
are recomputed on its full program and merged over the smallest common denominator.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..ir import Model, Token
from ..semantics.arithmetic import Arithmetic
from . import kernels
from .backends import WIDE, make_ops
from .planner import compile_program
from .plans import LIMIT, Program

LAYERS = ("output", "readout")
DEFAULT_MEMORY = 256 << 20  # bytes of working memory per chunk when the caller gives no budget


@dataclass
class Values:
    """Exact values: ``numerators / den``. (B, n, d) for layer 'output', (B, n) for layer 'readout'."""

    numerators: Any  # numpy array, or a backend tensor when asked for native values
    den: int

    def fraction(self, *index: int) -> Fraction:
        return Fraction(int(self.numerators[index]), self.den)


def _to_backend(plan: Any, ops, dtype, twins: dict[int, Any]) -> tuple[Any, Any]:
    """(the plan with every array on the back end's device, integers as ``dtype``; its wide twin).

    The wide twin holds the same constants as Python integers (``kernels.WIDE``); ``twins`` maps the id of
    every native plan node to its twin, for the steps that run wide. Object arrays (constants beyond int64)
    stay on the host in both: their steps always run wide.
    """
    if isinstance(plan, np.ndarray):
        if plan.dtype == object:
            return plan, plan
        return ops.constant(plan.astype(dtype) if plan.dtype == np.int64 else plan), WIDE.constant(plan)
    if isinstance(plan, tuple):
        pairs = [_to_backend(p, ops, dtype, twins) for p in plan]
        return tuple(a for a, _ in pairs), tuple(b for _, b in pairs)
    if dataclasses.is_dataclass(plan):
        pairs = {f.name: _to_backend(getattr(plan, f.name), ops, dtype, twins) for f in dataclasses.fields(plan)}
        native = dataclasses.replace(plan, **{k: a for k, (a, _) in pairs.items()})
        wide = dataclasses.replace(plan, **{k: b for k, (_, b) in pairs.items()})
        twins[id(native)] = wide
        return native, wide
    return plan, plan


@dataclass
class _Compiled:
    program: Program  # on the back end
    twins: dict[int, Any]
    fallback: _Compiled | None


def _merge(tie_free: Any, den: int, flagged: np.ndarray, full: Any, full_den: int) -> tuple[np.ndarray, int]:
    """Rows ``flagged`` of ``tie_free`` (over ``den``) replaced by ``full`` (over ``full_den``, a multiple),
    over the smallest common denominator den * m: m is what the flagged rows' values need."""
    ratio = full_den // den
    full = np.asarray(full).astype(object)
    m = 1
    for x in full.reshape(-1):
        m = math.lcm(m, ratio // math.gcd(ratio, int(x)))
    out = np.asarray(tie_free).astype(object) * m
    out[flagged] = full * m // ratio
    if out.size == 0 or max(int(np.max(out)), -int(np.min(out))) <= LIMIT:
        out = out.astype(np.int64)
    return out, den * m


def _joined(parts: list[tuple[np.ndarray, int]]) -> Values:
    """Slices' exact values (numerators, den), in row order, over their least common denominator."""
    den = math.lcm(*(d for _, d in parts))
    scaled = [x if d == den else np.asarray(x).astype(object) * (den // d) for x, d in parts]
    if any(x.dtype == object for x in scaled):
        joined = np.concatenate([x.astype(object) for x in scaled])
        if joined.size == 0 or max(int(np.max(joined)), -int(np.min(joined))) <= LIMIT:
            joined = joined.astype(np.int64)
        return Values(joined, den)
    return Values(np.concatenate(scaled), den)


class BatchedEvaluator:
    """Exact batched evaluation with the interpreter's semantics (``verify_tf.semantics.evaluate``).

    ``tokens``: the token list rows index into (``domain.tokens``). ``backend``: auto | numpy | torch;
    ``device``: auto | cpu | cuda (see ``backends.make_ops``). ``check(length)`` raises ``Unsupported``
    when int64 cannot hold some intermediate for that length (compile eagerly to decide an engine).
    """

    def __init__(
        self,
        model: Model,
        arith: Arithmetic,
        tokens: Sequence[Token],
        *,
        backend: str = "auto",
        device: str = "auto",
        ops: Any = None,
        narrow: bool = True,
        variant: str = "auto",
        force: str | None = None,
    ):
        self.model = model
        self.arith = arith
        self.tokens = list(tokens)
        self.ops = ops if ops is not None else make_ops(backend, device)
        self.narrow = narrow  # int32 arithmetic where the proven bounds allow it
        self.variant = variant  # program.VARIANTS: auto | full | tie-free
        self.force = force  # tests: "guarded" or "wide" (program.FORCES)
        self._programs: dict[int, _Compiled] = {}
        self.memory = DEFAULT_MEMORY  # working memory of one evaluation: larger batches run in slices (``run``)
        self.wide_steps = 0  # steps run on Python integers so far (all chunks)
        self.fallback_rows = 0  # rows a tie-free program flagged and the full program recomputed

    def _load(self, program: Program) -> _Compiled:
        dtype = np.int32 if program.small and self.narrow else np.int64
        twins: dict[int, Any] = {}
        native, _ = _to_backend(dataclasses.replace(program, fallback=None), self.ops, dtype, twins)
        fallback = self._load(program.fallback) if program.fallback is not None else None
        return _Compiled(native, twins, fallback)

    def compiled(self, length: int) -> _Compiled:
        if length not in self._programs:
            self._programs[length] = self._load(
                compile_program(self.model, self.arith, self.tokens, length, self.variant, force=self.force)
            )
        return self._programs[length]

    def program(self, length: int) -> Program:
        return self.compiled(length).program

    def check(self, length: int) -> None:
        self.program(length)

    def _run(self, compiled: _Compiled, rows: Any) -> tuple[Any, Any, int, int]:
        ctx = kernels.Context(self.ops, compiled.twins)
        program = compiled.program
        stream, readout = kernels.run(program, rows, ctx)
        self.wide_steps += ctx.wide_steps
        stream, readout = (x if ctx.is_wide(x) else self.ops.widen(x) for x in (stream, readout))
        stream_den, readout_den = program.output.den, program.readout.den
        if ctx.flagged is not None and compiled.fallback is not None:
            flagged = self.ops.to_numpy(ctx.flagged).astype(bool)
            if flagged.any():
                where = np.flatnonzero(flagged)
                self.fallback_rows += len(where)
                full_stream, full_readout, full_den, full_readout_den = self._run(
                    compiled.fallback, rows[self.ops.rows(where)]
                )
                stream, stream_den = _merge(
                    self.ops.to_numpy(stream), stream_den, flagged, self.ops.to_numpy(full_stream), full_den
                )
                readout, readout_den = _merge(
                    self.ops.to_numpy(readout), readout_den, flagged, self.ops.to_numpy(full_readout), full_readout_den
                )
        return stream, readout, stream_den, readout_den

    def run(self, rows: Any, *, native: bool = False) -> tuple[Values, Values]:
        """(final stream, readout) for token-index rows (B, length): numpy arrays unless ``native``.

        Numerators are int64 where they fit, else numpy object arrays of Python integers (also when native).
        """
        rows = self.ops.rows(rows)
        length = int(rows.shape[1])
        compiled = self.compiled(length)
        step = self.chunk_size(length, self.memory)
        if native or len(rows) <= step:
            stream, readout, stream_den, readout_den = self._run(compiled, rows)
            if not native:
                stream, readout = self.ops.to_numpy(stream), self.ops.to_numpy(readout)
            return Values(stream, stream_den), Values(readout, readout_den)
        # more rows than ``memory`` holds (a property that sizes its own batches): slice by slice, so the working
        # memory stays within the budget whoever chose the batch
        parts = [self._run(compiled, rows[a : a + step]) for a in range(0, len(rows), step)]
        stream_part = [(self.ops.to_numpy(p[0]), p[2]) for p in parts]
        readout_part = [(self.ops.to_numpy(p[1]), p[3]) for p in parts]
        return _joined(stream_part), _joined(readout_part)

    def values(self, rows: Any, layer: str = "output", *, native: bool = False) -> Values:
        if layer not in LAYERS:
            raise ValueError(f"layer must be one of {LAYERS}, got {layer!r}")
        stream, readout = self.run(rows, native=native)
        return stream if layer == "output" else readout

    def decode(self, row: Sequence[int]) -> tuple[Token, ...]:
        """The input (as the interpreter takes it) that a token-index row stands for."""
        return tuple(self.tokens[int(t)] for t in row)

    def bytes_per_input(self, length: int) -> int:
        """A generous estimate of the working memory one input needs while a chunk is evaluated."""
        program = self.program(length)
        n, width = program.positions, program.largest_width
        elements = 8 * n * width + 6 * program.heads * n * n
        if self.ops.device == "cuda":  # elementwise products (B, n, k, m) replace int64 matmul
            elements += n * width * max(width, n)
        return 8 * max(elements, 1)

    def chunk_size(self, length: int, memory: int = DEFAULT_MEMORY) -> int:
        """Inputs per chunk so that one chunk fits ``memory`` bytes (at least 1, at most 2^20)."""
        return max(1, min(1 << 20, memory // self.bytes_per_input(length)))

    def describe(self) -> str:
        return self.ops.describe()

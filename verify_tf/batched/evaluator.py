"""``BatchedEvaluator``: a model, an arithmetic and a token list, evaluated exactly on many inputs at once.

Inputs are int64 token-index rows (batch, length) into ``tokens`` (grid points or alphabet symbols, in the
order of ``domain.tokens``). Outputs are exact: int64 numerators over one denominator (``Values``). A
program is compiled (and its int64 bounds proven) once per input length, then cached.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..ir import Model, Token
from ..semantics.arithmetic import Arithmetic
from . import kernels
from .backends import make_ops
from .program import Program, compile_program

LAYERS = ("output", "readout")
DEFAULT_MEMORY = 256 << 20  # bytes of working memory per chunk when the caller gives no budget


@dataclass
class Values:
    """Exact values: ``numerators / den``. (B, n, d) for layer 'output', (B, n) for layer 'readout'."""

    numerators: Any  # numpy array, or a backend tensor when asked for native values
    den: int

    def fraction(self, *index: int) -> Fraction:
        return Fraction(int(self.numerators[index]), self.den)


def _to_backend(plan: Any, ops, dtype) -> Any:
    """Copy every array inside a (nested, frozen) plan onto the back end's device, integers as ``dtype``."""
    if isinstance(plan, np.ndarray):
        return ops.constant(plan.astype(dtype) if plan.dtype == np.int64 else plan)
    if isinstance(plan, tuple):
        return tuple(_to_backend(p, ops, dtype) for p in plan)
    if dataclasses.is_dataclass(plan):
        return dataclasses.replace(plan, **{f.name: _to_backend(getattr(plan, f.name), ops, dtype)
                                            for f in dataclasses.fields(plan)})
    return plan


class BatchedEvaluator:
    """Exact batched evaluation with the interpreter's semantics (``verify_tf.semantics.evaluate``).

    ``tokens``: the token list rows index into (``domain.tokens``). ``backend``: auto | numpy | torch;
    ``device``: auto | cpu | cuda (see ``backends.make_ops``). ``check(length)`` raises ``Unsupported``
    when int64 cannot hold some intermediate for that length (compile eagerly to decide an engine).
    """

    def __init__(self, model: Model, arith: Arithmetic, tokens: Sequence[Token], *, backend: str = "auto",
                 device: str = "auto", ops: Any = None, narrow: bool = True):
        self.model = model
        self.arith = arith
        self.tokens = list(tokens)
        self.ops = ops if ops is not None else make_ops(backend, device)
        self.narrow = narrow  # int32 arithmetic where the proven bounds allow it
        self._programs: dict[int, Program] = {}

    def program(self, length: int) -> Program:
        if length not in self._programs:
            program = compile_program(self.model, self.arith, self.tokens, length)
            dtype = np.int32 if program.small and self.narrow else np.int64
            self._programs[length] = _to_backend(program, self.ops, dtype)
        return self._programs[length]

    def check(self, length: int) -> None:
        self.program(length)

    def run(self, rows: Any, *, native: bool = False) -> tuple[Values, Values]:
        """(final stream, readout) for token-index rows (B, length): numpy arrays unless ``native``."""
        rows = self.ops.rows(rows)
        program = self.program(int(rows.shape[1]))
        stream, readout = kernels.run(program, rows, self.ops)
        stream, readout = self.ops.widen(stream), self.ops.widen(readout)
        if not native:
            stream, readout = self.ops.to_numpy(stream), self.ops.to_numpy(readout)
        return Values(stream, program.output.den), Values(readout, program.readout.den)

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

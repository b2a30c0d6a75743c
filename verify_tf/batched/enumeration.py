"""Exact outputs of a whole input space, chunk by chunk, and the evaluator cache the drivers share.

``stream_outputs`` evaluates every input of an ``InputSpace`` (``verify_tf.spaces``) on the batched evaluator
in memory-bounded chunks. ``evaluator_for`` keeps one compiled evaluator per (model, arithmetic, tokens,
device) per process, so the work units of one property, which arrive one by one in a worker process, compile
the model once.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir import Model, Token
from ..semantics.arithmetic import Arithmetic
from ..spaces import Chunk, InputSpace
from .evaluator import DEFAULT_MEMORY, BatchedEvaluator, Values


@dataclass(frozen=True)
class OutputChunk:
    chunk: Chunk
    values: Values  # exact outputs of these inputs (numpy numerators unless native)

    @property
    def rows(self) -> np.ndarray:
        return self.chunk.rows

    @property
    def start(self) -> int:
        return self.chunk.start

    @property
    def stop(self) -> int:
        return self.chunk.stop


def stream_outputs(
    evaluator: BatchedEvaluator,
    space: InputSpace,
    *,
    layer: str = "output",
    chunk: int | None = None,
    memory: int = DEFAULT_MEMORY,
    start: int = 0,
    stop: int | None = None,
    progress: Callable[[int, int | None], None] | None = None,
    native: bool = False,
) -> Iterator[OutputChunk]:
    """Exact outputs of every input in [start, stop) of ``space``, chunk by chunk, in bounded memory.

    ``layer``: 'output' (final stream, (B, n, d)) or 'readout' ((B, n)). ``chunk``: rows per chunk, else sized
    from ``memory`` bytes. Raises ``Unsupported`` (before any work) when the model cannot be evaluated exactly.
    """
    total = space.count()
    stop = total if stop is None else min(stop, total)
    for length in space.lengths:
        evaluator.check(length)
    size = chunk or min((evaluator.chunk_size(length, memory) for length in space.lengths), default=1)
    done = 0
    for piece in space.chunks(size, start, stop):
        values = evaluator.values(piece.rows, layer, native=native)
        done += piece.stop - piece.start
        if progress is not None:
            progress(done, stop - start)
        yield OutputChunk(piece, values)


_CACHE: OrderedDict[tuple, BatchedEvaluator] = OrderedDict()
_CACHE_SIZE = 8


def evaluator_for(
    key: str, model: Model, arith: Arithmetic, tokens: Sequence[Token], device: str = "auto", backend: str = "auto"
) -> BatchedEvaluator:
    """The cached evaluator of this process for ``key`` (a content fingerprint of model and arithmetic)."""
    cache_key = (key, device, backend, len(tokens))
    evaluator = _CACHE.get(cache_key)
    if evaluator is None:
        evaluator = BatchedEvaluator(model, arith, tokens, device=device, backend=backend)
        _CACHE[cache_key] = evaluator
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    else:
        _CACHE.move_to_end(cache_key)
    return evaluator


def estimate_throughput(evaluator: BatchedEvaluator, length: int, rows: Any = None, repeats: int = 1) -> float:
    """Measured inputs per second on a small batch of this length (benchmarks and calibration)."""
    vocabulary = len(evaluator.tokens)
    batch = min(4096, evaluator.chunk_size(length))
    sample = (
        rows if rows is not None else np.random.default_rng(0).integers(0, max(vocabulary, 1), size=(batch, length))
    )
    evaluator.run(sample[:8])  # compile and warm up
    begin = time.perf_counter()
    for _ in range(repeats):
        evaluator.run(sample)
    elapsed = max(time.perf_counter() - begin, 1e-9)
    return repeats * len(sample) / elapsed

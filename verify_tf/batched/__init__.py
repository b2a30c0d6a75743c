"""Exact batched evaluation of the model IR (numpy, torch CPU/CUDA), shared by the enumerate, search and
split engines.

The same semantics as ``verify_tf.semantics.evaluate``, on integer numerators: int64 (int32) where the bounds of
``verify_tf.bounds`` prove it before anything runs, int64 checked chunk by chunk where they do not, and Python
integers where the values really exceed int64 (``plans.py``, ``planner.py``, ``kernels.py``). Nothing is refused
for width; ``Unsupported`` is left for softmax in exact arithmetic. Typical use::

    evaluator = BatchedEvaluator(model, arith, space.tokens)
    for out in stream_outputs(evaluator, space, layer="readout"):
        out.rows              # (B, n) token indices into space.tokens
        out.values            # Values: exact numerators (B, n[+BOS]) / out.values.den (int64, or Python
                              # integers in an object array where they exceed int64)
"""

from .backends import BACKENDS, DEVICES, NumpyOps, TorchOps, cuda_available, make_ops
from .enumeration import OutputChunk, estimate_throughput, evaluator_for, stream_outputs
from .evaluator import DEFAULT_MEMORY, LAYERS, BatchedEvaluator, Values
from .planner import compile_program, unsupported_reason
from .plans import LIMIT, Program, Unsupported

__all__ = [
    "BACKENDS",
    "DEFAULT_MEMORY",
    "DEVICES",
    "LAYERS",
    "LIMIT",
    "BatchedEvaluator",
    "NumpyOps",
    "OutputChunk",
    "Program",
    "TorchOps",
    "Unsupported",
    "Values",
    "compile_program",
    "cuda_available",
    "estimate_throughput",
    "evaluator_for",
    "make_ops",
    "stream_outputs",
    "unsupported_reason",
]

"""Exact batched evaluation of the model IR (numpy, torch CPU/CUDA) and streaming enumeration of domains.

The same semantics as ``verify_tf.semantics.evaluate``, on int64 numerators with int64 safety proven by
interval bounds before anything runs (else ``Unsupported``: engines answer ``unknown``). Typical use::

    from verify_tf.engines.batched import stream_outputs
    for chunk in stream_outputs(model, arith, domain, layer="readout", progress=request.tick):
        chunk.rows            # (B, n) token indices into domain.tokens; chunk.start..chunk.stop numbering
        chunk.values          # Values: exact numerators (B, n[+BOS]) / chunk.values.den

``BatchedEvaluator(model, arith, tokens)`` evaluates arbitrary rows (sampling, search, replaying chunks).
"""

from .backends import BACKENDS, DEVICES, NumpyOps, TorchOps, cuda_available, make_ops
from .enumeration import (ORDERS, Deadline, InputChunk, OutputChunk, Segment, domain_tokens, estimate_throughput,
                          input_count, rows_to_inputs, segments, stream_inputs, stream_outputs, unrank)
from .evaluator import DEFAULT_MEMORY, LAYERS, BatchedEvaluator, Values
from .program import LIMIT, Program, Unsupported, compile_program

__all__ = [
    "BACKENDS", "DEVICES", "NumpyOps", "TorchOps", "cuda_available", "make_ops",
    "ORDERS", "Deadline", "InputChunk", "OutputChunk", "Segment", "domain_tokens", "estimate_throughput",
    "input_count", "rows_to_inputs", "segments", "stream_inputs", "stream_outputs", "unrank",
    "DEFAULT_MEMORY", "LAYERS", "BatchedEvaluator", "Values",
    "LIMIT", "Program", "Unsupported", "compile_program",
]

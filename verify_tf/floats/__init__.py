"""Float models as they run, and sound bounds on them (the "float as compiled" reading, docs/semantics.md).

* ``network``: ``FloatNetwork``, a float32 model as plain data (tracr's compiled models);
* ``evaluate``: the float32 evaluator that finds and replays float counterexamples;
* ``enclosure``: exact bounds containing every float32 evaluation of the network that the error model of
  docs/semantics.md §7 allows (any summation order, divisions or XLA's reciprocal products, any exp within its
  error bound), exact where the model is deterministic and first order through the MLPs, from which a property
  decides where the float model provably agrees.

No float computed here ever decides a verdict: the evaluator only proposes witnesses (each replayed), and the
enclosure computes in exact integers.
"""

from .network import FloatAttention, FloatHead, FloatMLP, FloatNetwork

__all__ = ["FloatAttention", "FloatHead", "FloatMLP", "FloatNetwork"]

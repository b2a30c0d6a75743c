"""Sound linear bounds of a model over batches of cubes, decided in exact integers (issue 29).

For each cube of a batch (a product of per-position token sets, one input length), every stage of the
interpreter gets an interval and two linear forms over the cube's input coordinates (``forms.Lin``), intersected
at every stage. Affine maps are exact; rounding is t − 2^-f <= floor(t) <= t; saturation is relaxed only where
the interval says it can act; ReLU by triangles; q·k by McCormick's planes; each head's weights by a box (the exp
table, the hardmax winners, uniform's 1/L) and its output as a convex combination over that box (the fractional
knapsack for the interval, the anchor key's form plus exact differences for the forms): ``attention.py``.

``backward.refined_bound`` runs that forward pass with every sublayer's query, key, value, pre-activation and
output stream intersected with a backward (CROWN-style) bound from that stage to the input coordinates, and bounds
the readout backward too (issue 43): the engine's bounds.

Numbers are integers over 2^K (``ints``: int64 where measured magnitudes allow, Python integers otherwise);
floats only choose slopes, anchors and multipliers, and each choice's offset is then computed exactly, so no
float ever decides a bound. ``verify_tf.bounds`` (exact Fraction intervals, one cube at a time) covers what this
domain refuses (``refusal``: LayerNorm, i-GELU, rounded-terms softmax, RoPE).
"""

from .forms import Lin
from .ints import Scale
from .propagate import CoordinateTable, Inputs, LinearModel, Result, refusal, scale_for

__all__ = ["CoordinateTable", "Inputs", "Lin", "LinearModel", "Result", "Scale", "refusal", "scale_for"]

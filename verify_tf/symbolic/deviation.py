"""How far the verified i-GELU is from torch's float GELU on the values a spec's domain can reach (a report).

A model whose feed-forwards use ``activation: i-gelu`` (I-BERT's integer polynomial, semantics/nonlinear.py)
stands in for one trained with GELU. ``igelu_deviation_note`` says how large that substitution is: the largest
|i-GELU(x) − GELU(x)| (in fixed arithmetic, i-GELU's output rounded to the grid as the model computes it) over
the pre-activation values x the domain can reach, bounded by ``verify_tf.bounds`` (the pre-activation intervals
over the whole domain).

This is a figure for the user, computed in float64 (``math.erf``); it never decides a verdict.
"""

from __future__ import annotations

import math

import numpy as np

from ..bounds import Cube, cube_bounds
from ..domain import Domain
from ..ir import Model
from ..semantics.arithmetic import Arithmetic, Fixed, UnsupportedInMode
from ..semantics.nonlinear import IGELU_A, IGELU_B, IGELU_CLIP, IGELU_K

EXACT_STEP = 2.0**-12  # exact arithmetic has no grid: the deviation is scanned at this spacing


def _reachable(model: Model, arith: Arithmetic, domain: Domain) -> tuple[float, float] | None:
    """The hull of every i-GELU input's interval over the domain's lengths (``verify_tf.bounds``; None when the
    bounds cannot be computed: a model the interpreter refuses)."""
    lo = hi = None
    try:
        for length in domain.lengths:
            bounds = cube_bounds(model, arith, Cube.whole(domain.tokens, length))
            for block, layer in zip(bounds.blocks, model.blocks):
                if layer.feed_forward is None or layer.feed_forward.activation != "i-gelu" or not block.pre_activation:
                    continue
                for vector in block.pre_activation:
                    for x_lo, x_hi in vector:
                        lo = x_lo if lo is None else min(lo, x_lo)
                        hi = x_hi if hi is None else max(hi, x_hi)
    except (UnsupportedInMode, ValueError):
        return None
    return None if lo is None or hi is None else (float(lo), float(hi))


def igelu_float(x: np.ndarray) -> np.ndarray:
    """i-GELU in float64 (for the report only; the semantics is the exact rational one)."""
    a, b, k = float(IGELU_A), float(IGELU_B), float(IGELU_K)
    clipped = np.minimum(np.abs(x) / k, -b)
    erf = np.sign(x) * (a * (clipped + b) ** 2 + 1)
    return x * (1 + erf) / 2


def gelu(x: np.ndarray) -> np.ndarray:
    return x * 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def igelu_deviation(lo: float, hi: float, arith: Arithmetic) -> tuple[float, float]:
    """(largest |i-GELU − GELU|, where) over [lo, hi]: beyond ±(c + 1) the gap only shrinks, so the scan stops there."""
    edge = float(IGELU_CLIP) + 1
    start, stop = max(lo, -edge), min(hi, edge)
    if isinstance(arith, Fixed):
        scale = arith.scale
        grid = np.arange(math.ceil(start * scale), math.floor(stop * scale) + 1, dtype=np.float64) / scale
        xs = np.concatenate([grid, [lo, hi]])
        verified = np.floor(igelu_float(xs) * scale) / scale  # the model rounds i-GELU's output once
    else:
        xs = np.concatenate([np.arange(start, stop, EXACT_STEP), [lo, hi]]) if start <= stop else np.array([lo, hi])
        verified = igelu_float(xs)
    gaps = np.abs(verified - gelu(xs))
    worst = int(np.argmax(gaps))
    return float(gaps[worst]), float(xs[worst])


def igelu_deviation_note(model: Model, arith: Arithmetic, domain: Domain | None) -> str | None:
    """The note for a model with i-GELU feed-forwards (None for models without)."""
    if not any(b.feed_forward is not None and b.feed_forward.activation == "i-gelu" for b in model.blocks):
        return None
    reach = _reachable(model, arith, domain) if domain is not None else None
    if reach is None:
        where = "over all inputs (no domain bounds)"
        lo, hi = -float(IGELU_CLIP) - 1, float(IGELU_CLIP) + 1
    else:
        lo, hi = reach
        where = f"over the pre-activation values the domain can reach ([{lo:.4g}, {hi:.4g}], interval bounds)"
    if hi < lo:
        return None
    gap, at = igelu_deviation(lo, hi, arith)
    rounded = " (its output rounded to the grid)" if isinstance(arith, Fixed) else ""
    return (
        f"i-GELU{rounded} differs from torch's float GELU by at most {gap:.4g} (at x = {at:.4g}) {where}; "
        f"the verified model computes i-GELU"
    )

"""The integer-only nonlinearities of trained models: LayerNorm in fixed point and I-BERT's i-GELU.

Both are defined exactly here (docs/semantics.md §2–3) and used by the interpreter; the SMT encoder and the
batched evaluator import the same constants and helpers, so the three cannot drift apart.

* ``layer_norm_mantissas``: LayerNorm on the integer mantissas of one position (Kim et al., I-BERT, ICML 2021,
  §3.6: integer mean and variance, an integer square root, one rounded division), with torch's placement of
  eps inside the square root. The square root is ⌊√V⌋ of the integer V = ⌊(Var + eps)·2^(4f)⌋, which equals
  ⌊√(Var + eps)·2^(2f)⌋ (⌊√⌊x⌋⌋ = ⌊√x⌋ for x ≥ 0): σ rounded toward −∞ to 2f fractional bits.
* ``igelu``: I-BERT's i-GELU(x) = x·½·[1 + L(x/k)], L(u) = sgn(u)·[a·(min(|u|, −b) + b)² + 1], with the
  constants of I-BERT's code (kssteven418/I-BERT, quant_modules.IntGELU: a = −0.2888, b = −1.769, k = 1.4142
  standing for √2) taken as the exact decimals they are written as, so i-GELU is a rational piecewise cubic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

IGELU_A = Fraction("-0.2888")
IGELU_B = Fraction("-1.769")
IGELU_K = Fraction("1.4142")
IGELU_CLIP = IGELU_K * -IGELU_B  # |x| >= this: L = ±1, so i-GELU(x) = x (x > 0) or 0 (x < 0)
# the smallest value of i-GELU: min over t > 0 of -(|a|/2)·t·(-b - t/k)^2, attained at t = k·(-b)/3
IGELU_MIN = IGELU_A / 2 * 4 * IGELU_K * (-IGELU_B) ** 3 / 27


def igelu(x: Fraction) -> Fraction:
    """I-BERT's i-GELU, exactly (a rational number for rational x)."""
    if x == 0:
        return Fraction(0)
    u = abs(x) / IGELU_K
    clipped = min(u, -IGELU_B)
    poly = IGELU_A * (clipped + IGELU_B) ** 2 + 1
    erf = poly if x > 0 else -poly
    return x * (1 + erf) / 2


def igelu_bounds(lo: Fraction, hi: Fraction) -> tuple[Fraction, Fraction]:
    """A sound interval for i-GELU over [lo, hi].

    For x >= 0 i-GELU is increasing (its derivative is at least 1 + a·b²/2 > 0), so the ends give the bounds.
    For x < 0 it lies in [max(x·(−a·b²)/2, IGELU_MIN), 0]: the factor (1 + L)/2 is in [0, −a·b²/2].
    """
    if hi <= -IGELU_CLIP:
        return Fraction(0), Fraction(0)
    upper = igelu(hi) if hi > 0 else Fraction(0)
    lower = igelu(lo) if lo >= 0 else max(lo * (-IGELU_A * IGELU_B**2) / 2, IGELU_MIN)
    return lower, upper


def layer_norm_parts(mantissas: Sequence[int], frac: int, eps: Fraction) -> tuple[list[int], int, int]:
    """The integer steps of fixed-point LayerNorm on one position's mantissas x_1..x_d (values x_c·2^−f).

    Returns (y, V, s): y_c = d·x_c − Σx (= d·2^f·(z_c − μ)), V = ⌊(Var + eps)·2^(4f)⌋ with the biased
    variance Var = Σ y_c² / (d³·4^f), and s = ⌊√V⌋ = ⌊√(Var + eps)·2^(2f)⌋.
    """
    d = len(mantissas)
    total = sum(mantissas)
    y = [d * m - total for m in mantissas]
    squares = sum(v * v for v in y)  # = d³·4^f·Var
    radicand = math.floor(Fraction(squares << (2 * frac), d**3) + eps * (1 << (4 * frac)))
    return y, radicand, math.isqrt(radicand)


def layer_norm_mantissas(mantissas: Sequence[int], frac: int, eps: Fraction) -> list[int]:
    """The normalised values n_c = (z_c − μ)/σ floored to f bits, as mantissas (before saturation).

    n_c·2^f = ⌊y_c·4^f / (d·max(s, 1))⌋: one floor division. s = 0 only when Var + eps < 2^(−4f); then every
    y_c is 0 whenever the input is constant, and max(s, 1) makes n = 0 there (torch's 0/√eps = 0 too).
    """
    y, _, s = layer_norm_parts(mantissas, frac, eps)
    divisor = len(mantissas) * max(s, 1)
    return [(v << (2 * frac)) // divisor for v in y]


def normalized_bound(d: int, frac: int) -> int:
    """A bound on |n_c·2^f| for every input: |z_c − μ| <= √((d−1)·Var) (Cauchy–Schwarz) and
    √(Var + eps) < (s + 1)/4^f give |n_c| < √(d−1)·(s + 1)/max(s, 1) <= 2√(d−1), so |n_c·2^f| <= ⌈2√(d−1)·2^f⌉."""
    return math.isqrt(4 * (d - 1) << (2 * frac)) + 1

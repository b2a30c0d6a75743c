"""Sound bounds on the smooth activations of trained models (GELU, erf and tanh forms; SiLU), as float32 runs them.

``activation(kind, box)`` returns intervals (integers over 2^SCALE, as every box of ``floats.enclosure``) around
f̂(x) for every x in the box and every float32 evaluation f̂ of the activation that the error model of
docs/semantics.md §7 ("Float as run") allows:

    |f̂(x) − f(x)| ≤ A·|x| + 2^-64,

where f is the exact real function and A = ``KERNEL_ERROR[kind]`` (2^-20 for both GELUs, 2^-17 for SiLU, whose
``exp`` may be torch's ``exp_u20``; tests/test_hf_floats.py measures torch's kernels against these). The exact
functions, with the constants as the libraries write them:

* ``gelu-erf``: x·Φ(x) = x·(1 + erf(x/√2))/2 (torch's ``F.gelu``, BERT's and nanoGPT's ``gelu``);
* ``gelu-tanh``: x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))/2 (GPT-2's ``gelu_new``, ``gelu_pytorch_tanh``; transformers'
  ``gelu_fast`` writes √(2/π) as 0.7978845608, a relative difference of 10^-11 inside A);
* ``silu``: x·σ(x) = x / (1 + e^-x) (Llama's ``silu``).

**How f is bounded, never by a float.** Each f is written around the grid points g = k·2^-CELL_BITS by Taylor's
theorem: f(x) = f(g) + f'(g)·δ + f''(ξ)·δ²/2 with δ = x − g, |δ| ≤ 2^-(CELL_BITS+1). f(g) and f'(g) are enclosed in
exact rationals (decimal arithmetic at 80 digits, correctly rounded, with a margin of 10^-45 that dwarfs every
rounding of the series; ``_bracket``), once per visited grid point, and |f''| ≤ M2:

* gelu-erf: f'' = φ(x)(2 − x²), at most 2φ(0) < 4/5 (for x² > 2, φ(x)(x² − 2) peaks at x = 2 with 0.108);
* silu: f'' = σ'(x)(2 − x·tanh(x/2)), at most 2·σ'(0) = 1/2 where x·tanh(x/2) ≤ 4, and |x|·e^-|x| < 0.08 beyond;
* gelu-tanh: f = x·σ(u) with u = 2√(2/π)(x + κx³), so |f''| ≤ σ'(u)·(2u' + |x|u'² + |x||u''|), bounded cell by cell
  on [0, 8] (σ'(u) decreases and the polynomial increases in |x|; f'' is even) and beyond 8 by its value there
  (``_tanh_second_derivative_bound``).

Beyond |x| > R (8 for the GELUs, 40 for SiLU) the functions are x·(1 − θ) or −|x|·θ with 0 ≤ θ < 2^-50 (the normal
tail Φ(−y) ≤ φ(y)/y, and e^-y). Each f is unimodal: decreasing to its one minimum x* < 0, then increasing (its
derivative changes sign once: ``_window``), so its range over [a, b] is [f(b), f(a)] left of x*, [f(a), f(b)] right
of it, and [f(x*), max(f(a), f(b))] around it, with x* enclosed in a window of width 2^-30 by bisection on the
sign of the exact f'.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Context, Decimal, localcontext
from fractions import Fraction
from functools import cache

import numpy as np

from .enclosure import OBJ, SCALE, Box, relu

CELL_BITS = 10  # grid points every 2^-10: the Taylor remainder M2·δ²/2 ≤ 0.8·2^-23 ≈ 1e-7
_SHIFT = SCALE - CELL_BITS
_PRECISION = 80
_MARGIN = Decimal("1e-45")
_PI = Decimal(
    "3.14159265358979323846264338327950288419716939937510582097494459230781640628620899862803482534211706798214808651"
)
KAPPA = Decimal("0.044715")  # the tanh form's cubic coefficient, as the libraries write it
TAIL_THETA = Fraction(1, 1 << 50)  # beyond R: f(x) = x(1 − θ) (x > 0) or −|x|θ (x < 0), 0 ≤ θ < 2^-50
KINDS = ("relu", "gelu-erf", "gelu-tanh", "silu")

# A of the module docstring: |f̂(x) − f(x)| ≤ A|x| for the float32 kernels of torch and numpy
KERNEL_ERROR = {
    "gelu-erf": Fraction(1, 1 << 20),
    "gelu-tanh": Fraction(1, 1 << 20),
    "silu": Fraction(1, 1 << 17),
}


def _ctx() -> Context:
    return Context(prec=_PRECISION)


def _sigmoid(u: Decimal) -> Decimal:
    return 1 / (1 + (-u).exp())


@cache
def _sqrt_two_over_pi() -> Decimal:
    with localcontext(_ctx()):
        return (2 / _PI).sqrt()


@cache
def _inverse_sqrt_two_pi() -> Decimal:
    with localcontext(_ctx()):
        return 1 / (2 * _PI).sqrt()


def _normal_cdf_and_density(g: Decimal) -> tuple[Decimal, Decimal]:
    """Φ(g) = 1/2 + g/√(2π)·Σ (−g²/2)^n / (n!(2n+1)) and φ(g) = e^(−g²/2)/√(2π), for |g| ≤ 8 (terms up to 32^32/32! <
    2·10^13: 80 digits keep 60 after the cancellation). The alternating series' tail after a term smaller than 10^-55
    (and past its peak, n > g²/2) is smaller than that term."""
    half_square = g * g / 2
    total, term, n = Decimal(0), Decimal(1), 0
    while True:
        total += term / (2 * n + 1)
        n += 1
        term = -term * half_square / n
        if n > half_square and abs(term) < Decimal("1e-55"):
            break
    scale = _inverse_sqrt_two_pi()
    return Decimal(1) / 2 + g * scale * total, (-half_square).exp() * scale


def _value_and_slope(kind: str, g: Decimal) -> tuple[Decimal, Decimal]:
    """f(g) and f'(g) in decimal arithmetic (module docstring)."""
    with localcontext(_ctx()):
        if kind == "gelu-erf":
            cdf, density = _normal_cdf_and_density(g)
            return g * cdf, cdf + g * density
        if kind == "gelu-tanh":
            k = _sqrt_two_over_pi()
            u = 2 * k * (g + KAPPA * g * g * g)
            s = _sigmoid(u)
            slope = 2 * k * (1 + 3 * KAPPA * g * g)
            return g * s, s + g * s * (1 - s) * slope
        s = _sigmoid(g)
        return g * s, s * (1 + g * (1 - s))


def _floor(value: Decimal) -> int:
    with localcontext(_ctx()):
        return int(((value - _MARGIN) * (1 << SCALE)).to_integral_value(rounding="ROUND_FLOOR"))


def _ceil(value: Decimal) -> int:
    with localcontext(_ctx()):
        return int(((value + _MARGIN) * (1 << SCALE)).to_integral_value(rounding="ROUND_CEILING"))


def _decimal(numerator: int, bits: int) -> Decimal:
    with localcontext(_ctx()):
        return Decimal(numerator) / Decimal(1 << bits)


@cache
def _bracket(kind: str, numerator: int, bits: int) -> tuple[int, int, int, int]:
    """Integers over 2^SCALE around f(x) and f'(x) at x = numerator / 2^bits: (f lo, f hi, f' lo, f' hi)."""
    value, slope = _value_and_slope(kind, _decimal(numerator, bits))
    return _floor(value), _ceil(value), _floor(slope), _ceil(slope)


@cache
def _tanh_second_derivative_bound() -> Fraction:
    """M2 of gelu-tanh (module docstring): max over cells [y_i, y_i + 1/64] of [0, 8] of σ'(u(y_i))·P(y_i + 1/64), and
    the same at y = 8 for the tail (where the bound decreases: P'/P ≤ 5/y < u')."""
    with localcontext(_ctx()):
        k = _sqrt_two_over_pi()
        best = Decimal(0)
        for i in range(8 * 64 + 1):
            y, top = Decimal(i) / 64, Decimal(i + 1) / 64
            u = 2 * k * (y + KAPPA * y * y * y)
            s = _sigmoid(u)
            slope = 2 * k * (1 + 3 * KAPPA * top * top)
            polynomial = 2 * slope + top * slope * slope + 12 * k * KAPPA * top * top
            best = max(best, s * (1 - s) * polynomial)
        return Fraction(_ceil(best), 1 << SCALE)


def _second_derivative_bound(kind: str) -> Fraction:
    if kind == "gelu-erf":
        return Fraction(4, 5)
    if kind == "silu":
        return Fraction(1, 2)
    return _tanh_second_derivative_bound()


TAIL = {"gelu-erf": 8, "gelu-tanh": 8, "silu": 40}  # R of the module docstring


@dataclass(frozen=True)
class _Window:
    """x* (the one minimum) lies in [left, right] (integers over 2^SCALE); f ≥ floor there."""

    left: int
    right: int
    floor: int


@cache
def _window(kind: str) -> _Window:
    """Bisection on the sign of the exact f' over [−2, 0] to width 2^-30: f'(left) < 0 < f'(right) (brackets), so x* is
    inside; on [left, right] f ≥ f(left) − (|f'(left)| + M2·w)·w, w = right − left."""
    bits = 30
    low, high = -2 << bits, 0  # f'(−2) < 0 < f'(0) = 1/2 for all three
    while high - low > 1:
        middle = (low + high) // 2
        _, _, slope_lo, slope_hi = _bracket(kind, middle, bits)
        if slope_hi < 0:
            low = middle
        elif slope_lo > 0:
            high = middle
        else:  # the sign is not decided at 10^-45: stop here, the window stays valid
            break
    f_lo, _, d_lo, _ = _bracket(kind, low, bits)
    _, _, _, d_hi = _bracket(kind, high, bits)
    assert d_hi > 0 and _bracket(kind, low, bits)[3] < 0
    width = Fraction(high - low, 1 << bits)
    slope = Fraction(max(abs(d_lo), abs(d_hi)), 1 << SCALE) + _second_derivative_bound(kind) * width
    floor = f_lo - math.ceil(slope * width * (1 << SCALE)) - 1
    return _Window(low << (SCALE - bits), high << (SCALE - bits), floor)


def _point_bounds(kind: str, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Integers over 2^SCALE around f(x) for each exact x (integers over 2^SCALE): Taylor around the nearest grid
    point inside ±R, the tail formulas beyond."""
    lo = np.empty(x.shape, dtype=OBJ)
    hi = np.empty(x.shape, dtype=OBJ)
    flat, out_lo, out_hi = x.reshape(-1), lo.reshape(-1), hi.reshape(-1)
    limit = TAIL[kind] << SCALE
    m2 = _second_derivative_bound(kind)
    for i, value in enumerate(flat.tolist()):
        if value > limit:
            out_lo[i], out_hi[i] = value - (value * TAIL_THETA.numerator // TAIL_THETA.denominator) - 1, value
        elif value < -limit:
            out_lo[i], out_hi[i] = -((-value) * TAIL_THETA.numerator // TAIL_THETA.denominator) - 1, 0
        else:
            cell = (value + (1 << (_SHIFT - 1))) >> _SHIFT
            f_lo, f_hi, d_lo, d_hi = _bracket(kind, cell, CELL_BITS)
            delta = value - (cell << _SHIFT)  # over 2^SCALE, |delta| ≤ 2^(SCALE − CELL_BITS − 1)
            curvature = -((-(m2.numerator * delta * delta)) // (2 * m2.denominator))  # ⌈M2 δ²/2⌉ over 2^(2·SCALE)
            low = min(d_lo * delta, d_hi * delta) - curvature
            high = max(d_lo * delta, d_hi * delta) + curvature
            out_lo[i] = f_lo + (low >> SCALE)
            out_hi[i] = f_hi - ((-high) >> SCALE)
    return lo, hi


def activation(kind: str, box: Box) -> Box:
    """f̂ over the box for every float32 evaluation of the activation ``kind`` (module docstring)."""
    if kind == "relu":
        return relu(box)  # max(x, 0) is exact in IEEE arithmetic
    if kind not in KERNEL_ERROR:
        raise ValueError(f"unknown activation {kind!r} (known: {', '.join(KINDS)})")
    a_lo, a_hi = _point_bounds(kind, box.lo)
    point = box.lo == box.hi
    if point.all():
        b_lo, b_hi = a_lo, a_hi
    else:
        b_lo, b_hi = _point_bounds(kind, box.hi)
    window = _window(kind)
    upper = np.maximum(a_hi, b_hi)
    decreasing = box.hi <= window.left
    increasing = box.lo >= window.right
    around = np.minimum(np.minimum(a_lo, b_lo), window.floor)
    lower = np.where(decreasing, b_lo, np.where(increasing, a_lo, around))
    lower = np.where(point, a_lo, lower)
    alpha = KERNEL_ERROR[kind]
    kernel = box.magnitude() * alpha.numerator // alpha.denominator + 2
    return Box(lower - kernel, upper + kernel)


def reference(kind: str, x: float) -> float:
    """f(x) in double precision: for the float32 mirror and messages, never for a bound."""
    if kind == "relu":
        return max(x, 0.0)
    if kind == "gelu-erf":
        return 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0)))
    if kind == "gelu-tanh":
        return 0.5 * x * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))
    if x < -700:
        return -0.0
    return x / (1.0 + math.exp(-x))

"""Exact integer arrays with the batched evaluator's overflow rule: int64 where every value provably fits, Python
integers (numpy object arrays) where it might not.

Every number of the linear domain is an integer *numerator* over one power of two ``2^K`` (``Scale``); these
helpers are the only arithmetic it does, and each one is exact: a product or a sum runs in int64 when the
measured magnitudes of its operands keep the result within ``LIMIT`` (2^62, the batched evaluator's margin),
otherwise on Python integers, and a wide result is narrowed back to int64 as soon as it fits. Divisions are
floor or ceiling divisions chosen by the caller so that every rounding moves a bound outward.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..batched import LIMIT

Array = Any  # a numpy array of int64 or of Python integers (dtype object)
EXACT_FLOAT = 1 << 53  # integers below it are exact in float64, and so is every sum of products that stays below it


@dataclass(frozen=True)
class Scale:
    """Numerators over ``2^bits``; ``grid`` is the fixed-point grid 2^-f in these units (None: exact arithmetic)."""

    bits: int
    frac: int | None = None

    @property
    def one(self) -> int:
        return 1 << self.bits

    @property
    def grid_shift(self) -> int | None:
        return None if self.frac is None else self.bits - self.frac

    def floor(self, x: Fraction) -> int:
        return (x.numerator << self.bits) // x.denominator

    def ceil(self, x: Fraction) -> int:
        return -((-x.numerator << self.bits) // x.denominator)

    def fraction(self, n: int) -> Fraction:
        return Fraction(int(n), self.one)


def wide(x: Array) -> bool:
    return isinstance(x, np.ndarray) and x.dtype == object


def magnitude(x: Array) -> int:
    """The largest |value| of x (0 for an empty array)."""
    if not isinstance(x, np.ndarray):
        return abs(int(x))
    if x.size == 0:
        return 0
    if wide(x):
        return max(abs(int(v)) for v in x.reshape(-1))
    return max(int(x.max()), -int(x.min()))


def narrow(x: Array) -> Array:
    """x as int64 when every value fits within LIMIT, else unchanged."""
    if wide(x) and magnitude(x) <= LIMIT:
        return x.astype(np.int64)
    return x


def _widen(*xs: Array) -> list[Array]:
    return [np.asarray(x).astype(object) if isinstance(x, np.ndarray) else int(x) for x in xs]


def add(a: Array, b: Array) -> Array:
    if not (wide(a) or wide(b)) and magnitude(a) + magnitude(b) <= LIMIT:
        return a + b
    x, y = _widen(a, b)
    return narrow(np.asarray(x + y))


def sub(a: Array, b: Array) -> Array:
    if not (wide(a) or wide(b)) and magnitude(a) + magnitude(b) <= LIMIT:
        return a - b
    x, y = _widen(a, b)
    return narrow(np.asarray(x - y))


def mul(a: Array, b: Array) -> Array:
    if not (wide(a) or wide(b)) and magnitude(a) * magnitude(b) <= LIMIT:
        return a * b
    x, y = _widen(a, b)
    return narrow(np.asarray(x * y))


def total(x: Array, axis: int) -> Array:
    """Sum over ``axis`` (exact)."""
    if not wide(x) and magnitude(x) * max(1, x.shape[axis]) <= LIMIT:
        return x.sum(axis=axis)
    return narrow(np.asarray(np.asarray(x).astype(object).sum(axis=axis)))


def l1(x: Array) -> Array:
    """Σ|x| over the last axis (the concretisation radius of a linear form over [-1, 1]^N)."""
    return total(np.abs(x), -1)


def contract(a: Array, b: Array, spec: str) -> Array:
    """np.einsum(spec, a, b) exactly: int64 when the measured magnitudes bound every sum (the summed length times the
    largest product) within LIMIT, else on Python integers."""
    inputs = spec.split("->")[0].split(",")
    summed = set(inputs[0]) & set(inputs[1]) - set(spec.split("->")[1]) - {"."}
    length = 1
    for letter in summed:
        length *= np.shape(a)[inputs[0].replace("...", "").index(letter) - len(inputs[0].replace("...", ""))]
    bound = 0 if wide(a) or wide(b) else magnitude(a) * magnitude(b) * length
    if not (wide(a) or wide(b)) and bound < EXACT_FLOAT:  # every product and partial sum an integer float64 holds
        return np.einsum(spec, np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64), optimize=True).astype(
            np.int64
        )
    if not (wide(a) or wide(b)) and bound <= LIMIT:
        return np.einsum(spec, a, b)
    x, y = _widen(a, b)
    return narrow(np.asarray(np.einsum(spec, x, y)))


def matmul(weights: np.ndarray, x: Array) -> Array:
    """Σ_i W[o, i] x[..., i, :] -> (..., o, :): an integer weight matrix (out, in) applied along axis -2."""
    bound = magnitude(x) * int(np.abs(weights).sum(axis=1).max(initial=0))
    if not wide(x) and not wide(weights) and bound < EXACT_FLOAT:  # exact in float64 (``contract``)
        product = np.einsum(
            "oi,...in->...on", weights.astype(np.float64), np.asarray(x, dtype=np.float64), optimize=True
        )
        return product.astype(np.int64)
    if not wide(x) and bound <= LIMIT:
        return np.einsum("oi,...in->...on", weights, x)
    return narrow(np.einsum("oi,...in->...on", weights.astype(object), np.asarray(x).astype(object)))


def floordiv(x: Array, d: Array) -> Array:
    """floor(x / d) for d > 0 (an int or an array); a power of two is an arithmetic shift."""
    if isinstance(d, int):
        if d == 1:
            return x
        if d & (d - 1) == 0:
            return x >> (d.bit_length() - 1)
    return x // d


def ceildiv(x: Array, d: Array) -> Array:
    """ceil(x / d) for d > 0."""
    if isinstance(d, int) and d == 1:
        return x
    return -floordiv(-x, d)


def floor_to(x: Array, shift: int) -> Array:
    """The largest multiple of 2^shift at most x."""
    return (x >> shift) << shift if shift > 0 else x


def ceil_to(x: Array, shift: int) -> Array:
    """The smallest multiple of 2^shift at least x."""
    return -(((-x) >> shift) << shift) if shift > 0 else x


def maximum(a: Array, b: Array) -> Array:
    if wide(a) or wide(b):
        x, y = _widen(a, b)
        return narrow(np.asarray(np.where(x >= y, x, y)))
    return np.maximum(a, b)


def minimum(a: Array, b: Array) -> Array:
    if wide(a) or wide(b):
        x, y = _widen(a, b)
        return narrow(np.asarray(np.where(x <= y, x, y)))
    return np.minimum(a, b)


def integers(values: Any, scale: int = 1) -> np.ndarray:
    """Exact integers ``values · scale`` (which must be integers) as an int64 or object array."""
    flat = [int(Fraction(v) * scale) for v in np.asarray(values, dtype=object).reshape(-1)]
    for v, original in zip(flat, np.asarray(values, dtype=object).reshape(-1)):
        if Fraction(original) * scale != v:
            raise ValueError(f"{original} times {scale} is not an integer")
    out = np.array(flat, dtype=object).reshape(np.shape(values))
    return narrow(out) if out.size else out.astype(np.int64)

"""The fixed-point exponential table used by softmax in ``fixed`` arithmetic.

Entry t (t = 0, 1, 2, ...) is the mantissa  E[t] = floor(exp(-t * 2^-f) * 2^f), i.e. exp of the
non-positive score difference -t*2^-f rounded toward -inf to f fractional bits. The table stops at the
first zero entry; every larger t also gives 0. E[0] = 2^f exactly (exp(0) = 1).

Computed with decimal arithmetic at high precision, never with float math.exp, so every engine sees
identical integers. exp(x) for rational x != 0 is irrational (Lindemann), so exp(-t*2^-f)*2^f is never
an integer; we still check that each value is far (> 10^-30) from an integer before flooring, and raise
if not, so a precision problem can never silently change a table entry.
"""

from __future__ import annotations

from decimal import Context, Decimal, ROUND_FLOOR, localcontext
from functools import lru_cache

_PRECISION = 80
_MARGIN = Decimal("1e-30")


@lru_cache(maxsize=None)
def exp_table(frac_bits: int) -> tuple[int, ...]:
    """Mantissas E[0], E[1], ... (see module docstring); the last entry is the final non-zero one."""
    if frac_bits < 0 or frac_bits > 20:
        raise ValueError("exp table supports 0..20 fractional bits")
    scale = 1 << frac_bits
    entries: list[int] = []
    with localcontext(Context(prec=_PRECISION)):
        step = (Decimal(-1) / Decimal(scale)).exp()  # exp(-2^-f)
        power = Decimal(1)  # exp(-t * 2^-f), built by repeated multiplication
        t = 0
        while True:
            if t % 4096 == 0:
                # re-anchor periodically so rounding error cannot accumulate
                power = (Decimal(-t) / Decimal(scale)).exp()
            value = power * scale
            floor = int(value.to_integral_value(rounding=ROUND_FLOOR))
            if t > 0 and (value - floor < _MARGIN or floor + 1 - value < _MARGIN):
                raise ArithmeticError(f"exp table entry {t} too close to an integer to floor safely")
            if floor == 0:
                break
            entries.append(floor)
            power *= step
            t += 1
    return tuple(entries)


def exp_mantissa(difference_mantissa: int, frac_bits: int) -> int:
    """floor(exp(-t * 2^-f) * 2^f) for t = difference_mantissa >= 0 (0 beyond the table)."""
    if difference_mantissa < 0:
        raise ValueError("softmax exp is only taken of non-positive score differences")
    table = exp_table(frac_bits)
    return table[difference_mantissa] if difference_mantissa < len(table) else 0

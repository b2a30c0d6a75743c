"""Whether a model is a counter machine, and how the machine keeps each head (no z3, no interpreter: the
engine's card asks this for ``auto``'s prediction without importing the engine).

A model qualifies when it reads letters and every head is causal; softmax needs fixed arithmetic. Positions:
RPE (its table clips beyond its radius) and ALiBi (in fixed precision every far key's score saturates at the
grid's minimum) are a window of the last R keys plus counts of the farther ones; RoPE whose angles are rational
numbers of turns has a periodic rotation table (the position modulo its period is a finite class); URPE and
RoPE at irrational angles are refused, with the reason. Its heads are kept as ``average`` (weights independent of
the key: a running sum), ``weighted`` (per key class: count and value sums), ``terms`` (softmax under
rounded-terms: per (key, value) class, counts) or ``window`` (RPE, ALiBi: the last R (key, value) classes and per
class the count of the farther keys) — ``counters`` has the argument.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

from ...ir import AlphabetTokens, Head, Model, Vector
from ...semantics.arithmetic import Arithmetic, Exact, Fixed

AVERAGE, WEIGHTED, TERMS, WINDOW = "average", "weighted", "terms", "window"
MAX_HEAD_WINDOW = 64
"""The longest window of one RPE or ALiBi head (distances kept exactly, docs/counting.md "Positions")."""
MAX_PERIOD = 4096
"""The longest period of a RoPE head's rotation table."""


def _zero(weights: Sequence[Vector], bias: Vector) -> bool:
    return all(w == 0 for row in weights for w in row) and all(b == 0 for b in bias)


def _key_independent(head: Head) -> bool:
    """Scores equal for every key: q = round(0) = 0, or every key is round(b_K) (with RoPE only k = 0: a
    constant key turns with its position)."""
    if head.positional == "rope":
        return _zero(head.query, head.query_bias) or _zero(head.key, head.key_bias)
    return _zero(head.query, head.query_bias) or all(w == 0 for row in head.key for w in row)


def rope_period(head: Head) -> int | None:
    """The period of a RoPE head's rotation table in fixed precision: θ a rational number of turns p/q for
    every pair makes the table repeat every q positions (the entries are computed from θ·t mod 1), and the lcm
    over the pairs; None for θ given in radians or as a power (an irrational number of turns)."""
    if head.positional != "rope" or head.rope is None:
        return 1
    period = 1
    for frequency in head.rope.frequencies:
        if frequency.kind == "radians" and frequency.value == 0:
            continue  # no rotation
        if frequency.kind != "turns":
            return None
        period = math.lcm(period, Fraction(frequency.value).denominator)
    return period


def _magnitudes(weights: Sequence[Vector], bias: Vector, arith: Fixed) -> list[Fraction]:
    """Per coordinate of round(W x + b): a bound on its magnitude over every stream x on the grid (|x_b| ≤ G):
    |b| for a zero row (round(b) = b, a weight on the grid), else min(G, Σ|W|·G + |b| + 2^-f) (the floor moves
    by less than 2^-f, the saturation caps at G)."""
    grid = max(-arith.min_value, arith.max_value)
    found = []
    for row, b in zip(weights, bias):
        if all(w == 0 for w in row):
            found.append(abs(arith.round(b)))
        else:
            found.append(min(grid, sum((abs(w) for w in row), Fraction(0)) * grid + abs(b) + Fraction(1, arith.scale)))
    return found


def window(head: Head, arith: Arithmetic) -> int:
    """R: the distances 1..R a ``window`` head keeps exactly; every key farther away scores as if at distance
    R + 1. RPE: the table clips beyond its radius r, so R is the largest m ≤ r with B[−m] ≠ B[−r]. ALiBi in
    fixed precision: the **horizon** — scores are floored and saturated, and q·k ≤ Σ_a |q_a|·|k_a| = top
    (``_magnitudes``: bounds over every stream on the grid), so every key farther than
    R = ⌊(top − min − 2^-f)/slope⌋ scores the grid's minimum whatever its key (then it weighs E[m − min], 0 once
    m − min reaches exp's cut-off)."""
    if head.positional == "alibi":
        assert head.alibi is not None and isinstance(arith, Fixed)
        queries = _magnitudes(head.query, head.query_bias, arith)
        keys = _magnitudes(head.key, head.key_bias, arith)
        top = sum((a * b for a, b in zip(queries, keys)), Fraction(0))
        reach = top - arith.min_value - Fraction(1, arith.scale)
        return max(0, math.floor(reach / head.alibi.slope))
    assert head.rpe_bias is not None
    radius = len(head.rpe_bias.values) // 2
    edge = head.rpe_bias.at(-radius)
    return max((m for m in range(1, radius + 1) if head.rpe_bias.at(-m) != edge), default=0)


def closed_form_weight(arith: Arithmetic, keys: int) -> Fraction:
    weight = Fraction(1, keys)
    return arith.floor(weight) if isinstance(arith, Fixed) and arith.attention_rounding == "per-probability" else weight


def head_kind(head: Head, arith: Arithmetic) -> str:
    """How the machine keeps this head's prefix (module docstring)."""
    rounded_terms = head.scoring == "softmax" and isinstance(arith, Fixed) and arith.rounded_terms
    if head.scoring == "uniform":
        return AVERAGE
    if head.positional in ("rpe", "alibi"):
        return WINDOW
    if rounded_terms:
        # round(Σ round(e^s·v_j) / Σ round(e^s)) is round(S/n) only for scores exactly 0 and 1 representable
        zero_scores = _zero(head.query, head.query_bias) or _zero(head.key, head.key_bias)
        if zero_scores and isinstance(arith, Fixed) and arith.rounded_term(Fraction(0), Fraction(1)) == 1:
            return AVERAGE
        return TERMS
    return AVERAGE if _key_independent(head) else WEIGHTED


def refusal(model: Model, arith: Arithmetic) -> str | None:
    """Why ``model`` is not a counter machine (None when it is)."""
    if not isinstance(model.tokens, AlphabetTokens):
        return "the model reads grid tokens, not letters"
    for layer, h, head in model.heads():
        where = f"layers[{layer}].heads[{h}]"
        if not head.causal:
            return f"{where} is not causal: a position reads later positions"
        if head.scoring == "softmax" and isinstance(arith, Exact):
            return f"{where} is softmax, which exact arithmetic cannot evaluate"
        reason = _positions_refusal(head, arith)
        if reason:
            return f"{where} {reason}"
    return None


def _positions_refusal(head: Head, arith: Arithmetic) -> str:
    """Why the machine cannot keep this head's positions ("" when it can: docs/counting.md "Positions")."""
    if head.positional == "urpe":
        return "uses URPE: its weights are scaled by C[j - i] after normalising, which no window bounds"
    if head.positional == "standard" or head.scoring == "uniform":
        return ""  # uniform weights ignore the scores, positional terms included
    if head.positional == "rope":
        if head.rope is None:
            return ""
        period = rope_period(head)
        if period is None:
            thetas = ", ".join(f.describe() for f in head.rope.frequencies if f.kind != "turns" and f.value != 0)
            return (
                f"uses RoPE with θ = {thetas}: not a rational number of turns, so its rotation table is not "
                "periodic and the positions are not finitely many classes"
            )
        if period > MAX_PERIOD:
            return f"uses RoPE with a rotation table of period {period}, past the limit {MAX_PERIOD}"
        return ""
    if not isinstance(arith, Fixed):
        return f"uses {head.positional}, which the machine keeps in fixed arithmetic only"
    if arith.rounded_terms and head.scoring == "softmax":
        return f"uses {head.positional} under rounded-terms, which the machine does not keep per distance"
    if head.positional == "alibi":
        if head.alibi is None or head.alibi.slope <= 0 or head.alibi.distance != "causal":
            return "uses ALiBi without a positive causal slope: no horizon"
    elif head.rpe_bias is None:
        return ""
    reach = window(head, arith)
    if reach > MAX_HEAD_WINDOW:
        return (
            f"uses {head.positional} with a window of {reach} positions (ALiBi: the horizon beyond which every "
            f"score is the grid's minimum), past the limit {MAX_HEAD_WINDOW}"
        )
    return ""


__all__ = [
    "AVERAGE",
    "MAX_HEAD_WINDOW",
    "MAX_PERIOD",
    "TERMS",
    "WEIGHTED",
    "WINDOW",
    "closed_form_weight",
    "head_kind",
    "refusal",
    "rope_period",
    "window",
]

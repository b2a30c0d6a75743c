"""Whether a model is a counter machine, and how the machine keeps each head (no z3, no interpreter: the
engine's card asks this for ``auto``'s prediction without importing the engine).

A model qualifies when it reads letters and every head is causal with standard positions (RPE and URPE weigh
j − i); softmax needs fixed arithmetic. Its heads are kept as ``average`` (weights independent of the key: a
running sum), ``weighted`` (per key class: count and value sums) or ``terms`` (softmax under rounded-terms: per
(key, value) class, counts) — ``counters`` has the argument.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from ...ir import AlphabetTokens, Head, Model, Vector
from ...semantics.arithmetic import Arithmetic, Exact, Fixed

AVERAGE, WEIGHTED, TERMS = "average", "weighted", "terms"


def _zero(weights: Sequence[Vector], bias: Vector) -> bool:
    return all(w == 0 for row in weights for w in row) and all(b == 0 for b in bias)


def _key_independent(head: Head) -> bool:
    """Scores equal for every key: q = round(0) = 0, or every key is round(b_K)."""
    return _zero(head.query, head.query_bias) or all(w == 0 for row in head.key for w in row)


def closed_form_weight(arith: Arithmetic, keys: int) -> Fraction:
    weight = Fraction(1, keys)
    return arith.floor(weight) if isinstance(arith, Fixed) and arith.attention_rounding == "per-probability" else weight


def head_kind(head: Head, arith: Arithmetic) -> str:
    """How the machine keeps this head's prefix (module docstring)."""
    rounded_terms = head.scoring == "softmax" and isinstance(arith, Fixed) and arith.rounded_terms
    if head.scoring == "uniform":
        return AVERAGE
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
        if head.positional != "standard":
            return f"{where} uses {head.positional}: its weights depend on the distance j - i, not on counts"
        if head.scoring == "softmax" and isinstance(arith, Exact):
            return f"{where} is softmax, which exact arithmetic cannot evaluate"
    return None


__all__ = ["AVERAGE", "TERMS", "WEIGHTED", "closed_form_weight", "head_kind", "refusal"]

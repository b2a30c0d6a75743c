"""One position of a counter model over z3 terms: the interpreter's per-position functions, symbolically.

``encode_from`` mirrors ``counters.CounterModel.step`` after the heads of one attention block: the output
projection, the residual, a post-LN, the feed-forwards (ReLU or i-GELU, with their LayerNorms) and the blocks
without attention up to the next attention block, with the symbolic encoder's functions (``symbolic.encoder``,
each the mirror of the interpreter function of the same name). The heads' outputs are supplied by the caller:
free variables over their ranges (``value_bounds``) or the exact rounded quotients of symbolic counts (the
induction, ``rounded_quotient``).

``value_bounds``: per ``average`` head coordinate, the mantissa range of its value at any word position, an
over-approximation computed layer by layer (earlier heads' outputs free over every value they can take); it
lets the exploration freeze coordinates (``counters``, "Freezing").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import z3

from ...semantics.arithmetic import Fixed
from ...symbolic.encoder import (
    Rounding,
    SymBlockTrace,
    SymVector,
    encode_affine,
    encode_feed_forward,
    encode_layer_norm,
    encode_project_heads,
    encode_residual,
)
from ...symbolic.solve import SAT, UNSAT, Session
from ...symbolic.values import Builder, Sym
from ...work import Deadline, DeadlineExpired
from .counters import AVERAGE, TERMS, CounterModel

QUERY_SECONDS = 0.5  # the most one z3 optimisation of a value bound may take


def constant(vector: Sequence[Fraction]) -> SymVector:
    return tuple(Sym.const(c) for c in vector)


def encode_read(side: CounterModel, r: Rounding, block_index: int, z: SymVector) -> SymVector:
    """What the heads of an attention block read: LN(z) with a pre-LN, else z."""
    layer = side.model.blocks[block_index].attention
    assert layer is not None
    if layer.norm is not None and layer.norm_first:
        return encode_layer_norm(layer.norm, [z], r)[0]
    return z


def encode_from(
    side: CounterModel, r: Rounding, block_index: int, z: SymVector, outputs: Sequence[SymVector]
) -> tuple[SymVector, int | None]:
    """The stream after attention block ``block_index`` (entered with ``z``, heads giving ``outputs``) and the
    blocks without attention after it: (stream, the next attention block's index or None)."""
    blocks = side.model.blocks
    layer = blocks[block_index].attention
    assert layer is not None
    z = encode_residual([z], [encode_project_heads(layer, outputs, r)], layer.residual, r)[0]
    if layer.norm is not None and not layer.norm_first:
        z = encode_layer_norm(layer.norm, [z], r)[0]
    index = block_index
    while True:
        ff = blocks[index].feed_forward
        if ff is not None:
            z = encode_feed_forward(ff, [z], r, SymBlockTrace())[0]
        index += 1
        if index == len(blocks):
            return z, None
        if blocks[index].attention is not None:
            return z, index


def encode_until_attention(side: CounterModel, r: Rounding, z: SymVector) -> tuple[SymVector, int | None]:
    """From the embedding through the leading blocks without attention: (stream, first attention block)."""
    blocks = side.model.blocks
    for index, block in enumerate(blocks):
        if block.attention is not None:
            return z, index
        if block.feed_forward is not None:
            z = encode_feed_forward(block.feed_forward, [z], r, SymBlockTrace())[0]
    return z, None


def encode_observation(side: CounterModel, builder: Builder, r: Rounding, z: SymVector) -> tuple[Sym, SymVector]:
    """(readout, final stream) of a final stream ``z``: the final norm, then u·z."""
    if side.model.final_norm is not None:
        z = encode_layer_norm(side.model.final_norm, [z], r)[0]
    return builder.linear(list(zip(side.model.readout, z))), z


def rounded_quotient(builder: Builder, arith: Fixed, total: Any, divisor: Any, lo: int, hi: int) -> Any:
    """sat(⌊total / divisor⌋) as an integer z3 term (a mantissa), for a divisor ≥ 1 and a true quotient that is
    known to lie in [lo, hi] or to saturate there.

    Exact and linear (no fresh variable): the greatest c in [lo, lo + 2^B − 1] with c·divisor ≤ total, found bit
    by bit from the top (each comparison is the divisor times a constant), with 2^B − 1 ≥ hi − lo; then clamped to
    the format's range (saturation).
    """
    lo, hi = max(lo, arith.min_mantissa), min(hi, arith.max_mantissa)
    width = max(hi - lo, 0).bit_length()
    quotient: Any = z3.IntVal(lo)
    product = divisor * lo
    for bit in reversed(range(width)):
        builder.tick()
        step = divisor * (1 << bit)
        taken = product + step <= total
        product = z3.If(taken, product + step, product)
        quotient = z3.If(taken, quotient + (1 << bit), quotient)
    return z3.If(quotient > hi, z3.IntVal(hi), quotient)


def value_bounds(
    side: CounterModel, letters: Sequence[str], seconds: float, deadline: Deadline | None = None
) -> list[list[tuple[int, int]] | None] | None:
    """Per slot, per value coordinate, the mantissa range of its value at any word position (None: not computed).

    ``seconds`` bounds the z3 queries that narrow the intervals (past it, the intervals are kept: sound); the
    encodings check ``deadline``, the unit's (a deep model's encoding alone outlived ``--timeout``, issue 26), and
    when it passes nothing is returned (sound: nothing freezes early), as the unit is out of time anyway.

    Layer by layer: the values of a block's heads are encoded for every letter with the outputs of the earlier
    heads as free grid variables over every value they can take (an ``average`` or ``weighted`` head's output is
    a weighted average of values the head can take, BOS's included, floored, and with per-probability possibly 0;
    a ``terms`` head's output is anywhere in the format's range), and z3 narrows the least and the greatest value.
    An over-approximation of what inputs reach, hence sound for freezing. Computed in fixed arithmetic for models
    without an absolute positional encoding only.
    """
    arith = side.arith
    if not isinstance(arith, Fixed) or side.length_dependent or not any(s.kind == AVERAGE for s in side.slots):
        return None
    scale = arith.scale
    bounds: list[list[tuple[int, int]] | None] = [None] * len(side.slots)
    ranges: list[list[tuple[int, int]] | None] = [None] * len(side.slots)  # of each slot's outputs
    bos_values = _bos_values(side)
    narrowing = Deadline(seconds)  # all the narrowing queries together
    attention_blocks = sorted(side.by_layer)
    for target in attention_blocks:
        members = side.by_layer[target]
        for symbol in letters:
            builder = Builder(deadline=deadline)
            try:
                values = _values_at(side, builder, symbol, target, ranges)
            except DeadlineExpired:
                return None
            for k, vector in zip(members, values):
                found = [_tightest(v, scale, builder.assertions, narrowing) for v in vector]
                old = bounds[k]
                bounds[k] = found if old is None else [(min(a[0], b[0]), max(a[1], b[1])) for a, b in zip(old, found)]
        for k in members:
            slot, limits = side.slots[k], bounds[k]
            assert limits is not None
            if slot.kind == TERMS:  # round(Σ round(e^s·v)) / Σ round(e^s)) leaves the values' hull
                ranges[k] = [(arith.min_mantissa, arith.max_mantissa)] * len(limits)
                continue
            widened = []
            at_bos = bos_values[k]
            for c, (lo, hi) in enumerate(limits):
                if at_bos is not None:
                    lo, hi = min(lo, at_bos[c]), max(hi, at_bos[c])
                if arith.attention_rounding == "per-probability":
                    lo, hi = min(lo, 0), max(hi, 0)
                widened.append((max(lo, arith.min_mantissa), min(hi, arith.max_mantissa)))
            ranges[k] = widened
    return [b if slot.kind == AVERAGE else None for b, slot in zip(bounds, side.slots)]


def _values_at(
    side: CounterModel,
    builder: Builder,
    symbol: str,
    target: int,
    ranges: list[list[tuple[int, int]] | None],
) -> list[SymVector]:
    """The values of block ``target``'s heads at a position holding ``symbol``, the outputs of the earlier heads
    free grid variables within ``ranges`` (the encoding stops at ``target``: nothing after it is needed)."""
    arith = side.arith
    assert isinstance(arith, Fixed)
    r = Rounding(arith, builder)
    z, index = encode_until_attention(side, r, constant(side.embedding(symbol)))
    while index is not None:
        read = encode_read(side, r, index, z)
        if index == target:
            return [
                encode_affine(slot.head.value, read, slot.head.value_bias, r)
                for slot in (side.slots[k] for k in side.by_layer[target])
            ]
        outputs = []
        for k in side.by_layer[index]:
            limits = ranges[k]
            assert limits is not None
            outputs.append(tuple(_free(builder, arith, f"y{k}_{c}", lo, hi) for c, (lo, hi) in enumerate(limits)))
        z, index = encode_from(side, r, index, z, outputs)
    return []


def _bos_values(side: CounterModel) -> list[tuple[int, ...] | None]:
    """Per slot, BOS's value vector as mantissas (None without BOS)."""
    found: list[tuple[int, ...] | None] = [None] * len(side.slots)
    if side.bos is None:
        return found
    _, _, _, path = side.start()
    assert path is not None
    _, entering = path
    arith = side.arith
    assert isinstance(arith, Fixed)
    for index, z in zip(sorted(side.by_layer), entering):
        layer = side.model.blocks[index].attention
        assert layer is not None
        for k, (_, _, value) in zip(side.by_layer[index], side.head_vectors(index, layer, z)):
            found[k] = tuple(arith.mantissa(v) for v in value)
    return found


def _free(builder: Builder, arith: Fixed, name: str, lo: int, hi: int) -> Sym:
    var = builder.fresh_int(name, lo, hi)
    return Sym(var, arith.scale, Fraction(lo, arith.scale), Fraction(hi, arith.scale))


def _tightest(value: Sym, scale: int, assertions: list[Any], deadline: Deadline) -> tuple[int, int]:
    """(least, greatest) mantissa of ``value`` under ``assertions``: its interval bound, narrowed by z3 only when
    the value then lies within three neighbouring grid points (only such a narrow range can let a coordinate
    freeze), and only by answers z3 proved (unsat); anything else keeps the interval, which is sound."""
    mantissa = value.scaled_num(scale)  # every value is on the 2^-f grid
    if isinstance(mantissa, int):
        return mantissa, mantissa
    interval = (math.ceil(value.lo * scale), math.floor(value.hi * scale))
    if interval[1] - interval[0] <= 1:
        return interval
    if deadline.expired():
        return interval
    session = Session(deadline, seed=None)
    session.add(*assertions)

    def answer(*extra: Any) -> str:
        return session.check(*extra, seconds=QUERY_SECONDS)

    if answer() != SAT:
        return interval
    seen = session.model().eval(mantissa, model_completion=True).as_long()
    if answer(z3.Or(mantissa <= seen - 2, mantissa >= seen + 2)) != UNSAT:
        return interval  # wider than three grid points (or undecided): nothing to gain
    lo = seen if answer(mantissa <= seen - 1) == UNSAT else seen - 1
    hi = seen if answer(mantissa >= seen + 1) == UNSAT else seen + 1
    return max(lo, interval[0]), min(hi, interval[1])


__all__ = [
    "constant",
    "encode_from",
    "encode_observation",
    "encode_read",
    "encode_until_attention",
    "rounded_quotient",
    "value_bounds",
]

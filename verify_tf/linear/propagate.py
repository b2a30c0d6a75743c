"""The model in the linear domain, one function per interpreter function (``semantics/interpreter.py``), over a
batch of cubes of one input length.

``LinearModel(model, arithmetic, length)`` turns the weights into integers once; ``bound(inputs)`` returns, for
every cube of the batch, intervals and linear forms (over the cube's input variables) of every stage it records:
the readout and the final stream always, every stage with ``trace=True`` (the tests check each of them against the
interpreter on every input of random cubes). ``refusal(model, arithmetic)`` names what the domain does not
model (LayerNorm, i-GELU, rounded-terms softmax): callers then use ``verify_tf.bounds`` (intervals) instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from ..ir import AlphabetTokens, AttentionLayer, FeedForward, Model, Token
from ..semantics.arithmetic import Arithmetic, Fixed
from ..semantics.exp_table import exp_table
from . import forms, ints
from .attention import HeadForms, HeadPlan, Refine, RefinePairs, attention_head, plan_head
from .forms import Lin
from .ints import Array, Scale

BITS = 16  # fractional bits of every number the domain stores (f + 8 in fixed arithmetic)


def refusal(model: Model, arithmetic: Arithmetic) -> str | None:
    """Why the linear domain cannot bound ``model`` (then use interval bounds), or None."""
    if next(model.norms(), None) is not None:
        return "LayerNorm is bounded by intervals only"
    for block in model.blocks:
        if block.feed_forward is not None and block.feed_forward.activation != "relu":
            return f"activation {block.feed_forward.activation} is bounded by intervals only"
        heads = block.attention.heads if block.attention is not None else ()
        if any(h.positional == "rope" for h in heads):  # q and k rotated by position: not modelled here
            return "RoPE is bounded by intervals only"
        if isinstance(arithmetic, Fixed) and arithmetic.rounded_terms and any(h.scoring == "softmax" for h in heads):
            return "rounded-terms softmax is bounded by intervals only"
        if not isinstance(arithmetic, Fixed) and any(h.scoring == "softmax" for h in heads):
            return "softmax needs fixed arithmetic"
    return None


def scale_for(arithmetic: Arithmetic) -> Scale:
    if isinstance(arithmetic, Fixed):
        return Scale(arithmetic.frac + 8, arithmetic.frac)
    return Scale(BITS)


class Rounding:
    """The arithmetic's steps in the linear domain (``forms.round_down``, ``forms.saturate``) and its constants."""

    def __init__(self, arithmetic: Arithmetic, positions: int, scale: Scale):
        self.scale = scale
        self.fixed = isinstance(arithmetic, Fixed)
        self.low = self.high = None
        self.per_probability = False
        self.rounded_terms = False
        self.exp_table = np.zeros(1, dtype=np.int64)
        if isinstance(arithmetic, Fixed):
            self.low = scale.floor(arithmetic.min_value)
            self.high = scale.floor(arithmetic.max_value)
            self.per_probability = arithmetic.attention_rounding == "per-probability"
            self.rounded_terms = arithmetic.rounded_terms
            self.exp_table = np.array((*exp_table(arithmetic.frac), 0), dtype=np.int64)
        upper = np.triu_indices(positions, 1)  # pairs j < k
        self.pairs = (upper[0], upper[1])

    def store(self, x: Lin) -> Lin:
        """round(·): floor to the grid, then saturate (the interpreter's ``round``)."""
        return self.saturate(forms.round_down(x, self.scale))

    def saturate(self, x: Lin) -> Lin:
        return forms.saturate(x, self.low, self.high)

    def rounds_scores(self, head: Any) -> bool:
        return self.fixed and head.scoring != "uniform" and not self.rounded_terms


@dataclass
class Inputs:
    """Per cube, user position and embedding coordinate: the box of the allowed tokens' coordinates, as units
    rounded outward: lo ∈ [lo_floor, lo_ceil] and hi − lo ∈ [width_floor, width_ceil] (equal ends when exact)."""

    lo_floor: np.ndarray  # (B, n, d)
    lo_ceil: np.ndarray
    width_floor: np.ndarray
    width_ceil: np.ndarray


class CoordinateTable:
    """Every index range (a, b) of a token coordinate -> its box, in units: grid coordinates index ``values`` (one
    table shared by all coordinates), an alphabet position indexes the symbols (boxes of their embeddings)."""

    def __init__(self, columns: list[list[Fraction]], scale: Scale):
        count, width = len(columns), len(columns[0])
        lo_floor = np.zeros((count, count, width), dtype=object)
        lo_ceil, width_floor, width_ceil = (np.zeros_like(lo_floor) for _ in range(3))
        for a in range(count):
            for b in range(a, count):
                for c in range(width):
                    lo = min(columns[k][c] for k in range(a, b + 1))
                    hi = max(columns[k][c] for k in range(a, b + 1))
                    lo_floor[a, b, c], lo_ceil[a, b, c] = scale.floor(lo), scale.ceil(lo)
                    width_floor[a, b, c], width_ceil[a, b, c] = scale.floor(hi - lo), scale.ceil(hi - lo)
        self.lo_floor, self.lo_ceil, self.width_floor, self.width_ceil = (
            np.asarray(ints.narrow(t)) for t in (lo_floor, lo_ceil, width_floor, width_ceil)
        )

    @classmethod
    def grid(cls, values: tuple[Fraction, ...], scale: Scale) -> CoordinateTable:
        return cls([[v] for v in values], scale)

    @classmethod
    def alphabet(cls, model: Model, symbols: tuple[Token, ...], scale: Scale) -> CoordinateTable:
        tokens = model.tokens
        assert isinstance(tokens, AlphabetTokens)
        return cls([[Fraction(c) for c in tokens.embed(str(s))] for s in symbols], scale)

    def inputs(self, ranges: np.ndarray, dim: int) -> Inputs:
        """``ranges`` (B, n, C, 2): per cube, position and token coordinate an inclusive index range; C = dim
        (a grid: coordinate c's range gives embedding coordinate c) or 1 (an alphabet: every coordinate)."""
        a, b = ranges[..., 0], ranges[..., 1]
        if ranges.shape[2] == dim:  # grid: the table has one column
            column = np.zeros_like(a)
        else:
            a, b = np.repeat(a, dim, axis=2), np.repeat(b, dim, axis=2)
            column = np.broadcast_to(np.arange(dim), a.shape)
        return Inputs(*(t[a, b, column] for t in (self.lo_floor, self.lo_ceil, self.width_floor, self.width_ceil)))


@dataclass
class BlockForms:
    heads: list[HeadForms] = field(default_factory=list)
    stages: dict[str, Lin] = field(default_factory=dict)


@dataclass
class Result:
    """What ``LinearModel.bound`` returns: (B, P) readout and (B, P, d) final stream (P network positions, BOS
    included), and with ``trace`` every stage. Forms have one coefficient per entry of ``variables``."""

    readout: Lin
    output: Lin
    variables: np.ndarray  # the forms' variables: indices position·d + coordinate (the others are fixed)
    embedded: Lin | None = None
    blocks: list[BlockForms] | None = None


class LinearModel:
    """A model's weights as integers for the linear domain, for inputs of ``length`` user positions."""

    def __init__(self, model: Model, arithmetic: Arithmetic, length: int, scale: Scale | None = None):
        why = refusal(model, arithmetic)
        if why is not None:
            raise ValueError(why)
        self.model = model
        self.scale = scale or scale_for(arithmetic)
        self.bos = isinstance(model.tokens, AlphabetTokens) and model.tokens.bos is not None
        self.length = length
        self.positions = length + (1 if self.bos else 0)
        self.variables = length * model.dim
        self.rounding = Rounding(arithmetic, self.positions, self.scale)
        self.heads: list[list[HeadPlan]] = []
        self.layers: list[dict[str, Any]] = []
        for block in model.blocks:
            plans, layer = [], {}
            if block.attention is not None:
                plans = [plan_head(h, self.positions, self.scale, self.rounding.pairs) for h in block.attention.heads]
                layer["attention"] = self._affine(_projection(block.attention), block.attention.output_bias)
            if block.feed_forward is not None:
                layer["w1"] = self._affine(block.feed_forward.w1, block.feed_forward.b1)
                layer["w2"] = self._affine(block.feed_forward.w2, block.feed_forward.b2)
            self.heads.append(plans)
            self.layers.append(layer)
        self.readout = self._affine((model.readout,), (0,))
        self.bos_box = None
        if self.bos:
            assert isinstance(model.tokens, AlphabetTokens) and model.tokens.bos is not None
            self.bos_box = forms.bias_bounds(model.tokens.embed(model.tokens.bos), self.scale)
        self.positional = None
        if model.positional_encoding is not None:
            if self.positions > len(model.positional_encoding):
                raise ValueError(f"input length {self.positions} exceeds the positional encoding's positions")
            self.positional = forms.bias_bounds(
                [list(row) for row in model.positional_encoding[: self.positions]], self.scale
            )

    def _affine(self, weights: Any, bias: Any) -> tuple[np.ndarray, int, np.ndarray, np.ndarray]:
        matrix, den = forms.rational_matrix(weights)
        lo, hi = forms.bias_bounds(bias, self.scale)
        return matrix, den, lo, hi

    # -- one function per interpreter function

    def embed(self, inputs: Inputs) -> tuple[Lin, np.ndarray]:
        """interpreter.embed: each coordinate is lo + (hi − lo)·t with its own variable t ∈ [0, 1] (below by the
        floored ends, above by the ceiled ones, t >= 0), BOS a constant, then + PE and saturation. Only coordinates
        that vary in some cube of the batch get a variable (their indices, position·d + coordinate, are returned)."""
        batch, n, d = inputs.lo_floor.shape
        widths = inputs.width_ceil.reshape(batch, n * d)
        variables = np.flatnonzero(np.asarray(widths != 0, dtype=bool).any(axis=0))
        count = len(variables)
        lc = np.zeros((batch, n * d, count), dtype=inputs.width_floor.dtype)
        uc = np.zeros_like(lc)
        lc[:, variables, np.arange(count)] = inputs.width_floor.reshape(batch, n * d)[:, variables]
        uc[:, variables, np.arange(count)] = widths[:, variables]
        lo, hi = inputs.lo_floor, ints.add(inputs.lo_ceil, inputs.width_ceil)
        z = Lin(lo, hi, lc.reshape(batch, n, d, count), lo, uc.reshape(batch, n, d, count), inputs.lo_ceil)
        if self.bos_box is not None:
            bos = forms.constant(
                np.broadcast_to(self.bos_box[0], (batch, 1, d)), np.broadcast_to(self.bos_box[1], (batch, 1, d)), count
            )
            z = _concatenate([bos, z], axis=1)
        if self.positional is not None:
            z = self.rounding.saturate(forms.shift(z, self.positional[0][None], self.positional[1][None]))
        return z, variables

    def attention_layer(
        self,
        index: int,
        layer: AttentionLayer,
        z: Lin,
        trace: BlockForms | None,
        refine: Refine | None = None,
        refine_pairs: RefinePairs | None = None,
    ) -> Lin:
        heads = [attention_head(plan, z, self.rounding, refine, refine_pairs) for plan in self.heads[index]]
        concatenated = _concatenate([h.output for h in heads], axis=-1)
        projected = self.rounding.store(forms.affine(concatenated, *self.layers[index]["attention"]))
        out = self.residual(z, projected, layer.residual)
        if trace is not None:
            trace.heads = heads
            trace.stages.update(attention_output=projected, after_attention=out)
        return out

    def feed_forward(
        self, index: int, ff: FeedForward, z: Lin, trace: BlockForms | None, refine: Refine | None = None
    ) -> Lin:
        pre = self.rounding.store(forms.affine(z, *self.layers[index]["w1"]))
        if refine is not None:
            pre = refine(self.layers[index]["w1"], pre)
        hidden = forms.relu(pre, self.scale)
        update = self.rounding.store(forms.affine(hidden, *self.layers[index]["w2"]))
        out = self.residual(z, update, ff.residual)
        if trace is not None:
            trace.stages.update(pre_activation=pre, hidden=hidden, feed_forward_output=update, after_feed_forward=out)
        return out

    def residual(self, z: Lin, update: Lin, enabled: bool) -> Lin:
        """interpreter._residual: saturate(z + o) (the sum of two grid values is on the grid)."""
        return self.rounding.saturate(forms.add(z, update)) if enabled else update

    def bound(self, inputs: Inputs, trace: bool = False) -> Result:
        """Intervals and forms of the readout and the final stream for every cube of ``inputs``."""
        z, variables = self.embed(inputs)
        embedded = z
        blocks: list[BlockForms] = []
        for index, block in enumerate(self.model.blocks):
            record = BlockForms() if trace else None
            if block.attention is not None:
                z = self.attention_layer(index, block.attention, z, record)
            if block.feed_forward is not None:
                z = self.feed_forward(index, block.feed_forward, z, record)
            if record is not None:
                blocks.append(record)
        readout = forms.affine(z, *self.readout).map(lambda a: a[..., 0], lambda c: c[..., 0, :])
        return Result(readout, z, variables, embedded if trace else None, blocks if trace else None)


def _projection(layer: AttentionLayer) -> tuple[tuple[Fraction, ...], ...]:
    """The output projection as one (d, Σ v) matrix over the heads' concatenated outputs."""
    return tuple(tuple(w for head in layer.heads for w in head.output[c]) for c in range(len(layer.output_bias)))


def _concatenate(parts: list[Lin], axis: int) -> Lin:
    """Lins side by side along a value axis (negative axes count the value axes)."""
    form_axis = axis - 1 if axis < 0 else axis

    def join(arrays: list[Array], along: int) -> Array:
        if any(ints.wide(a) for a in arrays):
            arrays = [np.asarray(a).astype(object) for a in arrays]
        return np.concatenate(arrays, axis=along)

    return Lin(
        join([p.lo for p in parts], axis),
        join([p.hi for p in parts], axis),
        join([p.lc for p in parts], form_axis),
        join([p.lb for p in parts], axis),
        join([p.uc for p in parts], form_axis),
        join([p.ub for p in parts], axis),
    )

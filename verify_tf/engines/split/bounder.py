"""Bounds of a batch of ``split`` cubes: the linear domain (``verify_tf.linear``) in one vectorised call where it
models the network, else exact intervals cube by cube (``verify_tf.bounds``), and what the driver derives from
them: the ``Bounds`` the property's ``decide_on_bounds`` reads, branching scores, and the cube's most promising
corners for the attack.

Branching scores: per (position, coordinate) the readout forms' coefficients on that coordinate's variable,
summed in absolute value over positions and sides (a coefficient over t ∈ [0, 1] is the slope times the
coordinate's width, so this is "linear coefficient × width"). Corners: for every readout position, the input that
maximises its upper form and the one that minimises its lower form (a grid coordinate at the end of its range that
the coefficient's sign points to; an alphabet position at its best allowed symbol): where the bound is loose these
are where the property most likely fails, and they are exact inputs, evaluated like any other.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ...bounds import Bounds, cube_bounds
from ...domain import GridDomain
from ...fingerprint import model_digest
from ...ir import AlphabetTokens, Model
from ...linear import CoordinateTable, LinearModel, refusal
from ...linear.backward import DEFAULT, READOUT_SLOPES, Slopes, refined_bound
from ...linear.optimise import choose
from ...spaces import InputSpace
from ..base import Task
from .cubes import SplitCube, bounds_cube, coordinate_sizes

# where per-element slopes (alpha-CROWN, ``linear.optimise``) are chosen: "none", "readout" (the readout's backward
# pass only) or "every stage" (every intermediate bound too). Measured (docs/performance.md, issue 43, Knuth's tree
# and the probes' CPU): at the readout d2's tree shrinks 29% for 75% more CPU, the 4-head tree 2% for 99% more (its
# proof would pass the issue's 300 s); at every stage d2's 41% for 8.3×: none pays in CPU per tree, so none.
OPTIMISED = "none"
_CACHE: dict[tuple[str, int], tuple[LinearModel, CoordinateTable]] = {}  # per process, by content


@dataclass
class CubeBounds:
    bounds: Bounds  # what the property's decide_on_bounds reads (the linear domain fills readout and output)
    scores: np.ndarray | None = None  # (n, coordinates): branching scores
    corners: np.ndarray | None = None  # (k, n): candidate token-index rows
    sides: np.ndarray | None = (
        None  # (2·positions, n, coordinates): per readout side (upper, then lower), |coefficient| × width
    )


class Bounder:
    """Bounds of the task's model (or another model a property compares with) over cubes of one space."""

    def __init__(
        self,
        task: Task,
        space: InputSpace,
        linear: bool = True,
        domain: str = "backward",
        variants: tuple[Slopes, ...] = (DEFAULT,),
        readout: tuple[Slopes, ...] | None = READOUT_SLOPES,
        optimised: str = OPTIMISED,
    ):
        self.task, self.space, self.linear, self.domain = task, space, linear, domain
        self.variants, self.readout = variants, readout
        if optimised not in ("none", "readout", "every stage"):
            raise ValueError(f"optimised: {optimised!r} is not none, readout or every stage")
        self.optimised = optimised
        self.values, self.coordinates = coordinate_sizes(space)
        self.domain_kind = "grid" if isinstance(space.domain, GridDomain) else "alphabet"

    def why_not_linear(self, model: Model | None = None) -> str | None:
        if not self.linear:
            return "intervals (the linear domain is switched off)"
        why = refusal(model or self.task.model, self.task.arithmetic)
        return None if why is None else f"intervals ({why})"

    def bound(self, cubes: list[SplitCube], model: Model | None = None) -> list[CubeBounds]:
        """Bounds of every cube (one input length)."""
        model = model or self.task.model
        if self.why_not_linear(model) is not None:
            return [CubeBounds(cube_bounds(model, self.task.arithmetic, bounds_cube(self.space, c))) for c in cubes]
        linear, table = self._linear(model, cubes[0].length)
        ranges = np.array([c.ranges for c in cubes], dtype=np.int64)  # (B, n, C, 2)
        inputs = table.inputs(ranges, model.dim)
        result = (
            linear.bound(inputs)
            if self.domain == "forward"
            else refined_bound(
                linear,
                inputs,
                self.variants,
                self.readout,
                None if self.optimised == "none" else choose,
                self.optimised == "every stage",
            )
        )
        return self._views(linear, result, ranges, model)

    def _linear(self, model: Model, length: int) -> tuple[LinearModel, CoordinateTable]:
        key = (f"{self.task.fingerprint}:{model_digest(model)}", length)
        if key not in _CACHE:
            if len(_CACHE) > 16:
                _CACHE.clear()
            linear = LinearModel(model, self.task.arithmetic, length)
            domain = self.space.domain
            if isinstance(domain, GridDomain):
                table = CoordinateTable.grid(domain.values, linear.scale)
            else:
                table = CoordinateTable.alphabet(model, tuple(domain.alphabet), linear.scale)
            _CACHE[key] = (linear, table)
        return _CACHE[key]

    def _views(self, linear: LinearModel, result: Any, ranges: np.ndarray, model: Model) -> list[CubeBounds]:
        one = linear.scale.one
        lo, hi = np.asarray(result.readout.lo), np.asarray(result.readout.hi)
        out_lo, out_hi = np.asarray(result.output.lo), np.asarray(result.output.hi)
        uc = np.asarray(result.readout.uc, dtype=np.float64)  # (B, P, V): floats only rank and choose
        lc = np.asarray(result.readout.lc, dtype=np.float64)
        batch, positions = lo.shape
        n, dim = linear.length, model.dim
        # branching scores per (user position, cube coordinate): an alphabet position sums its d variables
        sided = np.abs(np.concatenate([uc, lc], axis=1))  # (B, 2P, V)
        sides = np.zeros((batch, 2 * positions, n, self.coordinates))
        for k, variable in enumerate(result.variables):
            p, c = divmod(int(variable), dim)
            sides[:, :, p, c if self.coordinates == dim else 0] += sided[:, :, k]
        scores = sides.sum(axis=1)
        corners = self._corners(uc, -lc, result.variables, ranges, model)
        views = []
        for b in range(batch):
            readout = [(Fraction(int(lo[b, p]), one), Fraction(int(hi[b, p]), one)) for p in range(positions)]
            output = [
                tuple((Fraction(int(out_lo[b, p, c]), one), Fraction(int(out_hi[b, p, c]), one)) for c in range(dim))
                for p in range(positions)
            ]
            bounds = Bounds(None, [], [], output, readout)  # the linear domain fills readout and output only
            views.append(CubeBounds(bounds, scores[b], corners[b], sides[b]))
        return views

    def _corners(
        self,
        upper: np.ndarray,
        lower_negated: np.ndarray,
        variables: np.ndarray,
        ranges: np.ndarray,
        model: Model,
    ) -> np.ndarray:
        """(B, 2·positions, n) token-index rows: per readout position the maximiser of its upper form and the
        minimiser of its lower one (the maximiser of the negated lower form)."""
        batch, positions, _ = upper.shape
        n, dim = ranges.shape[1], model.dim
        directions = np.concatenate([upper, lower_negated], axis=1)  # (B, 2P, V)
        full = np.zeros((batch, 2 * positions, n * dim))
        full[:, :, variables] = directions
        full = full.reshape(batch, 2 * positions, n, dim)
        a, b = ranges[..., 0], ranges[..., 1]  # (B, n, C)
        if self.domain_kind == "grid":
            pick = np.where(full > 0, b[:, None], a[:, None])  # (B, 2P, n, d): the end the slope points to
            weights = self.values ** np.arange(dim - 1, -1, -1)
            picked: np.ndarray = (pick * weights).sum(axis=-1)
            return picked
        tokens, domain = model.tokens, self.space.domain
        assert isinstance(tokens, AlphabetTokens) and not isinstance(domain, GridDomain)
        table = np.array([[float(x) for x in tokens.embed(s)] for s in domain.alphabet])  # (A, d)
        gain = np.einsum("bknd,ad->bkna", full, table)  # value of each symbol per (cube, direction, position)
        symbols = np.arange(len(table))
        allowed = (symbols >= a[:, None, :, :1].reshape(batch, 1, n, 1)) & (
            symbols <= b[:, None, :, :1].reshape(batch, 1, n, 1)
        )
        best: np.ndarray = np.argmax(np.where(allowed, gain, -np.inf), axis=-1)
        return best


class BatchBounds:
    """A batch's bounds: the task's model bounded at once (``views``), another model on its first request."""

    def __init__(self, bounder: Bounder, cubes: list[SplitCube]):
        self.bounder, self.cubes = bounder, cubes
        self.views = bounder.bound(cubes)
        self._others: dict[int, tuple[Model, list[CubeBounds]]] = {}

    def of(self, index: int, model: Model | None = None) -> Bounds:
        if model is None or model is self.bounder.task.model:
            return self.views[index].bounds
        if id(model) not in self._others:
            self._others[id(model)] = (model, self.bounder.bound(self.cubes, model))
        return self._others[id(model)][1][index].bounds

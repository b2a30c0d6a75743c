"""Symbolic inputs: one bounded Int variable per grid coordinate or per alphabet position.

Grid token coordinate: an index variable ``idx ∈ [0, K-1]`` with value ``lo + idx·step`` (regular grids)
or an ite chain over the explicit values. Alphabet position: a symbol index into the domain's alphabet;
the embedding lookup happens in ``encoder.encode_embed`` (an ite chain, measured faster than arrays).
Any position can be fixed to a concrete token instead. ``decode`` turns solver values back into the
concrete tokens the interpreter replays; ``index_terms`` is the lexicographic order used by minimisation.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import z3

from ..domain import GridDomain, StringDomain
from ..ir import Token
from .values import Builder, Sym


@dataclass(frozen=True)
class SymToken:
    """A token as the encoder sees it: grid coordinates (``coords``) or an alphabet symbol."""

    coords: tuple[Sym, ...] | None = None
    symbol_index: z3.ArithRef | None = None  # alphabet position: index into ``alphabet``
    symbol: str | None = None  # alphabet position fixed to this symbol
    alphabet: tuple[str, ...] = ()


@dataclass
class SymbolicInput:
    tokens: tuple[SymToken, ...]  # the user's positions (BOS is added by encode_model, as in the interpreter)
    index_terms: list[z3.ArithRef] = field(default_factory=list)  # position-major, coordinate-minor
    decoders: list[Callable[[Callable[[z3.ArithRef], int]], Token]] = field(default_factory=list)

    @property
    def length(self) -> int:
        return len(self.tokens)

    def decode(self, value_of: Callable[[z3.ArithRef], int]) -> tuple[Token, ...]:
        """Concrete tokens from solver values (``value_of(var)`` gives an index variable's integer)."""
        return tuple(decoder(value_of) for decoder in self.decoders)

    def indices(self, value_of: Callable[[z3.ArithRef], int]) -> list[int]:
        return [value_of(t) for t in self.index_terms]


def _regular_step(values: Sequence[Fraction]) -> Fraction | None:
    if len(values) < 2:
        return Fraction(1)
    step = values[1] - values[0]
    return step if all(b - a == step for a, b in itertools.pairwise(values)) else None


def grid_coordinate(builder: Builder, values: Sequence[Fraction], name: str) -> tuple[Sym, z3.ArithRef]:
    """A symbolic coordinate ranging over ``values`` and its index variable."""
    idx = builder.fresh_int(name, 0, len(values) - 1)
    step = _regular_step(values)
    lo, hi = values[0], values[-1]
    if step is not None:
        den = math.lcm(lo.denominator, step.denominator)
        num = idx * int(step * den) + int(lo * den) if step != 0 else z3.IntVal(int(lo * den))
        return Sym(num, den, lo, hi), idx
    cases = [(idx == k, Sym.const(v)) for k, v in enumerate(values[:-1])]
    return builder.select(cases, Sym.const(values[-1])), idx


def grid_input(
    domain: GridDomain, builder: Builder, fixed: Mapping[int, Token] | None = None, name: str = "x"
) -> SymbolicInput:
    """Every length-n sequence of grid tokens (positions in ``fixed`` pinned to the given token)."""
    fixed = dict(fixed or {})
    values = list(domain.values)
    tokens: list[SymToken] = []
    index_terms: list[z3.ArithRef] = []
    decoders: list = []
    per_position: list[list[z3.ArithRef] | None] = []
    for i in range(domain.length):
        if i in fixed:
            token = tuple(Fraction(c) for c in fixed[i])
            tokens.append(SymToken(coords=tuple(Sym.const(c) for c in token)))
            decoders.append(lambda value_of, token=token: token)
            per_position.append(None)
            continue
        coords, idxs = [], []
        for c in range(domain.dim):
            sym, idx = grid_coordinate(builder, values, f"{name}[{i}][{c}]")
            coords.append(sym)
            idxs.append(idx)
        tokens.append(SymToken(coords=tuple(coords)))
        index_terms += idxs
        per_position.append(idxs)
        decoders.append(lambda value_of, idxs=idxs: tuple(values[value_of(v)] for v in idxs))
    if domain.distinct_tokens:
        _assert_distinct(builder, domain, fixed, per_position, values)
    return SymbolicInput(tuple(tokens), index_terms, decoders)


def _assert_distinct(
    builder: Builder, domain: GridDomain, fixed: Mapping[int, Token], per_position: list, values: list[Fraction]
) -> None:
    def index_vector(i: int) -> list:
        if per_position[i] is not None:
            return per_position[i]
        return [z3.IntVal(values.index(Fraction(c))) for c in fixed[i]]

    for i in range(domain.length):
        for j in range(i + 1, domain.length):
            a, b = index_vector(i), index_vector(j)
            builder.assertions.append(z3.Or([x != y for x, y in zip(a, b)]))


def string_input(
    alphabet: Sequence[str], length: int, builder: Builder, fixed: Mapping[int, str] | None = None, name: str = "s"
) -> SymbolicInput:
    """Every string of ``length`` symbols over ``alphabet`` (positions in ``fixed`` pinned)."""
    fixed = dict(fixed or {})
    alphabet = tuple(alphabet)
    tokens: list[SymToken] = []
    index_terms: list[z3.ArithRef] = []
    decoders: list = []
    for i in range(length):
        if i in fixed or len(alphabet) == 1:
            symbol = fixed.get(i, alphabet[0])
            tokens.append(SymToken(symbol=symbol, alphabet=alphabet))
            decoders.append(lambda value_of, symbol=symbol: symbol)
            continue
        idx = builder.fresh_int(f"{name}[{i}]", 0, len(alphabet) - 1)
        tokens.append(SymToken(symbol_index=idx, alphabet=alphabet))
        index_terms.append(idx)
        decoders.append(lambda value_of, idx=idx: alphabet[value_of(idx)])
    return SymbolicInput(tuple(tokens), index_terms, decoders)


def input_for_length(
    domain: GridDomain | StringDomain, length: int, builder: Builder, name: str = "x"
) -> SymbolicInput:
    """Every input of ``domain`` with this length (grid domains have one length)."""
    if isinstance(domain, GridDomain):
        return grid_input(domain, builder, name=name)
    return string_input(domain.alphabet, length, builder, name=name)


def permuted(inp: SymbolicInput, k: int) -> SymbolicInput:
    """The same symbolic input with positions k and k+1 exchanged (τ_k X): no new variables."""
    tokens = list(inp.tokens)
    tokens[k], tokens[k + 1] = tokens[k + 1], tokens[k]
    decoders = list(inp.decoders)
    decoders[k], decoders[k + 1] = decoders[k + 1], decoders[k]
    return SymbolicInput(tuple(tokens), inp.index_terms, decoders)

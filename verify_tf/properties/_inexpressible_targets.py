"""``inexpressible``'s target f: its option schema (``position-index`` or a table of target readouts per constant
input), the (constant input, targets) pairs it stands for over a domain, and ε*, the half-range that no
position-blind member can beat (Luo et al. 2022; ``properties.inexpressible``)."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from ..domain import Domain, GridDomain, StringDomain, format_input
from ..ir import Token
from ..numbers import NotANumber, fmt_vector, to_fraction
from ..schema.dsl import Either, Field, ListOf, Number, Obj, String
from ..schema.errors import OptionError

TOKEN = Either(
    [
        (lambda n: n.kind == "seq", ListOf(Number(), "a grid token: one number per coordinate")),
        (lambda n: n.kind == "scalar", String("an alphabet symbol, or a number for 1-dimensional grids")),
    ],
    what="a symbol, a number, or a list of numbers",
    description="the token x of the constant input",
)
ENTRY = Obj(
    {
        "token": Field(TOKEN, required=True),
        "outputs": Field(
            ListOf(Number(), "target readouts at positions 1..n (n = the input length)", min_length=1), required=True
        ),
    },
    "target readouts on the constant input (x, ..., x) of length len(outputs)",
)
TARGET = Either(
    [
        (lambda n: n.kind == "scalar", String("a built-in target", ("position-index",))),
        (
            lambda n: n.kind == "map",
            Obj({"table": Field(ListOf(ENTRY, min_length=1), required=True)}, "target readouts per constant input"),
        ),
    ],
    what="'position-index' or {table: [{token: ..., outputs: [...]}, ...]}",
    description="the target f: position-index (f(X)_i = i, positions 1..n) or a table",
)


def targets(domain: Domain, options: Any) -> list[tuple[tuple[Token, ...], list[Fraction]]]:
    """(constant input, target readouts) pairs: every constant input for position-index, else the table's."""
    if options.target == "position-index":
        return [(x, [Fraction(i + 1) for i in range(len(x))]) for x in domain.constant_inputs()]
    pairs, seen, members = [], set(), set(domain.constant_inputs())
    for index, (raw, outputs) in enumerate(options.target):
        key = f"target.table[{index}]"
        token = _token(domain, raw, key)
        n = len(outputs)
        if n not in domain.lengths:
            raise OptionError(
                f"{key}.outputs", f"{n} outputs, but the domain's lengths are {', '.join(map(str, domain.lengths))}"
            )
        tokens = (token,) * n
        if tokens not in members:
            raise OptionError(
                key, f"the constant input {format_input(tokens)} is not an input of the domain ({domain.describe()})"
            )
        if tokens in seen:
            raise OptionError(key, f"the constant input {format_input(tokens)} appears twice")
        seen.add(tokens)
        pairs.append((tokens, list(outputs)))
    return pairs


def _token(domain: Domain, raw: Any, key: str) -> Token:
    if isinstance(domain, StringDomain):
        if not isinstance(raw, str) or raw not in domain.alphabet:
            raise OptionError(
                f"{key}.token", f"token {raw!r} is not in the domain's alphabet {{{', '.join(domain.alphabet)}}}"
            )
        return raw
    assert isinstance(domain, GridDomain)
    try:
        values = tuple(to_fraction(v) for v in raw) if isinstance(raw, list) else (to_fraction(raw),)
    except NotANumber:
        raise OptionError(f"{key}.token", f"token {raw!r} is not a number") from None
    if values not in domain.tokens:
        raise OptionError(
            f"{key}.token", f"token {fmt_vector(values)} is not a token of the domain ({domain.describe()})"
        )
    return values


def epsilon_star(
    pairs: Sequence[tuple[tuple[Token, ...], list[Fraction]]],
) -> tuple[Fraction, tuple[Token, ...], list[Fraction]]:
    """(ε*, the witness input x*, its targets): the first constant input with the largest half-range."""
    best: tuple[Fraction, tuple[Token, ...], list[Fraction]] | None = None
    for tokens, values in pairs:
        gap = (max(values) - min(values)) / 2
        if best is None or gap > best[0]:
            best = (gap, tokens, values)
    assert best is not None  # fit: the domain has a constant input
    return best

"""A tabulated RASP program evaluated on many inputs at once (numpy), with the interpreter's semantics.

Every SOp's value is a code into its value list, so maps and selects are table lookups on integer arrays.
Numerical means are exact: numerators over the common denominator of the averaged node's values, summed in
int64 (the bound is checked first; beyond it the rows go through the exact interpreter), then looked up
per distinct (sum, count) pair with ``Fraction``s. ``tests/test_rasp.py`` checks it against the interpreter.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from fractions import Fraction

import numpy as np

from ..work import Deadline
from .interpreter import aggregate_code
from .program import RAISED, Node, RaspError, RaspProgram, canonical, is_number

INT64_SAFE = 1 << 62


def run_batched(program: RaspProgram, token_codes: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Codes (B, n) of every SOp for inputs given as codes into the vocabulary, and a (B,) mask of the rows on
    which the program is undefined (a function raised, a mean of non-numbers): those rows' codes are
    meaningless; ``interpreter.run`` on such a row raises ``RaspError`` with the reason."""
    rows = np.asarray(token_codes, dtype=np.int64)
    batch, n = rows.shape
    if n > program.max_length:
        raise RaspError(f"inputs of length {n} exceed the program's tabulated maximum length {program.max_length}")
    errors = np.zeros(batch, dtype=bool)
    codes: dict[str, np.ndarray] = {}
    selectors: dict[str, np.ndarray] = {}
    for node in program.nodes:
        args = [codes[i] if i in codes else selectors[i] for i in node.inputs]
        kind = node.kind
        if kind == "tokens":
            out = rows
        elif kind == "indices":
            out = np.broadcast_to(np.arange(n, dtype=np.int64), (batch, n))
        elif kind == "length":
            out = np.full((batch, n), n - 1, dtype=np.int64)
        elif kind == "full":
            out = np.zeros((batch, n), dtype=np.int64)
        elif kind == "map":
            out = np.asarray(node.table, dtype=np.int64)[args[0]]
        elif kind == "sequence_map":
            out = np.asarray(node.table, dtype=np.int64)[args[0], args[1]]
        elif kind == "selector_width":
            out = args[0].sum(axis=2).astype(np.int64)
        elif kind == "aggregate":
            out, bad = _aggregate(program, node, args[0], args[1])
            errors |= bad
        elif kind == "select":
            table = np.asarray(node.table, dtype=np.int8)
            chosen = table[args[0][:, None, :], args[1][:, :, None]]  # [batch, query, key]
            errors |= (chosen == RAISED).any(axis=(1, 2))
            selectors[node.label] = chosen == 1
            continue
        elif kind == "selector_not":
            selectors[node.label] = ~args[0]
            continue
        elif kind in ("selector_and", "selector_or"):
            selectors[node.label] = (args[0] & args[1]) if kind == "selector_and" else (args[0] | args[1])
            continue
        else:
            raise RaspError(f"node {node.label!r}: unknown kind {kind!r}")
        raised = out == RAISED
        if raised.any():
            errors |= raised.any(axis=1)
            out = np.where(raised, 0, out)
        codes[node.label] = out
    return codes, errors


def _aggregate(
    program: RaspProgram, node: Node, chosen: np.ndarray, source_codes: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    source = program.node(node.inputs[1])
    count = chosen.sum(axis=2)
    out = np.full(count.shape, node.default, dtype=np.int64)
    errors = np.zeros(count.shape[0], dtype=bool)
    # one selected: its own value, looked up in the aggregate's value list
    single_code = np.array(
        [node.code_of.get(canonical(v, node.numerical), RAISED) for v in source.values], dtype=np.int64
    )
    first = np.argmax(chosen, axis=2)
    ones = count == 1
    picked = single_code[np.take_along_axis(source_codes, first, axis=1)]
    out = np.where(ones, picked, out)
    errors |= (ones & (picked == RAISED)).any(axis=1)
    several = count >= 2
    if not several.any():
        return out, errors
    numeric = np.array([is_number(v) for v in source.values], dtype=bool)
    fractions = [Fraction(v) if is_number(v) else Fraction(0) for v in source.values]
    den = math.lcm(*(f.denominator for f in fractions))
    numerators = [int(f * den) for f in fractions]
    if max(abs(x) for x in numerators) * max(program.max_length, 1) >= INT64_SAFE:
        return _aggregate_slowly(node, source, chosen, source_codes, out, errors, several)
    selected_numeric = numeric[source_codes][:, None, :] | ~chosen
    errors |= (several & ~selected_numeric.all(axis=2)).any(axis=1)
    sums = (chosen * np.asarray(numerators, dtype=np.int64)[source_codes][:, None, :]).sum(axis=2)
    pairs, inverse = np.unique(np.stack([sums[several], count[several]]), axis=1, return_inverse=True)
    lookup = np.array(
        [node.code_of.get(canonical(Fraction(int(s), int(c) * den), node.numerical), RAISED) for s, c in pairs.T],
        dtype=np.int64,
    )
    means = lookup[np.asarray(inverse).reshape(-1)]
    errors |= np.bincount(np.nonzero(several)[0][means == RAISED], minlength=count.shape[0]).astype(bool)
    out[several] = means
    return out, errors


def _aggregate_slowly(
    node: Node,
    source: Node,
    chosen: np.ndarray,
    source_codes: np.ndarray,
    out: np.ndarray,
    errors: np.ndarray,
    several: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    for b, q in zip(*np.nonzero(several)):
        try:
            out[b, q] = aggregate_code(node, [source.values[c] for c, s in zip(source_codes[b], chosen[b, q]) if s])
        except RaspError:
            errors[b] = True
    return out, errors


def outputs_batched(program: RaspProgram, token_codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The output node's codes (B, n) and the rows on which the program is undefined."""
    codes, errors = run_batched(program, token_codes)
    return codes[program.output], errors


SCAN_LIMIT = 1 << 20  # inputs a definedness scan enumerates; longer lengths are left to the caller (a solver)


def least_undefined(
    program: RaspProgram,
    token_codes: Sequence[int],
    lengths: Iterable[int],
    chunk: int = 1 << 14,
    deadline: Deadline | None = None,
) -> tuple[tuple[int, ...] | None, list[int]]:
    """The shortlex-least input on which ``program`` is undefined (codes into the vocabulary, the alphabet in the
    order of ``token_codes``), scanning each length with at most SCAN_LIMIT inputs in order; and the lengths it
    did not scan because they hold more inputs than that (shortest first). With a ``deadline``, it is checked
    before every chunk (``DeadlineExpired``: ``rasp-equivalence``'s premise runs under the property's)."""
    codes = np.asarray(token_codes, dtype=np.int64)
    k = len(codes)
    skipped: list[int] = []
    for n in lengths:
        if n == 0:
            continue
        total = k**n
        if total > SCAN_LIMIT:
            skipped.append(n)
            continue
        weights = k ** np.arange(n - 1, -1, -1, dtype=np.int64)
        for start in range(0, total, chunk):
            if deadline is not None:
                deadline.check("searching for an input on which the RASP program is undefined")
            index = np.arange(start, min(start + chunk, total), dtype=np.int64)
            rows = codes[(index[:, None] // weights) % k]  # lexicographic order over the alphabet as given
            _, errors = run_batched(program, rows)
            if errors.any():
                return tuple(int(c) for c in rows[int(np.argmax(errors))]), skipped
    return None, skipped

"""Architecture-level position-blindness: induction over layers with every weight unknown (Luo et al. 2022).

The claim, for one sequence length n: for EVERY model of the architecture class (every choice of weights, RPE
biases, URPE tables) and every constant input (x, x, ..., x), all user positions carry the same column after
every layer, hence the same output. Luo et al.'s argument: on equal columns every attention row is a convex
combination of identical value vectors, and token-wise maps keep columns equal.

Induction: a base case (the embedding) and one step per sublayer ("if the user columns are equal before it,
they are equal after it"), plus the token-wise readout. Each step is one z3 query: hypothesis, negated
conclusion; ``unsat`` means the step holds for every weight choice. The class is read off the model's
architecture only (token kind, BOS, absolute PE, per head: scoring, causal mask, positional flavour and
table radius, residual flags); its weights are never looked at.

The encoding over-approximates the class, so ``unsat`` is a proof for the class:
  * token-wise maps (W_Q, W_K, W_V with their rounding, the output projection W_O + b_O, the feed-forward
    sublayer whatever its activation, the embedding table) are arbitrary functions of the column: a fresh variable
    per column plus functional consistency z_j = z_j' -> f(z_j) = f(z_j') (Ackermann's reduction of an
    uninterpreted function); a pre-LN LayerNorm is part of those maps, a post-LN or final one is a further
    token-wise map after a step, which keeps equal columns equal, so proofs hold with LayerNorm too (the
    solver-chosen members of ``concrete.py`` are not built for such models);
  * attention scores are an arbitrary function of (q_i, k_j, B[j-i]); attention rows an arbitrary function of
    the score row (per mask pattern), non-negative, zero on masked keys, and summing to exactly 1: true for
    hardmax and uniform (1/|set|) and for fixed-point softmax with ``exact-sums`` (E_j / sum_k E_k);
  * URPE multiplies a_ij by a free table C[clip(j-i)] (no renormalisation);
  * the head output is round(sum_j a'_ij v_j) and the residual saturate(z + o): the weighted sum is exact,
    round and saturate are uninterpreted functions in fixed arithmetic (any function keeps equal values
    equal) and the identity in exact arithmetic.
With ``per-probability`` rounding each weight is floored to f bits first, so a row sums to some value in
[1 - (k-1)·2^-f, 1] (k live keys): the "rows sum to 1" premise is false, the step query becomes satisfiable,
and no architecture-level proof is claimed (the model-level deviation ε is the meaningful number there).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import Any

import z3

from ...contract import STEP_FAILS, STEP_HOLDS, STEP_UNDECIDED, LayerInduction, StepResult
from ...ir import AlphabetTokens, AttentionLayer, Model
from ...semantics import Arithmetic, Fixed
from ...symbolic.solve import SAT, UNSAT, Session
from ...work import Deadline, never_cancelled

# Measured (2-core machine, z3 4.x/5.x): every step that holds is proved in < 1 s up to n = 16
# (RPE/causal/BOS, d = 4, two heads); beyond that the T^3 consistency constraints grow quickly.
MAX_LENGTH = 16

HOLDS, FAILS, UNDECIDED = STEP_HOLDS, STEP_FAILS, STEP_UNDECIDED


def bos_offset(model: Model) -> int:
    """1 when the model prepends a BOS token (stream position 0), else 0."""
    return 1 if isinstance(model.tokens, AlphabetTokens) and model.tokens.bos is not None else 0


class _Query:
    """One step query: columns, the hypothesis, helpers for token-wise maps, and the negated conclusion."""

    def __init__(self, model: Model, arithmetic: Arithmetic, length: int, tag: str):
        self.assertions: list[z3.BoolRef] = []  # solved in a ``Session`` (run_step), digested (query_digest)
        self.fixed = isinstance(arithmetic, Fixed)
        rounding = arithmetic.attention_rounding if isinstance(arithmetic, Fixed) else ""
        self.per_probability = rounding == "per-probability"
        self.rounded_terms = rounding == "rounded-terms"
        self.frac = arithmetic.frac if isinstance(arithmetic, Fixed) else 0
        self.bos = bos_offset(model)
        self.total = length + self.bos  # columns the network sees
        self.users = list(range(self.bos, self.total))  # the compared positions (BOS excluded)
        self.tag = tag
        real = z3.RealSort()
        self._round = z3.Function("round", real, real) if self.fixed else None
        self._saturate = z3.Function("saturate", real, real) if self.fixed else None

    def add(self, *assertions: Any) -> None:
        """Add assertions (lists of them too, as ``z3.Solver.add``)."""
        for a in assertions:
            if isinstance(a, (list, tuple)):
                self.assertions.extend(a)
            else:
                self.assertions.append(a)

    def round(self, x: z3.ArithRef) -> z3.ArithRef:
        return self._round(x) if self._round is not None else x

    def saturate(self, x: z3.ArithRef) -> z3.ArithRef:
        return self._saturate(x) if self._saturate is not None else x

    def columns(self, name: str, width: int) -> list[list[z3.ArithRef]]:
        return [[z3.Real(f"{name}[{j}][{c}]") for c in range(width)] for j in range(self.total)]

    def assume_equal_users(self, cols: Sequence[Sequence[z3.ArithRef]]) -> None:
        first = self.users[0]
        self.add([cols[j][c] == cols[first][c] for j in self.users[1:] for c in range(len(cols[first]))])

    def tokenwise(self, name: str, width: int, inputs: Sequence[Sequence[z3.ArithRef]]) -> list[list[z3.ArithRef]]:
        """f(column) for an arbitrary function f: fresh outputs plus functional consistency (Ackermann)."""
        out = self.columns(name, width)
        for j, k in itertools.combinations(range(self.total), 2):
            self.add(z3.Implies(_same(inputs[j], inputs[k]), _same(out[j], out[k])))
        return out

    def refute_equal_users(self, cols: Sequence[Sequence[z3.ArithRef]]) -> None:
        first = self.users[0]
        self.add(z3.Or([cols[j][c] != cols[first][c] for j in self.users[1:] for c in range(len(cols[first]))]))


def _same(a: Sequence[z3.ArithRef], b: Sequence[z3.ArithRef]) -> z3.BoolRef:
    return z3.And([x == y for x, y in zip(a, b)]) if len(a) else z3.BoolVal(True)


def _attention_step(query: _Query, layer: AttentionLayer, dim: int) -> None:
    z = query.columns("z", dim)
    query.assume_equal_users(z)
    total = query.total
    head_outputs: list[list[Any]] = [[] for _ in range(total)]
    for h, head in enumerate(layer.heads):
        q = query.tokenwise(f"q{h}", head.key_dim, z)
        query.tokenwise(f"k{h}", head.key_dim, z)  # the keys: constrained, not referred to again
        v = query.tokenwise(f"v{h}", head.value_dim, z)
        allowed = {i: [j for j in range(total) if not (head.causal and j > i)] for i in range(total)}
        # ALiBi's m·(j − i) is one RPE table among all (a free entry per offset: every slope, every distance)
        bias_radius = total - 1 if head.positional == "alibi" else head.rpe_bias.radius if head.rpe_bias else 0
        bias = {o: z3.Real(f"B{h}[{o}]") for o in range(-bias_radius, bias_radius + 1)}

        def bias_at(offset: int) -> z3.ArithRef:
            if head.positional not in ("rpe", "urpe", "alibi") or (
                head.rpe_bias is None and head.positional != "alibi"
            ):
                return z3.RealVal(0)
            return bias[max(-bias_radius, min(bias_radius, offset))]

        scores = {(i, j): z3.Real(f"s{h}[{i}][{j}]") for i in range(total) for j in allowed[i]}
        # the score is a function of (q_i, k_j, B[j-i]); RoPE rotates q_i and k_j by their absolute positions, and
        # its rounded rotations are no function of j − i: each score of a RoPE head is left free
        for j in range(total) if head.positional != "rope" else ():
            rows = [i for i in range(total) if j in allowed[i]]
            for i, i2 in itertools.combinations(rows, 2):
                query.add(
                    z3.Implies(
                        z3.And(_same(q[i], q[i2]), bias_at(j - i) == bias_at(j - i2)), scores[i, j] == scores[i2, j]
                    )
                )
        weights = {(i, j): z3.Real(f"a{h}[{i}][{j}]") for i in range(total) for j in allowed[i]}
        for i in range(total):
            live = allowed[i]
            query.add([weights[i, j] >= 0 for j in live])
            row_sum = z3.Sum([weights[i, j] for j in live])
            if query.per_probability:
                deficit = Fraction(len(live) - 1, 1 << query.frac)  # each floor loses < 2^-f; the sum is on the grid
                query.add(row_sum <= 1, row_sum >= z3.RealVal(1 - deficit))
            else:
                query.add(row_sum == 1)
        for i, i2 in itertools.combinations(range(total), 2):  # the row is a function of the score row
            if allowed[i] == allowed[i2]:
                query.add(
                    z3.Implies(
                        z3.And([scores[i, j] == scores[i2, j] for j in allowed[i]]),
                        z3.And([weights[i, j] == weights[i2, j] for j in allowed[i]]),
                    )
                )
        c_radius = head.urpe_c.radius if head.urpe_c is not None else 0
        c_table = {o: z3.Real(f"C{h}[{o}]") for o in range(-c_radius, c_radius + 1)}
        if query.rounded_terms and head.scoring == "softmax":
            # Yang et al.'s rounding floors each term e^s·v on its own: the output is no weighted average of the
            # values, only some function of the row (its scores; the values are the same columns for equal rows)
            outputs = [[z3.Real(f"r{h}[{i}][{c}]") for c in range(head.value_dim)] for i in range(total)]
            for i, i2 in itertools.combinations(range(total), 2):
                if allowed[i] == allowed[i2]:
                    query.add(
                        z3.Implies(
                            z3.And([scores[i, j] == scores[i2, j] for j in allowed[i]]), _same(outputs[i], outputs[i2])
                        )
                    )
            for i in range(total):
                head_outputs[i].extend(outputs[i])
            continue
        for i in range(total):
            for c in range(head.value_dim):
                terms = []
                for j in allowed[i]:
                    a = weights[i, j]
                    if head.positional == "urpe":
                        # Luo et al.: softmax ⊙ C, no renormalisation
                        a = a * c_table[max(-c_radius, min(c_radius, j - i))]
                    terms.append(a * v[j][c])
                head_outputs[i].append(query.round(z3.Sum(terms)))
    projected = query.tokenwise("o", dim, head_outputs)  # W_O, b_O and their rounding act per position
    after = [
        [query.saturate(z[i][c] + projected[i][c]) if layer.residual else projected[i][c] for c in range(dim)]
        for i in range(total)
    ]
    query.refute_equal_users(after)


def _feed_forward_step(query: _Query, residual: bool, dim: int) -> None:
    z = query.columns("z", dim)
    query.assume_equal_users(z)
    update = query.tokenwise("f", dim, z)
    after = [
        [query.saturate(z[i][c] + update[i][c]) if residual else update[i][c] for c in range(dim)]
        for i in range(query.total)
    ]
    query.refute_equal_users(after)


def _embedding_step(query: _Query, model: Model) -> None:
    dim = model.dim
    token = [z3.Real(f"e[{c}]") for c in range(dim)]  # the embedding of x (every user position holds x)
    bos = [z3.Real(f"bos[{c}]") for c in range(dim)]
    cols = [bos if j < query.bos else token for j in range(query.total)]
    if model.positional_encoding is not None:
        pe = query.columns("pe", dim)
        cols = [[query.saturate(cols[j][c] + pe[j][c]) for c in range(dim)] for j in range(query.total)]
    query.refute_equal_users(cols)


def _readout_step(query: _Query, dim: int) -> None:
    z = query.columns("z", dim)
    query.assume_equal_users(z)
    query.refute_equal_users(query.tokenwise("q", 1, z))


def _steps(model: Model) -> list[tuple[str, str, int | None]]:
    steps: list[tuple[str, str, int | None]] = [("embedding", "embedding", None)]
    for index, block in enumerate(model.blocks):
        if block.attention is not None:
            steps.append((f"layers[{index}].attention", "attention", index))
        if block.feed_forward is not None:
            steps.append((f"layers[{index}].feed-forward", "feed-forward", index))
    steps.append(("readout", "readout", None))
    return steps


def _failure_note(model: Model, sublayer: str, block: int | None, query: _Query) -> str:
    if sublayer == "embedding":
        return "absolute positional encoding: x + p_i differs across positions"
    layer = model.blocks[block].attention if sublayer == "attention" and block is not None else None
    if layer is None:
        return ""
    heads = layer.heads
    reasons = []
    if query.per_probability:
        reasons.append("per-probability rounding: rows need not sum to 1")
    if query.rounded_terms and any(h.scoring == "softmax" for h in heads):
        reasons.append("rounded-terms rounding: each term e^s·v is floored, so the output is no average of the values")
    if any(h.positional == "urpe" and h.urpe_c is not None and h.urpe_c.radius > 0 for h in heads):
        reasons.append("URPE: rows times C(j - i) need not sum to the same value")  # no [..]: rich markup
    if query.bos and any(h.causal or h.positional != "standard" for h in heads):
        reasons.append("BOS column differs and rows weigh it by position")
    return "; ".join(reasons)


def steps(model: Model) -> list[tuple[str, str, int | None]]:
    """The induction's steps for this architecture: (name, sublayer kind, block index)."""
    return _steps(model)


def _build(model: Model, arithmetic: Arithmetic, length: int, name: str, sublayer: str, block: int | None) -> _Query:
    query = _Query(model, arithmetic, length, name)
    if sublayer == "embedding":
        _embedding_step(query, model)
    elif sublayer == "attention":
        assert block is not None
        layer = model.blocks[block].attention
        assert layer is not None  # a step of a block's attention
        _attention_step(query, layer, model.dim)
    elif sublayer == "feed-forward":
        assert block is not None
        ff = model.blocks[block].feed_forward
        assert ff is not None  # a step of a block's feed-forward
        _feed_forward_step(query, ff.residual, model.dim)
    else:
        _readout_step(query, model.dim)
    return query


def run_step(
    model: Model,
    arithmetic: Arithmetic,
    length: int,
    name: str,
    sublayer: str,
    block: int | None,
    *,
    seconds: float,
    seed: int = 0,
    cancelled: Callable[[], bool] = never_cancelled,
) -> tuple[StepResult, str]:
    """One step query of the induction for sequences of ``length`` user tokens: its result and SMT-LIB text."""
    if length > MAX_LENGTH:
        raise ValueError(f"architecture-level queries are supported up to n = {MAX_LENGTH} (got {length})")
    if length < 2:
        return StepResult(name, sublayer, block, HOLDS, 0.0, "a single position is trivially blind"), ""
    if seconds <= 0:
        return StepResult(name, sublayer, block, UNDECIDED, 0.0, "not attempted: timeout"), ""
    session = Session(Deadline(seconds), seed=seed, cancelled=cancelled)  # building the query counts too
    query = _build(model, arithmetic, length, name, sublayer, block)
    session.add(*query.assertions)
    answer = session.check()
    if answer == UNSAT:
        status, note = HOLDS, ""
    elif answer == SAT:
        status, note = FAILS, _failure_note(model, sublayer, block, query)
    else:
        status, note = UNDECIDED, f"z3: {session.reason}"
    return StepResult(name, sublayer, block, status, session.statistics.seconds, note), session.smt2()


def query_digest(model: Model, arithmetic: Arithmetic, length: int, sublayer: str, block: int | None) -> str:
    """A digest of a step query's assertions as full terms (no solver-numbered shared subterms)."""
    query = _build(model, arithmetic, length, "", sublayer, block)
    text = "\n".join(a.sexpr() for a in query.assertions)
    return hashlib.sha256(text.encode()).hexdigest()


def deeper_layers_add_no_query(model: Model, arithmetic: Arithmetic, length: int) -> bool:
    """Whether every layer's step queries stay the same when the layer is copied one position deeper (appended
    after the last block): then an induction that proved each layer's steps proves any number of layers of
    these kinds, in any order, because a layer's steps do not depend on where it sits."""
    for index, block in enumerate(model.blocks):
        deeper = replace(model, blocks=model.blocks + (block,))
        for sublayer, present in (("attention", block.attention), ("feed-forward", block.feed_forward)):
            if present is not None and (
                query_digest(model, arithmetic, length, sublayer, index)
                != query_digest(deeper, arithmetic, length, sublayer, len(model.blocks))
            ):
                return False
    return True


def rows_sum_to_one(arithmetic: Arithmetic, model: Model | None = None) -> bool:
    """The induction's premise about attention rows: each head output is a convex combination of the values.
    False for per-probability rounding, and for Yang et al.'s rounded-terms rounding on softmax heads."""
    if not isinstance(arithmetic, Fixed):
        return True
    if arithmetic.attention_rounding == "per-probability":
        return False
    if arithmetic.attention_rounding == "rounded-terms":
        return model is None or not any(head.scoring == "softmax" for _, _, head in model.heads())
    return True


def prove_position_blind(
    model: Model,
    arithmetic: Arithmetic,
    length: int,
    timeout: float = 60.0,
    seed: int = 0,
    smt2_dir: str | None = None,
    label: str = "position-blind",
) -> LayerInduction:
    """Every step query of the induction for ``length`` user tokens, one after another in this process
    (each with the whole ``timeout``; the engine driver runs them as work units under one deadline)."""
    results = []
    for name, sublayer, block in steps(model):
        result, text = run_step(model, arithmetic, length, name, sublayer, block, seconds=timeout, seed=seed)
        if smt2_dir is not None and text:
            path = f"{smt2_dir}/{label}-n{length}-{name.replace('[', '').replace(']', '')}.smt2"
            with open(path, "w", encoding="utf-8") as out:
                out.write(text)
        results.append(result)
    return LayerInduction(length, tuple(results), rows_sum_to_one(arithmetic, model))

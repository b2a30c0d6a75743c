"""A causal model without positional information, run position by position as a counter machine.

**Why it is exact** (Yang, Cadilhac & Chiang's equivalence, read as an algorithm). With causal masks and no
term in the scores that depends on positions, position i of layer l reads the positions j ≤ i only through
the (key, value) pairs (k_j, v_j) of each head, and only through their *multiset*: every scoring normalises
over the allowed keys, symmetrically in them. A position's stream never changes once computed (causality),
so after a prefix the multiset of each head grows by one pair per position. Per head the machine keeps
exactly what the head's output at the next position depends on (its ``kind``):

* ``average``: uniform scoring, or scores equal for every key (q = 0, or k constant; softmax under
  ``rounded-terms`` only with scores exactly 0). Every key weighs w(n) (1/n; floored with per-probability),
  so the head reads the running sum S of its values: round(w(n)·S). Coordinates whose output can no longer
  change are frozen (``Frozen``), so that prefixes that differ only in them merge (argument below).
* ``weighted``: hardmax, or softmax under exact-sums or per-probability, with scores that depend on the key.
  Positions with the same key vector κ weigh the same, so the head reads per key class κ the count n_κ and
  the value sum S_κ. Hardmax: the classes of the top score among those present, round(Σ S_κ / Σ n_κ).
  Softmax (max-stabilised, docs/semantics.md): w_κ = E[(m − s_κ)·2^f] with m the top score present,
  round(Σ w_κ S_κ / Σ w_κ n_κ); per-probability floors each weight first: round(Σ ⌊w_κ/W⌋_f·S_κ).
* ``terms``: softmax under ``rounded-terms`` with scores that depend on the key. Each term round(e^s·v_j) is
  rounded on its own, so the head reads the count n_c of each distinct (key, value) class c:
  round(Σ n_c·round(e^{s_c}·v_c) / Σ n_c·round(e^{s_c})), the uniform average of the present values when the
  denominator is 0.

Everything else at a position (LayerNorm, the output projection, residuals, feed-forwards with ReLU or i-GELU,
the readout) is a function of that position's stream alone; it is computed by the reference interpreter's own
per-position functions (``semantics/interpreter.py``) and memoised by stream vector, so the two cannot drift.
The head outputs above are the interpreter's formulas regrouped by class; the differential tests compare every
readout with the interpreter's, bit for bit.

**Positions** (docs/counting.md, "Positions"). Three kinds of relative positions are kept exactly:

* ``window``: RPE, whose table clips beyond its radius, and ALiBi in fixed precision, whose scores are floored
  and saturated so that beyond a horizon every key scores the grid's minimum (``applies.window``). A key at
  distance m ≤ R weighs by its own score round(q·k + B[−m]), every farther one as at distance R + 1, so the head
  keeps the (key, value) classes of the last R positions (most recent first) and per class the count of the
  farther ones ("far counts"); its output is the interpreter's hardmax or softmax over those groups.
* RoPE whose angles are rational numbers of turns: the rotation table repeats with period M (``rope_period``),
  so a position's rotated query and key depend on its stream and its stream position modulo M (the *phase*,
  which every state of one length shares): the head is ``weighted`` / ``terms`` over rotated keys.
* an absolute positional encoding depends only on the prefix length, which every state of one exploration level
  shares: the bounded exploration handles it (the embedding of the new position is e(σ) + P_n), while the
  induction over every length refuses it (the table ends).

URPE, RoPE at irrational angles, non-causal heads are refused (``NotApplicable``, with the reason).

**Freezing (exact)**, ``average`` heads: with weights 1/n and mantissa sum M, if every value the coordinate can
take at a word position lies in [c, c + 1] (mantissas; ``increments``) and c·n ≤ M < (c + 1)·n now, then
c·n' ≤ M' < (c + 1)·n' at every later n': the output stays sat(c) forever. With per-probability a weight
⌊1/n⌋_f = 0 stays 0 for every larger n: the output is round(0) forever.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ...ir import AlphabetTokens, AttentionLayer, Head, Model, Vector
from ...semantics.arithmetic import Arithmetic, Fixed
from ...semantics.exp_table import exp_mantissa
from ...semantics.interpreter import (
    BlockTrace,
    _Counter,
    affine,
    embed_position,
    feed_forward,
    layer_norm,
    project_heads,
    readout as interpreter_readout,
    residual,
    rotate,
)
from .applies import AVERAGE, TERMS, WEIGHTED, WINDOW, closed_form_weight, head_kind, refusal, rope_period, window

ASKED_KEYS = 64  # up to this many keys the arithmetic itself computes an average head's weight


class NotApplicable(Exception):
    """The model is not a counter machine over classes of positions (the reason is the message)."""


@dataclass(frozen=True)
class Frozen:
    """An ``average`` head coordinate whose output (stored units) is ``output`` at this and every later
    position."""

    output: Any


@dataclass(frozen=True)
class Slot:
    """One head of the model and how the machine keeps its prefix (``kind``)."""

    layer: int  # block index
    index: int  # head index in the block
    head: Head
    kind: str

    def __str__(self) -> str:
        return f"layers[{self.layer}].heads[{self.index}]"


@dataclass(frozen=True)
class Observation:
    """What the model shows at a position: its readout and its final stream vector."""

    readout: Fraction
    stream: Vector


State = tuple[Any, ...]  # one entry per slot (see ``CounterModel.step``)
Path = tuple[Any, ...]  # (letter, the stream entering each attention block): one position's computation, concretely


class CounterModel:
    """``model`` in ``arith`` as a machine over prefixes' class counts (module docstring).

    ``step(state, positions, letter)`` is one more position; ``positions`` counts the stream positions before
    it (BOS included). A state holds, per slot: ``average``: the value sums per coordinate (stored units: integer
    mantissas in fixed arithmetic, Fractions in exact arithmetic) or ``Frozen``; ``weighted``: per key class id
    None (absent) or (n, S_0, ..., S_{v-1}); ``terms``: per class id its count; ``window``: (the (key, value) class
    ids of the last R positions, most recent first; per class id the count of the farther positions). Trailing
    absent classes are left out, so equal prefixes' states are equal tuples whatever classes other prefixes
    discovered.
    """

    def __init__(self, model: Model, arith: Arithmetic) -> None:
        reason = refusal(model, arith)
        if reason is not None:
            raise NotApplicable(reason)
        self.model, self.arith = model, arith
        tokens = model.tokens
        assert isinstance(tokens, AlphabetTokens)
        self.bos = tokens.bos
        self.fixed = isinstance(arith, Fixed)
        self.unit = arith.scale if isinstance(arith, Fixed) else 1  # stored units per value
        self.slots: tuple[Slot, ...] = tuple(
            Slot(layer, h, head, head_kind(head, arith)) for layer, h, head in model.heads()
        )
        self.by_layer: dict[int, list[int]] = {}
        for k, slot in enumerate(self.slots):
            self.by_layer.setdefault(slot.layer, []).append(k)
        # window slots: R; RoPE: the period of the positions (the lcm of every rotating head's table)
        self.reach: dict[int, int] = {k: window(s.head, arith) for k, s in enumerate(self.slots) if s.kind == WINDOW}
        self.period = 1
        for slot in self.slots:
            if slot.kind != AVERAGE and slot.head.positional == "rope":
                self.period = math.lcm(self.period, rope_period(slot.head) or 1)
        self._window_scores: dict[tuple[int, int], list[tuple[Any, ...]]] = {}
        # classes discovered so far: weighted: key vector -> id; terms: (key, value) -> id
        self.class_ids: list[dict[Any, int]] = [{} for _ in self.slots]
        self.classes: list[list[Any]] = [[] for _ in self.slots]
        # streams and queries are interned as integers: the memo tables below are keyed by them, not by vectors
        # of Fractions (hashing those dominated the exploration's time). A vector's canonical key is its tuple of
        # mantissas in fixed arithmetic (the vector itself in exact arithmetic); the Fractions are made on demand.
        self._ids: dict[tuple[Any, ...], int] = {}
        self._keys: list[tuple[Any, ...]] = []
        self._vectors: list[Vector | None] = []
        self.integers = _Integers.of(model, arith)  # fixed arithmetic: the affine maps on mantissas
        self.streams: dict[int, set[int]] = {}  # block index -> ids of the streams seen entering its attention
        # (letter, ids of the streams entering each block, phase)
        self.paths: set[tuple[str, tuple[int, ...], int]] = set()
        self._reads: dict[
            tuple[int, int, int], list[tuple[int, int, tuple[Any, ...]]]
        ] = {}  # (block, z, phase) -> (q id, class, value)
        # (block, z, phase) -> (q, k, v)
        self._heads: dict[tuple[int, int, int], list[tuple[Vector, Vector, Vector]]] = {}
        self._after_attention: dict[tuple[int, int, tuple[Any, ...]], int] = {}
        self._after_feed_forward: dict[tuple[int, int], int] = {}
        self._observations: dict[int, Observation] = {}
        self._weights: dict[tuple[str, int], Fraction] = {}
        self._scores: dict[tuple[int, int], list[Fraction]] = {}  # (slot, query id) -> score per class id
        self._terms: dict[tuple[Fraction, Fraction], Fraction] = {}
        self._score_mantissas: dict[tuple[int, int], list[int]] = {}
        self._exps: dict[int, int] = {}
        self.r = _Counter(arith)
        for scoring in {s.head.scoring for s in self.slots if s.kind == AVERAGE}:
            if any(self.weight(scoring, n) != closed_form_weight(arith, n) for n in range(1, ASKED_KEYS + 1)):
                raise NotApplicable(f"{scoring} weights of equal scores are not 1/n in {arith.describe()}")

    @staticmethod
    def of(model: Model, arith: Arithmetic) -> CounterModel:
        return CounterModel(model, arith)

    def embedding(self, letter: str) -> Vector:
        """The letter's token vector (without a positional encoding)."""
        tokens = self.model.tokens
        assert isinstance(tokens, AlphabetTokens)
        return tokens.embed(letter)

    @property
    def length_dependent(self) -> bool:
        """True when a position's computation depends on the prefix length beyond the counts (absolute PE, or
        the phase of a periodic RoPE table)."""
        return self.model.positional_encoding is not None or self.period > 1

    def phase(self, positions: int) -> int:
        """The phase of stream position ``positions``: its residue modulo the RoPE tables' period."""
        return positions % self.period

    def kinds(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for slot in self.slots:
            found[slot.kind] = found.get(slot.kind, 0) + 1
        return found

    # ---------------------------------------------------------------- the machine

    def empty(self) -> State:
        return tuple(
            tuple(0 if self.fixed else Fraction(0) for _ in range(slot.head.value_dim)) if slot.kind == AVERAGE else ()
            for slot in self.slots
        )

    def start(self) -> tuple[State, int, Observation | None, Path | None]:
        """(state, stream positions, observation at BOS, BOS's path) before the first letter."""
        if self.bos is None:
            return self.empty(), 0, None, None
        state, observation, path = self.step(self.empty(), 0, self.bos)
        return state, 1, observation, path

    def step(
        self,
        state: State,
        positions: int,
        letter: str,
        increments: Sequence[Sequence[Any] | None] | None = None,
        trace: list[tuple[int, int, tuple[Any, ...]]] | None = None,
    ) -> tuple[State, Observation, Path]:
        """The state, observation and path after one more position holding ``letter``.

        ``increments``: per slot, for ``average`` slots per coordinate the mantissa range of its value at word
        positions (or None), which enables freezing; nothing else depends on it. ``trace``: a list that receives,
        per attention block, (block index, id of the stream entering it, the heads' outputs in stored units):
        what extraction (``verify_tf.extraction.observe``) reads; nothing depends on it.
        """
        z = self._intern(embed_position(self.model, letter, positions, self.r))  # (memoised below the step)
        phase = self.phase(positions)
        new = list(state)
        entering: list[int] = []
        for block_index, block in enumerate(self.model.blocks):
            layer = block.attention
            if layer is not None:
                entering.append(z)
                self.streams.setdefault(block_index, set()).add(z)
                outputs = []
                for k, read in zip(self.by_layer[block_index], self._read(block_index, layer, z, phase)):
                    bounds = increments[k] if increments is not None else None
                    new[k], out = self.head_step(k, new[k], positions + 1, read, bounds)
                    outputs.append(out)
                if trace is not None:
                    trace.append((block_index, z, tuple(outputs)))
                z = self.after_attention(block_index, layer, z, tuple(outputs))
            if block.feed_forward is not None:
                z = self.after_feed_forward(block_index, z)
        route = (letter, tuple(entering), phase)
        self.paths.add(route)
        return tuple(new), self.observe(z), (letter, tuple(self.stream(i) for i in entering))

    def key_of(self, vector: Vector) -> tuple[Any, ...]:
        """A vector's canonical key: its mantissas in fixed arithmetic, itself in exact arithmetic."""
        if self.integers is None:
            return vector
        scale = self.unit
        # a token vector off the grid (possible without a positional encoding, through the API) keeps its exact
        # rational mantissa; the integer path computes with it exactly (floor division of rationals)
        return tuple(m.numerator if m.denominator == 1 else m for m in (x * scale for x in vector))

    def _intern(self, vector: Vector) -> int:
        found = self._intern_key(self.key_of(vector))
        if self._vectors[found] is None:
            self._vectors[found] = vector
        return found

    def _intern_key(self, key: tuple[Any, ...]) -> int:
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = len(self._keys)
            self._keys.append(key)
            self._vectors.append(None if self.integers is not None else key)
        return found

    def stream(self, z: int) -> Vector:
        """The vector interned as ``z``."""
        vector = self._vectors[z]
        if vector is None:
            vector = self._vectors[z] = tuple(Fraction(m, self.unit) for m in self._keys[z])
        return vector

    def seen_paths(self) -> list[Path]:
        """Every position's computation met so far: (letter, the streams entering each attention block, phase)."""
        return [(letter, tuple(self.stream(z) for z in entering), phase) for letter, entering, phase in self.paths]

    def streams_entering(self, block_index: int) -> list[Vector]:
        return [self.stream(z) for z in self.streams.get(block_index, ())]

    def head_vectors(
        self, block_index: int, layer: AttentionLayer, z: Vector | int, phase: int = 0
    ) -> list[tuple[Vector, Vector, Vector]]:
        """(q, k, v) of every head of the block at a position whose stream is ``z`` and whose stream position
        is ``phase`` modulo the period (RoPE: q and k rotated there; memoised)."""
        zid = z if isinstance(z, int) else self._intern(z)
        memo = (block_index, zid, phase)
        found = self._heads.get(memo)
        if found is None:
            r = self.r
            vector = self.stream(zid)
            read = layer_norm(layer.norm, [vector], r)[0] if layer.norm is not None and layer.norm_first else vector
            found = []
            for head in layer.heads:
                average = head.scoring == "uniform"
                q = () if average else affine(head.query, read, head.query_bias, r)
                k = () if average else affine(head.key, read, head.key_bias, r)
                if head.positional == "rope" and head.rope is not None and not average:
                    q, k = rotate(head, q, phase, r), rotate(head, k, phase, r)
                found.append((q, k, affine(head.value, read, head.value_bias, r)))
            self._heads[memo] = found
        return found

    def _read(
        self, block_index: int, layer: AttentionLayer, z: int, phase: int = 0
    ) -> list[tuple[int, int, tuple[Any, ...]]]:
        """Per head of the block: (its query's id, its class id (-1 for ``average`` heads), its value in stored
        units), memoised by stream and phase."""
        memo = (block_index, z, phase)
        found = self._reads.get(memo)
        if found is None:
            found = []
            vectors = self.head_vectors(block_index, layer, z, phase)
            for k, (q, key, value) in zip(self.by_layer[block_index], vectors):
                kind = self.slots[k].kind
                cls = -1 if kind == AVERAGE else self.class_id(k, key if kind == WEIGHTED else (key, value))
                stored = tuple(int(v * self.unit) if self.fixed else v for v in value)
                found.append((self._intern(q), cls, stored))
            self._reads[memo] = found
        return found

    def _outputs(self, outputs: tuple[Any, ...]) -> tuple[Vector, ...]:
        """Head outputs as values (they are kept in stored units: mantissas in fixed arithmetic)."""
        if not self.fixed:
            return outputs
        return tuple(tuple(Fraction(m, self.unit) for m in out) for out in outputs)

    def after_attention(self, block_index: int, layer: AttentionLayer, z: int, outputs: tuple[Any, ...]) -> int:
        memo = (block_index, z, outputs)
        found = self._after_attention.get(memo)
        if found is None:
            integers = self.integers
            if integers is not None and block_index in integers.attention:
                found = self._intern_key(integers.after_attention(block_index, self._keys[z], outputs))
            else:
                r = self.r
                vector = self.stream(z)
                after = residual([vector], [project_heads(layer, self._outputs(outputs), r)], layer.residual, r)[0]
                if layer.norm is not None and not layer.norm_first:
                    after = layer_norm(layer.norm, [after], r)[0]
                found = self._intern(after)
            self._after_attention[memo] = found
        return found

    def after_feed_forward(self, block_index: int, z: int) -> int:
        memo = (block_index, z)
        found = self._after_feed_forward.get(memo)
        if found is None:
            integers = self.integers
            if integers is not None and block_index in integers.feed_forward:
                found = self._intern_key(integers.after_feed_forward(block_index, self._keys[z]))
            else:
                ff = self.model.blocks[block_index].feed_forward
                assert ff is not None
                found = self._intern(feed_forward(ff, [self.stream(z)], self.r, BlockTrace())[0])
            self._after_feed_forward[memo] = found
        return found

    def observe(self, z: int) -> Observation:
        found = self._observations.get(z)
        if found is None:
            vector = self.stream(z)
            final = vector if self.model.final_norm is None else layer_norm(self.model.final_norm, [vector], self.r)[0]
            found = Observation(interpreter_readout(self.model, [final])[0], final)
            self._observations[z] = found
        return found

    # ---------------------------------------------------------------- one head

    def class_id(self, k: int, cls: Any) -> int:
        """The id of a ``weighted`` slot's key vector, or of a ``terms`` slot's (key, value) pair."""
        ids = self.class_ids[k]
        canonical = self.key_of(cls) if self.slots[k].kind == WEIGHTED else tuple(self.key_of(v) for v in cls)
        found = ids.get(canonical)
        if found is None:
            found = ids[canonical] = len(self.classes[k])
            self.classes[k].append(cls)
        return found

    def head_step(
        self, k: int, kept: Any, keys: int, read: tuple[int, int, tuple[Any, ...]], bounds: Sequence[Any] | None
    ) -> tuple[Any, tuple[Any, ...]]:
        """(the slot's new entry, the head's output in stored units) at a position with this ``read`` (query id,
        class id, value), ``keys`` positions (this one included)."""
        slot = self.slots[k]
        q, c, stored = read
        if slot.kind == AVERAGE:
            return self.average_step(slot, kept, keys, stored, bounds)
        if slot.kind == WEIGHTED:
            entries = list(kept) + [None] * (c + 1 - len(kept))
            old = entries[c]
            entries[c] = (1, *stored) if old is None else (old[0] + 1, *(a + b for a, b in zip(old[1:], stored)))
            return tuple(entries), self.weighted_output(k, q, entries)
        if slot.kind == WINDOW:
            return self.window_step(k, kept, q, c)
        counts = list(kept) + [0] * (c + 1 - len(kept))
        counts[c] += 1
        return tuple(counts), self.terms_output(k, q, counts)

    def window_step(self, k: int, kept: Any, q: int, c: int) -> tuple[Any, tuple[Any, ...]]:
        """A ``window`` head: the output over the current key (distance 0), the last R keys and the far counts;
        then the current key enters the window and the one at distance R leaves it into the far counts."""
        recent, far = kept if kept else ((), ())
        reach = self.reach[k]
        scores = self.window_scores(k, q)
        groups: list[tuple[Any, int, int]] = [(scores[c][0], 1, c)]  # (score, count, class)
        groups += [(scores[cls][m], 1, cls) for m, cls in enumerate(recent, start=1)]
        groups += [(scores[cls][reach + 1], n, cls) for cls, n in enumerate(far) if n]
        present = []
        for score, n, cls in groups:
            value = self.classes[k][cls][1]
            stored = tuple(int(v * self.unit) if self.fixed else v for v in value)
            present.append((score, (n, *(n * x for x in stored))))
        output = self.grouped_output(k, present)
        moved = (c, *recent)
        if len(moved) > reach:
            leaving, moved = moved[-1], moved[:-1]
            counts = list(far) + [0] * (leaving + 1 - len(far))
            counts[leaving] += 1
            far = tuple(counts)
        return (moved, far), output

    def window_scores(self, k: int, q: int) -> list[tuple[Any, ...]]:
        """Per (key, value) class of a ``window`` slot: its score at distances 0 .. R + 1 (mantissas in fixed
        arithmetic): round(q·k + bias(−m)), as the interpreter scores it."""
        memo = (k, q)
        found = self._window_scores.get(memo)
        classes = self.classes[k]
        if found is None or len(found) < len(classes):
            found = found or []
            head, query = self.slots[k].head, self.stream(q)
            for key, _ in classes[len(found) :]:
                dot = sum((a * b for a, b in zip(query, key)), Fraction(0))
                row = [self.r.round(dot + head.relative_bias(-m)) for m in range(self.reach[k] + 2)]
                found.append(tuple(self.arith.mantissa(x) if isinstance(self.arith, Fixed) else x for x in row))
            self._window_scores[memo] = found
        return found

    def weight(self, scoring: str, keys: int) -> Fraction:
        """The weight of each of ``keys`` keys with equal scores, as the arithmetic normalises them (asking the
        arithmetic costs O(keys); beyond ``ASKED_KEYS`` the closed form, checked against it up to there)."""
        if keys > ASKED_KEYS:
            return closed_form_weight(self.arith, keys)
        memo = (scoring, keys)
        if memo not in self._weights:
            self._weights[memo] = self.arith.attention_weights([Fraction(0)] * keys, scoring)[0]
        return self._weights[memo]

    def average_step(
        self, slot: Slot, sums: tuple[Any, ...], keys: int, stored: tuple[Any, ...], bounds: Sequence[Any] | None
    ) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        weight = self.weight(slot.head.scoring, keys)
        new, out = [], []
        for c, total in enumerate(sums):
            if isinstance(total, Frozen):
                new.append(total)
                out.append(total.output)
                continue
            total = total + stored[c]
            if self.fixed:
                arith = self.arith
                assert isinstance(arith, Fixed)
                y = (weight.numerator * total) // weight.denominator  # ⌊2^f·w·S/2^f⌋ on mantissas
                y = min(max(y, arith.min_mantissa), arith.max_mantissa)
                out.append(y)
                frozen = self.frozen(total, y, weight, keys, None if bounds is None else bounds[c])
                new.append(Frozen(y) if frozen else total)
            else:
                out.append(self.r.round(weight * total))
                new.append(total)
        return tuple(new), tuple(out)

    def frozen(self, mantissa: int, output: int, weight: Fraction, keys: int, increments: Any) -> bool:
        """Whether an ``average`` coordinate with mantissa sum ``mantissa`` over ``keys`` keys outputs ``output``
        forever (module docstring)."""
        if weight == 0:  # per-probability: floor_f(1/n) = 0 stays 0 for every larger n
            return True
        if increments is None or not isinstance(self.arith, Fixed) or weight * keys != 1:
            return False
        if self.arith.attention_rounding == "per-probability":
            return False
        lo, hi = increments
        c = mantissa // keys
        return bool(lo >= c and hi <= c + 1)

    def scores(self, k: int, q: Vector | int) -> list[Fraction]:
        """The score of query ``q`` (a vector or its id) against every class of slot k, as the interpreter computes
        it: rounded, except under rounded-terms (exact scores)."""
        qid = q if isinstance(q, int) else self._intern(q)
        query = self.stream(qid)
        memo = (k, qid)
        found = self._scores.get(memo)
        classes = self.classes[k]
        if found is None or len(found) < len(classes):
            found = found or []
            slot = self.slots[k]
            exact = slot.kind == TERMS
            for cls in classes[len(found) :]:
                key = cls[0] if exact else cls
                dot = sum((a * b for a, b in zip(query, key)), Fraction(0))
                found.append(dot if exact else self.r.round(dot))
            self._scores[memo] = found
        return found

    def weighted_output(self, k: int, q: int, entries: Sequence[Any]) -> tuple[Any, ...]:
        slot, arith = self.slots[k], self.arith
        width = slot.head.value_dim
        if not isinstance(arith, Fixed):  # exact arithmetic: hardmax (softmax was refused)
            scores = self.scores(k, q)
            present = [(scores[c], entry) for c, entry in enumerate(entries) if entry is not None]
            top = max(s for s, _ in present)
            chosen = [entry for s, entry in present if s == top]
            count = sum(entry[0] for entry in chosen)
            return tuple(sum(entry[1 + c] for entry in chosen) / count for c in range(width))
        mantissas = self.score_mantissas(k, q)
        return self.grouped_output(k, [(mantissas[c], entry) for c, entry in enumerate(entries) if entry is not None])

    def grouped_output(self, k: int, present_m: Sequence[tuple[Any, Any]]) -> tuple[Any, ...]:
        """Hardmax or softmax (exact-sums, per-probability) over groups of keys (score mantissa, (n, S_0, ...)):
        every key of a group has that score, and S sums their values (stored units)."""
        slot, arith = self.slots[k], self.arith
        width = slot.head.value_dim
        if not isinstance(arith, Fixed):  # exact arithmetic: hardmax (softmax was refused)
            top = max(s for s, _ in present_m)
            chosen = [entry for s, entry in present_m if s == top]
            count = sum(entry[0] for entry in chosen)
            return tuple(sum(entry[1 + c] for entry in chosen) / count for c in range(width))
        top_m = max(m for m, _ in present_m)
        if slot.head.scoring == "hardmax":
            chosen = [entry for m, entry in present_m if m == top_m]
            count = sum(entry[0] for entry in chosen)
            sums = [sum(entry[1 + c] for entry in chosen) for c in range(width)]
            if arith.attention_rounding == "per-probability":
                p = arith.scale // count  # ⌊1/count⌋_f, as a mantissa
                return tuple(self._saturated((p * s) // arith.scale) for s in sums)
            return tuple(self._saturated(s // count) for s in sums)
        weights = [(self._exp(top_m - m), entry) for m, entry in present_m]
        total = sum(w * entry[0] for w, entry in weights)
        if arith.attention_rounding == "per-probability":
            floored = [((w * arith.scale) // total, entry) for w, entry in weights]  # ⌊w/W⌋_f as mantissas
            return tuple(
                self._saturated(sum(p * entry[1 + c] for p, entry in floored) // arith.scale) for c in range(width)
            )
        return tuple(self._saturated(sum(w * entry[1 + c] for w, entry in weights) // total) for c in range(width))

    def score_mantissas(self, k: int, q: int) -> list[int]:
        """``scores`` as mantissas (rounded scores are on the grid)."""
        arith = self.arith
        assert isinstance(arith, Fixed)
        memo = (k, q)
        found = self._score_mantissas.get(memo)
        if found is None or len(found) < len(self.classes[k]):
            found = self._score_mantissas[memo] = [arith.mantissa(s) for s in self.scores(k, q)]
        return found

    def _exp(self, t: int) -> int:
        """E[t] = ⌊exp(−t·2^-f)·2^f⌋, the softmax weight of a score t mantissas below the top (exp_table)."""
        found = self._exps.get(t)
        if found is None:
            arith = self.arith
            assert isinstance(arith, Fixed)
            found = self._exps[t] = exp_mantissa(t, arith.frac)
        return found

    def _saturated(self, mantissa: int) -> int:
        arith = self.arith
        assert isinstance(arith, Fixed)
        return min(max(mantissa, arith.min_mantissa), arith.max_mantissa)

    def rounded_term(self, s: Fraction, x: Fraction) -> Fraction:
        memo = (s, x)
        found = self._terms.get(memo)
        if found is None:
            arith = self.arith
            assert isinstance(arith, Fixed)
            found = self._terms[memo] = arith.rounded_term(s, x)
        return found

    def terms_output(self, k: int, q: int, counts: Sequence[int]) -> tuple[Any, ...]:
        arith = self.arith
        assert isinstance(arith, Fixed)
        scores = self.scores(k, q)
        present = [(scores[c], self.classes[k][c][1], n) for c, n in enumerate(counts) if n]
        width = self.slots[k].head.value_dim
        total = sum((n * self.rounded_term(s, Fraction(1)) for s, _, n in present), Fraction(0))
        if total == 0:  # every e^s below 2^-f: the uniform average
            count = sum(n for _, _, n in present)
            values = [sum((n * v[c] for _, v, n in present), Fraction(0)) / count for c in range(width)]
        else:
            values = [
                sum((n * self.rounded_term(s, v[c]) for s, v, n in present), Fraction(0)) / total for c in range(width)
            ]
        return tuple(arith.mantissa(arith.round(x)) for x in values)

    # ---------------------------------------------------------------- statistics

    def class_counts(self) -> dict[str, int]:
        """Per head: the classes its prefixes are counted in (``average`` heads: none, a running sum)."""
        return {str(slot): len(self.classes[k]) for k, slot in enumerate(self.slots) if slot.kind != AVERAGE}

    def stream_counts(self) -> dict[str, int]:
        """Per attention layer: the distinct streams that entered it (the position classes of that layer)."""
        return {f"layers[{b}]": len(seen) for b, seen in sorted(self.streams.items())}

    def largest(self, state: State) -> int:
        """The largest class count of a state (``weighted``, ``terms`` and ``window`` slots; 0 when none)."""
        best = 0
        for slot, entry in zip(self.slots, state):
            if slot.kind == WEIGHTED:
                best = max([best, *(item[0] for item in entry if item is not None)])
            elif slot.kind == TERMS:
                best = max([best, *entry])
            elif slot.kind == WINDOW and entry:
                best = max([best, *entry[1]])
        return best


_Row = tuple[tuple[tuple[int, int], ...], int, int]  # (sparse integer coefficients, constant, divisor)


def _integer_rows(weights: Sequence[Vector], bias: Vector, scale: int) -> list[_Row]:
    """round(W x + b) on mantissas: per output (sparse integer coefficients, constant, divisor D) with
    ⌊2^f·(Σ w·m/2^f + b)⌋ = ⌊(Σ coef·m + const) / D⌋ exactly (then saturated)."""
    rows = []
    for row, b in zip(weights, bias):
        den = math.lcm(*(w.denominator for w in row), (b * scale).denominator)
        rows.append((tuple((k, int(w * den)) for k, w in enumerate(row) if w != 0), int(b * scale * den), den))
    return rows


class _Integers:
    """The affine maps, residuals and ReLU feed-forwards of a model in fixed arithmetic, on integer mantissas: the
    interpreter's ``project_heads``, ``residual`` and ``feed_forward`` (floor, then saturate, after every affine
    map; saturate after every residual sum), for the sublayers without a LayerNorm after them and with ReLU.
    The others take the interpreter's own functions on Fractions (``CounterModel``)."""

    def __init__(self, model: Model, arith: Fixed) -> None:
        scale = arith.scale
        self.lo, self.hi = arith.min_mantissa, arith.max_mantissa
        self.attention: dict[int, tuple[list[_Row], bool]] = {}
        self.feed_forward: dict[int, tuple[list[_Row], list[_Row], bool]] = {}
        for index, block in enumerate(model.blocks):
            layer = block.attention
            if layer is not None and (layer.norm is None or layer.norm_first):
                flat = [tuple(w for head in layer.heads for w in head.output[c]) for c in range(len(layer.output_bias))]
                self.attention[index] = (_integer_rows(flat, layer.output_bias, scale), layer.residual)
            ff = block.feed_forward
            if ff is not None and ff.norm is None and ff.activation == "relu":
                self.feed_forward[index] = (
                    _integer_rows(ff.w1, ff.b1, scale),
                    _integer_rows(ff.w2, ff.b2, scale),
                    ff.residual,
                )

    @staticmethod
    def of(model: Model, arith: Arithmetic) -> _Integers | None:
        return _Integers(model, arith) if isinstance(arith, Fixed) else None

    def affine(self, rows: list[_Row], x: Sequence[int]) -> list[int]:
        lo, hi = self.lo, self.hi
        out = []
        for coefficients, constant, den in rows:
            m = (sum(c * x[k] for k, c in coefficients) + constant) // den
            out.append(lo if m < lo else hi if m > hi else m)
        return out

    def residual(self, z: Sequence[int], update: Sequence[int], add: bool) -> tuple[int, ...]:
        if not add:
            return tuple(update)
        lo, hi = self.lo, self.hi
        return tuple(lo if a + b < lo else hi if a + b > hi else a + b for a, b in zip(z, update))

    def after_attention(self, block: int, z: tuple[int, ...], outputs: tuple[Any, ...]) -> tuple[int, ...]:
        rows, add = self.attention[block]
        return self.residual(z, self.affine(rows, [m for out in outputs for m in out]), add)

    def after_feed_forward(self, block: int, z: tuple[int, ...]) -> tuple[int, ...]:
        first, second, add = self.feed_forward[block]
        hidden = [h if h > 0 else 0 for h in self.affine(first, z)]
        return self.residual(z, self.affine(second, hidden), add)


__all__ = [
    "AVERAGE",
    "TERMS",
    "WEIGHTED",
    "WINDOW",
    "CounterModel",
    "Frozen",
    "NotApplicable",
    "Observation",
    "Path",
    "Slot",
    "State",
    "head_kind",
    "refusal",
]

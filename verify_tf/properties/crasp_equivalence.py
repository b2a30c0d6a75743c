"""Property ``crasp-equivalence``: the model decides exactly what a C-RASP program decides, on every string.

Options: ``program`` (a ``.cr`` file, relative to the spec), ``mode``, ``threshold``, ``lengths`` (and, for
``smt``, ``queries``). The model **accepts at position i iff its readout q_i = u·z_i exceeds ``threshold``**
(default 0; the C-RASP compiler builds models with q ≥ 1 on acceptance and q ≤ 0 otherwise). The decision at
a position is the decision on the prefix that ends there. Witnesses number positions as everywhere in
verify-tf: 0 is the word's first letter (the prefix of length 1), and "BOS" names the decision on the empty
prefix.

* ``mode: accept``: for every string w of the domain, the model accepts at the last position of w iff the
  program accepts w. The empty word (``min-length: 0``) is rejected by the program; a model with BOS decides
  it at position 0, a model without BOS rejects it.
* ``mode: prefix`` (the prediction task): for every string and every position i, the model's decision at i
  equals the program's output at i (whether w_0..w_i is accepted).

Causality: when every attention head is causal (decided from the IR) the computation at position i reads only
positions ≤ i (masked keys get weight 0, and every scoring normalises over the allowed keys only), so
position p of a string is decided exactly as in its prefix of length p. Then only the strings of the maximal
length are examined, each standing for all its prefixes, and a disagreement is reported on the shortlex-least
disagreeing string (the scan of the shorter strings is the driver's minimisation). A counterexample names the
string, the position, both outputs, and a trace with the program's definitions and the model's readout side
by side at every position.

A domain restricted to a regular language (``StringDomain.language``; docs/semantics.md §4) is read word by word:
every word of the language in the domain's order, each at every position (prefix) or at its last (accept), never
a prefix standing for a shorter word (a prefix of a word need not be a word), so the first failing word is the
least and no minimisation is needed. A causal model's words are evaluated padded to a few compiled lengths
(``padded_length``): position i reads positions <= i only, so the padding is never read. The counting engine
explores the prefix tree of the words instead (``CountingGoal.language``).

``lengths: all`` claims the same for strings of every length (the domain's alphabet and min-length; its
max-length bounds the first, exhaustive part only) and is decided by the ``counting`` engine, which also decides
the domain alone (``lengths: domain``) over count vectors instead of strings. It sees the program as a counter
machine (``crasp.machine``) through ``counting_goal``; its counterexamples are replayed by ``violation`` like every
other engine's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..contract import (
    Array,
    Batched,
    Capability,
    CertifiedOutputs,
    Counted,
    CountingGoal,
    Cubes,
    EachInput,
    Evaluators,
    Measures,
    PrefixTree,
    Proof,
    QueryPlan,
    Solvable,
    Task,
    Witness,
)
from ..crasp.arrays import program_outputs_batched
from ..crasp.ast import CraspError, Program, format_alphabet
from ..crasp.interpreter import run_program
from ..crasp.parser import load_program
from ..domain import Domain, StringDomain
from ..ir import AlphabetTokens, Model
from ..schema.dsl import Context, Field, FilePath, Number, Obj, String
from ..schema.yamlnodes import Node
from ..semantics import Arithmetic, UnsupportedInMode, evaluate
from ..spaces import InputSpace
from . import _torch_float as float_reading
from ._crasp_words import (
    PADDED_BATCH,
    all_causal,
    build_query,
    checked_positions,
    fixed_point_proof,
    machine_of,
    padded,
    padded_length,
    prefix_length,
    program_of,
    restricted,
    size_text,
    witness_of,
)
from .base import bos_offset, counted_for_every_length, require, typed

if TYPE_CHECKING:  # solver types: z3 and the encoder are imported when a solver query is built
    from ..symbolic.solve import Query


MODES = ("accept", "prefix")
LENGTHS = ("domain", "all")


class ProgramFile(FilePath):
    """A C-RASP program file: it must exist and parse (errors point at the spec line and the program's own)."""

    what = "a path to a C-RASP program (.cr)"

    def validate(self, node: Node, ctx: Context, path: str) -> Path:
        resolved = super().validate(node, ctx, path)
        try:
            load_program(resolved)
        except CraspError as error:
            raise ctx.error(node, path, f"invalid C-RASP program: {error}") from None
        return resolved


@dataclass(frozen=True)
class Options:
    program: Path
    mode: str = "accept"
    threshold: Fraction = Fraction(0)
    queries: str = "one"
    lengths: str = "domain"


class CraspEquivalence(EachInput, Batched, Solvable, Cubes, Counted, PrefixTree, CertifiedOutputs):
    name = "crasp-equivalence"
    summary = "the model accepts exactly what a C-RASP program accepts (last position, or every prefix)"
    # a checkpoint read as it runs (no IR): decided input by input on its enclosure (``_torch_float``)
    checkpoint_capabilities = frozenset({EachInput, Batched, CertifiedOutputs})
    options = Obj(
        {
            "program": Field(ProgramFile("the C-RASP program (.cr), relative to the spec's folder"), required=True),
            "mode": Field(
                String(
                    "accept: the decision at the last position of every string; prefix: the decision "
                    "at every position (the prediction task)",
                    MODES,
                ),
                default="accept",
            ),
            "threshold": Field(
                Number("the model accepts at position i iff its readout q_i > threshold"), default=Fraction(0)
            ),
            "queries": Field(
                String(
                    "solver queries, causal models: one query on the longest strings covering every "
                    "position (measured faster), or one query per length",
                    ("one", "per-length"),
                ),
                default="one",
            ),
            "lengths": Field(
                String(
                    "domain: the strings of the domain; all: every length (the counting goal: the "
                    "domain's lengths by counting, then induction over positions)",
                    LENGTHS,
                ),
                default="domain",
            ),
        },
        check=typed(Options),
    )
    language_domains = True  # the words of a regular language: every word in the domain's order (input_space)

    def offers(self, options: Options) -> frozenset[type[Capability]]:
        return counted_for_every_length(super().offers(options), options.lengths)

    def fit(self, model: Model, arithmetic: Arithmetic, domain: Domain | None, options: Options) -> None:
        require(
            isinstance(model.tokens, AlphabetTokens) and isinstance(domain, StringDomain),
            "",
            "crasp-equivalence needs an alphabet model and a strings domain",
            "e.g. domain: {strings: {alphabet: [a, b], max-length: 8}}",
        )
        assert isinstance(domain, StringDomain)  # required above
        require(
            domain.language is None or options.lengths != "all",
            "lengths",
            "lengths: all claims every string of every length, not the words of a language",
            "drop 'language' from the domain, or use lengths: domain",
        )
        program = load_program(options.program)
        foreign = [s for s in domain.alphabet if s not in program.alphabet]
        require(
            not foreign,
            "program",
            f"domain symbol {foreign[0] if foreign else ''!r} is not in the program's "
            f"alphabet {format_alphabet(program.alphabet)}",
        )

    def statistics(self, task: Task) -> dict[str, Any]:
        return {"domain_size": size_text(task.strings()), "causal_prefixes": all_causal(task.model)}

    def program(self, task: Task) -> Program:
        return program_of(task.options.program)

    def reading(self, task: Task) -> tuple[str, bool | None]:
        if float_reading.reads_float(task):  # a torch import read as trained, or a checkpoint read as it runs
            return float_reading.reading(task), True
        return super().reading(task)

    def batch_rows(self, task: Task) -> int | None:
        """Padded words (``padded``): a batch is evaluated at its padded length (``padded_length``), so the driver
        compiles no program per length (each costs interval bounds: 17 s of CPU at length 100 for a trained 24-bit
        softmax post-LN model, against 0.7 s to evaluate 64 words padded to 100). The float reading evaluates its
        batches itself, through the enclosure (``_torch_float``)."""
        if float_reading.reads_float(task):
            return float_reading.FLOAT_BATCH
        return PADDED_BATCH if padded(task) else None

    def input_space(self, task: Task) -> InputSpace:
        if all_causal(task.model) and not restricted(task):
            return InputSpace(task.strings(), only_lengths=(task.strings().max_length,))
        return InputSpace(task.strings())

    def preceding(self, task: Task, witness: Witness) -> InputSpace | None:
        """The strings shortlex-before the witness that were not examined yet (causal models only).

        accept: the shorter strings of the domain. prefix: every string shorter than the witness's position;
        one shorter than ``min-length`` stands for its padded extension (causality: the padding comes after),
        and ``violation`` reports it padded.
        """
        if not all_causal(task.model) or restricted(task):
            return None  # the whole domain was scanned in shortlex order: the first violation is the least
        domain: StringDomain = task.strings()
        if task.options.mode == "accept":
            shorter = tuple(range(domain.min_length, len(witness["string"])))
            return InputSpace(domain, only_lengths=shorter) if shorter else None
        prefix = prefix_length(witness["position"])
        return InputSpace(StringDomain(domain.alphabet, 1, prefix - 1)) if prefix > 1 else None

    # -- both sides on one word, on the interpreters
    def decisions(self, task: Task, program: Program, word: str) -> tuple[list[bool], list[bool], Any, Any]:
        """(model, program) decisions at positions 0..n (0: the empty prefix), with both traces."""
        trace = evaluate(task.model, task.arithmetic, tuple(word))
        offset, threshold = bos_offset(task.model), task.options.threshold
        model_side = [offset == 1 and trace.readout[0] > threshold]
        model_side += [trace.readout[i - 1 + offset] > threshold for i in range(1, len(word) + 1)]
        program_trace = run_program(program, word)
        return model_side, [False, *program_trace.output], trace, program_trace

    def violation(self, task: Task, tokens: tuple[Any, ...]) -> Witness | None:
        word = "".join(tokens)
        if float_reading.reads_float(task):
            return float_reading.violation(
                task, word, checked_positions(task, len(word)), lambda p: self.shown_word(task, word, p)
            )
        program = self.program(task)
        model_side, program_side, _, _ = self.decisions(task, program, word)
        for p in checked_positions(task, len(word)):
            if model_side[p] != program_side[p]:
                return self.witness(task, program, self.shown_word(task, word, p), p)
        return None

    @staticmethod
    def shown_word(task: Task, word: str, p: int) -> str:
        """The word a witness at prefix length p names: a causal model's prefix decides p, so its shortest word."""
        if all_causal(task.model) and not restricted(task):
            return word[:p] + task.strings().alphabet[0] * max(0, task.strings().min_length - p)
        return word

    @staticmethod
    def prefix_order(task: Task) -> bool:
        """Whether the scanned strings stand for their prefixes (causal, not a language): the least input with an
        undecided prefix is then the least such prefix."""
        return all_causal(task.model) and not restricted(task)

    def certified_outputs(self, task: Task, rows: Array) -> tuple[Array, int] | None:
        return float_reading.certified_outputs(task, rows) if float_reading.reads_float(task) else None

    def certified_check(self, task: Task, tokens: tuple[Any, ...]) -> str | None:
        if not float_reading.reads_float(task):
            return super().certified_check(task, tokens)
        word = "".join(tokens)
        return float_reading.certified_check(task, word, checked_positions(task, len(word)))

    def measure_kinds(self, task: Task) -> dict[str, str]:
        return {float_reading.UNDECIDED_MEASURE: "max"} if float_reading.reads_float(task) else {}

    def measure(self, task: Task, tokens: tuple[Any, ...]) -> dict[str, Fraction]:
        if not float_reading.reads_float(task):
            return {}
        word = "".join(tokens)
        return float_reading.measure(task, word, checked_positions(task, len(word)), self.prefix_order(task))

    def witness(self, task: Task, program: Program, word: str, position: int) -> Witness:
        return witness_of(task, program, word, position, self.decisions(task, program, word))

    # -- enumerate: the model's decisions and the program's arrays on the same rows
    def batched_violations(self, task: Task, evaluators: Evaluators, rows: Array) -> tuple[Array, Measures]:
        length = rows.shape[1]
        if float_reading.reads_float(task):
            return float_reading.batched(task, rows, checked_positions(task, length), self.prefix_order(task))
        if length == 0:
            flagged = np.array([self.violation(task, ()) is not None] * len(rows), dtype=bool)
            return flagged, {}
        if padded(task) and length < padded_length(task, length):  # causal: positions < length ignore the padding
            full = np.zeros((len(rows), padded_length(task, length)), dtype=np.int64)
            full[:, :length] = rows
            readout = evaluators.of().values(full, "readout")
            readout = type(readout)(readout.numerators[:, : length + bos_offset(task.model)], readout.den)
        else:
            readout = evaluators.of().values(rows, "readout")
        cut = math.floor(task.options.threshold * readout.den)  # q > threshold <=> num > floor(threshold·den)
        accepts = np.asarray(readout.numerators) > cut
        if not bos_offset(task.model):
            accepts = np.concatenate([np.zeros((len(rows), 1), dtype=bool), accepts], axis=1)
        program_side = program_outputs_batched(self.program(task), task.strings().alphabet, rows)
        columns = list(checked_positions(task, length))
        return (accepts[:, columns] != program_side[:, columns]).any(axis=1), {}

    # -- smt: the string as symbolic input, the program as z3 formulas over the same symbols
    def smt_queries(self, task: Task) -> list[QueryPlan]:
        """Causal models: one query on the longest strings (``queries: one``; z3 proved compiled L_3 for N = 8 in
        0.6 s this way and in 17 s with one query per length) or one query per length n about position n.
        Other models: one query per length."""
        domain: StringDomain = task.strings()
        self.refuse_float(task, "solver queries encode")
        if all_causal(task.model) and task.options.queries == "one":
            return [QueryPlan(f"length {domain.max_length}", (domain.max_length,))]
        return [QueryPlan(f"length {n}", (n,)) for n in domain.lengths if n > 0 or bos_offset(task.model)]

    def build_query(self, task: Task, plan: QueryPlan, builder: Any) -> Query:
        return build_query(task, plan, builder)

    def replay_query(self, task: Task, plan: QueryPlan, decoded: Any) -> Witness | None:
        return self.violation(task, decoded[0])

    # -- counting: the program as a counter machine over its counts (crasp.machine)
    def counting_goal(self, task: Task) -> CountingGoal:
        """Model and program agree on every checked prefix: in accept mode those of length p >= min-length (each
        a word of the domain, decided at its last position: the counting class is causal), the least witness
        the shortlex-least such word; in prefix mode every prefix of length p >= 1, the witness the least
        disagreeing prefix (``violation`` pads it to min-length)."""
        domain: StringDomain = task.strings()
        self.refuse_float(task, "the counter machine reads")
        prefix = task.options.mode == "prefix"
        return CountingGoal(
            domain.alphabet,
            domain.min_length,
            domain.max_length,
            task.options.lengths == "all",
            reference=machine_of(task.options.program),
            first_position=1 if prefix else domain.min_length,
            least="prefix" if prefix else "string",
            language=domain.language,
        )

    def prefix_violates(self, task: Task, ours: Any, theirs: bool) -> bool:
        """The model's decision on the prefix (readout > threshold; no BOS: the empty prefix is rejected)
        differs from the program's output."""
        return (ours is not None and ours.readout > task.options.threshold) != theirs

    def prefix_tree_violations(self, task: Task, rows: Array, readout: Array, den: int) -> Array:
        """``prefix_violates`` on a batch: the decision at each prefix's last letter against the program's output
        there (``program_outputs_batched``, the program's own arrays)."""
        cut = math.floor(task.options.threshold * den)  # q > threshold <=> num > floor(threshold·den)
        theirs = program_outputs_batched(self.program(task), task.strings().alphabet, rows)[:, -1]
        return np.asarray((np.asarray(readout) > cut) != theirs, dtype=bool)

    def encode_prefix_violation(self, task: Task, builder: Any, ours: Any, theirs: Any) -> Any:
        """``prefix_violates`` over a symbolic readout and the program's symbolic output."""
        import z3  # solver terms: imported when an induction is encoded

        from ..symbolic.values import Sym

        return z3.Not(builder.ge(Sym.const(task.options.threshold), ours.readout)) != theirs

    @staticmethod
    def refuse_float(task: Task, view: str) -> None:
        """The float reading is read only by evaluating the model input by input (``EachInput``, ``Batched``)."""
        if float_reading.reads_float(task):
            raise UnsupportedInMode(
                f"{view} the fixed-point reading; the float reading (the model as trained) is checked by "
                "evaluating every input (an engine that enumerates the domain)"
            )

    def describe_proof(self, task: Task, proof: Proof) -> str:
        text = self.describe_fixed_point_proof(task, proof)
        if not float_reading.reads_float(task):
            return text
        float_reading.undecided_or_proof(
            task,
            proof.statistics,
            lambda length: checked_positions(task, length),
            lambda word, p: self.shown_word(task, word, p),
        )
        return f"{text[:-1]}; {float_reading.proof_clause(task)})" if text.endswith(")") else text

    def describe_fixed_point_proof(self, task: Task, proof: Proof) -> str:
        """The proof in the words of the claim (the float reading adds its clause: ``describe_proof``)."""
        return fixed_point_proof(task, proof)


PROPERTY = CraspEquivalence()

"""Property ``rasp-equivalence``: a tracr-compiled model computes what its RASP program computes, on every input.

Option ``program``: the export file the model was imported from (``verify_tf.tracr_export``; docs/tracr.md).
It holds the RASP program, tabulated, and the model's output space; ``fit`` checks that it matches the model
(vocabulary, BOS, maximum length, residual width) and the domain (every string over the vocabulary up to the
maximum length, BOS prepended by the model).

For every input and every position p where the program's output is defined (RASP's ``None`` is "don't
care": tracr gives no guarantee there), the model's decoded output equals the program's:

* categorical: the argmax of the final residual stream over the output space's coordinates (tracr's
  decoding). A tie between the largest coordinates is a finding of its own (the model names no value), never
  broken by a guess;
* numerical: the exact value of the output coordinate, compared with the program's exact rational value.

A counterexample names the input (the least in shortlex order over the vocabulary's order: the drivers scan
the domain in that order), the position, both outputs at every position, and the program's intermediate values
beside the model's decoded output (``trace``); ``verify-tf explain`` replays the model's side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..builders.tracr_import import TracrExport, TracrImportError, read_export
from ..contract import (
    Array,
    Batched,
    CertifiedOutputs,
    EachInput,
    Evaluators,
    Measures,
    Proof,
    QueryPlan,
    Solvable,
    Task,
    Witness,
)
from ..domain import Domain, StringDomain, format_input
from ..ir import AlphabetTokens, Model, Vector
from ..numbers import fmt
from ..rasp.interpreter import run, tokens_from_symbols
from ..rasp.program import RaspError, Value, show
from ..schema.dsl import Context, Field, FilePath, Number, Obj, String
from ..schema.errors import OptionError
from ..schema.yamlnodes import Node
from ..semantics import Arithmetic, UnsupportedInMode, evaluate
from ..witness import input_to_json
from ..work import MAX_TIMEOUT, CannotCheck, Deadline, deadline_now
from . import _rasp_float as float_reading
from ._rasp_float import FLOAT_BATCH, FLOAT_READING, witness_position
from ._rasp_query import build_query as encode_query
from ._rasp_undefined import least_undefined_input
from .base import bos_offset, require, typed

if TYPE_CHECKING:  # solver types: z3 and the encoder are imported when a solver query is built
    from ..symbolic.solve import Query


class ExportFile(FilePath):
    """A tracr export file: it must exist and read (errors point at the spec line)."""

    what = "a path to a tracr export (.json)"

    def validate(self, node: Node, ctx: Context, path: str) -> Path:
        resolved = super().validate(node, ctx, path)
        try:
            read_export(resolved)
        except TracrImportError as error:
            raise ctx.error(node, path, str(error), "export files are written by verify_tf.tracr_export") from None
        return resolved


UNDEFINED = ("error", "dont-care")


@dataclass(frozen=True)
class Options:
    program: Path
    undefined: str | None = None  # None: the policy recorded in the export ("error" when none is)
    tolerance: Fraction = Fraction(1, 1000)  # the float reading's "equal" for a numerical output

    def policy(self, export: TracrExport) -> str:
        return self.undefined or export.undefined_policy


@dataclass(frozen=True)
class Decoded:
    """The model's output at one position: a value, or a tie between the largest output coordinates."""

    value: Value = None
    tie: tuple[Value, ...] = ()
    score: Fraction | None = None  # categorical: the largest coordinate; numerical: the value

    def text(self) -> str:
        if self.tie:
            return "tie(" + "|".join(show(v) for v in self.tie) + ")"
        return show(self.value)


def decode(export: TracrExport, vector: Vector) -> Decoded:
    if export.output_kind == "numerical":
        assert export.output_index is not None  # a numerical output has one coordinate
        value = vector[export.output_index]
        return Decoded(value, (), value)
    scores = [vector[i] for _, i in export.output_space]
    best = max(scores)
    winners = tuple(v for (v, _), s in zip(export.output_space, scores) if s == best)
    if len(winners) > 1:
        return Decoded(None, winners, best)
    return Decoded(winners[0], (), best)


def agrees(expected: Value, got: Decoded) -> bool:
    return not got.tie and got.value == expected


class RaspEquivalence(EachInput, Batched, Solvable, CertifiedOutputs):
    name = "rasp-equivalence"
    summary = "a tracr-compiled model's decoded output equals its RASP program's at every defined position"
    options = Obj(
        {
            "program": Field(
                ExportFile(
                    "the tracr export (the model and its tabulated RASP program), relative to the spec's folder"
                ),
                required=True,
            ),
            "undefined": Field(
                String(
                    "inputs on which the RASP program is undefined (tracr's rasp.evaluate raises): 'error' makes "
                    "the check an input error naming the least one; 'dont-care' skips them, as tracr promises "
                    "nothing there (default: the export's policy, else error)",
                    UNDEFINED,
                )
            ),
            "tolerance": Field(
                Number(
                    "the float reading (tracr's default): a numerical output equals the program's value when every "
                    "float32 evaluation lies within this distance of it (default 1/1000; categorical outputs need "
                    "a strict argmax)",
                    minimum=Fraction(0),
                ),
                default=Fraction(1, 1000),
            ),
        },
        check=typed(Options),
    )

    def fit(self, model: Model, arithmetic: Arithmetic, domain: Domain | None, options: Options) -> None:
        require(
            isinstance(model.tokens, AlphabetTokens)
            and model.tokens.bos is not None
            and isinstance(domain, StringDomain),
            "",
            "rasp-equivalence needs a tracr model (alphabet tokens with BOS) and a strings domain",
            "model: {tracr: export.json} and domain: {strings: {max-length: N}}",
        )
        assert isinstance(model.tokens, AlphabetTokens) and isinstance(domain, StringDomain)  # required above
        export = _export(options.program)
        symbols = [s for s in model.tokens.symbols if s != model.tokens.bos]
        require(
            model.tokens.bos == export.bos and sorted(symbols) == sorted(export.symbols),
            "program",
            f"the model's alphabet {symbols} (BOS {model.tokens.bos!r}) is not the program's vocabulary "
            f"{list(export.symbols)} (BOS {export.bos!r})",
            "name the export the model was imported from",
        )
        require(
            model.dim == export.d_model and model.max_length == export.max_seq_len + 1,
            "program",
            f"the model (width {model.dim}, {model.max_length} positions) is not the export's (width "
            f"{export.d_model}, {export.max_seq_len + 1} positions)",
            "name the export the model was imported from",
        )
        require(
            domain.max_length <= export.max_seq_len,
            "program",
            f"the domain's strings of length {domain.max_length} exceed the program's maximum length "
            f"{export.max_seq_len}",
            f"domain: {{strings: {{max-length: {export.max_seq_len}}}}}",
        )
        require(
            not model.float_reading or model.float_source == export.weights_digest,
            "program",
            "the float reading checks the float32 model of the program's export, and the model was not imported "
            "from it (its weights differ)",
            "name the export the model was imported from, or read the model as attention: hardmax",
        )

    def premise(self, task: Task) -> None:
        """Under the policy ``error``, no input of the domain may be one where the RASP program is undefined: the
        least one the search finds (``_rasp_undefined``, under the property's deadline, which is in force) is the
        user's mistake, located at ``undefined`` (or ``program`` when the policy is the export's)."""
        options: Options = task.options
        export = _export(options.program)
        if options.policy(export) != "error":
            return
        deadline = deadline_now() or Deadline(MAX_TIMEOUT)  # none in force: a direct call, bounded by the largest
        least = least_undefined_input(export, task.strings(), deadline)
        if least is not None:
            word, reason = least
            raise OptionError(
                "undefined" if options.undefined else "program",
                f"the RASP program is undefined on {word!r} ({reason}), so the model has no specification there",
                "declare such inputs don't-care with undefined: dont-care (tracr promises nothing on them), "
                "or fix the program",
            )

    def statistics(self, task: Task) -> dict[str, Any]:
        return {"domain_size": task.strings().size()}

    def batch_rows(self, task: Task) -> int | None:
        return FLOAT_BATCH if task.model.float_reading else None

    def reading(self, task: Task) -> tuple[str, bool | None]:
        if task.model.float_reading:
            return FLOAT_READING, True
        return super().reading(task)

    # -- the float reading (tracr's default): the compiled float32 model as it runs, through its exact enclosure
    #    (properties._rasp_float)
    def measure_kinds(self, task: Task) -> dict[str, str]:
        return float_reading.measure_kinds(task) if task.model.float_reading else {}

    def measure(self, task: Task, tokens: tuple[Any, ...]) -> dict[str, Fraction]:
        return float_reading.measure(task, tokens) if task.model.float_reading else {}

    def certified_outputs(self, task: Task, rows: Array) -> tuple[Array, int] | None:
        """Under the float reading, a certificate digests what the proof decided on: the enclosure of every output
        coordinate (``float_reading.certified_outputs``); the hardmax IR's readout would say nothing about it."""
        return float_reading.certified_outputs(task, rows) if task.model.float_reading else None

    def certified_check(self, task: Task, tokens: tuple[Any, ...]) -> str | None:
        """Under the float reading, the proof's claim on one input (``float_reading.certified_check``)."""
        if not task.model.float_reading:
            return super().certified_check(task, tokens)
        return float_reading.certified_check(task, tokens)

    # -- both sides on one input, on the interpreters
    def sides(self, task: Task, tokens: Sequence[str]) -> tuple[list[Value], list[Decoded], Any, Any]:
        """(program outputs, model outputs) at the user's positions, with both traces."""
        export = _export(task.options.program)
        program_trace = run(export.program, tokens_from_symbols(export.program, tokens))
        trace = evaluate(task.model, task.arithmetic, tuple(tokens))
        offset = bos_offset(task.model)
        model_side = [decode(export, trace.output[p + offset]) for p in range(len(tokens))]
        return program_trace.output, model_side, trace, program_trace

    def violation(self, task: Task, tokens: tuple[Any, ...]) -> Witness | None:
        if task.model.float_reading:
            return float_reading.float_violation(task, tokens)
        try:
            expected, got, _, program_trace = self.sides(task, tokens)
        except RaspError as exc:
            if task.options.policy(_export(task.options.program)) == "dont-care":
                return None  # the program is undefined here: the whole input is don't-care
            raise CannotCheck(  # the premise's search (bounded) did not reach this input
                f"the RASP program is undefined on {format_input(tuple(tokens))!r} ({exc}), so the model has no "
                "specification there: declare such inputs don't-care with undefined: dont-care (tracr promises "
                "nothing on them), or fix the program"
            ) from None
        for p, (want, have) in enumerate(zip(expected, got)):
            if want is not None and not agrees(want, have):
                return self.witness(task, tokens, p, expected, got, program_trace)
        return None

    def witness(
        self, task: Task, tokens: Sequence[str], p: int, expected: list[Value], got: list[Decoded], program_trace: Any
    ) -> Witness:
        export = _export(task.options.program)
        word = format_input(tuple(tokens))
        program_text = "[" + ", ".join(show(v) for v in expected) + "]"
        model_text = "[" + ", ".join(g.text() for g in got) + "]"
        position = witness_position(p)
        if got[p].tie:
            score = got[p].score
            assert score is not None  # a tie is between equal scores
            finding = (
                f"the model's output is a tie between {', '.join(show(v) for v in got[p].tie)} (each "
                f"{fmt(score)}), the program gives {show(expected[p])}"
            )
        else:
            finding = f"the program gives {show(expected[p])}, the model {show(got[p].value)}"
        rows = [
            {
                "position": witness_position(i),
                "token": t,
                "program": {n.label: show(program_trace.values(n.label)[i]) for n in export.program.sops},
                "program_output": show(expected[i]),
                "model_output": got[i].text(),
                "checked": expected[i] is not None,
            }
            for i, t in enumerate(tokens)
        ]
        witness: Witness = {
            "input": input_to_json(tuple(tokens)),
            "string": word,
            "position": position,
            "program_output": [None if v is None else show(v) for v in expected],
            "model_output": [g.text() for g in got],
            "trace": rows,
            "summary": f"input {word} at position {position}: {finding} (RASP {program_text}, model {model_text}; "
            "None: don't care)",
        }
        if got[p].tie:
            witness["tie"] = [show(v) for v in got[p].tie]
        return witness

    # -- enumerate: the model's final stream and the program's codes on the same rows
    def batched_violations(self, task: Task, evaluators: Evaluators, rows: Array) -> tuple[Array, Measures]:
        export = _export(task.options.program)
        length = rows.shape[1]
        if length == 0:
            return np.zeros(len(rows), dtype=bool), {}
        if task.model.float_reading:
            flagged, measures = float_reading.float_rows(task, rows)
            if task.options.policy(export) == "error":
                flagged = flagged | float_reading.program_codes(task, export, rows)[1]
            return flagged, measures
        program = export.program
        codes, undefined = float_reading.program_codes(task, export, rows)
        output = program.output_node
        none_code = output.code_of.get(None, -1)
        defined = codes != none_code
        stream = evaluators.of().values(rows, "output")
        offset = bos_offset(task.model)
        numerators = np.asarray(stream.numerators)[:, offset : offset + length, :]
        if export.output_kind == "categorical":
            scores = numerators[:, :, [i for _, i in export.output_space]]
            best = scores.max(axis=2)
            tie = (scores == best[:, :, None]).sum(axis=2) > 1
            space_index = {v: k for k, (v, _) in enumerate(export.output_space)}
            wanted = np.array([space_index.get(v, -1) for v in output.values], dtype=np.int64)[codes]
            wrong = tie | (scores.argmax(axis=2) != wanted)
        else:
            wrong = self._numerical_wrong(export, numerators[:, :, export.output_index], stream.den, codes, defined)
        if task.options.policy(export) == "dont-care":
            return (defined & wrong).any(axis=1) & ~undefined, {}
        return (defined & wrong).any(axis=1) | undefined, {}

    @staticmethod
    def _numerical_wrong(
        export: TracrExport, numerators: np.ndarray, den: int, codes: np.ndarray, defined: np.ndarray
    ) -> np.ndarray:
        """Exact comparison per distinct (model numerator, program code) pair."""
        values = export.program.output_node.values
        pairs, inverse = np.unique(np.stack([numerators.reshape(-1), codes.reshape(-1)]), axis=1, return_inverse=True)
        differs = np.array(
            [values[int(c)] is not None and Fraction(int(m), den) != values[int(c)] for m, c in pairs.T], dtype=bool
        )
        wrong: np.ndarray = differs[np.asarray(inverse).reshape(-1)].reshape(codes.shape) & defined
        return wrong

    # -- smt: the program as z3 terms over the same symbolic input
    def smt_queries(self, task: Task) -> list[QueryPlan]:
        if task.model.float_reading:
            raise UnsupportedInMode(
                "solver queries encode the hardmax reading; the float reading (tracr's default, the model as "
                "compiled) is checked by evaluating every input (an engine that enumerates the domain); attention: "
                "hardmax checks tracr's intended computation with solver queries"
            )
        return [QueryPlan(f"length {n}", (n,)) for n in task.strings().lengths if n > 0]

    def build_query(self, task: Task, plan: QueryPlan, builder: Any) -> Query:
        return encode_query(task, plan, builder)

    def replay_query(self, task: Task, plan: QueryPlan, decoded: Any) -> Witness | None:
        return self.violation(task, decoded[0])

    def describe_proof(self, task: Task, proof: Proof) -> str:
        domain: StringDomain = task.strings()
        export = _export(task.options.program)
        statistics = proof.statistics
        how = proof.default if proof.queries is not None else f"{statistics.get('space_size', domain.size())} evaluated"
        if task.model.float_reading:
            return float_reading.describe_float_proof(task, statistics, how)
        return (
            f"{domain.size()} strings of length {domain.min_length}..{domain.max_length} over "
            f"{{{', '.join(domain.alphabet)}}}: the model's {export.output_kind} output equals the RASP "
            f"program's at every position where it is defined ({how})"
        )


def _export(path: Path) -> TracrExport:
    return read_export(path)


PROPERTY = RaspEquivalence()

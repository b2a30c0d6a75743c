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

from ..builders.tracr_import import TracrExport, TracrImportError, float_network, read_export
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
from ..floats import decode as float_decode, enclosure
from ..floats.evaluate import evaluate as evaluate_float32
from ..ir import AlphabetTokens, Model, Vector
from ..numbers import fmt
from ..rasp.batched import least_undefined, outputs_batched
from ..rasp.interpreter import run, tokens_from_symbols
from ..rasp.program import RaspError, Value, show
from ..schema.dsl import Context, Field, FilePath, Number, Obj, String
from ..schema.errors import OptionError
from ..schema.yamlnodes import Node
from ..semantics import Arithmetic, UnsupportedInMode, evaluate
from ..witness import input_to_json
from ..work import CannotCheck, Deadline, DeadlineExpired, within_deadline
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
LOAD_SCAN_INPUTS = 1 << 16  # strings the load-time definedness search scans (the shortest lengths, in order)
LOAD_SOLVER_SECONDS = 10  # then z3 on the longer lengths, in all (docs/tracr.md)


@dataclass(frozen=True)
class Options:
    program: Path
    undefined: str | None = None  # None: the policy recorded in the export ("error" when none is)
    tolerance: Fraction = Fraction(1, 1000)  # the float reading's "equal" for a numerical output

    def policy(self, export: TracrExport) -> str:
        return self.undefined or export.undefined_policy


def witness_position(user_index: int) -> int:
    """How a witness numbers a position: the user's input positions from 0, the BOS not counted."""
    return user_index


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
                    "inputs on which the RASP program is undefined (tracr's rasp.evaluate raises): 'error' refuses "
                    "the spec naming the least one; 'dont-care' skips them, as tracr promises nothing there "
                    "(default: the export's policy, else error)",
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
        if options.policy(export) == "error":
            least = least_undefined_input(export, domain)
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
    def float_status(self, task: Task, rows: Array) -> tuple[np.ndarray, enclosure.Enclosure]:
        """Per (row, user position): RIGHT, WRONG or UNDECIDED (``floats.decode``) for every float32 evaluation of
        the compiled model against the program, with the enclosure (BOS at stream position 0)."""
        export = _export(task.options.program)
        network = float_network(export)
        codes, undefined = self._program_codes(task, export, rows)
        found = enclosure.enclose(enclosure.prepare(network), network.ids(rows, tuple(task.strings().alphabet)))
        box = enclosure.Box(found.output.lo[:, 1:], found.output.hi[:, 1:])
        output = export.program.output_node
        if export.output_kind == "categorical":
            space_index = {v: k for k, (v, _) in enumerate(export.output_space)}
            table = [
                float_decode.DONT_CARE if v is None else space_index.get(v, float_decode.NOT_IN_SPACE)
                for v in output.values
            ]
            wanted = np.array(table, dtype=np.int64)[codes]
            status = float_decode.categorical(box, [i for _, i in export.output_space], wanted)
        else:
            assert export.output_index is not None  # a numerical output has one coordinate
            values = [None if v is None else Fraction(v) for v in output.values]
            status = float_decode.numerical(box, export.output_index, values, codes, task.options.tolerance)
        if undefined.any():  # no specification there: don't-care (policy dont-care; "error" refused the spec)
            status = np.where(undefined[:, None], float_decode.RIGHT, status)
        return status, found

    def float_rows(self, task: Task, rows: Array) -> tuple[Array, Measures]:
        """The enumerate hook under the float reading: rows where some evaluation may decode wrong are flagged
        only if *every* evaluation does (a refutation); the others that the enclosure cannot decide are counted
        (measure ``float_undecided``: a proof needs none), and each head's leak is measured."""
        flagged: list[np.ndarray] = []
        undecided: list[np.ndarray] = []
        leaks: dict[str, list[np.ndarray]] = {}
        for start in range(0, len(rows), FLOAT_BATCH):
            status, found = self.float_status(task, rows[start : start + FLOAT_BATCH])
            flagged.append((status == float_decode.WRONG).any(axis=1))
            undecided.append((status == float_decode.UNDECIDED).any(axis=1))
            for name, leak in found.heads.items():
                leaks.setdefault(f"float_leak {name}", []).append(leak.leak)
        measures: Measures = {"float_undecided": (np.concatenate(undecided).astype(np.int64), 1)}
        for name, parts in leaks.items():
            measures[name] = (np.concatenate(parts), 1 << enclosure.P)
        return np.concatenate(flagged), measures

    def measure_kinds(self, task: Task) -> dict[str, str]:
        if not task.model.float_reading:
            return {}
        network = enclosure.prepare(float_network(_export(task.options.program)))
        heads = [f"layer {layer} head {h[0]}" for layer, (_, used, *_) in enumerate(network.layers) for h in used]
        return {"float_undecided": "max", **{f"float_leak {name}": "max" for name in heads}}

    def measure(self, task: Task, tokens: tuple[Any, ...]) -> dict[str, Fraction]:
        if not task.model.float_reading:
            return {}
        rows = np.array([[task.strings().alphabet.index(t) for t in tokens]], dtype=np.int64)
        _, found = self.float_rows(task, rows)
        return {name: Fraction(int(numerators[0]), den) for name, (numerators, den) in found.items()}

    def certified_outputs(self, task: Task, rows: Array) -> tuple[Array, int] | None:
        """Under the float reading, a certificate digests what the proof decided on: per input, the enclosure of
        every output coordinate at every user position (lower bounds, then upper bounds, over 2^SCALE); the
        hardmax IR's readout would say nothing about the float model."""
        if not task.model.float_reading:
            return None
        export = _export(task.options.program)
        columns = [i for _, i in _coordinates(export)]
        parts = []
        for start in range(0, len(rows), FLOAT_BATCH):
            _, found = self.float_status(task, rows[start : start + FLOAT_BATCH])
            lo, hi = found.output.lo[:, 1:, columns], found.output.hi[:, 1:, columns]
            parts.append(np.concatenate([lo.reshape(len(lo), -1), hi.reshape(len(hi), -1)], axis=1))
        return np.concatenate(parts), 1 << enclosure.SCALE

    def certified_check(self, task: Task, tokens: tuple[Any, ...]) -> str | None:
        """Under the float reading, the proof's claim on one input: the enclosure decides every defined position
        right, and numpy's float32 evaluation (an evaluation the error model allows) lies inside the enclosure."""
        if not task.model.float_reading:
            return super().certified_check(task, tokens)
        export = _export(task.options.program)
        rows = np.array([[task.strings().alphabet.index(t) for t in tokens]], dtype=np.int64)
        status, found = self.float_status(task, rows)
        undecided = np.flatnonzero(status[0] != float_decode.RIGHT)
        if len(undecided):
            return f"the enclosure does not decide position {witness_position(int(undecided[0]))} right"
        network = float_network(export)
        ours = evaluate_float32(network, network.ids(rows, tuple(task.strings().alphabet))).output[0]
        exact = np.vectorize(lambda v: Fraction(float(v)) * (1 << enclosure.SCALE), otypes=[object])(ours)
        if not ((found.output.lo[0] <= exact) & (exact <= found.output.hi[0])).all():
            return "numpy's float32 evaluation lies outside the enclosure"
        return None

    def float_violation(self, task: Task, tokens: tuple[Any, ...]) -> Witness | None:
        """A witness where every float32 evaluation of the compiled model decodes differently from the program,
        replayed on this package's float32 evaluator and, when tracr is installed, on tracr's own model in JAX."""
        export = _export(task.options.program)
        try:
            expected = run(export.program, tokens_from_symbols(export.program, tokens)).output
        except RaspError as exc:
            if task.options.policy(export) == "dont-care":
                return None  # the program is undefined here: the whole input is don't-care
            raise RaspError(f"the RASP program is undefined on {format_input(tuple(tokens))!r}: {exc}") from None
        rows = np.array([[task.strings().alphabet.index(t) for t in tokens]], dtype=np.int64)
        status, found = self.float_status(task, rows)
        wrong = np.flatnonzero(status[0] == float_decode.WRONG)
        if len(wrong) == 0:
            return None
        p = int(wrong[0])
        network = float_network(export)
        ids = network.ids(rows, tuple(task.strings().alphabet))
        ours = evaluate_float32(network, ids).output[0, 1:]
        replays = {"numpy float32": [_decode_float(export, ours[i]) for i in range(len(tokens))]}
        from ..floats import jax_replay

        if jax_replay.available():
            theirs = within_deadline(
                lambda: jax_replay.final_stream(export.document, [int(i) for i in ids[0]]),
                "the replay on tracr's model in JAX",
            )[1:]
            replays["tracr's model in JAX"] = [_decode_float(export, theirs[i]) for i in range(len(tokens))]
        box = enclosure.Box(found.output.lo[0, 1:], found.output.hi[0, 1:])
        for name, decoded in replays.items():
            right = (
                decoded[p] == expected[p]
                if export.output_kind == "categorical"
                else abs(decoded[p] - Fraction(expected[p])) <= task.options.tolerance
            )
            if right:  # the enclosure contains every float32 evaluation: this would be a bug in it
                raise RuntimeError(
                    f"enclosure check failed: it says no float32 evaluation decodes {show(expected[p])} at position "
                    f"{p} of {format_input(tuple(tokens))}, but {name} does"
                )
        word = format_input(tuple(tokens))
        model_text = "[" + ", ".join(_shown(v) for v in replays["numpy float32"]) + "]"
        program_text = "[" + ", ".join(show(v) for v in expected) + "]"
        if export.output_kind == "categorical":
            coords = [(v, i) for v, i in export.output_space]
            rivals = [
                v
                for v, i in coords
                if v != expected[p]
                and box.lo[p, i] > max((box.hi[p, j] for w, j in coords if w == expected[p]), default=-(1 << 400))
            ]
            finding = (
                f"the program gives {show(expected[p])}; every float32 evaluation of the compiled model ranks "
                f"{', '.join(show(v) for v in rivals) or 'another value'} above it"
            )
        else:
            assert export.output_index is not None  # a numerical output has one coordinate
            finding = (
                f"the program gives {show(expected[p])}; every float32 evaluation of the compiled model lies in "
                f"{float_decode.interval_text(box, p, export.output_index)}, farther than the tolerance "
                f"{fmt(task.options.tolerance)}"
            )
        evaluations = "; ".join(f"{name}: {_shown(values[p])}" for name, values in replays.items())
        return {
            "input": input_to_json(tuple(tokens)),
            "string": word,
            "position": witness_position(p),
            "reading": FLOAT_READING,
            "program_output": [None if v is None else show(v) for v in expected],
            "model_output": [_shown(v) for v in replays["numpy float32"]],
            "float_evaluations": {name: [_shown(v) for v in values] for name, values in replays.items()},
            "enclosure": [
                {v: float_decode.interval_text(box, i, j) for v, j in _coordinates(export)} for i in range(len(tokens))
            ],
            "summary": f"input {word} at position {witness_position(p)}: {finding} ({evaluations}; RASP "
            f"{program_text}, float model {model_text}; None: don't care)",
        }

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
            return self.float_violation(task, tokens)
        try:
            expected, got, _, program_trace = self.sides(task, tokens)
        except RaspError as exc:
            if task.options.policy(_export(task.options.program)) == "dont-care":
                return None  # the program is undefined here: the whole input is don't-care
            raise CannotCheck(  # the load-time search (bounded) did not reach this input
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
            flagged, measures = self.float_rows(task, rows)
            if task.options.policy(export) == "error":
                flagged = flagged | self._program_codes(task, export, rows)[1]
            return flagged, measures
        program = export.program
        codes, undefined = self._program_codes(task, export, rows)
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
    def _program_codes(task: Task, export: TracrExport, rows: Array) -> tuple[np.ndarray, np.ndarray]:
        """The program's output codes (B, n) on rows of the domain's alphabet, and which rows it is undefined on."""
        program = export.program
        assert program.tokens_node is not None  # a tracr program reads its tokens
        token_code = np.array(
            [program.tokens_node.code_of[v] for v in tokens_from_symbols(program, task.strings().alphabet)],
            dtype=np.int64,
        )
        codes, undefined = outputs_batched(program, token_code[rows])
        return codes, undefined

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

    def describe_float_proof(self, task: Task, statistics: dict[str, Any], how: str) -> str:
        """The float reading's proof, or ``unknown`` (raised) when some input's decoding was left undecided."""
        domain: StringDomain = task.strings()
        export = _export(task.options.program)
        if Fraction(statistics.get("float_undecided", "0")) > 0:
            space = self.input_space(task)
            index = int(statistics["float_undecided_at"])
            tokens = space.decode(space.rows(index, index + 1)[0][0])
            raise UnsupportedInMode(f"float reading: {self.undecided_text(task, tuple(tokens))}")
        leaks = sorted(
            (k.removeprefix("float_leak "), Fraction(v))
            for k, v in statistics.items()
            if k.startswith("float_leak ") and not k.endswith("_at")
        )
        leak_text = "; ".join(f"{name} leaks <= {float_decode.upper_text(value)}" for name, value in leaks)
        equal = "strict argmax" if export.output_kind == "categorical" else f"within {fmt(task.options.tolerance)}"
        return (
            f"{domain.size()} strings of length {domain.min_length}..{domain.max_length} over "
            f"{{{', '.join(domain.alphabet)}}}: every float32 evaluation of the compiled model (softmax, logits x "
            f"1/sqrt({float_network(export).layers[0][0].key_size if float_network(export).layers else 0}), any "
            f"summation order) decodes its {export.output_kind} output to the RASP program's ({equal}) at every "
            f"position where it is defined ({how}; weight off the argmax set: {leak_text or 'no attention'})"
        )

    def undecided_text(self, task: Task, tokens: tuple[Any, ...]) -> str:
        """Where the enclosure cannot decide an input's decoding, and what two float32 evaluations give there."""
        export = _export(task.options.program)
        rows = np.array([[task.strings().alphabet.index(t) for t in tokens]], dtype=np.int64)
        status, found = self.float_status(task, rows)
        p = int(np.flatnonzero(status[0] == float_decode.UNDECIDED)[0])
        box = enclosure.Box(found.output.lo[0, 1:], found.output.hi[0, 1:])
        expected = run(export.program, tokens_from_symbols(export.program, tokens)).output
        network = float_network(export)
        ours = evaluate_float32(network, network.ids(rows, tuple(task.strings().alphabet))).output[0, 1 + p]
        bounds = ", ".join(
            f"{show(v) if v != 'value' else 'value'} {float_decode.interval_text(box, p, i)}"
            for v, i in _coordinates(export)
        )
        return (
            f"input {format_input(tokens)} at position {witness_position(p)}: the program gives {show(expected[p])}; "
            f"the enclosure of every float32 evaluation ({bounds}) is too wide to decide the decoding (this "
            f"package's float32 evaluation gives {_shown(_decode_float(export, ours))}); a narrower enclosure or "
            "attention: hardmax (tracr's intended computation) may decide it"
        )

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
        import z3

        from ..rasp.symbolic import program_outputs_symbolic
        from ..symbolic.encoder import encode_model
        from ..symbolic.inputs import input_for_length
        from ..symbolic.solve import Query
        from ..symbolic.values import Sym

        export = _export(task.options.program)
        length = plan.key[0]
        inp = input_for_length(task.strings(), length, builder)
        stream = encode_model(task.model, task.arithmetic, inp, builder).output
        program = export.program
        codes, undefined = program_outputs_symbolic(
            program, inp, tokens_from_symbols(program, task.strings().alphabet), builder.tick
        )
        output = program.output_node
        offset = bos_offset(task.model)
        differences = []
        for p in range(length):
            z = stream[p + offset]
            code = z3.IntVal(codes[p]) if isinstance(codes[p], int) else codes[p]
            if export.output_kind == "categorical":
                bad = self._categorical_wrong(export, output, code, z, builder)
            else:
                assert export.output_index is not None  # a numerical output has one coordinate
                index = export.output_index
                bad = z3.Or(
                    [
                        z3.And(code == c, builder.ne(z[index], Sym.const(v)))
                        for c, v in enumerate(output.values)
                        if v is not None
                    ]
                    or [z3.BoolVal(False)]
                )
            differences.append(bad)
        if task.options.policy(export) == "dont-care":  # inputs where the program is undefined are no answer
            return Query(builder.assertions + [z3.Or(differences), z3.Not(undefined)], [inp], builder.stats)
        # fit refused the spec if the program is undefined anywhere in the domain; should one slip through, it
        # is an answer, and its replay reports the program's error
        return Query(builder.assertions + [z3.Or(differences + [undefined])], [inp], builder.stats)

    @staticmethod
    def _categorical_wrong(export: TracrExport, output: Any, code: Any, z: Sequence[Any], builder: Any) -> Any:
        """Defined here and the model does not name the program's value with a strict maximum."""
        import z3

        coordinates = [z[i] for _, i in export.output_space]
        wrong = []
        for c, value in enumerate(output.values):
            if value is None:
                continue
            k = next((k for k, (v, _) in enumerate(export.output_space) if v == value), None)
            if k is None:
                wrong.append(code == c)  # the program's value is not in the output space: never named
                continue
            strict = z3.And(
                [z3.Not(builder.ge(coordinates[j], coordinates[k])) for j in range(len(coordinates)) if j != k]
            )
            wrong.append(z3.And(code == c, z3.Not(strict)))
        return z3.Or(wrong) if wrong else z3.BoolVal(False)

    def replay_query(self, task: Task, plan: QueryPlan, decoded: Any) -> Witness | None:
        return self.violation(task, decoded[0])

    def describe_proof(self, task: Task, proof: Proof) -> str:
        domain: StringDomain = task.strings()
        export = _export(task.options.program)
        statistics = proof.statistics
        how = proof.default if proof.queries is not None else f"{statistics.get('space_size', domain.size())} evaluated"
        if task.model.float_reading:
            return self.describe_float_proof(task, statistics, how)
        return (
            f"{domain.size()} strings of length {domain.min_length}..{domain.max_length} over "
            f"{{{', '.join(domain.alphabet)}}}: the model's {export.output_kind} output equals the RASP "
            f"program's at every position where it is defined ({how})"
        )


def _export(path: Path) -> TracrExport:
    return read_export(path)


FLOAT_READING = "float32 as compiled"
FLOAT_BATCH = 64  # rows per enclosure (exact integers in object arrays: memory, and the deadline's granularity)


def _coordinates(export: TracrExport) -> list[tuple[Value, int]]:
    """The output's coordinates by value: the output space's, or the numerical output's one."""
    if export.output_kind == "categorical":
        return list(export.output_space)
    assert export.output_index is not None  # a numerical output has one coordinate
    return [("value", export.output_index)]


def _decode_float(export: TracrExport, vector: np.ndarray) -> Any:
    """One float32 evaluation's decoded output at a position: the argmax value, a tie, or the numerical value."""
    if export.output_kind == "numerical":
        assert export.output_index is not None  # a numerical output has one coordinate
        return Fraction(float(vector[export.output_index]))
    scores = [vector[i] for _, i in export.output_space]
    best = max(scores)
    winners = [v for (v, _), x in zip(export.output_space, scores) if x == best]
    return winners[0] if len(winners) == 1 else tuple(winners)


def _shown(value: Any) -> str:
    if isinstance(value, tuple):
        return "tie(" + "|".join(show(v) for v in value) + ")"
    if isinstance(value, Fraction) and value.denominator > 1000:
        return f"{float(value):.7g}"  # a float32 evaluation's value, shown (it decides nothing)
    return show(value)


def least_undefined_input(export: TracrExport, domain: StringDomain) -> tuple[str, str] | None:
    """The shortlex-least string of ``domain`` on which the program is undefined, with the reason, or None when
    there is none or the bounded search did not find one (loading has no deadline, so the search has its own).

    The shortest lengths, up to ``LOAD_SCAN_INPUTS`` strings in all, are scanned in order by the batched RASP
    evaluator; longer ones are asked of z3 on the program's own formulas (``rasp.symbolic``), shortest first,
    within ``LOAD_SOLVER_SECONDS`` in all, then minimised letter by letter. What the search leaves undecided is
    met by the check itself: an undefined input there is ``unknown`` saying so (``CannotCheck``), never error."""
    program = export.program
    values = tokens_from_symbols(program, domain.alphabet)
    codes = [_token_codes(program)[v] for v in values]
    scanned, total = [], 0
    for n in domain.lengths:
        total += len(codes) ** n
        if total > LOAD_SCAN_INPUTS:
            break
        scanned.append(n)
    found, _ = least_undefined(program, codes, scanned)
    if found is None:
        deadline = Deadline(LOAD_SOLVER_SECONDS)
        for n in domain.lengths[len(scanned) :]:
            if n == 0:
                continue
            found, decided = _solve_undefined(program, domain, n, deadline)
            if found is not None or not decided:  # a shorter length undecided: no longer input is the least
                break
    if found is None:
        return None
    symbols = tuple(domain.alphabet[codes.index(c)] for c in found)
    try:
        run(program, tokens_from_symbols(program, symbols))
    except RaspError as exc:
        return format_input(symbols), str(exc)
    raise AssertionError(f"the RASP evaluators disagree on {symbols}")  # pragma: no cover (tests/test_rasp.py)


def _solve_undefined(
    program: Any, domain: StringDomain, length: int, deadline: Deadline
) -> tuple[tuple[int, ...] | None, bool]:
    """(the least string of this length where the program is undefined, as codes, or None; whether z3 decided
    within ``deadline``). Out of time while minimising, the last string found is returned (undefined, if not the
    least)."""
    from ..rasp.symbolic import program_outputs_symbolic
    from ..symbolic.inputs import string_input
    from ..symbolic.solve import SAT, UNKNOWN, UNSAT, Session
    from ..symbolic.values import Builder

    if deadline.expired():
        return None, False
    builder = Builder(deadline=deadline)
    inp = string_input(domain.alphabet, length, builder)
    alphabet_values = tokens_from_symbols(program, domain.alphabet)
    try:  # the encoding too stops at the search's deadline (a wide program's formulas take seconds to build)
        _, undefined = program_outputs_symbolic(program, inp, alphabet_values, builder.tick)
    except DeadlineExpired:
        return None, False
    session = Session(deadline)
    session.add(*builder.assertions, undefined)
    answer = session.check()
    if answer != SAT:
        return None, answer == UNSAT

    def witness() -> list[int]:  # the string of the last satisfiable check
        model = session.model()
        return [model.eval(term, model_completion=True).as_long() for term in inp.index_terms]

    found = witness()
    for term in inp.index_terms:  # fix each position to its least symbol that keeps an undefined input
        for symbol in range(len(domain.alphabet)):
            answer = session.check(term == symbol)
            if answer == SAT:
                found = witness()
                session.add(term == symbol)
                break
            if answer == UNKNOWN:  # out of time: the last string found is undefined too (if not the least)
                return _codes_of(program, inp, found), True
    return _codes_of(program, inp, found), True


def _codes_of(program: Any, inp: Any, chosen: list[int]) -> tuple[int, ...]:
    position = {term.get_id(): i for i, term in enumerate(inp.index_terms)}
    word = [str(symbol) for symbol in inp.decode(lambda var: chosen[position[var.get_id()]])]  # a string's letters
    program_codes = _token_codes(program)
    return tuple(program_codes[v] for v in tokens_from_symbols(program, word))


def _token_codes(program: Any) -> dict[Any, int]:
    """The code of each vocabulary value at the program's ``tokens`` node."""
    tokens = program.tokens_node
    assert tokens is not None  # an exported program reads tokens
    codes: dict[Any, int] = tokens.code_of
    return codes


PROPERTY = RaspEquivalence()

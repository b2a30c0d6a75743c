"""Property ``crasp-equivalence``: the model decides exactly what a C-RASP program decides, on every string.

Options: ``program`` (a ``.cr`` file, relative to the spec), ``mode``, ``threshold`` (and, for ``smt``,
``queries``, ``solver``, ``rlimit``).
The model **accepts at position i iff its readout q_i = u·z_i exceeds ``threshold``** (default 0; the
C-RASP compiler builds models with q ≥ 1 on acceptance and q ≤ 0 otherwise). Positions are those of the
word, 1..n; with a BOS token, position i of the word is position i of the model's sequence (BOS is 0).

* ``mode: accept``: for every string w of the domain, the model accepts at the last position of w iff the
  program accepts w (the output holds at the last position). The empty word (``min-length: 0``) is rejected by
  the program; a model with BOS decides it at position 0, a model without BOS rejects it.
* ``mode: prefix`` (the prediction task): for every string of the domain and every position i, the model's
  decision at i equals the program's output at i (whether w_1..w_i is accepted).

Causality: when every attention head is causal (decided from the IR) the computation at position i reads
only positions ≤ i (masked keys get weight 0 and uniform/hardmax/softmax normalise over the allowed keys
only), so the trace of a string restricted to its first i positions is the trace of its length-i prefix.
Then only the strings of the maximal length are examined, and every shorter string is checked as a prefix.

Engines (all exact over the whole domain; every counterexample is re-evaluated on the reference
interpreter and the C-RASP interpreter before it is reported):

* ``enumerate`` (default when the model runs in int64): the batched exact evaluator
  (``verify_tf.engines.batched``) on chunks of strings, the program on the same arrays (counts as
  cumulative sums); a disagreement is replaced by the shortlex-least disagreeing string.
* ``interpret``: one string at a time on the reference interpreter; the same least counterexample.
* ``smt``: the string as symbolic input (``verify_tf.engines.smt``), the program as z3 formulas over the
  same symbols; causal models: one QF_LIA query on the longest strings (``queries: one``) or one per length.

A counterexample names the string, the position, both outputs, and a trace with the program's definitions
and the model's readout side by side at every position.
"""

from __future__ import annotations

import itertools
import math
import time
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..crasp.ast import (ArithOp, BoolConst, BoolOp, Compare, Conditional, Count, CountConst, CraspError, Expr,
                         Letter, MinMax, Neg, Not, Program, Ref, format_alphabet)
from ..crasp.interpreter import run_program
from ..crasp.parser import load_program
from ..domain import StringDomain
from ..ir import AlphabetTokens, Model
from ..semantics import evaluate
from ..spec.schema import Context, Field, FilePath, Number, Obj, String
from ..spec.yamlnodes import Node
from ..verdict import ERROR, PROVED, REFUTED, UNKNOWN, Verdict
from ..witness import ReplayMismatch, input_to_json
from .base import CheckRequest, PropertyDef
from .output_bounds import solver_fields

MODES = ("accept", "prefix")


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


OPTIONS = Obj({
    "program": Field(ProgramFile("the C-RASP program (.cr), relative to the spec's folder"), required=True),
    "mode": Field(String("accept: the decision at the last position of every string; prefix: the decision at "
                         "every position (the prediction task)", MODES), default="accept"),
    "threshold": Field(Number("the model accepts at position i iff its readout q_i > threshold"),
                       default=Fraction(0)),
    "queries": Field(String("smt engine, causal models: one query on the longest strings covering every "
                            "position (measured faster), or one query per length", ("one", "per-length")),
                     default="one"),
    **solver_fields(),
})


# ---------------------------------------------------------------- both sides on one string

def model_decisions(model: Model, trace_readout: list[Fraction], length: int, threshold: Fraction) -> list[bool]:
    """The model's decision at positions 0..length: index i is position i of the word (0: the empty prefix)."""
    offset = 1 if _has_bos(model) else 0
    decisions = [offset == 1 and trace_readout[0] > threshold]
    decisions += [trace_readout[i - 1 + offset] > threshold for i in range(1, length + 1)]
    return decisions


def program_decisions(program: Program, word: str) -> list[bool]:
    """The program's output at positions 0..n (position 0: the empty word, rejected)."""
    return [False, *run_program(program, word).output]


def _has_bos(model: Model) -> bool:
    return isinstance(model.tokens, AlphabetTokens) and model.tokens.bos is not None


def _plan(domain: StringDomain, mode: str, causal: bool) -> list[tuple[int, range]]:
    """(length of the strings to evaluate, positions to check on each).

    accept: position n of every string of length n (position 0: the empty word). prefix: positions 1..n.
    A causal model is evaluated on the maximal length only: position p of w stands for the prefix w_1..w_p.
    """
    if causal:
        top = domain.max_length
        return [(top, range(domain.min_length, top + 1) if mode == "accept" else range(1, top + 1))]
    return [(n, range(n, n + 1) if mode == "accept" else range(1, n + 1)) for n in domain.lengths]


def violation(request: CheckRequest, program: Program, word: str, position: int) -> dict | None:
    """Evaluate ``word`` from scratch on the interpreter; the witness if the decisions at ``position`` differ."""
    threshold = request.options["threshold"]
    trace = evaluate(request.model, request.arithmetic, tuple(word))  # replay from scratch
    model_side = model_decisions(request.model, trace.readout, len(word), threshold)
    program_trace = run_program(program, word)
    program_side = [False, *program_trace.output]
    if model_side[position] == program_side[position]:
        return None
    offset = 1 if _has_bos(request.model) else 0
    readout = [trace.readout[i - 1 + offset] if i - 1 + offset >= 0 else None for i in range(len(word) + 1)]
    rows = []
    for i in range(1, len(word) + 1):
        rows.append({
            "position": i,
            "letter": word[i - 1],
            "program": {name: _plain(program_trace.values[name][i - 1]) for name in program.names},
            "program_output": program_side[i],
            "model_readout": str(readout[i]),
            "model_output": model_side[i],
        })
    verb = {True: "accepts", False: "rejects"}
    shown = readout[position] if readout[position] is not None else "none (no BOS)"
    return {
        "string": word,
        "input": input_to_json(tuple(word)),
        "position": position,
        "mode": request.options["mode"],
        "program_output": program_side[position],
        "model_output": model_side[position],
        "model_readout": str(shown),
        "threshold": str(threshold),
        "trace": rows,
        "summary": f"string {word!r} at position {position}: the program {verb[program_side[position]]}, the "
                   f"model {verb[model_side[position]]} (readout {shown}, accepts iff > {threshold})",
    }


def _plain(value: Any) -> Any:
    return value if isinstance(value, bool) else int(value)


# ---------------------------------------------------------------- what every engine shares

def _setup(request: CheckRequest) -> tuple[Program | None, str | None]:
    """The program, or a message explaining why the check cannot run."""
    try:
        program = load_program(request.options["program"])
    except CraspError as error:
        return None, f"invalid C-RASP program: {error}"
    domain = request.domain
    if not isinstance(domain, StringDomain) or not isinstance(request.model.tokens, AlphabetTokens):
        return None, "crasp-equivalence needs an alphabet model and a strings domain"
    foreign = [symbol for symbol in domain.alphabet if symbol not in program.alphabet]
    if foreign:
        return None, (f"domain symbol {foreign[0]!r} is not in the program's alphabet "
                      f"{format_alphabet(program.alphabet)}")
    return program, None


def _exhaustive_plan(request: CheckRequest) -> tuple[StringDomain, bool, list[tuple[int, range]], int]:
    """What the exhaustive engines walk: (domain, all heads causal, _plan(...), number of strings evaluated)."""
    domain: StringDomain = request.domain  # type: ignore[assignment]
    causal = _all_causal(request.model)
    plan = _plan(domain, request.options["mode"], causal)
    return domain, causal, plan, sum(len(domain.alphabet) ** length for length, _ in plan)


def _all_causal(model: Model) -> bool:
    return all(head.causal for _, _, head in model.heads())


# Finds the shortlex-least string u with lowest <= |u| < |found| that disagrees at its last position, or None.
LeastFinder = Callable[[int, str], "str | None"]


def _refutation(request: CheckRequest, program: Program, engine: str, method: str, word: str, position: int,
                causal: bool, least: LeastFinder, start: float, statistics: dict) -> Verdict:
    """Replay the disagreement of ``word`` at ``position`` on the interpreter and report it.

    For a causal model the prefix up to ``position`` disagrees at its last position, and the least such
    string is searched (shortlex order: shortest first); without causality shorter strings came first already.
    """
    domain: StringDomain = request.domain  # type: ignore[assignment]
    shown, at = word, position
    if causal:
        lowest = domain.min_length if request.options["mode"] == "accept" else 1
        found = least(lowest, word[:position]) or word[:position]
        shown = found + domain.alphabet[0] * max(0, domain.min_length - len(found))  # prefix mode: in the domain
        at = len(found)
    witness = violation(request, program, shown, at)
    if witness is None:
        raise ReplayMismatch(f"crasp-equivalence ({engine}): a disagreement does not replay on the interpreter",
                             claimed=(word, position), replayed=(shown, at))
    return Verdict(request.label, REFUTED, engine, method=method, detail=witness["summary"],
                   seconds=time.perf_counter() - start, counterexample=witness, statistics=statistics)


def _proof_detail(request: CheckRequest, evaluated: int, causal: bool) -> str:
    domain: StringDomain = request.domain  # type: ignore[assignment]
    shortcut = causal and len(domain.lengths) > 1
    how = f"{evaluated} of length {domain.max_length} evaluated, causal: shorter ones are prefixes" if shortcut \
        else f"{evaluated} evaluated"
    where = "the last position" if request.options["mode"] == "accept" else "every position"
    return (f"{domain.size()} strings of length {domain.min_length}..{domain.max_length} agree with "
            f"{Path(request.options['program']).name} at {where} ({how})")


def _timeout(request: CheckRequest, engine: str, evaluated: int, total: int, start: float) -> Verdict:
    return Verdict(request.label, UNKNOWN, engine, detail=f"timeout after {evaluated} of {total} strings",
                   seconds=time.perf_counter() - start,
                   tried=[f"exhaustive enumeration ({engine}: {evaluated}/{total} strings, no disagreement so far)"],
                   statistics={"strings_evaluated": evaluated, "strings_to_evaluate": total})


# ---------------------------------------------------------------- engine interpret: one string at a time

def _sides(request: CheckRequest, program: Program, word: str) -> tuple[list[bool], list[bool]]:
    """The model's and the program's decisions at positions 0..len(word), from one interpreter run."""
    trace = evaluate(request.model, request.arithmetic, tuple(word))
    return (model_decisions(request.model, trace.readout, len(word), request.options["threshold"]),
            program_decisions(program, word))


def check_interpret(request: CheckRequest) -> Verdict:
    start = time.perf_counter()
    program, problem = _setup(request)
    if program is None:
        return Verdict(request.label, ERROR, "interpret", detail=problem)
    domain, causal, plan, total = _exhaustive_plan(request)
    deadline = start + request.timeout

    def least(lowest: int, found: str) -> str | None:
        for length in range(lowest, len(found)):
            for letters in itertools.product(domain.alphabet, repeat=length):
                if time.perf_counter() > deadline:
                    return None  # keep ``found``: a valid counterexample, merely not the least one
                model_side, program_side = _sides(request, program, "".join(letters))
                if model_side[length] != program_side[length]:
                    return "".join(letters)
        return None

    evaluated = checked = 0
    for length, positions in plan:
        for letters in itertools.product(domain.alphabet, repeat=length):
            if time.perf_counter() > deadline:
                return _timeout(request, "interpret", evaluated, total, start)
            word = "".join(letters)
            model_side, program_side = _sides(request, program, word)
            evaluated += 1
            request.tick(evaluated, total)
            for position in positions:
                checked += 1
                if model_side[position] != program_side[position]:
                    return _refutation(request, program, "interpret", "exhaustive", word, position, causal, least,
                                       start, {"strings_evaluated": evaluated, "decisions_checked": checked})
    return Verdict(request.label, PROVED, "interpret", method="exhaustive",
                   detail=_proof_detail(request, evaluated, causal), seconds=time.perf_counter() - start,
                   statistics={"domain_size": domain.size(), "strings_evaluated": evaluated,
                               "decisions_checked": checked, "causal_prefixes": causal})


# ---------------------------------------------------------------- engine enumerate: batched, exact int64

def program_outputs_batched(program: Program, alphabet: tuple[str, ...], rows: np.ndarray) -> np.ndarray:
    """The program's output at positions 0..L of every row (B, L) of symbol indices into ``alphabet``.

    The C-RASP interpreter's rules on whole arrays: letters compare indices, ``#`` is a cumulative sum along
    the positions (the current one included), everything else is elementwise. Column 0 is the empty prefix.
    """
    values: dict[str, np.ndarray] = {}

    def value(expr: Expr) -> np.ndarray:
        match expr:
            case BoolConst(constant):
                return np.full(rows.shape, constant, dtype=bool)
            case CountConst(constant):
                return np.full(rows.shape, constant, dtype=np.int64)
            case Letter(symbol):
                return rows == alphabet.index(symbol) if symbol in alphabet else np.zeros(rows.shape, dtype=bool)
            case Ref(name):
                return values[name]
            case Not(operand):
                return ~value(operand)
            case Neg(operand):
                return -value(operand)
            case Count(operand):
                return np.cumsum(value(operand), axis=1, dtype=np.int64)
            case BoolOp(op, left, right) | Compare(op, left, right) | ArithOp(op, left, right) | \
                    MinMax(op, left, right):
                return _ARRAY_OPERATORS[op](value(left), value(right))
            case Conditional(condition, if_true, if_false):
                return np.where(value(condition), value(if_true), value(if_false))
        raise TypeError(f"not a C-RASP expression: {expr!r}")

    for definition in program.definitions:
        values[definition.name] = value(definition.expr)
    output = values[program.output]
    return np.concatenate([np.zeros((rows.shape[0], 1), dtype=bool), output], axis=1)


_ARRAY_OPERATORS = {
    "&&": np.logical_and, "||": np.logical_or, "<": np.less, "<=": np.less_equal, ">": np.greater,
    ">=": np.greater_equal, "==": np.equal, "!=": np.not_equal, "+": np.add, "-": np.subtract,
    "min": np.minimum, "max": np.maximum,
}


def _model_outputs_batched(request: CheckRequest, evaluator, rows: np.ndarray) -> np.ndarray:
    """The model's decision at positions 0..L of every row (readout numerators against the threshold)."""
    readout = evaluator.values(rows, "readout")
    threshold: Fraction = request.options["threshold"]
    cut = math.floor(threshold * readout.den)  # integer q: q > threshold·den <=> q > floor(threshold·den)
    accepts = np.asarray(readout.numerators) > cut
    if _has_bos(request.model):
        return accepts
    return np.concatenate([np.zeros((rows.shape[0], 1), dtype=bool), accepts], axis=1)


def check_enumerate(request: CheckRequest) -> Verdict:
    from ..engines.batched import BatchedEvaluator, Unsupported, stream_inputs

    start = time.perf_counter()
    program, problem = _setup(request)
    if program is None:
        return Verdict(request.label, ERROR, "enumerate", detail=problem)
    domain, causal, plan, total = _exhaustive_plan(request)
    deadline = start + request.timeout
    evaluator = BatchedEvaluator(request.model, request.arithmetic, domain.tokens, device=request.device)
    try:
        for length in range(1, domain.max_length + 1):
            evaluator.check(length)
    except Unsupported as exc:
        return Verdict(request.label, UNKNOWN, "enumerate", detail=f"not evaluable in int64: {exc}",
                       seconds=time.perf_counter() - start, tried=[f"batched exact evaluation ({exc})"])

    def disagreements(length: int, rows: np.ndarray) -> np.ndarray:
        """(B, length + 1): model and program differ at position p. The empty word goes to the interpreter."""
        if length == 0:
            model_side, program_side = _sides(request, program, "")
            return np.array([[model_side[0] != program_side[0]]] * len(rows))
        model_side = _model_outputs_batched(request, evaluator, rows)
        return model_side != program_outputs_batched(program, domain.alphabet, rows)

    def least(lowest: int, found: str) -> str | None:
        for length in range(lowest, len(found)):
            for piece in stream_inputs(StringDomain(domain.alphabet, length, length)):
                if time.perf_counter() > deadline:
                    return None
                hits = np.flatnonzero(disagreements(length, piece.rows)[:, length])
                if len(hits):
                    return "".join(evaluator.decode(piece.rows[int(hits[0])]))
        return None

    evaluated = checked = 0
    for length, positions in plan:
        chunk = evaluator.chunk_size(length) if length else 1
        for piece in stream_inputs(StringDomain(domain.alphabet, length, length), chunk=chunk):
            if time.perf_counter() > deadline:
                return _timeout(request, "enumerate", evaluated, total, start)
            wrong = disagreements(length, piece.rows)[:, list(positions)]
            evaluated += len(piece.rows)
            checked += wrong.size
            request.tick(evaluated, total)
            if wrong.any():
                row, column = map(int, np.argwhere(wrong)[0])  # first string, then first position
                word = "".join(evaluator.decode(piece.rows[row]))
                return _refutation(request, program, "enumerate", "exhaustive", word, positions[column], causal,
                                   least, start, {"strings_evaluated": evaluated, "backend": evaluator.describe()})
    return Verdict(request.label, PROVED, "enumerate", method="exhaustive",
                   detail=_proof_detail(request, evaluated, causal), seconds=time.perf_counter() - start,
                   statistics={"domain_size": domain.size(), "strings_evaluated": evaluated,
                               "decisions_checked": checked, "causal_prefixes": causal,
                               "backend": evaluator.describe()})


# ---------------------------------------------------------------- engine smt: the string as symbolic input

def program_outputs_symbolic(program: Program, inp) -> list:
    """The program's output at positions 1..L of a symbolic string (``engines.smt.inputs.SymbolicInput``), as
    z3 formulas: letters compare the position's symbol index, ``#`` is a running sum of If(P, 1, 0)."""
    import z3

    length = len(inp.tokens)
    values: dict[str, list] = {}

    def letter(symbol: str, token) -> Any:
        if token.symbol is not None:
            return z3.BoolVal(token.symbol == symbol)
        if symbol not in token.alphabet:
            return z3.BoolVal(False)
        return token.symbol_index == token.alphabet.index(symbol)

    def value(expr: Expr) -> list:
        match expr:
            case BoolConst(constant):
                return [z3.BoolVal(constant)] * length
            case CountConst(constant):
                return [z3.IntVal(constant)] * length
            case Letter(symbol):
                return [letter(symbol, token) for token in inp.tokens]
            case Ref(name):
                return values[name]
            case Not(operand):
                return [z3.Not(x) for x in value(operand)]
            case Neg(operand):
                return [-x for x in value(operand)]
            case Count(operand):
                running, out = z3.IntVal(0), []
                for x in value(operand):
                    running = running + z3.If(x, 1, 0)
                    out.append(running)
                return out
            case BoolOp(op, left, right) | Compare(op, left, right) | ArithOp(op, left, right) | \
                    MinMax(op, left, right):
                return [_SYMBOLIC_OPERATORS[op](a, b) for a, b in zip(value(left), value(right))]
            case Conditional(condition, if_true, if_false):
                return [z3.If(c, a, b) for c, a, b in zip(value(condition), value(if_true), value(if_false))]
        raise TypeError(f"not a C-RASP expression: {expr!r}")

    for definition in program.definitions:
        values[definition.name] = value(definition.expr)
    return values[program.output]


def _symbolic_operators() -> dict:
    import z3

    return {
        "&&": lambda a, b: z3.And(a, b), "||": lambda a, b: z3.Or(a, b), "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "==": lambda a, b: a == b,
        "!=": lambda a, b: a != b, "+": lambda a, b: a + b, "-": lambda a, b: a - b,
        "min": lambda a, b: z3.If(a <= b, a, b), "max": lambda a, b: z3.If(a >= b, a, b),
    }


class _LazyOperators(dict):
    def __missing__(self, key: str):
        self.update(_symbolic_operators())
        return self[key]


_SYMBOLIC_OPERATORS = _LazyOperators()


def _smt_plan(request: CheckRequest, causal: bool) -> list[tuple[int, range]]:
    """(length, positions) of each query. Causal models: one query on the longest strings asking for a
    disagreement at any position (``queries: one``, the default: z3 proved compiled L_3 for N = 8 in 0.6 s
    this way and in 17 s with one query per length), or one query per length n about position n. Other
    models: one query per length."""
    domain: StringDomain = request.domain  # type: ignore[assignment]
    mode = request.options["mode"]
    if causal and request.options["queries"] == "one":
        return _plan(domain, mode, causal)
    if causal:  # length n adds position n: shorter positions are shorter strings' queries
        lowest = domain.min_length if mode == "accept" else 1
        return [(n, range(n, n + 1)) for n in range(lowest, domain.max_length + 1)]
    return _plan(domain, mode, causal)


def _smt_queries(request: CheckRequest, program: Program, causal: bool):
    import z3

    from ..engines.smt.encoder import encode_model
    from ..engines.smt.inputs import input_for_length
    from ..engines.smt.query import Query
    from ..engines.smt.values import Builder, Sym

    threshold = Sym.const(request.options["threshold"])
    offset = 1 if _has_bos(request.model) else 0
    for length, positions in _smt_plan(request, causal):
        start = time.perf_counter()
        builder = Builder()
        inp = input_for_length(request.domain, length, builder)
        readout = encode_model(request.model, request.arithmetic, inp, builder).readout
        program_side = [z3.BoolVal(False), *program_outputs_symbolic(program, inp)]
        differences = []
        for p in positions:
            if p == 0 and offset == 0:
                continue  # no BOS: the empty word is rejected by both
            model_accepts = z3.Not(builder.ge(threshold, readout[p - 1 + offset]))
            differences.append(model_accepts != program_side[p])
        yield Query(name=f"length {length}", assertions=builder.assertions + [z3.Or(differences)], inputs=[inp],
                    replay=lambda inputs, positions=positions: _smt_replay(request, program, causal, inputs[0],
                                                                           positions),
                    stats=builder.stats, encode_seconds=time.perf_counter() - start)


def _smt_replay(request: CheckRequest, program: Program, causal: bool, tokens: tuple, positions: range) -> dict | None:
    """The witness for a solver's string: its first disagreeing checked position, replayed on the interpreter."""
    word = "".join(tokens)
    model_side, program_side = _sides(request, program, word)
    for p in positions:
        if model_side[p] != program_side[p]:
            shown = word
            if causal:  # the prefix decides position p; in prefix mode, pad it back into the domain
                shown = word[:p] + request.domain.alphabet[0] * max(0, request.domain.min_length - p)
            return violation(request, program, shown, p)
    return None


def check_smt(request: CheckRequest) -> Verdict:
    from ..engines.smt.query import run_queries

    program, problem = _setup(request)
    if program is None:
        return Verdict(request.label, ERROR, "smt", detail=problem)
    causal = _all_causal(request.model)
    verdict = run_queries(request, _smt_queries(request, program, causal))
    if verdict.status == PROVED:
        verdict.detail = (f"{request.domain.size()} strings of length {request.domain.min_length}.."
                          f"{request.domain.max_length} agree with {Path(request.options['program']).name}: "
                          f"{verdict.detail}")
    return verdict


ENGINES = {"interpret": check_interpret, "enumerate": check_enumerate, "smt": check_smt}


def run(request: CheckRequest) -> Verdict:
    return ENGINES[request.engine](request)


def choose_engine(request: CheckRequest) -> str:
    """enumerate when the batched evaluator can run the model exactly in int64, else interpret."""
    from ..engines.batched import BatchedEvaluator, Unsupported

    if not isinstance(request.domain, StringDomain) or not isinstance(request.model.tokens, AlphabetTokens):
        return "interpret"
    try:
        evaluator = BatchedEvaluator(request.model, request.arithmetic, request.domain.tokens, device=request.device)
        for length in range(1, request.domain.max_length + 1):
            evaluator.check(length)
    except Unsupported:
        return "interpret"
    return "enumerate"


PROPERTY = PropertyDef(
    name="crasp-equivalence",
    summary="the model accepts exactly what a C-RASP program accepts (last position, or every prefix)",
    options=OPTIONS,
    engines=("enumerate", "interpret", "smt"),
    run=run,
    choose_engine=choose_engine,
)

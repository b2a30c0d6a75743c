"""Property ``crasp-equivalence``: the model decides exactly what a C-RASP program decides, on every string.

Options: ``program`` (a ``.cr`` file, relative to the spec), ``mode`` and ``threshold``.
The model **accepts at position i iff its readout q_i = u·z_i exceeds ``threshold``** (default 0; the
C-RASP compiler builds models with q ≥ 1 on acceptance and q ≤ 0 otherwise). Positions are those of the
word, 1..n; with a BOS token, position i of the word is position i of the model's sequence (BOS is 0).

* ``mode: accept``: for every string w of the domain, the model accepts at the last position of w iff the
  program accepts w (the output holds at the last position). The empty word (``min-length: 0``) is rejected by
  the program; a model with BOS decides it at position 0, a model without BOS rejects it.
* ``mode: prefix`` (the prediction task): for every string of the domain and every position i, the model's
  decision at i equals the program's output at i (whether w_1..w_i is accepted).

Engine ``interpret`` (exhaustive, a proof for the whole domain): every string is evaluated on the reference
interpreter. When every attention head is causal (decided from the IR) the computation at position i reads
only positions ≤ i (masked keys get weight 0 and uniform/hardmax/softmax normalise over the allowed keys
only), so the trace of a string restricted to its first i positions is the trace of its length-i prefix:
then only the strings of the maximal length are evaluated, and every shorter string is checked as a prefix.
A counterexample is re-evaluated from scratch before it is reported.

A counterexample names the string, the position, both outputs, and a trace with the program's definitions
and the model's readout side by side at every position.
"""

from __future__ import annotations

import itertools
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..crasp.ast import CraspError, Program, format_alphabet
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


# ---------------------------------------------------------------- the exhaustive engine

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


def _all_causal(model: Model) -> bool:
    return all(head.causal for _, _, head in model.heads())


def _sides(request: CheckRequest, program: Program, word: str) -> tuple[list[bool], list[bool]]:
    """The model's and the program's decisions at positions 0..len(word), from one interpreter run."""
    trace = evaluate(request.model, request.arithmetic, tuple(word))
    return (model_decisions(request.model, trace.readout, len(word), request.options["threshold"]),
            program_decisions(program, word))


def _least_disagreement(request: CheckRequest, program: Program, lowest: int, found: str,
                        deadline: float) -> str:
    """The shortlex-least string u (|u| ≥ lowest) whose decisions differ at its last position.

    ``found`` is such a string. Strings shorter than it are evaluated in shortlex order; past the deadline
    ``found`` is kept (it is a valid counterexample, merely not the least one).
    """
    alphabet = request.domain.alphabet
    for length in range(lowest, len(found)):
        for letters in itertools.product(alphabet, repeat=length):
            if time.perf_counter() > deadline:
                return found
            model_side, program_side = _sides(request, program, "".join(letters))
            if model_side[length] != program_side[length]:
                return "".join(letters)
    return found


def check_interpret(request: CheckRequest) -> Verdict:
    start = time.perf_counter()
    program, problem = _setup(request)
    if program is None:
        return Verdict(request.label, ERROR, "interpret", detail=problem)
    domain: StringDomain = request.domain  # type: ignore[assignment]
    mode = request.options["mode"]
    causal = _all_causal(request.model)
    plan = _plan(domain, mode, causal)
    total = sum(len(domain.alphabet) ** length for length, _ in plan)
    deadline = start + request.timeout
    evaluated = checked = 0
    for length, positions in plan:
        for letters in itertools.product(domain.alphabet, repeat=length):
            if time.perf_counter() > deadline:
                return Verdict(
                    request.label, UNKNOWN, "interpret", detail=f"timeout after {evaluated} of {total} strings",
                    seconds=time.perf_counter() - start,
                    tried=[f"exhaustive enumeration on the interpreter ({evaluated}/{total} strings)"],
                    statistics={"strings_evaluated": evaluated, "strings_to_evaluate": total})
            word = "".join(letters)
            model_side, program_side = _sides(request, program, word)
            evaluated += 1
            request.tick(evaluated, total)
            for position in positions:
                checked += 1
                if model_side[position] == program_side[position]:
                    continue
                shown, at = word, position  # without causality: shortest strings come first already
                if causal:  # the prefix up to ``position`` disagrees at its last position; find the least one
                    lowest = domain.min_length if mode == "accept" else 1
                    least = _least_disagreement(request, program, lowest, word[:position], deadline)
                    shown = least + domain.alphabet[0] * max(0, domain.min_length - len(least))  # prefix mode
                    at = len(least)
                witness = violation(request, program, shown, at)
                if witness is None:
                    raise ReplayMismatch("crasp-equivalence: a disagreement found on a longer string does not "
                                         "replay on its prefix", claimed=(word, position), replayed=(shown, at))
                return Verdict(request.label, REFUTED, "interpret", method="exhaustive",
                               detail=witness["summary"], seconds=time.perf_counter() - start,
                               counterexample=witness,
                               statistics={"strings_evaluated": evaluated, "decisions_checked": checked})
    shortcut = causal and len(domain.lengths) > 1
    how = (f"evaluated the {evaluated} of length {domain.max_length}: every head is causal, so shorter strings "
           f"are their prefixes" if shortcut else f"evaluated {evaluated}")
    where = "the last position" if mode == "accept" else "every position"
    return Verdict(request.label, PROVED, "interpret", method="exhaustive",
                   detail=f"{domain.size()} strings of length {domain.min_length}..{domain.max_length} agree with "
                          f"{Path(request.options['program']).name} at {where} ({how})",
                   seconds=time.perf_counter() - start,
                   statistics={"domain_size": domain.size(), "strings_evaluated": evaluated,
                               "decisions_checked": checked, "causal_prefixes": shortcut})


PROPERTY = PropertyDef(
    name="crasp-equivalence",
    summary="the model accepts exactly what a C-RASP program accepts (last position, or every prefix)",
    options=OPTIONS,
    engines=("interpret",),
    run=check_interpret,
)

"""``crasp-equivalence``'s positions and words (which prefixes a word stands for, the padded lengths a causal
model's words are evaluated at), its witness, its solver query and the wording of its fixed-point proof
(``properties.crasp_equivalence`` is the property; docs there)."""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..contract import Proof, QueryPlan, Task, Witness
from ..crasp.ast import Program
from ..crasp.machine import ProgramMachine
from ..crasp.parser import load_program
from ..domain import StringDomain
from ..ir import Model
from ..witness import input_to_json
from .base import BOS, bos_offset

if TYPE_CHECKING:  # solver types: z3 and the encoder are imported when a solver query is built
    from ..symbolic.solve import Query


def position_label(prefix: int) -> int | str:
    """The witness's name for the decision on the prefix of this length: its last letter's position, or BOS."""
    return BOS if prefix == 0 else prefix - 1


def prefix_length(label: int | str) -> int:
    return 0 if label == BOS else int(label) + 1


def all_causal(model: Model) -> bool:
    return all(head.causal for _, _, head in model.heads())


def restricted(task: Task) -> bool:
    """Whether the domain is the words of a regular language (every word is enumerated itself, in the domain's
    order: no prefix of a word stands for a shorter word, which need not be a word of the language)."""
    return task.strings().language is not None


PADDED_BATCH = 256  # rows per batch when words are evaluated padded (``padded``)


def padded_length(task: Task, length: int) -> int:
    """The length a word of ``length`` letters is padded to: the least of 8, 16, 32, ... and the domain's
    ``max-length`` that holds it (a program is compiled per padded length only, when first needed)."""
    longest = task.strings().max_length
    bucket = 8
    while bucket < length:
        bucket *= 2
    return min(bucket, longest) if length <= longest else length


def padded(task: Task) -> bool:
    """Whether a word of the language is evaluated padded to the domain's ``max-length`` (one compiled program,
    not one per length): only for causal models, whose positions < n do not read the padding (module docstring)."""
    return restricted(task) and all_causal(task.model)


def checked_positions(task: Task, length: int) -> range:
    """The positions of a word of this length that the property constrains (see the module docstring)."""
    if task.options.mode == "prefix":
        return range(1, length + 1)
    if all_causal(task.model) and not restricted(
        task
    ):  # position p stands for the prefix of length p, a word of the domain
        return range(max(task.strings().min_length, 0), length + 1)
    return range(length, length + 1)


def size_text(domain: StringDomain) -> int | str:
    """The number of strings; beyond 18 digits "about 10^k" (the counting engine reaches lengths whose
    string counts have thousands of digits, more than Python prints or JSON holds)."""
    size = domain.size()
    if size < 10**18:
        return size
    return f"about 10^{int(size.bit_length() * math.log10(2))}"


def program_of(path: Path) -> Program:
    return _parsed(path, path.read_bytes())


def machine_of(path: Path) -> ProgramMachine:
    return _machine(path, path.read_bytes())


# keyed by the file's bytes as well as its path: a program rewritten in one process (``crasp extract``'s rounds, a
# notebook) is read anew
@lru_cache(maxsize=32)
def _parsed(path: Path, source: bytes) -> Program:
    return load_program(path)


@lru_cache(maxsize=32)
def _machine(path: Path, source: bytes) -> ProgramMachine:
    return ProgramMachine(_parsed(path, source))


def plain(value: Any) -> Any:
    return value if isinstance(value, bool) else int(value)


def witness_of(task: Task, program: Program, word: str, position: int, decisions: tuple[Any, ...]) -> Witness:
    """The witness at ``position`` of ``word`` from both sides' ``decisions`` (``CraspEquivalence.decisions``)."""
    model_side, program_side, trace, program_trace = decisions
    offset = bos_offset(task.model)
    readout = [trace.readout[i - 1 + offset] if i - 1 + offset >= 0 else None for i in range(len(word) + 1)]
    rows = [
        {
            "position": i - 1,
            "letter": word[i - 1],
            "program": {name: plain(program_trace.values[name][i - 1]) for name in program.names},
            "program_output": program_side[i],
            "model_readout": str(readout[i]),
            "model_output": model_side[i],
        }
        for i in range(1, len(word) + 1)
    ]
    verb = {True: "accepts", False: "rejects"}
    shown = readout[position] if readout[position] is not None else "none (no BOS)"
    threshold = task.options.threshold
    label = position_label(position)
    return {
        "string": word,
        "input": input_to_json(tuple(word)),
        "position": label,
        "mode": task.options.mode,
        "program_output": program_side[position],
        "model_output": model_side[position],
        "model_readout": str(shown),
        "threshold": str(threshold),
        "trace": rows,
        "summary": f"string {word!r} at position {label}: the program {verb[program_side[position]]}, "
        f"the model {verb[model_side[position]]} (readout {shown}, accepts iff > {threshold})",
    }


def build_query(task: Task, plan: QueryPlan, builder: Any) -> Query:
    import z3

    from ..crasp.formulas import program_outputs_symbolic
    from ..symbolic.encoder import encode_model
    from ..symbolic.inputs import input_for_length
    from ..symbolic.solve import Query
    from ..symbolic.values import Sym

    length = plan.key[0]
    inp = input_for_length(task.strings(), length, builder)
    readout = encode_model(task.model, task.arithmetic, inp, builder).readout
    program_side = [z3.BoolVal(False), *program_outputs_symbolic(program_of(task.options.program), inp)]
    threshold, offset = Sym.const(task.options.threshold), bos_offset(task.model)
    positions = checked_positions(task, length)
    if all_causal(task.model) and task.options.queries != "one" and task.options.mode == "accept":
        positions = range(length, length + 1)
    differences = [
        z3.Not(builder.ge(threshold, readout[p - 1 + offset])) != program_side[p] for p in positions if p > 0 or offset
    ]
    return Query(builder.assertions + [z3.Or(differences)], [inp], builder.stats)


def fixed_point_proof(task: Task, proof: Proof) -> str:
    """The proof in the words of the claim (the float reading adds its clause: ``describe_proof``)."""
    domain: StringDomain = task.strings()
    default, statistics = proof.default, proof.statistics
    where = "the last position" if task.options.mode == "accept" else "every position"
    if proof.every_length:
        first = 1 if task.options.mode == "prefix" else max(domain.min_length, 0)
        return (
            f"every string over {{{', '.join(domain.alphabet)}}} of every length >= {first} agrees with "
            f"{Path(task.options.program).name} at {where} ({default})"
        )
    if domain.language is not None:
        how = default if proof.counted is not None else "every word evaluated"
        return (
            f"{size_text(domain)} {domain.describe()} agree with {Path(task.options.program).name} at {where} ({how})"
        )
    if proof.queries is not None or proof.counted is not None:
        how = default
    elif all_causal(task.model) and len(domain.lengths) > 1:
        how = (
            f"{statistics.get('space_size')} of length {domain.max_length} evaluated, causal: shorter ones are prefixes"
        )
    else:
        how = f"{statistics.get('space_size')} evaluated"
    return (
        f"{size_text(domain)} strings of length {domain.min_length}..{domain.max_length} agree with "
        f"{Path(task.options.program).name} at {where} ({how})"
    )

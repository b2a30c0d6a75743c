"""``rasp-equivalence``'s solver query: the model's final stream (``symbolic.encoder``) and the RASP program's
output (``rasp.symbolic``) over the same symbolic input of one length; satisfiable where the model's decoded
output differs from the program's at a defined position (or, policy error, where the program is undefined)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..builders.tracr_import import TracrExport, read_export
from ..contract import QueryPlan, Task
from ..rasp.interpreter import tokens_from_symbols
from .base import bos_offset

if TYPE_CHECKING:  # solver types: z3 and the encoder are imported when a solver query is built
    from ..symbolic.solve import Query


def build_query(task: Task, plan: QueryPlan, builder: Any) -> Query:
    import z3

    from ..rasp.symbolic import program_outputs_symbolic
    from ..symbolic.encoder import encode_model
    from ..symbolic.inputs import input_for_length
    from ..symbolic.solve import Query
    from ..symbolic.values import Sym

    export = read_export(task.options.program)
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
            bad = categorical_wrong(export, output, code, z, builder)
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


def categorical_wrong(export: TracrExport, output: Any, code: Any, z: Sequence[Any], builder: Any) -> Any:
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
        strict = z3.And([z3.Not(builder.ge(coordinates[j], coordinates[k])) for j in range(len(coordinates)) if j != k])
        wrong.append(z3.And(code == c, z3.Not(strict)))
    return z3.Or(wrong) if wrong else z3.BoolVal(False)

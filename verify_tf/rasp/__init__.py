"""RASP programs as plain data (tracr's RASP, tabulated by ``verify_tf.tracr_export``) and their exact evaluation.

:mod:`.program` holds the data (a DAG of operations whose functions are tables over finite value sets) and
its JSON form, :mod:`.interpreter` evaluates one input exactly, :mod:`.batched` evaluates many with numpy.
Loading a program never runs code: the functions were tabulated when the program was exported.
"""

from verify_tf.rasp.interpreter import ProgramTrace, run, tokens_from_symbols
from verify_tf.rasp.program import (
    RAISED,
    Node,
    ProgramError,
    RaspError,
    RaspProgram,
    Value,
    program_from_json,
    program_to_json,
    show,
    symbol_of,
    value_from_json,
    value_to_json,
)

__all__ = [
    "RAISED",
    "Node",
    "ProgramError",
    "ProgramTrace",
    "RaspError",
    "RaspProgram",
    "Value",
    "program_from_json",
    "program_to_json",
    "run",
    "show",
    "symbol_of",
    "tokens_from_symbols",
    "value_from_json",
    "value_to_json",
]

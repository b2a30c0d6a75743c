"""C-RASP: the counting language of Yang, Cadilhac and Chiang (2025), "Knee-Deep in C-RASP".

A C-RASP program is a list of named definitions over a word w_0..w_{n-1}.  Boolean
vectors come from letter tests, ``!``, ``&&``, ``||`` and comparisons of
counts, and unary positional predicates; count vectors from prefix counts
``#P`` (the current position included), guarded counts ``#[g] P`` (only the j
with g(i, j)), integer constants, constant multiples ``k*C``, ``+``, ``-``,
``min``, ``max`` and ``P ? C1 : C2`` (also written ``C1 if P else C2``).
A word is accepted iff the boolean output holds at its last position.

This package holds the syntax tree (:mod:`.ast`), the parser for ``.cr`` files
(:mod:`.parser`), positional predicates (:mod:`.positions`), the reference
interpreter (:mod:`.interpreter`), program
depth (:mod:`.depth`), the depth-k programs for the languages L_k
(:mod:`.languages`) and the ``crasp`` command group (:mod:`.cli`).  See
``docs/crasp.md``.
"""

from verify_tf.crasp.ast import (
    ArithOp,
    BoolConst,
    BoolOp,
    Compare,
    Conditional,
    Count,
    CountConst,
    CraspError,
    Definition,
    Expr,
    GuardedCount,
    Letter,
    MinMax,
    Neg,
    Not,
    PositionTest,
    Program,
    Ref,
    Scale,
    Type,
    format_expr,
    format_program,
)
from verify_tf.crasp.depth import definition_depths, expression_depth, program_depth
from verify_tf.crasp.interpreter import Trace, accepts, evaluate, run_program
from verify_tf.crasp.languages import in_lk, lk_program, lk_regex, lk_source
from verify_tf.crasp.parser import load_program, parse_program
from verify_tf.crasp.positions import Predicate

__all__ = [
    "ArithOp",
    "BoolConst",
    "BoolOp",
    "Compare",
    "Conditional",
    "Count",
    "CountConst",
    "CraspError",
    "Definition",
    "Expr",
    "GuardedCount",
    "Letter",
    "MinMax",
    "Neg",
    "Not",
    "PositionTest",
    "Predicate",
    "Program",
    "Ref",
    "Scale",
    "Trace",
    "Type",
    "accepts",
    "definition_depths",
    "evaluate",
    "expression_depth",
    "format_expr",
    "format_program",
    "in_lk",
    "lk_program",
    "lk_regex",
    "lk_source",
    "load_program",
    "parse_program",
    "program_depth",
    "run_program",
]

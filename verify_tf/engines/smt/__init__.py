"""Engine ``smt``: the property's solver queries (``Solvable``), one work unit each, over the exact encoding of
``verify_tf.symbolic`` (the interpreter written over z3 terms, QF_LIA).

The driver owns the solver lifecycle for every property: a fresh solver per query, the solver choice
(``z3``, ``cvc5``, ``bitwuzla``, ``portfolio``), ``rlimit``, the time each query gets, ``--smt2`` export,
``--minimize`` (lexicographically smallest input), decoding, replay on the reference interpreter, and the
verdict: every query unsat → proved; the first replayed sat → refuted; otherwise unknown saying which queries
ran, how they ended, and which never started.

Time: queries that run one after another (one worker) first get a fair share each (the remaining time over the
queries left); queries that ran out of time get a second turn with whatever is left at the end. With several
workers every query may use all the remaining time. Encoding counts against the deadline too (the builder
checks it), so ``--timeout`` bounds the whole property.
"""

from __future__ import annotations

from ...contract import Solvable, Task, capability
from ...semantics import UnsupportedInMode
from ...verdict import Verdict
from ...work import Deadline
from ..base import Run
from ..cost import SYMBOLIC

ENGINE = "smt"
NEEDS = (Solvable,)
PREFERENCE = 4
ROLE = SYMBOLIC
CERTIFICATES = ("smt",)


def check(task: Task, run: Run) -> Verdict:
    """Run the driver (``driver.py``: imported when the engine runs, so that a check loads only its engines)."""
    from . import driver

    return driver.check(task, run)


def refusal(task: Task) -> str | None:
    """Why the property's queries cannot encode this task (the float reading of a tracr export), or None: ``auto``
    then never picks smt (it picked it for a float reading and answered unknown with most of the budget unused)."""
    try:
        capability(task.prop, Solvable).smt_queries(task)
    except UnsupportedInMode as exc:
        return str(exc)
    return None


def derive_queries(task: Task, deadline: Deadline) -> list[tuple[str, str]]:
    """Every query of the property as SMT-LIB text, encoded and never solved (audit compares a certificate's)."""
    from . import driver

    return driver.encoded_queries(task, deadline)

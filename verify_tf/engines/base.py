"""What every engine driver shares: the task (one property check as plain data), the run context (executor,
deadline, progress), the protocols a property implements for each engine, and verdict assembly.

Properties are declarative (``verify_tf.properties``): they say what a violation is, what to enumerate and
which solver queries to ask. Drivers (``engines/<name>/driver.py``) own everything about *running*:
enumeration order, work units, the deadline, progress, the solver lifecycle, replay of every counterexample
on the reference interpreter, minimisation and the verdict. An engine never imports another engine or a
property; it sees a property only through the protocols below (the property object travels inside the
``Task``, pickled by reference to its class).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..domain import Domain
from ..ir import Model, Token
from ..ir.plain import model_to_dict
from ..semantics import Arithmetic
from ..spaces import InputSpace
from ..verdict import ERROR, PROVED, REFUTED, UNKNOWN, Verdict
from ..witness import ReplayMismatch
from ..work import Deadline, Executor

Witness = dict[str, Any]  # JSON-ready, with a one-line "summary"; produced by replay on the interpreter


@dataclass(frozen=True)
class Settings:
    """Engine settings of one check (spec, property and command line merged)."""

    seed: int = 0
    minimize: bool = False
    device: str = "auto"
    solver: str = "z3"
    rlimit: int | None = None
    samples: int = 100_000
    smt2_dir: str | None = None
    certify: bool = False  # keep what a certificate needs (queries asked, outputs digest) in the statistics


# Statistics keys the certificate module (verify_tf/certify) reads and removes before the report is written
CERTIFY_QUERIES = "certify_queries"  # [{"name", "smt2", "answer"}]: every solver query a proof asked
CERTIFY_COUNTING = "certify_counting"  # engine counting: what its exploration covered (certify.counting)
OUTPUTS_DIGEST = "outputs_sha256"  # exhaustive runs: sha256 over the evaluated outputs, in input order


@dataclass(frozen=True)
class Task:
    """One property check as plain, picklable data: everything a work unit needs, in any process."""

    label: str  # the property's name as written in the spec
    prop: Any  # the property object (declarative; see the protocols below)
    options: Any  # its typed options
    model: Model
    arithmetic: Arithmetic
    domain: Domain | None
    settings: Settings = field(default_factory=Settings)
    fingerprint: str = ""  # content hash of model, arithmetic and domain: caches compiled evaluators

    @staticmethod
    def make(
        label: str,
        prop: Any,
        options: Any,
        model: Model,
        arithmetic: Arithmetic,
        domain: Domain | None,
        settings: Settings | None = None,
    ) -> Task:
        digest = hashlib.sha256(
            json.dumps([model_to_dict(model), repr(arithmetic), repr(domain)], default=str).encode()
        ).hexdigest()[:16]
        return Task(label, prop, options, model, arithmetic, domain, settings or Settings(), digest)


@dataclass(frozen=True)
class ProgressEvent:
    engine: str
    phase: str  # e.g. "enumerating", "encoding query 3/15", "solving query 3/15"
    done: float = 0
    total: float | None = None
    unit: str = ""  # inputs, queries, steps, cubes, samples


Progress = Callable[[ProgressEvent], None]


def no_progress(event: ProgressEvent) -> None:
    pass


@dataclass
class Run:
    """The context of one property check: where units run, the one deadline, where progress goes."""

    executor: Executor
    deadline: Deadline
    progress: Progress = no_progress


# ---------------------------------------------------------------- what engines ask of a property


@runtime_checkable
class EachInput(Protocol):
    """∀ x in the input space: no violation at x. Engines: interpret, enumerate, search (and smt, split)."""

    def input_space(self, task: Task) -> InputSpace: ...

    def violation(self, task: Task, tokens: tuple[Token, ...]) -> Witness | None:
        """Evaluate x on the reference interpreter; the witness when x violates the property."""
        ...


class DistinctValues(Protocol):
    """Values q(x)_i of every (input, position) pairwise separated (Yun et al.'s contextual mapping)."""

    def input_space(self, task: Task) -> InputSpace: ...

    def values(self, task: Task, tokens: tuple[Token, ...]) -> list[Fraction]: ...

    def too_close(self, task: Task, gap: Fraction) -> bool: ...

    def exempt_pairs(self, task: Task) -> bool:
        """Whether keys of two different inputs that are permutations of each other are exempt."""
        ...

    def pair_witness(self, task: Task, first: tuple, i: int, second: tuple, j: int) -> Witness:
        """Replay the pair on the interpreter (raises ReplayMismatch when it is not a violation)."""
        ...


@dataclass(frozen=True)
class QueryPlan:
    """One solver question, as plain data: built by the property inside a work unit."""

    name: str
    key: tuple = ()  # property-specific parameters (length, transposition, ...)


class Solvable(Protocol):
    """Engine smt: the violation as solver queries; all unsat proves the property."""

    def smt_queries(self, task: Task) -> Sequence[QueryPlan]: ...

    def build_query(self, task: Task, plan: QueryPlan, builder: Any) -> Any:
        """A ``symbolic.solve.Query`` (assertions, symbolic inputs, optional decode) for this plan."""
        ...

    def replay_query(self, task: Task, plan: QueryPlan, decoded: Any) -> Witness | None:
        """The solver's decoded answer replayed on the interpreter: the witness, or None."""
        ...


class CounterMachine(Protocol):
    """Engine counting: a reference that reads a word letter by letter with a tuple of integer counts as state
    (``crasp.machine.ProgramMachine`` is one). Its output at a position is a function of the counts before it
    and the letter, and ``key`` maps counts to what every later output depends on (exactly)."""

    names: tuple[str, ...]  # one per count, for invariants and counterexamples
    initial: tuple[int, ...]  # the counts of the empty prefix (whose output is "reject")

    def step(self, counts: tuple[int, ...], letter: str) -> tuple[tuple[int, ...], bool]: ...

    def key(self, counts: tuple[int, ...]) -> tuple: ...

    def encode_step(self, counts: list, letter: str) -> tuple[list, Any]:
        """``step`` over z3 integer terms: (next counts, output) as z3 terms."""
        ...


@dataclass(frozen=True)
class CountingGoal:
    """Engine counting: what the property asks at the end of every prefix of every string over ``alphabet``
    (of length ``min_length``..``max_length``, or of every length >= ``min_length`` when ``all_lengths``).

    A causal model decides position p − 1 of a string exactly as in its prefix of length p, so the engine checks
    prefixes. The property answers, for a prefix, whether the model's observation there (``Observation``: its
    readout and final stream; None for the empty prefix of a model without BOS) together with the ``reference``'s
    output violates it (``prefix_violates(task, ours, theirs)``). ``reference`` is read letter by letter beside
    the model: None (nothing: theirs is None), a ``CounterMachine`` (theirs: its output, False on the empty
    prefix; ``crasp.machine.ProgramMachine`` is one) or a ``Model`` (a second causal model in the same arithmetic,
    run as a counter machine too: theirs is its ``Observation``).

    Which prefixes a string of length n constrains: length 0 (the BOS position, or the empty word) when
    ``empty_checked``; with ``positions`` None every length p with ``first_position`` <= p <= n, else the
    prefixes ending at the chosen user positions (0 is the first letter, negative ones count from the end).
    The refutation shows, with ``least: string``, the shortlex-least string of the domain with a violation (as
    string enumeration does), with ``least: prefix`` the shortlex-least violating prefix (the property pads it
    in ``violation``).
    """

    alphabet: tuple[str, ...]
    min_length: int
    max_length: int
    all_lengths: bool = False
    reference: Any = None
    first_position: int = 1
    positions: tuple[int, ...] | None = None
    empty_checked: bool = False
    least: str = "string"

    def checked(self, length: int) -> set[int]:
        """The prefix lengths a string of ``length`` letters constrains."""
        found = {0} if self.empty_checked else set()
        if self.positions is None:
            return found | set(range(max(self.first_position, 0), length + 1))
        return found | {p % length + 1 for p in self.positions if -length <= p < length}

    def ever_checked(self) -> tuple[frozenset[int], int | None]:
        """The prefix lengths some string of some length >= ``min_length`` constrains: (the finitely many
        below the threshold, the threshold from which every length is constrained, or None)."""
        few = {0} if self.empty_checked else set()
        if self.positions is None:
            return frozenset(few), max(self.first_position, 0)
        start = None
        for p in self.positions:
            if p >= 0:
                few.add(p + 1)
            else:  # p = -k: prefix n - k + 1 of every string of length n >= max(k, min_length)
                first = max(-p, self.min_length) + p + 1
                start = first if start is None else min(start, first)
        return frozenset(few), start


# ---------------------------------------------------------------- verdict assembly


def verdict(
    task: Task,
    run: Run,
    status: str,
    engine: str,
    *,
    method: str = "",
    detail: str = "",
    witness: Witness | None = None,
    statistics: dict | None = None,
    tried: Sequence[str] = (),
) -> Verdict:
    return Verdict(
        task.label,
        status,
        engine,
        method=method,
        detail=detail,
        seconds=run.deadline.elapsed(),
        counterexample=witness,
        statistics=dict(statistics or {}),
        tried=list(tried),
    )


def proved(task: Task, run: Run, engine: str, method: str, detail: str, statistics: dict | None = None) -> Verdict:
    return verdict(task, run, PROVED, engine, method=method, detail=detail, statistics=statistics)


def refuted(
    task: Task, run: Run, engine: str, method: str, witness: Witness, statistics: dict | None = None
) -> Verdict:
    return verdict(
        task,
        run,
        REFUTED,
        engine,
        method=method,
        detail=witness.get("summary", "counterexample"),
        witness=witness,
        statistics=statistics,
    )


def unknown(
    task: Task,
    run: Run,
    engine: str,
    detail: str,
    tried: Sequence[str],
    statistics: dict | None = None,
    method: str = "",
) -> Verdict:
    return verdict(
        task, run, UNKNOWN, engine, method=method, detail=detail, statistics=statistics, tried=tried or [detail]
    )


def error(task: Task, run: Run, engine: str, detail: str, statistics: dict | None = None) -> Verdict:
    return verdict(task, run, ERROR, engine, detail=detail, statistics=statistics)


def describe_proof(task: Task, engine: str, default: str, statistics: dict) -> str:
    """The proved verdict's one-line detail: the property's own wording (``describe_proof``) or ``default``."""
    describe = getattr(task.prop, "describe_proof", None)
    return describe(task, engine, default, statistics) if describe is not None else default


def replayed(task: Task, tokens: tuple[Token, ...], claim: str) -> Witness:
    """The property's witness for ``tokens`` from the reference interpreter; an engine bug if there is none."""
    witness = task.prop.violation(task, tokens)
    if witness is None:
        raise ReplayMismatch(
            f"{task.label}: {claim}, but the reference interpreter finds no violation",
            claimed=claim,
            replayed="no violation",
        )
    return witness


def smt2_path(task: Task, index: int, name: str) -> Path | None:
    if task.settings.smt2_dir is None:
        return None
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{task.label}-{index}-{name}")[:120]
    return Path(task.settings.smt2_dir) / f"{stem}.smt2"

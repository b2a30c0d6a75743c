"""The contract between properties and engines: the task, its settings, the small base every property extends,
the capability protocols it may offer, and the plain data they exchange.

It sits below both (``verify_tf.properties`` and ``verify_tf.engines`` import it; it imports neither), so a
property never needs an engine's module and an engine sees a property only through the contract. A property
says what it means: typed options, the domain, a violation predicate, and the capabilities it offers
(``EachInput``, ``Batched``, ``Solvable``, ``Counted``, ``ArchitectureClass``, ...: one class each, below). An
engine's card says which capabilities it needs (``NEEDS``) and which it uses when offered (``USES``); the registry
(``verify_tf.engines.supporting``) matches properties to engines from them, and no property names an engine. An
engine owns how a claim is run (enumeration order, work units, the deadline, progress, solver lifecycle, replay,
the merge rule, verdicts, certificates).

A capability's abstract hooks are required: a property class that extends it without them cannot be built
(``tests/test_contract.py`` checks every shipped property); its other hooks have defaults that do nothing (no
candidates, no measures). docs/architecture.md's capability table is generated from these classes
(``verify_tf.engines.capability_table``; a test compares).
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np

from .domain import Domain, GridDomain, StringDomain
from .fingerprint import digest, model_digest
from .ir import Model, Token, Vector
from .regular import Language
from .schema.dsl import Obj
from .semantics import Arithmetic, Trace
from .spaces import InputSpace
from .work import Deadline

if TYPE_CHECKING:
    import numpy.typing as npt
    import z3

    from .batched import BatchedEvaluator
    from .bounds import Bounds
    from .symbolic.solve import Query
    from .symbolic.values import Builder

Witness = dict[str, Any]  # JSON-ready, with a one-line "summary"; produced by replay on the interpreter
Inputs = tuple[Token, ...]  # one input: the user's tokens (a BOS token is added by the model)
if TYPE_CHECKING:
    Array = npt.NDArray[Any]  # token-index rows (B, n), exact numerators, flags (B,) ...
else:
    Array = np.ndarray  # (numpy.typing is not imported to run a check)
Measures = dict[str, tuple[Array, int]]  # name -> (numerators per row, their denominator)

HOLDS, VIOLATED, OPEN = "holds", "violated", "open"  # what a cube's bounds say (``decide_on_bounds``)


DEFAULT_SAMPLES = 100_000  # the search engine's budget when a spec gives none


@dataclass(frozen=True)
class Settings:
    """Engine settings of one check (spec, property and command line merged)."""

    seed: int = 0
    minimize: bool = False
    device: str = "auto"
    solver: str = "z3"
    rlimit: int | None = None
    samples: int = DEFAULT_SAMPLES
    smt2_dir: str | None = None
    certify: bool = False  # keep what a certificate needs (queries asked, outputs digest) in ``Verdict.evidence``
    memory: int | None = None  # --memory: bytes of working memory per process (batches, the scan's runs); None: 256 MiB
    spill_dir: str | None = None  # where the scan spills sorted runs (None: the system's temporary folder)


@dataclass(frozen=True)
class Task:
    """One property check as plain, picklable data: everything a work unit needs, in any process."""

    label: str  # the property's name as written in the spec
    prop: Property  # the property object (stateless; pickled by reference to its class)
    options: Any  # its typed options: the property's own frozen dataclass
    model: Model
    arithmetic: Arithmetic
    domain: Domain | None
    settings: Settings = field(default_factory=Settings)
    fingerprint: str = ""  # content hash of model, arithmetic and domain: caches compiled evaluators
    spec: str = ""  # where the property comes from (the spec file, and its index there), for the verdict
    index: int = 0

    @staticmethod
    def make(
        label: str,
        prop: Property,
        options: Any,
        model: Model,
        arithmetic: Arithmetic,
        domain: Domain | None,
        settings: Settings | None = None,
        spec: str = "",
        index: int = 0,
    ) -> Task:
        fingerprint = digest([model_digest(model), repr(arithmetic), repr(domain)])[:16]
        return Task(label, prop, options, model, arithmetic, domain, settings or Settings(), fingerprint, spec, index)

    def given_domain(self) -> Domain:
        """The domain of a property that needs one (``Property.needs_domain``; the spec loader insists)."""
        if self.domain is None:
            raise ValueError(f"{self.label}: this property needs a domain")
        return self.domain

    def grid(self) -> GridDomain:
        """The domain of a property over grid inputs (its ``fit`` insists)."""
        if not isinstance(self.domain, GridDomain):
            raise TypeError(f"{self.label}: this property needs a grid domain")
        return self.domain

    def strings(self) -> StringDomain:
        """The domain of a property over strings (its ``fit`` insists)."""
        if not isinstance(self.domain, StringDomain):
            raise TypeError(f"{self.label}: this property needs a strings domain")
        return self.domain


@dataclass(frozen=True)
class Proof:
    """What a proof did, as plain data: what ``Property.describe_proof`` words the proved verdict from (never the
    name of the engine that proved it). Each field is None when the proof did not do that."""

    default: str  # the engine's own one-line wording of it
    statistics: dict[str, Any] = field(default_factory=dict)  # the verdict's statistics
    evaluated: int | None = None  # inputs of the property's space evaluated one by one (an exhaustive scan)
    queries: int | None = None  # solver queries answered unsat
    counted: int | None = None  # joint states of a counter machine explored (strings merged by state)
    induction: str | None = None  # what makes it hold at every length: "positions" (an inductive invariant) or
    # "repeating states" (the reachable states repeat, no transition depending on the length); None: the lengths asked

    @property
    def every_length(self) -> bool:
        return self.induction is not None


@dataclass(frozen=True)
class QueryPlan:
    """One solver question, as plain data: built by the property inside a work unit."""

    name: str
    key: tuple[Any, ...] = ()  # property-specific parameters (length, transposition, ...)


class Evaluators(Protocol):
    """What a property sees of the batched evaluators an engine compiled for it (``engines.evaluators``
    ``CompiledEvaluators``)."""

    def of(self, model: Model | None = None) -> BatchedEvaluator:
        """The batched evaluator of ``model`` (default: the task's model) over the input space's tokens."""
        ...

    def chunk_size(self, length: int) -> int: ...


class CounterMachine(Protocol):
    """Engine counting: a reference that reads a word letter by letter with a tuple of integer counts as state
    (``crasp.machine.ProgramMachine`` is one). Its output at a position is a function of the counts before it
    and the letter, and ``key`` maps counts to what every later output depends on (exactly)."""

    names: tuple[str, ...]  # one per count, for invariants and counterexamples
    initial: tuple[int, ...]  # the counts of the empty prefix (whose output is "reject")
    not_applicable: str  # why counts alone cannot decide this reference ("" when they can)

    def step(self, counts: tuple[int, ...], letter: str) -> tuple[tuple[int, ...], bool]: ...

    def key(self, counts: tuple[int, ...]) -> tuple[Any, ...]: ...

    def encode_step(self, counts: list[z3.ArithRef], letter: str) -> tuple[list[z3.ArithRef], z3.BoolRef]:
        """``step`` over z3 integer terms: (next counts, output) as z3 terms."""
        ...


@dataclass(frozen=True)
class CountingGoal:
    """Engine counting: what the property asks at the end of every prefix of every string over ``alphabet``
    (of length ``min_length``..``max_length``, or of every length >= ``min_length`` when ``all_lengths``).

    A causal model decides position p − 1 of a string exactly as in its prefix of length p, so the engine checks
    prefixes. The property answers, for a prefix, whether the model's observation there (the engine's
    ``Observation``: its readout and final stream; None for the empty prefix of a model without BOS) together with
    the ``reference``'s output violates it (``Property.prefix_violates``). ``reference`` is read letter by letter
    beside the model: None (nothing: theirs is None), a ``CounterMachine`` (theirs: its output, False on the empty
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
    reference: CounterMachine | Model | None = None  # pickled with the task's property
    first_position: int = 1
    positions: tuple[int, ...] | None = None
    empty_checked: bool = False
    least: str = "string"
    # only the words of this regular language (``StringDomain.language``): the exploration follows the prefixes
    # of its words up to ``max_length`` (``least: prefix``: each checked, the witness the least failing word) or
    # checks the words themselves (``least: string``); None: every string
    language: Language | None = None

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


# ---------------------------------------------------------------- engine architecture: the data it exchanges

STEP_HOLDS, STEP_FAILS, STEP_UNDECIDED = "holds", "fails", "unknown"


@dataclass(frozen=True)
class StepResult:
    """One induction (or symmetry) step query of the architecture engine, as it ended."""

    name: str  # "embedding", "layers[0].attention", "layers[0].feed-forward", "readout"
    sublayer: str  # embedding | attention | feed-forward | readout
    block: int | None
    status: str  # holds | fails | unknown
    seconds: float
    note: str = ""  # why a step fails or what it assumed

    def to_json(self) -> dict[str, Any]:
        return {"step": self.name, "status": self.status, "seconds": round(self.seconds, 4), "note": self.note}


@dataclass(frozen=True)
class LayerInduction:
    """The steps of one induction over layers (one input length), or of the symmetry queries."""

    length: int
    steps: tuple[StepResult, ...]
    rows_sum_to_one: bool  # False for per-probability rounding: the induction premise is false

    @property
    def proved(self) -> bool:
        return all(s.status == STEP_HOLDS for s in self.steps)

    @property
    def failing(self) -> list[StepResult]:
        return [s for s in self.steps if s.status != STEP_HOLDS]

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.steps)


@dataclass(frozen=True)
class Induction:
    """Request: the induction over layers for these input lengths (is every member of the class position-blind
    on constant inputs?). ``any_depth``: also ask whether the proof covers any number of such layers. Answered
    with an ``InductionOutcome``."""

    lengths: tuple[int, ...]
    any_depth: bool = False
    notes: Any = None  # the property's own notes, handed back with the request to ``conclude``


@dataclass(frozen=True)
class InductionOutcome:
    """The answer to ``Induction``."""

    results: dict[int, LayerInduction]  # per length; empty when a length exceeds ``limit`` (nothing ran)
    limit: int  # the longest input length the engine's step queries are measured for
    any_depth: bool | None = None  # asked and every length proved: whether one layer deeper adds no step query


@dataclass(frozen=True)
class SymmetryCheck:
    """Request: the symmetry queries for attention rows of up to ``max_keys`` keys (does every head of the class
    read its keys as a multiset?). Answered with one ``LayerInduction`` holding the queries as steps."""

    max_keys: int
    pair: tuple[str, str]  # the two words whose signatures agree
    statistics: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PairSearch:
    """Request: search the (strings) domain, in its order, for u in L and v not in L with equal depth-``depth``
    signatures at their last position. Answered with a ``PairFound``."""

    depth: int
    bos: bool
    accepts: Callable[[str], bool]  # membership of L (run in the engine's process)


@dataclass(frozen=True)
class PairFound:
    """The answer to ``PairSearch``."""

    pair: tuple[str, str] | None  # (u in L, v not in L) with equal last-position signatures, or None
    words: int  # words looked at
    distinct: int  # distinct last-position signatures among them


@dataclass(frozen=True)
class MemberSearch:
    """Request, after an induction step failed: a concrete member of the class that breaks the step, chosen by
    the solver (everything fixed except the parameters of one sublayer: a failing step's), one failing step after
    another. The engine replays a member on the interpreter (its claimed outputs, then the property's
    ``member_witness``) before answering with it (a ``Member``), or answers None when no step yields one."""

    length: int
    steps: tuple[StepResult, ...]  # the failing steps, tried in order
    inputs: tuple[Inputs, ...]  # constant inputs on which the member must separate positions
    on: str = "output"  # compare the final columns ("output") or the readout ("readout")
    tolerance: Fraction = Fraction(0)  # separate by more than this
    targets: tuple[Fraction, ...] | None = None  # first try a member whose readout on inputs[0] is exactly this
    notes: Any = None  # the property's own notes, handed back with the answer


@dataclass(frozen=True)
class Member:
    """A member of the class chosen by the solver, replayed on the interpreter: the answer to ``MemberSearch``."""

    model: Model
    tokens: Inputs  # the constant input (user tokens)
    active: str  # the sublayer the solver chose, e.g. "layers[0].attention.heads[0]" or "positional-encoding"
    parameters: dict[str, Any]  # the solver's values for it: (nested) lists of exact strings
    step: StepResult  # the failing step it answers
    exact: bool  # its readout on ``tokens`` equals the search's targets
    trace: Trace  # the interpreter's run of ``model`` on ``tokens``
    observed: list[Vector]  # the compared outputs of the user positions (columns, or 1-vectors of the readout)
    witness: Witness  # the property's ``member_witness`` of it


ArchitectureRequest = Induction | SymmetryCheck | PairSearch | MemberSearch


@dataclass
class Conclusion:
    """What the architecture engine's answers mean for the property's claim (the property says it)."""

    status: str  # proved | refuted | unknown | error
    method: str
    detail: str
    witness: Witness | None = None  # refuted: the replayed member's witness, or the spec's own model's (below)
    statistics: dict[str, Any] = field(default_factory=dict)
    tried: list[str] = field(default_factory=list)
    replay: Inputs | None = None  # refuted on the spec's own model at this input: the engine replays it


# ---------------------------------------------------------------- the property base class


class MissingHook(NotImplementedError):
    """An engine called a hook the property does not define (a capability it does not offer)."""


def missing(prop: Property, hook: str) -> MissingHook:
    return MissingHook(
        f"property {prop.name!r} does not define {hook}, which the engine running it calls "
        "(docs/architecture.md lists the hooks of each capability)"
    )


@dataclass(frozen=True)
class NoOptions:
    """The typed options of a property without options."""


def _no_options(values: dict[str, Any]) -> NoOptions:
    return NoOptions()


def closer_than(gap: Fraction, least: Fraction | None) -> bool:
    """Whether two values ``gap`` (>= 0) apart break "at least ``least`` apart" (None: "distinct")."""
    return gap == 0 if least is None else gap < least


def model_reading(model: Model) -> tuple[str, bool | None]:
    """The reading of ``model`` that the IR (under the spec's arithmetic) computes, against how it runs."""
    if not model.runs_as:
        return "", None
    return model.reading or "the IR as imported", False


class Property(metaclass=ABCMeta):  # noqa: B024 (abstract hooks come with the capabilities)
    """The base every property extends: what the claim is (its name, typed options, the domain it quantifies
    over, the violation predicate) and how its verdicts are worded. What engines can do with it is declared by
    the capabilities it also extends (``Capability`` below: ``EachInput``, ``Solvable``, ...); an engine's card
    says which capabilities it needs, and the registry matches the two (``verify_tf.engines.supporting``).

    Instances are stateless (safe to pickle). A property module defines one subclass and ``PROPERTY =
    TheProperty()`` (``verify_tf.properties``).
    """

    name: str = ""
    summary: str = ""
    options: Obj = Obj({}, check=_no_options)
    needs_domain: bool = True
    # whether it reads a strings domain only through ``input_space`` (and its own order), so that a domain
    # restricted to a regular language (``StringDomain.language``) means what it says; others refuse such a domain
    language_domains: bool = False
    evaluations_per_input: int = 1  # model evaluations per input (auto's cost model)

    def __repr__(self) -> str:
        return f"<property {self.name}>"

    def fit(self, model: Model, arithmetic: Arithmetic, domain: Domain | None, options: Any) -> None:
        """Raise ``OptionError`` when the property does not apply to this model or domain."""
        return None

    def premise(self, task: Task) -> None:
        """Raise ``OptionError`` when something that must hold of the input does not, decided at check time
        before any engine runs (``runner.check_property``: under the property's deadline, which is in force; the
        verdict is then ``error (input error)``, located at the option's key). Default: nothing to decide. What
        it cannot decide in time it leaves to the engines; ``rasp-equivalence`` searches here for an input on
        which its RASP program is undefined."""
        return None

    def offers(self, options: Any) -> frozenset[type[Capability]]:
        """The capabilities it offers with these options (default: every capability its class extends; some
        options narrow them, e.g. ``lengths: all`` to the counting goal): what engines are matched against."""
        return capabilities_of(type(self))

    def reading(self, task: Task) -> tuple[str, bool | None]:
        """Which reading of the model its verdicts are about, and whether that is how the model runs (docs/semantics.md,
        "Readings"); ("", None) for a model the spec builds (it is its own reading). A property that checks a
        model as it runs (``rasp-equivalence`` on tracr's float model) says so here."""
        return model_reading(task.model)

    def input_space(self, task: Task) -> InputSpace:
        """The inputs the claim quantifies over (default: the whole domain)."""
        return InputSpace(task.given_domain())

    def violation(self, task: Task, tokens: Inputs) -> Witness | None:
        """Evaluate ``tokens`` on the reference interpreter; the witness when they violate the claim (every
        refutation of an each-input claim is replayed through this)."""
        raise missing(self, "violation")

    def statistics(self, task: Task) -> dict[str, Any]:
        """Facts about the claim for every verdict's statistics (e.g. the program's size)."""
        return {}

    def describe_proof(self, task: Task, proof: Proof) -> str:
        """The proved verdict's one-line detail, from what the proof did (``proof.default``: the engine's own
        wording)."""
        return proof.default


# ---------------------------------------------------------------- capabilities: what engines can do with a claim

C = TypeVar("C", bound="Capability")


class Capability(Property):
    """A capability protocol: a group of hooks that lets one kind of engine run the claim. A property offers it by
    extending it; its abstract hooks are required (a property that extends it without them cannot be built),
    the others have defaults."""


class EachInput(Capability):
    """Each input: no input of the space violates the claim, and ``violation`` says whether one does on the reference
    interpreter (every refutation is replayed through it)."""

    witness_measure: str | None = None  # a claim about a measure's extreme: refuted at the extreme input
    witness_inputs: tuple[str, ...] = ("input",)  # the witness's keys holding inputs its violation replays on

    @abstractmethod
    def violation(self, task: Task, tokens: Inputs) -> Witness | None:
        """Evaluate ``tokens`` on the reference interpreter; the witness when they violate the claim."""

    def measure(self, task: Task, tokens: Inputs) -> dict[str, Fraction]:
        """Named exact measures of one input whose extremes the verdict reports."""
        return {}

    def measure_kinds(self, task: Task) -> dict[str, str]:
        """Per measure: "max" or "min" (which extreme is reported)."""
        return {}

    def candidates(self, task: Task) -> Iterable[Inputs]:
        """Inputs checked before the scan (e.g. a known counterexample shape)."""
        return ()

    def preceding(self, task: Task, witness: Witness) -> InputSpace | None:
        """The inputs that come before ``witness`` in the property's own order (minimisation), or None."""
        return None


class Batched(Capability):
    """Batched: the claim decided on a batch of inputs at once, exactly, with the batched evaluator."""

    @abstractmethod
    def batched_violations(self, task: Task, evaluators: Evaluators, rows: Array) -> tuple[Array, Measures]:
        """(which rows violate, named measures per row) with the exact batched evaluator."""

    def batched_check(self, task: Task, evaluators: Evaluators, length: int) -> None:
        """Compile the batched programs this property needs for ``length`` (raises ``batched.Unsupported``)."""
        evaluators.of().check(length)

    def batch_rows(self, task: Task) -> int | None:
        """Rows per batch when ``batched_violations`` evaluates the model itself rather than through the batched
        evaluators (``rasp-equivalence`` under the float reading): the driver then does not compile the IR."""
        return None


class Sampled(Capability):
    """Sampled: any violating input is as good a witness as the least one, so inputs may be sampled (random
    sampling and hill climbing, ``auto``'s falsification pass); with ``EachInput`` and ``Batched``."""

    def batched_score(self, task: Task, evaluators: Evaluators, rows: Array) -> tuple[Array, Array]:
        """(a graded score per row, higher is closer to a violation; which rows violate) for hill climbing.
        Default: the flags of ``batched_violations`` as 0/1 scores."""
        flagged, _ = capability(self, Batched).batched_violations(task, evaluators, rows)
        flags = np.asarray(flagged, dtype=bool)
        return flags.astype(np.float64), flags


class DistinctValues(Capability):
    """Distinct values: the values of every (input, position) pairwise separated, across inputs too (the engines
    sort them and search the closest pair: ``engines/scan.py``)."""

    @abstractmethod
    def values(self, task: Task, tokens: Inputs) -> list[Fraction]:
        """The values q(x)_i of one input, on the interpreter."""

    @abstractmethod
    def batched_values(self, task: Task, evaluators: Evaluators, rows: Array) -> tuple[Array, int]:
        """(numerators (B, n), their denominator) of the rows' values, exactly."""

    @abstractmethod
    def batched_clash(self, task: Task, values: Array, den: int) -> tuple[int, int, int] | None:
        """(row, i, j): two positions of one input too close, or None."""

    @abstractmethod
    def pair_witness(self, task: Task, first: Inputs, i: int, second: Inputs, j: int) -> Witness:
        """Replay the pair on the interpreter (raises ``witness.ReplayMismatch`` when it is no violation)."""

    def least_gap(self, task: Task) -> Fraction | None:
        """How far apart any two values must be at least (the claim's margin), or None when they must merely differ
        (split compares its exact integer numerators with it)."""
        return None

    def too_close(self, task: Task, gap: Fraction) -> bool:
        """Whether two values ``gap`` (>= 0) apart violate the claim: equal, or closer than ``least_gap``."""
        return closer_than(gap, self.least_gap(task))

    def exempt_pairs(self, task: Task) -> bool:
        """Whether values of two different inputs that are permutations of each other are exempt."""
        return False

    def candidate_pairs(self, task: Task) -> Iterable[tuple[Inputs, int, Inputs, int]]:
        """Pairs (first, i, second, j) checked before the scan."""
        return ()

    def requirement(self, task: Task) -> str:
        """What the values must be, in words, for the proved verdict ("distinct", "at least 1/4 apart")."""
        return "distinct"


class Solvable(Capability):
    """Solver queries: every query unsat proves the claim (each built inside a work unit, possibly restricted to a
    cube of inputs)."""

    @abstractmethod
    def smt_queries(self, task: Task) -> Sequence[QueryPlan]:
        """The solver questions, as plain plans."""

    @abstractmethod
    def build_query(self, task: Task, plan: QueryPlan, builder: Builder) -> Query:
        """Encode one plan (inside a work unit): a ``symbolic.solve.Query``."""

    @abstractmethod
    def replay_query(self, task: Task, plan: QueryPlan, decoded: Any) -> Witness | None:
        """The solver's decoded answer replayed on the interpreter: the witness, or None."""


class Cubes(Capability):
    """Cubes: the claim may be decided cube by cube of the product domain, each cube split, bounded or
    enumerated."""

    def other_models(self, task: Task) -> tuple[Model, ...]:
        """The models the claim evaluates besides the spec's (``equivalent-to``: the one it compares with), refused
        like it where an engine refuses models (split: LayerNorm in exact arithmetic)."""
        return ()


class Bounded(Capability):
    """Bounds rule: a cube's interval bounds may decide the claim on the whole cube (``Cubes`` closed without
    evaluating them; ``auto`` may ask it of the whole domain)."""

    @abstractmethod
    def decide_on_bounds(self, task: Task, bounds_of: Callable[..., Bounds]) -> tuple[str, float]:
        """On a cube's interval bounds (``bounds_of(model=None)``): ("holds" | "violated" | "open", a score that
        orders open cubes)."""


class Counted(Capability):
    """Counting goal: a causal model read as a counter machine, the claim checked at the end of every prefix, up to
    a length or at every length (docs/counting.md); each refutation is replayed with ``violation``."""

    @abstractmethod
    def violation(self, task: Task, tokens: Inputs) -> Witness | None:
        """Evaluate ``tokens`` on the reference interpreter; the witness when they violate the claim."""

    @abstractmethod
    def counting_goal(self, task: Task) -> CountingGoal:
        """The strings, the prefixes they constrain and the reference read beside the model."""

    @abstractmethod
    def prefix_violates(self, task: Task, ours: Any, theirs: Any) -> bool:
        """Whether the prefix violates the property: ``ours`` the model's observation at its end (``readout``,
        ``stream``; None for the empty prefix without BOS), ``theirs`` the reference's output there."""

    @abstractmethod
    def encode_prefix_violation(self, task: Task, builder: Any, ours: Any, theirs: Any) -> Any:
        """``prefix_violates`` as a z3 Bool over symbolic observations (``readout``, ``stream`` of
        ``symbolic.values.Sym``) and the reference's symbolic output (every length)."""


class PrefixTree(Capability):
    """Prefix tree: the ``Counted`` goal's prefixes decided a batch at a time (the prefix tree of a language's
    words, causal models; docs/semantics.md §4)."""

    @abstractmethod
    def prefix_tree_violations(self, task: Task, rows: Array, readout: Array, den: int) -> Array:
        """``prefix_violates`` on a batch of prefixes: ``rows`` (B, m) letter indices of prefixes of m >= 1 letters,
        ``readout`` the model's readout numerators at their last position over ``den``; (B,) bool, the flagged."""


class ArchitectureClass(Capability):
    """Architecture class: a claim about every model of the spec's architecture class. The property asks
    (``Induction``, ``SymmetryCheck``, ``PairSearch``, ``MemberSearch``) and says what the answers mean; the engine
    runs every query and search, replays every member and builds the verdict."""

    @abstractmethod
    def architecture_plan(self, task: Task) -> ArchitectureRequest | Conclusion:
        """The first request, or an answer that needs none."""

    @abstractmethod
    def conclude(
        self, task: Task, request: ArchitectureRequest, answer: Any, deadline: Deadline
    ) -> ArchitectureRequest | Conclusion:
        """What ``answer`` (to ``request``) means: the next request or the conclusion. ``deadline`` bounds the
        property's own evaluations on concrete models (the spec's model, a member's error over the domain)."""

    def member_witness(self, task: Task, search: MemberSearch, member: Member) -> Witness | None:
        """The witness of a member the solver chose (already run on the interpreter), or None when it does not
        break the claim as the solver said (an engine bug); needed by a property that asks ``MemberSearch``."""
        raise missing(self, "member_witness")

    def language_file(self, task: Task) -> Path | None:
        """The C-RASP program (.cr) defining the language a class-wide conclusion separates, or None: certify
        re-checks a query-free conclusion's pair against it."""
        return None


class CertifiedOutputs(Capability):
    """Certified outputs: what an exhaustive proof's certificate digests and re-checks when the model's readout is
    not what the proof is about (the float reading's enclosure)."""

    @abstractmethod
    def certified_outputs(self, task: Task, rows: Array) -> tuple[Array, int] | None:
        """What the certificate digests for each of ``rows``, as integers over a common denominator; None: the
        readout (this reading of the model is the IR's)."""

    def certified_check(self, task: Task, tokens: Inputs) -> str | None:
        """The claim re-checked on one sampled input in the property's reading: what is wrong there, or None.
        Default: the reference interpreter's ``violation`` (the reading of the IR)."""
        return None if self.violation(task, tokens) is None else "the interpreter finds a violation"


CAPABILITIES: tuple[type[Capability], ...] = (
    EachInput,
    Batched,
    Sampled,
    DistinctValues,
    Solvable,
    Cubes,
    Bounded,
    Counted,
    PrefixTree,
    ArchitectureClass,
    CertifiedOutputs,
)


def capabilities_of(cls: type) -> frozenset[type[Capability]]:
    """The capabilities a property class extends (directly or through another capability)."""
    return frozenset(c for c in CAPABILITIES if issubclass(cls, c))


class MissingCapability(TypeError):
    """An engine was handed a property that does not offer a capability the engine needs."""


def capability(prop: Property, kind: type[C]) -> C:
    """``prop`` seen through the capability ``kind`` (an engine calls only the hooks of capabilities its card
    needs or uses, and only when the property offers them)."""
    if not isinstance(prop, kind):
        raise MissingCapability(f"property {prop.name!r} does not offer {kind.__name__}")
    return prop

"""Evidence for a proof of the counting engine's bounded exploration (``engines.counting``): the strings it
covered counted two ways, and a seeded sample of strings re-evaluated on the reference interpreter.

The exploration decides every string up to length N by following each (state, letter) transition once and
merging strings that reach the same joint state. The certificate checks:

* **strings counted two ways**: per length n, the closed form |Σ|^n against the number of strings the
  exploration's kept states stand for, added up through its merges (``Exploration.strings``). Rules out a
  transition skipped (a letter not followed from some state).
* **interpreter sample**: a seeded sample of strings of length N (their prefixes are the shorter strings)
  run on the reference interpreter; its readout at every position must equal the counter model's readout
  (``engines.counting.joint.Joint.step``, the machine the exploration ran) bit for bit, and no checked prefix
  may violate the property there (``prefix_violates``, beside the counter machine or the other model). The
  property's own check (``violation``: the program's interpreter too) is re-run on a spread of
  ``VIOLATION_SAMPLE`` of them. Rules out a counter model or a counter machine that disagrees with the
  definitions on the sample.

What it does not rule out: a disagreement between the counter model and the interpreter on a string outside
the sample (the engine's differential tests are the defence there); that merged states really are
interchangeable (``engines.counting.explore``'s argument, trusted). An every-length proof adds its induction
queries (certified as SMT queries by ``verify_tf.certify``; over unbounded integers they have no LRAT chain).
This module is the engine's certificate (``engines.certificates`` says what one declares).
"""

from __future__ import annotations

import math
import random
from fractions import Fraction
from typing import Any

from ... import work
from ...contract import Counted, CountingGoal, capability
from ...domain import StringDomain
from ...semantics import evaluate
from ...spaces import InputSpace
from ...verdict import Verdict
from ...work import Deadline, DeadlineExpired
from ..base import Task
from ..scan import fractions_digest
from .joint import Joint

SAMPLE = 1000  # strings of length N re-evaluated on the interpreter (all of them when there are fewer) ...
PILOT = 4  # ... or as many as fit the sample's share of the evidence budget at the rate measured on this many
SAMPLE_SHARE = 0.25  # of the evidence budget (the induction queries' cvc5 and LRAT evidence get what is left)
VIOLATION_SAMPLE = 50  # of which the property's own check is re-run on this many
TRUSTED = {
    "counting": [
        "that strings reaching the same joint state agree on every continuation (engines.counting.explore)",
        "when the certificate covers lengths up to closed_at: that states repeating from one length to the next, "
        "with no transition depending on the length, decide every longer length (engines.counting.explore)",
        "the counting model on strings outside the sample (the engine's differential tests cover it)",
        "for every length: the encoder of one position (engines.counting.induction) and z3's answers as "
        "re-proved by cvc5 (unbounded integers: no LRAT chain)",
    ]
}
REDERIVE = "queries"  # the engine runs again: its queries (the induction's lengths) and its coverage must agree


def evidence(task: Task, verdict: Verdict) -> dict[str, Any]:
    """The exploration's certificate (``counting_evidence``) and what stays trusted; an every-length proof's
    induction queries are added by ``verify_tf.certify``."""
    covered = (verdict.evidence.covered if verdict.evidence is not None else None) or {}
    return {**counting_evidence(task, covered, task.settings.seed), "trusted": TRUSTED["counting"]}


def rerun_differences(task: Task, rerun: Verdict, body: dict[str, Any]) -> list[str]:
    """The re-run's exploration covers what the certificate says it covered."""
    covered = rerun.evidence.covered if rerun.evidence is not None else None
    if covered is None:
        return []
    recorded: dict[str, Any] = next(
        (c for c in body.get("checks", []) if c.get("check") == "strings counted two ways"), {}
    )
    out = []
    if body.get("covered") != covered_record(covered):
        out.append(f"the exploration covers {body.get('covered')} in the certificate, re-derived {covered}")
    if recorded.get("explored") != covered["strings_per_length"] or recorded.get("states") != covered["states"]:
        out.append("the exploration's strings per length or states differ from the re-derived exploration")
    return out


def recheck(task: Task, body: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Audit: ``recheck_counting``'s problems, named; nothing partial (the queries are re-checked by certify)."""
    return [f"counting: {p}" for p in recheck_counting(task, body)], []


def sample_words(alphabet: list[str], length: int, seed: int, count: int = SAMPLE) -> list[tuple[str, ...]]:
    """``count`` distinct strings of ``length`` over ``alphabet``, seeded; every string when there are at most
    ``count``."""
    size = len(alphabet) ** length
    rng = random.Random(f"verify-tf counting certificate {seed}")
    indices = range(size) if size <= count else sorted(_distinct(rng, size, count))
    return [_word(index, alphabet, length) for index in indices]


def closed_counts(goal: CountingGoal, length: int) -> list[int]:
    """Per length n = 0..length, the strings an exploration stands for: |Σ|^n, or with a language the prefixes of
    length n of its words of the domain's lengths (forward counts of the automaton times its backward counts: a
    closed form independent of the exploration)."""
    language = goal.language
    if language is None:
        return [len(goal.alphabet) ** n for n in range(length + 1)]
    prefixes = language.prefix_counts(goal.min_length, goal.max_length)
    return [prefixes[n] if n <= goal.max_length else 0 for n in range(length + 1)]


def sample_for(goal: CountingGoal, length: int, seed: int, count: int = SAMPLE) -> list[tuple[str, ...]]:
    """The certificate's sample: ``count`` strings of ``length`` (``sample_words``), or with a language up to
    ``count`` of its words of the domain's lengths (seeded ranks, unranked from the automaton)."""
    language = goal.language
    if language is None:
        return sample_words(list(goal.alphabet), length, seed, count)
    space = InputSpace(StringDomain(goal.alphabet, goal.min_length, min(length, goal.max_length), language))
    size = space.count()
    rng = random.Random(f"verify-tf counting certificate {seed}")
    indices = range(size) if size <= count else sorted(_distinct(rng, size, count))
    return [tuple(str(letter) for letter in space.decode(space.rows(i, i + 1)[0][0])) for i in indices]


def _distinct(rng: random.Random, size: int, count: int) -> set[int]:
    chosen: set[int] = set()
    while len(chosen) < count:
        chosen.add(rng.randrange(size))
    return chosen


def _word(index: int, alphabet: list[str], length: int) -> tuple[str, ...]:
    letters = []
    for _ in range(length):
        index, digit = divmod(index, len(alphabet))
        letters.append(alphabet[digit])
    return tuple(reversed(letters))


def sample_size(task: Task, length: int, seed: int, deadline: Deadline) -> int:
    """How many strings fit the sample's share of ``deadline``: the rate measured on PILOT of them (a string of
    crasp-L3's length takes ~0.3 s on the interpreter on a loaded machine: 1,000 of them took ~600 s of a 60 s
    budget)."""
    goal = capability(task.prop, Counted).counting_goal(task)
    pilot = sample_for(goal, length, seed, PILOT)
    start = work.clock()  # the deadlines' clock (a test injects it)
    _evaluate_sample(task, pilot, deadline)
    per_word = (work.clock() - start) / max(1, len(pilot))
    fits = int(SAMPLE_SHARE * deadline.remaining() / per_word) if per_word > 0 else SAMPLE
    return max(PILOT, min(SAMPLE, fits))


def _evaluate_sample(
    task: Task, words: list[tuple[str, ...]], deadline: Deadline | None = None
) -> tuple[list[list[Fraction]], list[str]]:
    """The interpreter's readouts per word, and the disagreements found (described); ``DeadlineExpired`` when the
    deadline passes first (checked between words)."""
    goal = capability(task.prop, Counted).counting_goal(task)
    joint = Joint(task.model, task.arithmetic, goal)
    outputs, problems = [], []
    spread = set(range(0, len(words), max(1, len(words) // VIOLATION_SAMPLE)))
    for k, word in enumerate(words):
        if deadline is not None:
            deadline.check("the certificate's interpreter sample")
        readout = list(evaluate(task.model, task.arithmetic, word).readout)
        outputs.append(readout)
        checked = goal.checked(len(word))
        if goal.language is not None and goal.least != "prefix":  # only the words themselves are claimed
            checked &= {len(word)}
        state, ours, theirs = joint.start()
        mine = [] if ours is None else [ours.readout]
        decisions_agree = 0 not in checked or not capability(task.prop, Counted).prefix_violates(task, ours, theirs)
        for p, symbol in enumerate(word, 1):
            state, ours, theirs = joint.step(state, p - 1, symbol)
            mine.append(ours.readout)
            if p in checked and capability(task.prop, Counted).prefix_violates(task, ours, theirs):
                decisions_agree = False
        shown = "".join(word)
        if mine != readout:
            problems.append(f"{shown!r}: the counter model's readouts differ from the interpreter's")
        elif not decisions_agree:
            problems.append(f"{shown!r}: a checked prefix violates the property on the counter model")
        if k in spread and task.prop.violation(task, word) is not None:
            problems.append(f"{shown!r}: the property's own check finds a violation")
    return outputs, problems


def counting_evidence(
    task: Task, covered: dict[str, Any], seed: int, deadline: Deadline | None = None
) -> dict[str, Any]:
    """The exploration's count two ways and the interpreter sample, the sample sized to fit ``deadline`` (the one
    in force when None: ``verify_tf.certify`` puts the evidence budget in force; ``sample_size``) and recorded as
    not completed (``ok: null``) if it runs out all the same."""
    length = covered["max_length"]
    goal = capability(task.prop, Counted).counting_goal(task)
    closed = closed_counts(goal, length)
    deadline = deadline or work.deadline_now() or Deadline(math.inf)
    try:
        count = sample_size(task, length, seed, deadline) if math.isfinite(deadline.seconds) else SAMPLE
        words = sample_for(goal, length, seed, count)
        outputs, problems = _evaluate_sample(task, words, deadline)
        completed = True
    except DeadlineExpired:
        words, outputs, problems, completed = [], [], [], False
    checks = [
        {
            "check": "strings counted two ways",
            "tool": "verify-tf (closed form |Σ|^n; the exploration's merges)",
            "ok": covered["strings_per_length"] == closed,
            "closed_form": closed,
            "explored": covered["strings_per_length"],
            "states": covered["states"],
        },
        {
            "check": f"seeded sample of {len(words)} strings of length {length} re-evaluated on the reference "
            "interpreter",
            "tool": "verify_tf.semantics (reference interpreter)",
            "ok": (not problems) if completed else None,
            "seed": seed,
            "sample_size": len(words),
            "interpreter_sha256": fractions_digest(outputs),
            "property_rechecked_on": min(len(words), VIOLATION_SAMPLE),
            "problems": problems[:10],
            "note": "not completed within the evidence budget"
            if not completed
            else "readouts equal the counter model's bit for bit, no checked prefix violates the property"
            if not problems
            else problems[0],
        },
    ]
    return {"kind": "counting", "covered": covered_record(covered), "checks": checks}


def covered_record(covered: dict[str, Any]) -> dict[str, Any]:
    """What a certificate says its exploration covered: the alphabet, the lengths 0..max_length, and with
    ``closed_at`` that the states repeat from there on (a proof about every longer length, or every length)."""
    found = {"alphabet": covered["alphabet"], "max_length": covered["max_length"]}
    if covered.get("language") is not None:
        found["language"] = covered["language"]
        found["language_sha256"] = covered.get("language_sha256")
    if covered.get("closed_at") is not None:
        found["closed_at"] = covered["closed_at"]
    return found


def recheck_counting(task: Task, record: dict[str, Any]) -> list[str]:
    """Audit: recompute the closed form, re-evaluate the sample on the interpreter, compare with the record."""
    problems = []
    goal = capability(task.prop, Counted).counting_goal(task)
    covered = record.get("covered", {})
    # the lengths explored: the domain's, or up to where the states repeat (then every longer length is decided;
    # the re-run of the engine, certify.rederive, reproduces that length)
    repeat = covered.get("closed_at")
    length = goal.max_length
    if isinstance(repeat, int) and covered.get("max_length") == repeat and (repeat <= length or goal.all_lengths):
        length = repeat
    if covered.get("alphabet") != list(goal.alphabet) or covered.get("max_length") != length:
        problems.append(
            f"the certificate covers {covered}, the spec asks lengths up to {goal.max_length} over "
            f"{list(goal.alphabet)}"
        )
    if goal.language is not None and covered.get("language_sha256") != goal.language.digest():
        problems.append(f"the certificate does not cover the words of {goal.language.name}")
    elif goal.language is None and covered.get("language") is not None:
        problems.append(f"the certificate covers only the words of {covered['language']}, the spec every string")
    count: dict[str, Any] = next((c for c in record.get("checks", []) if c["check"] == "strings counted two ways"), {})
    closed = closed_counts(goal, length)
    if count.get("closed_form") != closed or count.get("explored") != closed:
        problems.append("strings counted two ways: the exploration's count is not the closed form at every length")
    sample: dict[str, Any] = next((c for c in record.get("checks", []) if c["check"].startswith("seeded sample")), {})
    size = sample.get("sample_size")
    if sample.get("ok") is None and size == 0:  # not completed within its budget: recorded as such, nothing to redo
        return problems
    if not isinstance(size, int) or not 0 < size <= SAMPLE:  # a certificate's sample is 1..SAMPLE strings
        problems.append(f"sample size {size!r} is not 1..{SAMPLE}")
        return problems
    words = sample_for(goal, length, sample.get("seed", 0), size)
    if len(words) != size:
        problems.append("sample size differs")
    outputs, found = _evaluate_sample(task, words)
    problems += found[:5]
    if fractions_digest(outputs) != sample.get("interpreter_sha256"):
        problems.append("the interpreter's outputs on the sample differ from the certified ones")
    return problems

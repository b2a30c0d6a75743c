"""Re-derive what a certificate claims to be evidence *for*, from the spec alone, before any evidence is checked.

A query that is unsat proves nothing about the property unless it is the property's query. ``verify-tf audit``
therefore re-derives every query a certificate holds and compares digests:

* an engine whose card has ``derive_queries`` (``smt``): each query is re-encoded by the property's
  ``build_query`` through the encoder (never solved), in the property's order, and the names, the count and
  the SHA-256 of each SMT-LIB text must equal the certificate's;
* any other engine with query evidence (``architecture``, ``counting``): which queries are asked depends on the
  engine's own search (the induction's lengths, a pair of words, the refinement rounds of an invariant), so the
  engine is run again on the re-loaded spec and the queries it asks (name, text digest, z3's answer) must equal
  the certificate's; the counting exploration's coverage (strings per length, states) too;
* exhaustive and ``split`` proofs: the input space (order, lengths, vocabulary, distinctness, size) is
  re-derived from the spec's domain and must equal the one the certificate records; then the engine runs again
  on the re-loaded spec and must prove the property again, and each chunk digest of an exhaustive certificate
  must equal the digest of those inputs' outputs now. Their evidence (a count, a digest, a sample) is about the
  model's outputs, not about the property on each of them: without the re-run, the certificate of a proved
  property of the same model and domain, its subject rewritten, passed for a property refuted only outside
  the sample.

Each function returns the differences found, described (an empty list: the certificate is about this spec).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .. import engines
from ..engines.base import Run, Task
from ..engines.certificates import space_record
from ..verdict import PROVED, UNKNOWN, Verdict
from ..work import Deadline, Executor
from .smt import sha256


def space_differences(task: Task, recorded: Any) -> list[str]:
    derived = space_record(task)
    if not isinstance(recorded, dict):
        return ["the certificate records no input space"]
    return [
        f"the input space's {key} differs: {recorded.get(key)!r} in the certificate, {value!r} re-derived"
        for key, value in derived.items()
        if recorded.get(key) != value
    ]


def recorded_queries(body: dict) -> list[tuple[str, str | None, str]]:
    """(name, SHA-256 of the query text or None when the step needed no query, z3's answer), in order."""
    return [(q.get("name"), q.get("sha256"), q.get("z3_answer")) for q in body.get("queries", [])]


def _asked(queries: list[dict]) -> list[tuple[str, str | None, str]]:
    return [(q["name"], sha256(q["smt2"]) if q.get("smt2") else None, q["answer"]) for q in queries]


def query_differences(task: Task, engine: str, body: dict, seconds: float, executor: Executor) -> list[str]:
    """Re-derive the queries (and an exploration's coverage) and compare them with the certificate."""
    deadline = Deadline(seconds)
    extra: list[str] = []
    derived: list[tuple[str, str | None, str]]
    card = engines.load(engine) if engine in engines.names() else None
    if card is None:
        return [f"no query re-derivation for engine {engine!r}"]
    if card.derive_queries is not None:
        derived = [(name, sha256(text), "unsat") for name, text in card.derive_queries(task, deadline)]
    else:  # the engine's own search decides its queries: run it again
        rerun = _rerun(card, task, deadline, executor, "the queries")
        if isinstance(rerun, str):
            return [rerun]
        evidence = rerun.evidence
        derived = _asked(evidence.queries if evidence is not None else [])
        module = engines.certificate(engine)
        extra = module.rerun_differences(task, rerun, body) if module is not None else []
    return _compare(derived, recorded_queries(body)) + extra


def _rerun(card: engines.Engine, task: Task, deadline: Deadline, executor: Executor, what: str) -> Verdict | str:
    """The engine's verdict on the re-loaded spec, with what ``--certify`` keeps; or why it is not a proof now."""
    rerun = card.check(
        dataclasses.replace(task, settings=dataclasses.replace(task.settings, certify=True)), Run(executor, deadline)
    )
    if rerun.status != PROVED:
        hint = "; with a larger --timeout it may re-derive them" if rerun.status == UNKNOWN else ""
        return f"re-deriving {what}: the {card.name} engine answers {rerun.status} now ({rerun.detail}){hint}"
    return rerun


def proof_differences(task: Task, engine: str, body: dict, seconds: float, executor: Executor) -> list[str]:
    """Exhaustive and split proofs: the engine proves the property again now, and what its re-run finds must
    agree with the certificate (its ``certificate.rerun_differences``: an exhaustive run's chunk digests)."""
    module = engines.certificate(engine)
    if module is None:
        return [f"no re-derivation for engine {engine!r}"]
    rerun = _rerun(engines.load(engine), task, Deadline(seconds), executor, "the proof")
    if isinstance(rerun, str):
        return [rerun]
    return module.rerun_differences(task, rerun, body)


def _compare(derived: list[tuple], recorded: list[tuple]) -> list[str]:
    out = []
    if len(derived) != len(recorded):
        out.append(f"the property asks {len(derived)} queries, the certificate holds {len(recorded)}")
    for k, (mine, theirs) in enumerate(zip(derived, recorded), 1):
        if mine[0] != theirs[0]:
            out.append(f"query {k}: named {theirs[0]!r} in the certificate, {mine[0]!r} re-derived")
        elif mine[1] != theirs[1]:
            out.append(
                f"query {k} ({mine[0]}): the certificate's query (sha256 {str(theirs[1])[:12]}…) is not the one the "
                f"encoder derives from the spec (sha256 {str(mine[1])[:12]}…)"
            )
        elif mine[2] != theirs[2]:
            out.append(f"query {k} ({mine[0]}): z3's answer {theirs[2]!r} in the certificate, {mine[2]!r} re-derived")
    return out

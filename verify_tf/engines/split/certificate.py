"""Evidence for a proof by the ``split`` engine: the closed cubes' inputs counted against the domain's size
(written independently, ``engines.certificates.closed_form_size``), and a seeded sample of inputs re-evaluated on the
reference interpreter with the property's own check.

What it rules out: a run that stopped before the cubes covered the domain (the count), and a violation that
the bounds let through on the sample. What it does not rule out: unsound interval bounds closing a cube that
holds a violation outside the sample — ``verify_tf.bounds`` and ``verify_tf.linear`` stay trusted (their hypothesis
tests check every member of random cubes against their bounds), so audit reports this certificate as partial.
"""

from __future__ import annotations

from typing import Any

from ...verdict import Verdict
from ..base import Task
from ..certificates import reevaluate, sample_indices, space_of, space_record, space_size
from ..scan import fractions_digest

BOUNDS_TRUSTED = (
    "cubes closed by bounds (verify_tf.linear's forms, or verify_tf.bounds' intervals) are not re-checked "
    "independently; the sample and the bounds' own hypothesis tests are the evidence"
)
TRUSTED = {
    "split": [
        "the bounds (verify_tf.linear's forms, verify_tf.bounds' intervals) that closed cubes without evaluating them",
        "the batched evaluator on enumerated leaves outside the sample (differential tests cover it)",
    ]
}
REDERIVE = "proof"  # the input space, then the engine proves the property again


def evidence(task: Task, verdict: Verdict) -> dict[str, Any]:
    """The closed cubes' cover, from the verdict's statistics, the input space, a sample and what stays trusted."""
    body = split_evidence(task, verdict.statistics, task.settings.seed)
    return {**body, "space": space_record(task), "trusted": TRUSTED["split"]}


def rerun_differences(task: Task, rerun: Verdict, body: dict[str, Any]) -> list[str]:
    """Nothing beyond proving the property again: the cover is recounted by ``recheck``."""
    return []


def recheck(task: Task, body: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Audit: the cover and the sample again (``recheck_split``); cubes closed by bounds stay partial."""
    partial = [f"{c['check']}: {c['note']}" for c in body.get("checks", []) if c.get("ok") is None]
    return [f"split: {p}" for p in recheck_split(task, body)], partial


def split_evidence(task: Task, statistics: dict[str, Any], seed: int) -> dict[str, Any]:
    space = space_of(task)
    size = space_size(space)
    closed, total = statistics.get("closed_inputs"), statistics.get("domain_inputs")
    indices = sample_indices(size, seed)
    outputs, violations, _ = reevaluate(task, indices)
    checks = [
        {
            "check": "closed cubes cover the domain",
            "tool": "verify-tf (closed form)",
            "ok": closed == total == size,
            "closed_inputs": closed,
            "domain_inputs": total,
            "closed_form": size,
            "by_bounds": statistics.get("closed_by_bounds"),
            "by_enumeration": statistics.get("closed_by_enumeration"),
            "by_smt": statistics.get("closed_by_smt"),
        },
        {
            "check": f"seeded sample of {len(indices)} inputs re-evaluated on the reference interpreter",
            "tool": "verify_tf.semantics (reference interpreter)",
            "ok": not violations,
            "seed": seed,
            "sample_size": len(indices),
            "interpreter_sha256": fractions_digest(outputs),
            "violations": violations[:10],
        },
        {
            "check": "cubes closed by bounds",
            "tool": "-",
            "ok": None if statistics.get("closed_by_bounds") else True,
            "note": BOUNDS_TRUSTED
            if statistics.get("closed_by_bounds")
            else "none: every cube was enumerated or proved by a solver",
        },
    ]
    return {"kind": "split", "space": space.describe(), "checks": checks}


def recheck_split(task: Task, record: dict[str, Any]) -> list[str]:
    """Audit: recount the domain and re-evaluate the sample on the interpreter."""
    problems = []
    space = space_of(task)
    size = space_size(space)
    cover: dict[str, Any] = next((c for c in record["checks"] if c["check"].startswith("closed cubes")), {})
    if not (cover.get("closed_inputs") == cover.get("domain_inputs") == size):
        problems.append(f"the closed cubes hold {cover.get('closed_inputs')} inputs, the domain {size}")
    sample: dict[str, Any] = next((c for c in record["checks"] if c["check"].startswith("seeded sample")), {})
    indices = sample_indices(size, sample.get("seed", 0))
    outputs, violations, _ = reevaluate(task, indices)
    if violations:
        problems.append(f"the interpreter finds a violation at sampled input {violations[0]}")
    if fractions_digest(outputs) != sample.get("interpreter_sha256"):
        problems.append("the interpreter's outputs on the sample differ from the certified ones")
    return problems

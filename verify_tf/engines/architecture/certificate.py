"""The certificate of an ``architecture`` proof: its solver queries (kind ``smt``, written and re-proved by
``verify_tf.certify``), or for a class-wide proof that needed no solver query (kind ``conclusion``) the
conclusion itself.

A class-wide proof that needed no solver query: ``indistinguishable`` at depth 0 (no attention
layer: a member's output at the last position is a function of the last letter), where the proof is the pair
of words and the argument.

Re-checked: the depth-k signatures of the pair are equal (recomputed), the language's program (its own
interpreter) accepts exactly one of them, and the spec's model, a member of the class, gives both the same
last column on the reference interpreter. Trusted: the argument that equal signatures mean no member tells the
words apart (docs/semantics.md; Yang, Cadilhac & Chiang 2025).
"""

from __future__ import annotations

from typing import Any

from ...classes import Signatures
from ...contract import ArchitectureClass, Task, capability
from ...crasp.interpreter import accepts
from ...crasp.parser import load_program
from ...ir import AlphabetTokens
from ...semantics import evaluate
from ...verdict import Verdict
from ..certificates import SMT_TRUSTED

TOOL = "verify_tf.crasp.interpreter; verify_tf.semantics (reference interpreter); depth signatures recomputed"
TRUSTED = {"smt": SMT_TRUSTED, "conclusion": []}
REDERIVE = "queries"  # the engine runs again: the queries its own search asks must be the certificate's


def evidence(task: Task, verdict: Verdict) -> dict[str, Any]:
    """Kind ``conclusion`` for a proof that asked no solver query, else ``smt``: the queries (their evidence is
    added by ``verify_tf.certify``) and, when none of them is a step of the proof, the conclusion's checks."""
    queries = verdict.evidence.queries if verdict.evidence is not None else []
    if verdict.evidence is not None and verdict.evidence.kind == "conclusion":
        return {"kind": "conclusion", "queries": [], "checks": conclusion_checks(task, verdict.statistics)}
    body: dict[str, Any] = {"kind": "smt", "queries": [], "trusted": TRUSTED["smt"]}
    if not any(q.get("answer") == "unsat" for q in queries):
        body["checks"] = conclusion_checks(task, verdict.statistics)
    return body


def rerun_differences(task: Task, rerun: Verdict, body: dict[str, Any]) -> list[str]:
    """Nothing beyond the queries the re-run asks (compared by ``verify_tf.certify.rederive``)."""
    return []


def recheck(task: Task, body: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Audit: when no query of the proof is a step, the conclusion's checks again."""
    problems: list[str] = []
    partial: list[str] = []
    if any(q.get("z3_answer") == "unsat" for q in body.get("queries", [])):
        return problems, partial
    checks = body.get("checks", [])
    if not any(c.get("ok") is True for c in checks):
        problems.append("the proof asked no solver query and its certificate holds no re-checkable conclusion")
    for check in checks:
        again = conclusion_checks(task, check) if check.get("pair") else [check]
        if check.get("ok") is False or again[0].get("ok") is False:
            problems.append(f"{check['check']}: does not check")
        elif check.get("ok") is None:
            partial.append(f"{check['check']}: {check.get('note', 'not checked')}")
    return problems, partial


def bos_offset(task: Task) -> int:
    """1 when the model prepends a BOS token (stream position 0), else 0 (as ``properties.base.bos_offset``)."""
    tokens = task.model.tokens
    return 1 if isinstance(tokens, AlphabetTokens) and tokens.bos is not None else 0


def conclusion_checks(task: Task, statistics: dict[str, Any]) -> list[dict[str, Any]]:
    """Checks of a query-free conclusion, or a single ``ok: None`` record saying none applies."""
    pair, language = statistics.get("pair"), capability(task.prop, ArchitectureClass).language_file(task)
    if not pair or language is None or "depth" not in statistics:
        return [
            {
                "check": "the conclusion (no solver query)",
                "tool": "none",
                "ok": None,
                "note": "the proof asked no solver query and has no re-checkable conclusion",
            }
        ]
    u, v = pair
    depth = statistics["depth"]
    signatures = Signatures(depth, bool(bos_offset(task)))
    same_signature = signatures.last(u) == signatures.last(v)
    program = load_program(language)
    inside = [accepts(program, w) for w in (u, v)]
    first, second = (evaluate(task.model, task.arithmetic, tuple(w)) for w in (u, v))
    same_column = first.output[-1] == second.output[-1]
    ok = same_signature and inside[0] != inside[1] and inside == statistics.get("in_language") and same_column
    return [
        {
            "check": f"the pair {u!r}, {v!r}: equal depth-{depth} signatures, separated by the language, not told "
            "apart by the spec's model",
            "tool": TOOL,
            "ok": ok,
            "pair": [u, v],
            "same_signature": same_signature,
            "in_language": inside,
            "model_same_last_column": same_column,
            "depth": depth,
        },
        {
            "check": "the class-wide step",
            "tool": "none (an argument, not a computation)",
            "ok": None,
            "note": f"trusted: equal depth-{depth} signatures mean no member of the class tells the words apart",
        },
    ]

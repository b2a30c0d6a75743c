"""The certificate of an ``smt`` proof: its solver queries, each written as SMT-LIB and re-proved by cvc5 and by
an LRAT chain (``verify_tf.certify``: the query plumbing is shared); audit re-encodes every query from the spec
(the card's ``derive_queries``) and compares digests."""

from __future__ import annotations

from typing import Any

from ...contract import Task
from ...verdict import Verdict
from ..certificates import SMT_TRUSTED

TRUSTED = {"smt": SMT_TRUSTED}
REDERIVE = "queries"  # re-encoded by the property's build_query (never solved)


def evidence(task: Task, verdict: Verdict) -> dict[str, Any]:
    """Only the queries (added with their evidence by ``verify_tf.certify``) and what they leave trusted."""
    return {"kind": "smt", "queries": [], "trusted": TRUSTED["smt"]}


def rerun_differences(task: Task, rerun: Verdict, body: dict[str, Any]) -> list[str]:
    """Never re-run: its queries are re-encoded."""
    return []


def recheck(task: Task, body: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Nothing beyond the queries (re-checked by ``verify_tf.certify``)."""
    return [], []

"""Evidence for a class-wide proof that needed no solver query: ``indistinguishable`` at depth 0 (no attention
layer: a member's output at the last position is a function of the last letter), where the proof is the pair
of words and the argument.

Re-checked: the depth-k signatures of the pair are equal (recomputed), the language's program (its own
interpreter) accepts exactly one of them, and the spec's model, a member of the class, gives both the same
last column on the reference interpreter. Trusted: the argument that equal signatures mean no member tells the
words apart (docs/semantics.md; Yang, Cadilhac & Chiang 2025).
"""

from __future__ import annotations

from ..classes import Signatures
from ..contract import ArchitectureClass, Task, capability
from ..crasp.interpreter import accepts
from ..crasp.parser import load_program
from ..properties.base import bos_offset
from ..semantics import evaluate

TOOL = "verify_tf.crasp.interpreter; verify_tf.semantics (reference interpreter); depth signatures recomputed"


def conclusion_checks(task: Task, statistics: dict) -> list[dict]:
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
    signatures = Signatures(depth, bool(bos_offset(task.model)))
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

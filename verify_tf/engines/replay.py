"""Replay a stored counterexample (from a JSON report or the proof cache) on the reference interpreter.

A refutation is only ever reported after its witness replays; a witness read back from a file is replayed
again before anything trusts it. What replays from the witness alone:

* each-input properties: the property's own ``violation`` on the witness's inputs (``EachInput.witness_inputs``:
  ``input``, and for a pair witness such as equivariance's X and τX the other input too: the pair is named by its
  smaller input, the violation may show on either);
* distinct-values properties (contextual mapping): ``pair_witness`` re-evaluates both inputs at the two
  positions and confirms they are too close.

A witness that names a solver-chosen member of an architecture class (``model`` in the witness), or any other
shape, cannot be replayed from the witness alone: ``replay_stored`` says so (``NOT_REPLAYABLE``) and the
caller re-runs the check instead (audit) or does not serve it (the cache).
"""

from __future__ import annotations

from typing import Any

from ..contract import DistinctValues, EachInput, Task, Witness
from ..witness import ReplayMismatch, input_from_json

NOT_REPLAYABLE = "not replayable from the witness alone"


def replay_stored(task: Task, witness: Any) -> tuple[bool, Witness | str]:
    """(True, the interpreter's witness) when ``witness`` replays; (False, why) otherwise.

    ``why`` is ``NOT_REPLAYABLE`` for witnesses whose shape needs the check itself to re-derive them."""
    if not isinstance(witness, dict) or "input" not in witness or "model" in witness:
        return False, NOT_REPLAYABLE
    try:
        prop = task.prop
        if isinstance(prop, DistinctValues):
            return _replay_pair(prop, task, witness)
        if not isinstance(prop, EachInput):
            return False, NOT_REPLAYABLE
        for key in prop.witness_inputs:
            if key in witness:
                again = prop.violation(task, input_from_json(witness[key]))
                if again is not None:
                    return True, again
    except Exception as exc:  # a tampered input the model cannot read: a wrong width, an unknown letter, ...
        return False, f"the input cannot be replayed: {type(exc).__name__}: {exc}"
    return False, f"the interpreter finds no violation on {witness['input']}"


def _replay_pair(prop: DistinctValues, task: Task, witness: dict[str, Any]) -> tuple[bool, Witness | str]:
    i, j = (int(p) for p in witness["positions"])
    first = input_from_json(witness["input"])
    second = input_from_json(witness.get("other_input", witness["input"]))
    try:
        return True, prop.pair_witness(task, first, i, second, j)
    except ReplayMismatch as exc:
        return False, f"the interpreter does not confirm the pair: {exc}"

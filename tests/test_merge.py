"""The merge rule, once for every driver (``engines.base.Merge``): a replayed refutation wins, a failed unit is
``error``, anything not proved is ``unknown`` saying what ran, and ``proved`` needs a proof with nothing else
recorded. The model is one causal hardmax head (tests/helpers.py) on the grid {0, 1, 2}^3; the bound
``output-bounds`` [0, 3] is broken (interpret refutes it, tests/test_engines.py), [-10, 10] holds."""

from __future__ import annotations

from fractions import Fraction as F

import pytest

from helpers import head, one_layer, task
from verify_tf.contract import Proof
from verify_tf.domain import GridDomain
from verify_tf.engines.base import Merge, Run
from verify_tf.executors import InProcess
from verify_tf.semantics import Exact
from verify_tf.witness import ReplayMismatch
from verify_tf.work import Deadline, UnitError

MODEL = one_layer(head(q=1, k=1, v=1, scoring="hardmax", causal=True))
DOMAIN = GridDomain(1, (F(0), F(1), F(2)), 3)


def _merge(lo: int, hi: int) -> Merge:
    checked = task(MODEL, Exact(), DOMAIN, "output-bounds", {"lo": lo, "hi": hi})
    return Merge(checked, Run(InProcess(), Deadline(60)), "interpret", {"inputs_checked": 27})


def _failure() -> UnitError:
    return UnitError("chunk 0..27", "boom", "Traceback: boom")


def _violating(merge: Merge) -> tuple:
    """The first input of the grid (in its order) that the interpreter finds outside [0, 3]."""
    space = merge.task.prop.input_space(merge.task)
    for index in range(space.count()):
        tokens = space.decode(space.rows(index, index + 1)[0][0])
        if merge.task.prop.violation(merge.task, tokens) is not None:
            return tokens
    raise AssertionError("the bound [0, 3] is broken on this grid (tests/test_engines.py)")


def test_a_replayed_refutation_wins_over_failed_units_and_undecided_ones():
    merge = _merge(0, 3)
    tokens = _violating(merge)
    merge.fail(_failure())
    merge.undecided("timeout after chunk 3", ["interpret: 3 of 9 chunks"])
    merge.replay(tokens, "out of bounds", "exhaustive", order=5)
    verdict = merge.verdict(Proof("all 27 inputs", evaluated=27))
    assert verdict.status == "refuted" and verdict.method == "exhaustive"
    assert verdict.counterexample is not None and merge.refuted and merge.settled


def test_the_least_refutation_in_the_drivers_order_is_the_one_reported():
    merge = _merge(0, 3)
    tokens = _violating(merge)
    merge.replay(tokens, "out of bounds", "late", order=9)
    merge.replay(tokens, "out of bounds", "early", order=2)
    merge.replay(tokens, "out of bounds", "again", order=2)  # a second refutation at the same place is ignored
    assert merge.verdict().method == "early"


def test_a_refutation_that_does_not_replay_is_an_engine_bug_not_a_verdict():
    merge = _merge(-10, 10)  # the bound holds: no input violates it
    with pytest.raises(ReplayMismatch):
        merge.replay(((F(0),), (F(0),), (F(0),)), "out of bounds", "exhaustive")
    assert not merge.refuted


def test_a_failed_unit_is_an_error_naming_it_even_when_every_other_unit_proved():
    merge = _merge(-10, 10)
    merge.fail(_failure())
    merge.undecided("timeout")
    verdict = merge.verdict(Proof("all 27 inputs", evaluated=27))
    assert verdict.status == "error"
    assert verdict.detail == "work unit failed: chunk 0..27: boom" and verdict.traceback == "Traceback: boom"


def test_anything_undecided_makes_it_unknown_with_the_first_detail_and_everything_tried():
    merge = _merge(-10, 10)
    merge.undecided("timeout after chunk 3", ["interpret: 3 of 9 chunks"], method="exhaustive")
    merge.undecided("a second thing", ["split: 40 cubes"])
    verdict = merge.verdict(Proof("all 27 inputs", evaluated=27))
    assert (verdict.status, verdict.detail, verdict.method) == ("unknown", "timeout after chunk 3", "exhaustive")
    assert verdict.tried == ["interpret: 3 of 9 chunks", "split: 40 cubes"]
    assert merge.unknown("late").tried[-1] == "late"  # undecided + verdict in one call


def test_proved_needs_a_proof_and_nothing_else_recorded():
    merge = _merge(-10, 10)
    assert not merge.settled
    with pytest.raises(ValueError, match="needs a proof"):
        merge.verdict()
    verdict = merge.verdict(Proof("all 27 inputs", evaluated=27), method="exhaustive")
    assert (verdict.status, verdict.method, verdict.statistics) == ("proved", "exhaustive", {"inputs_checked": 27})
    assert verdict.detail == merge.task.prop.describe_proof(
        merge.task, Proof("all 27 inputs", {"inputs_checked": 27}, 27)
    )

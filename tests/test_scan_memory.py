"""A scan's bookkeeping is the units in flight, never the domain (issue 31: the yang-lk-depth ``-short.yaml`` fallback).

Every string up to length 60 over {a, b} is 2^61 − 1 words (2^61 − 2 without the empty one), cut into units of
2^20: 2^41 units. The scan used to list every unit before the first ran (it grew by 70–90 MiB a second and
was killed at 24 GB, or ended ``unknown: out of memory`` under ``ulimit -v``), and ``schedule`` drew every unit
it would not start (past a refutation's cutoff or the deadline) one by one to count it. Units are now made as
``schedule`` draws them (``work.ChunkUnits``) and the rest are counted, not drawn.

Where the numbers come from: ceil((2^61 − 2) / 2^20) = 2^41 (arithmetic); the least failing word of the mutated
L_3 model over (a|b)* is found independently by the reference interpreter and the program's interpreter on
every string in shortlex order (``least_failing_string``).
"""

import itertools

import numpy as np

import verify_tf.engines.scan as scan
from helpers import L3_PROGRAM as L3, mutated_l3
from verify_tf.batched import BatchedEvaluator
from verify_tf.crasp.interpreter import run_program
from verify_tf.crasp.parser import load_program
from verify_tf.executors import InProcess
from verify_tf.runner import Overrides, check_all
from verify_tf.semantics import evaluate
from verify_tf.spec import load_spec_text
from verify_tf.work import CONTINUE, STOP_AFTER, ChunkUnits, Deadline, WorkUnit, schedule

WORDS = 2**61 - 2  # every string of length 1..60 over {a, b}
UNIT = 2**20  # the enumerate driver's largest unit (chunk_size's ``largest``)

# the mutated L_3 model (helpers.MUTATED_L3) on every string over {a, b} up to 60, prefix mode, engine enumerate
MUTATED = mutated_l3(
    '{regex: "(a|b)*"}', 60, f"crasp-equivalence: {{program: {L3}, mode: prefix, engine: enumerate, timeout: 600}}"
)


def examine(start: int, stop: int, **_) -> int:
    return stop - start


def unit_of(order: int, start: int, stop: int) -> WorkUnit:
    return WorkUnit(f"inputs {start}..{stop - 1}", examine, (start, stop), order=order)


def counting(made: list[int], limit: int):
    """A unit factory that records each unit made and fails past ``limit`` (a listing of 2^41 units would need
    terabytes: the test fails at once instead of exhausting the machine)."""

    def make(order: int, start: int, stop: int) -> WorkUnit:
        made.append(order)
        assert len(made) <= limit, f"{len(made)} units made: the scan lists units it does not run"
        return unit_of(order, start, stop)

    return make


def test_chunk_units_are_sized_and_made_only_when_drawn():
    made: list[int] = []
    units = ChunkUnits(WORDS, UNIT, counting(made, 3))
    assert len(units) == 2**41 and made == []
    first = list(itertools.islice(units, 3))
    assert [(u.order, u.args) for u in first] == [(0, (0, UNIT)), (1, (UNIT, 2 * UNIT)), (2, (2 * UNIT, 3 * UNIT))]
    assert len(ChunkUnits(10, 4, unit_of)) == 3 and [u.args for u in ChunkUnits(10, 4, unit_of)][-1] == (8, 10)
    assert len(ChunkUnits(0, 4, unit_of)) == 0


def test_schedule_counts_the_units_past_a_cutoff_without_drawing_them():
    """A refutation in the 3rd unit: the units after it are never made, and still counted as not started."""
    made: list[int] = []
    summary = schedule(
        InProcess(),
        ChunkUnits(WORDS, UNIT, counting(made, 8)),
        Deadline(600),
        lambda unit, value: STOP_AFTER if unit.order == 2 else CONTINUE,
    )
    assert summary.finished == 3
    assert summary.finished + summary.cancelled + summary.not_started == 2**41
    assert len(made) <= 5  # the 3 run, the one in flight beside them (in_flight = 2), the one drawn past the cutoff


def test_schedule_counts_the_units_past_the_deadline_without_drawing_them():
    made: list[int] = []
    summary = schedule(InProcess(), ChunkUnits(WORDS, UNIT, counting(made, 1)), Deadline(0), lambda u, v: CONTINUE)
    assert (summary.submitted, summary.not_started, summary.expired) == (0, 2**41, True)
    assert made == [0]


def test_a_list_of_units_is_still_counted_whole():
    units = [unit_of(k, k, k + 1) for k in range(5)]
    summary = schedule(InProcess(), units, Deadline(600), lambda unit, value: STOP_AFTER if unit.order == 1 else "")
    assert summary.finished + summary.cancelled + summary.not_started == 5 and summary.finished == 2


def least_failing_string(spec, longest: int) -> tuple[str, int]:
    """Independent: every string over {a, b} in shortlex order, each position compared on the reference
    interpreter (readout > 0; BOS at readout position 0) and the program's interpreter; the first disagreement."""
    program = load_program(L3)
    for n in range(1, longest + 1):
        for letters in itertools.product("ab", repeat=n):
            word = "".join(letters)
            readout = evaluate(spec.model, spec.arithmetic, letters).readout
            outputs = run_program(program, word).output
            for i in range(n):
                if (readout[i + 1] > 0) != outputs[i]:
                    return word, i
    raise AssertionError("no failing string")


def test_every_string_up_to_60_is_scanned_in_bounded_bookkeeping(monkeypatch, tmp_path):
    """The fallback's shape (prefix mode, (a|b)* up to 60, enumerate) on the mutated L_3 model, word by word (with
    --certify: a causal model is otherwise read through the prefix tree, test_prefix_tree.py): refuted at the
    least failing string in the first unit, with at most a few units ever made of the 2^41."""
    spec = load_spec_text(MUTATED, "spec.yaml")
    assert least_failing_string(spec, 5) == ("abab", 3)
    made: list[int] = []
    monkeypatch.setattr(scan, "WorkUnit", _recording(made, 8))
    (verdict,) = check_all([spec], Overrides(certify_dir=tmp_path))
    assert verdict.status == "refuted", verdict.detail
    assert (verdict.counterexample["string"], verdict.counterexample["position"]) == ("abab", 3)
    assert verdict.statistics["space_size"] == WORDS and verdict.statistics["units"] == 2**41
    assert 1 <= len(made) <= 3


def _recording(made: list[int], limit: int):
    """``WorkUnit`` as the scan calls it, recording each unit made and failing past ``limit``."""

    def make(*args, **kwargs) -> WorkUnit:
        made.append(kwargs.get("order", 0))
        assert len(made) <= limit, f"{len(made)} units made: the scan lists units it does not run"
        return WorkUnit(*args, **kwargs)

    return make


def test_the_prefix_tree_finds_the_same_least_failing_string():
    (verdict,) = check_all([load_spec_text(MUTATED, "spec.yaml")], Overrides())
    assert verdict.statistics["prefix_tree"] is True and verdict.statistics["walks"] == [7]
    assert (verdict.counterexample["string"], verdict.counterexample["position"]) == ("abab", 3)


def test_a_batch_larger_than_the_working_memory_is_evaluated_in_slices(monkeypatch, tmp_path):
    """A property that sizes its own batches (crasp-equivalence pads words of a language into 256-row batches)
    stays within ``--memory``: the evaluator runs at most ``chunk_size(length, memory)`` rows at once, with the
    same exact values as one batch, and the verdict is unchanged (the least failing string, as above; word by word
    with --certify, as above)."""
    spec = load_spec_text(MUTATED, "spec.yaml")
    evaluator = BatchedEvaluator(spec.model, spec.arithmetic, spec.domain.tokens)
    rows = np.array(list(itertools.product(range(2), repeat=6)), dtype=np.int64)  # all 64 strings of length 6
    whole = evaluator.values(rows, "readout")
    evaluator.memory = 5 * evaluator.bytes_per_input(6)  # 5 rows at a time
    seen: list[int] = []
    run = BatchedEvaluator._run

    def recording(self, compiled, batch):
        seen.append(len(batch))
        return run(self, compiled, batch)

    monkeypatch.setattr(BatchedEvaluator, "_run", recording)
    sliced = evaluator.values(rows, "readout")
    assert seen == [5] * 12 + [4]
    assert sliced.den == whole.den and np.array_equal(sliced.numerators, whole.numerators)
    seen.clear()
    memory = 16 * evaluator.bytes_per_input(8)  # words up to 5 are padded to 8 letters (``padded_length``)
    (verdict,) = check_all([spec], Overrides(memory=memory, certify_dir=tmp_path))
    assert (verdict.status, verdict.counterexample["string"], verdict.counterexample["position"]) == (
        "refuted",
        "abab",
        3,
    )
    assert seen and max(seen) <= 16


def test_a_space_beyond_int64_numbering_is_unknown_not_an_error(tmp_path):
    """Every string up to 70 over {a, b} is 2^71 − 2 strings, more than 2^62: no scan can number them, so none
    starts, and the verdict is ``unknown`` saying why (it was ``error``: the first unit's unranking raised)."""
    spec = load_spec_text(MUTATED.replace("max-length: 60", "max-length: 70"), "spec.yaml")
    (verdict,) = check_all([spec], Overrides(certify_dir=tmp_path))  # word by word (the prefix tree has no such limit)
    assert verdict.status == "unknown", verdict.detail
    assert verdict.detail.startswith("not enumerable: 2.36e+21 inputs, more than 2^62")
    assert verdict.statistics["space_size"] == 2**71 - 2

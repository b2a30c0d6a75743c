"""Messages a user can act on (issue 26, item 5): running out of disk or memory is ``unknown`` saying what ran out
and what to change, never "internal error: OSError: 81920 requested and 14320 written" or an empty MemoryError;
the budget holds while a batched program is planned and while the counting engine encodes (item 4).

The file-kind, pickle and input-limit messages are in tests/test_hostile_inputs.py (the corpus).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import pytest

from verify_tf.executors import InProcess, ProcessPool
from verify_tf.runner import Overrides, check_property
from verify_tf.spec import load_spec_text
from verify_tf.work import Deadline, ResourceExhausted, WorkUnit, deadline_in_force, schedule

ROOT = Path(__file__).resolve().parent.parent

# Yun et al.'s Lemma 6 construction, its contextual mapping on C(16, 4) = 1,820 sets of distinct tokens: 7,280
# sorted keys, 116,480 bytes of runs (measured), so a 64 KiB budget spills them
SCAN_SPEC = """
model: {construct: yun2019-contextual-mapping, d: 1, delta: 1/16, n: 4}
arithmetic: exact
domain: {grid: {step: 1/16}, length: 4, distinct-tokens: true}
properties:
  - contextual-mapping: {exempt-permutations: true, margin: 1/16, engine: enumerate}
"""
MEMORY = 1 << 16


def test_a_full_spill_folder_is_unknown_naming_it_and_the_options(tmp_path):
    """A real write failure: the child's file-size limit (RLIMIT_FSIZE, 16 KiB) makes the first spilled run fail
    with EFBIG, as a full disk fails with ENOSPC. main bfa436e answered "internal error: OSError: ..." (exit 4)."""
    spill = tmp_path / "spill"
    spill.mkdir()
    script = textwrap.dedent(
        f"""
        import resource, signal
        from verify_tf.runner import Overrides, check_property
        from verify_tf.spec import load_spec_text
        spec = load_spec_text({SCAN_SPEC!r})
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 14, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
        verdict = check_property(spec, spec.properties[0], Overrides(memory={MEMORY}, spill_dir={str(spill)!r}))
        print(verdict.status)
        print(verdict.detail)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600, cwd=tmp_path, check=False
    )
    status, detail = result.stdout.splitlines()[:2]
    assert status == "unknown", result.stdout + result.stderr
    # numpy reports the short write ("N requested and M written"), the same text a full disk gives it
    assert detail.startswith(f"the spill folder {spill} is full or cannot be written (")
    assert "written): set TMPDIR or --spill-dir to a folder with more space" in detail
    assert "--memory (64 KiB now)" in detail
    assert list(spill.iterdir()) == []  # the partial runs were removed


def test_the_spilled_runs_go_to_the_spill_folder_and_leave_with_the_check(tmp_path, monkeypatch):
    import verify_tf.engines.runs as runs

    seen = []
    save = runs.np.save
    monkeypatch.setattr(runs.np, "save", lambda path, array: (seen.append(path), save(path, array)))
    spec = load_spec_text(SCAN_SPEC)
    verdict = check_property(spec, spec.properties[0], Overrides(memory=MEMORY, spill_dir=tmp_path))
    assert verdict.status == "proved" and verdict.statistics["spilled_bytes"] == 116_480
    assert seen and all(Path(p).parent.parent == tmp_path for p in seen)
    assert list(tmp_path.iterdir()) == []


def run_out_of_memory(*, deadline, cancelled, report):
    raise MemoryError()


def run_out_of_disk(*, deadline, cancelled, report):
    raise OSError(28, "No space left on device", "/tmp/verify-tf-runs-x/run0.keys.npy")


def planning_too_long(*, deadline, cancelled, report):
    from verify_tf.work import check_deadline

    while True:
        check_deadline("while planning the batched program")


@pytest.mark.parametrize("executor", ["in-process", "pool"])
def test_a_unit_out_of_memory_stops_the_property_with_the_memory_figure(executor):
    pool = InProcess() if executor == "in-process" else ProcessPool(1)
    try:
        with pytest.raises(ResourceExhausted) as stopped:
            schedule(pool, [WorkUnit("big", run_out_of_memory, ())], Deadline(60), lambda unit, value: "continue")
        # measured where the unit ran (in the worker process for the pool): "this process reached 0.08 GiB"
        assert str(stopped.value).startswith("out of memory: this process reached ")
        assert str(stopped.value).endswith("lower --memory (the working memory of each process) or run fewer jobs (-j)")
        with pytest.raises(ResourceExhausted, match=r"no space left on the device \(/tmp/verify-tf-runs-x"):
            schedule(pool, [WorkUnit("disk", run_out_of_disk, ())], Deadline(60), lambda unit, value: "continue")
    finally:
        if hasattr(pool, "close"):
            pool.close()


def test_a_unit_past_its_deadline_deep_inside_is_a_timeout_not_an_error():
    summary = schedule(InProcess(), [WorkUnit("plan", planning_too_long, ())], Deadline(0.2), lambda u, v: "continue")
    assert summary.expired and not summary.errors


def test_out_of_memory_in_the_driver_is_unknown_with_the_figure(monkeypatch):
    import verify_tf.runner as runner

    def exhausted(*args, **kwargs):
        raise MemoryError()

    monkeypatch.setattr(runner, "run_engine", exhausted)
    spec = load_spec_text(SCAN_SPEC)
    verdict = check_property(spec, spec.properties[0], Overrides())
    assert verdict.status == "unknown"  # main bfa436e: error, "internal error: MemoryError: "
    assert verdict.detail.startswith("out of memory: this process reached ") and "--memory" in verdict.detail


def test_interval_bounds_check_the_deadline_in_force():
    """bounds.cube_bounds (called while a batched program is planned) stops at the deadline in force: a tracr
    Dyck-2 model of width 719 spent 315 s there for a 60 s budget on main bfa436e."""
    from verify_tf.bounds import Cube, cube_bounds
    from verify_tf.work import DeadlineExpired

    spec = load_spec_text(SCAN_SPEC)
    with deadline_in_force(Deadline(0)), pytest.raises(DeadlineExpired, match="while computing interval bounds"):
        cube_bounds(spec.model, spec.arithmetic, Cube.whole(spec.domain.tokens, 4))
    bounds = cube_bounds(spec.model, spec.arithmetic, Cube.whole(spec.domain.tokens, 4))  # no deadline in force
    assert bounds.readout[0][0] <= bounds.readout[0][1]


def test_planning_past_the_budget_is_unknown_not_minutes_late(monkeypatch):
    """The enumerate driver plans its batched program before any unit runs; the property's deadline stops it.
    The clock is injected (each interval product advances it 0.4 s, standing for a 719-wide product), so the
    outcome does not depend on the machine's speed or load: the 1 s budget runs out at the third product."""
    import time

    import verify_tf.bounds as bounds
    import verify_tf.work as work

    class Clock:  # the work module's ``time``, with a perf_counter that only the interval products advance
        now = 1000.0

        def perf_counter(self) -> float:
            return self.now

        def __getattr__(self, name: str):
            return getattr(time, name)

    clock = Clock()
    original = bounds.affine_interval

    def slow(*args):
        clock.now += 0.4
        return original(*args)

    monkeypatch.setattr(work, "time", clock)
    monkeypatch.setattr(bounds, "affine_interval", slow)
    spec = load_spec_text(  # a model of its own: no batched program of it is cached in this process yet
        SCAN_SPEC.replace("n: 4", "n: 3").replace("length: 4", "length: 3").replace("engine: enumerate", "timeout: 1")
    )
    verdict = check_property(spec, spec.properties[0], Overrides())
    assert verdict.status == "unknown" and "timeout" in (verdict.detail + " ".join(verdict.tried))
    assert verdict.seconds == pytest.approx(1.2)  # three products: the one that passed the budget was the last


def test_the_counting_engine_encodes_within_the_budget(tmp_path, monkeypatch):
    """A 40-definition C-RASP chain of nested counts (depth 40): on main bfa436e the counting engine ignored
    --timeout while it encoded value bounds for every layer (84 s at --timeout 5 in the issue; 532 s on the loaded
    development machine). The clock is injected: each reading advances it 10 ms, so the 3 s budget is 300
    readings whatever the machine's speed, and a phase that never looks at the deadline would overrun it by far
    (without the encodings' checks: every layer's bounds and the induction step encoded, thousands of readings)."""
    import verify_tf.work as work
    from helpers import TickingClock

    lines = ["alphabet a b", 'x0 = #"a" > #"b"'] + [f'x{i} = #x{i - 1} > #"b"' for i in range(1, 40)]
    (tmp_path / "chain.cr").write_text("\n".join(lines) + "\noutput x39\n")
    spec = load_spec_text(
        """
model: {construct: crasp-program, program: chain.cr}
arithmetic: {mode: fixed, bits: 16, frac: 0}
domain: {strings: {max-length: 6}}
properties:
  - crasp-equivalence: {program: chain.cr, lengths: all, timeout: 3}
""",
        base_dir=tmp_path,
    )
    monkeypatch.setattr(work, "time", TickingClock(0.01))  # every reading 10 ms later
    verdict = check_property(spec, spec.properties[0], Overrides())
    assert verdict.status == "unknown" and "timeout" in verdict.detail, verdict.detail
    assert verdict.seconds <= 3 + 0.5  # the budget, and at most 50 readings past it


def test_value_bounds_stop_at_the_units_deadline():
    from verify_tf.engines.counting.counters import CounterModel
    from verify_tf.engines.counting.symbolic import value_bounds
    from verify_tf.spec.loader import load_spec

    spec = load_spec(ROOT / "specs" / "crasp-L3.yaml")
    machine = CounterModel.of(spec.model, spec.arithmetic)
    # main bfa436e encoded every layer whatever the unit's deadline (only its z3 narrowing was bounded)
    assert value_bounds(machine, ["a", "b"], 60, Deadline(0)) is None
    # out of narrowing time, but not out of the unit's: the intervals are kept (freezing needs them)
    assert value_bounds(machine, ["a", "b"], 0, Deadline(60)) is not None


def test_memory_sizes_on_the_command_line():
    from click.testing import CliRunner

    from verify_tf.cli import main

    result = CliRunner().invoke(main, ["check", str(ROOT / "specs" / "crasp-L1.yaml"), "--memory", "1K"])
    assert result.exit_code == 2 and "expected between 64K and 1024T" in result.output
    from verify_tf.cli.check import ByteSize

    assert ByteSize().convert("512M", None, None) == 512 << 20
    assert ByteSize().convert("2GiB", None, None) == 2 << 30
    assert ByteSize().convert("1.5G", None, None) == int(1.5 * (1 << 30))
    assert Fraction(ByteSize().convert("1048576", None, None)) == 1 << 20

"""The local executors' contract beyond the drivers' own tests: ``ProcessPool`` interrupts a running unit when
it is cancelled (cooperatively, through a shared flag its ``cancelled()`` reads), and a unit that raises in a
worker process comes back as a ``UnitError`` naming it, without breaking the pool."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from verify_tf.executors import ProcessPool
from verify_tf.work import CONTINUE, STOP, Deadline, UnitError, WorkUnit, schedule


@pytest.fixture(scope="module")
def pool():
    executor = ProcessPool(2)
    yield executor
    executor.close()


def test_a_refutation_cancels_a_running_solver_in_the_pool(pool, tmp_path):
    from cluster_units import long_solve, refute_when

    marker = str(tmp_path / "solver")
    units = [
        WorkUnit("refuter", refute_when, (marker,), order=0),
        WorkUnit("pigeonhole", long_solve, (marker,), order=1),
    ]
    summary = schedule(pool, units, Deadline(600), lambda unit, value: STOP if value == "refuted" else CONTINUE)
    assert (summary.finished, summary.cancelled) == (1, 1)
    # the solver had 600 s; z3 is interrupted by verify-tf's watchdog once the pool sets the unit's flag (the
    # wait below is a bound, not a timing assertion; before the flag, the solver ran out its budget)
    end = time.monotonic() + 60
    while not Path(marker).exists() and time.monotonic() < end:
        time.sleep(0.02)
    assert Path(marker).read_text() == "unknown cancelled"


def test_a_unit_that_raises_in_the_pool_is_a_unit_error_naming_it(pool):
    from cluster_units import echo, fail

    handle = pool.submit(WorkUnit("enumerate: inputs 0..9", fail, ("boom",)), Deadline(60))
    assert pool.completed([handle], 60) == [handle]
    with pytest.raises(UnitError, match=r"^enumerate: inputs 0\.\.9: ValueError: boom$") as caught:
        handle.result()
    assert "cluster_units.py" in caught.value.remote_traceback
    after = pool.submit(WorkUnit("echo", echo, (7,)), Deadline(60))
    assert pool.completed([after], 60) == [after] and after.result() == 7  # the pool survived


def test_pool_workers_are_born_with_sigint_blocked(pool):
    """A Ctrl-C while a ``-j`` worker starts (spawn: it imports verify-tf before ``_pool_init`` ignores SIGINT)
    must not reach it: the parent spawns workers with SIGINT blocked in the spawning thread, so a worker is born
    with it blocked (pending, then discarded by SIG_IGN), and its own mask is lifted once SIGINT is ignored. The
    parent's mask is as it was."""
    from cluster_units import pool_worker_sigint

    before = signal.pthread_sigmask(signal.SIG_BLOCK, ())
    handles = [pool.submit(WorkUnit(f"sigint {k}", pool_worker_sigint, ()), Deadline(60)) for k in range(2)]
    assert signal.pthread_sigmask(signal.SIG_BLOCK, ()) == before
    for handle in handles:
        assert pool.completed([handle], 60) == [handle]
        assert handle.result() == (True, True, False)  # ignored; born blocked; unblocked after _pool_init

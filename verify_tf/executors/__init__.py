"""Executors: where work units run. ``InProcess`` (the default: one unit at a time, in this thread) and
``ProcessPool`` (``-j N``: N spawned worker processes shared by every property of the run). The Dask
executor (``--cluster``) lives in ``executors.cluster`` and is imported only when asked for.

All of them implement ``verify_tf.work.Executor``; engine drivers never know which one they run on.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from ..work import CancelFlag, Deadline, UnitError, WorkUnit, budget, describe_exception, run_unit


class _LocalHandle:
    def __init__(self, unit: WorkUnit, deadline: Deadline):
        self.unit = unit
        self.deadline = deadline
        self.cancel = CancelFlag()
        self.ran = False
        self._value: Any = None
        self._error: UnitError | None = None

    def run(self, report: Callable[[str], None]) -> None:
        self.ran = True
        try:
            self._value = run_unit(self.unit, budget(self.unit, self.deadline), self.cancel, report)
        except Exception as exc:  # contained: the driver reports the unit as an error
            message, trace = describe_exception(exc)
            self._error = UnitError(self.unit.key, message, trace)

    def result(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._value


class InProcess:
    """Runs each unit in the calling thread when the driver asks for a completed one (lowest order first).

    A unit's budget is computed when it starts, so units that run one after another share the time.
    ``report`` (optional) receives ``(unit, phase)`` whenever a unit names what it is doing, so the CLI can
    show which query is being encoded or solved.
    """

    name = "in-process"
    workers = 1

    def __init__(self, report: Callable[[WorkUnit, str], None] | None = None):
        self.report = report

    def submit(self, unit: WorkUnit, deadline: Deadline) -> _LocalHandle:
        return _LocalHandle(unit, deadline)

    def completed(self, handles: list, timeout: float) -> list:
        waiting = [h for h in handles if not h.ran]
        if not waiting:
            return [h for h in handles if h.ran]
        handle = min(waiting, key=lambda h: h.unit.order)
        report = self.report

        def forward(phase: str) -> None:
            if report is not None:
                report(handle.unit, phase)

        handle.run(forward)
        return [handle]

    def cancel(self, handles: list) -> None:
        for h in handles:
            h.cancel.set()

    def close(self) -> None:
        pass


def _pool_call(unit: WorkUnit, seconds: float) -> Any:
    """Runs in a worker process: the unit, with exceptions turned into a picklable UnitError."""
    try:
        return run_unit(unit, seconds)
    except Exception as exc:
        message, trace = describe_exception(exc)
        raise UnitError(unit.key, message, trace) from None


class _PoolHandle:
    def __init__(self, unit: WorkUnit, future: Future):
        self.unit = unit
        self.future = future

    def result(self) -> Any:
        try:
            return self.future.result()
        except UnitError:
            raise
        except BrokenProcessPool as exc:
            raise UnitError(self.unit.key, f"the worker process died ({exc})") from None
        except Exception as exc:  # e.g. a result that could not be sent back
            raise UnitError(self.unit.key, f"{type(exc).__name__}: {exc}") from None


class ProcessPool:
    """``workers`` spawned processes (not forked: the parent may hold solver or progress threads).

    A pending unit that is cancelled never runs; a running one finishes within its own budget. A pool whose
    worker died is replaced for the units submitted after that (the dead unit is reported as an error).
    """

    name = "process pool"

    def __init__(self, workers: int):
        self.workers = workers
        self._lock = threading.Lock()
        self._pool = self._start()

    def _start(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"))

    def submit(self, unit: WorkUnit, deadline: Deadline) -> _PoolHandle:
        seconds = budget(unit, deadline)
        with self._lock:
            try:
                future = self._pool.submit(_pool_call, unit, seconds)
            except BrokenProcessPool:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = self._start()
                future = self._pool.submit(_pool_call, unit, seconds)
        return _PoolHandle(unit, future)

    def completed(self, handles: list, timeout: float) -> list:
        done, _ = wait([h.future for h in handles], timeout=timeout, return_when=FIRST_COMPLETED)
        return [h for h in handles if h.future in done]

    def cancel(self, handles: list) -> None:
        for h in handles:
            h.future.cancel()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

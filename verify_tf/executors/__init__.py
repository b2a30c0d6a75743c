"""Executors: where work units run. ``InProcess`` (the default: one unit at a time, in this thread) and
``ProcessPool`` (``-j N``: N spawned worker processes shared by every property of the run). The Dask
executor (``--cluster``) lives in ``executors.cluster`` and is imported only by ``open_cluster``, so Dask is
needed only when a cluster is asked for; ``ClusterUnavailable`` and the ``--cluster`` address check live in
``executors.addresses`` (Dask-free), which ``executors.cluster`` imports and this package re-exports when they
are first used (a check without ``--cluster`` never imports them).

All of them implement ``verify_tf.work.Executor``; engine drivers never know which one they run on.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.resource_tracker
import signal
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from ..work import CancelFlag, Deadline, UnitError, WorkUnit, budget, describe_exception, never_cancelled, run_unit

__all__ = [
    "CLUSTER_EXTRA_HINT",
    "ClusterUnavailable",
    "InProcess",
    "ProcessPool",
    "cluster_address_problem",
    "open_cluster",
]


_ADDRESSES = ("CLUSTER_EXTRA_HINT", "ClusterUnavailable", "cluster_address_problem")


def __getattr__(name: str) -> Any:
    """``executors.addresses``' names, imported when first asked for (start-up: a check without a cluster)."""
    if name in _ADDRESSES:
        from . import addresses

        return getattr(addresses, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _LocalHandle:
    def __init__(self, unit: WorkUnit, deadline: Deadline):
        self.unit = unit
        self.deadline = deadline
        self.cancel = CancelFlag()
        self.ran = False
        self._value: Any = None
        self._error: UnitError | None = None

    def run(self, report: Callable[..., None]) -> None:
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
    show which query is being encoded or solved, and ``(unit, phase, done, total, what)`` when it also says how
    far it is.
    """

    name = "in-process"
    workers = 1

    def __init__(self, report: Callable[..., None] | None = None):
        self.report = report

    def submit(self, unit: WorkUnit, deadline: Deadline) -> _LocalHandle:
        return _LocalHandle(unit, deadline)

    def completed(self, handles: list, timeout: float) -> list:
        waiting = [h for h in handles if not h.ran]
        if not waiting:
            return [h for h in handles if h.ran]
        handle = min(waiting, key=lambda h: h.unit.order)
        report = self.report

        def forward(phase: str, *progress: Any) -> None:
            if report is not None:
                report(handle.unit, phase, *progress)

        handle.run(forward)
        return [handle]

    def cancel(self, handles: list) -> None:
        for h in handles:
            h.cancel.set()

    def close(self) -> None:
        pass


# In a pool's worker process: one byte per slot, set by the parent to cancel the unit running in that slot.
_CANCEL_FLAGS: Any = None
BORN_BLOCKING_SIGINT: bool | None = None  # in a pool's worker: whether it started with SIGINT blocked (tests)
_MASKS = hasattr(signal, "pthread_sigmask")  # POSIX


def _pool_init(flags: Any) -> None:
    global _CANCEL_FLAGS, BORN_BLOCKING_SIGINT
    _CANCEL_FLAGS = flags
    # Ctrl-C reaches the whole process group; the parent decides (it cancels the units and ends this process),
    # so a worker never dies half-way with a KeyboardInterrupt of its own. It was born with SIGINT blocked
    # (``_sigint_blocked``), so one sent while it started is pending: SIG_IGN discards it (signal(7)), then the
    # mask is lifted (processes the worker starts inherit SIG_IGN, not the mask)
    if _MASKS:
        BORN_BLOCKING_SIGINT = signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, ())
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if _MASKS:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT blocked in this thread while it spawns pool workers: a spawned process keeps the mask of the thread
    that started it, so a Ctrl-C while a worker imports (before ``_pool_init``) waits instead of printing the
    worker's KeyboardInterrupt traceback; this process still gets it. multiprocessing's resource tracker is
    started first: starting it unblocks SIGINT in the calling thread whatever was blocked before (CPython
    gh-110844), which would undo the mask for the workers spawned after it."""
    if not _MASKS:
        yield
        return
    multiprocessing.resource_tracker.ensure_running()
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _pool_call(unit: WorkUnit, seconds: float, slot: int = -1) -> Any:
    """Runs in a worker process: the unit, with exceptions turned into a picklable UnitError."""
    flags = _CANCEL_FLAGS
    cancelled = never_cancelled if slot < 0 or flags is None else (lambda: flags[slot] != 0)
    try:
        return run_unit(unit, seconds, cancelled=cancelled)
    except Exception as exc:
        message, trace = describe_exception(exc)
        raise UnitError(unit.key, message, trace) from None


class _PoolHandle:
    def __init__(self, unit: WorkUnit, future: Future, slot: int):
        self.unit = unit
        self.future = future
        self.slot = slot

    def result(self) -> Any:
        try:
            return self.future.result()
        except UnitError:
            raise
        except BrokenProcessPool as exc:
            raise UnitError(
                self.unit.key,
                f"the worker process died ({exc}); if the system killed it for memory, lower --memory or -j",
            ) from None
        except Exception as exc:  # e.g. a result that could not be sent back
            raise UnitError(self.unit.key, f"{type(exc).__name__}: {exc}") from None


class ProcessPool:
    """``workers`` spawned processes (not forked: the parent may hold solver or progress threads).

    A pending unit that is cancelled never runs; a running one is cancelled cooperatively: each unit in flight
    owns a slot of a shared byte array that its ``cancelled()`` reads (solvers poll it and interrupt z3).
    Only ``SLOTS`` units can hold a slot at once; one submitted beyond that runs to its own budget. A pool
    whose worker died is replaced for the units submitted after that (the dead unit is reported as an error).
    """

    name = "process pool"
    SLOTS = 4096

    def __init__(self, workers: int):
        self.workers = workers
        self._lock = threading.Lock()
        self._context = multiprocessing.get_context("spawn")
        self._flags = self._context.RawArray("b", self.SLOTS)
        self._free = list(range(self.SLOTS - 1, -1, -1))
        self._pool = self._start()

    def _start(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            max_workers=self.workers, mp_context=self._context, initializer=_pool_init, initargs=(self._flags,)
        )

    def _release(self, slot: int) -> None:
        if slot >= 0:
            with self._lock:
                self._free.append(slot)

    def submit(self, unit: WorkUnit, deadline: Deadline) -> _PoolHandle:
        seconds = budget(unit, deadline)
        with self._lock:
            slot = self._free.pop() if self._free else -1
            if slot >= 0:
                self._flags[slot] = 0
            with _sigint_blocked():  # a submission spawns the workers it needs (spawn: on demand)
                try:
                    future = self._pool.submit(_pool_call, unit, seconds, slot)
                except BrokenProcessPool:
                    self._pool.shutdown(wait=False, cancel_futures=True)
                    self._pool = self._start()
                    future = self._pool.submit(_pool_call, unit, seconds, slot)
        future.add_done_callback(lambda _: self._release(slot))
        return _PoolHandle(unit, future, slot)

    def completed(self, handles: list, timeout: float) -> list:
        done, _ = wait([h.future for h in handles], timeout=timeout, return_when=FIRST_COMPLETED)
        return [h for h in handles if h.future in done]

    def cancel(self, handles: list) -> None:
        for h in handles:
            if h.future.cancel() or h.slot < 0:
                continue
            with self._lock:  # a slot is released (and reused) only under the lock, after its future is done
                if not h.future.done():
                    self._flags[h.slot] = 1

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def open_cluster(address: str, **options: Any) -> Any:
    """The Dask executor for ``--cluster ADDRESS`` (``local:N`` or ``tcp://HOST:PORT``); Dask is imported here.

    Raises ``ClusterUnavailable`` when the ``cluster`` extra is missing or the cluster cannot be used.
    """
    from .addresses import CLUSTER_EXTRA_HINT, ClusterUnavailable

    try:
        from . import cluster
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] == "verify_tf":
            raise
        raise ClusterUnavailable(
            f"--cluster needs the 'cluster' extra, which is not installed (no module {exc.name!r})", CLUSTER_EXTRA_HINT
        ) from None
    return cluster.connect(address, **options)

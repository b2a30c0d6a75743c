"""The Dask distributed executor (``--cluster``): work units on a ``LocalCluster`` of this machine
(``local:N``) or on a running Dask scheduler (``tcp://HOST:PORT``, ``tls://HOST:PORT``).

Imported only through ``executors.open_cluster``, so Dask is needed only when a cluster is asked for.

What travels to a worker: the pickled units (a module-level function by reference and its plain arguments:
the ``Task`` with the model IR, options, domain and settings, and the unit's range or query), the unit's
budget in seconds and a cancellation key. Nothing is read from paths on the workers. A first argument that
pickles to ``SHIP_ONCE_BYTES`` or more (a large model) is scattered to the cluster once per property and
referenced by the units. The units are pickled here into bytes, so the scheduler only relays them.

Design (measurements in docs/distributed.md):

* **Batches.** A Dask task costs about 2–5 ms; units of one driver call (same function, same first
  argument) that take less than ``TARGET_BATCH_SECONDS`` are packed into one task of up to ``MAX_BATCH``
  units, sized from the slowest recent units (90th percentile). ``in_flight`` grows with the batch size so
  ``work.schedule`` keeps every worker busy. A batch whose worker keeps dying is split into single units,
  so the unit that kills its worker is the one named in the error.
* **Cancellation is cooperative and pushed.** ``cancel`` sends the unit keys to every worker process
  (``client.run``); a running unit's ``cancelled()`` reads a process-local flag (solvers interrupt z3), a
  unit that has not started never runs. Dask's own ``cancel`` cannot stop a running solver.
* **One thread per worker process** (z3's main context is per process): workers with more threads are
  refused, like workers whose verify-tf, its source, z3 or Python differ from this process's; a
  ``WorkerPlugin`` refuses those that join later, and every batch carries the expected fingerprint, which
  the worker checks before running anything.
* **Faults.** A killed worker's units are rerun by Dask (results are taken as they complete, so only
  running units are lost); a unit that raises, or that kills its worker twice (``allowed-failures`` 1 on
  ``local:N``), is a ``UnitError`` naming the unit (the drivers' verdict: ``error``, never ``proved``). A
  lost scheduler cancels every future at once; a frozen one is bounded by the deadline (``schedule`` waits
  at most the remaining time, every RPC here has a timeout).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import math
import multiprocessing.resource_tracker
import pickle
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
import weakref
from collections import OrderedDict, deque
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import dask
import distributed
from distributed import Client, LocalCluster, WorkerPlugin
from distributed.deploy.cluster import Cluster
from distributed.scheduler import KilledWorker

from .. import __version__
from ..work import (
    Deadline,
    UnitError,
    WorkUnit,
    budget,
    describe_exception,
    forget_scratch,
    interrupted,
    register_scratch,
    run_unit,
)
from .addresses import ClusterUnavailable

log = logging.getLogger(__name__)

TARGET_BATCH_SECONDS = 0.25  # about 100 times the per-task cost of Dask measured on 2 cores
MAX_BATCH = 256
SHIP_ONCE_BYTES = 1 << 20
RPC_SECONDS = 5.0  # the most any call to the scheduler may take before we give up on it
CANCEL_WAIT_SECONDS = 0.25  # how long cancel() waits for its push (about 10 ms when the scheduler answers)
LOCAL_SETTINGS: dict[str, Any] = {
    "distributed.scheduler.allowed-failures": 1,  # a unit that kills its worker twice is reported, not retried
    "distributed.worker.daemon": False,  # units may start child processes (foreign solvers)
    "distributed.diagnostics.nvml": False,
    # Dask's nannies start workers with MALLOC_TRIM_THRESHOLD_=65536, which turns off glibc's adaptive mmap
    # threshold: numpy's large temporaries are then mapped and unmapped every time. Enumeration took 1.55x
    # the CPU with it (bench/bench_cluster.py; docs/distributed.md). None removes the variable.
    "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
    # nothing is downloaded or executed from configuration on a local cluster
    "distributed.scheduler.preload": [],
    "distributed.worker.preload": [],
    "distributed.nanny.preload": [],
    "distributed.client.preload": [],
}

# ---------------------------------------------------------------- fingerprint (client, workers)


@functools.lru_cache(maxsize=1)
def fingerprint() -> tuple[tuple[str, str], ...]:
    """What must be equal on every process of a run: verify-tf (version and source), z3, Python."""
    import z3

    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py"), key=lambda p: p.relative_to(package).as_posix()):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return (
        ("verify-tf", __version__),
        ("verify-tf source", digest.hexdigest()[:12]),
        ("z3", z3.get_full_version()),
        ("python", f"{sys.version_info.major}.{sys.version_info.minor}"),
        *_dask_versions(),
    )


def _dask_versions() -> tuple[tuple[str, str], ...]:
    """Dask's own versions: client, scheduler and workers exchange its messages and pickles."""
    return ("dask", dask.__version__), ("distributed", distributed.__version__)


def _scheduler_versions() -> tuple[tuple[str, str], ...]:
    """Runs on the scheduler (``client.run_on_scheduler``): it unpickles every task's function reference, so it
    must import this module (the same verify-tf) and speak the same Dask."""
    return (("verify-tf", __version__), *_dask_versions())


def fingerprint_digest(values: tuple[tuple[str, str], ...]) -> str:
    return hashlib.sha256(repr(values).encode()).hexdigest()[:16]


def differences(expected: tuple[tuple[str, str], ...], found: tuple[tuple[str, str], ...]) -> str:
    """``z3 4.13.0 here, 4.12.2 there; ...`` (empty when equal)."""
    theirs = dict(found)
    return "; ".join(
        f"{name} {mine} here, {theirs.get(name, 'missing')} there"
        for name, mine in expected
        if theirs.get(name) != mine
    )


def _worker_check(expected: tuple[tuple[str, str], ...], nthreads: int) -> str:
    problem = differences(expected, fingerprint())
    if nthreads != 1:
        problem = "; ".join(
            filter(
                None,
                [
                    problem,
                    f"{nthreads} threads (verify-tf needs --nthreads 1: z3 is "
                    "not thread-safe; use --nworkers N instead)",
                ],
            )
        )
    return problem


class VersionGuard(WorkerPlugin):
    """Refuses (closes, with its nanny) a worker whose fingerprint or thread count does not match."""

    name = "verify-tf-version-guard"
    idempotent = False

    def __init__(self, expected: tuple[tuple[str, str], ...]):
        self.expected = expected

    def setup(self, worker: Any) -> None:
        problem = _worker_check(self.expected, worker.state.nthreads)
        if problem:
            worker.loop.add_callback(worker.close, nanny=True, reason=f"verify-tf refused this worker: {problem}")
            raise RuntimeError(f"verify-tf refused worker {worker.name!r} ({worker.address}): {problem}")


class IgnoreSigint(WorkerPlugin):
    """A local cluster's workers ignore SIGINT for their whole life: Ctrl-C (SIGINT to the terminal's process
    group) is for verify-tf, which stops the run and ends them (docs/cli.md, "Interrupts"). Otherwise Dask's
    worker process takes it (asyncio.Runner's SIGINT handler cancels the worker's event loop) and prints its own
    KeyboardInterrupt traceback. Given to every worker at construction (``Worker(plugins=...)``), so that a
    worker its nanny restarts has it too; it runs as the worker starts, in the worker process's main thread.
    Until then the worker was born with SIGINT blocked (``connect``), so a SIGINT sent in between is pending,
    and SIG_IGN discards it with every later one (signal(7))."""

    name = "verify-tf-ignore-sigint"

    def setup(self, worker: Any) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


class _NannyLedCluster(LocalCluster):
    """A LocalCluster whose workers' lives are their nannies' alone.

    Dask's ``SpecCluster`` closes the nanny of a removed worker unless a worker of the same name is registered
    ``lost-worker-timeout`` (15 s) after the removal, as its view of the scheduler then stands. A worker killed
    twice within 15 s (a unit that kills its worker, then a second death) loses that race whenever the first
    timer fires while the second respawn is still registering: the nanny was closed just as its new worker
    arrived, and ``local:N`` went on with N − 1 workers for good (seen at load 10 in tests/test_cluster.py;
    with the timeout at 0 every respawn loses it). Here a nanny restarts its worker whatever the delay and
    closes itself when it cannot; the cluster never closes one behind its back. The scheduler's own
    bookkeeping (``Cluster._update_worker_status``) is kept."""

    def _update_worker_status(self, op: str, msg: Any) -> None:
        Cluster._update_worker_status(self, op, msg)  # skips SpecCluster's timer, nothing else


def _describe_worker(expected: tuple[tuple[str, str], ...], dask_worker: Any = None) -> str:
    """Runs on each worker (``client.run``): its problem, or an empty string."""
    nthreads = dask_worker.state.nthreads if dask_worker is not None else 1
    return _worker_check(expected, nthreads)


# ---------------------------------------------------------------- worker side

_LOCK = threading.Lock()
_RUNNING: dict[str, threading.Event] = {}  # unit key -> its cancel flag, while the unit runs here
_CANCELLED_EARLY: OrderedDict[str, None] = OrderedDict()  # cancelled before they started (here or anywhere)
_REMEMBER = 100_000


def _cancel_here(keys: list[str]) -> int:
    """Runs on every worker process (``client.run``): flag the running units, remember the others."""
    hit = 0
    with _LOCK:
        for key in keys:
            flag = _RUNNING.get(key)
            if flag is not None:
                flag.set()
                hit += 1
            else:
                _CANCELLED_EARLY[key] = None
        while len(_CANCELLED_EARLY) > _REMEMBER:
            _CANCELLED_EARLY.popitem(last=False)
    return hit


@dataclass(frozen=True)
class _Shipped:
    """Stands for the unit's first argument, which travels once per property (scattered)."""

    index: int


def _run_batch(expected: str, blob: bytes, shipped: list) -> tuple:
    """A Dask task: the units of one batch, one after another, each with its cancel flag and budget.

    Returns ``("done", [per unit: ("ok", value, seconds) | ("error", message, traceback, seconds) |
    ("cancelled",)])``, or ``("refused", why)`` / ``("unloadable", message, traceback)`` for the whole batch.
    """
    mine = fingerprint()
    if fingerprint_digest(mine) != expected:
        return "refused", f"this worker runs {dict(mine)}"
    started = time.perf_counter()
    try:
        calls = pickle.loads(blob)
    except Exception as exc:  # e.g. a module missing on this worker
        return ("unloadable", *describe_exception(exc))
    outcomes: list[tuple] = []
    for key, unit, seconds in calls:
        flag = threading.Event()
        with _LOCK:
            if key in _CANCELLED_EARLY:
                del _CANCELLED_EARLY[key]
                outcomes.append(("cancelled",))
                continue
            _RUNNING[key] = flag
        if unit.args and isinstance(unit.args[0], _Shipped):
            unit = replace(unit, args=(shipped[unit.args[0].index], *unit.args[1:]))
        begin = time.perf_counter()
        try:  # the batch started at `started`: later units get what is left of their budget
            value = run_unit(unit, max(0.0, seconds - (begin - started)), cancelled=flag.is_set)
            outcomes.append(("ok", value, time.perf_counter() - begin))
        except Exception as exc:  # contained: the driver reports the unit as an error
            outcomes.append(("error", *describe_exception(exc), time.perf_counter() - begin))
        finally:
            with _LOCK:
                _RUNNING.pop(key, None)
    return "done", outcomes


# ---------------------------------------------------------------- client side


@dataclass(eq=False)
class _Group:
    """The units of one driver call (same function, same first argument): batched together, timed together."""

    batch: int = 1  # units per Dask task, from the units' measured times
    outstanding: int = 0  # units submitted and not yet finished or cancelled
    buffer: list = field(default_factory=list)  # submitted, not yet sent
    times: deque = field(default_factory=lambda: deque(maxlen=64))  # seconds of recent units
    shipped: Any = None  # the scattered first argument (a distributed.Future)

    def learn(self, seconds: list[float], largest: int) -> None:
        self.times.extend(seconds)
        ordered = sorted(self.times)
        slow = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
        self.batch = max(1, min(largest, math.floor(TARGET_BATCH_SECONDS / max(slow, 1e-6))))


@dataclass(eq=False)
class _Batch:
    key: str
    future: Any
    handles: list
    lock: threading.Lock = field(default_factory=threading.Lock)
    outcome: tuple | None = None
    cancelled: int = 0
    split: bool = False


class _DaskHandle:
    def __init__(self, unit: WorkUnit, executor: DaskExecutor, deadline: Deadline, group: _Group | None):
        self.unit, self.executor, self.deadline, self.group = unit, executor, deadline, group
        self.key = ""  # the cancellation key, set when sent
        self.batch: _Batch | None = None
        self.index = 0
        self.failed: UnitError | None = None
        self.cancelled = False
        self.settled = False  # no longer counted in its group's outstanding units

    def result(self) -> Any:
        return self.executor._result(self)


class DaskExecutor:
    """Runs work units on a Dask cluster (``connect`` builds one). ``workers``: usable worker processes."""

    name = "dask"

    def __init__(
        self,
        client: Client,
        address: str,
        workers: int,
        *,
        cluster: Any = None,
        scratch: str | None = None,
        refused: list[str] | None = None,
        ship_once_bytes: int = SHIP_ONCE_BYTES,
        max_batch: int = MAX_BATCH,
    ):
        self.client, self.address, self.workers = client, address, workers
        self.cluster, self.scratch = cluster, scratch
        self.refused = list(refused or [])
        self.ship_once_bytes, self.max_batch = ship_once_bytes, max_batch
        self.expected = fingerprint_digest(fingerprint())
        # statistics (bench/bench_cluster.py): Dask tasks (batches) and units sent, units timed on the workers
        self.tasks_sent = self.units_sent = self.units_timed = 0
        self.unit_seconds = 0.0
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._groups: dict[tuple, _Group] = {}
        self._current = threading.local()  # the group this thread (one property's driver) submitted last
        self._lost = ""  # why the scheduler is gone, once it is
        self._calls: list[threading.Thread] = []  # scheduler calls that had not answered when we stopped waiting

    # ---- what schedule() asks

    @property
    def in_flight(self) -> int:
        """Units ``schedule`` keeps submitted: two batches per worker, at this driver's batch size."""
        group = getattr(self._current, "group", None)
        return 2 * self.workers * (group.batch if group is not None else 1)

    def _batch_now(self, group: _Group) -> int:
        """The group's batch size, but never so large that its outstanding units leave workers idle (at the
        start, while ``schedule`` raises the number in flight, and at the end of a driver's units)."""
        return max(1, min(group.batch, group.outstanding // (2 * self.workers)))

    def _settle(self, handle: _DaskHandle) -> None:
        if not handle.settled:
            handle.settled = True
            if handle.group is not None:
                handle.group.outstanding -= 1

    def submit(self, unit: WorkUnit, deadline: Deadline) -> _DaskHandle:
        with self._lock:
            group = self._current.group = self._group_of(unit)
            handle = _DaskHandle(unit, self, deadline, group)
            if not self._lost and self.client.status != "running":
                self._lost = f"the Dask client is {self.client.status}: the scheduler at {self.address} is gone"
            if self._lost:
                handle.failed = UnitError(unit.key, self._lost)
                handle.settled = True
                return handle
            group.buffer.append(handle)
            group.outstanding += 1
            if len(group.buffer) >= self._batch_now(group):
                self._send(group)
        return handle

    def completed(self, handles: list, timeout: float) -> list:
        end = time.monotonic() + max(0.0, timeout)
        self._flush({id(h.group): h.group for h in handles if h.batch is None and h.failed is None}.values())
        while True:
            with self._changed:  # done callbacks notify under this lock: none is missed between look and wait
                ready: list[_DaskHandle] = []
                broken: list[_DaskHandle] = []
                for h in handles:
                    if h.failed is not None:
                        ready.append(h)
                    elif h.batch is not None and h.batch.future.done():
                        (
                            broken
                            if h.batch.future.status == "error" and len(h.batch.handles) > 1 and not h.batch.split
                            else ready
                        ).append(h)
                left = end - time.monotonic()
                if not ready and not broken:
                    if left <= 0:
                        return []
                    self._changed.wait(min(left, 1.0))  # the cap also notices a client that closed
                    continue
            if broken and self._split_killed({id(h.batch): h.batch for h in broken}.values()):
                continue  # their units were sent again one by one
            return ready + broken

    def cancel(self, handles: list) -> None:
        keys, whole = [], []
        with self._lock:
            for h in handles:
                if h.cancelled or h.failed is not None:
                    continue
                h.cancelled = True
                self._settle(h)
                if h.batch is None:
                    h.group.buffer.remove(h)
                    continue
                if h.batch.future.done():
                    continue
                keys.append(h.key)
                h.batch.cancelled += 1
                if h.batch.cancelled == len(h.batch.handles):
                    whole.append(h.batch.future)
        if keys and not self._lost:
            # schedule() cancels at the deadline too: wait briefly, never past the property's timeout by much
            self._bounded(self._push_cancel, keys, whole, wait=CANCEL_WAIT_SECONDS)

    def _push_cancel(self, keys: list[str], whole: list) -> None:
        self.client.run(_cancel_here, keys, on_error="ignore")  # running units stop, queued ones never start
        if whole:
            self.client.cancel(whole, force=True)  # and leave the scheduler's queue

    def close(self) -> None:
        if interrupted() is not None and self.cluster is not None:
            # SIGINT/SIGTERM: the CLI ends this cluster's processes itself (cli/interrupts.end_descendants) and
            # exits; a graceful close would only wait for workers that are being stopped anyway
            if self.scratch is not None:
                shutil.rmtree(self.scratch, ignore_errors=True)
                forget_scratch(self.scratch)
            return
        unresponsive = any(call.is_alive() for call in self._calls)  # a frozen scheduler: do not wait for it
        hurry = self._lost or unresponsive or interrupted() is not None  # after SIGINT/SIGTERM: seconds, not tens
        try:
            if not hurry:
                self._bounded(self.client.unregister_worker_plugin, VersionGuard.name)
            self.client.close(timeout=1 if hurry else RPC_SECONDS)
        except Exception:  # a scheduler that is gone: nothing left to close there
            pass
        finally:
            if self.cluster is not None:
                with contextlib.suppress(Exception):
                    self.cluster.close(timeout=2 if hurry else 10)
            if self.scratch is not None:
                shutil.rmtree(self.scratch, ignore_errors=True)
                forget_scratch(self.scratch)

    def describe(self) -> str:
        where = (
            f"local cluster of {self.workers} worker processes"
            if self.cluster is not None
            else f"scheduler {self.address}, {self.workers} workers"
        )
        secure = " (TLS)" if self.address.startswith("tls://") else ""
        return f"Dask {distributed.__version__}: {where}{secure}"

    # ---- internals

    def _bounded(self, call: Any, *args: Any, wait: float = RPC_SECONDS) -> None:
        """Run a scheduler RPC in a thread and wait at most ``wait`` seconds for it: a frozen scheduler (it
        keeps its connections open) must not hang the run. The call may still complete later."""

        def guarded() -> None:
            try:
                call(*args)
            except Exception as exc:  # the scheduler went away: nothing runs any more
                log.debug("cluster call %s failed: %s", getattr(call, "__name__", call), exc)

        thread = threading.Thread(target=guarded, daemon=True, name="verify-tf-dask-rpc")
        thread.start()
        thread.join(wait)
        if thread.is_alive():
            self._calls.append(thread)

    def _group_of(self, unit: WorkUnit) -> _Group:
        first = unit.args[0] if unit.args else None
        try:
            weakref.ref(first)
        except TypeError:
            first = None
        key = (unit.function, id(first) if first is not None else None)
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _Group()
            if first is not None:
                weakref.finalize(first, self._groups.pop, key, None)  # the property is done: forget it
                group.shipped = self._ship(first)
        return group

    def _ship(self, value: Any) -> Any:
        """Scatter a large first argument once; None when it is small enough to travel with each batch."""
        try:
            size = len(pickle.dumps(value, protocol=5))
        except Exception:
            return None  # it will fail, with its unit's name, when the batch is pickled
        if size < self.ship_once_bytes:
            return None
        try:
            return self.client.scatter(value, hash=False, timeout=max(RPC_SECONDS, size / 10e6))
        except Exception:  # it then travels with each batch; a lost scheduler shows when they are sent
            return None

    def _flush(self, groups: Any) -> None:
        """Send what these groups hold back (``completed`` is about to wait for their units)."""
        with self._lock:
            for group in groups:
                if group.buffer:
                    self._send(group)

    def _send(self, group: _Group) -> None:
        handles, group.buffer = group.buffer, []
        key = f"verify-tf-{uuid.uuid4().hex}"
        calls = []
        for index, h in enumerate(handles):
            h.key, h.index = f"{key}/{index}", index
            unit = h.unit if group.shipped is None else replace(h.unit, args=(_Shipped(0), *h.unit.args[1:]))
            calls.append((h.key, unit, budget(h.unit, h.deadline)))
        try:
            blob = pickle.dumps(calls, protocol=5)
        except Exception as exc:
            for h in handles:
                h.failed = UnitError(h.unit.key, f"cannot be sent to the cluster: {type(exc).__name__}: {exc}")
                self._settle(h)
            return
        priority = max(h.unit.priority * (1 << 40) - h.unit.order for h in handles)
        try:
            future = self.client.submit(
                _run_batch,
                self.expected,
                blob,
                [group.shipped] if group.shipped is not None else [],
                key=key,
                pure=False,
                priority=priority,
            )
        except Exception as exc:  # the client is closed
            self._lost = self._lost or f"the Dask client cannot submit ({type(exc).__name__}: {exc})"
            for h in handles:
                h.failed = UnitError(h.unit.key, self._lost)
                self._settle(h)
            return
        batch = _Batch(key, future, handles)
        for h in handles:
            h.batch = batch
        self.tasks_sent += 1
        self.units_sent += len(handles)
        future.add_done_callback(self._notify)

    def _notify(self, _future: Any) -> None:
        with self._changed:
            self._changed.notify_all()

    def _split_killed(self, batches: Any) -> bool:
        """Batches whose workers kept dying: send their units again one by one, to find and name the culprit."""
        again = False
        for batch in batches:
            try:
                killed = isinstance(batch.future.exception(timeout=RPC_SECONDS), KilledWorker)
            except Exception:
                killed = False
            with self._lock:
                batch.split = True
                if not killed:
                    continue
                for h in batch.handles:
                    if h.cancelled or h.group is None:
                        continue
                    single = _Group(batch=1, shipped=h.group.shipped)
                    single.buffer.append(h)
                    self._send(single)
                    again = True
        return again

    def _outcome(self, batch: _Batch, deadline: Deadline) -> tuple:
        with batch.lock:
            if batch.outcome is None:
                batch.outcome = self._fetch(batch, deadline)
                done = batch.outcome[0] == "done"
                seconds = [o[-1] for o in batch.outcome[1] if o[0] in ("ok", "error")] if done else []
                with self._lock:
                    for h in batch.handles:
                        self._settle(h)
                    self.units_timed += len(seconds)
                    self.unit_seconds += sum(seconds)
                    if seconds:
                        batch.handles[0].group.learn(seconds, self.max_batch)
            return batch.outcome

    def _fetch(self, batch: _Batch, deadline: Deadline) -> tuple:
        try:
            return batch.future.result(timeout=max(RPC_SECONDS, deadline.remaining() + RPC_SECONDS))
        except distributed.client.FutureCancelledError as exc:
            if "scheduler-connection-lost" in str(exc) or self.client.status != "running":
                self._lost = f"the connection to the Dask scheduler at {self.address} was lost"
                return "failed", self._lost
            return "failed", f"cancelled by the cluster ({exc})"
        except KilledWorker as exc:
            return "failed", f"the worker running it died repeatedly (KilledWorker: {exc})"
        except (TimeoutError, distributed.TimeoutError):
            return "failed", "its result could not be fetched from the cluster in time"
        except Exception as exc:
            return "failed", f"{type(exc).__name__}: {exc}"

    def _result(self, handle: _DaskHandle) -> Any:
        if handle.failed is not None:
            raise handle.failed
        assert handle.batch is not None, "result() of a unit that was never sent"
        outcome = self._outcome(handle.batch, handle.deadline)
        key = handle.unit.key
        if outcome[0] == "failed":
            raise UnitError(key, outcome[1])
        if outcome[0] == "refused":
            raise UnitError(key, f"ran on a worker with another version, refused ({outcome[1]})")
        if outcome[0] == "unloadable":
            raise UnitError(key, f"a worker could not load the unit: {outcome[1]}", outcome[2])
        mine = outcome[1][handle.index]
        if mine[0] == "ok":
            return mine[1]
        if mine[0] == "error":
            raise UnitError(key, mine[1], mine[2])
        raise UnitError(key, "cancelled before it started")


# ---------------------------------------------------------------- connecting


def connect_timeout() -> float:
    """Dask's own connect timeout (``distributed.comm.timeouts.connect``, env
    DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT)."""
    return float(dask.utils.parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), default="seconds"))


def connect(
    address: str,
    *,
    timeout: float | None = None,
    ship_once_bytes: int = SHIP_ONCE_BYTES,
    max_batch: int = MAX_BATCH,
    directory: str | Path | None = None,
) -> DaskExecutor:
    """``local:N`` starts a LocalCluster of N single-threaded worker processes bound to 127.0.0.1 (mutual TLS
    with throw-away certificates when ``cryptography`` is installed), with its directories in a temporary
    folder (made in ``directory``, default the system's temporary folder) that ``close`` removes; anything else
    is the address of a running scheduler. Raises ``ClusterUnavailable``."""
    # a lost scheduler is reported once, in the verdicts ("the connection to the Dask scheduler at ... was lost");
    # Dask's client would also log a 40-line traceback per reconnection attempt. Set here, after Dask's own
    # logging configuration ran (importing distributed resets these levels).
    for name in ("distributed.client", "distributed.utils", "distributed.comm", "distributed.core"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    timeout = connect_timeout() if timeout is None else timeout
    if address.startswith("local:"):
        count = int(address.split(":", 1)[1])
        scratch = tempfile.mkdtemp(prefix="verify-tf-dask-", dir=directory)
        register_scratch(scratch)  # the CLI removes it if the run is interrupted before close() does
        cluster = None
        try:
            # Dask's shared work space (dask-scratch-space, its lock files) goes into the scratch folder too, so
            # that nothing of the run is left in TMPDIR
            # SIGINT blocked while the cluster starts: its event-loop thread, which spawns every worker process
            # (restarts too), keeps the mask, and the workers are born with it until IgnoreSigint ignores it for
            # good; Ctrl-C (sent to the whole process group) is for this process only, which stops the run and
            # ends them (docs/cli.md, "Interrupts"). multiprocessing's resource tracker is started first: starting
            # it unblocks SIGINT in the calling thread whatever the caller had blocked (CPython gh-110844, fixed
            # by gh-127587 in later releases), which undid the mask of the event-loop thread before
            multiprocessing.resource_tracker.ensure_running()
            blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            with dask.config.set({**LOCAL_SETTINGS, "temporary-directory": scratch}), _restored_mask(blocked):
                cluster = _NannyLedCluster(
                    n_workers=count,
                    threads_per_worker=1,
                    processes=True,
                    host="127.0.0.1",
                    dashboard_address="127.0.0.1:0",
                    worker_dashboard_address="127.0.0.1:0",
                    local_directory=scratch,
                    security=_local_security(),
                    silence_logs=logging.CRITICAL,
                    plugins={IgnoreSigint()},  # Worker(plugins=...), through the nanny
                )  # problems are reported in verdicts
                client = Client(cluster, timeout=timeout, set_as_default=False)
            return _prepare(
                client,
                cluster.scheduler_address,
                cluster=cluster,
                scratch=scratch,
                timeout=timeout,
                ship_once_bytes=ship_once_bytes,
                max_batch=max_batch,
            )
        except BaseException as exc:
            if cluster is not None:
                cluster.close(timeout=10)
            shutil.rmtree(scratch, ignore_errors=True)
            if isinstance(exc, Exception) and not isinstance(exc, ClusterUnavailable):
                raise ClusterUnavailable(
                    f"could not start a local Dask cluster of {count} workers: {type(exc).__name__}: {exc}",
                    "try fewer workers, or -j N",
                ) from exc
            raise
    try:
        client = Client(address, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise ClusterUnavailable(
            f"cannot reach the Dask scheduler at {address}: {exc}",
            "start one with `dask scheduler --host HOST` and workers with `dask worker tcp://HOST:8786 --nthreads 1`"
            " (docs/distributed.md), check host, port and firewall, or use --cluster local:N on this machine; "
            "Dask waits distributed.comm.timeouts.connect (DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT) for it",
        ) from None
    try:
        return _prepare(client, address, timeout=timeout, ship_once_bytes=ship_once_bytes, max_batch=max_batch)
    except BaseException:
        client.close(timeout=RPC_SECONDS)
        raise


@contextlib.contextmanager
def _restored_mask(mask: Any) -> Iterator[None]:
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _local_security() -> Any:
    try:
        import cryptography  # noqa: F401  (Security.temporary needs it)
    except ImportError:
        return None
    return True


def _prepare(
    client: Client,
    address: str,
    *,
    cluster: Any = None,
    scratch: str | None = None,
    timeout: float,
    ship_once_bytes: int,
    max_batch: int,
) -> DaskExecutor:
    """Check every worker (refusing mismatches by name), guard later ones, and build the executor."""
    try:
        client.wait_for_workers(1, timeout=timeout)
    except (TimeoutError, distributed.TimeoutError):
        raise ClusterUnavailable(
            f"the Dask scheduler at {address} has no workers (waited {timeout:g} s)",
            "start workers with `dask worker ADDRESS --nthreads 1` (docs/distributed.md)",
        ) from None
    _check_scheduler(client, address)
    expected = fingerprint()
    problems = client.run(_describe_worker, expected, on_error="return")
    workers = client.scheduler_info(n_workers=-1)["workers"]
    refused = []
    for worker_address, problem in sorted(problems.items()):
        if isinstance(problem, BaseException):
            problem = f"cannot run verify-tf's check there ({type(problem).__name__}: {problem})"
        if problem:
            name = workers.get(worker_address, {}).get("name", worker_address)
            refused.append(f"worker {name!r} ({worker_address}): {problem}")
    usable = len(problems) - len(refused)
    if usable <= 0:  # nothing is registered or closed on a cluster this run does not use
        raise ClusterUnavailable(
            f"no usable worker on the Dask cluster at {address}: " + "; ".join(refused),
            "install the same verify-tf, z3-solver and Python on the scheduler's workers as here, and start them "
            "with --nthreads 1 (docs/distributed.md: version matching)",
        )
    # refuses mismatched workers now (closing them) and any that join later; close() unregisters it. An error
    # here names a worker it refused, which `refused` lists already
    with contextlib.suppress(Exception):
        client.register_plugin(VersionGuard(expected))
    stubborn = [a for a, p in problems.items() if isinstance(p, BaseException)]
    if stubborn:
        with contextlib.suppress(Exception):
            client.retire_workers(workers=stubborn, close_workers=True)
    return DaskExecutor(
        client,
        address,
        usable,
        cluster=cluster,
        scratch=scratch,
        refused=refused,
        ship_once_bytes=ship_once_bytes,
        max_batch=max_batch,
    )


def _check_scheduler(client: Client, address: str) -> None:
    """A scheduler with another verify-tf or Dask is refused (exit 2), by what differs."""
    hint = (
        "install the same verify-tf[cluster] on the scheduler, the workers and here (docs/distributed.md: "
        "version matching)"
    )
    try:
        theirs = client.run_on_scheduler(_scheduler_versions)
    except Exception as exc:  # e.g. verify-tf missing there: it cannot unpickle the function
        raise ClusterUnavailable(
            f"the Dask scheduler at {address} cannot run verify-tf's version check ({type(exc).__name__}: {exc})", hint
        ) from None
    problem = differences(_scheduler_versions(), theirs)
    if problem:
        raise ClusterUnavailable(f"the Dask scheduler at {address} runs other versions: {problem}", hint)

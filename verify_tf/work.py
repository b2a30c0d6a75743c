"""Work units, the one deadline, and the executor interface every engine driver submits to.

An engine driver cuts a property check into **work units**: pure, picklable calls of a module-level function
on plain data (a chunk of the domain, one solver query, one cube). An **executor** runs them: in this
process (``executors.InProcess``), in a local process pool (``executors.ProcessPool``, ``-j N``) or on a Dask
cluster (``executors.cluster``, ``--cluster``). Engines only see the interface below, so a new executor needs
no change in any engine.

``schedule`` is the loop every driver uses: it keeps a bounded number of units in flight, hands each result
to the driver as it arrives, stops early when the driver says so (a replayed refutation), cancels what is
left, and never waits past the deadline. The merge rule lives in the drivers and is the same everywhere: a
replayed refutation wins; ``proved`` needs every unit proved; anything else is ``unknown`` saying what ran
and what did not.

A unit's function is called as ``function(*args, deadline=Deadline, cancelled=callable, report=callable)``:
``deadline`` is the unit's own budget (``share`` of the property's remaining time when the unit starts, or
when it is sent to another process), ``cancelled()`` turns true when the driver no longer needs the unit
(cooperative: solvers and enumeration loops poll it), ``report(phase)`` names what the unit is doing (shown
as progress where the unit runs in this process; a no-op elsewhere); ``report(phase, done, total, what)`` also
says how far it is (a progress bar: e.g. the counting engine's lengths).
"""

from __future__ import annotations

import errno
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sized
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, Protocol

MAX_TIMEOUT = 1_000_000  # seconds (11.6 days): the largest budget a spec or --timeout may ask for (docs/cli.md)


# ---------------------------------------------------------------- interrupts (SIGINT, SIGTERM)
#
# An interrupt is never a verdict (docs/cli.md, "Interrupts"). The CLI turns a signal into ``request_interrupt``;
# from then on every ``Deadline`` of this process has expired and every ``cancelled()`` is true, so drivers,
# ``schedule`` and solvers wind down the way they do at a timeout (within the polling intervals they already
# have), the CLI relabels what did not finish ``unknown (interrupted)``, removes the scratch folders registered
# here, ends the processes it started and exits 130 or 143.

_INTERRUPT = threading.Event()
_INTERRUPT_SIGNAL: list[int] = []
_ON_INTERRUPT: list[Callable[[], None]] = []
_SCRATCH: set[str] = set()
_SCRATCH_LOCK = threading.Lock()


def request_interrupt(signum: int) -> None:
    """Stop every check of this process as soon as it polls (any thread may call it)."""
    if not _INTERRUPT_SIGNAL:
        _INTERRUPT_SIGNAL.append(signum)
    _INTERRUPT.set()
    for hook in list(_ON_INTERRUPT):
        with suppress(Exception):  # a hook that fails must not keep the others from running
            hook()


def interrupted() -> int | None:
    """The signal that interrupted this process, or None."""
    return _INTERRUPT_SIGNAL[0] if _INTERRUPT.is_set() and _INTERRUPT_SIGNAL else None


def clear_interrupt() -> None:
    """Forget an interrupt (tests, and the API between runs)."""
    _INTERRUPT.clear()
    _INTERRUPT_SIGNAL.clear()


_SIGNALS_TAKEN = threading.Event()


def take_signals(taken: bool) -> None:
    """Say whether verify-tf's own handlers take SIGINT/SIGTERM now (``cli.interrupts.Interrupts``): then no solver
    may install one of its own (z3's would swallow Ctrl-C, ``symbolic.solve.Session``)."""
    if taken:
        _SIGNALS_TAKEN.set()
    else:
        _SIGNALS_TAKEN.clear()


def signals_taken() -> bool:
    return _SIGNALS_TAKEN.is_set()


def on_interrupt(hook: Callable[[], None]) -> None:
    """Call ``hook`` when an interrupt is requested (e.g. interrupt z3, which does not poll in C code)."""
    _ON_INTERRUPT.append(hook)


def register_scratch(path: str) -> None:
    """A temporary folder to remove if the process is interrupted before its owner removes it."""
    with _SCRATCH_LOCK:
        _SCRATCH.add(path)


def forget_scratch(path: str) -> None:
    with _SCRATCH_LOCK:
        _SCRATCH.discard(path)


def scratch_folders() -> list[str]:
    with _SCRATCH_LOCK:
        return sorted(_SCRATCH)


# z3's main context belongs to the process and is not thread-safe. Work units run one at a time per process
# (every executor guarantees it); code that calls z3 in a driver's own thread, where several properties run
# side by side (check_all with -j N or --cluster), holds this lock. (Here, not beside z3: taking it must not
# import z3.)
Z3_LOCK = threading.RLock()


class DeadlineExpired(Exception):
    """Raised by long-running construction code (e.g. SMT encoding) that finds its deadline passed."""


class ResourceExhausted(Exception):
    """The machine ran out of something a check needs (disk for spilled runs, memory). The verdict is ``unknown``
    with this message, which says what ran out and what to change: nothing is wrong with the model or an engine,
    so it is never ``error``."""


class CannotCheck(Exception):
    """The check cannot go on because of its input, not because of a bug (a RASP program undefined on an input the
    spec does not declare don't-care): the verdict is ``unknown`` with this message, which says what to change."""


_AMBIENT = threading.local()


@contextmanager
def deadline_in_force(deadline: Deadline) -> Iterator[None]:
    """Make ``deadline`` the one ``check_deadline`` consults in this thread (the innermost one wins)."""
    previous = getattr(_AMBIENT, "deadline", None)
    _AMBIENT.deadline = deadline
    try:
        yield
    finally:
        _AMBIENT.deadline = previous


def deadline_now() -> Deadline | None:
    """The deadline in force in this thread (``deadline_in_force``), or None."""
    return getattr(_AMBIENT, "deadline", None)


def check_deadline(what: str) -> None:
    """Raise ``DeadlineExpired`` once the deadline in force in this thread has passed. For code deep below the
    drivers that takes no deadline argument (interval bounds, planning a batched program): it runs inside a
    work unit (``run_unit``) or a property check (``runner.check_property``), which put their deadline in force."""
    deadline = getattr(_AMBIENT, "deadline", None)
    if deadline is not None:
        deadline.check(what)


def within_deadline(function: Callable[[], Any], what: str) -> Any:
    """``function()``, given at most what is left of the deadline in force in this thread: a call that cannot poll
    (a foreign library's import and first call: JAX took 13 s and 6 s) runs in a daemon thread, and the caller
    gets ``DeadlineExpired`` when the deadline comes first (the thread is left to finish or to end with the
    process). Without a deadline in force it is a plain call."""
    deadline = getattr(_AMBIENT, "deadline", None)
    if deadline is None:
        return function()
    deadline.check(what)
    outcome: dict[str, Any] = {}

    def call() -> None:
        try:
            outcome["value"] = function()
        except BaseException as exc:  # handed to the caller's thread below
            outcome["error"] = exc

    worker = threading.Thread(target=call, name=f"verify-tf: {what}", daemon=True)
    worker.start()
    worker.join(deadline.remaining())
    if worker.is_alive():
        raise DeadlineExpired(f"timeout during {what}")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def out_of_memory_message() -> str:
    """What ran out, how much this process held, and what to lower (for a MemoryError)."""
    text = "out of memory"
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB
        text += f": this process reached {peak / 2**30:.2f} GiB"
        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        if limit != resource.RLIM_INFINITY:
            text += f" of its {limit / 2**30:.2f} GiB address-space limit (ulimit -v)"
    except (ImportError, OSError, ValueError):  # no resource module (Windows): the advice still holds
        pass
    return text + "; lower --memory (the working memory of each process) or run fewer jobs (-j)"


def clock() -> float:
    """The clock every ``Deadline`` reads (``time.perf_counter``). Looked up at each reading, so a test can replace it
    with a deterministic one (each reading advances it a fixed step): a budget in readings, the same on any machine,
    where the outcome must not depend on the machine's speed or load."""
    return time.perf_counter()


class Deadline:
    """A wall-clock budget: ``remaining()``, ``expired()``, ``check()`` (raises ``DeadlineExpired``).

    One deadline is created per property check from ``--timeout`` and handed to everything that runs for it:
    encoding, solving, enumeration, replay, minimisation. Units get a fresh ``Deadline`` of the budget that
    was left when they were submitted (clocks of other machines are never compared).
    """

    def __init__(self, seconds: float, *, start: float | None = None):
        self.start = clock() if start is None else start
        self.seconds = seconds
        self.end = self.start + seconds

    def remaining(self) -> float:
        if _INTERRUPT.is_set():
            return 0.0
        return max(0.0, self.end - clock())

    def expired(self) -> bool:
        return _INTERRUPT.is_set() or clock() >= self.end

    def elapsed(self) -> float:
        return clock() - self.start

    def check(self, what: str = "") -> None:
        if _INTERRUPT.is_set():
            raise DeadlineExpired(f"interrupted {what}".strip())
        if self.expired():
            raise DeadlineExpired(f"timeout ({self.seconds:g} s) {what}".strip())

    def share(self, fraction: float, at_least: float = 0.0) -> Deadline:
        """A sub-deadline for one phase: ``fraction`` of what is left (never past this deadline)."""
        left = self.remaining()
        return Deadline(min(left, max(at_least, fraction * left)))


def never_cancelled() -> bool:
    return _INTERRUPT.is_set()  # nothing cancels the unit, but an interrupt stops everything


@dataclass(frozen=True)
class WorkUnit:
    """One pure piece of a property check. ``function`` is module-level (pickled by reference)."""

    key: str  # names the unit in statistics and errors, e.g. "enumerate: inputs 65536..131071"
    function: Callable[..., Any]
    args: tuple
    order: int = 0  # the driver's order (least witness = lowest order); also the priority
    weight: float = 1.0  # share of the property's work, for progress
    share: float = 1.0  # the fraction of the remaining time this unit may use
    # executors that queue units of several properties (Dask) start higher priorities first, then lower orders;
    # cheap falsification (the search engine) uses 1 so it runs before long exhaustive work
    priority: int = 0


class UnitError(Exception):
    """A unit raised (or its worker died repeatedly): the verdict is ``error`` naming the unit, never proved."""

    def __init__(self, key: str, message: str, remote_traceback: str = ""):
        super().__init__(f"{key}: {message}")
        self.key, self.message, self.remote_traceback = key, message, remote_traceback

    def __reduce__(self):  # it crosses process boundaries: pickle the constructor's arguments
        return UnitError, (self.key, self.message, self.remote_traceback)

    @property
    def expired(self) -> bool:
        """The unit ran out of its budget (``DeadlineExpired`` raised inside it): a timeout, not a failure."""
        return self.message.startswith("DeadlineExpired:")

    @property
    def exhausted(self) -> str | None:
        """The message of a resource the unit ran out of (memory, spill disk), or None."""
        for prefix in ("MemoryError: ", "ResourceExhausted: "):
            if self.message.startswith(prefix):
                return self.message[len(prefix) :]
        return None

    @property
    def cannot_check(self) -> str | None:
        """The message of a ``CannotCheck`` the unit raised, or None."""
        prefix = "CannotCheck: "
        return self.message[len(prefix) :] if self.message.startswith(prefix) else None


class Handle(Protocol):
    unit: WorkUnit

    def result(self) -> Any:
        """The unit's return value; raises ``UnitError``."""
        ...


class Executor(Protocol):
    """Runs work units. ``workers``: how many run at once (drivers size their units by it).

    Optional: ``in_flight`` (how many units ``schedule`` keeps submitted at once; default twice ``workers``),
    read again before every submission, so an executor that packs small units into batches (Dask) can raise
    it once it has measured how long units take.
    """

    workers: int
    name: str

    def submit(self, unit: WorkUnit, deadline: Deadline) -> Handle:
        """Queue ``unit``; its budget is ``unit.share`` of what ``deadline`` has left when it starts."""
        ...

    def completed(self, handles: list[Handle], timeout: float) -> list[Handle]:
        """Some finished handles among ``handles`` (at least one unless ``timeout`` passed)."""
        ...

    def cancel(self, handles: list[Handle]) -> None:
        """Stop these units: not started ones never run, running ones are interrupted (cooperatively)."""
        ...


# ---------------------------------------------------------------- the scheduling loop

CONTINUE, STOP_AFTER, STOP = "continue", "stop-after", "stop"
POLL_SECONDS = 0.25  # the longest ``schedule`` waits for a unit before it looks at the deadline again


@dataclass
class Schedule:
    """What happened to the units of one run (for ``unknown`` verdicts: what ran and what did not)."""

    submitted: int = 0
    finished: int = 0
    cancelled: int = 0
    not_started: int = 0
    expired: bool = False
    errors: list[UnitError] = field(default_factory=list)

    def describe(self, total: int | None = None) -> str:
        parts = [f"{self.finished}" + (f" of {total}" if total is not None else "") + " units finished"]
        if self.cancelled:
            parts.append(f"{self.cancelled} cancelled")
        if self.not_started:
            parts.append(f"{self.not_started} not started")
        if self.expired:
            parts.append("timeout")
        return ", ".join(parts)


def schedule(
    executor: Executor,
    units: Iterable[WorkUnit],
    deadline: Deadline,
    on_result: Callable[[WorkUnit, Any], str],
    *,
    in_flight: int | None = None,
    on_error: Callable[[UnitError], str] | None = None,
) -> Schedule:
    """Run ``units`` on ``executor`` until all are done, the driver stops, or the deadline passes.

    ``on_result(unit, value)`` returns CONTINUE, STOP_AFTER (units of a higher ``order`` are no longer
    needed: they are cancelled or never submitted) or STOP (cancel everything). A failing unit goes to
    ``on_error`` (default: record it and stop). At most ``in_flight`` units are submitted at a time
    (default: the executor's ``in_flight``, else twice its workers), so a huge domain never floods a scheduler.
    """

    def limit() -> int:
        return in_flight or max(1, getattr(executor, "in_flight", 0) or 2 * executor.workers)

    pending = iter(units)
    ascending = getattr(units, "ascending", False)  # orders only grow: past the cutoff, none is needed
    taken = 0  # units drawn from ``pending`` (submitted or skipped)
    running: list[Handle] = []
    summary = Schedule()
    cutoff: int | None = None  # units with order > cutoff are no longer needed
    exhausted = False

    def fill() -> None:
        nonlocal exhausted, taken
        while not exhausted and len(running) < limit():
            unit = next(pending, None)
            if unit is None:
                exhausted = True
                return
            taken += 1
            if deadline.expired() or (cutoff is not None and unit.order > cutoff and ascending):
                summary.not_started += 1
                exhausted = True  # none of the rest will start: they are counted at the end, not drawn
                return
            if cutoff is not None and unit.order > cutoff:
                summary.not_started += 1
                continue
            running.append(executor.submit(unit, deadline))
            summary.submitted += 1

    def drop(handles: list[Handle]) -> None:
        if handles:
            executor.cancel(handles)
            summary.cancelled += len(handles)
            for h in handles:
                running.remove(h)

    fill()
    while running:
        if deadline.expired():
            summary.expired = True
            drop(list(running))
            break
        # in slices: an interrupt (which expires the deadline) is noticed within POLL_SECONDS, not at the end
        done = executor.completed(running, timeout=min(deadline.remaining(), POLL_SECONDS))
        for handle in done:
            running.remove(handle)
            summary.finished += 1
            try:
                value = handle.result()
            except UnitError as error:
                if error.exhausted is not None:  # the machine, not the unit: stop the property, say what ran out
                    drop(list(running))
                    raise ResourceExhausted(error.exhausted) from None
                if error.cannot_check is not None:  # the input, not the unit: stop the property, say what to change
                    drop(list(running))
                    raise CannotCheck(error.cannot_check) from None
                if error.expired:  # a timeout inside the unit: what ran is reported as for any timeout
                    summary.expired = True
                    decision = STOP
                else:
                    summary.errors.append(error)
                    decision = on_error(error) if on_error is not None else STOP
            else:
                decision = on_result(handle.unit, value)
            if decision == STOP:
                cutoff = -1
            elif decision == STOP_AFTER:
                cutoff = handle.unit.order if cutoff is None else min(cutoff, handle.unit.order)
        if cutoff is not None:
            drop([h for h in running if h.unit.order > cutoff])
        fill()
    # what was never submitted (stopped early or out of time): counted, not drawn, when ``units`` is sized (a scan
    # of 2^61 inputs has 2^41 units: drawing them would outlast any deadline)
    if isinstance(units, Sized):
        summary.not_started += len(units) - taken
    else:
        for _ in pending:
            summary.not_started += 1
    if deadline.expired() and (summary.not_started or summary.cancelled):
        summary.expired = True
    return summary


def describe_exception(exc: BaseException) -> tuple[str, str]:
    """(message, traceback) of a unit's exception; running out of memory or disk gets a message that says so
    (``UnitError.exhausted`` reads it back in the process that schedules the unit)."""
    if isinstance(exc, MemoryError):
        return f"MemoryError: {out_of_memory_message()}", traceback.format_exc(limit=12)
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        where = f" ({exc.filename})" if exc.filename else ""
        return f"ResourceExhausted: no space left on the device{where}", traceback.format_exc(limit=12)
    return f"{type(exc).__name__}: {exc}", traceback.format_exc(limit=12)


class CancelFlag:
    """A thread-safe flag for cooperative cancellation inside one process."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def __call__(self) -> bool:
        return self._event.is_set() or _INTERRUPT.is_set()


def no_report(phase: str, *progress: Any) -> None:
    pass


def budget(unit: WorkUnit, deadline: Deadline) -> float:
    return deadline.remaining() * unit.share


def run_unit(
    unit: WorkUnit,
    seconds: float,
    cancelled: Callable[[], bool] = never_cancelled,
    report: Callable[..., None] = no_report,
) -> Any:
    """Call a unit's function with its budget (what every executor does, in whichever process); the budget is
    also the deadline in force (``check_deadline``) for whatever the unit calls."""
    deadline = Deadline(seconds)
    with deadline_in_force(deadline):
        return unit.function(*unit.args, deadline=deadline, cancelled=cancelled, report=report)


class ChunkUnits:
    """The work units over inputs [0, ``total``) in chunks of ``size``, made only as ``schedule`` draws them.

    Sized and lazy: the bookkeeping of a scan is the units in flight, not the domain. (A list of every unit of
    the strings up to length 60 over {a, b}, 2^61 inputs in 2^41 units of 2^20, grew by 70–90 MiB a second
    before the first unit ran: out of memory long before the deadline.) ``make(order, start, stop)`` builds
    the unit of inputs [start, stop), the ``order``-th chunk.
    """

    ascending = True  # unit orders only grow (``schedule`` stops drawing at the first one past its cutoff)

    def __init__(self, total: int, size: int, make: Callable[[int, int, int], WorkUnit]):
        if size < 1:
            raise ValueError("chunk size must be at least 1")
        self.total, self.size, self.make = max(0, total), size, make

    def __len__(self) -> int:
        return -(-self.total // self.size)

    def __iter__(self) -> Iterator[WorkUnit]:
        for order, (a, b) in enumerate(iter_chunks(self.total, self.size)):
            yield self.make(order, a, b)


def iter_chunks(total: int, size: int, start: int = 0) -> Iterator[tuple[int, int]]:
    """[a, b) ranges of at most ``size`` covering [start, total)."""
    a = start
    while a < total:
        b = min(total, a + size)
        yield a, b
        a = b

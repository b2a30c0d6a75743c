"""SIGINT and SIGTERM during ``verify-tf check``: an interrupt is never a verdict (docs/cli.md, "Interrupts").

``Interrupts`` installs the handlers for one command. Python runs signal handlers in the main thread only, and
only between bytecodes, so a main thread inside a long C call (z3, a numpy chunk) would not notice for a long
time; instead the C-level handler writes the signal's number to a socket (``signal.set_wakeup_fd``) and a
watcher thread reads it at once and calls ``work.request_interrupt``: every deadline of the process expires,
every ``cancelled()`` turns true, z3 is interrupted. The drivers then wind down as at a timeout, and the command
relabels what did not finish, writes its reports, removes the scratch folders, ends the processes it started
(``end_descendants``: pool workers, the resource tracker, Dask's nannies and workers, foreign solvers) and
exits 130 (SIGINT) or 143 (SIGTERM). A second SIGINT (or SIGTERM) writes the reports of what finished
(``last_words``), ends the children and exits at once, and so does the first one while the specs are loaded
(``exiting_at_once``: nothing has been checked, nothing is written).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from ..verdict import EXIT_INTERRUPTED
from ..work import interrupted, request_interrupt, scratch_folders, take_signals

SIGNALS = (signal.SIGINT, signal.SIGTERM)


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


class Interrupts:
    """Handlers for SIGINT and SIGTERM while the ``with`` block runs (main thread only)."""

    # what the first signal's message says is kept (``experiment`` passes its own: the models that finished)
    KEPT = "the properties that finished are reported, the rest are unknown (interrupted)"

    def __init__(self, stream=None, kept: str = KEPT) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.kept = kept
        self.first_at: float | None = None  # perf_counter() when the first signal arrived
        self.at_once = False  # while specs load: nothing to report or wind down, so the first signal exits
        self.doing = ""  # what was going on then (the message)
        # what a second signal does before it exits: write the reports of what finished (set by the command)
        self.last_words: Callable[[], None] | None = None

    @contextlib.contextmanager
    def exiting_at_once(self, doing: str = "loading the specs: nothing was checked") -> Iterator[None]:
        """While the block runs (loading the specs: nothing checked yet, and no deadline applies; an audit, which
        writes nothing), the first signal exits at once, as a second one does: loading may run long (a tracr
        export's definedness search). ``doing``: what the message says was going on."""
        self.at_once, self.doing = True, doing
        try:
            yield
        finally:
            self.at_once = False

    def __enter__(self) -> Interrupts:
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(True)
        self._writer.setblocking(False)
        self._previous = {signum: signal.signal(signum, _note) for signum in SIGNALS}
        take_signals(True)  # no solver installs a SIGINT handler of its own now (symbolic.solve.Session)
        self._previous_fd = signal.set_wakeup_fd(self._writer.fileno(), warn_on_full_buffer=False)
        self._watcher = threading.Thread(target=self._watch, name="verify-tf interrupts", daemon=True)
        self._watcher.start()
        return self

    def __exit__(self, *exc) -> None:
        take_signals(False)
        signal.set_wakeup_fd(self._previous_fd)
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._writer.close()  # the watcher reads end-of-file and returns
        self._watcher.join(1)
        self._reader.close()

    def _watch(self) -> None:
        while True:
            try:
                data = self._reader.recv(64)
            except OSError:
                return
            if not data:
                return
            for signum in data:
                if signum not in SIGNALS:
                    continue
                if interrupted() is None and self.at_once:
                    request_interrupt(signum)
                    self._say(f"\n{signal_name(signum)} while {self.doing}; exiting now.\n")
                    self._exit_now(signum)
                elif interrupted() is None:
                    self.first_at = time.perf_counter()
                    request_interrupt(signum)
                    self._say(
                        f"\n{signal_name(signum)}: stopping; {self.kept}. "
                        f"{'Ctrl-C' if signum == signal.SIGINT else 'SIGTERM'} again exits at once.\n"
                    )
                else:  # the second signal: no more waiting, but what finished is reported
                    self._say(f"\n{signal_name(signum)} again: writing the reports of what finished; exiting now.\n")
                    self._exit_now(signum)

    def _exit_now(self, signum: int) -> None:
        if self.last_words is not None:
            with contextlib.suppress(
                Exception
            ):  # a report that cannot be written must not keep the exit from happening
                self.last_words()
        remove_scratch()
        end_descendants(grace=0.0)
        os._exit(EXIT_INTERRUPTED[interrupted() or signum])

    def _say(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):  # a closed stderr must not keep the interrupt from working
            self.stream.write(text)
            self.stream.flush()


def _note(signum, frame) -> None:
    """The Python-level handler: nothing to do, the watcher thread acts (it has already been woken)."""


def remove_scratch() -> list[str]:
    """Remove the scratch folders still registered (spilled runs, a local cluster's directories)."""
    removed = []
    for folder in scratch_folders():
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def descendants(root: int | None = None) -> list[int]:
    """Every process whose parent chain reaches ``root`` (default: this process), read from /proc (Linux); on
    other systems, this process's multiprocessing children."""
    root = os.getpid() if root is None else root
    proc = Path("/proc")
    if not proc.is_dir():
        import multiprocessing

        return [p.pid for p in multiprocessing.active_children() if p.pid is not None]
    parents: dict[int, int] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # it exited meanwhile
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # the name may hold spaces and parentheses
        parents[int(entry.name)] = int(fields[1])
    found: list[int] = []
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        found += children
        frontier += children
    return found


def end_descendants(grace: float = 0.5) -> list[int]:
    """SIGTERM every descendant, SIGKILL what is left after ``grace`` seconds (multiprocessing's resource tracker
    ignores SIGTERM; Dask's nannies use it to stop their workers). Returns the processes that were running.
    Zombies are not reaped here (multiprocessing waits for its own); they vanish with this process."""
    running = descendants()
    for pid in running:
        _send(pid, signal.SIGTERM)
    until = time.perf_counter() + grace
    while grace > 0 and time.perf_counter() < until and any(alive(pid) for pid in running):
        time.sleep(0.05)
    for pid in running + descendants():  # a child may have started another meanwhile
        if alive(pid):
            _send(pid, signal.SIGKILL)
    return running


def _send(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signum)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie has exited: it only waits for its parent to reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rfind(")") + 2] != "Z"

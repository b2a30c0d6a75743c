"""Progress of a running check: a bar on a terminal, a heartbeat line in logs, nothing with ``--quiet``."""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING

from rich.markup import escape

from . import output

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID


class ProgressDisplay:
    """Progress of one check, from ``engines.base.ProgressEvent``s: a bar on a terminal (after the first second),
    a plain line every 10 seconds otherwise (``VERIFY_TF_PROGRESS_SECONDS``) (CI logs; a heartbeat thread keeps
    printing the current phase while a long solver query runs), nothing with ``--quiet``. Certification (events
    of engine ``certify``: "certifying (cvc5 / LRAT / sample)") gets a bar of its own, and in logs a line at once.
    """

    def __init__(self, label: str, mode: str, forward: ProgressDisplay | None = None, console=None):
        self.label, self.mode = label, mode  # mode: bar | log | off
        self.console = console  # where it prints (default: stderr; ``experiment`` also logs to a redirected stdout)
        # where this check's certification events go when its own display is off (properties side by side)
        self.forward = forward
        self.every = float(os.environ.get("VERIFY_TF_PROGRESS_SECONDS", "10"))  # seconds between log lines
        self.start = time.perf_counter()
        self.progress: Progress | None = None  # the bar, made at the first event after one second
        self.task: TaskID | None = None
        self.certify_task: TaskID | None = None  # certification's own bar
        self.in_certification = False
        self.phase, self.amount = "", ""
        self.stopped = threading.Event()
        self.heartbeat = None
        if mode == "log":
            self.heartbeat = threading.Thread(target=self._beat, daemon=True)
            self.heartbeat.start()

    def _beat(self) -> None:
        while not self.stopped.wait(self.every):
            if self.phase:
                self._line(f"{self.label}: {self.phase}{self.amount}")

    def __call__(self, event) -> None:
        certifying = event.engine == "certify"
        if certifying and self.mode == "off" and self.forward is not None:
            self.forward.certifying(self.label, event)
            return
        if certifying and not self.in_certification and self.mode == "log":
            self._line(f"{self.label}: {event.phase}")  # at once: a certificate can take longer than the proof
        self.in_certification = certifying
        if event.phase:
            self.phase = event.phase
        self.amount = "" if not event.total else f" ({event.done:g}/{event.total:g} {event.unit})".replace(" )", ")")
        if self.mode != "bar" or (time.perf_counter() - self.start < 1.0 and not certifying):
            return
        if self.progress is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=self.console or output.err_console,
                transient=True,
            )
            self.progress.start()
        if certifying and self.certify_task is None:  # certification gets a bar of its own
            self.certify_task = self.progress.add_task(escape(f"{self.label}: {event.phase}"), total=event.total)
        if self.task is None and not certifying:
            self.task = self.progress.add_task(escape(self.label), total=event.total)
        task = self.certify_task if certifying else self.task
        assert task is not None
        self.progress.update(
            task, completed=event.done, total=event.total, description=escape(f"{self.label}: {self.phase}"[:100])
        )

    def certifying(self, label: str, event) -> None:
        """A property checked side by side is being certified: say so on this (the overall) display."""
        self(type(event)(event.engine, f"{label}: {event.phase}", event.done, event.total, event.unit))

    def say(self, text: str) -> None:
        """One line now, with the elapsed time (a finished step of long work), unless the display is off."""
        if self.mode != "off":
            self._line(text)

    def _line(self, text: str) -> None:
        (self.console or output.err_console).print(
            f"[{time.perf_counter() - self.start:6.0f} s] {text}", highlight=False, markup=False, soft_wrap=True
        )

    def close(self) -> None:
        self.stopped.set()
        if self.heartbeat is not None:
            self.heartbeat.join()
        if self.progress is not None:
            self.progress.stop()

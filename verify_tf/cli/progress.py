"""Progress of a running check: a bar on a terminal, a heartbeat line in logs, nothing with ``--quiet``."""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING

from . import output

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID


class ProgressDisplay:
    """Progress of one check, from ``engines.base.ProgressEvent``s: a bar on a terminal (after the first second),
    a plain line every 10 seconds otherwise (``VERIFY_TF_PROGRESS_SECONDS``) (CI logs; a heartbeat thread keeps
    printing the current phase while a long solver query runs), nothing with ``--quiet``."""

    def __init__(self, label: str, mode: str):
        self.label, self.mode = label, mode  # mode: bar | log | off
        self.every = float(os.environ.get("VERIFY_TF_PROGRESS_SECONDS", "10"))  # seconds between log lines
        self.start = time.perf_counter()
        self.progress: Progress | None = None  # the bar, made at the first event after one second
        self.task: TaskID | None = None
        self.phase, self.amount = "", ""
        self.stopped = threading.Event()
        self.heartbeat = None
        if mode == "log":
            self.heartbeat = threading.Thread(target=self._beat, daemon=True)
            self.heartbeat.start()

    def _beat(self) -> None:
        while not self.stopped.wait(self.every):
            if self.phase:
                output.err_console.print(
                    f"[{time.perf_counter() - self.start:6.0f} s] {self.label}: {self.phase}{self.amount}",
                    highlight=False,
                    markup=False,
                    soft_wrap=True,
                )

    def __call__(self, event) -> None:
        if event.phase:
            self.phase = event.phase
        self.amount = "" if not event.total else f" ({event.done:g}/{event.total:g} {event.unit})".replace(" )", ")")
        if self.mode != "bar" or time.perf_counter() - self.start < 1.0:
            return
        if self.progress is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=output.err_console,
                transient=True,
            )
            self.progress.start()
            self.task = self.progress.add_task(self.label, total=event.total)
        assert self.task is not None
        self.progress.update(
            self.task, completed=event.done, total=event.total, description=f"{self.label}: {self.phase}"[:100]
        )

    def close(self) -> None:
        self.stopped.set()
        if self.heartbeat is not None:
            self.heartbeat.join()
        if self.progress is not None:
            self.progress.stop()

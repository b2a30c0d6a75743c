"""Work units and a fault-injecting property for tests/test_cluster.py and tests/test_executors.py.

They live in a module of their own (not in a test file) because worker processes import them: Dask workers
and pool processes find this folder on their path (spawned processes inherit the parent's ``sys.path``; the
CLI-started Dask workers of the tests get it through ``PYTHONPATH``).
"""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import z3

from verify_tf.properties.output_bounds import OutputBounds
from verify_tf.symbolic.solve import solve_z3


def pigeonhole(pigeons: int) -> list:
    """PHP(pigeons, pigeons - 1): unsat, and exponential for CDCL; z3 does not finish PHP(12, 11) in 60 s."""
    holes = pigeons - 1
    p = [[z3.Bool(f"p{i}_{j}") for j in range(holes)] for i in range(pigeons)]
    clauses = [z3.Or(row) for row in p]
    for j in range(holes):
        for a in range(pigeons):
            for b in range(a + 1, pigeons):
                clauses.append(z3.Or(z3.Not(p[a][j]), z3.Not(p[b][j])))
    return clauses


def long_solve(marker: str, *, deadline, cancelled, report) -> str:
    """A solver unit that runs until its budget ends or it is cancelled (verify-tf's own z3 watchdog); it
    writes how it ended to ``marker`` (the executor drops a cancelled unit's result, so this is how a test
    sees it). The marker's ``started`` file says the solve has begun."""
    Path(marker + ".started").write_text(str(os.getpid()))
    answer = solve_z3(pigeonhole(12), [], deadline.remaining(), 0, None, cancelled)
    Path(marker + ".part").write_text(f"{answer.status} {answer.reason}")
    os.replace(marker + ".part", marker)  # the test polls for the marker: it appears complete or not at all
    return answer.status


def refute_when(marker: str, *, deadline, cancelled, report) -> str:
    """Stands for a unit that finds a counterexample: it answers once ``long_solve`` has started."""
    while not Path(marker + ".started").exists() and not deadline.expired():
        time.sleep(0.01)
    return "refuted"


def environment_variable(name: str):
    """Runs on a worker (``client.run``)."""
    return os.environ.get(name)


def sigint_state() -> tuple[bool, bool]:
    """Runs on a worker (``client.run``): (SIGINT ignored, SIGINT blocked in the process's main thread). Nothing in
    the worker unblocks it, so a blocked one shows that the worker was born with it blocked (spawn's exec keeps the
    mask)."""
    status = Path(f"/proc/self/task/{os.getpid()}/status").read_text()
    blocked = int(re.search(r"^SigBlk:\s*([0-9a-f]+)$", status, re.M).group(1), 16)
    return signal.getsignal(signal.SIGINT) == signal.SIG_IGN, bool(blocked >> (signal.SIGINT - 1) & 1)


def pool_worker_sigint(*, deadline, cancelled, report) -> tuple[bool, bool | None, bool]:
    """Runs in a ``-j`` pool worker: (SIGINT ignored, the worker was born with SIGINT blocked, SIGINT blocked now)."""
    from verify_tf import executors

    return (
        signal.getsignal(signal.SIGINT) == signal.SIG_IGN,
        executors.BORN_BLOCKING_SIGINT,
        signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, ()),
    )


def echo(value, *, deadline, cancelled, report):
    return value


def fail(message: str, *, deadline, cancelled, report):
    raise ValueError(message)


class Faulty(OutputBounds):
    """output-bounds with one input that misbehaves in a worker: ``raise`` (the unit raises), ``crash`` (the
    worker process dies, every time), ``block`` (waits for ``folder/go``, announcing ``folder/waiting-PID``).
    Every evaluation is logged as ``PID input`` in ``folder/attempts-PID``."""

    def __init__(self, mode: str, at: tuple, folder: str):
        self.mode, self.at, self.folder = mode, at, folder

    def violation(self, task, tokens):
        folder = Path(self.folder)
        with open(folder / f"attempts-{os.getpid()}", "a") as log:
            log.write(f"{os.getpid()} {tokens!r}\n")
        if tokens == self.at:
            if self.mode == "raise":
                raise ValueError(f"deliberate failure on {tokens!r}")
            if self.mode == "crash":
                os._exit(3)
            if self.mode == "block":
                (folder / f"waiting-{os.getpid()}").write_text("")
                while not (folder / "go").exists():
                    time.sleep(0.01)
        return super().violation(task, tokens)


def attempts(folder: Path) -> dict[str, set[int]]:
    """input repr -> the process ids that evaluated it (from the ``attempts-PID`` logs)."""
    seen: dict[str, set[int]] = {}
    for log in folder.glob("attempts-*"):
        for line in log.read_text().splitlines():
            pid, _, tokens = line.partition(" ")
            seen.setdefault(tokens, set()).add(int(pid))
    return seen

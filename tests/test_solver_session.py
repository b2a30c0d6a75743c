"""The one z3 session (``verify_tf.symbolic.solve.Session``, issue 37 item 4, issue 38 "one signal path").

Every z3 use of verify-tf goes through it (tests/test_architecture.py finds no private solver); here, what it
promises: a check never outlives its deadline, an interrupt or ``cancelled()`` ends a running check at once, z3's
own SIGINT handler never takes Ctrl-C from verify-tf, extra assertions are popped after the check that asked them
(with the model kept), and the statistics count every check.

The hard query is the pigeonhole principle for 12 pigeons in 11 holes: unsat, and far beyond z3's reach in a test
(its resolution proofs are exponential, Haken 1985; measured: over 300 s on the development machine). Nothing here
waits on the clock: a check is interrupted once its watchdog thread is seen running, and every ceiling is generous.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import z3

from verify_tf.symbolic.solve import SAT, TACTICS_SMT, UNKNOWN, UNSAT, Session
from verify_tf.work import Deadline, clear_interrupt, request_interrupt, take_signals

ROOT = Path(__file__).resolve().parent.parent
CEILING = 120.0  # seconds: far below the pigeonhole query's own time, far above an interrupt's


def pigeonhole(holes: int) -> list:
    x = [[z3.Bool(f"p{i}_{j}") for j in range(holes)] for i in range(holes + 1)]
    every_pigeon_sits = [z3.Or(row) for row in x]
    one_per_hole = [
        z3.Or(z3.Not(x[i][j]), z3.Not(x[k][j])) for j in range(holes) for i in range(holes + 1) for k in range(i)
    ]
    return every_pigeon_sits + one_per_hole


def when_solving(action) -> threading.Thread:
    """Call ``action`` once a session's watchdog runs (a check has started), from another thread."""

    def wait_then_act() -> None:
        while not any(t.name == "verify-tf z3 watchdog" for t in threading.enumerate()):
            time.sleep(0.01)
        action()

    thread = threading.Thread(target=wait_then_act, daemon=True)
    thread.start()
    return thread


def test_an_easy_query_and_its_statistics():
    x, y = z3.Ints("x y")
    session = Session(Deadline(60))
    session.add(x > 3, y == x + 1, x < 5)
    assert session.check() == SAT
    assert session.model().eval(y).as_long() == 5  # x = 4 is the only solution, so y = 5
    assert session.check(y != 5) == UNSAT  # for this check only: popped after it
    assert session.check() == SAT and session.model().eval(x).as_long() == 4
    assert session.statistics.checks == 3 and session.statistics.seconds > 0
    assert session.reason == ""


def test_extra_assertions_keep_the_model_of_their_check():
    x = z3.Int("x")
    session = Session(Deadline(60))
    session.add(x >= 0, x <= 9)
    assert session.check(x == 7) == SAT
    assert session.model().eval(x).as_long() == 7  # the model of the pushed check, read after its pop
    assert [str(a) for a in session.assertions()] == ["x >= 0", "x <= 9"]


def test_tactics_and_optimize_are_sessions_too():
    x, y = z3.Ints("x y")
    tactic = Session(Deadline(60), tactics=TACTICS_SMT, seed=None)
    tactic.add(x == y + 2, y >= 3)
    assert tactic.check() == SAT and tactic.model().eval(x).as_long() >= 5
    optimise = Session(Deadline(60), optimize=True, seed=None)
    optimise.add(x >= 3, x <= 8)
    optimise.minimize(x)
    assert optimise.check() == SAT and optimise.model().eval(x).as_long() == 3  # the least value of [3, 8]


def test_a_check_stops_at_its_deadline():
    session = Session(Deadline(1.0))
    session.add(pigeonhole(12))
    started = time.perf_counter()
    assert session.check() == UNKNOWN
    assert time.perf_counter() - started < CEILING  # measured 0.9 s: z3's own timeout at 0.8 s, the watchdog at 0.9
    assert "timeout" in session.reason or "canceled" in session.reason
    assert Session(Deadline(0)).check() == UNKNOWN  # no time left: not even started


def test_an_interrupt_ends_a_running_check_at_once():
    session = Session(Deadline(3600))
    session.add(pigeonhole(12))
    thread = when_solving(lambda: request_interrupt(signal.SIGINT))
    started = time.perf_counter()
    try:
        assert session.check() == UNKNOWN
        assert time.perf_counter() - started < CEILING
        assert session.reason == "interrupted"
        assert session.check() == UNKNOWN and session.reason == "interrupted"  # later checks do not start
    finally:
        thread.join()
        clear_interrupt()
    x = z3.Int("x")  # the interrupt is forgotten: the context works again
    after = Session(Deadline(60))
    after.add(x == 2)
    assert after.check() == SAT and after.model().eval(x).as_long() == 2


def test_cancelled_ends_a_running_check():
    cancel = threading.Event()
    session = Session(Deadline(3600), cancelled=cancel.is_set)
    session.add(pigeonhole(12))
    thread = when_solving(cancel.set)
    assert session.check() == UNKNOWN and session.reason == "cancelled"
    thread.join()


SIGINT_DURING_A_CHECK = """
import sys
from verify_tf.cli.interrupts import Interrupts
from verify_tf.symbolic.solve import Session
from verify_tf.work import Deadline
from tests.test_solver_session import pigeonhole, when_solving

# verify-tf's own signal path (cli/interrupts.py): Python's C-level handler writes the signal to a socket, a thread
# reads it and requests the interrupt. z3's handler, if installed during the check, would take the signal instead.
with Interrupts():
    session = Session(Deadline(3600), tactics=sys.argv[1:])
    session.add(pigeonhole(12))
    when_solving(lambda: print("solving", flush=True))
    print(session.check(), session.reason, flush=True)
"""


def test_sigint_during_a_check_reaches_verify_tf():
    """On main b3da1e0 z3's own SIGINT handler took the signal: the check ended "interrupted from keyboard" and
    verify-tf never knew (the next property ran to its end). A plain solver and a tactic pipeline's solver."""
    for tactics in ([], list(TACTICS_SMT)):
        process = subprocess.Popen(
            [sys.executable, "-c", SIGINT_DURING_A_CHECK, *tactics],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert process.stdout is not None
            assert process.stdout.readline() == "solving\n"  # the check has started
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=CEILING)
        finally:
            if process.poll() is None:
                process.kill()
        assert process.returncode == 0, err
        assert out == "unknown interrupted\n", (tactics, out, err)  # not "unknown interrupted from keyboard"


def sigint_handler() -> int | None:
    """The address of this process's SIGINT handler as the kernel has it (sigaction(2)), not Python's record."""
    buffer = ctypes.create_string_buffer(512)  # larger than struct sigaction; the handler is its first member
    assert ctypes.CDLL(None).sigaction(signal.SIGINT, None, buffer) == 0
    return ctypes.c_void_p.from_buffer(buffer).value


def test_no_check_installs_z3s_sigint_handler():
    """z3's ``scoped_ctrl_c`` replaces the process's SIGINT handler for the length of a check unless the solver's
    ``ctrl_c`` parameter is false, which a session sets while verify-tf's own handlers take the signals
    (``work.take_signals``, as ``cli.interrupts.Interrupts`` does). The handler is read from the kernel while checks
    of each kind run: on main b3da1e0 it changed to z3's during every check. Without verify-tf's handlers (the
    Python API) z3's own is left to end a query at Ctrl-C, and the kernel shows it."""
    previous = signal.signal(signal.SIGINT, lambda *_: None)
    try:
        ours = sigint_handler()
        for taken, kind in [(True, {}), (True, {"tactics": TACTICS_SMT}), (True, {"optimize": True}), (False, {})]:
            take_signals(taken)
            seen: set[int | None] = set()
            session = Session(Deadline(1.5), **kind)
            session.add(pigeonhole(12))
            stop = threading.Event()

            def watch(seen=seen, stop=stop) -> None:
                while not stop.is_set():
                    seen.add(sigint_handler())
                    time.sleep(0.01)

            watcher = when_solving(watch)
            assert session.check() == UNKNOWN  # the 1.5 s deadline
            stop.set()
            watcher.join()
            if taken:
                assert seen == {ours}, kind
            else:
                assert seen - {ours}, "z3's own handler, while verify-tf takes no signal"
    finally:
        take_signals(False)
        signal.signal(signal.SIGINT, previous)

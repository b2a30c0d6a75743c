"""One signal path (issue 38, "Interrupts"): SIGINT while z3 solves in process, a second signal, SIGTERM while a
proof is certified; ``verify-tf check`` in a subprocess each time, the signal sent once the run has shown (on its
progress lines) that it is in the phase under test, never after a sleep.

On main b3da1e0: z3's own SIGINT handler took Ctrl-C during a solve (the query ended "unknown (interrupted from
keyboard)", the next property ran to its end, exit 3 after 14 s); a second signal wrote no report, so the
properties that had finished were lost; SIGTERM during certification took 8 s to exit, or never until a second
signal (cvc5 ran in process, and the wait for CaDiCaL's child slept through its whole budget).

The seconds from the signal to the exit are measured and printed (bench/bench_interrupts.py tabulates them,
docs/cli.md "Interrupts"); the tests assert the exit code and the reports, and only a ceiling far above any
wind-down.

The long query (tests/data/z3-long-query.yaml): the SMT engine on ``specs/smt-output-bounds.yaml``'s model at
length 5 (9^10 inputs in one QF_LIA query): over 120 s of z3 on the development machine (measured), so it is still
solving when the signal comes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_interrupts import EXITS, QUICK  # two properties proved at once; the exit codes

ROOT = Path(__file__).resolve().parent.parent
CEILING = 60.0  # seconds from the signal to the exit: far above a wind-down (measured 0.1-0.3 s), far below a hang
LONG_Z3 = ROOT / "tests" / "data" / "z3-long-query.yaml"


def start(tmp_path: Path, arguments: list[str], *, preload: str = "") -> subprocess.Popen:
    """``verify-tf check ARGUMENTS --json r.json --junit r.xml`` in its own session, progress lines every 0.1 s on
    stderr (not a terminal: the log mode). ``preload``: Python run before the command (a test's patch)."""
    (tmp_path / "quick.yaml").write_text(QUICK)
    (tmp_path / "long.yaml").write_text(LONG_Z3.read_text())
    code = f"{preload}\nfrom verify_tf.cli import main\nmain()"
    command = [sys.executable, "-c", code, "check", *arguments, "--no-cache", "--json", "r.json", "--junit", "r.xml"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VERIFY_TF_PROGRESS_SECONDS": "0.1", "COLUMNS": "200"}
    return subprocess.Popen(
        command,
        cwd=tmp_path,
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(process: subprocess.Popen, text: str, limit: float = 300.0) -> list[str]:
    """The stderr lines up to the first that contains ``text`` (the run is then in that phase)."""
    assert process.stderr is not None
    lines: list[str] = []
    started = time.monotonic()
    for line in process.stderr:
        lines.append(line)
        if text in line:
            return lines
        assert time.monotonic() - started < limit, f"no {text!r} within {limit} s: {lines[-5:]}"
    raise AssertionError(f"the run ended before {text!r}: {''.join(lines[-20:])}")


def ended(process: subprocess.Popen) -> tuple[int, float, str]:
    """(exit code, seconds since now, the rest of stderr) once the process has exited."""
    sent = time.monotonic()
    _, err = process.communicate(timeout=CEILING)
    return process.returncode, time.monotonic() - sent, err


@pytest.fixture
def cleanup():
    running: list[subprocess.Popen] = []
    yield running.append
    for process in running:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_ctrl_c_during_a_z3_solve_exits_130_with_the_report(tmp_path, cleanup):
    process = start(tmp_path, ["quick.yaml", "long.yaml"])
    cleanup(process)
    wait_for(process, "long.yaml: output-bounds: solving")  # the two quick properties are proved by now
    os.killpg(process.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the whole process group
    code, seconds, err = ended(process)
    print(f"SIGINT during a z3 solve: exit {code} after {seconds:.2f} s")
    assert code == 130, err
    assert "interrupted from keyboard" not in err and "Traceback" not in err
    report = json.loads((tmp_path / "r.json").read_text())
    assert (report["interrupted"], report["exit_code"]) == ("SIGINT", 130)
    assert [(r["verdict"], r["method"]) for r in report["results"]] == [
        ("proved", "exhaustive"),
        ("proved", "exhaustive"),
        ("unknown", "interrupted"),
    ]
    assert report["results"][2]["detail"] == "interrupted (SIGINT) before it finished"
    assert seconds < CEILING


STUBBORN = """
import time
from verify_tf import runner
from verify_tf.verdict import Verdict
original = runner.check_property

def stubborn(spec, prop, *args, **kwargs):  # a wind-down that never ends: only a second signal ends the run
    if spec.path.name != "long.yaml":
        return original(spec, prop, *args, **kwargs)
    print("stubborn: started", flush=True)
    while True:
        time.sleep(0.01)

runner.check_property = stubborn
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_second_signal_writes_the_report_of_what_finished(tmp_path, cleanup, signum):
    """The first signal starts the wind-down (here it never ends: the property ignores the interrupt); the second
    exits at once, and the reports hold the two properties that finished. On main b3da1e0 nothing was written."""
    process = start(tmp_path, ["quick.yaml", "long.yaml"], preload=STUBBORN)
    cleanup(process)
    assert process.stdout is not None and process.stdout.readline() == "stubborn: started\n"
    process.send_signal(signum)
    wait_for(process, f"{signal.Signals(signum).name}: stopping")
    assert process.poll() is None  # the first signal waits for the wind-down
    process.send_signal(signum)
    code, seconds, err = ended(process)
    print(f"second {signal.Signals(signum).name}: exit {code} after {seconds:.2f} s")
    assert code == EXITS[signum] and "again: writing the reports of what finished; exiting now." in err
    report = json.loads((tmp_path / "r.json").read_text())
    name = signal.Signals(signum).name
    assert (report["interrupted"], report["exit_code"]) == (name, EXITS[signum])
    assert [(r["property"], r["verdict"]) for r in report["results"]] == [
        ("output-bounds", "proved"),
        ("output-bounds", "proved"),
        ("output-bounds", "unknown"),
    ]
    assert report["results"][2]["detail"] == f"not finished ({name}; a second signal ended the run)"
    assert "r.xml" in os.listdir(tmp_path)


@pytest.mark.slow  # the proof takes 5-30 s of z3 before its certification starts
def test_sigterm_during_certification_exits_at_once_with_the_report(tmp_path, cleanup):
    """specs/smt-output-bounds.yaml's first property: proved by z3, then certified by cvc5 (about 25 s of CPU)
    and CaDiCaL (over 300 s, docs/trust.md) side by side. The signal comes once certification has started."""
    spec = ROOT / "specs" / "smt-output-bounds.yaml"
    (tmp_path / "one.yaml").write_text(spec.read_text().replace('\n  - output-bounds: {name: "tighter', "\n#"))
    process = start(tmp_path, ["one.yaml", "--certify", "certs"])
    cleanup(process)
    wait_for(process, "certifying")
    process.send_signal(signal.SIGTERM)
    code, seconds, err = ended(process)
    print(f"SIGTERM during certification: exit {code} after {seconds:.2f} s")
    assert code == 143, err
    [result] = json.loads((tmp_path / "r.json").read_text())["results"]
    assert result["verdict"] == "proved"  # the proof finished; its evidence did not
    assert result["statistics"]["certificate"]["complete"] is False
    assert any("interrupted" in why for why in result["statistics"]["certificate"]["not_checked"])

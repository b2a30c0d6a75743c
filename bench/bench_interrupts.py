"""Seconds from a signal to the exit of ``verify-tf check``, and what it left behind (docs/cli.md, "Interrupts").

For each executor (in process, ``-j 2``, ``--cluster local:2``) and each signal (SIGINT to the process group, as
Ctrl-C; SIGTERM to the process, as a job runner), the run checks a distinct-values scan that spills every sorted
run (``--memory 64K``) beside crasp-L3; the signal is sent once the spill folder exists. Mode ``z3``: a z3 query
of minutes in process (tests/data/z3-long-query.yaml), the signal once the progress line says "solving"; mode
``certify``: specs/smt-output-bounds.yaml's proof certified (cvc5 and CaDiCaL), the signal once it says
"certifying". Printed per case: the exit code, the seconds from the signal to the exit, the processes the run
started (seen through /proc while it ran) and how many of them are still alive afterwards, and what is left in
the run's TMPDIR (1000 more when no JSON report was written).

    python bench/bench_interrupts.py            # every case, three times each
    python bench/bench_interrupts.py --repeat 1 inproc
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from verify_tf.cli.interrupts import alive, descendants

ROOT = Path(__file__).resolve().parent.parent
SCAN = [ROOT / "examples" / "contextual-mapping" / "yun-lemma6-d1-k32-n5.yaml", ROOT / "specs" / "crasp-L3.yaml"]
LONG_Z3 = ROOT / "tests" / "data" / "z3-long-query.yaml"  # minutes of z3 in process
ONE_PROOF = "one.yaml"  # specs/smt-output-bounds.yaml's first property (proved by z3, then certified), written here
# mode: (specs, options, what shows that the run is in the phase under test: a folder in TMPDIR or a stderr line)
MODES = {
    "inproc": (SCAN, ["--memory", "64K"], "verify-tf-runs-"),
    "j2": (SCAN, ["--memory", "64K", "-j", "2"], "verify-tf-runs-"),
    "cluster": (SCAN, ["--memory", "64K", "--cluster", "local:2"], "verify-tf-runs-"),
    "z3": ([LONG_Z3], [], "stderr:solving"),
    "certify": ([ONE_PROOF], ["--certify", "certs"], "stderr:certifying"),
}


def one(mode: str, signum: int) -> tuple[int, float, int, int, int]:
    specs, options, ready = MODES[mode]
    with tempfile.TemporaryDirectory(prefix="bench-interrupts-") as folder:
        scratch = Path(folder) / "tmp"
        scratch.mkdir()
        first = (ROOT / "specs" / "smt-output-bounds.yaml").read_text().split('\n  - output-bounds: {name: "tighter')[0]
        (Path(folder) / ONE_PROOF).write_text(first + "\n")
        env = {**os.environ, "TMPDIR": str(scratch), "PYTHONPATH": str(ROOT), "VERIFY_TF_PROGRESS_SECONDS": "0.1"}
        command = [sys.executable, "-m", "verify_tf", "check", *map(str, specs), "--no-cache", "--json", "r.json"]
        process = subprocess.Popen(
            [*command, *options],
            cwd=folder,
            env=env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        shown = threading.Event()
        threading.Thread(target=_watch, args=(process, ready.removeprefix("stderr:"), shown), daemon=True).start()
        seen: set[int] = set()
        while not (shown.is_set() if ready.startswith("stderr:") else _in(scratch, ready)):
            seen.update(descendants(process.pid))
            time.sleep(0.02)
        sent = time.monotonic()
        if signum == signal.SIGINT:
            os.killpg(process.pid, signum)
        else:
            process.send_signal(signum)
        while process.poll() is None:
            seen.update(descendants(process.pid))
            time.sleep(0.01)
        seconds = time.monotonic() - sent
        time.sleep(0.3)
        left = sum(alive(pid) for pid in seen)
        written = (Path(folder) / "r.json").is_file()
        return process.returncode, seconds, len(seen), left, len(list(scratch.iterdir())) + (0 if written else 1000)


def _in(scratch: Path, prefix: str) -> bool:
    return any(p.name.startswith(prefix) for p in scratch.iterdir())


def _watch(process: subprocess.Popen, text: str, shown: threading.Event) -> None:
    assert process.stderr is not None
    for line in process.stderr:  # read to the end: a full pipe would block the run
        if text in line:
            shown.set()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modes", nargs="*", default=list(MODES))
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    print(f"{'mode':8} {'signal':8} {'exit':>4} {'seconds (median, max)':>22} {'children':>8} {'left':>4} {'tmp':>3}")
    for mode in options.modes:
        for signum in (signal.SIGINT, signal.SIGTERM):
            runs = [one(mode, signum) for _ in range(options.repeat)]
            times = [r[1] for r in runs]
            print(
                f"{mode:8} {signal.Signals(signum).name:8} {runs[0][0]:>4} "
                f"{statistics.median(times):>12.2f} {max(times):>9.2f} {max(r[2] for r in runs):>8} "
                f"{max(r[3] for r in runs):>4} {max(r[4] for r in runs):>3}",
                flush=True,
            )


if __name__ == "__main__":
    main()

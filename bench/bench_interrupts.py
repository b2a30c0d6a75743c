"""Seconds from a signal to the exit of ``verify-tf check``, and what it left behind (docs/cli.md, "Interrupts").

For each executor (in process, ``-j 2``, ``--cluster local:2``) and each signal (SIGINT to the process group, as
Ctrl-C; SIGTERM to the process, as a job runner), the run checks a distinct-values scan that spills every sorted
run (``--memory 64K``) beside crasp-L3; the signal is sent once the spill folder exists. Printed per case: the
exit code, the seconds from the signal to the exit, the processes the run started (seen through /proc while it
ran) and how many of them are still alive afterwards, and what is left in the run's TMPDIR.

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
import time
from pathlib import Path

from verify_tf.cli.interrupts import alive, descendants

ROOT = Path(__file__).resolve().parent.parent
SPECS = [ROOT / "examples" / "contextual-mapping" / "yun-lemma6-d1-k32-n5.yaml", ROOT / "specs" / "crasp-L3.yaml"]
MODES = {"inproc": [], "j2": ["-j", "2"], "cluster": ["--cluster", "local:2"]}


def one(mode: str, signum: int) -> tuple[int, float, int, int, int]:
    with tempfile.TemporaryDirectory(prefix="bench-interrupts-") as folder:
        scratch = Path(folder) / "tmp"
        scratch.mkdir()
        env = {**os.environ, "TMPDIR": str(scratch), "PYTHONPATH": str(ROOT)}
        command = [sys.executable, "-m", "verify_tf", "check", *map(str, SPECS), "--no-cache", "--memory", "64K"]
        process = subprocess.Popen(
            [*command, "--json", "r.json", *MODES[mode]],
            cwd=folder,
            env=env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        seen: set[int] = set()
        while not any(p.name.startswith("verify-tf-runs-") for p in scratch.iterdir()):
            seen.update(descendants(process.pid))
            time.sleep(0.05)
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
        return process.returncode, seconds, len(seen), left, len(list(scratch.iterdir()))


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

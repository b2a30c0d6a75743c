"""Start-up of a small check: seconds to the first verdict line, and the verify_tf modules a check imports.

    python bench/bench_startup.py [--runs 5] [--spec specs/equivariance-standard-hardmax.yaml] [-- --no-cache ...]
    python bench/bench_startup.py --calibrated [--runs 5]
    python bench/bench_startup.py --calibrated --baseline [--runs 7]


Runs `python -m verify_tf check SPEC` as a fresh process RUNS times and reports the median wall time from the
process start to the first stdout line naming a verdict (proved, refuted, unknown, error), and the time to exit.
Then counts the verify_tf modules in sys.modules at the end of one such check (run in-process through the CLI's
`main`, which is what `verify-tf check` runs). The machine load (`os.getloadavg`) is printed beside the figures:
wall times on a shared machine are only comparable at similar load.

``--baseline`` also runs ``python -c "import numpy, z3"`` as many times, each right after a check (the same load),
and prints its median CPU seconds and the ratio of the medians (issue 37: at most 3.0).

``--no-cache`` also means no stored calibration: ``engine: auto`` then measures this machine's rates first (about
0.3 s, ``auto.measure``). ``--calibrated`` gives each run a fresh cache folder holding only this machine's
calibration (measured once, before the runs): the check runs (nothing is served from the proof cache) as it
does on any machine that has checked something before.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VERDICT = re.compile(r"\b(proved|refuted|unknown|error)\b")

_COUNT_MODULES = """
import sys
from verify_tf.cli import main
try:
    main(["check", *sys.argv[1:]], standalone_mode=False)
finally:
    names = sorted(m for m in sys.modules if m == "verify_tf" or m.startswith("verify_tf."))
    print("MODULES", len(names), " ".join(names), file=sys.stderr)
"""


def first_verdict_seconds(spec: str, extra: list[str]) -> tuple[float, float, float]:
    """Seconds from spawning `python -m verify_tf check SPEC` to its first verdict line, to its exit, and the
    CPU seconds (user + system) it used: on a loaded machine the fairer proxy for the idle wall time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "verify_tf", "check", spec, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert proc.stdout is not None
    first = float("nan")
    for line in proc.stdout:
        if VERDICT.search(line) and first != first:
            first = time.perf_counter() - start
    proc.wait()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return first, time.perf_counter() - start, cpu


def baseline_cpu() -> float:
    """CPU seconds (user + system) of ``python -c "import numpy, z3"``: what any check pays before verify-tf."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", "import numpy, z3"], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def imported_modules(spec: str, extra: list[str]) -> list[str]:
    """The verify_tf modules loaded at the end of one check of SPEC."""
    done = subprocess.run(
        [sys.executable, "-c", _COUNT_MODULES, spec, *extra], capture_output=True, text=True, env=dict(os.environ)
    )
    line = next(x for x in done.stderr.splitlines() if x.startswith("MODULES "))
    return line.split()[2:]


def calibrated_runs(
    spec: str, extra: list[str], runs: int, baseline: list[float] | None = None
) -> list[tuple[float, float, float]]:
    """``runs`` checks, each with a fresh cache folder that holds only the calibration of this machine (and after
    each, into ``baseline``, the CPU seconds of ``import numpy, z3``)."""
    from verify_tf.auto import CALIBRATION_FILE

    with tempfile.TemporaryDirectory() as scratch:
        warm = Path(scratch) / "warm"
        subprocess.run(
            [sys.executable, "-m", "verify_tf", "check", spec, "-q", "--cache", str(warm)], capture_output=True
        )
        calibration = warm / CALIBRATION_FILE
        assert calibration.is_file(), "the warm-up check stored no calibration"
        times = []
        for k in range(runs):
            folder = Path(scratch) / f"run-{k}"
            folder.mkdir()
            shutil.copy(calibration, folder / CALIBRATION_FILE)
            times.append(first_verdict_seconds(spec, [*extra, "--cache", str(folder)]))
            if baseline is not None:
                baseline.append(baseline_cpu())
        return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", default="specs/equivariance-standard-hardmax.yaml")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--list", action="store_true", help="print the imported modules too")
    parser.add_argument(
        "--calibrated", action="store_true", help="each run: a fresh cache folder holding this machine's calibration"
    )
    parser.add_argument("--baseline", action="store_true", help='also time python -c "import numpy, z3"')
    parser.add_argument("extra", nargs="*", help="more arguments for `verify-tf check` (after --), e.g. --no-cache")
    args = parser.parse_args()
    load = os.getloadavg()
    baseline: list[float] = []
    if args.calibrated:
        times = calibrated_runs(args.spec, args.extra, args.runs, baseline if args.baseline else None)
    else:
        times = []
        for _ in range(args.runs):
            times.append(first_verdict_seconds(args.spec, args.extra))
            if args.baseline:
                baseline.append(baseline_cpu())
    firsts = sorted(t[0] for t in times)
    exits = sorted(t[1] for t in times)
    cpus = sorted(t[2] for t in times)
    modules = imported_modules(args.spec, args.extra)
    print(f"spec: {args.spec}")
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; after: {os.getloadavg()[0]:.2f}")
    print(f"first verdict line, s: median {statistics.median(firsts):.3f}  runs {' '.join(f'{t:.3f}' for t in firsts)}")
    print(f"process exit, s:       median {statistics.median(exits):.3f}  runs {' '.join(f'{t:.3f}' for t in exits)}")
    print(f"CPU (user+sys), s:     median {statistics.median(cpus):.3f}  runs {' '.join(f'{t:.3f}' for t in cpus)}")
    if baseline:
        base = statistics.median(baseline)
        print(f"import numpy, z3 CPU:  median {base:.3f}  runs {' '.join(f'{t:.3f}' for t in sorted(baseline))}")
        print(f"start-up ratio (CPU medians, check / import numpy, z3): {statistics.median(cpus) / base:.2f}")
    print(f"verify_tf modules imported by the check: {len(modules)}")
    if args.list:
        print("\n".join(modules))


if __name__ == "__main__":
    main()

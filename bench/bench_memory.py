"""Does a check's memory stay bounded? ``verify-tf check`` on one spec, in a subprocess under an address-space
limit (``ulimit -v``, so that a runaway check ends ``unknown: out of memory`` instead of taking the machine), its
resident size sampled through /proc every 0.2 s: the verdict, the peak and the resident size at each tenth of the
run (a flat curve is a bounded scan; a growing one is what issue 31's fallback did: 3.2 GiB in 37 s).

    python bench/bench_memory.py SPEC [--limit-gib 4] [--json OUT] [-- verify-tf check options]
    python bench/bench_memory.py run/L5-depth3-short.yaml -- --certify /tmp/cert

Linux only (/proc, RLIMIT_AS).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def resident(pid: int) -> int:
    """VmRSS of ``pid`` in bytes (0 once it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def measure(spec: Path, limit: int, extra: list[str]) -> dict:
    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.json"
        command = [sys.executable, "-m", "verify_tf", "check", str(spec), "--no-cache", "-q", "--json", str(report)]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        start = time.perf_counter()
        process = subprocess.Popen(command + extra, env=env, preexec_fn=limited, stdout=subprocess.DEVNULL)
        samples: list[tuple[float, int]] = []
        while process.poll() is None:
            samples.append((time.perf_counter() - start, resident(process.pid)))
            time.sleep(0.2)
        seconds = time.perf_counter() - start
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        results = json.loads(report.read_text())["results"] if report.exists() else []
    curve = [max((r for t, r in samples if t <= seconds * k / 10), default=0) for k in range(1, 11)]
    return {
        "spec": str(spec),
        "limit_gib": limit / 2**30,
        "exit": process.returncode,
        "seconds": round(seconds, 1),
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1),
        "peak_mib": round(usage.ru_maxrss / 1024),  # Linux: KiB
        "resident_mib_by_tenth": [round(r / 2**20) for r in curve],
        "verdicts": [f"{r['verdict']}: {r['detail']}"[:200] for r in results],
        "load_average": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("spec", type=Path)
    parser.add_argument("--limit-gib", type=float, default=4.0, help="address-space limit of the check (GiB)")
    parser.add_argument("--json", type=Path, help="also write the measurement here")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])  # what follows -- goes to verify-tf check
    result = measure(args.spec, int(args.limit_gib * 2**30), argv[cut + 1 :])
    for key, value in result.items():
        print(f"{key}: {value}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()

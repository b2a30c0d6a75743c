"""The proof cache: a cold run of the shipped specs, then the same run warm (docs/performance.md, "The proof cache").

``verify-tf check SPECS -j J --cache FRESH --json`` twice in a subprocess, into a fresh cache folder signed with a
key of this run (``VERIFY_TF_CACHE_SECRET``: the user's own key and cache are never touched): the first run checks
everything and stores the proved and refuted verdicts, the second is served what the cache may serve. Per run: wall
and CPU seconds of the child (its workers included), the exit code, the verdicts served from the cache and those
checked again by kind (not cacheable: unknown, skipped, error; a solver-chosen member's refutation, re-checked by
design), the cache's note on stderr (in plain words, as a user reads it), and the lookup time of every cached
refutation under a float reading (a tracr model as compiled, a checkpoint as it runs), which is re-confirmed by its
enclosure before it is served.

    nice -n 10 python bench/bench_cache.py [--jobs 2] [SPEC ...]        # default: every specs/*.yaml

One JSON line per run, then one for the float refutations; the CPU figures are what to compare on a busy machine.
"""

from __future__ import annotations

import collections
import json
import os
import resource
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _child(command: list[str], env: dict[str, str]) -> tuple[float, float, subprocess.CompletedProcess]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, wall, done


def _float_reading(result: dict) -> bool:
    return result.get("as_run") is True and str(result.get("reading", "")).startswith("float32")


def _cache_note(stderr: str) -> list[str]:
    """The cache's lines on stderr (unwrapped: the bench runs with COLUMNS=1000)."""
    return [line for line in stderr.splitlines() if line.startswith("proof cache")]


def summarise(label: str, report: dict, cpu: float, wall: float, done: subprocess.CompletedProcess) -> dict:
    """One run's figures from its JSON report and its stderr."""
    results = report["results"]
    served = [r for r in results if r.get("cached")]
    checked = collections.Counter(
        r["verdict"] + (" (architecture)" if r.get("engine") == "architecture" else "")
        for r in results
        if not r.get("cached")
    )
    return {
        "run": label,
        "properties": len(results),
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "exit_code": done.returncode,
        "served": len(served),
        "checked": dict(sorted(checked.items())),
        "not_served": sorted(
            f"{r['spec']}: {r['property']}: {r['verdict']}"
            for r in results
            if not r.get("cached") and r.get("engine") != "architecture"
        )
        if served
        else "everything (a cold run)",
        "cache_note": _cache_note(done.stderr),
        "load": [round(x, 1) for x in os.getloadavg()],
    }


def float_refutations(report: dict) -> dict:
    """The cached refutations under a float reading: how long each lookup (replay by its enclosure) took."""
    times = {
        f"{r['spec']}: {r['property']}": r["seconds"]
        for r in report["results"]
        if r.get("cached") and r["verdict"] == "refuted" and _float_reading(r)
    }
    return {
        "float_refutations_served": len(times),
        "lookup_s_median": round(statistics.median(times.values()), 3) if times else None,
        "lookup_s_max": round(max(times.values()), 3) if times else None,
        "each": {k: round(v, 3) for k, v in sorted(times.items())},
    }


def main(arguments: list[str]) -> None:
    jobs = "2"
    if "--jobs" in arguments:
        at = arguments.index("--jobs")
        jobs = arguments[at + 1]
        del arguments[at : at + 2]
    specs = arguments or sorted(str(p.relative_to(ROOT)) for p in (ROOT / "specs").glob("*.yaml"))
    with tempfile.TemporaryDirectory() as work:
        env = {
            **os.environ,
            "VERIFY_TF_CACHE_SECRET": secrets.token_hex(16),
            "VERIFY_TF_PROGRESS_SECONDS": "60",
            "COLUMNS": "1000",
        }
        cache = Path(work) / "cache"
        for label in ("cold", "warm"):
            report_path = Path(work) / f"{label}.json"
            command = [sys.executable, "-m", "verify_tf", "check", *specs, "-j", jobs, "--cache", str(cache),
                       "--json", str(report_path)]  # fmt: skip
            cpu, wall, done = _child(command, env)
            if not report_path.exists():
                sys.exit(f"{label} run wrote no report (exit {done.returncode}):\n{done.stderr[-2000:]}")
            report = json.loads(report_path.read_text())
            print(json.dumps(summarise(label, report, cpu, wall, done), ensure_ascii=False), flush=True)
        print(json.dumps(float_refutations(report), ensure_ascii=False))


if __name__ == "__main__":
    main(sys.argv[1:])

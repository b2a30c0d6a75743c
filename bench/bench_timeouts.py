"""Does `--timeout` hold? Every property of every shipped spec (and the two-layer softmax model of
examples/budgets/) is checked with a small timeout; the table gives, per timeout, the largest time a property
took (its verdict's seconds, encoding and replay included) against the bound 1.1·T + 1 s, and the wall time of
the whole `verify-tf check` command.

    python bench/bench_timeouts.py                 # timeouts 0.5, 2 and 5 s, all shipped specs
    python bench/bench_timeouts.py --timeouts 1 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(specs: list[Path], timeout: float) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.json"
        start = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "verify_tf",
                "check",
                *map(str, specs),
                "--timeout",
                str(timeout),
                "--no-cache",
                "-q",
                "--json",
                str(report),
            ],
            cwd=ROOT,
            check=False,
        )
        wall = time.perf_counter() - start
        results = json.loads(report.read_text())["results"]
    worst = max(results, key=lambda r: r["seconds"])
    bound = 1.1 * timeout + 1
    over = [f"{Path(r['spec']).name}[{r['index']}] {r['seconds']:.2f} s" for r in results if r["seconds"] > bound]
    return {
        "timeout": timeout,
        "properties": len(results),
        "bound": bound,
        "worst_seconds": round(worst["seconds"], 3),
        "worst": f"{Path(worst['spec']).name}[{worst['index']}] ({worst['engine']}, {worst['verdict']})",
        "over_bound": over,
        "wall_seconds": round(wall, 2),
        "verdicts": {k: sum(r["verdict"] == k for r in results) for k in ("proved", "refuted", "unknown", "error")},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeouts", type=float, nargs="+", default=[0.5, 2.0, 5.0])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    shipped = sorted((ROOT / "specs").glob("*.yaml"))
    budgets = [ROOT / "examples" / "budgets" / "two-layer-softmax.yaml"]
    rows = []
    for timeout in args.timeouts:
        for name, specs in (("shipped specs", shipped), ("two-layer softmax", budgets)):
            row = {"specs": name, **run(specs, timeout)}
            rows.append(row)
            print(
                f"{name:18} T = {timeout:4g} s: {row['properties']:3} properties, "
                f"worst {row['worst_seconds']:6.2f} s "
                f"(bound {row['bound']:.2f} s) {row['worst']}; wall {row['wall_seconds']:.1f} s; "
                f"over the bound: {row['over_bound'] or 'none'}",
                flush=True,
            )
    meta = {
        "machine": f"{platform.node()} ({os.cpu_count()} cores)",
        "load": os.getloadavg(),
        "date": time.strftime("%Y-%m-%d"),
    }
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

"""Per-test CPU of the test suite: a pytest plugin and its report (tests/README.md, "The suite's time").

The development machine is shared, so the suite's wall time says little; CPU time does. As a plugin, every test
appends one JSON line to ``$SUITE_CPU_LOG``: the worker's own CPU (``time.process_time()``, every thread) and
its reaped subprocesses' CPU (``getrusage(RUSAGE_CHILDREN)``: ``verify-tf`` or pytest run as a subprocess),
with the wall time and whether the test is ``slow``::

    SUITE_CPU_LOG=/tmp/cpu.jsonl PYTHONPATH=bench:$PYTHONPATH python -m pytest -q -n 2 -p suite_cpu
    python bench/suite_cpu.py /tmp/cpu.jsonl [N]            # totals, the N costliest tests, per file

A wall-clock budget (a solver's timeout) burns its whole time on an idle machine but only a share of it under
load: a loaded measurement understates such tests, so read wall times equal to a budget as a warning.
"""

from __future__ import annotations

import collections
import json
import os
import resource
import sys
import time

import pytest


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    own, children, wall = time.process_time(), _children_cpu(), time.perf_counter()
    yield
    path = os.environ.get("SUITE_CPU_LOG")
    if path:
        row = {
            "id": item.nodeid,
            "own": time.process_time() - own,
            "kids": _children_cpu() - children,
            "wall": time.perf_counter() - wall,
            "slow": item.get_closest_marker("slow") is not None,
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "-"),
        }
        with open(path, "a") as log:
            log.write(json.dumps(row) + "\n")


def report(path: str, top: int = 40) -> None:
    with open(path) as log:
        rows = [json.loads(line) for line in log]
    cpu = {r["id"]: r["own"] + r["kids"] for r in rows}
    fast = [r for r in rows if not r["slow"]]
    print(f"{len(rows)} tests: {sum(cpu.values()):.1f} CPU s ({sum(r['kids'] for r in rows):.1f} in subprocesses)")
    print(f"fast layer: {len(fast)} tests, {sum(cpu[r['id']] for r in fast):.1f} CPU s")
    for r in sorted(rows, key=lambda r: -cpu[r["id"]])[:top]:
        print(f"{cpu[r['id']]:7.2f} CPU s {r['wall']:7.1f} s wall  {'slow' if r['slow'] else 'fast'}  {r['id']}")
    files: collections.Counter = collections.Counter()
    for r in rows:
        files[r["id"].split("::")[0]] += cpu[r["id"]]
    for name, seconds in files.most_common(30):
        print(f"{seconds:7.1f} CPU s  {name}")


if __name__ == "__main__":
    report(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40)

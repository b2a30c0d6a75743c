"""rasp-equivalence's premise (the search for an input on which the RASP program is undefined): what it costs on
the shipped specs, and that ``--timeout`` bounds it (issue 37, item 4).

    python bench/bench_premise.py                 # every shipped rasp-equivalence spec: load, then the premise
    python bench/bench_premise.py --bound 1       # a slow search under --timeout 1: requested vs actual

The first table gives, per spec, the CPU and wall seconds of ``load_spec`` and of the premise
(``RaspEquivalence.premise``, under a 60 s deadline in force, the default timeout), in this process (the first
spec's load pays the imports). ``--bound S`` makes the search slow two ways and checks a property under
``--timeout S`` (``check_property``, engine enumerate), printing the requested and the measured wall seconds and
the verdict: (a) no string scanned (``PREMISE_SCAN_INPUTS = 0``), every length asked of z3 on the shipped
``specs/tracr-sort-freq.yaml`` (alphabet of 4, lengths 1..5; before issue 37 z3 took 3.7 s there, at load, at
load average 10, outside the timeout); (b) a scan whose every chunk of the batched RASP evaluator waits until
the deadline in force has passed (``tests/data/tracr-undefined.json``, policy error). The machine load
(``os.getloadavg``) is printed beside the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from verify_tf.runner import Overrides, check_property, task_of  # noqa: E402
from verify_tf.spec import load_spec, load_spec_text  # noqa: E402
from verify_tf.work import Deadline, deadline_in_force, deadline_now  # noqa: E402


def shipped() -> list[Path]:
    return [p for p in sorted((ROOT / "specs").glob("*.yaml")) if re.search(r"[^c]rasp-equivalence:", p.read_text())]


def timed(function) -> tuple[float, float, object]:
    cpu, wall = time.process_time(), time.perf_counter()
    value = function()
    return time.process_time() - cpu, time.perf_counter() - wall, value


def cost() -> None:
    totals = [0.0, 0.0, 0.0, 0.0]
    print(f"load {os.getloadavg()[0]:.2f}")
    print(f"{'spec':40s} {'load cpu':>9s} {'wall':>7s} {'premise cpu':>12s} {'wall':>7s}")
    for path in shipped():
        load_cpu, load_wall, spec = timed(lambda path=path: load_spec(path))
        premise_cpu = premise_wall = 0.0
        for prop in spec.properties:
            if prop.name != "rasp-equivalence":
                continue
            task = task_of(spec, prop, Overrides())
            with deadline_in_force(Deadline(60)):
                c, w, _ = timed(lambda task=task: task.prop.premise(task))
            premise_cpu, premise_wall = premise_cpu + c, premise_wall + w
        print(f"{path.name:40s} {load_cpu:9.3f} {load_wall:7.3f} {premise_cpu:12.3f} {premise_wall:7.3f}")
        totals = [a + b for a, b in zip(totals, (load_cpu, load_wall, premise_cpu, premise_wall))]
    print(f"{'total':40s} {totals[0]:9.3f} {totals[1]:7.3f} {totals[2]:12.3f} {totals[3]:7.3f}")
    print(f"load {os.getloadavg()[0]:.2f}")


def bounded(seconds: float) -> None:
    import verify_tf.properties._rasp_undefined as rasp_undefined
    import verify_tf.rasp.batched as batched

    print(f"load {os.getloadavg()[0]:.2f}")
    spec = load_spec(ROOT / "specs" / "tracr-sort-freq.yaml")
    rasp_undefined.PREMISE_SCAN_INPUTS = 0  # (a): every length to z3
    wall, verdict = _check(spec, seconds)
    print(f"(a) z3 on every length of tracr-sort-freq.yaml: --timeout {seconds:g}, {wall:.3f} s wall: {verdict}")
    rasp_undefined.PREMISE_SCAN_INPUTS = 1 << 16
    original = batched.run_batched

    def slow(program, rows):  # (b): each chunk takes what is left of the deadline in force
        deadline = deadline_now()
        while deadline is not None and not deadline.expired():
            threading.Event().wait(0.01)
        return original(program, rows)

    batched.run_batched = slow
    with tempfile.TemporaryDirectory() as folder:
        document = json.loads((ROOT / "tests" / "data" / "tracr-undefined.json").read_text())
        document["undefined"]["policy"] = "error"
        (Path(folder) / "export.json").write_text(json.dumps(document))
        text = (
            "model: {tracr: export.json, attention: hardmax}\ndomain: {strings: {max-length: 3}}\n"
            "properties:\n  - rasp-equivalence: {program: export.json}\n"
        )
        wall, verdict = _check(load_spec_text(text, "spec.yaml", Path(folder)), seconds)
    batched.run_batched = original
    print(f"(b) a scan slowed to the deadline: --timeout {seconds:g}, {wall:.3f} s wall: {verdict}")
    print(f"load {os.getloadavg()[0]:.2f}")


def _check(spec, seconds: float) -> tuple[float, str]:
    start = time.perf_counter()
    verdict = check_property(spec, spec.properties[0], Overrides(engine="enumerate", timeout=seconds))
    return time.perf_counter() - start, f"{verdict.label}: {verdict.detail[:160]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bound", type=float, help="check a slow search under this --timeout")
    args = parser.parse_args()
    if args.bound is not None:
        bounded(args.bound)
    else:
        cost()


if __name__ == "__main__":
    main()

"""What the trust layer costs: a proof-cache hit (proved; refuted, whose counterexample is replayed before it is
served), the size of a cache entry, and `verify-tf audit` on a certified report.

Usage: python bench/bench_trust.py [--repeat N]
Prints one line per measurement (wall and CPU seconds, in this process; the audit in a child process, as a user
runs it). Specs: examples/ci/specs/ (one proved, one known counterexample) and specs/smt-equivalence-proved.yaml.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from verify_tf.cache import ProofCache, key_material, key_of  # noqa: E402
from verify_tf.engines.replay import replay_stored  # noqa: E402
from verify_tf.runner import Overrides, check_all, make_task  # noqa: E402
from verify_tf.spec import load_spec  # noqa: E402


def timed(function, repeat: int) -> tuple[float, float, object]:
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(repeat):
        value = function()
    return (time.perf_counter() - wall) / repeat, (time.process_time() - cpu) / repeat, value


def cache_hits(folder: Path, repeat: int) -> None:
    os.environ.setdefault("VERIFY_TF_CACHE_SECRET", "bench")
    store = ProofCache(folder / "cache")
    for name in ("equivariance.yaml", "positions.yaml"):
        spec = load_spec(ROOT / "examples" / "ci" / "specs" / name)
        [verdict] = check_all([spec], Overrides(), cache=store)
        prop = spec.properties[0]
        material = key_material(spec, prop, Overrides(), "auto")
        key = key_of(material)
        entry = store.root / key[:2] / f"{key}.json"
        task = make_task(spec, prop, Overrides())
        wall, cpu, hit = timed(partial(store.get, key, material, task), repeat)
        line = f"cache hit, {verdict.status}: {wall * 1000:.1f} ms wall, {cpu * 1000:.1f} ms CPU"
        if verdict.status == "refuted":
            replay_wall, replay_cpu, _ = timed(partial(replay_stored, task, verdict.counterexample), repeat)
            line += f" (of which the replay: {replay_wall * 1000:.1f} ms wall, {replay_cpu * 1000:.1f} ms CPU)"
        print(f"{line}; entry {entry.stat().st_size} bytes; served: {hit is not None}", flush=True)


def audit(folder: Path) -> None:
    spec = ROOT / "specs" / "smt-equivalence-proved.yaml"
    report = folder / "r.json"
    cli = [sys.executable, "-m", "verify_tf"]
    start = time.perf_counter()
    subprocess.run(
        [*cli, "check", str(spec), "--no-cache", "-q", "--json", str(report), "--certify", str(folder / "c")],
        check=False,
    )
    check = time.perf_counter() - start
    [result] = json.loads(report.read_text())["results"]
    certificate = result["statistics"]["certificate"]
    size = sum(f.stat().st_size for f in (folder / "c").rglob("*") if f.is_file())
    start = time.perf_counter()
    done = subprocess.run([*cli, "audit", str(report)], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    print(
        f"smt-equivalence-proved: proof {result['seconds']:.2f} s, certificate {certificate['seconds']:.2f} s "
        f"({certificate['kind']}, {size} bytes), check --certify {check:.2f} s wall; audit {wall:.2f} s wall "
        f"(exit {done.returncode}): {done.stdout.strip().splitlines()[-1]}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="verify-tf-bench-trust-") as folder:
        cache_hits(Path(folder), args.repeat)
        audit(Path(folder))


if __name__ == "__main__":
    main()

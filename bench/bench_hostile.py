"""Issue 38's hostile inputs, timed: each case runs `verify-tf check CASE --timeout T` in a fresh process.

    nice -n 10 python bench/bench_hostile.py [--only NAME] [--cap SECONDS]

For each case: the exit code, the wall time against the promise 1.1·T + 1 s, the CPU seconds of the process
(``RUSAGE_CHILDREN``), the bytes of the output and of its longest line, and the first line of the message. A case
is killed at ``--cap`` seconds (default 120) and reported as such. The machine, the date and the load (``uptime``)
head the table (docs/performance.md, "Hostile inputs"). The tests (``tests/test_hostile_budgets.py``) assert what
each case answers, never its time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NINES = "9" * 1000
CRASP_SPEC = """model: {{construct: crasp-program, program: {program}}}
arithmetic: {{mode: fixed, bits: 8, frac: 0, attention-rounding: exact-sums}}
domain: {{strings: {{alphabet: [a, b], max-length: 4}}}}
properties:
  - crasp-equivalence: {{program: {program}}}
"""
ROPE_BASE = """model:
  random: {seed: 1, width: 2, layers: 1, heads: 1, key-dim: 64, ffn-width: 2, scoring: softmax, positional: rope,
           rope-base: 1e-100, causal: true, range: 1}
arithmetic: {mode: fixed, bits: 16, frac: 8}
domain: {grid: {step: 1/2, lo: -1/2, hi: 1/2}, length: 3}
properties:
  - output-bounds: {lo: -100, hi: 100}
"""
ROPE_RADIANS = """model:
  tokens: {alphabet: [a, b], embedding: [[1, 0], [0, 1]]}
  layers:
    - attention:
        heads:
          - {positional: rope, rope: {radians: [%s]}, query: [[1, 0], [0, 1]], key: [[1, 0], [0, 1]],
             value: [[1, 0]], output: [[1], [0]]}
arithmetic: {mode: fixed, bits: 16, frac: 8}
domain: {strings: {alphabet: [a, b], max-length: 2}}
properties:
  - output-bounds: {lo: -10, hi: 10}
"""
TORCH_SPEC = """model: {torch: w.safetensors, architecture: {heads: 1}, quantize: {bits: 16, frac: 8}}
arithmetic: {mode: fixed, bits: 16, frac: 8}
domain: {strings: {alphabet: [a, b], max-length: 2}}
properties:
  - output-bounds: {hi: 5}
"""


def _crasp(folder: Path, program: str) -> Path:
    (folder / "prog.cr").write_text("alphabet a b\n" + program)
    (folder / "spec.yaml").write_text(CRASP_SPEC.format(program="prog.cr"))
    return folder / "spec.yaml"


def _spec(folder: Path, text: str) -> Path:
    (folder / "spec.yaml").write_text(text)
    return folder / "spec.yaml"


def _tracr(folder: Path, change) -> Path:
    document = json.loads((ROOT / "examples" / "tracr" / "count.json").read_text())
    change(document)
    (folder / "export.json").write_text(json.dumps(document))
    return _spec(
        folder,
        "model: {tracr: export.json, attention: hardmax}\ndomain: {strings: {alphabet: [a, b, c], max-length: 3}}\n"
        "properties:\n  - rasp-equivalence: {program: export.json}\n",
    )


def _safetensors(folder: Path) -> Path:
    header = json.dumps({"w": {"dtype": "F32", "shape": [10_000, 10_000], "data_offsets": [0, 400_000_000]}}).encode()
    with open(folder / "w.safetensors", "wb") as handle:  # sparse: 400 MB that take no disk
        handle.write(struct.pack("<Q", len(header)) + header)
        handle.truncate(8 + len(header) + 400_000_000)
    return _spec(folder, TORCH_SPEC)


def _chain(folder: Path) -> Path:
    lines = ['c0 = #"a"'] + [f"c{k} = c{k - 1} + 1" for k in range(1, 5000)] + ["accept = c4999 > 0"]
    return _crasp(folder, "\n".join(lines) + "\n")


CASES = {  # name: (timeout T, builder)
    "rope-base 1e-100, key-dim 64": (5, lambda f: _spec(f, ROPE_BASE)),
    "rope radians 10^999 - 1": (5, lambda f: _spec(f, ROPE_RADIANS % NINES)),
    "rope radians -(10^999 - 1)": (5, lambda f: _spec(f, ROPE_RADIANS % ("-" + NINES))),
    "j == i - 1000000": (10, lambda f: _crasp(f, 'back(i, j) = j == i - 1000000\naccept = #[back] "a" > 0\n')),
    "j == i - (10^1000 - 1)": (10, lambda f: _crasp(f, f'back(i, j) = j == i - {NINES}\naccept = #[back] "a" > 0\n')),
    "i % 1000003 == 5": (10, lambda f: _crasp(f, "p(i) = i % 1000003 == 5\naccept = p\n")),
    "i % 4001 == 5 (frac 0)": (10, lambda f: _crasp(f, "p(i) = i % 4001 == 5\naccept = p\n")),
    "5,000-definition chain": (10, _chain),
    "tracr program.max_length 10^9": (10, lambda f: _tracr(f, lambda d: d["program"].update(max_length=10**9))),
    "tracr config.num_layers 10^6": (10, lambda f: _tracr(f, lambda d: d["config"].update(num_layers=10**6))),
    "tracr config.d_model 10^9": (10, lambda f: _tracr(f, lambda d: d["config"].update(d_model=10**9))),
    "400 MB .safetensors (torch)": (10, _safetensors),
    "60 MB YAML scalar": (10, lambda f: _spec(f, "name: " + "x" * (60 << 20) + "\n" + ROPE_BASE)),
    "2 MB regex (in a spec under 1 MiB: 900 kB)": (
        10,
        lambda f: (
            _crasp(f, 'accept = #"a" > 0\n'),
            _spec(
                f,
                CRASP_SPEC.format(program="prog.cr").replace(
                    "max-length: 4}", 'max-length: 4, language: {regex: "' + "a" * 900_000 + '("}}'
                ),
            ),
        )[1],
    ),
    "tracr-float-prev-a-wide-gt0": (5, lambda f: ROOT / "specs" / "tracr-float-prev-a-wide-gt0.yaml"),
}


def run_case(name: str, timeout: int, build, cap: float) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="hostile-"))
    try:
        spec = build(folder)
        command = [sys.executable, "-m", "verify_tf", "check", str(spec), "--timeout", str(timeout), "--no-cache"]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=cap, cwd=folder)
            code, output = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired as exc:
            code, output = f"killed at {cap:g} s", (exc.stdout or b"").decode(errors="replace")
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        lines = output.splitlines() or [""]
        message = next((line.strip() for line in lines if line.startswith(("error:", " ", "summary"))), lines[0])
        return {
            "case": name,
            "timeout": timeout,
            "promise": round(1.1 * timeout + 1, 1),
            "exit": code,
            "wall": round(wall, 2),
            "cpu": round(cpu, 2),
            "bytes": len(output.encode()),
            "longest_line": max(len(line.encode()) for line in lines),
            "traceback": "Traceback" in output,
            "message": message[:160],
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run the cases whose name contains this")
    parser.add_argument("--cap", type=float, default=120.0)
    args = parser.parse_args()
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(
        f"# {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load before: {load}"
    )
    print("| case | --timeout T | 1.1·T + 1 | exit | wall s | CPU s | bytes out | longest line | message |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, (timeout, build) in CASES.items():
        if args.only and args.only not in name:
            continue
        row = run_case(name, timeout, build, args.cap)
        print(
            f"| {row['case']} | {row['timeout']} | {row['promise']} | {row['exit']} | {row['wall']} | {row['cpu']} | "
            f"{row['bytes']:,} | {row['longest_line']:,} | {'TRACEBACK ' if row['traceback'] else ''}"
            f"{row['message'].replace('|', '/')} |",
            flush=True,
        )
    print(f"# load after: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")


if __name__ == "__main__":
    main()

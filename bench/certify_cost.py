"""Cost of certification on the shipped specs: `check --certify` then `audit`, per spec, in child processes.

Usage: python bench/certify_cost.py [--out DIR] [--cap SECONDS] [SPEC ...]   (default: every specs/*.yaml)
       python bench/certify_cost.py --table RESULTS.jsonl ...     (the markdown table of docs/trust.md)
Writes DIR/results.jsonl (one line per spec, printed as it goes). Times are wall seconds on whatever machine
runs it: proof = the proved verdicts' own seconds, certify = their certificates' seconds, audit = the whole
`verify-tf audit` run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_spec(spec: Path, out: Path, cap: float) -> dict:
    work = out / spec.stem
    work.mkdir(parents=True, exist_ok=True)
    report = work / "report.json"
    row: dict = {"spec": spec.name}
    start = time.perf_counter()
    try:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "verify_tf",
                "check",
                str(spec),
                "--no-cache",
                "-q",
                "--json",
                str(report),
                "--certify",
                str(work / "certificates"),
            ],
            timeout=cap,
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired:
        return {**row, "error": f"check --certify over {cap:g} s"}
    row["check_wall"] = round(time.perf_counter() - start, 2)
    results = json.loads(report.read_text())["results"]
    row["proved"] = sum(r["verdict"] == "proved" for r in results)
    row["verdicts"] = [r["verdict"] for r in results]
    row["proof_seconds"] = round(sum(r["seconds"] for r in results if r["verdict"] == "proved"), 2)
    certificates = [r["statistics"].get("certificate") or {} for r in results if r["verdict"] == "proved"]
    row["certify_seconds"] = round(sum(c.get("seconds", 0) for c in certificates), 2)
    row["kinds"] = sorted({c.get("kind", "missing") for c in certificates})
    row["complete"] = sum(bool(c.get("complete")) for c in certificates)
    row["checked_by"] = sorted({line.split(":")[0] for c in certificates for line in c.get("checked_by", [])})
    row["not_checked"] = sorted({line for c in certificates for line in c.get("not_checked", [])})[:6]
    start = time.perf_counter()
    try:
        audit = subprocess.run(
            [sys.executable, "-m", "verify_tf", "audit", str(report)],
            timeout=cap,
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        row["audit_rc"] = audit.returncode
        row["audit_summary"] = audit.stdout.strip().splitlines()[-1] if audit.stdout.strip() else audit.stderr[-200:]
    except subprocess.TimeoutExpired:
        row["audit_rc"] = "timeout"
    row["audit_seconds"] = round(time.perf_counter() - start, 2)
    return row


SHORT = [
    ("second solver", "cvc5"),
    ("LRAT", "LRAT (CaDiCaL + our checker)"),
    ("domain size", "count 2 ways"),
    ("digest", "digest"),
    ("strings counted", "strings 2 ways"),
    ("the pair", "pair re-checked"),
]


def short(check: str) -> str:
    if check.startswith("seeded sample of"):
        return "interpreter sample " + check.split()[3]
    return next((label for prefix, label in SHORT if check.startswith(prefix)), check)


def table(paths: list[Path]) -> str:
    rows = {}
    for path in paths:
        for line in path.read_text().splitlines():
            row = json.loads(line)
            rows[row["spec"]] = row  # the last run of a spec wins
    lines = [
        "| spec | proved (complete) | certificate: checked by | proof s | certify s | ratio | audit |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in sorted(rows):
        row = rows[name]
        if "error" in row:
            lines.append(f"| {name[:-5]} | ? | {row['error']} | | | | |")
            continue
        kinds = ", ".join(row["kinds"]) or "—"
        checked = ", ".join(sorted({short(c) for c in row["checked_by"]}))
        checked = checked or ("nothing proved" if not row["proved"] else "none passed")
        ratio = (
            f"{row['certify_seconds'] / row['proof_seconds']:.0f}×"
            if row["proof_seconds"] >= 0.01 and row["proved"]
            else "—"
        )
        audit = row.get("audit_summary", "").split(": ", 1)[-1] if row.get("audit_rc") != "timeout" else "timeout"
        lines.append(
            f"| {name[:-5]} | {row['proved']} ({row['complete']}) | {kinds}: {checked} | "
            f"{row['proof_seconds']} | {row['certify_seconds']} | {ratio} | {audit} (exit "
            f"{row.get('audit_rc')}) |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("specs", nargs="*", type=Path)
    parser.add_argument("--table", nargs="+", type=Path, help="print the table of these results.jsonl files")
    parser.add_argument("--out", type=Path, default=Path("/tmp/verify-tf-certify-bench"))
    parser.add_argument("--cap", type=float, default=900.0, help="seconds per spec for check and for audit")
    args = parser.parse_args()
    if args.table:
        print(table(args.table))
        return
    specs = args.specs or sorted((ROOT / "specs").glob("*.yaml"))
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "results.jsonl", "a") as log:
        for spec in specs:
            row = run_spec(spec, args.out, args.cap)
            log.write(json.dumps(row) + "\n")
            log.flush()
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()

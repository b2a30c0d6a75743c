"""Benchmark of ``--cluster`` (Dask distributed): speedup, overhead, and the scaling model of docs/distributed.md.

    python bench/bench_cluster.py                              # this machine: 1 and 2 workers
    python bench/bench_cluster.py --workers 1,2,4,8,16 --out-dir DIR        # a 16-core machine
    python bench/bench_cluster.py --workers 1,2 --skip-sweep --seconds 10   # quicker

Writes ``cluster-HOST-DATE.json``, ``.md`` (the tables of docs/performance.md) and ``.png`` (the plot, when
matplotlib is installed) to ``--out-dir`` (default: ``$VERIFY_TF_BENCH_DIR``, else ``bench/results``).

Measures, on local clusters bound to 127.0.0.1 (``--cluster local:W``):

1. **Dask's cost per task** with no-op units: the round trip of one unit at a time, the cost per task on a
   worker's timeline and the scheduler's throughput (batching off), and the cost per unit with batching on.
2. **An exhaustive enumeration** (engine ``enumerate``: output-bounds of a seeded random model over a grid
   domain of length 6, its grid sized by calibration to take about ``--seconds`` in process): in process,
   then on a local cluster of each worker count in ``--workers``; the speedup is against the 1-worker
   cluster (same code path), and the verdict must be the same everywhere.
3. **A sweep** of the shipped specs (``specs/*.yaml``): ``-j 2`` against ``--cluster local:2``, as
   command lines (process and cluster start included), alternating, median of ``--sweep-repeat`` runs.
4. **The scaling model**: measured inputs (units, unit time, cost per task, scheduler throughput) and the
   predicted speedup at 8, 64, 512 workers for the enumeration's unit sizes (``engines/scan.chunk_size``:
   about 64 units per worker, batched by the executor) and for split-engine units (batches of cubes, their
   time assumed: ``--cube-seconds``, ``--cubes``), with the worker count where efficiency falls below 50 %.

The PNG shows the measured speedup per worker count, ideal and model. The host is reported (cores, load
average, and how much CPU other processes used during each measurement, from /proc/stat): on a shared
machine the speedups are lower bounds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import verify_tf.executors.cluster as dask_executor  # noqa: E402
from verify_tf.engines.scan import chunk_size  # noqa: E402
from verify_tf.executors import open_cluster  # noqa: E402
from verify_tf.runner import Overrides, check_property  # noqa: E402
from verify_tf.spec import load_spec  # noqa: E402
from verify_tf.work import CONTINUE, Deadline, WorkUnit, schedule  # noqa: E402

ENUMERATION_SPEC = """\
# written by bench/bench_cluster.py: an exhaustive enumeration whose size the benchmark calibrates
name: bench-cluster enumeration
model:
  random: {{seed: 7, width: 1, layers: 2, heads: 2, ffn-width: 8, scoring: hardmax, positional: standard}}
arithmetic: {{mode: fixed, bits: 16, frac: 8}}
domain:
  grid: {{step: 1/8, lo: -{steps}/8, hi: {steps}/8}}
  length: {length}
engine: enumerate
timeout: 36000
properties:
  - output-bounds: {{lo: -1000000, hi: 1000000}}
"""
LENGTH = 6
OUT_DIR_VARIABLE = "VERIFY_TF_BENCH_DIR"


def no_op(value, *, deadline, cancelled, report):
    return value


def pause(seconds, *, deadline, cancelled, report):
    time.sleep(seconds)
    return seconds


def unit_function():
    """``no_op`` from this file imported as module ``bench_cluster`` (not ``__main__``), so that the worker
    processes, which have this folder on their path, can import it by name."""
    from bench_cluster import no_op, pause

    return no_op, pause


# ---------------------------------------------------------------- the host


def cpu_busy() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs since boot (/proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def own_cpu_seconds() -> float:
    """CPU seconds of this process and its children, live (psutil) and reaped (os.times)."""
    import psutil

    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            total += sum(child.cpu_times()[:2])
    reaped = os.times()
    return total + reaped.children_user + reaped.children_system


class Measured:
    """Wall time of a block, plus the cores used by other processes meanwhile (a shared machine)."""

    def __enter__(self) -> Measured:
        self.busy0, self.total0 = cpu_busy()
        self.own0 = own_cpu_seconds()
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.perf_counter() - self.start
        busy1, _ = cpu_busy()
        ticks = os.sysconf("SC_CLK_TCK")
        cores = os.cpu_count() or 1
        busy_cores = (busy1 - self.busy0) / ticks / self.seconds if self.seconds else 0.0
        self.own_cpu = own_cpu_seconds() - self.own0
        own_cores = self.own_cpu / self.seconds if self.seconds else 0.0
        self.foreign_cores = round(max(0.0, busy_cores - own_cores), 2)
        self.busy_cores = round(min(cores, busy_cores), 2)

    def row(self) -> dict:
        return {
            "seconds": round(self.seconds, 3),
            "cpu_seconds": round(self.own_cpu, 2),
            "foreign_cores": self.foreign_cores,
            "busy_cores": self.busy_cores,
            "load_average": [round(x, 2) for x in os.getloadavg()],
        }


# ---------------------------------------------------------------- 1. Dask's cost per task


def overhead(workers: int) -> dict:
    out: dict = {"workers": workers}
    no_op, pause = unit_function()
    with Measured() as started:
        executor = open_cluster(f"local:{workers}", max_batch=1)
    out["cluster_start"] = started.row()
    try:
        units = (WorkUnit(f"no-op {i}", no_op, (i,), order=i) for i in range(50))
        times = []
        for unit in units:
            begin = time.perf_counter()
            schedule(executor, [unit], Deadline(60), lambda u, v: CONTINUE, in_flight=1)
            times.append(time.perf_counter() - begin)
        out["round_trip_ms"] = {
            "median": round(1000 * statistics.median(times), 2),
            "p90": round(1000 * sorted(times)[int(0.9 * len(times))], 2),
        }
        # the cost of a task on a worker's timeline, latency hidden (2 per worker in flight): sleeping units
        count, seconds = 100, 0.05
        with Measured() as m:
            schedule(
                executor,
                (WorkUnit(f"pause {i}", pause, (seconds,), order=i) for i in range(count)),
                Deadline(600),
                lambda u, v: CONTINUE,
            )
        out["per_task"] = {
            **m.row(),
            "units": count,
            "unit_seconds": seconds,
            "ms_per_task": round(1000 * (workers * m.seconds / count - seconds), 3),
        }
        # the scheduler's throughput: no-op tasks, all in flight at once
        count = 2000
        with Measured() as m:
            schedule(
                executor,
                (WorkUnit(f"no-op {i}", no_op, (i,), order=i) for i in range(count)),
                Deadline(600),
                lambda u, v: CONTINUE,
                in_flight=count,
            )
        out["scheduler_throughput"] = {**m.row(), "tasks": count, "tasks_per_second": round(count / m.seconds, 1)}
    finally:
        with Measured() as stopped:
            executor.close()
        out["cluster_stop"] = stopped.row()
    executor = open_cluster(f"local:{workers}")
    try:
        count = 20000
        with Measured() as m:
            schedule(
                executor,
                (WorkUnit(f"no-op {i}", no_op, (i,), order=i) for i in range(count)),
                Deadline(600),
                lambda u, v: CONTINUE,
            )
        # batched no-ops: what is left per unit is mostly this process's own work (driver loop, pickling)
        out["batched"] = {
            **m.row(),
            "units": count,
            "tasks": executor.tasks_sent,
            "ms_per_unit": round(1000 * m.seconds / count, 4),
        }
    finally:
        executor.close()
    return out


# ---------------------------------------------------------------- 2. an exhaustive enumeration


def write_spec(folder: Path, steps: int) -> Path:
    path = folder / f"enumeration-{steps}.yaml"
    path.write_text(ENUMERATION_SPEC.format(steps=steps, length=LENGTH))
    return path


def run_spec(path: Path, executor=None):
    spec = load_spec(path)
    with Measured() as m:
        verdict = check_property(spec, spec.properties[0], Overrides(), executor=executor)
    return verdict, m


def calibrate(folder: Path, seconds: float) -> tuple[Path, dict]:
    """The grid (2·steps + 1 values in steps of 1/8, length 6) whose enumeration takes about ``seconds`` here."""
    steps = 3
    verdict, m = run_spec(write_spec(folder, steps))
    per_input = m.seconds / verdict.statistics["space_size"]
    wanted = seconds / per_input
    values = max(2 * steps + 1, math.ceil(wanted ** (1 / LENGTH)))
    steps = math.ceil((values - 1) / 2)
    return write_spec(folder, steps), {
        "calibration_inputs": verdict.statistics["space_size"],
        "calibration_seconds": round(m.seconds, 3),
        "microseconds_per_input": round(1e6 * per_input, 3),
        "grid_steps": steps,
    }


def enumeration(folder: Path, seconds: float, worker_counts: list[int], repeat: int) -> dict:
    path, calibration = calibrate(folder, seconds)
    verdict, m = run_spec(path)
    out = {
        "spec": path.read_text(),
        **calibration,
        "inputs": verdict.statistics["space_size"],
        "verdict": verdict.status,
        "in_process": {**m.row(), "units": verdict.statistics["units"]},
        "clusters": [],
    }
    executors, started = {}, {}
    try:
        for workers in worker_counts:  # all clusters first, then the runs interleaved: they see the same load
            with Measured() as m:
                executors[workers] = open_cluster(f"local:{workers}")
            started[workers] = m.row()
        runs: dict[int, list[dict]] = {w: [] for w in worker_counts}
        for _ in range(repeat):
            for workers, executor in executors.items():
                before = (executor.units_timed, executor.unit_seconds, executor.tasks_sent)
                found, m = run_spec(path, executor)
                if found.status != verdict.status or found.detail != verdict.detail:
                    raise SystemExit(
                        f"local:{workers} gave {found.status}: {found.detail}, in process "
                        f"{verdict.status}: {verdict.detail}"
                    )
                units = executor.units_timed - before[0]
                runs[workers].append(
                    {
                        **m.row(),
                        "units": units,
                        "tasks": executor.tasks_sent - before[2],
                        "unit_seconds_mean": round((executor.unit_seconds - before[1]) / max(1, units), 4),
                    }
                )
                print(f"  local:{workers}: {m.seconds:.1f} s, other processes {m.foreign_cores} cores", flush=True)
    finally:
        for executor in executors.values():
            executor.close()
    for workers in worker_counts:
        best = min(runs[workers], key=lambda r: r["seconds"])
        out["clusters"].append(
            {"workers": workers, "cluster_start": started[workers], "runs": runs[workers], "best": best}
        )
    one = next((c for c in out["clusters"] if c["workers"] == 1), None)
    for c in out["clusters"]:
        c["speedup_vs_1_worker"] = round(one["best"]["seconds"] / c["best"]["seconds"], 3) if one else None
        c["speedup_vs_in_process"] = round(out["in_process"]["seconds"] / c["best"]["seconds"], 3)
        # where other processes take cores, wall-clock speedups say little; the CPU seconds of this process tree
        # say how much work distributing added. CPU(1 worker) / (CPU(W workers) / W) is the speedup if CPU were
        # the only limit (W idle cores, perfect balance): an upper estimate for an idle machine
        if one:
            cpu_one = statistics.median(r["cpu_seconds"] for r in one["runs"])
            cpu_here = statistics.median(r["cpu_seconds"] for r in c["runs"])
            c["cpu_seconds_median"] = round(cpu_here, 2)
            c["cpu_bound_speedup"] = round(cpu_one / (cpu_here / min(c["workers"], os.cpu_count() or 1)), 2)
    return out


# ---------------------------------------------------------------- 3. a sweep of the shipped specs


def sweep(repeat: int, workers: int) -> dict:
    specs = sorted(str(p) for p in (ROOT / "specs").glob("*.yaml"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    commands = {f"-j {workers}": ["-j", str(workers)], f"--cluster local:{workers}": ["--cluster", f"local:{workers}"]}
    runs: dict[str, list[dict]] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, extra in commands.items():  # alternating, so both see the same load on average
            with tempfile.TemporaryDirectory() as scratch, Measured() as m:
                done = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "verify_tf",
                        "check",
                        *specs,
                        "--no-cache",
                        "-q",
                        "--json",
                        str(Path(scratch) / "r.json"),
                        *extra,
                    ],
                    env=env,
                    cwd=scratch,
                    capture_output=True,
                    text=True,
                )
                verdicts = [r["verdict"] for r in json.loads((Path(scratch) / "r.json").read_text())["results"]]
            if done.returncode != 0:
                raise SystemExit(f"{name}: exit {done.returncode}\n{done.stderr[-2000:]}")
            runs[name].append({**m.row(), "properties": len(verdicts)})
    medians = {name: statistics.median(r["seconds"] for r in rows) for name, rows in runs.items()}
    pool, dask = medians[f"-j {workers}"], medians[f"--cluster local:{workers}"]
    return {"specs": len(specs), "runs": runs, "median_seconds": medians, "cluster_over_pool": round(dask / pool, 3)}


# ---------------------------------------------------------------- 4. the scaling model


def predict(
    workers: int,
    units: int,
    unit_seconds: float,
    per_task: float,
    per_unit_client: float,
    throughput: float,
    round_trip: float,
    largest_batch: int = dask_executor.MAX_BATCH,
) -> dict:
    """Steady-state model of one ``schedule`` run on ``workers`` single-threaded workers:

    batch k = clamp(min(floor(TARGET_BATCH_SECONDS / t), floor(units / 2W)), 1, largest) (the executor's rule),
    tasks = ceil(units / k), and the run takes the largest of three bounds, plus one round trip L (the tail):
    workers  ceil(tasks / W) * (k * t + o)    o: the cost of a task on a worker's timeline
    scheduler  tasks / R                      R: the scheduler's throughput in tasks per second
    client     units * c                      c: this process's own cost per unit (driver loop, pickling)
    Speedup = units * t / T.
    """
    k = max(
        1,
        min(
            largest_batch,
            math.floor(dask_executor.TARGET_BATCH_SECONDS / max(unit_seconds, 1e-9)),
            units // (2 * workers),
        ),
    )
    tasks = math.ceil(units / k)
    task_seconds = k * unit_seconds + per_task
    bounds = {
        "workers": math.ceil(tasks / workers) * task_seconds,
        "scheduler": tasks / throughput,
        "client": units * per_unit_client,
    }
    bound = max(bounds, key=bounds.get)
    seconds = bounds[bound] + round_trip
    return {
        "workers": workers,
        "units": units,
        "unit_seconds": round(unit_seconds, 6),
        "batch": k,
        "tasks": tasks,
        "task_seconds": round(task_seconds, 5),
        "bound": bound,
        "predicted_seconds": round(seconds, 3),
        "speedup": round(units * unit_seconds / seconds, 2),
    }


def scaling_model(measured: dict, inputs: int, serial_seconds: float, cube_seconds: float, cubes: int) -> dict:
    cost = measured["overhead"]
    per_task = max(0.0, cost["per_task"]["ms_per_task"] / 1000)
    throughput = cost["scheduler_throughput"]["tasks_per_second"]
    round_trip = cost["round_trip_ms"]["median"] / 1000
    per_unit_client = cost["batched"]["ms_per_unit"] / 1000
    params = {
        "per_task_seconds": per_task,
        "scheduler_tasks_per_second": throughput,
        "round_trip_seconds": round_trip,
        "client_seconds_per_unit": per_unit_client,
        "target_batch_seconds": dask_executor.TARGET_BATCH_SECONDS,
        "max_batch": dask_executor.MAX_BATCH,
    }

    def enumeration_at(workers: int) -> dict:
        size = chunk_size(inputs, workers, smallest=8192, largest=1 << 20)  # as engines/enumerate.check
        units = math.ceil(inputs / size)
        return predict(workers, units, serial_seconds / units, per_task, per_unit_client, throughput, round_trip)

    def cubes_at(workers: int) -> dict:
        return predict(workers, cubes, cube_seconds, per_task, per_unit_client, throughput, round_trip)

    out = {
        "inputs": params,
        "enumeration": {"inputs": inputs, "serial_seconds": round(serial_seconds, 2)},
        "split_cubes": {"cubes": cubes, "cube_seconds": cube_seconds},
    }
    for name, at in (("enumeration", enumeration_at), ("split_cubes", cubes_at)):
        out[name]["predicted"] = [at(w) for w in (1, 2, 4, 8, 16, 64, 512)]
        ladder = [at(2**e) for e in range(0, 16)]
        below = next((p for p in ladder if p["speedup"] / p["workers"] < 0.5), None)
        out[name]["efficiency_below_50_percent_at"] = below["workers"] if below else None
        out[name]["limit"] = (
            {
                "scheduler": "the scheduler's throughput",
                "client": "this process's cost per unit",
                "workers": "too few units per worker (tail and per-task cost)",
            }[below["bound"]]
            if below
            else "none up to 32768 workers"
        )
    return out


# ---------------------------------------------------------------- report


def plot(result: dict, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    clusters = result["enumeration"]["clusters"]
    workers = [c["workers"] for c in clusters]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(workers, workers, "k:", label="ideal")
    if any(c["speedup_vs_1_worker"] for c in clusters):
        ax.plot(workers, [c["speedup_vs_1_worker"] for c in clusters], "o-", label="measured (vs 1 worker)")
    model = [p for p in result["model"]["enumeration"]["predicted"] if p["workers"] <= max(workers)]
    ax.plot([p["workers"] for p in model], [p["speedup"] for p in model], "s--", label="model")
    ax.set_xlabel("Dask workers (local cluster)")
    ax.set_ylabel("speedup")
    ax.set_title(
        f"verify-tf --cluster: enumeration of {result['enumeration']['inputs']:,} inputs\n"
        f"{result['host']['cpu']}, {result['host']['cores']} cores",
        fontsize=9,
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def markdown(result: dict) -> str:
    e, lines = result["enumeration"], []
    lines.append(
        f"enumeration: {e['inputs']:,} inputs, {e['verdict']}; in process {e['in_process']['seconds']:.1f} s "
        f"(other processes used {e['in_process']['foreign_cores']} cores)"
    )
    lines.append(
        "| workers | seconds (each run) | units | tasks | unit time | speedup vs 1 worker (best runs) | "
        "CPU seconds (median) | CPU-bound speedup | other processes (cores) |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for c in e["clusters"]:
        b = c["best"]
        each = ", ".join(f"{r['seconds']:.1f}" for r in c["runs"])
        others = ", ".join(str(r["foreign_cores"]) for r in c["runs"])
        lines.append(
            f"| {c['workers']} | {each} | {b['units']} | {b['tasks']} | "
            f"{1000 * b['unit_seconds_mean']:.0f} ms | "
            f"{c['speedup_vs_1_worker']} | {c.get('cpu_seconds_median')} | {c.get('cpu_bound_speedup')} | "
            f"{others} |"
        )
    if "sweep" in result:
        s = result["sweep"]
        lines.append(
            f"sweep of {s['specs']} specs, median seconds: "
            + ", ".join(f"{k}: {v:.1f}" for k, v in s["median_seconds"].items())
            + f" (cluster / pool = {s['cluster_over_pool']})"
        )
    o = result["overhead"]
    lines.append(
        f"Dask per task: round trip {o['round_trip_ms']['median']} ms, {o['per_task']['ms_per_task']} ms "
        f"per task on a worker's timeline, scheduler {o['scheduler_throughput']['tasks_per_second']} "
        f"tasks/s; batched no-ops {o['batched']['ms_per_unit']} ms per unit ({o['batched']['tasks']} tasks "
        f"for {o['batched']['units']} units)"
    )
    for name in ("enumeration", "split_cubes"):
        m = result["model"][name]
        row = ", ".join(
            f"{p['workers']}: {p['speedup']}× ({p['bound']}, batch {p['batch']})"
            for p in m["predicted"]
            if p["workers"] in (8, 64, 512)
        )
        lines.append(
            f"model, {name}: {row}; efficiency < 50 % from {m['efficiency_below_50_percent_at']} workers ({m['limit']})"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="1,2", help="worker counts for the enumeration, e.g. 1,2,4,8,16")
    parser.add_argument("--seconds", type=float, default=30.0, help="the enumeration's in-process time to aim at")
    parser.add_argument("--repeat", type=int, default=1, help="enumeration runs per worker count (best kept)")
    parser.add_argument("--sweep-repeat", type=int, default=2)
    parser.add_argument("--skip-sweep", action="store_true")
    parser.add_argument("--cube-seconds", type=float, default=1.0, help="split-engine unit time for the model")
    parser.add_argument("--cubes", type=int, default=4096, help="split-engine units for the model")
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=Path(os.environ.get(OUT_DIR_VARIABLE, ROOT / "bench" / "results")),
        help=f"where the JSON, the markdown table and the plot go (default: ${OUT_DIR_VARIABLE}, else bench/results)",
    )
    args = parser.parse_args()
    stem = f"cluster-{platform.node()}-{time.strftime('%Y%m%d-%H%M')}"
    out, table = args.out_dir / f"{stem}.json", args.out_dir / f"{stem}.md"
    worker_counts = sorted({int(w) for w in args.workers.split(",")})
    result: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "host": {
            "cores": os.cpu_count(),
            "cpu": platform.processor() or platform.machine(),
            "python": platform.python_version(),
            "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        },
        "dask": dask_executor.distributed.__version__,
    }
    print(f"host: {result['host']}", flush=True)
    result["overhead"] = overhead(min(2, max(worker_counts)))
    print("overhead:", json.dumps(result["overhead"]), flush=True)
    with tempfile.TemporaryDirectory() as folder:
        result["enumeration"] = enumeration(Path(folder), args.seconds, worker_counts, args.repeat)
    print("enumeration:", json.dumps(result["enumeration"]["clusters"]), flush=True)
    if not args.skip_sweep:
        result["sweep"] = sweep(args.sweep_repeat, 2)
        print("sweep:", json.dumps(result["sweep"]["median_seconds"]), flush=True)
    one = next((c for c in result["enumeration"]["clusters"] if c["workers"] == 1), None)
    serial = one["best"]["seconds"] if one else result["enumeration"]["in_process"]["seconds"]
    result["model"] = scaling_model(result, result["enumeration"]["inputs"], serial, args.cube_seconds, args.cubes)
    result["host"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    args.out_dir.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    drawn = plot(result, out.with_suffix(".png"))
    text = markdown(result)
    table.write_text(text + "\n")
    print(text)
    print(f"wrote {out}, {table}" + (f" and {out.with_suffix('.png')}" if drawn else " (no matplotlib: no plot)"))


if __name__ == "__main__":
    main()

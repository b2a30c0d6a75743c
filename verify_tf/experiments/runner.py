"""Run one experiment spec with a preset on a device, and write its JSON result and PNG plot."""

from __future__ import annotations

import importlib.util
import json
import math
import platform
import time
from pathlib import Path
from typing import Any

import torch

from .. import __version__
from .common import EVIDENCE_NOTE, Progress, choose_device, deterministic
from .luo import plot_luo, run_luo
from .prefix_labels import plot_prefix_labels, run_prefix_labels
from .spec import PRESETS, ExperimentSpec
from .store import RunStore, Say
from .yang import plot_yang, run_yang

__all__ = ["TIMING_KEYS", "make_store", "partial_result", "run_experiment", "runs_folder", "write_outputs"]

# Keys whose values differ between otherwise identical runs (clock readings).
TIMING_KEYS = ("wall_seconds", "cpu_seconds")


def _device_description(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine() or "cpu"


def run_experiment(
    spec: ExperimentSpec,
    *,
    preset: str = "small",
    device: str = "auto",
    seed: int | None = None,
    threads: int = 1,
    progress: Progress | None = None,
    out_dir: Path | None = None,
    export_dir: Path | None = None,
    prove: bool = False,
    store: RunStore | None = None,
) -> dict[str, Any]:
    """Train everything the spec asks for under ``preset``; returns the JSON-ready result. ``out_dir``: where an
    experiment that writes files besides its result (prefix-labels: the model and its check spec) puts them.
    ``store`` (``make_store``): where each model is written as it finishes and read back by a later run."""
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {PRESETS}, got {preset!r}")
    settings = spec.presets[preset]
    chosen = choose_device(device)
    seed = spec.seed if seed is None else seed
    started, cpu_started = time.perf_counter(), time.process_time()
    with deterministic(threads):
        if spec.experiment == "prefix-labels":
            body = run_prefix_labels(spec, settings, chosen, seed, progress, out_dir, spec.path.stem, store)
        elif spec.experiment == "yang-lk-depth":
            body = run_yang(spec, settings, chosen, seed, progress, export_dir, prove, store)
        else:
            body = run_luo(spec, settings, chosen, seed, progress, export_dir, prove, store)
    return {
        "experiment": spec.experiment,
        "title": spec.title,
        "spec": str(spec.path),
        "preset": preset,
        "seed": seed,
        "settings": settings,
        "device": chosen.type,
        "device_name": _device_description(chosen),
        "threads": threads if chosen.type == "cpu" else None,
        "torch": torch.__version__,
        "evidence": EVIDENCE_NOTE,
        "complete": True,
        "runs_folder": str(store.folder) if store is not None and store.folder is not None else None,
        "resumed": list(store.resumed) if store is not None else [],
        "wall_seconds": time.perf_counter() - started,
        "cpu_seconds": time.process_time() - cpu_started,  # all threads of this process; wall time is inflated
        # when other processes share the CPU
        **body,
    }


def runs_folder(out_dir: Path, stem: str) -> Path:
    """Where an experiment's finished models are kept, one row and one checkpoint each (``store.RunStore``)."""
    return out_dir / f"{stem}-runs"


def make_store(
    spec: ExperimentSpec,
    out_dir: Path | None,
    *,
    preset: str = "small",
    device: str = "auto",
    seed: int | None = None,
    threads: int = 1,
    fresh: bool = False,
    say: Say | None = None,
) -> RunStore:
    """The store of finished models under ``out_dir`` (None: keep nothing), keyed by what a model's training
    depends on: a stored model is reused only by a run with the same key."""
    key = {
        "experiment": spec.experiment,
        "preset": preset,
        "settings": spec.presets[preset],
        "seed": spec.seed if seed is None else seed,
        "device": choose_device(device).type,
        "threads": threads,
        "verify-tf": __version__,
        "torch": torch.__version__,
    }
    folder = runs_folder(out_dir, spec.path.stem) if out_dir is not None else None
    return RunStore(folder, json.loads(json.dumps(key)), fresh=fresh, say=say)


def partial_result(spec: ExperimentSpec, store: RunStore, signal_name: str, **settings: Any) -> dict[str, Any]:
    """What an interrupted run writes as its result: the models that finished (their rows; the aggregate table
    needs every model), where they are kept, and how to resume."""
    return {
        "experiment": spec.experiment,
        "title": spec.title,
        "spec": str(spec.path),
        **settings,
        "complete": False,
        "interrupted": signal_name,
        "runs_folder": str(store.folder) if store.folder is not None else None,
        "finished": len(store.finished),
        "expected": store.total,
        "evidence": EVIDENCE_NOTE,
        "runs": store.finished,
    }


def write_outputs(result: dict[str, Any], out_dir: Path, stem: str) -> tuple[Path, Path | None]:
    """Write ``<stem>.json`` and ``<stem>.png`` (matplotlib's Agg renderer, no display needed) under out_dir.

    The PNG path is None when matplotlib is not installed (it is the optional ``plots`` extra)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, png_path = out_dir / f"{stem}.json", out_dir / f"{stem}.png"
    json_path.write_text(json.dumps(_finite(result), indent=1, allow_nan=False) + "\n", encoding="utf-8")
    if importlib.util.find_spec("matplotlib") is None or result.get("complete") is False:
        return json_path, None
    plot = {"luo-position-index": plot_luo, "yang-lk-depth": plot_yang, "prefix-labels": plot_prefix_labels}[
        result["experiment"]
    ]
    plot(result, result["title"]).savefig(png_path, dpi=110)
    return json_path, png_path


def _finite(value: Any) -> Any:
    """JSON has no NaN/inf: a diverged metric is written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value

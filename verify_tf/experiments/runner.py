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

from .common import EVIDENCE_NOTE, Progress, choose_device, deterministic
from .luo import plot_luo, run_luo
from .prefix_labels import plot_prefix_labels, run_prefix_labels
from .spec import PRESETS, ExperimentSpec
from .yang import plot_yang, run_yang

__all__ = ["TIMING_KEYS", "run_experiment", "write_outputs"]

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
) -> dict[str, Any]:
    """Train everything the spec asks for under ``preset``; returns the JSON-ready result. ``out_dir``: where an
    experiment that writes files besides its result (prefix-labels: the model and its check spec) puts them."""
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {PRESETS}, got {preset!r}")
    settings = spec.presets[preset]
    chosen = choose_device(device)
    seed = spec.seed if seed is None else seed
    started, cpu_started = time.perf_counter(), time.process_time()
    with deterministic(threads):
        if spec.experiment == "prefix-labels":
            body = run_prefix_labels(spec, settings, chosen, seed, progress, out_dir, spec.path.stem)
        elif spec.experiment == "yang-lk-depth":
            body = run_yang(spec, settings, chosen, seed, progress, export_dir, prove)
        else:
            body = run_luo(spec, settings, chosen, seed, progress, export_dir, prove)
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
        "wall_seconds": time.perf_counter() - started,
        "cpu_seconds": time.process_time() - cpu_started,  # all threads of this process; wall time is inflated
        # when other processes share the CPU
        **body,
    }


def write_outputs(result: dict[str, Any], out_dir: Path, stem: str) -> tuple[Path, Path | None]:
    """Write ``<stem>.json`` and ``<stem>.png`` (matplotlib's Agg renderer, no display needed) under out_dir.

    The PNG path is None when matplotlib is not installed (it is the optional ``plots`` extra)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, png_path = out_dir / f"{stem}.json", out_dir / f"{stem}.png"
    json_path.write_text(json.dumps(_finite(result), indent=1, allow_nan=False) + "\n", encoding="utf-8")
    if importlib.util.find_spec("matplotlib") is None:
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

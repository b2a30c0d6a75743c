"""Each finished model of an experiment, written the moment it finishes and read back by the next run (resume).

Under ``--out DIR`` an experiment spec ``NAME.yaml`` keeps ``DIR/NAME-runs/``, one pair of files per trained model
(docs/experiments.md, "Results as they finish"):

* ``<label>.pt`` — the selected checkpoint (a state dict, ``torch.save``; read back with ``weights_only=True``);
* ``<label>.json`` — the model's row: what the experiment records for it (history, selected evaluation, its
  export and ``--prove`` verdicts), and the ``key`` it was trained under. Written after the checkpoint, both
  atomically (a temporary file renamed), so a ``.json`` file is always a finished model's.

A later run of the same experiment reuses a stored model when its key equals the run's (the experiment, the
preset's settings, the seed, the device, the threads, the versions of verify-tf and torch): training is skipped
and what is missing (an export, a proof) is done from the stored checkpoint. ``fresh`` trains everything again.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from .common import Progress, stop_if_interrupted

RUN_FORMAT = "verify-tf-experiment-run/1"
Say = Callable[[str], None]
Row = dict[str, Any]


def slug(label: str) -> str:
    """A file name for a model's label: ``L1 / depth 2`` -> ``L1-depth-2``."""
    return re.sub(r"[^A-Za-z0-9.]+", "-", label).strip("-") or "model"


class RunStore:
    """The finished models of one experiment run: ``load`` a stored one, ``save`` one as it finishes.

    ``folder`` None keeps nothing (the Python API without an output folder). ``say`` receives one line per
    model as it is resumed or finished (the CLI prints it on stderr, in logs too)."""

    def __init__(self, folder: Path | None, key: dict[str, Any], *, fresh: bool = False, say: Say | None = None):
        self.folder, self.key, self.fresh = folder, key, fresh
        self.say: Say = say or (lambda line: None)
        self.total = 0  # models the experiment will train (``expect``)
        self.started = 0  # models begun so far (resumed or trained)
        self.finished: list[dict[str, Any]] = []  # the rows of finished models, in order
        self.resumed: list[str] = []

    def expect(self, total: int) -> None:
        """The experiment trains ``total`` models (said at once: the first line of a log)."""
        self.total = total
        kept = f"; each is written to {self.folder} as it finishes" if self.folder is not None else ""
        self.say(f"{total} model{'s' if total != 1 else ''} to train{kept}")

    def _paths(self, label: str) -> tuple[Path, Path]:
        assert self.folder is not None
        return self.folder / f"{slug(label)}.json", self.folder / f"{slug(label)}.pt"

    def load(self, label: str) -> tuple[dict[str, Any], dict[str, torch.Tensor] | None] | None:
        """(the stored row, its checkpoint) of a model finished by an earlier run under the same key, or None.
        Called as each model begins: after a signal it raises ``common.Interrupted`` (nothing more starts)."""
        stop_if_interrupted()
        self.started += 1
        if self.folder is None or self.fresh:
            return None
        row_path, state_path = self._paths(label)
        try:
            stored = json.loads(row_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # not finished before (or unreadable): train it
        if not isinstance(stored, dict) or stored.get("format") != RUN_FORMAT or stored.get("key") != self.key:
            return None  # trained under other settings: train it again
        try:
            state = torch.load(state_path, weights_only=True) if state_path.is_file() else None
        except (OSError, RuntimeError, ValueError):
            state = None
        self.resumed.append(label)
        self.finished.append(stored["run"])
        self.say(f"{self._ordinal()} {label}: finished before, resumed from {row_path}")
        return stored["run"], state

    def save(self, label: str, run: dict[str, Any], state: dict[str, torch.Tensor] | None) -> None:
        """Write a finished model's checkpoint, then its row (the row marks it finished)."""
        self.finished.append(run)
        if self.folder is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        row_path, state_path = self._paths(label)
        if state is not None:
            _atomic(state_path, lambda handle: torch.save(state, handle))
        # NaN (a diverged metric) is kept as NaN here, so that a resumed run computes what the first one would
        text = json.dumps({"format": RUN_FORMAT, "label": label, "key": self.key, "run": run}, indent=1)
        _atomic(row_path, lambda handle: handle.write((text + "\n").encode("utf-8")))
        seconds = run.get("wall_seconds", run.get("training_seconds"))
        took = f" in {seconds:.1f} s" if isinstance(seconds, (int, float)) else ""
        self.say(f"{self._ordinal()} {label}: finished{took}; wrote {row_path}")

    def model(
        self,
        label: str,
        train: Callable[[], tuple[Row, dict[str, torch.Tensor] | None]],
        export_dir: Path | None,
        export: Callable[[Row, dict[str, torch.Tensor], Path], None],
        prove: Callable[[Row], None] | None,
        progress: Progress | None,
    ) -> Row:
        """One model of the experiment: resumed when a run under this key finished it, else ``train()``ed; then
        what the row lacks is exported and proved (``complete``), and the row written when anything is new."""
        stored = self.load(label)
        run, state = stored if stored is not None else train()
        changed = complete(run, state, export_dir, export, prove, progress, label)
        if stored is None or changed:
            self.save(label, run, state)
        return run

    def _ordinal(self) -> str:
        return f"model {self.started} of {self.total}:" if self.total else "model:"


def _atomic(path: Path, write: Callable[[Any], Any]) -> None:
    """Write ``path`` through a temporary file in its folder, renamed over it: never half a file."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        with os.fdopen(handle, "wb") as out:
            write(out)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def exported_elsewhere(exported: Row | None, export_dir: Path) -> bool:
    """Whether a model's row lacks an export into ``export_dir`` (never exported, moved, or exported elsewhere)."""
    if exported is None:
        return True
    model_file = Path(exported["model_file"])
    return not model_file.is_file() or model_file.resolve().parent != export_dir.resolve()


def complete(
    run: Row,
    state: dict[str, torch.Tensor] | None,
    export_dir: Path | None,
    export: Callable[[Row, dict[str, torch.Tensor], Path], None],
    prove: Callable[[Row], None] | None,
    progress: Progress | None = None,
    label: str = "",
) -> bool:
    """Export and prove what this run asks for and a model's row lacks (a resumed model trained without them):
    ``export(run, state, export_dir)`` writes the model and its specs and sets ``run["export"]``; ``prove(run)``
    runs them and sets ``run["proof"]`` (``progress`` names the phase first). True when the row changed."""
    changed = False
    if export_dir is not None and state is not None and exported_elsewhere(run.get("export"), export_dir):
        export(run, state, export_dir)
        run.pop("proof", None)  # verdicts about another export's files
        run.pop("exact", None)
        changed = True
    if prove is not None and run.get("export") is not None and run.get("proof") is None:
        if progress is not None:
            progress(f"{label}: checking the quantized model exactly (--prove)", 0, 0)
        prove(run)
        changed = True
    return changed

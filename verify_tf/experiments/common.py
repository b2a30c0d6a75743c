"""Shared plumbing of the training experiments: device choice, seeding and determinism, the progress
callback, and the training loop.

Reproducibility: every trained model gets its own seed derived from (experiment seed, run label), its
training data comes from a CPU ``torch.Generator`` with that seed and its weights are initialised on the CPU,
so a run does not depend on which other runs the spec asks for, and data and initial weights are the same
on every device.  Deterministic algorithms are requested (``warn_only``: an op without a deterministic
kernel warns instead of failing).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from ..work import interrupted

__all__ = [
    "EVIDENCE_NOTE",
    "ExperimentError",
    "Interrupted",
    "Progress",
    "choose_device",
    "deterministic",
    "run_seed",
    "stop_if_interrupted",
    "train",
]

EVIDENCE_NOTE = (
    "float training (gradient descent on float32 models): evidence about learnability, "
    "never a verdict — a failure to learn proves nothing and a success is not a proof"
)

# (run label, steps done, total steps)
Progress = Callable[[str, int, int], None]


class ExperimentError(Exception):
    """A problem the user can fix (bad device, impossible sizes); the CLI prints it without a traceback."""


class Interrupted(Exception):
    """SIGINT or SIGTERM arrived (``work.request_interrupt``): the model in progress is dropped, the finished ones
    are kept (``store.RunStore``), and the CLI exits 130 or 143."""

    def __init__(self, signum: int):
        super().__init__(f"interrupted by signal {signum}")
        self.signum = signum


def stop_if_interrupted() -> None:
    """Raise ``Interrupted`` once a signal has arrived (checked every training step and between models)."""
    signum = interrupted()
    if signum is not None:
        raise Interrupted(signum)


def choose_device(name: str) -> torch.device:
    """``auto`` -> CUDA when present, else CPU; ``cuda`` without a GPU is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ExperimentError("--device cuda was requested but torch sees no CUDA GPU (use --device auto or cpu)")
    return torch.device(name)


def run_seed(seed: int, label: str) -> int:
    """A stable per-run seed: independent of Python's hash randomisation and of the other runs."""
    return zlib.crc32(f"{seed}:{label}".encode()) & 0x7FFF_FFFF


@contextmanager
def deterministic(threads: int) -> Iterator[None]:
    """Use ``threads`` CPU threads and deterministic kernels for the duration; restore the settings after."""
    previous_threads = torch.get_num_threads()
    previous_deterministic = torch.are_deterministic_algorithms_enabled()
    previous_warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    # cuBLAS needs a fixed workspace to be deterministic; it must be set before the first CUDA matmul.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.set_num_threads(max(1, threads))
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.set_num_threads(previous_threads)
        torch.use_deterministic_algorithms(previous_deterministic, warn_only=previous_warn_only)


def train(
    model: torch.nn.Module,
    *,
    steps: int,
    learning_rate: float,
    batch_loss: Callable[[int], torch.Tensor],
    evaluate: Callable[[], dict[str, float]],
    eval_every: int,
    label: str,
    progress: Progress | None,
) -> list[dict[str, float | None]]:
    """Adam on ``batch_loss(step)`` with the learning rate decayed to 0 along a cosine; ``evaluate()`` (under
    no_grad, eval mode) at step 0, every ``eval_every`` steps and at the end.  Returns the evaluation
    history: ``step``, the last batch ``loss`` (None at step 0) and the metrics."""
    optimiser = torch.optim.Adam(model.parameters(), lr=learning_rate)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, T_max=steps)
    history: list[dict[str, float | None]] = []

    def record(step: int, loss: float | None) -> None:
        model.eval()
        with torch.no_grad():
            history.append({"step": step, "loss": loss, **evaluate()})
        model.train()

    record(0, None)
    for step in range(1, steps + 1):
        stop_if_interrupted()
        optimiser.zero_grad(set_to_none=True)
        loss = batch_loss(step)
        loss.backward()
        optimiser.step()
        schedule.step()
        if step % eval_every == 0 or step == steps:
            record(step, float(loss.detach()))
        if progress is not None:
            progress(label, step, steps)
    return history

"""Luo et al. (NeurIPS 2022, "Your Transformer May Not be as Powerful as You Expect"): train APE, RPE and
URPE transformers on position tasks and measure how close each gets.

Tasks (n = ``length``, tokens drawn from ``vocab`` kinds, positions numbered 1..n as in the paper):

* ``position-index`` — regression f(X)_i = i.  Training batches mix constant sequences (one token repeated
  n times) and random ones.  The measured quantity is the sup-error max_i |f(X)_i - i| over *all* ``vocab``
  constant inputs.  On a constant input an RPE transformer gives every position the same output y (softmax
  rows are stochastic, the FFN and residuals are token-wise), and max_i |y - i| >= (n-1)/2 with equality at
  y = (n+1)/2: that is the certificate eps* = (n-1)/2 of the ``inexpressible`` property, reported next to
  the measured value.  RPE must stall at >= eps* (up to float rounding); URPE / APE can go below.
* ``position-identification`` — the paper's Position Identification: random tokens, classify position i
  among n classes.  Accuracy on random inputs (and on constant inputs, where RPE is at 1/n).
* ``even-token-prediction`` — the paper's Even Token Prediction: for i < n/2 predict the token at (0-based)
  position 2i+1.  Accuracy on random inputs.

All numbers are float-training evidence, never a verdict (see ``EVIDENCE_NOTE``).
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch
from torch.nn import functional

from .common import Progress, run_seed, train
from .modules import TinyTransformer
from .spec import ExperimentSpec

__all__ = ["epsilon_star", "plot_luo", "run_luo"]

VARIANT_LABELS = {"ape": "standard + APE", "rpe": "RPE", "urpe": "URPE"}
VARIANT_COLOURS = {"ape": "tab:blue", "rpe": "tab:red", "urpe": "tab:green"}
_EVAL_CHUNK = 1024


def epsilon_star(length: int) -> float:
    """The least sup-error of any position-blind model on a constant input for targets 1..n: (n-1)/2."""
    return (length - 1) / 2


def _outputs(task: str, settings: dict[str, Any]) -> int:
    return {
        "position-index": 1,
        "position-identification": settings["length"],
        "even-token-prediction": settings["vocab"],
    }[task]


class _Task:
    """Data and metrics of one task for one trained model."""

    def __init__(self, task: str, settings: dict[str, Any], generator: torch.Generator, device: torch.device):
        self.task, self.settings, self.generator, self.device = task, settings, generator, device
        self.length, self.vocab = settings["length"], settings["vocab"]
        self.positions = torch.arange(self.length, device=device)
        self.targets = (self.positions + 1).to(torch.float32)  # 1-based, as in the paper
        self.constant_inputs = torch.arange(self.vocab, device=device)[:, None].expand(self.vocab, self.length)
        self.random_inputs = self._random(settings["eval-samples"])

    def _random(self, count: int) -> torch.Tensor:
        return torch.randint(self.vocab, (count, self.length), generator=self.generator).to(self.device)

    def _constant(self, count: int) -> torch.Tensor:
        tokens = torch.randint(self.vocab, (count, 1), generator=self.generator)
        return tokens.expand(count, self.length).contiguous().to(self.device)

    def batch_loss(self, model: torch.nn.Module, batch: int) -> torch.Tensor:
        if self.task == "position-index":
            constant = round(batch * self.settings["constant-fraction"])
            tokens = torch.cat([self._constant(constant), self._random(batch - constant)])
            prediction = model(tokens)[..., 0]
            return functional.mse_loss(prediction, self.targets.expand_as(prediction))
        tokens = self._random(batch)
        logits = model(tokens)
        if self.task == "position-identification":
            return functional.cross_entropy(logits.reshape(-1, self.length), self.positions.repeat(batch))
        half = self.length // 2
        return functional.cross_entropy(
            logits[:, :half].reshape(-1, self.vocab), self._even_targets(tokens).reshape(-1)
        )

    def _even_targets(self, tokens: torch.Tensor) -> torch.Tensor:
        """Target of position i < n/2: the token at position 2i+1."""
        return tokens[:, 1::2][:, : self.length // 2]

    def _predict(self, model: torch.nn.Module, tokens: torch.Tensor) -> torch.Tensor:
        return torch.cat([model(chunk) for chunk in tokens.split(_EVAL_CHUNK)])

    def metrics(self, model: torch.nn.Module) -> dict[str, float]:
        if self.task == "position-index":
            errors = {
                name: (self._predict(model, tokens)[..., 0] - self.targets).abs()
                for name, tokens in (("constant", self.constant_inputs), ("random", self.random_inputs))
            }
            return {
                "sup_error_constant": float(errors["constant"].max()),
                "mean_error_constant": float(errors["constant"].mean()),
                "sup_error_random": float(errors["random"].max()),
            }
        if self.task == "position-identification":
            return {
                name: float((self._predict(model, tokens).argmax(-1) == self.positions).float().mean())
                for name, tokens in (
                    ("accuracy_random", self.random_inputs),
                    ("accuracy_constant", self.constant_inputs),
                )
            }
        half = self.length // 2
        predicted = self._predict(model, self.random_inputs)[:, :half].argmax(-1)
        return {"accuracy_random": float((predicted == self._even_targets(self.random_inputs)).float().mean())}


def _best(task: str, history: list[dict[str, Any]]) -> dict[str, float]:
    """Best value of each metric over the evaluations (smallest error, largest accuracy); NaN (a diverged
    evaluation) never counts as best."""
    keys = [key for key in history[0] if key not in ("step", "loss")]
    pick = min if task == "position-index" else max
    best = {}
    for key in keys:
        values = [entry[key] for entry in history if not math.isnan(entry[key])]
        best[key] = pick(values) if values else math.nan
    return best


def _train_one(
    task: str, variant: str, settings: dict[str, Any], device: torch.device, seed: int, progress: Progress | None
) -> dict[str, Any]:
    label = f"{task} / {variant}"
    started = time.perf_counter()
    seed_of_run = run_seed(seed, label)
    torch.manual_seed(seed_of_run)
    model = TinyTransformer(
        vocab=settings["vocab"],
        width=settings["width"],
        heads=settings["heads"],
        layers=settings["layers"],
        ffn_width=settings["ffn-width"],
        outputs=_outputs(task, settings),
        positional=variant,
        causal=False,
        max_length=settings["length"],
        layernorm=settings["layernorm"],
    ).to(device)
    data = _Task(task, settings, torch.Generator().manual_seed(seed_of_run), device)
    history = train(
        model,
        steps=settings["steps"],
        learning_rate=settings["learning-rate"],
        batch_loss=lambda _step: data.batch_loss(model, settings["batch"]),
        evaluate=lambda: data.metrics(model),
        eval_every=settings["eval-every"],
        label=label,
        progress=progress,
    )
    run = {
        "task": task,
        "variant": variant,
        "seed": seed_of_run,
        "parameters": sum(p.numel() for p in model.parameters()),
        "best": _best(task, history),
        "final": {k: v for k, v in history[-1].items() if k not in ("step", "loss")},
        "history": history,
        "wall_seconds": time.perf_counter() - started,
    }
    if task == "position-index":
        eps = epsilon_star(settings["length"])
        run["epsilon_star"] = eps
        run["below_epsilon_star"] = run["best"]["sup_error_constant"] < eps
    return run


def run_luo(
    spec: ExperimentSpec, settings: dict[str, Any], device: torch.device, seed: int, progress: Progress | None = None
) -> dict[str, Any]:
    """Train every (task, variant) of the spec; returns ``runs`` and a ``summary`` of the best values."""
    runs = [
        _train_one(task, variant, settings, device, seed, progress) for task in spec.tasks for variant in spec.variants
    ]
    summary: dict[str, Any] = {}
    for run in runs:
        entry = summary.setdefault(run["task"], {})
        if run["task"] == "position-index":
            entry["epsilon_star"] = run["epsilon_star"]
            entry[run["variant"]] = {
                "best_sup_error_constant": run["best"]["sup_error_constant"],
                "best_sup_error_random": run["best"]["sup_error_random"],
                "below_epsilon_star": run["below_epsilon_star"],
            }
        else:
            entry[run["variant"]] = {key: value for key, value in run["best"].items()}
    return {"runs": runs, "summary": summary}


def plot_luo(result: dict[str, Any], title: str):
    """One panel per task: the metric against training steps for each variant (eps* dashed)."""
    from matplotlib.figure import Figure

    tasks = list(dict.fromkeys(run["task"] for run in result["runs"]))
    figure = Figure(figsize=(4.6 * len(tasks), 3.9), layout="constrained")
    axes = figure.subplots(1, len(tasks), squeeze=False)[0]
    for axis, task in zip(axes, tasks):
        for run in (r for r in result["runs"] if r["task"] == task):
            steps = [entry["step"] for entry in run["history"]]
            metric = "sup_error_constant" if task == "position-index" else "accuracy_random"
            colour = VARIANT_COLOURS[run["variant"]]
            axis.plot(
                steps,
                [entry[metric] for entry in run["history"]],
                color=colour,
                label=VARIANT_LABELS[run["variant"]],
                linewidth=1.6,
            )
            if task == "position-identification":
                axis.plot(
                    steps,
                    [entry["accuracy_constant"] for entry in run["history"]],
                    color=colour,
                    linestyle=":",
                    linewidth=1.4,
                )
        axis.set_xlabel("training step")
        axis.grid(alpha=0.3)
        if task == "position-index":
            eps = result["summary"][task]["epsilon_star"]
            axis.axhline(eps, color="black", linestyle="--", linewidth=1.2, label=f"ε* = (n−1)/2 = {eps:g}")
            axis.set_yscale("log")
            axis.set_ylabel("sup-error on constant inputs")
            axis.set_title("position-index: f(X)_i = i")
        else:
            axis.set_ylim(-0.02, 1.02)
            axis.set_ylabel("accuracy on random inputs")
            if task == "position-identification":
                axis.set_ylabel("accuracy (solid: random, dotted: constant inputs)")
            axis.set_title(
                {
                    "position-identification": "Position Identification",
                    "even-token-prediction": "Even Token Prediction",
                }[task]
            )
        axis.legend(fontsize=8, loc="best")
    figure.suptitle(f"{title}\nfloat training — evidence, not a verdict", fontsize=10)
    return figure

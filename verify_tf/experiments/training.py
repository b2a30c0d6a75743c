"""Training with checkpoint selection, shared by the experiments that export what they trained.

* :class:`CheckpointSelector` — the ``evaluate`` of :func:`.common.train` that selects one checkpoint: the
  evaluation with the best ``score`` (ties: the latest; NaN never), its history entry and its weights, chosen
  once, while training;
* :func:`train_prefix_labeller` — the prediction task of ``yang-lk-depth`` and ``prefix-labels``: a causal model
  labelling every prefix of BOS-prefixed strings (one logit per position, accept iff logit > 0), trained with
  binary cross-entropy on batches drawn from the training strings, selected by whole-string exact match on
  held-out strings of the training lengths.

Evidence, never a verdict: the selected checkpoint is what an experiment exports and checks exactly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch.nn import functional

from .common import Progress, train
from .modules import TinyTransformer

__all__ = ["CheckpointSelector", "Labelled", "Trained", "prefix_logits", "prefix_scores", "train_prefix_labeller"]

# tokens (BOS first, right-padded), prefix labels, mask of real positions
Labelled = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
_SCORE_CHUNK = 512  # strings per forward pass when scoring


@dataclass
class Trained:
    """A training run: its evaluation ``history``, the ``selected`` entry of it and that checkpoint's weights."""

    history: list[dict[str, Any]]
    selected: dict[str, Any]
    state: dict[str, torch.Tensor]
    parameters: int


class CheckpointSelector:
    """An ``evaluate`` for :func:`.common.train` that keeps the checkpoint whose evaluation has the largest
    ``score`` (the latest of equal ones; a NaN score is never selected; with no finite score, the last one).

    ``history = train(model, evaluate=selector, ...)``, then ``selector.trained(history)``."""

    def __init__(
        self,
        model: torch.nn.Module,
        evaluate: Callable[[], dict[str, float]],
        score: Callable[[dict[str, float]], float],
    ):
        self.model, self.evaluate, self.score = model, evaluate, score
        self.best_score, self.best_index, self.evaluations = -math.inf, -1, 0
        self.best_state: dict[str, torch.Tensor] = {}

    def __call__(self) -> dict[str, float]:
        metrics = self.evaluate()
        value = self.score(metrics)
        if not math.isnan(value) and value >= self.best_score:
            self.best_score, self.best_index, self.best_state = value, self.evaluations, _detached(self.model)
        self.evaluations += 1
        return metrics

    def trained(self, history: list[dict[str, Any]]) -> Trained:
        if self.best_index < 0:
            self.best_index, self.best_state = len(history) - 1, _detached(self.model)
        return Trained(
            history=history,
            selected=history[self.best_index],
            state=self.best_state,
            parameters=sum(p.numel() for p in self.model.parameters()),
        )


def _detached(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: value.detach().cpu().clone() for name, value in model.state_dict().items()}


def prefix_logits(model: torch.nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    return model(tokens)[:, 1:, 0]  # drop the BOS position


def prefix_scores(
    model: torch.nn.Module, tokens: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor
) -> tuple[float, float]:
    """(exact match over strings, accuracy over positions)."""
    correct = torch.cat(
        [
            (prefix_logits(model, chunk) > 0).float() == target
            for chunk, target in zip(tokens.split(_SCORE_CHUNK), labels.split(_SCORE_CHUNK))
        ]
    )
    exact = (correct | ~mask).all(dim=1).float().mean()
    positions = (correct & mask).sum() / mask.sum()
    return float(exact), float(positions)


def train_prefix_labeller(
    data: Mapping[str, Labelled],
    *,
    vocab: int,
    layers: int,
    settings: Mapping[str, Any],
    seed_of_run: int,
    device: torch.device,
    evaluations: int,
    label: str,
    progress: Progress | None,
) -> Trained:
    """A causal ``TinyTransformer`` without positional encoding (``vocab`` tokens, BOS included; ``layers`` deep;
    ``settings``: width, heads, ffn-width, layernorm), initialised and fed batches from ``seed_of_run``, trained on
    ``data["train"]`` (``settings``: steps, batch, learning-rate) and evaluated ``evaluations`` times on
    ``data["validation"]`` and ``data["test"]``; selected: the best validation exact match."""
    torch.manual_seed(seed_of_run)
    generator = torch.Generator().manual_seed(seed_of_run)
    model = TinyTransformer(
        vocab=vocab,
        width=settings["width"],
        heads=settings["heads"],
        layers=layers,
        ffn_width=settings["ffn-width"],
        outputs=1,
        positional="none",
        causal=True,
        layernorm=settings["layernorm"],
    ).to(device)
    tokens, labels, mask = data["train"]

    def batch_loss(_step: int) -> torch.Tensor:
        rows = torch.randint(len(tokens), (settings["batch"],), generator=generator).to(device)
        losses = functional.binary_cross_entropy_with_logits(
            prefix_logits(model, tokens[rows]), labels[rows], reduction="none"
        )
        return losses[mask[rows]].mean()

    def evaluate() -> dict[str, float]:
        scores = {}
        for name in ("validation", "test"):
            scores[f"{name}_exact"], scores[f"{name}_positions"] = prefix_scores(model, *data[name])
        return scores

    selector = CheckpointSelector(model, evaluate, score=lambda scores: scores["validation_exact"])
    history = train(
        model,
        steps=settings["steps"],
        learning_rate=settings["learning-rate"],
        batch_loss=batch_loss,
        evaluate=selector,
        eval_every=max(1, settings["steps"] // evaluations),
        label=label,
        progress=progress,
    )
    return selector.trained(history)

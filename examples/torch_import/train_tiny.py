"""Train a tiny LayerNorm-free transformer in PyTorch, save its state dict, and check it with verify-tf.

    python examples/torch_import/train_tiny.py            # writes tiny.pt and tiny_positions.pt here
    verify-tf check examples/torch_import/tiny.yaml examples/torch_import/tiny_positions.yaml

Two models learn the same task on sequences of 3 tokens in [-1/2, 1/2]^2 — at every position, output the
token's first coordinate plus the sequence mean of the second coordinate (a permutation-equivariant
target) — with ``verify_tf.experiments.exact_encoder.ExactEncoder`` (MultiheadAttention + a ReLU feed-forward
with residuals, no LayerNorm), which the importer maps exactly. ``tiny`` has no positional information,
so ``tiny.yaml`` proves permutation equivariance of the imported, quantized model by exhaustion;
``tiny_positions`` also learns absolute positional embeddings, and ``tiny_positions.yaml`` expects a
counterexample (explore it with ``verify-tf check ... --explain``).

Seconds on one CPU thread. ``--out DIR`` writes the weights (and copies the two specs) elsewhere.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import torch

from verify_tf.experiments.exact_encoder import ExactEncoder

HERE = Path(__file__).resolve().parent
SPECS = ("tiny.yaml", "tiny_positions.yaml")


def batch(generator: torch.Generator, size: int = 256, length: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.rand(size, length, 2, generator=generator) - 0.5
    target = x[..., 0] + x[..., 1].mean(dim=1, keepdim=True)
    return x, target


def train(positions: bool, steps: int, seed: int = 0) -> ExactEncoder:
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    # d_model 2 with 2 heads: d_head = 1, so torch's 1/sqrt(d_head) logit scale is exactly 1
    model = ExactEncoder(d_model=2, nhead=2, num_layers=1, dim_feedforward=4, max_length=3 if positions else None)
    optimiser = torch.optim.Adam(model.parameters(), lr=0.03)
    name = "tiny_positions" if positions else "tiny"
    every = max(1, steps // 5)  # five progress lines per model: training takes seconds
    for step in range(1, steps + 1):
        x, target = batch(generator)
        loss = torch.nn.functional.mse_loss(model(x), target)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        if step % every == 0 or step == steps:
            print(f"{name}: step {step}/{steps}, training mse {loss.item():.5f}", flush=True)
    x, target = batch(generator, 1024)
    with torch.no_grad():
        mse = torch.nn.functional.mse_loss(model(x), target)
        print(f"{name}: test mse {mse:.5f}", flush=True)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=HERE, help="folder for the .pt files (default: next to this script)"
    )
    parser.add_argument("--steps", type=int, default=300, help="optimiser steps per model")
    args = parser.parse_args()
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    torch.save(train(False, args.steps).state_dict(), args.out / "tiny.pt")
    torch.save(train(True, args.steps).state_dict(), args.out / "tiny_positions.pt")
    if args.out.resolve() != HERE:
        for name in SPECS:
            shutil.copy(HERE / name, args.out / name)
    print(
        f"wrote {args.out / 'tiny.pt'} and {args.out / 'tiny_positions.pt'}; run:\n"
        f"  verify-tf check {' '.join(str(args.out / name) for name in SPECS)}"
    )


if __name__ == "__main__":
    main()

"""Train a tiny torch.nn.TransformerEncoder with LayerNorm and GELU, save its state dict, and check it with verify-tf.

    python examples/torch_import/train_layernorm.py       # writes layernorm.pt here
    verify-tf check specs/torch-layernorm-equivariance.yaml

The model is a stock ``torch.nn.TransformerEncoderLayer`` (d_model 4, one head, feed-forward 8, GELU, post-LN:
torch's default ``norm_first=False``) in an ``nn.TransformerEncoder`` with a final LayerNorm, and a bias-free
readout. It learns,
on sequences of 3 tokens in [-1/2, 1/2]^4, to output at every position the token's first coordinate plus the
sequence mean of its second (a permutation-equivariant target). The importer reads it with
``architecture: {layernorm: integer, norm-first: false, activation: i-gelu}``: the verified model has the
fixed-point integer LayerNorm and I-BERT's i-GELU of docs/semantics.md in place of torch's float ones.

A few seconds on one CPU thread (test mse 0.004 against a target variance of 0.108). The committed
``layernorm.pt`` was written by this script (seed 0, torch 2.13.0 on the CPU); other torch builds may train
slightly different weights.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch import nn

HERE = Path(__file__).resolve().parent


class LayerNormEncoder(nn.Module):
    """(batch, n, 4) vectors -> the readout q (batch, n); its state dict is what the spec imports."""

    def __init__(self, norm_first: bool = False, activation: str = "gelu", final_norm: bool = True):
        super().__init__()
        layer = nn.TransformerEncoderLayer(
            4, 1, 8, dropout=0.0, activation=activation, batch_first=True, norm_first=norm_first
        )
        self.encoder = nn.TransformerEncoder(
            layer, 1, norm=nn.LayerNorm(4) if final_norm else None, enable_nested_tensor=False
        )
        self.readout = nn.Linear(4, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.readout(self.encoder(x)).squeeze(-1)


def batch(generator: torch.Generator, size: int = 256, length: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.rand(size, length, 4, generator=generator) - 0.5
    return x, x[..., 0] + x[..., 1].mean(dim=1, keepdim=True)


def train(steps: int = 600, seed: int = 0, **kwargs) -> LayerNormEncoder:
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    model = LayerNormEncoder(**kwargs)
    optimiser = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(steps):
        x, target = batch(generator)
        loss = nn.functional.mse_loss(model(x), target)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    x, target = batch(generator, 1024)
    with torch.no_grad():
        print(f"test mse {nn.functional.mse_loss(model(x), target):.5f} (target variance {target.var():.5f})")
    return model.eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "layernorm.pt", help="where to write the state dict")
    parser.add_argument("--steps", type=int, default=600, help="optimiser steps")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.save(train(args.steps).state_dict(), args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

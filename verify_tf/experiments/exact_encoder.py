"""Small LayerNorm-free torch modules to train models that ``verify_tf.builders.torch_import`` maps onto the IR
exactly, without any approximation (docs/import.md): ``ExactEncoderLayer`` (a ``TransformerEncoderLayer``
without LayerNorm and dropout) and ``ExactEncoder`` (a stack of them with optional embeddings and positions).

Like :mod:`.modules`, these are float models trained by gradient descent; a verdict is only ever about the
imported, exact model.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["ExactEncoder", "ExactEncoderLayer"]


class ExactEncoderLayer(nn.Module):
    """z <- z + MHA(z); z <- z + W2 relu(W1 z + b1) + b2: a TransformerEncoderLayer without LayerNorm and
    dropout, which the importer maps exactly. ``dim_feedforward=0`` leaves out the feed-forward."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 0, bias: bool = True, causal: bool = False):
        super().__init__()
        self.causal = causal
        self.self_attn = nn.MultiheadAttention(d_model, nhead, bias=bias, batch_first=True)
        self.linear1: nn.Linear | None = None
        self.linear2: nn.Linear | None = None
        if dim_feedforward:
            self.linear1 = nn.Linear(d_model, dim_feedforward)
            self.linear2 = nn.Linear(dim_feedforward, d_model)

    def forward(self, z: torch.Tensor) -> torch.Tensor:  # z: (batch, n, d)
        n = z.shape[1]
        mask = torch.triu(torch.ones(n, n, dtype=torch.bool, device=z.device), 1) if self.causal else None
        z = z + self.self_attn(z, z, z, attn_mask=mask, need_weights=False)[0]
        if self.linear1 is not None and self.linear2 is not None:
            z = z + self.linear2(torch.relu(self.linear1(z)))
        return z


class ExactEncoder(nn.Module):
    """Optional embedding table and learned absolute positions, ``ExactEncoderLayer``s, a bias-free readout.

    ``forward`` takes (batch, n) symbol indices when ``alphabet_size`` is set, else (batch, n, d) vectors,
    and returns the readout q (batch, n). Its state dict is what ``model: {torch: FILE}`` reads.
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        num_layers: int,
        dim_feedforward: int = 0,
        alphabet_size: int | None = None,
        max_length: int | None = None,
        causal: bool = False,
    ):
        super().__init__()
        self.embedding = nn.Embedding(alphabet_size, d_model) if alphabet_size else None
        self.positional = nn.Embedding(max_length, d_model) if max_length else None
        self.layers = nn.ModuleList(
            ExactEncoderLayer(d_model, nhead, dim_feedforward, causal=causal) for _ in range(num_layers)
        )
        self.readout = nn.Linear(d_model, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.embedding(x) if self.embedding is not None else x
        if self.positional is not None:
            z = z + self.positional.weight[: z.shape[1]]
        for layer in self.layers:
            z = layer(z)
        return self.readout(z).squeeze(-1)

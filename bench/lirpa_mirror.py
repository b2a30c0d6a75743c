"""auto_LiRPA's CROWN on a float mirror of a verify-tf model (bench only; auto_LiRPA is never a dependency).

The mirror is the model in real arithmetic (no rounding, no saturation, the real softmax e^s / Σ e^s), as a torch
module auto_LiRPA traces: per block the heads (q, k, v linear maps, scores q·k, softmax over the keys, the weighted
sum of the values, the output projection, the residual), then the feed-forward layer (ReLU), then the readout at
every position. It supports what ``bench_tightness``'s three models use: grid tokens, non-causal softmax heads
with standard positions, ReLU, no LayerNorm, no positional encoding. The bounds are CROWN's (``method="CROWN"``)
on the box of each cube's coordinates, in float64: a tightness reference of the same network, not a sound bound
of its fixed-point reading. (Its exp relaxation overflows on some cubes of d3: NaN bounds, counted as infinitely
wide by the bench.)
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


def _tensor(matrix) -> torch.Tensor:
    return torch.tensor([[float(w) for w in row] for row in matrix], dtype=torch.float64)


def _vector(values) -> torch.Tensor:
    return torch.tensor([float(v) for v in values], dtype=torch.float64)


class Mirror(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.blocks = []
        for b, block in enumerate(model.blocks):
            parts = {}
            if block.attention is not None:
                layer = block.attention
                heads = []
                for h, head in enumerate(layer.heads):
                    if head.scoring != "softmax" or head.causal or head.positional != "standard":
                        raise ValueError("the mirror takes non-causal softmax heads with standard positions")
                    names = []
                    for part in ("query", "key", "value"):
                        linear = nn.Linear(model.dim, len(getattr(head, part)), dtype=torch.float64)
                        linear.weight.data = _tensor(getattr(head, part))
                        linear.bias.data = _vector(getattr(head, f"{part}_bias"))
                        name = f"b{b}h{h}{part}"
                        self.add_module(name, linear)
                        names.append(name)
                    heads.append(names)
                projection = nn.Linear(sum(len(h.value) for h in layer.heads), model.dim, dtype=torch.float64)
                projection.weight.data = torch.cat([_tensor(h.output) for h in layer.heads], dim=1)
                projection.bias.data = _vector(layer.output_bias)
                self.add_module(f"b{b}out", projection)
                parts["attention"] = (heads, f"b{b}out", layer.residual)
            if block.feed_forward is not None:
                ff = block.feed_forward
                if ff.activation != "relu":
                    raise ValueError("the mirror takes ReLU feed-forward layers")
                w1 = nn.Linear(model.dim, len(ff.w1), dtype=torch.float64)
                w1.weight.data, w1.bias.data = _tensor(ff.w1), _vector(ff.b1)
                w2 = nn.Linear(len(ff.w1), model.dim, dtype=torch.float64)
                w2.weight.data, w2.bias.data = _tensor(ff.w2), _vector(ff.b2)
                self.add_module(f"b{b}w1", w1)
                self.add_module(f"b{b}w2", w2)
                parts["feed_forward"] = (f"b{b}w1", f"b{b}w2", ff.residual)
            self.blocks.append(parts)
        self.readout = nn.Linear(model.dim, 1, bias=False, dtype=torch.float64)
        self.readout.weight.data = _vector(model.readout)[None]

    def forward(self, z: torch.Tensor) -> torch.Tensor:  # (B, n, d) -> (B, n)
        for parts in self.blocks:
            if "attention" in parts:
                heads, out, residual = parts["attention"]
                outputs = []
                for q_name, k_name, v_name in heads:
                    q, k, v = getattr(self, q_name)(z), getattr(self, k_name)(z), getattr(self, v_name)(z)
                    weights = torch.softmax(q.matmul(k.transpose(1, 2)), dim=-1)
                    outputs.append(weights.matmul(v))
                update = getattr(self, out)(torch.cat(outputs, dim=-1))
                z = z + update if residual else update
            if "feed_forward" in parts:
                w1, w2, residual = parts["feed_forward"]
                update = getattr(self, w2)(torch.relu(getattr(self, w1)(z)))
                z = z + update if residual else update
        return self.readout(z)[..., 0]


def crown_bounds(model, domain, cubes) -> list[tuple[np.ndarray, np.ndarray]]:
    """CROWN's (lo, hi) of the readout at every position, per cube (each coordinate's box from its index range)."""
    from auto_LiRPA import BoundedModule, BoundedTensor, PerturbationLpNorm

    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # auto_LiRPA builds its own tensors in the default type; float32 overflows
    try:
        return _crown(model, domain, cubes, BoundedModule, BoundedTensor, PerturbationLpNorm)
    finally:
        torch.set_default_dtype(previous)


def _crown(model, domain, cubes, BoundedModule, BoundedTensor, PerturbationLpNorm):
    values = np.array([float(v) for v in domain.values])
    ranges = np.array([c.ranges for c in cubes])  # (B, n, d, 2)
    lower = torch.tensor(values[ranges[..., 0]], dtype=torch.float64)
    upper = torch.tensor(values[ranges[..., 1]], dtype=torch.float64)
    mirror = Mirror(model)
    center = (lower + upper) / 2
    bounded = BoundedModule(mirror, center, device="cpu", verbose=0)
    x = BoundedTensor(center, PerturbationLpNorm(norm=float("inf"), x_L=lower, x_U=upper))
    lo, hi = bounded.compute_bounds(x=(x,), method="CROWN")
    return [(lo[b].detach().numpy(), hi[b].detach().numpy()) for b in range(len(cubes))]

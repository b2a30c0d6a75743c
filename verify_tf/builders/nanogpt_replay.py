"""A nanoGPT witness replayed in torch: nanoGPT's ``GPT`` forward rebuilt (``model.py``), run in float32 on CPU.

``NanoGPTReplay(file, choice, model_args)`` is called with token ids and returns the readout of two evaluations: the
module with ``F.scaled_dot_product_attention(q, k, v, is_causal=True)`` (nanoGPT's flash path) and with the manual
attention nanoGPT falls back to (``(q @ kᵀ) · (1/√d_h)``, ``masked_fill(-inf)``, softmax, ``@ v``), both loaded
with ``load_state_dict(strict=True)`` from the checkpoint's own state dict and run under ``torch.no_grad()``. torch
is imported when a witness is replayed (reading the checkpoint needs it already).
"""

from __future__ import annotations

import importlib.util
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from .hf_layouts import ReadoutChoice

COMPILED = "_orig_mod."
KERNELS = ("torch (nanoGPT, flash attention)", "torch (nanoGPT, manual attention)")


def _module(model_args: dict[str, Any], flash: bool) -> Any:
    import torch
    from torch import nn
    from torch.nn import functional

    d, heads, bias = model_args["n_embd"], model_args["n_head"], model_args["bias"]

    class LayerNorm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d))
            self.bias = nn.Parameter(torch.zeros(d)) if bias else None

        def forward(self, x: Any) -> Any:
            return functional.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)

    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_attn = nn.Linear(d, 3 * d, bias=bias)
            self.c_proj = nn.Linear(d, d, bias=bias)

        def forward(self, x: Any) -> Any:
            b, t, _ = x.size()
            q, k, v = self.c_attn(x).split(d, dim=2)
            q, k, v = (z.view(b, t, heads, d // heads).transpose(1, 2) for z in (q, k, v))
            if flash:
                y = functional.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
                mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
                att = functional.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
                y = att @ v
            return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, d))

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_fc = nn.Linear(d, 4 * d, bias=bias)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * d, d, bias=bias)

        def forward(self, x: Any) -> Any:
            return self.c_proj(self.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1, self.attn, self.ln_2, self.mlp = LayerNorm(), Attention(), LayerNorm(), MLP()

        def forward(self, x: Any) -> Any:
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = nn.ModuleDict(
                {
                    "wte": nn.Embedding(model_args["vocab_size"], d),
                    "wpe": nn.Embedding(model_args["block_size"], d),
                    "h": nn.ModuleList(Block() for _ in range(model_args["n_layer"])),
                    "ln_f": LayerNorm(),
                }
            )
            self.lm_head = nn.Linear(d, model_args["vocab_size"], bias=False)

        def forward(self, idx: Any) -> tuple[Any, Any]:
            parts: Any = self.transformer  # an nn.ModuleDict: its entries are modules
            t = idx.size(1)
            x = parts["wte"](idx) + parts["wpe"](torch.arange(t, dtype=torch.long))
            for block in parts["h"]:
                x = block(x)
            x = parts["ln_f"](x)
            return x, self.lm_head(x)

    return GPT()


class NanoGPTReplay:
    """``(ids) -> {kernel: readout (B, n) as exact rationals}`` (module docstring)."""

    short = "torch"
    needs = "torch"

    def available(self) -> bool:
        return importlib.util.find_spec("torch") is not None

    def __init__(self, file: Path, choice: ReadoutChoice, model_args: dict[str, Any]) -> None:
        self.file, self.choice, self.model_args = file, choice, model_args
        self._modules: list[Any] = []

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (a work unit sent to a worker process, ``-j 2``) without the built modules, whose classes are
        local to ``_module`` and cannot be pickled: each process builds its own."""
        return {**self.__dict__, "_modules": []}

    @property
    def name(self) -> str:
        return "torch (nanoGPT's forward, flash and manual attention)"

    def _load(self) -> list[Any]:
        if not self._modules:
            import torch

            state = torch.load(self.file, map_location="cpu", weights_only=True)["model"]
            state = {k[len(COMPILED) :] if k.startswith(COMPILED) else k: v for k, v in state.items()}
            state = {k: v for k, v in state.items() if not k.endswith(".attn.bias")}  # the mask buffer
            for flash in (True, False):
                module = _module(self.model_args, flash)
                if "lm_head.weight" not in state:
                    state["lm_head.weight"] = state["transformer.wte.weight"]
                module.load_state_dict(state, strict=True)
                self._modules.append(module.float().eval())
        return self._modules

    def __call__(self, ids: np.ndarray) -> dict[str, np.ndarray]:
        import torch

        exact = np.vectorize(Fraction, otypes=[object])
        out = {}
        tokens = torch.as_tensor(np.asarray(ids, dtype=np.int64))
        for name, module in zip(KERNELS, self._load()):
            with torch.no_grad():
                hidden, logits = module(tokens)
            choice = self.choice
            if choice.hidden is not None:
                out[name] = exact(hidden[..., choice.hidden].double().numpy())
                continue
            value = exact(logits[..., choice.token].double().numpy())
            if choice.minus is not None:
                value = value - exact(logits[..., choice.minus].double().numpy())
            out[name] = value
        return out

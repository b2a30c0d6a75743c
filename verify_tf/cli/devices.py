"""The one check every command makes of ``--device``: ``cuda`` needs PyTorch, and a CUDA device that it can see."""

from __future__ import annotations

import importlib.util

NO_CUDA = "--device cuda: no CUDA device is available here (torch finds none)"
NO_CUDA_HINT = "use --device auto (the CPU when there is no GPU) or --device cpu"
NO_TORCH = "--device cuda needs PyTorch, which is not installed"
# PyPI's Linux wheel of torch is the CUDA build: for a GPU that is the one to install (not the CPU-only index)
NO_TORCH_HINT = (
    'install the torch extra: pip install -e ".[torch]" in a checkout, pip install "verify-tf[torch]" otherwise '
    "(PyPI's Linux torch wheel includes CUDA); or use --device auto or --device cpu"
)


def device_problem(device: str) -> tuple[str, str] | None:
    """None when ``device`` can be used; else the input error's (message, hint)."""
    if device != "cuda":
        return None
    if not _torch_installed():
        return NO_TORCH, NO_TORCH_HINT
    from ..batched import cuda_available  # (the batched evaluator's modules only when a GPU is asked for)

    return None if cuda_available() else (NO_CUDA, NO_CUDA_HINT)


def _torch_installed() -> bool:
    """Whether torch can be found, without importing it (a finder may also refuse it outright)."""
    try:
        return importlib.util.find_spec("torch") is not None
    except ImportError:
        return False

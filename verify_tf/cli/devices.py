"""The one check every command makes of ``--device``: ``cuda`` needs a CUDA device that torch can see."""

from __future__ import annotations

NO_CUDA = "--device cuda: no CUDA device is available here (torch finds none)"
NO_CUDA_HINT = "use --device auto (the CPU when there is no GPU) or --device cpu"


def device_problem(device: str) -> str | None:
    """None when ``device`` can be used; else the input error's message (the hint is ``NO_CUDA_HINT``)."""
    if device != "cuda":
        return None
    from ..batched import cuda_available  # (the batched evaluator's modules only when a GPU is asked for)

    return None if cuda_available() else NO_CUDA

"""Array back ends for the batched evaluator: numpy (CPU) and torch (CPU or CUDA), behind one small interface.

The kernels (``kernels.py``) use ordinary operators (``+ - * // >> ==``, indexing), which mean the same on
numpy int64 arrays and torch int64 tensors (``//`` is floor division in both, ``>>`` is an arithmetic shift),
and call the methods below for everything else.

``WideOps`` (``WIDE``) runs the same kernels on numpy object arrays of Python integers, for the steps whose
bounds exceed int64 (``kernels.py`` chooses per step and chunk).

Torch is imported only inside ``TorchOps`` so that ``verify-tf --help``, the interpreter and the SMT path
never pay for it. CUDA has no int64 matmul: there a product whose bound allows it runs as a float64 matmul
(exact: every partial sum is an integer below 2^53, proven in ``planner.py``), otherwise as an elementwise
product and sum.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..schema.errors import TORCH_INSTALL
from .plans import Unsupported

BACKENDS = ("auto", "numpy", "torch")
DEVICES = ("auto", "cpu", "cuda")


UNROLL = 8  # contractions up to this length skip the float64 round trip (integer matmul / unrolled sums)


class NumpyOps:
    name = "numpy"
    device = "cpu"

    def constant(self, array: np.ndarray) -> np.ndarray:
        return array

    def rows(self, rows: Any) -> np.ndarray:
        return np.asarray(rows, dtype=np.int64)

    def matmul(self, a: np.ndarray, b: np.ndarray, float_ok: bool) -> np.ndarray:
        floats = a.dtype.kind == "f" or b.dtype.kind == "f"  # integers held in float64 (the prefix tree's cache)
        if float_ok and (a.shape[-1] > UNROLL or floats):  # exact: every partial sum is an integer < 2^53
            integer = a.dtype if a.dtype.kind != "f" else (b.dtype if b.dtype.kind != "f" else np.dtype(np.int64))
            return (a.astype(np.float64, copy=False) @ b.astype(np.float64, copy=False)).astype(integer)
        assert not floats, "float64 operands are only exact where float_ok"
        if a.shape[-1] == 1:  # a broadcast product: numpy's batched integer matmul has a large per-matrix cost
            return a * b
        return a @ b  # numpy's integer matmul: fastest for short contractions

    def clamp_(self, x: np.ndarray, lo: int, hi: int) -> np.ndarray:
        return np.clip(x, lo, hi, out=x)

    def relu_(self, x: np.ndarray) -> np.ndarray:
        return np.maximum(x, 0, out=x)

    def swap_last(self, x: np.ndarray) -> np.ndarray:
        return np.swapaxes(x, -1, -2)

    def where(self, condition, a, b):
        return np.where(condition, a, b)

    def max_last(self, x: np.ndarray) -> np.ndarray:
        if x.shape[-1] > 16:
            return x.max(axis=-1, keepdims=True)
        top = x[..., :1].copy()  # short rows: elementwise maxima beat numpy's per-row reduction 4-7x
        for j in range(1, x.shape[-1]):
            np.maximum(top, x[..., j : j + 1], out=top)
        return top

    def min_last(self, x: np.ndarray) -> np.ndarray:
        if x.shape[-1] > 16:
            return x.min(axis=-1, keepdims=True)
        low = x[..., :1].copy()
        for j in range(1, x.shape[-1]):
            np.minimum(low, x[..., j : j + 1], out=low)
        return low

    def take(self, table: np.ndarray, index: np.ndarray) -> np.ndarray:
        return table[index]

    def stack(self, parts: list, axis: int) -> np.ndarray:
        return np.stack(parts, axis=axis)

    def any_rows(self, x: np.ndarray) -> np.ndarray:
        """(B, ...) bool -> (B,): some entry of the row is set."""
        flat = x.reshape(x.shape[0], -1)
        if flat.shape[1] > 16:
            return flat.any(axis=1)
        out = flat[:, 0].copy()  # short rows: elementwise beats numpy's per-row reduction
        for j in range(1, flat.shape[1]):
            out |= flat[:, j]
        return out

    def magnitudes(self, x: np.ndarray) -> list[int]:
        """max |x[..., c]| per last-axis coordinate c, as Python integers."""
        if x.size == 0:
            return [0] * x.shape[-1]
        flat = x.reshape(-1, x.shape[-1])
        if flat.shape[1] <= 16:  # a few columns: one reduction each beats numpy's strided axis-0 reduction
            return [max(int(flat[:, c].max()), -int(flat[:, c].min())) for c in range(flat.shape[1])]
        return [max(int(a), -int(b)) for a, b in zip(flat.max(axis=0), flat.min(axis=0))]

    def from_int64(self, x: np.ndarray) -> np.ndarray:
        return x

    def from_bool(self, x: np.ndarray) -> np.ndarray:
        return x

    def sum_last(self, x: np.ndarray) -> np.ndarray:
        return x @ np.ones((x.shape[-1], 1), dtype=x.dtype)  # keeps int32 (a reduction would widen it)

    def as_int(self, x: np.ndarray, like: np.ndarray) -> np.ndarray:
        return x.astype(like.dtype)

    def concat_last(self, parts: list) -> np.ndarray:
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=-1)

    def prepend_column(self, rows: np.ndarray, value: int) -> np.ndarray:
        return np.concatenate([np.full((rows.shape[0], 1), value, dtype=np.int64), rows], axis=1)

    def zeros(self, shape: tuple[int, ...]) -> np.ndarray:
        return np.zeros(shape, dtype=np.int64)

    def widen(self, x: np.ndarray) -> np.ndarray:
        return x.astype(np.int64, copy=False)

    def to_numpy(self, x: Any) -> np.ndarray:
        return np.asarray(x)

    def describe(self) -> str:
        return "numpy (CPU)"


class TorchOps:
    name = "torch"

    def __init__(self, device: str = "cpu"):
        try:
            import torch  # lazily: only the batched engines' torch back end needs it (an optional extra)
        except ModuleNotFoundError as exc:
            if exc.name != "torch":
                raise
            raise Unsupported(
                f"the torch back end needs PyTorch, which is not installed: {TORCH_INSTALL} (or use the numpy back end)"
            ) from None

        if device == "cuda" and not torch.cuda.is_available():
            raise Unsupported("device cuda requested but torch finds no CUDA device")
        self.torch = torch
        self.device = device
        self._device = torch.device(device)

    def constant(self, array: np.ndarray):
        return self.torch.from_numpy(np.ascontiguousarray(array)).to(self._device)

    def rows(self, rows: Any):
        if isinstance(rows, self.torch.Tensor):
            return rows.to(self._device, self.torch.int64)
        return self.torch.from_numpy(np.ascontiguousarray(rows, dtype=np.int64)).to(self._device)

    def matmul(self, a, b, float_ok: bool):
        torch = self.torch
        if self.device != "cuda":
            return torch.matmul(a, b)  # torch has integer matmul on the CPU
        inner = a.shape[-1]
        if inner == 0:  # an empty sum
            batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
            return torch.zeros((*batch, a.shape[-2], b.shape[-1]), dtype=a.dtype, device=a.device)
        if inner <= UNROLL:  # sum_c a[..., :, c] b[..., c, :] as broadcast products
            out = a[..., 0:1] * b[..., 0:1, :]
            for c in range(1, inner):
                out += a[..., c : c + 1] * b[..., c : c + 1, :]
            return out
        if float_ok:
            return torch.matmul(a.to(torch.float64), b.to(torch.float64)).to(a.dtype)
        return (a.unsqueeze(-1) * b.unsqueeze(-3)).sum(-2, dtype=a.dtype)  # torch would widen int32 sums

    def clamp_(self, x, lo: int, hi: int):
        return x.clamp_(lo, hi)

    def relu_(self, x):
        return x.clamp_min_(0)

    def swap_last(self, x):
        return x.transpose(-1, -2)

    def where(self, condition, a, b):
        return self.torch.where(condition, a, b)

    def max_last(self, x):
        return x.amax(dim=-1, keepdim=True)

    def min_last(self, x):
        return x.amin(dim=-1, keepdim=True)

    def take(self, table, index):
        return table[index]

    def stack(self, parts: list, axis: int):
        return self.torch.stack(parts, dim=axis)

    def any_rows(self, x):
        return x.reshape(x.shape[0], -1).any(dim=1)

    def magnitudes(self, x) -> list[int]:
        if x.numel() == 0:
            return [0] * x.shape[-1]
        flat = x.reshape(-1, x.shape[-1])
        return [max(int(a), -int(b)) for a, b in zip(flat.amax(dim=0).tolist(), flat.amin(dim=0).tolist())]

    def from_int64(self, x: np.ndarray):
        return self.torch.from_numpy(np.ascontiguousarray(x, dtype=np.int64)).to(self._device)

    def from_bool(self, x: np.ndarray):
        return self.torch.from_numpy(np.ascontiguousarray(x, dtype=bool)).to(self._device)

    def sum_last(self, x):
        return x.sum(dim=-1, keepdim=True, dtype=x.dtype)  # torch would widen int32 sums to int64

    def as_int(self, x, like):
        return x.to(like.dtype)

    def concat_last(self, parts: list):
        return parts[0] if len(parts) == 1 else self.torch.cat(parts, dim=-1)

    def prepend_column(self, rows, value: int):
        column = self.torch.full((rows.shape[0], 1), value, dtype=self.torch.int64, device=self._device)
        return self.torch.cat([column, rows], dim=1)

    def zeros(self, shape: tuple[int, ...]):
        return self.torch.zeros(shape, dtype=self.torch.int64, device=self._device)

    def widen(self, x):
        return x.to(self.torch.int64)

    def to_numpy(self, x: Any) -> np.ndarray:
        if isinstance(x, self.torch.Tensor):
            return x.cpu().numpy()
        return np.asarray(x)

    def describe(self) -> str:
        if self.device == "cuda":
            return f"torch {self.torch.__version__} on {self.torch.cuda.get_device_name(0)}"
        return f"torch {self.torch.__version__} (CPU, {self.torch.get_num_threads()} threads)"


class WideOps(NumpyOps):
    """numpy object arrays of Python integers: exact at any width, for the steps int64 cannot hold.

    The kernels run unchanged on it (Python's ``//``, ``>>``, ``%`` and comparisons are exact and floor like
    numpy's); only what differs is overridden: no float64 shortcut, integer indices for table lookups.
    """

    name = "python-int"

    def constant(self, array: np.ndarray) -> np.ndarray:
        if array.dtype == np.int64 or array.dtype == np.int32:
            return array.astype(np.int64).astype(object)
        return array

    def matmul(self, a: np.ndarray, b: np.ndarray, float_ok: bool) -> np.ndarray:
        if a.shape[-1] == 0:
            shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
            return np.zeros(shape, dtype=np.int64).astype(object)
        return np.matmul(a.astype(object), b.astype(object))

    def max_last(self, x: np.ndarray) -> np.ndarray:
        return x.max(axis=-1, keepdims=True)

    def min_last(self, x: np.ndarray) -> np.ndarray:
        return x.min(axis=-1, keepdims=True)

    def sum_last(self, x: np.ndarray) -> np.ndarray:
        return x.sum(axis=-1, keepdims=True)

    def take(self, table: np.ndarray, index: np.ndarray) -> np.ndarray:
        return table[np.asarray(index).astype(np.int64)]

    def as_int(self, x: np.ndarray, like: np.ndarray) -> np.ndarray:
        return np.asarray(x).astype(np.int64).astype(object)

    def zeros(self, shape: tuple[int, ...]) -> np.ndarray:
        return np.zeros(shape, dtype=np.int64).astype(object)

    def describe(self) -> str:
        return "numpy object arrays of Python integers"


WIDE = WideOps()


def cuda_available() -> bool:
    """True when torch is installed and sees a CUDA device (imports torch)."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _nvidia_driver_present() -> bool:
    """A cheap probe (no torch import): is an NVIDIA driver loaded on this machine?

    ``device: auto`` must not import torch (about a second) on machines without a GPU, such as CI.
    """
    import os

    return os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidiactl")


def make_ops(backend: str = "auto", device: str = "auto"):
    """The array back end for ``backend`` (auto | numpy | torch) and ``device`` (auto | cpu | cuda).

    ``auto`` picks torch on CUDA when a GPU is present, else numpy on the CPU (equal speed on small models,
    and no torch import). ``device: cuda`` without a GPU raises ``Unsupported`` with a clear message.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    if device == "cuda":
        if backend == "numpy":
            raise ValueError("the numpy back end runs on the CPU only; use backend torch for device cuda")
        return TorchOps("cuda")
    if device == "auto" and backend in ("auto", "torch") and _nvidia_driver_present() and cuda_available():
        return TorchOps("cuda")
    if backend == "torch":
        return TorchOps("cpu")
    return NumpyOps()

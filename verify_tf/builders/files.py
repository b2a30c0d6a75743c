"""Model files: save and load a Model exactly, as .safetensors, .npz or a torch state dict (.pt).

A verify-tf model file is self-describing: the architecture is JSON (safetensors metadata, or a string
entry ``__verify_tf__`` in .npz / .pt) whose numeric arrays are references ``"@name"`` to tensors. Tensors
are float64 when every entry is exactly a float64 (all dyadic weights are); otherwise the exact rational is
kept as two int64 tensors ``name::num`` / ``name::den``. Loading never executes code: no pickle
(``np.load(allow_pickle=False)``, ``torch.load(weights_only=True)``).

Model source ``file`` (``model: {file: model.safetensors}``): ``SOURCE`` at the end.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from ..ir import Model
from ..ir.plain import FORMAT, model_from_dict, model_to_dict
from ..schema.dsl import Context, Field, FilePath, join
from ..schema.errors import TORCH_INSTALL, MissingDependency
from ..schema.yamlnodes import Node
from ..userfiles import model_file_problem, weight_count_problem
from .sources import ModelSource

ARCH_KEY = "__verify_tf__"
NON_NUMERIC_KEYS = frozenset({"alphabet"})  # lists of symbols: kept in the JSON, never turned into tensors


class ModelFileError(ValueError):
    """The file is missing, truncated, or not a verify-tf model (message says which)."""


# ---------------------------------------------------------------- tensors


def _split_tensors(data: Any, prefix: str, tensors: dict[str, np.ndarray]) -> Any:
    """Replace numeric lists by '@name' references, collecting the arrays."""
    if isinstance(data, dict):
        return {
            k: v if k in NON_NUMERIC_KEYS else _split_tensors(v, f"{prefix}.{k}" if prefix else k, tensors)
            for k, v in data.items()
        }
    if isinstance(data, list) and data and _is_numeric(data):
        values = (
            [[Fraction(x) for x in row] for row in data] if isinstance(data[0], list) else [Fraction(x) for x in data]
        )
        flat = [x for row in values for x in row] if isinstance(values[0], list) else values
        shape = (len(values), len(values[0])) if isinstance(values[0], list) else (len(values),)
        as_float = np.array([float(x) for x in flat], dtype=np.float64)
        if all(Fraction(float(x)) == x for x in flat):
            tensors[prefix] = as_float.reshape(shape)
        else:
            tensors[prefix + "::num"] = np.array([x.numerator for x in flat], dtype=np.int64).reshape(shape)
            tensors[prefix + "::den"] = np.array([x.denominator for x in flat], dtype=np.int64).reshape(shape)
        return "@" + prefix
    if isinstance(data, list):
        return [_split_tensors(v, f"{prefix}.{i}", tensors) for i, v in enumerate(data)]
    return data


def _is_numeric(data: list) -> bool:
    first = data[0]
    return isinstance(first, str) or (isinstance(first, list) and first and isinstance(first[0], str))


def _join_tensors(data: Any, tensors: dict[str, np.ndarray]) -> Any:
    if isinstance(data, dict):
        return {k: _join_tensors(v, tensors) for k, v in data.items()}
    if isinstance(data, list):
        return [_join_tensors(v, tensors) for v in data]
    if isinstance(data, str) and data.startswith("@"):
        name = data[1:]
        if name in tensors:
            array = np.asarray(tensors[name])
            if not np.all(np.isfinite(array)):
                raise ModelFileError(f"tensor {name!r} holds non-finite values")
            return _nested(array, lambda x: str(Fraction(float(x))))
        if name + "::num" in tensors and name + "::den" in tensors:
            num, den = np.asarray(tensors[name + "::num"]), np.asarray(tensors[name + "::den"])
            if num.shape != den.shape or np.any(den == 0):
                raise ModelFileError(f"tensor {name!r}: bad numerator/denominator pair")
            return _nested_pair(num, den)
        raise ModelFileError(f"tensor {name!r} is missing from the file")
    return data


def _nested(array: np.ndarray, conv) -> list:
    if array.ndim == 1:
        return [conv(x) for x in array]
    return [_nested(row, conv) for row in array]


def _nested_pair(num: np.ndarray, den: np.ndarray) -> list:
    if num.ndim == 1:
        return [f"{int(a)}/{int(b)}" for a, b in zip(num, den)]
    return [_nested_pair(a, b) for a, b in zip(num, den)]


SAFE_ALTERNATIVES = (
    "save the tensors alone: torch.save(model.state_dict(), 'model.pt'), or as safetensors: "
    "safetensors.torch.save_file(model.state_dict(), 'model.safetensors')"
)


def pickle_refusal(name: str, exc: BaseException) -> str | None:
    """The message for a .pt file that ``torch.load(weights_only=True)`` refuses because it needs pickle, or None.

    torch's own message goes on to explain how to load the file with ``weights_only=False``, i.e. how to run
    the code it may hold; it is never shown (issue 26)."""
    text = str(exc)
    if type(exc).__name__ != "UnpicklingError" and "Weights only load failed" not in text:
        return None
    found = re.search(r"(?:Unsupported global: GLOBAL|global) ([\w.]+)", text)
    held = f" (it holds {found.group(1)})" if found else ""
    return (
        f"{name}: this file needs pickle to load{held}; verify-tf never unpickles, because unpickling can run "
        "code from the file"
    )


def _torch(path: Path):
    """torch, for .pt files only: an optional dependency (the ``torch`` extra); its absence is named."""
    try:
        import torch  # function-local on purpose: torch is optional and only .pt files need it
    except ModuleNotFoundError as exc:
        if exc.name != "torch":
            raise
        raise MissingDependency(
            f"{path.name}: .pt model files need PyTorch, which is not installed (.safetensors and .npz do not)",
            package="torch",
            install=TORCH_INSTALL,
        ) from None
    return torch


def save_model(model: Model, path: str | Path) -> None:
    path = Path(path)
    tensors: dict[str, np.ndarray] = {}
    arch = _split_tensors(model_to_dict(model), "", tensors)
    text = json.dumps(arch, sort_keys=True)
    suffix = path.suffix.lower()
    if suffix == ".safetensors":
        from safetensors.numpy import save_file

        save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, str(path), metadata={ARCH_KEY: text})
    elif suffix == ".npz":
        np.savez(path, **tensors, **{ARCH_KEY: np.array(text)})
    elif suffix in (".pt", ".pth"):
        torch = _torch(path)
        state: dict[str, Any] = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in tensors.items()}
        state[ARCH_KEY] = text
        torch.save(state, path)
    else:
        raise ModelFileError(f"unknown model file type {suffix!r} (use .safetensors, .npz or .pt)")


def load_model(path: str | Path) -> Model:
    path = Path(path)
    suffix = path.suffix.lower()
    problem = model_file_problem(path)
    if problem is not None:
        raise ModelFileError(f"{path.name}: {problem}")
    try:
        if suffix == ".safetensors":
            from safetensors import safe_open

            tensors = {}
            with safe_open(str(path), framework="numpy") as handle:
                text = (handle.metadata() or {}).get(ARCH_KEY)
                keys = list(handle.keys())
                too_many = weight_count_problem({key: tuple(handle.get_slice(key).get_shape()) for key in keys})
                if too_many is not None:
                    raise ModelFileError(f"{path.name}: {too_many}")
                for key in keys:
                    tensors[key] = handle.get_tensor(key)
        elif suffix == ".npz":
            try:
                with np.load(path, allow_pickle=False) as archive:
                    tensors = {k: archive[k] for k in archive.files}
            except ValueError as exc:
                if "allow_pickle" not in str(exc):
                    raise
                raise ModelFileError(
                    f"{path.name}: this file needs pickle to load (it holds Python objects); verify-tf never "
                    "unpickles, because unpickling can run code from the file; write arrays of numbers only"
                ) from None
            text = str(tensors.pop(ARCH_KEY)) if ARCH_KEY in tensors else None
        elif suffix in (".pt", ".pth"):
            torch = _torch(path)
            try:
                state = torch.load(path, map_location="cpu", weights_only=True)
            except Exception as exc:
                refusal = pickle_refusal(path.name, exc)
                if refusal is not None:
                    raise ModelFileError(f"{refusal}; {SAFE_ALTERNATIVES}") from None
                raise
            if not isinstance(state, dict):
                raise ModelFileError("the torch file does not hold a state dict")
            text = state.pop(ARCH_KEY, None)
            tensors = {k: v.numpy() for k, v in state.items() if hasattr(v, "numpy")}
        else:
            raise ModelFileError(f"{path.name}: unknown model file type {suffix!r} (use .safetensors, .npz or .pt)")
    except (ModelFileError, MissingDependency):
        raise
    except Exception as exc:  # any reader failure means a corrupt or foreign file; say so plainly
        raise ModelFileError(f"cannot read {path.name}: {type(exc).__name__}: {str(exc)[:200]}") from None
    if text is None:
        raise ModelFileError(f"{path.name} is not a verify-tf model file (no architecture metadata '{ARCH_KEY}')")
    try:
        arch = json.loads(text)
        if arch.get("format") != FORMAT:
            raise ModelFileError(f"{path.name}: unsupported model format {arch.get('format')!r}")
        return model_from_dict(_join_tensors(arch, tensors))
    except ModelFileError:
        raise
    except RecursionError:
        raise ModelFileError(f"{path.name}: malformed architecture (nested too deeply)") from None
    except (KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError) as exc:
        raise ModelFileError(f"{path.name}: malformed architecture ({type(exc).__name__}: {str(exc)[:200]})") from None


def _file_model(section: dict[str, Any], node: Node, ctx: Context, path: str) -> Model:
    """``model: {file: model.safetensors}``: a verify-tf model file."""
    try:
        return load_model(section["file"])
    except ModelFileError as exc:
        raise ctx.error(
            node,
            join(path, "file"),
            str(exc),
            "verify-tf model files are written by save_model / `verify-tf crasp compile`",
        ) from None


SOURCE = ModelSource(
    key="file",
    fields={"file": Field(FilePath("a verify-tf model file (.safetensors, .npz, .pt)"))},
    build=_file_model,
    label="a model file",
    usage="write model: {file: model.safetensors}",
    example="`file: model.safetensors`",
)

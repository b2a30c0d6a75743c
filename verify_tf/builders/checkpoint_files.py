"""Reading checkpoint files as data, never as code: JSON configs and safetensors weights (Hugging Face, nanoGPT).

* ``read_config``: a JSON object of at most ``MAX_CONFIG_BYTES``; duplicate keys, ``NaN`` and ``Infinity`` are
  refused (a config that means two things is an error, never the last value silently);
* ``read_header`` / ``read_tensors``: a ``.safetensors`` file read with its own format's rules (an 8-byte header
  length, a JSON header of dtype, shape and byte offsets, then raw little-endian data), checked before a byte of
  data is read: the header at most ``MAX_HEADER_BYTES``, every tensor's offsets inside the file, in order, without
  gaps or overlaps, its byte count = its shape's product × the dtype's size; dtypes F32, F16 and BF16 are read (the
  last two widened to float32 exactly, as ``torch_dtype=float32`` loads them), every other dtype is refused by name.

Errors are ``CheckpointError``: the file, the key (a config key or a tensor name) and what was expected.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..schema.errors import strip_terminal_codes
from ..userfiles import file_problem

MAX_CONFIG_BYTES = 1 << 20  # a config.json is a few KB
MAX_HEADER_BYTES = 1 << 24  # safetensors' own reader refuses headers above 100 MB; a small model's is a few KB
DTYPES: dict[str, tuple[np.dtype, int]] = {
    "F32": (np.dtype("<f4"), 4),
    "F16": (np.dtype("<f2"), 2),
    "BF16": (np.dtype("<u2"), 2),
}


class CheckpointError(ValueError):
    """A checkpoint that cannot be read as stated: ``file`` (its name), ``key`` (the config key or tensor, if any),
    ``hint`` (what to do)."""

    def __init__(self, message: str, *, file: str = "", key: str = "", hint: str | None = None) -> None:
        super().__init__(strip_terminal_codes(message))
        self.file, self.config_key, self.hint = file, key, hint

    def __str__(self) -> str:
        where = f"{self.file}: " if self.file else ""
        key = f"{self.config_key}: " if self.config_key else ""
        return f"{where}{key}{super().__str__()}"


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"duplicate key {key!r}")
        seen[key] = value
    return seen


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def parse_json(text: str, file: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_refuse_duplicates, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", file=file) from None
    except (ValueError, RecursionError) as exc:
        raise CheckpointError(f"not a usable JSON file: {exc}", file=file) from None


def read_config(path: Path, limit: int = MAX_CONFIG_BYTES) -> dict[str, Any]:
    """The JSON object in ``path`` (module docstring)."""
    problem = file_problem(path)
    if problem is not None:
        raise CheckpointError(problem, file=path.name)
    size = path.stat().st_size
    if size > limit:
        raise CheckpointError(f"{size} bytes: more than the {limit} a config may have", file=path.name)
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"not UTF-8 text (byte {exc.start})", file=path.name) from None
    data = parse_json(text, path.name)
    if not isinstance(data, dict):
        raise CheckpointError(f"expected a JSON object, got {type(data).__name__}", file=path.name)
    return data


@dataclass(frozen=True)
class TensorEntry:
    dtype: str
    shape: tuple[int, ...]
    start: int  # byte offsets into the data section
    end: int

    @property
    def count(self) -> int:
        return math.prod(self.shape)


def read_header(path: Path) -> tuple[dict[str, TensorEntry], dict[str, str], int]:
    """(tensors by name, the header's ``__metadata__``, the data section's offset in the file), checked (module
    docstring) before any tensor is read."""
    name = path.name
    problem = file_problem(path)
    if problem is not None:
        raise CheckpointError(problem, file=name)
    size = path.stat().st_size
    with open(path, "rb") as handle:
        first = handle.read(8)
        if len(first) < 8:
            raise CheckpointError(f"{size} bytes: too short for a safetensors file", file=name)
        (length,) = struct.unpack("<Q", first)
        if length > MAX_HEADER_BYTES or 8 + length > size:
            raise CheckpointError(
                f"header of {length} bytes in a file of {size} (at most {MAX_HEADER_BYTES}, inside the file)",
                file=name,
                hint="the file is truncated or not safetensors",
            )
        raw = handle.read(length)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CheckpointError("the safetensors header is not UTF-8 JSON", file=name) from None
    header = parse_json(text, name)
    if not isinstance(header, dict):
        raise CheckpointError("the safetensors header is not a JSON object", file=name)
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict):
        raise CheckpointError("__metadata__ is not a JSON object", file=name)
    data_size = size - 8 - length
    entries: dict[str, TensorEntry] = {}
    for key, value in header.items():
        entries[key] = _entry(key, value, name, data_size)
    position = 0
    for key, entry in sorted(entries.items(), key=lambda item: item[1].start):
        if entry.start != position:
            raise CheckpointError(
                f"data at byte {entry.start}, expected {position} (a gap or an overlap)", file=name, key=key
            )
        position = entry.end
    if position != data_size:
        raise CheckpointError(f"the tensors hold {position} bytes of the data section's {data_size}", file=name)
    return entries, {str(k): str(v) for k, v in metadata.items()}, 8 + length


def _entry(key: str, value: Any, file: str, data_size: int) -> TensorEntry:
    if not isinstance(value, dict) or set(value) != {"dtype", "shape", "data_offsets"}:
        raise CheckpointError("expected {dtype, shape, data_offsets}", file=file, key=key)
    dtype, shape, offsets = value["dtype"], value["shape"], value["data_offsets"]
    if dtype not in DTYPES:
        raise CheckpointError(
            f"dtype {dtype!r}: verify-tf reads F32, F16 and BF16 weights",
            file=file,
            key=key,
            hint="save the model in float32 (model.float().save_pretrained(...))",
        )
    if not (isinstance(shape, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
        raise CheckpointError(f"shape {shape!r} is not a list of sizes", file=file, key=key)
    if not (
        isinstance(offsets, list)
        and len(offsets) == 2
        and all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
        and 0 <= offsets[0] <= offsets[1] <= data_size
    ):
        raise CheckpointError(
            f"data_offsets {offsets!r} outside the data section of {data_size} bytes", file=file, key=key
        )
    entry = TensorEntry(dtype, tuple(shape), offsets[0], offsets[1])
    expected = entry.count * DTYPES[dtype][1]
    if entry.end - entry.start != expected:
        raise CheckpointError(
            f"{entry.end - entry.start} bytes for shape {list(shape)} of {dtype} ({expected} expected)",
            file=file,
            key=key,
        )
    return entry


def read_tensors(path: Path, entries: dict[str, TensorEntry], data_offset: int) -> dict[str, np.ndarray]:
    """The tensors as float32 arrays (F16 and BF16 widened exactly); a non-finite weight is refused, named."""
    out: dict[str, np.ndarray] = {}
    with open(path, "rb") as handle:
        for key, entry in entries.items():
            handle.seek(data_offset + entry.start)
            raw = handle.read(entry.end - entry.start)
            dtype: np.dtype = DTYPES[entry.dtype][0]
            values = np.frombuffer(raw, dtype=dtype)
            if entry.dtype == "BF16":  # bfloat16 is the top half of a float32
                array = (values.astype(np.uint32) << 16).view(np.float32)
            else:
                array = values.astype(np.float32)
            array = array.reshape(entry.shape)
            if not np.all(np.isfinite(array)):
                bad = np.argwhere(~np.isfinite(array))[0]
                raise CheckpointError(
                    f"entry {list(bad)} is {array[tuple(bad)]}: not a finite weight", file=path.name, key=key
                )
            out[key] = np.ascontiguousarray(array)
    return out

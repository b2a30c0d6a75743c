"""Content digests of what a verdict depends on, shared by the proof cache (its keys) and certificates (their
subject): a canonical JSON form of plain data, its SHA-256, and the tool's own fingerprint.

* ``canonical(value)``: exact numbers as ``p/q`` strings, files named in options by their content's SHA-256,
  dataclasses by their type name and fields, sets sorted: the same value gives the same text in every process;
* ``digest(value)``: the SHA-256 of that text;
* ``model_digest(model)``: the one digest of a model as loaded (``ir.plain.model_to_dict``): the task's
  fingerprint, the evaluators' caches, the proof cache's key and a certificate's subject all use it;
* ``tool_versions()``: ``verify_tf.__version__``, a fingerprint of the package's own source files (so a
  changed property, encoder or engine shows), and the installed solver and tensor library versions read from
  package metadata (z3, cvc5 and torch are never imported for this).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from fractions import Fraction
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from . import __version__
from .ir import Model
from .ir.plain import model_to_dict

# the distributions whose version can change a verdict or its evidence (solvers, SAT checker, arrays, torch import)
LIBRARIES = ("z3-solver", "cvc5", "bitwuzla", "python-sat", "numpy", "torch")


@cache
def source_fingerprint() -> str:
    """SHA-256 over the package's .py files (relative path and content), computed once per process."""
    package = Path(__file__).resolve().parent
    sha = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        sha.update(path.relative_to(package).as_posix().encode())
        sha.update(b"\0")
        sha.update(path.read_bytes())
        sha.update(b"\0")
    return sha.hexdigest()


@cache
def library_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for dist in LIBRARIES:
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    return versions


def tool_versions() -> dict[str, Any]:
    return {"verify-tf": __version__, "source": source_fingerprint(), **library_versions()}


def file_digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "unreadable"


def canonical(value: Any) -> Any:
    """Plain JSON data with a deterministic form: exact numbers as 'p/q', files by content hash."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, Fraction):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Path):
        return {"file-sha256": file_digest(value)} if value.is_file() else {"path": str(value)}
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in value.items() if k != "__node__"}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [canonical(v) for v in value]
        return sorted(items, key=json.dumps) if isinstance(value, (set, frozenset)) else items
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"__type__": type(value).__name__, **fields}
    return {"__repr__": repr(value)}


def canonical_text(value: Any) -> str:
    return json.dumps(canonical(value), sort_keys=True, separators=(",", ":"))


def digest(value: Any) -> str:
    """SHA-256 of ``value``'s canonical JSON text."""
    return hashlib.sha256(canonical_text(value).encode()).hexdigest()


def model_digest(model: Model) -> str:
    """SHA-256 of the model as loaded: ``model_to_dict`` (every weight an exact number, the tokens, the reading,
    the float source) in canonical JSON. Two models with the same digest compute the same function."""
    return digest(model_to_dict(model))

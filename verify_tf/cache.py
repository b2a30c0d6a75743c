"""The proof cache: definite verdicts (proved / refuted) keyed by a content hash of everything they depend on.

A key is the SHA-256 of a canonical JSON document (``key_material``) holding:

* the model in its canonical plain-data form (``builders.files.model_to_dict``: every weight as an exact
  ``p/q`` string, so a changed weight file, inline weight or torch state dict changes the key);
* the arithmetic, the domain, the property's registry name and its normalised options (files named in the
  options are hashed by content), the engine actually used, the seed and ``--minimize``;
* the tool: ``verify_tf.__version__`` plus a fingerprint of the package's own source files (so a changed
  property or engine never serves a verdict it did not compute), and the installed solver / tensor
  library versions read from package metadata (z3 and torch are never imported for this).

``unknown`` and ``error`` verdicts are never stored: they depend on time limits and on bugs, not only on the
inputs of the key. The timeout is therefore not part of the key. Writes are atomic (write, then rename), so
parallel processes can share one cache folder; an unreadable entry is a miss.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from fractions import Fraction
from functools import cache
from pathlib import Path
from typing import Any

from . import __version__
from .ir.plain import model_to_dict
from .verdict import PROVED, REFUTED, Verdict

DEFAULT_CACHE_DIR = Path(".verify-tf-cache")
KEY_FORMAT = "verify-tf-cache/1"
CACHEABLE = (PROVED, REFUTED)


@cache
def source_fingerprint() -> str:
    """SHA-256 over the package's .py files (relative path and content), computed once per process."""
    package = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


@cache
def library_versions() -> dict[str, str | None]:
    from importlib import metadata

    versions: dict[str, str | None] = {}
    for dist in ("z3-solver", "torch", "numpy"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    return versions


def tool_versions() -> dict[str, Any]:
    return {"verify-tf": __version__, "source": source_fingerprint(), **library_versions()}


def _file_digest(path: Path) -> str:
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
        return {"file-sha256": _file_digest(value)} if value.is_file() else {"path": str(value)}
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in value.items() if k != "__node__"}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [canonical(v) for v in value]
        return sorted(items, key=json.dumps) if isinstance(value, (set, frozenset)) else items
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"__type__": type(value).__name__, **fields}
    return {"__repr__": repr(value)}


def key_material(spec, prop, overrides, engine: str) -> dict[str, Any] | None:
    """Everything the verdict of ``prop`` depends on; None when the check must not be served from a cache.

    ``engine`` is the engine the user asked for (``auto`` stays ``auto``: the key never depends on a
    measurement). ``--smt2 DIR`` asks for the solver queries to be written, which a cache hit would skip:
    never cached.
    """
    if overrides.smt2_dir is not None or getattr(overrides, "certify_dir", None) is not None:
        return None  # --certify needs the engine's run itself (queries, digests): never served from the cache
    return {
        "format": KEY_FORMAT,
        "model": model_to_dict(spec.model),
        "arithmetic": canonical(spec.arithmetic),
        "domain": canonical(spec.domain),
        "property": prop.name,
        "options": canonical(prop.options),
        "engine": engine,
        "settings": {"solver": prop.solver, "rlimit": prop.rlimit, "samples": prop.samples},
        "seed": spec.seed,
        "minimize": bool(overrides.minimize),
        "versions": tool_versions(),
    }


def key_of(material: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(material, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class ProofCache:
    """A folder of ``<key[:2]>/<key>.json`` files, one per cached verdict."""

    def __init__(self, root: str | Path = DEFAULT_CACHE_DIR):
        self.root = Path(root)

    def _entry(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> Verdict | None:
        try:
            data = json.loads(self._entry(key).read_text())
            if data.get("key") != key:
                return None
            verdict = Verdict.from_json(data["verdict"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if verdict.status not in CACHEABLE:
            return None
        return verdict

    def put(self, key: str, verdict: Verdict) -> bool:
        """Store a definite verdict; False (storing nothing) for unknown / error or when the folder is unwritable."""
        if verdict.status not in CACHEABLE:
            return False
        stored = verdict.to_json()
        stored["cached"] = False
        text = json.dumps({"key": key, "versions": tool_versions(), "verdict": stored}, indent=1, default=str)
        entry = self._entry(key)
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            ignore = self.root / ".gitignore"
            if not ignore.exists():
                ignore.write_text("# written by verify-tf: the proof cache is local state, not source\n*\n")
            handle, temporary = tempfile.mkstemp(dir=entry.parent, prefix=".tmp-", suffix=".json")
        except OSError:  # a read-only or full disk: the check's result stands, it is just not remembered
            return False
        try:
            with os.fdopen(handle, "w") as out:
                out.write(text)
            os.replace(temporary, entry)
        except OSError:
            Path(temporary).unlink(missing_ok=True)
            return False
        return True


def served_from_cache(cached: Verdict, prop, spec_path: str, seconds: float) -> Verdict:
    """The stored verdict relabelled for the property that asked: its label, spec, index, and the lookup time."""
    statistics = dict(cached.statistics)
    statistics["cached_check_seconds"] = cached.seconds
    return dataclasses.replace(
        cached,
        property=prop.label,
        spec=spec_path,
        index=prop.index,
        seconds=seconds,
        statistics=statistics,
        cached=True,
    )

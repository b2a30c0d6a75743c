"""What a certificate is about (its *subject*), as digests, and the versions of the tools that made it.

The subject is computed when the certificate is written, from the spec and the task of the check, and again by
``verify-tf audit`` from the spec it re-loads; audit compares the two before it looks at any evidence, and
names every field that differs. Fields:

* ``spec``: the spec file's name and the SHA-256 of its bytes;
* ``property``: its index in the spec, its registry name, its label and the digest of its typed options
  (files the options name, such as a ``.cr`` program, are hashed by content: ``fingerprint.canonical``);
* ``model``: the digest of the model *as loaded* (``ir.plain.model_to_dict``: every weight as an exact
  ``p/q``, so a changed weight file shows even when the spec text is unchanged); ``arithmetic``, ``domain``;
* ``seed`` (it picks the certificate's interpreter sample) and ``engine`` (the engine whose proof it is).

``versions`` (verify-tf, a fingerprint of its source, z3, cvc5, python-sat, ...) are recorded beside the
subject, not in it: an auditor may run another version, and the re-derived queries show whether the encoder
still says the same thing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..engines.base import Task
from ..fingerprint import digest, file_digest, model_digest, tool_versions

# field: how a difference reads
FIELDS = {
    "spec": "the spec file",
    "property": "the property",
    "model_sha256": "the model (weights as loaded)",
    "arithmetic_sha256": "the arithmetic",
    "domain_sha256": "the domain",
    "seed": "the seed",
    "engine": "the engine",
}


def subject_of(spec_path: str | Path, index: int, name: str, label: str, task: Task, seed: int, engine: str) -> dict:
    path = Path(spec_path)
    return {
        "spec": {"file": path.name, "sha256": file_digest(path)},
        "property": {"index": index, "name": name, "label": label, "options_sha256": digest(task.options)},
        "model_sha256": model_digest(task.model),
        "arithmetic_sha256": digest(task.arithmetic),
        "domain_sha256": digest(task.domain),
        "seed": seed,
        "engine": engine,
    }


def differences(recorded: Any, derived: dict) -> list[str]:
    """What differs between a certificate's subject and the one re-derived from the spec, one line per field."""
    if not isinstance(recorded, dict):
        return ["the certificate records no subject (what it proves): it cannot be bound to this result"]
    out = []
    for key, what in FIELDS.items():
        mine, theirs = derived[key], recorded.get(key)
        if mine == theirs:
            continue
        if isinstance(mine, dict) and isinstance(theirs, dict):
            parts = [
                f"{k} {_short(theirs.get(k))} in the certificate, {_short(v)} here"
                for k, v in mine.items()
                if theirs.get(k) != v
            ]
            out.append(f"{what} differs: {'; '.join(parts)}")
        else:
            out.append(f"{what} differs: {_short(theirs)} in the certificate, {_short(mine)} here")
    return out


def _short(value: Any) -> str:
    text = str(value)
    return f"{text[:12]}…" if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else repr(value)


def version_notes(recorded: Any) -> list[str]:
    """Versions that differ between the certifying and the auditing tool (information, not a failure)."""
    if not isinstance(recorded, dict):
        return []
    now = tool_versions()
    return [
        f"certified with {name} {_short(recorded.get(name))}, audited with {_short(version)}"
        for name, version in now.items()
        if recorded.get(name) != version
    ]

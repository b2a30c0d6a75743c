"""The proof cache: definite verdicts (proved / refuted) keyed by a content hash of everything they depend on.

A key is the SHA-256 of a canonical JSON document (``key_material``) holding:

* the model in its canonical plain-data form (``builders.files.model_to_dict``: every weight as an exact
  ``p/q`` string, so a changed weight file, inline weight or torch state dict changes the key);
* the arithmetic, the domain, the property's registry name and its normalised options (files named in the
  options are hashed by content), the engine asked for, the seed and ``--minimize``;
* the tool: ``verify_tf.__version__`` plus a fingerprint of the package's own source files (so a changed
  property or engine never serves a verdict it did not compute), and the installed solver / tensor
  library versions read from package metadata (``verify_tf.fingerprint``).

``unknown`` and ``error`` verdicts are never stored: they depend on time limits and on bugs, not only on the
inputs of the key. The timeout is therefore not part of the key. Writes are atomic (write, then rename), so
parallel processes can share one cache folder; an unreadable entry is a miss.

What an entry must pass before it is served (docs/ci.md, "the cache's trust model"):

1. it stores its full key material, which must equal the material of the check asking (so it re-derives to
   the key it is filed under: an entry copied under another key is a miss);
2. it carries an HMAC-SHA256 over its key, material and verdict under a secret kept outside the cache folder
   (``VERIFY_TF_CACHE_SECRET``, else a random key created once in the user's config folder): an entry edited
   by anyone without the secret (``refuted`` turned into ``proved``) or written on another machine is a miss;
3. a refutation is replayed on the reference interpreter (``engines.replay``) before it is served; one whose
   witness cannot be replayed from the witness alone (a solver-chosen member of an architecture class) is
   re-checked instead, by design. A float reading's refutation is re-confirmed by its enclosure (the exact bounds
   that decide it) and verify-tf's float32 mirror; the library's own forward pass (tracr's JAX model,
   transformers, nanoGPT in torch), a second opinion the original check recorded, is not run again
   (``floats.second_opinion``).

A served ``proved`` is marked cached in every report; ``--certify`` and ``--smt2`` never read the cache.
``ProofCache.notes`` says in plain words what the cache did in a run (served, re-checked by design, not trusted).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import os
import secrets
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .engines.base import Task
from .fingerprint import canonical, model_digest, tool_versions
from .userfiles import UserFileError, read_user_text
from .verdict import PROVED, REFUTED, Verdict

DEFAULT_CACHE_DIR = Path(".verify-tf-cache")
KEY_FORMAT = "verify-tf-cache/2"
CACHEABLE = (PROVED, REFUTED)
SECRET_VARIABLE = "VERIFY_TF_CACHE_SECRET"
MAX_ENTRY_BYTES = 16 << 20  # an entry is a few kB (a verdict and its key material); a larger file is not one


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
        "model": model_digest(spec.model),
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
    return hashlib.sha256(_text(material).encode()).hexdigest()


def _text(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)


def secret_path() -> Path:
    """Where the cache's signing key lives when ``VERIFY_TF_CACHE_SECRET`` is not set: outside every cache folder."""
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "verify-tf" / "cache-secret"


def cache_secret(create: bool) -> bytes | None:
    """The HMAC key: ``VERIFY_TF_CACHE_SECRET``, else the key file (created with mode 0600 when ``create``)."""
    value = os.environ.get(SECRET_VARIABLE, "")
    if value:
        return value.encode()
    path = secret_path()
    try:
        return path.read_bytes().strip() or None
    except FileNotFoundError:
        if not create:
            return None
    except OSError:
        return None
    try:  # created once, atomically: parallel processes agree on the first key written
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(handle, "w") as out:
            out.write(secrets.token_hex(32) + "\n")
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass
        finally:
            os.unlink(temporary)
        return path.read_bytes().strip() or None
    except OSError:
        return None


def signature(secret: bytes, body: dict[str, Any]) -> str:
    return hmac.new(secret, _text(body).encode(), hashlib.sha256).hexdigest()


@dataclass
class ProofCache:
    """A folder of ``<key[:2]>/<key>.json`` files, one per cached verdict: ``{"body": {key, material, versions,
    verdict}, "hmac": ...}``. What a run's lookups came to: ``served``; ``missing`` (no entry); ``rechecked``, the
    entries never served by design (a solver-chosen member's refutation: the check re-derives it); ``rejected``,
    the entries found but not trusted, with the reason."""

    root: Path = DEFAULT_CACHE_DIR
    rejected: list[str] = field(default_factory=list)
    rechecked: list[str] = field(default_factory=list)
    served: int = 0
    missing: int = 0

    def __post_init__(self) -> None:
        self.root = Path(self.root)

    def _entry(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str, material: dict[str, Any], task: Task) -> Verdict | None:
        """The stored verdict when its entry passes the three checks of the module docstring; else None."""
        path = self._entry(key)
        if not os.path.lexists(path):
            self.missing += 1
            return None  # no entry: an ordinary miss
        try:  # a FIFO or a device planted in the folder would block or never end: regular files, bounded
            text = read_user_text(path, "the entry", MAX_ENTRY_BYTES)
        except UserFileError as exc:
            self.rejected.append(f"{path.name}: {exc}")
            return None
        why, verdict = self._verified(key, material, text)
        if verdict is not None and verdict.status == REFUTED:
            from .engines.replay import NOT_REPLAYABLE, replay_stored  # only to serve a refutation (start-up)
            from .floats import second_opinion

            with second_opinion.declined():  # the enclosure decides a float refutation (module docstring, 3.)
                replays, replayed = replay_stored(task, verdict.counterexample)
            if replayed == NOT_REPLAYABLE:
                self.rechecked.append(path.name)
                return None
            if not replays:
                why, verdict = f"its counterexample does not replay ({replayed})", None
        if verdict is None:
            self.rejected.append(f"{path.name}: {why}")
        else:
            self.served += 1
        return verdict

    def notes(self) -> list[str]:
        """What the cache did in this run, in plain words (``check`` prints them on stderr): nothing when it served
        nothing and refused nothing (a first run)."""
        if not (self.served or self.rechecked or self.rejected):
            return []
        said = [f"{self.served} verdict{'s' if self.served != 1 else ''} served"]
        if self.rechecked:
            said.append(
                f"{len(self.rechecked)} re-checked: refutations by a solver-chosen member of a class are never "
                "served (the check re-derives the member)"
            )
        if self.missing:
            said.append(f"{self.missing} not in the cache (new or changed, or neither proved nor refuted before)")
        notes = [f"proof cache {self.root}: " + "; ".join(said)]
        if self.rejected:
            count = len(self.rejected)
            notes.append(
                f"proof cache: {count} entr{'y' if count == 1 else 'ies'} not trusted, so checked again: "
                f"{self.rejected[0]}" + (f" (and {count - 1} more)" if count > 1 else "")
            )
        return notes

    def _verified(self, key: str, material: dict[str, Any], text: str) -> tuple[str, Verdict | None]:
        try:
            data = json.loads(text)
            body = data["body"]
            if body["key"] != key or _text(body["material"]) != _text(material) or key_of(body["material"]) != key:
                return "its key material is not this check's (an entry filed under another key)", None
            secret = cache_secret(create=False)
            if secret is None or not hmac.compare_digest(str(data.get("hmac", "")), signature(secret, body)):
                return "its signature does not verify (edited, or written with another VERIFY_TF_CACHE_SECRET)", None
            verdict = Verdict.from_json(body["verdict"])
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            return f"unreadable ({type(exc).__name__})", None
        if verdict.status not in CACHEABLE:
            return f"a {verdict.status} verdict is never cached", None
        return "", verdict

    def put(self, key: str, material: dict[str, Any], verdict: Verdict) -> bool:
        """Store a definite verdict; False (storing nothing) for unknown / error, or when the folder is unwritable
        or no signing key can be had."""
        if verdict.status not in CACHEABLE:
            return False
        secret = cache_secret(create=True)
        if secret is None:
            return False
        stored = verdict.to_json()
        stored["cached"] = False
        body = json.loads(_text({"key": key, "material": material, "versions": tool_versions(), "verdict": stored}))
        text = json.dumps({"body": body, "hmac": signature(secret, body)}, indent=1)
        entry = self._entry(key)
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            try:  # "x": never through a symbolic link planted in the folder (it would write where it points)
                with open(self.root / ".gitignore", "x") as ignore:
                    ignore.write("# written by verify-tf: the proof cache is local state, not source\n*\n")
            except FileExistsError:
                pass
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

"""The certificate of a proof by the ``enumerate`` engine: an exhaustive run's evidence (``engines.certificates``:
the space counted two ways, the chunk digests of its outputs, a seeded sample re-evaluated on the interpreter)."""

from __future__ import annotations

from ..certificates import EXHAUSTIVE_TRUSTED, READING_TRUSTED, evidence, recheck, rerun_differences

TRUSTED = {"exhaustive": EXHAUSTIVE_TRUSTED, "reading": READING_TRUSTED}
REDERIVE = "proof"  # the input space, then the engine proves the property again

__all__ = ["REDERIVE", "TRUSTED", "evidence", "recheck", "rerun_differences"]

"""Verdicts: the plain-data result of checking one property. Engines and properties return these; only the
CLI prints them. JSON-ready: exact numbers are written as strings ("3/4"), never as floats.

Under ``--certify`` a proof also carries its ``Evidence``: what the engine kept for the certificate
(``verify_tf.certify`` reads it). Evidence is the certificate's raw material, not a result: it is never written
to a report or the proof cache (the certificate's summary is, as ``statistics["certificate"]``).
"""

from __future__ import annotations

import builtins
import dataclasses
from dataclasses import asdict, dataclass, field
from typing import Any

PROVED, REFUTED, UNKNOWN, ERROR = "proved", "refuted", "unknown", "error"
# a property that could not run here because an optional package is missing (``runner.not_run``): not a verdict
# about the model at all; it fails the run only under ``--fail-on skipped`` (docs/cli.md, "Exit codes")
SKIPPED = "skipped"
STATUSES = (PROVED, REFUTED, UNKNOWN, ERROR, SKIPPED)

# CLI exit codes (documented in the README and docs/cli.md)
EXIT_PROVED, EXIT_REFUTED, EXIT_INPUT_ERROR, EXIT_UNKNOWN, EXIT_INTERNAL = 0, 1, 2, 3, 4
# an interrupt is none of the verdicts: the shell's codes for a run ended by SIGINT (130) or SIGTERM (143)
EXIT_INTERRUPTED = {2: 130, 15: 143}  # keyed by signal number (SIGINT = 2, SIGTERM = 15 on every POSIX system)
INTERRUPTED = "interrupted"  # the method of a verdict that an interrupt kept from finishing: "unknown (interrupted)"
# the method of an ``error`` verdict that is the user's mistake, met at check time (``Property.premise``: a RASP
# program undefined on an input of the domain): "error (input error)", exit 2 as a load error (docs/cli.md)
INPUT_ERROR = "input error"


# the kinds of certificate (``verify_tf.certify``): which evidence a proof keeps; an engine's card lists the kinds
# its proofs get (``CERTIFICATES``; audit refuses a certificate of another kind for that engine)
CERTIFICATE_KINDS = ("smt", "conclusion", "counting", "exhaustive", "split")


@dataclass
class Evidence:
    """What an engine keeps, under ``--certify``, for the certificate of a proof (its ``kind`` says which)."""

    kind: str  # CERTIFICATE_KINDS
    queries: list[dict[str, Any]] = field(default_factory=list)  # every solver query asked: {"name", "smt2", "answer"}
    chunks: list[tuple[int, int, str]] = field(default_factory=list)  # exhaustive: (start, stop, digest) per chunk
    outputs_sha256: str = ""  # exhaustive: the digest of every evaluated output, in input order (over ``chunks``)
    covered: dict[str, Any] | None = None  # counting: what the exploration covered (engines.counting.certificate)

    def __post_init__(self) -> None:
        if self.kind not in CERTIFICATE_KINDS:
            raise ValueError(f"unknown kind of evidence {self.kind!r}")


@dataclass
class Verdict:
    property: str  # the property's name as written in the spec
    status: str  # proved | refuted | unknown | error | skipped
    engine: str  # the engine that produced it (interpret, enumerate, smt, search, ...)
    method: str = ""  # how: "exhaustive", "smt", "sampled", "induction", ... shown as "proved (exhaustive)"
    detail: str = ""  # one line for the table
    seconds: float = 0.0
    counterexample: dict[str, Any] | None = None  # present when refuted: replayed on the interpreter
    statistics: dict[str, Any] = field(default_factory=dict)
    tried: list[str] = field(default_factory=list)  # for unknown: what was attempted
    spec: str = ""
    index: int = 0
    cached: bool = False
    kind: str = ""  # the property's registry name (e.g. "position-blind"), whatever the spec calls it
    auto: dict[str, Any] | None = None  # engine auto: what ran before the chosen engine, and why it was chosen
    traceback: str = ""  # an error's traceback (the worker's, for a work unit that failed)
    # which reading of the model the verdict is about (docs/semantics.md, "Readings"), and whether that is how
    # the model runs (True), or not (False: the label says so next to the status); None for a model the spec
    # builds itself (its own reading, nothing to say)
    reading: str = ""
    as_run: bool | None = None
    # an imported float model's weight rounding (``ir.Quantization.to_json``: format, exact largest error and where,
    # bits needed), for every verdict about such a model; None otherwise (and then absent from the JSON)
    quantization: dict[str, Any] | None = None
    evidence: Evidence | None = field(default=None, repr=False)  # --certify: for the certificate; never written

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown verdict status {self.status!r}")
        if self.status == REFUTED and not self.counterexample:
            raise ValueError("a refutation must carry its (replayed) counterexample")

    @builtins.property  # (the field ``property`` shadows the builtin in the class body)
    def label(self) -> str:
        """``proved (exhaustive)``; for a model with a reading of its own (a tracr or trained model), the reading
        beside it: ``proved (exhaustive; float32 as compiled)``, ``proved (exhaustive; hardmax, NOT the model
        as run)``."""
        said = [self.method] if self.method else []
        if self.stated_reading:
            said.append(self.stated_reading)
        return f"{self.status} ({'; '.join(said)})" if said else self.status

    @builtins.property
    def stated_reading(self) -> str:
        """The reading as every output states it next to the status (``fixed point 24.13 quantization of a float32
        torch model: ..., NOT the model as run``); empty for a model that is its own reading."""
        if not self.reading or self.as_run is None:
            return ""
        return self.reading if self.as_run else f"{self.reading}, NOT the model as run"

    def to_json(self) -> dict[str, Any]:
        data = asdict(dataclasses.replace(self, evidence=None))
        del data["evidence"]
        data["verdict"] = data.pop("status")
        if not data["reading"]:
            del data["reading"], data["as_run"]
        for optional in ("auto", "traceback", "quantization"):  # only where they say something
            if not data[optional]:
                del data[optional]
        return data

    @staticmethod
    def from_json(data: dict[str, Any]) -> Verdict:
        data = dict(data)
        data["status"] = data.pop("verdict")
        return Verdict(**data)


def exit_code(statuses: list[str]) -> int:
    """0 all proved, 1 something refuted, 3 nothing refuted but something unknown, 4 an error occurred; a skipped
    property alone is 0 (``reporting.report.combined_exit_code`` turns it into unknown under --fail-on skipped)."""
    present = set(statuses)
    if ERROR in present:
        return EXIT_INTERNAL
    if REFUTED in present:
        return EXIT_REFUTED
    if UNKNOWN in present:
        return EXIT_UNKNOWN
    return EXIT_PROVED

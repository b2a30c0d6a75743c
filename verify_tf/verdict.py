"""Verdicts: the plain-data result of checking one property. Engines and properties return these; only the
CLI prints them. JSON-ready: exact numbers are written as strings ("3/4"), never as floats.
"""

from __future__ import annotations

import builtins
from dataclasses import asdict, dataclass, field
from typing import Any

PROVED, REFUTED, UNKNOWN, ERROR = "proved", "refuted", "unknown", "error"
STATUSES = (PROVED, REFUTED, UNKNOWN, ERROR)

# CLI exit codes (documented in the README and docs/cli.md)
EXIT_PROVED, EXIT_REFUTED, EXIT_INPUT_ERROR, EXIT_UNKNOWN, EXIT_INTERNAL = 0, 1, 2, 3, 4


@dataclass
class Verdict:
    property: str  # the property's name as written in the spec
    status: str  # proved | refuted | unknown | error
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

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown verdict status {self.status!r}")
        if self.status == REFUTED and not self.counterexample:
            raise ValueError("a refutation must carry its (replayed) counterexample")

    @builtins.property  # (the field ``property`` shadows the builtin in the class body)
    def label(self) -> str:
        return f"{self.status} ({self.method})" if self.method else self.status

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["verdict"] = data.pop("status")
        for optional in ("auto", "traceback"):  # only where they say something
            if not data[optional]:
                del data[optional]
        return data

    @staticmethod
    def from_json(data: dict[str, Any]) -> Verdict:
        data = dict(data)
        data["status"] = data.pop("verdict")
        return Verdict(**data)


def exit_code(statuses: list[str]) -> int:
    """0 all proved, 1 something refuted, 3 nothing refuted but something unknown, 4 an error occurred."""
    present = set(statuses)
    if ERROR in present:
        return EXIT_INTERNAL
    if REFUTED in present:
        return EXIT_REFUTED
    if UNKNOWN in present:
        return EXIT_UNKNOWN
    return EXIT_PROVED

"""Located input errors: file, line, key path, what was expected, what was found, and a hint."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

from ..userfiles import abridge

# ANSI/VT100 escape sequences (CSI ... final byte, OSC ... BEL/ST, and two-byte ESC x): library messages
# (torch's, for one) carry bold/colour codes that would print as garbage in logs, JSON and CI annotations
_TERMINAL_CODES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")


def strip_terminal_codes(text: str) -> str:
    """``text`` without terminal escape sequences: error texts are plain."""
    return _TERMINAL_CODES.sub("", text)


class SpecError(Exception):
    """Bad user input. The CLI prints ``str(error)`` and exits with the input-error code (2)."""

    def __init__(
        self, message: str, *, file: str | None = None, line: int | None = None, path: str = "", hint: str | None = None
    ) -> None:
        message = abridge(strip_terminal_codes(message))
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.path = path
        self.hint = abridge(strip_terminal_codes(hint)) if hint is not None else None

    def __str__(self) -> str:
        where = self.file or "<spec>"
        if self.line is not None:
            where += f":{self.line}"
        text = f"{where}: {self.path + ': ' if self.path else ''}{self.message}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


class OptionError(ValueError):
    """A value that passed its field's own schema but does not fit the rest (the other options, the model or
    the domain). Raised by typed checks that never see a YAML node; the spec loader locates it at ``key`` (a
    key path relative to where the check applies, or "" for the whole section) and turns it into a
    ``SpecError``.
    """

    def __init__(self, key: str, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.key, self.message, self.hint = key, message, hint


def closest(word: str, choices: Iterable[str]) -> str | None:
    matches = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return matches[0] if matches else None


def describe_found(value: object) -> str:
    """How an offending value is shown in an error ('got ...')."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    text = str(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return repr(text)


# How to get torch, the one hint every message that needs it gives (a spec that imports a state dict, a .pt file,
# --device cuda, `experiment`): the extra in a checkout (the README's quickstart installs from a clone) and from
# PyPI, and PyTorch's CPU-only index (PyPI's default Linux wheel brings CUDA: several GB)
TORCH_INSTALL = (
    'install the torch extra: pip install -e ".[torch]" in a checkout, pip install "verify-tf[torch]" otherwise '
    "(a CPU-only torch first: pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu)"
)


class MissingDependency(SpecError):
    """A spec needs an optional package that is not installed (torch for a state dict, ...).

    Not a mistake in the spec: ``verify-tf check`` skips such a spec (its properties are ``skipped``, naming
    the package and ``install``) and checks the others. ``properties`` holds the spec's parsed properties
    (``spec.PropertySpec``s, not fitted to the model, which could not be built), set by the loader.
    """

    def __init__(
        self,
        message: str,
        *,
        package: str,
        install: str,
        file: str | None = None,
        line: int | None = None,
        path: str = "",
    ) -> None:
        super().__init__(message, file=file, line=line, path=path, hint=install)
        self.package, self.install = package, install
        self.properties: tuple = ()

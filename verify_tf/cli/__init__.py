"""The command line: the only package that prints, shows progress and chooses exit codes.

Exit codes: 0 all proved, 1 something refuted, 2 input error, 3 nothing refuted but something unknown,
4 internal error (a property's verdict is ``error``).

One module per purpose: ``app`` (the click group and the lazily imported command groups), ``output`` (the
consoles and the input-error exit), ``progress`` (progress display), ``check`` (the ``check`` command),
``reports`` (``audit``, ``explain``), ``spec_commands`` (``init``, ``schema``, ``properties``, ``run``),
``crasp`` and ``experiment`` (optional groups), ``devices`` (``--device`` checks).
"""

from __future__ import annotations

from .app import entry, main

__all__ = ["entry", "main"]

"""Where the command line prints: this invocation's stdout and stderr consoles, and the input-error exit.

``main`` calls :func:`reset_consoles` at every start, so the consoles read ``COLUMNS`` and the streams of that
invocation; the commands therefore use ``output.console`` and ``output.err_console`` at call time.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

from rich.console import Console

from ..verdict import EXIT_INPUT_ERROR

LOG_WIDTH = 160  # columns for tables when the output is not a terminal (CI logs, pipes) and COLUMNS is unset


def make_console(stderr: bool = False) -> Console:
    """A console for this invocation; reads COLUMNS now, so tables in logs do not wrap at 80 columns."""
    made = Console(stderr=stderr)
    if not made.is_terminal and "COLUMNS" not in os.environ:
        made = Console(stderr=stderr, width=LOG_WIDTH)
    return made


console = make_console()
err_console = make_console(stderr=True)


def reset_consoles() -> None:
    """Make this invocation's consoles (``main`` calls it first)."""
    global console, err_console
    console, err_console = make_console(), make_console(stderr=True)


def print_input_error(message: str, hint: str | None = None) -> None:
    """Report a user's mistake on stderr (with a hint): ``error: file:line: key: message``."""
    from rich.markup import escape

    err_console.print(
        f"[bold red]error:[/] {escape(message)}" + (f"\n  hint: {escape(hint)}" if hint else ""),
        highlight=False,
        markup=True,
        soft_wrap=True,
    )


def fail_input(message: str, hint: str | None = None) -> NoReturn:
    """Report a user's mistake on stderr (with a hint) and exit 2."""
    print_input_error(message, hint)
    sys.exit(EXIT_INPUT_ERROR)

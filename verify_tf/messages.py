"""Messages quote the input, never dump it: ``abridge`` keeps what is around the fault and says what it left out.

Every input error (``SpecError``, ``CraspError``) passes its message and hint through ``abridge``: a run of more than
``QUOTE`` characters without a space (a 1,500-digit weight, a 2 MB regex) is shown by its two ends and its length,
and a message longer than ``MAX_MESSAGE`` characters (200,000 symbols listed) by its beginning and what is left out.
A file path is kept whole (it is the location). docs/cli.md, "Input limits".
"""

from __future__ import annotations

import re

__all__ = ["MAX_MESSAGE", "QUOTE", "abridge", "around"]

QUOTE = 120  # the longest run of non-space characters quoted whole
MAX_MESSAGE = 1000  # the longest message shown whole
_HEAD, _TAIL = 72, 24  # of an abridged run (with the ellipsis and the count, about QUOTE characters)
_PATH_MAX = 4096

_RUN = re.compile(rf"\S{{{QUOTE + 1},}}")


def _short(match: re.Match[str]) -> str:
    run = match.group(0)
    if "/" in run and len(run) <= _PATH_MAX and "//" not in run:  # a path: the location, kept whole
        return run
    return f"{run[:_HEAD]}…{run[-_TAIL:]} ({len(run):,} characters)"


def abridge(text: str) -> str:
    """``text`` with its long runs and its length bounded (module docstring)."""
    if len(text) <= QUOTE:
        return text
    text = _RUN.sub(_short, text)
    if len(text) > MAX_MESSAGE:
        text = f"{text[:MAX_MESSAGE]}… ({len(text) - MAX_MESSAGE:,} more characters not shown)"
    return text


def around(text: str, index: int, width: int = 80) -> str:
    """``repr`` of ``text``, or of the ``width`` characters around ``text[index]`` (the fault) with what is left out
    on each side counted: ``…(1,999,940 characters) 'aaaa('``."""
    if len(text) <= width:
        return repr(text)
    start = max(0, min(index - width // 2, len(text) - width))
    end = start + width
    before = f"({start:,} characters)…" if start else ""
    after = f"…({len(text) - end:,} characters)" if end < len(text) else ""
    return f"{before}{text[start:end]!r}{after}"

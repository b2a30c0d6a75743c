"""Files a user names (specs, model files, C-RASP programs, tracr exports): regular files only, never executed;
and how what a user wrote is quoted back in a message (``abridge``, ``around``).

Every loader asks ``file_problem`` before it opens a path, so a FIFO, a device or a directory named as a weight
file is refused with a message saying so ("not a regular file") instead of blocking on a read or reporting
"file not found"; ``read_user_text`` also bounds what it reads (docs/cli.md, "Input limits").
"""

from __future__ import annotations

import math
import os
import re
import stat
from pathlib import Path

MAX_TEXT_BYTES = 64 << 20  # a spec, a .cr program or a tracr export: real ones are under 1 MiB
MAX_SPEC_BYTES = 1 << 20  # a YAML spec: its reader takes ~3 s per MiB on a loaded machine (a 60 MB scalar: 46 s)
MAX_MODEL_BYTES = 64 << 20  # a model file read exactly (file, torch): every weight becomes an exact rational
MAX_MODEL_WEIGHTS = 1 << 22  # weights in such a file (4,194,304), counted from the shapes before any is converted

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class UserFileError(ValueError):
    """A named file that cannot be read as one (the message says why; callers add the location)."""


def file_problem(path: Path) -> str | None:
    """Why ``path`` cannot be read as a regular file (symbolic links followed), or None."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "file not found"
    except (OSError, RuntimeError, ValueError) as exc:  # permission, a symbolic link loop, a NUL in the name
        return f"cannot read it: {getattr(exc, 'strerror', None) or exc}"
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in _KINDS if test(mode)), "not a file")
    return f"not a regular file: it is {kind}"


def read_user_text(path: Path, what: str = "the file", limit: int = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of a regular file of at most ``limit`` bytes, else ``UserFileError``."""
    problem = file_problem(path)
    if problem is not None:
        raise UserFileError(problem)
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise UserFileError(f"cannot read {what}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise UserFileError(f"{what} is larger than {limit >> 20} MiB (the limit for text inputs)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = data[exc.start : exc.start + 1]
        raise UserFileError(f"{what} is not UTF-8 text (byte {exc.start} is {bad!r})") from None


def model_file_problem(path: Path) -> str | None:
    """Why ``path`` cannot be read as a model file (not a regular file, or larger than ``MAX_MODEL_BYTES``), or None:
    asked before a byte is read (a 400 MB .safetensors was converted weight by weight for more than 90 s)."""
    problem = file_problem(path)
    if problem is not None:
        return problem
    size = os.stat(path).st_size
    if size > MAX_MODEL_BYTES:
        return (
            f"the model file is {size / 2**20:,.0f} MiB; at most {MAX_MODEL_BYTES >> 20} MiB are read (every weight "
            "becomes an exact rational: a model this size cannot be verified weight by weight)"
        )
    return None


def weight_count_problem(shapes: dict[str, tuple[int, ...]]) -> str | None:
    """Why tensors of these shapes are too many weights to convert (``MAX_MODEL_WEIGHTS``), or None."""
    total = 0
    for shape in shapes.values():
        count = 1
        for n in shape:
            count *= int(n)
        total += count
    if total > MAX_MODEL_WEIGHTS:
        largest = max(shapes, key=lambda k: math.prod(shapes[k]))
        return (
            f"{total:,} weights in {len(shapes)} tensors (the largest {largest[:60]!r}, shape "
            f"{list(shapes[largest])}); at most {MAX_MODEL_WEIGHTS:,} are converted to exact rationals"
        )
    return None


# ---------------------------------------------------------------- quoting the input back
#
# Messages quote the input, never dump it: every input error (``SpecError``, ``CraspError``) passes its message and
# hint through ``abridge``: a run of more than ``QUOTE`` characters without a space (a 1,500-digit weight, a 2 MB
# regex) is shown by its two ends and its length, and a message longer than ``MAX_MESSAGE`` characters by its
# beginning and what is left out. A file path is kept whole (it is the location). docs/cli.md, "Input limits".

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
    """``text`` with its long runs and its length bounded (the comment above)."""
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

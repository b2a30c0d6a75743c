"""The verdict table of ``verify-tf check``, designed for an 80-column terminal (docs/cli.md, "The verdict table").

One block per spec: the spec's path on a line of its own, then one row per property and, under each row, its
reading and its detail on lines of their own::

    specs/crasp-L1.yaml
     ✓ crasp-equivalence                        proved   counting        0.34 s
         32766 strings of length 1..14 agree with L1.cr at the last position (42
         states of lengths 0..14 explored by counting)

A row is the expectation's mark (✓ the verdict counts as expected, ✗ it does not, – skipped), the property,
one verdict word, its method and the time (``cached`` for a verdict served from the proof cache). Columns keep
their width for the whole table; text wraps at spaces only (a word, e.g. a file name, is broken only when it is
longer than the whole line). ``verbose`` adds the engine, auto's choice and what an unknown verdict tried.
The JSON report keeps every word complete: ``Verdict.label`` and ``detail`` there are never shortened.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from ..verdict import ERROR, PROVED, REFUTED, SKIPPED, UNKNOWN, Verdict
from .report import describe_minimization, outcome

STYLE = {PROVED: "green", REFUTED: "red", UNKNOWN: "yellow", ERROR: "bold magenta", SKIPPED: "dim"}
MARKS = {"as expected": "✓", "unexpected": "✗", SKIPPED: "–"}
ASCII_MARKS = {"as expected": "+", "unexpected": "x", SKIPPED: "-"}  # a console that cannot print ✓ (not UTF-8)
DETAIL_INDENT = 5  # under the property's name, two columns in
VERDICT_WIDTH = max(len(status) for status in STYLE)  # "refuted", "unknown", "skipped"
METHOD_WIDTH = 22  # longer methods ("induction + solver-chosen member") wrap in their column
TIME_WIDTH = 8  # "0.34 s", "1234 s", "cached"
MIN_PROPERTY_WIDTH = 16


def column_lines(text: str, width: int) -> list[str]:
    """``text`` wrapped at spaces into a column ``width`` wide; only a word longer than the column is folded. An
    empty text is one empty line (a column of only empty methods is 0 wide: an unknown verdict often has none)."""
    if not text.strip():
        return [""]
    return textwrap.wrap(text, width=max(1, width), break_on_hyphens=False) or [""]


def indented(text: Text, width: int, indent: int = DETAIL_INDENT) -> Iterator[Text]:
    """``text`` wrapped at spaces into lines of ``width`` columns, each indented by ``indent``: a word longer than
    a line (a long file name) stays whole on a line of its own. No padding is added after the last word."""
    wrapped = textwrap.wrap(text.plain, width=max(20, width - indent), break_long_words=False, break_on_hyphens=False)
    for line in wrapped or [""]:
        yield Text(" " * indent + line, style=text.style)


def phrase_lines(text: str, width: int, indent: int = 2) -> list[str]:
    """``text`` in lines of at most ``width`` columns, broken only after a comma or a semicolon (a summary's
    ``0 error`` stays together), later lines indented by ``indent``; a phrase longer than a line stands alone."""
    phrases = re.findall(r"[^,;]+[,;]?\s*", text) or [text]
    lines, line = [], ""
    for phrase in phrases:
        if line and len(line) + len(phrase.rstrip()) > width:
            lines.append(line.rstrip())
            line = " " * indent + phrase.lstrip()
        else:
            line += phrase
    return [*lines, line.rstrip()]


def seconds_text(seconds: float) -> str:
    """``0.34 s``, ``12.3 s``, ``412 s``: three significant figures at most, never wider than TIME_WIDTH."""
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 100:
        return f"{seconds:.1f} s"
    return f"{seconds:.0f} s"


def method_text(verdict: Verdict) -> str:
    """The method beside the verdict word: how it was decided; for a skipped property, what it needs."""
    if verdict.status == SKIPPED:
        package = (verdict.statistics.get("missing") or {}).get("package")
        return f"needs {package}" if package else verdict.method
    return verdict.method


@dataclass
class VerdictTable:
    """The table as a rich renderable: it lays itself out for the console's width when printed."""

    verdicts: Sequence[Verdict]
    expectations: Sequence[str | None]
    verbose: bool = False

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        marks = ASCII_MARKS if options.ascii_only else MARKS
        longest_method = max((len(method_text(v)) for v in self.verdicts), default=0)
        longest = max((len(v.property) for v in self.verdicts), default=0)
        fixed = 2 + VERDICT_WIDTH + TIME_WIDTH + 4  # the mark, the verdict and the time, four gaps
        # the method gets what it needs where the line has room for it and the longest property, else METHOD_WIDTH
        method_width = min(longest_method, max(METHOD_WIDTH, width - fixed - longest))
        property_width = max(MIN_PROPERTY_WIDTH, min(longest, width - fixed - method_width))
        spec, reading = None, None
        for verdict, expect in zip(self.verdicts, self.expectations):
            if verdict.spec != spec:
                spec, reading = verdict.spec, None
                if spec:
                    yield Text(spec, style="bold", no_wrap=True, overflow="ignore")  # whole, for copy and paste
            yield from self._row(verdict, expect, marks, property_width, method_width)
            said = (verdict.stated_reading, repr(verdict.quantization)) if verdict.stated_reading else None
            for line in self._lines(verdict, expect, same_reading=said is not None and said == reading):
                yield from indented(line, width)
            reading = said

    def _row(
        self, verdict: Verdict, expect: str | None, marks: dict[str, str], property_width: int, method_width: int
    ) -> Iterator[Text]:
        """The row's lines: the property and the method wrap in their columns, the rest is on the first line."""
        counted = outcome(verdict, expect)
        kind = SKIPPED if counted == SKIPPED else "as expected" if counted == PROVED else "unexpected"
        mark_style = {"as expected": "green", SKIPPED: "dim"}.get(kind, STYLE[counted])
        names = column_lines(verdict.property, property_width)
        methods = column_lines(method_text(verdict), method_width)
        time = (
            Text("cached", style="dim")
            if verdict.cached
            else Text("")
            if verdict.status == SKIPPED  # nothing ran
            else Text(seconds_text(verdict.seconds))
        )
        for k in range(max(len(names), len(methods))):
            first = k == 0
            # every text from the spec or an engine is plain text, never markup: a label `outside [t_l, t_r]`
            # or a hint `pip install 'verify-tf[certify]'` prints as written
            line = Text.assemble(
                (f"{marks[kind]:>2} " if first else "   ", mark_style),
                (names[k] if k < len(names) else "").ljust(property_width) + " ",
                ((verdict.status if first else "").ljust(VERDICT_WIDTH) + " ", STYLE[verdict.status]),
                (methods[k] if k < len(methods) else "").ljust(method_width) + " ",
            )
            if first:
                line.append(time.plain.rjust(TIME_WIDTH), style=time.style)
            line.rstrip()
            yield line

    def _lines(self, verdict: Verdict, expect: str | None, same_reading: bool = False) -> Iterator[Text]:
        """The lines under a row: an unmet expectation, the reading (next to the verdict: docs/semantics.md,
        "Readings"; ``same_reading``: the row above states the same one), the detail; with ``verbose`` the engine
        and what was tried."""
        if verdict.status == SKIPPED:  # the missing package and how to install it: once, after the table
            return
        if expect is not None and verdict.status != expect:
            yield Text(f"expected {expect}", style="bold red")
        if same_reading:
            said = "reading: as above" + ("" if verdict.as_run else ", NOT the model as run")
            yield Text(said, style="yellow" if verdict.as_run is False else "cyan")
        elif verdict.stated_reading:
            rounded = verdict.quantization or {}
            weights = (
                f"; weights rounded by at most {rounded['largest_error_float']:.3g} (at {rounded['largest_error_at']})"
                if "largest_error_float" in rounded
                else ""
            )
            yield Text(
                f"reading: {verdict.stated_reading}{weights}", style="yellow" if verdict.as_run is False else "cyan"
            )
        if verdict.detail:
            yield Text(verdict.detail)
        minimal = describe_minimization(verdict.counterexample or {}, verdict.statistics)
        if minimal:
            yield Text(f"--minimize: {minimal}", style="cyan")
        if self.verbose:
            yield from self._verbose_lines(verdict)

    @staticmethod
    def _verbose_lines(verdict: Verdict) -> Iterator[Text]:
        engine = f"engine: {verdict.engine}"
        if verdict.cached and "cached_check_seconds" in verdict.statistics:
            engine += f" (served from the proof cache; the check took {verdict.statistics['cached_check_seconds']} s)"
        yield Text(engine, style="dim")
        if verdict.auto:  # engine auto: what ran first, and why this engine was chosen
            said = [f"falsification by {verdict.auto['falsification']}"] if verdict.auto.get("falsification") else []
            if verdict.auto.get("chosen"):
                why = verdict.auto.get("why")
                said.append(f"chose {verdict.auto['chosen']}" + (f" ({why})" if why else ""))
            if said:
                yield Text(f"auto: {'; '.join(said)}", style="dim")
        for tried in verdict.tried:
            if tried != verdict.detail:
                yield Text(f"tried: {tried}", style="dim")

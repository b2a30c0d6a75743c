"""The explorer in the terminal. It opens with the answer (``replay.answer``: the inputs by the summary's names,
the colliding or failing values, where the inputs first differ), then for several inputs a side-by-side table per
stage with the values that differ marked, then each input's layer-by-layer trace (``trace_view.print_trace``).
Table titles are lines of their own (a title never wraps to a narrow table's width)."""

from __future__ import annotations

import json

from rich.console import Console
from rich.markup import escape
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from ..numbers import fmt, fmt_vector
from ..reporting.trace_view import print_trace
from .replay import (
    Explained,
    RoleTrace,
    answer,
    differing_cells,
    focus_collision,
    focus_rows,
    stages,
    trace_alignment,
    witness_table,
)


def _token_text(token) -> str:
    return token if isinstance(token, str) else fmt_vector(token)


DIFFERS = "*"  # marks a differing value where there is no colour (piped output, NO_COLOR)


def _cell(vector, position: int, marked: set[tuple[int, int]], coloured: bool) -> str:
    parts = []
    for c, value in enumerate(vector):
        text = fmt(value)
        if (position, c) in marked:
            text = f"[bold red]{text}[/]" if coloured else f"{text}{DIFFERS}"
        parts.append(text)
    return "[" + ", ".join(parts) + "]"


def verdict_heading(item: Explained) -> str:
    """``spec: property — refuted (unexpected)`` or ``(as expected)``: the two kinds never look alike."""
    return f"{item.spec_path}: {item.property} — refuted ({'unexpected' if item.unexpected else 'as expected'})"


def _aligned_rows(
    first_length: int, roles: list[RoleTrace], mappings: list[dict[int, int]], lengths: list[int]
) -> list[list[int | None]]:
    """Rows of positions, one column per role: row k holds first-role position k and, for every other role,
    the position aligned with it; positions aligned with nothing get rows of their own at the end."""
    inverse = [{target: own for own, target in mapping.items()} for mapping in mappings]
    rows = [[k if r == 0 else inverse[r].get(k) for r in range(len(roles))] for k in range(first_length)]
    for r in range(1, len(roles)):
        placed = set(inverse[r].values())
        rows += [[None] * r + [i] + [None] * (len(roles) - r - 1) for i in range(lengths[r]) if i not in placed]
    return rows


def _comparison_tables(console: Console, item: Explained, roles: list[RoleTrace]) -> None:
    first = roles[0]
    mappings = [trace_alignment(r, first) for r in roles]
    per_role = [stages(r.trace) for r in roles]
    collision = focus_collision(roles)
    coloured = console.color_system is not None
    marking = "in red" if coloured else f"marked {DIFFERS}"  # (no colour: piped output, NO_COLOR)
    names = " and ".join(item.name(r) for r in roles)
    console.print(
        Text(
            f"{names} side by side, stage by stage: a value that differs from {item.name(first)}'s aligned value is "
            f"{marking}; ◀ marks the positions of interest"
        ),
        highlight=False,
    )
    for s, (title, first_vectors) in enumerate(per_role[0]):
        last = s == len(per_role[0]) - 1
        console.print(Text(title, style="bold"), highlight=False)
        table = Table(header_style="bold")
        for r in roles:
            table.add_column(escape(f"{item.name(r)} pos"), justify="right")
            table.add_column(escape(item.name(r)))
        vectors = [stage[s][1] for stage in per_role]
        marks = [differing_cells(first_vectors, v, mapping) for v, mapping in zip(vectors, mappings)]
        for row in _aligned_rows(len(first_vectors), roles, mappings, [len(v) for v in vectors]):
            cells = []
            for r, position in enumerate(row):
                if position is None or position >= len(vectors[r]):
                    cells += ["", ""]
                    continue
                text = _cell(vectors[r][position], position, marks[r], coloured)
                if position in focus_rows(roles[r]):
                    text += " [bold magenta]◀ collision[/]" if collision and last else " ◀"
                cells += [str(position), text]
            table.add_row(*cells)
        console.print(table)


def print_explained(console: Console, item: Explained) -> None:
    """One refuted property, the answer first: every text from the spec, the model or the witness is escaped
    (never markup)."""
    style = "bold red" if item.unexpected else "dim"
    heading = Text(verdict_heading(item), style=style)
    if len(heading) + 4 <= console.width:
        console.print(Rule(heading))
    else:  # a rule would cut a long heading with "…": the heading on lines of its own, the rule under it
        console.print(heading)
        console.print(Rule(style=style))
    console.print(Text.assemble(("witness: ", "bold"), item.summary), highlight=False)
    facts = answer(item)
    width = max((len(what) for what, _ in facts), default=0)
    for what, text in facts:
        console.print(Text.assemble("  ", (f"{what}:".ljust(width + 2), "bold"), text), highlight=False)
    for note in item.notes:
        console.print(Text.assemble(("note: ", "yellow"), note), highlight=False)
    table = witness_table(item.counterexample)
    if table is not None:
        columns, rows = table
        console.print(Text("the property's trace (from the witness)", style="bold"))
        shown = Table(header_style="bold")
        for column in columns:
            shown.add_column(escape(column))
        for row in rows:
            shown.add_row(*[escape(cell) for cell in row])
        console.print(shown)
    if item.model is None or not item.roles:
        console.print(json.dumps(item.counterexample, indent=2, default=str), highlight=False, markup=False)
        return
    for role in item.roles:
        if role.problem is not None:
            console.print(f"[yellow]{escape(role.problem)}[/]", highlight=False)
    replayed = [r for r in item.roles if r.trace is not None]
    if len(replayed) >= 2:
        console.print()
        _comparison_tables(console, item, replayed)
    for role in replayed:
        written = " ".join(_token_text(t) for t in role.tokens or ())
        console.print(Text.assemble("\n", (f"the trace of {item.name(role)}", "bold"), f": {written}"), highlight=False)
        print_trace(console, item.model, item.arithmetic, role.trace)

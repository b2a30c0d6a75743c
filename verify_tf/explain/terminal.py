"""The explorer in the terminal: the witness, each input's layer-by-layer trace (``trace_view.print_trace``),
and for several inputs a side-by-side table per stage with the values that differ marked."""

from __future__ import annotations

import json

from rich.console import Console
from rich.rule import Rule
from rich.table import Table

from ..numbers import fmt, fmt_vector
from ..reporting.trace_view import print_trace
from .replay import (
    Explained,
    RoleTrace,
    differing_cells,
    focus_collision,
    focus_rows,
    stages,
    trace_alignment,
    witness_table,
)


def _token_text(token) -> str:
    return token if isinstance(token, str) else fmt_vector(token)


def _cell(vector, position: int, marked: set[tuple[int, int]]) -> str:
    parts = []
    for c, value in enumerate(vector):
        text = fmt(value)
        parts.append(f"[bold red]{text}[/]" if (position, c) in marked else text)
    return "[" + ", ".join(parts) + "]"


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


def _comparison_tables(console: Console, roles: list[RoleTrace]) -> None:
    first = roles[0]
    mappings = [trace_alignment(r, first) for r in roles]
    per_role = [stages(r.trace) for r in roles]
    collision = focus_collision(roles)
    for s, (title, first_vectors) in enumerate(per_role[0]):
        last = s == len(per_role[0]) - 1
        table = Table(
            title=f"{title}: aligned side by side (values that differ from {first.role} in red)",
            title_justify="left",
            header_style="bold",
        )
        for r in roles:
            table.add_column(f"{r.role} pos", justify="right")
            table.add_column(r.role)
        vectors = [stage[s][1] for stage in per_role]
        marks = [differing_cells(first_vectors, v, mapping) for v, mapping in zip(vectors, mappings)]
        for row in _aligned_rows(len(first_vectors), roles, mappings, [len(v) for v in vectors]):
            cells = []
            for r, position in enumerate(row):
                if position is None or position >= len(vectors[r]):
                    cells += ["", ""]
                    continue
                text = _cell(vectors[r][position], position, marks[r])
                if position in focus_rows(roles[r]):
                    text += " [bold magenta]◀ collision[/]" if collision and last else " ◀"
                cells += [str(position), text]
            table.add_row(*cells)
        console.print(table)


def print_explained(console: Console, item: Explained) -> None:
    console.print(Rule(f"{item.spec_path}: {item.property} — refuted"))
    console.print(f"[bold]witness:[/] {item.summary}", highlight=False)
    for note in item.notes:
        console.print(f"[yellow]note:[/] {note}", highlight=False)
    table = witness_table(item.counterexample)
    if table is not None:
        columns, rows = table
        shown = Table(title="the property's trace (from the witness)", title_justify="left", header_style="bold")
        for column in columns:
            shown.add_column(column)
        for row in rows:
            shown.add_row(*row)
        console.print(shown)
    if item.model is None or not item.roles:
        console.print(json.dumps(item.counterexample, indent=2, default=str), highlight=False)
        return
    for role in item.roles:
        if role.problem is not None:
            console.print(f"[yellow]{role.problem}[/]", highlight=False)
            continue
        written = " ".join(_token_text(t) for t in role.tokens)
        console.print(f"\n[bold]{role.role}[/]: {written}", highlight=False)
        print_trace(console, item.model, item.arithmetic, role.trace)
    replayed = [r for r in item.roles if r.trace is not None]
    if len(replayed) >= 2:
        console.print()
        _comparison_tables(console, replayed)

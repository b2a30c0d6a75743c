"""The explorer as one self-contained HTML page: no external assets, no JavaScript.

Per refuted property: the witness summary, the answer (``replay.answer``: the inputs by the summary's names, the
colliding or failing values, where the inputs first differ, linked to that stage), a navigation bar with one link
per layer and one to the collision (it stays at the top of the window while its section scrolls), then layer by
layer one card per stage (embedding, each head's attention heatmaps as inline SVG, the attention and
feed-forward outputs, the readout), the witness inputs side by side in each card, the cards wrapping to fill the
page's width. Values that differ from the first input's aligned value are highlighted; exact values are in each
heatmap cell's tooltip (shading is only for the eye) and printed in the cell when it is large enough.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

from .. import __version__
from ..numbers import fmt, fmt_vector
from .replay import (
    Explained,
    RoleTrace,
    answer,
    differing_cells,
    differing_weights,
    focus_collision,
    focus_rows,
    stages,
    trace_alignment,
    unexpected_first,
    witness_table,
)

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5rem; color: #1d1d1f; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; border-bottom: 2px solid #c0392b; padding-bottom: .2rem; }
h3 { font-size: 1rem; margin: 1rem 0 .3rem; } h4 { font-size: .9rem; margin: .4rem 0; color: #444; }
.summary { background: #fdf0ef; border-left: 4px solid #c0392b; padding: .5rem .8rem; font-family: monospace; }
.badge { font-size: .8rem; padding: .05rem .4rem; border-radius: .3rem; margin-left: .4rem; }
.badge.unexpected { background: #c0392b; color: white; } .badge.expected { background: #e0e0e0; color: #333; }
section.expected h2 { border-bottom-color: #999; }
section.expected .summary { background: #f4f4f4; border-color: #999; }
.note { background: #fff8e1; border-left: 4px solid #f0ad4e; padding: .3rem .8rem; }
.answer { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; margin: .6rem 0; }
.answer dt { font-weight: bold; } .answer dd { margin: 0; font-family: monospace; }
nav.layers { position: sticky; top: 0; background: #fff; padding: .35rem 0; border-bottom: 1px solid #ddd;
  z-index: 1; font-size: .9rem; }
nav.layers a { margin-right: .8rem; white-space: nowrap; } nav.layers a.collision { color: #c0392b; font-weight: bold; }
.layer { border-top: 1px solid #eee; padding-top: .3rem; scroll-margin-top: 2.5rem; }
.cards { display: flex; flex-wrap: wrap; gap: .8rem 1.5rem; align-items: flex-start; }
.card { scroll-margin-top: 2.5rem; } .card.collision h4 { color: #c0392b; }
.roles { display: flex; gap: .8rem; align-items: flex-start; }
.role { min-width: 0; overflow-x: auto; } .role h5 { margin: .1rem 0; font-size: .85rem; color: #555; }
table { border-collapse: collapse; font-family: monospace; font-size: .85rem; }
td, th { border: 1px solid #ddd; padding: .15rem .45rem; text-align: right; }
th { background: #f4f4f4; }
td.token { text-align: left; color: #555; }
span.differs { background: #ffd54f; font-weight: bold; }
tr.focus td { outline: 2px solid #8e44ad; }
span.collision { background: #e74c3c; color: white; font-weight: bold; padding: 0 .2rem; }
.legend span { margin-right: 1rem; }
pre { background: #f7f7f7; padding: .5rem; overflow-x: auto; font-size: .8rem; }
svg text { font-family: monospace; }
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _token_text(token) -> str:
    return token if isinstance(token, str) else fmt_vector(token)


def _short(value: Fraction) -> str:
    text = fmt(value)
    return text if len(text) <= 5 else f"{float(value):.2f}"  # display only; the tooltip has the exact value


def _colour(value: Fraction, scale: Fraction) -> str:
    """White to blue for positive weights, white to red for negative ones (URPE's C may be negative)."""
    t = float(min(abs(value) / scale, 1)) if scale else 0.0
    if value >= 0:
        r, g, b = 255 - int(t * 224), 255 - int(t * 160), 255 - int(t * 64)
    else:
        r, g, b = 255 - int(t * 64), 255 - int(t * 200), 255 - int(t * 200)
    return f"rgb({r},{g},{b})"


def heatmap_svg(
    scores: Sequence[Sequence[Fraction | None]],
    weights: Sequence[Sequence[Fraction]],
    labels: Sequence[str],
    differs: set[tuple[int, int]],
    title: str,
) -> str:
    n = len(weights)
    cell = 34 if n <= 8 else max(14, 272 // n)  # numbers in the cells down to 26 px (about 10 positions)
    margin = 30
    width = height = margin + n * cell + 2
    scale = max((abs(w) for row in weights for w in row), default=Fraction(0))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{_e(title)}">',
        f"<title>{_e(title)}</title>",
    ]
    for k, label in enumerate(labels[:n]):
        short = _e(label)
        center = margin + k * cell + cell / 2
        parts.append(f'<text x="{center}" y="{margin - 8}" font-size="12" text-anchor="middle">{short}</text>')
        parts.append(f'<text x="{margin - 4}" y="{center + 4}" font-size="12" text-anchor="end">{short}</text>')
    for i in range(n):
        for j in range(n):
            x, y = margin + j * cell, margin + i * cell
            masked = scores[i][j] is None
            weight = weights[i][j]
            fill = "#e0e0e0" if masked else _colour(weight, scale)
            stroke = ' stroke="#e67e22" stroke-width="3"' if (i, j) in differs else ' stroke="#fff" stroke-width="1"'
            tip = (
                f"query {labels[i]}, key {labels[j]}: masked"
                if masked
                else f"query {labels[i]}, key {labels[j]}: weight {fmt(weight)}, score {fmt(scores[i][j])}"
            )
            parts.append(
                f'<rect x="{x}" y="{y}" width="{cell}" height="{cell}" fill="{fill}"{stroke}>'
                f"<title>{_e(tip)}</title></rect>"
            )
            if cell >= 26:
                text = "·" if masked else _short(weight)
                colour = "#fff" if not masked and scale and abs(weight) / scale > Fraction(3, 5) else "#222"
                parts.append(
                    f'<text x="{x + cell / 2}" y="{y + cell / 2 + 4}" font-size="{12 if cell >= 32 else 10}" '
                    f'text-anchor="middle" fill="{colour}">{_e(text)}</text>'
                )
    parts.append("</svg>")
    return "".join(parts)


def _vector_html(vector, position: int, marked: set[tuple[int, int]]) -> str:
    cells = []
    for c, value in enumerate(vector):
        text = _e(fmt(value))
        cells.append(f'<span class="differs">{text}</span>' if (position, c) in marked else text)
    return "[" + ", ".join(cells) + "]"


def _stage_table(role: RoleTrace, vectors, marked: set[tuple[int, int]], collision_row: int | None) -> str:
    focus = focus_rows(role)
    rows = ["<table><tr><th>pos</th><th>token</th><th>value</th></tr>"]
    for i, vector in enumerate(vectors):
        token = role.trace.tokens[i] if i < len(role.trace.tokens) else ""
        if collision_row == i:
            value = f'<span class="collision">{_e(fmt_vector(vector))}</span>'
        else:
            value = _vector_html(vector, i, marked)
        css = ' class="focus"' if i in focus else ""
        label = role.labels[i] if i < len(role.labels) else str(i)
        rows.append(f'<tr{css}><td>{label}</td><td class="token">{_e(_token_text(token))}</td><td>{value}</td></tr>')
    rows.append("</table>")
    return "".join(rows)


def _badge(item: Explained) -> str:
    if item.unexpected:
        return '<span class="badge unexpected">unexpected</span>'
    return '<span class="badge expected">as expected</span>'


def _section(item: Explained, number: int) -> str:
    kind = "unexpected" if item.unexpected else "expected"
    replayed = [r for r in item.roles if r.trace is not None]
    anchors = _anchors(number, replayed)
    out = [
        f'<section class="counterexample {kind}" id="cx-{number}">',
        f"<h2>{_e(item.spec_path)}: {_e(item.property)} — refuted {_badge(item)}</h2>",
        f'<p class="summary">{_e(item.summary)}</p>',
        _answer_html(item, anchors),
    ]
    if replayed:
        out.append(_nav_html(anchors))
    out += [f'<p class="note">{_e(note)}</p>' for note in item.notes]
    table = witness_table(item.counterexample)
    if table is not None:
        columns, rows = table
        out.append(
            "<h3>the property's trace (from the witness)</h3><table><tr>"
            + "".join(f"<th>{_e(c)}</th>" for c in columns)
            + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{_e(x)}</td>" for x in row) + "</tr>" for row in rows)
            + "</table>"
        )
    out += [f'<p class="note">{_e(r.problem)}</p>' for r in item.roles if r.problem is not None]
    if replayed:
        out.append(
            "<h3>inputs (replayed on the reference interpreter"
            f"{', ' + _e(item.arithmetic.describe()) if item.arithmetic is not None else ''})</h3><ul>"
        )
        for r in replayed:
            out.append(
                f"<li><b>{_e(item.name(r))}</b> ({_e(r.role)}): {_e(' '.join(_token_text(t) for t in r.tokens))}"
                + (f" — position of interest {r.focus}" if r.focus is not None else "")
                + "</li>"
            )
        out.append("</ul>")
        if len(replayed) > 1:
            out.append(
                '<p class="legend"><span><span class="differs">value</span> differs from the first input\'s '
                "aligned value</span><span>outlined row: position of interest</span>"
                '<span><span class="collision">value</span> colliding values</span>'
                "<span>orange outline in a heatmap: a different attention weight</span></p>"
            )
        out.append(_stages_html(item, replayed, anchors))
    out.append(
        "<details><summary>witness JSON</summary><pre>"
        f"{_e(json.dumps(item.counterexample, indent=2, default=str))}</pre></details>"
    )
    out.append("</section>")
    return "".join(out)


def _layer_of(title: str) -> int | None:
    if title.startswith("layer "):
        return int(title.split(":")[0].split()[1])
    return None


def _group_of(title: str) -> str:
    """The navigation group of a stage: ``input`` (the embedding), ``layer k``, or ``output``."""
    layer = _layer_of(title)
    return "input" if title == "embedding" else f"layer {layer}" if layer is not None else "output"


def _anchors(number: int, roles: list[RoleTrace]) -> dict[str, str]:
    """The ids of a section's groups (``input``, ``layer k``, ``output``) and of ``collision``: the stage from
    which the colliding values are equal, else the stage where the positions of interest first differ, else
    the readout."""
    if not roles or roles[0].trace is None:
        return {}
    titles = [title for title, _ in stages(roles[0].trace)]
    ids = {group: f"cx-{number}-{group.replace(' ', '-')}" for group in dict.fromkeys(map(_group_of, titles))}
    ids["collision"] = f"cx-{number}-collision"
    return ids


def _collision_stage(item: Explained, roles: list[RoleTrace]) -> str:
    """The stage the collision link points at (``_anchors``)."""
    facts = dict(answer(item))
    for key in ("equal from", "they differ from"):
        if key in facts:
            return facts[key].removesuffix(" on")
    return stages(roles[0].trace)[-1][0] if roles and roles[0].trace is not None else ""


def _answer_html(item: Explained, anchors: dict[str, str]) -> str:
    rows = []
    for what, text in answer(item):
        link = (
            f' <a href="#{anchors["collision"]}">(jump to it)</a>'
            if "collision" in anchors and what in ("collision", "at the positions", "at the position")
            else ""
        )
        rows.append(f"<dt>{_e(what)}</dt><dd>{_e(text)}{link}</dd>")
    return f'<dl class="answer">{"".join(rows)}</dl>' if rows else ""


def _nav_html(anchors: dict[str, str]) -> str:
    links = [
        f'<a class="collision" href="#{anchors["collision"]}">collision ▸</a>' if "collision" in anchors else "",
        *(f'<a href="#{ident}">{_e(group)}</a>' for group, ident in anchors.items() if group != "collision"),
    ]
    return f'<nav class="layers">jump to: {"".join(links)}</nav>'


def _stages_html(item: Explained, roles: list[RoleTrace], anchors: dict[str, str]) -> str:
    """Layer by layer, one card per stage (the heads' heatmaps before a layer's attention output), each card the
    inputs side by side; the cards of a layer wrap to fill the page's width."""
    first = roles[0]
    mappings = [trace_alignment(r, first) for r in roles]
    per_role = [stages(r.trace) for r in roles]
    collision = focus_collision(roles)
    target = _collision_stage(item, roles)
    groups: dict[str, list[str]] = {}
    first_stages = per_role[0]
    for s, (title, first_vectors) in enumerate(first_stages):
        cards = groups.setdefault(_group_of(title), [])
        layer = _layer_of(title)
        if layer is not None and title.endswith("attention output"):
            cards += _heatmaps_html(item, roles, mappings, layer)
        last = s == len(first_stages) - 1
        tables = []
        for role, stage, mapping in zip(roles, per_role, mappings):
            marked = differing_cells(first_vectors, stage[s][1], mapping) if role is not first else set()
            rows = focus_rows(role)
            collision_row = next(iter(rows)) if collision and last and rows else None
            tables.append(
                f'<div class="role"><h5>{_e(item.name(role))}</h5>'
                f"{_stage_table(role, stage[s][1], marked, collision_row)}</div>"
            )
        here = title == target
        ident = f' id="{anchors["collision"]}"' if here and "collision" in anchors else ""
        css = "card collision" if here else "card"
        shown = title.split(": ", 1)[1] if layer is not None else title  # the layer is the group's heading
        cards.append(f'<div class="{css}"{ident}><h4>{_e(shown)}</h4><div class="roles">{"".join(tables)}</div></div>')
    return "".join(
        f'<div class="layer" id="{anchors.get(group, "")}"><h3>{_e(group)}</h3><div class="cards">{"".join(cards)}'
        "</div></div>"
        for group, cards in groups.items()
    )


def _heatmaps_html(item: Explained, roles: list[RoleTrace], mappings: list[dict[int, int]], layer: int) -> list[str]:
    first = roles[0]
    heads = len(first.trace.blocks[layer].heads)
    cards = []
    for h in range(heads):
        first_weights = first.trace.blocks[layer].heads[h].weights
        maps = []
        for role, mapping in zip(roles, mappings):
            head = role.trace.blocks[layer].heads[h]
            differs = differing_weights(first_weights, head.weights, mapping) if role is not first else set()
            svg = heatmap_svg(
                head.scores,
                head.weights,
                role.labels,
                differs,
                f"{item.name(role)}: layer {layer} head {h} attention weights",
            )
            maps.append(f'<div class="role"><h5>{_e(item.name(role))}</h5>{svg}</div>')
        cards.append(
            f'<div class="card"><h4>head {h} attention weights (query i × key j)</h4>'
            f'<div class="roles">{"".join(maps)}</div></div>'
        )
    return cards


def render_html(explained: Sequence[Explained], source: str = "") -> str:
    """The page: unexpected refutations (those that fail the run) first, each group listed, then every section."""
    explained = unexpected_first(explained)
    count = len(explained)
    unexpected = sum(item.unexpected for item in explained)
    body = [
        f"<h1>verify-tf counterexamples</h1><p>{count} refuted propert{'y' if count == 1 else 'ies'}"
        + (f": {unexpected} unexpected, {count - unexpected} as expected" if count else "")
        + (f" from <code>{_e(source)}</code>" if source else "")
        + f" — verify-tf {__version__}</p>"
    ]
    if not explained:
        body.append("<p>No refuted property: nothing to explain.</p>")
    numbered = list(enumerate(explained))
    for title, group in (
        ("Unexpected (the spec did not expect these: they fail the run)", [n for n in numbered if n[1].unexpected]),
        ("As expected (<code>expect: refuted</code>)", [n for n in numbered if not n[1].unexpected]),
    ):
        if group:
            body.append(
                f"<h3>{title}: {len(group)}</h3><ul>"
                + "".join(
                    f'<li><a href="#cx-{k}">{_e(item.spec_path)}: {_e(item.property)}</a></li>' for k, item in group
                )
                + "</ul>"
            )
    body += [_section(item, k) for k, item in enumerate(explained)]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>verify-tf counterexamples</title>"
        f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>\n"
    )


def write_html(path: str | Path, explained: Sequence[Explained], source: str = "") -> None:
    Path(path).write_text(render_html(explained, source), encoding="utf-8")

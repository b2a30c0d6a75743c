"""Replay refuted verdicts: re-load the spec, re-evaluate every witness input on the reference interpreter.

Nothing here trusts the report's numbers: traces come from ``semantics.evaluate`` on the spec as it is now.
Problems (a spec that moved or no longer loads, an input the model cannot read) become notes on the
result instead of aborting the whole explanation.
"""

from __future__ import annotations

import builtins
import dataclasses
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..ir import AlphabetTokens, Model, Token
from ..reporting.report import describe_minimization
from ..semantics import Arithmetic, UnsupportedInMode, evaluate
from ..semantics.interpreter import Trace
from ..verdict import REFUTED, Verdict
from .witness_roles import WitnessRoles, role_name, roles_of


class ExplainError(Exception):
    """The report itself cannot be used (missing, not JSON, not a verify-tf report)."""


@dataclass
class RoleTrace:
    role: str
    written: Any  # the input as the witness wrote it
    tokens: tuple[Token, ...] | None = None  # parsed user tokens (BOS not included)
    trace: Trace | None = None
    problem: str | None = None
    focus: int | None = None  # user position of interest
    alignment: list[int] | None = None  # own user position -> first role's user position

    @property
    def offset(self) -> int:
        """Trace positions before the first user token (1 with a BOS token)."""
        return len(self.trace.tokens) - len(self.tokens) if self.trace is not None and self.tokens is not None else 0

    @property
    def labels(self) -> list[str]:
        """Each trace position's name in the one numbering (docs/semantics.md): "BOS", then 0, 1, ..."""
        total = len(self.trace.tokens) if self.trace is not None else 0
        return ["BOS"] * self.offset + [str(i) for i in range(total - self.offset)]


@dataclass
class Explained:
    spec_path: str
    property: str
    index: int
    summary: str
    counterexample: dict[str, Any]
    model: Model | None = None
    arithmetic: Arithmetic | None = None
    roles: list[RoleTrace] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    expect: str | None = None  # the property's `expect:` (a refutation is expected only with `expect: refuted`)
    kind: str = ""  # the property's registry name: how its witness names its inputs (``witness_roles.role_name``)
    statistics: dict[str, Any] = field(default_factory=dict)  # the verdict's (how a --minimize witness was found)

    def name(self, role: RoleTrace) -> str:
        """A role as the witness summary names it (``L′``, ``τX``), else its key in words (``other input``)."""
        return role_name(self.kind, role.role)

    @builtins.property  # the field `property` shadows the builtin inside this class body
    def unexpected(self) -> bool:
        """A refutation the spec did not ask for: it fails the run, and both renderers show it first."""
        return self.expect != REFUTED


def unexpected_first(items: Iterable[Explained]) -> list[Explained]:
    """Unexpected refutations first, then the expected ones, each group in its original order."""
    return sorted(items, key=lambda item: not item.unexpected)


def parse_tokens(model: Model, written: Any) -> tuple[Token, ...]:
    """A witness input as model tokens; raises ValueError with a readable reason."""
    if isinstance(model.tokens, AlphabetTokens):
        symbols = [s for s in model.tokens.symbols if s != model.tokens.bos]
        if isinstance(written, str):
            parts = written.split() if " " in written.strip() else list(written.strip())
        elif isinstance(written, list) and all(isinstance(t, str) for t in written):
            parts = list(written)
        else:
            raise ValueError("expected a string or a list of symbols for an alphabet model")
        unknown = [p for p in parts if p not in symbols]
        if unknown:
            raise ValueError(f"symbol {unknown[0]!r} is not in the alphabet {symbols}")
        return tuple(parts)
    if not isinstance(written, list):
        raise ValueError("expected a list of tokens for a grid model")
    tokens = []
    for token in written:
        coords = token if isinstance(token, list) else [token]
        if len(coords) != model.tokens.dim:
            raise ValueError(f"expected tokens of dimension {model.tokens.dim}, got {token!r}")
        try:
            tokens.append(tuple(Fraction(str(c)) for c in coords))
        except (ValueError, ZeroDivisionError):
            raise ValueError(f"token {token!r} is not a list of exact numbers") from None
    return tuple(tokens)


def _replay_roles(model: Model, arithmetic: Arithmetic, roles: WitnessRoles) -> list[RoleTrace]:
    out = []
    for name, written in zip(roles.names, roles.inputs):
        role = RoleTrace(name, written, focus=roles.focus.get(name), alignment=roles.alignment.get(name))
        try:
            role.tokens = parse_tokens(model, written)
            role.trace = evaluate(model, arithmetic, role.tokens)
        except (UnsupportedInMode, ValueError) as exc:
            role.problem = f"cannot replay {name}: {exc}"
        out.append(role)
    return out


def explain_verdict(spec, verdict: Verdict, expect: str | None = None) -> Explained:
    """Replay one refuted verdict of ``spec`` (a loaded ``Spec``); ``expect``: its property's ``expect:``."""
    counterexample = verdict.counterexample or {}
    item = Explained(
        spec_path=verdict.spec or str(spec.path),
        property=verdict.property,
        index=verdict.index,
        summary=str(counterexample.get("summary") or verdict.detail),
        counterexample=counterexample,
        model=spec.model,
        arithmetic=spec.arithmetic,
        expect=expect,
        kind=verdict.kind,
        statistics=verdict.statistics,
    )
    if verdict.reading and verdict.as_run is not None:
        item.notes.append(
            f"the verdict is about the reading {verdict.reading!r}"
            + ("" if verdict.as_run else ", NOT the model as it runs")
            + (
                "; the trace below replays the IR (tracr's intended hardmax computation), not the float model: the "
                "float values are the witness's float_evaluations and enclosure"
                if "float_evaluations" in counterexample
                else "; the trace below replays the fixed-point IR (the spec's arithmetic), not the float model: the "
                "float values are the witness's model_readout (torch's own evaluations) and enclosure"
                if verdict.as_run and "enclosure" in counterexample
                else ""
            )
        )
    if spec.model.quantization is not None:  # the reading's weights are rounded floats: how far from the float ones
        item.notes.append(spec.model.quantization.describe())
    roles = roles_of(counterexample)
    if not roles.names:
        item.notes.append(
            "this witness names no inputs ('input', '*_input' or 'inputs'; docs/explore.md), "
            "so there is no trace to show"
        )
        return item
    item.roles = _replay_roles(spec.model, spec.arithmetic, roles)
    return item


def explain_verdicts(pairs: Iterable[tuple[Any, Verdict]]) -> list[Explained]:
    """The refuted verdicts of (spec, verdict) pairs replayed, unexpected refutations first."""
    return unexpected_first(
        explain_verdict(spec, verdict, _expect_of(spec, verdict))
        for spec, verdict in pairs
        if verdict.status == REFUTED
    )


def _expect_of(spec, verdict: Verdict) -> str | None:
    properties = spec.properties
    return properties[verdict.index].expect if 0 <= verdict.index < len(properties) else None


_VERDICT_FIELDS = {f.name for f in dataclasses.fields(Verdict)} | {"verdict"}


def _locate_spec(entry: dict[str, Any], report_dir: Path) -> Path | None:
    candidates = []
    if entry.get("spec_resolved"):
        candidates.append(Path(entry["spec_resolved"]))
    if entry.get("spec"):
        candidates += [report_dir / entry["spec"], Path(entry["spec"])]
    return next((c for c in candidates if c.is_file()), None)


def explain_report(path: str | Path, only: set[str] | None = None) -> list[Explained]:
    """Every refuted result of a ``verify-tf check --json`` report, replayed on the spec it names."""
    from ..reporting.report import READABLE_FORMATS, REPORT_FORMAT
    from ..spec import SpecError, load_spec

    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ExplainError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ExplainError(f"{path}: not a JSON report ({exc})") from None
    if (
        not isinstance(data, dict)
        or data.get("format") not in READABLE_FORMATS
        or not isinstance(data.get("results"), list)
    ):
        raise ExplainError(
            f"{path}: not a verify-tf JSON report (expected format {REPORT_FORMAT!r}; "
            "write one with `verify-tf check SPEC --json REPORT.json`)"
        )
    specs: dict[Path, Any] = {}
    explained = []
    for entry in data["results"]:
        if not isinstance(entry, dict) or entry.get("verdict") != REFUTED:
            continue
        if only and entry.get("property") not in only:
            continue
        try:
            verdict = Verdict.from_json({k: v for k, v in entry.items() if k in _VERDICT_FIELDS})
        except (TypeError, ValueError) as exc:
            raise ExplainError(f"{path}: malformed result for {entry.get('property')!r}: {exc}") from None
        expect = entry.get("expect") if isinstance(entry.get("expect"), str) else None
        spec_file = _locate_spec(entry, path.resolve().parent)
        if spec_file is None:
            explained.append(
                _unreplayed(
                    verdict,
                    f"spec {entry.get('spec')!r} not found (looked next to the report and in the current folder)",
                    expect,
                )
            )
            continue
        if spec_file not in specs:
            try:
                specs[spec_file] = load_spec(spec_file)
            except SpecError as exc:
                specs[spec_file] = exc
        spec = specs[spec_file]
        if isinstance(spec, SpecError):
            explained.append(_unreplayed(verdict, f"the spec no longer loads: {spec}", expect))
            continue
        item = explain_verdict(spec, verdict, expect)
        if entry.get("spec_sha256") and entry["spec_sha256"] != hashlib.sha256(spec_file.read_bytes()).hexdigest():
            item.notes.append("the spec changed since the report was written: the traces replay the current spec")
        if not (0 <= verdict.index < len(spec.properties)) or spec.properties[verdict.index].label != verdict.property:
            item.notes.append(f"property #{verdict.index} of the current spec is not {verdict.property!r}")
        explained.append(item)
    return unexpected_first(explained)


def _unreplayed(verdict: Verdict, problem: str, expect: str | None) -> Explained:
    counterexample = verdict.counterexample or {}
    return Explained(
        spec_path=verdict.spec,
        property=verdict.property,
        index=verdict.index,
        summary=str(counterexample.get("summary") or verdict.detail),
        counterexample=counterexample,
        notes=[problem],
        expect=expect,
        kind=verdict.kind,
        statistics=verdict.statistics,
    )


# ---------------------------------------------------------------- the property's own trace (both renderers)


def witness_table(counterexample: dict[str, Any]) -> tuple[list[str], list[list[str]]] | None:
    """The witness's ``trace`` rows (a property's own per-position table, e.g. the RASP or C-RASP program's
    values beside the model's decoded output) as columns and text rows; nested mappings become
    ``key.sub`` columns. None when the witness has no such table."""
    rows = counterexample.get("trace")
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        return None
    flat = []
    for row in rows:
        cells: dict[str, str] = {}
        for key, value in row.items():
            if isinstance(value, dict):
                cells.update({f"{key}.{sub}": _text(v) for sub, v in value.items()})
            else:
                cells[str(key)] = _text(value)
        flat.append(cells)
    columns = list(dict.fromkeys(key for cells in flat for key in cells))
    return columns, [[cells.get(c, "") for c in columns] for cells in flat]


def _text(value: Any) -> str:
    return "None" if value is None else str(value)


# ---------------------------------------------------------------- comparing aligned traces (both renderers)


def stages(trace: Trace) -> list[tuple[str, list[Sequence[Fraction]]]]:
    """The per-position vectors of a trace, stage by stage, ending with the readout q."""
    out: list[tuple[str, list[Sequence[Fraction]]]] = [("embedding", list(trace.embedded))]
    for index, block in enumerate(trace.blocks):
        for name, vectors in (
            ("attention LayerNorm", block.attention_norm),
            ("attention output", block.attention_output),
            ("after attention", block.after_attention),
            ("feed-forward LayerNorm", block.feed_forward_norm),
            ("hidden activation", block.hidden),
            ("after feed-forward", block.after_feed_forward),
        ):
            if vectors is not None:
                out.append((f"layer {index}: {name}", list(vectors)))
    if trace.before_final_norm is not None:
        out.append(("final LayerNorm", list(trace.output)))
    out.append(("readout q = u·z", [(q,) for q in trace.readout]))
    return out


def trace_alignment(role: RoleTrace, first: RoleTrace) -> dict[int, int]:
    """Trace position of ``role`` -> trace position of ``first`` to compare with (BOS maps to BOS)."""
    if role.trace is None or first.trace is None:
        return {}
    off, first_off = role.offset, first.offset
    mapping = {i: i for i in range(min(off, first_off))}
    user_length = len(role.tokens or ())
    order = role.alignment if role.alignment is not None and len(role.alignment) == user_length else None
    for i in range(user_length):
        target = order[i] if order is not None else i
        if 0 <= target < len(first.tokens or ()):
            mapping[off + i] = first_off + target
    return mapping


def differing_cells(
    first: Sequence[Sequence[Fraction]], other: Sequence[Sequence[Fraction]], mapping: dict[int, int]
) -> set[tuple[int, int]]:
    """(position, coordinate) cells of ``other`` whose value differs from the aligned cell of ``first``."""
    cells = set()
    for i, vector in enumerate(other):
        j = mapping.get(i)
        if j is None or j >= len(first):
            continue
        for c, value in enumerate(vector):
            if c >= len(first[j]) or first[j][c] != value:
                cells.add((i, c))
    return cells


def differing_weights(
    first: Sequence[Sequence[Fraction]], other: Sequence[Sequence[Fraction]], mapping: dict[int, int]
) -> set[tuple[int, int]]:
    """Attention cells (i, j) of ``other`` whose weight differs from the first role's a[π(i)][π(j)]."""
    cells = set()
    for i, row in enumerate(other):
        for j, weight in enumerate(row):
            a, b = mapping.get(i), mapping.get(j)
            if a is None or b is None or a >= len(first) or b >= len(first[a]):
                continue
            if first[a][b] != weight:
                cells.add((i, j))
    return cells


def focus_rows(role: RoleTrace) -> set[int]:
    return {role.offset + role.focus} if role.focus is not None and role.trace is not None else set()


def focus_collision(roles: Sequence[RoleTrace]) -> bool:
    """True when the roles' positions of interest have equal readouts (e.g. a contextual-mapping collision)."""
    values = [
        r.trace.readout[r.offset + r.focus]
        for r in roles
        if r.trace is not None and r.focus is not None and 0 <= r.offset + r.focus < len(r.trace.readout)
    ]
    return len(values) >= 2 and len(set(values)) == 1


# ---------------------------------------------------------------- the answer (what both renderers open with)


def answer(item: Explained) -> list[tuple[str, str]]:
    """What an explanation opens with, as (what, text) lines: each input by the name the witness summary uses,
    the values at the positions of interest (equal ones: the collision), where the inputs' traces first differ
    (aligned as the witness says), for a collision the stage from which the colliding values are equal, and how
    a ``--minimize`` witness was chosen. The traces follow it."""
    roles = [r for r in item.roles if r.trace is not None]
    lines = [(item.name(r), " ".join(_token_text(t) for t in r.tokens or ())) for r in roles]
    focus = _focus_lines(item, roles)
    if len(roles) >= 2:
        first_difference = _first_difference(roles)
        if first_difference is not None:  # "they differ from" the same stage: said once
            focus = [(what, text) for what, text in focus if not first_difference.startswith(f"{text},")]
        focus.append(("first differ", first_difference or "nowhere: every stage is equal (aligned)"))
    lines += focus
    minimal = describe_minimization(item.counterexample, item.statistics)
    if minimal:
        lines.append(("--minimize", minimal))
    return lines


def _token_text(token: Any) -> str:
    from ..numbers import fmt_vector

    return token if isinstance(token, str) else fmt_vector(token)


def _focus_value(role: RoleTrace, stage: list[Sequence[Fraction]]) -> Sequence[Fraction] | None:
    row = role.offset + role.focus if role.focus is not None else None
    return stage[row] if row is not None and 0 <= row < len(stage) else None


def _focus_lines(item: Explained, roles: list[RoleTrace]) -> list[tuple[str, str]]:
    from ..numbers import fmt, fmt_vector

    focused = [r for r in roles if r.focus is not None and r.trace is not None]
    if not focused:
        return []
    per_role = [stages(r.trace) for r in focused]  # type: ignore[arg-type]

    def shown(vector: Sequence[Fraction] | None) -> str:
        return fmt(vector[0]) if vector is not None and len(vector) == 1 else fmt_vector(vector or ())

    said = ", ".join(
        f"q({item.name(r)}) at position {r.focus} = {shown(_focus_value(r, stage[-1][1]))}"
        for r, stage in zip(focused, per_role)
    )
    if len(focused) < 2:
        return [("at the position", said)]
    if focus_collision(focused):
        lines = [("collision", f"{said}: equal")]
        equal_from = None
        for s in range(len(per_role[0]) - 1, -1, -1):  # the earliest stage from which they stay equal
            values = [_focus_value(r, stage[s][1]) if s < len(stage) else None for r, stage in zip(focused, per_role)]
            if any(v is None for v in values) or len({tuple(v) for v in values if v is not None}) != 1:
                break
            equal_from = per_role[0][s][0]
        if equal_from is not None:
            lines.append(("equal from", f"{equal_from} on"))
        return lines
    lines = [("at the positions", said)]
    for s, (title, _) in enumerate(per_role[0]):
        values = [_focus_value(r, stage[s][1]) if s < len(stage) else None for r, stage in zip(focused, per_role)]
        if len({tuple(v) for v in values if v is not None}) > 1:
            lines.append(("they differ from", title))
            break
    return lines


def _first_difference(roles: list[RoleTrace]) -> str | None:
    """The first stage where some input's value differs from the first input's aligned one, with the positions."""
    first = roles[0]
    mappings = [trace_alignment(r, first) for r in roles]
    per_role = [stages(r.trace) for r in roles]  # type: ignore[arg-type]
    for s, (title, first_vectors) in enumerate(per_role[0]):
        labels: list[str] = []
        for role, stage, mapping in zip(roles[1:], per_role[1:], mappings[1:]):
            if s < len(stage):
                for position in sorted({i for i, _ in differing_cells(first_vectors, stage[s][1], mapping)}):
                    label = role.labels[position] if position < len(role.labels) else str(position)
                    if label not in labels:
                        labels.append(label)
        if labels:
            return f"{title}, at position{'s' if len(labels) > 1 else ''} {', '.join(labels)}"
    return None

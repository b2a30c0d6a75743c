"""Property ``value-range``: every readout value lies inside (or outside) an interval [lo, hi].

It states claims (3) and (4) of Yun et al.'s Lemma 6 (ICLR 2020) as they are written, with
``interval: yun-lemma6`` computing the paper's t_l and t_r from the domain's d (token dimension), δ (grid step)
and n (length):

    t_l = n·δ^(-2nd)·(δ^-d − 1)        t_r = n²·δ^(-2(n+1)d-1) + n·δ^(-(n+1)d)

  (3) for every L in G̃_δ (distinct tokens of the grid): every value of q(L) lies in [t_l, t_r]
      — ``value-range: {interval: yun-lemma6}`` on a distinct-tokens domain;
  (4) for every L in G⁺_δ \\ G̃_δ (a repeated token, or a coordinate outside [0, 1) quantised to the large
      negative value): every value of q(L) lies outside [t_l, t_r]
      — ``value-range: {interval: yun-lemma6, inside: false, except-distinct: true}`` on the domain
      ``grid: {step: δ, plus: true}`` (G⁺_δ: the grid plus −δ^-nd).

``except-distinct`` skips the inputs of G̃_δ (pairwise distinct tokens inside the grid). The formulas follow
../shared/research/papers.md (t_l as exact-rational checks confirmed it; a published restatement prints a
wrong t_l) and docs/contextual-mapping.md says which reading of G⁺_δ is used and what it found.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..contract import Array, Batched, EachInput, Evaluators, Measures, Proof, Sampled, Task, Witness
from ..domain import Domain, GridDomain, format_input
from ..ir import Model
from ..numbers import fmt
from ..schema.dsl import Boolean, Either, Field, ListOf, Number, Obj, String
from ..schema.errors import OptionError
from ..semantics import Arithmetic, evaluate
from ..witness import input_to_json
from .base import compared_positions, require

YUN = "yun-lemma6"


def yun_lemma6_interval(d: int, delta: Fraction, n: int) -> tuple[Fraction, Fraction]:
    """(t_l, t_r) of Yun et al.'s Lemma 6 for token dimension d, grid step δ and length n."""
    t_l = n * delta ** (-2 * n * d) * (delta ** (-d) - 1)
    t_r = n * n * delta ** (-2 * (n + 1) * d - 1) + n * delta ** (-(n + 1) * d)
    return t_l, t_r


@dataclass(frozen=True)
class Options:
    interval: Any  # (lo, hi) or "yun-lemma6"
    inside: bool = True
    except_distinct: bool = False


def _options(values: dict[str, Any]) -> Options:
    interval = values["interval"]
    if isinstance(interval, list):
        if len(interval) != 2 or interval[0] > interval[1]:
            raise OptionError("interval", f"expected [lo, hi] with lo <= hi, got {[str(v) for v in interval]}")
        interval = (interval[0], interval[1])
    return Options(interval, values["inside"], values["except-distinct"])


def grid_step(domain: GridDomain) -> Fraction | None:
    """δ when the in-grid values are Yun's G_δ = {0, δ, ..., 1 − δ}, else None."""
    inside = [v for v in domain.values if v not in domain.outside]
    if len(inside) < 1:
        return None
    step = Fraction(1, len(inside))
    return step if inside == [k * step for k in range(len(inside))] else None


class ValueRange(EachInput, Batched, Sampled):
    name = "value-range"
    summary = (
        "every readout value lies inside (or outside) [lo, hi]; interval yun-lemma6: Yun et al.'s t_l, t_r "
        "(Lemma 6 claims 3 and 4)"
    )
    options = Obj(
        {
            "interval": Field(
                Either(
                    [
                        (lambda n: n.kind == "seq", ListOf(Number(), "[lo, hi]", length=2)),
                        (lambda n: n.kind == "scalar", String("a built-in interval", (YUN,))),
                    ],
                    what="[lo, hi] or 'yun-lemma6'",
                    description="the interval: [lo, hi], or yun-lemma6 = [t_l, t_r] from d, δ, n",
                ),
                required=True,
            ),
            "inside": Field(
                Boolean("true: every value inside the interval; false: every value outside it"), default=True
            ),
            "except-distinct": Field(
                Boolean(
                    "skip the inputs of G̃_δ (pairwise distinct tokens inside the grid): "
                    "Lemma 6's claim (4) quantifies over G⁺_δ minus G̃_δ"
                ),
                default=False,
            ),
        },
        check=_options,
    )

    def fit(self, model: Model, arithmetic: Arithmetic, domain: Domain | None, options: Options) -> None:
        if options.interval == YUN:
            require(
                isinstance(domain, GridDomain) and grid_step(domain) is not None,
                "interval",
                "interval yun-lemma6 needs the grid G_δ = {0, δ, ..., 1 − δ} (optionally plus outside values)",
                "e.g. domain: {grid: {step: 1/2}, length: 2, distinct-tokens: true}",
            )
        if options.except_distinct:
            require(isinstance(domain, GridDomain), "except-distinct", "except-distinct needs a grid domain")

    def interval(self, task: Task) -> tuple[Fraction, Fraction]:
        options: Options = task.options
        if options.interval == YUN:
            domain = task.grid()
            step = grid_step(domain)
            assert step is not None  # fit: Yun's interval needs Yun's grid
            return yun_lemma6_interval(domain.dim, step, domain.length)
        given: tuple[Fraction, Fraction] = options.interval
        return given

    def skipped(self, task: Task, tokens: tuple[Any, ...]) -> bool:
        """An input of G̃_δ when except-distinct: pairwise distinct tokens, all inside the grid."""
        if not task.options.except_distinct:
            return False  # (any domain; except-distinct needs a grid, fit insists)
        domain = task.grid()
        return len(set(tokens)) == len(tokens) and all(domain.in_grid(t) for t in tokens)

    def statistics(self, task: Task) -> dict[str, Any]:
        lo, hi = self.interval(task)
        return {"interval": [str(lo), str(hi)], "inside": task.options.inside}

    def violation(self, task: Task, tokens: tuple[Any, ...]) -> Witness | None:
        if self.skipped(task, tokens):
            return None
        lo, hi = self.interval(task)
        readout = evaluate(task.model, task.arithmetic, tokens).readout
        for label, p in compared_positions(task.model, len(tokens), False):
            q = readout[p]
            if (lo <= q <= hi) != task.options.inside:
                where = "outside" if task.options.inside else "inside"
                return {
                    "input": input_to_json(tokens),
                    "position": label,
                    "value": str(q),
                    "interval": [str(lo), str(hi)],
                    "summary": f"X = {format_input(tokens)}: q at position {label} is {fmt(q)}, {where} "
                    f"[{fmt(lo)}, {fmt(hi)}]",
                }
        return None

    def batched_violations(self, task: Task, evaluators: Evaluators, rows: Array) -> tuple[Array, Measures]:
        lo, hi = self.interval(task)
        values = evaluators.of().values(rows, "readout")
        # the user's positions only, as ``violation`` compares them (docs/semantics.md: BOS excluded)
        columns = [p for _, p in compared_positions(task.model, rows.shape[1], False)]
        num = np.asarray(values.numerators, dtype=object)[:, columns]  # exact comparisons whatever the magnitudes
        inside = (num * lo.denominator >= lo.numerator * values.den) & (
            num * hi.denominator <= hi.numerator * values.den
        )
        flagged = (~inside if task.options.inside else inside).any(axis=1) if columns else np.zeros(len(rows), bool)
        if task.options.except_distinct:
            sorted_rows = np.sort(rows, axis=1)
            distinct = (sorted_rows[:, 1:] != sorted_rows[:, :-1]).all(axis=1)
            tokens = task.grid().tokens
            outside = np.array([not task.grid().in_grid(t) for t in tokens])
            flagged &= ~(distinct & ~outside[rows].any(axis=1))
        return np.asarray(flagged, dtype=bool), {}

    def describe_proof(self, task: Task, proof: Proof) -> str:
        lo, hi = self.interval(task)
        where = "inside" if task.options.inside else "outside"
        skipped = " (G̃_δ skipped)" if task.options.except_distinct else ""
        return f"every value {where} [{fmt(lo)}, {fmt(hi)}]{skipped}: {proof.default}"


PROPERTY = ValueRange()

"""Registry of built-in constructions (``model: {construct: NAME, ...params}``).

Each entry: parameter schema fields (spec.schema Fields) and a function params -> Model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..ir import Model


@dataclass(frozen=True)
class Construction:
    name: str
    summary: str
    parameters: dict[str, Any]  # key -> spec.schema.Field
    build: Callable[[dict[str, Any]], Model]


def constructions() -> dict[str, Construction]:
    from ..schema.dsl import Field, FilePath, Integer, ListOf, Number, String

    # the builders are imported when a spec builds their model (the C-RASP compiler is no small module)
    def yun(params: dict[str, Any]) -> Model:
        from .yun import yun_contextual_mapping

        return yun_contextual_mapping(
            params["d"], params["delta"], params["n"], params.get("global-shift-scale"), params.get("drop-layer")
        )

    def crasp(params: dict[str, Any]) -> Model:
        from .crasp_compiler import build_construction

        return build_construction(params)

    entries = [
        Construction(
            "yun2019-contextual-mapping",
            "Yun et al. 2020, Lemma 6: hardmax selective-shift layers + global shift (exact arithmetic)",
            {
                "d": Field(Integer("token dimension", minimum=1, maximum=8), required=True),
                "delta": Field(Number("grid step δ (1/δ an integer)", positive=True), required=True),
                "n": Field(Integer("sequence length", minimum=1, maximum=64), required=True),
                "global-shift-scale": Field(
                    Number("override the global shift factor n·δ^-(n+1)d-1 (to build broken variants)")
                ),
                "drop-layer": Field(Integer("remove the selective-shift layer with this index", minimum=0)),
            },
            yun,
        ),
        Construction(
            "crasp-program",
            "the C-RASP compiler (docs/crasp.md): fixed point, exact-sums; accepts at i iff readout q_i > 0",
            {
                "program": Field(FilePath("the C-RASP program (.cr), relative to the spec's folder"), required=True),
                "frac": Field(Integer("fractional bits the model is compiled for (default 0)", minimum=0, maximum=32)),
                "heads": Field(
                    String(
                        "uniform heads, softmax heads with zero query/key weights (every score 0), or "
                        "softmax-bos heads (BOS scores 2^-f, the others 0; frac >= 1)",
                        ("uniform", "softmax", "softmax-bos"),
                    ),
                    default="uniform",
                ),
                "set": Field(ListOf(String(), "then change weights: 'PARAMETER=VALUE' items (mutated models)")),
            },
            crasp,
        ),
    ]
    return {c.name: c for c in entries}

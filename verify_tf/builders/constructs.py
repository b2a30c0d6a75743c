"""Model source ``construct``: the built-in constructions (``model: {construct: NAME, ...parameters}``).

Each construction: its parameters (schema Fields, keys of the model section beside ``construct``) and a function
params -> Model. The builders are imported when a spec builds their model (the C-RASP compiler is no small module).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..ir import Model
from ..schema.dsl import Context, Field, FilePath, Integer, ListOf, Number, String
from ..schema.yamlnodes import Node
from .sources import ModelSource


@dataclass(frozen=True)
class Construction:
    name: str
    summary: str
    parameters: dict[str, Field]
    build: Callable[[dict[str, Any]], Model]


def _yun(params: dict[str, Any]) -> Model:
    from .yun import yun_contextual_mapping

    return yun_contextual_mapping(
        params["d"], params["delta"], params["n"], params.get("global-shift-scale"), params.get("drop-layer")
    )


def _crasp(params: dict[str, Any]) -> Model:
    from .crasp_compiler import build_construction

    return build_construction(params)


@cache
def constructions() -> dict[str, Construction]:
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
            _yun,
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
            _crasp,
        ),
    ]
    return {c.name: c for c in entries}


def _constructed_model(section: dict[str, Any], node: Node, ctx: Context, path: str) -> Model:
    """``model: {construct: NAME, ...}``: a built-in construction, its parameters taken from the model section."""
    construction = constructions()[section["construct"]]
    params = {}
    for key, f in construction.parameters.items():
        if section.get(key) is None and f.required:
            raise ctx.error(
                node, path, f"construction {construction.name} needs parameter {key!r}", f.schema.description
            )
        params[key] = section.get(key)
    return construction.build(params)


def _fields() -> dict[str, Field]:
    """``construct`` and every construction's parameters (a parameter's schema as declared; no defaults)."""
    fields: dict[str, Field] = {"construct": Field(String("built-in construction", tuple(constructions())))}
    for c in constructions().values():
        for key, f in c.parameters.items():
            fields.setdefault(key, Field(f.schema))
    return fields


SOURCE = ModelSource(
    key="construct",
    fields=_fields(),
    build=_constructed_model,
    label="a built-in construction",
    usage="write model: {construct: yun2019-contextual-mapping, d: 1, delta: 1/2, n: 2}",
    example="`construct: yun2019-contextual-mapping` with d/delta/n",
)

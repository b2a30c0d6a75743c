"""Properties × BOS: every engine that runs a property on a model with a BOS agrees with the reference interpreter.

The BOS position is compared only where docs/semantics.md's table says so (``include-bos: true``, or never). A
batched check that looked at the BOS column where the interpreter does not (value-range did, on main bfa436e:
``enumerate``, ``search`` and ``auto`` answered ``error``) or missed it where it should (``include-bos: true``)
disagrees with ``interpret`` on one of these cases.

The models are built so that the BOS position's values are the only ones outside what the options allow:
the BOS readout is 5 (the bos-embedding), the user readouts are 0 or 1 (the embedding) or averages of them with
the BOS under a causal uniform head. Every expected verdict below is read off those numbers by hand.
"""

from __future__ import annotations

import pytest
import yaml

from verify_tf.engines import supporting
from verify_tf.properties import registry
from verify_tf.runner import Overrides, check_property
from verify_tf.spec.loader import load_spec_text


def alphabet_model(bos: int, layers: list) -> dict:
    """a -> (1, 1), b -> (0, 1), BOS -> (bos, 1); the readout is the first coordinate."""
    tokens = {"alphabet": ["a", "b"], "embedding": [[1, 1], [0, 1]], "bos": "^", "bos-embedding": [bos, 1]}
    return {"tokens": tokens, "layers": layers}


def head(**fields) -> dict:
    return {"attention": {"residual": False, "heads": [{"value": [[1, 0]], "output": [[1], [0]], **fields}]}}


# no layers: the user readouts are 0 or 1, the BOS readout is the bos-embedding's first coordinate
NO_LAYERS: list = []
# a bidirectional uniform head without residual: every position (BOS included) reads the mean of the stream
MEAN = [head(scoring="uniform", query=[[0, 0]], key=[[0, 0]])]
# a causal hardmax head whose score is the key's first coordinate (the query reads the constant 1): the BOS
# (5 or 7) beats every user token (1 or 0) in every row, so every position reads the BOS's value
CAUSAL = [head(scoring="hardmax", causal=True, query=[[0, 1]], key=[[1, 0]])]

# (layers, property, options, verdict the documented semantics gives): hand-derived, see each comment.
# "OTHER" stands for the same layers with the BOS embedding 7 instead of 5.
CASES = [
    # no layers: user readouts in {0, 1}, the BOS readout 5
    (NO_LAYERS, "value-range", {"interval": [0, 1]}, "proved"),
    (NO_LAYERS, "value-range", {"interval": [4, 6], "inside": False}, "proved"),  # BOS 5 inside: not compared
    (NO_LAYERS, "value-range", {"interval": [0, "1/2"]}, "refuted"),  # user value 1
    (NO_LAYERS, "output-bounds", {"lo": 0, "hi": 1}, "proved"),
    (NO_LAYERS, "output-bounds", {"lo": 0, "hi": 1, "include-bos": True}, "refuted"),  # the BOS's 5
    (NO_LAYERS, "output-bounds", {"lo": 0, "hi": 1, "positions": [-1]}, "proved"),
    (NO_LAYERS, "equivalent-to", {"model": "OTHER", "on": "readout"}, "proved"),  # only the BOS differs
    (NO_LAYERS, "equivalent-to", {"model": "OTHER", "on": "readout", "include-bos": True}, "refuted"),
    (NO_LAYERS, "equivalent-to", {"model": "OTHER"}, "proved"),
    (NO_LAYERS, "permutation-equivariance", {}, "proved"),
    (NO_LAYERS, "permutation-equivariance", {"include-bos": True}, "proved"),
    (NO_LAYERS, "position-blind", {}, "proved"),
    # mean of (5, x_1..x_n) = (5 + #a)/(n + 1): length 1: 3 ('a'), 5/2 ('b'); length 2: 7/3, 2, 5/3
    (MEAN, "value-range", {"interval": ["5/3", 3]}, "proved"),
    (MEAN, "value-range", {"interval": [0, 1]}, "refuted"),
    (MEAN, "value-range", {"interval": [2, 3], "inside": False}, "refuted"),  # 5/2 at 'b'
    (MEAN, "output-bounds", {"lo": "5/3", "hi": 3}, "proved"),
    (MEAN, "output-bounds", {"lo": "5/3", "hi": 3, "include-bos": True}, "proved"),  # the BOS reads the mean too
    (MEAN, "equivalent-to", {"model": "OTHER", "on": "readout"}, "refuted"),  # the BOS enters every mean
    (MEAN, "permutation-equivariance", {"include-bos": True}, "proved"),  # the mean ignores order
    (MEAN, "position-blind", {}, "proved"),  # every position reads the same mean
    # causal hardmax: every position attends to the BOS alone and reads 5
    (CAUSAL, "value-range", {"interval": [5, 5]}, "proved"),
    (CAUSAL, "value-range", {"interval": [5, 5], "inside": False}, "refuted"),
    (CAUSAL, "output-bounds", {"lo": 5, "hi": 5, "include-bos": True}, "proved"),
    (CAUSAL, "equivalent-to", {"model": "OTHER", "on": "readout"}, "refuted"),  # 5 against 7 at every position
    (CAUSAL, "permutation-equivariance", {}, "proved"),
    (CAUSAL, "position-blind", {}, "proved"),
]


def spec_text(layers: list, name: str, options: dict) -> str:
    if options.get("model") == "OTHER":
        options = {**options, "model": alphabet_model(7, layers)}
    spec = {
        "name": "bos",
        "model": alphabet_model(5, layers),
        "arithmetic": "exact",
        "domain": {"strings": {"max-length": 2}},
        "properties": [{name: options}],
    }
    return yaml.safe_dump(spec, sort_keys=False)


def engines_of(name: str) -> list[str]:
    return [e for e in supporting(registry()[name]) if e != "architecture"]


@pytest.mark.parametrize("layers,name,options,expected", CASES, ids=[f"{i}-{c[1]}" for i, c in enumerate(CASES)])
def test_every_engine_agrees_with_the_interpreter_on_bos_models(layers, name, options, expected):
    spec = load_spec_text(spec_text(layers, name, options))
    reference = check_property(spec, spec.properties[0], Overrides(engine="interpret", timeout=60))
    assert reference.status == expected, reference.detail
    for engine in [*engines_of(name), "auto"]:
        verdict = check_property(spec, spec.properties[0], Overrides(engine=engine, timeout=60))
        # search proves nothing it cannot enumerate; every definite answer must be the interpreter's
        assert verdict.status in (expected, "unknown"), (engine, verdict.status, verdict.detail)
        if engine in ("enumerate", "auto"):
            assert verdict.status == expected, (engine, verdict.detail)
        if expected == "refuted" and verdict.status == "refuted":
            assert verdict.counterexample["input"] == reference.counterexample["input"] or engine in (
                "search",
                "smt",
                "split",
            )

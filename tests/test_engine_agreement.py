"""Issue 3's 'done means': every property that SMT proves or refutes on a shipped spec whose domain is small
enough to enumerate gets the same verdict from exhaustive enumeration (and vice versa)."""

from pathlib import Path

import pytest

from verify_tf.properties import registry
from verify_tf.runner import Overrides, check_property
from verify_tf.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
ENUMERABLE = 50_000  # inputs; above this the exhaustive engines are too slow for CI
SMT_TIMEOUT = 8.0  # an smt `unknown` compares with nothing; a definite answer must agree


def _cases():
    for path in sorted((ROOT / "specs").glob("*.yaml")):
        spec = load_spec(path)
        if spec.domain is None or spec.domain.size() > ENUMERABLE:
            continue
        for prop in spec.properties:
            engines = registry()[prop.name].engines
            exhaustive = tuple(e for e in ("enumerate", "interpret") if e in engines)
            if "smt" in engines and exhaustive and getattr(prop.options, "scope", "model") == "model":
                yield pytest.param(path, prop.index, exhaustive, id=f"{path.stem}[{prop.index}]")


CASES = list(_cases())


def test_there_are_cases_to_compare():
    assert len(CASES) >= 5


@pytest.mark.parametrize("path, index, exhaustive", CASES)
def test_smt_and_exhaustive_enumeration_agree(path, index, exhaustive):
    spec = load_spec(path)
    prop = spec.properties[index]
    by_smt = check_property(spec, prop, Overrides(engine="smt", timeout=SMT_TIMEOUT))
    for engine in exhaustive:  # the batched evaluator may refuse (int64 bounds); the interpreter never does
        by_enumeration = check_property(spec, prop, Overrides(engine=engine, timeout=120))
        if by_enumeration.status != "unknown":
            break
    assert by_enumeration.status in ("proved", "refuted"), by_enumeration.detail
    assert by_smt.status != "error", by_smt.detail
    if by_smt.status != "unknown":
        assert by_smt.status == by_enumeration.status, (by_smt.detail, by_enumeration.detail)


def _split_cases():
    import json

    recorded = {(v["spec"], v["index"]): v["verdict"]
                for v in json.loads((ROOT / "tests" / "data" / "shipped-verdicts.json").read_text())["verdicts"]}
    for path in sorted((ROOT / "specs").glob("*.yaml")):
        spec = load_spec(path)
        if spec.domain is None or spec.domain.size() > ENUMERABLE:
            continue
        for prop in spec.properties:
            if "split" in registry()[prop.name].engines and (path.name, prop.index) in recorded:
                yield pytest.param(path, prop.index, recorded[(path.name, prop.index)], id=f"{path.stem}[{prop.index}]")


SPLIT_CASES = list(_split_cases())


@pytest.mark.slow
@pytest.mark.parametrize("path, index, expected", SPLIT_CASES)
def test_split_agrees_with_the_recorded_verdict(path, index, expected):
    """Issue 13: every proof and refutation of a shipped spec small enough to enumerate is found by split too
    (tests/data/shipped-verdicts.json records them; they agree with enumerate/interpret and smt)."""
    spec = load_spec(path)
    result = check_property(spec, spec.properties[index], Overrides(engine="split", timeout=120))
    assert result.status == expected, result.detail


def test_there_are_split_cases():
    assert len(SPLIT_CASES) >= 20

"""Issue 3's 'done means': every property that SMT proves or refutes on a shipped spec whose domain is small
enough to enumerate gets the same verdict from exhaustive enumeration (and vice versa)."""

from pathlib import Path

import pytest

from verify_tf.properties import registry
from verify_tf.runner import Overrides, check_property
from verify_tf.spec import load_spec

from helpers import needs_torch, torch_installed

ROOT = Path(__file__).resolve().parent.parent
ENUMERABLE = 50_000  # inputs; above this the exhaustive engines are too slow for CI
SMT_TIMEOUT = 8.0  # an smt `unknown` compares with nothing; a definite answer must agree


def _cases():
    for path in sorted((ROOT / "specs").glob("*.yaml")):
        if needs_torch(path) and not torch_installed():
            continue
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

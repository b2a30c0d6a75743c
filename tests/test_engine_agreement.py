"""Issue 3's 'done means': every property that SMT proves or refutes on a shipped spec whose domain is small
enough to enumerate gets the same verdict from exhaustive enumeration (and vice versa).

SMT may time out on a case, but not on one it decided when this test was written (SMT_DECIDED): a regression
that made the encoding give up would otherwise pass unnoticed. The other cases get a deterministic budget, z3's
resource limit (UNDECIDED_RLIMIT), not a wall-clock one: an answer within it must agree with enumeration.
"""

import dataclasses
import json
from pathlib import Path

import pytest

from helpers import needs_torch, torch_installed
from verify_tf.engines import supporting
from verify_tf.properties import registry
from verify_tf.runner import Overrides, check_property
from verify_tf.spec import load_spec

pytestmark = pytest.mark.slow  # differential: SMT against exhaustive enumeration on every shipped spec

ROOT = Path(__file__).resolve().parent.parent
ENUMERABLE = 50_000  # inputs; above this the exhaustive engines are too slow for CI
# An smt `unknown` compares with nothing; a definite answer must agree. The cases outside SMT_DECIDED once had
# 8 s of wall clock each: under load z3 got about 1.5 s of CPU of it, on an idle CI machine all 8 s (41 cases,
# about 330 CPU seconds of the suite's ~870, for cases that then skip), and which of them were compared depended
# on the load. z3's resource limit per query makes it the same everywhere: 3,000,000 (about 2 s of z3 on the
# 2-core development machine; z3 reports about three times the number set as its `rlimit count`).
# UNDECIDED_TIMEOUT only bounds the encoding, which the resource limit does not.
UNDECIDED_RLIMIT = 3_000_000
UNDECIDED_TIMEOUT = 60.0
# The cases SMT decided within 8 s when this was written (2026-11-24; one run of each of the 81 cases on
# the shared 2-core development machine under load: 43 decided, the slowest in 7.5 s, 38 unknown). They must stay
# decided; they get DECIDED_TIMEOUT so that a busy CI machine does not turn a slow answer into a failure.
SMT_DECIDED = frozenset(
    {
        "crasp-L1-mutated[0]",
        "crasp-L1-mutated[1]",
        "crasp-L1-paper-rounding[1]",
        "crasp-L1-wrong-at-15[0]",
        "crasp-L1-wrong-at-15[1]",
        "crasp-L1[0]",
        "crasp-L1[1]",
        "crasp-L2-mutated[0]",
        "crasp-L2-mutated[1]",
        "crasp-L2-paper-rounding[1]",
        "crasp-L2[1]",
        "crasp-L3-mutated[0]",
        "crasp-L3-mutated[1]",
        "crasp-L3-paper-rounding[1]",
        "crasp-L3[1]",
        "crasp-L4-mutated[0]",
        "crasp-L4-mutated[1]",
        "crasp-L4[1]",
        "crasp-L5-mutated[0]",
        "crasp-L5-mutated[1]",
        "crasp-L6-mutated[0]",
        "crasp-L6-mutated[1]",
        "crasp-dyck1-prefix[1]",
        "crasp-majority-handbuilt[0]",
        "crasp-minmax[1]",
        "equivariance-absolute-pe-refuted[0]",
        "equivariance-fixed-softmax[0]",
        "equivariance-positions-refuted[0]",
        "equivariance-standard-hardmax[0]",
        "smt-equivalence-proved[0]",
        "smt-equivalence-refuted[0]",
        "tracr-bos-leak[0]",
        "tracr-detect-pattern[0]",
        "tracr-frac-gt-half[0]",
        "tracr-frac-prevs[0]",
        "tracr-length-numerical-7[0]",
        "tracr-nary-sequencemap[0]",
        "tracr-negative-map[0]",
        "tracr-pair-balance[0]",
        "tracr-shift-by-1[0]",
        "yun-lemma6-d1-k2-n2[0]",
        "yun-lemma6-d1-k2-n2[1]",
        "yun-random-hardmax-refuted[0]",
    }
)
DECIDED_TIMEOUT = 60.0


def _both_case_lists():
    """The smt-against-enumeration cases and the split cases, from one load of each shipped spec (collection
    loads them in every xdist worker and in test_without_torch's collect-only run: ~8 CPU s a pass)."""
    recorded = {
        (v["spec"], v["index"]): v["verdict"]
        for v in json.loads((ROOT / "tests" / "data" / "shipped-verdicts.json").read_text())["verdicts"]
    }
    cases, split_cases = [], []
    for path in sorted((ROOT / "specs").glob("*.yaml")):
        if needs_torch(path) and not torch_installed():
            continue  # a torch spec without the torch extra (test_without_torch collects the suite that way)
        spec = load_spec(path)
        if spec.domain is None or spec.domain.size() > ENUMERABLE:
            continue
        for prop in spec.properties:
            engines = supporting(registry()[prop.name])
            exhaustive = tuple(e for e in ("enumerate", "interpret") if e in engines)
            if "smt" in engines and exhaustive and getattr(prop.options, "scope", "model") == "model":
                case = f"{path.stem}[{prop.index}]"
                cases.append(pytest.param(path, prop.index, exhaustive, case, id=case))
            # a property pinned to the counting engine (crasp-L<k>-paper-rounding) stands for strings the
            # counting engine merges by state; its split run would enumerate all 16,384 (60-120 s each)
            if prop.engine == "counting":
                continue
            if "split" in engines and (path.name, prop.index) in recorded:
                split_cases.append(
                    pytest.param(path, prop.index, recorded[(path.name, prop.index)], id=f"{path.stem}[{prop.index}]")
                )
    return cases, split_cases


CASES, SPLIT_CASES = _both_case_lists()


def test_there_are_cases_to_compare():
    assert len(CASES) >= 81  # shipped specs with an enumerable domain and smt among their engines, when written
    assert SMT_DECIDED - {case.id for case in CASES} == set(), "a recorded case was renamed: update SMT_DECIDED"
    assert len(SMT_DECIDED) == 43


@pytest.mark.parametrize("path, index, exhaustive, case", CASES)
def test_smt_and_exhaustive_enumeration_agree(path, index, exhaustive, case):
    spec = load_spec(path)
    prop = spec.properties[index]
    if case in SMT_DECIDED:
        by_smt = check_property(spec, prop, Overrides(engine="smt", timeout=DECIDED_TIMEOUT))
    else:
        budgeted = dataclasses.replace(prop, rlimit=UNDECIDED_RLIMIT)
        by_smt = check_property(spec, budgeted, Overrides(engine="smt", timeout=UNDECIDED_TIMEOUT))
    assert by_smt.status != "error", by_smt.detail
    if case in SMT_DECIDED:
        assert by_smt.status != "unknown", f"SMT decided {case} when this test was written; now: {by_smt.detail}"
    elif by_smt.status == "unknown":
        # nothing to compare (the shipped verdict itself is tests/test_shipped_specs.py's); the interpreter would
        # need far more than 120 s on e.g. the 16,384 strings of crasp-L6-paper-rounding under rounded terms
        pytest.skip(f"smt unknown within its resource limit {UNDECIDED_RLIMIT:,}: {by_smt.detail}")
    for engine in exhaustive:  # the batched evaluator may refuse (int64 bounds); the interpreter never does
        by_enumeration = check_property(spec, prop, Overrides(engine=engine, timeout=120))
        if by_enumeration.status != "unknown":
            break
    assert by_enumeration.status in ("proved", "refuted"), by_enumeration.detail
    assert by_smt.status == by_enumeration.status, (by_smt.detail, by_enumeration.detail)


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

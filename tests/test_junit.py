"""JUnit XML: one test case per property; refuted = failure carrying the witness, unknown = skipped or error."""

import json
import xml.etree.ElementTree as ET

import pytest

from verify_tf.reporting.junit import junit_xml
from verify_tf.verdict import Verdict

WITNESS = {"input": [["0"], ["1"]], "summary": "X = [0, 1]: f(τX) = [4] but τf(X) = [7]"}


def verdict(status, name="p", spec="specs/a.yaml", index=0, **extra):
    if status == "refuted":
        extra.setdefault("counterexample", WITNESS)
    return Verdict(name, status, "interpret", detail=f"{status} detail", seconds=0.25, spec=spec, index=index, **extra)


def parse(verdicts, expectations, **kwargs):
    return ET.fromstring(junit_xml(verdicts, expectations, **kwargs).split("\n", 1)[1])


def test_one_case_per_property_grouped_by_spec():
    root = parse(
        [verdict("proved", "a"), verdict("refuted", "b", index=1), verdict("proved", "c", spec="specs/x.yaml")],
        [None, None, None],
    )
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["specs/a.yaml", "specs/x.yaml"]
    assert [c.get("name") for c in suites[0].findall("testcase")] == ["a [0]", "b [1]"]
    assert suites[0].findall("testcase")[0].get("classname") == "specs.a"
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == ("3", "1", "0", "0")
    assert suites[0].get("time") == "0.500"


def test_refuted_is_a_failure_with_the_witness():
    case = parse([verdict("refuted")], [None]).find("testsuite/testcase")
    failure = case.find("failure")
    assert failure.get("message") == "refuted: " + WITNESS["summary"]
    assert json.loads(failure.text) == WITNESS


@pytest.mark.parametrize(
    "status,expect,element",
    [
        ("refuted", "refuted", None),  # a known counterexample, as expected: passes
        ("proved", "proved", None),
        ("proved", "refuted", "failure"),  # contradicts the expectation
        ("refuted", "proved", "failure"),
        ("unknown", "unknown", None),
        ("unknown", "proved", "skipped"),  # unmet, not contradicted
        ("error", None, "error"),
    ],
)
def test_expectations(status, expect, element):
    case = parse([verdict(status)], [expect]).find("testsuite/testcase")
    children = [c.tag for c in case if c.tag != "system-out"]
    assert children == ([element] if element else [])
    if status == "proved" and expect == "refuted":
        assert case.find("failure").get("message").startswith("expected refuted, got proved")


def test_unknown_as_skipped_or_error():
    unknown = verdict("unknown", tried=["exhaustive enumeration (3/64)"])
    skipped = parse([unknown], [None]).find("testsuite/testcase/skipped")
    assert skipped.get("message") == "unknown: unknown detail (tried: exhaustive enumeration (3/64))"
    root = parse([unknown], [None], unknown_as="error")
    assert root.find("testsuite/testcase/error") is not None and root.get("errors") == "1"
    with pytest.raises(ValueError):
        junit_xml([unknown], [None], unknown_as="failure")


def test_skipped_is_skipped_naming_what_to_install_whatever_unknown_as_says():
    missing = Verdict(
        "p",
        "skipped",
        "none",
        method="needs torch",
        spec="specs/a.yaml",
        detail="a torch state dict needs PyTorch, which is not installed; install it",
    )
    for unknown_as in ("skipped", "error"):
        root = parse([missing], ["proved"], unknown_as=unknown_as)
        skipped = root.find("testsuite/testcase/skipped")
        assert skipped.get("message") == (
            "skipped (needs torch): a torch state dict needs PyTorch, which is not installed; install it"
        )
        assert (root.get("skipped"), root.get("errors"), root.get("failures")) == ("1", "0", "0")


def test_markup_in_messages_is_escaped():
    v = verdict("refuted", counterexample={"input": [], "summary": 'a < b & "c"'})
    text = junit_xml([v], [None])
    failure = ET.fromstring(text.split("\n", 1)[1]).find("testsuite/testcase/failure")
    assert failure.get("message") == 'refuted: a < b & "c"'


def test_the_time_in_tried_and_junit_is_the_solver_time_of_the_statistics():
    """smt-output-bounds' query times out at 1.5 s (its proof takes 11.8 s of z3 on this 2-core machine idle and
    did finish within 4 s on CI's, so 4 s was a race; encoding takes 0.27 s idle), so z3 runs it twice (a first
    and a second turn). ``tried`` once showed the second turn only ("unknown after 0.07 s" beside solver_seconds 1.73,
    issue 27); it now shows the sum of both, which is what statistics.solver_seconds adds up."""
    import re

    from verify_tf.runner import Overrides, check_property
    from verify_tf.spec import load_spec

    spec = load_spec("specs/smt-output-bounds.yaml")
    prop = spec.properties[0]
    result = check_property(spec, prop, Overrides(engine="smt", timeout=1.5))
    assert result.status == "unknown"
    (line,) = result.tried
    seconds = float(re.search(r"after (\d+\.\d\d) s of solving", line).group(1))
    assert seconds == pytest.approx(result.statistics["solver_seconds"], abs=0.006)  # both rounded: 2 and 4 digits
    assert seconds > 0.1  # the query really ran into its budget (1.5 s, less encoding)
    assert " in 2 turns " in line
    message = ET.fromstring(junit_xml([result], [prop.expect])).find(".//skipped").get("message")
    assert line in message

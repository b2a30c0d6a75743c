"""``verify-tf audit`` binds the whole report to its spec (issue 38, "audit passes a report that misstates its spec").

One honest run, ``check --json r.json --certify certs`` on a spec of two output-bounds properties (one proved,
one refuted by enumerate), then forgeries that edit only the report. On main b3da1e0 each of (a)-(d) audited
"N results: N ok", exit 0: audit checked each listed result but not that the report covers every property of the
re-loaded spec exactly once, nor expect, counts_as, fail_on, exit_code and the summary. Each now exits 1 naming
the forged field.

The spec's numbers by hand: the model has no layers and one grid coordinate, so the readout at each position is
the token itself; the domain's tokens are 0 and 1/2 (step 1/2 on the default [0, 1/2]) at 2 positions, 4 inputs.
Every readout lies in [0, 1/2] (``holds`` is proved), and the token 1/2 lies outside [0, 1/4] (``fails`` is refuted;
enumerate's least counterexample is the first input in its order with a 1/2, at position 1: X = [[0], [1/2]]).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from verify_tf.cli import main
from verify_tf.reporting.audit import FAILED, audit_report

SPEC = """name: two bounds
model: {tokens: {grid: 1}, layers: []}
arithmetic: exact
domain: {grid: {step: 1/2}, length: 2}
properties:
  - output-bounds: {name: holds, lo: 0, hi: 1/2, engine: enumerate}
  - output-bounds: {name: fails, lo: 0, hi: 1/4, engine: enumerate}
"""


@pytest.fixture(scope="module")
def honest(tmp_path_factory) -> Path:
    """The honest report of the two properties (and their certificate), written once for the module."""
    folder = tmp_path_factory.mktemp("honest")
    (folder / "two.yaml").write_text(SPEC)
    result = CliRunner().invoke(
        main,
        [
            "check",
            str(folder / "two.yaml"),
            "--no-cache",
            "--json",
            str(folder / "r.json"),
            "--certify",
            str(folder / "certs"),
            "-q",
        ],
    )
    assert result.exit_code == 1, result.output  # one property refuted
    report = json.loads((folder / "r.json").read_text())
    assert [(r["property"], r["verdict"]) for r in report["results"]] == [("holds", "proved"), ("fails", "refuted")]
    assert report["results"][1]["counterexample"]["input"] == [["0"], ["1/2"]]
    assert report["run"] == {"engine": None, "timeout": None}
    return folder / "r.json"


def forged(honest: Path, edit) -> tuple[int, str, object]:
    """The report edited by ``edit`` (in place, on a copy beside the original), audited: (exit code, output, audit)."""
    data = json.loads(honest.read_text())
    edit(data)
    path = honest.parent / "forged.json"
    path.write_text(json.dumps(data))
    result = CliRunner().invoke(main, ["audit", str(path)])
    return result.exit_code, result.output, audit_report(path)


def summary(proved: int, refuted: int, unknown: int, as_expected: int, unexpected: list) -> dict:
    counts = {"proved": proved, "refuted": refuted, "unknown": unknown, "error": 0, "skipped": 0}
    return {"counts": counts, "as_expected": as_expected, "unexpected": unexpected, "seconds": 1.0}


def test_the_honest_report_audits(honest):
    code, output, audit = forged(honest, lambda data: None)
    assert code == 0, output
    assert [item.outcome for item in audit.results] == ["ok", "ok"] and audit.problems == []
    assert "two.yaml: each of its 2 properties has exactly one result" in output
    assert output.strip().endswith("2 results: 2 ok, 0 partial, 0 failed; the report: ok")


def test_a_deleted_refutation_fails(honest):
    """(a) the refuted result deleted and ``exit_code: 0`` (the summary made to match)."""

    def edit(data):
        del data["results"][1]
        data.update(exit_code=0, summary=summary(1, 0, 0, 1, []))

    code, output, audit = forged(honest, edit)
    assert code == 1
    assert audit.problems == ["results: property 1 (fails) of two.yaml is not in the report"]
    assert "FAILED: results: property 1 (fails) of two.yaml is not in the report" in output


def test_a_proof_listed_twice_fails(honest):
    """(b) the proved result listed twice in place of the refuted one."""

    def edit(data):
        data["results"][1] = copy.deepcopy(data["results"][0])
        data.update(exit_code=0, summary=summary(2, 0, 0, 2, []))

    code, _, audit = forged(honest, edit)
    assert code == 1
    assert audit.problems == [
        "results: property 0 (holds) of two.yaml is listed 2 times",
        "results: property 1 (fails) of two.yaml is not in the report",
    ]


def test_a_proof_passed_off_as_the_other_property_fails(honest):
    """(b, disguised) the copy given the refuted property's index and name: its certificate is bound to property 0."""

    def edit(data):
        copied = copy.deepcopy(data["results"][0])
        copied.update(index=1, property="fails")
        data["results"][1] = copied
        data.update(exit_code=0, summary=summary(2, 0, 0, 2, []))

    code, _, audit = forged(honest, edit)
    assert code == 1 and audit.problems == []  # the totals are consistent with what the results claim
    [problem] = audit.results[1].problems
    assert problem.startswith("certificate: the property differs: index 0 in the certificate, 1 here")


def test_a_refutation_turned_unknown_under_fail_on_refuted_fails(honest):
    """(c) the refuted result turned into ``unknown`` (timeout) with ``fail_on: refuted`` and ``exit_code: 0``: the
    audit re-runs the check within the budget the report's run gave it (the spec's 60 s) and it refutes."""

    def edit(data):
        data["results"][1].update(verdict="unknown", method="", detail="timeout (60 s)", counterexample=None)
        data["results"][1]["counts_as"] = "unknown"
        data.update(fail_on="refuted", exit_code=0, summary=summary(1, 0, 1, 1, data["summary"]["unexpected"]))

    code, output, audit = forged(honest, edit)
    assert code == 1 and audit.problems == []
    [problem] = audit.results[1].problems
    assert problem.startswith("verdict: the report says unknown, but re-checked within 60 s (engine enumerate) it is")
    assert problem.endswith(
        "refuted, the counterexample replayed on the interpreter: "
        "X = [0, 0.5]: q at position 1 is 0.5, outside [0, 0.25]"
    )
    assert "FAILED: verdict: the report says unknown" in output


def test_an_expectation_the_spec_does_not_have_fails(honest):
    """(d) the refuted result given ``expect: refuted``, ``counts_as: proved`` although the spec has no ``expect``."""

    def edit(data):
        data["results"][1].update(expect="refuted", counts_as="proved")
        data.update(exit_code=0, summary=summary(1, 1, 0, 2, []))

    code, output, audit = forged(honest, edit)
    assert code == 1
    assert audit.results[1].problems == [
        "expect: the report says 'refuted', the spec None",
        "counts_as: the report says 'proved'; refuted under the spec's expect None counts as 'refuted'",
    ]
    assert audit.problems == [
        "exit_code: the report says 0, its results give 1 (fail_on unknown)",
        "summary.as_expected: the report says 2, its results give 1",
        "summary.unexpected: the report says [], its results give [{'spec': '"
        + str(honest.parent / "two.yaml")
        + "', 'index': 1, 'property': 'fails'}]",
    ]
    assert output.strip().endswith("the report: failed")


def test_an_exit_code_alone_fails(honest):
    code, _, audit = forged(honest, lambda data: data.update(exit_code=0))
    assert code == 1 and audit.problems == ["exit_code: the report says 0, its results give 1 (fail_on unknown)"]


def test_summary_counts_and_fail_on_are_recomputed(honest):
    def counts(data):
        data["summary"]["counts"]["refuted"] = 0
        data["summary"]["counts"]["proved"] = 2

    assert forged(honest, counts)[2].problems == [
        "summary.counts: the report says {'proved': 2, 'refuted': 0, 'unknown': 0, 'error': 0, 'skipped': 0}, its "
        "results give {'proved': 1, 'refuted': 1, 'unknown': 0, 'error': 0, 'skipped': 0}"
    ]
    assert forged(honest, lambda data: data.update(fail_on="never"))[2].problems == [
        "fail_on: 'never' is not one of skipped, unknown, refuted"
    ]
    assert forged(honest, lambda data: data.update(results=[]))[2].problems[0].startswith("results: none")


def test_an_interrupt_is_bound_to_the_results(honest):
    def unfinished(data):  # a result relabelled interrupted in a report that says nothing of an interrupt
        data["results"][1].update(verdict="unknown", method="interrupted", counterexample=None, counts_as="unknown")
        data.update(exit_code=3, summary=summary(1, 0, 1, 1, data["summary"]["unexpected"]))

    code, _, audit = forged(honest, unfinished)
    assert code == 1
    assert audit.results[1].problems == [
        "method: 'interrupted' in a report that was not interrupted (no 'interrupted')"
    ]
    assert audit.problems[0] == "interrupted: some results were interrupted, the report does not say by what"

    def interrupted(data):  # the interrupt said, its exit code not (an interrupt is never a verdict's code)
        unfinished(data)
        data["interrupted"] = "SIGINT"

    code, _, audit = forged(honest, interrupted)
    assert code == 1 and audit.results[1].problems == []
    assert audit.problems == ["exit_code: the report says 3, its results give 130 (fail_on unknown, SIGINT)"]


def test_a_proof_says_what_its_certificate_says(honest):
    def method(data):
        data["results"][0]["method"] = "smt"

    assert forged(honest, method)[2].results[0].problems == [
        "method: the report says 'smt', the certificate 'exhaustive'"
    ]

    def detail(data):
        data["results"][0]["detail"] = "every input of every length"

    [problem] = forged(honest, detail)[2].results[0].problems
    assert problem.startswith("detail: the report says 'every input of every length', the certificate 'all 4 inputs")


def test_a_result_for_a_property_the_spec_lacks_fails(honest):
    def extra(data):
        data["results"].append({**copy.deepcopy(data["results"][1]), "index": 7})

    audit = forged(honest, extra)[2]
    assert audit.results[2].problems == ["spec two.yaml has no property number 7"]
    assert audit.results[2].outcome == FAILED


def test_a_reading_not_as_run_cannot_be_passed_off_as_the_model_as_run(tmp_path):
    """A proof about tracr's hardmax reading must say "NOT the model as run" next to the verdict: ``as_run`` flipped
    to true (the table would then print "proved (exhaustive; hardmax, tracr's intended computation)") fails."""
    exports = Path(__file__).resolve().parent.parent / "examples" / "tracr"
    (tmp_path / "rd.yaml").write_text(
        f"model:\n  tracr: {exports / 'sort-unique.json'}\n  attention: hardmax\n"
        "domain:\n  strings: {max-length: 2}\n"
        f"properties:\n  - rasp-equivalence: {{program: {exports / 'sort-unique.json'}}}\n"
    )
    report = tmp_path / "r.json"
    arguments = ["check", str(tmp_path / "rd.yaml"), "--no-cache", "--json", str(report), "--certify"]
    assert CliRunner().invoke(main, [*arguments, str(tmp_path / "certs"), "-q"]).exit_code == 0
    data = json.loads(report.read_text())
    assert (data["results"][0]["reading"], data["results"][0]["as_run"]) == (
        "hardmax, tracr's intended computation",
        False,
    )
    assert audit_report(report).results[0].outcome == "ok"
    data["results"][0]["as_run"] = True
    report.write_text(json.dumps(data))
    assert audit_report(report).results[0].problems == [
        'reading: the report says "hardmax, tracr\'s intended computation" (as_run True), the model '
        '"hardmax, tracr\'s intended computation" (as_run False)'
    ]


@pytest.mark.parametrize("verdict", ["skipped", "unknown"])
def test_a_refutation_passed_off_as_skipped_fails(honest, verdict):
    """(c, disguised) the refuted result said to be skipped for a missing package (a skipped property alone exits 0;
    format 1 wrote it as unknown, method "not run", under --fail-on refuted): the spec loads here, so the check is
    re-run and refutes. (A spec that needs a package missing here too is accepted as not run, naming the package.)"""

    def edit(data):
        missing = {"package": "torch", "install": "pip install 'verify-tf[torch]'"}
        method = "needs torch" if verdict == "skipped" else "not run"
        data["results"][1].update(verdict=verdict, method=method, counterexample=None, counts_as=verdict, engine="none")
        data["results"][1]["statistics"] = {"missing": missing}
        counts = summary(1, 0, 0, 1, [])
        counts["counts"][verdict] += 1
        if verdict == "unknown":
            counts["unexpected"] = data["summary"]["unexpected"]
        data.update(fail_on="unknown" if verdict == "skipped" else "refuted", exit_code=0, summary=counts)

    code, _, audit = forged(honest, edit)
    assert code == 1 and audit.problems == []
    [problem] = audit.results[1].problems
    assert problem.startswith(f"verdict: the report says {verdict}, but re-checked within 60 s (engine enumerate)")


def test_an_honest_unknown_is_re_run_within_the_reports_budget(tmp_path):
    """The search engine samples inputs and never proves: ``holds`` (true) ends unknown whatever the budget, so its
    re-run is unknown again (nothing stronger than the report claims). The run's ``--timeout 30`` is recorded
    (``run.timeout``) and the re-run gets those 30 s; less than the spec's own 60 s, so the audit says partial."""
    (tmp_path / "s.yaml").write_text(SPEC.replace("engine: enumerate}", "engine: search}", 1))
    report = tmp_path / "r.json"
    arguments = ["check", str(tmp_path / "s.yaml"), "--no-cache", "--json", str(report), "--timeout", "30", "-q"]
    assert CliRunner().invoke(main, arguments).exit_code == 1  # holds unknown, fails refuted
    data = json.loads(report.read_text())
    assert [r["verdict"] for r in data["results"]] == ["unknown", "refuted"] and data["run"]["timeout"] == 30
    audit = audit_report(report)
    assert audit.problems == [] and [i.outcome for i in audit.results] == ["partial", "ok"]
    assert audit.results[0].checked == [
        "unknown: re-checked within 30 s (engine search): unknown again, nothing stronger than the report claims"
    ]
    assert audit.results[0].partial == [
        "unknown: the report's run gave it 30 s with engine search; the spec gives 60 s with engine search "
        "(--timeout, --engine)"
    ]
    result = CliRunner().invoke(main, ["audit", str(report), "--strict"])
    assert result.exit_code == 1 and result.output.strip().endswith("1 ok, 1 partial, 0 failed; the report: ok")

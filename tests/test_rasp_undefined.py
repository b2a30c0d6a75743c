"""A RASP program undefined on some inputs is an input error at export and at check time (the property's premise,
under its deadline: issue 37, item 4), naming the least such input, or those inputs are declared don't-care
(issue 26, item 4). Never exit 4.

``tests/data/tracr-undefined.json`` is tracr's compilation of ``categorical(Aggregate(Select(tokens, tokens, EQ),
tokens))`` over {a, b} up to length 3, exported with ``undefined='dont-care'``: on any input with a repeated
letter a query selects several equal tokens and RASP's mean of non-numbers is undefined (tracr's own
``rasp.evaluate`` raises "Only types int, bool, and float are supported for aggregation" there). The least such
input in shortlex order over (a, b) is ``aa``; ``a``, ``b``, ``ab`` and ``ba`` are defined (each token selects only
itself), by hand.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from verify_tf.reporting.report import combined_exit_code
from verify_tf.runner import Overrides, check_property
from verify_tf.spec import load_spec_text

ROOT = Path(__file__).resolve().parent.parent
EXPORT = ROOT / "tests" / "data" / "tracr-undefined.json"

SPEC = """name: undefined
model: {tracr: export.json, attention: hardmax}
domain: {strings: {max-length: 3}}
properties:
  - rasp-equivalence: {program: export.json%s}
"""


def with_policy(tmp_path: Path, policy: str | None) -> Path:
    document = json.loads(EXPORT.read_text())
    if policy is None:
        del document["undefined"]  # an export from before the field existed: the policy is "error"
    else:
        document["undefined"]["policy"] = policy
    (tmp_path / "export.json").write_text(json.dumps(document))
    return tmp_path


@pytest.mark.parametrize("policy", ["error", None])
def test_an_undefined_program_is_an_input_error_at_check_time_naming_the_least_input(tmp_path, policy):
    """The spec loads (the search is the property's premise, run at check time under its deadline); the check is
    ``error (input error)``, its detail located as a load error is (``file:line: key``, then the hint): line 5 is
    the spec's ``- rasp-equivalence: {program: ...}`` line (SPEC above), where ``program`` is written."""
    spec = load_spec_text(SPEC % "", "spec.yaml", with_policy(tmp_path, policy))
    verdict = check_property(spec, spec.properties[0], Overrides(engine="enumerate", timeout=60))
    assert (verdict.status, verdict.method) == ("error", "input error"), verdict.detail
    assert verdict.detail.startswith(
        "spec.yaml:5: properties[0].rasp-equivalence.program: the RASP program is undefined on 'aa' (aggregate "
        "'aggregate_1': the mean of a, a is undefined"
    )
    assert verdict.detail.endswith(
        "; hint: declare such inputs don't-care with undefined: dont-care (tracr promises nothing on them), or fix "
        "the program"
    )
    assert verdict.statistics["input_error"]["line"] == 5 and not verdict.traceback
    assert combined_exit_code([verdict], [None]) == 2  # the user's mistake, as at load (docs/cli.md)


def test_the_input_error_is_located_at_the_undefined_option_where_it_is_written(tmp_path):
    """``undefined: error`` written on its own line (line 7 of this spec): the mistake is located there."""
    text = SPEC.replace("  - rasp-equivalence: {program: export.json%s}\n", "") + (
        "  - rasp-equivalence:\n      program: export.json\n      undefined: error\n"
    )
    spec = load_spec_text(text, "spec.yaml", with_policy(tmp_path, "dont-care"))
    verdict = check_property(spec, spec.properties[0], Overrides(engine="interpret", timeout=60))
    assert verdict.detail.startswith("spec.yaml:7: properties[0].rasp-equivalence.undefined: the RASP program is ")


def test_the_solver_finds_the_least_input_where_a_length_is_too_long_to_scan(tmp_path, monkeypatch):
    import verify_tf.properties._rasp_undefined as rasp_undefined

    monkeypatch.setattr(rasp_undefined, "PREMISE_SCAN_INPUTS", 1)  # every length to z3, then letter by letter
    spec = load_spec_text(SPEC % "", "spec.yaml", with_policy(tmp_path, "error"))
    verdict = check_property(spec, spec.properties[0], Overrides(engine="enumerate", timeout=60))
    assert verdict.method == "input error" and "undefined on 'aa'" in verdict.detail, verdict.detail
    # and a defined domain passes: length 1 only ('a' and 'b' select themselves)
    spec = load_spec_text(SPEC.replace("max-length: 3", "max-length: 1") % "", "spec.yaml", tmp_path)
    verdict = check_property(spec, spec.properties[0], Overrides(engine="enumerate", timeout=60))
    assert verdict.status == "proved", verdict.detail


def test_the_timeout_bounds_the_scan(tmp_path, monkeypatch):
    """The scan runs under the property's deadline (``--timeout``): here the batched RASP evaluator is replaced by
    one that returns only once the deadline in force has passed (no deadline in force: it says so at once), so the
    check ends only if the scan checks the deadline between its chunks. The verdict is ``unknown`` saying that the
    time ran out in the premise, before any engine ran; the test waits on the verdict, not on the clock."""
    import verify_tf.rasp.batched as batched
    from verify_tf.work import deadline_now

    evaluated = threading.Event()
    original = batched.run_batched

    def slow(program, rows):
        deadline = deadline_now()
        if deadline is None:
            raise AssertionError("the scan runs with no deadline in force")
        evaluated.set()
        while not deadline.expired():
            threading.Event().wait(0.01)  # poll the deadline: this chunk "takes" the property's whole time
        return original(program, rows)

    monkeypatch.setattr(batched, "run_batched", slow)
    spec = load_spec_text(SPEC % "", "spec.yaml", with_policy(tmp_path, "error"))
    verdicts: list = []
    worker = threading.Thread(
        target=lambda: verdicts.append(
            check_property(spec, spec.properties[0], Overrides(engine="enumerate", timeout=1))
        )
    )
    worker.start()
    worker.join(120)  # a generous ceiling: without the deadline check the scan would go on
    assert verdicts and evaluated.is_set(), "no verdict within the ceiling"
    verdict = verdicts[0]
    assert verdict.status == "unknown", verdict.detail
    assert verdict.detail.startswith("timeout (1 s) searching for an input on which the RASP program is undefined: ")
    assert "the time ran out in rasp-equivalence's premise, before any engine ran" in verdict.detail


def test_the_solver_gets_a_share_of_what_is_left(tmp_path, monkeypatch):
    """z3's part of the search gets at most a quarter of what is left of the property's time (and at most 10 s):
    with 1 s left no query may be given more than 0.25 s (``PREMISE_SOLVER_SHARE``)."""
    import verify_tf.properties._rasp_undefined as rasp_undefined

    given: list[float] = []
    original = rasp_undefined._solve_undefined

    def recorded(program, domain, length, deadline):
        given.append(deadline.seconds)
        return original(program, domain, length, deadline)

    monkeypatch.setattr(rasp_undefined, "PREMISE_SCAN_INPUTS", 1)
    monkeypatch.setattr(rasp_undefined, "_solve_undefined", recorded)
    spec = load_spec_text(SPEC % "", "spec.yaml", with_policy(tmp_path, "error"))
    check_property(spec, spec.properties[0], Overrides(engine="enumerate", timeout=1))
    assert given and max(given) <= 0.25, given


@pytest.mark.parametrize("engine", ["enumerate", "interpret", "smt"])
@pytest.mark.parametrize("policy,option", [("dont-care", ""), ("error", ", undefined: dont-care")])
def test_dont_care_skips_the_undefined_inputs_and_proves_the_rest(tmp_path, engine, policy, option):
    spec = load_spec_text(SPEC % option, "spec.yaml", with_policy(tmp_path, policy))
    verdict = check_property(spec, spec.properties[0], Overrides(engine=engine, timeout=60))
    # defined inputs: a, b, ab, ba (4 of the 14 strings): the model outputs the token itself at each position
    assert verdict.status == "proved", verdict.detail


@pytest.mark.parametrize("engine", ["enumerate", "interpret", "smt"])
def test_an_undefined_input_the_premise_left_undecided_is_unknown(tmp_path, monkeypatch, engine):
    """The premise's search is bounded: what it leaves undecided, the engines meet. An undefined input there is
    unknown saying what to change, never error (exit 4, "internal error: RaspError")."""
    import verify_tf.properties._rasp_undefined as rasp_undefined

    monkeypatch.setattr(rasp_undefined, "PREMISE_SCAN_INPUTS", 0)  # no string scanned ...
    monkeypatch.setattr(rasp_undefined, "PREMISE_SOLVER_SECONDS", 0)  # ... and no time for z3: nothing decided
    spec = load_spec_text(SPEC % "", "spec.yaml", with_policy(tmp_path, "error"))
    verdict = check_property(spec, spec.properties[0], Overrides(engine=engine, timeout=60))
    assert verdict.status == "unknown", verdict.detail
    # enumerate and interpret meet 'aa' first (shortlex); smt's solver may pick any undefined input ('aa', 'bb', ...)
    assert re.search(r"the RASP program is undefined on '(aa|bb|\w\w\w)' \(aggregate 'aggregate_1'", verdict.detail)
    assert verdict.detail.endswith(
        "declare such inputs don't-care with undefined: dont-care (tracr promises nothing on them), or fix the program"
    )


def test_the_cli_exits_2_not_4(tmp_path):
    """The input error met at check time is printed on stderr as a load error is (with -q too) and exits 2."""
    base = with_policy(tmp_path, "error")
    (base / "spec.yaml").write_text(SPEC % "")
    result = subprocess.run(
        [sys.executable, "-m", "verify_tf", "check", "spec.yaml", "--no-cache", "-q"],
        cwd=base,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert "spec.yaml:5: properties[0].rasp-equivalence.program: the RASP program is undefined on 'aa'" in result.stderr
    assert "hint: declare such inputs don't-care" in result.stderr and "Traceback" not in result.stderr


def test_the_audit_says_an_input_error_fails_the_run_with_2(tmp_path):
    """``verify-tf audit`` of that run's report: the error result is not re-derived, and exits 2, not 4
    (reporting/audit.py; the report's exit_code, 2, recomputed)."""
    base = with_policy(tmp_path, "error")
    (base / "spec.yaml").write_text(SPEC % "")

    def cli(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "verify_tf", *args]
        return subprocess.run(command, cwd=base, capture_output=True, text=True, timeout=120)

    assert cli("check", "spec.yaml", "--no-cache", "-q", "--json", "r.json").returncode == 2
    audit = cli("audit", "r.json")
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "checked: error: nothing to re-derive (it fails the run: exit 2)" in audit.stdout
    assert "checked: exit_code 2 and the summary recomputed from the results" in audit.stdout


@pytest.mark.slow
def test_the_exporter_refuses_an_undefined_program_unless_told_dont_care(tmp_path):
    pytest.importorskip("tracr")
    from tracr.rasp import rasp

    from verify_tf.tracr_export import ExportError, compile_and_export

    program = rasp.categorical(rasp.Aggregate(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ), rasp.tokens))
    with pytest.raises(ExportError, match=r"undefined on '\[a, a\]' \(aggregate .*: the mean of a, a is undefined"):
        compile_and_export(program, {"a", "b"}, 3, tmp_path / "x.json")
    assert not (tmp_path / "x.json").exists()
    _, document = compile_and_export(program, {"a", "b"}, 3, tmp_path / "x.json", undefined="dont-care")
    assert document["undefined"] == {"policy": "dont-care", "least": ["a", "a"], "searched_up_to": 3}


def test_the_python_api_raises_the_input_error_at_check(tmp_path):
    """``verify_tf.api.check`` runs the premise too, within its timeout: a mistake in the options raises
    ``SpecError`` there (the API's way), keyed as ``options_of`` keys one."""
    from verify_tf.api import SpecError, check

    spec = load_spec_text(SPEC % ", undefined: dont-care", "spec.yaml", with_policy(tmp_path, "error"))
    program = tmp_path / "export.json"
    with pytest.raises(SpecError) as error:
        check(spec.model, spec.arithmetic, spec.domain, "rasp-equivalence", {"program": program}, engine="interpret")
    assert error.value.path == "rasp-equivalence.program" and "undefined on 'aa'" in error.value.message
    verdict = check(
        spec.model, spec.arithmetic, spec.domain, "rasp-equivalence", {"program": program, "undefined": "dont-care"}
    )
    assert verdict.status == "proved", verdict.detail  # a, b, ab, ba: as the dont-care test above

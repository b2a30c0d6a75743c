"""A RASP program undefined on some inputs is an input error at export and at load, naming the least such input,
or those inputs are declared don't-care (issue 26, item 4). Never exit 4.

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
from pathlib import Path

import pytest

from verify_tf.runner import Overrides, check_property
from verify_tf.schema.errors import SpecError
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
def test_an_undefined_program_is_refused_at_load_naming_the_least_input(tmp_path, policy):
    base = with_policy(tmp_path, policy)
    with pytest.raises(SpecError) as error:
        load_spec_text(SPEC % "", "spec.yaml", base)
    assert error.value.line == 5 and error.value.path == "properties[0].rasp-equivalence.program"
    assert "the RASP program is undefined on 'aa' (aggregate 'aggregate_1': the mean of a, a is undefined" in str(
        error.value
    )
    assert "undefined: dont-care" in error.value.hint


def test_the_solver_finds_the_least_input_where_a_length_is_too_long_to_scan(tmp_path, monkeypatch):
    import verify_tf.properties._rasp_undefined as rasp_undefined

    monkeypatch.setattr(rasp_undefined, "LOAD_SCAN_INPUTS", 1)  # every length to z3, then letter by letter
    with pytest.raises(SpecError, match="undefined on 'aa'"):
        load_spec_text(SPEC % "", "spec.yaml", with_policy(tmp_path, "error"))
    # and a defined domain passes: length 1 only ('a' and 'b' select themselves)
    spec = load_spec_text(SPEC.replace("max-length: 3", "max-length: 1") % "", "spec.yaml", tmp_path)
    assert spec.properties[0].options.program.name == "export.json"


@pytest.mark.parametrize("engine", ["enumerate", "interpret", "smt"])
@pytest.mark.parametrize("policy,option", [("dont-care", ""), ("error", ", undefined: dont-care")])
def test_dont_care_skips_the_undefined_inputs_and_proves_the_rest(tmp_path, engine, policy, option):
    spec = load_spec_text(SPEC % option, "spec.yaml", with_policy(tmp_path, policy))
    verdict = check_property(spec, spec.properties[0], Overrides(engine=engine, timeout=60))
    # defined inputs: a, b, ab, ba (4 of the 14 strings): the model outputs the token itself at each position
    assert verdict.status == "proved", verdict.detail


@pytest.mark.parametrize("engine", ["enumerate", "interpret", "smt"])
def test_an_undefined_input_the_load_time_search_left_is_unknown_at_check_time(tmp_path, monkeypatch, engine):
    """The load-time search is bounded (loading has no deadline): what it leaves undecided, the check meets. An
    undefined input there is unknown saying what to change, never error (exit 4, "internal error: RaspError")."""
    import verify_tf.properties._rasp_undefined as rasp_undefined

    monkeypatch.setattr(rasp_undefined, "LOAD_SCAN_INPUTS", 0)  # no string scanned at load ...
    monkeypatch.setattr(rasp_undefined, "LOAD_SOLVER_SECONDS", 0)  # ... and no time for z3: nothing decided
    spec = load_spec_text(SPEC % "", "spec.yaml", with_policy(tmp_path, "error"))
    verdict = check_property(spec, spec.properties[0], Overrides(engine=engine, timeout=60))
    assert verdict.status == "unknown", verdict.detail
    # enumerate and interpret meet 'aa' first (shortlex); smt's solver may pick any undefined input ('aa', 'bb', ...)
    assert re.search(r"the RASP program is undefined on '(aa|bb|\w\w\w)' \(aggregate 'aggregate_1'", verdict.detail)
    assert verdict.detail.endswith(
        "declare such inputs don't-care with undefined: dont-care (tracr promises nothing on them), or fix the program"
    )


def test_the_cli_exits_2_not_4(tmp_path):
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

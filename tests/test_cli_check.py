"""`verify-tf check` for CI: --junit, --json, -j N, --fail-on, --unknown-as, exit codes; lazy torch; group mounts."""

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from verify_tf.cli import app as cli_app, main
from verify_tf.reporting.report import combined_exit_code
from verify_tf.verdict import Verdict

PROVED = """
model:
  tokens: {grid: 1}
  layers:
    - attention:
        heads:
          - {scoring: hardmax, query: [[1]], key: [[1]], value: [[1]], output: [[1]]}
  readout: [1]
arithmetic: exact
domain:
  grid: {step: 1/4}
  length: 3
properties:
  - permutation-equivariance: {}
"""

REFUTED = """
model:
  tokens: {grid: 1}
  positional-encoding: [[0], [1]]
  layers:
    - attention:
        heads:
          - {scoring: uniform, query: [[0]], key: [[0]], value: [[1]], output: [[1]]}
      feed-forward: {w1: [[1]], b1: [-1], w2: [[2]], b2: [0]}
  readout: [1]
arithmetic: exact
domain:
  grid: {values: [0, 1]}
  length: 2
  distinct-tokens: true   # the first witness is then X = [0, 1], two different inputs to align
properties:
  - permutation-equivariance: {engine: interpret}   # pinned: witness order differs between engines
  - permutation-equivariance: {name: on the readout, on: readout}
"""


@pytest.fixture
def specs(tmp_path):
    paths = {}
    for name, text in (("proved", PROVED), ("refuted", REFUTED)):
        paths[name] = tmp_path / f"{name}.yaml"
        paths[name].write_text(text)
    return paths


def run(*args):
    return CliRunner(env={"COLUMNS": "200"}).invoke(main, ["check", "--no-cache", *map(str, args)])


def test_junit_and_json_reports(specs, tmp_path):
    junit, report = tmp_path / "reports" / "j.xml", tmp_path / "reports" / "r.json"  # folders are created
    result = run(specs["proved"], specs["refuted"], "--junit", junit, "--json", report)
    assert result.exit_code == 1, result.output
    root = ET.parse(junit).getroot()
    assert (root.get("tests"), root.get("failures")) == ("3", "2")
    failure = root.find("testsuite[2]/testcase[1]/failure")
    assert failure.get("message") == (
        "refuted: X = [0, 1], swap positions 0,1: at position 0 f(τX) = [4] but τf(X) = [7]"
    )
    data = json.loads(report.read_text())
    assert data["format"] == "verify-tf-report/2" and data["exit_code"] == 1 and data["fail_on"] == "unknown"
    statuses = [(r["property"], r["verdict"], r["index"], r["counts_as"]) for r in data["results"]]
    assert statuses == [
        ("permutation-equivariance", "proved", 0, "proved"),
        ("permutation-equivariance", "refuted", 0, "refuted"),
        ("on the readout", "refuted", 1, "refuted"),
    ]
    # the property's kind (its registry name) beside the label the spec gave it (docs/cli.md)
    assert [r["kind"] for r in data["results"]] == ["permutation-equivariance"] * 3
    entry = data["results"][1]
    assert Path(entry["spec_resolved"]) == specs["refuted"].resolve() and len(entry["spec_sha256"]) == 64
    assert entry["counterexample"]["permuted_input"] == [["1"], ["0"]]


def test_unknown_exit_codes_fail_on_and_junit(specs, tmp_path):
    junit = tmp_path / "j.xml"
    # a timeout far below one evaluation: the exhaustive check gives up at once -> unknown
    result = run(specs["proved"], "--timeout", "1e-9", "--junit", junit)
    assert result.exit_code == 3, result.output
    assert ET.parse(junit).getroot().find("testsuite/testcase/skipped") is not None
    assert run(specs["proved"], "--timeout", "1e-9", "--fail-on", "refuted").exit_code == 0
    result = run(specs["proved"], "--timeout", "1e-9", "--junit", junit, "--unknown-as", "error")
    assert result.exit_code == 3 and ET.parse(junit).getroot().get("errors") == "1"
    # refuted still fails under --fail-on refuted
    assert run(specs["refuted"], "--fail-on", "refuted").exit_code == 1


def test_expected_unknown_counts_as_success(specs):
    specs["proved"].write_text(PROVED.replace("{}", "{expect: unknown}"))
    assert run(specs["proved"], "--timeout", "1e-9").exit_code == 0
    assert run(specs["proved"]).exit_code == 1  # proved, but unknown was expected: a contradiction


def test_combined_exit_code_rule():
    proved, refuted = Verdict("p", "proved", "e"), Verdict("p", "refuted", "e", counterexample={"summary": "s"})
    unknown, error = Verdict("p", "unknown", "e"), Verdict("p", "error", "e")
    assert combined_exit_code([proved, unknown], [None, None]) == 3
    assert combined_exit_code([proved, unknown], [None, None], "refuted") == 0
    assert combined_exit_code([refuted, unknown], [None, None], "refuted") == 1
    assert combined_exit_code([error, unknown], [None, None], "refuted") == 4
    assert combined_exit_code([refuted, unknown], ["refuted", "unknown"]) == 0
    assert combined_exit_code([unknown], ["proved"]) == 3  # unmet but not contradicted
    # a property skipped for a missing package (issue 39): passes unless --fail-on skipped, then counts as unknown
    skipped = Verdict("p", "skipped", "none", method="needs torch")
    assert combined_exit_code([proved, skipped], [None, "proved"]) == 0
    assert combined_exit_code([proved, skipped], [None, "proved"], "skipped") == 3
    assert combined_exit_code([proved, skipped], [None, None], "refuted") == 0
    assert combined_exit_code([refuted, skipped], [None, None], "skipped") == 1  # a refutation still wins
    assert combined_exit_code([unknown, skipped], [None, None], "skipped") == 3
    # an input error met at check time (a property's premise, issue 37): 2, as at load; only an internal error
    # beats it (docs/cli.md: 4 beats 2 beats 1 beats 3 beats 0), under every --fail-on
    mistake = Verdict("p", "error", "e", method="input error")
    assert combined_exit_code([proved, mistake], [None, "proved"]) == 2
    assert combined_exit_code([refuted, unknown, mistake], [None, None, None]) == 2
    assert combined_exit_code([unknown, mistake], [None, None], "refuted") == 2
    assert combined_exit_code([error, mistake], [None, None]) == 4
    with pytest.raises(ValueError):
        combined_exit_code([proved], [None], "never")


def test_parallel_jobs_give_the_same_combined_table(specs, tmp_path):
    sequential, parallel = tmp_path / "s.json", tmp_path / "p.json"
    run(specs["refuted"], specs["proved"], "--json", sequential)
    result = run(specs["refuted"], specs["proved"], "-j", "2", "--json", parallel)
    assert result.exit_code == 1
    lines = result.output.splitlines()
    rows = [line for line in lines if line.startswith((" ✓ ", " ✗ "))]
    assert len(rows) == 3 and "on the readout" in rows[1] and lines.index(str(specs["proved"])) > lines.index(rows[1])

    def essentials(path):
        return [
            (r["spec"], r["index"], r["verdict"], r["detail"], r["counterexample"])
            for r in json.loads(path.read_text())["results"]
        ]

    assert essentials(parallel) == essentials(sequential)


def test_input_errors_exit_2_before_any_check(specs, tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("model: {random: {seed: -1}}\nproperties: [permutation-equivariance]\n")
    result = run(specs["proved"], broken, "-j", "2")
    assert result.exit_code == 2 and "broken.yaml:1" in result.output


def test_torch_is_not_imported_by_the_cli_or_a_plain_check(specs):
    code = (
        "import sys\nfrom click.testing import CliRunner\nfrom verify_tf.cli import main\n"
        "assert CliRunner().invoke(main, ['--help']).exit_code == 0\n"
        f"r = CliRunner().invoke(main, ['check', '--no-cache', {str(specs['proved'])!r}])\n"
        "assert r.exit_code == 0, r.output\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_optional_groups_tolerate_only_their_own_absence(tmp_path, monkeypatch):
    assert cli_app._import_optional("verify_tf.no_such_package.cli", "group") is None
    assert cli_app._import_optional("verify_tf.crasp.no_such_cli", "group") is None
    package = tmp_path / "vt_fake_group"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "cli.py").write_text("import vt_missing_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="vt_missing_dependency_xyz"):
        cli_app._import_optional("vt_fake_group.cli", "group")
    (package / "broken.py").write_text("raise ImportError('a real import error')\n")
    with pytest.raises(ImportError, match="a real import error"):
        cli_app._import_optional("vt_fake_group.broken", "group")
    (package / "needs_torch.py").write_text("raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
    with pytest.raises(
        click.UsageError, match=r'needs PyTorch, which is not installed: .*pip install -e "\.\[torch\]" in a checkout'
    ):
        cli_app._import_optional("vt_fake_group.needs_torch", "group")  # an optional dependency: the extra is named


def test_help_lists_optional_groups_without_importing_them():
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    for command in ("check", "explain", "crasp", "run", "schema", "init", "properties"):
        assert f"  {command}" in result.output
    assert "--junit" in CliRunner().invoke(main, ["check", "--help"]).output


def test_every_engine_a_spec_may_name_is_a_cli_choice_and_has_a_driver():
    """One list of engines (the registry): `--engine split` was refused by a hand-written copy of it."""
    from verify_tf.engines import names
    from verify_tf.spec.loader import ENGINES

    assert set(ENGINES) - {"auto"} == set(names())
    result = CliRunner().invoke(main, ["check", "--help"])
    for engine in ENGINES:
        assert engine in result.output, engine

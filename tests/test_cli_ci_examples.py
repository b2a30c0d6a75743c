"""The shipped CI integrations run: the GitHub Actions workflow's `verify` and `explain` steps and the
pre-commit hook, each executed with exactly the command line its YAML file holds, on the shipped specs."""

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import tomllib
import yaml

pytestmark = pytest.mark.slow  # end to end: the CI examples through the CLI

ROOT = Path(__file__).resolve().parent.parent
CI = ROOT / "examples" / "ci"


@pytest.fixture
def project(tmp_path):
    """A user's project: the shipped specs in specs/, and `verify-tf` on PATH as this interpreter's CLI."""
    shutil.copytree(CI / "specs", tmp_path / "specs")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "verify-tf"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m verify_tf "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    # pip: records what a step installs (installing for real needs the network), then succeeds
    pip = bin_dir / "pip"
    pip.write_text(f'#!/bin/sh\necho "$@" >> {shlex.quote(str(tmp_path / "pip-calls.txt"))}\n')
    pip.chmod(pip.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "COLUMNS": "160"}
    return tmp_path, env


def workflow_steps() -> dict:
    workflow = yaml.safe_load((CI / "verify-tf.yml").read_text())
    return {step["id"]: step for step in workflow["jobs"]["verify"]["steps"] if "id" in step}


def bash(command: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_workflow_verify_and_explain_steps(project):
    cwd, env = project
    steps = workflow_steps()
    verify = steps["verify"]["run"]
    assert verify.startswith("verify-tf check specs/*.yaml")
    result = bash(verify, cwd, env)
    assert result.returncode == 0, result.stdout + result.stderr
    junit = ET.parse(cwd / "verify-tf-junit.xml").getroot()
    assert (junit.get("tests"), junit.get("failures"), junit.get("errors")) == ("2", "0", "0")
    names = [case.get("name") for case in junit.iter("testcase")]
    assert names == ["permutation-equivariance [0]", "positions break equivariance [0]"]
    report = json.loads((cwd / "verify-tf-report.json").read_text())
    assert [r["verdict"] for r in report["results"]] == ["proved", "refuted"]

    # the next run is served by the proof cache the workflow restores
    again = bash(verify, cwd, env)
    assert again.returncode == 0 and sum(line.endswith(" cached") for line in again.stdout.splitlines()) == 2

    # a regression: the model now breaks the proved property -> the job fails, JUnit has the witness
    proved = cwd / "specs" / "equivariance.yaml"
    proved.write_text(proved.read_text().replace("positional: standard", "positional: rpe, max-length: 3"))
    failed = bash(verify, cwd, env)
    assert failed.returncode == 1
    failure = next(ET.parse(cwd / "verify-tf-junit.xml").getroot().iter("failure"))
    assert re.match(r"refuted \(expected proved\): X = \[\[", failure.get("message"))
    assert steps["explain"]["if"].startswith("failure()")
    explained = bash(steps["explain"]["run"], cwd, env)
    assert explained.returncode == 0, explained.stderr
    page = (cwd / "verify-tf-counterexamples.html").read_text()
    assert "equivariance.yaml: permutation-equivariance — refuted" in page
    assert "positions.yaml: positions break equivariance — refuted" in page


@pytest.mark.slow
def test_workflow_certify_step(project):
    pytest.importorskip("cvc5")
    pytest.importorskip("pysat")
    cwd, env = project
    step = workflow_steps()["certify"]
    assert "--certify" in step["run"] and "verify-tf audit" in step["run"]
    result = bash(step["run"], cwd, env)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((cwd / "verify-tf-certified.json").read_text())
    proved = [r for r in report["results"] if r["verdict"] == "proved"]
    assert proved and all(r["statistics"]["certificate"]["complete"] for r in proved)
    assert "2 results: 2 ok, 0 partial, 0 failed" in result.stdout
    # the certify extra from the verify-tf checkout, before certifying
    assert (cwd / "pip-calls.txt").read_text().splitlines() == ["install ./.verify-tf[certify]"]
    assert "certify" in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def test_workflow_installs_verify_tf_from_its_repository(project):
    """No package index has verify-tf: the workflow checks its repository out and installs the lean core from
    there (issue 27: the example said `pip install verify-tf`)."""
    cwd, env = project
    workflow = yaml.safe_load((CI / "verify-tf.yml").read_text())
    steps = workflow["jobs"]["verify"]["steps"]
    checkout = next(step for step in steps if step.get("name") == "Check out verify-tf")
    assert checkout["uses"].startswith("actions/checkout@") and checkout["with"]["path"] == ".verify-tf"
    install = workflow_steps()["install"]
    assert steps.index(checkout) < steps.index(install) < steps.index(workflow_steps()["verify"])
    result = bash(install["run"], cwd, env)
    assert result.returncode == 0, result.stderr
    calls = (cwd / "pip-calls.txt").read_text().splitlines()
    assert calls == [
        "install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu",  # a CPU build, not CUDA
        "install ./.verify-tf",
    ]


def test_pre_commit_hook(project):
    cwd, env = project
    config = yaml.safe_load((CI / "pre-commit-config.yaml").read_text())
    [hook] = config["repos"][0]["hooks"]
    assert hook["language"] == "system"
    specs = sorted(p.relative_to(cwd).as_posix() for p in (cwd / "specs").glob("*"))
    staged = [path for path in specs if re.search(hook["files"], path)]
    assert staged == ["specs/equivariance.yaml", "specs/positions.yaml"]
    assert not re.search(hook["files"], "models/tiny.pt") and not re.search(hook["files"], "README.md")
    # pre-commit runs: entry + args + the staged files that match `files`
    command = shlex.split(hook["entry"]) + list(hook.get("args", [])) + staged
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    positions = cwd / "specs" / "positions.yaml"
    positions.write_text(positions.read_text().replace("expect: refuted", "expect: proved"))
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1 and "expected proved" in result.stdout


def test_workflow_cache_is_per_branch_and_signed():
    """The proof cache is keyed by the branch and the specs' and models' digests and never restored from another
    branch (issue 26: `restore-keys: verify-tf-` let any branch's cache supply it); entries are signed with a
    repository secret (docs/ci.md, the cache's trust model)."""
    workflow = yaml.safe_load((CI / "verify-tf.yml").read_text())
    job = workflow["jobs"]["verify"]
    assert job["env"]["VERIFY_TF_CACHE_SECRET"] == "${{ secrets.VERIFY_TF_CACHE_SECRET }}"
    [cache] = [step for step in job["steps"] if step.get("uses", "").startswith("actions/cache")]
    prefix = "verify-tf:${{ github.ref }}:"  # the full ref: branch "main" and tag "main" have other keys
    assert cache["with"]["key"] == prefix + "${{ hashFiles('specs/**', 'models/**') }}"
    # a restore key is a prefix: it must end in a character no branch name holds (git check-ref-format: ":")
    for restore in str(cache["with"].get("restore-keys", "")).splitlines():
        assert restore == prefix

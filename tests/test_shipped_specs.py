"""Every file in specs/ loads, runs under `verify-tf check`, and gets the verdict it states with `expect:`."""

import subprocess
import sys
from pathlib import Path

import pytest

from helpers import needs_torch, requires_torch, torch_installed
from verify_tf.runner import Overrides, check_property
from verify_tf.spec import load_spec

pytestmark = pytest.mark.slow  # end to end: every shipped spec through the runner and the CLI

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted((ROOT / "specs").glob("*.yaml"))


def test_specs_are_shipped():
    assert len(SPECS) >= 4


@pytest.mark.parametrize(
    "path", [pytest.param(p, marks=requires_torch) if needs_torch(p) else p for p in SPECS], ids=[p.name for p in SPECS]
)
def test_shipped_spec_gets_its_expected_verdict(path: Path):
    spec = load_spec(path)
    for prop in spec.properties:
        assert prop.expect is not None, f"{path.name}: property {prop.label} states no `expect:`"
        verdict = check_property(spec, prop, Overrides())
        assert verdict.status == prop.expect, f"{path.name}: {prop.label}: {verdict.status}: {verdict.detail}"
        if verdict.status == "refuted":
            assert verdict.counterexample and verdict.counterexample.get("summary")


def test_cli_exit_codes_follow_expectations(tmp_path: Path):
    refuted = ROOT / "specs" / "equivariance-positions-refuted.yaml"
    ok = subprocess.run(
        [sys.executable, "-m", "verify_tf", "check", "--no-cache", str(refuted)], capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr  # refuted as expected -> success
    bare = tmp_path / "bare.yaml"
    bare.write_text(refuted.read_text().replace("{expect: refuted}", "{}"))
    result = subprocess.run(
        [sys.executable, "-m", "verify_tf", "check", "--no-cache", str(bare)], capture_output=True, text=True
    )
    assert result.returncode == 1  # refuted, no expectation -> exit 1
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(refuted.read_text().replace("{expect: refuted}", "{expect: proved}"))
    result = subprocess.run(
        [sys.executable, "-m", "verify_tf", "check", "--no-cache", str(wrong)], capture_output=True, text=True
    )
    assert result.returncode == 1  # contradicts the expectation
    broken = tmp_path / "broken.yaml"
    broken.write_text("model: [\n")
    result = subprocess.run(
        [sys.executable, "-m", "verify_tf", "check", "--no-cache", str(broken)], capture_output=True, text=True
    )
    assert result.returncode == 2 and "broken.yaml:2: malformed YAML" in result.stderr
    assert "Traceback" not in result.stderr


VERDICT_TABLE = ROOT / "tests" / "data" / "shipped-verdicts.json"


def test_every_shipped_verdict_matches_the_recorded_table():
    """Today's verdict for every property of every shipped spec, recorded before the engine-drivers refactor
    (tests/data/shipped-verdicts.json says when and how). A spec or property added later is added to the table
    deliberately; a verdict that changes fails here even if someone also edits its `expect:`."""
    import json

    recorded = {(row["spec"], row["index"]): row for row in json.loads(VERDICT_TABLE.read_text())["verdicts"]}
    seen = set()
    for path in SPECS:
        if needs_torch(path) and not torch_installed():  # loading it needs torch: its rows are taken as seen
            seen |= {key for key in recorded if key[0] == path.name}
            continue
        spec = load_spec(path)
        for prop in spec.properties:
            key = (path.name, prop.index)
            assert key in recorded, f"{path.name} property {prop.index} ({prop.label}) is not in {VERDICT_TABLE.name}"
            assert recorded[key]["property"] == prop.label
            assert prop.expect == recorded[key]["verdict"], f"{path.name}: {prop.label}: expect changed"
            seen.add(key)
    assert seen == set(recorded), f"recorded but no longer shipped: {sorted(set(recorded) - seen)}"

"""The CLI's budget and input-error rules (issue 12): positive timeouts only, spec mistakes are exit 2 with
file:line: key, --device cuda without a GPU is one input error everywhere, progress lines in CI logs."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from helpers import torch_installed
from verify_tf.batched import cuda_available
from verify_tf.cli import main

ROOT = Path(__file__).resolve().parent.parent
GRID_MODEL = """\
model:
  random: {seed: 1, width: 1}
domain: {grid: {step: 1/2}, length: 2}
properties:
"""
CRASP_ON_GRID = GRID_MODEL + f"  - crasp-equivalence: {{program: {ROOT / 'examples' / 'crasp' / 'L1.cr'}}}\n"
CM_ON_STRINGS = """\
model:
  random: {seed: 1, width: 1, alphabet: [a, b]}
domain: {strings: {max-length: 2}}
properties:
  - contextual-mapping: {}
"""
OTHER_WIDTH = """\
model:
  random: {seed: 1, width: 1, alphabet: [a, b]}
domain: {strings: {max-length: 2}}
properties:
  - equivalent-to:
      on: output
      model: {random: {seed: 2, width: 2, alphabet: [a, b]}}
"""


def run(*args, env=None):
    return CliRunner(env={"COLUMNS": "200", **(env or {})}).invoke(main, [*map(str, args)])


def spec_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("value", ["0", "-5"])
def test_timeout_must_be_positive(tmp_path, value):
    result = run(
        "check",
        "--no-cache",
        spec_file(tmp_path, GRID_MODEL + "  - permutation-equivariance: {}\n"),
        "--timeout",
        value,
    )
    assert result.exit_code == 2
    assert "Invalid value for '--timeout'" in result.output and "is not in the range 0<x<=1000000" in result.output


@pytest.mark.parametrize(
    "text, located, hint",
    [
        (
            CRASP_ON_GRID,
            "spec.yaml:5: properties[0].crasp-equivalence: crasp-equivalence needs an alphabet model "
            "and a strings domain",
            "domain: {strings:",
        ),
        (
            CM_ON_STRINGS,
            "spec.yaml:5: properties[0].contextual-mapping: contextual-mapping needs a grid domain",
            "domain: {grid:",
        ),
        (
            OTHER_WIDTH,
            "spec.yaml:6: properties[0].equivalent-to.on: on: output compares streams of width 1 and 2",
            "use on: readout",
        ),
    ],
)
def test_a_property_that_does_not_fit_is_a_located_input_error(tmp_path, text, located, hint):
    result = run("check", "--no-cache", spec_file(tmp_path, text))
    assert result.exit_code == 2, result.output
    assert located in result.output and "\n  hint: " in result.output and hint in result.output
    assert "Traceback" not in result.output


@pytest.mark.skipif(cuda_available(), reason="this machine has a CUDA device")
def test_device_cuda_without_a_gpu_is_the_same_input_error_in_check_and_experiment(tmp_path):
    checked = run(
        "check",
        "--no-cache",
        spec_file(tmp_path, GRID_MODEL + "  - permutation-equivariance: {}\n"),
        "--device",
        "cuda",
    )
    experiment = run("experiment", ROOT / "examples" / "experiments" / "luo-position-index.yaml", "--device", "cuda")
    if not torch_installed():  # without torch both say so first, with the checkout form of the extra (issue 39)
        assert experiment.exit_code == 2 and 'pip install -e ".[torch]" in a checkout' in experiment.output
        assert checked.exit_code == 2 and "--device cuda needs PyTorch, which is not installed" in checked.output
        assert 'pip install -e ".[torch]" in a checkout' in checked.output and "--device auto" in checked.output
        return
    for result in (checked, experiment):
        assert result.exit_code == 2
        assert "--device cuda: no CUDA device is available here" in result.output
        assert "use --device auto" in result.output


@pytest.mark.slow
def test_progress_lines_in_logs_name_the_phase(tmp_path):
    """Not a terminal (CliRunner): a plain line per interval, naming what runs, also while one query runs."""
    spec = spec_file(tmp_path, (ROOT / "examples" / "budgets" / "two-layer-softmax.yaml").read_text())
    result = run("check", "--no-cache", spec, "--timeout", "2.5", env={"VERIFY_TF_PROGRESS_SECONDS": "0.5"})
    lines = [line for line in result.output.splitlines() if line.startswith("[")]
    assert any("spec.yaml: permutation-equivariance: encoding length 4, swap" in line for line in lines), lines

"""The prefix-labels experiment: train a causal model on every prefix of random strings labelled by a C-RASP
program, write it and its check spec, and check it with the counting engine (verify_tf/experiments/prefix_labels.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="needs the torch extra")
from click.testing import CliRunner

from helpers import verdict
from verify_tf.cli.experiment import experiment
from verify_tf.crasp import load_program
from verify_tf.experiments.prefix_labels import encode, sample_strings
from verify_tf.experiments.spec import parse_experiment
from verify_tf.schema.errors import SpecError
from verify_tf.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
MAJORITY = ROOT / "examples" / "crasp" / "majority.cr"

MICRO = f"""\
experiment: prefix-labels
program: {MAJORITY}
seed: 1
presets:
  small: {{train-lengths: [1, 6], test-lengths: [7, 9], width: 4, heads: 1, layers: 1, ffn-width: 4, steps: 30,
          batch: 8, train-size: 64, test-size: 16, check-length: 6, check-seconds: 30}}
"""


@pytest.fixture(autouse=True)
def one_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def test_every_prefix_is_labelled_by_the_program() -> None:
    """majority.cr on "aab", "bab" and "": labels by hand (strictly more a's than b's after each letter)."""
    program = load_program(MAJORITY)
    tokens, labels, mask = encode(["aab", "bab", ""], ("a", "b"), program)
    assert tokens.tolist() == [[0, 1, 1, 2], [0, 2, 1, 2], [0, 1, 1, 1]]  # BOS = 0, a = 1, b = 2, padded with a
    assert labels.tolist() == [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    assert mask.tolist() == [[True, True, True], [True, True, True], [False, False, False]]
    words = sample_strings(("a", "b"), 2, 5, 50, torch.Generator().manual_seed(0))
    assert all(2 <= len(w) <= 5 and set(w) <= {"a", "b"} for w in words) and len(set(words)) > 10


def test_a_missing_program_is_a_located_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"program.*cannot read|program.*invalid"):
        parse_experiment("experiment: prefix-labels\nprogram: nowhere.cr\n", str(tmp_path / "e.yaml"))


@pytest.mark.slow
def test_a_micro_run_writes_the_model_and_its_check_and_agrees_with_enumeration(tmp_path: Path) -> None:
    """30 steps of training (evidence of nothing), then the written spec: the model imported from the state dict,
    quantized to 16/8, against majority.cr on every prefix. The experiment's counting verdict on the domain is the
    one string enumeration gives on the same spec, with the same least string."""
    spec_file = tmp_path / "micro.yaml"
    spec_file.write_text(MICRO)
    result = CliRunner().invoke(experiment, [str(spec_file), "--out", str(tmp_path / "out"), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    written = json.loads((tmp_path / "out" / "micro.json").read_text())
    assert written["experiment"] == "prefix-labels" and written["alphabet"] == ["a", "b"]
    assert Path(written["model_file"]).is_file()
    checks = {check["property"]: check for check in written["checks"]}
    assert set(checks) == {"crasp-equivalence", "every length"}
    spec = load_spec(Path(written["check_spec"]))
    bounded = spec.properties[0]
    options = {"program": MAJORITY, "mode": "prefix", "threshold": bounded.options.threshold}
    by_strings = verdict(spec.model, spec.arithmetic, spec.domain, "crasp-equivalence", options, engine="enumerate")
    assert checks["crasp-equivalence"]["verdict"].split()[0] == by_strings.status
    if by_strings.status == "refuted":
        assert checks["crasp-equivalence"]["witness"] == by_strings.counterexample["string"]
    assert checks["every length"]["verdict"].split()[0] in ("proved", "refuted", "unknown")

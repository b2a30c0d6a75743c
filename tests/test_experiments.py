"""Tests of the float training experiments: the torch modules' positional behaviour (Luo et al. 2022),
the experiment spec's located errors, the outputs of micro training runs and their reproducibility."""

from __future__ import annotations

import importlib.util
import json
import math
import re

import pytest

torch = pytest.importorskip("torch", reason="needs the torch extra")
from click.testing import CliRunner

from verify_tf.cli.experiment import experiment
from verify_tf.crasp import in_lk
from verify_tf.experiments.common import train
from verify_tf.experiments.luo import epsilon_star
from verify_tf.experiments.modules import Attention, TinyTransformer
from verify_tf.experiments.runner import TIMING_KEYS, run_experiment, write_outputs
from verify_tf.experiments.spec import parse_experiment
from verify_tf.experiments.training import CheckpointSelector
from verify_tf.experiments.yang import encode, sample_lk_words
from verify_tf.schema.errors import SpecError

HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None  # the optional `plots` extra

LUO_MICRO = """\
experiment: luo-position-index
tasks: [position-index]
variants: [rpe, urpe]
presets:
  small: {length: 8, vocab: 4, width: 8, heads: 2, layers: 1, ffn-width: 8, steps: 6, batch: 8,
          eval-every: 3, eval-samples: 16}
"""

YANG_MICRO = """\
experiment: yang-lk-depth
seed: 3
presets:
  small: {languages: [2, 3], depths: [1, 2], train-lengths: [3, 6], test-lengths: [7, 9], width: 8,
          ffn-width: 8, steps: 5, batch: 4, train-size: 16, test-size: 8}
"""


@pytest.fixture(autouse=True)
def one_thread():
    """The CI machine has 2 shared cores."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def _constant_tokens(vocab: int, length: int) -> torch.Tensor:
    return torch.arange(vocab)[:, None].expand(vocab, length)


def _randomise_relative_tables(model: torch.nn.Module, generator: torch.Generator) -> None:
    """Random RPE biases (and URPE factors): position-blindness must not depend on their values being zero."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith(("rpe_bias", "urpe_c")):
                parameter.copy_(torch.randn(parameter.shape, generator=generator, dtype=parameter.dtype) * 2)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("layernorm", ["none", "pre", "post"])
@pytest.mark.parametrize("causal", [False, True])
def test_rpe_transformer_is_position_blind_on_constant_inputs(seed, layernorm, causal):
    # Luo et al. 2022, Thm 1: softmax rows are stochastic, so every position averages identical vectors.
    torch.manual_seed(seed)
    model = TinyTransformer(
        vocab=5,
        width=12,
        heads=3,
        layers=3,
        ffn_width=16,
        outputs=4,
        positional="rpe",
        causal=causal,
        max_length=9,
        layernorm=layernorm,
    ).double()
    _randomise_relative_tables(model, torch.Generator().manual_seed(seed))
    with torch.no_grad():
        outputs = model(_constant_tokens(5, 9))
    assert outputs.std(dim=1).max() > 0  # the model is not trivially constant across tokens...
    spread = (outputs - outputs[:, :1]).abs().max()
    assert spread <= 1e-6  # ...but identical across positions (float64 rounding only)


def test_ape_and_urpe_are_not_position_blind():
    torch.manual_seed(0)
    for positional in ("ape", "urpe"):
        model = TinyTransformer(
            vocab=3, width=8, heads=2, layers=1, ffn_width=8, outputs=2, positional=positional, max_length=6
        ).double()
        if positional == "urpe":
            _randomise_relative_tables(model, torch.Generator().manual_seed(1))
        with torch.no_grad():
            outputs = model(_constant_tokens(3, 6))
        assert (outputs - outputs[:, :1]).abs().max() > 1e-3, positional


def test_urpe_with_lower_triangular_c_counts_positions():
    # Luo et al. 2022: C[j-i] = 1 for j <= i, 0 after, with uniform attention gives row sums (i+1)/n.
    n, width = 7, 4
    torch.manual_seed(5)
    attention = Attention(width, heads=2, positional="urpe", max_length=n).double()
    with torch.no_grad():
        attention.W_q.weight.zero_()
        attention.W_q.bias.zero_()  # all logits 0 -> uniform softmax 1/n
        offsets = torch.arange(-(n - 1), n)
        attention.urpe_c.copy_((offsets <= 0).double().expand(2, -1))
        x = torch.randn(1, 1, width, dtype=torch.float64).expand(1, n, width)
        output = attention(x)[0]
        value = attention.W_v(x[0, 0])
        expected = torch.stack([attention.W_o(value * (i + 1) / n) for i in range(n)])
    assert torch.allclose(output, expected, atol=1e-12)
    distances = torch.cdist(output, output) + torch.eye(n) * 1e9
    assert distances.min() > 1e-3  # every position gets its own output


@pytest.mark.slow
def test_micro_luo_run_writes_json_and_png(tmp_path):
    spec = parse_experiment(LUO_MICRO, "luo.yaml")
    result = run_experiment(spec, device="cpu", threads=1)
    json_path, png_path = write_outputs(result, tmp_path, "luo")
    written = json.loads(json_path.read_text())
    assert {
        "experiment",
        "title",
        "preset",
        "seed",
        "settings",
        "device",
        "evidence",
        "wall_seconds",
        "runs",
        "summary",
    } <= set(written)
    assert "never a verdict" in written["evidence"]
    assert [(run["task"], run["variant"]) for run in written["runs"]] == [
        ("position-index", "rpe"),
        ("position-index", "urpe"),
    ]
    summary = written["summary"]["position-index"]
    assert summary["epsilon_star"] == epsilon_star(8) == 3.5
    # A position-blind model can never beat eps* on constant inputs, however it was trained.
    assert summary["rpe"]["best_sup_error_constant"] >= 3.5 - 1e-4
    assert summary["rpe"]["below_epsilon_star"] is False
    rpe_run = written["runs"][0]
    assert [entry["step"] for entry in rpe_run["history"]] == [0, 3, 6]
    if HAVE_MATPLOTLIB:
        assert png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png_path.stat().st_size > 10_000
    else:
        assert png_path is None


@pytest.mark.slow
def test_cli_yang_micro_run(tmp_path):
    spec_path = tmp_path / "yang-micro.yaml"
    spec_path.write_text(YANG_MICRO)
    out = tmp_path / "out"
    result = CliRunner().invoke(experiment, [str(spec_path), "--out", str(out), "--device", "cpu", "--threads", "1"])
    assert result.exit_code == 0, result.output
    written = json.loads((out / "yang-micro.json").read_text())
    assert (out / "yang-micro.png").exists() == HAVE_MATPLOTLIB
    assert written["table"]["languages"] == [2, 3] and written["table"]["depths"] == [1, 2]
    assert len(written["runs"]) == 4
    for row in written["table"]["test_exact"]:
        assert len(row) == 2 and all(0 <= value <= 1 for value in row)
    assert written["staircase"]["L3"]["crasp_program_depth"] == 3
    assert written["staircase"]["L3"]["prediction_task_depth"] == 1
    assert "L3" in result.output and "exact match" in result.output


def _without_timing(value):
    if isinstance(value, dict):
        return {key: _without_timing(item) for key, item in value.items() if key not in TIMING_KEYS}
    if isinstance(value, list):
        return [_without_timing(item) for item in value]
    return value


@pytest.mark.slow
@pytest.mark.parametrize("text", [LUO_MICRO, YANG_MICRO])
def test_same_seed_same_numbers(text):
    spec = parse_experiment(text, "spec.yaml")
    first, second = (_without_timing(run_experiment(spec, device="cpu", threads=1)) for _ in range(2))
    assert first == second
    other_seed = _without_timing(run_experiment(spec, device="cpu", threads=1, seed=spec.seed + 1))
    assert other_seed["runs"] != first["runs"]


def test_the_selected_checkpoint_is_the_latest_best_score_and_never_nan():
    """One selection for every experiment that exports (experiments/training.py): scores 0.5, 0.7, 0.7, NaN, 0.2 at
    steps 0..4 (set by hand) select step 2 (the later of the two bests; NaN never counts), with its weights."""
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    scores, snapshots = iter([0.5, 0.7, 0.7, math.nan, 0.2]), []

    def evaluate():
        snapshots.append({name: value.clone() for name, value in model.state_dict().items()})
        return {"score": next(scores)}

    selector = CheckpointSelector(model, evaluate, score=lambda metrics: metrics["score"])
    history = train(
        model,
        steps=4,
        learning_rate=0.1,
        batch_loss=lambda _step: model(torch.ones(1, 2)).sum(),
        evaluate=selector,
        eval_every=1,
        label="selection",
        progress=None,
    )
    trained = selector.trained(history)
    assert trained.selected is history[2] and trained.selected["step"] == 2 and trained.parameters == 3
    assert all(torch.equal(trained.state[name], snapshots[2][name]) for name in snapshots[2])
    assert not torch.equal(snapshots[2]["weight"], snapshots[1]["weight"])  # the steps did move the weights
    no_score = CheckpointSelector(model, lambda: {"score": math.nan}, score=lambda metrics: metrics["score"])
    no_score()
    assert no_score.trained([{"step": 0}]).selected == {"step": 0}  # nothing finite: the last checkpoint


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_lk_samples_and_prefix_labels(k):
    words = sample_lk_words(k, 5, 9, 40, torch.Generator().manual_seed(k))
    assert all(in_lk(k, word) and 5 <= len(word) <= 9 for word in words)
    tokens, labels, mask = encode(words, k)
    for row, word in enumerate(words):
        blocks_so_far = [len(re.findall(r"a+|b+", word[: i + 1])) for i in range(len(word))]
        assert labels[row, : len(word)].tolist() == [float(blocks == k) for blocks in blocks_so_far]
        assert mask[row].sum() == len(word) and tokens[row, 0] == 0


@pytest.mark.parametrize(
    "text, location, message",
    [
        ("experiment: luo-position\n", "spec.yaml:1: experiment", "did you mean 'luo-position-index'?"),
        ("experiment: yang-lk-depth\nseeds: 3\n", "spec.yaml:2: ", "did you mean 'seed'?"),
        (
            "experiment: luo-position-index\ntasks: [position-index, even-tokens]\n",
            "spec.yaml:2: tasks[1]",
            "did you mean 'even-token-prediction'?",
        ),
        (
            "experiment: yang-lk-depth\npresets:\n  small:\n    depths: two\n",
            "spec.yaml:4: presets.small.depths",
            "expected a list of integers",
        ),
        (
            "experiment: yang-lk-depth\npresets:\n  gpu:\n    width: 10\n    heads: 4\n",
            "spec.yaml:4: presets.gpu",
            "heads (4) must divide width (10)",
        ),
        (
            "experiment: yang-lk-depth\npresets:\n  small:\n    languages: [9]\n",
            "spec.yaml:4: presets.small.train-lengths",
            "strings of L_9 have at least 9 letters",
        ),
        ("seed: 1\n", "spec.yaml:1: ", "missing required key 'experiment'"),
    ],
)
def test_spec_errors_are_located(text, location, message):
    with pytest.raises(SpecError) as caught:
        parse_experiment(text, "spec.yaml")
    assert str(caught.value).startswith(location), str(caught.value)
    assert message in str(caught.value)


def test_cli_reports_spec_errors_without_traceback(tmp_path):
    spec_path = tmp_path / "bad.yaml"
    spec_path.write_text("experiment: luo-position-index\npresets:\n  small:\n    lenght: 8\n")
    result = CliRunner().invoke(experiment, [str(spec_path), "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "error: " in result.output and "bad.yaml:4" in result.output and "did you mean 'length'?" in result.output
    assert "Traceback" not in result.output


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_request_without_gpu_is_an_input_error(tmp_path):
    spec_path = tmp_path / "luo.yaml"
    spec_path.write_text(LUO_MICRO)
    result = CliRunner().invoke(experiment, [str(spec_path), "--out", str(tmp_path), "--device", "cuda"])
    assert result.exit_code == 2 and "no CUDA device" in result.output


YANG_EXPORT = """\
experiment: yang-lk-depth
presets:
  small: {languages: [1], depths: [1], train-lengths: [4, 8], test-lengths: [9, 12], width: 8, ffn-width: 8,
          steps: 60, batch: 16, train-size: 200, test-size: 32}
"""


@pytest.mark.slow  # trains a model and runs the counting engine on its export
def test_yang_export_writes_the_model_and_a_spec_and_prove_adds_the_exact_verdict(tmp_path):
    """--export writes the selected checkpoint, L_k's program and a spec quantizing the model to a fixed point
    chosen from its weights; --prove runs it: the L1 model never saw a string starting with b (every training word
    is in L1 = a+), so on all strings it is refuted, at the least such string (here "b": the counting engine
    replays it on the interpreter)."""
    spec_path = tmp_path / "yang-export.yaml"
    spec_path.write_text(YANG_EXPORT)
    out, models = tmp_path / "out", tmp_path / "models"
    result = CliRunner().invoke(
        experiment,
        [str(spec_path), "--out", str(out), "--device", "cpu", "--export", str(models), "--prove"],
    )
    assert result.exit_code == 0, result.output
    written = json.loads((out / "yang-export.json").read_text())
    (run,) = written["runs"]
    assert sorted(p.name for p in models.iterdir()) == [
        "L1-depth1-check.yaml",
        "L1-depth1-model.pt",
        "L1-depth1-short.yaml",
        "L1-depth1-words.yaml",
        "L1.cr",
    ]
    fixed = run["export"]["fixed_point"]
    assert fixed["bits"] == 24 and 4 <= fixed["frac"] <= 16
    assert 0 < run["export"]["quantization_error_float"] <= 2.0 ** -(fixed["frac"] + 1)  # round to nearest
    check = run["proof"]["strings"]
    assert check["verdict"].startswith(("refuted", "proved")) and check["property"] == "every string up to 100"
    if check["verdict"].startswith("refuted"):
        assert written["table"]["exact_verdict"] == [[f"refuted at {check['witness']}"]]
    # every word of L1 = a+ up to 100: the 100 words a^n, each at every position
    words = run["proof"]["words"]
    assert words["property"] == "every word of L1 up to 100" and words["engine"] == "enumerate"
    assert words["space_size"] == 100 or words["status"] == "unknown"
    assert written["table"]["words_verdict"][0][0] is not None
    assert "exact verdicts" in result.output


def test_export_is_refused_for_the_other_experiments(tmp_path):
    spec_path = tmp_path / "luo.yaml"
    spec_path.write_text(LUO_MICRO)
    result = CliRunner().invoke(experiment, [str(spec_path), "--out", str(tmp_path), "--export", str(tmp_path)])
    assert result.exit_code == 2 and "implemented for yang-lk-depth only" in result.output

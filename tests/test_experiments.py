"""Tests of the float training experiments: the torch modules' positional behaviour (Luo et al. 2022),
the experiment spec's located errors, the outputs of micro training runs and their reproducibility."""

from __future__ import annotations

import importlib.util
import json
import math
import re
from fractions import Fraction
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="needs the torch extra")
from click.testing import CliRunner

from verify_tf.cli.experiment import experiment
from verify_tf.crasp import in_lk
from verify_tf.experiments.common import train
from verify_tf.experiments.luo import PROOF_STATISTICS, PROOF_WITNESS, epsilon_star, exact_summary, export_run
from verify_tf.experiments.modules import Attention, TinyTransformer
from verify_tf.experiments.prefix_labels import check_written_spec
from verify_tf.experiments.runner import TIMING_KEYS, run_experiment, write_outputs
from verify_tf.experiments.spec import parse_experiment
from verify_tf.experiments.training import CheckpointSelector
from verify_tf.experiments.yang import _verdict_cell, encode, sample_lk_words
from verify_tf.schema.errors import SpecError

ROOT = Path(__file__).resolve().parent.parent
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


@pytest.mark.slow  # trains a model and checks its export
def test_yang_export_writes_the_model_and_a_spec_and_prove_adds_the_exact_verdict(tmp_path):
    """--export writes the selected checkpoint, L_k's program and a spec quantizing the model to a fixed point
    chosen from its weights; --prove runs it: the L1 model never saw a string starting with b (every training word
    is in L1 = a+), so on all strings it is refuted, at the least such string (here "b": the prefix-tree scan
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


def test_export_is_refused_for_prefix_labels(tmp_path):
    spec_path = tmp_path / "prefix.yaml"
    spec_path.write_text("experiment: prefix-labels\nprogram: majority.cr\n")
    (tmp_path / "majority.cr").write_text((ROOT / "examples" / "crasp" / "majority.cr").read_text())
    result = CliRunner().invoke(experiment, [str(spec_path), "--out", str(tmp_path), "--export", str(tmp_path)])
    assert result.exit_code == 2 and "not prefix-labels" in result.output


# ---------------------------------------------------------------- luo-position-index --export / --prove

LUO_EXPORT_SETTINGS = {"length": 4, "vocab": 3, "heads": 2, "layernorm": "none"}


def _construction(variant: str) -> TinyTransformer:
    """Hand-set models of n = 4 positions over tokens a, b, c (readout = stream coordinate 0, plus its bias):

    * rpe: head 0's values are the constant 1 (value bias), RPE biases arbitrary non-zero; token embeddings 0, 1/2, 1
      on coordinate 0; readout bias 3/2. Softmax rows sum to 1, so the output is 1 + e + 3/2 at every position:
      5/2, 3, 7/2 on a^4, b^4, c^4, errors max_i |y - i| = 3/2, 2, 5/2 (by hand);
    * urpe: Luo et al.'s construction: uniform attention (zero logits), C lower-triangular ones, value bias n = 4:
      position i (1-based) outputs (i/n)·n = i exactly, error 0;
    * ape: position embedding p_i = i on coordinate 0, nothing else: output i exactly, error 0.

    Each also has 0.1 (a float32, not on any grid) on coordinate 7 of every embedding and 40 on coordinate 6, which
    nothing reads: the largest quantization error is 0.1's, and the largest weight 40 sets the fixed point (frac 10:
    a small exp table keeps the test fast)."""
    model = TinyTransformer(
        vocab=3, width=8, heads=2, layers=1, ffn_width=8, outputs=1, positional=variant, max_length=4
    )
    attention = model.blocks[0].attention
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
        model.embedding.weight[:, 7] = 0.1
        model.embedding.weight[:, 6] = 40
        model.readout.weight[0, 0] = 1
        if variant == "rpe":
            model.embedding.weight[:, 0] = torch.tensor([0.0, 0.5, 1.0])
            attention.W_v.bias[0] = 1
            attention.W_o.weight[0, 0] = 1
            attention.rpe_bias.copy_(torch.tensor([0.5, -1, 0.25, 2, -0.75, 1, 0.125]).expand(2, 7))
            model.readout.bias[0] = 1.5
        elif variant == "urpe":
            attention.W_v.bias[0] = 4
            attention.W_o.weight[0, 0] = 1
            offsets = torch.arange(-3, 4)  # entry k is offset j - i = k - 3
            attention.urpe_c.copy_((offsets <= 0).float().expand(2, 7))
        else:
            model.position_embedding[:, 0] = torch.arange(1.0, 5.0)
    return model


def _quantization_error(state, frac):
    """The largest |w - round(w·2^frac)/2^frac| over the float32 weights, computed here independently."""
    errors = [
        abs(Fraction(value) - Fraction(round(Fraction(value) * 2**frac), 2**frac))
        for tensor in state.values()
        for value in tensor.flatten().tolist()
    ]
    return max(errors)


@pytest.mark.parametrize(
    "variant, frac, blind, bound, at_witness, on_constant_inputs",
    [
        # Luo et al. 2022, Thm 1: RPE inside softmax is blind on constant inputs, for every weight choice, so the
        # certificate holds: eps* = (n-1)/2 = 3/2; this model errs 3/2 at a^4 and 5/2 at c^4 (docstring above)
        ("rpe", 10, "proved", "proved", Fraction(3, 2), Fraction(5, 2)),
        # the URPE and APE constructions compute f(X)_i = i exactly: positions differ (a^4: outputs 1 and 4,
        # deviation 3), and this very model, a member of the class, beats eps* with sup-error 0
        ("urpe", 10, "refuted", "refuted", None, Fraction(0)),
        ("ape", 10, "refuted", "refuted", None, Fraction(0)),
    ],
)
def test_luo_export_of_a_known_construction_gets_the_verdicts_and_errors_computed_by_hand(
    tmp_path, variant, frac, blind, bound, at_witness, on_constant_inputs
):
    """export_run writes the state dict and a spec quantizing it to a fixed point chosen from the weights' range
    (24 bits: 1 sign + ceil(log2(largest + 1)) + 7 headroom bits of integer part, the rest fraction: the largest
    weight 40 gives 24 - 1 - 6 - 7 = 10); proving it gives the verdicts and exact errors computed by hand."""
    model = _construction(variant)
    state = {name: value.detach().clone() for name, value in model.state_dict().items()}
    with torch.no_grad():
        outputs = model(_constant_tokens(3, 4))[..., 0]
    float_error = float((outputs - torch.arange(1.0, 5.0)).abs().max())
    run = {"task": "position-index", "variant": variant, "selected": {"sup_error_constant": float_error}}
    export_run(run, state, LUO_EXPORT_SETTINGS, tmp_path)
    stem = f"position-index-{variant}"
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{stem}-check.yaml", f"{stem}-model.pt"]
    loaded = torch.load(tmp_path / f"{stem}-model.pt", weights_only=True)
    assert all(torch.equal(loaded[name], state[name]) for name in state)
    assert run["export"]["fixed_point"] == {"bits": 24, "frac": frac}
    error = _quantization_error(state, frac)
    assert 0 < error <= Fraction(1, 2 ** (frac + 1)) and Fraction(run["export"]["quantization_error"]) == error
    run["proof"] = check_written_spec(
        Path(run["export"]["check_spec"]), keep=PROOF_STATISTICS, keep_witness=PROOF_WITNESS
    )
    exact = exact_summary(run)
    assert (exact["position_blind"], exact["bound"]) == (blind, bound), run["proof"]
    assert Fraction(exact["epsilon_star"]) == Fraction(3, 2)
    assert Fraction(exact["quantized_sup_error_constant"]) == on_constant_inputs
    assert exact["float_sup_error_constant"] == pytest.approx(float(on_constant_inputs), abs=1e-6)
    checks = {check["property"]: check for check in run["proof"]}
    if blind == "refuted":
        assert exact["position_blind_witness"] == "a^4" and Fraction(exact["position_blind_deviation"]) == 3
        # the model itself beats eps*: refuted before any induction (no z3 query)
        assert checks["sup-error bound"]["verdict"].startswith("refuted (this model")
        assert checks["sup-error bound"]["witness_layer"] == "this model"
    else:
        assert checks["sup-error bound"]["verdict"].startswith("proved (witness + induction")
        assert Fraction(checks["sup-error bound"]["this_model_error_at_witness"]) == at_witness


def test_inexpressible_measures_this_model_within_its_budget(tmp_path):
    """The own-model measurement runs before the induction and under the property's deadline: with a budget
    already spent at the first evaluation the verdict is unknown, naming the phase (never a late answer)."""
    run = {"task": "position-index", "variant": "urpe", "selected": {"sup_error_constant": 0.0}}
    export_run(run, _construction("urpe").state_dict(), LUO_EXPORT_SETTINGS, tmp_path)
    spec_file = Path(run["export"]["check_spec"])
    text = spec_file.read_text().replace("timeout: 600", "timeout: 0.000001")
    assert "timeout: 0.000001" in text
    spec_file.write_text(text)
    (bound,) = [check for check in check_written_spec(spec_file) if check["property"] == "sup-error bound"]
    assert bound["verdict"].startswith("unknown") and "this model's sup-error" in bound["detail"], bound


LUO_EXPORT = """\
experiment: luo-position-index
tasks: [position-index]
variants: [rpe, urpe]
presets:
  small: {length: 4, vocab: 3, width: 8, heads: 2, layers: 1, ffn-width: 8, steps: 300, batch: 16,
          learning-rate: 0.01, eval-every: 50, eval-samples: 16}
"""


@pytest.mark.slow  # trains two micro models (300 steps, ~3 s CPU each) and proves their exports (~5 s)
def test_luo_cli_exports_and_proves_every_trained_model(tmp_path):
    """--export --prove end to end: files for every trained model, the exact column in the tables, JSON and plot.
    Whatever training reached, the RPE model's verdicts are fixed by Luo et al.'s Thm 1 (blind, bound proved with
    eps* = (4-1)/2 = 3/2) and its exact error is >= eps*. The URPE model learns f(X)_i = i here (float sup-error
    about 0.05 with this seed): the quantized model itself then refutes the bound, before any induction."""
    spec_path = tmp_path / "luo.yaml"
    spec_path.write_text(LUO_EXPORT)
    out, models = tmp_path / "out", tmp_path / "models"
    result = CliRunner().invoke(
        experiment, [str(spec_path), "--out", str(out), "--device", "cpu", "--export", str(models), "--prove"]
    )
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in models.iterdir()) == [
        "position-index-rpe-check.yaml",
        "position-index-rpe-model.pt",
        "position-index-urpe-check.yaml",
        "position-index-urpe-model.pt",
    ]
    written = json.loads((out / "luo.json").read_text())
    rpe = written["summary"]["position-index"]["rpe"]["exact"]
    assert (rpe["position_blind"], rpe["bound"], rpe["epsilon_star"]) == ("proved", "proved", "3/2")
    assert Fraction(rpe["quantized_sup_error_constant"]) >= Fraction(3, 2)
    urpe = written["summary"]["position-index"]["urpe"]["exact"]
    assert urpe["float_sup_error_constant"] < 0.5, "the URPE model did not learn: this test's premise"
    assert (urpe["position_blind"], urpe["bound"]) == ("refuted", "refuted")
    assert urpe["quantized_sup_error_constant_float"] == pytest.approx(urpe["float_sup_error_constant"], abs=0.01)
    assert "position-blind" in result.output and "bound ε*" in result.output
    if HAVE_MATPLOTLIB:
        assert (out / "luo.png").stat().st_size > 10_000


def test_the_summary_cells_say_what_was_checked():
    words = {"status": "unknown", "complete_up_to_length": 56, "witness": None}
    strings = {"status": "refuted", "witness": "bbba", "complete_up_to_length": None}
    run = {"proof": {"words": words, "strings": strings}}
    assert _verdict_cell(run, "words") == "unknown (every word ≤ 56 right)"
    assert _verdict_cell(run, "strings") == "refuted at bbba"
    run["proof"]["strings"] = {"status": "unknown", "complete_up_to_length": 14, "witness": None}
    assert _verdict_cell(run, "strings") == "unknown (every string ≤ 14 right)"
    assert _verdict_cell({"proof": {"words": {"status": "refuted", "witness": "aab"}}}, "words") == "refuted at aab"
    empty = {"status": "unknown", "complete_up_to_length": 1, "inputs_checked": 0, "witness": None}
    assert _verdict_cell({"proof": {"words": empty}}, "words") == "unknown (no word checked)"


# ---------------------------------------------------------------- results as they finish, resume, signals (issue 39)


def test_each_finished_model_is_written_and_a_second_run_resumes_from_it(tmp_path):
    """Every model's row and checkpoint are under OUT/<spec>-runs/ as it finishes; the same run again trains
    nothing (every model resumed) and computes the same result, timings aside; --fresh trains again."""
    from verify_tf.experiments.runner import make_store

    spec = parse_experiment(YANG_MICRO, str(tmp_path / "yang-micro.yaml"))
    said: list[str] = []
    store = make_store(spec, tmp_path, device="cpu", say=said.append)
    first = run_experiment(spec, device="cpu", threads=1, store=store)
    runs = tmp_path / "yang-micro-runs"
    assert sorted(p.name for p in runs.iterdir()) == [
        f"L{k}-depth-{d}.{suffix}" for k in (2, 3) for d in (1, 2) for suffix in ("json", "pt")
    ]
    assert said[0] == f"4 models to train; each is written to {runs} as it finishes"
    assert said[1].startswith("model 1 of 4: L2 / depth 1: finished in ") and said[1].endswith("L2-depth-1.json")
    row = json.loads((runs / "L3-depth-2.json").read_text())
    assert row["format"] == "verify-tf-experiment-run/1" and row["label"] == "L3 / depth 2"
    assert row["key"]["seed"] == 3 and row["key"]["device"] == "cpu" and row["run"]["depth"] == 2
    state = torch.load(runs / "L3-depth-2.pt", weights_only=True)
    assert "readout.bias" in state

    again: list[str] = []
    second = run_experiment(
        spec, device="cpu", threads=1, store=make_store(spec, tmp_path, device="cpu", say=again.append)
    )
    assert second["resumed"] == ["L2 / depth 1", "L2 / depth 2", "L3 / depth 1", "L3 / depth 2"]
    assert all("finished before, resumed from" in line for line in again[1:])
    assert _without_timing(second["runs"]) == _without_timing(first["runs"])
    assert _without_timing(second["table"]) == _without_timing(first["table"])

    # another seed is another key: nothing is resumed (and the rows are rewritten)
    other = run_experiment(
        spec, device="cpu", threads=1, seed=4, store=make_store(spec, tmp_path, device="cpu", seed=4)
    )
    assert other["resumed"] == []
    fresh = run_experiment(
        spec, device="cpu", threads=1, seed=4, store=make_store(spec, tmp_path, device="cpu", seed=4, fresh=True)
    )
    assert fresh["resumed"] == [] and _without_timing(fresh["runs"]) == _without_timing(other["runs"])


YANG_SIGNAL = """\
experiment: yang-lk-depth
seed: 3
presets:
  small: {languages: [2, 3, 4], depths: [1, 2], train-lengths: [4, 8], test-lengths: [9, 12], width: 8,
          ffn-width: 8, steps: 300, batch: 4, train-size: 16, test-size: 8}
"""


@pytest.mark.slow  # trains a model (300 steps) in a subprocess, then stops the second one
@pytest.mark.parametrize("signum, code", [(2, 130), (15, 143)])
def test_a_signal_keeps_the_finished_models_and_the_next_run_resumes(tmp_path, signum, code):
    """Issue 38/39: SIGINT ended `experiment` with click's "Aborted!" (exit 1) and SIGTERM killed it, both writing
    nothing. Now the model in progress is dropped, the finished ones stay under OUT, the result lists them, the
    exit is 130/143 (as `check`), and the same command resumes. The signal is sent once the first model's row
    exists and the log (stdout and stderr to a file, as `experiment ... > log`) has a progress line of the model in
    training (events, not a clock; progress every second here, 10 s by default); 5 more models of 300 steps remain
    then, so the run cannot end first."""
    import os
    import signal as signals
    import subprocess
    import sys
    import time

    spec_path = tmp_path / "yang-signal.yaml"
    spec_path.write_text(YANG_SIGNAL)
    out = tmp_path / "out"
    first_row = out / "yang-signal-runs" / "L2-depth-1.json"
    command = [sys.executable, "-m", "verify_tf", "experiment", str(spec_path), "--out", str(out), "--device", "cpu"]
    env = {**os.environ, "VERIFY_TF_PROGRESS_SECONDS": "1"}

    def logged() -> bool:  # a heartbeat line: "[ 2 s] yang-signal.yaml: L2 / depth 1 (model 1 of 6) (...)"
        return " (model " in (tmp_path / "log").read_text()

    with open(tmp_path / "log", "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            ceiling = time.monotonic() + 600  # generous: the first model takes seconds, minutes at load 20
            while not (first_row.exists() and logged()) and process.poll() is None and time.monotonic() < ceiling:
                time.sleep(0.1)
            assert first_row.exists() and logged(), (tmp_path / "log").read_text()
            process.send_signal(signum)
            assert process.wait(timeout=300) == code, (tmp_path / "log").read_text()
        finally:
            if process.poll() is None:
                process.kill()
    text = (tmp_path / "log").read_text()
    assert "Traceback" not in text and "Aborted!" not in text
    assert "6 models to train; each is written to " in text.splitlines()[0]  # the log's first line, at once
    assert f"interrupted ({signals.Signals(signum).name}): " in text and " of 6 models finished" in text
    result = json.loads((out / "yang-signal.json").read_text())
    assert result["complete"] is False and result["interrupted"] == signals.Signals(signum).name
    assert result["expected"] == 6 and 1 <= result["finished"] == len(result["runs"]) < 6
    assert result["runs"][0]["language"] == 2 and result["runs"][0]["depth"] == 1
    finished = result["finished"]

    resumed = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert resumed.stderr.count("finished before, resumed from") == finished
    complete = json.loads((out / "yang-signal.json").read_text())
    assert complete["complete"] is True and len(complete["runs"]) == 6
    assert len(complete["resumed"]) == finished

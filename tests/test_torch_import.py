"""Importing PyTorch state dicts: exact mapping of MultiheadAttention stacks, explicit quantization with the
largest rounding error reported, refusal by name of what the semantics cannot encode, and the shipped example."""

import json
import math
import re
import subprocess
import sys
from fractions import Fraction as F
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from verify_tf.builders.torch_import import ExactEncoder, ExactEncoderLayer, import_state_dict
from verify_tf.cache import key_material, key_of
from verify_tf.cli import main
from verify_tf.runner import Overrides
from verify_tf.semantics import Fixed, evaluate
from verify_tf.spec import SpecError, load_spec

ROOT = Path(__file__).resolve().parent.parent
ARCH = {"heads": 1, "scoring": "softmax", "causal": False, "activation": "relu", "alphabet": None, "bos": None,
        "readout-row": None, "readout-bias": "refuse"}
torch.set_num_threads(1)


def dyadic_mha(d: int, heads: int) -> dict:
    """A MultiheadAttention state dict whose entries are distinct small dyadic numbers k/8."""
    mha = torch.nn.MultiheadAttention(d, heads, batch_first=True)
    with torch.no_grad():
        for tensor in mha.parameters():
            tensor.copy_(torch.arange(tensor.numel(), dtype=torch.float32).reshape(tensor.shape) / 8 - 1)
    return mha.state_dict()


def test_in_proj_and_out_proj_split_per_head_with_exact_scale():
    d, heads = 8, 2  # d_head = 4: torch's 1/sqrt(4) = 1/2 is folded into W_Q and b_Q exactly
    state = dyadic_mha(d, heads)
    model = import_state_dict(state, {**ARCH, "heads": heads}, None)
    w = state["in_proj_weight"].tolist()
    b = state["in_proj_bias"].tolist()
    out = state["out_proj.weight"].tolist()
    for h, head in enumerate(model.blocks[0].attention.heads):
        rows = range(4 * h, 4 * h + 4)
        assert head.query == tuple(tuple(F(w[r][c]) / 2 for c in range(d)) for r in rows)
        assert head.key == tuple(tuple(F(w[d + r][c]) for c in range(d)) for r in rows)
        assert head.value == tuple(tuple(F(w[2 * d + r][c]) for c in range(d)) for r in rows)
        assert head.query_bias == tuple(F(b[r]) / 2 for r in rows)
        assert head.key_bias == tuple(F(b[d + r]) for r in rows)
        assert head.output == tuple(tuple(F(out[i][c]) for c in rows) for i in range(d))
    assert model.blocks[0].attention.output_bias == tuple(F(x) for x in state["out_proj.bias"].tolist())
    assert any("1/sqrt(4) = 1/2 folded into W_Q and b_Q exactly" in note for note in model.notes)
    assert not any("quantize" in note for note in model.notes)


@pytest.mark.slow
def test_imported_model_tracks_torch_float_forward():
    torch.manual_seed(0)
    net = ExactEncoder(d_model=4, nhead=2, num_layers=2, dim_feedforward=6, max_length=4).eval()
    model = import_state_dict(net.state_dict(), {**ARCH, "heads": 2}, {"bits": 32, "frac": 16})
    assert "irrational" in " ".join(model.notes)  # d_head = 2: 1/sqrt(2) rounded explicitly by quantize
    x = torch.tensor([[[0.5, -0.25, 0.0, 0.75], [0.25, 0.5, -0.5, 0.0], [-0.75, 0.0, 0.25, 0.5]]])
    with torch.no_grad():
        expected = net(x)[0].tolist()
    tokens = [tuple(F(v) for v in row) for row in x[0].tolist()]
    trace = evaluate(model, Fixed(32, 16), tokens)
    assert max(abs(float(q) - e) for q, e in zip(trace.readout, expected)) < 2e-3


def test_alphabet_embedding_positions_and_readout():
    torch.manual_seed(2)
    net = ExactEncoder(d_model=4, nhead=1, num_layers=1, dim_feedforward=3, alphabet_size=3, max_length=4,
                       causal=True).eval()
    model = import_state_dict(net.state_dict(), {**ARCH, "alphabet": ["^", "a", "b"], "bos": "^", "causal": True},
                              {"bits": 32, "frac": 16})
    assert model.tokens.symbols == ("^", "a", "b") and model.tokens.bos == "^"
    assert model.blocks[0].attention.heads[0].causal and len(model.positional_encoding) == 4
    with torch.no_grad():
        expected = net(torch.tensor([[0, 1, 2, 2]]))[0].tolist()  # BOS first, as the IR prepends it
    trace = evaluate(model, Fixed(32, 16), ("a", "b", "b"))
    assert max(abs(float(q) - e) for q, e in zip(trace.readout, expected)) < 2e-3


@pytest.mark.parametrize("positional", ["urpe", "rpe", "ape"])
def test_the_experiments_rpe_urpe_modules(positional):
    from verify_tf.experiments.modules import TinyTransformer

    torch.manual_seed(3)
    net = TinyTransformer(vocab=3, width=4, heads=2, layers=2, ffn_width=5, outputs=2, positional=positional,
                          causal=True, max_length=4).eval()
    with torch.no_grad():  # move URPE's C away from its all-ones start so the test sees it
        for name, parameter in net.named_parameters():
            if name.endswith("urpe_c") or name.endswith("rpe_bias"):
                parameter.add_(torch.randn_like(parameter) * 0.3)
    architecture = {**ARCH, "heads": 2, "causal": True, "alphabet": ["a", "b", "c"], "readout-row": 1}
    with pytest.raises(ValueError, match=r"readout.bias\[1\] = .* has no bias"):
        import_state_dict(net.state_dict(), architecture, {"bits": 32, "frac": 16})
    model = import_state_dict(net.state_dict(), {**architecture, "readout-bias": "drop"}, {"bits": 32, "frac": 16})
    head = model.blocks[1].attention.heads[1]
    assert head.positional == ("standard" if positional == "ape" else positional)
    assert (model.positional_encoding is not None) == (positional == "ape")
    if positional != "ape":
        assert head.rpe_bias.radius == 3
    assert any("dropped as stated" in note for note in model.notes)
    with torch.no_grad():
        expected = (net(torch.tensor([[0, 2, 1, 1]]))[0, :, 1] - net.readout.bias[1]).tolist()
    trace = evaluate(model, Fixed(32, 16), ("a", "c", "b", "b"))
    assert max(abs(float(q) - e) for q, e in zip(trace.readout, expected)) < 2e-3


def test_the_experiments_layernorm_is_refused_by_name():
    from verify_tf.experiments.modules import TinyTransformer

    net = TinyTransformer(vocab=2, width=2, heads=1, layers=1, ffn_width=2, outputs=1, layernorm="post")
    with pytest.raises(ValueError, match=r"LayerNorm \(blocks.0.norm_attention, blocks.0.norm_ffn\)"):
        import_state_dict(net.state_dict(), {**ARCH, "alphabet": ["a", "b"], "readout-bias": "drop"}, None)


def test_quantize_rounds_to_nearest_and_reports_the_largest_error():
    state = {"in_proj_weight": torch.tensor([[0.3], [0.7], [-1.1]]), "out_proj.weight": torch.tensor([[0.55]])}
    model = import_state_dict(state, ARCH, {"bits": 8, "frac": 2})
    head = model.blocks[0].attention.heads[0]
    assert (head.query, head.key, head.value, head.output) == (((F(1, 4),),), ((F(3, 4),),), ((F(-1),),),
                                                              ((F(1, 2),),))
    errors = {name: abs(F(float(torch.tensor(v))) - q) for name, v, q in
              (("q", 0.3, F(1, 4)), ("k", 0.7, F(3, 4)), ("v", -1.1, F(-1)), ("o", 0.55, F(1, 2)))}
    worst = max(errors.values())
    assert errors["v"] == worst
    [note] = [n for n in model.notes if n.startswith("quantize")]
    assert "rounded 4 weights to multiples of 2^-2 (8 bits)" in note
    assert f"= {worst} at layers[0].attention.heads[0].value[0][0]" in note


def test_quantize_refuses_weights_outside_the_range():
    state = {"in_proj_weight": torch.tensor([[40.0], [0.0], [0.0]]), "out_proj.weight": torch.tensor([[1.0]])}
    with pytest.raises(ValueError, match=r"query\[0\]\[0\] = 40 is outside the 8-bit range \[-32, 31.75\]"):
        import_state_dict(state, ARCH, {"bits": 8, "frac": 2})


def test_irrational_scale_needs_quantize():
    with pytest.raises(ValueError, match=r"1/sqrt\(2\), which is irrational"):
        import_state_dict(dyadic_mha(4, 2), {**ARCH, "heads": 2}, None)


@pytest.mark.parametrize("state,architecture,message", [
    (lambda: torch.nn.TransformerEncoderLayer(4, 2, 8, batch_first=True).state_dict(), {"heads": 2},
     r"LayerNorm \(norm1, norm2\).*ExactEncoderLayer"),
    (lambda: torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(4, 1, 8, batch_first=True), 2,
                                      enable_nested_tensor=False).state_dict(), {},
     r"LayerNorm \(layers.0.norm1, layers.0.norm2, layers.1.norm1, layers.1.norm2\)"),
    (lambda: ExactEncoderLayer(4, 1, 8).state_dict(), {"activation": "gelu"}, r"activation 'gelu'"),
    (lambda: torch.nn.MultiheadAttention(4, 1, add_bias_kv=True).state_dict(), {}, r"bias_k.*add_bias_kv"),
    (lambda: {**ExactEncoderLayer(4, 1).state_dict(), "scale": torch.ones(1)}, {}, r"unrecognised.*scale"),
    (lambda: {"linear1.weight": torch.ones(2, 2)}, {}, r"no attention weights found"),
    (lambda: ExactEncoder(4, 1, 1, alphabet_size=3).state_dict(), {}, r"embedding table with 3 rows"),
])
def test_refused_by_name(state, architecture, message):
    with pytest.raises(ValueError, match=message):
        import_state_dict(state(), {**ARCH, **architecture}, {"bits": 16, "frac": 8})


class NotATensor:
    pass


def spec_text(weights: str, extra: str = "") -> str:
    return f"""
model:
  torch: {weights}
  architecture: {{heads: 1, scoring: hardmax{extra}}}
arithmetic: exact
domain:
  grid: {{values: [0, 1/2]}}
  length: 2
properties:
  - permutation-equivariance: {{}}
"""


def test_spec_source_notes_errors_and_cache_key(tmp_path):
    torch.manual_seed(1)
    layer = ExactEncoderLayer(4, 1, 3)  # d_head = 4: exact scale; no quantize: float32 weights kept exactly
    torch.save(layer.state_dict(), tmp_path / "m.pt")
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(spec_text("m.pt").replace("grid: {values", "grid: {dim: 4, values"))
    spec = load_spec(spec_path)
    assert spec.model.dim == 4 and spec.model.blocks[0].feed_forward.width == 3
    assert spec.model.blocks[0].attention.heads[0].key[0][0] == F(layer.self_attn.in_proj_weight[4, 0].item())
    key = key_of(key_material(spec, spec.properties[0], Overrides(), "auto"))
    with torch.no_grad():
        layer.linear2.bias[0] += 0.5
    torch.save(layer.state_dict(), tmp_path / "m.pt")
    changed = load_spec(spec_path)
    assert key_of(key_material(changed, changed.properties[0], Overrides(), "auto")) != key  # new weights, new key
    spec_path.write_text(spec_text("m.pt", ", activation: gelu"))
    with pytest.raises(SpecError, match="activation 'gelu'"):
        load_spec(spec_path)
    torch.save({"w": NotATensor()}, tmp_path / "pickled.pt")
    spec_path.write_text(spec_text("pickled.pt"))
    with pytest.raises(SpecError, match=re.escape("cannot read pickled.pt as a state dict")):
        load_spec(spec_path)
    spec_path.write_text(spec_text("m.pt").replace("model:\n", "model:\n  quantize: {bits: 8, frac: 8}\n"))
    with pytest.raises(SpecError, match="fewer fractional bits"):
        load_spec(spec_path)


def test_stray_torch_keys_on_other_sources(tmp_path):
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text("model:\n  random: {seed: 1}\n  quantize: {bits: 8, frac: 2}\nproperties: "
                         "[permutation-equivariance]\ndomain: {grid: {step: 1/2}, length: 2}\n")
    with pytest.raises(SpecError, match="'quantize' applies only to a torch source"):
        load_spec(spec_path)


@pytest.mark.slow
def test_shipped_example_trains_saves_and_checks(tmp_path):
    script = ROOT / "examples" / "torch_import" / "train_tiny.py"
    trained = subprocess.run([sys.executable, str(script), "--out", str(tmp_path), "--steps", "60"],
                             capture_output=True, text=True, timeout=300)
    assert trained.returncode == 0, trained.stderr
    report = tmp_path / "report.json"
    result = CliRunner(env={"COLUMNS": "200"}).invoke(
        main, ["check", "--no-cache", str(tmp_path / "tiny.yaml"), str(tmp_path / "tiny_positions.yaml"),
               "--json", str(report)])
    assert result.exit_code == 0, result.output  # proved and refuted, each as its spec expects
    data = json.loads(report.read_text())
    assert [r["verdict"] for r in data["results"]] == ["proved", "refuted"]
    assert "all 729 inputs" in data["results"][0]["detail"]
    assert "largest rounding error" in result.output  # the quantization note is printed
    state = torch.load(tmp_path / "tiny.pt", weights_only=True)
    assert set(state) == {"layers.0.self_attn.in_proj_weight", "layers.0.self_attn.in_proj_bias",
                          "layers.0.self_attn.out_proj.weight", "layers.0.self_attn.out_proj.bias",
                          "layers.0.linear1.weight", "layers.0.linear1.bias", "layers.0.linear2.weight",
                          "layers.0.linear2.bias", "readout.weight"}
    assert math.isfinite(sum(t.sum().item() for t in state.values()))


def test_a_verify_tf_model_file_is_pointed_to_the_file_source(tmp_path):
    from verify_tf.builders.files import save_model

    spec = load_spec(ROOT / "examples" / "ci" / "specs" / "equivariance.yaml")
    save_model(spec.model, tmp_path / "ours.pt")
    (tmp_path / "spec.yaml").write_text(spec_text("ours.pt"))
    with pytest.raises(SpecError, match=r"is a verify-tf model file: load it with model: \{file: ...\}"):
        load_spec(tmp_path / "spec.yaml")

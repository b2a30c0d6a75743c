"""Imported torch models as they run (issue 31, item 3): every verdict states the reading it is about (the weights'
fixed point, the rounding, the attention and LayerNorm as fixed point), beside the status, in the terminal, JSON,
JUnit and explain; the exact largest rounding error of the weights travels with it; a format that overflows a
weight is a located input error with the format that fits; and the architectures people train (the experiments'
TinyTransformer pre-/post-LN, nn.TransformerEncoder pre-/post-LN, batch_first or not, causal) import to a model
whose interpreter output is torch's float output within the weights' rounding, propagated to first order."""

import json
import math
from fractions import Fraction as F

import pytest

torch = pytest.importorskip("torch", reason="needs the torch extra")
from click.testing import CliRunner

from verify_tf.builders.torch_import import import_state_dict
from verify_tf.cache import key_material, key_of
from verify_tf.cli import main
from verify_tf.experiments.modules import TinyTransformer
from verify_tf.explain.replay import explain_verdict
from verify_tf.reporting.junit import junit_xml
from verify_tf.runner import Overrides, check_property
from verify_tf.semantics import Fixed, evaluate
from verify_tf.spec import SpecError, load_spec

torch.set_num_threads(1)
ARCH = {"heads": 1, "scoring": "softmax", "causal": False, "activation": "relu", "readout-bias": "refuse"}
POST_LN = (
    "fixed point 16.8 quantization of a float32 torch model: weights to nearest, steps floored, fixed-point softmax, "
    "fixed-point LayerNorm"
)


def moved(net: torch.nn.Module, seed: int, scale: float = 0.1) -> torch.nn.Module:
    """``net`` in eval mode with every parameter moved off its initialisation (LayerNorm's γ = 1, β = 0 too)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for parameter in net.parameters():
            parameter.add_(torch.randn_like(parameter) * scale)
    return net.eval()


def encoder(norm_first: bool, batch_first: bool = True, heads: int = 1, layers: int = 1, final: bool = False):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(
        4, heads, 6, dropout=0.0, batch_first=batch_first, norm_first=norm_first
    )  # fmt: skip
    norm = torch.nn.LayerNorm(4) if final else None
    return moved(torch.nn.TransformerEncoder(layer, layers, norm=norm, enable_nested_tensor=False), 1)


SPEC = """
model:
  torch: {file}
  architecture: {{heads: 1, layernorm: integer, norm-first: false{extra}}}
  quantize: {{bits: {bits}, frac: 8}}
arithmetic: {{mode: fixed, bits: {bits}, frac: 8}}
domain:
  grid: {{dim: 4, values: [0, 1/2]}}
  length: 2
properties:
  - permutation-equivariance: {{}}
"""


def write_spec(tmp_path, file="enc.pt", bits=16, extra=""):
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.format(file=file, bits=bits, extra=extra))
    return path


# ---------------------------------------------------------------- the reading, in every output


def test_every_output_states_the_reading_and_the_rounding(tmp_path):
    """A post-LN encoder layer quantized to 16.8: proved, and the terminal line, the JSON, JUnit say which reading
    (the label's wording is docs/semantics.md §7's), and the JSON carries the exact largest rounding error."""
    net = encoder(norm_first=False)
    torch.save(net.state_dict(), tmp_path / "enc.pt")
    runner = CliRunner(env={"COLUMNS": "400"})
    args = ["check", "--no-cache", str(write_spec(tmp_path)), "--json", str(tmp_path / "r.json")]
    result = runner.invoke(main, [*args, "--junit", str(tmp_path / "r.xml")])
    assert result.exit_code == 0, result.output
    label = f"proved (exhaustive; {POST_LN}, NOT the model as run)"
    # the terminal: the verdict's row, then the reading on the line under it (the table's layout: issue 39)
    lines = result.output.splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith(" ✓ permutation-equivariance "))
    assert lines[row].split()[2:4] == ["proved", "exhaustive"]
    assert lines[row + 1].strip().startswith(f"reading: {POST_LN}, NOT the model as run; weights rounded by at most")
    [entry] = json.loads((tmp_path / "r.json").read_text())["results"]
    assert (entry["reading"], entry["as_run"]) == (POST_LN, False)
    # the largest rounding error, computed here from the state dict alone: every weight to the nearest 2^-8 (W_Q
    # and b_Q halved first: torch's 1/sqrt(d_head = 4) folded into them)
    state = net.state_dict()
    errors = []
    for key, tensor in state.items():
        for index, value in enumerate(tensor.reshape(-1).tolist()):
            rows = tensor.shape[0] if tensor.dim() else 1
            folded = key.endswith("in_proj_weight") and index // tensor.shape[1] < rows // 3
            folded |= key.endswith("in_proj_bias") and index < rows // 3
            exact = F(value) / (2 if folded else 1)
            errors.append(abs(F(round(exact * 256), 256) - exact))
    quantization = entry["quantization"]
    assert quantization["largest_error"] == str(max(errors)) and quantization["largest_error_exact"] is True
    assert (quantization["bits"], quantization["frac"], quantization["weights"]) == (16, 8, len(errors))
    assert F(quantization["largest_error"]) <= F(1, 512)  # nearest: at most half a step
    xml = (tmp_path / "r.xml").read_text()
    assert f'name="reading" value="{POST_LN}, NOT the model as run"' in xml
    assert f'name="quantization.largest_error" value="{max(errors)}"' in xml
    assert f"{label} with engine" in xml


def test_a_refutation_states_the_reading_in_junit_and_explain(tmp_path):
    """The experiments' TinyTransformer with learned absolute positions is not permutation equivariant: refuted,
    and the JUnit failure and the explanation say the witness is about the quantized reading, with its rounding."""
    net = moved(
        TinyTransformer(vocab=2, width=4, heads=1, layers=1, ffn_width=3, outputs=1, positional="ape", max_length=2),
        2,
    )  # fmt: skip
    torch.save(net.state_dict(), tmp_path / "tiny.pt")
    (tmp_path / "spec.yaml").write_text(
        "model:\n  torch: tiny.pt\n  architecture: {heads: 1, alphabet: [a, b], readout-bias: drop}\n"
        "  quantize: {bits: 16, frac: 8}\narithmetic: {mode: fixed, bits: 16, frac: 8}\n"
        "domain: {strings: {alphabet: [a, b], min-length: 2, max-length: 2}}\n"
        "properties:\n  - permutation-equivariance: {}\n"
    )
    spec = load_spec(tmp_path / "spec.yaml")
    verdict = check_property(spec, spec.properties[0], Overrides(engine="enumerate"))
    reading = "fixed point 16.8 quantization of a float32 torch model: weights to nearest, steps floored, "
    assert verdict.status == "refuted" and verdict.reading == reading + "fixed-point softmax"
    assert verdict.label == f"refuted (exhaustive; {reading}fixed-point softmax, NOT the model as run)"
    failure = junit_xml([verdict], [None])
    assert f'message="refuted ({reading}fixed-point softmax, NOT the model as run): ' in failure
    notes = explain_verdict(spec, verdict).notes
    assert f"the verdict is about the reading '{reading}fixed-point softmax', NOT the model as it runs" in notes
    [rounding] = [n for n in notes if n.startswith("quantize 16.8: ")]
    assert f"largest rounding error {float(spec.model.quantization.largest_error):.6g} = " in rounding


def test_the_reading_names_the_arithmetic_the_weights_and_the_nonlinearities():
    gelu = encoder(norm_first=True, final=True)
    state = torch.nn.TransformerEncoderLayer(4, 1, 6, dropout=0.0, activation="gelu").state_dict()
    cases = [
        (
            gelu.state_dict(),
            {"layernorm": "integer", "norm-first": True},
            {"bits": 16, "frac": 8},
            Fixed(24, 12),
            "fixed point 24.12 reading of a float32 torch model: weights to nearest 16.8, steps floored, "
            "fixed-point softmax, fixed-point LayerNorm",
        ),
        (
            state,
            {"layernorm": "integer", "norm-first": False, "activation": "i-gelu"},
            {"bits": 24, "frac": 12},
            Fixed(24, 12),
            "fixed point 24.12 quantization of a float32 torch model: weights to nearest, steps floored, "
            "fixed-point softmax, fixed-point LayerNorm, i-GELU for GELU",
        ),
    ]
    from verify_tf.builders.torch_reading import torch_reading

    for state_dict, architecture, quantize, arithmetic, expected in cases:
        model = import_state_dict(state_dict, {**ARCH, **architecture}, quantize)
        assert torch_reading(model, arithmetic) == expected
    exact = import_state_dict(
        {k: v for k, v in gelu.state_dict().items() if "norm" not in k}, {**ARCH, "scoring": "hardmax"}, None
    )
    assert exact.quantization is None
    assert exact.reading == "reading of a float32 torch model: its float32 weights exactly, hardmax attention"
    assert exact.runs_as.startswith("float32 torch model as trained (state dict sha256 ")


def test_cache_keys_differ_by_float_source_even_when_the_rounded_weights_agree(tmp_path):
    """Two float models that round to the same fixed-point weights are different models as run: their verdicts
    (whose rounding errors differ) never share a cache entry."""
    net = encoder(norm_first=False)
    torch.save(net.state_dict(), tmp_path / "enc.pt")
    spec = load_spec(write_spec(tmp_path))
    with torch.no_grad():  # 2^-12 moves the weight less than half a step of 2^-8: the same rounded weight
        net.layers[0].linear1.weight[0, 0] += 2**-12
    torch.save(net.state_dict(), tmp_path / "enc.pt")
    moved_spec = load_spec(write_spec(tmp_path))
    assert moved_spec.model.blocks == spec.model.blocks  # the IR's weights are equal ...
    assert moved_spec.model.runs_as != spec.model.runs_as  # ... the float models are not
    keys = [key_of(key_material(s, s.properties[0], Overrides(), "auto")) for s in (spec, moved_spec)]
    assert keys[0] != keys[1]


# ---------------------------------------------------------------- the rounding error, and a format too narrow


def test_an_irrational_folded_weight_gets_an_exact_upper_bound():
    """d_head = 2: the folded W_Q entries w/sqrt(2) are irrational; the stated error is an exact upper bound on
    |rounded − w/sqrt(2)|, within 2^-60 of it (float64 here only to compare)."""
    state = {"in_proj_weight": torch.tensor([[0.3, 0.0], [0.0, 0.7], [1.0, 0.0], [0.0, 1.0], [1.0, 0], [0, 1.0]])}
    state["out_proj.weight"] = torch.eye(2)
    model = import_state_dict(state, {**ARCH, "heads": 1}, {"bits": 8, "frac": 2})
    q = model.quantization
    assert not q.error_exact and q.largest_error_at == "layers[0].attention.heads[0].query[0][0]"
    wanted = abs(0.25 - float(torch.tensor(0.3)) / math.sqrt(2))  # 0.3f/sqrt(2) = 0.2121...: nearest 2^-2 is 1/4
    assert 0 <= float(q.largest_error) - wanted < 1e-12
    assert q.bits_needed == 4  # the largest rounded weight, 1 = 4 · 2^-2: mantissa 4 needs [-8, 7], 4 bits


def test_a_format_that_overflows_a_weight_is_located_with_the_format_that_fits(tmp_path):
    net = encoder(norm_first=False)
    with torch.no_grad():
        net.layers[0].linear2.weight[1, 3] = -300.0
    torch.save(net.state_dict(), tmp_path / "enc.pt")
    result = CliRunner().invoke(main, ["check", str(write_spec(tmp_path))])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "spec.yaml:5: model.quantize: layers[0].feed-forward.w2[1][3] = -300 is outside the 16-bit range" in (
        result.output
    )
    # -300 at frac 8: mantissa -76800 needs 18 bits ([-2^17, 2^17 - 1])
    assert "needs 18 bits at frac 8: write quantize: {bits: 18, frac: 8}" in result.output
    assert load_spec(write_spec(tmp_path, bits=18)).model.quantization.bits_needed == 18


def test_gelu_is_refused_at_its_key_and_safetensors_are_read(tmp_path):
    from safetensors.torch import save_file

    net = encoder(norm_first=False)
    save_file(net.state_dict(), tmp_path / "enc.safetensors")
    spec = load_spec(write_spec(tmp_path, file="enc.safetensors"))
    assert spec.model.reading == POST_LN
    torch.save(net.state_dict(), tmp_path / "enc.pt")
    assert load_spec(write_spec(tmp_path)).model.runs_as == spec.model.runs_as  # the same tensors, the same digest
    with pytest.raises(SpecError, match=r"spec.yaml:4: model.architecture.activation: activation 'gelu'") as refused:
        load_spec(write_spec(tmp_path, extra=", activation: gelu"))
    assert "activation: i-gelu" in str(refused.value)
    (tmp_path / "junk.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{not json")
    with pytest.raises(SpecError, match=r"cannot read junk.safetensors as safetensors"):
        load_spec(write_spec(tmp_path, file="junk.safetensors"))


# ---------------------------------------------------------------- what people train, imported exactly


def first_order_tolerance(net: torch.nn.Module, run, eps: float) -> torch.Tensor:
    """Per output: eps · Σ_w |∂out/∂w| over every parameter (autograd in float64): how far rounding each weight by
    at most ``eps`` moves the float output, to first order; plus 2^-8 for the 32.12 arithmetic's own roundings
    (about 30 floors of 2^-12 per output here, each moved by gains below 2) and second-order terms."""
    net = net.double()
    parameters = list(net.parameters())
    outputs = run(net).reshape(-1)
    bounds = []
    for output in outputs:
        grads = torch.autograd.grad(output, parameters, retain_graph=True, allow_unused=True)
        bounds.append(eps * sum(g.abs().sum().item() for g in grads if g is not None) + 2**-8)
    net.float()
    return torch.tensor(bounds)


@pytest.mark.parametrize("layernorm", ["pre", "post"])
def test_the_experiments_tiny_transformer_with_layernorm_tracks_torch_within_its_rounding(layernorm):
    """Seeded (issue 39: unseeded, its weights were whatever the global generator held after the tests before it in
    the worker, and one draw put the other placement at 0.122, inside 10 × 0.0176). With seed 3 the other placement
    is 52 (pre) and 74 (post) times the tolerance away, and the right one within it (measured over seeds 0-11: the
    smallest ratio was 15)."""
    with torch.random.fork_rng():  # the global generator's state is left as it was
        torch.manual_seed(3)
        net = TinyTransformer(
            vocab=3, width=4, heads=1, layers=2, ffn_width=6, outputs=1, positional="ape", causal=True,
            max_length=4, layernorm=layernorm,
        )  # fmt: skip
    net = moved(net, 3)
    architecture = {**ARCH, "causal": True, "alphabet": ["a", "b", "c"], "readout-bias": "drop"}
    architecture |= {"layernorm": "integer", "norm-first": layernorm == "pre"}
    model = import_state_dict(net.state_dict(), architecture, {"bits": 32, "frac": 10})
    word = torch.tensor([[0, 2, 1, 1]])

    def run(n):
        return n(word)[0, :, 0] - n.readout.bias[0]

    with torch.no_grad():
        expected = run(net).tolist()
    got = [float(q) for q in evaluate(model, Fixed(32, 12), ("a", "c", "b", "b")).readout]
    deviation = torch.tensor([abs(a - b) for a, b in zip(got, expected)])
    tolerance = first_order_tolerance(net, run, float(model.quantization.largest_error))
    assert (deviation <= tolerance).all(), (deviation, tolerance)
    swapped = import_state_dict(
        net.state_dict(), {**architecture, "norm-first": layernorm != "pre"}, {"bits": 32, "frac": 10}
    )
    got = [float(q) for q in evaluate(swapped, Fixed(32, 12), ("a", "c", "b", "b")).readout]
    assert max(abs(a - b) for a, b in zip(got, expected)) > 10 * tolerance.max()  # the other placement: far outside


@pytest.mark.parametrize(("norm_first", "batch_first"), [(False, True), (True, False)])
def test_transformer_encoders_pre_and_post_ln_causal_track_torch_within_their_rounding(norm_first, batch_first):
    """nn.TransformerEncoder (two heads: d_head = 2, the folded 1/sqrt(2) rounded too; a final norm), run by
    torch with a causal mask, against the imported model with causal: true; the other placement is far outside."""
    net = encoder(norm_first, batch_first, heads=2, layers=2, final=True)
    architecture = {**ARCH, "heads": 2, "causal": True, "layernorm": "integer", "norm-first": norm_first}
    model = import_state_dict(net.state_dict(), architecture, {"bits": 32, "frac": 10})
    x = torch.tensor([[0.5, -0.25, 0.0, 0.75], [0.25, 0.5, -0.5, 0.0], [-0.75, 0.0, 0.25, 0.5]])
    mask = torch.nn.Transformer.generate_square_subsequent_mask(3)

    def run(n):
        dtype = next(n.parameters()).dtype
        batch = (x.unsqueeze(0) if batch_first else x.unsqueeze(1)).to(dtype)
        out = n(batch, mask=mask.to(dtype), is_causal=True)
        return out[0] if batch_first else out[:, 0]

    with torch.no_grad():
        expected = run(net)
    tokens = [tuple(F(v) for v in row) for row in x.tolist()]

    def deviation(m):
        trace = evaluate(m, Fixed(32, 12), tokens)
        return torch.tensor([[float(a) for a in row] for row in trace.output]).sub(expected).abs().reshape(-1)

    tolerance = first_order_tolerance(net, run, float(model.quantization.largest_error))
    assert (deviation(model) <= tolerance).all()
    swapped = import_state_dict(
        net.state_dict(), {**architecture, "norm-first": not norm_first}, {"bits": 32, "frac": 10}
    )
    assert deviation(swapped).max() > 10 * tolerance.max()  # a wrong placement is another model, far outside


def test_the_python_api_states_the_reading_with_its_arithmetic():
    """``verify_tf.api.check`` on a model from ``import_state_dict`` (no spec): the verdict's reading names the
    arithmetic the check ran in, as a spec's does."""
    from verify_tf.api import GridDomain, check

    architecture = {**ARCH, "layernorm": "integer", "norm-first": True}
    model = import_state_dict(encoder(norm_first=True).state_dict(), architecture, {"bits": 16, "frac": 8})
    assert model.reading == (  # the importer alone does not know the arithmetic
        "quantized reading of a float32 torch model: weights to nearest 16.8, fixed-point softmax, "
        "fixed-point LayerNorm"
    )
    domain = GridDomain(values=(F(0), F(1, 2)), length=2, dim=4)
    verdict = check(model, Fixed(16, 8), domain, "permutation-equivariance", engine="enumerate")
    assert verdict.status == "proved" and verdict.reading == POST_LN  # (the reading does not depend on pre/post)
    assert verdict.quantization["largest_error"] == str(model.quantization.largest_error)


@pytest.mark.parametrize(
    ("tensor", "kind"),
    [
        (lambda w: w.to_sparse(), "torch.sparse_coo"),
        (lambda w: torch.empty(w.shape, device="meta"), "meta"),
        (lambda w: w.to(torch.complex64), "complex"),
    ],
)
def test_tensors_without_dense_real_data_are_refused_by_name(tmp_path, tensor, kind):
    """torch.load(weights_only=True) reads these back; the importer refuses them by name before reading any
    (a sparse or meta weight would otherwise end in a traceback), located at the state dict's key."""
    state = encoder(norm_first=False).state_dict()
    state["layers.0.linear1.weight"] = tensor(state["layers.0.linear1.weight"])
    torch.save(state, tmp_path / "enc.pt")
    result = CliRunner().invoke(main, ["check", str(write_spec(tmp_path))])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"spec.yaml:3: model.torch: layers.0.linear1.weight: a {kind} tensor" in result.output

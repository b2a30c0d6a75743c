"""The float reading of a torch import (``architecture: {reading: float}``, docs/semantics.md §7 "Float as trained"):
crasp-equivalence decided on an exact enclosure of every float32 evaluation of the trained TinyTransformer, a
refutation replayed in torch itself under ``no_grad`` and with autograd, the verdict labelled ``float32 as trained``.

The models are built by hand (``hand_built``), so every expected value is known without training:

* "ends in a": embedding a → e0, b → e1, BOS → e2, everything else zero (attention and feed-forward add exactly 0),
  post-LN with γ = 1, β = 0, readout 2·(z0 − z1). LN of e0 is (e0 − 1/4)/sqrt(3/16 + eps), so the readout is
  ±2·(3/4 + 1/4)/sqrt(3/16 + 1e-5) ≈ ±4.619 (hand computation): right by a wide margin at every prefix;
* "majority": uniform causal attention (zero queries and keys) averages v = z0 − z1 into coordinate 3, so the readout
  is 2·(#a − #b)/(n + 1) (n letters and BOS) plus the bias. Bias 0: at a tie (#a = #b, first at 'ab') the value is
  exactly 0 in torch and the program rejects (strictly more a's), but the enclosure straddles 0: unknown at 'ab'.
  Bias float32(0.01) with threshold −float32(0.01) (the decision is the trained model's own, readout > 0): every
  tie accepts, so the least wrong prefix is 'ab' at position 1 (shortlex: 'a', 'b', 'aa' are right), refuted there.
"""

import json
from fractions import Fraction as F

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs the torch extra")
from click.testing import CliRunner

from verify_tf.builders.torch_float import ReplayTransformer, float_network, replay
from verify_tf.cli import main
from verify_tf.experiments.modules import TinyTransformer
from verify_tf.explain.replay import explain_verdict
from verify_tf.floats import decode
from verify_tf.floats.enclosure import SCALE, Box, _at_scale
from verify_tf.floats.torch_enclosure import _Norm, enclose_readout, layer_norm, prepare_torch
from verify_tf.floats.torch_network import FloatNorm
from verify_tf.runner import Overrides, check_property
from verify_tf.spec import SpecError, load_spec

torch.set_num_threads(1)
ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent
BIAS = float(np.float32(0.01))  # = 5368709/536870912 exactly


def hand_built(layernorm: str = "post", *, attention: bool = False, bias: float = 0.0) -> TinyTransformer:
    """The module docstring's models: width 4, one head, one block, APE (zero), causal, max length 12."""
    model = TinyTransformer(3, 4, 1, 1, 4, 1, positional="ape", causal=True, max_length=12, layernorm=layernorm)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
        model.embedding.weight.copy_(torch.tensor([[0, 0, 1.0, 0], [1.0, 0, 0, 0], [0, 1.0, 0, 0]]))
        for block in model.blocks:
            if layernorm != "none":
                block.norm_attention.weight.fill_(1.0)
                block.norm_ffn.weight.fill_(1.0)
        if attention:
            model.blocks[0].attention.W_v.weight[3, 0] = 1.0
            model.blocks[0].attention.W_v.weight[3, 1] = -1.0
            model.blocks[0].attention.W_o.weight[3, 3] = 1.0
            model.readout.weight[0, 3] = 2.0
        else:
            model.readout.weight[0, 0] = 2.0
            model.readout.weight[0, 1] = -2.0
        model.readout.bias[0] = bias
    return model.eval()


def random_model(layernorm: str, seed: int, heads: int = 2, layers: int = 2) -> TinyTransformer:
    torch.manual_seed(seed)
    model = TinyTransformer(
        3, 8, heads, layers, 12, 2, positional="ape", causal=True, max_length=8, layernorm=layernorm
    )
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.05)  # LayerNorm's γ, β off 1, 0 too
    return model.eval()


def arch(layernorm: str, heads: int = 1, **extra):
    return {"heads": heads, "causal": True, "alphabet": ["^", "a", "b"], "bos": "^", "norm-first": layernorm == "pre"}


def exact(values: np.ndarray) -> np.ndarray:
    return np.vectorize(lambda v: F(float(v)) * (1 << SCALE), otypes=[object])(values)


# ---------------------------------------------------------------- the replay module and the enclosure


@pytest.mark.parametrize("layernorm", ["none", "pre", "post"])
def test_the_replay_module_is_tinytransformer_bit_for_bit(layernorm):
    """``ReplayTransformer`` (builders may not import experiments) is the experiments' module: same names
    (load_state_dict strict) and the same float32 outputs, bit for bit, under both kernels."""
    model = random_model(layernorm, seed=3)
    rows = np.random.default_rng(0).integers(0, 3, size=(8, 6))
    twin = ReplayTransformer(model.state_dict(), {**arch(layernorm, heads=2), "readout-row": 1})
    tokens = torch.as_tensor(rows)
    with torch.no_grad():
        assert torch.equal(twin(tokens), model(tokens))
    assert torch.equal(twin(tokens).detach(), model(tokens).detach())


@pytest.mark.parametrize("layernorm", ["none", "pre", "post"])
def test_the_enclosure_contains_torch_under_both_kernels(layernorm):
    """Differential: 2 layers, 2 heads, APE, causal, LayerNorm γ and β moved off 1 and 0; 24 random inputs of
    length 6 (BOS first): torch's readout under no_grad and with autograd lies inside the enclosure everywhere."""
    model = random_model(layernorm, seed=7)
    architecture = {**arch(layernorm, heads=2), "readout-row": 1}
    network = float_network(model.state_dict(), architecture, "test")
    ids = network.ids(np.random.default_rng(1).integers(0, 2, size=(24, 6)), ("a", "b"))
    box = enclose_readout(prepare_torch(network), ids)
    outputs = replay(model.state_dict(), architecture, ids)
    assert set(outputs) == {"no_grad", "autograd"}
    for values in outputs.values():
        inside = (box.lo <= exact(values)) & (exact(values) <= box.hi)
        assert inside.all()
    with torch.no_grad():
        assert np.array_equal(outputs["no_grad"], model(torch.as_tensor(ids))[..., 1].numpy())


def test_layer_norm_enclosure_holds_where_cancellation_is_worst():
    """N = 16 rows of three kinds: spread 30 around 0, spread 1 around 3, and spread 1e-3 around 100 (the variance's
    cancellation: the mean's error bound E_μ ≈ 8.6·u·M is 5 % of the spread there, so E_2 is about 30 % of M2).
    torch's LayerNorm of every row lies inside the enclosure; the first two kinds are enclosed within 1/1000
    (measured: 1.3e-4 to 3.9e-4; 6.0e-4 to 4.3e-3 with the bound before the Cauchy–Schwarz form of E_2), the third
    wider than 1/10 (measured 0.15 to 0.18: rounding at 100 is a few percent of the spread; docs/semantics.md §7)."""
    rng = np.random.default_rng(2)
    rows = np.concatenate(
        [rng.normal(size=(8, 16)) * 30, 3 + rng.normal(size=(8, 16)), 100 + rng.normal(size=(8, 16)) * 1e-3]
    ).astype(np.float32)
    norm = torch.nn.LayerNorm(16)
    with torch.no_grad():
        norm.weight.copy_(torch.tensor(rng.normal(size=16) + 1.0))
        norm.bias.copy_(torch.tensor(rng.normal(size=16)))
        expected = norm(torch.tensor(rows)).numpy()
    lo, hi = _at_scale(rows)
    box = layer_norm(
        Box(lo[None], hi[None]),
        _Norm.of(FloatNorm(norm.weight.detach().numpy(), norm.bias.detach().numpy(), norm.eps)),
    )
    values = exact(expected)[None]
    assert ((box.lo <= values) & (values <= box.hi)).all()
    width = (box.hi - box.lo)[0].max(axis=1)
    assert all(w < (1 << SCALE) // 1000 for w in width[:16])
    assert all((1 << SCALE) // 10 < w < (1 << SCALE) // 4 for w in width[16:])


def test_threshold_decisions_are_strict_on_the_accepting_side():
    """Accept iff the readout exceeds the cut: an enclosure [c, c] at the cut rejects for every evaluation (RIGHT for
    a rejection, WRONG for an acceptance); one unit above the cut accepts; straddling is undecided."""
    one = 1 << SCALE
    box = Box(np.array([[one, one + 1, one - 1]], dtype=object), np.array([[one, one + 1, one + 1]], dtype=object))
    accept = decode.threshold(box, F(1), np.array([[True, True, True]]))
    reject = decode.threshold(box, F(1), np.array([[False, False, False]]))
    assert accept.tolist() == [[decode.WRONG, decode.RIGHT, decode.UNDECIDED]]
    assert reject.tolist() == [[decode.RIGHT, decode.WRONG, decode.UNDECIDED]]


# ---------------------------------------------------------------- verdicts


SPEC = """
model:
  torch: model.pt
  architecture: {{heads: 1, causal: true, alphabet: ["^", "a", "b"], bos: "^", readout-bias: drop{extra},
                 reading: float}}
  quantize: {{bits: 24, frac: 14}}
arithmetic: {{mode: fixed, bits: 24, frac: 14}}
domain:
  strings: {{alphabet: [a, b], max-length: {length}}}
properties:
  - crasp-equivalence: {{program: {program}, mode: prefix, engine: enumerate, threshold: {threshold}}}
"""


def verdict_of(tmp_path, model, program, *, extra="", threshold="0", length=5, engine="enumerate", spec_too=False):
    torch.save(model.state_dict(), tmp_path / "model.pt")
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(SPEC.format(extra=extra, program=ROOT / "examples/crasp" / program, threshold=threshold,
                                     length=length))  # fmt: skip
    spec = load_spec(spec_path)
    verdict = check_property(spec, spec.properties[0], Overrides(engine=engine))
    return (spec, verdict) if spec_too else verdict


@pytest.mark.parametrize("layernorm", ["pre", "post"])
def test_a_wide_margin_is_proved_for_the_float_model(tmp_path, layernorm):
    """'ends in a' (readout ±4.62 post-LN by hand; pre-LN: LN feeds zero sublayers, the stream stays e0/e1, ±2): every
    prefix of every string up to length 5 decided right for every float32 evaluation, labelled as the model runs."""
    model = hand_built(layernorm)
    result = verdict_of(
        tmp_path, model, "ends-in-a.cr", extra=f", layernorm: integer, norm-first: {layernorm == 'pre'}"
    )
    assert result.status == "proved", result.detail
    assert result.label == "proved (exhaustive; float32 as trained)"
    assert (result.reading, result.as_run) == ("float32 as trained", True)
    assert "for every float32 evaluation of the trained model" in result.detail


def test_engine_auto_picks_enumerate_for_the_float_reading(tmp_path):
    """auto's cost model would pick counting (a causal model without relative positions): counting refuses the float
    reading in its prediction, so auto runs enumerate and proves 'ends in a' (no LayerNorm: readout ±2)."""
    result = verdict_of(tmp_path, hand_built("none"), "ends-in-a.cr", length=4, engine="auto")
    assert (result.status, result.engine) == ("proved", "enumerate"), result.detail
    assert "counting" in str(result.auto)


def test_a_wrong_float_model_is_refuted_at_the_least_prefix_and_replayed_in_torch(tmp_path):
    """'majority' with the bias float32(0.01) and the trained decision (threshold −bias): every tie accepts; the
    least wrong prefix is 'ab' at position 1; the witness carries torch's readout under both kernels (0.01 by hand:
    the tie's average is exactly 0), inside the enclosure."""
    spec, result = verdict_of(
        tmp_path,
        hand_built("none", attention=True, bias=BIAS),
        "majority.cr",
        threshold="-5368709/536870912",
        spec_too=True,
    )
    assert result.status == "refuted", result.detail
    assert result.label == "refuted (exhaustive; float32 as trained)"
    witness = result.counterexample
    assert (witness["string"], witness["position"], witness["program_output"], witness["model_output"]) == (
        "ab",
        1,
        False,
        True,
    )
    assert witness["model_readout"] == {"no_grad": repr(BIAS), "autograd": repr(BIAS)}
    assert witness["reading"] == "float32 as trained"
    notes = explain_verdict(spec, result).notes  # --explain's trace is the IR's: it says so
    assert any("replays the fixed-point IR" in note and "not the float model" in note for note in notes)


def test_a_margin_inside_the_enclosure_is_unknown_naming_the_input(tmp_path):
    """'majority' without bias: the tie 'ab' gives exactly 0 in torch (right: the program rejects), but the enclosure
    straddles the threshold 0: unknown, naming 'ab' at position 1 (the least tie) and torch's values."""
    result = verdict_of(tmp_path, hand_built("none", attention=True), "majority.cr")
    assert result.status == "unknown", result.detail
    assert result.label.startswith("unknown (float32 as trained)")
    assert "string 'ab' at position 1: the program rejects" in result.detail
    assert "straddles the threshold 0; torch gives 0 (no_grad), 0 (autograd)" in result.detail


def test_the_replay_must_agree_or_the_check_is_an_error(tmp_path, monkeypatch):
    """Never a refutation without replay: if torch decided the witness right (here: a replay patched to return the
    program's side), the check reports an enclosure error instead of a verdict."""
    from verify_tf.builders import torch_float

    monkeypatch.setattr(torch_float, "replay", lambda state, architecture, ids: {"no_grad": np.zeros(ids.shape)})
    result = verdict_of(
        tmp_path, hand_built("none", attention=True, bias=BIAS), "majority.cr", threshold="-5368709/536870912"
    )
    assert result.status == "error"
    assert "enclosure check failed" in result.detail


def test_other_layouts_are_refused_at_the_reading_key(tmp_path):
    """An nn.TransformerEncoder state dict under reading: float: exit 2, located at model.architecture.reading."""
    layer = torch.nn.TransformerEncoderLayer(4, 1, 6, dropout=0.0, batch_first=True)
    torch.save(torch.nn.TransformerEncoder(layer, 1, enable_nested_tensor=False).state_dict(), tmp_path / "enc.pt")
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "model:\n  torch: enc.pt\n  architecture: {heads: 1, layernorm: integer, norm-first: false, reading: float}\n"
        "  quantize: {bits: 16, frac: 8}\narithmetic: {mode: fixed, bits: 16, frac: 8}\n"
        "domain:\n  grid: {dim: 4, values: [0, 1]}\n  length: 2\nproperties:\n  - permutation-equivariance: {}\n"
    )
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    assert "model.architecture.reading" in str(caught.value)
    assert "TinyTransformer only" in str(caught.value)
    outcome = CliRunner().invoke(main, ["check", str(spec)])
    assert outcome.exit_code == 2 and "Traceback" not in outcome.output


def test_the_json_report_says_as_run(tmp_path):
    """The JSON report of a float-reading verdict: reading 'float32 as trained', as_run true."""
    torch.save(hand_built("post").state_dict(), tmp_path / "model.pt")
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        SPEC.format(
            extra=", layernorm: integer, norm-first: false",
            program=ROOT / "examples/crasp/ends-in-a.cr",
            threshold="0",
            length=3,
        )
    )
    outcome = CliRunner().invoke(main, ["check", str(spec), "--json", str(tmp_path / "out.json")])
    assert outcome.exit_code == 0, outcome.output
    report = json.loads((tmp_path / "out.json").read_text())
    row = report["results"][0] if "results" in report else report[0]
    assert (row["reading"], row["as_run"], row["verdict"]) == ("float32 as trained", True, "proved")


def test_a_float_reading_proof_is_certified_and_audited(tmp_path):
    """--certify: the certificate digests the readout's enclosure (not the fixed-point IR's readout), names the
    reading, and audit re-checks it (the sample re-enclosed, torch inside the enclosure): ok. 'ends in a' up to 3."""
    torch.save(hand_built("none").state_dict(), tmp_path / "model.pt")
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(extra="", program=ROOT / "examples/crasp/ends-in-a.cr", threshold="0", length=3))
    report, certificates = tmp_path / "report.json", tmp_path / "certs"
    outcome = CliRunner().invoke(main, ["check", str(spec), "--json", str(report), "--certify", str(certificates)])
    assert outcome.exit_code == 0, outcome.output
    (certificate,) = certificates.glob("*/certificate.json")
    assert json.loads(certificate.read_text())["outputs"] == "the property's certified outputs (float32 as trained)"
    audit = CliRunner().invoke(main, ["audit", str(report)])
    assert audit.exit_code == 0 and "1 ok, 0 partial, 0 failed" in audit.output, audit.output


def test_a_language_domain_is_read_word_by_word_in_the_float_reading(tmp_path):
    """On the words of a regular language the enumerate engine's prefix-tree scan evaluates the fixed-point IR; under
    the float reading it steps aside and every word is enclosed itself: 'ends in a' on the words of a+b*a (every
    word ends in a, but its prefixes a..ab..b end in b): proved up to length 6, post-LN, margin ±4.62 by hand."""
    torch.save(hand_built("post").state_dict(), tmp_path / "model.pt")
    spec_path = tmp_path / "spec.yaml"
    text = SPEC.format(
        extra=", layernorm: integer, norm-first: false",
        program=ROOT / "examples/crasp/ends-in-a.cr",
        threshold="0",
        length=6,
    )
    spec_path.write_text(text.replace("max-length: 6}", 'max-length: 6, language: {regex: "a+b*a"}}'))
    spec = load_spec(spec_path)
    result = check_property(spec, spec.properties[0], Overrides(engine="enumerate"))
    assert (result.status, result.label) == ("proved", "proved (exhaustive; float32 as trained)"), result.detail
    assert "prefix_tree" not in str(result.statistics)

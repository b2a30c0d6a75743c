"""Hugging Face checkpoints checked as they run (``model: {huggingface: FOLDER}``; docs/import.md, semantics §7).

Every model here is a real ``transformers`` model from a tiny seeded config, saved with ``save_pretrained`` into the
test's folder (never a download): GPT-2 (``GPT2LMHeadModel``: learned positions, pre-LN, tanh-GELU, Conv1D weights,
tied head), Llama (``LlamaForCausalLM``: RMSNorm, RoPE, SwiGLU, grouped key/value heads) and BERT (``BertForMaskedLM``:
post-LN, erf-GELU, token types, bidirectional, the MLM head's transform and bias). For each:

* the enclosure contains transformers' own float32 forward output (SDPA and eager attention) and verify-tf's float32
  mirror at every position of every string of the domain;
* ``output-bounds`` with the true minimum and maximum of the readout over the domain (computed here with
  transformers' forward pass over every string) widened by 10^-3 is proved; a bound 10^-3 inside either is refuted,
  with a witness whose input and position transformers reproduces outside the bound.
"""

import itertools
from fractions import Fraction as F
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs the torch extra")
transformers = pytest.importorskip("transformers", reason="needs transformers (the test extra pins it)")

from verify_tf.builders.hf_checkpoint import load_checkpoint, network_of, readout_choice
from verify_tf.builders.hf_replay import library_replay
from verify_tf.floats.enclosure import SCALE
from verify_tf.floats.transformer_enclosure import enclose_readout, prepare
from verify_tf.floats.transformer_mirror import readout as mirror_readout
from verify_tf.runner import Overrides, check_property
from verify_tf.spec import SpecError, load_spec

torch.set_num_threads(1)
transformers.logging.set_verbosity_error()
ALPHABET = ("a", "b", "c")  # the vocabulary's first three ids: the domain's tokens
VOCABULARY = ["a", "b", "c", "d"]
LENGTH = 3
MARGIN = F(1, 1000)


def _gpt2() -> "torch.nn.Module":
    config = transformers.GPT2Config(vocab_size=4, n_positions=6, n_embd=8, n_layer=1, n_head=2, bos_token_id=3,
                                     eos_token_id=3)  # fmt: skip
    return transformers.GPT2LMHeadModel(config)


def _llama() -> "torch.nn.Module":
    config = transformers.LlamaConfig(vocab_size=4, hidden_size=16, intermediate_size=16, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=6,
                                      bos_token_id=3, eos_token_id=3, pad_token_id=None)  # fmt: skip
    return transformers.LlamaForCausalLM(config)


def _bert() -> "torch.nn.Module":
    config = transformers.BertConfig(vocab_size=4, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=8, max_position_embeddings=6, pad_token_id=3)  # fmt: skip
    return transformers.BertForMaskedLM(config)


BUILDERS = {"gpt2": _gpt2, "llama": _llama, "bert": _bert}
READOUTS = {"gpt2": {"logit": 1}, "llama": {"logit": "b", "minus": "a"}, "bert": {"logit": "c"}}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    out = {}
    for name, build in BUILDERS.items():
        torch.manual_seed(7)
        folder = tmp_path_factory.mktemp(name)
        build().save_pretrained(folder)
        out[name] = folder
    return out


def _rows() -> dict[int, np.ndarray]:
    return {n: np.array(list(itertools.product(range(len(ALPHABET)), repeat=n)), dtype=np.int64) for n in (1, 2, 3)}


def _network(folder: Path, name: str):
    checkpoint = load_checkpoint(folder, VOCABULARY)
    choice = readout_choice(checkpoint.symbols, READOUTS[name])
    return checkpoint, choice, network_of(checkpoint, choice, None)


def _library(folder: Path, ids: np.ndarray, name: str) -> np.ndarray:
    """transformers' own readout (B, n), float64 of the float32 logits, computed here without verify-tf."""
    model = getattr(
        transformers, {"gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM", "bert": "BertForMaskedLM"}[name]
    )
    model = model.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.no_grad():
        logits = model(input_ids=torch.as_tensor(ids)).logits.double().numpy()
    ids_of = {"a": 0, "b": 1, "c": 2}
    spec = READOUTS[name]
    token = spec["logit"] if isinstance(spec["logit"], int) else ids_of[spec["logit"]]
    value = logits[..., token]
    if "minus" in spec:
        value = value - logits[..., ids_of[spec["minus"]]]
    return value


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_the_enclosure_contains_the_library_forward_on_every_input(folders, name):
    """Every string of length 1..3 over {a, b, c}, every position: transformers under SDPA and eager attention and
    the float32 mirror all lie inside the enclosure (its widest interval, measured: GPT-2 5.4e-5, Llama 1.7e-4, BERT
    5.1e-4)."""
    checkpoint, choice, network = _network(folders[name], name)
    replay = library_replay(checkpoint.folder, checkpoint.config.text("model_type"), checkpoint.tensors, choice)
    widest = F(0)
    for rows in _rows().values():
        ids = network.ids(rows, ALPHABET)
        box = enclose_readout(prepare(network), ids)
        lo = np.vectorize(lambda v: F(int(v), 1 << SCALE), otypes=[object])(box.lo)
        hi = np.vectorize(lambda v: F(int(v), 1 << SCALE), otypes=[object])(box.hi)
        evaluations = {**replay(ids), "mirror": mirror_readout(network, ids)}
        assert set(evaluations) == {"transformers (sdpa)", "transformers (eager)", "mirror"}
        for label, values in evaluations.items():
            assert ((lo <= values) & (values <= hi)).all(), label
        widest = max(widest, (hi - lo).max())
    assert widest < MARGIN  # so that 10^-3 on either side of the true extremes decides (see the next test)


SPEC = """\
model:
  huggingface: {folder}
  vocabulary: [a, b, c, d]
{readout}
domain:
  strings: {{alphabet: [a, b, c], max-length: 3}}
properties:
  - output-bounds: {{lo: {lo}, hi: {hi}, engine: enumerate}}
"""


def _verdict(tmp_path, folder, name, lo, hi):
    readout = "\n".join(f"  {k}: {v}" for k, v in READOUTS[name].items())
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.format(folder=folder, readout=readout, lo=lo, hi=hi))
    spec = load_spec(path)
    return check_property(spec, spec.properties[0], Overrides())


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_the_true_range_is_proved_and_a_bound_inside_it_refuted(folders, tmp_path, name):
    """The truth from transformers' forward pass over every string: [min − 10^-3, max + 10^-3] is proved; max − 10^-3
    as the upper bound is refuted at an input where transformers exceeds it, min + 10^-3 as the lower bound likewise."""
    folder = folders[name]
    values = {}
    for n, rows in _rows().items():
        library = _library(folder, rows, name)
        for r, row in enumerate(rows):
            for p in range(n):
                values[("".join(ALPHABET[i] for i in row), p)] = F(float(library[r, p]))
    low, high = min(values.values()), max(values.values())
    proved = _verdict(tmp_path, folder, name, low - MARGIN, high + MARGIN)
    assert proved.status == "proved", proved.detail
    assert proved.label == "proved (exhaustive; float32 as run, replayed in transformers)"
    assert proved.as_run is True
    for lo, hi, beyond in ((low - MARGIN, high - MARGIN, lambda v: v > high - MARGIN),
                           (low + MARGIN, high + MARGIN, lambda v: v < low + MARGIN)):  # fmt: skip
        refuted = _verdict(tmp_path, folder, name, lo, hi)
        assert refuted.status == "refuted", refuted.detail
        witness = refuted.counterexample
        word = "".join(witness["input"])
        assert beyond(values[(word, witness["position"])])  # transformers itself reproduces it
        assert set(witness["replayed_in"]) == {"transformers (sdpa)", "transformers (eager)"}
        assert all(beyond(F(v)) for v in witness["replayed_in"].values())


def test_without_transformers_the_witness_is_replayed_in_the_mirror(folders, tmp_path, monkeypatch):
    """transformers missing: the same refutation, replayed in verify-tf's float32 mirror, and the verdict says so."""
    from verify_tf.builders import hf_replay

    monkeypatch.setattr(hf_replay, "transformers_available", lambda: False)
    result = _verdict(tmp_path, folders["gpt2"], "gpt2", -10, F(-1, 10**6))
    assert result.status == "refuted", result.detail
    assert result.reading == "float32 as run, replayed in verify-tf's float32 mirror (no transformers)"
    assert set(result.counterexample["replayed_in"]) == {"verify-tf mirror"}


def _error(tmp_path, body: str) -> SpecError:
    path = tmp_path / "spec.yaml"
    path.write_text(body)
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    return caught.value


BODY = """\
model:
  huggingface: {folder}
  logit: 1
domain:
  strings: {{alphabet: ["0", "1"], max-length: 2}}
properties:
  - output-bounds: {{lo: -1, hi: 1}}
"""


def test_a_hub_name_is_refused_saying_nothing_is_downloaded(tmp_path):
    error = _error(tmp_path, BODY.format(folder="openai-community/gpt2"))
    assert error.line == 2 and error.path == "model.huggingface"
    assert "looks like a model name on the Hugging Face hub, and verify-tf never downloads" in str(error)


def test_a_folder_without_config_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    error = _error(tmp_path, BODY.format(folder="empty"))
    assert error.path == "model.huggingface" and "config.json: no config.json in" in str(error)


def _copy(folder: Path, target: Path) -> Path:
    target.mkdir()
    for item in folder.iterdir():
        (target / item.name).write_bytes(item.read_bytes())
    return target


def test_shapes_that_disagree_with_the_config_name_the_tensor_and_file(folders, tmp_path):
    import json

    broken = _copy(folders["gpt2"], tmp_path / "broken")
    config = json.loads((broken / "config.json").read_text())
    config["n_inner"] = 16  # the weights have 4·8 = 32
    (broken / "config.json").write_text(json.dumps(config))
    error = _error(tmp_path, BODY.format(folder="broken"))
    assert "model.safetensors: transformer.h.0.mlp.c_fc.weight: shape [8, 32], but config.json implies [8, 16]" in str(
        error
    )


def test_a_missing_tensor_is_named(folders, tmp_path):
    from safetensors.numpy import load_file, save_file

    broken = _copy(folders["gpt2"], tmp_path / "broken")
    tensors = load_file(broken / "model.safetensors")
    del tensors["transformer.ln_f.bias"]
    save_file(tensors, broken / "model.safetensors", metadata={"format": "pt"})
    error = _error(tmp_path, BODY.format(folder="broken"))
    assert "model.safetensors: transformer.ln_f.bias: missing tensor (expected shape [8] from config.json)" in str(
        error
    )


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("model_type", "gemma", "config.json: model_type: 'gemma' is not a layout verify-tf reads"),
        ("activation_function", "quick_gelu", "activation 'quick_gelu' has no float32 enclosure"),
        ("n_layer", 10**9, "weights by the layout's formula"),
    ],
)
def test_unsupported_configs_exit_2_naming_the_key(folders, tmp_path, key, value, expected):
    import json

    broken = _copy(folders["gpt2"], tmp_path / "broken")
    config = json.loads((broken / "config.json").read_text())
    config[key] = value
    (broken / "config.json").write_text(json.dumps(config))
    error = _error(tmp_path, BODY.format(folder="broken"))
    assert expected in str(error) and error.path == "model.huggingface"


SIZED = {  # (model class, config class, config): what the size formulas are checked on (see the test below)
    "GPT-2, tied head": ("GPT2LMHeadModel", "GPT2Config", dict(vocab_size=5, n_positions=7, n_embd=8, n_layer=2,
                                                               n_head=2, n_inner=12)),
    "Llama, untied head": ("LlamaForCausalLM", "LlamaConfig", dict(vocab_size=5, hidden_size=16, intermediate_size=12,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)),
    "Llama, every bias": ("LlamaForCausalLM", "LlamaConfig", dict(vocab_size=5, hidden_size=16, intermediate_size=12,
                          num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2, attention_bias=True,
                          mlp_bias=True)),
    "Qwen2 (q, k, v biases)": ("Qwen2ForCausalLM", "Qwen2Config", dict(vocab_size=5, hidden_size=16,
                               intermediate_size=12, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                               tie_word_embeddings=False)),
    "BertForMaskedLM": ("BertForMaskedLM", "BertConfig", dict(vocab_size=5, hidden_size=8, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=12, max_position_embeddings=7)),
    "Llama, tied head": ("LlamaForCausalLM", "LlamaConfig", dict(vocab_size=5, hidden_size=16, intermediate_size=12,
                         num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)),
    "BertModel (pooler)": ("BertModel", "BertConfig", dict(vocab_size=5, hidden_size=8, num_hidden_layers=1,
                           num_attention_heads=2, intermediate_size=12, max_position_embeddings=7)),
}  # fmt: skip


@pytest.mark.parametrize("name", list(SIZED))
def test_the_size_formula_counts_the_weights_the_layout_saves(tmp_path, name):
    """The size limit (2^24 weights, docs/import.md) is a formula on config.json, applied before a tensor is read.
    Checked against the weights save_pretrained writes (counted here from model.safetensors): equal for every layout
    whose head is written out, an upper bound where the head is tied (Llama) or the pooler stands in for the MLM
    head (BertModel). Before, BERT's formula missed the embeddings' LayerNorm bias (d) and Llama's biases."""
    import json

    from safetensors.numpy import load_file

    from verify_tf.builders.hf_layouts import LAYOUTS, Config

    model_class, config_class, options = SIZED[name]
    getattr(transformers, model_class)(getattr(transformers, config_class)(**options)).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    formula = LAYOUTS[config["model_type"]][1](Config(config, "config.json"))
    saved = sum(tensor.size for tensor in load_file(tmp_path / "model.safetensors").values())
    if name in ("Llama, tied head", "BertModel (pooler)"):
        assert saved < formula, (saved, formula)
    else:
        assert formula == saved


def test_what_the_float_reading_cannot_represent_is_refused_by_name(folders, tmp_path):
    import json

    for key, value, expected in (
        ("rope_parameters", {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 2.0}, "only RoPE's default type"),
        ("sliding_window", 4, "sliding-window attention is not read"),
        ("num_local_experts", 8, "mixtures of experts are not read"),
    ):
        broken = _copy(folders["llama"], tmp_path / f"broken-{key}")
        config = json.loads((broken / "config.json").read_text())
        config[key] = value
        (broken / "config.json").write_text(json.dumps(config))
        error = _error(tmp_path, BODY.format(folder=broken.name))
        assert expected in str(error), str(error)


def test_a_property_that_reads_the_ir_is_refused_on_a_checkpoint(folders, tmp_path):
    body = BODY.format(folder=folders["gpt2"]).replace(
        "- output-bounds: {lo: -1, hi: 1}", "- permutation-equivariance: {}"
    )
    error = _error(tmp_path, body)
    assert "reads the model IR, which a checkpoint read as it runs in float32 does not have" in str(error)
    assert "output-bounds" in (error.hint or "")


# ---------------------------------------------------------------- nanoGPT


def _nanogpt_checkpoint(path: Path, bias: bool, compiled: bool) -> tuple["torch.nn.Module", dict]:
    """A nanoGPT ckpt.pt (train.py's dict: model, model_args, optimizer, iter_num, best_val_loss, config) whose
    weights are a transformers GPT-2 with GELU (erf), nanoGPT's architecture: the ground truth is transformers'
    forward, an implementation independent of verify-tf's replay. Conv1D (in, out) weights are nanoGPT's Linear
    (out, in) transposed; without bias, transformers' biases are zero (adding zero is exact)."""
    torch.manual_seed(11)
    config = transformers.GPT2Config(vocab_size=4, n_positions=6, n_embd=8, n_layer=1, n_head=2,
                                     activation_function="gelu", bos_token_id=3, eos_token_id=3)  # fmt: skip
    reference = transformers.GPT2LMHeadModel(config).eval()
    state = {}
    for key, value in reference.state_dict().items():
        if key == "lm_head.weight":
            continue
        if not bias and key.endswith(".bias"):
            with torch.no_grad():
                value.zero_()
            continue
        conv = any(part in key for part in ("c_attn.weight", "c_proj.weight", "c_fc.weight"))
        state[key] = value.t().contiguous() if conv else value.clone()
    state["lm_head.weight"] = state["transformer.wte.weight"]
    if compiled:
        state = {"_orig_mod." + k: v for k, v in state.items()}
    parameters = [torch.nn.Parameter(v.clone()) for v in state.values()]
    optimizer = torch.optim.AdamW(parameters, lr=1e-3)
    sum(p.sum() for p in parameters).backward()
    optimizer.step()
    model_args = {
        "n_layer": 1,
        "n_head": 2,
        "n_embd": 8,
        "block_size": 6,
        "bias": bias,
        "vocab_size": 4,
        "dropout": 0.0,
    }
    checkpoint = {"model": state, "model_args": model_args, "optimizer": optimizer.state_dict(), "iter_num": 100,
                  "best_val_loss": 1.25, "config": {"dataset": "toy", "batch_size": 4}}  # fmt: skip
    torch.save(checkpoint, path)
    return reference, model_args


NANOGPT = """\
model:
  nanogpt: {file}
  vocabulary: [a, b, c, d]
  logit: b
domain:
  strings: {{alphabet: [a, b, c], max-length: 3}}
properties:
  - output-bounds: {{lo: {lo}, hi: {hi}, engine: enumerate}}
"""


@pytest.mark.parametrize(("bias", "compiled"), [(True, False), (False, True)])
def test_a_nanogpt_checkpoint_is_checked_as_it_runs(tmp_path, bias, compiled):
    """The true range of the logit of 'b' from transformers' GPT-2 forward (nanoGPT's architecture) over every string:
    widened by 10^-3 it is proved; 10^-3 inside the maximum it is refuted, replayed in nanoGPT's own forward (flash
    and manual attention), and transformers exceeds the bound at the witness too."""
    reference, _ = _nanogpt_checkpoint(tmp_path / "ckpt.pt", bias, compiled)
    values = {}
    for n, rows in _rows().items():
        with torch.no_grad():
            logits = reference(input_ids=torch.as_tensor(rows)).logits.double().numpy()
        for r, row in enumerate(rows):
            for p in range(n):
                values[("".join(ALPHABET[i] for i in row), p)] = F(float(logits[r, p, 1]))
    low, high = min(values.values()), max(values.values())

    def run(lo, hi):
        path = tmp_path / "spec.yaml"
        path.write_text(NANOGPT.format(file="ckpt.pt", lo=lo, hi=hi))
        spec = load_spec(path)
        return check_property(spec, spec.properties[0], Overrides())

    proved = run(low - MARGIN, high + MARGIN)
    assert proved.status == "proved", proved.detail
    assert proved.reading == "float32 as run, replayed in torch"
    refuted = run(low - MARGIN, high - MARGIN)
    assert refuted.status == "refuted", refuted.detail
    witness = refuted.counterexample
    assert values[("".join(witness["input"]), witness["position"])] > high - MARGIN
    assert set(witness["replayed_in"]) == {"torch (nanoGPT, flash attention)", "torch (nanoGPT, manual attention)"}


@pytest.mark.parametrize(("bias", "compiled"), [(True, False), (False, True)])
def test_the_nanogpt_enclosure_contains_the_library_forward_on_every_input(tmp_path, bias, compiled):
    """As for the Hugging Face layouts above: at every position of every string of length 1..3 over {a, b, c}, the
    logit of 'b' from transformers' GPT-2 forward (nanoGPT's architecture, the checkpoint's source), from the replay
    in nanoGPT's own forward (flash and manual attention) and from the float32 mirror lies inside the enclosure,
    whose widest interval stays below the 10^-3 margin of the test above."""
    from verify_tf.builders.hf_layouts import Tensors
    from verify_tf.builders.nanogpt import nanogpt_network, read_checkpoint
    from verify_tf.builders.nanogpt_replay import NanoGPTReplay

    file = tmp_path / "ckpt.pt"
    reference, model_args = _nanogpt_checkpoint(file, bias, compiled)
    config, tensors, digest = read_checkpoint(file)
    choice = readout_choice(tuple(VOCABULARY), {"logit": "b"})
    network = nanogpt_network(config, Tensors(dict(tensors), file.name), choice, tuple(VOCABULARY), None, digest)
    replay = NanoGPTReplay(file, choice, model_args)
    widest = F(0)
    for rows in _rows().values():
        ids = network.ids(rows, ALPHABET)
        box = enclose_readout(prepare(network), ids)
        lo = np.vectorize(lambda v: F(int(v), 1 << SCALE), otypes=[object])(box.lo)
        hi = np.vectorize(lambda v: F(int(v), 1 << SCALE), otypes=[object])(box.hi)
        with torch.no_grad():
            library = reference(input_ids=torch.as_tensor(ids)).logits[..., 1].double().numpy()
        evaluations = {
            **replay(ids),
            "transformers (GPT-2, erf GELU)": np.vectorize(F, otypes=[object])(library),
            "mirror": mirror_readout(network, ids),
        }
        assert len(evaluations) == 4
        for label, values in evaluations.items():
            assert ((lo <= values) & (values <= hi)).all(), label
        widest = max(widest, (hi - lo).max())
    assert widest < MARGIN


def test_a_used_replay_is_sent_to_a_worker_process_without_its_models(folders, tmp_path):
    """`check -j 2` sends each work unit, and the model with its replay, to a worker process by pickle. After a
    replay had run, nanoGPT's held torch modules whose classes are local to a function: the shipped
    specs/nanogpt-majority.yaml's third property ended `error` ("Can't pickle local object '_module.<locals>.GPT'"),
    the README's CI command exit 4. A pickled replay carries no loaded model and replays the same values."""
    import pickle

    from verify_tf.builders.nanogpt_replay import NanoGPTReplay

    ids = np.array([[0, 1, 2]], dtype=np.int64)
    file = tmp_path / "ckpt.pt"
    _, model_args = _nanogpt_checkpoint(file, True, False)
    checkpoint, choice, _ = _network(folders["gpt2"], "gpt2")
    for replay in (
        NanoGPTReplay(file, readout_choice(tuple(VOCABULARY), {"logit": "b"}), model_args),
        library_replay(checkpoint.folder, "gpt2", checkpoint.tensors, choice),
    ):
        before = replay(ids)
        again = pickle.loads(pickle.dumps(replay))
        assert not getattr(again, "_modules", None) and not getattr(again, "_models", None)
        after = again(ids)
        assert set(after) == set(before) and all((after[k] == before[k]).all() for k in before)


def test_a_nanogpt_file_without_model_args_is_refused(tmp_path):
    torch.save({"model": {"w": torch.zeros(2)}}, tmp_path / "ckpt.pt")
    error = _error(tmp_path, NANOGPT.format(file="ckpt.pt", lo=-1, hi=1))
    assert error.path == "model.nanogpt"
    assert "ckpt.pt: expected nanoGPT's {'model': ..., 'model_args': ...}" in str(error)


# ---------------------------------------------------------------- verify-tf import


def test_import_writes_a_runnable_commented_spec(folders, tmp_path):
    """`verify-tf import FOLDER -o spec.yaml --readout-token b-a --vocabulary a,b,c,d`: the spec names the folder
    relative to itself, reads the logit difference, covers every string over the ordinary tokens up to the context
    (6 positions: 4 + 16 + ... + 4^5 = 1,364 strings ≤ 4,096) and its starter bounds are proved."""
    from click.testing import CliRunner

    from verify_tf.cli import main

    spec = tmp_path / "spec.yaml"
    result = CliRunner().invoke(
        main, ["import", str(folders["gpt2"]), "-o", str(spec), "--readout-token", "b-a", "--vocabulary", "a,b,c,d"]
    )
    assert result.exit_code == 0, result.output
    text = spec.read_text()
    assert 'logit: "b"\n  minus: "a"' in text and "# what the properties read" in text
    assert "1364 strings up to length 5" in text
    loaded = load_spec(spec)
    assert loaded.domain.max_length == 5 and loaded.properties[0].engine == "enumerate"
    verdict = check_property(loaded, loaded.properties[0], Overrides())
    assert verdict.status == "proved", verdict.detail
    again = CliRunner().invoke(main, ["import", str(folders["gpt2"]), "-o", str(spec)])
    assert again.exit_code == 2 and "exists (use --force to overwrite)" in again.output


def test_import_of_a_model_name_says_nothing_is_downloaded(tmp_path):
    from click.testing import CliRunner

    from verify_tf.cli import main

    result = CliRunner().invoke(main, ["import", "openai-community/gpt2", "-o", str(tmp_path / "s.yaml")])
    assert result.exit_code == 2
    assert "verify-tf never downloads" in result.output


# ---------------------------------------------------------------- crasp-equivalence on a checkpoint

ROOT = Path(__file__).resolve().parent.parent


def test_the_stand_in_ir_says_which_models_are_causal(folders):
    """crasp-equivalence examines only the longest strings of a causal model (a prefix decides its position): the
    stand-in IR of a bidirectional BERT must not look causal (it has one zero head per layer, causal as the layer)."""
    from verify_tf.builders.hf_checkpoint import stand_in
    from verify_tf.properties.crasp_equivalence import all_causal

    for name, causal in (("gpt2", True), ("llama", True), ("bert", False)):
        _, _, network = _network(folders[name], name)
        assert all_causal(stand_in(network, name)) is causal, name


def test_a_trained_gpt2_is_refuted_against_majority_one_past_its_training_lengths():
    """specs/hf-gpt2-majority.yaml's checkpoint (trained on strings up to 6): at every prefix up to 6 its decision
    (logit a − logit b > 0) is majority; 'aaaabbb' (4 a's, 3 b's) is the least prefix it decides wrong, and
    transformers' own logits there (computed here) say b."""
    spec = load_spec(ROOT / "specs" / "hf-gpt2-majority.yaml")
    verdict = check_property(spec, spec.properties[2], Overrides())
    assert verdict.status == "refuted", verdict.detail
    witness = verdict.counterexample
    assert (witness["string"], witness["position"], witness["program_output"]) == ("aaaabbb", 6, True)
    assert set(witness["model_readout"]) == {"transformers (sdpa)", "transformers (eager)"}
    model = transformers.GPT2LMHeadModel.from_pretrained(ROOT / "examples/checkpoints/gpt2-majority").eval()
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([[2, 0, 0, 0, 0, 1, 1, 1]])).logits[0, -1]
    assert logits[0] < logits[1]  # transformers decides b: the program says a
    shorter = load_spec(ROOT / "specs" / "hf-gpt2-majority.yaml")
    from dataclasses import replace

    six = replace(shorter, domain=replace(shorter.domain, max_length=6))
    assert check_property(six, six.properties[2], Overrides()).status == "proved"


# ---------------------------------------------------------------- the quantized reading

QUANTIZED = """\
model:
  {source}: {path}
  logit: a
  minus: b
  bos: "^"{vocabulary}
  reading: quantized
  quantize: {{bits: 20, frac: 12}}
arithmetic: {{mode: fixed, bits: 20, frac: 12}}
domain:
  strings: {{alphabet: [a, b], max-length: 5}}
properties:
  - output-bounds: {{lo: -9, hi: 9}}
"""


@pytest.mark.parametrize(
    ("source", "path"),
    [("huggingface", "gpt2-majority"), ("huggingface", "bert-majority"), ("nanogpt", "nanogpt-majority.pt")],
)
def test_the_quantized_reading_is_the_fixed_point_ir_close_to_the_library(tmp_path, source, path):
    """`reading: quantized` maps the checkpoint onto the fixed-point IR as the torch importer does: weights to the
    2^-12 grid (the largest error reported), fixed-point softmax and LayerNorm, i-GELU for GELU, BERT's embedding norm
    and MLM transform as blocks. Its readout stays within 0.2 of transformers' float32 forward on every string up to 5
    (measured: GPT-2 0.13, BERT 0.10, nanoGPT 0.11 on logit differences of ±7.5), and the verdict says NOT the model
    as run."""
    from verify_tf.semantics import evaluate

    vocabulary = '\n  vocabulary: [a, b, "^"]' if source == "nanogpt" else ""
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(QUANTIZED.format(source=source, path=ROOT / "examples/checkpoints" / path,
                                          vocabulary=vocabulary))  # fmt: skip
    spec = load_spec(spec_path)
    assert spec.model.quantization is not None and spec.model.quantization.frac == 12
    assert spec.model.float_model is None  # a real IR: every property and engine reads it
    if source == "nanogpt":
        reference = None
    else:
        cls = transformers.GPT2LMHeadModel if path.startswith("gpt2") else transformers.BertForMaskedLM
        reference = cls.from_pretrained(ROOT / "examples/checkpoints" / path).eval()
    worst = 0.0
    for n in range(1, 6):
        for word in itertools.product("ab", repeat=n):
            readout = evaluate(spec.model, spec.arithmetic, word).readout
            ids = torch.tensor([[2, *("ab".index(c) for c in word)]])
            if reference is None:
                from verify_tf.builders.nanogpt_replay import _module

                checkpoint = torch.load(ROOT / "examples/checkpoints" / path, weights_only=True)
                module = _module(checkpoint["model_args"], True)
                module.load_state_dict(checkpoint["model"])
                reference = module.eval()
            with torch.no_grad():
                out = reference(input_ids=ids) if source == "huggingface" else None
                logits = out.logits[0] if out is not None else reference(ids)[1][0]
            truth = (logits[:, 0] - logits[:, 1]).double().numpy()
            worst = max(worst, max(abs(float(q) - t) for q, t in zip(readout, truth)))
    assert worst < 0.2
    verdict = check_property(spec, spec.properties[0], Overrides())
    assert verdict.status == "proved", verdict.detail
    assert verdict.as_run is False and verdict.reading.startswith("fixed point 20.12 quantization of a float32 ")


def test_the_quantized_reading_refuses_rmsnorm_by_name(folders, tmp_path):
    body = BODY.format(folder=folders["llama"]).replace("  logit: 1", "  logit: 1\n  reading: quantized\n"
                                                        "  quantize: {bits: 20, frac: 12}")  # fmt: skip
    error = _error(tmp_path, body + "arithmetic: {mode: fixed, bits: 20, frac: 12}\n")
    assert error.path == "model.reading"
    assert "RMSNorm has no fixed-point form in the IR" in str(error)


def test_the_quantized_reading_needs_quantize(folders, tmp_path):
    error = _error(
        tmp_path, BODY.format(folder=folders["gpt2"]).replace("  logit: 1", "  logit: 1\n  reading: quantized")
    )
    assert error.path == "model.reading" and "needs quantize" in str(error)

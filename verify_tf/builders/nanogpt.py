"""The nanoGPT model source: ``model: {nanogpt: ckpt.pt, logit: T}`` (Karpathy's nanoGPT checkpoints; docs/import.md).

nanoGPT's ``train.py`` saves ``{'model': state_dict, 'model_args': {n_layer, n_head, n_embd, block_size, bias,
vocab_size, dropout}, 'optimizer': ..., 'iter_num': ..., 'best_val_loss': ..., 'config': ...}`` with ``torch.save``.
The file is read with ``torch.load(weights_only=True)``: tensors, dicts and numbers only, no object from the file is
ever constructed (a pickled class is refused). torch is needed to read the file (the ``torch`` extra).

The layout (``model.py``'s ``GPT``): ``transformer.wte`` and ``transformer.wpe``; per layer ``ln_1`` (LayerNorm, eps
1e-5, a bias when ``bias``), ``attn.c_attn`` (a torch Linear d → 3d: q, k, v in that order, each split per head),
``attn.c_proj``, ``ln_2``, ``mlp.c_fc`` (d → 4d), GELU (erf), ``mlp.c_proj``; ``ln_f``; ``lm_head`` (tied to
``wte``). Pre-LN, causal, learned absolute positions: the GPT-2 float model of ``floats.transformer``. The prefix
``_orig_mod.`` that ``torch.compile`` adds to every key is removed, as nanoGPT's ``sample.py`` does; the causal-mask
buffer ``attn.bias`` of nanoGPT without flash attention is skipped. A refutation is replayed in torch itself:
``NanoGPTReplay`` rebuilds nanoGPT's forward (``F.scaled_dot_product_attention(is_causal=True)``, and the manual
attention nanoGPT falls back to), ``load_state_dict(strict=True)``, float32, ``no_grad``.

The vocabulary: nanoGPT keeps it in ``meta.pkl``, a pickle, which verify-tf never loads; list the tokens with
``vocabulary: [...]`` (id order), or read ids ("0", "1", ...).
"""

from __future__ import annotations

import hashlib
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from ..floats.transformer import MLP, Attention, FloatTransformer, Layer
from ..ir import Model
from ..schema.dsl import Context, Field, FilePath, ListOf, String, join
from ..schema.errors import TORCH_INSTALL, MissingDependency
from ..schema.yamlnodes import Node
from .checkpoint_files import CheckpointError
from .hf_layouts import Config, ReadoutChoice, Tensors, layer_norm, readout_of, split_heads, torch_linear
from .huggingface import READINGS, READOUT_FIELDS, TokenRef
from .sources import QUANTIZE, ModelSource, check_quantize

ARGS = ("n_layer", "n_head", "n_embd", "block_size", "bias", "vocab_size")
COMPILED = "_orig_mod."


def nanogpt_parameters(config: Config) -> int:
    v, p, d, layers = (config.integer(k) for k in ("vocab_size", "block_size", "n_embd", "n_layer"))
    return 2 * v * d + p * d + layers * (12 * d * d + 13 * d) + 2 * d


def nanogpt_network(
    config: Config, tensors: Tensors, choice: ReadoutChoice, symbols: tuple[str, ...], bos: str | None, digest: str
) -> FloatTransformer:
    """nanoGPT's ``GPT`` as a float model (module docstring)."""
    vocab, positions, width = config.integer("vocab_size"), config.integer("block_size"), config.integer("n_embd")
    layers, heads = config.integer("n_layer"), config.integer("n_head")
    bias = config.flag("bias", True)
    if width % heads:
        raise config.error("n_head", f"{heads} heads do not divide n_embd {width}")
    head_dim = width // heads
    wte = tensors.take("transformer.wte.weight", (vocab, width))
    wpe = tensors.take("transformer.wpe.weight", (positions, width))
    blocks = []
    for index in range(layers):
        at = f"transformer.h.{index}"
        if tensors.has(f"{at}.attn.bias"):  # the causal mask nanoGPT registers without flash attention
            tensors.ignore(f"{at}.attn.bias")
        qkv = torch_linear(tensors, f"{at}.attn.c_attn", 3 * width, width, bias)
        attention = Attention(
            split_heads(qkv, heads, head_dim, 0),
            split_heads(qkv, heads, head_dim, width),
            split_heads(qkv, heads, head_dim, 2 * width),
            torch_linear(tensors, f"{at}.attn.c_proj", width, width, bias),
            True,
            Fraction(1),
            head_dim,
            None,
        )
        mlp = MLP(
            torch_linear(tensors, f"{at}.mlp.c_fc", 4 * width, width, bias),
            torch_linear(tensors, f"{at}.mlp.c_proj", width, 4 * width, bias),
            "gelu-erf",
        )
        norms = [layer_norm(tensors, f"{at}.{name}", width, 1e-5, bias) for name in ("ln_1", "ln_2")]
        blocks.append(Layer(attention, mlp, norms[0], norms[1], "pre"))
    final = layer_norm(tensors, "transformer.ln_f", width, 1e-5, bias)
    head = tensors.take("lm_head.weight", (vocab, width)) if tensors.has("lm_head.weight") else None
    tensors.refuse_leftovers("nanoGPT")
    readout = readout_of(choice, wte, head, None, True)
    return FloatTransformer(
        "nanoGPT", wte, wpe, None, None, tuple(blocks), final, readout, symbols, bos, positions, digest
    )


def read_checkpoint(path: Path) -> tuple[Config, dict[str, np.ndarray], str]:
    """(model_args as a Config, the state dict as float32 arrays, the file's sha256) of a nanoGPT ``ckpt.pt``."""
    import torch  # the file is a torch.save pickle: torch reads it, weights_only

    from .files import SAFE_ALTERNATIVES, pickle_refusal

    name = path.name
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a corrupt file, or a pickled object weights_only refuses
        refusal = pickle_refusal(name, exc)
        if refusal is not None:
            raise CheckpointError(refusal, file=name, hint=SAFE_ALTERNATIVES) from None
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
        raise CheckpointError(
            f"cannot read it as a checkpoint: {type(exc).__name__}: {first[:200]}", file=name
        ) from None
    if not isinstance(checkpoint, dict) or "model" not in checkpoint or "model_args" not in checkpoint:
        found = sorted(checkpoint)[:6] if isinstance(checkpoint, dict) else type(checkpoint).__name__
        raise CheckpointError(
            f"expected nanoGPT's {{'model': ..., 'model_args': ...}}, found {found}",
            file=name,
            hint="nanoGPT's train.py saves ckpt.pt with both; a bare state dict is model: {torch: ...}",
        )
    args = checkpoint["model_args"]
    if not isinstance(args, dict):
        raise CheckpointError("model_args is not a dict", file=name, key="model_args")
    config = Config({k: v for k, v in args.items() if k in ARGS}, name)
    for key in ARGS:
        if key not in args:
            raise config.error(f"model_args.{key}", "missing")
    state = checkpoint["model"]
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError("model is not a state dict of tensors", file=name, key="model")
    tensors = {}
    for key, tensor in state.items():
        plain = key[len(COMPILED) :] if key.startswith(COMPILED) else key
        if tensor.is_sparse or tensor.is_complex() or (not tensor.dtype.is_floating_point and plain.endswith("weight")):
            raise CheckpointError(f"a {tensor.dtype} tensor: not dense real weights", file=name, key=key)
        array = tensor.detach().cpu().to(torch.float32).numpy().copy()
        if tensor.dtype == torch.float64:
            raise CheckpointError("float64 weights: nanoGPT runs float32 (or bf16); save float32", file=name, key=key)
        if not np.all(np.isfinite(array)):
            raise CheckpointError("a non-finite weight", file=name, key=key)
        tensors[plain] = array
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return config, tensors, digest


FIELDS: dict[str, Field] = {
    "nanogpt": Field(FilePath("a nanoGPT checkpoint (ckpt.pt: model and model_args), read with weights_only")),
    **READOUT_FIELDS,
    "vocabulary": Field(ListOf(String(), "the token of each id, in order (nanoGPT's meta.pkl is a pickle: list them)")),
    "bos": Field(TokenRef("a token prepended to every input (an id or a vocabulary entry)")),
    "reading": Field(
        String("float (default): the model as it runs in float32; quantized: a fixed-point reading", READINGS)
    ),
    "quantize": Field(QUANTIZE),
}


def build(section: dict[str, Any], node: Node, ctx: Context, path: str) -> Model:
    """The model of a ``nanogpt`` section (module docstring)."""
    try:
        import torch  # noqa: F401 - the checkpoint is a torch file
    except ModuleNotFoundError:
        raise MissingDependency(
            "a nanoGPT checkpoint needs PyTorch to read, which is not installed",
            package="torch",
            install=TORCH_INSTALL,
            file=ctx.file,
            line=node.line,
            path=join(path, "nanogpt"),
        ) from None
    from .hf_checkpoint import float_model, readout_choice, token_id
    from .hf_quantized import quantized
    from .nanogpt_replay import NanoGPTReplay

    file = section["nanogpt"]
    check_quantize(section.get("quantize"), ctx, path)
    try:
        config, tensors, digest = read_checkpoint(file)
        limit = 1 << 24
        if nanogpt_parameters(config) > limit:
            raise config.error("model_args.n_layer", f"{nanogpt_parameters(config)} weights: more than the 2^24 read")
        size = config.integer("vocab_size")
        symbols = symbols_of(section.get("vocabulary"), size)
        choice = readout_choice(symbols, {k: section.get(k) for k in ("logit", "minus", "hidden")})
        bos = section.get("bos")
        bos_symbol = None if bos is None else symbols[token_id(symbols, bos, "bos")]
        network = nanogpt_network(config, Tensors(dict(tensors), file.name), choice, symbols, bos_symbol, digest)
        if (section.get("reading") or "float") == "quantized":
            return quantized(network, section.get("quantize"), section.get("name") or file.stem)
        replay = NanoGPTReplay(file, choice, dict(config.data))
        return float_model(network, section.get("name") or file.stem, replay)
    except CheckpointError as exc:
        spec_key = "" if exc.file else exc.config_key
        where = node.find(spec_key) if spec_key else node.find("nanogpt")
        raise ctx.error(
            where, join(path, spec_key or "nanogpt"), str(exc) if exc.file else exc.args[0], exc.hint
        ) from None


def symbols_of(given: list[str] | None, size: int) -> tuple[str, ...]:
    """The token of each id: the spec's list, else the ids themselves."""
    if given is None:
        return tuple(str(i) for i in range(size))
    if len(given) != size or len(set(given)) != size:
        raise CheckpointError(f"{len(given)} distinct tokens expected {size} (model_args.vocab_size)", key="vocabulary")
    return tuple(given)


SOURCE = ModelSource(
    key="nanogpt",
    fields=FIELDS,
    build=build,
    label="a nanoGPT source",
    usage="write model: {nanogpt: ckpt.pt, logit: T, vocabulary: [...]} (docs/import.md)",
    example="`nanogpt: ckpt.pt` (a nanoGPT checkpoint, checked as it runs)",
)

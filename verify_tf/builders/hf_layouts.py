"""Hugging Face layouts, tensor by tensor, onto ``floats.FloatTransformer``: GPT-2, the Llama family, BERT.

Each ``*_network`` reads a validated ``config.json`` (``Config``: typed reads that name the key and the file) and
the checkpoint's tensors (``Tensors``: every expected tensor present with the shape the config implies, and every
tensor of the file consumed: anything left over is refused by name, never ignored, except the named buffers older
versions saved). docs/import.md has the tables; in short:

* GPT-2 (``model_type: gpt2``): ``wte``, ``wpe``; per layer ``ln_1``, ``attn.c_attn`` (a Conv1D: x @ W + b with W
  (d, 3d), split into q, k, v and per head), ``attn.c_proj``, ``ln_2``, ``mlp.c_fc``, ``mlp.c_proj``; ``ln_f``; the LM
  head tied to ``wte`` or ``lm_head.weight``; pre-LN, causal, GELU as ``activation_function`` says;
* Llama (``llama``, and ``mistral`` / ``qwen2``, which share its layout): ``embed_tokens``; per layer
  ``input_layernorm`` (RMSNorm), ``self_attn.q/k/v/o_proj`` (torch Linears, y = x W^T + b; grouped key/value heads),
  RoPE with ``rope_theta``, ``post_attention_layernorm``, ``mlp.gate/up/down_proj`` (SwiGLU); ``norm``; ``lm_head``;
* BERT (``bert``): ``embeddings.word/position/token_type_embeddings`` and their ``LayerNorm``; per layer
  ``attention.self.query/key/value``, ``attention.output.dense`` + ``LayerNorm`` (post-LN), ``intermediate.dense``,
  ``output.dense`` + ``LayerNorm``; bidirectional (causal when ``is_decoder``); the MLM head
  ``cls.predictions.transform.dense`` + activation + ``LayerNorm``, the decoder tied to the word embeddings, and its
  bias ``cls.predictions.bias``.

What the float reading cannot represent is refused by name at its config key: other RoPE types (linear, dynamic,
yarn, llama3, ...), sliding-window attention, mixtures of experts, cross-attention, relative position embeddings,
activations without an enclosure (``floats.activations``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from ..floats.activations import KINDS
from ..floats.transformer import MLP, Attention, FloatTransformer, Layer, Norm, Projection, Readout, Rope
from .checkpoint_files import CheckpointError

# config activation names -> floats.activations kinds (transformers' ACT2FN names)
ACTIVATIONS = {
    "gelu": "gelu-erf",
    "gelu_python": "gelu-erf",
    "gelu_new": "gelu-tanh",
    "gelu_pytorch_tanh": "gelu-tanh",
    "gelu_fast": "gelu-tanh",
    "relu": "relu",
    "silu": "silu",
    "swish": "silu",
}
LLAMA_FAMILY = ("llama", "mistral", "qwen2")
MODEL_TYPES = ("gpt2", *LLAMA_FAMILY, "bert")
MAX_PARAMETERS = 1 << 24  # weights an import reads: about 64 MB of float32 (a formula on the config, checked first)
MAX_WIDTH = 4096  # the enclosure's LayerNorm bound holds up to 2000 values (floats.torch_enclosure); RMSNorm beside


@dataclass
class Config:
    """Typed reads of ``config.json``: each names the key and the file when it is missing or of the wrong kind."""

    data: dict[str, Any]
    file: str

    def error(self, key: str, message: str, hint: str | None = None) -> CheckpointError:
        return CheckpointError(message, file=self.file, key=key, hint=hint)

    def integer(self, key: str, default: int | None = None, minimum: int = 1) -> int:
        value = self.data.get(key, default)
        if value is None:
            raise self.error(key, "missing: expected an integer")
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"expected an integer, got {value!r}")
        if value < minimum:
            raise self.error(key, f"expected an integer >= {minimum}, got {value}")
        return value

    def number(self, key: str, default: float | None = None) -> float:
        value = self.data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(key, f"expected a number, got {value!r}")
        return float(value)

    def flag(self, key: str, default: bool) -> bool:
        value = self.data.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(key, f"expected true or false, got {value!r}")
        return value

    def text(self, key: str, default: str | None = None) -> str:
        value = self.data.get(key, default)
        if not isinstance(value, str):
            raise self.error(key, f"expected a string, got {value!r}")
        return value

    def refuse(self, key: str, unless: Callable[[Any], bool], what: str) -> None:
        """Refuse a present key whose value ``unless`` does not accept, naming it and what is not read."""
        if key in self.data and not unless(self.data[key]):
            raise self.error(key, f"{self.data[key]!r}: {what}")

    def activation(self, key: str, default: str) -> str:
        name = self.text(key, default)
        if name not in ACTIVATIONS:
            raise self.error(
                key,
                f"activation {name!r} has no float32 enclosure in verify-tf",
                f"read: {', '.join(sorted(ACTIVATIONS))} (docs/import.md)",
            )
        assert ACTIVATIONS[name] in KINDS
        return ACTIVATIONS[name]


@dataclass
class Tensors:
    """The checkpoint's tensors, consumed by name with their expected shapes (``take``); ``leftovers`` are refused."""

    arrays: dict[str, np.ndarray]
    file: str
    used: set[str] = field(default_factory=set)

    def has(self, key: str) -> bool:
        return key in self.arrays

    def take(self, key: str, shape: tuple[int, ...]) -> np.ndarray:
        if key not in self.arrays:
            raise CheckpointError(
                f"missing tensor (expected shape {list(shape)} from config.json)",
                file=self.file,
                key=key,
                hint="the config and the weights must come from the same save_pretrained",
            )
        array = self.arrays[key]
        if tuple(array.shape) != shape:
            raise CheckpointError(
                f"shape {list(array.shape)}, but config.json implies {list(shape)}",
                file=self.file,
                key=key,
                hint="the config and the weights must come from the same save_pretrained",
            )
        self.used.add(key)
        return array

    def optional(self, key: str, shape: tuple[int, ...]) -> np.ndarray | None:
        return self.take(key, shape) if key in self.arrays else None

    def ignore(self, key: str) -> None:
        self.used.add(key)

    def refuse_leftovers(self, what: str) -> None:
        left = sorted(set(self.arrays) - self.used)
        if left:
            shown = ", ".join(f"{k} {list(self.arrays[k].shape)}" for k in left[:4])
            raise CheckpointError(
                f"tensors the {what} layout does not have: {shown}{', ...' if len(left) > 4 else ''}",
                file=self.file,
                hint="verify-tf reads every tensor or refuses the checkpoint (docs/import.md lists each layout)",
            )


def _zeros(n: int) -> np.ndarray:
    return np.zeros(n, dtype=np.float32)


def torch_linear(tensors: Tensors, prefix: str, outputs: int, inputs: int, bias: bool | None) -> Projection:
    """A torch ``Linear`` (weight (out, in), y = x W^T + b) as x @ W + b. ``bias``: required, absent, or (None)
    whichever the file has."""
    weight = tensors.take(f"{prefix}.weight", (outputs, inputs))
    key = f"{prefix}.bias"
    if bias is None:
        bias = tensors.has(key)
    vector = tensors.take(key, (outputs,)) if bias else _zeros(outputs)
    return Projection(np.ascontiguousarray(weight.T), np.ascontiguousarray(vector))


def _conv1d(tensors: Tensors, prefix: str, inputs: int, outputs: int) -> Projection:
    """GPT-2's ``Conv1D``: weight (in, out), y = x W + b."""
    return Projection(tensors.take(f"{prefix}.weight", (inputs, outputs)), tensors.take(f"{prefix}.bias", (outputs,)))


def layer_norm(tensors: Tensors, prefix: str, width: int, eps: float, bias: bool = True) -> Norm:
    weight = tensors.take(f"{prefix}.weight", (width,))
    vector = tensors.take(f"{prefix}.bias", (width,)) if bias else _zeros(width)
    return Norm("layer", weight, vector, eps)


def split_heads(projection: Projection, heads: int, head_dim: int, offset: int = 0) -> tuple[Projection, ...]:
    return tuple(projection.columns(slice(offset + h * head_dim, offset + (h + 1) * head_dim)) for h in range(heads))


def _head_rows(
    embedding: np.ndarray, head: np.ndarray | None, bias: np.ndarray | None, tokens: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray]:
    table = embedding if head is None else head
    rows = np.ascontiguousarray(table[list(tokens)].T.astype(np.float32))
    vector = _zeros(len(tokens)) if bias is None else np.ascontiguousarray(bias[list(tokens)])
    return rows, vector


@dataclass(frozen=True)
class ReadoutChoice:
    """What the spec asks to read: the logit of ``token`` (minus that of ``minus``), or ``hidden`` coordinate."""

    token: int | None = None
    minus: int | None = None
    hidden: int | None = None
    describe: str = ""


def readout_of(
    choice: ReadoutChoice,
    embedding: np.ndarray,
    head: np.ndarray | None,
    bias: np.ndarray | None,
    has_head: bool,
    transform: tuple[Projection, str, Norm] | None = None,
) -> Readout:
    width = embedding.shape[1]
    if choice.hidden is not None:
        if not 0 <= choice.hidden < width:
            raise CheckpointError(f"hidden coordinate {choice.hidden} outside the width {width}", key="hidden")
        return Readout(
            "hidden", np.zeros((width, 0), dtype=np.float32), _zeros(0), choice.hidden, None, choice.describe
        )
    if not has_head:
        raise CheckpointError(
            "this checkpoint has no LM head (a base model): its outputs are hidden states",
            key="logit",
            hint="read a coordinate of the final hidden state instead: hidden: 0",
        )
    assert choice.token is not None
    tokens = (choice.token,) if choice.minus is None else (choice.token, choice.minus)
    rows, vector = _head_rows(embedding, head, bias, tokens)
    kind = "logit" if choice.minus is None else "difference"
    return Readout(kind, rows, vector, 0, transform, choice.describe)


# ---------------------------------------------------------------- GPT-2


def gpt2_parameters(config: Config) -> int:
    v, p, d = config.integer("vocab_size"), config.integer("n_positions"), config.integer("n_embd")
    layers, inner = config.integer("n_layer"), _inner(config, d)
    return v * d + p * d + layers * (4 * d * d + 2 * d * inner + 9 * d + inner) + 2 * d


def _inner(config: Config, width: int) -> int:
    """GPT-2's MLP width: n_inner, or 4·n_embd when it is null."""
    return config.integer("n_inner") if config.data.get("n_inner") is not None else 4 * width


def gpt2_network(
    config: Config, tensors: Tensors, choice: ReadoutChoice, symbols: tuple[str, ...], bos: str | None, digest: str
) -> FloatTransformer:
    vocab, positions, width = config.integer("vocab_size"), config.integer("n_positions"), config.integer("n_embd")
    layers, heads = config.integer("n_layer"), config.integer("n_head")
    inner = _inner(config, width)
    if width % heads:
        raise config.error("n_head", f"{heads} heads do not divide n_embd {width}")
    eps = config.number("layer_norm_epsilon", 1e-5)
    kind = config.activation("activation_function", "gelu_new")
    config.refuse("add_cross_attention", lambda v: v is False, "cross-attention layers are not read")
    scaled = config.flag("scale_attn_weights", True)
    inverse = config.flag("scale_attn_by_inverse_layer_idx", False)
    head_dim = width // heads
    lm = tensors.has("transformer.wte.weight")
    prefix = "transformer." if lm else ""
    wte = tensors.take(f"{prefix}wte.weight", (vocab, width))
    wpe = tensors.take(f"{prefix}wpe.weight", (positions, width))
    blocks = []
    for index in range(layers):
        at = f"{prefix}h.{index}"
        for buffer in ("attn.bias", "attn.masked_bias"):  # the causal-mask buffers older versions saved
            if tensors.has(f"{at}.{buffer}"):
                tensors.ignore(f"{at}.{buffer}")
        qkv = _conv1d(tensors, f"{at}.attn.c_attn", width, 3 * width)
        if not scaled:
            raise config.error("scale_attn_weights", "false: logits without 1/sqrt(head_dim) are not read yet")
        scale = Fraction(1, index + 1) if inverse else Fraction(1)  # GPT-2's scale_attn_by_inverse_layer_idx
        attention = Attention(
            query=split_heads(qkv, heads, head_dim, 0),
            key=split_heads(qkv, heads, head_dim, width),
            value=split_heads(qkv, heads, head_dim, 2 * width),
            output=_conv1d(tensors, f"{at}.attn.c_proj", width, width),
            causal=True,
            scale=scale,
            head_dim=head_dim,
            rope=None,
        )
        mlp = MLP(
            _conv1d(tensors, f"{at}.mlp.c_fc", width, inner), _conv1d(tensors, f"{at}.mlp.c_proj", inner, width), kind
        )
        blocks.append(
            Layer(
                attention,
                mlp,
                layer_norm(tensors, f"{at}.ln_1", width, eps),
                layer_norm(tensors, f"{at}.ln_2", width, eps),
                "pre",
            )
        )
    final = layer_norm(tensors, f"{prefix}ln_f", width, eps)
    tied = config.flag("tie_word_embeddings", True)
    head = None
    if lm and not tied:
        head = tensors.take("lm_head.weight", (vocab, width))
    elif lm and tensors.has("lm_head.weight"):
        head = tensors.take("lm_head.weight", (vocab, width))  # saved although tied: the same values
    tensors.refuse_leftovers("GPT-2")
    readout = readout_of(choice, wte, head, None, lm)
    return FloatTransformer(
        "GPT-2", wte, wpe, None, None, tuple(blocks), final, readout, symbols, bos, positions, digest
    )


# ---------------------------------------------------------------- Llama and its family


def llama_parameters(config: Config) -> int:
    v, d = config.integer("vocab_size"), config.integer("hidden_size")
    inner, layers = config.integer("intermediate_size"), config.integer("num_hidden_layers")
    heads = config.integer("num_attention_heads")
    kv = config.integer("num_key_value_heads", heads)
    head_dim = config.integer("head_dim") if config.data.get("head_dim") is not None else d // heads
    attention = d * heads * head_dim * 2 + 2 * d * kv * head_dim
    attention_bias = config.flag("attention_bias", False)
    if attention_bias or config.text("model_type") == "qwen2":  # q, k, v biases (Qwen2: always)
        attention += heads * head_dim + 2 * kv * head_dim
    if attention_bias:  # o_proj's bias
        attention += d
    mlp = 3 * d * inner + (2 * inner + d if config.flag("mlp_bias", False) else 0)
    return 2 * v * d + layers * (attention + mlp + 2 * d) + d  # the head counted untied: an upper bound when tied


def _rope(config: Config, head_dim: int) -> Rope:
    parameters = config.data.get("rope_parameters")
    if parameters is None:  # older configs: rope_theta beside rope_scaling
        config.refuse("rope_scaling", lambda v: v is None, "RoPE scaling is not read (only rope_type default)")
        theta = config.number("rope_theta", 10000.0)
    else:
        if not isinstance(parameters, dict):
            raise config.error("rope_parameters", f"expected an object, got {parameters!r}")
        kind = parameters.get("rope_type", "default")
        if kind != "default":
            raise config.error(
                "rope_parameters.rope_type",
                f"{kind!r}: only RoPE's default type is read (not linear, dynamic, yarn, longrope, llama3 scaling)",
            )
        theta = parameters.get("rope_theta", 10000.0)
        if isinstance(theta, bool) or not isinstance(theta, (int, float)) or theta <= 0:
            raise config.error("rope_parameters.rope_theta", f"expected a positive number, got {theta!r}")
    config.refuse("partial_rotary_factor", lambda v: v in (None, 1, 1.0), "partial rotary embeddings are not read")
    if head_dim % 2:
        raise config.error("head_dim", f"RoPE needs an even head dimension, got {head_dim}")
    return Rope(Fraction(str(theta)) if isinstance(theta, float) else Fraction(theta), head_dim)


def llama_network(
    config: Config, tensors: Tensors, choice: ReadoutChoice, symbols: tuple[str, ...], bos: str | None, digest: str
) -> FloatTransformer:
    model_type = config.text("model_type")
    vocab, width = config.integer("vocab_size"), config.integer("hidden_size")
    inner, layers = config.integer("intermediate_size"), config.integer("num_hidden_layers")
    heads = config.integer("num_attention_heads")
    kv_heads = config.integer("num_key_value_heads", heads)
    if heads % kv_heads:
        raise config.error("num_key_value_heads", f"{kv_heads} key/value heads do not divide {heads} heads")
    head_dim = config.integer("head_dim") if config.data.get("head_dim") is not None else width // heads
    positions = config.integer("max_position_embeddings")
    eps = config.number("rms_norm_eps", 1e-6)
    kind = config.activation("hidden_act", "silu")
    config.refuse(
        "pretraining_tp", lambda v: v in (None, 1), "tensor-parallel slicing (pretraining_tp > 1) is not read"
    )
    config.refuse(
        "sliding_window", lambda v: v is None or model_type == "qwen2", "sliding-window attention is not read"
    )
    config.refuse("use_sliding_window", lambda v: v is False, "sliding-window attention is not read")
    config.refuse("layer_types", lambda v: all(t == "full_attention" for t in v), "sliding-window layers are not read")
    for moe in ("num_local_experts", "num_experts", "num_experts_per_tok"):
        config.refuse(moe, lambda v: v in (None, 0, 1), "mixtures of experts are not read")
    rope = _rope(config, head_dim)
    attention_bias = config.flag("attention_bias", False)
    qkv_bias = True if model_type == "qwen2" else attention_bias
    mlp_bias = config.flag("mlp_bias", False)
    lm = tensors.has("model.embed_tokens.weight")
    prefix = "model." if lm else ""
    embed = tensors.take(f"{prefix}embed_tokens.weight", (vocab, width))
    blocks = []
    for index in range(layers):
        at = f"{prefix}layers.{index}"
        if tensors.has(f"{at}.self_attn.rotary_emb.inv_freq"):  # a buffer older versions saved: recomputed anyway
            tensors.ignore(f"{at}.self_attn.rotary_emb.inv_freq")
        q = torch_linear(tensors, f"{at}.self_attn.q_proj", heads * head_dim, width, qkv_bias)
        k = torch_linear(tensors, f"{at}.self_attn.k_proj", kv_heads * head_dim, width, qkv_bias)
        v = torch_linear(tensors, f"{at}.self_attn.v_proj", kv_heads * head_dim, width, qkv_bias)
        o = torch_linear(tensors, f"{at}.self_attn.o_proj", width, heads * head_dim, attention_bias)
        attention = Attention(
            split_heads(q, heads, head_dim),
            split_heads(k, kv_heads, head_dim),
            split_heads(v, kv_heads, head_dim),
            o,
            True,
            Fraction(1),
            head_dim,
            rope,
        )
        mlp = MLP(
            torch_linear(tensors, f"{at}.mlp.up_proj", inner, width, mlp_bias),
            torch_linear(tensors, f"{at}.mlp.down_proj", width, inner, mlp_bias),
            kind,
            torch_linear(tensors, f"{at}.mlp.gate_proj", inner, width, mlp_bias),
        )
        norms = [
            Norm("rms", tensors.take(f"{at}.{name}.weight", (width,)), _zeros(width), eps)
            for name in ("input_layernorm", "post_attention_layernorm")
        ]
        blocks.append(Layer(attention, mlp, norms[0], norms[1], "pre"))
    final = Norm("rms", tensors.take(f"{prefix}norm.weight", (width,)), _zeros(width), eps)
    tied = config.flag("tie_word_embeddings", False)
    head = None
    if lm and (not tied or tensors.has("lm_head.weight")):
        head = tensors.take("lm_head.weight", (vocab, width))
    tensors.refuse_leftovers(f"{model_type} (Llama)")
    readout = readout_of(choice, embed, head, None, lm)
    name = {"llama": "Llama", "mistral": "Mistral", "qwen2": "Qwen2"}[model_type]
    return FloatTransformer(
        name, embed, None, None, None, tuple(blocks), final, readout, symbols, bos, positions, digest
    )


# ---------------------------------------------------------------- BERT


def bert_parameters(config: Config) -> int:
    v, d = config.integer("vocab_size"), config.integer("hidden_size")
    inner, layers = config.integer("intermediate_size"), config.integer("num_hidden_layers")
    p, t = config.integer("max_position_embeddings"), config.integer("type_vocab_size", 2)
    # embeddings and their LayerNorm; the layers; BertForMaskedLM's head (transform d² + d, LayerNorm 2d, bias V;
    # the decoder tied to the embeddings), which is more than BertModel's pooler (d² + d)
    return (v + p + t) * d + 2 * d + layers * (4 * d * d + 2 * d * inner + 9 * d + inner) + d * d + 3 * d + v


def bert_network(
    config: Config, tensors: Tensors, choice: ReadoutChoice, symbols: tuple[str, ...], bos: str | None, digest: str
) -> FloatTransformer:
    vocab, width = config.integer("vocab_size"), config.integer("hidden_size")
    inner, layers = config.integer("intermediate_size"), config.integer("num_hidden_layers")
    heads = config.integer("num_attention_heads")
    if width % heads:
        raise config.error("num_attention_heads", f"{heads} heads do not divide hidden_size {width}")
    positions = config.integer("max_position_embeddings")
    types = config.integer("type_vocab_size", 2)
    eps = config.number("layer_norm_eps", 1e-12)
    kind = config.activation("hidden_act", "gelu")
    config.refuse(
        "position_embedding_type", lambda v: v in (None, "absolute"), "relative position embeddings are not read"
    )
    config.refuse("add_cross_attention", lambda v: v is False, "cross-attention layers are not read")
    causal = config.flag("is_decoder", False)
    head_dim = width // heads
    mlm = tensors.has("bert.embeddings.word_embeddings.weight")
    prefix = "bert." if mlm else ""
    word = tensors.take(f"{prefix}embeddings.word_embeddings.weight", (vocab, width))
    position = tensors.take(f"{prefix}embeddings.position_embeddings.weight", (positions, width))
    token_type = tensors.take(f"{prefix}embeddings.token_type_embeddings.weight", (types, width))[0]
    for buffer in ("embeddings.position_ids", "embeddings.token_type_ids"):  # buffers older versions saved
        if tensors.has(f"{prefix}{buffer}"):
            tensors.ignore(f"{prefix}{buffer}")
    embed_norm = layer_norm(tensors, f"{prefix}embeddings.LayerNorm", width, eps)
    blocks = []
    for index in range(layers):
        at = f"{prefix}encoder.layer.{index}"
        q = torch_linear(tensors, f"{at}.attention.self.query", width, width, True)
        k = torch_linear(tensors, f"{at}.attention.self.key", width, width, True)
        v = torch_linear(tensors, f"{at}.attention.self.value", width, width, True)
        attention = Attention(
            split_heads(q, heads, head_dim),
            split_heads(k, heads, head_dim),
            split_heads(v, heads, head_dim),
            torch_linear(tensors, f"{at}.attention.output.dense", width, width, True),
            causal,
            Fraction(1),
            head_dim,
            None,
        )
        mlp = MLP(
            torch_linear(tensors, f"{at}.intermediate.dense", inner, width, True),
            torch_linear(tensors, f"{at}.output.dense", width, inner, True),
            kind,
        )
        blocks.append(
            Layer(
                attention,
                mlp,
                layer_norm(tensors, f"{at}.attention.output.LayerNorm", width, eps),
                layer_norm(tensors, f"{at}.output.LayerNorm", width, eps),
                "post",
            )
        )
    transform = None
    head = bias = None
    if mlm:
        transform = (
            torch_linear(tensors, "cls.predictions.transform.dense", width, width, True),
            config.activation("hidden_act", "gelu"),
            layer_norm(tensors, "cls.predictions.transform.LayerNorm", width, eps),
        )
        if not config.flag("tie_word_embeddings", True) or tensors.has("cls.predictions.decoder.weight"):
            head = tensors.take("cls.predictions.decoder.weight", (vocab, width))
        bias = tensors.optional("cls.predictions.bias", (vocab,))
        decoder_bias = tensors.optional("cls.predictions.decoder.bias", (vocab,))
        bias = bias if bias is not None else decoder_bias
        if bias is None:
            raise CheckpointError(
                "missing tensor (the MLM decoder's bias)", file=tensors.file, key="cls.predictions.bias"
            )
    else:
        for name in ("pooler.dense.weight", "pooler.dense.bias"):  # BertModel's pooler: not on a token's readout
            if tensors.has(name):
                tensors.ignore(name)
    tensors.refuse_leftovers("BERT")
    readout = readout_of(choice, word, head, bias, mlm, transform)
    return FloatTransformer(
        "BERT", word, position, token_type, embed_norm, tuple(blocks), None, readout, symbols, bos, positions, digest
    )


LAYOUTS: dict[str, tuple[Callable[..., FloatTransformer], Callable[[Config], int]]] = {
    "gpt2": (gpt2_network, gpt2_parameters),
    **{name: (llama_network, llama_parameters) for name in LLAMA_FAMILY},
    "bert": (bert_network, bert_parameters),
}

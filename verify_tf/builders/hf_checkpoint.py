"""A Hugging Face checkpoint folder, read as data: config, weights, vocabulary, and its float model (docs/import.md).

``load_checkpoint(folder)`` reads ``config.json``, ``model.safetensors`` (or its shards with
``model.safetensors.index.json``) and the tokenizer's vocabulary (``tokenizer.json``, ``vocab.json`` or
``vocab.txt``: only their token tables), with the size limits of ``builders.huggingface`` checked on the config
before a tensor is read; ``network_of`` maps it onto ``floats.FloatTransformer`` (``builders.hf_layouts``);
``float_model`` wraps that network as the model a spec checks: a stand-in IR (``stand_in``) carrying
``CheckpointFloatModel``, which encloses the readout (``floats.transformer_enclosure``) and replays witnesses
(``builders.hf_replay``, or the float32 mirror).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from ..floats import second_opinion
from ..floats.enclosure import Box
from ..floats.torch_enclosure import LARGEST_NORM_WIDTH
from ..floats.transformer import FloatTransformer
from ..floats.transformer_enclosure import enclose_readout, prepare
from ..floats.transformer_mirror import readout as mirror_readout
from ..ir import AlphabetTokens, AttentionLayer, Block, Head, Model
from .checkpoint_files import CheckpointError, read_config, read_header, read_tensors
from .hf_layouts import LAYOUTS, MAX_PARAMETERS, MODEL_TYPES, Config, ReadoutChoice, Tensors
from .hf_replay import library_replay

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"
FLOAT_AS_RUN = "float32 as run"

__all__ = ["Checkpoint", "CheckpointFloatModel", "library_replay", "load_checkpoint", "network_of", "readout_choice"]


@dataclass(frozen=True)
class Checkpoint:
    folder: Path
    config: Config
    tensors: dict[str, np.ndarray]
    weights_file: str
    symbols: tuple[str, ...]
    special: frozenset[str]  # tokens the tokenizer marks special (BOS, PAD, [CLS], ...)
    digest: str


def _weight_files(folder: Path) -> list[Path]:
    single = folder / WEIGHTS
    if single.is_file():
        return [single]
    index = folder / INDEX
    if index.is_file():
        data = read_config(index)
        mapping = data.get("weight_map")
        if not isinstance(mapping, dict) or not all(isinstance(v, str) for v in mapping.values()):
            raise CheckpointError("expected weight_map: {tensor: file}", file=INDEX, key="weight_map")
        names = sorted(set(mapping.values()))
        for name in names:
            if "/" in name or "\\" in name or name.startswith("."):
                raise CheckpointError(f"{name!r}: shards must be files of the folder", file=INDEX, key="weight_map")
        return [folder / name for name in names]
    pickles = [p.name for p in folder.glob("*.bin")] + [p.name for p in folder.glob("*.pt")]
    hint = (
        f"{', '.join(sorted(pickles))} is a pickle, which verify-tf never loads: save with "
        "model.save_pretrained(folder) (safetensors is its default)"
        if pickles
        else "save the model with model.save_pretrained(folder)"
    )
    raise CheckpointError(f"no {WEIGHTS} (or {INDEX}) in {folder}", file=WEIGHTS, hint=hint)


def _config(folder: Path) -> Config:
    path = folder / CONFIG
    if not path.is_file():
        raise CheckpointError(
            f"no {CONFIG} in {folder}",
            file=CONFIG,
            hint="a save_pretrained folder has config.json beside model.safetensors",
        )
    config = Config(read_config(path), CONFIG)
    model_type = config.data.get("model_type")
    if model_type not in MODEL_TYPES:
        raise config.error(
            "model_type",
            f"{model_type!r} is not a layout verify-tf reads",
            f"read: {', '.join(MODEL_TYPES)} (docs/import.md)",
        )
    return config


def _check_size(config: Config) -> None:
    """The size limits of the module docstring, on the config alone."""
    parameters = LAYOUTS[config.text("model_type")][1](config)
    if parameters > MAX_PARAMETERS:
        raise config.error(
            "vocab_size",
            f"{parameters} weights by the layout's formula (docs/import.md), more than the {MAX_PARAMETERS} (2^24) "
            "the float reading reads",
            "verify-tf checks small models; the formula counts embeddings, every layer and the head",
        )
    width_key = "n_embd" if config.text("model_type") == "gpt2" else "hidden_size"
    if config.integer(width_key) > LARGEST_NORM_WIDTH:
        raise config.error(
            width_key, f"{config.integer(width_key)}: wider than the {LARGEST_NORM_WIDTH} the bounds hold"
        )


def _digest(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode() + b"\0")
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def _vocabulary(folder: Path, size: int, given: list[str] | None) -> tuple[tuple[str, ...], frozenset[str]]:
    """The token of each id: the spec's list, else the folder's tokenizer files, else the ids themselves."""
    if given is not None:
        if len(given) != size:
            raise CheckpointError(
                f"{len(given)} tokens for a vocabulary of {size} (config.json vocab_size)", key="vocabulary"
            )
        if len(set(given)) != len(given):
            raise CheckpointError("the vocabulary lists a token twice", key="vocabulary")
        return tuple(given), frozenset()
    table: dict[int, str] = {}
    special: set[str] = set()
    source = ""
    if (folder / "tokenizer.json").is_file():
        source = "tokenizer.json"
        data = read_config(folder / source, limit=1 << 24)
        model = data.get("model") or {}
        vocab = model.get("vocab") if isinstance(model, dict) else None
        if isinstance(vocab, dict):
            table = {int(i): str(t) for t, i in vocab.items() if isinstance(i, int)}
        elif isinstance(vocab, list):  # Unigram: [[piece, score], ...]
            table = {i: str(entry[0]) for i, entry in enumerate(vocab) if isinstance(entry, list) and entry}
        for added in data.get("added_tokens") or []:
            if isinstance(added, dict) and isinstance(added.get("id"), int):
                table[added["id"]] = str(added.get("content"))
                if added.get("special"):
                    special.add(str(added.get("content")))
    elif (folder / "vocab.json").is_file():
        source = "vocab.json"
        data = read_config(folder / source, limit=1 << 24)
        table = {int(i): str(t) for t, i in data.items() if isinstance(i, int) and not isinstance(i, bool)}
    elif (folder / "vocab.txt").is_file():
        source = "vocab.txt"
        text = (folder / source).read_text(encoding="utf-8")
        table = dict(enumerate(line for line in text.split("\n") if line != "" or False))
    if (folder / "special_tokens_map.json").is_file():
        for value in read_config(folder / "special_tokens_map.json").values():
            content = value.get("content") if isinstance(value, dict) else value
            if isinstance(content, str):
                special.add(content)
    if not table:
        return tuple(str(i) for i in range(size)), frozenset()
    if sorted(table) != list(range(size)):
        raise CheckpointError(
            f"its ids are not 0..{size - 1} (config.json vocab_size {size})",
            file=source,
            hint="give the tokens in order with model: {vocabulary: [...]}",
        )
    symbols = tuple(table[i] for i in range(size))
    if len(set(symbols)) != size:
        raise CheckpointError("a token appears twice", file=source, hint="give model: {vocabulary: [...]}")
    return symbols, frozenset(special)


def load_checkpoint(folder: Path, vocabulary: list[str] | None = None) -> Checkpoint:
    """config.json, the weights and the vocabulary of a save_pretrained folder, checked (module docstring)."""
    if folder.is_file():
        if folder.name == CONFIG:
            folder = folder.parent
        else:
            raise CheckpointError(
                f"{folder.name} is a file: give the folder that holds {CONFIG} and {WEIGHTS}", file=folder.name
            )
    config = _config(folder)
    _check_size(config)
    paths = _weight_files(folder)
    tensors: dict[str, np.ndarray] = {}
    declared = 0
    headers = []
    for path in paths:
        entries, metadata, offset = read_header(path)
        if "__verify_tf__" in metadata:
            raise CheckpointError("a verify-tf model file: load it with model: {file: ...}", file=path.name)
        declared += sum(entry.count for entry in entries.values())
        headers.append((path, entries, offset))
    limit = 2 * LAYOUTS[config.text("model_type")][1](config)
    if declared > limit:
        raise CheckpointError(
            f"{declared} weights in the file, more than twice the {limit // 2} config.json implies",
            file=paths[0].name,
            hint="the config and the weights must come from the same save_pretrained",
        )
    for path, entries, offset in headers:
        for key, array in read_tensors(path, entries, offset).items():
            if key in tensors:
                raise CheckpointError("a tensor in two shards", file=path.name, key=key)
            tensors[key] = array
    symbols, special = _vocabulary(folder, config.integer("vocab_size"), vocabulary)
    return Checkpoint(folder, config, tensors, paths[0].name, symbols, special, _digest([folder / CONFIG, *paths]))


def token_id(symbols: tuple[str, ...], token: int | str, key: str) -> int:
    """A token's id in the vocabulary ``symbols``: an integer id, or a vocabulary entry."""
    size = len(symbols)
    if isinstance(token, int):
        if not 0 <= token < size:
            raise CheckpointError(f"token id {token} outside the vocabulary 0..{size - 1}", key=key)
        return token
    if token in symbols:
        return symbols.index(token)
    if token.isdigit() and int(token) < size:
        return int(token)
    shown = ", ".join(repr(s) for s in symbols[:12])
    raise CheckpointError(
        f"{token!r} is not a token of the vocabulary ({shown}{', ...' if size > 12 else ''})", key=key
    )


def readout_choice(symbols: tuple[str, ...], readout: dict[str, Any] | None) -> ReadoutChoice:
    """What the spec reads: ``{logit: T}``, ``{logit: A, minus: B}`` or ``{hidden: k}`` (``None`` values absent)."""
    readout = readout or {}
    token, minus, hidden = readout.get("logit"), readout.get("minus"), readout.get("hidden")
    if hidden is not None:
        if token is not None or minus is not None:
            raise CheckpointError("hidden cannot be combined with logit or minus", key="hidden")
        return ReadoutChoice(hidden=hidden, describe=f"hidden coordinate {hidden} of the final stream")
    if token is None:
        raise CheckpointError(
            "missing 'logit': which logit the properties read", key="logit", hint="e.g. logit: a (or hidden: 0)"
        )
    first = token_id(symbols, token, "logit")
    text = f"the logit of {symbols[first]!r} (id {first})"
    if minus is None:
        return ReadoutChoice(token=first, describe=text)
    second = token_id(symbols, minus, "minus")
    return ReadoutChoice(first, second, describe=f"{text} minus that of {symbols[second]!r} (id {second})")


def network_of(checkpoint: Checkpoint, choice: ReadoutChoice, bos: str | None) -> FloatTransformer:
    builder = LAYOUTS[checkpoint.config.text("model_type")][0]
    tensors = Tensors(dict(checkpoint.tensors), checkpoint.weights_file)
    return builder(checkpoint.config, tensors, choice, checkpoint.symbols, bos, checkpoint.digest)


# ---------------------------------------------------------------- the float model and its replay


class CheckpointFloatModel:
    """What ``Model.float_model`` holds for a checkpoint read as it runs: the network (plain data), how to enclose its
    readout, and how a witness is replayed: ``replay_with`` (the library's forward pass: ``hf_replay.LibraryReplay``,
    ``nanogpt_replay.NanoGPTReplay``) when ``replay_with.available()``, else verify-tf's float32 mirror."""

    has_ir = False  # the IR beside it is a stand-in (``stand_in``): only float-reading properties may read the model
    dropped_bias = 0  # crasp-equivalence's threshold shift (a torch import's dropped readout bias): none here

    def __init__(self, network: FloatTransformer, replay_with: Any = None) -> None:
        self.network = network
        self.replay_with = replay_with  # (ids) -> {name: readout values}, with name, short, needs, available()

    def __repr__(self) -> str:
        return f"{self.network.architecture} float model (sha256 {self.network.digest[:16]})"

    def enclose(self, ids: np.ndarray) -> Box:
        return enclose_readout(prepare(self.network), ids)

    def _replayer(self) -> Any:
        if self.replay_with is None or second_opinion.is_declined() or not self.replay_with.available():
            return None  # the mirror; declined: the proof cache re-confirms a stored witness (floats.second_opinion)
        return self.replay_with

    def replayed_by(self) -> str:
        replayer = self._replayer()
        return replayer.name if replayer is not None else "verify-tf's float32 mirror"

    def replay(self, ids: np.ndarray) -> dict[str, np.ndarray]:
        """The readout (B, n) of the library's own float32 evaluations (or the mirror's), as exact rationals."""
        replayer = self._replayer()
        if replayer is not None:
            replayed: dict[str, np.ndarray] = replayer(ids)
            return replayed
        return {"verify-tf mirror": mirror_readout(self.network, ids)}

    def reading(self) -> str:
        """The reading beside each verdict: short; the witness names each replay."""
        replayer = self._replayer()
        if replayer is not None:
            return f"{FLOAT_AS_RUN}, replayed in {replayer.short}"
        needs = self.replay_with.needs if self.replay_with is not None else "its library"
        return f"{FLOAT_AS_RUN}, replayed in verify-tf's float32 mirror (no {needs})"

    def proof_clause(self) -> str:
        return (
            f"for every float32 evaluation of the {self.network.architecture} checkpoint (any summation order, exp "
            "within 2^-18, LayerNorm moments in any merge tree, activations within their stated error; "
            f"docs/semantics.md §7), reading {self.network.readout.describe}"
        )


def stand_in(network: FloatTransformer, name: str) -> Model:
    """The IR beside a float model (``CheckpointFloatModel.has_ir`` false: nothing evaluates it): the inputs'
    vocabulary and BOS, and one zero head per layer that says what the properties read from the IR's shape: whether
    every head is causal (a causal model's prefix decides a position: crasp-equivalence examines only the longest
    strings) and whether positions are seen (learned positions, RoPE)."""
    zero = (Fraction(0),)
    tokens = AlphabetTokens(network.symbols, tuple(zero for _ in network.symbols), network.bos)
    blocks = tuple(
        Block(
            attention=AttentionLayer(
                heads=(Head((zero,), (zero,), (zero,), (zero,), zero, zero, zero, "uniform", layer.attention.causal),),
                output_bias=zero,
            )
        )
        for layer in network.layers
    )
    positions = None if network.position_embed is None else tuple(zero for _ in range(network.max_positions))
    return Model(
        tokens=tokens,
        dim=1,
        blocks=blocks,
        positional_encoding=positions,
        readout=(Fraction(0),),
        name=name,
        runs_as=f"float32 {network.architecture} checkpoint (sha256 {network.digest[:16]})",
        reading=FLOAT_AS_RUN,
        float_source=network.digest,
    )


def float_model(network: FloatTransformer, name: str, replay_with: Any = None) -> Model:
    model = stand_in(network, name)
    return replace(model, float_model=CheckpointFloatModel(network, replay_with))

"""The Hugging Face model source: ``model: {huggingface: FOLDER, logit: T}`` (docs/import.md).

A folder written by ``save_pretrained``: ``config.json`` and ``model.safetensors`` (or its shards with
``model.safetensors.index.json``), and optionally the tokenizer's vocabulary (``vocab.json``, ``tokenizer.json`` or
``vocab.txt``). Both are read as data (``builders.checkpoint_files``): no code from the folder runs, nothing is
downloaded, ``transformers`` is not needed to load (only to replay a witness, ``builders.hf_replay``). A name that is
not a folder here (``gpt2``, ``meta-llama/Llama-3.2-1B``) is refused saying so. The layouts (GPT-2, Llama and its
family, BERT) are mapped tensor by tensor in ``builders.hf_layouts``.

**The reading.** By default the model as it runs in float32 (``reading: float``; docs/semantics.md §7 "Float as run"):
properties that read it (``output-bounds``, ``crasp-equivalence``) decide from an exact enclosure of every float32
evaluation of the readout (``floats.transformer_enclosure``) and replay a witness through the library's own forward
pass when transformers is installed, else through verify-tf's float32 mirror; the verdict says which. The model IR
the rest of verify-tf sees is then a stand-in that only says which vocabulary and BOS the inputs use
(``stand_in``): a property or engine that would evaluate the IR refuses the model by name.

**The readout**: the logit of one token (``logit: T``: an id or a vocabulary entry), the difference of two (``logit:
A, minus: B``), or a coordinate of the final hidden state (``hidden: k``, for base models without a head).

**Size limits, by formula on config.json, before any tensor is read**: the weights the layout implies (e.g. GPT-2:
V·d + P·d + L·(4d² + 2d·inner + 9d + inner) + 2d) at most ``hf_layouts.MAX_PARAMETERS`` = 2^24, the width at most
``LARGEST_NORM_WIDTH`` (where the LayerNorm bound holds), the header's tensors at most twice the formula's weights.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..ir import Model
from ..schema.dsl import Context, Field, Integer, ListOf, Schema, String, join
from ..schema.yamlnodes import Node
from .sources import QUANTIZE, ModelSource, check_quantize

CONFIG = "config.json"  # = hf_checkpoint.CONFIG (that module reads the folder; this one only names it)
HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
READINGS = ("float", "quantized")


class FolderPath(Schema):
    """A checkpoint folder relative to the spec's directory; a hub name is refused saying verify-tf never downloads."""

    what = "a path to a checkpoint folder (config.json + model.safetensors)"

    def __init__(self, description: str = "", marker: str = CONFIG) -> None:
        self.description, self.marker = description, marker

    def json(self) -> dict:
        return self._doc({"type": "string"})

    def validate(self, node: Node, ctx: Context, path: str) -> Path:
        if node.kind != "scalar" or node.is_null:
            raise ctx.expected(node, path, self.what)
        text = str(node.value)
        if "\0" in text:
            raise ctx.error(node, path, f"folder not found: {text!r} contains a NUL character")
        resolved = (ctx.base_dir / text).resolve()
        if resolved.is_dir() or resolved.is_file():
            return resolved
        if HUB_NAME.match(text):
            raise ctx.error(
                node,
                path,
                f"{text!r} is not a folder here; it looks like a model name on the Hugging Face hub, and "
                "verify-tf never downloads",
                f"download it yourself (huggingface-cli download {text} --local-dir {text.split('/')[-1]}) and "
                "give that folder",
            )
        raise ctx.error(
            node, path, f"folder not found: {text}", f"paths are relative to the spec's folder ({ctx.base_dir})"
        )


class TokenRef(Schema):
    """A token: an id (an integer) or a vocabulary entry (a string)."""

    what = "a token id or a vocabulary entry"

    def __init__(self, description: str = "") -> None:
        self.description = description

    def json(self) -> dict:
        return self._doc({"type": ["integer", "string"]})

    def validate(self, node: Node, ctx: Context, path: str) -> int | str:
        if node.kind != "scalar" or node.is_null:
            raise ctx.expected(node, path, self.what)
        value = node.plain()
        return value if isinstance(value, int) and not isinstance(value, bool) else str(node.value)


# what the properties read at each position (one of logit and hidden; minus with logit)
READOUT_FIELDS: dict[str, Field] = {
    "logit": Field(TokenRef("the logit of this token (an id or a vocabulary entry) at each position")),
    "minus": Field(TokenRef("subtract this token's logit: the logit difference logit - minus")),
    "hidden": Field(Integer("a coordinate of the final hidden state (models without an LM head)", minimum=0)),
}

FIELDS: dict[str, Field] = {
    "huggingface": Field(FolderPath("a save_pretrained folder: config.json + model.safetensors (docs/import.md)")),
    **READOUT_FIELDS,
    "reading": Field(
        String(
            "float (default): the model as it runs in float32, through an exact enclosure of every float32 evaluation; "
            "quantized: a fixed-point reading of the weights (needs quantize)",
            READINGS,
        )
    ),
    "vocabulary": Field(ListOf(String(), "the token of each id, in order (default: the folder's tokenizer files)")),
    "bos": Field(TokenRef("a token prepended to every input (an id or a vocabulary entry)")),
}


def build(section: dict[str, Any], node: Node, ctx: Context, path: str) -> Model:
    """The model of a ``huggingface`` section (module docstring); a ``CheckpointError`` is located at its key."""
    from .checkpoint_files import CheckpointError  # the reading code, imported when a spec uses this source
    from .hf_checkpoint import float_model, library_replay, load_checkpoint, network_of, readout_choice, token_id
    from .hf_quantized import quantized

    folder = section["huggingface"]
    check_quantize(section.get("quantize"), ctx, path)
    try:
        checkpoint = load_checkpoint(folder, section.get("vocabulary"))
        choice = readout_choice(checkpoint.symbols, {k: section.get(k) for k in ("logit", "minus", "hidden")})
        bos = section.get("bos")
        bos_symbol = None if bos is None else checkpoint.symbols[token_id(checkpoint.symbols, bos, "bos")]
        network = network_of(checkpoint, choice, bos_symbol)
        name = section.get("name") or folder.name
        if (section.get("reading") or "float") == "quantized":
            return quantized(network, section.get("quantize"), name)
        replay = library_replay(checkpoint.folder, checkpoint.config.text("model_type"), checkpoint.tensors, choice)
        return float_model(network, name, replay)
    except CheckpointError as exc:
        spec_key = "" if exc.file else exc.config_key  # a key of the spec's model section, else one of the folder's
        where = node.find(spec_key) if spec_key else node.find("huggingface")
        raise ctx.error(
            where, join(path, spec_key or "huggingface"), str(exc) if exc.file else exc.args[0], exc.hint
        ) from None


SOURCE = ModelSource(
    key="huggingface",
    fields={**FIELDS, "quantize": Field(QUANTIZE)},
    build=build,
    label="a Hugging Face source",
    usage="write model: {huggingface: FOLDER, logit: T} (a save_pretrained folder; docs/import.md)",
    example="`huggingface: my-model` (a save_pretrained folder, checked as it runs)",
)

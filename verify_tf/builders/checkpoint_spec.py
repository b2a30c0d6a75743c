"""The spec ``verify-tf import PATH`` writes for a checkpoint: commented, runnable, about the model as it runs.

``import_spec(path, spec_path, ...)`` reads the checkpoint (``hf_checkpoint.load_checkpoint``: no code runs, nothing
is downloaded), chooses what a first check needs and writes it down with a comment on each choice:

* the model section (``huggingface: FOLDER`` relative to the spec, the readout, the BOS if one is given);
* the domain: strings over the vocabulary's ordinary tokens (special tokens and the BOS left out; at most
  ``MAX_ALPHABET`` of them), up to the context length or the longest length whose strings number at most
  ``MAX_STRINGS`` (an exhaustive check of every string stays a few minutes);
* a starter ``output-bounds``: the range verify-tf's float32 mirror computes on every string of the domain, widened
  by 10^-3 (or 1 % of the range) on each side: ``check`` proves it where the enclosure of every float32 evaluation is
  narrower than that margin, and says ``unknown`` (naming the input) where it is not.

Nothing here decides a verdict: the bounds are a starting point the check then proves, refutes or leaves unknown.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from ..floats.transformer import FloatTransformer
from ..floats.transformer_mirror import readout as mirror_readout
from ..numbers import fmt
from .checkpoint_files import CheckpointError
from .hf_checkpoint import load_checkpoint, network_of, readout_choice, token_id
from .hf_layouts import ReadoutChoice, Tensors
from .hf_quantized import quantized_model

QUANTIZED_BITS, QUANTIZED_FRAC = 24, 12  # --reading quantized: a fine grid with room for logits of a few hundred
MAX_ALPHABET = 8
MAX_STRINGS = 4096
MARGIN = Fraction(1, 1000)


@dataclass(frozen=True)
class Written:
    path: Path
    strings: int
    readout: str
    low: Fraction
    high: Fraction


@dataclass(frozen=True)
class _Source:
    """What the spec needs of a checkpoint, whichever its kind: its section key and file, its vocabulary, whether it
    has an LM head, and how to build its float network for a readout."""

    key: str  # huggingface | nanogpt
    file: Path
    symbols: tuple[str, ...]
    special: frozenset[str]
    has_head: bool
    network: Callable[[ReadoutChoice, str | None], FloatTransformer]
    replayed_in: str


def _source(path: Path, vocabulary: list[str] | None) -> _Source:
    if path.is_file() and path.suffix in (".pt", ".pth", ".ckpt"):
        from .nanogpt import nanogpt_network, read_checkpoint, symbols_of

        config, tensors, digest = read_checkpoint(path)
        symbols = symbols_of(vocabulary, config.integer("vocab_size"))

        def nanogpt(choice: ReadoutChoice, bos: str | None) -> FloatTransformer:
            return nanogpt_network(config, Tensors(dict(tensors), path.name), choice, symbols, bos, digest)

        return _Source("nanogpt", path, symbols, frozenset(), True, nanogpt, "nanoGPT's forward in torch")
    checkpoint = load_checkpoint(path, vocabulary)
    head = any(k.startswith(("transformer.", "model.", "bert.")) for k in checkpoint.tensors)

    def huggingface(choice: ReadoutChoice, bos: str | None) -> FloatTransformer:
        return network_of(checkpoint, choice, bos)

    return _Source(
        "huggingface", checkpoint.folder, checkpoint.symbols, checkpoint.special, head, huggingface, "transformers"
    )


def parse_readout(symbols: tuple[str, ...], text: str | None) -> dict[str, object]:
    """``--readout-token``: an id, a vocabulary entry, or ``A-B`` (a logit difference); None: the first ordinary
    token's logit, or hidden coordinate 0 for a model without a head."""
    if text is None:
        return {}
    if text in symbols or text.isdigit():
        return {"logit": int(text) if text.isdigit() and text not in symbols else text}
    if "-" in text:
        first, _, second = text.partition("-")
        for part in (first, second):
            token_id(symbols, _plain(part), "--readout-token")
        return {"logit": _plain(first), "minus": _plain(second)}
    token_id(symbols, text, "--readout-token")  # raises, naming the vocabulary
    return {"logit": text}


def _plain(part: str) -> int | str:
    return int(part) if part.isdigit() else part


def _max_length(size: int, context: int) -> int:
    total, length = 0, 0
    while length < context:
        if total + size ** (length + 1) > MAX_STRINGS:
            break
        length += 1
        total += size**length
    return max(1, length)


def _yaml(value: object) -> str:
    text = str(value)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _mirror_range(network: FloatTransformer, alphabet: tuple[str, ...], length: int) -> tuple[Fraction, Fraction, int]:
    """The float32 mirror's smallest and largest readout on every string up to ``length``, and their number."""
    low: Fraction | None = None
    high: Fraction | None = None
    count = 0
    offset = 1 if network.bos is not None else 0
    for n in range(1, length + 1):
        rows = np.array(np.meshgrid(*[np.arange(len(alphabet))] * n, indexing="ij")).reshape(n, -1).T
        body = mirror_readout(network, network.ids(rows, alphabet))[:, offset:]
        low = body.min() if low is None else min(body.min(), low)
        high = body.max() if high is None else max(body.max(), high)
        count += len(rows)
    assert low is not None and high is not None
    return low, high, count


def import_spec(
    path: Path,
    spec_path: Path,
    readout: str | None = None,
    bos: str | None = None,
    reading: str = "float",
    vocabulary: list[str] | None = None,
) -> Written:
    """Write the spec (module docstring); ``CheckpointError`` for a checkpoint that cannot be read as stated."""
    source = _source(path, vocabulary)
    bos_symbol = None if bos is None else source.symbols[token_id(source.symbols, _plain(bos), "--bos")]
    chosen = parse_readout(source.symbols, readout)
    ordinary = [s for s in source.symbols if s not in source.special and s != bos_symbol]
    alphabet = tuple(ordinary[:MAX_ALPHABET])
    if not alphabet:
        raise CheckpointError("the vocabulary has no ordinary token for a domain", key="vocabulary")
    if not chosen:
        chosen = {"logit": alphabet[0]} if source.has_head else {"hidden": 0}
    choice = readout_choice(source.symbols, chosen)
    network = source.network(choice, bos_symbol)
    context = network.max_positions - (1 if bos_symbol is not None else 0)
    length = _max_length(len(alphabet), context)
    if reading == "quantized":  # refused here, naming the layer, as the spec would refuse it
        quantized_model(network, {"bits": QUANTIZED_BITS, "frac": QUANTIZED_FRAC}, "import")
    low, high, count = _mirror_range(network, alphabet, length)
    margin = max(MARGIN, (high - low) / (100 if reading == "float" else 20))
    lo, hi = _round(low - margin, down=True), _round(high + margin, down=False)
    relative = os.path.relpath(source.file, spec_path.resolve().parent)
    about = (
        [
            "# The model as it runs in float32: every verdict is decided on an exact enclosure of every float32",
            "# evaluation (any summation order, exp within 2^-18, ...; docs/semantics.md §7) and a refutation is",
            f"# replayed through {source.replayed_in} (or verify-tf's float32 mirror when that is not installed).",
        ]
        if reading == "float"
        else [
            f"# A quantized reading: every weight rounded to multiples of 2^-{QUANTIZED_FRAC} (the largest error is "
            "reported),",
            "# fixed-point softmax, LayerNorm and i-GELU for GELU: verdicts are about that IR, NOT the model as run",
            "# (docs/import.md; --reading float checks the float32 model itself).",
        ]
    )
    lines = [
        f"# {network.architecture} checkpoint {source.file.name}, imported by verify-tf import (docs/import.md).",
        *about,
        f"name: {network.architecture} {source.file.name} {'as it runs' if reading == 'float' else 'quantized'}",
        "timeout: 600  # seconds per property: the enclosure costs milliseconds per string (docs/performance.md)",
        "model:",
        f"  {source.key}: {_yaml(relative)}",
        f"  # what the properties read at each position: {choice.describe}",
        *(f"  {k}: {_yaml(v) if isinstance(v, str) else v}" for k, v in chosen.items()),
    ]
    if vocabulary is not None:
        lines.append("  vocabulary: [" + ", ".join(_yaml(t) for t in vocabulary) + "]")

    if bos_symbol is not None:
        lines.append(f"  bos: {_yaml(bos_symbol)}  # prepended to every input")
    if reading == "quantized":
        lines += [
            "  reading: quantized",
            f"  quantize: {{bits: {QUANTIZED_BITS}, frac: {QUANTIZED_FRAC}}}",
            f"arithmetic: {{mode: fixed, bits: {QUANTIZED_BITS}, frac: {QUANTIZED_FRAC}}}",
        ]
    skipped = len(ordinary) - len(alphabet)
    lines += [
        "domain:",
        f"  # the vocabulary's ordinary tokens{f' (the first {len(alphabet)} of {len(ordinary)})' if skipped else ''}; "
        f"{count} strings up to length {length}",
        f"  # (the context holds {context}; every string up to length {length} keeps the check exhaustive)",
        "  strings: {alphabet: [" + ", ".join(_yaml(s) for s in alphabet) + f"], max-length: {length}}}",
        "properties:",
        f"  # the float32 mirror's range on every string, [{float(low):.6g}, {float(high):.6g}], widened by "
        f"{float(margin):.3g}:",
        "  # proved where the enclosure is narrower than that margin, else unknown naming the input"
        if reading == "float"
        else "  # the quantized reading deviates from the float32 model by about 1-2 % of the range: check decides it",
        f"  - output-bounds: {{lo: {fmt(lo)}, hi: {fmt(hi)}, engine: enumerate, name: readout range}}",
        "  # a C-RASP program the model should compute, checked at every prefix (causal models):",
        "  # - crasp-equivalence: {program: my-language.cr, mode: prefix, threshold: 0, engine: enumerate}",
        "",
    ]
    spec_path.write_text("\n".join(lines))
    return Written(spec_path, count, choice.describe, lo, hi)


def _round(value: Fraction, down: bool) -> Fraction:
    """A decimal with 6 places, rounded outward."""
    scaled = Fraction(value) * 10**6
    whole = math.floor(scaled) if down else math.ceil(scaled)
    return Fraction(whole, 10**6)

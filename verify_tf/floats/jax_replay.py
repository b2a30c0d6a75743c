"""Replay a float counterexample in JAX with tracr's own model code (needs the ``tracr`` extra).

The export's weights (their float32 bits) go into tracr's haiku modules (``tracr.transformer.model``:
``Transformer`` and ``CompiledTransformerModel``, with ``hk.Embed`` token and position tables named as tracr's
assembler names them), and the final residual stream is read back. This is the model ``compile_rasp_to_model``
returns, run as tracr runs it; ``floats.evaluate`` mirrors it in numpy. A witness carries both.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np

from . import second_opinion

PACKAGES = ("jax", "haiku", "tracr")


def available() -> bool:
    """True when JAX, haiku and tracr can be imported (the ``tracr`` extra), unless second opinions are declined
    (``second_opinion.declined``: the proof cache re-confirms a stored witness by its enclosure alone)."""
    return not second_opinion.is_declined() and all(importlib.util.find_spec(name) is not None for name in PACKAGES)


def _params(document: dict) -> dict[str, dict[str, np.ndarray]]:
    params: dict[str, dict[str, np.ndarray]] = {}
    for module, entries in document["params"].items():
        params[module] = {}
        for name, entry in entries.items():
            bits = np.zeros(tuple(entry["shape"]), dtype=np.uint32)
            for *index, _text, word in entry["nonzero"]:
                bits[tuple(index)] = int(word, 16)
            params[module][name] = bits.view(np.float32)
    return params


def _stream(x: Any, use_unembed_argmax: bool) -> Any:
    """The unembedding left out: the final residual stream itself (decoded by the property)."""
    return x


def final_stream(document: dict, ids: list[int]) -> np.ndarray:
    """tracr's haiku model (JAX, float32) on one token-id row (BOS first): the final residual stream (n, d)."""
    return final_streams(document, np.array([ids], dtype=np.int64))[0]


def pad_id(document: dict) -> int:
    """The export's PAD token id: tracr numbers BOS, PAD and the vocabulary 0.., and the export names the others."""
    used = {int(document["input"]["bos_id"])} | {int(v["id"]) for v in document["input"]["vocabulary"]}
    return min(set(range(len(used) + 1)) - used)


def final_streams(document: dict, ids: np.ndarray, *, jit: bool = False, pad: int | None = None) -> np.ndarray:
    """tracr's haiku model (JAX, float32) on token-id rows (B, n), BOS first: the final residual streams (B, n, d),
    in one call; un-jitted as tracr's ``apply`` runs it, or compiled by XLA as a whole (``jit``: fused, faster).
    ``pad``: the token id that tracr masks out as a key (``CompiledTransformerModel.pad_token``), so rows of
    different lengths share one call (a padded key's exp is exactly 0, so each row's own positions are an
    evaluation of that row as docs/semantics.md §7 allows)."""
    import haiku as hk
    import jax
    import jax.numpy as jnp
    from tracr.transformer import model as tracr_model  # type: ignore[import-untyped]

    config = document["config"]
    params = _params(document)

    @hk.without_apply_rng
    @hk.transform
    def forward(tokens: Any) -> Any:
        transformer = tracr_model.Transformer(
            tracr_model.TransformerConfig(
                num_heads=int(config["num_heads"]),
                num_layers=int(config["num_layers"]),
                key_size=int(config["key_size"]),
                mlp_hidden_size=int(config["mlp_hidden_size"]),
                dropout_rate=0.0,
                activation_function=jax.nn.relu,
                layer_norm=False,
                causal=bool(config["causal"]),
            )
        )
        compiled = tracr_model.CompiledTransformerModel(
            transformer=transformer,
            token_embed=hk.Embed(embedding_matrix=params["token_embed"]["embeddings"], name="token_embed"),
            position_embed=hk.Embed(embedding_matrix=params["pos_embed"]["embeddings"], name="pos_embed"),
            unembed=hk.to_module(_stream)(),
            use_unembed_argmax=False,
            pad_token=pad,
        )
        return compiled(tokens, use_dropout=False).transformer_output.output

    apply = jax.jit(forward.apply) if jit else forward.apply  # type: ignore[attr-defined]
    output = apply(params, jnp.array(ids, dtype=jnp.int32))
    return np.asarray(output, dtype=np.float32)

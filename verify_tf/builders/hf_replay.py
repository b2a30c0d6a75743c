"""A witness replayed through the library's own forward pass: transformers' model class run in float32 on CPU.

``library_replay(...)`` describes the replay; calling it imports torch and transformers (optional: the ``hf``
extra) and evaluates the checkpoint with the class ``save_pretrained`` wrote it from (``GPT2LMHeadModel``,
``LlamaForCausalLM``, ``BertForMaskedLM``, their base models, ...), loaded with ``from_pretrained(folder,
local_files_only=True, use_safetensors=True, dtype=torch.float32)`` (no download; no code from the folder runs:
``trust_remote_code`` stays off), in ``eval()`` mode under ``torch.no_grad()``, twice: with transformers' default
attention (``sdpa``: torch's fused kernel) and with ``eager`` attention (matmul, softmax, matmul). Both must lie
inside the enclosure and decide as it says, or the check is an error in the enclosure, never a verdict.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import threading
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from .hf_layouts import ReadoutChoice

IMPLEMENTATIONS = ("sdpa", "eager")
# transformers imports its model classes lazily, and two threads (properties side by side, `check -j 2`) asking for
# one at once can see "module 'transformers' has no attribute 'GPT2LMHeadModel'": models are loaded one at a time
_LOADING = threading.Lock()
_CLASSES = {
    ("gpt2", True): "GPT2LMHeadModel",
    ("gpt2", False): "GPT2Model",
    ("llama", True): "LlamaForCausalLM",
    ("llama", False): "LlamaModel",
    ("mistral", True): "MistralForCausalLM",
    ("mistral", False): "MistralModel",
    ("qwen2", True): "Qwen2ForCausalLM",
    ("qwen2", False): "Qwen2Model",
    ("bert", True): "BertForMaskedLM",
    ("bert", False): "BertModel",
}
_HEAD_PREFIXES = {"gpt2": "transformer.", "llama": "model.", "mistral": "model.", "qwen2": "model.", "bert": "bert."}


def library_class(model_type: str, tensor_names: Any) -> str:
    """The transformers class a checkpoint was saved from, by its key layout (an LM head model prefixes its base)."""
    prefix = _HEAD_PREFIXES[model_type]
    return _CLASSES[(model_type, any(str(name).startswith(prefix) for name in tensor_names))]


def transformers_available() -> bool:
    return importlib.util.find_spec("transformers") is not None and importlib.util.find_spec("torch") is not None


def _exact(values: np.ndarray) -> np.ndarray:
    return np.vectorize(Fraction, otypes=[object])(np.asarray(values, dtype=np.float64))


@dataclass
class LibraryReplay:
    """``(ids) -> {"transformers (sdpa)": readout, "transformers (eager)": readout}``, readouts (B, n) as exact
    rationals (object arrays)."""

    folder: Path
    class_name: str
    choice: ReadoutChoice
    _models: dict[str, Any] = field(default_factory=dict, repr=False)
    short = "transformers"  # the reading's word for it
    needs = "transformers"  # what the mirror stands in for when it is missing

    def available(self) -> bool:
        return transformers_available()

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (a work unit sent to a worker process) without the loaded models: each process loads its own."""
        return {**self.__dict__, "_models": {}}

    @property
    def name(self) -> str:
        try:
            version = importlib.metadata.version("transformers")
        except importlib.metadata.PackageNotFoundError:
            version = "?"
        return f"transformers {version} ({self.class_name}, {' and '.join(IMPLEMENTATIONS)} attention)"

    def _model(self, implementation: str) -> Any:
        with _LOADING:
            return self._loaded(implementation)

    def _loaded(self, implementation: str) -> Any:
        if implementation not in self._models:
            import torch
            import transformers

            transformers.logging.set_verbosity_error()
            transformers.utils.logging.disable_progress_bar()
            cls = getattr(transformers, self.class_name)
            model = cls.from_pretrained(
                str(self.folder),
                local_files_only=True,
                use_safetensors=True,
                trust_remote_code=False,
                dtype=torch.float32,
                attn_implementation=implementation,
            )
            self._models[implementation] = model.eval()
        return self._models[implementation]

    def __call__(self, ids: np.ndarray) -> dict[str, np.ndarray]:
        import torch

        tokens = torch.as_tensor(np.asarray(ids, dtype=np.int64))
        out: dict[str, np.ndarray] = {}
        for implementation in IMPLEMENTATIONS:
            model = self._model(implementation)
            with torch.no_grad():
                result = model(input_ids=tokens, output_hidden_states=self.choice.hidden is not None)
            out[f"transformers ({implementation})"] = self._readout(result)
        return out

    def _readout(self, result: Any) -> np.ndarray:
        choice = self.choice
        if choice.hidden is not None:
            hidden = result.hidden_states[-1] if getattr(result, "hidden_states", None) else result.last_hidden_state
            return _exact(hidden[..., choice.hidden].numpy())
        logits = result.logits
        first = _exact(logits[..., choice.token].numpy())
        if choice.minus is None:
            return first
        return first - _exact(logits[..., choice.minus].numpy())


def library_replay(folder: Path, model_type: str, tensor_names: Any, choice: ReadoutChoice) -> LibraryReplay:
    return LibraryReplay(folder, library_class(model_type, tensor_names), choice)

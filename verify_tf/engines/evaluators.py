"""The batched evaluators of one task, shared by the engines that evaluate in batches (enumerate, search)."""

from __future__ import annotations

from ..batched import DEFAULT_MEMORY, BatchedEvaluator, evaluator_for
from ..contract import Batched, Task
from ..fingerprint import model_digest
from ..ir import Model
from ..spaces import InputSpace


class CompiledEvaluators:
    """Compiled batched evaluators of one task in this process: the task's model, or another model the
    property compares with (``of(model)``), all over the input space's token list.

    Compiled programs are cached per process by content (the task's fingerprint covers its own model,
    arithmetic and domain; any other model is hashed), never by object identity or by name.
    """

    def __init__(self, task: Task, space: InputSpace):
        self.task, self.tokens = task, space.tokens
        self._digests: dict[int, tuple[Model, str]] = {}

    def of(self, model: Model | None = None) -> BatchedEvaluator:
        if model is None or model is self.task.model:
            model, key = self.task.model, "model"
        else:
            kept = self._digests.get(id(model))
            if kept is None or kept[0] is not model:
                kept = self._digests[id(model)] = (model, model_digest(model))
            key = kept[1]
        evaluator = evaluator_for(
            f"{self.task.fingerprint}:{key}", model, self.task.arithmetic, self.tokens, device=self.task.settings.device
        )
        evaluator.memory = self.task.settings.memory or DEFAULT_MEMORY  # --memory bounds every evaluation
        return evaluator

    def chunk_size(self, length: int) -> int:
        own = batch_rows(self.task)
        if own is not None:
            return own  # the property evaluates its batches itself: the IR is not compiled
        return self.of().chunk_size(length, self.task.settings.memory or DEFAULT_MEMORY)


def batch_rows(task: Task) -> int | None:
    """The rows per batch of a property that evaluates its batches itself (``Batched.batch_rows``), or None."""
    prop = task.prop
    return prop.batch_rows(task) if isinstance(prop, Batched) else None

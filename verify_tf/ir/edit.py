"""Generic edits of a model IR: set one named weight (``Model.parameters()`` names), or apply a list of
``PARAMETER=VALUE`` settings (the C-RASP compiler's ``--set`` and spec constructions use them to build
mutated models).
"""

from __future__ import annotations

import re
from dataclasses import replace
from fractions import Fraction
from typing import Any

from ..numbers import NotANumber, parse_rational
from . import Model
from .plain import model_from_dict, model_to_dict

_PATH_PART = re.compile(r"([A-Za-z][A-Za-z0-9_-]*)|\[(\d+)\]")


class EditError(ValueError):
    """A setting that names no parameter or cannot be read; ``hint`` says how to write one."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


def with_parameter(model: Model, path: str, value: Fraction) -> Model:
    """``model`` with the one weight named ``path`` (as in ``Model.parameters()``) set to ``value``.

    Used to build mutated models, e.g. ``layers[0].attention.heads[0].value-bias[0]``.
    """
    known = dict(model.parameters())
    if path not in known:
        raise EditError(
            f"the model has no parameter {path!r}",
            hint="parameter names look like layers[0].feed-forward.b1[1] or readout[3]",
        )
    data = model_to_dict(model)
    steps: list[str | int] = [m.group(1) if m.group(1) else int(m.group(2)) for m in _PATH_PART.finditer(path)]
    if steps[0] in ("embedding", "bos-embedding"):
        steps.insert(0, "tokens")
    container: Any = data  # nested dicts and lists of the plain form
    for step in steps[:-1]:
        container = container[step]
    container[steps[-1]] = str(Fraction(value))
    changed = model_from_dict(data)
    return replace(changed, name=f"{model.name}; {path} = {value}")


def apply_settings(model: Model, settings: list[str] | tuple[str, ...]) -> Model:
    """Apply ``PARAMETER=VALUE`` items in order."""
    for setting in settings:
        parameter, equals, text = setting.partition("=")
        try:
            if not equals:
                raise NotANumber(text)
            value = parse_rational(text)
        except NotANumber:
            raise EditError(
                f"cannot read the setting {setting!r}",
                hint="write PARAMETER=NUMBER, e.g. layers[0].attention.heads[0].value-bias[0]=0",
            ) from None
        model = with_parameter(model, parameter.strip(), value)
    return model

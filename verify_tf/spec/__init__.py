"""The spec language: the only code that knows YAML. Parses, validates, resolves files, raises located errors."""

from ..schema.errors import SpecError
from .loader import PropertySpec, Spec, load_spec, load_spec_text

__all__ = ["PropertySpec", "Spec", "SpecError", "load_spec", "load_spec_text"]

"""The reference semantics: arithmetic modes and the interpreter that defines what a model computes."""

from .arithmetic import Arithmetic, Exact, Fixed, UnsupportedInMode
from .interpreter import Trace, evaluate, outputs

__all__ = ["Arithmetic", "Exact", "Fixed", "Trace", "UnsupportedInMode", "evaluate", "outputs"]

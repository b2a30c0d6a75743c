"""The commented starter spec written by `verify-tf init`: its lists of engines, model sources and properties
are generated from the code (``spec.loader``, the registries), so they cannot go stale."""

from .builders.sources import load as load_source, registered as source_keys
from .ir import POSITIONALS, SCORINGS
from .properties import registry
from .spec.loader import ENGINES

_TEMPLATE = """\
# verify-tf spec: what to check, on which model, in which arithmetic, over which inputs.
# Run:  verify-tf check spec.yaml        Schema for editors:  verify-tf schema > spec.schema.json
name: starter

# The model. Sources (docs/import.md for torch and tracr; `verify-tf schema` has every key):
@SOURCES@
model:
  tokens: {grid: 1}              # continuous tokens of dimension 1 (or: alphabet + embedding)
  layers:
    - attention:
        heads:
          - scoring: hardmax     # @SCORINGS@
            positional: standard # @POSITIONALS@
            causal: false
            query: [[1]]         # W_Q, k x d
            key: [[1]]           # W_K, k x d
            value: [[1]]         # W_V, v x d
            output: [[1]]        # W_O, d x v
  readout: [1]                   # q_i = u . z_i

# exact (rationals) | fixed | {mode: fixed, bits: 16, frac: 8, attention-rounding: exact-sums}
arithmetic: exact

# Inputs: length-3 sequences of grid tokens {0, 1/4, 1/2, 3/4}.
domain:
  grid: {step: 1/4}
  length: 3

# Properties (`verify-tf properties` says what each holds and which engines check it):
@PROPERTIES@
properties:
  - permutation-equivariance: {}   # expect: proved (no positional information)

engine: auto       # @ENGINES@
timeout: 60        # seconds per property
"""

_SCORING_NOTES = {"hardmax": "hardmax (ties averaged)", "softmax": "softmax (fixed arithmetic)"}
_POSITIONAL_NOTES = {
    "rpe": "rpe (bias B[j-i] in the logits)",
    "urpe": "urpe (also C[j-i] after)",
    "rope": "rope (rotated q, k; fixed arithmetic)",
    "alibi": "alibi (slope·(j-i) in the logits)",
}


def _wrapped(words: list[str], prefix: str, width: int = 112) -> str:
    """``words`` joined by ", " into comment lines of at most ``width`` characters."""
    lines, line = [], prefix
    for word in words:
        piece = word if line == prefix else f", {word}"
        if len(line) + len(piece) > width and line != prefix:
            lines.append(line + ",")
            line, piece = prefix, word
        line += piece
    return "\n".join(lines + [line])


def starter_spec() -> str:
    sources = [load_source(key).example for key in source_keys()]
    return (
        _TEMPLATE.replace("@SOURCES@", _wrapped(sources, "#   "))
        .replace("@SCORINGS@", " | ".join(_SCORING_NOTES.get(name, name) for name in SCORINGS))
        .replace("@POSITIONALS@", " | ".join(_POSITIONAL_NOTES.get(name, name) for name in POSITIONALS))
        .replace("@PROPERTIES@", _wrapped(list(registry()), "#   "))
        .replace("@ENGINES@", " | ".join(ENGINES))
    )


STARTER_SPEC = starter_spec()

"""Float torch training experiments for approximation questions no solver can answer.

* :mod:`.modules` — small transformers with standard (+APE), RPE and URPE attention, IR-like parameter names;
* :mod:`.exact_encoder` — LayerNorm-free encoders the torch importer maps exactly (docs/import.md);
* :mod:`.spec` — the experiment spec format (``examples/experiments/*.yaml``), located errors;
* :mod:`.training` — the training loop's checkpoint selection and the prefix labeller (yang, prefix-labels);
* :mod:`.luo` — Luo et al. 2022: RPE cannot map constant inputs to positions, URPE can;
* :mod:`.yang` — Yang, Cadilhac, Chiang 2025: accuracy by (language L_k, depth), the staircase;
* :mod:`.runner` / :mod:`.cli` — ``verify-tf experiment SPEC``: JSON result and PNG plot.

Everything here is evidence from gradient descent on float models, never a verdict.  See docs/experiments.md.
"""

from .common import EVIDENCE_NOTE, ExperimentError
from .modules import Attention, TinyTransformer
from .runner import run_experiment, write_outputs
from .spec import ExperimentSpec, load_experiment, parse_experiment

__all__ = [
    "EVIDENCE_NOTE",
    "Attention",
    "ExperimentError",
    "ExperimentSpec",
    "TinyTransformer",
    "load_experiment",
    "parse_experiment",
    "run_experiment",
    "write_outputs",
]

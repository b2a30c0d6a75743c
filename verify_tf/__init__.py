"""verify-tf: prove or refute properties of small quantized transformers.

Pipeline (each stage a plain data structure handed to the next):

    spec.yaml -> Spec -> Model IR -> engine (interpret | smt | enumerate | search | train) -> Verdict -> report
"""

__version__ = "0.1.0"

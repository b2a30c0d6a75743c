"""Architecture-level proofs: statements about every model of an architecture class (weights as unknowns).

``induction``: position-blindness on constant inputs by induction over layers (Luo et al. 2022), one z3
query per sublayer. ``concrete``: when a step fails, the solver picks the parameters of one sublayer on a
concrete constant input, giving a concrete Model of the class that separates positions or realises given
targets (e.g. position-index with URPE). Callers replay every concrete model on the interpreter.
"""

from .concrete import ConcreteMember, realise_targets, separate_positions
from .induction import MAX_LENGTH, InductionResult, StepResult, describe_class, prove_position_blind

__all__ = ["ConcreteMember", "realise_targets", "separate_positions", "MAX_LENGTH", "InductionResult",
           "StepResult", "describe_class", "prove_position_blind"]

"""Engine ``architecture``: statements about every model of an architecture class (weights as unknowns).

The property asks, the engine answers (``contract``: a property's ``architecture_plan`` makes the first
request, its ``conclude`` says what each answer means and makes the next request or concludes):

* ``Induction``: position-blindness on constant inputs by induction over layers (Luo et al. 2022, ``induction``),
  one z3 query per sublayer and length; each query is a work unit;
* ``SymmetryCheck``: depth lower bounds (no causal transformer without positional information of depth k tells
  two words apart when their depth-k signatures agree, ``verify_tf.classes``); the symmetry queries
  (``symmetry``) are the work units; ``PairSearch``: the domain's words searched for such a pair
  (``signatures``);
* ``MemberSearch``: when a step fails, the solver picks the parameters of one sublayer on a concrete constant
  input (``concrete``), giving a concrete Model of the class that separates positions or realises given targets
  (e.g. position-index with URPE). The driver replays every member on the interpreter (the solver's claimed
  outputs, then the property's ``member_witness``) before the property sees it, and replays a refutation on
  the spec's own model (``Conclusion.replay``) with the property's ``violation``.
"""

from __future__ import annotations

from ...contract import ArchitectureClass, Task
from ...verdict import Verdict
from ..base import Run
from ..cost import SYMBOLIC

ENGINE = "architecture"
NEEDS = (ArchitectureClass,)
PREFERENCE = 7
ROLE = SYMBOLIC
CERTIFICATES = ("smt", "conclusion")  # "conclusion": a proof that asked no solver query


def check(task: Task, run: Run) -> Verdict:
    """Run the driver (``driver.py``: imported when the engine runs, so that a check loads only its engines)."""
    from . import driver

    return driver.check(task, run)

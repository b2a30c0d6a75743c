"""The code in docs/architecture.md runs: the "add a property" example is a working property on four engines."""

from __future__ import annotations

import itertools
import re
import sys
import types
from fractions import Fraction as F
from pathlib import Path

from helpers import head, one_layer
from verify_tf.domain import GridDomain
from verify_tf.engines import load as load_engine
from verify_tf.engines.base import Run, Task
from verify_tf.executors import InProcess
from verify_tf.semantics import Exact, evaluate
from verify_tf.work import Deadline

DOC = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"


def example_property():
    block = re.search(r'```python\n("""Property ``monotone-readout``.*?)```', DOC.read_text(), re.S).group(1)
    module = types.ModuleType("verify_tf.properties._doc_example")
    module.__package__ = "verify_tf.properties"
    sys.modules[module.__name__] = module
    exec(compile(block, str(DOC), "exec"), module.__dict__)
    return module.PROPERTY


def test_the_add_a_property_example_works_on_every_engine():
    prop = example_property()
    model = one_layer(head(q=1, k=1, v=1, scoring="hardmax", causal=True))  # causal running maximum: monotone?
    domain = GridDomain(1, (F(0), F(1), F(2)), 3)
    truth = all(
        all(b >= a for a, b in itertools.pairwise(q))
        for q in (evaluate(model, Exact(), x).readout for x in domain.inputs())
    )
    options = prop.options.check({"strict": "no"})
    task = Task.make("monotone", prop, options, model, Exact(), domain)
    statuses = {
        engine: load_engine(engine).check(task, Run(InProcess(), Deadline(30))).status
        for engine in ("interpret", "enumerate", "smt")
    }
    expected = "proved" if truth else "refuted"
    assert statuses == {"interpret": expected, "enumerate": expected, "smt": expected}
    assert truth is False  # x = (2, 0, 0): q = (4, 1, 2/3), a zero query ties every key (hand computation)
    assert load_engine("search").check(task, Run(InProcess(), Deadline(30))).status == "refuted"

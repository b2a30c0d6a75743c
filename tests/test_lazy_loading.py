"""A check imports only the engines and properties it runs (start-up time: bench/bench_startup.py).

Engines are found by folder name and loaded when used (``verify_tf.engines``); properties are loaded by the
names a spec writes (``verify_tf.properties.load``); certification's modules only with ``--certify``.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

from verify_tf.properties import load, names

ROOT = Path(__file__).resolve().parent.parent
SPEC = "specs/equivariance-standard-hardmax.yaml"  # permutation-equivariance, engine auto: enumerate runs

_CHECK = """
import json, sys
from verify_tf.cli import main
try:
    main(["check", "--no-cache", "--quiet", sys.argv[1], *sys.argv[2:]], standalone_mode=False)
finally:
    print(json.dumps(sorted(m for m in sys.modules if m.startswith("verify_tf."))), file=sys.stderr)
"""


def _modules(*arguments: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", _CHECK, *arguments], capture_output=True, text=True, cwd=ROOT)
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def test_a_check_loads_only_its_property_and_the_engines_it_runs():
    loaded = _modules(SPEC)
    # issue 37: at most 70 verify_tf modules for this check (81 before: the cache's replay and the JAX switch, the
    # prefix-tree scan, the sorted runs, RoPE's tables, the cluster addresses, the import command, cli.devices and
    # the counting engine's applicability test are now imported only when used); bench/bench_startup.py counts the
    # package itself too
    assert len(loaded) < 70, sorted(loaded)
    properties = {m for m in loaded if m.startswith("verify_tf.properties.") and m != "verify_tf.properties.base"}
    assert properties == {"verify_tf.properties.permutation_equivariance"}
    drivers = {m for m in loaded if m.startswith("verify_tf.engines.") and m.endswith(".driver")}
    assert drivers == {"verify_tf.engines.enumerate.driver"}  # auto: no falsification below 4096 inputs
    assert not {m for m in loaded if m.startswith("verify_tf.certify")}
    named = _modules(SPEC, "--engine", "interpret")
    assert {m for m in named if m.endswith(".driver")} == {"verify_tf.engines.interpret.driver"}
    # the interpreter runs it: no batched evaluator (--device auto needs none), no i-GELU deviation search (the
    # model has no i-GELU), no split cubes (only its card, for auto's roles, and auto did not run)
    assert not {
        m for m in named if m.startswith(("verify_tf.batched", "verify_tf.symbolic", "verify_tf.engines.split."))
    }


def test_every_property_module_is_named_after_its_property():
    """Lazy loading reads a property's module from its name: value_range.py defines value-range. A module whose name
    starts with ``_`` is a property's helper (``_torch_float.py``: crasp-equivalence's float reading), not a
    property, and defines none."""
    stems = {p.stem for p in (ROOT / "verify_tf" / "properties").glob("*.py")} - {"__init__", "base"}
    modules = {m for m in stems if not m.startswith("_")}
    assert {m.replace("_", "-") for m in modules} == set(names())
    for name in names():
        assert load(name).name == name
    for helper in stems - modules:
        assert not hasattr(importlib.import_module(f"verify_tf.properties.{helper}"), "PROPERTY")

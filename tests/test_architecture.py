"""The architecture is enforced, not described: import-linter's contracts (pyproject.toml) hold.

Layers cli → runner → spec → properties → engines → contract → shared kernels → semantics → ir; no engine imports
another; no property imports an engine; the IR and the semantics import neither z3 nor torch; no import cycle
anywhere, function-local imports included.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_import_contracts_are_kept():
    command = "from importlinter.cli import lint_imports_command; lint_imports_command()"
    result = subprocess.run(
        [sys.executable, "-c", command, "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "5 kept, 0 broken" in result.stdout


def test_every_top_level_module_has_a_layer():
    """A module missing from the layers contract would be bound by no layer: a new one must be placed."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    [layers] = [contract["layers"] for contract in config if contract["type"] == "layers"]
    placed = {name.strip() for layer in layers for name in layer.split("|")}
    package = ROOT / "verify_tf"
    modules = {f"verify_tf.{path.stem}" for path in package.glob("*.py") if path.stem not in ("__init__", "__main__")}
    modules |= {f"verify_tf.{path.parent.name}" for path in package.glob("*/__init__.py")}
    assert modules - placed == set()
    assert len(modules) >= 30  # 15 modules and 15 packages under verify_tf/ when this test was written


def test_no_module_imports_itself_back():
    """No import cycle between any two modules, a package's ``__init__`` included: the acyclic_siblings contract
    compares siblings only, so ``verify_tf.executors`` ↔ ``verify_tf.executors.cluster`` (the package and its
    own module, fixed 2026-11) passed it. An edge a → b lies on a cycle exactly when b reaches a."""
    import grimp

    graph = grimp.build_graph("verify_tf")
    on_cycles = sorted(
        (importer, imported)
        for importer in graph.modules
        for imported in graph.find_modules_directly_imported_by(importer)
        if graph.chain_exists(importer=imported, imported=importer)
    )
    assert on_cycles == []
    assert len(graph.modules) >= 130  # 131 modules when this test was written


PRIVATE_SOLVER = re.compile(r"\bz3\.(Solver|SolverFor|SimpleSolver|Optimize|Fixedpoint)\(|\.solver\(\)")
# printing only: an SMT-LIB text built in a fresh context, never checked
PRINTERS = {"verify_tf/symbolic/bv.py"}


def private_solvers(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if PRIVATE_SOLVER.search(line.split("#")[0])]


def test_every_z3_check_runs_in_the_one_session():
    """Issue 37 item 4: every z3 use goes through ``symbolic.solve.Session`` (its deadline, the interrupt, z3's
    SIGINT handler off, statistics). On main b3da1e0 five private solver loops bypassed it (the architecture
    engine's step and symmetry queries and its members' search, the counting engine's induction and value bounds,
    the RASP definedness search), and Ctrl-C during their checks was taken by z3's own handler."""
    assert private_solvers("s = z3.Solver()\nt = z3.Then('simplify', 'smt').solver()\nz3.Optimize()  # x") == [
        "s = z3.Solver()",
        "t = z3.Then('simplify', 'smt').solver()",
        "z3.Optimize()  # x",
    ]
    found = {
        str(path.relative_to(ROOT)): private_solvers(path.read_text())
        for path in (ROOT / "verify_tf").rglob("*.py")
        if str(path.relative_to(ROOT)) not in PRINTERS | {"verify_tf/symbolic/solve.py"}
    }
    assert {path: lines for path, lines in found.items() if lines} == {}

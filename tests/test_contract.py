"""The contract between properties and engines (verify_tf/contract.py) is what the code uses and what the docs say.

docs/architecture.md has a table of the hooks each engine (and auto, the spec loader and CLI, certify and
audit) calls on a property. Here the code is read (its abstract syntax tree) for every attribute it takes of a
property object (``prop.x``, ``task.prop.x``, and ``prop.defines("x")``), following the shared engine modules
an engine imports function by function, and the result must equal the table row by row; the table as a whole
must equal the public members of ``contract.Property``, so a hook cannot be called without being documented
and defaulted.
"""

from __future__ import annotations

import ast
import re
from fractions import Fraction as F
from pathlib import Path

import pytest

from helpers import head, one_layer
from verify_tf.contract import MissingHook, Property, Task
from verify_tf.domain import GridDomain
from verify_tf.engines import names
from verify_tf.properties import registry
from verify_tf.semantics import Exact

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "verify_tf"
ENGINES = PACKAGE / "engines"
SHARED = {path.stem: path for path in ENGINES.glob("*.py") if path.stem != "__init__"}  # base, scan, ...
MEMBERS = {name for name in dir(Property) if not name.startswith("_")} - {"defines"}
CALLERS = {  # table rows that are not engines, and the code they stand for
    "auto": [PACKAGE / "auto.py"],
    "registry, spec, cli": [
        PACKAGE / "properties" / "base.py",
        *sorted((PACKAGE / "spec").glob("*.py")),
        *sorted((PACKAGE / "cli").glob("*.py")),
    ],
    "certify, audit": [*sorted((PACKAGE / "certify").glob("*.py")), PACKAGE / "reporting" / "audit.py"],
}


def _is_property(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "prop") or (
        isinstance(node, ast.Attribute) and node.attr == "prop"
    )


def _hooks(tree: ast.AST) -> set[str]:
    """Property members read in ``tree``: ``prop.x`` / ``task.prop.x``, and the hook named by ``defines("x")``."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_property(node.value):
            found.add(node.attr)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "defines":
            found |= {arg.value for arg in node.args if isinstance(arg, ast.Constant)}
    return found & MEMBERS


def _shared_closure(module: str, wanted: set[str]) -> set[str]:
    """The hooks called by the ``wanted`` top-level definitions of shared engine module ``module``, following the
    definitions they use, in that module and in the shared modules it imports from."""
    tree = ast.parse(SHARED[module].read_text())
    definitions = {node.name: node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    seen: set[str] = set()
    todo = [name for name in wanted if name in definitions]
    used: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            names_ = {n.id for n in ast.walk(definitions[name]) if isinstance(n, ast.Name)}
            used |= names_
            todo += [n for n in names_ if n in definitions]
    hooks = set().union(*(_hooks(definitions[name]) for name in seen))
    for imported, from_there in _imports(tree, level=1).items():
        hooks |= _shared_closure(imported, from_there & used)
    return hooks


def _imports(tree: ast.AST, level: int) -> dict[str, set[str]]:
    """Names imported from shared engine modules (``from ..scan import a, b`` at this relative ``level``)."""
    out: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == level and node.module in SHARED:
            out.setdefault(node.module, set()).update(alias.name for alias in node.names)
    return out


def code_hooks(row: str) -> set[str]:
    files = sorted((ENGINES / row).rglob("*.py")) if row in names() else CALLERS[row]
    hooks: set[str] = set()
    for path in files:
        tree = ast.parse(path.read_text())
        hooks |= _hooks(tree)
        if row in names():  # engines/<name>/x.py imports shared modules as `from ..scan import ...`
            for module, imported in _imports(tree, level=len(path.relative_to(ENGINES).parts)).items():
                hooks |= _shared_closure(module, imported)
    return hooks


def documented() -> dict[str, set[str]]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text[text.index("| caller | hooks |") :].split("\n\n")[0]
    rows = {}
    for line in table.splitlines()[2:]:
        caller, hooks = (cell.strip() for cell in line.strip("|").split("|", 1))
        rows[caller] = set(re.findall(r"`(\w+)", hooks)) & MEMBERS
    return rows


def test_the_hook_table_lists_every_engine_and_caller():
    assert set(documented()) == set(names()) | set(CALLERS)


@pytest.mark.parametrize("row", sorted(set(names()) | set(CALLERS)))
def test_the_hook_table_says_what_the_code_calls(row):
    # `name` names things everywhere (every verdict's kind): the table lists it once, with the registry
    assert documented().get(row, set()) - {"name"} == code_hooks(row) - {"name"}, row


def test_every_member_of_the_property_base_is_documented_and_used():
    """The table and ``contract.Property`` hold the same hooks: none undocumented, none without a default."""
    listed = set().union(*documented().values())
    assert listed == MEMBERS


def test_a_required_hook_that_is_missing_says_which():
    class Bare(Property):
        name = "bare"

    model = one_layer(head(q=1, k=1, v=1, scoring="hardmax"))
    bare = Task.make("bare", Bare(), None, model, Exact(), GridDomain(1, (F(0), F(1)), 2))
    with pytest.raises(MissingHook, match="property 'bare' does not define violation"):
        Bare().violation(bare, ((F(0),), (F(1),)))
    assert Bare().candidates(bare) == () and Bare().decide_on_bounds(bare, lambda model=None: None) is None
    assert not Bare().defines("violation") and registry()["output-bounds"].defines("violation")
    # scan.py calls `requirement` on every proved distinct-values property; no default once meant AttributeError
    assert Bare().requirement(bare) == "distinct"


def test_every_shipped_property_names_registered_engines_only():
    for prop in registry().values():
        assert set(prop.engines) <= set(names()), prop.name


def _reads_by_name(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, code) of each place ``tree`` reads a property's options or members by name: ``getattr``/``hasattr``/
    ``vars`` of anything naming ``prop`` or ``options``, and ``x.options`` read (``.options.margin``,
    ``.options[...]``) or kept (``o = task.options``). Passing the options whole to ``digest`` (the certificate's
    subject hashes them) reads nothing by name."""
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr", "vars")
        ):
            if node.args and re.search(r"\b(prop|options)\b|\.prop\b|\.options\b", ast.unparse(node.args[0])):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Attribute) and node.attr == "options":
            parent = parents.get(node)
            called = parent.func.id if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) else ""
            if called not in ("digest", "getattr", "hasattr", "vars"):  # hashed whole, or reported above
                found.append((node.lineno, ast.unparse(parent if parent is not None else node)))
    return found


def test_no_engine_or_certify_module_reads_a_property_option_by_name():
    """Engines, auto, certify and audit see a property only through its hooks (verify_tf/contract.py): none reads
    its typed options by name. Before: ``getattr(task.options, ...)`` in split's distinct-values and LayerNorm
    paths (``margin``, ``model``) and in certify's conclusion check (``language``), now the hooks ``least_gap``,
    ``other_models`` and ``language_file``."""
    files = sorted(ENGINES.rglob("*.py")) + [path for row in ("auto", "certify, audit") for path in CALLERS[row]]
    found = [
        f"{path.relative_to(ROOT)}:{line}: {code}"
        for path in files
        for line, code in _reads_by_name(ast.parse(path.read_text()))
    ]
    assert found == []
    # and the rule sees what it forbids
    assert [line for line, _ in _reads_by_name(ast.parse("m = getattr(task.options, 'margin', None)"))] == [1]
    assert len(_reads_by_name(ast.parse("o = task.options\nx = task.options.margin\nvars(prop)"))) == 3
    assert _reads_by_name(ast.parse("digest(task.options)")) == []

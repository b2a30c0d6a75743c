"""The contract between properties and engines (verify_tf/contract.py) is what the code uses and what the docs say.

A property extends the small ``Property`` base and the capability protocols it offers; an engine's card says which
capabilities it needs (``NEEDS``) and uses (``USES``); the registry matches the two. Here:

* docs/architecture.md's capability table is ``engines.capability_table()`` verbatim (generated from the classes
  and the cards);
* the code of every engine (its package, and the shared engine modules it imports, followed definition by
  definition) is read (its abstract syntax tree) for every attribute it takes of a property (``prop.x``,
  ``task.prop.x``, ``capability(prop, C).x`` and names bound to ``capability(...)``) and every capability it names
  (``capability(prop, C)``, ``isinstance(prop, C)``): only members of the base and of the capabilities its card
  declares;
* a property that extends a capability without its required hooks cannot be built, and every shipped property
  implements what it offers;
* the base stays small (at most 15 members) and no property module names an engine.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from fractions import Fraction as F
from pathlib import Path

import pytest

from helpers import head, one_layer
from verify_tf import contract
from verify_tf.contract import (
    CAPABILITIES,
    Batched,
    EachInput,
    MissingCapability,
    MissingHook,
    Property,
    Solvable,
    Task,
    capabilities_of,
    capability,
)
from verify_tf.domain import GridDomain
from verify_tf.engines import capability_table, load, names, supporting
from verify_tf.properties import registry
from verify_tf.semantics import Exact

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "verify_tf"
ENGINES = PACKAGE / "engines"
SHARED = {path.stem: path for path in ENGINES.glob("*.py") if path.stem != "__init__"}  # base, scan, ...
BASE = {name for name in vars(Property) if not name.startswith("_")}
MEMBERS = {kind: {name for name in vars(kind) if not name.startswith("_")} for kind in CAPABILITIES}
EVERY_HOOK = BASE.union(*MEMBERS.values())
BY_NAME = {kind.__name__: kind for kind in CAPABILITIES}
NOT_ENGINES = {  # code that is no engine, and sees properties through the base only
    "auto": [PACKAGE / "auto.py"],
    "runner": [PACKAGE / "runner.py", PACKAGE / "cache.py"],
    "registry, spec, cli": [
        PACKAGE / "properties" / "base.py",
        *sorted((PACKAGE / "spec").glob("*.py")),
        *sorted((PACKAGE / "cli").glob("*.py")),
    ],
}


# ---------------------------------------------------------------- reading the code


def _is_property(node: ast.expr, views: set[str]) -> bool:
    """``prop``, ``x.prop``, a name bound to ``capability(...)``, or ``capability(...)`` itself."""
    if isinstance(node, ast.Name):
        return node.id == "prop" or node.id in views
    if isinstance(node, ast.Attribute):
        return node.attr == "prop"
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "capability"


def _views(tree: ast.AST) -> set[str]:
    """Names bound to ``capability(...)`` (``p = capability(task.prop, Solvable)``, tuples too)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            targets = node.targets[0].elts if isinstance(node.targets[0], ast.Tuple) else node.targets
            for target, value in zip(targets, values):
                if isinstance(target, ast.Name) and _is_property(value, set()) and isinstance(value, ast.Call):
                    found.add(target.id)
    return found


def _hooks(tree: ast.AST) -> tuple[set[str], set[str]]:
    """(property members read in ``tree``, capability classes it names in ``capability``/``isinstance`` calls)."""
    views = _views(tree)
    hooks, kinds = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_property(node.value, views):
            hooks.add(node.attr)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("capability", "isinstance")
        ):
            for arg in node.args[1:]:
                for name in ast.walk(arg):
                    if isinstance(name, ast.Name) and name.id in BY_NAME:
                        kinds.add(name.id)
    return hooks & EVERY_HOOK, kinds


def _imports(tree: ast.AST, level: int) -> dict[str, set[str]]:
    """Names imported from shared engine modules (``from ..scan import a, b`` at this relative ``level``)."""
    out: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == level and node.module in SHARED:
            out.setdefault(node.module, set()).update(alias.name for alias in node.names)
    return out


def _shared_closure(module: str, wanted: set[str]) -> tuple[set[str], set[str]]:
    """What the ``wanted`` top-level definitions of shared engine module ``module`` read and name, following the
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
    hooks, kinds = set(), set()
    for name in seen:
        found = _hooks(definitions[name])
        hooks, kinds = hooks | found[0], kinds | found[1]
    for imported, from_there in _imports(tree, level=1).items():
        found = _shared_closure(imported, from_there & used)
        hooks, kinds = hooks | found[0], kinds | found[1]
    return hooks, kinds


def code_hooks(row: str) -> tuple[set[str], set[str]]:
    """(the property members the code of ``row`` reads, the capabilities it names)."""
    files = sorted((ENGINES / row).rglob("*.py")) if row in names() else NOT_ENGINES[row]
    hooks, kinds = set(), set()
    for path in files:
        tree = ast.parse(path.read_text())
        found = _hooks(tree)
        hooks, kinds = hooks | found[0], kinds | found[1]
        if row in names():  # engines/<name>/x.py imports shared modules as `from ..scan import ...`
            for module, imported in _imports(tree, level=len(path.relative_to(ENGINES).parts)).items():
                found = _shared_closure(module, imported)
                hooks, kinds = hooks | found[0], kinds | found[1]
    return hooks, kinds


def declared(engine: str) -> set[type]:
    card = load(engine)
    return set().union(*card.needs) | set(card.uses)


# ---------------------------------------------------------------- the table and the code


def test_the_capability_table_of_the_docs_is_generated_from_the_classes_and_cards():
    text = (ROOT / "docs" / "architecture.md").read_text()
    start = text.index("<!-- capability table: generated by verify_tf.engines.capability_table -->\n")
    table = text[text.index("\n", start) + 1 : text.index("<!-- end of the capability table -->")]
    assert table == capability_table(), (
        "regenerate it: python -c 'from verify_tf.engines import capability_table; print(capability_table())'"
    )
    # and the table names every capability and every member of each
    for kind in CAPABILITIES:
        row = next(line for line in table.splitlines() if line.startswith(f"| `{kind.__name__}`"))
        assert set(re.findall(r"`(\w+)", row.split(" | ")[-1])) == MEMBERS[kind], kind.__name__


@pytest.mark.parametrize("engine", names())
def test_an_engine_calls_only_the_hooks_of_the_capabilities_its_card_declares(engine):
    hooks, kinds = code_hooks(engine)
    allowed = declared(engine)
    assert {BY_NAME[k] for k in kinds} <= allowed, engine
    assert hooks <= BASE.union(*(MEMBERS[kind] for kind in allowed)), (engine, hooks - BASE)
    # what it needs, it uses: a card declares no capability its code never asks for (the base's violation and
    # input_space are read by every scan)
    assert hooks or kinds, engine


@pytest.mark.parametrize("row", sorted(NOT_ENGINES))
def test_auto_the_runner_the_spec_and_the_cli_see_a_property_through_its_base(row):
    hooks, kinds = code_hooks(row)
    assert hooks <= BASE and not kinds, (row, hooks - BASE, kinds)


def test_the_property_base_is_small():
    """The base every property extends: 15 members at most (51 before the capabilities, issue 37)."""
    assert len(BASE) <= 15, sorted(BASE)
    assert {
        "name",
        "summary",
        "options",
        "needs_domain",
        "language_domains",
        "evaluations_per_input",
        "fit",
        "premise",
        "offers",
        "reading",
        "input_space",
        "violation",
        "statistics",
        "describe_proof",
    } == BASE


# ---------------------------------------------------------------- capabilities are implemented


def test_a_property_that_advertises_a_capability_without_its_hooks_cannot_be_built():
    class Liar(EachInput, Solvable):  # offers solver queries, defines none of them
        name = "liar"

        def violation(self, task, tokens):
            return None

    with pytest.raises(TypeError, match=r"abstract method.*build_query.*replay_query.*smt_queries"):
        Liar()

    class Honest(EachInput):
        name = "honest"

        def violation(self, task, tokens):
            return None

    assert capabilities_of(Honest) == {EachInput}


def test_every_shipped_property_implements_every_capability_it_offers():
    for name, prop in registry().items():
        offered = capabilities_of(type(prop))
        assert offered, name
        for kind in offered:
            for hook in MEMBERS[kind]:
                value = getattr(type(prop), hook)
                assert not getattr(value, "__isabstractmethod__", False), (name, kind.__name__, hook)
        assert supporting(prop), f"{name}: no engine runs what it offers"


def test_the_engines_of_each_property_follow_from_its_capabilities():
    """The engines each property ran on before the capabilities (its own list then), in the registry's
    preference order; position-blind (interpret first before) and crasp-equivalence (counting before split) now
    follow the cards' one order."""
    assert {name: supporting(prop) for name, prop in registry().items()} == {
        "contextual-mapping": ("enumerate", "interpret", "smt", "split"),
        "crasp-equivalence": ("enumerate", "interpret", "smt", "split", "counting"),
        "equivalent-to": ("enumerate", "interpret", "search", "smt", "split", "counting"),
        "indistinguishable": ("architecture",),
        "inexpressible": ("architecture",),
        "output-bounds": ("enumerate", "interpret", "search", "smt", "split", "counting"),
        "permutation-equivariance": ("enumerate", "interpret", "search", "smt", "split"),
        "position-blind": ("enumerate", "interpret", "architecture"),
        "rasp-equivalence": ("enumerate", "interpret", "smt"),
        "value-range": ("enumerate", "interpret", "search"),
    }
    bounds, blind = registry()["output-bounds"], registry()["position-blind"]
    every_length = bounds.options.check({"lo": 0, "hi": 1, "lengths": "all"})
    assert supporting(bounds, every_length) == ("counting",)
    whole_class = blind.options.check({"on": "output", "tolerance": F(0), "scope": "architecture"})
    assert supporting(blind, whole_class) == ("architecture",)


def test_an_engine_sees_a_property_only_through_a_capability_it_offers():
    model = one_layer(head(q=1, k=1, v=1, scoring="hardmax"))

    class Bare(Property):
        name = "bare"

    bare = Task.make("bare", Bare(), None, model, Exact(), GridDomain(1, (F(0), F(1)), 2))
    with pytest.raises(MissingHook, match="property 'bare' does not define violation"):
        Bare().violation(bare, ((F(0),), (F(1),)))
    with pytest.raises(MissingCapability, match="property 'bare' does not offer Batched"):
        capability(bare.prop, Batched)
    assert supporting(Bare()) == ()  # no capability: no engine runs it
    bounds = registry()["output-bounds"]
    assert capability(bounds, Solvable) is bounds


# ---------------------------------------------------------------- properties name no engine


def engine_literals(path: Path, text: str | None = None) -> list[str]:
    """String literals of a module that are exactly an engine's name."""
    found = []
    for token in tokenize.generate_tokens(io.StringIO(path.read_text() if text is None else text).readline):
        if token.type == tokenize.STRING and token.string.strip("\"'") in names():
            found.append(f"{path.name}:{token.start[0]}: {token.string}")
    return found


def test_no_property_module_names_an_engine():
    """55 engine names were string literals in verify_tf/properties/ before the capabilities (issue 37). The
    one word left is position-blind's ``scope: architecture``, spec syntax for the architecture class."""
    found = [hit for path in sorted((PACKAGE / "properties").glob("*.py")) for hit in engine_literals(path)]
    assert found == ['position_blind.py:63: "architecture"']
    code = 'ENGINES = ("enumerate", "smt")\nsummary = "the smt engine"\n'
    assert engine_literals(Path("x.py"), code) == ['x.py:1: "enumerate"', 'x.py:1: "smt"']  # it sees them


def test_the_contract_module_lists_every_capability_class():
    defined = {
        value
        for value in vars(contract).values()
        if isinstance(value, type) and issubclass(value, contract.Capability) and value is not contract.Capability
    }
    assert defined == set(CAPABILITIES)


# ---------------------------------------------------------------- options are the property's own


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
    certify = [*sorted((PACKAGE / "certify").glob("*.py")), PACKAGE / "reporting" / "audit.py"]
    files = sorted(ENGINES.rglob("*.py")) + [PACKAGE / "auto.py", *certify]
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

"""The engine registry: engines are the packages of verify_tf/engines/, and everything that lists engines derives
from it (spec validation, --engine, auto's roles, the import contract). The "add an engine" example of
docs/architecture.md is installed as a real engine and checked against ``interpret``."""

from __future__ import annotations

import dataclasses
import importlib
import re
import subprocess
import sys
from fractions import Fraction as F
from pathlib import Path

import pytest
import tomllib

import verify_tf.engines as registry
from helpers import head, one_layer, task
from verify_tf.domain import GridDomain
from verify_tf.engines import load, names, supporting
from verify_tf.engines.base import Run
from verify_tf.engines.cost import EXHAUSTIVE, ROLES
from verify_tf.executors import InProcess
from verify_tf.properties import registry as registry_of_properties
from verify_tf.runner import run_engine
from verify_tf.semantics import Exact
from verify_tf.spec.loader import ENGINES
from verify_tf.work import Deadline

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"


def test_every_package_of_the_engines_folder_is_an_engine_and_nothing_else_is():
    folder = ROOT / "verify_tf" / "engines"
    packages = sorted(p.name for p in folder.iterdir() if (p / "__init__.py").is_file() and not p.name.startswith("_"))
    assert names() == tuple(packages) and len(packages) >= 7  # the seven engines of wave 2, at least
    for name in names():
        card = load(name)
        assert card.name == name and callable(card.check)
        assert card.role is None or card.role in ROLES, (name, card.role)
        assert card.role != EXHAUSTIVE or card.predict is not None, f"{name}: an exhaustive engine predicts its cost"
        driver = folder / name / "driver.py"
        if driver.is_file():  # the driver names its verdicts with the card's name
            assert name == importlib.import_module(f"verify_tf.engines.{name}.driver").ENGINE


def test_what_lists_engines_derives_from_the_registry():
    assert ("auto", *names()) == ENGINES
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    [independent] = [c["modules"] for c in config if c["type"] == "independence"]
    assert independent == [f"verify_tf.engines.{name}" for name in names()]


def test_unknown_or_malformed_engines_are_refused(engines_folder):
    with pytest.raises(KeyError, match="unknown engine 'no-such'"):
        load("no-such")
    (engines_folder / "nameless").mkdir()
    (engines_folder / "nameless" / "__init__.py").write_text("ENGINE = 'other'\n\ndef check(task, run):\n    pass\n")
    registry.names.cache_clear()
    with pytest.raises(registry.NotAnEngine, match="must define ENGINE = 'nameless'"):
        load("nameless")


def test_a_card_imports_neither_its_driver_nor_z3():
    """Lazy loading: naming or predicting an engine does not import the engine (z3 alone costs 0.1-0.2 s)."""
    script = (
        "import sys\n"
        "from verify_tf.engines import load, names\n"
        "cards = [load(n) for n in names()]\n"
        "loaded = sorted(m for m in sys.modules if m.endswith('.driver') or m == 'z3')\n"
        "print(loaded)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.strip() == "[]", done.stdout


# ---------------------------------------------------------------- the worked example of docs/architecture.md


@pytest.fixture
def engines_folder(tmp_path, monkeypatch):
    """A folder whose packages are engines, as if dropped into verify_tf/engines/ (undone after the test)."""
    monkeypatch.setattr(registry, "__path__", [*registry.__path__, str(tmp_path)])
    registry.names.cache_clear()
    registry.load.cache_clear()
    yield tmp_path
    monkeypatch.undo()
    for name in [m for m in sys.modules if m.startswith("verify_tf.engines.") and m.split(".")[2] not in names()]:
        del sys.modules[name]
    registry.names.cache_clear()
    registry.load.cache_clear()


@pytest.fixture
def brute(engines_folder):
    code = re.search(r'```python\n("""Engine ``brute``.*?)```', DOC.read_text(), re.S).group(1)
    (engines_folder / "brute").mkdir()
    (engines_folder / "brute" / "__init__.py").write_text(code)
    return load("brute")


def _run(checked, engine):
    return run_engine(checked, Run(InProcess(), Deadline(60)), engine)


def test_the_add_an_engine_example_is_discovered_and_agrees_with_interpret(brute):
    assert "brute" in names() and brute.role is None
    # one folder is all it takes: the registry runs it on the properties whose capabilities its NEEDS names
    assert "brute" in supporting(registry_of_properties()["output-bounds"])
    assert "brute" not in supporting(registry_of_properties()["contextual-mapping"])  # distinct values: not each input
    model = one_layer(head(q=1, k=1, v=1, scoring="hardmax", causal=True))
    domain = GridDomain(1, (F(0), F(1), F(2)), 3)  # 3^3 = 27 inputs of length 3
    held = task(model, Exact(), domain, "output-bounds", {"lo": -10, "hi": 10})
    proved, reference = _run(held, "brute"), _run(held, "interpret")
    assert (proved.status, proved.engine, proved.detail) == ("proved", "brute", "all 27 inputs")
    assert reference.status == "proved"
    broken = task(model, Exact(), domain, "output-bounds", {"lo": 0, "hi": 3})
    refuted, reference = _run(broken, "brute"), _run(broken, "interpret")
    assert refuted.status == reference.status == "refuted"
    assert refuted.counterexample["input"] == reference.counterexample["input"]  # the least input, replayed


# ---------------------------------------------------------------- certificates: kinds from the cards, evidence


def test_the_kinds_of_certificate_come_from_the_cards():
    """Audit refuses a certificate of a kind its engine's proofs do not get; the table is the engines' cards (the
    kinds below are the ones certify's own table held before the cards did)."""
    from verify_tf.certify import certificate_kinds

    assert {name: load(name).certificates for name in names()} == {
        "architecture": ("smt", "conclusion"),
        "counting": ("counting",),
        "enumerate": ("exhaustive",),
        "interpret": ("exhaustive",),
        "search": (),  # evidence, never a proof
        "smt": ("smt",),
        "split": ("split",),
    }
    assert certificate_kinds("smt") == ("smt",) and certificate_kinds("no-such") == ()
    # only smt derives its queries without solving them; the others are run again by audit
    assert [name for name in names() if load(name).derive_queries is not None] == ["smt"]


def test_a_card_with_an_unknown_kind_of_certificate_is_refused(engines_folder):
    (engines_folder / "odd").mkdir()
    card = "ENGINE = 'odd'\nCERTIFICATES = ('smt', 'trust-me')\n\ndef check(task, run):\n    pass\n"
    (engines_folder / "odd" / "__init__.py").write_text(card)
    registry.names.cache_clear()
    with pytest.raises(registry.NotAnEngine, match=r"odd\.CERTIFICATES: kinds of certificate are smt, conclusion"):
        load("odd")


@pytest.mark.parametrize("engine", ["interpret", "enumerate", "smt"])
def test_certify_evidence_is_a_field_of_the_verdict_never_a_statistic(engine):
    """--certify changes nothing a report shows: the statistics are the same with and without it, the evidence
    is the verdict's ``evidence`` and never written (to_json). 27 inputs: 3 values at 3 positions."""
    from verify_tf.engines.scan import combined_digest
    from verify_tf.verdict import Verdict

    model = one_layer(head(q=1, k=1, v=1, scoring="hardmax", causal=True))
    domain = GridDomain(1, (F(0), F(1), F(2)), 3)
    checked = task(model, Exact(), domain, "output-bounds", {"lo": -10, "hi": 10})
    plain = _run(checked, engine)
    certified = _run(dataclasses.replace(checked, settings=dataclasses.replace(checked.settings, certify=True)), engine)
    assert plain.status == certified.status == "proved" and plain.evidence is None
    assert plain.statistics.keys() == certified.statistics.keys()  # (z3's own counters vary from run to run)
    assert engine == "smt" or plain.statistics == certified.statistics
    evidence = certified.evidence
    if engine == "smt":
        assert evidence.kind == "smt" and evidence.queries and all(q["answer"] == "unsat" for q in evidence.queries)
        assert all(q["smt2"].startswith("(") for q in evidence.queries) and not evidence.chunks
    else:
        assert evidence.kind == "exhaustive" and sum(b - a for a, b, _ in evidence.chunks) == 27
        assert evidence.outputs_sha256 == combined_digest(evidence.chunks) and not evidence.queries
    written = certified.to_json()
    assert "evidence" not in written and Verdict.from_json(written).evidence is None

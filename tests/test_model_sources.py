"""Model sources (``verify_tf.builders.sources``): the registry, the dispatch of a model section to its source, and
the worked example of docs/architecture.md ("Add a model source") installed as a real source."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from verify_tf import builders
from verify_tf.builders import sources
from verify_tf.cli import main
from verify_tf.spec import SpecError, load_spec_text
from verify_tf.spec.loader import json_schema

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"


def test_every_registered_source_declares_its_key_and_schema():
    assert sources.registered() == ("layers", "file", "random", "construct", "torch", "tracr")
    for key in sources.registered():
        source = sources.load(key)
        assert source.key == key and key in source.fields
        assert source.label and source.usage and source.example
        assert not set(source.fields) & set(sources.COMMON_FIELDS)


def test_a_spec_imports_only_the_module_of_its_own_source():
    """Naming the registry imports no source; a random model's spec loads builders.random_model and no other
    source (torch_source, tracr_source, constructs, files, inline stay unimported)."""
    script = (
        "import sys\n"
        "from verify_tf.spec import load_spec_text\n"
        "load_spec_text('model: {random: {seed: 1}}\\nproperties: [permutation-equivariance]\\n"
        "domain: {grid: {step: 1/2}, length: 2}\\n')\n"
        "print(sorted(m for m in sys.modules if m.startswith('verify_tf.builders.')))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.strip() == "['verify_tf.builders.random_model', 'verify_tf.builders.sources', " + (
        "'verify_tf.builders.torch_reading']"
    )


def test_a_key_of_another_source_is_refused_naming_its_source():
    with pytest.raises(SpecError) as caught:
        load_spec_text("model: {random: {seed: 0}, readout: [1, 0]}\nproperties: [permutation-equivariance]\n")
    assert caught.value.path == "model.readout"
    assert "'readout' applies only to an inline model (layers)" in str(caught.value)
    with pytest.raises(SpecError, match="'architecture' applies only to a torch source"):
        load_spec_text("model: {random: {seed: 0}, architecture: {heads: 1}}\nproperties: [permutation-equivariance]\n")
    with pytest.raises(SpecError, match="expected one model source") as caught:
        load_spec_text("model: {name: m}\nproperties: [permutation-equivariance]\n")
    assert "give one of: layers, file, random, construct, torch, tracr" in str(caught.value)
    with pytest.raises(SpecError, match="keys 'file' and 'random' cannot be combined"):
        load_spec_text("model: {random: {}, file: x.npz}\nproperties: [permutation-equivariance]\n")
    with pytest.raises(SpecError, match="unknown key 'randm'") as caught:
        load_spec_text("model: {randm: {}}\nproperties: [permutation-equivariance]\n")
    assert "did you mean 'random'?" in str(caught.value)


# ---------------------------------------------------------------- the worked example of docs/architecture.md


@pytest.fixture
def averager(tmp_path, monkeypatch):
    """The docs' example source, as if dropped into verify_tf/builders/ and registered (undone after the test)."""
    code = re.search(r'```python\n("""Model source ``averager``.*?)```', DOC.read_text(), re.S).group(1)
    line = re.search(r'```python\n    ("averager": "averager",).*?\n```', DOC.read_text()).group(1)
    assert line == '"averager": "averager",'  # the registered line the docs show is the one registered here
    (tmp_path / "averager.py").write_text(code)
    monkeypatch.setattr(builders, "__path__", [*builders.__path__, str(tmp_path)])
    sources.register("averager", "averager")
    yield sources.load("averager")
    sources.unregister("averager")
    sys.modules.pop("verify_tf.builders.averager", None)


SPEC = """
model: {averager: {width: 1}}
domain: {grid: {values: [0, 1/2, 1]}, length: 2}
properties:
  - permutation-equivariance: {}
  - output-bounds: {lo: 0, hi: 2}
  - output-bounds: {lo: 0, hi: 7/4}
"""


def test_the_add_a_model_source_example_is_registered_and_checked(averager, tmp_path):
    """q_i = x_i + (x_1 + x_2)/2 over {0, 1/2, 1}^2 (by hand): uniform attention has no positional information
    (equivariant); q ranges over [0, 2]; q > 7/4 only at x = (1, 1), where q = (2, 2)."""
    assert "averager" in sources.registered() and averager.key == "averager"
    spec = tmp_path / "averager.yaml"
    spec.write_text(SPEC)
    report = tmp_path / "r.json"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]); from verify_tf import builders; "
            "builders.__path__.append(sys.argv[1]); from verify_tf.builders import sources; "
            "sources.register('averager', 'averager'); from verify_tf.cli import main; main(sys.argv[2:])",
            str(tmp_path),
            "check",
            str(spec),
            "--no-cache",
            "--engine",
            "enumerate",
            "--json",
            str(report),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 1, done.stdout + done.stderr  # the third property is refuted
    results = json.loads(report.read_text())["results"]
    assert [r["verdict"] for r in results] == ["proved", "proved", "refuted"]
    witness = results[2]["counterexample"]
    assert witness["input"] == [["1"], ["1"]] and witness["readout"] == ["2", "2"]


def test_the_example_source_is_in_the_schema_and_its_errors_are_located(averager):
    model = json_schema()["$defs"]["model"]["properties"]
    assert model["averager"]["properties"]["width"]["maximum"] == 8
    with pytest.raises(SpecError) as caught:
        load_spec_text("model:\n  averager: {width: 0}\nproperties: [permutation-equivariance]\n", "a.yaml")
    assert (caught.value.line, caught.value.path) == (2, "model.averager.width")
    with pytest.raises(SpecError, match="keys 'random' and 'averager' cannot be combined"):
        load_spec_text("model: {random: {}, averager: {}}\nproperties: [permutation-equivariance]\n")


def test_schema_command_lists_every_registered_source(capsys):
    with pytest.raises(SystemExit) as done:
        main(["schema"])
    assert done.value.code in (0, None)
    model = json.loads(capsys.readouterr().out)["$defs"]["model"]["properties"]
    assert set(sources.registered()) <= set(model)

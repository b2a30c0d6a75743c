"""`verify-tf schema` agrees with the loader; `verify-tf run` and `verify-tf init` work end to end."""

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from verify_tf.cli import main
from verify_tf.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted((ROOT / "specs").glob("*.yaml"))


class Yaml12Loader(yaml.SafeLoader):
    """YAML 1.2 booleans (true/false only), as editors' YAML language servers read specs: `on:` is a string."""


Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
Yaml12Loader.add_implicit_resolver("tag:yaml.org,2002:bool", __import__("re").compile(r"^(?:true|false)$"), list("tf"))


def load12(text: str):
    return yaml.load(text, Loader=Yaml12Loader)


@pytest.fixture(scope="module")
def schema():
    result = CliRunner().invoke(main, ["schema"])
    assert result.exit_code == 0
    return json.loads(result.output)


@pytest.fixture(scope="module")
def validator(schema):
    """One validator for every spec: `jsonschema.validate` checks the schema against its metaschema and builds a
    validator on every call (0.4 CPU s each, 40 s for the shipped specs); here that check runs once."""
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


@pytest.mark.slow
@pytest.mark.parametrize("path", SPECS, ids=[p.name for p in SPECS])
def test_every_shipped_spec_satisfies_the_json_schema(validator, path):
    validator.validate(load12(path.read_text()))


def test_json_schema_rejects_what_the_loader_rejects(schema):
    doc = load12((ROOT / "specs" / "equivariance-standard-hardmax.yaml").read_text())
    doc["domian"] = doc.pop("domain")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, schema)


def test_init_writes_a_spec_that_proves(tmp_path):
    runner = CliRunner()
    target = tmp_path / "spec.yaml"
    assert runner.invoke(main, ["init", str(target)]).exit_code == 0
    assert runner.invoke(main, ["init", str(target)]).exit_code == 2  # refuses to overwrite
    spec = load_spec(target)
    assert spec.properties[0].name == "permutation-equivariance"
    result = runner.invoke(main, ["check", str(target)])
    assert result.exit_code == 0, result.output
    assert "proved" in result.output


def test_run_prints_the_trace_of_the_papers_example(tmp_path):
    spec = tmp_path / "yun.yaml"
    spec.write_text(
        "model: {construct: yun2019-contextual-mapping, d: 1, delta: 1/2, n: 2}\n"
        "domain: {grid: {step: 1/2}, length: 2}\nproperties: [{permutation-equivariance: {}}]\n"
    )
    result = CliRunner().invoke(main, ["run", str(spec), "--input", "[0, 1/2]", "--json"])
    assert result.exit_code == 0, result.output
    trace = json.loads(result.output)
    assert trace["readout"] == ["49", "99/2"]  # Yun et al.: q = (49, 49.5)
    assert len(trace["layers"]) == 3  # two selective shifts + the global shift
    bad = CliRunner().invoke(main, ["run", str(spec), "--input", "[0, u]"])
    assert bad.exit_code == 2 and "--input" in bad.output

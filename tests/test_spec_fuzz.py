"""Fuzzing the spec loader: specs drawn from its own JSON schema (`verify-tf schema`), and byte-level mutations
of the shipped specs and model files. The contract (docs/cli.md): loading either succeeds or raises a located
``SpecError`` (file, line, key) that the CLI prints with exit 2. Never a traceback, never exit 4, and loading
never executes code from a file.

Counts per CI run (slow layer): 500 + 5 schema-drawn specs + 1,300 spec mutations + 300 model-file mutations
(2,105 cases).
Every crash found becomes a named regression test at the bottom of this file.
"""

from __future__ import annotations

import functools
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from verify_tf.builders.crasp_compiler import compile_program
from verify_tf.builders.files import save_model
from verify_tf.crasp import lk_program
from verify_tf.schema.errors import SpecError
from verify_tf.spec.loader import json_schema, load_spec_text

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted((ROOT / "specs").glob("*.yaml"))


def _load_or_located_error(text: str, base_dir: Path, file: str = "fuzz.yaml") -> None:
    """Loading ``text`` either succeeds or raises a SpecError naming the file (and a line when it has one)."""
    try:
        load_spec_text(text, file, base_dir)
    except SpecError as error:
        assert error.file == file, (str(error), text[:300])
        assert str(error).startswith(file), str(error)
    except RecursionError:  # pragma: no cover - would be a finding
        pytest.fail(f"recursion error on:\n{text[:300]}")


# ---------------------------------------------------------------- drawn from the schema


def _from_json_schema(schema: dict, root: dict):
    """A hypothesis strategy for the documents that satisfy ``schema``, for the subset of JSON Schema that
    ``verify_tf.schema`` emits ($ref, anyOf, enum, typed objects/arrays/strings/numbers, bounds, patterns).
    hypothesis-jsonschema draws from the same schema too (below), but it re-canonicalises merged anyOf schemas
    on every draw: 2.5 to 3.4 s per spec on ours (measured 2026-11-24), too slow for many draws per CI run.
    This converter's draws are cheaper but not free: the schema has grown, and 500 draws took 355 s under
    load 14 (2026-11-26, profiled: three quarters of it hypothesis drawing documents, not loading them), the
    longest test of the suite; 200 draws keep CI's suite near its 6 minutes."""
    if "$ref" in schema:
        return st.deferred(lambda: _from_json_schema(root["$defs"][schema["$ref"].split("/")[-1]], root))
    if "anyOf" in schema:
        return st.one_of([_from_json_schema(branch, root) for branch in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "object":
        fields = {key: _from_json_schema(sub, root) for key, sub in schema.get("properties", {}).items()}
        required = [key for key in schema.get("required", []) if key in fields]
        optional = {key: value for key, value in fields.items() if key not in required}
        return st.fixed_dictionaries({key: fields[key] for key in required}, optional=optional)
    if kind == "array":
        return st.lists(
            _from_json_schema(schema.get("items", {}), root),
            min_size=schema.get("minItems", 0),
            max_size=max(schema.get("minItems", 0), min(schema.get("maxItems", 4), 4)),
        )
    if kind == "string":
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True)
        return st.text(max_size=12)
    if kind == "integer":
        return st.integers(schema.get("minimum"), schema.get("maximum"))
    if kind == "number":
        return st.one_of(
            st.integers(schema.get("minimum"), schema.get("maximum")),
            st.floats(schema.get("minimum"), schema.get("maximum"), allow_nan=False, allow_infinity=False),
        )
    if kind == "boolean":
        return st.booleans()
    return st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8))


SCHEMA = json_schema()
SCHEMA_DOCUMENTS = _from_json_schema(SCHEMA, SCHEMA)


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(spec=SCHEMA_DOCUMENTS)
def test_specs_drawn_from_the_schema_load_or_fail_located(spec, tmp_path_factory):
    text = yaml.safe_dump(spec, allow_unicode=True, sort_keys=False)
    _load_or_located_error(text, tmp_path_factory.getbasetemp())


@functools.cache
def _jsonschema_documents():
    """hypothesis-jsonschema's strategy for the schema, built once: building it inside each example (as this
    test once did) cost about 1 CPU s per draw on top of the draw itself (measured 2026-11-27: 5 draws 13.9 CPU s
    building per draw, 8.7 s building once)."""
    from hypothesis_jsonschema import from_schema

    return from_schema(SCHEMA, allow_x00=False)


@pytest.mark.slow
@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_specs_drawn_by_hypothesis_jsonschema_load_or_fail_located(data, tmp_path_factory):
    """The same check with the reference generator, a few draws (its cost is above)."""
    spec = data.draw(_jsonschema_documents())
    _load_or_located_error(yaml.safe_dump(spec, allow_unicode=True, sort_keys=False), tmp_path_factory.getbasetemp())


# ---------------------------------------------------------------- mutations of the shipped specs


def _mutations(text: str, rng: random.Random) -> str:
    kind = rng.randrange(8)
    lines = text.splitlines(keepends=True)
    if kind == 0:  # truncation
        return text[: rng.randrange(len(text) + 1)]
    if kind == 1:  # a byte flipped
        i = rng.randrange(len(text))
        return text[:i] + chr(rng.randrange(32, 127)) + text[i + 1 :]
    if kind == 2:  # a huge or odd number somewhere a number was
        tokens = text.split(" ")
        numeric = [i for i, t in enumerate(tokens) if t.strip(",}]\n").lstrip("-").replace("/", "").isdigit()]
        if numeric:
            i = rng.choice(numeric)
            tokens[i] = (
                rng.choice(
                    [
                        "1e400",
                        "10" + "0" * 400,
                        "-0",
                        ".nan",
                        ".inf",
                        "1/0",
                        "0x10",
                        "'3'",
                        "[]",
                        "{}",
                        "true",
                        "~",
                        "1_000",
                    ]
                )
                + tokens[i][len(tokens[i].rstrip(",}]\n")) :]
            )
        return " ".join(tokens)
    if kind == 3:  # a line deleted
        if lines:
            del lines[rng.randrange(len(lines))]
        return "".join(lines)
    if kind == 4:  # deep nesting
        depth = rng.choice([50, 500, 5000])
        return text + f"\nextra: {'[' * depth}{']' * depth}\n"
    if kind == 5:  # YAML tags that would construct objects in an unsafe loader
        return text.replace(
            "name:",
            rng.choice(
                [
                    "name: !!python/object/apply:os.system ['echo pwned'] #",
                    "name: !!binary aGVsbG8= #",
                    "name: !custom x #",
                ]
            ),
            1,
        )
    if kind == 6:  # anchors and aliases (a small billion laughs)
        laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"{chr(98 + k)}: &{chr(98 + k)} [*{chr(97 + k)}, *{chr(97 + k)}, *{chr(97 + k)}, *{chr(97 + k)}, "
            f"*{chr(97 + k)}, *{chr(97 + k)}, *{chr(97 + k)}, *{chr(97 + k)}, *{chr(97 + k)}]\n"
            for k in range(8)
        )
        return laughs + text
    # two lines swapped (changes indentation structure)
    if len(lines) > 1:
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    return "".join(lines)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(10))
def test_mutated_shipped_specs_load_or_fail_located(seed):
    rng = random.Random(seed)
    for _ in range(130):  # 1,300 mutations in all
        path = rng.choice(SPECS)
        _load_or_located_error(_mutations(path.read_text(), rng), path.parent, path.name)


# ---------------------------------------------------------------- mutations of model files


@pytest.fixture(scope="module")
def model_files(tmp_path_factory) -> list[Path]:
    """A compiled model in every file format, and the smallest tracr exports."""
    folder = tmp_path_factory.mktemp("models")
    model = compile_program(lk_program(2)).model
    files = []
    for suffix in (".safetensors", ".npz"):
        save_model(model, folder / f"L2{suffix}")
        files.append(folder / f"L2{suffix}")
    return files + sorted((ROOT / "examples" / "tracr").glob("*.json"), key=lambda p: p.stat().st_size)[:3]


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
def test_mutated_model_files_load_or_fail_located(seed, tmp_path, model_files):
    rng = random.Random(seed)
    for k in range(100):  # 300 mutations in all
        source = rng.choice(model_files)
        data = bytearray(source.read_bytes())
        choice = rng.randrange(3)
        if choice == 0:
            data = data[: rng.randrange(len(data) + 1)]
        elif choice == 1:
            for _ in range(rng.randrange(1, 8)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        else:
            data = data + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
        target = tmp_path / f"m{k}{source.suffix}"
        target.write_bytes(bytes(data))
        key = "tracr" if source.parent.name == "tracr" else "file"
        _load_or_located_error(
            f"model: {{{key}: {target.name}}}\narithmetic: exact\n"
            "domain: {strings: {alphabet: [a, b], max-length: 2}}\n"
            "properties:\n  - output-bounds: {hi: 1}\n",
            tmp_path,
        )


# ---------------------------------------------------------------- the CLI's side of the contract


@pytest.mark.slow
def test_the_cli_exits_2_on_a_fuzzed_spec_and_prints_no_traceback(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text((ROOT / "specs" / "smt-output-bounds.yaml").read_text()[:57] + "\n  : [\n")
    run = subprocess.run(
        [sys.executable, "-m", "verify_tf", "check", str(bad)], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr + run.stdout
    assert re.search(r"bad\.yaml:\d+", run.stderr + run.stdout), run.stderr + run.stdout  # located: file:line


# ---------------------------------------------------------------- regressions found by the fuzzer


def test_regression_deep_nesting_is_a_located_error_not_a_recursion_error():
    # found by test_mutated_shipped_specs_load_or_fail_located: 5,000 nested lists crashed PyYAML's composer
    text = (ROOT / "specs" / "crasp-L3.yaml").read_text() + "\nextra: " + "[" * 5000 + "]" * 5000 + "\n"
    with pytest.raises(SpecError) as caught:
        load_spec_text(text, "deep.yaml", ROOT / "specs")
    assert "nested more than 100 deep" in str(caught.value) and caught.value.line == text.count("\n")


def test_regression_an_alias_bomb_is_refused_quickly():
    # found by the fuzzer: 9^9 aliased values took seconds per spec to reach the old 2,000,000-value limit; the
    # budget is now 100 times the distinct values written (here about 90) plus 10,000
    laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + k)}: &{chr(98 + k)} [" + ", ".join([f"*{chr(97 + k)}"] * 9) + "]\n" for k in range(8)
    )
    with pytest.raises(SpecError) as caught:
        load_spec_text(laughs + "model: {random: {seed: 1}}\n", "laughs.yaml")
    assert "too many values" in str(caught.value)


def test_regression_a_nul_in_a_file_path_is_a_located_error():
    # found by test_specs_drawn_from_the_schema_load_or_fail_located once the norm keys changed its draws:
    # {model: {program: "\0"}} raised ValueError (embedded null byte) from pathlib instead of a SpecError
    with pytest.raises(SpecError) as caught:
        load_spec_text('model: {program: "\\0"}\nproperties: [contextual-mapping]\n', "nul.yaml", ROOT / "specs")
    assert caught.value.line == 1 and "NUL character" in str(caught.value)

"""The spec loader never raises a traceback: every bad input becomes a located SpecError.

Exact messages for common mistakes, then hypothesis fuzzing of whole documents and of weight files.
"""

from fractions import Fraction as F
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from helpers import requires_torch
from verify_tf.builders.files import save_model
from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.spec import Spec, SpecError, load_spec, load_spec_text

MODEL_FILE_SUFFIXES = [".safetensors", ".npz", pytest.param(".pt", marks=requires_torch)]

VALID = """\
model:
  random: {seed: 1, width: 1, layers: 1, scoring: hardmax}
arithmetic: exact
domain:
  grid: {step: 1/2}
  length: 2
properties:
  - permutation-equivariance: {}
"""

HEAD = "          - {scoring: hardmax, query: [[%s]], key: [[1]], value: [[1]], output: [[1]]}\n"
INLINE = (
    "model:\n  tokens: {grid: 1}\n  layers:\n    - attention:\n        heads:\n"
    + HEAD
    + "%s\ndomain: {grid: {step: 1/2}, length: 2}\nproperties: [permutation-equivariance]\n"
)


def error_of(text: str) -> str:
    with pytest.raises(SpecError) as info:
        load_spec_text(text, "spec.yaml")
    return str(info.value)


@pytest.mark.parametrize(
    "text, expected",
    [
        (VALID.replace("domain:", "domian:"), "spec.yaml:4: unknown key 'domian'\n  hint: did you mean 'domain'?"),
        (INLINE % ("u", ""), "spec.yaml:6: model.layers[0].attention.heads[0].query[0][0]: expected a number, got 'u'"),
        (
            INLINE % ("1/3", "arithmetic: {mode: fixed, bits: 8, frac: 4}"),
            "spec.yaml:6: model.layers[0].attention.heads[0].query[0][0]: weight 1/3 is not a multiple of 2^-4",
        ),
        (
            INLINE % ("300", "arithmetic: {mode: fixed, bits: 8, frac: 0}"),
            "spec.yaml:6: model.layers[0].attention.heads[0].query[0][0]: "
            "weight 300 is outside the 8-bit range [-128, 127]",
        ),
        (
            VALID.replace("scoring: hardmax", "scoring: softmax"),
            "spec.yaml:2: model.layers[0].attention.heads[0].scoring: softmax is not exactly representable",
        ),
        (
            VALID.replace("scoring: hardmax", "scoring: hardmx"),
            "spec.yaml:2: model.random.scoring: expected one of 'hardmax', 'softmax', 'uniform', got 'hardmx'\n"
            "  hint: did you mean 'hardmax'?",
        ),
        (
            VALID.replace("seed: 1", "seed: .nan"),
            "spec.yaml:2: model.random.seed: expected an integer >= 0, got '.nan'",
        ),
        (VALID.replace("step: 1/2", "step: .inf"), "spec.yaml:5: domain.grid.step: expected a finite number, got .inf"),
        (
            VALID.replace("step: 1/2", "step: 1/0"),
            "spec.yaml:5: domain.grid.step: expected a positive number, got '1/0'",
        ),
        (
            VALID.replace("permutation-equivariance", "permutation-equivariants"),
            "spec.yaml:8: properties[0]: unknown property 'permutation-equivariants'\n"
            "  hint: did you mean 'permutation-equivariance'?",
        ),
        (
            VALID.replace("length: 2", "length: two"),
            "spec.yaml:6: domain.length: expected an integer >= 1 and <= 4096, got 'two'",
        ),
        ("model: [\n", "spec.yaml:2: malformed YAML"),
        ("", "the spec is empty"),
        ("model: {}\nmodel: {}\n", "spec.yaml:2: duplicate key 'model'"),
        ("properties: [permutation-equivariance]\n", "missing required key 'model'"),
        (
            "model: {file: nothere.safetensors}\nproperties: [permutation-equivariance]\n",
            "spec.yaml:1: model.file: file not found: nothere.safetensors",
        ),
        (
            "model: {random: {}}\nproperties: [permutation-equivariance]\n",
            "properties[0].permutation-equivariance: this property needs a 'domain' section",
        ),
        (
            "model: {random: {}, construct: yun2019-contextual-mapping}\nproperties: [permutation-equivariance]\n",
            "keys 'random' and 'construct' cannot be combined",
        ),
        (
            "model: {construct: yun2019-contextual-mapping, d: 1, delta: 1/2}\n"
            "properties: [permutation-equivariance]\n",
            "construction yun2019-contextual-mapping needs parameter 'n'",
        ),
        (
            "model: {random: {absolute-pe: true, max-length: 2}}\ndomain: {grid: {step: 1/2}, length: 3}\n"
            "properties: [permutation-equivariance]\n",
            "inputs of length 3 exceed the positional encoding's 2 positions",
        ),
        (
            "model: {random: {}}\narithmetic: fixed\ndomain: {grid: {step: 1/3}, length: 2}\n"
            "properties: [permutation-equivariance]\n",
            "grid value 1/3 is not representable",
        ),
        ("model: !!python/object:os.system {}\nproperties: []\n", "YAML tags such as"),
    ],
)
def test_located_error_messages(text, expected):
    assert expected in error_of(text)


def test_the_python_api_refuses_the_grid_the_spec_loader_refuses():
    """Issue 29: a 1/3-step grid is not representable in 16/8 fixed point (-2/3 is no multiple of 2^-8); the spec
    loader refused it while ``verify_tf.api.check`` accepted it (and rounded nothing: the model saw off-grid
    inputs). Both now apply ``domain.unrepresentable_grid_value`` and say the same thing."""
    from verify_tf.api import check
    from verify_tf.domain import GridDomain
    from verify_tf.semantics import Fixed

    model = random_model(RandomConfig(seed=7, width=2, layers=1, scoring="softmax"))
    domain = GridDomain.regular(2, F(1, 3), 2, lo=F(-1), hi=F(1))
    with pytest.raises(SpecError) as info:
        check(model, Fixed(16, 8), domain, "output-bounds", {"hi": 1000}, engine="enumerate")
    assert "grid value -2/3 is not representable in fixed point, 16 bits" in str(info.value)
    spec = "model: {random: {seed: 7}}\narithmetic: fixed\ndomain: {grid: {step: 1/3, lo: -1, hi: 1}, length: 2}\n"
    assert "grid value -2/3 is not representable in fixed point, 16 bits" in error_of(
        spec + "properties: [{output-bounds: {hi: 1000}}]\n"
    )
    # a power-of-two grid passes both
    quarter = GridDomain.regular(2, F(1, 4), 2, lo=F(-3, 4), hi=F(3, 4))
    assert check(model, Fixed(16, 8), quarter, "output-bounds", {"hi": 1000}, engine="enumerate").status == "proved"


def test_model_shape_errors_point_at_the_offending_matrix():
    text = (
        "model:\n  tokens: {grid: 2}\n  layers:\n    - attention:\n        heads:\n"
        "          - {query: [[1, 0]], key: [[1]], value: [[1, 0]], output: [[1], [0]]}\n"
        "properties: [permutation-equivariance]\n"
    )
    assert error_of(text).startswith("spec.yaml:6: model.layers[0].attention.heads[0].key: expected 2 columns, got 1")


def test_valid_spec_loads_with_exact_numbers():
    spec = load_spec_text(VALID.replace("step: 1/2", "step: 0.1"), "spec.yaml")
    assert spec.domain.values[1] == F(1, 10)  # 0.1 is read as exactly 1/10, not a binary float
    assert spec.properties[0].name == "permutation-equivariance"


# ---------------------------------------------------------------- fuzzing

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True),
    st.text(max_size=12),
    st.sampled_from(["1/2", "1/0", ".inf", "-.nan", "hardmax", "rpe", "3/4x"]),
)
keys = st.sampled_from(
    [
        "model",
        "domain",
        "properties",
        "arithmetic",
        "engine",
        "timeout",
        "grid",
        "length",
        "step",
        "random",
        "layers",
        "heads",
        "query",
        "tokens",
        "readout",
        "seed",
        "width",
        "mode",
        "bits",
        "frac",
        "strings",
        "permutation-equivariance",
        "file",
        "construct",
        "d",
        "n",
        "delta",
        "x",
    ]
)
documents = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=5)),
    max_leaves=25,
)


def _never_crashes(text: str) -> None:
    try:
        result = load_spec_text(text, "fuzz.yaml")
    except SpecError as exc:
        assert str(exc).startswith("fuzz.yaml")
    else:
        assert isinstance(result, Spec)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_fuzzed_documents_never_raise_anything_but_spec_errors(doc):
    _never_crashes(yaml.safe_dump(doc))


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.data())
def test_mutations_of_a_valid_spec_never_crash(data):
    doc = yaml.safe_load(VALID)
    path = data.draw(
        st.sampled_from(
            [
                ("model", "random", "width"),
                ("domain", "grid", "step"),
                ("domain", "length"),
                ("arithmetic",),
                ("properties",),
                ("model", "random"),
                ("domain",),
                ("model", "random", "scoring"),
                ("domain", "grid"),
            ]
        )
    )
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = data.draw(documents)
    _never_crashes(yaml.safe_dump(doc))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_never_crashes(text):
    _never_crashes(text)


@pytest.mark.parametrize("suffix", MODEL_FILE_SUFFIXES)
def test_truncated_or_corrupt_weight_files_are_input_errors(tmp_path: Path, suffix: str):
    model = random_model(RandomConfig(seed=4, width=2))
    good = tmp_path / f"model{suffix}"
    save_model(model, good)
    data = good.read_bytes()
    for cut in (0, 8, len(data) // 2, len(data) - 3):
        bad = tmp_path / f"bad{suffix}"
        bad.write_bytes(data[:cut])
        spec = tmp_path / "spec.yaml"
        spec.write_text(
            f"model: {{file: {bad.name}}}\nproperties: [permutation-equivariance]\n"
            "domain: {grid: {step: 1/2}, length: 2}\n"
        )
        with pytest.raises(SpecError, match=r"model\.file: "):
            load_spec(spec)


@pytest.mark.parametrize("suffix", MODEL_FILE_SUFFIXES)
def test_model_files_round_trip_exactly(tmp_path: Path, suffix: str):
    from verify_tf.builders.files import load_model
    from verify_tf.builders.yun import yun_contextual_mapping

    for model in (
        random_model(RandomConfig(seed=5, width=2, layers=2, ffn_width=3, positional="urpe", max_length=3)),
        yun_contextual_mapping(1, F(1, 3), 2),
    ):  # 1/3-scaled weights: stored as exact num/den pairs
        path = tmp_path / f"m{suffix}"
        save_model(model, path)
        assert load_model(path) == model


@pytest.mark.parametrize("suffix", MODEL_FILE_SUFFIXES)
def test_alphabet_models_round_trip_exactly(tmp_path: Path, suffix: str):
    from verify_tf.builders.files import load_model

    model = random_model(
        RandomConfig(seed=6, width=2, alphabet=("a", "b", "1"), bos="^", causal=True, scoring="uniform")
    )
    path = tmp_path / f"m{suffix}"
    save_model(model, path)
    assert load_model(path) == model

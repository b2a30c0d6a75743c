"""The float reading of a tracr model (``attention: float``, the default): ``rasp-equivalence`` proves that every
float32 evaluation of the compiled model decodes to the program's output, or refutes with an input where every
evaluation decodes differently (replayed on the numpy float32 mirror and on tracr's own model in JAX), or says
``unknown`` where the exact enclosure cannot decide; each verdict names its reading beside its status.

Where the numbers come from: the soft cases' values were computed by tracr's own JAX model
(``floats.jax_replay``) and bounded by the enclosure (0.0674 at input ``a``: BOS's logit lead 50/sqrt(227) = 3.32,
so a token with logit 0 against BOS gets about e^-3.32/(1 + e^-3.32 + ...) of the weight, by hand ~0.035 per
leaking key); the least failing inputs by scanning every input in shortlex order (tests/test_floats.py checks the
enclosure against both float evaluations)."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from verify_tf.explain.replay import explain_verdict
from verify_tf.reporting.junit import junit_xml
from verify_tf.runner import Overrides, check_property
from verify_tf.schema.errors import SpecError
from verify_tf.spec import load_spec_text

ROOT = Path(__file__).resolve().parent.parent
EXPORTS = ROOT / "examples" / "tracr"


def check(name: str, max_length: int, *, model_extra: str = "", options: str = "", program: str | None = None):
    text = (
        f"model:\n  tracr: {EXPORTS / name}.json\n{model_extra}"
        f"domain:\n  strings: {{max-length: {max_length}}}\n"
        f"properties:\n  - rasp-equivalence: {{program: {EXPORTS / (program or name)}.json{options}}}\n"
    )
    loaded = load_spec_text(text, "float.yaml", ROOT)
    return check_property(loaded, loaded.properties[0], Overrides())


def test_a_wide_gap_is_proved_for_the_float_model_and_the_verdict_says_so():
    result = check("sort-unique", 3)
    assert result.status == "proved", result.detail
    assert result.label == "proved (exhaustive; float32 as compiled)"
    assert (result.reading, result.as_run) == ("float32 as compiled", True)
    assert result.detail.startswith("84 strings of length 1..3 over {1, 2, 3, 4}: every float32 evaluation")
    # the measured leak of each head (exact upper bounds) is at most the one-hot bound 5·e^-18.9 <= 3.1e-8 times
    # a margin for the float logits' own spread (measured 4.9e-8 at length 5; here 3 keys + BOS)
    leak = Fraction(result.statistics["float_leak layer 1 head 0"])
    assert 0 < leak < Fraction(5, 10**8)
    assert result.to_json()["reading"] == "float32 as compiled"


def test_the_hardmax_reading_says_it_is_not_the_model_as_run():
    result = check("sort-unique", 3, model_extra="  attention: hardmax\n")
    assert result.status == "proved"
    assert result.label == "proved (exhaustive; hardmax, tracr's intended computation, NOT the model as run)"
    assert result.as_run is False


def test_a_model_the_spec_builds_states_no_reading():
    text = (ROOT / "specs" / "equivariance-standard-hardmax.yaml").read_text()
    loaded = load_spec_text(text, "e.yaml", ROOT / "specs")
    result = check_property(loaded, loaded.properties[0], Overrides())
    assert result.reading == "" and result.as_run is None and "reading" not in result.to_json()


def test_equal_for_a_numerical_output_means_within_the_tolerance():
    """frac-prevs's float model is within about 1e-4 of the means: proved at the default tolerance 1/1000. At
    tolerance 0 the enclosure of each length-1 input straddles the program's value (unknown at the least, ``a``,
    enclosure shown: never a guess); at length 2, ``ba`` is refuted (below): every evaluation misses 1/2."""
    assert check("frac-prevs", 2).status == "proved"
    result = check("frac-prevs", 1, options=", tolerance: 0")
    assert result.status == "unknown", result.detail
    assert result.detail.startswith("float reading: input a at position 0: the program gives 1; the enclosure")
    assert "too wide to decide" in result.detail and result.reading == "float32 as compiled"


@pytest.mark.slow  # JAX replay
def test_at_tolerance_zero_a_missed_mean_is_refuted():
    exact = check("frac-prevs", 2, options=", tolerance: 0")
    assert exact.status == "refuted" and exact.counterexample["string"] == "ba", exact.detail


def test_smt_encodes_only_the_hardmax_reading():
    result = check("length", 2, options=", engine: smt")
    assert result.status == "unknown" and "solver queries encode the hardmax reading" in result.detail


def test_the_float_reading_checks_the_export_the_model_came_from():
    """count and hist have the same vocabulary, length and width: the hardmax check could not tell them apart by
    shape, the float reading names the float model it reads by its weights."""
    with pytest.raises(SpecError, match="the model was not imported from it"):
        check("count", 2, program="hist")


@pytest.mark.slow  # the witness is replayed in JAX (tracr's model): jax starts in about 5 s
@pytest.mark.parametrize("engine", ["enumerate", "interpret"])
def test_the_soft_numerical_case_is_refuted_for_the_float_model(engine):
    result = check("prev-a-wide", 2, options=f", engine: {engine}")
    assert result.status == "refuted", result.detail
    witness = result.counterexample
    assert witness["string"] == "a" and witness["position"] == 0 and witness["program_output"] == ["0"]
    # every evaluation's enclosure (docs/semantics.md §7): width 6e-7 (5.6e-6 before the tighter enclosure)
    assert witness["enclosure"][0]["value"] == "[0.0674344, 0.067435]"
    evaluations = witness["float_evaluations"]
    assert evaluations["numpy float32"] == ["0.06743471"]
    assert evaluations["tracr's model in JAX"] == ["0.06743469"]  # tracr's XLA sums in another order
    assert witness["summary"].startswith(
        "input a at position 0: the program gives 0; every float32 evaluation of the compiled model lies in "
        "[0.0674344, 0.067435], farther than the tolerance 0.001"
    )
    assert result.label == "refuted (exhaustive; float32 as compiled)"
    assert "float32 as compiled" in junit_xml([result], [None])
    spec = load_spec_text(
        f"model:\n  tracr: {EXPORTS / 'prev-a-wide'}.json\ndomain:\n  strings: {{max-length: 2}}\n"
        f"properties:\n  - rasp-equivalence: {{program: {EXPORTS / 'prev-a-wide'}.json}}\n",
        "float.yaml",
        ROOT,
    )
    (note,) = [n for n in explain_verdict(spec, result).notes if "reading" in n]
    assert note.startswith("the verdict is about the reading 'float32 as compiled'; the trace below replays the IR")


@pytest.mark.slow  # JAX replay
def test_the_soft_categorical_case_is_refuted_where_hardmax_is_right():
    result = check("prev-a-wide-gt0", 2)
    assert result.status == "refuted"
    witness = result.counterexample
    assert (witness["string"], witness["position"]) == ("aa", 0)
    assert witness["program_output"] == ["0", "1"] and witness["model_output"] == ["1", "1"]
    assert witness["float_evaluations"]["tracr's model in JAX"] == ["1", "1"]
    assert "every float32 evaluation of the compiled model ranks 1 above it" in witness["summary"]
    assert json.loads(json.dumps(result.to_json()))["as_run"] is True


@pytest.mark.slow  # JAX replay
def test_a_miscompilation_is_refuted_in_both_readings_at_the_same_input():
    float_result = check("frac-gt-half", 3)
    hardmax = check("frac-gt-half", 3, model_extra="  attention: hardmax\n")
    assert float_result.status == hardmax.status == "refuted"
    assert float_result.counterexample["string"] == hardmax.counterexample["string"] == "aab"

"""Property inexpressible: Luo et al.'s witness certificate (ε*, the witness, an architecture-level proof)."""

from __future__ import annotations

from fractions import Fraction as F

import pytest

from helpers import alphabet_model, head, one_layer
from verify_tf.api import check as api_check
from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.domain import GridDomain, StringDomain
from verify_tf.ir.plain import model_from_dict
from verify_tf.schema.errors import SpecError
from verify_tf.semantics import Exact, Fixed, evaluate
from verify_tf.witness import input_from_json

EXACT = Exact()
GRID = GridDomain.regular(1, F(1, 2), 3)  # {0, 1/2}, n = 3


def check(model, arith=EXACT, domain=GRID, target="position-index"):
    return api_check(model, arith, domain, "inexpressible", {"target": target}, engine="architecture", timeout=60)


def table(*entries):
    return {"table": [{"token": token, "outputs": [F(x) for x in outputs]} for token, outputs in entries]}


def test_position_index_on_rpe_is_certified_with_epsilon_star():
    model = random_model(RandomConfig(seed=1, width=1, layers=2, heads=1, ffn_width=2, positional="rpe", max_length=3))
    verdict = check(model)
    assert verdict.status == "proved" and verdict.label == "proved (witness + induction)"
    stats = verdict.statistics
    assert stats["epsilon_star"] == "1"  # (3 - 1) / 2: target (1, 2, 3), the paper's 1-based positions
    assert stats["witness"] == [["0"]] * 3 and stats["target_at_witness"] == ["1", "2", "3"]
    assert [s["status"] for s in stats["steps"]] == ["holds"] * 6
    assert F(stats["this_model_error_at_witness"]) >= 1  # the theorem, on this model
    assert "ε* = 1" in verdict.detail


def test_epsilon_star_grows_with_the_longest_constant_input():
    model = alphabet_model(head(scoring="hardmax", positional="rpe", rpe=[1, 0, 2], causal=True), bos=None)
    verdict = check(model, domain=StringDomain(("a", "b"), 1, 4))
    assert verdict.status == "proved" and verdict.statistics["epsilon_star"] == "3/2"
    assert verdict.statistics["witness"] == ["a"] * 4


def test_table_target_and_fixed_point():
    model = random_model(RandomConfig(seed=3, width=1, scoring="softmax", positional="rpe", max_length=3))
    verdict = check(model, Fixed(16, 8), target=table((0, [0, 0, 1]), ("1/2", [1, 1, 1])))
    assert verdict.status == "proved" and verdict.statistics["epsilon_star"] == "1/2"
    assert verdict.statistics["witness"] == [["0"]] * 3


def test_constant_target_is_vacuous():
    model = one_layer(head(positional="rpe", rpe=[0, 0, 0]))
    verdict = check(model, target=table((0, [2, 2, 2])))
    assert verdict.status == "proved" and verdict.method == "trivial"


def test_bad_tables_are_input_errors_naming_the_entry():
    model = one_layer(head())
    with pytest.raises(SpecError, match="not a token of the domain") as error:
        check(model, target=table((3, [1, 2, 3])))
    assert error.value.path == "inexpressible.target.table[0].token"
    with pytest.raises(SpecError, match="lengths are 3"):
        check(model, target=table((0, [1, 2])))
    strings = alphabet_model(head(), bos=None)
    with pytest.raises(SpecError, match="not in the domain's alphabet"):
        check(strings, domain=StringDomain(("a", "b"), 1, 2), target=table(("z", [1])))


def _replayed_readout(verdict, arith):
    cex = verdict.counterexample
    model = model_from_dict(cex["model"])
    return [str(q) for q in evaluate(model, arith, input_from_json(cex["input"])).readout]


def test_urpe_certificate_is_refuted_by_a_synthesised_position_index_layer():
    model = random_model(RandomConfig(seed=1, width=1, scoring="uniform", positional="urpe", max_length=3))
    verdict = check(model)
    assert verdict.status == "refuted"
    cex = verdict.counterexample
    assert cex["layer"] == "layers[0].attention.heads[0]"
    assert _replayed_readout(verdict, EXACT) == cex["readout"] == cex["target"] == ["1", "2", "3"]
    assert cex["sup_error"] == "1/2" and F(cex["sup_error"]) < 1  # beats ε* = 1 on the whole domain
    assert "the class beats the bound" in verdict.detail


@pytest.mark.slow
def test_urpe_in_fixed_point_and_absolute_pe_are_refuted():
    arith = Fixed(16, 8)
    urpe = one_layer(head(scoring="softmax", positional="urpe", rpe=[0] * 5, urpe=[1] * 5))
    verdict = check(urpe, arith)
    assert verdict.status == "refuted" and _replayed_readout(verdict, arith) == ["1", "2", "3"]
    pe = one_layer(head(), pe=[[0], [0], [0]])
    verdict = check(pe)
    assert verdict.status == "refuted" and verdict.counterexample["layer"] == "positional-encoding"
    assert _replayed_readout(verdict, EXACT) == ["1", "2", "3"]


def test_bos_causal_class_cannot_be_certified():
    model = alphabet_model(head(scoring="uniform", causal=True), residual=True)
    verdict = check(model, domain=StringDomain(("a", "b"), 3, 3))
    # (b) fails: the solver's member separates positions (it cannot hit 1, 2, 3 exactly), but its sup-error
    # over the domain is not below ε*, so the bound is neither certified nor beaten: unknown, never refuted.
    assert verdict.status == "unknown"
    member = verdict.statistics["member_separating_positions"]
    readout = [F(q) for q in member["readout"]]
    assert len(set(readout)) > 1
    assert F(member["sup_error"]) >= F(verdict.statistics["epsilon_star"])


def test_per_probability_certificate_is_unknown():
    model = one_layer(head(scoring="softmax", positional="rpe", rpe=[0, 0, 0]))
    verdict = check(model, Fixed(16, 8, "per-probability"))
    assert verdict.status == "unknown" and "per-probability" in verdict.detail
    assert verdict.statistics["epsilon_star"] == "1"

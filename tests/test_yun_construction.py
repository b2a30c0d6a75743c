"""The Lemma 6 network of Yun et al. (ICLR 2020) checked against the paper's own facts.

Every fact is checked on every input of the small grids (d, 1/δ, n) the research notes list, using the
reference interpreter in exact arithmetic:
  * the worked example d=1, δ=1/2, n=2: [0, 1/2] ↦ q = (49, 49.5);
  * Lemma 10: δ^-(n-1)d+1 (δ^-d − 1) ≤ l̃_n ≤ n δ^-(n+1)d, l̃_n the largest column id after the selective
    shifts (the stream before the global-shift layer, read through u);
  * the readout is q_j = l̃_j + n δ^-(n+1)d-1 l̃_n (the global shift adds the scaled maximum to every column);
  * on G̃_δ (no repeated token) all values, within one input and across inputs that are not permutations of
    each other, are at least δ apart.
Repeated tokens (outside G̃_δ, where the paper makes no claim): the selective shifts only see the SET of
column ids, so two multisets with the same support get the same values (tested below with a concrete pair).
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest

from verify_tf.builders.yun import column_id_vector, yun_contextual_mapping
from verify_tf.domain import GridDomain
from verify_tf.semantics import Exact, evaluate

SMALL_INSTANCES = [(1, 2, 2), (1, 3, 3), (2, 2, 2), (2, 2, 3), (1, 4, 3)]


def column_ids(u, stream):
    return [sum((a * b for a, b in zip(u, z)), Fraction(0)) for z in stream]


def tok(*values):
    return tuple(Fraction(v) for v in values)


def test_paper_example_d1_delta_half_n2():
    model = yun_contextual_mapping(1, Fraction(1, 2), 2)
    trace = evaluate(model, Exact(), [tok(0), tok("1/2")])
    assert trace.readout == [Fraction(49), Fraction(99, 2)]


def test_shape_one_layer_per_column_id_plus_global_shift():
    model = yun_contextual_mapping(2, Fraction(1, 2), 3)
    assert len(model.blocks) == 2**2 + 1
    assert model.readout == (Fraction(1), Fraction(2))
    assert not model.has_positions
    assert all(h.scoring == "hardmax" for _, _, h in model.heads())
    global_head = model.blocks[-1].attention.heads[0]
    assert global_head.output[0][0] == 3 * 2 ** (4 * 2 + 1)  # n δ^-(n+1)d-1


@pytest.mark.parametrize("d,inverse_delta,n", SMALL_INSTANCES)
def test_lemma10_bounds_and_readout_formula_on_every_distinct_input(d, inverse_delta, n):
    delta = Fraction(1, inverse_delta)
    model = yun_contextual_mapping(d, delta, n)
    u = column_id_vector(d, delta)
    lower = delta ** (-(n - 1) * d + 1) * (delta**-d - 1)
    upper = n * delta ** (-(n + 1) * d)
    scale = n * delta ** (-(n + 1) * d - 1)
    domain = GridDomain.regular(d, delta, n, distinct_tokens=True)
    count = 0
    for tokens in domain.inputs():
        trace = evaluate(model, Exact(), tokens)
        ids = column_ids(u, trace.blocks[-2].output)
        largest = max(ids)
        assert lower <= largest <= upper, (tokens, largest)
        assert trace.readout == [i + scale * largest for i in ids]
        count += 1
    assert count == domain.size()


@pytest.mark.parametrize("d,inverse_delta,n", SMALL_INSTANCES)
def test_values_at_least_delta_apart_on_distinct_inputs(d, inverse_delta, n):
    delta = Fraction(1, inverse_delta)
    model = yun_contextual_mapping(d, delta, n)
    owner: dict[Fraction, tuple] = {}
    for tokens in GridDomain.regular(d, delta, n, distinct_tokens=True).inputs():
        values = evaluate(model, Exact(), tokens)
        multiset = tuple(sorted(tokens))
        for q in values.readout:
            assert owner.setdefault(q, multiset) == multiset, f"value {q} shared by two different multisets"
        assert len(set(values.readout)) == n
    ordered = sorted(owner)
    assert min(b - a for a, b in itertools.pairwise(ordered)) >= delta


MEASURED_SMALLEST_GAP = {
    (1, 2, 2): Fraction(1, 2),
    (1, 3, 3): Fraction(10, 3),
    (2, 2, 2): Fraction(9, 2),
    (2, 2, 3): Fraction(21, 2),
    (1, 4, 3): Fraction(21, 4),
}


@pytest.mark.parametrize("d,inverse_delta,n", SMALL_INSTANCES)
def test_smallest_gap_on_distinct_inputs(d, inverse_delta, n):
    delta = Fraction(1, inverse_delta)
    model = yun_contextual_mapping(d, delta, n)
    values = sorted(
        {
            q
            for tokens in itertools.combinations(GridDomain.regular(d, delta, n).tokens, n)
            for q in evaluate(model, Exact(), tokens).readout
        }
    )
    assert min(b - a for a, b in itertools.pairwise(values)) == MEASURED_SMALLEST_GAP[(d, inverse_delta, n)]


def test_repeated_tokens_multisets_with_the_same_support_collide():
    # Outside G~_δ: hardmax max/min only sees which column ids occur, not how often, so [0, 1/3, 1/3] and
    # [0, 0, 1/3] leave the selective shifts with the same ids and get the same values.
    model = yun_contextual_mapping(1, Fraction(1, 3), 3)
    first = evaluate(model, Exact(), [tok(0), tok("1/3"), tok("1/3")]).readout
    second = evaluate(model, Exact(), [tok(0), tok(0), tok("1/3")]).readout
    assert set(first) == set(second) == {Fraction(1702), Fraction(5110, 3)}


def test_repeated_tokens_break_lemma10_lower_bound():
    delta, n = Fraction(1, 2), 2
    model = yun_contextual_mapping(1, delta, n)
    trace = evaluate(model, Exact(), [tok(0), tok(0)])
    largest = max(column_ids(model.readout, trace.blocks[-2].output))
    assert largest < delta ** (-(n - 1) + 1) * (delta**-1 - 1)
    assert trace.readout[0] == trace.readout[1]  # equal tokens, equal values: condition (1) fails


@pytest.mark.parametrize(
    "scale,d,inverse_delta,n,first,second,value",
    [
        (1, 1, 5, 3, ("0", "1/5", "2/5"), ("0", "3/5", "4/5"), Fraction(444, 5)),
        (2, 1, 4, 3, ("0", "1/4", "1/2"), ("0", "1/2", "3/4"), Fraction(165, 2)),
    ],
)
def test_reduced_global_shift_collides(scale, d, inverse_delta, n, first, second, value):
    model = yun_contextual_mapping(d, Fraction(1, inverse_delta), n, global_shift_scale=scale)
    q1 = evaluate(model, Exact(), [tok(v) for v in first]).readout
    q2 = evaluate(model, Exact(), [tok(v) for v in second]).readout
    assert value in q1 and value in q2


def test_dropped_first_selective_shift_collides():
    model = yun_contextual_mapping(2, Fraction(1, 2), 2, drop_layer=0)
    assert len(model.blocks) == 4
    q1 = evaluate(model, Exact(), [tok(0, 0), tok("1/2", "1/2")]).readout
    q2 = evaluate(model, Exact(), [tok(0, "1/2"), tok("1/2", "1/2")]).readout
    assert q1[1] == q2[1] == Fraction(3855, 2)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"d": 1, "delta": Fraction(2, 5), "n": 2}, "1/k"),
        ({"d": 0, "delta": Fraction(1, 2), "n": 2}, "positive"),
        ({"d": 1, "delta": Fraction(1, 2), "n": 2, "drop_layer": 2}, "drop-layer"),
    ],
)
def test_invalid_parameters_are_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        yun_contextual_mapping(**kwargs)

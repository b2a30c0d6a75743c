"""Domains enumerate exactly their members; constant_inputs() never yields an input outside the domain."""

from fractions import Fraction as F

from verify_tf.domain import GridDomain, StringDomain


def test_grid_sizes_and_members():
    domain = GridDomain.regular(2, F(1, 2), 3)  # tokens {0, 1/2}^2: 4 tokens
    assert domain.size() == 64 == len(list(domain.inputs()))
    distinct = GridDomain.regular(2, F(1, 2), 3, distinct_tokens=True)
    assert distinct.size() == 24 == len(set(distinct.inputs()))
    assert all(len(set(x)) == 3 for x in distinct.inputs())


def test_constant_inputs_belong_to_the_domain():
    plain = GridDomain(1, (F(0), F(1)), 3)
    assert list(plain.constant_inputs()) == [((F(0),),) * 3, ((F(1),),) * 3]
    assert list(GridDomain(1, (F(0), F(1)), 3, distinct_tokens=True).constant_inputs()) == []
    assert list(GridDomain(1, (F(0), F(1)), 1, distinct_tokens=True).constant_inputs()) == [((F(0),),), ((F(1),),)]
    strings = StringDomain(("a", "b"), 0, 2)
    assert list(strings.constant_inputs()) == [("a",), ("b",), ("a", "a"), ("b", "b")]
    for domain in (plain, strings):
        members = set(domain.inputs())
        assert all(x in members for x in domain.constant_inputs())


def test_string_domain_lengths():
    domain = StringDomain(("a", "b"), 1, 3)
    assert domain.size() == 2 + 4 + 8 == len(list(domain.inputs()))

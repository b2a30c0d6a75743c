"""``verify_tf.linear.optimise`` (issue 43, alpha-CROWN): the float twin of the backward pass agrees with the exact
pass at the same slopes, its gradients with finite differences, and the slopes it chooses make split's readout
bounds tighter on issue 43's d2 model while every member of every cube stays inside them (exact Fractions against
the batched evaluator, which agrees with the interpreter bit for bit: tests/test_batched_*)."""

from __future__ import annotations

import random
from fractions import Fraction as F

import numpy as np
import pytest

from verify_tf.api import make_task
from verify_tf.batched import BatchedEvaluator
from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.domain import GridDomain
from verify_tf.engines.split.bounder import Bounder
from verify_tf.engines.split.cubes import SplitCube, rows
from verify_tf.linear import optimise
from verify_tf.linear.backward import PLANE_STEPS, Slopes, _Pass, backward, refined_bound, streams, through_affine
from verify_tf.semantics import Fixed
from verify_tf.spaces import InputSpace

ARITH = Fixed(16, 8)


def _d2():
    """Issue 43's d2 n3 model and grid (bench/bench_split.py's ``softmax_case("d2")``) and 16 seeded small cubes
    (each coordinate's range 1–3 consecutive grid values, as ``bench_split.small_cubes``)."""
    model = random_model(
        RandomConfig(seed=5, width=2, layers=2, ffn_width=2, scoring="softmax", weight_range=F(1), denominator=4)
    )
    domain = GridDomain.regular(2, F(1, 4), 3, lo=F(-1), hi=F(1))
    rng = random.Random(0)
    size = len(domain.values)
    cubes = []
    for _ in range(16):
        position = []
        for _ in range(domain.length):
            starts = [rng.randrange(size) for _ in range(domain.dim)]
            position.append(tuple((a, min(size - 1, a + rng.randrange(3))) for a in starts))
        cubes.append(SplitCube(tuple(position)))
    return model, domain, cubes


def _readout_pass(model, domain, cubes):
    """(linear, traced result, Λ on the final stream for ±1 on each readout position, blocks)."""
    task = make_task(model, ARITH, domain, "output-bounds", {"hi": 100}, device="cpu")
    bounder = Bounder(task, InputSpace(domain), True)
    linear, table = bounder._linear(model, domain.length)
    inputs = table.inputs(np.array([c.ranges for c in cubes], dtype=np.int64), model.dim)
    result = refined_bound(linear, inputs)
    final = streams(linear, result)[-1]
    batch, positions, _ = np.shape(final.lo)
    lam = np.zeros((batch, 2 * positions, positions, 1), dtype=np.int64)
    for p in range(positions):
        lam[:, p, p, 0], lam[:, positions + p, p, 0] = linear.scale.one, -linear.scale.one
    state = _Pass(np.zeros((batch, 2 * positions, np.shape(final.lc)[-1]), dtype=np.int64),
                  np.zeros((batch, 2 * positions), dtype=np.int64), linear.scale.one)  # fmt: skip
    return linear, result, through_affine(lam, linear.readout, final, state), len(model.blocks)


def _twin(linear, result, on_stream, blocks, params):
    batch, objectives = np.shape(on_stream)[:2]
    n = np.shape(result.embedded.lc)[-1]
    twin = optimise._Twin(linear, result, {k: v for k, v in params.items() if isinstance(k, int)},
                          {k: v for k, v in params.items() if isinstance(k, tuple)},
                          np.zeros((batch, objectives, n)), np.zeros((batch, objectives)))  # fmt: skip
    bound = optimise._pass(twin, np.asarray(on_stream, dtype=np.float64) / linear.scale.one, blocks, False)
    return bound, twin


def _exact(linear, result, on_stream, blocks, slopes):
    state = backward(linear, result, on_stream, blocks, slopes=slopes)
    one = float(linear.scale.one)
    coefficients = np.asarray(state.coefficients, dtype=np.float64)
    return (np.maximum(coefficients, 0).sum(-1) + np.asarray(state.constant, dtype=np.float64)) / one / one


def _integers(linear, params):
    one = linear.scale.one
    return Slopes(
        alpha={k: np.round(v * one).astype(np.int64) for k, v in params.items() if isinstance(k, int)},
        theta={k: np.round(v * PLANE_STEPS).astype(np.int64) for k, v in params.items() if isinstance(k, tuple)},
    )


def test_the_float_twin_agrees_with_the_exact_pass_and_its_gradients_with_finite_differences():
    """At CROWN's slopes and at random ones the twin's bound is the exact pass's up to its roundings (the exact
    pass floors every Λ to 2^-16 and pays the remainders: measured within 1.7·10^-4 on these cubes, allowed 10^-3);
    each parameter's gradient matches a central difference of the twin to 10^-6 relative where the bound is
    smooth there (piecewise linear: a step of 10^-7 stays within a piece away from its kinks)."""
    model, domain, cubes = _d2()
    linear, result, on_stream, blocks = _readout_pass(model, domain, cubes[:6])
    objectives = np.shape(on_stream)[1]
    rng = np.random.default_rng(0)
    start = optimise._start(linear, result, objectives, blocks, False)
    steps = {k: linear.scale.one if isinstance(k, int) else PLANE_STEPS for k in start}  # the exact pass's grids
    shaken = {k: np.round(rng.random(np.shape(v)) * steps[k]) / steps[k] for k, v in start.items()}
    for params in (start, shaken):
        bound, twin = _twin(linear, result, on_stream, blocks, params)
        exact = _exact(linear, result, on_stream, blocks, _integers(linear, params))
        assert np.max(np.abs(bound - exact)) < 1e-3
    checked = 0
    for key in shaken:
        gradient = twin.gradients[key]
        for index in np.argwhere(np.abs(gradient) > 1e-6)[:5]:
            index = tuple(int(i) for i in index)
            ends = []
            for sign in (1, -1):
                moved = {k: v.copy() for k, v in shaken.items()}
                moved[key][index] += sign * 1e-7
                ends.append(_twin(linear, result, on_stream, blocks, moved)[0][index[:2]])
            difference = (ends[0] - ends[1]) / 2e-7
            if abs(difference - gradient[index]) < 1e-6 * max(1.0, abs(gradient[index])):
                checked += 1
    assert checked >= 15  # 4 parameter arrays (2 ReLU layers, 2 heads), up to 5 elements each: kinks may take some


def test_optimised_slopes_tighten_the_readout_and_keep_every_member_inside():
    """Split's readout bounds with per-element slopes at the readout (the engine's configuration) against CROWN's
    best of five uniform choices: the summed width over the 16 cubes shrinks by more than 10% (measured: 19.6%,
    71.63 -> 57.61;
    docs/performance.md's 64-cube median ratio 2.52× -> 2.05×), and every member of every cube (all of them,
    exact Fractions) lies within both."""
    model, domain, cubes = _d2()
    task = make_task(model, ARITH, domain, "output-bounds", {"hi": 100}, device="cpu")
    space = InputSpace(domain)
    evaluator = BatchedEvaluator(model, ARITH, space.tokens, backend="numpy", device="cpu")
    widths = {}
    for optimised in ("none", "readout"):
        views = Bounder(task, space, True, optimised=optimised).bound(cubes)
        total = F(0)
        for cube, view in zip(cubes, views):
            values = evaluator.values(rows(space, cube), "readout")
            for p, (lo, hi) in enumerate(view.bounds.readout):
                column = values.numerators[:, p]
                assert lo <= F(int(column.min()), values.den) and F(int(column.max()), values.den) <= hi
                total += hi - lo
        widths[optimised] = total
    assert widths["readout"] < F(9, 10) * widths["none"], widths


def test_the_bounder_refuses_an_unknown_optimisation_site():
    model, domain, _ = _d2()
    task = make_task(model, ARITH, domain, "output-bounds", {"hi": 100}, device="cpu")
    with pytest.raises(ValueError, match="not none, readout or every stage"):
        Bounder(task, InputSpace(domain), True, optimised="everywhere")

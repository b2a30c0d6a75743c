"""Batched evaluation (numpy and torch on the CPU) against the reference interpreter, bit for bit.

Random models over every variant the IR has: hardmax/uniform/softmax, exact-sums and per-probability,
causal masks, RPE and URPE, absolute PE, alphabet models with BOS, non-residual layers, tie-prone integer
weights, non-dyadic weights and grids (den 3), negative values, and narrow fixed-point formats that
saturate. Inputs include constant and repeated-token rows (hardmax ties). LayerNorm (pre-LN, post-LN, final
norm) and i-GELU, which the batched evaluator runs in fixed arithmetic only, have their own strategy.
"""

from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.domain import GridDomain, StringDomain
from verify_tf.batched import BatchedEvaluator, NumpyOps, TorchOps, Unsupported
from verify_tf.semantics import Exact, Fixed, evaluate

from helpers import torch_installed

MODELS = 300
NUMPY = NumpyOps()
BACKENDS = (NUMPY, TorchOps("cpu")) if torch_installed() else (NUMPY,)  # torch: the torch extra


@st.composite
def cases(draw):
    alphabet = draw(st.booleans())
    scoring = draw(st.sampled_from(["hardmax", "hardmax", "uniform", "softmax"]))
    if draw(st.booleans()):
        arith = Exact()
        scoring = "hardmax" if scoring == "softmax" else scoring  # softmax in exact mode: tested elsewhere
    else:
        bits = draw(st.sampled_from([6, 8, 12, 16, 24]))
        arith = Fixed(bits, draw(st.integers(0, min(bits - 2, 8))),
                      draw(st.sampled_from(["exact-sums", "per-probability"])))
    length = draw(st.integers(1, 4))
    bos = "^" if alphabet and draw(st.booleans()) else None
    positions = length + (1 if bos else 0)
    absolute_pe = draw(st.booleans())
    config = RandomConfig(
        seed=draw(st.integers(0, 10 ** 6)), width=draw(st.integers(1, 3)), layers=draw(st.integers(1, 2)),
        heads=draw(st.integers(1, 2)), ffn_width=draw(st.sampled_from([0, 0, 2, 3])), scoring=scoring,
        positional=draw(st.sampled_from(["standard", "rpe", "urpe"])), causal=draw(st.booleans()),
        absolute_pe=absolute_pe,
        # short tables clip relative offsets (RelativeTable.at); absolute PE needs one row per position
        max_length=max(positions, draw(st.integers(1, 5))) if absolute_pe else draw(st.integers(1, 5)),
        weight_range=F(draw(st.sampled_from([1, 2, 4]))),
        denominator=draw(st.sampled_from([1, 1, 2, 3, 4, 8])),  # 1: integer weights, many ties; 3: non-dyadic
        alphabet=("a", "b", "c") if alphabet else None, bos=bos)
    model = random_model(config)
    if alphabet:
        domain = StringDomain(("a", "b", "c")[: draw(st.integers(1, 3))], length, length)
    else:
        step = draw(st.sampled_from([F(1), F(1, 2), F(1, 3), F(1, 4)]))
        lo = draw(st.sampled_from([F(-2), F(-1), F(0)]))
        domain = GridDomain(config.width, tuple(lo + k * step for k in range(draw(st.integers(1, 4)))), length)
    return model, arith, domain, length, draw(st.integers(0, 2 ** 32 - 1)), draw(st.booleans())


def _rows(vocabulary: int, length: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    random_rows = rng.integers(0, vocabulary, size=(8, length))
    constant_rows = np.repeat(rng.integers(0, vocabulary, size=(2, 1)), length, axis=1)
    repeated = rng.integers(0, vocabulary, size=(2, length))
    repeated[:, -1] = repeated[:, 0]
    return np.concatenate([random_rows, constant_rows, repeated])


def _assert_same(model, arith, domain, rows, stream, readout) -> None:
    for b, row in enumerate(rows):
        trace = evaluate(model, arith, tuple(domain.tokens[int(t)] for t in row))
        if trace.saturations:
            event("saturation on some row")
        for block_trace, block in zip(trace.blocks, model.blocks):
            for head_trace, head in zip(block_trace.heads, block.attention.heads if block.attention else ()):
                live = [[s for s in row if s is not None] for row in head_trace.scores]
                if head.scoring == "hardmax" and any(row.count(max(row)) > 1 for row in live):
                    event("hardmax tie on some row")
        got = [tuple(F(int(x), stream.den) for x in vec) for vec in stream.numerators[b]]
        assert got == [tuple(v) for v in trace.output], f"row {row.tolist()}"
        assert [F(int(x), readout.den) for x in readout.numerators[b]] == trace.readout, f"row {row.tolist()}"


@settings(max_examples=MODELS, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(cases())
def test_batched_matches_interpreter(case):
    model, arith, domain, length, seed, narrow = case
    rows = _rows(len(domain.tokens), length, seed)
    for ops in BACKENDS:
        evaluator = BatchedEvaluator(model, arith, domain.tokens, ops=ops, narrow=narrow)
        try:
            stream, readout = evaluator.run(rows)
        except Unsupported:
            event("unsupported (int64 bound)")
            return
        event(f"int{'32' if evaluator.program(length).small and narrow else '64'}")
        _assert_same(model, arith, domain, rows, stream, readout)


@st.composite
def norm_cases(draw):
    """Fixed-point models with LayerNorm on every sublayer (pre or post), maybe a final norm, ReLU or i-GELU."""
    bits = draw(st.sampled_from([6, 8, 12, 16]))
    arith = Fixed(bits, draw(st.integers(0, min(bits - 2, 6))), draw(st.sampled_from(["exact-sums", "per-probability"])))
    length = draw(st.integers(1, 4))
    config = RandomConfig(
        seed=draw(st.integers(0, 10 ** 6)), width=draw(st.integers(1, 4)), layers=draw(st.integers(1, 2)),
        heads=draw(st.integers(1, 2)), ffn_width=draw(st.sampled_from([0, 2, 3])),
        scoring=draw(st.sampled_from(["hardmax", "uniform", "softmax"])), causal=draw(st.booleans()),
        weight_range=F(draw(st.sampled_from([1, 2, 4]))), denominator=draw(st.sampled_from([1, 2, 3, 4])),
        activation=draw(st.sampled_from(["relu", "i-gelu"])), layernorm=draw(st.sampled_from(["pre", "post", "none"])),
        final_norm=draw(st.booleans()), layernorm_eps=draw(st.sampled_from([F(0), F(1, 100000), F(1, 3), F(5)])))
    step = F(1, 2) if arith.frac else F(1)
    domain = GridDomain(config.width, tuple(F(-1) + k * step for k in range(draw(st.integers(1, 4)))), length)
    return random_model(config), arith, domain, length, draw(st.integers(0, 2 ** 32 - 1)), draw(st.booleans())


@settings(max_examples=120, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(norm_cases())
def test_batched_layernorm_and_igelu_match_interpreter(case):
    model, arith, domain, length, seed, narrow = case
    rows = _rows(len(domain.tokens), length, seed)
    for ops in BACKENDS:
        evaluator = BatchedEvaluator(model, arith, domain.tokens, ops=ops, narrow=narrow)
        stream, readout = evaluator.run(rows)  # never Unsupported at these sizes
        event(f"int{'32' if evaluator.program(length).small and narrow else '64'}")
        _assert_same(model, arith, domain, rows, stream, readout)


def test_batched_refuses_layernorm_and_igelu_in_exact_arithmetic():
    for config in (RandomConfig(seed=1, ffn_width=2, layernorm="pre"), RandomConfig(seed=1, ffn_width=2,
                                                                                   activation="i-gelu")):
        evaluator = BatchedEvaluator(random_model(config), Exact(), [(F(0), F(0)), (F(1), F(0))], ops=NUMPY)
        with pytest.raises(Unsupported, match="in exact arithmetic is evaluated by the interpreter and the smt"):
            evaluator.check(2)

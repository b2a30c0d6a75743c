"""Batched evaluation (numpy and torch on the CPU) against the reference interpreter, bit for bit.

Random models over every variant the IR has: hardmax/uniform/softmax, exact-sums and per-probability,
causal masks, RPE and URPE, absolute PE, alphabet models with BOS, non-residual layers, tie-prone integer
weights, non-dyadic weights and grids (den 3), negative values, and narrow fixed-point formats that
saturate. Inputs include constant and repeated-token rows (hardmax ties).
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from verify_tf.batched import BatchedEvaluator, NumpyOps, TorchOps, Unsupported
from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.domain import GridDomain, StringDomain
from verify_tf.semantics import Exact, Fixed, evaluate

pytestmark = pytest.mark.slow  # differential: the batched evaluator against the interpreter

MODELS = 300
TORCH_CPU = TorchOps("cpu")
NUMPY = NumpyOps()


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


OUTCOMES: Counter = Counter()  # per generated case: compared, or refused by the batched evaluator


@settings(max_examples=MODELS, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(cases())
def _batched_matches_interpreter(case):
    model, arith, domain, length, seed, narrow = case
    rows = _rows(len(domain.tokens), length, seed)
    for ops in (NUMPY, TORCH_CPU):
        evaluator = BatchedEvaluator(model, arith, domain.tokens, ops=ops, narrow=narrow)
        try:
            stream, readout = evaluator.run(rows)
        except Unsupported:
            event("unsupported (int64 bound)")
            OUTCOMES["refused"] += 1
            return
        event(f"int{'32' if evaluator.program(length).small and narrow else '64'}")
        _assert_same(model, arith, domain, rows, stream, readout)
        OUTCOMES["compared"] += 1


def test_batched_matches_interpreter():
    OUTCOMES.clear()
    _batched_matches_interpreter()
    # a refusal passes a case unchecked: the test must not pass by refusing. When written (hypothesis 6.155,
    # derandomized) all 300 cases were compared on both backends (600 comparisons, 0 refusals).
    assert OUTCOMES["compared"] >= MODELS, dict(OUTCOMES)

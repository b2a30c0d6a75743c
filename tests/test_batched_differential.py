"""Batched evaluation (numpy and torch on the CPU) against the reference interpreter, bit for bit.

Random models over every variant the IR has: hardmax/uniform/softmax, exact-sums, per-probability and
rounded-terms (Yang et al.'s rounding; a second test draws only rounded-terms softmax models),
causal masks, RPE and URPE, absolute PE, alphabet models with BOS, non-residual layers, tie-prone integer
weights, non-dyadic weights and grids (den 3), negative values, and narrow fixed-point formats that
saturate. Inputs include constant and repeated-token rows (hardmax ties). LayerNorm (pre-LN, post-LN, final
norm) and i-GELU, which the batched evaluator runs in fixed arithmetic only, have their own strategy.

Every path runs on every model: the program as compiled (int32/int64), every step forced onto Python integers
(the wide path), every step forced to be checked per chunk (the guarded path, torch emulating CUDA's
matmuls), and in exact arithmetic the tie-free variant whose flagged rows are recomputed on the full program.
Without torch (the optional extra) the torch paths are left out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction as F
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from helpers import torch_installed
from verify_tf.batched import (
    BatchedEvaluator,
    NumpyOps,
    TorchOps,
    Unsupported,
    cuda_available,
    evaluator as evaluator_module,
)
from verify_tf.batched.planner import compile_program
from verify_tf.bounds import Cube, cube_bounds
from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.domain import GridDomain, StringDomain
from verify_tf.semantics import Exact, Fixed, evaluate

pytestmark = pytest.mark.slow  # differential: the batched evaluator against the interpreter

MODELS = 300
NUMPY = NumpyOps()
if torch_installed():
    TORCH_CPU = TorchOps("cpu")
    CUDA_EMULATED = TorchOps("cpu")
    CUDA_EMULATED.device = "cuda"  # the matmul branch CUDA takes (no integer matmul), on CPU tensors
else:  # the torch extra is optional: its paths are left out, the numpy ones still run every variant
    TORCH_CPU = CUDA_EMULATED = None
# on a machine with a GPU every model also runs on the device itself, as compiled and guarded (CI has none)
CUDA_PATHS = [(TorchOps("cuda"), {}), (TorchOps("cuda"), {"force": "guarded"})] if cuda_available() else []


@st.composite
def cases(draw, rounded_terms: bool = False):
    alphabet = draw(st.booleans())
    scoring = draw(st.sampled_from(["hardmax", "hardmax", "uniform", "softmax"]))
    if rounded_terms:
        scoring = "softmax"
        bits = draw(st.sampled_from([6, 8, 12, 16, 24]))
        arith = Fixed(bits, draw(st.integers(0, min(bits - 2, 8))), "rounded-terms")
    elif draw(st.booleans()):
        arith = Exact()
        scoring = "hardmax" if scoring == "softmax" else scoring  # softmax in exact mode: tested elsewhere
    else:
        bits = draw(st.sampled_from([6, 8, 12, 16, 24]))
        arith = Fixed(
            bits,
            draw(st.integers(0, min(bits - 2, 8))),
            draw(st.sampled_from(["exact-sums", "per-probability", "rounded-terms"])),
        )
    length = draw(st.integers(1, 4))
    bos = "^" if alphabet and draw(st.booleans()) else None
    positions = length + (1 if bos else 0)
    absolute_pe = draw(st.booleans())
    config = RandomConfig(
        seed=draw(st.integers(0, 10**6)),
        width=draw(st.integers(1, 3)),
        layers=draw(st.integers(1, 2)),
        heads=draw(st.integers(1, 2)),
        key_dim=draw(st.sampled_from([None, None, 1])),
        ffn_width=draw(st.sampled_from([0, 0, 2, 3])),
        scoring=scoring,
        positional=draw(st.sampled_from(["standard", "rpe", "urpe"])),
        causal=draw(st.booleans()),
        absolute_pe=absolute_pe,
        # short tables clip relative offsets (RelativeTable.at); absolute PE needs one row per position
        max_length=max(positions, draw(st.integers(1, 5))) if absolute_pe else draw(st.integers(1, 5)),
        weight_range=F(draw(st.sampled_from([1, 2, 4]))),
        denominator=draw(st.sampled_from([1, 1, 2, 3, 4, 8])),  # 1: integer weights, many ties; 3: non-dyadic
        alphabet=("a", "b", "c") if alphabet else None,
        bos=bos,
    )
    model = random_model(config)
    if alphabet:
        domain = StringDomain(("a", "b", "c")[: draw(st.integers(1, 3))], length, length)
    else:
        step = draw(st.sampled_from([F(1), F(1, 2), F(1, 3), F(1, 4)]))
        lo = draw(st.sampled_from([F(-2), F(-1), F(0)]))
        domain = GridDomain(config.width, tuple(lo + k * step for k in range(draw(st.integers(1, 4)))), length)
    return model, arith, domain, length, draw(st.integers(0, 2**32 - 1)), draw(st.booleans())


def _rows(vocabulary: int, length: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    random_rows = rng.integers(0, vocabulary, size=(8, length))
    constant_rows = np.repeat(rng.integers(0, vocabulary, size=(2, 1)), length, axis=1)
    repeated = rng.integers(0, vocabulary, size=(2, length))
    repeated[:, -1] = repeated[:, 0]
    return np.concatenate([random_rows, constant_rows, repeated])


def _interpreter_traces(model, arith, domain, rows) -> list:
    """The reference interpreter's trace of every row, computed once per case and compared with every path."""
    traces = []
    for row in rows:
        trace = evaluate(model, arith, tuple(domain.tokens[int(t)] for t in row))
        if trace.saturations:
            event("saturation on some row")
        for block_trace, block in zip(trace.blocks, model.blocks):
            for head_trace, head in zip(block_trace.heads, block.attention.heads if block.attention else ()):
                live = [[s for s in row if s is not None] for row in head_trace.scores]
                if head.scoring == "hardmax" and any(row.count(max(row)) > 1 for row in live):
                    event("hardmax tie on some row")
        traces.append(trace)
    return traces


def _assert_same(traces, rows, stream, readout) -> None:
    for b, (row, trace) in enumerate(zip(rows, traces, strict=True)):
        got = [tuple(F(int(x), stream.den) for x in vec) for vec in stream.numerators[b]]
        assert got == [tuple(v) for v in trace.output], f"row {row.tolist()}"
        assert [F(int(x), readout.den) for x in readout.numerators[b]] == trace.readout, f"row {row.tolist()}"


OUTCOMES: Counter = Counter()  # per generated case: compared on every path, or refused by the batched evaluator
ROUNDED_TERMS_MODELS = 40
COMPARED_WHEN_WRITTEN = 300  # measured 2026-11-24: 300 of 300 cases compared on every path, 0 refusals
ROUNDED_TERMS_COMPARED_WHEN_WRITTEN = 40  # 40 of 40


@settings(
    max_examples=MODELS,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(cases())
def _batched_matches_interpreter(case):
    _check_every_path(case)


@settings(
    max_examples=ROUNDED_TERMS_MODELS,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(cases(rounded_terms=True))
def _rounded_terms_heads_match_the_interpreter(case):
    _check_every_path(case)


@contextmanager
def _compiled_once() -> Iterator[None]:
    """``compile_program`` memoised for one case (by length, variant and force): the paths that differ only in
    their back end (numpy, torch, CUDA's matmuls) load the one program the planner makes for them, as
    ``BatchedEvaluator`` would compile it for each (a pure function of the same arguments), and run it each on
    its own kernels. Compiling took about half of this module's time, 6 to 7 times per case. (The bodies of the
    ``@given`` functions are as they were: hypothesis derandomizes from their source, so the cases are the same.)"""
    programs: dict = {}
    bounds: dict = {}  # the interval bounds of the whole domain, the same for every variant and force

    def once(model, arith, tokens, length, variant="auto", force=None):
        key = (length, variant, force)
        if key not in programs:
            if length not in bounds:
                bounds[length] = cube_bounds(model, arith, Cube.whole(tokens, length)) if tokens else None
            programs[key] = compile_program(model, arith, tokens, length, variant, bounds[length], force=force)
        return programs[key]

    with mock.patch.object(evaluator_module, "compile_program", once):
        yield


def _check_every_path(case) -> None:
    with _compiled_once():
        _check_paths(case)


def _check_paths(case) -> None:
    model, arith, domain, length, seed, narrow = case
    rows = _rows(len(domain.tokens), length, seed)
    if isinstance(arith, Fixed) and arith.rounded_terms and any(h.scoring == "softmax" for _, _, h in model.heads()):
        event("rounded-terms softmax head")
    paths = [
        (NUMPY, {}),
        (TORCH_CPU, {}),
        (CUDA_EMULATED, {}),
        (NUMPY, {"force": "wide"}),
        (CUDA_EMULATED, {"force": "guarded"}),
        (NUMPY, {"force": "guarded"}),
    ] + CUDA_PATHS
    if isinstance(arith, Exact):
        paths.append((TORCH_CPU, {"variant": "tie-free", "force": "guarded"}))
    traces = None
    for ops, how in [(ops, how) for ops, how in paths if ops is not None]:
        evaluator = BatchedEvaluator(model, arith, domain.tokens, ops=ops, narrow=narrow, **how)
        try:
            stream, readout = evaluator.run(rows)
        except Unsupported:
            event("unsupported (softmax in exact mode)")
            OUTCOMES["refused"] += 1
            return
        if not how:
            event(f"int{'32' if evaluator.program(length).small and narrow else '64'}")
        if evaluator.fallback_rows:
            event("tie-free rows recomputed on the full program")
        traces = traces or _interpreter_traces(model, arith, domain, rows)
        _assert_same(traces, rows, stream, readout)
    OUTCOMES["compared"] += 1


# A refusal passes a case unchecked: the tests must not pass by refusing. When written (hypothesis 6.155,
# derandomized), every case was compared on every path; the minimum below is that count.
def test_batched_matches_interpreter():
    OUTCOMES.clear()
    _batched_matches_interpreter()
    assert OUTCOMES["compared"] >= COMPARED_WHEN_WRITTEN, dict(OUTCOMES)


def test_rounded_terms_heads_match_the_interpreter():
    OUTCOMES.clear()
    _rounded_terms_heads_match_the_interpreter()
    assert OUTCOMES["compared"] >= ROUNDED_TERMS_COMPARED_WHEN_WRITTEN, dict(OUTCOMES)


@st.composite
def norm_cases(draw):
    """Fixed-point models with LayerNorm on every sublayer (pre or post), maybe a final norm, ReLU or i-GELU.

    Wide formats (24 bits, up to 20 fractional) make LayerNorm's sum of squares times 4^f exceed int64 (guarded
    and wide steps on the compiled path too) and i-GELU's table too large (its values per distinct mantissa)."""
    bits = draw(st.sampled_from([6, 8, 12, 16, 24]))
    frac = draw(st.integers(0, min(bits - 2, 6 if bits < 24 else 20)))
    arith = Fixed(bits, frac, draw(st.sampled_from(["exact-sums", "per-probability", "rounded-terms"])))
    length = draw(st.integers(1, 4))
    config = RandomConfig(
        seed=draw(st.integers(0, 10**6)),
        width=draw(st.integers(1, 4)),
        layers=draw(st.integers(1, 2)),
        heads=draw(st.integers(1, 2)),
        ffn_width=draw(st.sampled_from([0, 2, 3])),
        scoring=draw(st.sampled_from(["hardmax", "uniform", "softmax"])),
        causal=draw(st.booleans()),
        weight_range=F(draw(st.sampled_from([1, 2, 4]))),
        denominator=draw(st.sampled_from([1, 2, 3, 4])),
        activation=draw(st.sampled_from(["relu", "i-gelu"])),
        layernorm=draw(st.sampled_from(["pre", "post", "none"])),
        final_norm=draw(st.booleans()),
        layernorm_eps=draw(st.sampled_from([F(0), F(1, 100000), F(1, 3), F(5)])),
    )
    step = F(1, 2) if arith.frac else F(1)
    domain = GridDomain(config.width, tuple(F(-1) + k * step for k in range(draw(st.integers(1, 4)))), length)
    return random_model(config), arith, domain, length, draw(st.integers(0, 2**32 - 1)), draw(st.booleans())


NORM_MODELS = 120
# measured 2026-11-24 (hypothesis derandomized): 120 of 120 compared on every path, 0 refusals; 94 models with a
# LayerNorm, 24 with i-GELU, 2 compiled with guarded steps, 2 with i-GELU's per-mantissa values (no table)
NORMS_COMPARED_WHEN_WRITTEN = 120


@settings(
    max_examples=NORM_MODELS,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(norm_cases())
def _layernorm_and_igelu_match_interpreter(case):
    model, arith, _domain, length, _seed, _narrow = case
    if any(b.feed_forward and b.feed_forward.activation == "i-gelu" for b in model.blocks):
        event("i-GELU")
    program = BatchedEvaluator(model, arith, _domain.tokens, ops=NUMPY).program(length)
    if program.guarded:
        event("guarded or wide steps as compiled")
    _check_every_path(case)


def test_batched_layernorm_and_igelu_match_interpreter():
    """LayerNorm and i-GELU on every path (as compiled, forced wide, forced guarded, torch and CUDA's matmuls)."""
    OUTCOMES.clear()
    _layernorm_and_igelu_match_interpreter()
    assert OUTCOMES["compared"] >= NORMS_COMPARED_WHEN_WRITTEN, dict(OUTCOMES)


def test_batched_refuses_layernorm_and_igelu_in_exact_arithmetic():
    for config in (
        RandomConfig(seed=1, ffn_width=2, layernorm="pre"),
        RandomConfig(seed=1, ffn_width=2, activation="i-gelu"),
    ):
        evaluator = BatchedEvaluator(random_model(config), Exact(), [(F(0), F(0)), (F(1), F(0))], ops=NUMPY)
        with pytest.raises(Unsupported, match="in exact arithmetic is evaluated by the interpreter and the smt"):
            evaluator.check(2)


def test_rounded_terms_head_leaves_the_values_hull():
    """Hand computation (f = 0, so round is floor): one RPE softmax head, W_Q = W_K = 0, B[0] = -1/100 and
    B[±1] = 0, value = x, on the input (100, 100). At position 0 the key at offset 0 has e^-0.01 = 0.99005 ...:
    round(e^s) = 0 but round(e^s·100) = 99; the key at offset 1 has round(e^0) = 1 and round(100) = 100. So
    c = round((99 + 100) / (0 + 1)) = 199, outside the values' hull [100, 100]; position 1 is the mirror image.
    Every path (int64, Python integers, guarded) gives 199, as the interpreter does."""
    from verify_tf.ir import AttentionLayer, Block, GridTokens, Head, Model, RelativeTable

    zero, one = ((F(0),),), ((F(1),),)
    head = Head(
        query=zero,
        key=zero,
        value=one,
        output=one,
        query_bias=(F(0),),
        key_bias=(F(0),),
        value_bias=(F(0),),
        scoring="softmax",
        positional="rpe",
        rpe_bias=RelativeTable((F(0), F(-1, 100), F(0))),
    )
    model = Model(GridTokens(1), 1, (Block(AttentionLayer((head,), (F(0),), residual=False)),), (F(1),))
    arith = Fixed(10, 0, "rounded-terms")
    tokens = [(F(100),)]
    assert evaluate(model, arith, ((F(100),),) * 2).readout == [F(199), F(199)]
    for ops, how in [(NUMPY, {}), (TORCH_CPU, {}), (NUMPY, {"force": "wide"}), (CUDA_EMULATED, {"force": "guarded"})]:
        _stream, readout = BatchedEvaluator(model, arith, tokens, ops=ops, **how).run(np.zeros((1, 2), dtype=np.int64))
        assert [F(int(x), readout.den) for x in readout.numerators[0]] == [F(199), F(199)], how

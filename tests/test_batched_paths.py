"""The batched evaluator's guarded paths: int64 overflow refusal, wide (int64, non-float) products, the CUDA
code path (emulated on the CPU: no GPU in CI), back-end selection and the lazy torch import."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from fractions import Fraction as F

import numpy as np
import pytest

from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.ir import Block, FeedForward
from verify_tf.batched import BatchedEvaluator, NumpyOps, TorchOps, Unsupported, compile_program, make_ops
from verify_tf.batched.program import FLOAT_EXACT
from verify_tf.semantics import Exact, Fixed, UnsupportedInMode, evaluate

from helpers import requires_torch, torch_installed

# wide values: grid points up to 2^26 in a 48-bit format with 20 fractional bits saturate (max 2^27) and push
# the feed-forward sums past 2^53, so float64 is not exact there and int64 arithmetic must be used
# (feed-forward only: attention scores q.k of such values would exceed 2^62 and be refused)
_RANDOM = random_model(RandomConfig(seed=11, width=10, ffn_width=12, weight_range=F(4), max_length=3))
WIDE_MODEL = dataclasses.replace(_RANDOM, blocks=(Block(None, _RANDOM.blocks[0].feed_forward),) * 2)
WIDE_ARITH = Fixed(48, 20)
WIDE_TOKENS = [(F(-(2 ** 26)),) * 10, tuple(F(k, 4) for k in range(10)), (F(2 ** 26 - 1),) * 10]


def _rows(vocabulary: int, length: int, count: int = 12, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, vocabulary, size=(count, length))


def _check_against_interpreter(evaluator, model, arith, tokens, rows) -> None:
    stream, readout = evaluator.run(rows)
    for b, row in enumerate(rows):
        trace = evaluate(model, arith, tuple(tokens[int(t)] for t in row))
        assert [tuple(F(int(x), stream.den) for x in v) for v in stream.numerators[b]] == list(trace.output)
        assert [F(int(x), readout.den) for x in readout.numerators[b]] == trace.readout


def _affine_plans(program):
    for block in program.blocks:
        if block.attention is not None:
            for head in block.attention.heads:
                yield from (head.query, head.key, head.value)
            yield block.attention.output
        if block.feed_forward is not None:
            yield from (block.feed_forward.hidden, block.feed_forward.output)


def test_wide_values_use_int64_and_exact_integer_products():
    tokens = WIDE_TOKENS
    program = compile_program(WIDE_MODEL, WIDE_ARITH, tokens, 3)
    assert not program.small
    assert any(not plan.float_ok for plan in _affine_plans(program))
    assert max(program.output.bound) == 2 ** 47  # saturated: the bound is the format's range
    rows = np.array([[0, 2, 1], [2, 2, 2], [0, 0, 0], [1, 0, 2]])
    for ops in (NumpyOps(), TorchOps("cpu")) if torch_installed() else (NumpyOps(),):
        _check_against_interpreter(BatchedEvaluator(WIDE_MODEL, WIDE_ARITH, tokens, ops=ops), WIDE_MODEL,
                                   WIDE_ARITH, tokens, rows)


@requires_torch
def test_cuda_code_path_emulated_on_cpu():
    """TorchOps with device 'cuda' avoids integer matmul: unrolled sums, float64 below 2^53, else elementwise."""
    emulated = TorchOps("cpu")
    emulated.device = "cuda"  # the matmul branch CUDA takes, on CPU tensors
    tokens = WIDE_TOKENS
    rows = np.array([[0, 2, 1], [2, 2, 2], [1, 0, 2]])
    _check_against_interpreter(BatchedEvaluator(WIDE_MODEL, WIDE_ARITH, tokens, ops=emulated), WIDE_MODEL,
                               WIDE_ARITH, tokens, rows)
    model = random_model(RandomConfig(seed=4, width=12, heads=2, ffn_width=9, scoring="softmax", positional="urpe",
                                      max_length=4))
    tokens = [tuple(F(int(c), 2) for c in row) for row in np.random.default_rng(1).integers(-3, 4, size=(5, 12))]
    evaluator = BatchedEvaluator(model, Fixed(16, 6), tokens, ops=emulated)
    assert all(plan.float_ok for plan in _affine_plans(evaluator.program(4)))  # width 12 > 8: float64 matmul
    _check_against_interpreter(evaluator, model, Fixed(16, 6), tokens, _rows(len(tokens), 4))


def test_overflow_risk_is_refused_not_miscomputed():
    model = random_model(RandomConfig(seed=2, width=2, max_length=3))
    tokens = [(F(2 ** 10), F(-(2 ** 10)))]
    with pytest.raises(Unsupported, match=r"> 2\^62"):
        compile_program(model, Fixed(64, 40), tokens, 3)
    assert issubclass(Unsupported, UnsupportedInMode)  # the runner reports it as verdict unknown
    compile_program(model, Fixed(24, 8), tokens, 3)  # the same model in a narrower format is fine


def test_softmax_in_exact_mode_is_unsupported():
    model = random_model(RandomConfig(seed=2, scoring="softmax"))
    with pytest.raises(Unsupported, match="softmax"):
        compile_program(model, Exact(), [(F(0), F(1))], 2)


def test_backend_selection_and_clear_errors():
    assert make_ops("numpy", "cpu").name == "numpy"
    with pytest.raises(ValueError, match="numpy back end runs on the CPU"):
        make_ops("numpy", "cuda")
    if not torch_installed():
        assert make_ops("auto", "auto").name == "numpy"
        with pytest.raises(Unsupported, match=r"pip install 'verify-tf\[torch\]'"):
            make_ops("torch", "cpu")
        return
    assert make_ops("torch", "cpu").name == "torch"
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(Unsupported, match="no CUDA device"):
            make_ops("auto", "cuda")
        assert make_ops("auto", "auto").name == "numpy"


def test_numpy_path_does_not_import_torch():
    code = ("import sys; from fractions import Fraction as F; "
            "from verify_tf.batched import BatchedEvaluator; "
            "from verify_tf.builders.random_model import RandomConfig, random_model; "
            "from verify_tf.semantics import Fixed; "
            "e = BatchedEvaluator(random_model(RandomConfig()), Fixed(), [(F(0), F(1))], backend='numpy', "
            "device='cpu'); e.run([[0, 0]]); assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_float_exact_threshold_is_2_to_53():
    assert FLOAT_EXACT == 2 ** 53 and float(2 ** 53 - 1) == 2 ** 53 - 1


def test_empty_contraction_feed_forward_of_width_zero():
    model = random_model(RandomConfig(seed=2, width=2, max_length=3))
    empty = FeedForward(w1=(), b1=(), w2=((), ()), b2=(F(1, 3), F(-5, 2)))
    model = dataclasses.replace(model, blocks=(Block(model.blocks[0].attention, empty),))
    tokens = [(F(0), F(1)), (F(-1), F(1, 2))]
    backends: list = [NumpyOps()]
    if torch_installed():
        emulated = TorchOps("cpu")
        emulated.device = "cuda"
        backends += [TorchOps("cpu"), emulated]
    for ops in backends:
        _check_against_interpreter(BatchedEvaluator(model, Fixed(12, 4), tokens, ops=ops), model, Fixed(12, 4),
                                   tokens, np.array([[0, 1, 1], [1, 0, 0]]))

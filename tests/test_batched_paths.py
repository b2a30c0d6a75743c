"""The batched evaluator's guarded paths: values beyond int64 computed exactly on Python integers (never refused),
wide (int64, non-float) products, the 1-D hardmax without products, the tie-free variant, the CUDA code path
(emulated on the CPU: no GPU in CI), back-end selection and the lazy torch import."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from fractions import Fraction as F

import numpy as np
import pytest

from helpers import requires_torch, torch_installed
from verify_tf.batched import BatchedEvaluator, NumpyOps, TorchOps, Unsupported, compile_program, make_ops
from verify_tf.batched.plans import FLOAT_EXACT
from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.ir import Block, FeedForward
from verify_tf.semantics import Exact, Fixed, UnsupportedInMode, evaluate

# wide values: grid points up to 2^26 in a 48-bit format with 20 fractional bits saturate (max 2^27) and push
# the feed-forward sums past 2^53, so float64 is not exact there and int64 arithmetic must be used
# (feed-forward only: attention scores q.k of such values would exceed 2^62 and be refused)
_RANDOM = random_model(RandomConfig(seed=11, width=10, ffn_width=12, weight_range=F(4), max_length=3))
WIDE_MODEL = dataclasses.replace(_RANDOM, blocks=(Block(None, _RANDOM.blocks[0].feed_forward),) * 2)
WIDE_ARITH = Fixed(48, 20)
WIDE_TOKENS = [(F(-(2**26)),) * 10, tuple(F(k, 4) for k in range(10)), (F(2**26 - 1),) * 10]


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
    assert max(program.output.bound) == 2**47  # saturated: the bound is the format's range
    rows = np.array([[0, 2, 1], [2, 2, 2], [0, 0, 0], [1, 0, 2]])
    for ops in (NumpyOps(), TorchOps("cpu")) if torch_installed() else (NumpyOps(),):
        _check_against_interpreter(
            BatchedEvaluator(WIDE_MODEL, WIDE_ARITH, tokens, ops=ops), WIDE_MODEL, WIDE_ARITH, tokens, rows
        )


@requires_torch
def test_cuda_code_path_emulated_on_cpu():
    """TorchOps with device 'cuda' avoids integer matmul: unrolled sums, float64 below 2^53, else elementwise."""
    emulated = TorchOps("cpu")
    emulated.device = "cuda"  # the matmul branch CUDA takes, on CPU tensors
    tokens = WIDE_TOKENS
    rows = np.array([[0, 2, 1], [2, 2, 2], [1, 0, 2]])
    _check_against_interpreter(
        BatchedEvaluator(WIDE_MODEL, WIDE_ARITH, tokens, ops=emulated), WIDE_MODEL, WIDE_ARITH, tokens, rows
    )
    model = random_model(
        RandomConfig(seed=4, width=12, heads=2, ffn_width=9, scoring="softmax", positional="urpe", max_length=4)
    )
    tokens = [tuple(F(int(c), 2) for c in row) for row in np.random.default_rng(1).integers(-3, 4, size=(5, 12))]
    evaluator = BatchedEvaluator(model, Fixed(16, 6), tokens, ops=emulated)
    assert all(plan.float_ok for plan in _affine_plans(evaluator.program(4)))  # width 12 > 8: float64 matmul
    _check_against_interpreter(evaluator, model, Fixed(16, 6), tokens, _rows(len(tokens), 4))


def test_values_beyond_int64_are_computed_exactly_not_refused():
    """Grid values 2^10 in a 64-bit format with 40 fractional bits: mantissas 2^50, products 2^100."""
    model = random_model(RandomConfig(seed=2, width=2, max_length=3))
    tokens = [(F(2**10), F(-(2**10))), (F(3), F(1, 2**40))]
    arith = Fixed(64, 40)
    program = compile_program(model, arith, tokens, 3)
    assert program.guarded and program.steps_bits > 63  # the q.k products need about 2^100
    assert issubclass(Unsupported, UnsupportedInMode)  # what is still refused (softmax in exact mode) is unknown
    rows = np.array([[0, 1, 0], [1, 1, 1], [0, 0, 1]])
    for ops in (NumpyOps(), TorchOps("cpu")) if torch_installed() else (NumpyOps(),):
        evaluator = BatchedEvaluator(model, arith, tokens, ops=ops)
        _check_against_interpreter(evaluator, model, arith, tokens, rows)
        assert evaluator.wide_steps > 0
    assert not compile_program(model, Fixed(24, 8), tokens, 3).guarded  # a narrower format fits int64


def _tied_keys_model(causal: bool):
    """Two 1-D hardmax heads whose keys tie while their values differ: q = z1 - 1/2 (never 0) and q = z1 (0 on
    half the tokens: every key ties), k = z1, v = z2."""
    from verify_tf.ir import AttentionLayer, GridTokens, Head, Model

    def head(query_bias):
        return Head(
            query=((F(1), F(0)),),
            key=((F(1), F(0)),),
            value=((F(0), F(1)),),
            output=((F(1),), (F(0),)),
            query_bias=(query_bias,),
            key_bias=(F(0),),
            value_bias=(F(0),),
            scoring="hardmax",
            causal=causal,
        )

    layer = AttentionLayer((head(F(-1, 2)), head(F(0))), (F(0), F(0)))
    return Model(GridTokens(2), 2, (Block(layer), Block(layer)), (F(1), F(3)))


@pytest.mark.parametrize("causal", [False, True])
def test_one_dimensional_hardmax_without_products_matches_the_interpreter(causal):
    """Every input of {0, 1}^2 tokens, length 3 (64 inputs): ties of keys with different values, q = 0 rows."""
    import itertools

    model = _tied_keys_model(causal)
    tokens = [(F(a), F(b)) for a in (0, 1) for b in (0, 1)]
    program = compile_program(model, Exact(), tokens, 3)
    assert all(head.mode == "argmax1d" for block in program.blocks for head in block.attention.heads)
    rows = np.array(list(itertools.product(range(4), repeat=3)))
    paths: list = [
        (NumpyOps(), {}),
        (NumpyOps(), {"force": "wide"}),
        (NumpyOps(), {"force": "guarded"}),
        (NumpyOps(), {"variant": "tie-free"}),
    ]
    if torch_installed():  # the torch extra: torch's paths, CUDA's matmul branch emulated on the CPU
        emulated = TorchOps("cpu")
        emulated.device = "cuda"
        paths += [
            (TorchOps("cpu"), {"force": "wide"}),
            (emulated, {"force": "guarded"}),
            (emulated, {"variant": "tie-free", "force": "wide"}),
        ]
    for ops, how in paths:
        evaluator = BatchedEvaluator(model, Exact(), tokens, ops=ops, **how)
        _check_against_interpreter(evaluator, model, Exact(), tokens, rows)
        if how.get("variant") == "tie-free":
            assert evaluator.fallback_rows > 0  # a tie of different values cannot be divided exactly


def test_tie_free_variant_keeps_lemma6_denominators_small():
    """Lemma 6 (1, 1/16, 5): the full program's denominators carry lcm(1..5) per layer (about 2^100); the tie-free
    program keeps the grid's 16, and no row of G~_δ is flagged (its hardmax rows never tie values)."""
    from verify_tf.builders.yun import yun_contextual_mapping
    from verify_tf.domain import GridDomain
    from verify_tf.spaces import InputSpace

    model = yun_contextual_mapping(1, F(1, 16), 5)
    domain = GridDomain.regular(1, F(1, 16), 5, distinct_tokens=True)
    program = compile_program(model, Exact(), domain.tokens, 5)
    assert program.tie_free and program.output.den == 16
    assert program.fallback.output.den.bit_length() > 80
    evaluator = BatchedEvaluator(model, Exact(), domain.tokens, backend="numpy", device="cpu")
    rows = np.concatenate([c.rows for c in InputSpace(domain, "sorted").chunks(4096)])
    readout = evaluator.values(rows, "readout")
    assert len(rows) == 4368 and evaluator.fallback_rows == 0 and evaluator.wide_steps == 0
    assert readout.numerators.dtype == np.int64  # every value of every step fitted int64 at run time
    for b in (0, 1234, 4367):
        tokens = tuple(domain.tokens[int(t)] for t in rows[b])
        assert [F(int(x), readout.den) for x in readout.numerators[b]] == evaluate(model, Exact(), tokens).readout


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
        with pytest.raises(Unsupported, match=r'pip install -e "\.\[torch\]" in a checkout'):
            make_ops("torch", "cpu")
        return
    assert make_ops("torch", "cpu").name == "torch"
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(Unsupported, match="no CUDA device"):
            make_ops("auto", "cuda")
        assert make_ops("auto", "auto").name == "numpy"


def test_numpy_path_does_not_import_torch():
    code = (
        "import sys; from fractions import Fraction as F; "
        "from verify_tf.batched import BatchedEvaluator; "
        "from verify_tf.builders.random_model import RandomConfig, random_model; "
        "from verify_tf.semantics import Fixed; "
        "e = BatchedEvaluator(random_model(RandomConfig()), Fixed(), [(F(0), F(1))], backend='numpy', "
        "device='cpu'); e.run([[0, 0]]); assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_float_exact_threshold_is_2_to_53():
    assert FLOAT_EXACT == 2**53 and float(2**53 - 1) == 2**53 - 1


@pytest.mark.slow
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
        _check_against_interpreter(
            BatchedEvaluator(model, Fixed(12, 4), tokens, ops=ops),
            model,
            Fixed(12, 4),
            tokens,
            np.array([[0, 1, 1], [1, 0, 0]]),
        )

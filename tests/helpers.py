"""Small builders for hand-written test models (one head, d = 1 unless stated)."""

from __future__ import annotations

import importlib.util
from fractions import Fraction as F
from pathlib import Path

import pytest

from verify_tf.crasp.interpreter import run_program
from verify_tf.ir import (
    AlphabetTokens,
    AttentionLayer,
    Block,
    FeedForward,
    GridTokens,
    Head,
    Model,
    RelativeTable,
    matrix,
    vector,
    zeros,
)
from verify_tf.semantics import evaluate

L3_PROGRAM = Path(__file__).resolve().parents[1] / "examples" / "crasp" / "L3.cr"

# the compiled L_3 transformer with one weight changed (specs/crasp-L3-mutated.yaml): it misses a 4th block; the
# strings domain over {a, b} up to n is restricted to ``language`` (a YAML mapping: {regex: ...} or {crasp: ...})
MUTATED_L3 = f"""\
model:
  construct: crasp-program
  program: {L3_PROGRAM}
  set: ["layers[2].attention.heads[0].value-bias[1]=1"]
arithmetic: {{mode: fixed, bits: 4, frac: 0, attention-rounding: exact-sums}}
domain:
  strings: {{alphabet: [a, b], max-length: %(n)d, language: %(language)s}}
properties:
%(properties)s"""


def mutated_l3(language: str, n: int, *properties: str) -> str:
    """The mutated L_3 spec over the words of ``language`` up to ``n``, checking ``properties`` (YAML lines)."""
    return MUTATED_L3 % {"language": language, "n": n, "properties": "".join(f"  - {p}\n" for p in properties)}


def head(
    q=0, k=0, v=1, o=1, *, scoring="hardmax", causal=False, positional="standard", rpe=None, urpe=None, value_bias=0
) -> Head:
    return Head(
        query=matrix([[q]]),
        key=matrix([[k]]),
        value=matrix([[v]]),
        output=matrix([[o]]),
        query_bias=zeros(1),
        key_bias=zeros(1),
        value_bias=vector([value_bias]),
        scoring=scoring,
        causal=causal,
        positional=positional,
        rpe_bias=RelativeTable(vector(rpe)) if rpe is not None else None,
        urpe_c=RelativeTable(vector(urpe)) if urpe is not None else None,
    )


def one_layer(h: Head, *, residual=True, pe=None, ff: FeedForward | None = None) -> Model:
    return Model(
        tokens=GridTokens(1),
        dim=1,
        blocks=(Block(AttentionLayer((h,), zeros(1), residual), ff),),
        readout=vector([1]),
        positional_encoding=matrix(pe) if pe is not None else None,
    )


def ffn_only(w1, b1, w2, b2) -> Model:
    ff = FeedForward(matrix(w1), vector(b1), matrix(w2), vector(b2))
    return Model(tokens=GridTokens(1), dim=1, blocks=(Block(None, ff),), readout=vector([1]))


def alphabet_model(
    h: Head, symbols=("a", "b"), embedding=((1,), (0,)), bos="^", bos_embedding=(5,), residual=False
) -> Model:
    tokens = AlphabetTokens(tuple(symbols), matrix(embedding), bos, vector(bos_embedding) if bos else None)
    return Model(tokens=tokens, dim=1, blocks=(Block(AttentionLayer((h,), zeros(1), residual)),), readout=vector([1]))


def seq(*values) -> tuple:
    return tuple((F(v),) for v in values)


def column(vectors) -> list:
    return [v[0] for v in vectors]


def verdict(model, arith, domain, prop, options=None, *, engine="auto", timeout=60.0, **settings):
    """Check one property through the public API (``verify_tf.api.check``), device pinned to the CPU."""
    from verify_tf.api import check

    settings.setdefault("device", "cpu")
    return check(model, arith, domain, prop, options or {}, engine=engine, timeout=timeout, **settings)


def task(model, arith, domain, prop, options=None, **settings):
    """The ``Task`` the engines see (for calling a property's own functions, e.g. its replay)."""
    from verify_tf.api import make_task

    settings.setdefault("device", "cpu")
    return make_task(model, arith, domain, prop, options or {}, **settings)


def torch_installed() -> bool:
    """Whether PyTorch (the ``torch`` extra) can be imported; the tests that need it skip without it."""
    try:
        return importlib.util.find_spec("torch") is not None
    except ImportError:  # a blocked import (tests/test_without_torch.py) reads as not installed
        return False


requires_torch = pytest.mark.skipif(not torch_installed(), reason="needs the torch extra: pip install -e '.[torch]'")


def needs_torch(spec_path) -> bool:
    """A shipped spec that reads a torch state dict (``model: {torch: ...}``)."""
    return "torch:" in spec_path.read_text()


def least_failing_prefix(spec, program, words) -> tuple[str, int]:
    """Independent of every engine: the first (word, position) of ``words`` (in the order given) where the reference
    interpreter's decision (readout > 0; BOS at readout position 0) differs from the C-RASP program's output."""
    for word in words:
        readout = evaluate(spec.model, spec.arithmetic, tuple(word)).readout
        outputs = run_program(program, word).output
        for i in range(len(word)):
            if (readout[i + 1] > 0) != outputs[i]:
                return word, i
    raise AssertionError("no failing word")


class TickingClock:
    """A stand-in for the work module's ``time`` (``monkeypatch.setattr(work, "time", TickingClock(0.01))``): every
    ``perf_counter()`` reading is ``step`` seconds later, so that a budget is a number of readings, whatever the
    machine's speed or load; everything else is the real ``time``."""

    def __init__(self, step: float, now: float = 1000.0):
        self.step, self.now = step, now

    def perf_counter(self) -> float:
        self.now += self.step
        return self.now

    def __getattr__(self, name: str):
        import time

        return getattr(time, name)

"""Engine counting on causal models of every kind: the counter model against the reference interpreter, and the
engine's verdicts and least witnesses against string enumeration (``enumerate``).

The C-RASP side (compiled programs, the counter machine of a program, the L_k hand counts) is in
tests/test_counting_engine.py; here the models are random causal ones of every head kind (uniform, hardmax, softmax
under each attention rounding, with key-dependent scores), with LayerNorm, i-GELU, BOS or not, an absolute
positional encoding, in fixed and exact arithmetic, and the properties are output-bounds and equivalent-to besides
crasp-equivalence.
"""

from __future__ import annotations

import dataclasses
import random
from fractions import Fraction as F
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from helpers import verdict
from verify_tf.builders.crasp_compiler import compile_program
from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.crasp import load_program
from verify_tf.domain import StringDomain
from verify_tf.engines.base import CountingGoal
from verify_tf.engines.counting.counters import CounterModel
from verify_tf.ir import Block, Model
from verify_tf.ir.edit import apply_settings
from verify_tf.semantics import Exact, Fixed, evaluate
from verify_tf.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "crasp"
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ---------------------------------------------------------------- random causal models


@st.composite
def causal_models(draw) -> tuple[Model, object]:
    """A random causal alphabet model without relative positions, and an arithmetic it runs in."""
    exact = draw(st.booleans()) and draw(st.booleans())
    scoring = draw(st.sampled_from(["hardmax", "uniform"] if exact else ["hardmax", "softmax", "uniform"]))
    layernorm = "none" if exact else draw(st.sampled_from(["none", "pre", "post"]))
    bos = draw(st.sampled_from(["^", None]))
    config = RandomConfig(
        seed=draw(st.integers(0, 10**6)),
        width=draw(st.integers(1, 3)),
        layers=draw(st.integers(1, 2)),
        heads=draw(st.integers(1, 2)),
        key_dim=draw(st.sampled_from([None, 1])),
        ffn_width=draw(st.sampled_from([0, 2, 3])),
        scoring=scoring,
        causal=True,
        absolute_pe=draw(st.booleans()) and draw(st.booleans()),
        max_length=9,
        weight_range=F(draw(st.sampled_from([1, 2]))),
        denominator=draw(st.sampled_from([1, 2, 4])),  # 1: integer weights, many ties
        alphabet=("a", "b", "c"),
        bos=bos,
        activation="relu" if exact else draw(st.sampled_from(["relu", "i-gelu"])),
        layernorm=layernorm,
        final_norm=not exact and draw(st.booleans()),
    )
    if exact:
        arith = Exact()
    else:
        bits = draw(st.sampled_from([6, 8, 12, 16]))  # weights are multiples of 1/4: at least 2 fractional bits
        rounding = draw(st.sampled_from(["exact-sums", "per-probability", "rounded-terms"]))
        arith = Fixed(bits, draw(st.integers(2, min(bits - 2, 8))), rounding)
    return random_model(config), arith


def counter_trace(counter: CounterModel, word: str) -> list:
    """(readout, final stream) at every stream position of ``word``, BOS first when the model has one."""
    state, positions, first, _ = counter.start()
    found = [] if first is None else [(first.readout, first.stream)]
    for letter in word:
        state, observation, _ = counter.step(state, positions, letter)
        positions += 1
        found.append((observation.readout, observation.stream))
    return found


@settings(max_examples=60, **SETTINGS)
@given(causal_models(), st.lists(st.text("abc", min_size=0, max_size=7), min_size=1, max_size=6))
def test_the_counter_model_is_the_interpreter(case, words) -> None:
    """Every readout and every final stream of the counter model equals the reference interpreter's, bit for bit."""
    model, arith = case
    counter = CounterModel.of(model, arith)
    for word in words:
        trace = evaluate(model, arith, tuple(word))
        assert counter_trace(counter, word) == list(zip(trace.readout, trace.output)), word


def _same(a, b) -> None:
    assert a.status == b.status, (a.detail, b.detail)
    if a.status == "refuted":
        assert (a.counterexample["input"], a.counterexample["position"]) == (
            b.counterexample["input"],
            b.counterexample["position"],
        )


@pytest.mark.slow
@settings(max_examples=40, **SETTINGS)
@given(causal_models(), st.data())
def test_counting_agrees_with_enumeration_on_random_causal_models(case, data) -> None:
    """output-bounds (a bound near the readouts seen, every position, chosen ones, the BOS) and equivalent-to (a copy
    with one bias changed, on the readout or the whole stream): the same verdict and least witness as enumeration."""
    model, arith = case
    alphabet = ("a", "b", "c")[: data.draw(st.integers(2, 3))]
    longest = 5 if len(alphabet) == 2 else 4
    domain = StringDomain(alphabet, data.draw(st.integers(0, 2)), longest)
    rng = random.Random(data.draw(st.integers(0, 1000)))
    seen = sorted(
        q
        for _ in range(12)
        for q in evaluate(model, arith, tuple(rng.choice(alphabet) for _ in range(longest))).readout
    )
    options: dict = {"hi": seen[int(0.9 * (len(seen) - 1))]}
    positions = data.draw(st.sampled_from([None, [-1], [0], [1, -2]]))
    if positions is not None:
        options["positions"] = positions
    options["include-bos"] = data.draw(st.booleans())
    _same(
        verdict(model, arith, domain, "output-bounds", options, engine="counting"),
        verdict(model, arith, domain, "output-bounds", options, engine="enumerate"),
    )
    biases = [name for name, _ in model.parameters() if "bias" in name and name.startswith("layers")]
    other = model
    if biases and data.draw(st.booleans()):
        other = apply_settings(
            model, [f"{data.draw(st.sampled_from(biases))}={data.draw(st.sampled_from(['1/4', '-1']))}"]
        )
    options = {"model": other, "on": data.draw(st.sampled_from(["readout", "output"]))}
    _same(
        verdict(model, arith, domain, "equivalent-to", options, engine="counting"),
        verdict(model, arith, domain, "equivalent-to", options, engine="enumerate"),
    )


# ---------------------------------------------------------------- the shipped C-RASP specs


CRASP_SPECS = sorted((ROOT / "specs").glob("crasp-*.yaml"))


@pytest.mark.slow
@pytest.mark.parametrize("path", CRASP_SPECS, ids=[p.name for p in CRASP_SPECS])
def test_every_shipped_crasp_spec_gets_enumeration_s_verdict_and_witness(path: Path) -> None:
    """Each bounded crasp-equivalence property of a shipped spec, by counting and by enumeration."""
    spec = load_spec(path)
    bounded = [p for p in spec.properties if p.name == "crasp-equivalence"]
    assert bounded, path
    # at most 10 letters: enumerating rounded-terms models (the paper-rounding specs) to 14 takes minutes here
    domain = dataclasses.replace(spec.domain, max_length=min(spec.domain.max_length, 10))
    for prop in bounded:
        results = [
            verdict(
                spec.model,
                spec.arithmetic,
                domain,
                "crasp-equivalence",
                {**dataclasses.asdict(prop.options), "lengths": "domain"},
                engine=e,
                timeout=900.0,  # bounded work (10 letters: 8 s idle for both engines): a loaded machine cannot reach it
            )
            for e in ("counting", "enumerate")
        ]
        assert results[0].status == results[1].status, path
        if results[0].status == "refuted":
            first, second = (r.counterexample for r in results)
            assert (first["string"], first["position"]) == (second["string"], second["position"])


# ---------------------------------------------------------------- key-dependent softmax, every length


def rewrite(model: Model) -> Model:
    """The same model with its feed-forward's hidden units reversed and the first one split in two halves
    (w2·relu(a) = (w2/2)·relu(a) + (w2/2)·relu(a): the second map's sum is exact before its one rounding), and its
    residual stream's coordinates reversed: other weights and widths, the same readouts bit for bit."""
    blocks = []
    for block in model.blocks:
        ff = block.feed_forward
        if ff is not None:
            w1, b1 = [*reversed(ff.w1)], [*reversed(ff.b1)]
            w2 = [tuple(reversed(row)) for row in ff.w2]
            w1, b1 = [w1[0], *w1], [b1[0], *b1]
            w2 = [(row[0] / 2, row[0] / 2, *row[1:]) for row in w2]
            ff = dataclasses.replace(ff, w1=tuple(w1), b1=tuple(b1), w2=tuple(w2))
        blocks.append(Block(block.attention, ff))
    return permuted(dataclasses.replace(model, blocks=tuple(blocks)))


def permuted(model: Model) -> Model:
    """The model with its residual stream's coordinates in reverse order (every map that reads or writes it)."""

    def vec(v):
        return None if v is None else tuple(reversed(v))

    def reads(m):
        return tuple(tuple(reversed(row)) for row in m)

    def norm(n):
        return None if n is None else dataclasses.replace(n, gamma=vec(n.gamma), beta=vec(n.beta))

    tokens = dataclasses.replace(
        model.tokens,
        embedding=reads(model.tokens.embedding),
        bos_embedding=vec(model.tokens.bos_embedding),
    )
    blocks = []
    for block in model.blocks:
        attention, ff = block.attention, block.feed_forward
        if attention is not None:
            heads = tuple(
                dataclasses.replace(
                    h, query=reads(h.query), key=reads(h.key), value=reads(h.value), output=vec(h.output)
                )
                for h in attention.heads
            )
            attention = dataclasses.replace(
                attention, heads=heads, output_bias=vec(attention.output_bias), norm=norm(attention.norm)
            )
        if ff is not None:
            ff = dataclasses.replace(ff, w1=reads(ff.w1), w2=vec(ff.w2), b2=vec(ff.b2), norm=norm(ff.norm))
        blocks.append(Block(attention, ff))
    return dataclasses.replace(
        model, tokens=tokens, blocks=tuple(blocks), readout=vec(model.readout), final_norm=norm(model.final_norm)
    )


def causal_softmax(seed: int = 0, layers: int = 1, **config: object) -> Model:
    """A random causal softmax model of width 4 over {a, b} with BOS (``config``: more RandomConfig fields)."""
    return random_model(
        RandomConfig(
            seed=seed,
            width=4,
            layers=layers,
            heads=1,
            ffn_width=4,
            scoring="softmax",
            causal=True,
            alphabet=("a", "b"),
            bos="^",
            denominator=4,
            **config,
        )
    )


def test_a_one_layer_softmax_model_and_its_rewrite_agree_at_every_length() -> None:
    """Key-dependent softmax weights (16/8, exact-sums): per-letter counts and value sums, two classes plus BOS;
    n + 1 states of length n (hand count: the number of a's), and equality for every length by induction."""
    model = causal_softmax()
    other = rewrite(model)
    assert model != other
    arith = Fixed(16, 8)
    domain = StringDomain(("a", "b"), 0, 20)
    bounded = verdict(model, arith, domain, "equivalent-to", {"model": other, "on": "readout"}, engine="counting")
    assert bounded.label == "proved (counting)"
    assert bounded.statistics["states_per_length"] == list(range(1, 22))
    assert bounded.statistics["model"]["head_kinds"] == {"layers[0].heads[0]": "weighted"}
    assert bounded.statistics["model"]["classes_per_head"] == {"layers[0].heads[0]": 3}
    every = verdict(
        model, arith, domain, "equivalent-to", {"model": other, "on": "readout", "lengths": "all"}, engine="counting"
    )
    assert every.label == "proved (all lengths)"
    assert every.detail.startswith("the two models' readouts agree on every string over {a, b} of every length >= 0")


def test_a_wrong_rewrite_is_refuted_with_enumeration_s_witness() -> None:
    model = causal_softmax()
    wrong = apply_settings(rewrite(model), ["layers[0].feed-forward.b2[0]=1/256"])
    domain = StringDomain(("a", "b"), 0, 6)
    options = {"model": wrong, "on": "readout", "lengths": "all"}
    by_counts = verdict(model, Fixed(16, 8), domain, "equivalent-to", options, engine="counting")
    by_strings = verdict(
        model, Fixed(16, 8), domain, "equivalent-to", {**options, "lengths": "domain"}, engine="enumerate"
    )
    assert by_counts.status == "refuted"
    _same(by_counts, by_strings)


@pytest.mark.parametrize(
    "program, mutation",
    [("L1.cr", "value-bias[1]=1"), ("majority.cr", "value-bias[0]=1")],  # as specs/crasp-L1-mutated.yaml
)
def test_softmax_bos_compiled_programs_are_proved_for_every_length(program: str, mutation: str) -> None:
    """heads: softmax-bos (BOS scores 2^-f, the other keys 0): key-dependent softmax weights, outside the sums-only
    class; the compiled model still decides its program, on the domain and for every length."""
    result = compile_program(load_program(EXAMPLES / program), frac=2, heads="softmax-bos")
    counter = CounterModel.of(result.model, result.arithmetic)
    assert {slot.kind for slot in counter.slots} == {"weighted"}
    domain = StringDomain(("a", "b"), 1, 10)
    options = {"program": EXAMPLES / program, "lengths": "all"}
    assert verdict(result.model, result.arithmetic, domain, "crasp-equivalence", options, engine="counting").label == (
        "proved (all lengths)"
    )
    mutant = apply_settings(result.model, [f"layers[0].attention.heads[0].{mutation}"])
    found = [
        verdict(mutant, result.arithmetic, domain, "crasp-equivalence", {"program": EXAMPLES / program}, engine=e)
        for e in ("counting", "enumerate")
    ]
    assert found[0].status == "refuted"
    _same(*found)


def test_output_bounds_for_every_length_find_a_violation_beyond_the_domain() -> None:
    """A uniform head averaging a 1 per a over the positions (BOS's value 0), at 4 fractional bits: on a^k the
    readout is ⌊16·k/(k + 1)⌋/16, which first reaches 15/16 at k = 15 (hand computation). Up to length 8 the bound
    14/16 holds; for every length it is refuted on a^15, as enumeration to length 15 finds."""
    model = apply_settings(
        random_model(
            RandomConfig(
                seed=0, width=1, layers=1, heads=1, scoring="uniform", causal=True, alphabet=("a", "b"), bos="^"
            )
        ),
        [
            "embedding[0][0]=1",
            "embedding[1][0]=0",
            "bos-embedding[0]=0",
            "layers[0].attention.heads[0].value[0][0]=1",
            "layers[0].attention.heads[0].value-bias[0]=0",
            "layers[0].attention.heads[0].output[0][0]=1",
            "layers[0].attention.output-bias[0]=0",
            "readout[0]=1",
        ],
    )
    model = dataclasses.replace(model, blocks=(Block(model.blocks[0].attention, None),))
    model = dataclasses.replace(
        model, blocks=(Block(dataclasses.replace(model.blocks[0].attention, residual=False), None),)
    )
    arith = Fixed(10, 4)
    assert [q for q in evaluate(model, arith, ("a",) * 15).readout][-2:] == [F(14, 16), F(15, 16)]
    bound = {"hi": F(14, 16), "positions": [-1]}
    assert (
        verdict(model, arith, StringDomain(("a", "b"), 1, 8), "output-bounds", bound, engine="counting").status
        == "proved"
    )
    every = verdict(
        model, arith, StringDomain(("a", "b"), 1, 8), "output-bounds", {**bound, "lengths": "all"}, engine="counting"
    )
    assert every.status == "refuted" and every.counterexample["input"] == ["a"] * 15
    _same(every, verdict(model, arith, StringDomain(("a", "b"), 1, 15), "output-bounds", bound, engine="enumerate"))


# ---------------------------------------------------------------- where counting stops paying, and what it cannot prove


def test_merging_that_does_not_pay_is_noticed_early() -> None:
    """Two causal softmax layers at 16/8 (the issue's measurement): every string of length n is its own state
    (2^n states); the engine stops at the first length with 4096 strings (12) or earlier, says why, and reports
    the classes and states it saw (never a verdict beyond them)."""
    model = causal_softmax(layers=2, weight_range=F(1))
    result = verdict(
        model, Fixed(16, 8), StringDomain(("a", "b"), 0, 60), "output-bounds", {"hi": 10**6}, engine="counting"
    )
    assert result.status == "unknown" and "merging does not pay" in result.detail
    statistics = result.statistics
    assert statistics["not_paying"] and statistics["explored_up_to"] <= 12
    assert statistics["states_per_length"] == [2**n for n in range(statistics["explored_up_to"] + 1)]
    assert statistics["model"]["classes_per_head"]["layers[0].heads[0]"] == 3  # a, b and BOS


def test_states_that_repeat_decide_every_length() -> None:
    """Per-probability rounding at 2 fractional bits: a uniform head's weight ⌊1/n⌋_f is 0 from n = 5 keys on, so
    every coordinate freezes, the states of one length repeat at the next, and every length is decided by the
    exploration alone (no induction: per-probability is not encoded there)."""
    result = compile_program(load_program(EXAMPLES / "L1.cr"), frac=2)
    arith = Fixed(result.bits, 2, "per-probability")
    domain = StringDomain(("a", "b"), 1, 8)
    every = verdict(result.model, arith, domain, "output-bounds", {"hi": 100, "lengths": "all"}, engine="counting")
    assert every.label == "proved (all lengths)" and 4 <= every.statistics["closed_at"] <= 8
    assert "induction" not in every.statistics


def test_every_length_names_what_is_not_encoded() -> None:
    model = causal_softmax()
    domain = StringDomain(("a", "b"), 0, 6)
    options = {"model": model, "on": "readout", "lengths": "all"}
    per_probability = verdict(
        model, Fixed(16, 8, "per-probability"), domain, "equivalent-to", options, engine="counting"
    )
    assert per_probability.status == "unknown" and "per-probability" in per_probability.detail
    hardmax = dataclasses.replace(
        model,
        blocks=tuple(
            Block(
                dataclasses.replace(
                    b.attention, heads=tuple(dataclasses.replace(h, scoring="hardmax") for h in b.attention.heads)
                ),
                b.feed_forward,
            )
            for b in model.blocks
        ),
    )
    exact = verdict(hardmax, Exact(), domain, "equivalent-to", {**options, "model": hardmax}, engine="counting")
    assert exact.status == "unknown" and "exact arithmetic" in exact.detail


# ---------------------------------------------------------------- which prefixes a string constrains


def test_checked_prefixes_follow_the_positions_numbering() -> None:
    every = CountingGoal(("a", "b"), 2, 6)
    assert every.checked(4) == {1, 2, 3, 4} and every.ever_checked() == (frozenset(), 1)
    last = CountingGoal(("a", "b"), 2, 6, positions=(-1,))  # the last letter: prefix n, for every n >= 2
    assert last.checked(4) == {4} and last.ever_checked() == (frozenset(), 2)
    chosen = CountingGoal(("a", "b"), 0, 6, positions=(0, -2), empty_checked=True)
    assert chosen.checked(1) == {0, 1} and chosen.checked(5) == {0, 1, 4}
    assert chosen.ever_checked() == (frozenset({0, 1}), 1)  # -2: prefix n - 1 of every n >= 2
    accept = CountingGoal(("a", "b"), 0, 6, first_position=0)  # crasp-equivalence from the empty word
    assert accept.checked(2) == {0, 1, 2}

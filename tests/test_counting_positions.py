"""Engine counting with positions (issue 41): positional C-RASP programs as counter machines with windows, far
counts and the position; RPE, ALiBi and periodic RoPE heads as windows and phases; every length.

* ``crasp/guards.py``: windows, periods and far classes from hand computation, and the refusals by formula;
* the program's machine against the C-RASP interpreter, and the counter model against the reference interpreter,
  on random positional programs and models (bit for bit, every position);
* every-length verdicts against enumeration on random positional programs and their mutants (proved: nothing
  fails up to the lengths enumeration reaches; refuted: the witness replays on both interpreters);
* the seven programs of the issue, written afresh (examples/crasp/positional/), against direct definitions of
  their languages, and proved at every length (slow).
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from fractions import Fraction as F
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from helpers import verdict
from verify_tf.builders.crasp_compiler import compile_program
from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.crasp import CraspError, load_program, run_program
from verify_tf.crasp.guards import MAX_MODULUS, MAX_WINDOW, TooLarge, shape
from verify_tf.crasp.machine import ProgramMachine
from verify_tf.crasp.parser import parse_program
from verify_tf.domain import StringDomain
from verify_tf.engines.counting.applies import window
from verify_tf.engines.counting.counters import CounterModel, NotApplicable
from verify_tf.ir import Alibi, Frequency, Rotary
from verify_tf.semantics import Fixed, evaluate

ROOT = Path(__file__).resolve().parent.parent
POSITIONAL = ROOT / "examples" / "crasp" / "positional"
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ---------------------------------------------------------------- the shape of guards


def _guard_shape(guard: str):
    program = parse_program(f'alphabet a b\ng(i, j) = {guard}\naccept = #[g] "a" > 0\n')
    ((_, found),) = shape(program).guards
    return found


@pytest.mark.parametrize(
    ("guard", "window_size", "far"),
    [
        # j == i - 4 holds at d = 4 only: the distances 0..4 exactly, nothing beyond
        ("j == i - 4", 5, []),
        # j >= i - 2: d <= 2, threshold 3 (|constant| 2 over coefficient 1, plus one)
        ("j >= i - 2", 3, []),
        # j <= i - 3: every d >= 3; beyond the window (d >= 4) one class of far positions
        ("j <= i - 3", 4, ["j%0"]),
        # j == 0: no distance atom (window 1); the first letter is the far class "j = 0", no other class is read
        ("j == 0", 1, ["j=0"]),
        # (i - j) % 2 == 0: the even distances, periodic: window 1, far classes by j's residue modulo 2
        ("(i - j) % 2 == 0", 1, ["j%0", "j%1"]),
    ],
)
def test_guard_windows_and_far_classes(guard: str, window_size: int, far: list[str]) -> None:
    found = _guard_shape(guard)
    assert found.window == window_size
    assert [str(cls) for cls in found.far] == far


@pytest.mark.parametrize(
    ("source", "message"),
    [
        # W = 101 (distances 0..100) past the window limit 64; the parser lets it through (it settles in 102)
        ('alphabet a b\nfar(i, j) = j == i - 100\naccept = #[far] "a" > 0\n', "hostile.cr:2: .* needs a window of 101"),
        ('alphabet a b\nfar(i, j) = j == i - 65\naccept = #[far] "a" > 0\n', "hostile.cr:2: .* needs a window of 66"),
        # two unary predicates whose periods are each small, but lcm(81, 64) = 5184 is past 4096
        (
            "alphabet a b\np(i) = i % 81 == 0\nq(i) = i % 64 == 0\naccept = p && q\n",
            "the positions' period .* is 5184, past the limit 4096",
        ),
    ],
)
def test_positional_states_past_the_limits_are_refused_by_formula(source: str, message: str) -> None:
    """The size comes from the atoms' coefficients, never from enumerating positions, and the refusal names the
    predicate's file:line (where one predicate is to blame) and the number past the limit."""
    program = parse_program(source, "hostile.cr")
    with pytest.raises(TooLarge, match=message):
        shape(program)
    machine = ProgramMachine(program)
    assert machine.not_applicable and "past the limit" in machine.not_applicable
    assert MAX_WINDOW == 64 and MAX_MODULUS == 4096


@pytest.mark.parametrize(
    "condition", ["j == i - 1000000", "i % 1000003 == 5"], ids=["a million positions back", "a period of 1000003"]
)
def test_hostile_predicates_are_refused_where_they_are_written(condition: str, tmp_path: Path) -> None:
    """Past 4096 positions the parser refuses the predicate at its file:line, before the compiler or the engine
    tabulates anything (it took 54 s and a traceback, or ran past --timeout, before issue 41)."""
    path = tmp_path / "huge.cr"
    head = "far(i, j)" if "j" in condition else "far(i)"
    use = '#[far] "a" > 0' if "j" in condition else "far"
    path.write_text(f"alphabet a b\n{head} = {condition}\naccept = {use}\n")
    with pytest.raises(CraspError, match=r"huge.cr:2:\d+: the condition settles only after"):
        compile_program(load_program(path))


# ---------------------------------------------------------------- the program's machine is the interpreter

GUARDS = [
    "j == i - 1",
    "j == i - 2",
    "j >= i - 2",
    "j <= i - 2",
    "j == 0",
    "j <= 1",
    "(i - j) % 2 == 0",
    "j % 3 == 1",
    "i % 2 == 0 && j == i - 1",
    "j == i - 1 || j == 0",
    "!(j == i)",
]
UNARY = ["i % 2 == 1", "i >= 3", "i < 2", "i % 3 == 0 || i == 1"]


@st.composite
def positional_programs(draw) -> str:
    """A random program over {a, b} with guarded counts and position tests (not all of them compile)."""
    guard = draw(st.sampled_from(GUARDS))
    other = draw(st.sampled_from(GUARDS))
    unary = draw(st.sampled_from(UNARY))
    counted = draw(st.sampled_from(['"a"', '"b"', "p", '("a" && p)', "x"]))
    limit = draw(st.integers(0, 2))
    comparison = draw(st.sampled_from([">", "==", "<=", ">="]))
    output = draw(
        st.sampled_from(
            [
                "y",
                "y && p",
                "y || !p",
                f'#[h] "b" {comparison} #[g] {counted}',
                f"#[h] x {comparison} {limit}",
                f'#(y) {comparison} #"a" - {limit}',
            ]
        )
    )
    return (
        f"alphabet a b\ng(i, j) = {guard}\nh(i, j) = {other}\np(i) = {unary}\n"
        f'x = "a" && #"b" > {limit}\ny = #[g] {counted} {comparison} {limit}\naccept = {output}\n'
    )


def machine_outputs(machine: ProgramMachine, word: str) -> list[bool]:
    state, found = machine.initial, []
    for position, letter in enumerate(word):
        state, output = machine.step(state, letter, position)
        found.append(output)
    return found


@settings(max_examples=80, **SETTINGS)
@given(positional_programs(), st.lists(st.text("ab", min_size=1, max_size=10), min_size=1, max_size=8))
def test_the_positional_machine_is_the_interpreter(source: str, words: list[str]) -> None:
    """At every position of every word the machine's output is the C-RASP interpreter's."""
    program = parse_program(source)
    machine = ProgramMachine(program)
    assert machine.not_applicable == ""
    for word in words:
        assert machine_outputs(machine, word) == list(run_program(program, word).output), (source, word)


# ---------------------------------------------------------------- the counter model is the interpreter


@st.composite
def positional_models(draw):
    """A random causal alphabet model with RPE, ALiBi or periodic RoPE heads, in fixed arithmetic."""
    positional = draw(st.sampled_from(["rpe", "alibi", "rope"]))
    config = RandomConfig(
        seed=draw(st.integers(0, 10**6)),
        width=draw(st.integers(1, 3)),
        layers=draw(st.integers(1, 2)),
        heads=draw(st.integers(1, 2)),
        key_dim=2 if positional == "rope" else draw(st.sampled_from([None, 1])),
        ffn_width=draw(st.sampled_from([0, 2])),
        scoring=draw(st.sampled_from(["hardmax", "softmax"])),
        causal=True,
        positional="rpe" if positional == "rpe" else "standard",
        max_length=9,
        weight_range=F(draw(st.sampled_from([1, 2]))),
        denominator=draw(st.sampled_from([1, 2])),
        alphabet=("a", "b"),
        bos=draw(st.sampled_from(["^", None])),
    )
    model = random_model(config)
    if positional != "rpe":
        slope = F(draw(st.sampled_from([1, 2, 4])))
        period = draw(st.sampled_from([2, 3, 4]))

        def change(head):
            if positional == "alibi":
                return dataclasses.replace(head, positional="alibi", alibi=Alibi(slope))
            turns = Frequency("turns", F(1, period))
            return dataclasses.replace(head, positional="rope", rope=Rotary((turns,), "interleaved"))

        blocks = []
        for block in model.blocks:
            layer = block.attention
            if layer is not None:
                layer = dataclasses.replace(layer, heads=tuple(change(h) for h in layer.heads))
            blocks.append(dataclasses.replace(block, attention=layer))
        model = dataclasses.replace(model, blocks=tuple(blocks))
    bits = draw(st.sampled_from([5, 6, 8]))
    arith = Fixed(bits, draw(st.integers(1, 2)), draw(st.sampled_from(["exact-sums", "per-probability"])))
    return model, arith


def counter_trace(counter: CounterModel, word: str) -> list:
    state, positions, first, _ = counter.start()
    found = [] if first is None else [(first.readout, first.stream)]
    for letter in word:
        state, observation, _ = counter.step(state, positions, letter)
        positions += 1
        found.append((observation.readout, observation.stream))
    return found


@settings(max_examples=60, **SETTINGS)
@given(positional_models(), st.lists(st.text("ab", min_size=0, max_size=9), min_size=1, max_size=6))
def test_the_positional_counter_model_is_the_interpreter(case, words) -> None:
    """Windows (RPE, ALiBi past its horizon) and phases (RoPE at 2π/M): every readout and final stream equal the
    reference interpreter's, bit for bit."""
    model, arith = case
    try:
        counter = CounterModel.of(model, arith)
    except NotApplicable:  # a window past the limit (a wide ALiBi horizon), a zero slope
        assume(False)
        return
    for word in words:
        trace = evaluate(model, arith, tuple(word))
        assert counter_trace(counter, word) == list(zip(trace.readout, trace.output)), word


def test_the_alibi_horizon_by_hand() -> None:
    """specs/counting-alibi-window.yaml's head: q = 1 (a zero row, bias 1), k ≤ min(8, 2·8 + 1/2) = 8 on the 5-bit
    grid with one fractional bit, so q·k ≤ 8 and every key farther than ⌊(8 + 8 − 1/2)/4⌋ = 3 scores −8."""
    from verify_tf.spec import load_spec

    spec = load_spec(ROOT / "specs" / "counting-alibi-window.yaml")
    head = spec.model.blocks[0].attention.heads[0]
    assert window(head, spec.arithmetic) == 3
    assert window(dataclasses.replace(head, alibi=Alibi(F(8))), spec.arithmetic) == 1  # ⌊15.5 / 8⌋


def test_rope_at_an_irrational_angle_is_refused_with_the_reason() -> None:
    model = random_model(
        RandomConfig(
            seed=1,
            width=2,
            layers=1,
            heads=1,
            key_dim=2,
            scoring="hardmax",
            causal=True,
            positional="rope",
            alphabet=("a", "b"),
            bos="^",
        )
    )
    with pytest.raises(NotApplicable, match="not a rational number of turns, so its rotation table is not periodic"):
        CounterModel.of(model, Fixed(8, 2))


# ---------------------------------------------------------------- every length against enumeration

COMPILABLE = ["j == i - 1", "j == i - 2", "j >= i - 2", "j <= i - 1", "j == 0", "j == i - 1 || j == 0"]


def _random_pair(rng: random.Random) -> tuple[str, str]:
    """A compilable positional program and a mutant of it (one guard, constant or operator changed)."""
    guard, unary = rng.choice(COMPILABLE), rng.choice(["i % 2 == 1", "i >= 2", "i % 3 == 0"])
    limit, op = rng.randint(0, 1), rng.choice([">", "=="])
    counted = rng.choice(['"a"', '"b"', '("a" && p)'])
    output = rng.choice(["y", "y && p", "y || p", f'#y {op} #"b"'])
    source = f"alphabet a b\ng(i, j) = {guard}\np(i) = {unary}\ny = #[g] {counted} {op} {limit}\naccept = {output}\n"
    mutations = [
        (f"g(i, j) = {guard}", f"g(i, j) = {rng.choice([g for g in COMPILABLE if g != guard])}"),
        (f"{op} {limit}\n", f"{op} {limit + 1}\n"),
        (f"p(i) = {unary}", "p(i) = i % 2 == 0"),
    ]
    old, new = rng.choice(mutations)
    return source, source.replace(old, new, 1)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(8))
def test_every_length_agrees_with_enumeration(seed: int, tmp_path: Path) -> None:
    """The compiled model of a random positional program against the program itself and against a mutant: the
    every-length verdict (explored to length 5, the rest by the induction) is never contradicted by enumerating
    every string up to length 8, and a refutation's witness replays on the two interpreters (whatever its
    length)."""
    rng = random.Random(seed)
    source, mutant = _random_pair(rng)
    compiled = compile_program(parse_program(source), bits=6)
    model, arith = compiled.model, compiled.arithmetic
    for index, reference in enumerate((source, mutant)):
        path = tmp_path / f"reference{index}.cr"  # a file per program: programs are read once per path
        path.write_text(reference)
        every = verdict(
            model,
            arith,
            StringDomain(("a", "b"), 1, 5),
            "crasp-equivalence",
            {"program": path, "lengths": "all"},
            engine="counting",
        )
        program = parse_program(reference)
        disagreeing = [
            "".join(word)
            for n in range(1, 9)
            for word in itertools.product("ab", repeat=n)
            if (evaluate(model, arith, word).readout[-1] > 0) != run_program(program, "".join(word)).output[-1]
        ]
        if every.status == "proved":
            assert not disagreeing, (reference, disagreeing[:3])
        elif every.status == "refuted":
            witness = every.counterexample["string"]
            word = tuple(witness)
            decided = evaluate(model, arith, word).readout[-1] > 0
            assert decided != run_program(program, "".join(word)).output[-1], (reference, witness)
            if disagreeing:
                assert "".join(word) == min(disagreeing, key=lambda w: (len(w), w)), (reference, witness)
        else:
            assert every.status == "unknown", every.detail
        if reference == source:
            assert every.status == "proved", every.detail  # the compiler's own program: exact at every length


# ---------------------------------------------------------------- the seven programs of the issue


def _factors(word: str, pair: str) -> int:
    return sum(1 for k in range(len(word) - 1) if word[k : k + 2] == pair)


def _dyck(word: str) -> bool:
    depth = 0
    for letter in word:
        depth += 1 if letter == "a" else -1
        if depth < 0:
            return False
    return depth == 0


def _binary(x: int) -> str:
    return "".join(str((x >> k) & 1) for k in range(4))


LANGUAGES = {
    "aa_star": (("a", "b"), lambda w: len(w) > 0 and len(w) % 2 == 0 and set(w) == {"a"}),
    "contains_ab": (("a", "b"), lambda w: "ab" in w),
    "copy4": (("a", "b", "c"), lambda w: len(w) == 8 and w[:4] == w[4:]),
    "increment": (("0", "1"), lambda w: w in {_binary(x) + _binary(x + 1) for x in range(15)}),
    "dyck1_mod4": (("a", "b"), lambda w: _dyck(w) and len(w) % 4 == 0),
    "ab_ba_factors": (("a", "b"), lambda w: _factors(w, "ab") == _factors(w, "ba")),
    "a_then_b": (("a", "b"), lambda w: all(w[k + 1 : k + 2] == "b" for k, x in enumerate(w) if x == "a")),
    "first_equals_last": (("a", "b"), lambda w: w[0] == w[-1]),
    "recent_b": (("a", "b"), lambda w: "b" in w[-3:]),
}


@pytest.mark.parametrize("name", sorted(LANGUAGES))
def test_the_positional_programs_define_their_languages(name: str) -> None:
    """Each program of examples/crasp/positional/ accepts exactly its language on every word up to length 8
    (direct definitions above, from the descriptions)."""
    alphabet, language = LANGUAGES[name]
    program = load_program(POSITIONAL / f"{name}.cr")
    for n in range(1, 9):
        for letters in itertools.product(alphabet, repeat=n):
            word = "".join(letters)
            assert run_program(program, word).output[-1] == language(word), (name, word)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "reference"),
    [(name, name) for name in sorted(set(LANGUAGES) - {"recent_b"})] + [("ab_ba_factors", "first_equals_last")],
)
def test_the_positional_programs_are_proved_at_every_length(name: str, reference: str) -> None:
    """The compiled model of each program equals the program (and ab_ba_factors' model equals first_equals_last,
    a different program of the same language) at every length, by the counting engine."""
    alphabet, _ = LANGUAGES[name]
    compiled = compile_program(load_program(POSITIONAL / f"{name}.cr"), bits=5)
    every = verdict(
        compiled.model,
        compiled.arithmetic,
        StringDomain(alphabet, 1, 8),
        "crasp-equivalence",
        {"program": POSITIONAL / f"{reference}.cr", "lengths": "all"},
        engine="counting",
        timeout=300.0,
    )
    assert every.status == "proved", every.detail
    assert "induction over positions" in every.detail


@pytest.mark.slow
@settings(max_examples=16, **SETTINGS)
@given(positional_models(), st.data())
def test_every_length_output_bounds_agree_with_enumeration(case, data) -> None:
    """output-bounds at every length on random RPE, ALiBi and RoPE models (the induction's windows, far counts and
    phases, rotations in the coverage trees of later blocks): proved is never contradicted by enumerating every
    string up to length 7 (counting explores to 4, the rest is the induction's), and refuted names enumeration's
    least witness when that is within 7."""
    model, arith = case
    try:
        CounterModel.of(model, arith)
    except NotApplicable:
        assume(False)
        return
    rng = random.Random(data.draw(st.integers(0, 1000)))
    seen = sorted(
        q for _ in range(8) for q in evaluate(model, arith, tuple(rng.choice("ab") for _ in range(6))).readout
    )
    hi = seen[data.draw(st.sampled_from([len(seen) // 2, len(seen) - 1]))]
    every = verdict(
        model, arith, StringDomain(("a", "b"), 1, 4), "output-bounds", {"hi": hi, "lengths": "all"}, engine="counting"
    )
    bounded = verdict(model, arith, StringDomain(("a", "b"), 1, 7), "output-bounds", {"hi": hi}, engine="enumerate")
    if every.status == "proved":
        assert bounded.status == "proved", bounded.detail
    elif every.status == "refuted":
        word = tuple(every.counterexample["input"])
        assert any(q > hi for q in evaluate(model, arith, word).readout[(1 if model.tokens.bos else 0) :]), word
        if bounded.status == "refuted":
            assert tuple(bounded.counterexample["input"]) == word

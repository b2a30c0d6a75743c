"""C-RASP with positions: positional predicates, the peer interpreter's syntax, one numbering from 0, and the
compiled heads (copy heads with RPE tables, periodic heads with RoPE) checked against the interpreter.

Independent checkers: each language of coli-saar/c-rasp's examples is decided here directly from its definition
in the peer's comments ((aa)*, COPY4, INCREMENT), never through C-RASP.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from verify_tf.builders.crasp_compiler import compile_program
from verify_tf.cli.crasp import crasp
from verify_tf.crasp import (
    CraspError,
    GuardedCount,
    PositionTest,
    Scale,
    format_program,
    load_program,
    parse_program,
    program_depth,
    run_program,
)
from verify_tf.crasp.positions import atoms, dependence, profile
from verify_tf.runner import Overrides, check_property
from verify_tf.semantics import evaluate
from verify_tf.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "crasp"


def words(alphabet: str, max_length: int, min_length: int = 0):
    for length in range(min_length, max_length + 1):
        for letters in itertools.product(alphabet, repeat=length):
            yield "".join(letters)


# --------------------------------------------------------------------------- the peer's languages, directly


def in_aa_star(word: str) -> bool:
    """(aa)* without the empty word (the peer's program accepts at the last position only)."""
    return len(word) > 0 and len(word) % 2 == 0 and set(word) == {"a"}


def in_copy4(word: str) -> bool:
    return len(word) == 8 and word[:4] == word[4:]


def br(x: int) -> str:
    """x in binary, least significant digit first, four digits (the peer's br)."""
    return "".join(str((x >> k) & 1) for k in range(4))


INCREMENT = {br(x) + br(x + 1) for x in range(15)}


def in_increment(word: str) -> bool:
    return word in INCREMENT


def test_increment_has_the_peers_examples() -> None:
    # examples/increment_examples.txt of coli-saar/c-rasp: four members, then 1000 1000 (not a member)
    assert {"00001000", "10000100", "11000010", "10100110"} <= INCREMENT
    assert "10001000" not in INCREMENT and "11111111" not in INCREMENT and len(INCREMENT) == 15


@pytest.mark.parametrize(
    ("name", "alphabet", "decide"),
    [("aa_star", "ab", in_aa_star), ("copy4", "abc", in_copy4), ("increment", "01", in_increment)],
)
def test_programs_decide_their_languages_on_every_string_up_to_length_8(name, alphabet, decide) -> None:
    program = load_program(EXAMPLES / f"{name}.cr")
    checked = accepted = 0
    for word in words(alphabet, 8):
        trace = run_program(program, word)
        assert trace.accepted == decide(word), word
        checked, accepted = checked + 1, accepted + trace.accepted
    # 2^9 - 1, (3^9 - 1)/2 and 2^9 - 1 strings; |(aa)* ∩ lengths 1..8| = 4, |COPY4| = 3^4, |INCREMENT| = 15
    assert (checked, accepted) == {"aa_star": (511, 4), "copy4": (9841, 81), "increment": (511, 15)}[name]


def test_example_programs_use_positions_and_have_the_expected_depths() -> None:
    depths = {name: program_depth(load_program(EXAMPLES / f"{name}.cr")) for name in ("aa_star", "copy4", "increment")}
    assert depths == {"aa_star": 1, "copy4": 2, "increment": 3}
    for name in ("aa_star", "copy4", "increment"):
        assert load_program(EXAMPLES / f"{name}.cr").positional


# --------------------------------------------------------------------------- syntax


def test_peer_syntax_comments_conditionals_and_constant_multiples() -> None:
    program = parse_program(
        "// a comment line\n"
        'one_if_a = 1 if "a" else 0    // the peer\'s conditional\n'
        'twice = 2*#"b" + #"a"*3\n'
        "x = twice - one_if_a >= 2\n"
    )
    values = run_program(program, "abba").values
    assert values["one_if_a"] == (1, 0, 0, 1)
    assert values["twice"] == (3, 5, 7, 10)  # 2·#b + 3·#a at each position
    assert isinstance(program.definition("twice").expr.left, Scale)
    assert parse_program(format_program(program)) == program


@pytest.mark.parametrize(
    ("source", "location", "message"),
    [
        ("#import pos_even\nx = pos_even\n", "1:1", "imports are not supported; define pos_even with a positional"),
        ('x = #"a" * #"b" > 0\n', "1:10", "counts are multiplied by integer constants only"),
        ("p(i, j) = j == i - 1\nx = p\n", "2:5", "'p' relates two positions; it guards a count"),
        ('u(i) = i % 2 == 0\nx = #[u] "a" > 0\n', "2:7", "'u' is unary; a guard relates"),
        ('x = #[nope] "a" > 0\n', "1:7", "undefined predicate 'nope'"),
        ("p(i, j) = k == i\n", "1:11", "'k' is not a parameter of this predicate"),
        ("p(i) = i % 0 == 0\n", "1:12", "the modulus must be a positive integer constant"),
        ("p(i, j) = i * j == 0\n", "1:13", "positions are multiplied by integer constants only"),
        ("p(i, j, k) = true\n", "1:9", "a positional predicate has one or two parameters"),
        ('x = 1 if "a" 0\n', "1:14", "expected 'else'"),
        # the .cr input limits hold inside predicate bodies (a RecursionError before; docs/crasp.md, limits)
        ("p(i) = " + "(" * 50_000 + "i == 0" + ")" * 50_000 + "\n", "1:108", "nests deeper than 100 levels"),
        ("p(i) = " + "!" * 50_000 + "(i == 0)\n", "1:108", "nests deeper than 100 levels"),
        ("p(i) = " + " + ".join(["i"] * 50_000) + " == 0\n", "1:8", "the condition has 50000 operators"),
        ("p(i) = i == " + "9" * 5000 + "\n", "1:13", "a constant of 5000 digits"),
    ],
    ids=lambda value: value[:40] if isinstance(value, str) else None,
)
def test_errors_are_located_and_say_what_to_write(source: str, location: str, message: str) -> None:
    with pytest.raises(CraspError) as caught:
        parse_program(source, "p.cr")
    text = str(caught.value)
    assert text.startswith(f"p.cr:{location}: "), text
    assert message in text


def test_import_error_names_both_spellings() -> None:
    with pytest.raises(CraspError) as caught:
        parse_program("#import pred4\n", "copy4.cr")
    assert "pred4(i) = i % 2 == 0" in caught.value.hint and "pred4(i, j) = j == i - 1" in caught.value.hint


def test_guarded_count_and_unary_test_semantics_positions_from_zero() -> None:
    program = parse_program(
        "alphabet a b\n"
        "prev(i, j) = j == i - 1\n"
        "near(i, j) = i - j <= 1\n"
        "even(i) = i % 2 == 0\n"
        'after_a = #[prev] "a"\n'
        'window = #[near] "a"\n'
        "x = even\n"
    )
    values = run_program(program, "aab").values
    assert values["after_a"] == (0, 1, 1)  # position 0 has no predecessor
    assert values["window"] == (1, 2, 1)  # the a's among positions i - 1 and i
    assert values["x"] == (True, False, True)  # even(0), even(1), even(2)
    assert isinstance(program.definition("after_a").expr, GuardedCount)
    assert isinstance(program.definition("x").expr, PositionTest)
    assert program_depth(program) == 0 and program.definition("x").type.value == "boolean"
    assert [program_depth(parse_program(s)) for s in ('p(i,j) = j < i\nx = #[p] "a" > 0\n',)] == [1]


def test_predicate_shapes() -> None:
    program = parse_program("p(i, j) = (i - j) % 3 == 1 && j >= 2 || i == 2*j\nx = #[p] true > 0\n")
    kinds = [dependence(atom) for atom in atoms(program.predicates[0].body)]
    assert kinds == ["d", "j", "mixed"]
    unary = parse_program("u(i) = i >= 3 && i % 4 != 0 || i == 1\nx = u\n").predicates[0]
    shape = profile(lambda x: unary.holds(x), list(atoms(unary.body)))
    assert [x in shape for x in range(12)] == [unary.holds(x) for x in range(12)]
    assert len(shape.cycle) == 4 and shape.cycle.count(True) == 3


def test_one_numbering_in_crasp_run_and_in_counterexamples() -> None:
    """`crasp run` numbers rows from 0, and a counterexample at the last letter of 'aa' says position 1."""
    result = CliRunner().invoke(crasp, ["run", str(EXAMPLES / "aa_star.cr"), "aab"])
    assert result.exit_code == 0, result.output
    rows = [[c.strip() for c in line.strip("│").split("│")] for line in result.stdout.splitlines() if line[:1] == "│"]
    assert [row[:3] for row in rows] == [["0", "a", "false"], ["1", "a", "true"], ["2", "b", "false"]]
    spec = load_spec(ROOT / "specs" / "crasp-aa_star-mutated.yaml")
    verdict = check_property(spec, spec.properties[0], Overrides())
    assert verdict.status == "refuted"
    assert verdict.counterexample["summary"].startswith("string 'aa' at position 1:")


# --------------------------------------------------------------------------- compiling positions


def agree_on_every_prefix(source: str, alphabet: str, length: int, frac: int = 0) -> int:
    """Compile ``source`` and compare the model's decision with the program's at every position of every string of
    ``length`` (every head is causal: position p decides the prefix of length p + 1)."""
    program = parse_program(f"alphabet {' '.join(alphabet)}\n" + source)
    compiled = compile_program(program, frac=frac)
    checked = 0
    for word in words(alphabet, length, length):
        trace = evaluate(compiled.model, compiled.arithmetic, list(word))
        assert trace.readout[0] <= 0  # BOS: the empty word is rejected
        decisions = [q > 0 for q in trace.readout[1:]]
        assert decisions == list(run_program(program, word).output), (source, word)
        checked += 1
    return checked


@pytest.mark.parametrize(
    ("source", "length"),
    [
        # unary tests: thresholds (copies of "not BOS") and residues (periodic heads) and both
        ('u(i) = i >= 2\nx = u && "a"\n', 6),
        ('u(i) = i == 3 || i == 0\nx = u || "b"\n', 6),
        ("u(i) = i % 3 == 1\nx = u\n", 6),
        ("u(i) = i >= 2 && i % 4 != 0\nx = u\n", 6),
        # guards: a finite window, a co-finite set, a fixed offset with a test on j and one on i
        ('g(i, j) = i - j <= 2\nx = #[g] "a" >= 2\n', 6),
        # (width 39, 7 blocks: 0.1 CPU s a word on the interpreter, so its strings stop at length 5)
        pytest.param('g(i, j) = i - j > 1\nx = #[g] "a" > #[g] "b"\n', 5, id="co-finite"),
        ('g(i, j) = j == i - 1 && j % 2 == 0\nx = #[g] "a" > 0\n', 6),
        ('g(i, j) = i % 2 == 1 && j == i - 1 || j == i\nx = #[g] "b" == 1\n', 6),
        # counts of copies: depth 2 through a guarded count
        ('g(i, j) = j == i - 2\ny = "a" && #[g] "a" > 0\nx = 2*#y >= #true\n', 6),
    ],
)
def test_compiled_positional_programs_agree_with_the_interpreter(source: str, length: int) -> None:
    assert agree_on_every_prefix(source, "ab", length) == 2**length


def test_periodic_guards_and_mixed_guards_are_refused_with_a_reason() -> None:
    with pytest.raises(CraspError, match=re.escape("holds at infinitely many distances i - j, but not at almost all")):
        compile_program(parse_program('g(i, j) = (i - j) % 2 == 0\nx = #[g] "a" > 0\n'))
    with pytest.raises(CraspError, match="compares i and j other than through their distance"):
        compile_program(parse_program('g(i, j) = 2*j <= i\nx = #[g] "a" > 0\n'))


def test_periodic_heads_need_enough_fractional_bits() -> None:
    # modulo 5 with f = 0 the rotation table is (c, s) = (1, 0), (0, 1), (-1, 1), (-1, -1), (0, -1) at stream
    # positions 0..4 (cos 72° = 0.31 rounds to 0, sin 144° = 0.59 to 1): the query for stream residue 1 (word
    # position i % 5 == 0) is (0, -1), which scores s_t: 1 at t = 1 and t = 2 alike (a tie). f = 1 separates it.
    source = "u(i) = i % 5 == 0\nx = u\n"
    with pytest.raises(CraspError, match="needs more fractional bits") as caught:
        compile_program(parse_program("alphabet a\n" + source))
    frac = int(re.search(r"--frac (\d+)", caught.value.hint).group(1))
    assert frac == 1
    assert agree_on_every_prefix(source, "a", 12, frac=frac) == 1


def test_compiled_examples_describe_their_positional_heads() -> None:
    described = {
        name: compile_program(load_program(EXAMPLES / f"{name}.cr")).describe()[2]
        for name in ("aa_star", "copy4", "increment")
    }
    assert "1 periodic position tests" in described["aa_star"]
    assert "3 copied booleans" in described["copy4"]  # one copy head, one coordinate per letter
    assert "2 copied booleans" in described["increment"]  # next_digit and its negation


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "status", "engine", "summary"),
    [
        ("crasp-aa_star", "proved", None, None),
        ("crasp-copy4", "proved", None, None),
        ("crasp-increment", "proved", None, None),
        # the least strings, argued in each spec's comment: shorter strings are rejected by both (the mutations
        # leave the length tests alone), and the first string of the length the program accepts disagrees
        ("crasp-aa_star-mutated", "refuted", None, "string 'aa' at position 1: the program accepts, the model"),
        ("crasp-copy4-mutated", "refuted", None, "string 'aaaaaaaa' at position 7: the program accepts, the model"),
        ("crasp-increment-mutated", "refuted", None, "string '00000000' at position 7: the program rejects, the"),
    ],
)
def test_shipped_positional_specs(name: str, status: str, engine: str | None, summary: str | None) -> None:
    spec = load_spec(ROOT / "specs" / f"{name}.yaml")
    verdict = check_property(spec, spec.properties[0], Overrides())
    assert verdict.status == status, verdict.detail
    if summary is not None:
        assert verdict.counterexample["summary"].startswith(summary)


def test_every_length_is_proved_for_positional_programs() -> None:
    """`lengths: all` on a positional program: the counting engine keeps the copy head's window beside the counts
    (issue 41; before it, an honest unknown) and proves copy4 at every length by induction from length 5 (the
    copy head's window of 4 keys full, the program's threshold i >= 5 passed)."""
    spec = load_spec(ROOT / "specs" / "crasp-copy4.yaml")
    every = spec.properties[1]
    assert every.label == "every length"
    verdict = check_property(spec, every, Overrides())
    assert (verdict.status, verdict.engine) == ("proved", "counting"), verdict.detail
    assert "induction over positions from length 5" in verdict.detail

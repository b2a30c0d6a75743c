"""Tests of the C-RASP language: parser, type errors, depth, interpreter, printer and CLI."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

from verify_tf.cli.crasp import crasp
from verify_tf.crasp import (
    ArithOp,
    BoolConst,
    BoolOp,
    Compare,
    Conditional,
    Count,
    CountConst,
    CraspError,
    Definition,
    Expr,
    Letter,
    MinMax,
    Neg,
    Not,
    Program,
    Ref,
    Scale,
    Type,
    accepts,
    definition_depths,
    evaluate,
    format_expr,
    format_program,
    load_program,
    parse_program,
    program_depth,
    run_program,
)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "crasp"


def expression_of(source: str) -> Expr:
    """The expression of definition ``x`` in ``source``; a boolean output is appended."""
    return parse_program(source + "\nok = true\n").definition("x").expr


# --------------------------------------------------------------------------- parsing


def test_parse_majority_example() -> None:
    program = load_program(EXAMPLES / "majority.cr")
    assert program.alphabet == ("a", "b")
    assert program.names == ("na", "nb", "majority")
    assert program.output == "majority"
    assert program.definition("na").expr == Count(Letter("a"))
    assert program.definition("majority").expr == Compare(">", Ref("na", Type.COUNT), Ref("nb", Type.COUNT))


def test_output_defaults_to_last_definition_and_alphabet_to_letters_used() -> None:
    program = parse_program('nb = #"b"\nna = #Q(a)\nmore = na > nb\n')
    assert program.output == "more"
    assert program.alphabet == ("a", "b")


def test_output_line_selects_a_definition_anywhere_in_the_file() -> None:
    program = parse_program('output first\nfirst = "a"\nsecond = "b"\n')
    assert program.output == "first"


def test_letter_alias_and_quoted_symbols() -> None:
    assert expression_of("x = Q(a)") == Letter("a")
    assert expression_of("x = Q('(')") == Letter("(")
    assert expression_of("alphabet 0 1\nx = Q(1) && '0'") == BoolOp("&&", Letter("1"), Letter("0"))


def test_hash_counts_where_an_operand_is_expected_and_comments_elsewhere() -> None:
    source = '# a comment line\nx = #"a" + #(#"b" > 0) # trailing comment\n   # indented comment\n'
    counted_b = Count(Compare(">", Count(Letter("b")), CountConst(0)))
    assert expression_of(source) == ArithOp("+", Count(Letter("a")), counted_b)


def test_precedence_and_associativity() -> None:
    assert expression_of('x = "a" || "b" && !"a"') == BoolOp(
        "||", Letter("a"), BoolOp("&&", Letter("b"), Not(Letter("a")))
    )
    five_minus_two_minus_one = ArithOp("-", ArithOp("-", CountConst(5), CountConst(2)), CountConst(1))
    assert expression_of("x = 5 - 2 - 1 > 1 + 1") == Compare(
        ">", five_minus_two_minus_one, ArithOp("+", CountConst(1), CountConst(1))
    )
    assert expression_of('x = "a" && 1 < 2 ? 1 : "b" ? 2 : 3') == Conditional(
        BoolOp("&&", Letter("a"), Compare("<", CountConst(1), CountConst(2))),
        CountConst(1),
        Conditional(Letter("b"), CountConst(2), CountConst(3)),
    )


def test_negative_literals_and_negation() -> None:
    assert expression_of("alphabet a\nx = -3") == CountConst(-3)
    assert expression_of("alphabet a\nx = -(3)") == Neg(CountConst(3))
    assert expression_of('x = 1 - -#"a"') == ArithOp("-", CountConst(1), Neg(Count(Letter("a"))))
    assert expression_of('x = min(#"a", -1) + max(0, 2)') == ArithOp(
        "+", MinMax("min", Count(Letter("a")), CountConst(-1)), MinMax("max", CountConst(0), CountConst(2))
    )


@pytest.mark.parametrize(
    ("source", "location", "message"),
    [
        ('alphabet a b\nna = #"a"\nx = na && "a"\n', "L3.cr:3:5:", "expected a boolean expression, got count 'na'"),
        ('x = "a" + 1\n', "L3.cr:1:5:", "expected a count expression, got boolean '\"a\"'"),
        ('x = #"a" > nb\n', "L3.cr:1:12:", "undefined name 'nb'"),
        ('x = "a"\nx = "b"\n', "L3.cr:2:1:", "'x' is already defined on line 1"),
        ('alphabet a b\nx = "c"\n', "L3.cr:2:5:", "letter 'c' is not in the alphabet {a, b}"),
        ("alphabet a b\nx = Q(c)\n", "L3.cr:2:7:", "letter 'c' is not in the alphabet {a, b}"),
        ("x = 1 < 2 < 3\n", "L3.cr:1:11:", "comparisons do not chain"),
        ('x = #"a"\n', "L3.cr:1:1:", "the output 'x' must be boolean, but it is a count"),
        ('x = "a"\noutput y\n', "L3.cr:2:8:", "the output 'y' is not defined"),
        ('x = "a" ? 1 : "b"\n', "L3.cr:1:15:", "expected a count expression, got boolean '\"b\"'"),
        ('x = !#"a"\n', "L3.cr:1:6:", "expected a boolean expression, got count '#\"a\"'"),
        ("min = 3 > 1\n", "L3.cr:1:1:", "'min' is a reserved word"),
        ('x = "a" & "b"\n', "L3.cr:1:9:", "unexpected character '&'"),
        ('x = "ab"\n', "L3.cr:1:5:", "a letter is a single non-blank character"),
        ('x = "a\n', "L3.cr:1:5:", "unterminated letter"),
        ('x = "a" "b"\n', "L3.cr:1:9:", 'unexpected letter "b" after the end of the statement'),
        ("x = #\n", "L3.cr:1:6:", "expected an expression, got end of line"),
        ('x = "a"\nalphabet a\n', "L3.cr:2:1:", "the alphabet line must come before the definitions"),
        ("# only a comment\n", "L3.cr:1:1:", "the program has no definitions"),
    ],
)
def test_errors_have_line_and_column(source: str, location: str, message: str) -> None:
    with pytest.raises(CraspError) as caught:
        parse_program(source, "L3.cr")
    first_line = str(caught.value).splitlines()[0]
    assert first_line.startswith(f"{location} {message}")


def test_type_errors_carry_a_hint() -> None:
    with pytest.raises(CraspError) as caught:
        parse_program('na = #"a"\nx = na && "a"\n', "L3.cr")
    assert caught.value.hint == "compare the count with a number, e.g. na > 0"
    with pytest.raises(CraspError) as caught:
        parse_program("x = a\n", "t.cr")
    assert caught.value.hint == 'to test for the letter a, write "a"'


def test_program_values_reject_ill_typed_or_dangling_trees() -> None:
    with pytest.raises(CraspError, match="expected a boolean expression"):
        Not(CountConst(1))
    with pytest.raises(CraspError, match="expected a count expression"):
        Compare("<", Letter("a"), CountConst(1))
    with pytest.raises(CraspError, match="not an earlier boolean definition"):
        Program((Definition("x", Ref("y", Type.BOOL)),), "x", ("a",))
    with pytest.raises(CraspError, match="not in the alphabet"):
        Program((Definition("x", Letter("b")),), "x", ("a",))
    with pytest.raises(CraspError, match="must be boolean"):
        Program((Definition("x", CountConst(1)),), "x", ("a",))


# --------------------------------------------------------------------------- depth


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("x = true", 0),
        ('x = "a" && 1 < 2', 0),
        ('x = #"a" > 0', 1),
        ('x = #(#"a" > 0) > #"b"', 2),
        ('n = #"a"\nx = n > 0', 1),
        ('p = #"a" > 0\nq = #(p && "b") > 0\nx = "a" || q', 2),
        ('n = #(#(#"a" > 1) > 2)\nx = min(n, 4) > -n', 3),
    ],
)
def test_depth_of_small_programs(source: str, expected: int) -> None:
    assert program_depth(parse_program(source)) == expected


def test_depth_of_examples() -> None:
    assert program_depth(load_program(EXAMPLES / "majority.cr")) == 1
    dyck = load_program(EXAMPLES / "dyck1.cr")
    assert definition_depths(dyck) == {"balance": 1, "dips": 2, "balanced": 2}
    assert [program_depth(load_program(EXAMPLES / f"L{k}.cr")) for k in range(1, 7)] == [1, 2, 3, 4, 5, 6]


def test_program_depth_is_the_depth_of_the_output() -> None:
    program = parse_program('deep = #(#"a" > 0) > 0\nshallow = "a"\noutput shallow\n')
    assert definition_depths(program) == {"deep": 2, "shallow": 0}
    assert program_depth(program) == 0


# --------------------------------------------------------------------------- interpreter


def test_majority_trace_on_aab() -> None:
    trace = run_program(load_program(EXAMPLES / "majority.cr"), "aab")
    assert trace.values == {"na": (1, 2, 2), "nb": (0, 0, 1), "majority": (True, True, True)}
    assert trace.accepted
    assert not accepts(load_program(EXAMPLES / "majority.cr"), "abb")


def test_dyck_trace() -> None:
    dyck = load_program(EXAMPLES / "dyck1.cr")
    trace = run_program(dyck, "())(")
    assert trace.values["balance"] == (1, 0, -1, 0)
    assert trace.values["dips"] == (0, 0, 1, 1)
    assert trace.output == (False, True, False, False)
    assert not trace.accepted
    assert [accepts(dyck, word) for word in ("(())()", "()", ")(", "(()", "")] == [True, True, False, False, False]


def test_arithmetic_operators() -> None:
    source = """alphabet a b
sum = #"a" + #"b"
low = min(#"a", #"b")
high = max(#"a", 3 - #"b")
negated = -#"a"
choice = "a" ? 2 : -1
all = #true
x = !"a" || false
"""
    trace = run_program(parse_program(source), "aab")
    assert trace.values["sum"] == (1, 2, 3)
    assert trace.values["low"] == (0, 0, 1)
    assert trace.values["high"] == (3, 3, 2)
    assert trace.values["negated"] == (-1, -2, -2)
    assert trace.values["choice"] == (2, 2, -1)
    assert trace.values["all"] == (1, 2, 3)
    assert trace.output == (False, False, True)
    assert trace.accepted


def test_empty_word_is_rejected() -> None:
    trace = run_program(parse_program("alphabet a\nx = true\n"), "")
    assert trace.output == ()
    assert not trace.accepted


def test_letters_outside_the_alphabet_are_errors() -> None:
    with pytest.raises(CraspError, match=re.escape("letter 'c' at position 2 is not in the alphabet {a, b}")):
        run_program(load_program(EXAMPLES / "majority.cr"), "abc")


# --------------------------------------------------------------------------- random programs


@st.composite
def expressions(draw: st.DrawFn, wanted: Type, names: dict[str, Type], alphabet: tuple[str, ...], budget: int) -> Expr:
    """A random well-typed expression of type ``wanted`` using letters of ``alphabet`` and ``names``."""
    refs = [Ref(name, kind) for name, kind in names.items() if kind is wanted]
    if wanted is Type.BOOL:
        leaves = [st.builds(BoolConst, st.booleans()), st.sampled_from(alphabet).map(Letter)]
    else:
        leaves = [st.integers(-3, 5).map(CountConst)]
    if refs:
        leaves.append(st.sampled_from(refs))
    if budget == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.one_of(leaves))

    def sub(kind: Type) -> Expr:
        return draw(expressions(kind, names, alphabet, budget - 1))

    if wanted is Type.BOOL:
        form = draw(st.sampled_from(["not", "logic", "compare"]))
        if form == "not":
            return Not(sub(Type.BOOL))
        if form == "logic":
            return BoolOp(draw(st.sampled_from(["&&", "||"])), sub(Type.BOOL), sub(Type.BOOL))
        return Compare(draw(st.sampled_from(["<", "<=", ">", ">=", "==", "!="])), sub(Type.COUNT), sub(Type.COUNT))
    form = draw(st.sampled_from(["count", "neg", "arith", "extremum", "conditional", "scale"]))
    if form == "count":
        return Count(sub(Type.BOOL))
    if form == "scale":
        return Scale(draw(st.integers(-3, 3)), sub(Type.COUNT))
    if form == "neg":
        return Neg(sub(Type.COUNT))
    if form == "arith":
        return ArithOp(draw(st.sampled_from(["+", "-"])), sub(Type.COUNT), sub(Type.COUNT))
    if form == "extremum":
        return MinMax(draw(st.sampled_from(["min", "max"])), sub(Type.COUNT), sub(Type.COUNT))
    return Conditional(sub(Type.BOOL), sub(Type.COUNT), sub(Type.COUNT))


@st.composite
def programs(draw: st.DrawFn) -> Program:
    alphabet = tuple(draw(st.lists(st.sampled_from(["a", "b", "0", "("]), min_size=1, max_size=3, unique=True)))
    names: dict[str, Type] = {}
    definitions = []
    size = draw(st.integers(1, 4))
    for index in range(size):
        kind = Type.BOOL if index == size - 1 else draw(st.sampled_from(list(Type)))
        expr = draw(expressions(kind, dict(names), alphabet, 3))
        definitions.append(Definition(f"d{index}", expr))
        names[f"d{index}"] = kind
    output = draw(st.sampled_from([name for name, kind in names.items() if kind is Type.BOOL]))
    return Program(tuple(definitions), output, alphabet)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(programs())
def test_pretty_printed_programs_parse_back_to_themselves(program: Program) -> None:
    source = format_program(program)
    assert parse_program(source) == program
    for definition in program.definitions:
        assert format_expr(definition.expr) in source


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(st.data())
def test_hash_is_the_prefix_count(data: st.DataObject) -> None:
    program = data.draw(programs())
    word = data.draw(st.text(alphabet=program.alphabet, max_size=8))
    trace = run_program(program, word)
    for name in program.names:
        if program.definition(name).type is Type.BOOL:
            counts = evaluate(Count(Ref(name, Type.BOOL)), word, trace.values)
            assert counts == tuple(sum(trace.values[name][: i + 1]) for i in range(len(word)))


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(st.data())
def test_values_on_a_prefix_are_a_prefix_of_the_values(data: st.DataObject) -> None:
    program = data.draw(programs())
    word = data.draw(st.text(alphabet=program.alphabet, min_size=1, max_size=8))
    cut = data.draw(st.integers(0, len(word)))
    whole, prefix = run_program(program, word), run_program(program, word[:cut])
    for name in program.names:
        assert prefix.values[name] == whole.values[name][:cut]
    assert prefix.accepted == (cut > 0 and whole.output[cut - 1])


# --------------------------------------------------------------------------- command line


def test_cli_depth() -> None:
    runner = CliRunner()
    result = runner.invoke(crasp, ["depth", str(EXAMPLES / "L3.cr")])
    assert result.exit_code == 0
    assert result.stdout == "3\n"
    result = runner.invoke(crasp, ["depth", "--all", str(EXAMPLES / "dyck1.cr")])
    assert result.exit_code == 0
    lines = [line.split() for line in result.stdout.splitlines()]
    assert lines == [
        ["balance", "count", "1"],
        ["dips", "count", "2"],
        ["balanced", "boolean", "2", "(output)"],
        ["program", "depth:", "2"],
    ]


def test_cli_run_prints_the_trace_and_the_verdict() -> None:
    result = CliRunner().invoke(crasp, ["run", str(EXAMPLES / "majority.cr"), "aab", "--prefix"])
    assert result.exit_code == 0
    rows = [
        [cell.strip() for cell in line.strip("│").split("│")]
        for line in result.stdout.splitlines()
        if line.startswith("│")
    ]
    # positions are numbered from 0, as in every witness (docs/semantics.md, "Positions")
    assert rows == [["0", "a", "1", "0", "true"], ["1", "a", "2", "0", "true"], ["2", "b", "2", "1", "true"]]
    assert "per-prefix output: 1 1 1" in result.stdout
    assert result.stdout.splitlines()[-1] == "accepted"

    result = CliRunner().invoke(crasp, ["run", str(EXAMPLES / "L2.cr"), "aba"])
    assert result.exit_code == 0
    assert result.stdout.splitlines()[-1] == "rejected"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["run", str(EXAMPLES / "L2.cr"), "abc"], "error: letter 'c' at position 2 is not in the alphabet {a, b}"),
        (["depth", "no-such-file.cr"], "error: cannot read no-such-file.cr"),
    ],
)
def test_cli_errors_exit_with_status_2(arguments: list[str], message: str) -> None:
    result = CliRunner().invoke(crasp, arguments)
    assert result.exit_code == 2
    assert result.stderr.startswith(message)
    assert result.stdout == ""


def test_cli_reports_type_errors_with_location(tmp_path: Path) -> None:
    source = tmp_path / "bad.cr"
    source.write_text('alphabet a b\nna = #"a"\n\nx = na && "a"\n')
    result = CliRunner().invoke(crasp, ["depth", str(source)])
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == "error: bad.cr:4:5: expected a boolean expression, got count 'na'"
    assert "Traceback" not in result.output

"""Command-line interface for C-RASP programs: the ``crasp`` click group.

``crasp depth FILE`` prints the depth of a program, ``crasp run FILE STRING``
prints its trace on a word, ``crasp compile FILE -o MODEL`` writes the compiled
transformer, ``crasp extract SPEC -o FILE`` writes the program a model computes
(``cli.extract``, imported when the command runs).  Invalid programs or inputs print ``error: <message>`` on stderr
and exit with status 2.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from verify_tf.builders.crasp_compiler import compile_program
from verify_tf.builders.files import ModelFileError, save_model
from verify_tf.crasp.ast import CraspError, Program
from verify_tf.crasp.depth import definition_depths
from verify_tf.crasp.interpreter import Trace, Vector, run_program
from verify_tf.crasp.parser import load_program
from verify_tf.ir.edit import EditError, apply_settings
from verify_tf.schema.errors import MissingDependency

__all__ = ["crasp"]

_FILE = click.Path(dir_okay=False, path_type=Path)


def _output_option(help: str):
    """The required ``-o/--output`` file that a writing subcommand writes."""
    return click.option("-o", "--output", "output", required=True, type=_FILE, help=help)


def _bounded_option(flag: str, low: int, high: int, default: int, help: str):
    """A whole-number option in [low, high] whose default ``--help`` shows."""
    return click.option(flag, type=click.IntRange(low, high), default=default, show_default=True, help=help)


class _UsageError(click.ClickException):
    """A :class:`CraspError` (or an ``EditError`` of ``--set``) reported as ``error: <message>`` with exit status 2."""

    exit_code = 2

    def show(self, file=None) -> None:
        click.echo(f"error: {self.format_message()}", err=True, file=file)


@contextmanager
def _reporting_errors() -> Iterator[None]:
    try:
        yield
    except CraspError as error:
        raise _UsageError(str(error)) from None
    except EditError as error:
        raise _UsageError(str(error) + (f"\n  hint: {error.hint}" if error.hint else "")) from None


def _load(path: Path) -> Program:
    with _reporting_errors():
        return load_program(path)


@click.group(name="crasp")
def crasp() -> None:
    """C-RASP programs: counting, boolean tests and comparisons over prefixes."""


@crasp.command()
@click.argument("file", type=_FILE)
@click.option("--all", "show_all", is_flag=True, help="Also print the depth of every definition.")
def depth(file: Path, show_all: bool) -> None:
    """Print the depth of the C-RASP program in FILE (the depth of its output)."""
    program = _load(file)
    depths = definition_depths(program)
    if show_all:
        width = max(len(name) for name in program.names)
        for definition in program.definitions:
            marker = "  (output)" if definition.name == program.output else ""
            click.echo(f"{definition.name:<{width}}  {definition.type.value:<7}  {depths[definition.name]}{marker}")
    click.echo(str(depths[program.output]) if not show_all else f"program depth: {depths[program.output]}")


@crasp.command()
@click.argument("file", type=_FILE)
@click.argument("string")
@click.option("--prefix", is_flag=True, help="Also print the output at every position (prefix acceptance).")
def run(file: Path, string: str, prefix: bool) -> None:
    """Run the C-RASP program in FILE on STRING and print the value of every definition."""
    program = _load(file)
    with _reporting_errors():
        trace = run_program(program, string)
    _print_table(_trace_table(trace, f"{file.name} on {string!r}"))
    if prefix:
        click.echo("per-prefix output: " + " ".join("1" if value else "0" for value in trace.output))
    click.echo("accepted" if trace.accepted else "rejected")


@crasp.command(name="compile")
@click.argument("file", type=_FILE)
@_output_option("The model file to write (.safetensors, .npz or .pt).")
@_bounded_option("--frac", 0, 32, 0, "Fractional bits f of the fixed-point arithmetic.")
@click.option(
    "--bits",
    type=click.IntRange(2, 64),
    default=None,
    help="Total bits p (default: the fewest that never saturate); fewer than needed is an error.",
)
@click.option(
    "--heads",
    type=click.Choice(["uniform", "softmax", "softmax-bos"]),
    default="uniform",
    show_default=True,
    help="Uniform heads, softmax heads with zero query/key weights (every score 0), or softmax heads whose "
    "scores single out BOS (softmax-bos; needs --frac >= 1).",
)
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="PARAMETER=VALUE",
    help="Then change one weight, e.g. 'layers[0].attention.heads[0].value-bias[0]=0' (a mutated model).",
)
def compile_command(
    file: Path, output: Path, frac: int, bits: int | None, heads: str, settings: tuple[str, ...]
) -> None:
    """Compile the C-RASP program in FILE into a transformer (fixed point, exact-sums attention)."""
    program = _load(file)
    with _reporting_errors():
        compiled = compile_program(program, frac=frac, bits=bits, name=f"C-RASP {file.name}", heads=heads)
        model = apply_settings(compiled.model, settings)
    try:
        save_model(model, output)
    except (ModelFileError, OSError) as error:
        raise _UsageError(f"cannot write {output}: {error}") from None
    except MissingDependency as missing:  # a .pt output without torch
        raise _UsageError(f"cannot write {output}: {missing.message}; {missing.install}") from None
    click.echo(f"wrote {output}: " + compiled.describe()[0])
    for line in compiled.describe()[1:]:
        click.echo("  " + line)
    for setting in settings:
        click.echo(f"  changed {setting}")


@crasp.command(name="extract")
@click.argument("spec", type=_FILE)
@_output_option("The C-RASP program to write (.cr).")
@click.option(
    "--check-against",
    type=_FILE,
    default=None,
    help="Also decide the extracted program against this program at every length (the least disagreement).",
)
@click.option(
    "--timeout", type=click.FloatRange(min=0, min_open=True), default=None, help="Seconds (default: the spec's)."
)
@_bounded_option(
    "--explore",
    1,
    64,
    10,
    "Observe every prefix up to this length (merged by state and counts) before the first extraction.",
)
@_bounded_option(
    "--lengths-up-to",
    1,
    100_000,
    64,
    "N of the proof's exhaustive part: 'equal up to N' where the induction over every length does not close.",
)
@_bounded_option(
    "--rounds", 1, 100, 6, "Counterexamples walked (one per round) before a remaining disagreement is an error."
)
def extract_command(
    spec: Path,
    output: Path,
    check_against: Path | None,
    timeout: float | None,
    explore: int,
    lengths_up_to: int,
    rounds: int,
) -> None:
    """Extract the C-RASP program a causal fixed-precision model in SPEC computes, proved equal to it."""
    from verify_tf.cli.extract import ExtractRequest, run_extract  # heavy: only when the command runs

    request = ExtractRequest(spec, output, check_against, timeout, explore, lengths_up_to, rounds)
    raise SystemExit(run_extract(request))


def _trace_table(trace: Trace, title: str) -> Table:
    """One row per position (numbered from 0, as every witness): the position, its letter and the value of every
    definition."""
    table = Table(title=escape(title))
    table.add_column("i", justify="right")
    table.add_column("letter", justify="center")
    unary = [predicate for predicate in trace.program.predicates if predicate.arity == 1]
    for predicate in unary:
        table.add_column(escape(f"{predicate.name}(i)"), justify="right", no_wrap=True)
    for name in trace.program.names:
        header = f"{name} (output)" if name == trace.program.output else name
        table.add_column(escape(header), justify="right", no_wrap=True)
    for index, letter in enumerate(trace.word):  # the program's names and letters are plain text, never markup
        tests = ["true" if predicate.holds(index) else "false" for predicate in unary]
        cells = [_format_value(trace.values[name], index) for name in trace.program.names]
        table.add_row(str(index), escape(letter), *tests, *cells)
    return table


def _format_value(vector: Vector, index: int) -> str:
    value = vector[index]
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _print_table(table: Table) -> None:
    """Print ``table`` on stdout; when stdout is not a terminal, widen the page so that no cell wraps."""
    console = Console(highlight=False)
    if not console.is_terminal:
        natural_width = Console(width=10_000).measure(table).maximum
        console = Console(highlight=False, width=max(80, natural_width))
    console.print(table)

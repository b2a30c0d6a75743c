"""The commands that help write and try specs: ``init`` (a starter spec), ``schema`` (the JSON Schema),
``properties`` (what can be checked) and ``run`` (one input's layer-by-layer trace).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from . import output


@click.command()
@click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--input",
    "input_text",
    required=True,
    help="The input: a string for alphabet models ('abba'), or a YAML list of tokens "
    "('[0, 1/2]' for d=1, '[[0, 1/2], [1/2, 0]]' for d=2).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the trace as JSON instead of tables.")
def run(spec_path, input_text, as_json) -> None:
    """Evaluate the SPEC's model on one input and print the layer-by-layer trace."""
    from ..reporting.trace_view import parse_input, print_trace, trace_to_json
    from ..semantics import UnsupportedInMode, evaluate
    from ..spec import SpecError, load_spec

    try:
        spec = load_spec(spec_path)
        tokens = parse_input(spec.model, input_text)
    except SpecError as exc:
        output.fail_input(str(exc))
    try:
        trace = evaluate(spec.model, spec.arithmetic, tokens)
    except (UnsupportedInMode, ValueError) as exc:
        output.fail_input(str(exc))
    if as_json:
        click.echo(json.dumps(trace_to_json(trace, spec.model), indent=2))
    else:
        print_trace(output.console, spec.model, spec.arithmetic, trace)


@click.command()
def schema() -> None:
    """Print the JSON Schema of spec files (for editors)."""
    from ..spec.loader import json_schema

    click.echo(json.dumps(json_schema(), indent=2, default=str))


@click.command()
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path), default="spec.yaml")
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
def init(path: Path, force: bool) -> None:
    """Write a commented starter spec to PATH (default spec.yaml)."""
    from ..starter import STARTER_SPEC

    if path.exists() and not force:
        output.fail_input(f"{path} exists (use --force to overwrite)")
    path.write_text(STARTER_SPEC)
    output.console.print(f"wrote {path}; run: verify-tf check {path}", markup=False)


@click.command(name="properties")
def list_properties() -> None:
    """List the available properties and their engines."""
    from rich.table import Table
    from rich.text import Text

    from ..engines import supporting
    from ..properties import registry

    table = Table(header_style="bold")
    table.add_column("property")
    table.add_column("engines")
    table.add_column("summary", ratio=1)
    for name, prop in registry().items():  # plain text: a summary's "[lo, hi]" is not markup
        table.add_row(Text(name), Text(", ".join(supporting(prop))), Text(prop.summary))
    output.console.print(table)

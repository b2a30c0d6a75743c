"""The command line: the only module that prints, shows progress and chooses exit codes.

Exit codes: 0 all proved, 1 something refuted, 2 input error, 3 nothing refuted but something unknown,
4 internal error (a property's verdict is ``error``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click
from rich.console import Console

from . import __version__
from .verdict import EXIT_INPUT_ERROR, EXIT_INTERNAL

console = Console()
err_console = Console(stderr=True)


def _fail_input(message: str) -> None:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, markup=True, soft_wrap=True)
    sys.exit(EXIT_INPUT_ERROR)


class _Progress:
    """A progress bar that appears only once a check has run for more than a second."""

    def __init__(self, label: str, enabled: bool):
        self.label, self.enabled = label, enabled
        self.start = time.perf_counter()
        self.progress = None
        self.task = None

    def __call__(self, done: int, total: int | None) -> None:
        if not self.enabled or time.perf_counter() - self.start < 1.0:
            return
        if self.progress is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TimeRemainingColumn(), console=err_console, transient=True)
            self.progress.start()
            self.task = self.progress.add_task(self.label, total=total)
        self.progress.update(self.task, completed=done, total=total)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="verify-tf")
def main() -> None:
    """verify-tf: prove or refute properties of small quantized transformers.

    Write a spec (model, arithmetic, domain, properties) and run `verify-tf check spec.yaml`.
    Exit codes: 0 proved, 1 refuted, 2 input error, 3 unknown, 4 internal error.
    """


@main.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--engine", type=click.Choice(["auto", "interpret", "enumerate", "smt", "search"]),
              help="Override every property's engine (properties that cannot use it keep their own choice).")
@click.option("--timeout", type=float, help="Seconds per property (overrides the spec).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), help="Write the JSON report.")
@click.option("--minimize", is_flag=True, help="Prefer the smallest counterexample in a stated order.")
@click.option("--smt2", "smt2_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Write every SMT query as SMT-LIB2 into this folder.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
              help="Device for the torch path.")
@click.option("--quiet", "-q", is_flag=True, help="No table; only the exit code and errors.")
def check(specs, engine, timeout, json_path, minimize, smt2_dir, device, quiet) -> None:
    """Check every property of every SPEC and print a verdict table."""
    from .report import combined_exit_code, verdict_table, write_json
    from .runner import Overrides, check_property
    from .spec import SpecError, load_spec

    overrides = Overrides(engine=None if engine == "auto" else engine, timeout=timeout, minimize=minimize,
                          smt2_dir=smt2_dir, device=device)
    if smt2_dir is not None:
        smt2_dir.mkdir(parents=True, exist_ok=True)
    loaded = []
    for path in specs:
        try:
            loaded.append(load_spec(path))
        except SpecError as exc:
            _fail_input(str(exc))
    verdicts, expectations = [], []
    for spec in loaded:
        for prop in spec.properties:
            progress = _Progress(f"{spec.path.name}: {prop.label}", enabled=not quiet and err_console.is_terminal)
            try:
                verdict = check_property(spec, prop, overrides, progress)
            finally:
                progress.close()
            verdicts.append(verdict)
            expectations.append(prop.expect)
    code = combined_exit_code(verdicts, expectations)
    if not quiet:
        console.print(verdict_table(verdicts, expectations))
        for v in verdicts:
            if v.status == "error" and "traceback" in v.statistics:
                err_console.print(f"[magenta]{v.property}[/]: {v.statistics['traceback']}", highlight=False)
    if json_path is not None:
        write_json(json_path, verdicts, expectations)
    sys.exit(code)


@main.command()
@click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--input", "input_text", required=True,
              help="The input: a string for alphabet models ('abba'), or a YAML list of tokens "
                   "('[0, 1/2]' for d=1, '[[0, 1/2], [1/2, 0]]' for d=2).")
@click.option("--json", "as_json", is_flag=True, help="Print the trace as JSON instead of tables.")
def run(spec_path, input_text, as_json) -> None:
    """Evaluate the SPEC's model on one input and print the layer-by-layer trace."""
    from .semantics import UnsupportedInMode, evaluate
    from .spec import SpecError, load_spec
    from .trace_view import parse_input, print_trace, trace_to_json

    try:
        spec = load_spec(spec_path)
        tokens = parse_input(spec.model, input_text)
    except SpecError as exc:
        _fail_input(str(exc))
    try:
        trace = evaluate(spec.model, spec.arithmetic, tokens)
    except (UnsupportedInMode, ValueError) as exc:
        _fail_input(str(exc))
    if as_json:
        click.echo(json.dumps(trace_to_json(trace), indent=2))
    else:
        print_trace(console, spec.model, spec.arithmetic, trace)


@main.command()
def schema() -> None:
    """Print the JSON Schema of spec files (for editors)."""
    from .spec.loader import json_schema

    click.echo(json.dumps(json_schema(), indent=2, default=str))


@main.command()
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path), default="spec.yaml")
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
def init(path: Path, force: bool) -> None:
    """Write a commented starter spec to PATH (default spec.yaml)."""
    from .starter import STARTER_SPEC

    if path.exists() and not force:
        _fail_input(f"{path} exists (use --force to overwrite)")
    path.write_text(STARTER_SPEC)
    console.print(f"wrote {path}; run: verify-tf check {path}")


@main.command(name="properties")
def list_properties() -> None:
    """List the available properties and their engines."""
    from rich.table import Table

    from .properties import registry

    table = Table(header_style="bold")
    table.add_column("property")
    table.add_column("engines")
    table.add_column("summary", ratio=1)
    for name, prop in registry().items():
        table.add_row(name, ", ".join(prop.engines), prop.summary)
    console.print(table)


def _mount_optional_groups() -> None:
    try:
        from .crasp.cli import crasp
    except ImportError:
        return
    main.add_command(crasp)


_mount_optional_groups()


def entry() -> None:  # pragma: no cover - console-script shim
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERNAL)

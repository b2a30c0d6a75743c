"""The command line: the only module that prints, shows progress and chooses exit codes.

Exit codes: 0 all proved, 1 something refuted, 2 input error, 3 nothing refuted but something unknown,
4 internal error (a property's verdict is ``error``).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import click
from rich.console import Console

from .. import __version__
from ..spec.loader import ENGINES
from ..verdict import EXIT_INPUT_ERROR, EXIT_INTERNAL
from ..work import MAX_TIMEOUT

LOG_WIDTH = 160  # columns for tables when the output is not a terminal (CI logs, pipes) and COLUMNS is unset


def _make_console(stderr: bool = False) -> Console:
    """A console for this invocation; reads COLUMNS now, so tables in logs do not wrap at 80 columns."""
    made = Console(stderr=stderr)
    if not made.is_terminal and "COLUMNS" not in os.environ:
        made = Console(stderr=stderr, width=LOG_WIDTH)
    return made


console = _make_console()
err_console = _make_console(stderr=True)


def _fail_input(message: str, hint: str | None = None) -> None:
    from rich.markup import escape

    err_console.print(
        f"[bold red]error:[/] {escape(message)}" + (f"\n  hint: {escape(hint)}" if hint else ""),
        highlight=False,
        markup=True,
        soft_wrap=True,
    )
    sys.exit(EXIT_INPUT_ERROR)


class _Progress:
    """Progress of one check, from ``engines.base.ProgressEvent``s: a bar on a terminal (after the first second),
    a plain line every 10 seconds otherwise (``VERIFY_TF_PROGRESS_SECONDS``) (CI logs; a heartbeat thread keeps
    printing the current phase while a long solver query runs), nothing with ``--quiet``."""

    def __init__(self, label: str, mode: str):
        self.label, self.mode = label, mode  # mode: bar | log | off
        self.every = float(os.environ.get("VERIFY_TF_PROGRESS_SECONDS", "10"))  # seconds between log lines
        self.start = time.perf_counter()
        self.progress = None
        self.task = None
        self.phase, self.amount = "", ""
        self.stopped = threading.Event()
        self.heartbeat = None
        if mode == "log":
            self.heartbeat = threading.Thread(target=self._beat, daemon=True)
            self.heartbeat.start()

    def _beat(self) -> None:
        while not self.stopped.wait(self.every):
            if self.phase:
                err_console.print(
                    f"[{time.perf_counter() - self.start:6.0f} s] {self.label}: {self.phase}{self.amount}",
                    highlight=False,
                    markup=False,
                    soft_wrap=True,
                )

    def __call__(self, event) -> None:
        if event.phase:
            self.phase = event.phase
        self.amount = "" if not event.total else f" ({event.done:g}/{event.total:g} {event.unit})".replace(" )", ")")
        if self.mode != "bar" or time.perf_counter() - self.start < 1.0:
            return
        if self.progress is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=err_console,
                transient=True,
            )
            self.progress.start()
            self.task = self.progress.add_task(self.label, total=event.total)
        self.progress.update(
            self.task, completed=event.done, total=event.total, description=f"{self.label}: {self.phase}"[:100]
        )

    def close(self) -> None:
        self.stopped.set()
        if self.heartbeat is not None:
            self.heartbeat.join()
        if self.progress is not None:
            self.progress.stop()


class _MainGroup(click.Group):
    """The top-level group; optional groups (``_mount_optional_groups``) are imported when first used.

    Their modules may import heavy libraries (torch): importing them only when their command runs keeps
    ``verify-tf --help`` and ``verify-tf check`` free of them. ``--help`` lists them with a static line.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.optional: dict[str, tuple[str, str, str]] = {}  # name -> (module, attribute, one-line help)

    def list_commands(self, ctx: click.Context) -> list[str]:
        available = {name for name, (module, _, _) in self.optional.items() if _module_exists(module)}
        return sorted(set(self.commands) | available)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in self.optional:
            module_name, attribute, _ = self.optional[name]
            command = _import_optional(module_name, attribute)
            if command is not None:
                self.add_command(command, name)
        return self.commands.get(name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        limit = formatter.width - 6 - max((len(n) for n in self.list_commands(ctx)), default=0)
        for name in self.list_commands(ctx):
            if name in self.commands:
                command = self.commands[name]
                if command.hidden:
                    continue
                rows.append((name, command.get_short_help_str(limit)))
            else:
                rows.append((name, self.optional[name][2]))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _module_exists(module_name: str) -> bool:
    """Whether ``a.b.c`` has a source file, found without executing ``a.b`` (whose __init__ may import torch)."""
    import importlib.util

    parent, _, leaf = module_name.rpartition(".")
    try:
        spec = importlib.util.find_spec(parent)
    except ModuleNotFoundError:
        return False
    if spec is None or not spec.submodule_search_locations:
        return False
    return any(
        (Path(folder) / f"{leaf}.py").is_file() or (Path(folder) / leaf / "__init__.py").is_file()
        for folder in spec.submodule_search_locations
    )


def _import_optional(module_name: str, attribute: str) -> click.Command | None:
    """Import an optional group. Only the absence of that exact module (or its own package) is tolerated:
    any other import error (a bug inside it, a missing dependency of it) propagates, never hidden."""
    import importlib

    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] == "torch":  # an optional dependency: name the extra
            raise click.UsageError(
                "this command needs PyTorch, which is not installed: pip install 'verify-tf[torch]'"
            ) from None
        parts = module_name.split(".")
        if exc.name not in {".".join(parts[:i]) for i in range(2, len(parts) + 1)}:
            raise
        return None
    return getattr(module, attribute)


@click.group(cls=_MainGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="verify-tf")
def main() -> None:
    """verify-tf: prove or refute properties of small quantized transformers.

    Write a spec (model, arithmetic, domain, properties) and run `verify-tf check spec.yaml`.
    Exit codes: 0 proved, 1 refuted, 2 input error, 3 unknown, 4 internal error (docs/cli.md).
    """
    global console, err_console
    console, err_console = _make_console(), _make_console(stderr=True)


@main.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--engine",
    type=click.Choice(ENGINES),
    help="Override every property's engine (properties that cannot use it keep their own choice).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True, max=MAX_TIMEOUT),
    help="Seconds per property, encoding and solving included (overrides the spec).",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the JSON report (format: docs/cli.md).",
)
@click.option(
    "--junit",
    "junit_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write a JUnit XML report: one test case per property.",
)
@click.option(
    "--unknown-as",
    type=click.Choice(["skipped", "error"]),
    default="skipped",
    show_default=True,
    help="How an unknown verdict appears in the JUnit report.",
)
@click.option(
    "--fail-on",
    type=click.Choice(["unknown", "refuted"]),
    default="unknown",
    show_default=True,
    help="The weakest outcome that fails the run: 'unknown' (exit 3 when nothing is refuted) or "
    "'refuted' (unknown verdicts exit 0).",
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Worker processes: properties run side by side and each property's work units are spread over them.",
)
@click.option(
    "--cluster",
    "cluster_address",
    metavar="ADDRESS",
    help="Run the work units on a Dask cluster: 'local:N' starts N worker processes on this machine for "
    "this run; 'tcp://HOST:PORT' uses a running Dask scheduler (docs/distributed.md). Needs the "
    "cluster extra: pip install 'verify-tf[cluster]'.",
)
@click.option(
    "--cache",
    "cache_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".verify-tf-cache"),
    show_default=True,
    help="Proof cache folder: unchanged proved/refuted verdicts are not recomputed.",
)
@click.option("--no-cache", is_flag=True, help="Neither read nor write the proof cache.")
@click.option("--explain", is_flag=True, help="Print each counterexample's layer-by-layer trace.")
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the counterexamples as a self-contained HTML report.",
)
@click.option("--minimize", is_flag=True, help="Prefer the smallest counterexample in a stated order.")
@click.option(
    "--smt2",
    "smt2_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write every SMT query as SMT-LIB2 into this folder (bypasses the cache).",
)
@click.option(
    "--certify",
    "certify_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Certify every proved verdict into this folder (put it beside the --json report; "
    "re-check with `verify-tf audit`; bypasses the cache; docs/trust.md).",
)
@click.option(
    "--device",
    type=click.Choice(["auto", "cpu", "cuda"]),
    default="auto",
    show_default=True,
    help="Device for the torch path.",
)
@click.option("--quiet", "-q", is_flag=True, help="No table; only the exit code and errors.")
def check(
    specs,
    engine,
    timeout,
    json_path,
    junit_path,
    unknown_as,
    fail_on,
    jobs,
    cluster_address,
    cache_dir,
    no_cache,
    explain,
    html_path,
    minimize,
    smt2_dir,
    certify_dir,
    device,
    quiet,
) -> None:
    """Check every property of every SPEC and print a verdict table.

    Exit codes: 0 every property proved (or got its `expect:` verdict), 1 something refuted (or a definite
    verdict contradicted `expect:`), 2 input error, 3 nothing refuted but something unknown (0 with
    --fail-on refuted), 4 internal error.
    """
    from ..cache import ProofCache
    from ..report import combined_exit_code, verdict_table, write_json
    from ..runner import Overrides, check_all
    from ..spec import SpecError, load_spec

    _require_device(device)
    if cluster_address is not None:
        from ..executors import cluster_address_problem

        problem = cluster_address_problem(cluster_address)
        if problem is None and jobs > 1:
            problem = "--cluster and -j N cannot be combined: the cluster's workers run the units"
        if problem is not None:
            _fail_input(problem, hint="--cluster local:4 (four worker processes here) or --cluster tcp://HOST:8786")
    overrides = Overrides(
        engine=None if engine == "auto" else engine,
        timeout=timeout,
        minimize=minimize,
        smt2_dir=smt2_dir,
        device=device,
        cache_dir=None if no_cache else cache_dir,
        certify_dir=certify_dir,
    )
    try:  # report folders are created up front, so a typo fails before the checks, not after
        for folder in (smt2_dir, certify_dir):
            if folder is not None:
                folder.mkdir(parents=True, exist_ok=True)
        for output in (json_path, junit_path, html_path):
            if output is not None:
                output.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _fail_input(f"cannot create an output folder: {exc}")
    loaded = []
    for path in specs:
        try:
            loaded.append(load_spec(path))
        except SpecError as exc:
            _fail_input(str(exc))
    if not quiet:
        for spec in loaded:
            for note in spec.model.notes:
                err_console.print(f"[dim]{spec.path.name}: {note}[/]", highlight=False)
    mode = "off" if quiet else ("bar" if err_console.is_terminal else "log")
    total = sum(len(spec.properties) for spec in loaded)
    executor = _open_cluster(cluster_address, quiet) if cluster_address is not None else None
    workers = executor.workers if executor is not None else jobs
    side_by_side = workers > 1 and total > 1  # properties run at once: one overall bar, no per-property bars
    where = f"on the Dask cluster ({workers} workers)" if executor is not None else f"{jobs} worker processes"
    overall = _Progress(f"{total} properties, {where}", mode if side_by_side else "off")
    finished = []

    def arrived(verdict) -> None:
        from ..engines.base import ProgressEvent

        finished.append(verdict)
        overall(ProgressEvent("", f"{verdict.property}: {verdict.status}", len(finished), total, "properties"))

    try:
        verdicts = check_all(
            loaded,
            overrides,
            jobs=jobs,
            cache=None if no_cache else ProofCache(cache_dir),
            on_verdict=arrived,
            executor=executor,
            progress=lambda spec, prop: _Progress(f"{spec.path.name}: {prop.label}", "off" if side_by_side else mode),
        )
    finally:
        overall.close()
        if executor is not None:
            executor.close()
    expectations = [prop.expect for spec in loaded for prop in spec.properties]
    code = combined_exit_code(verdicts, expectations, fail_on)
    if not quiet:
        console.print(verdict_table(verdicts, expectations))
        for v in verdicts:
            if v.status == "error" and v.statistics.get("traceback"):
                err_console.print(f"[magenta]{v.property}[/]: {v.statistics['traceback']}", highlight=False)
    if json_path is not None:
        write_json(json_path, verdicts, expectations, fail_on)
    if junit_path is not None:
        from ..junit import write_junit

        write_junit(junit_path, verdicts, expectations, unknown_as)
    if explain or html_path is not None:
        from ..explain import explain_verdicts

        by_path = {str(spec.path): spec for spec in loaded}
        explained = explain_verdicts([(by_path[v.spec], v) for v in verdicts if v.status == "refuted"])
        _show_explained(explained, print_traces=explain, html_path=html_path, source=", ".join(map(str, specs)))
    sys.exit(code)


def _open_cluster(address: str, quiet: bool):
    """The Dask executor for ``--cluster`` (Dask is imported only here); a cluster that cannot be used is exit 2."""
    import logging

    from ..executors import ClusterUnavailable, open_cluster

    # a lost scheduler is reported in the verdicts; Dask's client would also log each reconnection attempt
    logging.getLogger("distributed.client").setLevel(logging.CRITICAL)
    try:
        executor = open_cluster(address)
    except ClusterUnavailable as exc:
        _fail_input(str(exc), hint=exc.hint or None)
    if not quiet:
        err_console.print(f"[dim]cluster: {executor.describe()}[/]", highlight=False)
    from rich.markup import escape

    for refused in executor.refused:
        err_console.print(f"[yellow]cluster: refused {escape(refused)}[/]", highlight=False, soft_wrap=True)
    return executor


def _require_device(device: str) -> None:
    """``--device cuda`` on a machine without a usable GPU is an input error, the same in every command."""
    from .devices import NO_CUDA_HINT, device_problem

    problem = device_problem(device)
    if problem is not None:
        _fail_input(problem, hint=NO_CUDA_HINT)


def _show_explained(explained, print_traces: bool, html_path: Path | None, source: str) -> None:
    from ..explain import print_explained, write_html

    if print_traces:
        if not explained:
            console.print("no refuted property: nothing to explain")
        for item in explained:
            print_explained(console, item)
    if html_path is not None:
        html_path.parent.mkdir(parents=True, exist_ok=True)
        write_html(html_path, explained, source)
        err_console.print(f"wrote {html_path} ({len(explained)} counterexample(s))", highlight=False)


@main.command()
@click.argument("report_path", metavar="REPORT", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True, max=MAX_TIMEOUT),
    default=600.0,
    show_default=True,
    help="Seconds per certificate for re-checking it.",
)
@click.option("--strict", is_flag=True, help="Partial evidence (e.g. an LRAT proof over budget) fails too.")
def audit(report_path, timeout, strict) -> None:
    """Re-check a JSON report offline: every certificate, every counterexample, every cached verdict.

    Exit codes: 0 everything checks (with --strict: and no evidence is partial), 1 something failed (named),
    2 the report cannot be read.
    """
    from ..audit import FAILED, PARTIAL, AuditError, audit_exit_code, audit_report

    try:
        items = audit_report(report_path, timeout)
    except AuditError as exc:
        _fail_input(str(exc))
    style = {"ok": "green", PARTIAL: "yellow", FAILED: "bold red"}
    for item in items:
        cached = " (cached)" if item.cached else ""
        console.print(
            f"[{style[item.outcome]}]{item.outcome}[/] {Path(item.spec).name}: {item.property} "
            f"({item.verdict}{cached})",
            highlight=False,
        )
        for line in item.checked:
            console.print(f"    checked: {line}", highlight=False)
        for line in item.partial:
            console.print(f"    [yellow]partial:[/] {line}", highlight=False)
        for line in item.problems:
            console.print(f"    [red]FAILED:[/] {line}", highlight=False)
    failed = sum(i.outcome == FAILED for i in items)
    partial = sum(i.outcome == PARTIAL for i in items)
    console.print(
        f"{len(items)} results: {len(items) - failed - partial} ok, {partial} partial, {failed} failed", highlight=False
    )
    sys.exit(audit_exit_code(items, strict))


@main.command()
@click.argument("report_path", metavar="REPORT", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write a self-contained HTML report with attention heatmaps.",
)
@click.option("--property", "only", multiple=True, help="Only these properties (by name; repeatable).")
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors (with --html).")
def explain(report_path, html_path, only, quiet) -> None:
    """Replay each refuted property's witness from a JSON REPORT and show its layer-by-layer trace.

    The report is the one written by `verify-tf check --json`; its results name the spec and the
    property's index, so the spec is re-loaded and the witness inputs are re-evaluated on the interpreter.
    """
    from ..explain import ExplainError, explain_report

    try:
        explained = explain_report(report_path, only=set(only) or None)
    except ExplainError as exc:
        _fail_input(str(exc))
    _show_explained(explained, print_traces=not quiet, html_path=html_path, source=str(report_path))


@main.command()
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
    from ..semantics import UnsupportedInMode, evaluate
    from ..spec import SpecError, load_spec
    from ..trace_view import parse_input, print_trace, trace_to_json

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
        click.echo(json.dumps(trace_to_json(trace, spec.model), indent=2))
    else:
        print_trace(console, spec.model, spec.arithmetic, trace)


@main.command()
def schema() -> None:
    """Print the JSON Schema of spec files (for editors)."""
    from ..spec.loader import json_schema

    click.echo(json.dumps(json_schema(), indent=2, default=str))


@main.command()
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path), default="spec.yaml")
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
def init(path: Path, force: bool) -> None:
    """Write a commented starter spec to PATH (default spec.yaml)."""
    from ..starter import STARTER_SPEC

    if path.exists() and not force:
        _fail_input(f"{path} exists (use --force to overwrite)")
    path.write_text(STARTER_SPEC)
    console.print(f"wrote {path}; run: verify-tf check {path}")


@main.command(name="properties")
def list_properties() -> None:
    """List the available properties and their engines."""
    from rich.table import Table

    from ..properties import registry

    table = Table(header_style="bold")
    table.add_column("property")
    table.add_column("engines")
    table.add_column("summary", ratio=1)
    for name, prop in registry().items():
        table.add_row(name, ", ".join(prop.engines), prop.summary)
    console.print(table)


def _mount_optional_groups() -> None:
    """Register the click groups other parts of the project provide; each is imported on first use."""
    main.optional["crasp"] = (
        "verify_tf.cli.crasp",
        "crasp",
        "C-RASP programs: counting, boolean tests and comparisons over prefixes.",
    )
    main.optional["experiment"] = (
        "verify_tf.cli.experiment",
        "experiment",
        "Float training experiments (evidence, never verdicts).",
    )


_mount_optional_groups()


def entry() -> None:  # pragma: no cover - console-script shim
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERNAL)

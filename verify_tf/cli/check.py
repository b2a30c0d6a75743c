"""The ``check`` command: load the specs, run every property, print the verdict table, write the reports.

``_check`` is the pipeline of ``verify-tf check`` in one screen: the flags checked, the specs loaded
(``spec.load_spec``), every property run by ``runner.check_all`` (per property ``runner.check_property``: its
task, the engine or auto's choice, the driver, the verdict, the certificate), then the report (the table and
summary, ``--json``, ``--junit``, ``--explain``/``--html``) and the exit code; each stage is a helper below it.

Exit codes: 0 all proved, 1 something refuted, 2 input error, 3 nothing refuted but something unknown,
4 internal error (a property's verdict is ``error``).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click
from rich.markup import escape

from ..spec.loader import ENGINES
from ..verdict import EXIT_INTERRUPTED
from ..work import MAX_TIMEOUT, interrupted
from . import output
from .interrupts import Interrupts, end_descendants, remove_scratch, signal_name
from .progress import ProgressDisplay
from .reports import show_explained

if TYPE_CHECKING:
    from ..runner import Overrides

SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


class ByteSize(click.ParamType):
    """A size in bytes: 1048576, 512K, 256M, 2G (binary multiples; an optional B or iB)."""

    name = "SIZE"

    def convert(self, value, param, ctx) -> int:
        if isinstance(value, int):
            return value
        text = str(value).strip().upper().removesuffix("B").removesuffix("I")
        unit = text[-1:] if text[-1:] in SIZE_UNITS else ""
        try:
            number = float(text[: len(text) - len(unit)])
        except ValueError:
            self.fail(f"{value!r} is not a size (e.g. 512M, 2G)", param, ctx)
        size = int(number * SIZE_UNITS[unit])
        if not (1 << 16) <= size <= (1 << 50):
            self.fail(f"{value!r}: expected between 64K and 1024T", param, ctx)
        return size


@dataclass(frozen=True)
class CheckOptions:
    """What ``verify-tf check`` was asked, as click parsed it: one field per argument and option of the command.
    The run options among them reach the checks as one ``runner.Overrides`` (``overrides``), and from there each
    property's ``contract.Settings`` (``runner.settings_of``), as ``verify_tf.api`` builds its own."""

    specs: tuple[Path, ...]
    engine: str | None
    timeout: float | None
    json_path: Path | None
    junit_path: Path | None
    unknown_as: str
    fail_on: str
    jobs: int
    cluster_address: str | None
    cache_dir: Path
    no_cache: bool
    explain: bool
    html_path: Path | None
    minimize: bool
    smt2_dir: Path | None
    certify_dir: Path | None
    certify_partial: bool
    device: str
    memory: int | None
    spill_dir: Path | None
    quiet: bool
    verbose: bool

    def overrides(self) -> Overrides:
        """The run options every property of the run gets (the command line over the specs)."""
        from ..runner import Overrides

        return Overrides(
            engine=None if self.engine == "auto" else self.engine,
            timeout=self.timeout,
            minimize=self.minimize,
            smt2_dir=self.smt2_dir,
            device=self.device,
            cache_dir=None if self.no_cache else self.cache_dir,
            certify_dir=self.certify_dir,
            memory=self.memory,
            spill_dir=self.spill_dir,
        )


@click.command()
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
    type=click.Choice(["skipped", "unknown", "refuted"]),
    default="unknown",
    show_default=True,
    help="The weakest outcome that fails the run: 'unknown' (exit 3 when nothing is refuted; skipped properties "
    "pass), 'skipped' (a property skipped for a missing package fails as unknown does) or 'refuted' (unknown "
    "verdicts exit 0).",
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
    "re-check with `verify-tf audit`; bypasses the cache; docs/trust.md). Needs the certify extra.",
)
@click.option(
    "--certify-partial",
    is_flag=True,
    help="Certify with what is installed even without the certify extra (cvc5, python-sat): the evidence "
    "they would give is missing, and `verify-tf audit` reports it as partial.",
)
@click.option(
    "--device",
    type=click.Choice(["auto", "cpu", "cuda"]),
    default="auto",
    show_default=True,
    help="Device for the torch path.",
)
@click.option(
    "--memory",
    type=ByteSize(),
    help="Working memory of each process (e.g. 512M, 2G; default 256M): the size of evaluated batches and of the "
    "sorted runs kept in memory before they are spilled. Lower it when a check runs out of memory.",
)
@click.option(
    "--spill-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for the sorted runs a large distinct-values scan spills (default: TMPDIR, else the system's "
    "temporary folder); each check removes its own.",
)
@click.option("--quiet", "-q", is_flag=True, help="No table; only the exit code and errors.")
@click.option(
    "--verbose",
    "-v",
    is_flag=True,
    help="Print every model note, and each verdict's engine and what it tried (default: one line of notes).",
)
def check(**options) -> None:
    """Check every property of every SPEC and print a verdict table.

    Exit codes: 0 every property proved (or got its `expect:` verdict), 1 something refuted (or a definite
    verdict contradicted `expect:`), 2 input error, 3 nothing refuted but something unknown (0 with
    --fail-on refuted), 4 internal error. A spec that needs a package that is not installed is skipped: its
    properties are `skipped (needs PACKAGE)`, which fails the run only with --fail-on skipped (exit 3).
    SIGINT exits 130 and SIGTERM 143 (never a verdict).
    """
    with Interrupts() as interrupts:  # SIGINT/SIGTERM: never a verdict (docs/cli.md, "Interrupts")
        _check(interrupts, CheckOptions(**options))


def _check(interrupts: Interrupts, asked: CheckOptions) -> None:
    from ..cache import ProofCache
    from ..reporting.report import combined_exit_code

    started = time.perf_counter()
    # exit 2 before anything runs
    _check_flags(asked.device, asked.certify_dir, asked.certify_partial, asked.cluster_address, asked.jobs)
    overrides = asked.overrides()
    _create_folders(
        (asked.smt2_dir, asked.certify_dir, asked.spill_dir), (asked.json_path, asked.junit_path, asked.html_path)
    )
    with interrupts.exiting_at_once():  # a signal while loading exits at once: nothing was checked
        entries = _load_specs(asked.specs, asked.quiet)  # load: every spec, or exit 2 at the first mistake
    loaded = [entry for entry in entries if not isinstance(entry, tuple)]
    if not asked.quiet:
        _print_notes(loaded, asked.verbose)
    store = None if asked.no_cache else ProofCache(asked.cache_dir)
    reports = _Reports(entries, overrides, started, asked.fail_on, asked.json_path, asked.junit_path, asked.unknown_as)
    interrupts.last_words = reports.write_finished  # a second signal: the reports of what finished, then exit
    # every property: its task, the engine (auto's choice), the driver, the verdict, the certificate (runner)
    skipped = sum(len(entry[1].properties) for entry in entries if isinstance(entry, tuple))
    checked = _check_all(
        loaded, overrides, asked.jobs, asked.cluster_address, store, asked.quiet, skipped, reports.arrived
    )
    verdicts, expectations = _in_spec_order(entries, checked)
    seconds = time.perf_counter() - started
    signum = interrupted()
    reports.write(verdicts, expectations, seconds)  # the files first: a second signal then has nothing to lose
    if not asked.quiet:  # report: the table and the summary
        _print_verdicts(verdicts, expectations, seconds, store, asked.verbose)
    _print_input_errors(verdicts)  # -q too: a mistake met at check time is printed as one met at load
    if signum is not None:
        _exit_interrupted(sum(v.method != "interrupted" for v in checked), len(checked))
    if asked.explain or asked.html_path is not None:
        _explain(loaded, verdicts, asked.explain, asked.html_path, asked.specs)
    sys.exit(combined_exit_code(verdicts, expectations, asked.fail_on))


def _check_flags(device: str, certify_dir, certify_partial: bool, cluster_address, jobs: int) -> None:
    """The flags that need something of this machine: a GPU, the certify extra, a usable cluster address."""
    _require_device(device)
    if certify_dir is not None and not certify_partial:
        _require_certify_extra()
    if cluster_address is not None:
        from ..executors import cluster_address_problem

        problem = cluster_address_problem(cluster_address)
        if problem is None and jobs > 1:
            problem = "--cluster and -j N cannot be combined: the cluster's workers run the units"
        if problem is not None:
            output.fail_input(
                problem, hint="--cluster local:4 (four worker processes here) or --cluster tcp://HOST:8786"
            )


def _create_folders(folders: tuple[Path | None, ...], files: tuple[Path | None, ...]) -> None:
    """The folders asked for and the report files' parents, created up front so that a typo fails before the
    checks, not after."""
    try:
        for folder in folders:
            if folder is not None:
                folder.mkdir(parents=True, exist_ok=True)
        for target in files:
            if target is not None:
                target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        output.fail_input(f"cannot create an output folder: {exc}")


def _check_all(
    loaded, overrides: Overrides, jobs: int, cluster_address, store, quiet: bool, skipped: int, on_verdict
) -> list:
    """``runner.check_all`` with the progress displays: one per property, or one overall bar when properties
    run side by side (``-j N``, ``--cluster``); the cluster is opened here and closed after. The overall count
    is the summary's: the ``skipped`` properties of specs that cannot run here count as done from the start.
    ``on_verdict`` hears each verdict as it arrives."""
    from ..engines.base import ProgressEvent
    from ..runner import check_all

    mode = "off" if quiet else ("bar" if output.err_console.is_terminal else "log")
    total = sum(len(spec.properties) for spec in loaded) + skipped
    executor = _open_cluster(cluster_address, quiet) if cluster_address is not None else None
    workers = executor.workers if executor is not None else jobs
    side_by_side = workers > 1 and total > 1  # properties run at once: one overall bar, no per-property bars
    where = f"on the Dask cluster ({workers} workers)" if executor is not None else f"{jobs} worker processes"
    overall = ProgressDisplay(f"{total} properties, {where}", mode if side_by_side else "off")
    finished = [skipped]

    def arrived(verdict) -> None:
        on_verdict(verdict)
        finished[0] += 1
        said = f"{Path(verdict.spec).name}: {verdict.property}: {verdict.status}"
        overall(ProgressEvent("", said, finished[0], total, "properties"))

    try:
        return check_all(
            loaded,
            overrides,
            jobs=jobs,
            cache=store,
            on_verdict=arrived,
            executor=executor,
            progress=lambda spec, prop: ProgressDisplay(
                f"{spec.path.name}: {prop.label}",
                "off" if side_by_side else mode,
                forward=overall if side_by_side else None,  # certification still shows on the overall display
            ),
        )
    finally:
        overall.close()
        if executor is not None:
            executor.close()


def _print_verdicts(verdicts, expectations, seconds: float, store, verbose: bool = False) -> None:
    """The cache's rejected entries, the verdict table, every error's traceback, the skipped, the summary."""
    from ..reporting.table import VerdictTable

    for note in store.notes() if store is not None else ():  # docs/ci.md: the cache's trust model
        output.err_console.print(note, highlight=False, markup=False)
    output.console.print(VerdictTable(verdicts, expectations, verbose))
    for v in verdicts:
        if v.status == "error" and v.traceback:
            output.err_console.print(f"[magenta]{escape(v.property)}[/]: {escape(v.traceback)}", highlight=False)
    print_skipped(verdicts)
    print_summary(verdicts, expectations, seconds)


def _print_input_errors(verdicts) -> None:
    """Each ``error (input error)`` verdict (``runner.input_error``: the property's premise does not hold) on stderr
    as a load error prints: ``error: file:line: key: message`` and its hint (the run then exits 2)."""
    from ..schema.errors import SpecError

    for v in verdicts:
        located = v.statistics.get("input_error") if v.status == "error" else None
        if located:
            error = SpecError(located["message"], file=located["file"], line=located["line"], path=located["key"])
            output.print_input_error(str(error), located["hint"])


class _Reports:
    """The ``--json`` and ``--junit`` reports of the run, written once: at its end (``write``), or by a second
    SIGINT/SIGTERM from the interrupt watcher's thread (``write_finished``: every verdict that arrived, every other
    property ``unknown (interrupted)``), whichever comes first; the one that comes second writes nothing."""

    def __init__(self, entries, overrides, started: float, fail_on: str, json_path, junit_path, unknown_as) -> None:
        self.entries, self.overrides, self.started = entries, overrides, started
        self.fail_on, self.json_path, self.junit_path, self.unknown_as = fail_on, json_path, junit_path, unknown_as
        self.finished: dict[tuple[str, int], object] = {}  # (spec, index) -> verdict, as each arrives
        self.lock = threading.Lock()
        self.written = False

    def arrived(self, verdict) -> None:
        self.finished[(verdict.spec, verdict.index)] = verdict

    def write(self, verdicts, expectations, seconds: float) -> None:
        with self.lock:
            if not self.written:
                self._write(verdicts, expectations, seconds)

    def write_finished(self) -> None:
        """At the second signal (another thread): the reports of what finished. Waits a moment for a ``write``
        under way (then there is nothing left to write)."""
        from ..runner import interrupted_verdict

        if not self.lock.acquire(timeout=5):
            return
        try:
            if self.written:
                return
            name = signal_name(interrupted() or signal.SIGINT)
            detail = f"not finished ({name}; a second signal ended the run)"
            checked = [
                self.finished.get((str(spec.path), prop.index))
                or interrupted_verdict(spec, prop, self.overrides, None, detail)
                for spec in self.entries
                if not isinstance(spec, tuple)
                for prop in spec.properties
            ]
            verdicts, expectations = _in_spec_order(self.entries, checked)
            self._write(verdicts, expectations, time.perf_counter() - self.started)
        finally:
            self.lock.release()

    def _write(self, verdicts, expectations, seconds: float) -> None:
        signum = interrupted()
        stopped_by = signal_name(signum) if signum is not None else None
        run = {"engine": self.overrides.engine, "timeout": self.overrides.timeout}  # audit re-runs unknowns under it
        if self.json_path is not None:
            from ..reporting.report import write_json

            write_json(self.json_path, verdicts, expectations, self.fail_on, seconds, stopped_by, run)
        if self.junit_path is not None:
            from ..reporting.junit import write_junit

            write_junit(self.junit_path, verdicts, expectations, self.unknown_as)
        self.written = True


def _explain(loaded, verdicts, print_traces: bool, html_path, specs) -> None:
    """Every refutation's layer-by-layer trace: printed (``--explain``) and/or as an HTML report (``--html``)."""
    from ..explain import explain_verdicts

    by_path = {str(spec.path): spec for spec in loaded}
    explained = explain_verdicts([(by_path[v.spec], v) for v in verdicts if v.status == "refuted"])
    show_explained(explained, print_traces=print_traces, html_path=html_path, source=", ".join(map(str, specs)))


def _exit_interrupted(finished: int, total: int) -> NoReturn:
    """After SIGINT/SIGTERM: remove the scratch folders, end every process this one started, exit 130/143."""
    signum = interrupted() or signal.SIGINT
    remove_scratch()
    ended = end_descendants()
    code = EXIT_INTERRUPTED[signum]
    output.err_console.print(
        f"[yellow]interrupted ({signal_name(signum)}): {finished} of {total} properties finished, the rest are "
        f"unknown (interrupted); {len(ended)} child process(es) ended; exit {code}[/]",
        highlight=False,
    )
    # the reports are written and the children ended: skip the interpreter's shutdown (atexit joins, collecting
    # every cached program), which took seconds after a -j 2 run
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _require_certify_extra() -> None:
    """``--certify`` without cvc5 and python-sat would write certificates without their evidence: an input
    error naming the extra, unless ``--certify-partial`` asks for exactly that."""
    from ..certify import missing_packages

    missing = missing_packages()
    if missing:
        output.fail_input(
            f"--certify needs the certify extra: {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} "
            "not installed",
            hint="pip install 'verify-tf[certify]' (in a checkout: pip install -e '.[certify]'), or add "
            "--certify-partial to certify with what is installed (audit then reports the evidence as partial)",
        )


def _load_specs(paths, quiet: bool) -> list:
    """Every spec loaded, in order, or exit 2 at the first mistake; a spec needing a package that is not
    installed is kept as (path, MissingDependency): its properties are skipped (said once, after the table)."""
    from ..schema.errors import MissingDependency
    from ..spec import SpecError, load_spec

    entries: list = []
    for path in paths:
        try:
            entries.append(load_spec(path))
        except MissingDependency as missing:
            entries.append((path, missing))
        except SpecError as exc:
            output.fail_input(str(exc))
    return entries


def _print_notes(loaded, verbose: bool) -> None:
    """The models' notes (how each was imported and is read) on stderr: every one with -v, else one line for
    the whole run. What a verdict is about (the reading, the weights' rounding) is printed with the verdict."""
    noted = [spec for spec in loaded if spec.model.notes]
    if verbose:
        for spec in noted:
            for note in spec.model.notes:
                output.err_console.print(f"[dim]{escape(spec.path.name)}: {escape(note)}[/]", highlight=False)
    elif noted:
        count = sum(len(spec.model.notes) for spec in noted)
        which = noted[0].path.name if len(noted) == 1 else f"{len(noted)} specs"
        output.err_console.print(
            f"[dim]{count} model note{'s' if count != 1 else ''} ({escape(which)}): how the models were imported "
            "and are read; -v prints them[/]",
            highlight=False,
        )


def _in_spec_order(entries, checked) -> tuple[list, list]:
    """(verdicts, expectations) in the order the specs were given: each loaded spec's verdicts (``checked``
    lists them spec by spec), and every property of a skipped spec as skipped (``runner.not_run``)."""
    from ..runner import not_run

    remaining = iter(checked)
    verdicts, expectations = [], []
    for entry in entries:
        if isinstance(entry, tuple):  # (path, MissingDependency): not run here
            path, missing = entry
            verdicts += not_run(path, missing)
            expectations += [p.expect for p in missing.properties]
        else:
            verdicts += [next(remaining) for _ in entry.properties]
            expectations += [p.expect for p in entry.properties]
    return verdicts, expectations


def print_skipped(verdicts) -> None:
    """The properties skipped for a missing package: one line per package with its specs, and how to install it
    (said once, however many specs need it)."""
    from rich.text import Text

    from ..reporting.table import indented

    width = output.console.width
    specs: dict[str, dict[str, int]] = {}  # package -> spec -> properties skipped
    installs: dict[str, dict[str, None]] = {}  # package -> how to install it (one text, in practice)
    for v in verdicts:
        if v.status == "skipped":
            missing = v.statistics.get("missing") or {}
            package, name = missing.get("package", "?"), Path(v.spec).name
            specs.setdefault(package, {})[name] = specs.get(package, {}).get(name, 0) + 1
            installs.setdefault(package, {})[missing.get("install", "")] = None
    for package, counted in specs.items():
        listed = ", ".join(f"{name} ({n})" for name, n in counted.items())
        said = f"skipped ({sum(counted.values())}): {package} is not installed: {listed}"
        for line in indented(Text(said), width, indent=0):
            output.console.print(line, style="yellow", highlight=False)
        for install in filter(None, installs[package]):
            for line in indented(Text(install), width, indent=2):
                output.console.print(line, highlight=False)


def print_summary(verdicts, expectations, seconds: float) -> None:
    """The run's last lines: the unexpected verdicts (most serious first), then the counts and the time."""
    from rich.text import Text

    from ..reporting.report import describe_unexpected, summarize
    from ..reporting.table import indented, phrase_lines

    summary = summarize(verdicts, expectations, seconds)
    style = {"error": "bold magenta", "refuted": "bold red", "unknown": "yellow"}
    if summary.unexpected:
        output.console.print(f"[bold]unexpected ({len(summary.unexpected)}):[/]", highlight=False)
        for verdict, expect in summary.unexpected:
            line = Text(describe_unexpected(verdict, expect), style=style.get(verdict.status, "red"))
            for part in indented(line, output.console.width, indent=2):
                output.console.print(part, highlight=False)
    first, *rest = phrase_lines(f"summary: {summary.line()}", output.console.width)
    output.console.print(Text.assemble(("summary:", "bold"), first.removeprefix("summary:")), highlight=False)
    for more in rest:
        output.console.print(Text(more), highlight=False)


def _open_cluster(address: str, quiet: bool):
    """The Dask executor for ``--cluster`` (Dask is imported only here); a cluster that cannot be used is exit 2."""
    from ..executors import ClusterUnavailable, open_cluster

    try:
        executor = open_cluster(address)
    except ClusterUnavailable as exc:
        if interrupted() is not None:  # Ctrl-C while the workers started (they got it too): not an input error
            _exit_interrupted(0, 0)
        output.fail_input(str(exc), hint=exc.hint or None)
    if not quiet:
        output.err_console.print(f"[dim]cluster: {escape(executor.describe())}[/]", highlight=False)
    for refused in executor.refused:
        output.err_console.print(f"[yellow]cluster: refused {escape(refused)}[/]", highlight=False, soft_wrap=True)
    return executor


def _require_device(device: str) -> None:
    """``--device cuda`` on a machine without a usable GPU is an input error, the same in every command."""
    if device != "cuda":  # auto and cpu always run (cli.devices is imported only for a GPU)
        return
    from .devices import device_problem

    problem = device_problem(device)
    if problem is not None:
        output.fail_input(*problem)

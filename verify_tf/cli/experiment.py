"""The ``experiment`` command: ``verify-tf experiment SPEC [--out DIR] [--preset small|gpu]
[--device auto|cpu|cuda] [--seed N] [--threads N] [--export DIR] [--prove] [--fresh]``.

Trains the float models an experiment spec asks for and shows its progress on stderr (a bar on a terminal, a
line every 10 s in logs, as ``check`` does, and a line as each model finishes). Each finished model is written
under ``--out`` at once (``DIR/<spec name>-runs/``: its row, its checkpoint, its ``--prove`` verdicts), and a
later run of the same command resumes from them. At the end it prints a summary table and writes
``<spec name>.json`` and ``<spec name>.png`` under ``--out``. SIGINT or SIGTERM stop it as they stop ``check``:
the model in progress is dropped, the finished ones are kept (and ``<spec name>.json`` lists them), exit 130 or
143. Input problems print ``error: <located message>`` and exit with status 2. The results are evidence from
float training, never verdicts, and the exit status does not depend on them (0 when the run completed).
"""

from __future__ import annotations

import os
import signal
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.console import Group
from rich.markup import escape
from rich.table import Table

from ..engines.base import ProgressEvent
from ..experiments.common import ExperimentError, Interrupted
from ..experiments.runner import make_store, partial_result, run_experiment, write_outputs
from ..experiments.spec import PRESETS, load_experiment
from ..schema.errors import SpecError
from ..verdict import EXIT_INPUT_ERROR, EXIT_INTERRUPTED
from . import output
from .devices import device_problem
from .interrupts import Interrupts, signal_name
from .progress import ProgressDisplay

__all__ = ["experiment"]


class _InputError(click.ClickException):
    exit_code = EXIT_INPUT_ERROR

    def show(self, file=None) -> None:
        click.echo(f"error: {self.format_message()}", err=True, file=file)


@click.command(name="experiment")
@click.argument("spec", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("results"),
    show_default=True,
    help="Folder for the JSON result and the PNG plot.",
)
@click.option(
    "--preset",
    type=click.Choice(PRESETS),
    default="small",
    show_default=True,
    help="small: minutes on a CPU; gpu: larger models and longer training.",
)
@click.option(
    "--device",
    type=click.Choice(["auto", "cpu", "cuda"]),
    default="auto",
    show_default=True,
    help="auto uses CUDA when torch sees a GPU.",
)
@click.option("--seed", type=int, help="Override the spec's seed.")
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="CPU threads for torch (the small models gain little from more).",
)
@click.option(
    "--export",
    "export_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="yang-lk-depth, luo-position-index: write every trained model (state dict) and the specs that check it, "
    "quantized, here.",
)
@click.option(
    "--fresh",
    is_flag=True,
    help="Train every model again, ignoring the finished ones kept under --out (by default a run resumes from them).",
)
@click.option(
    "--prove",
    is_flag=True,
    help="yang-lk-depth, luo-position-index: run the exported specs and add the quantized models' exact verdicts "
    "(yang: every word of L_k up to 100, every string up to 100; luo: position-blind on constant inputs, the eps* "
    "bound) to the table, the JSON and the plot (exports to OUT/<spec>-models without --export).",
)
def experiment(
    spec: Path,
    out_dir: Path,
    preset: str,
    device: str,
    seed: int | None,
    threads: int,
    export_dir: Path | None,
    fresh: bool,
    prove: bool,
) -> None:
    """Float training experiments (Luo et al. RPE/URPE, Yang et al. depth staircase): evidence, not verdicts.

    Each model is written under --out as it finishes, and a run of the same command resumes from them (--fresh:
    train everything again). SIGINT exits 130 and SIGTERM 143, keeping the finished models.
    """
    problem = device_problem(device)
    if problem is not None:
        raise _InputError(f"{problem[0]}\n  hint: {problem[1]}")
    try:
        loaded = load_experiment(spec)
    except SpecError as exc:
        raise _InputError(str(exc)) from None
    if (export_dir is not None or prove) and loaded.experiment == "prefix-labels":
        raise _InputError(
            "--export and --prove are for yang-lk-depth and luo-position-index, not prefix-labels\n  hint: "
            "prefix-labels always writes its model and check spec under --out"
        )
    if prove and export_dir is None:
        export_dir = out_dir / f"{spec.stem}-models"
    kept = f"the models that finished are kept under {out_dir} (the same command resumes from them)"
    with Interrupts(kept=kept):  # SIGINT/SIGTERM: the finished models are kept (docs/experiments.md)
        result = _run(loaded, spec, out_dir, export_dir, preset, device, seed, threads, fresh, prove)
    json_path, png_path = write_outputs(result, out_dir, spec.stem)
    console = output.console
    console.print(_summary_table(result))
    console.print(f"[dim]{escape(result['evidence'])}[/]")
    wrote = (
        f"wrote {json_path} and {png_path}"
        if png_path
        else (f"wrote {json_path} (no plot: matplotlib is not installed; pip install 'verify-tf[plots]')")
    )
    console.print(
        f"{result['wall_seconds']:.1f} s wall, {result['cpu_seconds']:.1f} s CPU on {result['device']} "
        f"({result['device_name']}); {wrote}",
        highlight=False,
        markup=False,
    )


def _run(loaded, spec: Path, out_dir: Path, export_dir, preset, device, seed, threads, fresh, prove) -> dict[str, Any]:
    """Train (or resume) every model with its progress on stderr; after a signal, write what finished and exit."""
    display = _Displays(spec.name)
    try:
        try:
            store = make_store(
                loaded, out_dir, preset=preset, device=device, seed=seed, threads=threads, fresh=fresh, say=display.say
            )
        except ExperimentError as exc:
            raise _InputError(str(exc)) from None

        def progress(label: str, done: int, total: int) -> None:
            model = f" (model {store.started} of {store.total})" if store.total > 1 else ""
            display(ProgressEvent("", f"{label}{model}", done, total or None, "steps"))

        try:
            return run_experiment(
                loaded,
                preset=preset,
                device=device,
                seed=seed,
                threads=threads,
                progress=progress,
                out_dir=out_dir,
                export_dir=export_dir,
                prove=prove,
                store=store,
            )
        except ExperimentError as exc:
            raise _InputError(str(exc)) from None
        except Interrupted as stop:
            display.close()
            _stopped(loaded, spec, store, out_dir, stop.signum, preset=preset, seed=seed)
    finally:
        display.close()
    raise AssertionError("unreachable: _stopped exits")


class _Displays:
    """Progress where it is seen: a bar on a terminal's stderr, else a line every 10 s on stderr (a log); and when
    only stdout goes to a file (``experiment ... > log``, ``| tee log``), the lines there too, so the log shows
    the run going."""

    def __init__(self, label: str):
        err, out = output.err_console, output.console
        self.shown = [ProgressDisplay(label, "bar" if err.is_terminal else "log")]
        if err.is_terminal and not out.is_terminal:
            self.shown.append(ProgressDisplay(label, "log", console=out))

    def __call__(self, event: ProgressEvent) -> None:
        for display in self.shown:
            display(event)

    def say(self, text: str) -> None:
        for display in self.shown:
            display.say(text)

    def close(self) -> None:
        for display in self.shown:
            display.close()


def _stopped(loaded, spec: Path, store, out_dir: Path, signum: int, **settings: Any) -> NoReturn:
    """After SIGINT/SIGTERM: the finished models are on disk already; the result lists them; exit 130/143."""
    name = signal_name(signum)
    json_path, _ = write_outputs(partial_result(loaded, store, name, **settings), out_dir, spec.stem)
    output.err_console.print(
        f"[yellow]interrupted ({name}): {len(store.finished)} of {store.total} models finished, kept in "
        f"{escape(str(store.folder))} and listed in {escape(str(json_path))}; the model in progress was dropped. "
        f"Run the same command again to resume; exit {EXIT_INTERRUPTED[signum]}[/]",
        highlight=False,
    )
    # the results are on disk: skip the interpreter's shutdown (torch's threads, atexit), as `check` does
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_INTERRUPTED.get(signum, EXIT_INTERRUPTED[signal.SIGINT]))


def _summary_table(result: dict[str, Any]) -> Table | Group:
    if result["experiment"] == "luo-position-index":
        return _luo_table(result)
    if result["experiment"] == "prefix-labels":
        return _prefix_table(result)
    return _yang_table(result)


def _prefix_table(result: dict[str, Any]) -> Table:
    """Training (evidence) and then the quantized model's check (verdicts), one row each."""
    selected = result["selected"]
    table = Table(
        title=f"{result['title']}\nfloat training: {100 * selected['validation_exact']:.0f}% exact match at the "
        f"training lengths, {100 * selected['test_exact']:.0f}% on longer strings; then the quantized model's check"
    )
    for name in ("property", "verdict", "s", "explored", "detail"):
        table.add_column(name, no_wrap=name != "detail")
    for check in result.get("checks", []):
        table.add_row(
            check["property"],
            check["verdict"],
            f"{check['seconds']:.1f}",
            str(check["explored_up_to"]),
            check["detail"],
        )
    if not result.get("checks"):
        table.add_row("(not run)", "", "", "", f"verify-tf check {result.get('check_spec', '')}")
    return table


def _luo_table(result: dict[str, Any]) -> Table | Group:
    table = Table(
        title=escape(result["title"]) + "\nbest over training, on random and on constant inputs: sup-error "
        "(position-index) or accuracy; ε* = (n−1)/2"
    )
    for name in ("task", "variant", "random", "constant", "ε*", "< ε*"):
        table.add_column(name, justify="left" if name in ("task", "variant") else "right", no_wrap=True)
    for run in result["runs"]:
        best = run["best"]
        if run["task"] == "position-index":
            cells = (
                f"{best['sup_error_random']:.3f}",
                f"{best['sup_error_constant']:.3f}",
                f"{run['epsilon_star']:g}",
                "yes" if run["below_epsilon_star"] else "no",
            )
        else:
            constant = best.get("accuracy_constant")
            cells = (
                f"{100 * best['accuracy_random']:.1f}%",
                "—" if constant is None else f"{100 * constant:.1f}%",
                "",
                "",
            )
        table.add_row(escape(run["task"]), escape(run["variant"]), *cells)
    if not any("exact" in run for run in result["runs"]):
        return table
    return Group(table, _luo_exact_table(result))


def _luo_exact_table(result: dict[str, Any]) -> Table:
    """The exported (selected) checkpoints, quantized: the float sup-error on constant inputs beside the quantized
    model's exact one, and the verdicts of position-blind and of the ε* certificate on the very model."""
    table = Table(
        title="the selected models, quantized: exact sup-error on constant inputs and verdicts (--prove)",
    )
    for name in ("task", "variant", "float", "exact", "ε*", "position-blind", "bound ε*"):
        table.add_column(name, justify="left" if name in ("task", "variant") else "right", no_wrap=True)
    short = {"position-index": "index", "position-identification": "identification", "even-token-prediction": "even"}
    for run in result["runs"]:
        exact = run.get("exact") or {}
        float_error, sup = exact.get("float_sup_error_constant"), exact.get("quantized_sup_error_constant_float")
        blind = exact.get("position_blind", "")
        if blind == "refuted" and exact.get("position_blind_witness"):
            blind += f" at {exact['position_blind_witness']}"
        epsilon = exact.get("epsilon_star")
        table.add_row(
            escape(short.get(run["task"], run["task"])),
            escape(run["variant"]),
            "" if float_error is None else f"{float_error:.3f}",
            "" if sup is None else f"{sup:.3f}",
            "" if epsilon is None else f"{float(Fraction(epsilon)):g}",
            escape(blind),
            escape(exact.get("bound", "")),
        )
    return table


def _yang_table(result: dict[str, Any]) -> Table:
    """Accuracy per (L_k, depth); with --prove each cell adds the quantized model's two exact verdicts: on every
    word of L_k up to N (the promise it was trained under) and on every string up to N (no promise)."""
    depths = result["table"]["depths"]
    strings = result["table"].get("exact_verdict") or []
    words = result["table"].get("words_verdict") or []
    proved = any(cell for row in strings for cell in row) or any(cell for row in words for cell in row)
    table = Table(
        title=escape(result["title"])
        + "\n% exact match on the longer test strings, by depth"
        + (
            "\nthen the quantized model's exact verdicts: L_k: every word of L_k up to N (least failing word); "
            "all: every string up to N (least counterexample)"
            if proved
            else ""
        )
    )
    table.add_column("L_k", no_wrap=True)
    for depth in depths:
        table.add_column(f"d={depth}", justify="right" if not proved else "left")
    table.add_column("C-RASP depth", justify="right")
    table.add_column("paper k−2", justify="right")
    table.add_column(f"first d ≥ {100 * result['solved_threshold']:.0f}%", justify="right")
    empty = [[None] * len(depths)] * len(result["table"]["languages"])
    for k, row, on_words, on_strings in zip(
        result["table"]["languages"], result["table"]["test_exact"], words or empty, strings or empty
    ):
        stairs = result["staircase"][f"L{k}"]
        measured = stairs["smallest_depth_solved"]
        table.add_row(
            f"L{k}",
            *(
                f"{100 * value:.0f}%"
                + (f"\nL{k}: {escape(word or '—')}\nall: {escape(string or '—')}" if proved else "")
                for value, word, string in zip(row, on_words, on_strings)
            ),
            str(stairs["crasp_program_depth"]),
            str(stairs["prediction_task_depth"]),
            "—" if measured is None else str(measured),
        )
    return table

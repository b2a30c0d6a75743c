"""Luo et al. (NeurIPS 2022, "Your Transformer May Not be as Powerful as You Expect"): train APE, RPE and
URPE transformers on position tasks and measure how close each gets.

Tasks (n = ``length``, tokens drawn from ``vocab`` kinds, positions numbered 1..n as in the paper):

* ``position-index`` — regression f(X)_i = i.  Training batches mix constant sequences (one token repeated
  n times) and random ones.  The measured quantity is the sup-error max_i |f(X)_i - i| over *all* ``vocab``
  constant inputs.  On a constant input an RPE transformer gives every position the same output y (softmax
  rows are stochastic, the FFN and residuals are token-wise), and max_i |y - i| >= (n-1)/2 with equality at
  y = (n+1)/2: that is the certificate eps* = (n-1)/2 of the ``inexpressible`` property, reported next to
  the measured value.  RPE must stall at >= eps* (up to float rounding); URPE / APE can go below.
* ``position-identification`` — the paper's Position Identification: random tokens, classify position i
  among n classes.  Accuracy on random inputs (and on constant inputs, where RPE is at 1/n).
* ``even-token-prediction`` — the paper's Even Token Prediction: for i < n/2 predict the token at (0-based)
  position 2i+1.  Accuracy on random inputs.

All numbers are float-training evidence, never a verdict (see ``EVIDENCE_NOTE``).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import torch
from torch.nn import functional

from ..domain import format_input
from ..numbers import fmt
from .common import Progress, run_seed, train
from .modules import TinyTransformer
from .prefix_labels import check_written_spec
from .spec import ExperimentSpec
from .store import RunStore
from .training import CheckpointSelector
from .yang import fixed_point_for

__all__ = ["epsilon_star", "plot_luo", "run_luo"]

VARIANT_LABELS = {"ape": "standard + APE", "rpe": "RPE", "urpe": "URPE"}
VARIANT_COLOURS = {"ape": "tab:blue", "rpe": "tab:red", "urpe": "tab:green"}
_EVAL_CHUNK = 1024


def epsilon_star(length: int) -> float:
    """The least sup-error of any position-blind model on a constant input for targets 1..n: (n-1)/2."""
    return (length - 1) / 2


def _outputs(task: str, settings: dict[str, Any]) -> int:
    return {
        "position-index": 1,
        "position-identification": settings["length"],
        "even-token-prediction": settings["vocab"],
    }[task]


class _Task:
    """Data and metrics of one task for one trained model."""

    def __init__(self, task: str, settings: dict[str, Any], generator: torch.Generator, device: torch.device):
        self.task, self.settings, self.generator, self.device = task, settings, generator, device
        self.length, self.vocab = settings["length"], settings["vocab"]
        self.positions = torch.arange(self.length, device=device)
        self.targets = (self.positions + 1).to(torch.float32)  # 1-based, as in the paper
        self.constant_inputs = torch.arange(self.vocab, device=device)[:, None].expand(self.vocab, self.length)
        self.random_inputs = self._random(settings["eval-samples"])

    def _random(self, count: int) -> torch.Tensor:
        return torch.randint(self.vocab, (count, self.length), generator=self.generator).to(self.device)

    def _constant(self, count: int) -> torch.Tensor:
        tokens = torch.randint(self.vocab, (count, 1), generator=self.generator)
        return tokens.expand(count, self.length).contiguous().to(self.device)

    def batch_loss(self, model: torch.nn.Module, batch: int) -> torch.Tensor:
        if self.task == "position-index":
            constant = round(batch * self.settings["constant-fraction"])
            tokens = torch.cat([self._constant(constant), self._random(batch - constant)])
            prediction = model(tokens)[..., 0]
            return functional.mse_loss(prediction, self.targets.expand_as(prediction))
        tokens = self._random(batch)
        logits = model(tokens)
        if self.task == "position-identification":
            return functional.cross_entropy(logits.reshape(-1, self.length), self.positions.repeat(batch))
        half = self.length // 2
        return functional.cross_entropy(
            logits[:, :half].reshape(-1, self.vocab), self._even_targets(tokens).reshape(-1)
        )

    def _even_targets(self, tokens: torch.Tensor) -> torch.Tensor:
        """Target of position i < n/2: the token at position 2i+1."""
        return tokens[:, 1::2][:, : self.length // 2]

    def _predict(self, model: torch.nn.Module, tokens: torch.Tensor) -> torch.Tensor:
        return torch.cat([model(chunk) for chunk in tokens.split(_EVAL_CHUNK)])

    def metrics(self, model: torch.nn.Module) -> dict[str, float]:
        if self.task == "position-index":
            errors = {
                name: (self._predict(model, tokens)[..., 0] - self.targets).abs()
                for name, tokens in (("constant", self.constant_inputs), ("random", self.random_inputs))
            }
            return {
                "sup_error_constant": float(errors["constant"].max()),
                "mean_error_constant": float(errors["constant"].mean()),
                "sup_error_random": float(errors["random"].max()),
            }
        if self.task == "position-identification":
            return {
                name: float((self._predict(model, tokens).argmax(-1) == self.positions).float().mean())
                for name, tokens in (
                    ("accuracy_random", self.random_inputs),
                    ("accuracy_constant", self.constant_inputs),
                )
            }
        half = self.length // 2
        predicted = self._predict(model, self.random_inputs)[:, :half].argmax(-1)
        return {"accuracy_random": float((predicted == self._even_targets(self.random_inputs)).float().mean())}


def _best(task: str, history: list[dict[str, Any]]) -> dict[str, float]:
    """Best value of each metric over the evaluations (smallest error, largest accuracy); NaN (a diverged
    evaluation) never counts as best."""
    keys = [key for key in history[0] if key not in ("step", "loss")]
    pick = min if task == "position-index" else max
    best = {}
    for key in keys:
        values = [entry[key] for entry in history if not math.isnan(entry[key])]
        best[key] = pick(values) if values else math.nan
    return best


def _selection_score(task: str) -> Callable[[dict[str, float]], float]:
    """The checkpoint exported: the smallest sup-error on constant inputs (position-index, the measured quantity,
    so the exported model is the one whose error the summary reports) or the best accuracy on random inputs."""
    if task == "position-index":
        return lambda metrics: -metrics["sup_error_constant"]
    return lambda metrics: metrics["accuracy_random"]


def run_label(task: str, variant: str) -> str:
    """A model's name in progress lines, its seed and its file under ``--out``: ``position-index / rpe``."""
    return f"{task} / {variant}"


def _train_one(
    task: str, variant: str, settings: dict[str, Any], device: torch.device, seed: int, progress: Progress | None
) -> dict[str, Any]:
    label = run_label(task, variant)
    started = time.perf_counter()
    seed_of_run = run_seed(seed, label)
    torch.manual_seed(seed_of_run)
    model = TinyTransformer(
        vocab=settings["vocab"],
        width=settings["width"],
        heads=settings["heads"],
        layers=settings["layers"],
        ffn_width=settings["ffn-width"],
        outputs=_outputs(task, settings),
        positional=variant,
        causal=False,
        max_length=settings["length"],
        layernorm=settings["layernorm"],
    ).to(device)
    data = _Task(task, settings, torch.Generator().manual_seed(seed_of_run), device)
    selector = CheckpointSelector(model, lambda: data.metrics(model), _selection_score(task))
    history = train(
        model,
        steps=settings["steps"],
        learning_rate=settings["learning-rate"],
        batch_loss=lambda _step: data.batch_loss(model, settings["batch"]),
        evaluate=selector,
        eval_every=settings["eval-every"],
        label=label,
        progress=progress,
    )
    trained = selector.trained(history)
    run = {
        "task": task,
        "variant": variant,
        "seed": seed_of_run,
        "parameters": trained.parameters,
        "best": _best(task, history),
        "final": {k: v for k, v in history[-1].items() if k not in ("step", "loss")},
        "selected": trained.selected,
        "history": history,
        "wall_seconds": time.perf_counter() - started,
        "state": trained.state,  # the selected checkpoint (popped by run_luo: not JSON)
    }
    if task == "position-index":
        eps = epsilon_star(settings["length"])
        run["epsilon_star"] = eps
        run["below_epsilon_star"] = run["best"]["sup_error_constant"] < eps
    return run


def run_luo(
    spec: ExperimentSpec,
    settings: dict[str, Any],
    device: torch.device,
    seed: int,
    progress: Progress | None = None,
    export_dir: Path | None = None,
    prove: bool = False,
    store: RunStore | None = None,
) -> dict[str, Any]:
    """Train every (task, variant) of the spec; returns ``runs`` and a ``summary`` of the best values. With
    ``export_dir`` each selected checkpoint is written with a spec that checks it; ``prove`` runs those specs.
    ``store``: where each model is written as it finishes, and read back instead of trained again (resume)."""
    store = store if store is not None else RunStore(None, {})
    store.expect(len(spec.tasks) * len(spec.variants))

    def trained(task: str, variant: str) -> tuple[dict[str, Any], Any]:
        run = _train_one(task, variant, settings, device, seed, progress)
        return run, run.pop("state")

    def export(run: dict[str, Any], state: Any, folder: Path) -> None:
        export_run(run, state, settings, folder)

    runs = [
        store.model(
            run_label(task, variant),
            functools.partial(trained, task, variant),
            export_dir,
            export,
            _prove if prove else None,
            progress,
        )
        for task in spec.tasks
        for variant in spec.variants
    ]
    summary: dict[str, Any] = {}
    for run in runs:
        entry = summary.setdefault(run["task"], {})
        if run["task"] == "position-index":
            entry["epsilon_star"] = run["epsilon_star"]
            entry[run["variant"]] = {
                "best_sup_error_constant": run["best"]["sup_error_constant"],
                "best_sup_error_random": run["best"]["sup_error_random"],
                "below_epsilon_star": run["below_epsilon_star"],
            }
        else:
            entry[run["variant"]] = {key: value for key, value in run["best"].items()}
        if "exact" in run:
            entry[run["variant"]]["exact"] = run["exact"]
    return {"runs": runs, "summary": summary}


# ---------------------------------------------------------------- export and prove (issue 31)

CHECK_SECONDS = 120  # position-blind: the constant inputs on the batched evaluator
BOUND_SECONDS = 600  # inexpressible: this model on the interpreter, then the induction (z3); n = 16, d = 32 took
# 170 s at load ~11 on 2 cores (docs/experiments.md)
PROOF_STATISTICS = (
    "epsilon",
    "epsilon_star",
    "this_model_error_at_witness",
    "this_model_sup_error",
    "this_model_sup_error_over",
)
PROOF_WITNESS = ("input", "positions", "deviation", "sup_error", "sup_error_over", "layer")


def alphabet(vocab: int) -> list[str]:
    """Token k's symbol in the exported specs: a, b, c, ... (t0, t1, ... beyond 26 tokens)."""
    if vocab <= 26:
        return [chr(ord("a") + k) for k in range(vocab)]
    return [f"t{k}" for k in range(vocab)]


def check_spec_text(
    run: dict[str, Any], settings: dict[str, Any], model_file: str, bits: int, frac: int, bias: Fraction
) -> str:
    """The spec that checks one exported model, quantized to the chosen fixed point, on the constant inputs of
    length n: ``position-blind`` (Luo et al.'s Thm 1 on this model) and, for position-index, ``inexpressible``
    with the target f(X)_i = i. The import drops the readout's bias b (the IR's readout has none), so the
    target is written as a table of i − b: |q_i − (i − b)| = |(q_i + b) − i| is the model's error exactly."""
    task, variant, n = run["task"], run["variant"], settings["length"]
    symbols = ", ".join(f'"{symbol}"' for symbol in alphabet(settings["vocab"]))
    norm = settings["layernorm"]
    layernorm = "" if norm == "none" else f", layernorm: integer, norm-first: {'true' if norm == 'pre' else 'false'}"
    on = "readout" if task == "position-index" else "output"
    lines = [
        f"# Written by verify-tf experiment luo-position-index --export: {task} / {variant}, quantized from float32",
        f"# (fixed point {bits}.{frac} chosen from the trained weights' range), on the constant inputs of length {n}.",
        f"name: {task} / {variant}",
        "model:",
        f"  torch: {model_file}",
        f"  architecture: {{heads: {settings['heads']}, scoring: softmax, causal: false, alphabet: [{symbols}], "
        f"readout-row: 0, readout-bias: drop{layernorm}}}",
        f"  quantize: {{bits: {bits}, frac: {frac}}}",
        f"arithmetic: {{mode: fixed, bits: {bits}, frac: {frac}, attention-rounding: exact-sums}}",
        "domain:",
        f"  strings: {{alphabet: [{symbols}], min-length: {n}, max-length: {n}}}",
        "properties:",
        "  # Luo et al. 2022, Thm 1 on this very model: one output at every position of every constant input"
        + (" (the readout)" if on == "readout" else " (the final stream, so every output row)"),
        f"  - position-blind: {{on: {on}, name: position-blind on constant inputs, timeout: {CHECK_SECONDS}}}",
    ]
    if task == "position-index":
        targets = ", ".join(fmt(Fraction(i) - bias) for i in range(1, n + 1))
        lines += [
            "  # the certificate for f(X)_i = i on every constant input: no model of this architecture class errs",
            f"  # less than eps* = (n-1)/2 there. Targets are i - b, b = {fmt(bias)} the dropped readout bias.",
            "  - inexpressible:",
            "      name: sup-error bound",
            f"      timeout: {BOUND_SECONDS}",
            "      target:",
            "        table:",
            *(f'          - {{token: "{symbol}", outputs: [{targets}]}}' for symbol in alphabet(settings["vocab"])),
        ]
    return "\n".join(lines) + "\n"


def _prove(run: dict[str, Any]) -> None:
    """The exported model's checks (position-blind, and the ε* bound for position-index) and their summary."""
    run["proof"] = check_written_spec(
        Path(run["export"]["check_spec"]), keep=PROOF_STATISTICS, keep_witness=PROOF_WITNESS
    )
    run["exact"] = exact_summary(run)


def export_run(run: dict[str, Any], state: dict[str, torch.Tensor], settings: dict, export_dir: Path) -> None:
    """Write the run's selected checkpoint and the spec that checks it; note the fixed point and rounding error."""
    export_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{run['task']}-{run['variant']}"
    model_file = export_dir / f"{stem}-model.pt"
    torch.save(state, model_file)
    bits, frac, error = fixed_point_for(state)
    bias = Fraction(float(state["readout.bias"][0]))  # a float32 is exactly a dyadic rational
    spec_file = export_dir / f"{stem}-check.yaml"
    spec_file.write_text(check_spec_text(run, settings, model_file.name, bits, frac, bias), encoding="utf-8")
    run["export"] = {
        "model_file": str(model_file),
        "check_spec": str(spec_file),
        "fixed_point": {"bits": bits, "frac": frac},
        "quantization_error": str(error),
        "quantization_error_float": float(error),
        "readout_bias": str(bias),
    }


def _constant_word(symbols: list[str]) -> str:
    """A witness input, short: ``a^16`` for a constant one."""
    if symbols and len(set(symbols)) == 1:
        return f"{symbols[0]}^{len(symbols)}"
    return format_input(tuple(symbols))


def exact_summary(run: dict[str, Any]) -> dict[str, Any]:
    """The exact column of one run: each property's verdict, and for position-index the certified bound ε* and
    the quantized model's own sup-error on the constant inputs (exact), beside the float model's."""
    exact: dict[str, Any] = {}
    for check in run.get("proof", []):
        status = check["verdict"].split(" ", 1)[0]
        if check["property"] == "position-blind on constant inputs":
            exact["position_blind"] = status
            if status == "refuted":
                exact["position_blind_witness"] = _constant_word(check.get("witness_input") or [])
                exact["position_blind_deviation"] = check.get("witness_deviation")
        elif check["property"] == "sup-error bound":
            exact["bound"] = status
            exact["epsilon_star"] = check.get("epsilon_star")
            own = check.get("this_model_sup_error")
            exact["quantized_sup_error_constant"] = own
            if own is not None:
                exact["quantized_sup_error_constant_float"] = float(Fraction(own))
    if run["task"] == "position-index":
        exact["float_sup_error_constant"] = run["selected"]["sup_error_constant"]
    return exact


def plot_luo(result: dict[str, Any], title: str):
    """One panel per task: the metric against training steps for each variant (eps* dashed)."""
    from matplotlib.figure import Figure

    tasks = list(dict.fromkeys(run["task"] for run in result["runs"]))
    figure = Figure(figsize=(4.6 * len(tasks), 3.9), layout="constrained")
    axes = figure.subplots(1, len(tasks), squeeze=False)[0]
    for axis, task in zip(axes, tasks):
        for run in (r for r in result["runs"] if r["task"] == task):
            steps = [entry["step"] for entry in run["history"]]
            metric = "sup_error_constant" if task == "position-index" else "accuracy_random"
            colour = VARIANT_COLOURS[run["variant"]]
            axis.plot(
                steps,
                [entry[metric] for entry in run["history"]],
                color=colour,
                label=VARIANT_LABELS[run["variant"]],
                linewidth=1.6,
            )
            if task == "position-identification":
                axis.plot(
                    steps,
                    [entry["accuracy_constant"] for entry in run["history"]],
                    color=colour,
                    linestyle=":",
                    linewidth=1.4,
                )
            exact = run.get("exact") or {}
            if exact.get("quantized_sup_error_constant_float") is not None:
                axis.scatter(
                    [run["selected"]["step"]],
                    [max(exact["quantized_sup_error_constant_float"], 1e-6)],  # log scale: 0 drawn at 1e-6
                    marker="*",
                    s=140,
                    color=colour,
                    edgecolors="black",
                    linewidths=0.6,
                    zorder=5,
                )
        verdicts = _verdict_lines([r for r in result["runs"] if r["task"] == task])
        if verdicts:
            axis.text(
                0.02,
                0.02,
                verdicts,
                transform=axis.transAxes,
                fontsize=7,
                va="bottom",
                ha="left",
                bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.85, "linewidth": 0.5},
            )
        axis.set_xlabel("training step")
        axis.grid(alpha=0.3)
        if task == "position-index":
            eps = result["summary"][task]["epsilon_star"]
            axis.axhline(eps, color="black", linestyle="--", linewidth=1.2, label=f"ε* = (n−1)/2 = {eps:g}")
            axis.set_yscale("log")
            axis.set_ylabel("sup-error on constant inputs")
            axis.set_title("position-index: f(X)_i = i")
        else:
            axis.set_ylim(-0.02, 1.02)
            axis.set_ylabel("accuracy on random inputs")
            if task == "position-identification":
                axis.set_ylabel("accuracy (solid: random, dotted: constant inputs)")
            axis.set_title(
                {
                    "position-identification": "Position Identification",
                    "even-token-prediction": "Even Token Prediction",
                }[task]
            )
        axis.legend(fontsize=8, loc="best")
    proved = any("exact" in run for run in result["runs"])
    figure.suptitle(
        f"{title}\nfloat training — evidence, not a verdict"
        + ("\n★ and box: the selected model, quantized, exact (--prove)" if proved else ""),
        fontsize=10,
    )
    return figure


def _verdict_lines(runs: list[dict[str, Any]]) -> str:
    """One line per exported model: its quantized exact sup-error (position-index) and its verdicts."""
    lines = []
    for run in runs:
        exact = run.get("exact")
        if not exact:
            continue
        parts = [f"blind {exact.get('position_blind', '?')}"]
        if "bound" in exact:
            sup = exact.get("quantized_sup_error_constant_float")
            parts.insert(0, "exact " + ("?" if sup is None else f"{sup:.3g}"))
            parts.append(f"ε* bound {exact['bound']}")
        lines.append(f"{VARIANT_LABELS[run['variant']]}: " + ", ".join(parts))
    return "\n".join(lines)

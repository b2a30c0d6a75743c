"""Yang, Cadilhac and Chiang (2025, "Knee-Deep in C-RASP"): how deep must a transformer be to label the
prefixes of words of L_k?  Trains causal transformers without positional encoding, depth by depth, on
short strings and tests them on longer ones (length generalisation); the accuracy by (language, depth) is
the paper's staircase.

Data as in the paper's repository (pentagonalize/CRASP_depth): every string is a word of L_k (k non-empty
alternating blocks starting with ``a``; block lengths a uniformly random composition of the length), a BOS
token is prepended, and the label of position i is "w_1..w_i is in L_k" (``verify_tf.crasp.in_lk``) —
i.e. "position i lies in the k-th block".  The metric is whole-string exact match (every prefix label
right), as in the paper; per-position accuracy is recorded too.

Two predicted depths are reported for each L_k and both are drawn on the heatmap:

* the depth of the C-RASP program ``lk_program(k)`` (``program_depth`` = k): a depth-k program *recognises*
  L_k, so it labels prefixes of arbitrary strings, with no promise that the string is in L_k;
* the paper's statement for this prediction task (the strings are promised to be in L_k): solvable at
  depth k-2 (their L_{k+3} at depth k+1 but not k).  This is the line the measured staircase is compared
  with; for k <= 2 it is <= 0 (the label is a function of the current letter), drawn at the left edge.

Model selection: the checkpoint with the best exact match on held-out strings of the *training* lengths;
its accuracy on the longer test strings is what the heatmap shows.  Evidence, never a verdict.
"""

from __future__ import annotations

import functools
import math
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import torch

from ..crasp import in_lk, lk_program, lk_regex, program_depth
from ..crasp.ast import format_program
from ..numbers import fmt
from ..runner import Overrides, check_all
from ..spec import load_spec
from .common import Progress, run_seed, stop_if_interrupted
from .spec import ExperimentSpec
from .store import RunStore
from .training import Labelled, train_prefix_labeller

__all__ = ["SOLVED_THRESHOLD", "encode", "plot_yang", "run_label", "run_yang", "sample_lk_words"]

BOS, LETTER_A, LETTER_B = 0, 1, 2
SOLVED_THRESHOLD = 0.9  # test exact match counted as "solved" in the measured staircase
_EVALUATIONS = 10  # checkpoints per training run, for model selection
_OVERLAYS = (("crasp_program_depth", "black", "-"), ("prediction_task_depth", "red", "--"))  # key, colour, style


def sample_lk_words(k: int, shortest: int, longest: int, count: int, generator: torch.Generator) -> list[str]:
    """``count`` random words of L_k with lengths uniform in [shortest, longest] (needs shortest >= k)."""
    lengths = torch.randint(shortest, longest + 1, (count,), generator=generator).tolist()
    words = []
    for length in lengths:
        cuts = sorted((torch.randperm(length - 1, generator=generator)[: k - 1] + 1).tolist())
        bounds = [0, *cuts, length]
        words.append(
            "".join(("a" if block % 2 == 0 else "b") * (bounds[block + 1] - bounds[block]) for block in range(k))
        )
    return words


def encode(words: list[str], k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """BOS-prefixed token ids (right-padded), prefix labels and a mask of real positions.

    Right padding is harmless: attention is causal, so no real position sees a pad.
    """
    longest = max(len(word) for word in words)
    tokens = torch.full((len(words), longest + 1), LETTER_A, dtype=torch.long)
    tokens[:, 0] = BOS
    labels = torch.zeros(len(words), longest)
    mask = torch.zeros(len(words), longest, dtype=torch.bool)
    for row, word in enumerate(words):
        tokens[row, 1 : len(word) + 1] = torch.tensor([LETTER_A if letter == "a" else LETTER_B for letter in word])
        labels[row, : len(word)] = torch.tensor([float(in_lk(k, word[: i + 1])) for i in range(len(word))])
        mask[row, : len(word)] = True
    return tokens, labels, mask


class _Data:
    """The train pool, the held-out train-length set and the longer test set of one language."""

    def __init__(self, k: int, settings: dict[str, Any], seed: int, device: torch.device):
        generator = torch.Generator().manual_seed(run_seed(seed, f"L{k} data"))
        train_lengths, test_lengths = settings["train-lengths"], settings["test-lengths"]
        size = settings["test-size"]
        train_words = sample_lk_words(k, *train_lengths, settings["train-size"], generator)
        self.train = _on(device, encode(train_words, k))
        self.validation = _on(device, encode(sample_lk_words(k, *train_lengths, size, generator), k))
        self.test = _on(device, encode(sample_lk_words(k, *test_lengths, size, generator), k))


def _on(device: torch.device, labelled: Labelled) -> Labelled:
    tokens, labels, mask = labelled
    return tokens.to(device), labels.to(device), mask.to(device)


def run_label(k: int, depth: int) -> str:
    """A model's name in progress lines, its seed and its file under ``--out``: ``L3 / depth 2``."""
    return f"L{k} / depth {depth}"


def _train_one(
    k: int,
    depth: int,
    data: _Data,
    settings: dict[str, Any],
    device: torch.device,
    seed: int,
    progress: Progress | None,
) -> dict[str, Any]:
    label = run_label(k, depth)
    started = time.perf_counter()
    seed_of_run = run_seed(seed, label)
    splits = {"train": data.train, "validation": data.validation, "test": data.test}
    trained = train_prefix_labeller(
        splits,
        vocab=3,
        layers=depth,
        settings=settings,
        seed_of_run=seed_of_run,
        device=device,
        evaluations=_EVALUATIONS,
        label=label,
        progress=progress,
    )
    return {
        "language": k,
        "depth": depth,
        "seed": seed_of_run,
        "parameters": trained.parameters,
        "selected": trained.selected,
        "history": trained.history,
        "wall_seconds": time.perf_counter() - started,
        "state": trained.state,  # the selected checkpoint (popped by run_yang: not JSON)
    }


# ---------------------------------------------------------------- export and prove (issue 31)

EXPORT_BITS = 24  # fixed-point word of the exported specs; the fraction bits follow the trained weights' range
CHECK_LENGTH = 100  # N: every word of L_k, and every string, up to this length
WORDS_SECONDS = 300  # (a) every word of L_k up to N: enumerate's budget
STRINGS_SECONDS = 60  # (b) every string up to N: enumerate's budget (the prefix tree: the least counterexample)


def fixed_point_for(state: dict[str, torch.Tensor], bits: int = EXPORT_BITS) -> tuple[int, int, Fraction]:
    """(bits, frac, largest rounding error) for the trained weights: the integer part holds the largest weight
    with a sign bit and 7 bits of headroom for the activations (sums of products, LayerNorm's variance); the
    rest is fraction, at most 16 bits. The error is max |w - round(w · 2^frac) / 2^frac| over every weight,
    computed exactly from the float32 values."""
    largest = max(float(t.abs().max()) for t in state.values() if t.is_floating_point() and t.numel())
    whole = max(1, math.ceil(math.log2(largest + 1)))
    frac = max(4, min(16, bits - 1 - whole - 7))
    error = Fraction(0)
    for tensor in state.values():
        if tensor.is_floating_point():
            for value in tensor.flatten().tolist():
                exact = Fraction(value)
                error = max(error, abs(exact - Fraction(round(exact * (1 << frac)), 1 << frac)))
    return bits, frac, error


CHECKS = ("words", "strings")  # the specs written per model (``check_spec_text``)


def check_spec_text(
    k: int,
    depth: int,
    model_file: str,
    program_file: str,
    bits: int,
    frac: int,
    settings: dict,
    threshold: Fraction,
    check: str = "strings",
) -> str:
    """A spec that checks one exported model, quantized to the chosen fixed point, against lk_program(k) in prefix
    mode (every prefix label), by ``check``:

    * ``words``: every word of L_k up to N (the promise the model was trained under: a strings domain restricted
      to ``lk_regex(k)``), enumerated in the domain's order, the least failing word if any;
    * ``strings``: every string over {a, b} up to N (the stricter reading: no promise): the language ``(a|b)*``, so
      enumerate walks the prefix tree of every string and reports the least counterexample (the model never saw a
      string outside L_k: expect a short one), or up to which length every string was checked.

    Both are read by enumerate's prefix-tree scan (the models are causal: docs/semantics.md §4).
    """
    norm = settings["layernorm"]
    layernorm = "" if norm == "none" else f", layernorm: integer, norm-first: {'true' if norm == 'pre' else 'false'}"
    domain, engine, seconds, what = {
        "words": (
            f'{{alphabet: ["a", "b"], max-length: {CHECK_LENGTH}, language: {{regex: "{lk_regex(k)}"}}}}',
            "enumerate",
            WORDS_SECONDS,
            f"every word of L{k} up to {CHECK_LENGTH}",
        ),
        "strings": (
            f'{{alphabet: ["a", "b"], max-length: {CHECK_LENGTH}, language: {{regex: "(a|b)*"}}}}',
            "enumerate",
            STRINGS_SECONDS,
            f"every string up to {CHECK_LENGTH}",
        ),
    }[check]
    return (
        f"# Written by verify-tf experiment yang-lk-depth --export: L{k}, depth {depth}, quantized from float32\n"
        f"# (fixed point {bits}.{frac} chosen from the trained weights' range), against lk_program({k}): {what}.\n"
        f"name: L{k}-depth{depth} against L{k}, {what}\n"
        "model:\n"
        f"  torch: {model_file}\n"
        f'  architecture: {{heads: {settings["heads"]}, scoring: softmax, causal: true, alphabet: ["^", "a", "b"], '
        f'bos: "^", readout-row: 0, readout-bias: drop{layernorm}}}\n'
        f"  quantize: {{bits: {bits}, frac: {frac}}}\n"
        f"arithmetic: {{mode: fixed, bits: {bits}, frac: {frac}, attention-rounding: exact-sums}}\n"
        "domain:\n"
        f"  strings: {domain}\n"
        "properties:\n"
        "  # the readout's bias, dropped by the import, is the decision threshold: accept iff u·z > -bias\n"
        f"  - crasp-equivalence: {{program: {program_file}, mode: prefix, threshold: {fmt(threshold)}, "
        f"engine: {engine}, name: {what}, timeout: {seconds}}}\n"
    )


def export_run(run: dict[str, Any], state: dict[str, torch.Tensor], settings: dict, export_dir: Path) -> None:
    """Write the run's selected checkpoint, L_k's program and the spec that checks it; note the fixed point."""
    k, depth = run["language"], run["depth"]
    export_dir.mkdir(parents=True, exist_ok=True)
    model_file = export_dir / f"L{k}-depth{depth}-model.pt"
    torch.save(state, model_file)
    program_file = export_dir / f"L{k}.cr"
    program_file.write_text(format_program(lk_program(k)) + "\n", encoding="utf-8")
    bits, frac, error = fixed_point_for(state)
    threshold = -Fraction(float(state["readout.bias"][0]))
    specs = {}
    for check, suffix in zip(CHECKS, ("words", "check")):
        spec_file = export_dir / f"L{k}-depth{depth}-{suffix}.yaml"
        spec_file.write_text(
            check_spec_text(k, depth, model_file.name, program_file.name, bits, frac, settings, threshold, check),
            encoding="utf-8",
        )
        specs[check] = str(spec_file)
    run["export"] = {
        "model_file": str(model_file),
        "check_spec": specs["strings"],
        "words_spec": specs["words"],
        "fixed_point": {"bits": bits, "frac": frac},
        "quantization_error": str(error),
        "quantization_error_float": float(error),
    }


def predicted_depths(k: int) -> dict[str, int]:
    return {"crasp_program_depth": program_depth(lk_program(k)), "prediction_task_depth": k - 2}


def run_yang(
    spec: ExperimentSpec,
    settings: dict[str, Any],
    device: torch.device,
    seed: int,
    progress: Progress | None = None,
    export_dir: Path | None = None,
    prove: bool = False,
    store: RunStore | None = None,
) -> dict[str, Any]:
    """Train one model per (language, depth); returns ``runs``, the accuracy ``table`` and the predictions. With
    ``export_dir`` each selected checkpoint is written with a spec that checks it; ``prove`` runs those specs.
    ``store``: where each model is written as it finishes, and read back instead of trained again (resume)."""
    del spec  # every setting of this experiment lives in the preset
    languages, depths = settings["languages"], settings["depths"]
    store = store if store is not None else RunStore(None, {})
    store.expect(len(languages) * len(depths))
    data: dict[int, _Data] = {}  # the current language's, drawn when one of its models is trained (not resumed)

    def trained(k: int, depth: int) -> tuple[dict[str, Any], Any]:
        if k not in data:
            data.clear()
            data[k] = _Data(k, settings, seed, device)
        run = _train_one(k, depth, data[k], settings, device, seed, progress)
        return run, run.pop("state")

    def export(run: dict[str, Any], state: Any, folder: Path) -> None:
        export_run(run, state, settings, folder)

    def proof(run: dict[str, Any]) -> None:
        run["proof"] = prove_run(run["export"])

    runs = [
        store.model(
            run_label(k, depth),
            functools.partial(trained, k, depth),
            export_dir,
            export,
            proof if prove else None,
            progress,
        )
        for k in languages
        for depth in depths
    ]
    by_cell = {(run["language"], run["depth"]): run["selected"] for run in runs}

    def grid(metric: str) -> list[list[float]]:
        return [[by_cell[k, depth][metric] for depth in depths] for k in languages]

    staircase = {}
    for k in languages:
        solved = [depth for depth in depths if by_cell[k, depth]["test_exact"] >= SOLVED_THRESHOLD]
        staircase[f"L{k}"] = {"smallest_depth_solved": min(solved) if solved else None, **predicted_depths(k)}
    return {
        "runs": runs,
        "table": {
            "languages": languages,
            "depths": depths,
            "test_exact": grid("test_exact"),
            "validation_exact": grid("validation_exact"),
            "test_positions": grid("test_positions"),
            "exact_verdict": [[_verdict_cell(_run_of(runs, k, d), "strings") for d in depths] for k in languages],
            "words_verdict": [[_verdict_cell(_run_of(runs, k, d), "words") for d in depths] for k in languages],
        },
        "staircase": staircase,
        "solved_threshold": SOLVED_THRESHOLD,
        "overlay": "solid line: C-RASP program depth k of lk_program(k) (recognition); dashed line: the paper's "
        "prediction-task depth k-2; cells right of a line are predicted solvable",
    }


def prove_run(export: dict[str, Any]) -> dict[str, Any]:
    """Run one model's checks: (a) every word of L_k up to N; (b) every string up to N."""
    return {"words": run_check(Path(export["words_spec"])), "strings": run_check(Path(export["check_spec"]))}


def run_check(spec_file: Path) -> dict[str, Any]:
    """Run a written spec's one property; what its verdict says, with how far an unfinished scan got. A signal
    during the check raises ``common.Interrupted``: an interrupted check is not this model's verdict."""
    (verdict,) = check_all([load_spec(spec_file)], Overrides())
    stop_if_interrupted()
    statistics = verdict.statistics
    reached = statistics.get("every_input_up_to_length", statistics.get("explored_up_to"))
    return {
        "property": verdict.property,
        "engine": verdict.engine,
        "status": verdict.status,
        "verdict": verdict.label,
        "detail": verdict.detail,
        "seconds": verdict.seconds,
        "witness": (verdict.counterexample or {}).get("string"),
        "position": (verdict.counterexample or {}).get("position"),
        "inputs_checked": statistics.get("inputs_checked"),
        "space_size": statistics.get("space_size", statistics.get("domain_size")),
        "complete_up_to_length": None if verdict.status in ("proved", "refuted") else reached,
        "states": statistics.get("states"),
    }


def _run_of(runs: list[dict[str, Any]], k: int, depth: int) -> dict[str, Any]:
    return next(r for r in runs if (r["language"], r["depth"]) == (k, depth))


def _verdict_cell(run: dict[str, Any], which: str) -> str | None:
    """An exact column of the summary: ``words`` (every word of L_k up to N) or ``strings`` (every string up to N):
    the verdict, the least failing word or counterexample, or how far an unfinished check got."""
    proof = run.get("proof")
    if not proof:
        return None
    check = proof[which]
    if check["status"] == "refuted":
        return f"refuted at {check['witness']}"
    if check["status"] == "unknown":
        reached = check["complete_up_to_length"]
        noun = "word" if which == "words" else "string"
        if reached is None or check.get("inputs_checked") == 0:  # "every word up to 1" of L2 holds no word
            return f"unknown (no {noun} checked)"
        return f"unknown (every {noun} ≤ {reached} right)"
    return check["status"]


def plot_yang(result: dict[str, Any], title: str):
    """Two heatmaps (test lengths, training lengths) of exact match by (language, depth), predictions overlaid."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    table = result["table"]
    languages, depths = table["languages"], table["depths"]
    exact = any(cell for row in table.get("words_verdict") or [] for cell in row)
    panels_wide = 3 if exact else 2
    figure = Figure(
        figsize=(2.6 + panels_wide * 0.75 * len(depths) * (1.25 if exact else 1) + 2.2, 1.6 + 0.55 * len(languages)),
        layout="constrained",
    )
    axes = figure.subplots(1, panels_wide, squeeze=False)[0]
    panels = (
        ("test_exact", "longer test strings (length generalisation)"),
        ("validation_exact", "held-out strings of the training lengths"),
    )
    if exact:
        _exact_panel(axes[2], table)
    for axis, (metric, subtitle) in zip(axes, panels):
        values = table[metric]
        image = axis.imshow(values, vmin=0, vmax=1, cmap="viridis", aspect="auto")
        for row, _language in enumerate(languages):
            for column, _depth in enumerate(depths):
                value = values[row][column]
                axis.text(
                    column,
                    row,
                    f"{100 * value:.0f}",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="black" if value > 0.6 else "white",
                )
        for key, colour, style in _OVERLAYS:
            xs, ys = [], []
            for row, k in enumerate(languages):
                boundary = _column_boundary(result["staircase"][f"L{k}"][key], depths)
                xs += [boundary, boundary]
                ys += [row - 0.5, row + 0.5]
            axis.plot(xs, ys, linestyle="-", color="white", linewidth=3.2, alpha=0.8)
            axis.plot(xs, ys, linestyle=style, color=colour, linewidth=1.6)
        axis.set_xticks(range(len(depths)), [str(depth) for depth in depths])
        axis.set_yticks(range(len(languages)), [f"L{k}" for k in languages])
        axis.set_xlim(-0.5, len(depths) - 0.5)
        axis.set_ylim(len(languages) - 0.5, -0.5)
        axis.set_xlabel("transformer depth (layers)")
        axis.set_title(subtitle, fontsize=9)
    figure.colorbar(image, ax=list(axes[:2]), label="exact match (all prefix labels right)", shrink=0.9)
    labels = {
        "crasp_program_depth": "C-RASP program depth k (recognition)",
        "prediction_task_depth": "paper: this prediction task at depth k−2",
    }
    figure.legend(
        handles=[Line2D([], [], color=colour, linestyle=style, label=labels[key]) for key, colour, style in _OVERLAYS],
        loc="outside lower center",
        ncols=2,
        fontsize=8,
        title="predicted solvable right of the line",
        title_fontsize=8,
    )
    figure.suptitle(
        f"{title}\nfloat training — evidence, not a verdict; numbers are % exact match"
        + ("; right: exact verdicts of the quantized models (--prove)" if exact else ""),
        fontsize=10,
    )
    return figure


_SHADES = {"proved": 0.85, "refuted": 0.1, "unknown": 0.5}  # the exact panel's colour per verdict on the words


def _short(cell: str | None) -> str:
    """A verdict cell in a few characters for the plot: proved, ✗ at the least failing word, ok ≤ m."""
    if not cell:
        return "—"
    if cell.startswith("refuted at "):
        word = cell.removeprefix("refuted at ").split(" ", 1)[0]
        return f"✗ {word if len(word) <= 8 else word[:7] + '…'}"
    if cell.startswith("unknown (every"):
        return f"ok ≤ {cell.rsplit('≤', 1)[1].split()[0]}"
    return cell.split(" ", 1)[0]


def _exact_panel(axis: Any, table: dict[str, Any]) -> None:
    """The quantized models' exact verdicts per (L_k, depth): on every word of L_k up to N (the colour) and on
    every string up to N, as text."""
    from matplotlib.colors import ListedColormap

    words, strings = table["words_verdict"], table.get("exact_verdict") or []
    shades = [[_SHADES.get((cell or "unknown").split(" ", 1)[0], 0.5) for cell in row] for row in words]
    axis.imshow(shades, vmin=0, vmax=1, cmap=ListedColormap(["#c0392b", "#95a5a6", "#27ae60"]), aspect="auto")
    for row, k in enumerate(table["languages"]):
        for column, _depth in enumerate(table["depths"]):
            text = f"L{k}: {_short(words[row][column])}"
            if strings:
                text += f"\nall: {_short(strings[row][column])}"
            axis.text(column, row, text, ha="center", va="center", fontsize=6.5, color="black")
    axis.set_xticks(range(len(table["depths"])), [str(depth) for depth in table["depths"]])
    axis.set_yticks(range(len(table["languages"])), [f"L{k}" for k in table["languages"]])
    axis.set_xlabel("transformer depth (layers)")
    axis.set_title(
        f"quantized model, exact: every word of L_k ≤ {CHECK_LENGTH} (colour)\nand every string ≤ {CHECK_LENGTH}",
        fontsize=9,
    )


def _column_boundary(predicted_depth: int, depths: list[int]) -> float:
    """x position of the left edge of the first column whose depth is >= the predicted depth (pulled
    slightly inside the axes at either end so the line stays visible)."""
    for column, depth in enumerate(depths):
        if depth >= predicted_depth:
            return max(column - 0.5, -0.44)
    return len(depths) - 0.56

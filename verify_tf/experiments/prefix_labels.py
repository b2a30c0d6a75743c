"""The prediction task on all strings, trained and then checked: label every prefix of random strings with its
membership in a C-RASP language, train a causal transformer without positional encoding on it, quantize it, and
check the quantized model against the program with the ``counting`` engine (docs/counting.md).

Data: random strings over the program's alphabet (every letter equally likely, lengths uniform in the train
range), a BOS token prepended; the label of position i is the program's output on w_1..w_i
(``crasp.run_program``), as in Yang et al.'s prediction task but on *all* strings rather than words of the
language: no promise about the input, so the model must compute the program itself. The model is the
experiments' ``TinyTransformer`` (causal, no positional encoding, one readout logit per position: accept iff
logit > 0).

After training, the checkpoint with the best exact match on held-out strings of the training lengths is saved
as a state dict (``<stem>-model.pt``) and a verify-tf spec is written beside it (``<stem>-check.yaml``): the
model imported with ``quantize: {bits, frac}`` (the torch importer rounds every weight to the grid; its readout
bias becomes the decision threshold, exactly), checked with ``crasp-equivalence`` in ``mode: prefix`` on every
string up to ``check-length`` and for every length. The training numbers are evidence; the check's verdicts are
proofs or refutations about the quantized model under the fixed-point arithmetic — never about the float one.
"""

from __future__ import annotations

import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import torch

from ..crasp import load_program, run_program
from ..numbers import fmt
from ..runner import Overrides, check_all
from ..spec import load_spec
from .common import Progress, run_seed, stop_if_interrupted
from .spec import ExperimentSpec
from .store import RunStore
from .training import Labelled, train_prefix_labeller

__all__ = [
    "check_spec_text",
    "check_written_spec",
    "encode",
    "plot_prefix_labels",
    "run_prefix_labels",
    "sample_strings",
]

BOS = 0  # token 0 is BOS, letters follow in the program's alphabet order
_EVALUATIONS = 10


def sample_strings(
    alphabet: tuple[str, ...], shortest: int, longest: int, count: int, generator: torch.Generator
) -> list[str]:
    lengths = torch.randint(shortest, longest + 1, (count,), generator=generator).tolist()
    letters = torch.randint(len(alphabet), (sum(lengths),), generator=generator).tolist()
    words, at = [], 0
    for length in lengths:
        words.append("".join(alphabet[k] for k in letters[at : at + length]))
        at += length
    return words


def encode(
    words: list[str], alphabet: tuple[str, ...], program: Any
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """BOS-prefixed token ids (right-padded; causal attention never sees a pad), prefix labels, real positions."""
    longest = max(len(word) for word in words)
    tokens = torch.full((len(words), longest + 1), 1, dtype=torch.long)
    tokens[:, 0] = BOS
    labels = torch.zeros(len(words), longest)
    mask = torch.zeros(len(words), longest, dtype=torch.bool)
    index = {letter: k + 1 for k, letter in enumerate(alphabet)}
    for row, word in enumerate(words):
        if word:
            tokens[row, 1 : len(word) + 1] = torch.tensor([index[letter] for letter in word])
            labels[row, : len(word)] = torch.tensor([float(x) for x in run_program(program, word).output])
            mask[row, : len(word)] = True
    return tokens, labels, mask


def check_spec_text(
    model_file: str, program: Path, alphabet: tuple[str, ...], settings: dict[str, Any], threshold: Fraction
) -> str:
    """The verify-tf spec that checks the saved model against its program (``mode: prefix``)."""
    bits, frac = settings["quantize-bits"], settings["quantize-frac"]
    symbols = ", ".join(f'"{s}"' for s in ("^", *alphabet))
    letters = ", ".join(f'"{s}"' for s in alphabet)
    return (
        "# Written by verify-tf experiment (prefix-labels): the trained model, quantized, against its program.\n"
        f"name: {Path(model_file).stem} against {program.name}\n"
        "model:\n"
        f"  torch: {model_file}\n"
        f"  architecture: {{heads: {settings['heads']}, scoring: softmax, causal: true, alphabet: [{symbols}], "
        'bos: "^", readout-row: 0, readout-bias: drop}\n'
        f"  quantize: {{bits: {bits}, frac: {frac}}}\n"
        f"arithmetic: {{mode: fixed, bits: {bits}, frac: {frac}, attention-rounding: exact-sums}}\n"
        "domain:\n"
        f"  strings: {{alphabet: [{letters}], max-length: {settings['check-length']}}}\n"
        "properties:\n"
        "  # the readout's bias, dropped by the import, is the decision threshold: accept iff u·z > -bias\n"
        f"  - crasp-equivalence: {{program: {program}, mode: prefix, threshold: {fmt(threshold)}, engine: counting,\n"
        f"                        timeout: {settings['check-seconds']}}}\n"
        f"  - crasp-equivalence: {{program: {program}, mode: prefix, threshold: {fmt(threshold)}, lengths: all,\n"
        f"                        name: every length, timeout: {settings['check-seconds']}}}\n"
    )


def run_prefix_labels(
    spec: ExperimentSpec,
    settings: dict[str, Any],
    device: torch.device,
    seed: int,
    progress: Progress | None = None,
    out_dir: Path | None = None,
    stem: str = "prefix-labels",
    store: RunStore | None = None,
) -> dict[str, Any]:
    """Train one model, save it and its check spec under ``out_dir`` and run the check (``check: true``).
    ``store``: where the model is written as it finishes, and read back instead of trained again (resume)."""
    program_path = (spec.path.parent / spec.program).resolve()
    program = load_program(program_path)
    alphabet = tuple(program.alphabet)
    label = f"{program_path.name}, {settings['layers']} layer(s)"
    store = store if store is not None else RunStore(None, {})
    store.expect(1)
    stored = store.load(label)
    state: dict[str, torch.Tensor] | None
    if stored is None:
        body, state = _train(program_path, program, alphabet, settings, device, seed, progress, label)
    else:
        body, state = stored
    checks_before = body.get("checks")
    if out_dir is not None and state is not None:
        _write_check(body, state, out_dir, stem, program_path, alphabet, settings)
        if settings["check"] and not body.get("checks"):
            if progress is not None:
                progress(f"{label}: checking the quantized model exactly", 0, 0)
            body["checks"] = check_written_spec(Path(body["check_spec"]))
    if stored is None or body.get("checks") != checks_before:
        store.save(label, body, state)
    return body


def _train(
    program_path: Path,
    program: Any,
    alphabet: tuple[str, ...],
    settings: dict[str, Any],
    device: torch.device,
    seed: int,
    progress: Progress | None,
    label: str,
) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """The model trained on the program's prefix labels: its row (without the check) and its checkpoint."""
    generator = torch.Generator().manual_seed(run_seed(seed, "prefix-labels data"))
    (train_short, train_long), (test_short, test_long) = settings["train-lengths"], settings["test-lengths"]
    size = settings["test-size"]
    words = {
        "train": sample_strings(alphabet, train_short, train_long, settings["train-size"], generator),
        "validation": sample_strings(alphabet, train_short, train_long, size, generator),
        "test": sample_strings(alphabet, test_short, test_long, size, generator),
    }
    data: dict[str, Labelled] = {}
    for name, batch in words.items():
        tokens_, labels_, mask_ = encode(batch, alphabet, program)
        data[name] = (tokens_.to(device), labels_.to(device), mask_.to(device))
    started = time.perf_counter()
    trained = train_prefix_labeller(
        data,
        vocab=len(alphabet) + 1,
        layers=settings["layers"],
        settings=settings,
        seed_of_run=run_seed(seed, label),
        device=device,
        evaluations=_EVALUATIONS,
        label=label,
        progress=progress,
    )
    state = trained.state
    bias = Fraction(float(state["readout.bias"][0]))  # a float32 is exactly a dyadic rational
    body: dict[str, Any] = {
        "program": str(program_path),
        "alphabet": list(alphabet),
        "parameters": trained.parameters,
        "selected": trained.selected,
        "history": trained.history,
        "training_seconds": time.perf_counter() - started,
        "threshold": str(-bias),
        "checks": [],
    }
    return body, state


def _write_check(
    body: dict[str, Any],
    state: dict[str, torch.Tensor],
    out_dir: Path,
    stem: str,
    program_path: Path,
    alphabet: tuple[str, ...],
    settings: dict[str, Any],
) -> None:
    """The model file and the spec that checks it, under ``out_dir`` (written again when resumed: cheap)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    model_file = out_dir / f"{stem}-model.pt"
    torch.save(state, model_file)
    spec_file = out_dir / f"{stem}-check.yaml"
    threshold = Fraction(body["threshold"])
    text = check_spec_text(model_file.name, program_path, alphabet, settings, threshold)
    spec_file.write_text(text, encoding="utf-8")
    if (body.get("model_file"), body.get("check_spec")) != (str(model_file), str(spec_file)):
        body["checks"] = []  # verdicts about files elsewhere
    body["model_file"], body["check_spec"] = str(model_file), str(spec_file)


def check_written_spec(
    spec_file: Path, keep: tuple[str, ...] = (), keep_witness: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """Run the written spec and keep what each verdict says (``keep``, ``keep_witness``: more statistics and
    counterexample fields to copy, by name)."""
    loaded = load_spec(spec_file)
    found = []
    verdicts = check_all([loaded], Overrides())
    stop_if_interrupted()  # an interrupted check is not this model's verdict
    for verdict in verdicts:
        statistics = verdict.statistics
        found.append(
            {
                **{key: statistics.get(key) for key in keep},
                **{f"witness_{key}": (verdict.counterexample or {}).get(key) for key in keep_witness},
                "property": verdict.property,
                "verdict": verdict.label,
                "detail": verdict.detail,
                "seconds": verdict.seconds,
                "witness": (verdict.counterexample or {}).get("string"),
                "explored_up_to": statistics.get("explored_up_to"),
                "states": statistics.get("states"),
                "states_per_length": statistics.get("states_per_length"),
                "largest_count": statistics.get("largest_count"),
                "model": statistics.get("model"),
                "induction": {k: statistics["induction"].get(k) for k in ("status", "failed", "queries")}
                if "induction" in statistics
                else None,
            }
        )
    return found


def plot_prefix_labels(result: dict[str, Any], title: str):
    """Exact match (held-out strings of the training lengths, longer test strings) along training."""
    from matplotlib.figure import Figure

    history = result["history"]
    figure = Figure(figsize=(6.4, 3.6), layout="constrained")
    axis = figure.subplots()
    steps = [entry["step"] for entry in history]
    for key, name in (("validation_exact", "training lengths"), ("test_exact", "longer strings")):
        axis.plot(steps, [entry[key] for entry in history], marker="o", label=name)
    axis.set_xlabel("step")
    axis.set_ylabel("exact match (every prefix label right)")
    axis.set_ylim(-0.02, 1.02)
    axis.legend(fontsize=8)
    verdicts = "; ".join(f"{check['property']}: {check['verdict']}" for check in result.get("checks", []))
    figure.suptitle(
        f"{title}\nfloat training — evidence; the quantized model's check: {verdicts or 'not run'}", fontsize=9
    )
    return figure

"""The experiment spec format (``examples/experiments/*.yaml``): which training experiment, seed, and the
sizes of its ``small`` (CPU, minutes) and ``gpu`` presets.

It is parsed with the project's located-YAML machinery, so every mistake is reported as
``file:line: key.path: expected ...`` with a hint.  Keys a preset leaves out take the built-in defaults of
that preset (``LUO_DEFAULTS`` / ``YANG_DEFAULTS``), so a spec may be as short as ``experiment: yang-lk-depth``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..crasp import CraspError, load_program
from ..schema.dsl import Boolean, Context, Field, Integer, ListOf, Number, Obj, String, join
from ..schema.errors import SpecError
from ..schema.yamlnodes import Node, parse_yaml
from .modules import LAYERNORM_PLACEMENTS

__all__ = [
    "EXPERIMENTS",
    "LUO_DEFAULTS",
    "LUO_TASKS",
    "LUO_VARIANTS",
    "PREFIX_DEFAULTS",
    "PRESETS",
    "YANG_DEFAULTS",
    "ExperimentSpec",
    "load_experiment",
    "parse_experiment",
]

EXPERIMENTS = ("luo-position-index", "yang-lk-depth", "prefix-labels")
PRESETS = ("small", "gpu")
LUO_TASKS = ("position-index", "position-identification", "even-token-prediction")
LUO_VARIANTS = ("ape", "rpe", "urpe")

# Sizes: `small` finishes in a few minutes on a 2-core CPU; `gpu` follows the papers more closely
# (Luo et al.: 3 layers, long training; Yang et al.: d=256, 1 head, post-LN, longer strings).
LUO_DEFAULTS: dict[str, dict[str, Any]] = {
    "small": {
        "length": 16,
        "vocab": 16,
        "width": 32,
        "heads": 2,
        "layers": 2,
        "ffn-width": 64,
        "layernorm": "none",
        "steps": 1500,
        "batch": 32,
        "learning-rate": 0.003,
        "eval-every": 50,
        "constant-fraction": 0.5,
        "eval-samples": 256,
    },
    "gpu": {
        "length": 32,
        "vocab": 64,
        "width": 128,
        "heads": 4,
        "layers": 3,
        "ffn-width": 512,
        "layernorm": "none",
        "steps": 20000,
        "batch": 256,
        "learning-rate": 0.001,
        "eval-every": 250,
        "constant-fraction": 0.5,
        "eval-samples": 4096,
    },
}
YANG_DEFAULTS: dict[str, dict[str, Any]] = {
    "small": {
        "languages": [1, 2, 3, 4, 5],
        "depths": [1, 2, 3, 4],
        "train-lengths": [8, 16],
        "test-lengths": [17, 32],
        "width": 32,
        "heads": 1,
        "ffn-width": 64,
        "layernorm": "post",
        "steps": 1000,
        "batch": 32,
        "learning-rate": 0.003,
        "train-size": 2000,
        "test-size": 256,
    },
    "gpu": {
        "languages": [3, 4, 5, 6, 7, 8, 9, 10],
        "depths": [1, 2, 3, 4, 5, 6, 7, 8],
        "train-lengths": [20, 60],
        "test-lengths": [61, 120],
        "width": 256,
        "heads": 1,
        "ffn-width": 1024,
        "layernorm": "post",
        "steps": 6000,
        "batch": 128,
        "learning-rate": 0.0003,
        "train-size": 20000,
        "test-size": 2000,
    },
}


# prefix-labels: one causal model trained to label every prefix of random strings with a C-RASP program's output,
# then quantized and checked against the program (engine counting). `small` is a minute or two on a CPU.
PREFIX_DEFAULTS: dict[str, dict[str, Any]] = {
    "small": {
        "train-lengths": [1, 32],
        "test-lengths": [33, 64],
        "width": 16,
        "heads": 1,
        "layers": 1,
        "ffn-width": 16,
        "layernorm": "none",
        "steps": 1500,
        "batch": 64,
        "learning-rate": 0.003,
        "train-size": 4000,
        "test-size": 256,
        "quantize-bits": 16,
        "quantize-frac": 8,
        "check-length": 1000,
        "check-seconds": 60,
        "check": True,
    },
    "gpu": {
        "train-lengths": [1, 100],
        "test-lengths": [101, 200],
        "width": 64,
        "heads": 1,
        "layers": 2,
        "ffn-width": 128,
        "layernorm": "none",
        "steps": 10000,
        "batch": 256,
        "learning-rate": 0.001,
        "train-size": 50000,
        "test-size": 1024,
        "quantize-bits": 16,
        "quantize-frac": 8,
        "check-length": 1000,
        "check-seconds": 60,
        "check": True,
    },
}


@dataclass(frozen=True)
class ExperimentSpec:
    """A validated experiment spec; ``presets[name]`` is the full settings dict of that preset."""

    path: Path
    experiment: str
    title: str
    seed: int
    presets: dict[str, dict[str, Any]]
    tasks: tuple[str, ...] = ()
    variants: tuple[str, ...] = ()
    program: str = ""  # prefix-labels: the C-RASP program (.cr) labelling every prefix, relative to the spec
    source_text: str = field(default="", compare=False, repr=False)


def _training_fields() -> dict[str, Field]:
    return {
        "width": Field(Integer("model width d", minimum=1, maximum=4096)),
        "heads": Field(Integer("attention heads (must divide width)", minimum=1, maximum=64)),
        "ffn-width": Field(Integer("hidden units of the ReLU feed-forward (0 = none)", minimum=0, maximum=16384)),
        "layernorm": Field(String("LayerNorm placement", LAYERNORM_PLACEMENTS)),
        "steps": Field(Integer("optimiser steps per trained model", minimum=1, maximum=10_000_000)),
        "batch": Field(Integer("sequences per step", minimum=1, maximum=1_000_000)),
        "learning-rate": Field(Number("Adam learning rate", positive=True)),
    }


_LUO_PRESET = Obj(
    {
        "length": Field(Integer("sequence length n", minimum=2, maximum=1024)),
        "vocab": Field(Integer("number of token kinds", minimum=2, maximum=100_000)),
        "layers": Field(Integer("transformer blocks", minimum=1, maximum=64)),
        **_training_fields(),
        "eval-every": Field(Integer("steps between evaluations", minimum=1)),
        "constant-fraction": Field(
            Number("share of constant sequences in position-index training batches", minimum=Fraction(0))
        ),
        "eval-samples": Field(Integer("random sequences per evaluation", minimum=1, maximum=1_000_000)),
    },
    "sizes of one Luo et al. preset; missing keys take the preset's defaults",
)

_LENGTH_RANGE = ListOf(Integer(minimum=1, maximum=100_000), "[shortest, longest] string length", length=2)

_YANG_PRESET = Obj(
    {
        "languages": Field(ListOf(Integer(minimum=1, maximum=64), "the k of each language L_k", min_length=1)),
        "depths": Field(ListOf(Integer(minimum=1, maximum=64), "transformer depths to train", min_length=1)),
        "train-lengths": Field(_LENGTH_RANGE),
        "test-lengths": Field(_LENGTH_RANGE),
        **_training_fields(),
        "train-size": Field(
            Integer("training strings per language (batches are drawn from them)", minimum=1, maximum=10_000_000)
        ),
        "test-size": Field(Integer("strings per evaluation set", minimum=1, maximum=10_000_000)),
    },
    "sizes of one Yang et al. preset; missing keys take the preset's defaults",
)


_PREFIX_PRESET = Obj(
    {
        "train-lengths": Field(_LENGTH_RANGE),
        "test-lengths": Field(_LENGTH_RANGE),
        "layers": Field(Integer("transformer blocks", minimum=1, maximum=64)),
        **_training_fields(),
        "train-size": Field(Integer("training strings (batches are drawn from them)", minimum=1, maximum=10_000_000)),
        "test-size": Field(Integer("strings per evaluation set", minimum=1, maximum=10_000_000)),
        "quantize-bits": Field(
            Integer("bits of the fixed-point format the model is checked in", minimum=2, maximum=64)
        ),
        "quantize-frac": Field(Integer("fractional bits of that format", minimum=0, maximum=62)),
        "check-length": Field(Integer("the check's longest string (counting)", minimum=1, maximum=1_000_000)),
        "check-seconds": Field(Integer("the check's budget per property, seconds", minimum=1)),
        "check": Field(Boolean("run the check after training (else only write the model and its spec)")),
    },
    "sizes of one prefix-labels preset; missing keys take the preset's defaults",
)


def _presets(preset_schema: Obj) -> Field:
    return Field(Obj({name: Field(preset_schema) for name in PRESETS}, "per-preset settings"))


_COMMON = {
    "experiment": Field(String("which experiment", EXPERIMENTS), required=True),
    "title": Field(String("a title for the plot and the JSON result")),
    "seed": Field(Integer("random seed (the CLI's --seed overrides it)", minimum=0), default=0),
}

SCHEMAS: dict[str, Obj] = {
    "luo-position-index": Obj(
        {
            **_COMMON,
            "tasks": Field(ListOf(String(choices=LUO_TASKS), min_length=1), default=list(LUO_TASKS)),
            "variants": Field(ListOf(String(choices=LUO_VARIANTS), min_length=1), default=list(LUO_VARIANTS)),
            "presets": _presets(_LUO_PRESET),
        },
        "Luo et al. 2022: APE / RPE / URPE transformers on position tasks",
    ),
    "yang-lk-depth": Obj(
        {
            **_COMMON,
            "presets": _presets(_YANG_PRESET),
        },
        "Yang, Cadilhac, Chiang 2025: depth needed for the per-prefix L_k task",
    ),
    "prefix-labels": Obj(
        {
            **_COMMON,
            "program": Field(String("the C-RASP program (.cr) whose output labels every prefix"), required=True),
            "presets": _presets(_PREFIX_PRESET),
        },
        "train a causal model to label every prefix of random strings with a C-RASP program, then check it",
    ),
}

_DEFAULT_TITLES = {
    "luo-position-index": "Luo et al. 2022: APE vs RPE vs URPE on position tasks",
    "yang-lk-depth": "Yang, Cadilhac, Chiang 2025: accuracy by language L_k and depth",
    "prefix-labels": "A causal model trained on every prefix of random strings, then checked against its program",
}


def load_experiment(path: Path | str) -> ExperimentSpec:
    """Read and validate an experiment spec file; raises ``SpecError`` (located) on any problem."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"cannot read the experiment spec: {exc.strerror or exc}", file=str(path)) from None
    except UnicodeDecodeError:
        raise SpecError("the experiment spec is not UTF-8 text", file=str(path)) from None
    return parse_experiment(text, str(path))


def parse_experiment(text: str, file: str = "<experiment>") -> ExperimentSpec:
    """Validate experiment-spec YAML ``text`` (``file`` is only used in messages)."""
    root = parse_yaml(text, file)
    ctx = Context(file=file, base_dir=Path(file).parent)
    if root.kind != "map":
        raise ctx.expected(
            root, "", "a mapping with an 'experiment' key", "start with e.g. 'experiment: yang-lk-depth'"
        )
    if "experiment" not in root.value:
        raise ctx.error(root, "", "missing required key 'experiment'", f"one of: {', '.join(EXPERIMENTS)}")
    experiment = _COMMON["experiment"].schema.validate(root.value["experiment"], ctx, "experiment")
    values = SCHEMAS[experiment].validate(root, ctx, "")
    if experiment == "prefix-labels":
        _check_program(values["program"], root.value["program"], ctx)
    defaults = {
        "luo-position-index": LUO_DEFAULTS,
        "yang-lk-depth": YANG_DEFAULTS,
        "prefix-labels": PREFIX_DEFAULTS,
    }[experiment]
    given = values["presets"] or {}
    presets = {}
    for name in PRESETS:
        overrides = given.get(name) or {}
        settings = dict(defaults[name])
        settings.update({key: value for key, value in overrides.items() if key != "__node__" and value is not None})
        settings["learning-rate"] = float(settings["learning-rate"])
        if "constant-fraction" in settings:
            settings["constant-fraction"] = float(settings["constant-fraction"])
        if overrides:
            node = overrides["__node__"]
        else:
            node = values["presets"]["__node__"] if values["presets"] else root
        _check_settings(experiment, settings, node, ctx, join("presets", name))
        presets[name] = settings
    return ExperimentSpec(
        path=Path(file),
        experiment=experiment,
        title=values["title"] or _DEFAULT_TITLES[experiment],
        seed=values["seed"],
        presets=presets,
        tasks=tuple(values.get("tasks") or ()),
        variants=tuple(values.get("variants") or ()),
        program=values.get("program") or "",
        source_text=text,
    )


def _check_program(program: str, node: Node, ctx: Context) -> None:
    """The labelling program must exist and parse (relative to the spec's folder)."""
    path = ctx.base_dir / program
    try:
        load_program(path)
    except CraspError as error:
        raise ctx.error(node, "program", f"invalid C-RASP program {program}: {error}") from None
    except OSError as error:
        raise ctx.error(node, "program", f"cannot read {path}: {error.strerror or error}") from None


def _check_settings(experiment: str, settings: dict[str, Any], node: Node, ctx: Context, path: str) -> None:
    """Cross-key rules of one merged preset (reported at the preset's line)."""
    if settings["width"] % settings["heads"]:
        raise ctx.error(node, path, f"heads ({settings['heads']}) must divide width ({settings['width']})")
    if experiment == "luo-position-index":
        if settings["constant-fraction"] > 1:
            raise ctx.error(
                node,
                join(path, "constant-fraction"),
                f"expected a number between 0 and 1, got {settings['constant-fraction']}",
            )
        return
    for key in ("train-lengths", "test-lengths"):
        shortest, longest = settings[key]
        if shortest > longest:
            raise ctx.error(node, join(path, key), f"expected [shortest, longest], got [{shortest}, {longest}]")
    if experiment == "prefix-labels":
        if settings["quantize-frac"] >= settings["quantize-bits"]:
            raise ctx.error(node, join(path, "quantize-frac"), "expected fewer fractional bits than bits")
        return
    longest_k = max(settings["languages"])
    if settings["train-lengths"][0] < longest_k:
        raise ctx.error(
            node,
            join(path, "train-lengths"),
            f"strings of L_{longest_k} have at least {longest_k} letters, got a shortest train length "
            f"of {settings['train-lengths'][0]}",
            "raise the shortest length or drop long languages",
        )

"""Load ``spec.yaml`` into a typed ``Spec``: model IR, arithmetic, domain, properties, engine settings.

Every failure is a ``SpecError`` naming file, line, key path, expectation and a hint: never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..builders import TORCH_ROLE_NAMES
from ..builders.constructs import constructions
from ..builders.files import ModelFileError, load_model
from ..builders.inline import build_inline
from ..builders.random_model import LAYERNORMS, RandomConfig, random_model
from ..builders.torch_reading import with_arithmetic
from ..crasp.ast import CraspError
from ..crasp.parser import load_program
from ..domain import (
    GRID_HINT,
    MAX_GRID_TOKENS,
    MAX_GRID_VALUES,
    MAX_LENGTH,
    Domain,
    GridDomain,
    StringDomain,
    magnitude,
    unrepresentable_grid_value,
)
from ..engines import for_domain, load as load_engine, names as engine_names
from ..ir import (
    ACTIVATIONS,
    ALIBI_DISTANCES,
    POSITIONALS,
    ROPE_PAIRINGS,
    SCORINGS,
    AlphabetTokens,
    GridTokens,
    Model,
    validate_shapes,
)
from ..numbers import MAX_DIGITS, TooLarge, check_size
from ..properties import Property, load as load_property, names as property_names
from ..regular import Language, RegexError, RegexLanguage
from ..schema.dsl import (
    Boolean,
    Context,
    Either,
    Field,
    FilePath,
    Integer,
    ListOf,
    MatrixOf,
    Number,
    Obj,
    String,
    TaggedUnion,
    join,
    locate,
)
from ..schema.errors import TORCH_INSTALL, MissingDependency, OptionError, SpecError
from ..schema.yamlnodes import Node, parse_yaml
from ..semantics import Arithmetic, Exact, Fixed
from ..semantics.arithmetic import ATTENTION_ROUNDINGS
from ..userfiles import UserFileError, read_user_text
from ..work import MAX_TIMEOUT

TORCH_READINGS = ("quantized", "float")  # architecture.reading of a torch import (docs/import.md)
ENGINES = ("auto", *engine_names())  # the engines found in verify_tf/engines/ (docs/architecture.md)
SOLVERS = ("z3", "cvc5", "bitwuzla", "portfolio")
VERDICT_NAMES = ("proved", "refuted", "unknown")


@dataclass(frozen=True)
class PropertySpec:
    name: str  # registry name, e.g. "permutation-equivariance"
    label: str  # as shown in reports (name, or the user's `name:`)
    options: Any  # the property's typed options (a frozen dataclass)
    line: int
    index: int
    engine: str | None = None
    timeout: float | None = None
    expect: str | None = None
    solver: str = "z3"
    rlimit: int | None = None
    samples: int | None = None
    engines: tuple[str, ...] = ()  # the engines the property can run with these options (computed once, here)


@dataclass(frozen=True)
class Spec:
    path: Path
    name: str
    model: Model
    arithmetic: Arithmetic
    domain: Domain | None
    properties: tuple[PropertySpec, ...]
    engine: str = "auto"
    timeout: float = 60.0
    seed: int = 0
    source_text: str = field(default="", compare=False, repr=False)


# ---------------------------------------------------------------- model section


def _rel_table_schema(what: str) -> Either:
    as_list = ListOf(Number(), what="a list of an odd number of numbers (offsets -r..r)")
    as_map = _OffsetMap()
    return Either(
        [(lambda n: n.kind == "seq", as_list), (lambda n: n.kind == "map", as_map)],
        what=f"{what}: a list [b(-r), ..., b(0), ..., b(r)] or a mapping {{offset: value}}",
        description=f"{what} indexed by the relative offset j - i",
    )


class _OffsetMap(Obj):
    def __init__(self):
        super().__init__({})

    def validate(self, node: Node, ctx: Context, path: str) -> dict[int, Fraction]:
        out = {}
        for key, child in node.value.items():
            try:
                offset = int(key)
            except ValueError:
                raise ctx.error(
                    child, join(path, key), f"expected an integer offset j - i as key, got {key!r}"
                ) from None
            out[offset] = Number().validate(child, ctx, join(path, key))
        return out

    def json(self) -> dict:
        return {"type": "object", "additionalProperties": Number().json()}


def _check_table(value, node, ctx, path):
    if isinstance(value, list) and len(value) % 2 != 1:
        raise ctx.error(node, path, f"expected an odd number of entries (offsets -r..r), got {len(value)}")
    return value


ROPE = Obj(
    {
        "base": Field(Number("θ_k = base^(-2k/d), RoPE's standard frequencies (default 10000)", positive=True)),
        "turns": Field(ListOf(Number(), "θ_k = 2π·t_k exactly, one per coordinate pair")),
        "radians": Field(ListOf(Number(), "θ_k in radians, one per coordinate pair")),
        "pairing": Field(
            String("half: pairs (k, k + d/2), Llama's rotate_half; interleaved: (2k, 2k + 1)", ROPE_PAIRINGS),
            default="half",
        ),
    },
    "RoPE: q and k rotated by θ_k·p at stream position p (docs/semantics.md, RoPE)",
    exclusive=[("base", "turns", "radians")],
)

ALIBI = Obj(
    {
        "slope": Field(Number("m >= 0; default: the head's standard geometric slope 2^(-8h/n)", minimum=Fraction(0))),
        "distance": Field(
            String("causal: m·(j - i); symmetric: -m·|i - j| (docs/semantics.md, ALiBi)", ALIBI_DISTANCES),
            default="causal",
        ),
    },
    "ALiBi: the slope times the distance added to the scores",
)

HEAD = Obj(
    {
        "scoring": Field(String("how logits become weights", SCORINGS), default="softmax"),
        "causal": Field(Boolean("mask keys j > i"), default=False),
        "positional": Field(String("positional flavour inside attention", POSITIONALS), default="standard"),
        "query": Field(MatrixOf("W_Q (k x d)"), required=True),
        "key": Field(MatrixOf("W_K (k x d)"), required=True),
        "value": Field(MatrixOf("W_V (v x d)"), required=True),
        "output": Field(MatrixOf("W_O (d x v)"), required=True),
        "query-bias": Field(ListOf(Number(), "b_Q (k)")),
        "key-bias": Field(ListOf(Number(), "b_K (k)")),
        "value-bias": Field(ListOf(Number(), "b_V (v)")),
        "rpe-bias": Field(_rel_table_schema("RPE bias B[j-i] added to the logits")),
        "urpe-c": Field(_rel_table_schema("URPE Toeplitz C[j-i] multiplied into the normalised weights")),
        "rope": Field(ROPE),
        "alibi": Field(ALIBI),
    },
    "one attention head",
)

NORM = Obj(
    {
        "gamma": Field(ListOf(Number(), "γ (d): the elementwise scale"), required=True),
        "beta": Field(ListOf(Number(), "β (d): the elementwise shift")),
        "eps": Field(Number("ε inside the square root (torch's default 1e-5)")),
    },
    "LayerNorm (z − mean)/√(var + eps)·γ + β, fixed arithmetic only (docs/semantics.md)",
)
NORM_FIRST = Field(
    Boolean("true: z + f(LN(z)) (pre-LN); false: LN(z + f(z)) (post-LN, torch's default)"), default=False
)

LAYER = Obj(
    {
        "attention": Field(
            Obj(
                {
                    "heads": Field(ListOf(HEAD, min_length=1), required=True),
                    "output-bias": Field(ListOf(Number(), "b_O (d)")),
                    "residual": Field(Boolean("add the attention output to the stream"), default=True),
                    "norm": Field(NORM),
                    "norm-first": NORM_FIRST,
                },
                "multi-head attention sublayer",
            )
        ),
        "feed-forward": Field(
            Obj(
                {
                    "w1": Field(MatrixOf("W1 (r x d)"), required=True),
                    "b1": Field(ListOf(Number(), "b1 (r)")),
                    "w2": Field(MatrixOf("W2 (d x r)"), required=True),
                    "b2": Field(ListOf(Number(), "b2 (d)")),
                    "residual": Field(Boolean(), default=True),
                    "activation": Field(
                        String("relu, or I-BERT's integer polynomial i-gelu", ACTIVATIONS), default="relu"
                    ),
                    "norm": Field(NORM),
                    "norm-first": NORM_FIRST,
                },
                "feed-forward sublayer: z + W2 act(W1 z + b1) + b2",
            )
        ),
    },
    "one block: attention then feed-forward, each optional",
)

TOKENS = Obj(
    {
        "grid": Field(Integer("continuous tokens of this dimension", minimum=1, maximum=64)),
        "alphabet": Field(ListOf(String(), "symbols", min_length=1)),
        "embedding": Field(MatrixOf("one row per alphabet symbol")),
        "bos": Field(String("a beginning-of-sequence symbol prepended to every input")),
        "bos-embedding": Field(ListOf(Number(), "embedding of the BOS symbol")),
    },
    "token embedding: {grid: d} or {alphabet: [...], embedding: [[...]]}",
    exclusive=[("grid", "alphabet")],
)

RANDOM = Obj(
    {
        "seed": Field(Integer(minimum=0), default=0),
        "width": Field(Integer("model width d", minimum=1, maximum=64), default=2),
        "layers": Field(Integer(minimum=0, maximum=32), default=1),
        "heads": Field(Integer(minimum=1, maximum=16), default=1),
        "key-dim": Field(Integer(minimum=1, maximum=64)),
        "value-dim": Field(Integer(minimum=1, maximum=64)),
        "ffn-width": Field(Integer("0 = no feed-forward", minimum=0, maximum=256), default=0),
        "scoring": Field(String(choices=SCORINGS), default="hardmax"),
        "positional": Field(String(choices=POSITIONALS), default="standard"),
        "causal": Field(Boolean(), default=False),
        "absolute-pe": Field(Boolean("learned absolute positional encoding"), default=False),
        "max-length": Field(Integer("positions covered by PE / RPE tables", minimum=1, maximum=1024), default=8),
        "range": Field(Number("weights drawn from [-range, range]", positive=True), default=Fraction(2)),
        "denominator": Field(Integer("weights are multiples of 1/denominator", minimum=1, maximum=1 << 20), default=4),
        "alphabet": Field(ListOf(String(), min_length=1)),
        "bos": Field(String()),
        "activation": Field(String(choices=ACTIVATIONS), default="relu"),
        "layernorm": Field(String("LayerNorm on every sublayer: pre-LN, post-LN or none", LAYERNORMS), default="none"),
        "final-norm": Field(Boolean("a LayerNorm after the last block"), default=False),
        "rope-base": Field(Number("positional: rope: θ_k = base^(-2k/d)", positive=True), default=Fraction(10000)),
        "rope-pairing": Field(String("positional: rope: coordinate pairs", ROPE_PAIRINGS), default="half"),
        "alibi-slopes": Field(
            String("positional: alibi: slopes drawn on the weight grid, or the standard ones", ("random", "standard")),
            default="random",
        ),
        "alibi-distance": Field(String("positional: alibi", ALIBI_DISTANCES), default="causal"),
    },
    "a seeded random model with exact dyadic weights",
)


def _construct_schema() -> dict[str, Field]:
    fields: dict[str, Field] = {
        "construct": Field(String("built-in construction", tuple(constructions())), required=True)
    }
    for c in constructions().values():
        for key, f in c.parameters.items():
            fields.setdefault(key, Field(f.schema))
    return fields


MODEL_SOURCES = ("layers", "file", "random", "construct", "torch", "tracr")
TRACR_KEYS = ("snap", "attention")

TORCH_ARCHITECTURE = Obj(
    {
        "heads": Field(
            Integer("attention heads per layer (a state dict does not store it)", minimum=1, maximum=64), required=True
        ),
        "scoring": Field(String("how the imported heads normalise logits", SCORINGS), default="softmax"),
        "causal": Field(Boolean("the model was trained with a causal mask"), default=False),
        "rope-base": Field(
            Number("RoPE: frequencies base^(-2k/d_head), checked against the state dict's inv_freq", positive=True),
            default=Fraction(10000),
        ),
        "activation": Field(
            String(
                "feed-forward activation: relu, or i-gelu (I-BERT's integer polynomial) for a "
                "model trained with GELU; gelu itself is refused",
                ("relu", "i-gelu", "gelu"),
            ),
            default="relu",
        ),
        "layernorm": Field(
            String(
                "LayerNorm in the state dict: refuse it, or verify the fixed-point integer LayerNorm "
                "of docs/semantics.md",
                ("refuse", "integer"),
            ),
            default="refuse",
        ),
        "norm-first": Field(
            Boolean(
                "where the layers' norms sit: true pre-LN z + f(LN(z)), false post-LN LN(z + f(z)) "
                "(torch's norm_first; a state dict does not record it)"
            )
        ),
        "layernorm-eps": Field(Number("LayerNorm eps (torch's default 1e-5; a state dict does not record it)")),
        "names": Field(
            Obj(
                {
                    role: Field(String(f"the model's name for torch's {role!r} module, e.g. ff.0"))
                    for role in TORCH_ROLE_NAMES
                },
                "the model's own module names for the ones the importer reads (docs/import.md)",
            )
        ),
        "alphabet": Field(ListOf(String(), "symbols of the rows of embedding.weight, in order", min_length=1)),
        "bos": Field(String("a symbol of the alphabet prepended to every input")),
        "readout-row": Field(Integer("the row of readout.weight to verify (when it has several)", minimum=0)),
        "readout-bias": Field(
            String("a non-zero readout.bias is refused unless dropped explicitly", ("refuse", "drop")), default="refuse"
        ),
        "reading": Field(
            String(
                "which reading crasp-equivalence proves: quantized (the fixed-point IR of the weights) or float "
                "(the float32 model as trained, through an exact enclosure of every float32 evaluation; the "
                "experiments' TinyTransformer; docs/semantics.md §7)",
                TORCH_READINGS,
            ),
            default="quantized",
        ),
    },
    "what a torch state dict does not say about the model (docs/import.md)",
)

QUANTIZE = Obj(
    {
        "bits": Field(Integer("total bits p", minimum=2, maximum=64), required=True),
        "frac": Field(
            Integer("fractional bits f: weights are rounded to multiples of 2^-f", minimum=0, maximum=32), required=True
        ),
    },
    "round every imported weight to the nearest multiple of 2^-frac (the largest error is reported)",
)


def _check_quantize(quantize: dict[str, Any] | None, ctx: Context, path: str) -> None:
    """``quantize`` of a torch or tracr source: fewer fractional bits than bits."""
    if quantize is not None and quantize["frac"] >= quantize["bits"]:
        raise ctx.error(
            quantize["__node__"],
            join(path, "quantize.frac"),
            f"expected fewer fractional bits than bits ({quantize['bits']}), got {quantize['frac']}",
        )


def _inline_model(section: dict[str, Any], node: Node, ctx: Context, path: str) -> Model:
    """``model: {tokens: ..., layers: [...]}``: the weights written in the spec."""
    if section.get("tokens") is None:
        raise ctx.error(node, path, "an inline model needs 'tokens'", "e.g. tokens: {grid: 2}")
    tokens = section["tokens"]
    if tokens["grid"] is None and tokens["alphabet"] is None:
        raise ctx.error(tokens["__node__"], join(path, "tokens"), "expected 'grid' or 'alphabet'")
    if tokens["alphabet"] is not None and tokens["embedding"] is None:
        raise ctx.error(tokens["__node__"], join(path, "tokens"), "an alphabet needs an 'embedding' table")
    return build_inline(section)


def _file_model(section: dict[str, Any], node: Node, ctx: Context, path: str) -> Model:
    """``model: {file: model.safetensors}``: a verify-tf model file."""
    return load_model(section["file"])


def _random_model(section: dict[str, Any], node: Node, ctx: Context, path: str) -> Model:
    """``model: {random: {seed: ..., width: ...}}``: a seeded random model with exact dyadic weights."""
    r = section["random"]
    config = RandomConfig(
        seed=r["seed"],
        width=r["width"],
        layers=r["layers"],
        heads=r["heads"],
        key_dim=r["key-dim"],
        value_dim=r["value-dim"],
        ffn_width=r["ffn-width"],
        scoring=r["scoring"],
        positional=r["positional"],
        causal=r["causal"],
        absolute_pe=r["absolute-pe"],
        max_length=r["max-length"],
        weight_range=r["range"],
        denominator=r["denominator"],
        alphabet=tuple(r["alphabet"]) if r["alphabet"] else None,
        bos=r["bos"],
        activation=r["activation"],
        layernorm=r["layernorm"],
        final_norm=r["final-norm"],
        rope_base=r["rope-base"],
        rope_pairing=r["rope-pairing"],
        alibi_slopes=r["alibi-slopes"],
        alibi_distance=r["alibi-distance"],
    )
    return random_model(config)


def _constructed_model(section: dict[str, Any], node: Node, ctx: Context, path: str) -> Model:
    """``model: {construct: NAME, ...}``: a built-in construction (``builders.constructs``: Yun et al.'s Lemma 6
    contextual mapping, the C-RASP compiler), with its parameters taken from the model section."""
    construction = constructions()[section["construct"]]
    params = {}
    for key, f in construction.parameters.items():
        if section.get(key) is None and f.required:
            raise ctx.error(
                node, path, f"construction {construction.name} needs parameter {key!r}", f.schema.description
            )
        params[key] = section.get(key)
    return construction.build(params)


def _torch_model(section: dict[str, Any], node: Node, ctx: Context, path: str) -> Model:
    """``model: {torch: model.pt, architecture: ..., quantize: ...}``: a PyTorch state dict (docs/import.md)."""
    try:  # torch is an optional dependency: say which extra installs it
        from ..builders.torch_import import import_torch_model
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] != "torch":
            raise
        raise MissingDependency(
            "a torch state dict needs PyTorch, which is not installed",
            package="torch",
            install=TORCH_INSTALL,
            file=ctx.file,
            line=node.line,
            path=join(path, "torch"),
        ) from None
    _check_quantize(section["quantize"], ctx, path)
    architecture = section["architecture"]
    if architecture is not None and architecture.get("reading") == "float":
        from ..builders.torch_float import import_float_reading

        return import_float_reading(section["torch"], architecture, section["quantize"])
    return import_torch_model(section["torch"], architecture, section["quantize"])


def _tracr_model(section: dict[str, Any], node: Node, ctx: Context, path: str) -> Model:
    """``model: {tracr: export.json, snap: ..., attention: ..., quantize: ...}``: a tracr export (docs/tracr.md)."""
    from ..builders.tracr_import import TracrImportError, import_tracr

    quantize = section["quantize"]
    _check_quantize(quantize, ctx, path)
    try:
        return import_tracr(
            section["tracr"],
            snap=section["snap"] is not False,
            attention=section["attention"] or "float",
            quantize=quantize,
            name=section["name"] or None,
        )
    except TracrImportError as exc:
        raise ctx.error(
            node,
            join(path, "tracr"),
            str(exc),
            "export files are written by verify_tf.tracr_export.write_export (docs/tracr.md)",
        ) from None


ModelBuilder = Callable[[dict[str, Any], Node, Context, str], Model]

# One builder per model source, in MODEL_SOURCES order: the first source present in a section is built.
MODEL_BUILDERS: dict[str, ModelBuilder] = {
    "layers": _inline_model,
    "file": _file_model,
    "random": _random_model,
    "construct": _constructed_model,
    "torch": _torch_model,
    "tracr": _tracr_model,
}


def _check_source_keys(source: str, section: dict[str, Any], node: Node, ctx: Context, path: str) -> None:
    """Keys that belong to another model source are refused, naming the key."""
    stray = [
        k
        for k in ("architecture", "quantize")
        if section.get(k) is not None and not (source == "tracr" and k == "quantize")
    ]
    if source != "torch" and stray:
        raise ctx.error(
            node,
            join(path, stray[0]),
            f"'{stray[0]}' applies only to a torch source",
            "write model: {torch: model.pt, architecture: {heads: N}, quantize: {bits: 16, frac: 8}}",
        )
    if section.get("final-norm") is not None and source != "layers":
        raise ctx.error(
            node,
            join(path, "final-norm"),
            "'final-norm' applies only to an inline model (layers)",
            "a random model takes random: {final-norm: true}; a torch import reads the final norm from the state dict",
        )
    stray = [k for k in TRACR_KEYS if section.get(k) is not None]
    if source != "tracr" and stray:
        raise ctx.error(
            node,
            join(path, stray[0]),
            f"'{stray[0]}' applies only to a tracr source",
            "write model: {tracr: export.json, snap: true, attention: hardmax} (docs/tracr.md)",
        )


def _check_shapes(model: Model, node: Node, ctx: Context, path: str) -> None:
    """The first shape problem of the built model, located at its key; the next three in the hint."""
    problems = validate_shapes(model)
    if problems:
        where, _, what = problems[0].partition(": ")
        raise ctx.error(
            node.find(where),
            join(path, where),
            what,
            "; ".join(problems[1:4])
            if len(problems) > 1
            else "matrices are rows x columns; width d is the token dimension",
        )


def _build_model(section: dict[str, Any], node: Node, ctx: Context, path: str) -> Model:
    """The model section's ``convert``: pick the source, refuse other sources' keys, build, check shapes."""
    present = [k for k in MODEL_SOURCES if section.get(k) is not None]
    if not present:
        raise ctx.error(node, path, "expected one model source", f"give one of: {', '.join(MODEL_SOURCES)}")
    source = present[0]
    _check_source_keys(source, section, node, ctx, path)
    try:
        model = MODEL_BUILDERS[source](section, node, ctx, path)
    except MissingDependency as exc:  # a reader raises it without a location (a .pt file without torch)
        if exc.file is None:
            exc.file, exc.line, exc.path = ctx.file, node.line, join(path, source)
        raise
    except ModelFileError as exc:
        raise ctx.error(
            node,
            join(path, "file"),
            str(exc),
            "verify-tf model files are written by save_model / `verify-tf crasp compile`",
        ) from None
    except ValueError as exc:  # an importer's refusal: at the spec key it names (``TorchImportError.key``), if any
        key = getattr(exc, "key", None)
        where = node.find(key) if key else node
        raise ctx.error(where, join(path, key) if key else path, str(exc), getattr(exc, "hint", None)) from None
    _check_shapes(model, node, ctx, path)
    return model


def model_schema(description: str = "the transformer") -> Obj:
    fields = {
        "name": Field(String("a label for reports")),
        "tokens": Field(TOKENS),
        "positional-encoding": Field(MatrixOf("absolute PE table (max_len x d), added to the embeddings")),
        "layers": Field(ListOf(LAYER, "blocks, in order")),
        "final-norm": Field(NORM),
        "readout": Field(ListOf(Number(), "u: the readout q_i = u . z_i (default e1)")),
        "file": Field(FilePath("a verify-tf model file (.safetensors, .npz, .pt)")),
        "random": Field(RANDOM),
        "construct": Field(String("built-in construction", tuple(constructions()))),
        "torch": Field(FilePath("a PyTorch state dict (.pt) of MultiheadAttention layers (docs/import.md)")),
        "architecture": Field(TORCH_ARCHITECTURE),
        "tracr": Field(FilePath("a tracr model exported by verify_tf.tracr_export (docs/tracr.md)")),
        "snap": Field(
            Boolean(
                "tracr: read each float32 weight as the simplest rational inside its rounding "
                "interval (false: the float32 value exactly)"
            )
        ),
        "attention": Field(
            String(
                "tracr: which reading of its softmax attention to prove: float (default: the float32 model "
                "as compiled; rasp-equivalence), hardmax (tracr's intended computation) or softmax (a "
                "fixed-point reading; needs quantize)",
                ("float", "hardmax", "softmax"),
            )
        ),
        "quantize": Field(QUANTIZE),
    }
    for key, f in _construct_schema().items():
        fields.setdefault(key, Field(f.schema))
    return Obj(fields, description, convert=_build_model, exclusive=[MODEL_SOURCES])


# ---------------------------------------------------------------- arithmetic and domain

ARITH_OBJ = Obj(
    {
        "mode": Field(String(choices=("exact", "fixed")), required=True),
        "bits": Field(Integer("total bits p", minimum=2, maximum=64), default=16),
        "frac": Field(Integer("fractional bits f", minimum=0, maximum=32), default=8),
        "attention-rounding": Field(String(choices=ATTENTION_ROUNDINGS), default="exact-sums"),
    },
    "arithmetic mode",
)
ARITHMETIC = Either(
    [(lambda n: n.kind == "scalar", String(choices=("exact", "fixed"))), (lambda n: n.kind == "map", ARITH_OBJ)],
    what="'exact', 'fixed', or {mode: fixed, bits: 16, frac: 8, attention-rounding: exact-sums}",
    description="the arithmetic every engine uses (docs/semantics.md)",
)


def _arithmetic(value: Any, node: Node, ctx: Context) -> Arithmetic:
    if value == "exact":
        return Exact()
    if value == "fixed":
        return Fixed()
    if value["mode"] == "exact":
        return Exact()
    if value["frac"] >= value["bits"]:
        raise ctx.error(
            node, "arithmetic.frac", f"expected fewer fractional bits than bits ({value['bits']}), got {value['frac']}"
        )
    return Fixed(value["bits"], value["frac"], value["attention-rounding"])


DOMAIN = Obj(
    {
        "grid": Field(
            Obj(
                {
                    "dim": Field(Integer("token dimension (default: the model's)", minimum=1, maximum=64)),
                    "step": Field(Number("grid step δ", positive=True)),
                    "lo": Field(Number("smallest coordinate value"), default=Fraction(0)),
                    "hi": Field(Number("largest coordinate value (default 1 - step)")),
                    "values": Field(ListOf(Number(), "explicit coordinate values", min_length=1)),
                    "plus": Field(
                        Either(
                            [
                                (
                                    lambda n: n.kind == "scalar" and n.scalar_kind == "bool",
                                    Boolean("true: add Yun et al.'s -δ^-nd (n = length, d = dim)"),
                                ),
                                (lambda n: n.kind == "scalar", Number("the coordinate value to add")),
                            ],
                            what="true (Yun et al.'s -δ^-nd) or a number",
                            description="G⁺_δ: add one coordinate value outside the grid (Yun et al. 2020, Lemma 6: "
                            "the value their quantisation gives coordinates outside [0, 1))",
                        )
                    ),
                },
                "grid tokens {lo, lo+step, ..., hi}^dim",
                exclusive=[("step", "values")],
            )
        ),
        "length": Field(Integer("sequence length n", minimum=1, maximum=MAX_LENGTH)),
        "distinct-tokens": Field(Boolean("only inputs with no repeated token (Yun's G~)"), default=False),
        "strings": Field(
            Obj(
                {
                    "alphabet": Field(ListOf(String(), min_length=1)),
                    "min-length": Field(Integer(minimum=0, maximum=MAX_LENGTH), default=1),
                    "max-length": Field(Integer(minimum=0, maximum=MAX_LENGTH), required=True),
                    "language": Field(
                        Obj(
                            {
                                "regex": Field(
                                    String(
                                        "a regular expression over the alphabet's one-character letters: "
                                        "concatenation, |, *, +, ?, {m}, {m,n}, {m,}, ( ), . (any letter), () "
                                        "(the empty word)"
                                    )
                                ),
                                "crasp": Field(
                                    FilePath(
                                        "a C-RASP program (.cr), relative to the spec's folder: the words it accepts "
                                        "(its output at the last position holds; never the empty word)"
                                    )
                                ),
                            },
                            "only the words of this language, a regex or a C-RASP program (enumerated from its "
                            "automaton or counter machine, never by filtering every string)",
                            exclusive=[("regex", "crasp")],
                        )
                    ),
                },
                "all strings over the alphabet with lengths in [min-length, max-length] (or only the words of "
                "'language')",
            )
        ),
    },
    "the finite input domain properties quantify over",
    exclusive=[("grid", "strings")],
)


def _language(strings: dict, alphabet: tuple[str, ...], ctx: Context) -> Language | None:
    """The language of ``strings.language``: a regex compiled (malformed: an input error at its column), or a
    C-RASP program's counter machine explored up to ``max-length`` (``crasp.words``; parsed, never executed)."""
    if strings["language"] is None:
        return None
    language = strings["language"]
    node = language["__node__"]
    if language["crasp"] is not None:
        # imported here: the counter machine imports z3, which a spec without a C-RASP language never needs
        from ..crasp.words import ProgramLanguageError, program_language

        at, where = node.value["crasp"], "domain.strings.language.crasp"
        try:
            program = load_program(language["crasp"])
        except CraspError as error:
            raise ctx.error(
                at,
                where,
                f"invalid C-RASP program: {error}",
                "docs/crasp.md has the syntax; try: verify-tf crasp run FILE ab",
            ) from None
        try:
            return program_language(program, alphabet, strings["max-length"], str(at.value))
        except ProgramLanguageError as error:
            raise ctx.error(at, where, error.message, error.hint or None) from None
    regex = language["regex"]
    if regex is None:
        raise ctx.error(
            node,
            "domain.strings.language",
            "expected 'regex' or 'crasp'",
            'e.g. language: {regex: "a+b+"} or language: {crasp: L2.cr}',
        )
    try:
        return RegexLanguage.compile(regex, alphabet)
    except RegexError as error:
        raise ctx.error(
            node.value.get("regex", node),
            "domain.strings.language.regex",
            f"{error.message} (column {error.column} of {regex!r})",
            error.hint or None,
        ) from None


def _domain(value: dict, model: Model, arith: Arithmetic, ctx: Context) -> Domain:
    node = value["__node__"]
    if value["strings"] is not None:
        s = value["strings"]
        if not isinstance(model.tokens, AlphabetTokens):
            raise ctx.error(node, "domain.strings", "a string domain needs a model with alphabet tokens")
        symbols = tuple(x for x in model.tokens.symbols if x != model.tokens.bos)
        alphabet = tuple(s["alphabet"]) if s["alphabet"] else symbols
        unknown = [a for a in alphabet if a not in model.tokens.symbols]
        if unknown:
            raise ctx.error(
                s["__node__"],
                "domain.strings.alphabet",
                f"symbol {unknown[0]!r} is not in the model's alphabet {list(symbols)}",
            )
        if s["min-length"] > s["max-length"]:
            raise ctx.error(s["__node__"], "domain.strings", "min-length exceeds max-length")
        domain: Domain = StringDomain(alphabet, s["min-length"], s["max-length"], _language(s, alphabet, ctx))
        if domain.language is not None and domain.size() == 0:  # a proof over no input would be vacuous
            key = "crasp" if s["language"]["crasp"] is not None else "regex"
            raise ctx.error(
                s["language"]["__node__"].value.get(key, s["__node__"]),
                f"domain.strings.language.{key}",
                f"no word of {domain.language.name} has a length in {s['min-length']}..{s['max-length']}",
                f"widen min-length/max-length, or check the {'program' if key == 'crasp' else 'regex'}",
            )
    else:
        if value["grid"] is None or value["length"] is None:
            raise ctx.error(
                node,
                "domain",
                "expected 'grid' and 'length' (or 'strings')",
                "e.g. domain: {grid: {step: 1/2}, length: 3}",
            )
        g = value["grid"]
        dim = g["dim"] or (model.tokens.dim if isinstance(model.tokens, GridTokens) else None)
        if not isinstance(model.tokens, GridTokens):
            raise ctx.error(
                node,
                "domain.grid",
                "a grid domain needs a model with grid tokens",
                "alphabet models use domain: {strings: {max-length: N}}",
            )
        if dim != model.tokens.dim:
            raise ctx.error(
                g["__node__"], "domain.grid.dim", f"expected the model's token dimension {model.tokens.dim}, got {dim}"
            )
        plus = g["plus"] is not None and g["plus"] is not False
        if g["values"] is not None:
            _check_grid_size(len(set(g["values"])) + plus, dim, g["__node__"], ctx)
            domain = GridDomain(dim, tuple(sorted(set(g["values"]))), value["length"], value["distinct-tokens"])
        elif g["step"] is not None:
            hi = g["hi"] if g["hi"] is not None else 1 - g["step"]
            if hi < g["lo"]:
                raise ctx.error(g["__node__"], "domain.grid", f"hi ({hi}) is below lo ({g['lo']})")
            if ((hi - g["lo"]) / g["step"]).denominator != 1:
                below = g["lo"] + ((hi - g["lo"]) // g["step"]) * g["step"]
                raise ctx.error(
                    g["__node__"].value.get("hi", g["__node__"]),
                    "domain.grid.hi",
                    f"hi ({hi}) is not lo + k·step (lo {g['lo']}, step {g['step']})",
                    f"the grid's largest value would be {below}: write hi: {below}, or list the values",
                )
            _check_grid_size(int((hi - g["lo"]) / g["step"]) + 1 + plus, dim, g["__node__"], ctx)  # by formula
            domain = GridDomain.regular(dim, g["step"], value["length"], g["lo"], hi, value["distinct-tokens"])
        else:
            raise ctx.error(g["__node__"], "domain.grid", "expected 'step' or 'values'")
        if plus:
            if g["plus"] is True and g["step"] is None:
                raise ctx.error(
                    g["__node__"],
                    "domain.grid.plus",
                    "plus: true needs a regular grid (step)",
                    "write the value explicitly: plus: -16",
                )
            extra = _yun_plus(g["step"], value["length"] * dim, g["__node__"], ctx) if g["plus"] is True else g["plus"]
            if extra in domain.values:
                raise ctx.error(g["__node__"], "domain.grid.plus", f"{extra} is already a grid value")
            domain = GridDomain(
                dim, tuple(sorted(domain.values + (extra,))), domain.length, domain.distinct_tokens, (extra,)
            )
        unrepresentable = unrepresentable_grid_value(domain, arith)
        if unrepresentable is not None:
            raise ctx.error(g["__node__"], "domain.grid", unrepresentable, GRID_HINT)
        tokens = len(domain.values) ** domain.dim  # by formula: never list the tokens here
        if domain.distinct_tokens and domain.length > tokens:
            raise ctx.error(
                node,
                "domain.length",
                f"expected at most {tokens} positions for distinct tokens, got {domain.length}",
            )
    too_long = model.max_length is not None and max(domain.lengths) > model.max_length
    if too_long:
        raise ctx.error(
            node,
            "domain",
            f"inputs of length {max(domain.lengths)} exceed the positional encoding's {model.max_length} positions",
        )
    return domain


def _check_grid_size(values: int, dim: int, node: Node, ctx: Context) -> None:
    """Refuse a grid past the documented limits from its counts alone, before any value is listed."""
    if values > MAX_GRID_VALUES:
        raise ctx.error(
            node,
            "domain.grid",
            f"the grid has {magnitude(values)} values per coordinate; at most {MAX_GRID_VALUES:,} are allowed",
            'a coarser step or a narrower lo..hi (docs/cli.md, "Input limits")',
        )
    if values**dim > MAX_GRID_TOKENS:
        raise ctx.error(
            node,
            "domain.grid",
            f"the grid has {values}^{dim} = {magnitude(values**dim)} tokens; at most {MAX_GRID_TOKENS:,} are allowed",
            'fewer values per coordinate (docs/cli.md, "Input limits")',
        )


def _yun_plus(step: Fraction, exponent: int, node: Node, ctx: Context) -> Fraction:
    """plus: true's −δ^(−nd), refused (before it is computed) when it would pass the number size limit."""
    bits = exponent * max(step.numerator.bit_length(), step.denominator.bit_length())
    if bits > 4 * MAX_DIGITS:  # 2^(4·MAX_DIGITS) > 10^MAX_DIGITS: a cheap bound before the power
        raise ctx.error(
            node,
            "domain.grid.plus",
            f"−δ^(−nd) = −({step})^(−{exponent}) has more than {MAX_DIGITS} digits",
            "write the added value explicitly (plus: -16), or use a shorter length",
        )
    try:
        return check_size(-((1 / step) ** exponent), "−δ^(−nd)")
    except TooLarge as exc:
        raise ctx.error(node, "domain.grid.plus", str(exc)) from None


# ---------------------------------------------------------------- properties and the top level

COMMON_PROPERTY_FIELDS = {
    "name": Field(String("label shown in reports")),
    "engine": Field(String("engine for this property", ENGINES)),
    "timeout": Field(
        Number("seconds for this property (the whole check, encoding included)", positive=True, maximum=MAX_TIMEOUT)
    ),
    "expect": Field(
        String("the verdict this property is expected to get (CI treats a match as success)", VERDICT_NAMES)
    ),
    "solver": Field(
        String("smt engine: z3, cvc5, bitwuzla (optional extras) or a portfolio race", SOLVERS), default="z3"
    ),
    "rlimit": Field(
        Integer("smt engine: z3 resource limit per query (deterministic budget)", minimum=1, maximum=2**32 - 1)
    ),
    "samples": Field(Integer("search engine: how many inputs to try (seeded by the spec's seed)", minimum=1)),
}


class PropertySchemas(Mapping[str, Obj]):
    """Each property's options plus the common fields, by name; the property's own typed check runs on its part.
    A property's module is imported when a spec names it (a check loads only the properties it runs)."""

    def __iter__(self) -> Iterator[str]:
        return iter(property_names())

    def __len__(self) -> int:
        return len(property_names())

    def __getitem__(self, name: str) -> Obj:
        if name not in property_names():
            raise KeyError(name)
        prop = load_property(name)
        fields = dict(COMMON_PROPERTY_FIELDS)
        fields.update(prop.options.fields)
        return Obj(fields, prop.summary, exclusive=prop.options.exclusive, check=_split_common(prop.options))


def property_schemas() -> Mapping[str, Obj]:
    return PropertySchemas()


def _split_common(own: Obj):
    def split(values: dict) -> tuple[dict, Any]:
        common = {k: values[k] for k in COMMON_PROPERTY_FIELDS}
        options = {k: v for k, v in values.items() if k not in COMMON_PROPERTY_FIELDS}
        return common, own.check(options) if own.check is not None else options

    return split


def top_schema() -> Obj:
    return Obj(
        {
            "name": Field(String("a title for reports")),
            "description": Field(String("free text")),
            "model": Field(model_schema(), required=True),
            "arithmetic": Field(ARITHMETIC, default="exact"),
            "domain": Field(DOMAIN),
            "properties": Field(
                ListOf(TaggedUnion(property_schemas(), "a property"), "properties to check", min_length=1),
                required=True,
            ),
            "engine": Field(String("default engine", ENGINES), default="auto"),
            "timeout": Field(Number("seconds per property", positive=True, maximum=MAX_TIMEOUT), default=Fraction(60)),
            "seed": Field(Integer("seed for randomised engines", minimum=0), default=0),
        },
        "a verify-tf spec",
    )


def json_schema() -> dict:
    schema = top_schema().json()
    schema["$defs"] = {"model": model_schema("a model section (as the top-level model:)").json()}
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "verify-tf spec"
    return schema


def load_spec(path: str | Path) -> Spec:
    path = Path(path)
    try:
        text = read_user_text(path, "the spec")
    except UserFileError as exc:
        raise SpecError(str(exc), file=str(path)) from None
    return load_spec_text(text, str(path), path.resolve().parent)


def _igelu_note(model: Model, arith: Arithmetic, domain: Domain | None) -> str | None:
    """The i-GELU deviation note of a model with i-GELU feed-forwards (``symbolic.deviation``: interval bounds
    and a search, imported for such models only), None for any other model."""
    if not any(b.feed_forward is not None and b.feed_forward.activation == "i-gelu" for b in model.blocks):
        return None
    from ..symbolic.deviation import igelu_deviation_note

    return igelu_deviation_note(model, arith, domain)


def load_spec_text(text: str, file: str = "<spec>", base_dir: Path | None = None) -> Spec:
    ctx = Context(
        file, base_dir or Path.cwd(), model_section=lambda node, c, path: model_schema().validate(node, c, path)
    )
    root = parse_yaml(text, file)
    if root.kind != "map":
        raise ctx.expected(root, "", "a mapping with keys model, properties, ...")
    try:
        data = top_schema().validate(root, ctx, "")
    except MissingDependency as missing:  # the spec cannot run here: its properties say so (CLI: skipped)
        missing.properties = _unfitted_properties(root, ctx)
        raise
    model: Model = data["model"]
    arith = _arithmetic(data["arithmetic"], root.value.get("arithmetic", root), ctx)
    _check_model_in_arithmetic(model, arith, root.value["model"], ctx)
    model = with_arithmetic(model, arith)  # an imported torch model's reading states the arithmetic
    domain = _domain(data["domain"], model, arith, ctx) if data["domain"] is not None else None
    note = _igelu_note(model, arith, domain)
    if note is not None:
        model = replace(model, notes=model.notes + (note,))
    properties = []
    for index, (name, (common, options), node) in enumerate(data["properties"]):
        prop = load_property(name)
        where = f"properties[{index}].{name}"
        if prop.needs_domain and domain is None:
            raise ctx.error(
                node, where, "this property needs a 'domain' section", "e.g. domain: {grid: {step: 1/2}, length: 3}"
            )
        engines = supported_engines(prop, options, domain)
        _check_language(prop, engines, common["engine"], domain, root, node, where, ctx)
        if common["engine"] is not None and common["engine"] != "auto" and common["engine"] not in engines:
            raise ctx.error(
                node, f"{where}.engine", f"expected one of {', '.join(('auto',) + engines)}, got {common['engine']!r}"
            )
        try:
            prop.fit(model, arith, domain, options)
        except OptionError as exc:
            body = node.value[name] if node.kind == "map" else node
            raise ctx.error(
                locate(body, exc.key), join(where, exc.key) if exc.key else where, exc.message, exc.hint
            ) from None
        properties.append(_property_spec(index, name, common, options, node.line, engines))
    if data["engine"] != "auto":
        for p in properties:
            if p.engine is None and data["engine"] not in p.engines:
                raise ctx.error(
                    root.value["engine"],
                    "engine",
                    f"property {p.label!r} does not support engine {data['engine']!r}",
                    f"it supports: {', '.join(p.engines)}",
                )
    return Spec(
        path=Path(file),
        name=data["name"] or Path(file).stem,
        model=model,
        arithmetic=arith,
        domain=domain,
        properties=tuple(properties),
        engine=data["engine"],
        timeout=float(data["timeout"]),
        seed=data["seed"],
        source_text=text,
    )


def _property_spec(
    index: int, name: str, common: dict[str, Any], options: Any, line: int, engines: tuple[str, ...] | None = None
) -> PropertySpec:
    """A property of the spec, with the engines it can run (``engines``: computed by the caller already)."""
    return PropertySpec(
        name=name,
        label=common["name"] or name,
        options=options,
        line=line,
        index=index,
        engine=common["engine"],
        timeout=float(common["timeout"]) if common["timeout"] else None,
        expect=common["expect"],
        solver=common["solver"],
        rlimit=common["rlimit"],
        samples=common["samples"],
        engines=engines if engines is not None else supported_engines(load_property(name), options),
    )


def _unfitted_properties(root: Node, ctx: Context) -> tuple[PropertySpec, ...]:
    """The properties of a spec whose model could not be built: validated (a mistake in them is still the user's
    error), not fitted to a model. A model inside a property (equivalent-to's other model) is not built."""
    unbuilt = Context(ctx.file, ctx.base_dir, model_section=lambda node, c, path: None)
    node = root.value.get("properties") if root.kind == "map" else None
    if node is None:
        raise ctx.error(root, "properties", "a spec needs 'properties'")
    items = top_schema().fields["properties"].schema.validate(node, unbuilt, "properties")
    return tuple(
        _property_spec(index, name, common, options, item.line)
        for index, (name, (common, options), item) in enumerate(items)
    )


def supported_engines(prop: Property, options: Any, domain: Domain | None = None) -> tuple[str, ...]:
    """The engines a property can run with these options (some options narrow them, e.g. scope) over ``domain``
    (a language-restricted strings domain keeps the engines that honour it: ``engines.for_domain``)."""
    return for_domain(prop.engines_for(options), domain)


def _check_language(
    prop: Property,
    engines: tuple[str, ...],
    engine: str | None,
    domain: Domain | None,
    root: Node,
    node: Node,
    where: str,
    ctx: Context,
) -> None:
    """A domain restricted to a language is refused, at its ``language`` key, by a property or engine that would
    read it as every string (never run over Σ^n)."""
    if not isinstance(domain, StringDomain) or domain.language is None:
        return
    strings = root.value["domain"].value["strings"]
    at = strings.value.get("language", strings)
    if not prop.language_domains:
        honouring = [name for name in property_names() if load_property(name).language_domains]
        raise ctx.error(
            at,
            "domain.strings.language",
            f"property {prop.name!r} does not support a domain restricted to a language",
            f"properties that do: {', '.join(honouring)}; or drop 'language' to check every string",
        )
    if not engines:
        raise ctx.error(
            at,
            "domain.strings.language",
            f"no engine of {prop.name!r} with these options honours a domain restricted to a language",
            "engines that do: "
            + ", ".join(n for n in engine_names() if load_engine(n).language_domains)
            + " (lengths: all needs the counting engine, which reads every string)",
        )
    if engine is not None and engine != "auto" and engine not in engines:
        raise ctx.error(
            locate(node.value[prop.name] if node.kind == "map" else node, "engine"),
            f"{where}.engine",
            f"engine {engine!r} would check every string, not the words of {domain.language.name}",
            f"with a language domain use one of {', '.join(('auto',) + engines)}",
        )


def _check_model_in_arithmetic(model: Model, arith: Arithmetic, node: Node, ctx: Context) -> None:
    if isinstance(arith, Exact):
        for where, _ in model.norms():
            raise ctx.error(
                node.find(where),
                f"model.{where}",
                "LayerNorm divides by a square root, which is not exactly representable in exact arithmetic",
                "use arithmetic: fixed (an integer square root, docs/semantics.md)",
            )
        for layer, head_index, head in model.heads():
            if head.scoring == "softmax":
                where = f"layers[{layer}].attention.heads[{head_index}].scoring"
                raise ctx.error(
                    node.find(where),
                    f"model.{where}",
                    "softmax is not exactly representable in exact arithmetic",
                    "use arithmetic: fixed (an exp table, docs/semantics.md), or hardmax/uniform scoring",
                )
            if head.positional == "rope" and head.scoring != "uniform":
                where = f"layers[{layer}].attention.heads[{head_index}].positional"
                raise ctx.error(
                    node.find(where),
                    f"model.{where}",
                    "RoPE rotates by cos and sin of θ·p, which are irrational: exact arithmetic cannot represent them",
                    "use arithmetic: fixed (rotation tables rounded to the grid, docs/semantics.md 'RoPE')",
                )
        return
    for name, value in model.parameters():
        if name.startswith("readout["):
            continue  # the readout is an exact measurement of the stream, not a stored value (docs/semantics.md)
        if not arith.representable(value):
            reason = (
                f"is not a multiple of 2^-{arith.frac}"
                if (value * arith.scale).denominator != 1
                else f"is outside the {arith.bits}-bit range [{arith.min_value}, {arith.max_value}]"
            )
            raise ctx.error(
                node.find(name),
                f"model.{name}",
                f"weight {value} {reason}",
                "fixed arithmetic needs every weight on its grid; quantize the weights or raise frac/bits",
            )

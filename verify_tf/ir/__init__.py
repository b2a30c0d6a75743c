"""The model IR: plain, immutable data describing a transformer with exact (rational) weights.

No solver, no torch, no numpy in here. Every engine reads this structure; builders (inline spec weights,
weight files, seeded random models, built-in constructions, the C-RASP compiler) produce it.

Shapes follow the papers' column convention: a model of width ``d`` maps a sequence of ``n`` token
vectors z_1..z_n in Q^d to n vectors. Matrices are tuples of rows.

Attention (per head h, query position i, key position j):

    q_i = W_Q z_i + b_Q        k_j = W_K z_j + b_K        v_j = W_V z_j + b_V
    q_i, k_j <- R(θ·i) q_i, R(θ·j) k_j               (rope only: pairs rotated by the stream position)
    s_ij = q_i . k_j + B[j - i]                       (B: rpe / urpe table, or ALiBi's slope · distance)
    a_i  = normalise(s_i, scoring, mask)              (hardmax | softmax | uniform; causal: j <= i)
    a'_ij = a_ij * C[j - i]                           (urpe only; no renormalisation)
    head_i = sum_j a'_ij v_j
    attention output o_i = sum_h W_O^h head^h_i + b_O,  then z_i <- z_i + o_i (residual)

Feed-forward: z_i <- z_i + W2 act(W1 z_i + b1) + b2, act = relu or I-BERT's integer polynomial i-gelu.
LayerNorm (optional per sublayer, pre-LN ``norm_first`` or post-LN, and a final norm after the last block):
n_c = (z_c - mean) / sqrt(var + eps), then gamma_c n_c + beta_c. Readout: q_i = u . z_i.
The exact rounding rules per arithmetic mode are in docs/semantics.md and verify_tf/semantics/.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

Vector = tuple[Fraction, ...]
Matrix = tuple[Vector, ...]

Scoring = Literal["hardmax", "softmax", "uniform"]
Positional = Literal["standard", "rpe", "urpe", "rope", "alibi"]
SCORINGS: tuple[str, ...] = ("hardmax", "softmax", "uniform")
POSITIONALS: tuple[str, ...] = ("standard", "rpe", "urpe", "rope", "alibi")
ROPE_PAIRINGS: tuple[str, ...] = ("half", "interleaved")
ALIBI_DISTANCES: tuple[str, ...] = ("causal", "symmetric")
FREQUENCY_KINDS: tuple[str, ...] = ("radians", "turns", "power")
ACTIVATIONS: tuple[str, ...] = ("relu", "i-gelu")
DEFAULT_LAYERNORM_EPS = Fraction(1, 100000)  # torch.nn.LayerNorm's eps=1e-05, read as the decimal it is written as


def vector(values: Sequence[Fraction | int | str]) -> Vector:
    return tuple(Fraction(v) for v in values)


def matrix(rows: Sequence[Sequence[Fraction | int | str]]) -> Matrix:
    return tuple(vector(row) for row in rows)


def zeros(n: int) -> Vector:
    return tuple(Fraction(0) for _ in range(n))


def shape(m: Matrix) -> tuple[int, int]:
    return (len(m), len(m[0]) if m else 0)


@dataclass(frozen=True)
class RelativeTable:
    """A table indexed by the relative offset j - i, covering offsets -radius..radius.

    Offsets beyond the radius use the nearest end of the table (clipping, as in T5/Shaw-style RPE).
    ``values[k]`` is the entry for offset ``k - radius``.
    """

    values: Vector

    def __post_init__(self) -> None:
        if len(self.values) % 2 != 1:
            raise ValueError("a relative table needs an odd number of entries (offsets -r..r)")

    @property
    def radius(self) -> int:
        return len(self.values) // 2

    def at(self, offset: int) -> Fraction:
        r = self.radius
        return self.values[max(-r, min(r, offset)) + r]

    @staticmethod
    def constant(value: Fraction, radius: int = 0) -> RelativeTable:
        return RelativeTable(tuple(Fraction(value) for _ in range(2 * radius + 1)))


@dataclass(frozen=True)
class Frequency:
    """One rotary frequency θ, in radians per position, written exactly:

    * ``radians``: θ = ``value`` (a rational number of radians);
    * ``turns``: θ = 2π·``value`` (a rational fraction of a full turn: θ = 2π/m repeats every m positions);
    * ``power``: θ = ``value`` ** (−``exponent``) (RoPE's standard θ_k = base^(−2k/d): value = base,
      exponent = 2k/d).

    θ itself is irrational in the last two cases; the rotation tables (``semantics.rotary``) are derived from
    this exact description, never from a float.
    """

    kind: str
    value: Fraction
    exponent: Fraction = Fraction(0)

    def __post_init__(self) -> None:
        if self.kind not in FREQUENCY_KINDS:
            raise ValueError(f"frequency kind must be one of {FREQUENCY_KINDS}, got {self.kind!r}")
        if self.kind == "power" and self.value <= 0:
            raise ValueError(f"a power frequency needs a positive base, got {self.value}")

    def describe(self) -> str:
        if self.kind == "radians":
            return f"{self.value} rad"
        if self.kind == "turns":
            return f"2π·{self.value} rad"
        return "1 rad" if self.exponent == 0 else f"{self.value}^(-{self.exponent}) rad"


@dataclass(frozen=True)
class Rotary:
    """RoPE (Su et al. 2021) of one head: query and key coordinates in pairs, pair k rotated by θ_k·p at stream
    position p (docs/semantics.md, "RoPE").

    ``pairing``: ``half`` pairs coordinate k with k + d/2 (GPT-NeoX, Hugging Face Llama's rotate_half);
    ``interleaved`` pairs 2k with 2k + 1 (the RoFormer paper, GPT-J).
    """

    frequencies: tuple[Frequency, ...]
    pairing: str = "half"

    def __post_init__(self) -> None:
        if self.pairing not in ROPE_PAIRINGS:
            raise ValueError(f"rope pairing must be one of {ROPE_PAIRINGS}, got {self.pairing!r}")

    @staticmethod
    def standard(key_dim: int, base: Fraction | int = 10000, pairing: str = "half") -> Rotary:
        """θ_k = base^(−2k/d) for k = 0 .. d/2 − 1 (d = the head's key dimension), as Llama and GPT-NeoX."""
        if key_dim % 2:
            raise ValueError(f"RoPE needs an even key dimension, got {key_dim}")
        base = Fraction(base)
        return Rotary(tuple(Frequency("power", base, Fraction(2 * k, key_dim)) for k in range(key_dim // 2)), pairing)

    def pairs(self, key_dim: int) -> tuple[tuple[int, int], ...]:
        """The coordinate pairs (a, b) rotated together, pair k by frequency k."""
        half = key_dim // 2
        if self.pairing == "half":
            return tuple((k, k + half) for k in range(half))
        return tuple((2 * k, 2 * k + 1) for k in range(half))


def alibi_slopes(heads: int) -> tuple[Fraction, ...]:
    """Press, Smith & Lewis's (ALiBi, ICLR 2022) standard slopes for ``heads`` heads, exactly.

    For n a power of two: 2^(−8h/n), h = 1..n. Otherwise the slopes of the largest power of two m < n, then
    every other slope of 2m (their code's ``get_slopes``). They are rational only when every exponent is an
    integer, i.e. for at most 8 heads; beyond that they are irrational, and explicit slopes are needed.
    """
    if heads < 1:
        raise ValueError("ALiBi needs at least one head")

    def power_of_two(n: int) -> list[Fraction]:
        exponents = [Fraction(8 * h, n) for h in range(1, n + 1)]
        if any(e.denominator != 1 for e in exponents):
            raise ValueError(
                f"the standard ALiBi slopes for {heads} heads are irrational (2^(-{exponents[0]}) ...); "
                "give explicit slopes"
            )
        return [Fraction(1, 2 ** int(e)) for e in exponents]

    if heads & (heads - 1) == 0:
        return tuple(power_of_two(heads))
    closest = 1 << (heads.bit_length() - 1)
    return tuple(power_of_two(closest) + list(alibi_slopes(2 * closest))[0::2][: heads - closest])


@dataclass(frozen=True)
class Alibi:
    """ALiBi (Press et al.) of one head: slope·(j − i) added to the score (``causal`` distance; with a causal
    mask every allowed key has j ≤ i, so the bias is −slope·(i − j)), or −slope·|i − j| (``symmetric``, for
    heads that see both sides)."""

    slope: Fraction
    distance: str = "causal"

    def __post_init__(self) -> None:
        if self.distance not in ALIBI_DISTANCES:
            raise ValueError(f"alibi distance must be one of {ALIBI_DISTANCES}, got {self.distance!r}")

    def bias(self, offset: int) -> Fraction:
        """The score bias for key offset j − i."""
        return self.slope * offset if self.distance == "causal" else -self.slope * abs(offset)


@dataclass(frozen=True)
class Head:
    query: Matrix
    key: Matrix
    value: Matrix
    output: Matrix  # d x v: maps this head's value vectors back to the residual stream
    query_bias: Vector
    key_bias: Vector
    value_bias: Vector
    scoring: str = "softmax"
    causal: bool = False
    positional: str = "standard"
    rpe_bias: RelativeTable | None = None  # rpe and urpe: B[j - i] added to the logits
    urpe_c: RelativeTable | None = None  # urpe: C[j - i] multiplied into the normalised weights
    rope: Rotary | None = None  # rope: q and k rotated by the stream position before the score
    alibi: Alibi | None = None  # alibi: slope times the distance added to the logits

    @property
    def key_dim(self) -> int:
        return len(self.query)

    @property
    def value_dim(self) -> int:
        return len(self.value)

    @property
    def has_score_bias(self) -> bool:
        """True when a bias depending on j − i enters the scores (an RPE table or ALiBi)."""
        if self.positional == "alibi":
            return self.alibi is not None
        return self.positional in ("rpe", "urpe") and self.rpe_bias is not None

    def describe_positions(self) -> str:
        """How this head sees positions, in a few words (trace titles, reports)."""
        mask = "causal" if self.causal else "bidirectional"
        if self.positional == "rope" and self.rope is not None:
            frequencies = ", ".join(f.describe() for f in self.rope.frequencies)
            return f"{mask}, RoPE ({self.rope.pairing} pairs; θ = {frequencies})"
        if self.positional == "alibi" and self.alibi is not None:
            return f"{mask}, ALiBi (slope {self.alibi.slope}, {self.alibi.distance} distance)"
        if self.positional in ("rpe", "urpe"):
            return f"{mask}, {self.positional.upper()} tables"
        return mask

    def relative_bias(self, offset: int) -> Fraction:
        """The score bias for key offset j − i: the RPE table entry, or ALiBi's slope · distance."""
        if self.positional == "alibi" and self.alibi is not None:
            return self.alibi.bias(offset)
        if self.positional not in ("rpe", "urpe") or self.rpe_bias is None:
            return Fraction(0)
        return self.rpe_bias.at(offset)

    def relative_scale(self, offset: int) -> Fraction:
        if self.positional != "urpe" or self.urpe_c is None:
            return Fraction(1)
        return self.urpe_c.at(offset)


@dataclass(frozen=True)
class LayerNorm:
    """torch.nn.LayerNorm over the d coordinates of one position: (z - mean) / sqrt(var + eps) * gamma + beta.

    ``eps`` is an exact rational constant inside the square root (never a stored value, so it need not lie on
    the fixed-point grid); the variance is the biased one, as torch computes it. docs/semantics.md defines the
    fixed-point evaluation (integer square root, one rounded division).
    """

    gamma: Vector
    beta: Vector
    eps: Fraction = DEFAULT_LAYERNORM_EPS


@dataclass(frozen=True)
class AttentionLayer:
    heads: tuple[Head, ...]
    output_bias: Vector
    residual: bool = True
    norm: LayerNorm | None = None
    norm_first: bool = False  # True: z + attn(LN(z)) (pre-LN); False: LN(z + attn(z)) (post-LN, torch's default)


@dataclass(frozen=True)
class FeedForward:
    w1: Matrix  # r x d
    b1: Vector
    w2: Matrix  # d x r
    b2: Vector
    residual: bool = True
    activation: str = "relu"  # relu | i-gelu
    norm: LayerNorm | None = None
    norm_first: bool = False

    @property
    def width(self) -> int:
        return len(self.w1)


@dataclass(frozen=True)
class Block:
    attention: AttentionLayer | None = None
    feed_forward: FeedForward | None = None


@dataclass(frozen=True)
class GridTokens:
    """Continuous tokens: each token is a vector in Q^dim fed directly into the residual stream."""

    dim: int


@dataclass(frozen=True)
class AlphabetTokens:
    """Discrete tokens: symbol -> row of ``embedding``. ``bos`` (if set) is prepended to every input."""

    symbols: tuple[str, ...]
    embedding: Matrix  # len(symbols) x d
    bos: str | None = None
    bos_embedding: Vector | None = None

    def embed(self, symbol: str) -> Vector:
        if symbol == self.bos and self.bos_embedding is not None:
            return self.bos_embedding
        return self.embedding[self.symbols.index(symbol)]


@dataclass(frozen=True)
class Quantization:
    """How an importer rounded a float model's weights onto a fixed-point grid (docs/semantics.md, "Readings"):
    the format, how many weights it rounded, the largest rounding error (exact; for a weight folded with an
    irrational factor such as torch's 1/sqrt(d_head), an exact upper bound within 2^-60 of it) and where, and the
    largest stored weight with the fewest bits whose range holds every rounded weight at this ``frac``."""

    bits: int
    frac: int
    weights: int
    largest_error: Fraction
    largest_error_at: str
    error_exact: bool  # False: largest_error is the exact upper bound of an irrational error
    largest_weight: Fraction
    largest_weight_at: str
    bits_needed: int

    def describe(self) -> str:
        """One line for the notes, the verdict's explanation and the JUnit report."""
        error = f"{'' if self.error_exact else '<= '}{float(self.largest_error):.6g} = {self.largest_error}"
        return (
            f"quantize {self.bits}.{self.frac}: largest rounding error {error} at {self.largest_error_at} "
            f"(rounded {self.weights} weights to multiples of 2^-{self.frac}, nearest, ties to even: at most "
            f"2^-{self.frac + 1} each); the rounded weights need {self.bits_needed} of the {self.bits} bits "
            f"(largest |weight| {float(self.largest_weight):.6g} at {self.largest_weight_at})"
        )

    def to_json(self) -> dict[str, object]:
        """Exact numbers as strings (as every verdict writes them), a float beside for reading."""
        return {
            "bits": self.bits,
            "frac": self.frac,
            "weights": self.weights,
            "largest_error": str(self.largest_error),
            "largest_error_float": float(self.largest_error),
            "largest_error_exact": self.error_exact,
            "largest_error_at": self.largest_error_at,
            "largest_weight": str(self.largest_weight),
            "largest_weight_at": self.largest_weight_at,
            "bits_needed": self.bits_needed,
        }


Tokens = GridTokens | AlphabetTokens
Token = Vector | str


@dataclass(frozen=True)
class Model:
    tokens: Tokens
    dim: int
    blocks: tuple[Block, ...]
    readout: Vector
    positional_encoding: Matrix | None = None  # max_len x d, absolute positions 0..max_len-1
    final_norm: LayerNorm | None = None  # applied to the stream after the last block (nn.TransformerEncoder's norm)
    name: str = "model"
    notes: tuple[str, ...] = field(default=(), compare=False)
    # The reading (docs/semantics.md, "Readings"): how the source's model runs when this IR under the spec's
    # arithmetic is only a reading of it (a tracr model runs in float32; a trained model in float32 before it
    # was quantized); empty when the IR is the model itself. ``float_source``: the source asks the properties
    # that can check the float model as it runs to do so (tracr's ``attention: float``, the default), and names
    # that float model (the sha256 of the export's weights: a property checks it is the one it reads).
    runs_as: str = ""
    reading: str = ""  # what this IR computes of it, when runs_as is set ("hardmax, tracr's intended computation")
    float_source: str = ""
    # an imported float model's weight rounding (the torch importer's ``quantize``): every verdict about the model
    # carries it (``Verdict.quantization``); not part of the model's identity (a function of the source and format)
    quantization: Quantization | None = field(default=None, compare=False)
    # the float model itself, where a property reads it from the model rather than from its own options (a torch
    # import under ``architecture: {reading: float}``: ``builders.torch_float.TorchFloatModel``); named by
    # ``float_source``, so not part of the identity, and not written to model files
    float_model: Any = field(default=None, compare=False, repr=False)

    @property
    def float_reading(self) -> bool:
        return bool(self.float_source)

    @property
    def max_length(self) -> int | None:
        return None if self.positional_encoding is None else len(self.positional_encoding)

    def heads(self) -> Iterator[tuple[int, int, Head]]:
        for layer_index, block in enumerate(self.blocks):
            if block.attention is not None:
                for head_index, head in enumerate(block.attention.heads):
                    yield layer_index, head_index, head

    def norms(self) -> Iterator[tuple[str, LayerNorm]]:
        """Every LayerNorm with its parameter path prefix, e.g. ``layers[0].attention.norm``."""
        for index, block in enumerate(self.blocks):
            if block.attention is not None and block.attention.norm is not None:
                yield f"layers[{index}].attention.norm", block.attention.norm
            if block.feed_forward is not None and block.feed_forward.norm is not None:
                yield f"layers[{index}].feed-forward.norm", block.feed_forward.norm
        if self.final_norm is not None:
            yield "final-norm", self.final_norm

    @property
    def has_positions(self) -> bool:
        """True when anything in the model can tell positions apart (absolute PE, RPE, URPE, RoPE, ALiBi, causal
        masks)."""
        if self.positional_encoding is not None:
            return True
        return any(h.positional != "standard" or h.causal for _, _, h in self.heads())

    def prepare_input(self, tokens: Sequence[Token]) -> tuple[Token, ...]:
        """The sequence the network actually sees: BOS prepended for alphabet models that declare one."""
        if isinstance(self.tokens, AlphabetTokens) and self.tokens.bos is not None:
            return (self.tokens.bos, *tokens)
        return tuple(tokens)

    def parameters(self) -> Iterator[tuple[str, Fraction]]:
        """Every weight with a readable path, e.g. ``layers[0].attention.heads[1].query[0][2]``."""
        if isinstance(self.tokens, AlphabetTokens):
            yield from _matrix_items("embedding", self.tokens.embedding)
            if self.tokens.bos_embedding is not None:
                yield from _vector_items("bos-embedding", self.tokens.bos_embedding)
        if self.positional_encoding is not None:
            yield from _matrix_items("positional-encoding", self.positional_encoding)
        for index, block in enumerate(self.blocks):
            prefix = f"layers[{index}]"
            if block.attention is not None:
                for h, head in enumerate(block.attention.heads):
                    hp = f"{prefix}.attention.heads[{h}]"
                    for name in ("query", "key", "value", "output"):
                        yield from _matrix_items(f"{hp}.{name}", getattr(head, name))
                    for name in ("query_bias", "key_bias", "value_bias"):
                        yield from _vector_items(f"{hp}.{name.replace('_', '-')}", getattr(head, name))
                    if head.rpe_bias is not None and head.positional != "standard":
                        yield from _vector_items(f"{hp}.rpe-bias", head.rpe_bias.values)
                    if head.urpe_c is not None and head.positional == "urpe":
                        yield from _vector_items(f"{hp}.urpe-c", head.urpe_c.values)
                    if head.alibi is not None and head.positional == "alibi":
                        yield f"{hp}.alibi-slope", head.alibi.slope
                yield from _vector_items(f"{prefix}.attention.output-bias", block.attention.output_bias)
                yield from _norm_items(f"{prefix}.attention.norm", block.attention.norm)
            if block.feed_forward is not None:
                ff = block.feed_forward
                for name in ("w1", "b1", "w2", "b2"):
                    items = _matrix_items if name.startswith("w") else _vector_items
                    yield from items(f"{prefix}.feed-forward.{name}", getattr(ff, name))
                yield from _norm_items(f"{prefix}.feed-forward.norm", ff.norm)
        yield from _norm_items("final-norm", self.final_norm)
        yield from _vector_items("readout", self.readout)


def _rope_problems(path: str, head: Head) -> list[str]:
    if head.positional != "rope":
        return (
            [f"{path}.rope: positional {head.positional} does not rotate (set positional: rope)"] if head.rope else []
        )
    if head.rope is None:
        return [f"{path}: positional rope needs rope frequencies (e.g. rope: {{base: 10000}})"]
    if head.key_dim % 2:
        return [f"{path}.rope: RoPE rotates pairs of coordinates; the key dimension {head.key_dim} is odd"]
    if len(head.rope.frequencies) != head.key_dim // 2:
        return [
            f"{path}.rope: {len(head.rope.frequencies)} frequencies for key dimension {head.key_dim} "
            f"(one per pair: {head.key_dim // 2})"
        ]
    return []


def _alibi_problems(path: str, head: Head) -> list[str]:
    if head.positional != "alibi":
        return (
            [f"{path}.alibi: positional {head.positional} has no ALiBi slope (set positional: alibi)"]
            if head.alibi
            else []
        )
    if head.alibi is None:
        return [f"{path}: positional alibi needs a slope"]
    if head.alibi.slope < 0:
        return [f"{path}.alibi-slope: expected a slope >= 0, got {head.alibi.slope}"]
    return []


def _vector_items(path: str, values: Vector) -> Iterator[tuple[str, Fraction]]:
    for i, v in enumerate(values):
        yield f"{path}[{i}]", v


def _norm_items(path: str, norm: LayerNorm | None) -> Iterator[tuple[str, Fraction]]:
    """gamma and beta are stored weights; eps is a constant of the formula (not listed, never on a grid)."""
    if norm is not None:
        yield from _vector_items(f"{path}.gamma", norm.gamma)
        yield from _vector_items(f"{path}.beta", norm.beta)


def _matrix_items(path: str, rows: Matrix) -> Iterator[tuple[str, Fraction]]:
    for r, row in enumerate(rows):
        for c, v in enumerate(row):
            yield f"{path}[{r}][{c}]", v


def validate_shapes(model: Model) -> list[str]:
    """Return human-readable shape problems (empty when the model is well formed)."""
    problems: list[str] = []
    d = model.dim

    def check_matrix(path: str, m: Matrix, rows: int | None, cols: int | None) -> None:
        if any(len(row) != len(m[0]) for row in m) if m else False:
            problems.append(f"{path}: rows have different lengths")
            return
        r, c = shape(m)
        if rows is not None and r != rows:
            problems.append(f"{path}: expected {rows} rows, got {r}")
        if cols is not None and m and c != cols:
            problems.append(f"{path}: expected {cols} columns, got {c}")

    def check_vector(path: str, v: Vector, length: int) -> None:
        if len(v) != length:
            problems.append(f"{path}: expected {length} entries, got {len(v)}")

    if isinstance(model.tokens, GridTokens) and model.tokens.dim != d:
        problems.append(f"tokens: grid token dimension {model.tokens.dim} differs from model width {d}")
    if isinstance(model.tokens, AlphabetTokens):
        check_matrix("embedding", model.tokens.embedding, len(model.tokens.symbols), d)
        if model.tokens.bos_embedding is not None:
            check_vector("bos-embedding", model.tokens.bos_embedding, d)
    if model.positional_encoding is not None:
        check_matrix("positional-encoding", model.positional_encoding, None, d)
    for index, block in enumerate(model.blocks):
        if block.attention is not None:
            for h, head in enumerate(block.attention.heads):
                p = f"layers[{index}].attention.heads[{h}]"
                k, v = head.key_dim, head.value_dim
                check_matrix(f"{p}.query", head.query, None, d)
                check_matrix(f"{p}.key", head.key, k, d)
                check_matrix(f"{p}.value", head.value, None, d)
                check_matrix(f"{p}.output", head.output, d, v)
                check_vector(f"{p}.query-bias", head.query_bias, k)
                check_vector(f"{p}.key-bias", head.key_bias, k)
                check_vector(f"{p}.value-bias", head.value_bias, v)
                if head.scoring not in SCORINGS:
                    problems.append(f"{p}.scoring: expected one of {SCORINGS}, got {head.scoring!r}")
                if head.positional not in POSITIONALS:
                    problems.append(f"{p}.positional: expected one of {POSITIONALS}, got {head.positional!r}")
                if head.positional in ("rpe", "urpe") and head.rpe_bias is None:
                    problems.append(f"{p}: positional {head.positional} needs rpe-bias")
                if head.positional == "urpe" and head.urpe_c is None:
                    problems.append(f"{p}: positional urpe needs urpe-c")
                if head.positional == "standard" and head.rpe_bias is not None:
                    problems.append(
                        f"{p}.rpe-bias: positional standard does not use an RPE bias "
                        "(set positional: rpe or urpe, or drop the table)"
                    )
                if head.positional != "urpe" and head.urpe_c is not None:
                    problems.append(
                        f"{p}.urpe-c: positional {head.positional} does not use a URPE table "
                        "(set positional: urpe, or drop the table)"
                    )
                if head.positional in ("rope", "alibi") and head.rpe_bias is not None:
                    problems.append(
                        f"{p}.rpe-bias: positional {head.positional} does not use an RPE bias "
                        "(set positional: rpe or urpe, or drop the table)"
                    )
                problems += _rope_problems(p, head)
                problems += _alibi_problems(p, head)
            check_vector(f"layers[{index}].attention.output-bias", block.attention.output_bias, d)
        if block.feed_forward is not None:
            ff = block.feed_forward
            p = f"layers[{index}].feed-forward"
            check_matrix(f"{p}.w1", ff.w1, None, d)
            check_vector(f"{p}.b1", ff.b1, ff.width)
            check_matrix(f"{p}.w2", ff.w2, d, ff.width)
            check_vector(f"{p}.b2", ff.b2, d)
            if ff.activation not in ACTIVATIONS:
                problems.append(f"{p}.activation: expected one of {ACTIVATIONS}, got {ff.activation!r}")
    for path, norm in model.norms():
        check_vector(f"{path}.gamma", norm.gamma, d)
        check_vector(f"{path}.beta", norm.beta, d)
        if norm.eps < 0:
            problems.append(f"{path}.eps: expected eps >= 0, got {norm.eps}")
    check_vector("readout", model.readout, d)
    return problems

"""The ``domain:`` section: grid tokens or strings (optionally only the words of a regular language or of a C-RASP
program), checked against the model and the arithmetic, with every size refused by formula before anything is
listed (docs/cli.md, "Input limits")."""

from __future__ import annotations

from fractions import Fraction

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
from ..ir import AlphabetTokens, GridTokens, Model
from ..numbers import MAX_DIGITS, TooLarge, check_size
from ..regular import Language, RegexError, RegexLanguage
from ..schema.dsl import Boolean, Context, Either, Field, FilePath, Integer, ListOf, Number, Obj, String
from ..schema.yamlnodes import Node
from ..semantics import Arithmetic
from ..userfiles import around

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
        # imported here: the counter machine imports z3, and the C-RASP package is no small import, which a spec
        # without a C-RASP language never needs
        from ..crasp.ast import CraspError
        from ..crasp.parser import load_program
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
            f"{error.message} (column {error.column} of {around(regex, error.column - 1)})",
            error.hint or None,
        ) from None


def domain_of(value: dict, model: Model, arith: Arithmetic, ctx: Context) -> Domain:
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
        strings = StringDomain(alphabet, s["min-length"], s["max-length"], _language(s, alphabet, ctx))
        if strings.language is not None and strings.size() == 0:  # a proof over no input would be vacuous
            key = "crasp" if s["language"]["crasp"] is not None else "regex"
            raise ctx.error(
                s["language"]["__node__"].value.get(key, s["__node__"]),
                f"domain.strings.language.{key}",
                f"no word of {strings.language.name} has a length in {s['min-length']}..{s['max-length']}",
                f"widen min-length/max-length, or check the {'program' if key == 'crasp' else 'regex'}",
            )
        domain: Domain = strings
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

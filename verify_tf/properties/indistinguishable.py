"""Property ``indistinguishable``: two words that no causal transformer without positional information of depth
k tells apart, hence a depth lower bound for a language.

The class: every causal transformer with at most ``depth`` attention layers, no positional information (no
absolute encoding, no RPE or URPE), any width, any number of heads and of feed-forward sublayers, any weights,
and every scoring the spec's arithmetic defines (uniform, hardmax, and softmax in fixed point with its
attention rounding). The spec's model must belong to it; it stands for the class and is replayed.

The argument (verify_tf/classes.py, depth signatures): the column at position i after l attention layers is a
function of the depth-l signature of i, so words with equal depth-k signatures at their last position get the
same output there from every member. The engine checks both halves: it computes the signatures exactly, and
asks z3 (engines/architecture/symmetry.py) that every head of the class reads its keys as a multiset.

Options: ``pair: [u, v]`` checks two words; ``language: FILE.cr`` (a C-RASP program) searches the spec's strings
domain, shortest first, for u in L and v not in L with equal signatures. With both, the pair is checked and its
memberships reported. Proved: u and v are indistinguishable at depth k (and with a language separating them,
no member recognises it, reading acceptance at the last position). Refuted: the spec's own model gives them
different outputs (only possible when their signatures differ). Unknown: the signatures differ, or the search
found no pair (the verdict says how many distinct signatures the words had).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..classes import Signatures, scorings
from ..contract import (
    ArchitectureClass,
    ArchitectureRequest,
    Conclusion,
    LayerInduction,
    PairFound,
    PairSearch,
    SymmetryCheck,
    Task,
)
from ..crasp.ast import Program
from ..crasp.interpreter import accepts
from ..crasp.parser import load_program
from ..domain import Domain, StringDomain
from ..ir import AlphabetTokens, Model
from ..numbers import fmt, fmt_vector
from ..schema.dsl import Field, Integer, ListOf, Obj, String
from ..schema.errors import OptionError
from ..semantics import Arithmetic, evaluate
from ..verdict import ERROR, PROVED, REFUTED, UNKNOWN
from ..work import Deadline
from .base import bos_offset, require
from .crasp_equivalence import ProgramFile


@dataclass(frozen=True)
class Options:
    depth: int
    pair: tuple[str, str] | None = None
    language: Path | None = None


def _options(values: dict[str, Any]) -> Options:
    pair = values.get("pair")
    if pair is None and values.get("language") is None:
        raise OptionError(
            "",
            "indistinguishable needs 'pair', 'language' or both",
            "e.g. {depth: 1, language: ../examples/crasp/L2.cr}",
        )
    return Options(values["depth"], tuple(pair) if pair is not None else None, values.get("language"))


@lru_cache(maxsize=16)
def _program(path: Path) -> Program:
    return load_program(path)


def attention_layers(model: Model) -> int:
    return sum(1 for block in model.blocks if block.attention is not None)


def class_text(depth: int, arithmetic: Arithmetic) -> str:
    return (
        f"every causal transformer without positional information of depth <= {depth} (any width, heads, "
        f"feed-forward sublayers and weights; {', '.join(scorings(arithmetic))} heads; {arithmetic.describe()})"
    )


class Indistinguishable(ArchitectureClass):
    name = "indistinguishable"
    summary = (
        "no causal transformer without positional information of depth k tells two words apart "
        "(depth signatures; a pair u in L, v not in L is a depth lower bound for L)"
    )
    options = Obj(
        {
            "depth": Field(Integer("attention layers of the class", minimum=0, maximum=16), required=True),
            "pair": Field(ListOf(String("a word: one letter per character"), "two words [u, v]", length=2)),
            "language": Field(
                ProgramFile("a C-RASP program (.cr) defining L: search the domain for u in L, v not in L")
            ),
        },
        check=_options,
    )
    needs_domain = False  # a pair needs none; a language search needs a strings domain (fit says so)

    def language_file(self, task: Task) -> Path | None:
        options: Options = task.options
        return options.language

    def fit(self, model: Model, arithmetic: Arithmetic, domain: Domain | None, options: Options) -> None:
        require(
            isinstance(model.tokens, AlphabetTokens),
            "",
            "indistinguishable needs an alphabet model",
            "its words are strings over the model's alphabet",
        )
        require(
            model.positional_encoding is None and all(h.positional == "standard" for _, _, h in model.heads()),
            "",
            "the class has no positional information: this model has a positional encoding or RPE, URPE, RoPE or "
            "ALiBi heads (depth signatures with windows and phases are not built: docs/crasp.md, 'Depth lower "
            "bounds')",
            "use a model without positional information (it stands for the class)",
        )
        require(
            all(h.causal for _, _, h in model.heads()),
            "",
            "the class is causal: this model has a head without a causal mask",
        )
        require(
            attention_layers(model) <= options.depth,
            "depth",
            f"this model has {attention_layers(model)} attention layers, more than depth {options.depth}",
            "the spec's model must belong to the class",
        )
        assert isinstance(model.tokens, AlphabetTokens)  # required above
        symbols = set(model.tokens.symbols)
        for word in options.pair or ():
            bad = [c for c in word if c not in symbols]
            require(not bad, "pair", f"letter {bad[0]!r} of {word!r} is not in the model's alphabet" if bad else "")
        if options.language is not None:
            require(
                isinstance(domain, StringDomain),
                "language",
                "a language search needs a strings domain",
                "e.g. domain: {strings: {alphabet: [a, b], max-length: 8}}",
            )
            program = _program(options.language)
            foreign = [
                s for s in (domain.alphabet if isinstance(domain, StringDomain) else ()) if s not in program.alphabet
            ]
            require(
                not foreign,
                "language",
                f"domain symbol {foreign[0]!r} is not in the program's alphabet" if foreign else "",
            )

    # -- architecture engine: signatures first (or a search for a pair), then the symmetry queries
    def architecture_plan(self, task: Task) -> SymmetryCheck | PairSearch | Conclusion:
        options: Options = task.options
        bos = bool(bos_offset(task.model))
        if options.pair is None:
            program = _program(options.language)
            return PairSearch(options.depth, bos, lambda word: accepts(program, word))
        u, v = options.pair
        signatures = Signatures(options.depth, bos)
        if signatures.last(u) == signatures.last(v):
            return SymmetryCheck(self.keys(options, (u, v), bos), (u, v))
        own = self.separation(task, u, v)
        if own is not None:
            return Conclusion(
                REFUTED,
                "this model",
                f"this model, a member of the class, tells {u} from {v}: " + own["summary"],
                own,
                {"pair": [u, v]},
            )
        return Conclusion(
            UNKNOWN,
            "signatures",
            f"{u} and {v} have different depth-{options.depth} "
            "signatures at their last position: the method cannot show that no member tells "
            "them apart (and this model does not)",
            tried=[f"depth-{options.depth} signatures"],
        )

    def conclude(
        self, task: Task, request: ArchitectureRequest, answer: Any, deadline: Deadline
    ) -> SymmetryCheck | Conclusion:
        options: Options = task.options
        if isinstance(request, SymmetryCheck):
            return self._after_symmetry(task, request, answer)
        assert isinstance(answer, PairFound)
        if answer.pair is None:
            injective = answer.distinct == answer.words
            return Conclusion(
                UNKNOWN,
                "signature search",
                f"no u in L, v not in L with equal depth-{options.depth} "
                f"signatures among the {answer.words} words of {task.given_domain().describe()}: {answer.distinct} "
                "distinct signatures"
                + (
                    " (one per word: at this depth the signature determines the word, so the method cannot go further)"
                    if injective
                    else ""
                ),
                statistics={"words": answer.words, "distinct_signatures": answer.distinct},
                tried=[f"depth-{options.depth} signatures", f"search over {answer.words} words"],
            )
        bos = bool(bos_offset(task.model))
        return SymmetryCheck(self.keys(options, answer.pair, bos), answer.pair, {"words_searched": answer.words})

    @staticmethod
    def keys(options: Options, pair: tuple[str, str], bos: bool) -> int:
        """The longest attention row the pair meets (0 without attention layers: nothing to check)."""
        return max(len(w) for w in pair) + int(bos) if options.depth > 0 else 0

    def separation(self, task: Task, u: str, v: str) -> dict[str, Any] | None:
        """The spec's model's last columns (and readouts) on u and v, as a witness when the columns differ."""
        first, second = (evaluate(task.model, task.arithmetic, tuple(w)) for w in (u, v))
        if first.output[-1] == second.output[-1]:
            return None
        readouts = (first.readout[-1], second.readout[-1])
        told = (
            f"readout {fmt(readouts[0])} on {u} and {fmt(readouts[1])} on {v}"
            if readouts[0] != readouts[1]
            else f"the same readout {fmt(readouts[0])}, but a readout vector telling the columns apart exists"
        )
        return {
            "input": list(u),
            "other": list(v),
            "readout": [str(q) for q in readouts],
            "columns": [[str(x) for x in first.output[-1]], [str(x) for x in second.output[-1]]],
            "summary": f"last columns {fmt_vector(first.output[-1])} on {u} and {fmt_vector(second.output[-1])} "
            f"on {v} ({told})",
        }

    def _after_symmetry(self, task: Task, request: SymmetryCheck, result: LayerInduction) -> Conclusion:
        options: Options = task.options
        u, v = request.pair
        stats: dict[str, Any] = {
            "pair": [u, v],
            "depth": options.depth,
            "class": class_text(options.depth, task.arithmetic),
            "symmetry_queries": len(result.steps),
            "symmetry_seconds": round(result.seconds, 3),
            **request.statistics,
        }
        if not result.proved:
            failed = "; ".join(f"{s.name}: {s.status}" + (f" ({s.note})" if s.note else "") for s in result.failing)
            return Conclusion(
                UNKNOWN,
                "signatures + symmetry",
                f"{u} and {v} have equal depth-{options.depth} signatures, but a symmetry query did not hold: {failed}",
                statistics=stats,
                tried=[f"symmetry queries: {failed}"],
            )
        if self.separation(task, u, v) is not None:  # contradicts the lemma: never report it as a proof
            return Conclusion(
                ERROR,
                "signatures + symmetry",
                f"internal inconsistency: this model tells {u} from "
                f"{v} although their signatures agree; please report it",
                statistics=stats,
            )
        memberships = ""
        if options.language is not None:
            program = _program(options.language)
            inside = [accepts(program, w) for w in (u, v)]
            stats["in_language"] = inside
            if inside[0] != inside[1]:
                memberships = (
                    f"; {u if inside[0] else v} is in {options.language.name} and "
                    f"{v if inside[0] else u} is not, so no member recognises it (acceptance read at the "
                    "last position)"
                )
        return Conclusion(
            PROVED,
            "signatures + symmetry",
            f"{u} and {v} get the same output at the last position "
            f"from {class_text(options.depth, task.arithmetic)}{memberships} ("
            + (
                f"{len(result.steps)} symmetry queries unsat)"
                if result.steps
                else "no attention layer: token-wise maps only)"
            ),
            statistics=stats,
        )


PROPERTY = Indistinguishable()

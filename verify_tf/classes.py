"""Architecture classes, as the architecture engine and its properties speak of them: a model's class in words,
the scorings a class of heads has under an arithmetic, and depth signatures.

Depth signatures: what a causal transformer without positional information can know at a position.

For a word w (BOS first when the model has one), define per position i

    sig_0(i)     = w_i
    sig_{l+1}(i) = ( sig_l(i), the multiset { sig_l(j) : j <= i } ).

Lemma (checked in two parts by the architecture engine): in every causal transformer without positional
information, the column at position i after l attention layers (with any feed-forward sublayers between them)
is a function of sig_l(i). Token-wise maps (embedding, feed-forward, residual, readout) keep "a function of
sig_l(i)"; a causal head's output at i is a function of its own column and of the multiset of the columns at
j <= i (``engines/architecture/symmetry.py`` checks this for every scoring of the semantics), which is a
function of sig_{l+1}(i).
So two words whose last positions have the same depth-k signature get the same output from every such model of
depth k, and no such model recognises a language containing one word but not the other.

Signatures are interned level by level into small integers (equal integers = equal signatures), shared across
all the words of one call so that words can be compared.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from .ir import AlphabetTokens, AttentionLayer, FeedForward, Head, Model
from .semantics import Arithmetic, Fixed


def describe_class(model: Model) -> str:
    """The architecture class in words (weights irrelevant)."""
    parts = []
    if isinstance(model.tokens, AlphabetTokens):
        parts.append(f"alphabet tokens, d = {model.dim}" + (", BOS" if model.tokens.bos is not None else ""))
    else:
        parts.append(f"grid tokens, d = {model.dim}")
    if model.positional_encoding is not None:
        parts.append(f"absolute PE ({len(model.positional_encoding)} positions)")
    for index, block in enumerate(model.blocks):
        kinds = []
        if block.attention is not None:
            heads = ", ".join(_head_kind(h) for h in block.attention.heads)
            kinds.append(
                f"attention ({heads})"
                + ("" if block.attention.residual else " without residual")
                + _norm_kind(block.attention)
            )
        if block.feed_forward is not None:
            ff = block.feed_forward
            kinds.append(
                f"feed-forward (width {ff.width}"
                + ("" if ff.activation == "relu" else f", {ff.activation}")
                + ")"
                + ("" if ff.residual else " without residual")
                + _norm_kind(ff)
            )
        parts.append(f"layer {index}: " + " + ".join(kinds or ["empty"]))
    if model.final_norm is not None:
        parts.append("final LayerNorm")
    return "; ".join(parts)


def _norm_kind(sublayer: AttentionLayer | FeedForward) -> str:
    """LayerNorm and i-GELU act on each column alone: token-wise maps, covered by the arbitrary functions above."""
    if sublayer.norm is None:
        return ""
    return " with pre-LN" if sublayer.norm_first else " with post-LN"


def _head_kind(head: Head) -> str:
    text = head.scoring + (" causal" if head.causal else "")
    if head.positional == "rpe":
        text += " RPE"
    elif head.positional == "urpe":
        radius = head.urpe_c.radius if head.urpe_c is not None else 0
        text += f" URPE (C radius {radius})"
    elif head.positional == "rope":
        text += " RoPE"
    elif head.positional == "alibi":
        text += f" ALiBi ({head.alibi.distance if head.alibi else 'causal'})"
    return text


def scorings(arithmetic: Arithmetic) -> tuple[str, ...]:
    """The scorings the semantics defines under ``arithmetic`` (softmax needs fixed point)."""
    return ("uniform", "hardmax", "softmax") if isinstance(arithmetic, Fixed) else ("uniform", "hardmax")


BOS = object()  # the BOS symbol's level-0 signature (never equal to a letter)


class Signatures:
    """Interned signatures of every position of the words it is given, up to ``depth``."""

    def __init__(self, depth: int, bos: bool) -> None:
        self.depth = depth
        self.bos = bos
        self._tables: list[dict[Any, int]] = [{} for _ in range(depth + 1)]

    def _intern(self, level: int, key: Any) -> int:
        table = self._tables[level]
        return table.setdefault(key, len(table))

    def of(self, word: Sequence[str]) -> list[int]:
        """sig_depth(i) of every stream position i of ``word`` (BOS at 0 when the class has one)."""
        symbols = ([BOS] if self.bos else []) + list(word)
        ids = [self._intern(0, s) for s in symbols]
        for level in range(1, self.depth + 1):
            seen: Counter[int] = Counter()
            next_ids = []
            for own in ids:
                seen[own] += 1
                next_ids.append(self._intern(level, (own, tuple(sorted(seen.items())))))
            ids = next_ids
        return ids

    def last(self, word: Sequence[str]) -> int:
        return self.of(word)[-1]

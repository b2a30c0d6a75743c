"""Depth signatures: what a causal transformer without positional information can know at a position.

For a word w (BOS first when the model has one), define per position i

    sig_0(i)     = w_i
    sig_{l+1}(i) = ( sig_l(i), the multiset { sig_l(j) : j <= i } ).

Lemma (checked in two parts by the architecture engine): in every causal transformer without positional
information, the column at position i after l attention layers (with any feed-forward sublayers between them)
is a function of sig_l(i). Token-wise maps (embedding, feed-forward, residual, readout) keep "a function of
sig_l(i)"; a causal head's output at i is a function of its own column and of the multiset of the columns at
j <= i (``symmetry.py`` checks this for every scoring of the semantics), which is a function of sig_{l+1}(i).
So two words whose last positions have the same depth-k signature get the same output from every such model of
depth k, and no such model recognises a language containing one word but not the other.

Signatures are interned level by level into small integers (equal integers = equal signatures), shared across
all the words of one call so that words can be compared.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

BOS = object()  # the BOS symbol's level-0 signature (never equal to a letter)


class Signatures:
    """Interned signatures of every position of the words it is given, up to ``depth``."""

    def __init__(self, depth: int, bos: bool) -> None:
        self.depth = depth
        self.bos = bos
        self._tables: list[dict] = [{} for _ in range(depth + 1)]

    def _intern(self, level: int, key) -> int:
        table = self._tables[level]
        return table.setdefault(key, len(table))

    def of(self, word: Sequence[str]) -> list[int]:
        """sig_depth(i) of every stream position i of ``word`` (BOS at 0 when the class has one)."""
        symbols = ([BOS] if self.bos else []) + list(word)
        ids = [self._intern(0, s) for s in symbols]
        for level in range(1, self.depth + 1):
            seen: Counter = Counter()
            next_ids = []
            for own in ids:
                seen[own] += 1
                next_ids.append(self._intern(level, (own, tuple(sorted(seen.items())))))
            ids = next_ids
        return ids

    def last(self, word: Sequence[str]) -> int:
        return self.of(word)[-1]


@dataclass(frozen=True)
class PairSearch:
    pair: tuple[str, str] | None  # (u in L, v not in L) with equal last-position signatures, or None
    words: int  # words looked at
    distinct: int  # distinct last-position signatures among them


def find_pair(
    words: Iterable[str], depth: int, bos: bool, accepts: Callable[[str], bool], tick: Callable[[], None] = lambda: None
) -> PairSearch:
    """The first pair of words (in ``words`` order) with the same depth-``depth`` signature at their last position
    and different memberships, as (the word in L, the word not in L): its later word is the least word that
    completes such a pair. Stops there; without a pair every word is looked at."""
    signatures = Signatures(depth, bos)
    first_seen: dict[tuple[int, bool], str] = {}
    count = 0
    found: tuple[str, str] | None = None
    for word in words:
        count += 1
        tick()
        key = signatures.last(word)
        member = accepts(word)
        other = first_seen.get((key, not member))
        if other is not None:
            found = (word, other) if member else (other, word)
            break
        first_seen.setdefault((key, member), word)
    distinct = len({key for key, _ in first_seen})
    return PairSearch(found, count, distinct)

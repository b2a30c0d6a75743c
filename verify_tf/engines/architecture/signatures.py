"""The architecture engine's search for a pair of words with equal depth signatures and different memberships
(``contract.PairSearch``; the signatures themselves are ``verify_tf.classes.Signatures``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ...classes import Signatures
from ...contract import PairFound


def find_pair(
    words: Iterable[str], depth: int, bos: bool, accepts: Callable[[str], bool], tick: Callable[[], None] = lambda: None
) -> PairFound:
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
    return PairFound(found, count, distinct)

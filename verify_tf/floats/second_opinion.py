"""Second opinions on a float witness: a library's own forward pass run beside verify-tf's enclosure.

A refutation under a float reading (a tracr model as compiled, a checkpoint or a torch model as it runs) is decided
by its enclosure: every float32 evaluation the error model allows lies outside the bound. When the library is
installed, its own forward pass (tracr's model in JAX, transformers, nanoGPT's forward in torch) is run on the
witness too, and the witness records what it gave: a second opinion, never the decision.

While a stored witness is re-confirmed (the proof cache), ``declined()`` is set and the enclosure alone decides,
with verify-tf's numpy mirror as the evaluation inside it: importing JAX and running tracr's model un-jitted took
8 s per cached refutation, importing torch and transformers for a checkpoint's first one about 7 CPU s (issue 39).
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

_DECLINED: contextvars.ContextVar[bool] = contextvars.ContextVar("second_opinions_declined", default=False)


def is_declined() -> bool:
    """True inside ``declined()``: the library replays report themselves unavailable."""
    return _DECLINED.get()


@contextmanager
def declined() -> Iterator[None]:
    """Within, no library's forward pass runs on a float witness: the enclosure and the mirror decide."""
    token = _DECLINED.set(True)
    try:
        yield
    finally:
        _DECLINED.reset(token)

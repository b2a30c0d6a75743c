"""Properties: one module each, declarative (definition, what to enumerate, the solver queries it asks),
discovered automatically.

A property module defines a ``Property`` subclass and ``PROPERTY = TheProperty()``. Dropping a new module into
this package is all it takes to make the property available in specs, in ``verify-tf schema`` and in
``verify-tf properties``; docs/architecture.md walks through one.
"""

from .base import Property, load, names, registry

__all__ = ["Property", "load", "names", "registry"]

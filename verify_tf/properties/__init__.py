"""Properties: one module each (definition, per-engine queries, witness replay), discovered automatically.

A property module defines ``PROPERTY = PropertyDef(...)``. Dropping a new module into this package is all
it takes to make the property available in specs, in ``verify-tf schema`` and in ``verify-tf properties``.
"""

from .base import CheckRequest, PropertyDef, registry

__all__ = ["CheckRequest", "PropertyDef", "registry"]

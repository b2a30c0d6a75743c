"""Engines: the ways a property's question is answered (``smt``, ``enumerate``, ``search``, ``train``).

Each engine lives in its own subpackage and never imports another engine; cross-checks between engines
live in the tests and in the properties' ``choose_engine``.
"""

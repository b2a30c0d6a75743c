"""Builders: everything that produces a Model IR (inline weights, files, random, constructions, C-RASP)."""

"""The Python entry point for notebooks and tests: check a property of a model without writing a spec.

    from fractions import Fraction

    from verify_tf.api import Fixed, GridDomain, RandomConfig, check, random_model

    model = random_model(RandomConfig(seed=1, width=2, layers=1, heads=1, ffn_width=2))
    domain = GridDomain.regular(2, Fraction(1, 4), 3)  # 3 tokens of 2 coordinates in {0, 1/4, 1/2, 3/4}
    verdict = check(model, Fixed(16, 8), domain, "output-bounds", {"lo": -19, "hi": -1}, engine="enumerate")
    print(verdict.label, verdict.detail)  # proved (exhaustive) ...

Everything a check needs is importable from here: the model sources (``load_spec``, ``load_model``,
``random_model``), the arithmetics (``Exact``, ``Fixed``), the domains (``GridDomain``, ``StringDomain``),
``Verdict`` and ``SpecError``. Options are plain Python values validated exactly as a spec's (numbers may be
ints, Fractions or text such as "1/3"; an ``equivalent-to`` model may be a ``Model``); mistakes raise
``SpecError``. The verdict is the same object ``verify-tf check`` reports. docs/api.md has a longer example
(run by tests/test_api_docs.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from . import runner
from .builders.files import load_model
from .builders.random_model import RandomConfig, random_model
from .contract import Settings, Task
from .domain import GRID_HINT, Domain, GridDomain, StringDomain, unrepresentable_grid_value
from .engines.base import ProgressEvent, Run, no_progress
from .executors import InProcess
from .ir import Model
from .properties import load, names
from .schema.dsl import Context
from .schema.errors import OptionError, SpecError
from .schema.yamlnodes import from_plain
from .semantics import Arithmetic, Exact, Fixed
from .spec.loader import load_spec, supported_engines
from .verdict import Verdict
from .work import Deadline, Executor, deadline_in_force


def options_of(
    name: str,
    options: Mapping[str, Any] | None,
    model: Model,
    arithmetic: Arithmetic,
    domain: Domain | None,
    base_dir: Path | None = None,
) -> Any:
    """Validate plain ``options`` for property ``name`` (and its fit to the model and domain): typed options."""
    if name not in names():
        raise SpecError(f"unknown property {name!r}", hint=f"known: {', '.join(names())}")
    unrepresentable = unrepresentable_grid_value(domain, arithmetic)
    if unrepresentable is not None:  # the spec loader's check (domain.unrepresentable_grid_value), not a copy
        raise SpecError(unrepresentable, path="domain.grid", hint=GRID_HINT)
    prop = load(name)
    ctx = Context(
        "<options>", base_dir or Path.cwd(), model_section=lambda node, c, path: _model_section(node, c, path)
    )
    given = {key: value for key, value in (options or {}).items() if value is not None}  # None: not given
    typed = prop.options.validate(from_plain(given), ctx, name)
    with _options_mistake(name):
        prop.fit(model, arithmetic, domain, typed)
    return typed


@contextlib.contextmanager
def _options_mistake(name: str) -> Iterator[None]:
    """A property's ``OptionError`` (its ``fit``, its ``premise``) as the API's ``SpecError`` at ``name.key``."""
    try:
        yield
    except OptionError as exc:
        raise SpecError(exc.message, path=f"{name}.{exc.key}" if exc.key else name, hint=exc.hint) from None


def _model_section(node, ctx, path):
    if node.kind == "object" and isinstance(node.value, Model):
        return node.value
    raise ctx.error(node, path, "pass the other model as a verify_tf.ir.Model")


def make_task(
    model: Model,
    arithmetic: Arithmetic,
    domain: Domain | None,
    name: str,
    options: Mapping[str, Any] | None = None,
    *,
    label: str | None = None,
    base_dir: Path | None = None,
    **settings: Any,
) -> Task:
    """The task of checking property ``name`` (its ``options`` validated as a spec's are) on ``model`` over
    ``domain``; ``settings`` are the run options of ``contract.Settings`` (``seed``, ``minimize``, ``device``,
    ``solver``, ``rlimit``, ``samples``, ``smt2_dir``, ``certify``, ``memory``, ``spill_dir``), as the command line
    sets them (``--memory``, ``--spill-dir``, ``--certify``, ...)."""
    typed = options_of(name, options, model, arithmetic, domain, base_dir)
    return runner.make_task(label or name, name, typed, model, arithmetic, domain, settings_from(**settings))


def settings_from(**given: Any) -> Settings:
    """``contract.Settings`` from keyword run options (paths may be ``Path``; ``samples=None``: the default); an
    unknown name is an input error naming the known ones."""
    known = {f.name for f in fields(Settings)}
    unknown = sorted(set(given) - known)
    if unknown:
        raise SpecError(f"unknown run option {unknown[0]!r}", hint=f"run options: {', '.join(sorted(known))}")
    values = {key: value for key, value in given.items() if value is not None}
    for key in ("smt2_dir", "spill_dir"):
        if key in values:
            values[key] = str(values[key])
    return Settings(**values)


def check(
    model: Model,
    arithmetic: Arithmetic,
    domain: Domain | None,
    name: str,
    options: Mapping[str, Any] | None = None,
    *,
    engine: str = "auto",
    timeout: float = 60.0,
    executor: Executor | None = None,
    progress=None,
    cache_dir: Path | None = None,
    **settings: Any,
) -> Verdict:
    """Check property ``name`` of ``model`` over ``domain`` with ``engine`` within ``timeout`` seconds."""
    task = make_task(model, arithmetic, domain, name, options, **settings)
    engines = supported_engines(task.prop, task.options, task.domain)  # a language domain keeps fewer
    if engine != "auto" and engine not in engines:
        raise SpecError(f"{name} does not support engine {engine!r}", hint=f"it supports: {', '.join(engines)}")
    run = Run(executor or InProcess(), Deadline(timeout), progress or no_progress)
    # the premise (a RASP program undefined on some input) within the timeout, its mistake as fit's
    with deadline_in_force(run.deadline), _options_mistake(name):
        task.prop.premise(task)
    return runner.run_engine(task, run, engine, cache_dir, engines)


__all__ = [
    "Arithmetic",
    "Domain",
    "Exact",
    "Fixed",
    "GridDomain",
    "Model",
    "ProgressEvent",
    "RandomConfig",
    "SpecError",
    "StringDomain",
    "Verdict",
    "check",
    "load_model",
    "load_spec",
    "make_task",
    "options_of",
    "random_model",
]

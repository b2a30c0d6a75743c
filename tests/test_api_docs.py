"""The Python API's documentation runs: docs/api.md's example prints what the page says, and every name the
API's docstrings use is importable from ``verify_tf.api`` (issue 27: `Fixed` and `GridDomain` were not)."""

from __future__ import annotations

import contextlib
import io
import re
from fractions import Fraction
from pathlib import Path

import pytest

import verify_tf.api as api
from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.domain import GridDomain
from verify_tf.semantics import Fixed, evaluate

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC, flags=re.S)


@pytest.mark.slow  # six exhaustive checks
def test_the_docs_example_prints_what_the_page_says(monkeypatch):
    monkeypatch.chdir(ROOT)  # the example loads a shipped spec by its relative path
    (code,) = blocks("python")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "docs/api.md", "exec"), {})
    expected = DOC.split("It prints", 1)[1].split("```\n", 1)[1].split("```", 1)[0]
    assert printed.getvalue() == expected


def test_the_range_the_page_states_is_the_interpreters():
    """Independent of the engines: the interpreter over all 4,096 inputs of the example's domain."""
    model = random_model(RandomConfig(seed=1, width=2, layers=1, heads=1, ffn_width=2))
    domain = GridDomain.regular(2, Fraction(1, 4), 3)
    outputs = [q for x in domain.inputs() for q in evaluate(model, Fixed(16, 8), x).readout]
    assert len(outputs) == 3 * 4096
    assert (min(outputs), max(outputs)) == (Fraction(-4721, 256), Fraction(-895, 512))
    assert "[−4721/256, −895/512]" in DOC


def test_every_name_the_api_docstrings_import_is_exported():
    documented = set()
    for text in [api.__doc__ or "", DOC]:
        for names in re.findall(r"from verify_tf\.api import ([\w, ]+)", text):
            documented |= {name.strip() for name in names.split(",")}
    assert documented >= {"Fixed", "GridDomain", "check"}
    assert documented <= set(api.__all__)
    assert all(hasattr(api, name) for name in api.__all__)


@pytest.mark.slow
def test_the_module_docstring_example_runs():
    code = "\n".join(line[4:] for line in api.__doc__.split("\n\n", 1)[1].split("\n\nEverything", 1)[0].splitlines())
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "verify_tf/api.py", "exec"), {})
    assert printed.getvalue().startswith("proved (exhaustive) all 4096 inputs")


def test_the_run_options_of_the_command_line_are_the_apis_too(tmp_path):
    """One ``Settings`` from either side: ``api.make_task`` takes ``--memory``, ``--spill-dir`` and ``--certify``
    as keywords, and the spec route (``runner.settings_of``) gives the same object for the same flags."""
    from verify_tf.runner import Overrides, settings_of

    model = random_model(RandomConfig(seed=1, width=2, layers=1, heads=1, ffn_width=2))
    domain = GridDomain.regular(2, Fraction(1, 4), 3)
    options = {"lo": -100, "hi": 100}
    task = api.make_task(
        model, Fixed(16, 8), domain, "output-bounds", options, memory=1 << 20, spill_dir=tmp_path, certify=True
    )
    assert (task.settings.memory, task.settings.spill_dir, task.settings.certify) == (1 << 20, str(tmp_path), True)
    spec = api.load_spec(ROOT / "specs" / "equivariance-standard-hardmax.yaml")
    flags = Overrides(memory=1 << 20, spill_dir=tmp_path, certify_dir=tmp_path)
    from_spec = settings_of(spec, spec.properties[0], flags)
    assert (from_spec.memory, from_spec.spill_dir, from_spec.certify) == (1 << 20, str(tmp_path), True)
    with pytest.raises(api.SpecError, match="unknown run option 'memroy'"):
        api.make_task(model, Fixed(16, 8), domain, "output-bounds", options, memroy=1)

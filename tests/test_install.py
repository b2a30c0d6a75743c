"""The two commands of a fresh machine (README, Quickstart) and the pins that keep them working.

CI (``.ci/run``) builds a fresh virtual environment and runs exactly the README's two commands in it; these tests
pin that, and that every dependency is bounded so that an upgrade cannot silently break the suite on a fresh
install (hypothesis 6.170.10 removed the private API hypothesis-jsonschema 0.23.1 drives: issue 27).
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

tomllib = pytest.importorskip("tomllib")  # Python 3.11+: the machine's and CI's Python

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def quickstart_commands() -> list[str]:
    """The shell commands of the README's Quickstart section: the code blocks before the first bold paragraph."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    before_notes = section.split("\n**", 1)[0]
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", before_notes, flags=re.S)]


def ci_commands() -> list[str]:
    """The commands .ci/run runs after activating its virtual environment (each in a ``( … )`` subshell)."""
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    return [line.strip()[1:-1].strip() for line in lines if line.startswith("( ") and line.endswith(" )")]


def test_the_readme_has_two_commands_the_lean_core_then_the_test_extras():
    first, second = quickstart_commands()
    assert first == "pip install -e . && verify-tf check specs/equivariance-standard-hardmax.yaml"
    assert "[" not in first, "the first command installs the lean core only, no extra"
    assert second == 'pip install torch==2.13.0 && pip install -e ".[test]" && python -m pytest -q -n 2'


def test_ci_runs_exactly_the_readme_commands_in_a_fresh_virtual_environment():
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert ci_commands() == quickstart_commands()
    venv_at = script.index('python3 -m venv "$venv_root/venv"')
    activated_at = script.index('source "$venv_root/venv/bin/activate"')
    assert "venv_root=$(mktemp -d)" in script and venv_at < activated_at < script.index("( pip install -e .")
    assert "set -euo pipefail" in script
    # nothing else is pip-installed: only the README's commands install Python packages
    installs = [line for line in script.splitlines() if "pip install" in line and not line.startswith("#")]
    assert installs == [f"( {c} )" for c in quickstart_commands()]


def _requirements() -> list[tuple[str, Requirement]]:
    project = PYPROJECT["project"]
    found = [("dependencies", Requirement(r)) for r in project["dependencies"]]
    for extra, requirements in project["optional-dependencies"].items():
        found += [(extra, Requirement(r)) for r in requirements]
    return found


def test_every_dependency_is_pinned_or_bounded_above():
    unbounded = [
        f"{where}: {req}"
        for where, req in _requirements()
        if req.name != "verify-tf" and not any(s.operator in ("==", "<", "<=", "~=") for s in req.specifier)
    ]
    assert unbounded == []


def test_hypothesis_and_hypothesis_jsonschema_are_pinned_together():
    test = {req.name: req for where, req in _requirements() if where == "test"}
    assert str(test["hypothesis"].specifier) == "==6.170.9"  # 6.170.10 removed conjecture.utils.many.more
    assert str(test["hypothesis-jsonschema"].specifier) == "==0.23.1"


def test_the_installed_test_tools_are_the_pinned_ones():
    """A stale development environment is named here rather than as a mysterious failure elsewhere."""
    test = [req for where, req in _requirements() if where == "test" and req.name != "verify-tf"]
    wrong = []
    for req in test:
        try:
            installed = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            continue  # an extra the suite skips without (tests skip what they cannot import)
        if not req.specifier.contains(installed, prereleases=True):
            wrong.append(f"{req.name} {installed} (wanted {req.specifier})")
    assert wrong == [], 'run: pip install -e ".[test]"'

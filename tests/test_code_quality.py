"""The linters are part of the test command: ruff and mypy (configured in pyproject.toml) must pass.

The import contracts are checked by tests/test_architecture.py. Both tools are pinned in the ``test`` extra; a
missing tool is a failure, not a skip, so that `.ci/run` cannot pass without them.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run_tool(module: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    assert importlib.util.find_spec(module) is not None, f"{module} is not installed: pip install -e '.[test]'"
    return subprocess.run([sys.executable, "-m", module, *arguments], capture_output=True, text=True, cwd=ROOT)


def test_ruff_check_passes() -> None:
    result = _run_tool("ruff", "check", "--no-cache", ".")
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "All checks passed!" in result.stdout


def test_ruff_format_is_clean() -> None:
    result = _run_tool("ruff", "format", "--check", "--no-cache", ".")
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


@pytest.mark.slow
def test_mypy_passes() -> None:
    # strict on verify_tf.ir and verify_tf.semantics, gradual elsewhere: [tool.mypy] in pyproject.toml
    result = _run_tool("mypy")
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert result.stdout.startswith("Success: no issues found in "), result.stdout[-2000:]

"""Test-session setup shared by every test module.

The proof cache signs its entries with a key kept outside the cache folder (``verify_tf.cache``): the tests use
a fixed one from the environment, so that no test writes a key file into the user's config folder (the tests
of the key file itself point ``XDG_CONFIG_HOME`` at a temporary folder).

Every test starts from the same random state (``seeded``): Python's ``random``, numpy's global generator and,
once torch is imported, torch's, so that whatever a test draws does not depend on which tests ran before it in
the same worker (issue 39: a test drew its weights from the state the tests before it left, and failed by test
order). A test that needs particular draws still seeds them itself, where it draws them.
"""

import os
import random
import sys
import zlib

import numpy as np
import pytest


def pytest_configure(config):
    os.environ.setdefault("VERIFY_TF_CACHE_SECRET", "verify-tf test session")


@pytest.fixture(autouse=True)
def seeded(request):
    """Seed every generator a test may draw from, by the test's own id (the same draws in any order)."""
    seed = zlib.crc32(request.node.nodeid.encode()) & 0x7FFF_FFFF
    random.seed(seed)
    np.random.seed(seed)
    torch = sys.modules.get("torch")  # imported by an earlier test; a test that imports it first gets its default seed
    if torch is not None:
        torch.manual_seed(seed)
    yield


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """A hostile-input case's folder (test_hostile_inputs.py, test_hostile_budgets.py): the working folder and
    TMPDIR; the repository must not change."""
    import subprocess
    import tempfile
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent

    def repository_state() -> str:
        return subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=all"],
            cwd=root,
            capture_output=True,
            text=True,
            check=False,
        ).stdout

    work = tmp_path / "case"
    work.mkdir()
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    before = repository_state()
    yield work, scratch
    assert repository_state() == before, "the case wrote into the repository"

"""The HTML counterexample report in headless Chromium: it loads without errors and shows the witness.

Skipped when no Chromium is installed (Debian: `apt-get install -y chromium`).
"""

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from verify_tf.cli import main

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium is not installed (apt-get install -y chromium)"
)

SPEC = """
model:
  random: {seed: 3, width: 1, layers: 2, heads: 2, scoring: hardmax, positional: rpe, max-length: 3}
arithmetic: exact
domain:
  grid: {step: 1/2}
  length: 3
properties:
  - permutation-equivariance: {}
"""


def chromium(*args: str, page: Path) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                f"--user-data-dir={profile}",
                "--enable-logging=stderr",
                "--v=0",
                *args,
                page.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=90,
        )


@pytest.mark.slow
def test_html_report_loads_in_chromium_and_shows_the_witness(tmp_path):
    spec = tmp_path / "rpe.yaml"
    spec.write_text(SPEC)
    report, page = tmp_path / "report.json", tmp_path / "cx.html"
    assert CliRunner().invoke(main, ["check", "--no-cache", str(spec), "--json", str(report)]).exit_code == 1
    result = CliRunner().invoke(main, ["explain", str(report), "--html", str(page), "--quiet"])
    assert result.exit_code == 0, result.output
    dom = chromium("--dump-dom", page=page)
    assert dom.returncode == 0, dom.stderr[-2000:]
    summary = re.search(r'<p class="summary">(.*?)</p>', page.read_text()).group(1)
    assert summary.startswith("X = [") and summary in dom.stdout
    assert dom.stdout.count("<svg") == 2 * 2 * 2  # 2 layers x 2 heads x 2 inputs (X and τX)
    assert "permuted_input" in dom.stdout and 'class="differs"' in dom.stdout
    console_errors = [line for line in dom.stderr.splitlines() if "CONSOLE" in line or "Failed to load" in line]
    assert console_errors == []
    shot = tmp_path / "shot.png"
    result = chromium(f"--screenshot={shot}", "--window-size=1200,1600", page=page)
    assert result.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000

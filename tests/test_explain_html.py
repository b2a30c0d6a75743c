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


PROBE = """<script>addEventListener('load', () => {
  const b = document.body; let right = 0;
  for (const e of document.querySelectorAll('.card')) right = Math.max(right, e.getBoundingClientRect().right);
  const t = document.querySelector('svg text');
  b.setAttribute('data-height', document.documentElement.scrollHeight);
  b.setAttribute('data-right', Math.round(right));
  b.setAttribute('data-font', t ? getComputedStyle(t).fontSize : '');
  const link = document.querySelector('nav.layers a.collision');
  const target = link ? document.getElementById(link.hash.slice(1)) : null;
  b.setAttribute('data-collision', target ? target.querySelector('h4').textContent : '');
});</script>"""


@pytest.mark.slow
def test_a_deep_witness_uses_the_width_and_has_a_way_to_each_layer_and_to_the_collision(tmp_path):
    """Issue 39: a 6-layer contextual-mapping witness was a 4,746 px page at 1400 px wide, its heatmap numbers 9 px,
    with no way to a layer but scrolling. Measured in Chromium (a probe script added to a copy of the page; the page
    itself has none): the cards of a layer wrap across the width, the page is about 3,100 px (a ceiling of 3,800),
    cell numbers 12 px, one link per layer and one to the collision, whose target is the stage from which the
    colliding values are equal (layer 5, after attention: the terminal's answer says the same)."""
    report, page = tmp_path / "report.json", tmp_path / "cx.html"
    spec = "specs/yun-lemma6-global-shift-reduced-refuted.yaml"
    assert CliRunner().invoke(main, ["check", "--no-cache", spec, "--json", str(report)]).exit_code == 0
    result = CliRunner().invoke(main, ["explain", str(report), "--html", str(page)])
    assert result.exit_code == 0 and result.stdout == "", result.output
    text = page.read_text()
    assert "<script" not in text
    links = re.findall(r'<nav class="layers">(.*?)</nav>', text)[0]
    assert re.findall(r">(layer \d)</a>", links) == [f"layer {k}" for k in range(6)]
    assert 'class="collision" href="#cx-0-collision"' in links and 'id="cx-0-collision"' in text
    probe = tmp_path / "probe.html"
    probe.write_text(text.replace("</body>", PROBE + "</body>"))
    dom = chromium("--dump-dom", "--window-size=1400,1000", page=probe)
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = re.search(r"<body ([^>]*)>", dom.stdout).group(1)
    facts = dict(re.findall(r'data-(\w+)="([^"]*)"', body))
    assert int(facts["height"]) <= 3800, facts
    assert int(facts["right"]) >= 1000, facts  # three cards side by side in a layer's row
    assert float(facts["font"].removesuffix("px")) >= 12
    assert facts["collision"] == "after attention"

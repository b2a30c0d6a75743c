"""The lists the docs give (engines, commands, properties and their engines) are the code's lists.

Each test names the file and the rows that drifted; the code is the truth: `spec.loader.ENGINES` (what
`--engine` and `engine:` accept), the property registry (`verify-tf properties`), the CLI's command group.
`verify-tf init`'s starter spec is generated from the same lists (verify_tf/starter.py). Issue 27 found
docs/cli.md without `split` and `audit`, the README without `split` for permutation-equivariance, and the
starter naming five of the eight engines.
"""

from __future__ import annotations

import re
from pathlib import Path

import click
import yaml

from verify_tf.cli import main
from verify_tf.engines import supporting
from verify_tf.properties import registry
from verify_tf.spec.loader import ENGINES, MODEL_SOURCES, load_spec_text
from verify_tf.starter import STARTER_SPEC

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
CLI_DOC = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")


def commands() -> list[str]:
    return main.list_commands(click.Context(main))


def section(text: str, heading: str) -> str:
    return text.split(heading, 1)[1].split("\n## ", 1)[0]


def table_rows(text: str) -> dict[str, list[str]]:
    """Markdown table rows by their first cell (backquotes dropped): the cells after it."""
    rows = {}
    for line in text.splitlines():
        if line.startswith("| `"):
            cells = [cell.strip() for cell in line.strip("|").split(" | ")]
            rows[cells[0].strip("`")] = cells[1:]
    return rows


def test_the_readme_property_table_lists_every_property_with_its_engines():
    rows = table_rows(section(README, "Properties (`verify-tf properties`"))
    assert set(rows) == set(registry())
    drifted = {
        name: (cells[1], supporting(prop))
        for name, prop in registry().items()
        if [e.strip() for e in rows[name][1].split(",")] != list(supporting(prop))  # in the registry's order
        for cells in [rows[name]]
    }
    assert drifted == {}


def test_the_readme_engine_table_lists_every_engine():
    rows = table_rows(section(README, "## Engines"))
    assert set(rows) == set(ENGINES) - {"auto"}


def test_the_readme_and_docs_cli_list_every_command():
    listed = set(re.findall(r"verify-tf (\w+)", section(README, "## Commands")))
    assert set(commands()) <= listed, "README, Commands"
    block = CLI_DOC.split("```", 2)[1]
    assert set(re.findall(r"verify-tf (\w+)", block)) == set(commands()), "docs/cli.md, the command list"


def test_docs_cli_engine_option_lists_every_engine():
    """docs/cli.md's `--engine auto|NAME` row names the registry's engines, in its order (the folders of
    verify_tf/engines/); the hook table of docs/architecture.md is compared with the code in test_contract.py."""
    (row,) = [line for line in CLI_DOC.splitlines() if line.startswith("| `--engine ")]
    assert row.split("`")[1] == "--engine auto\\|NAME"
    listed = row.split("verify_tf/engines/`: ", 1)[1].split(")", 1)[0].split(", ")
    assert ["auto", *listed] == list(ENGINES)


def test_the_starter_spec_lists_every_engine_source_and_property_and_runs():
    engine_line = next(line for line in STARTER_SPEC.splitlines() if line.startswith("engine:"))
    assert [engine.strip() for engine in engine_line.split("#", 1)[1].split("|")] == list(ENGINES)
    comments = "\n".join(line for line in STARTER_SPEC.splitlines() if line.startswith("#"))
    assert all(f"`{source}" in comments or f"inline `{source}`" in comments for source in MODEL_SOURCES)
    assert all(name in comments for name in registry())
    spec = load_spec_text(STARTER_SPEC, "starter.yaml")  # the file `init` writes is a valid spec
    assert [p.name for p in spec.properties] == ["permutation-equivariance"]
    assert yaml.safe_load(STARTER_SPEC)["engine"] == "auto"

"""The ``verify-tf`` click application: the top-level group, its commands, and the optional command groups
(``crasp``, ``experiment``) imported only when first used; ``import`` is imported when it runs or ``--help``
lists it (a check never loads it).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from .. import __version__
from ..schema.errors import TORCH_INSTALL
from ..verdict import EXIT_INTERNAL
from . import output
from .check import check
from .reports import audit, explain
from .spec_commands import init, list_properties, run, schema


class _MainGroup(click.Group):
    """The top-level group; optional groups (``_mount_optional_groups``) are imported when first used.

    Their modules may import heavy libraries (torch): importing them only when their command runs keeps
    ``verify-tf --help`` and ``verify-tf check`` free of them. ``--help`` lists them with a static line.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.optional: dict[str, tuple[str, str, str]] = {}  # name -> (module, attribute, one-line help)
        self.lazy: dict[str, tuple[str, str]] = {}  # name -> (module, attribute): a command imported when used

    def list_commands(self, ctx: click.Context) -> list[str]:
        available = {name for name, (module, _, _) in self.optional.items() if _module_exists(module)}
        return sorted(set(self.commands) | set(self.lazy) | available)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in self.lazy:
            import importlib

            module_name, attribute = self.lazy[name]
            self.add_command(getattr(importlib.import_module(module_name), attribute), name)
        if name not in self.commands and name in self.optional:
            module_name, attribute, _ = self.optional[name]
            command = _import_optional(module_name, attribute)
            if command is not None:
                self.add_command(command, name)
        return self.commands.get(name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        limit = formatter.width - 6 - max((len(n) for n in self.list_commands(ctx)), default=0)
        for name in self.list_commands(ctx):
            if name in self.lazy:
                self.get_command(ctx, name)  # --help lists its own short help
            if name in self.commands:
                command = self.commands[name]
                if command.hidden:
                    continue
                rows.append((name, command.get_short_help_str(limit)))
            else:
                rows.append((name, self.optional[name][2]))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _module_exists(module_name: str) -> bool:
    """Whether ``a.b.c`` has a source file, found without executing ``a.b`` (whose __init__ may import torch)."""
    import importlib.util

    parent, _, leaf = module_name.rpartition(".")
    try:
        spec = importlib.util.find_spec(parent)
    except ModuleNotFoundError:
        return False
    if spec is None or not spec.submodule_search_locations:
        return False
    return any(
        (Path(folder) / f"{leaf}.py").is_file() or (Path(folder) / leaf / "__init__.py").is_file()
        for folder in spec.submodule_search_locations
    )


def _import_optional(module_name: str, attribute: str) -> click.Command | None:
    """Import an optional group. Only the absence of that exact module (or its own package) is tolerated:
    any other import error (a bug inside it, a missing dependency of it) propagates, never hidden."""
    import importlib

    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] == "torch":  # an optional dependency: name the extra
            raise click.UsageError(f"this command needs PyTorch, which is not installed: {TORCH_INSTALL}") from None
        parts = module_name.split(".")
        if exc.name not in {".".join(parts[:i]) for i in range(2, len(parts) + 1)}:
            raise
        return None
    return getattr(module, attribute)


@click.group(cls=_MainGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="verify-tf")
def main() -> None:
    """verify-tf: prove or refute properties of small quantized transformers.

    Write a spec (model, arithmetic, domain, properties) and run `verify-tf check spec.yaml`.
    Exit codes: 0 proved, 1 refuted, 2 input error, 3 unknown, 4 internal error (docs/cli.md).
    """
    output.reset_consoles()


for _command in (check, audit, explain, run, schema, init, list_properties):
    main.add_command(_command)
main.lazy["import"] = ("verify_tf.cli.checkpoints", "import_checkpoint")  # imported when run or listed (start-up)


def _mount_optional_groups() -> None:
    """Register the click groups other parts of the project provide; each is imported on first use."""
    main.optional["crasp"] = (
        "verify_tf.cli.crasp",
        "crasp",
        "C-RASP programs: counting, boolean tests and comparisons over prefixes.",
    )
    main.optional["experiment"] = (
        "verify_tf.cli.experiment",
        "experiment",
        "Float training experiments (evidence, never verdicts).",
    )


_mount_optional_groups()


def entry() -> None:  # pragma: no cover - console-script shim
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERNAL)

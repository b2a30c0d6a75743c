"""``verify-tf import PATH -o spec.yaml``: a checkpoint (``save_pretrained`` folder, nanoGPT ``ckpt.pt``) to a spec."""

from __future__ import annotations

from pathlib import Path

import click

from . import output


@click.command(name="import")
@click.argument("path", type=click.Path(exists=False, path_type=Path))
@click.option("-o", "--output", "spec_path", type=click.Path(dir_okay=False, path_type=Path), default="spec.yaml",
              show_default=True, help="The spec to write.")  # fmt: skip
@click.option("--readout-token", "readout", metavar="T",
              help="The logit the properties read: a token id, a vocabulary entry, or A-B (a logit difference). "
              "Default: the first ordinary token's logit (a base model: hidden coordinate 0).")  # fmt: skip
@click.option("--reading", type=click.Choice(["float", "quantized"]), default="float", show_default=True,
              help="float: the model as it runs in float32 (docs/semantics.md §7); quantized: a fixed-point reading "
              "of the weights (24.12), NOT the model as run.")  # fmt: skip
@click.option("--bos", metavar="T", help="A token prepended to every input (an id or a vocabulary entry).")
@click.option("--vocabulary", metavar="A,B,...",
              help="The token of each id, comma-separated (default: the folder's tokenizer files; a nanoGPT "
              "checkpoint: the ids; its meta.pkl is a pickle, never read).")  # fmt: skip
@click.option("--force", is_flag=True, help="Overwrite an existing spec.")
def import_checkpoint(path: Path, spec_path: Path, readout: str | None, reading: str, bos: str | None,
                      vocabulary: str | None, force: bool) -> None:  # fmt: skip
    """Write a commented, runnable spec for the checkpoint at PATH: a save_pretrained folder (config.json +
    model.safetensors) or a nanoGPT ckpt.pt.

    Nothing is downloaded and no code from the folder runs: the config and the weights are read as data.
    Then: verify-tf check SPEC.
    """
    from ..builders.checkpoint_files import CheckpointError
    from ..builders.checkpoint_spec import import_spec

    if spec_path.exists() and not force:
        output.fail_input(f"{spec_path} exists (use --force to overwrite)")
    if not path.exists():
        output.fail_input(
            f"{path}: no such folder or file",
            "verify-tf never downloads: give a folder written by save_pretrained (config.json + model.safetensors) "
            "or a nanoGPT ckpt.pt",
        )
    try:
        tokens = None if vocabulary is None else vocabulary.split(",")
        written = import_spec(path.resolve(), spec_path, readout=readout, bos=bos, reading=reading, vocabulary=tokens)
    except CheckpointError as exc:
        output.fail_input(str(exc), exc.hint)
    output.console.print(
        f"wrote {written.path}: {written.readout}, {written.strings} strings, starter bounds "
        f"[{float(written.low):.6g}, {float(written.high):.6g}]; run: verify-tf check {written.path}",
        markup=False,
        highlight=False,
    )

"""``verify-tf crasp extract SPEC -o OUT``: the C-RASP program a causal fixed-precision model computes, proved equal
to it (``verify_tf.extraction``; docs/crasp.md, "Extract").

``ExtractRequest`` is what the command line asks; ``run_extract`` loads the spec, extracts within the deadline
(``--timeout``; SIGINT/SIGTERM through ``Interrupts`` as every command), writes the program and prints the verdicts
beside it. Exit codes as ``check``: 0 proved at every length (and, with ``--check-against``, equal to the reference
too), 1 the reference differs (its least disagreement is printed), 2 a mistake in the input, 3 unknown (equal
only up to N, a budget that ran out, or extraction does not apply: why and what would make it apply), 4 an
internal error (the extraction contradicted the model: a bug).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import click

from ..crasp.ast import CraspError
from ..crasp.parser import load_program
from ..domain import StringDomain
from ..extraction import (
    PROVED,
    REFUTED,
    UP_TO,
    Budget,
    Decision,
    DoesNotApply,
    Extraction,
    ExtractionError,
    extract,
)
from ..spec import Spec, SpecError, load_spec
from ..verdict import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_PROVED, EXIT_REFUTED, EXIT_UNKNOWN
from ..work import Deadline, interrupted
from . import output
from .interrupts import Interrupts


@dataclass(frozen=True)
class ExtractRequest:
    """What ``crasp extract`` was asked."""

    spec: Path
    out: Path
    check_against: Path | None = None
    timeout: float | None = None  # None: the spec's
    explore: int = 10
    lengths_up_to: int = 64
    rounds: int = 6


def _threshold(spec: Spec) -> Fraction:
    """The decision threshold of the spec's first crasp-equivalence property (0 without one)."""
    for prop in spec.properties:
        if prop.name == "crasp-equivalence":
            return Fraction(prop.options.threshold)
    return Fraction(0)


def _status(decision: Decision) -> str:
    return {PROVED: "proved", REFUTED: "refuted", UP_TO: "unknown"}.get(decision.status, "unknown")


def _said(decision: Decision) -> str:
    """The decision with its status word where the description does not say it."""
    status = _status(decision)
    return decision.describe() if status == "proved" else f"{status}: {decision.describe()}"


def _also(result: Extraction) -> str:
    """What the least disagreement says about the model itself."""
    witness, decision = result.against.witness if result.against else None, result.decision
    if witness is None:
        return ""
    if decision.status == PROVED:
        return " (the model's too: the program equals it at every length)"
    if decision.status == UP_TO and len(witness) <= decision.up_to:
        return f" (the model's too: the program equals it up to {decision.up_to})"
    return " (about the program only: it is not known to equal the model there)"


def _print(request: ExtractRequest, result: Extraction) -> None:
    written, last = result.written, result.rounds[-1]
    boundaries = "boundary" if last.atoms == 1 else "boundaries"
    click.echo(
        f"wrote {request.out}: {written.definitions} definition{'s' if written.definitions != 1 else ''}, depth "
        f"{written.depth} ({len(result.rounds)} round{'s' if len(result.rounds) != 1 else ''}; explored every "
        f"prefix up to {last.explored_up_to}, {last.positions} positions, stream classes per layer "
        f"{'/'.join(map(str, last.classes)) or 'none'}, {last.atoms} rounding {boundaries})"
    )
    click.echo(f"  {request.out.name} vs the model: {_said(result.decision)}")
    if result.against is not None and request.check_against is not None:
        decision = result.against
        name = request.check_against.name
        if decision.status == REFUTED:
            click.echo(
                f"  {request.out.name} vs {name}: refuted: least disagreement {decision.witness!r}{_also(result)}"
            )
        else:
            click.echo(f"  {request.out.name} vs {name}: {_said(decision)}")


def _exit_code(result: Extraction) -> int:
    statuses = [_status(result.decision)] + ([_status(result.against)] if result.against is not None else [])
    if "refuted" in statuses:
        return EXIT_REFUTED
    return EXIT_PROVED if all(s == "proved" for s in statuses) else EXIT_UNKNOWN


def run_extract(request: ExtractRequest) -> int:
    """Run the request (module docstring); returns the exit code (input mistakes exit 2 from here)."""
    with Interrupts() as interrupts:
        with interrupts.exiting_at_once("loading the spec: nothing was extracted"):
            try:
                spec = load_spec(request.spec)
            except SpecError as error:
                output.fail_input(str(error))
            reference = None
            if request.check_against is not None:
                try:
                    reference = load_program(request.check_against)
                except CraspError as error:
                    output.fail_input(str(error))
        domain = spec.domain
        alphabet = domain.alphabet if isinstance(domain, StringDomain) and domain.language is None else None
        letters = alphabet or tuple(getattr(spec.model.tokens, "symbols", ()))
        bos = getattr(spec.model.tokens, "bos", None)
        letters = tuple(a for a in letters if a != bos)
        if reference is not None and letters and set(reference.alphabet) != set(letters):
            output.fail_input(
                f"{request.check_against}: its alphabet {{{', '.join(reference.alphabet)}}} is not the model's "
                f"{{{', '.join(letters)}}}",
                hint="compare against a program over the letters the spec's domain reads",
            )
        deadline = Deadline(request.timeout if request.timeout is not None else spec.timeout)
        try:
            result = extract(
                spec.model,
                spec.arithmetic,
                request.out,
                deadline,
                threshold=_threshold(spec),
                explore=request.explore,
                check_length=request.lengths_up_to,
                rounds=request.rounds,
                reference=request.check_against,
                alphabet=alphabet,
                title=f"extracted from {request.spec.name} by verify-tf crasp extract",
                progress=lambda line: output.err_console.print(f"[dim]{line}[/]", highlight=False),
            )
        except DoesNotApply as reason:
            click.echo(f"unknown: extraction does not apply: {reason}")
            return EXIT_UNKNOWN
        except Budget as where:
            signum = interrupted()
            if signum is not None:
                click.echo(f"interrupted while {where}", err=True)
                return EXIT_INTERRUPTED[signum]
            click.echo(f"unknown: the budget ({deadline.seconds:g} s) ran out {where}; --timeout gives more")
            return EXIT_UNKNOWN
        except ExtractionError as error:
            click.echo(f"error: {error}", err=True)
            return EXIT_INTERNAL
        except OSError as error:
            output.fail_input(f"cannot write {request.out}: {error}")
        except SpecError as error:  # a check the extraction asked for did not fit (e.g. the reference's alphabet)
            output.fail_input(str(error))
        signum = interrupted()
        _print(request, result)
        if signum is not None:
            return EXIT_INTERRUPTED[signum]
        return _exit_code(result)


__all__ = ["ExtractRequest", "run_extract"]

"""The words a C-RASP program accepts, as a strings domain's language: ``language: {crasp: L3.cr}``.

**Which words.** w is a word of the language iff 1 <= |w| and the program's output at w's last position holds:
the program's own accept semantics (``interpreter.accepts``), so the empty word is never one (``min-length: 0``
adds nothing). Only words over the domain's alphabet count; every domain symbol must be a program symbol.

**Enumerated directly, never by filtering Σ^n.** The program is read as its counter machine
(``machine.ProgramMachine``): the state after a prefix is its count vector, and the output at the prefix's last
position is a function of it. A state of the automaton built here is (``machine.key(counts)``, output): two
prefixes with the same key have the same outputs on every continuation and the same keys after every letter
(machine.py, "Capping"), so they lead to the same words; the output says whether the prefix itself is accepted.
The states are explored breadth first from the empty prefix, each step taken from the counts of the first prefix
that reached the state, for at most ``longest`` letters (the domain's ``max-length``). Counts are at most the
prefix's length, so the states reachable within N letters are at most (N + 1)^K · 2 for K counts: polynomially
many; when every count is capped (the L_k programs compare each count with 0) they are finitely many and the
exploration closes before N, and the automaton is then the language's own (``horizon`` None).

The result is a ``regular.Language``: counted per (remaining length, state) with exact integers, unranked in the
domain's order and walked without entering a state that has no accepted completion, by the same code as the regex
form; membership (``accepts``) is read on the automaton too (the reference interpreter takes ~100 times longer
per word: the tests compare the two). A state first reached after d letters is exact for completions of at most
N − d letters (its moves are explored when d < N), which is all a word of length <= N asks of it
(``regular.Language``, ``horizon``).

Budget: at most ``MAX_STATES`` states and ``MAX_CELLS`` = states × (N + 1) counts in the table; beyond either, a
``ProgramLanguageError`` with a hint (the loader reports it at ``domain.strings.language.crasp``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..regular import Language
from .ast import Program, format_alphabet, format_program
from .machine import ProgramMachine

MAX_STATES = 100_000  # automaton states (distinct (key, output) pairs reached within max-length letters)
MAX_CELLS = 2_000_000  # states × (max-length + 1): the exact count table the domain is counted and unranked by


class ProgramLanguageError(ValueError):
    """The program cannot define a domain's language (foreign symbol, positional predicates, over budget)."""

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.message, self.hint = message, hint


@dataclass(frozen=True, eq=False)
class ProgramLanguage(Language):
    """The words of length <= ``horizon`` (every length when None) that ``program`` accepts, as an automaton."""

    file: str  # the program's file as the spec names it (messages)
    program: Program

    @property
    def name(self) -> str:
        return self.file

    def identity(self) -> tuple:  # the program's text, not only its file name
        return (*super().identity(), format_program(self.program))


def program_language(
    program: Program, alphabet: Sequence[str], longest: int, file: str, max_states: int | None = None
) -> ProgramLanguage:
    """The automaton of the words of ``program`` over ``alphabet`` up to length ``longest`` (module docstring)."""
    max_states = MAX_STATES if max_states is None else max_states
    foreign = [symbol for symbol in alphabet if symbol not in program.alphabet]
    if foreign:
        raise ProgramLanguageError(
            f"domain symbol {foreign[0]!r} is not in the program's alphabet {format_alphabet(program.alphabet)}",
            "list only the program's symbols in the domain's alphabet",
        )
    machine = ProgramMachine(program)
    if machine.positional:  # its state is not its counts: the position and windows come with it
        raise ProgramLanguageError(
            f"{file}: the program uses positional predicates (guarded counts or position tests), so its words "
            "cannot be enumerated from its counts",
            "use a program without #[...] guards and position tests, or a regex",
        )
    if machine.not_applicable:
        raise ProgramLanguageError(
            f"{file}: {machine.not_applicable}, so its words cannot be enumerated from its counts",
            "use a program without #[...] guards and position tests, or a regex",
        )
    start = (machine.key(machine.initial), False)  # the empty prefix: not accepted
    index = {start: 0}
    representative = [machine.initial]  # the counts of the first prefix that reached each state
    accepting = [False]
    delta: list[tuple[int, ...]] = []
    layer = [0]
    for _ in range(longest):
        reached: list[int] = []
        for state in layer:
            row = []
            for symbol in alphabet:
                counts, output = machine.step(representative[state], symbol)
                key = (machine.key(counts), output)
                target = index.get(key)
                if target is None:
                    if len(index) >= max_states:
                        raise _too_many(file, f"more than {max_states} states", longest)
                    if (len(index) + 1) * (longest + 1) > MAX_CELLS:  # known before the table is built
                        raise _too_many(file, f"more than {MAX_CELLS} exact counts (states × {longest + 1})", longest)
                    target = index[key] = len(index)
                    representative.append(counts)
                    accepting.append(output)
                    reached.append(target)
                row.append(target)
            delta.append(tuple(row))
        layer = reached
        if not layer:
            break
    closed = not layer  # every state's moves are known: the automaton holds for every length
    delta += [(-1,) * len(alphabet)] * (len(index) - len(delta))  # the last layer's moves are never needed
    return ProgramLanguage(tuple(alphabet), tuple(delta), tuple(accepting), None if closed else longest, file, program)


def _too_many(file: str, what: str, longest: int) -> ProgramLanguageError:
    return ProgramLanguageError(
        f"the words of {file} up to length {longest} need {what}: its counts take too many values",
        "lower max-length (the states grow like a power of it when counts are compared with each other), or "
        "check the property on every string instead",
    )


__all__ = ["MAX_CELLS", "MAX_STATES", "ProgramLanguage", "ProgramLanguageError", "program_language"]

"""``rasp-equivalence``'s premise: the search for an input on which the RASP program is undefined (tracr's
``rasp.evaluate`` raises there), at check time under the property's deadline: the shortest lengths scanned by the
batched RASP evaluator, the longer ones asked of z3 on the program's own formulas (``rasp.symbolic``) through the
one solver session (``symbolic.solve.Session``)."""

from __future__ import annotations

from typing import Any

from ..builders.tracr_import import TracrExport
from ..domain import StringDomain, format_input
from ..rasp.batched import least_undefined
from ..rasp.interpreter import run, tokens_from_symbols
from ..rasp.program import RaspError
from ..work import Z3_LOCK, Deadline, DeadlineExpired

PREMISE_SCAN_INPUTS = 1 << 16  # strings the search scans (the shortest lengths, in order; docs/tracr.md)
# then z3 on the longer lengths, in all at most this long and this share of what is left of the property's time
# (the default --timeout, 60 s, leaves the whole 10 s; a short one leaves the engines three quarters)
PREMISE_SOLVER_SECONDS = 10
PREMISE_SOLVER_SHARE = 0.25
SPENT = (
    "the time ran out in rasp-equivalence's premise, before any engine ran (docs/tracr.md): give it a longer "
    "--timeout, or declare such inputs don't-care with undefined: dont-care (then nothing is searched)"
)


def least_undefined_input(export: TracrExport, domain: StringDomain, deadline: Deadline) -> tuple[str, str] | None:
    """The shortlex-least string of ``domain`` on which the program is undefined, with the reason, or None when
    there is none or the search did not find one in its time (``RaspEquivalence.premise``, at check time).

    The shortest lengths, up to ``PREMISE_SCAN_INPUTS`` strings in all, are scanned in order by the batched RASP
    evaluator within ``deadline``, the property's (``DeadlineExpired`` when it passes: the time ran out in the
    premise); longer ones are asked of z3 on the program's own formulas (``rasp.symbolic``), shortest first,
    within ``PREMISE_SOLVER_SECONDS`` and ``PREMISE_SOLVER_SHARE`` of what is left of ``deadline``, then
    minimised letter by letter. What the search leaves undecided is met by the engines: an undefined input there
    is ``unknown`` saying so (``CannotCheck``), never error."""
    program = export.program
    values = tokens_from_symbols(program, domain.alphabet)
    codes = [_token_codes(program)[v] for v in values]
    try:
        found = _search(program, domain, codes, deadline)
    except DeadlineExpired as exc:  # the scan, or an interrupt
        raise DeadlineExpired(f"{exc}: {SPENT}") from None
    if found is None:
        return None
    symbols = tuple(domain.alphabet[codes.index(c)] for c in found)
    try:
        run(program, tokens_from_symbols(program, symbols))
    except RaspError as exc:
        return format_input(symbols), str(exc)
    raise AssertionError(f"the RASP evaluators disagree on {symbols}")  # pragma: no cover (tests/test_rasp.py)


def _search(program: Any, domain: StringDomain, codes: list[int], deadline: Deadline) -> tuple[int, ...] | None:
    scanned, total = [], 0
    for n in domain.lengths:
        total += len(codes) ** n
        if total > PREMISE_SCAN_INPUTS:
            break
        scanned.append(n)
    found, _ = least_undefined(program, codes, scanned, deadline=deadline)
    if found is not None:
        return found
    solving = Deadline(min(PREMISE_SOLVER_SECONDS, PREMISE_SOLVER_SHARE * deadline.remaining()))
    for n in domain.lengths[len(scanned) :]:
        if n == 0:
            continue
        with Z3_LOCK:  # z3 in the property's own thread (properties run side by side with -j N)
            found, decided = _solve_undefined(program, domain, n, solving)
        if found is not None or not decided:  # a shorter length undecided: no longer input is the least
            break
    deadline.check("searching for an input on which the RASP program is undefined")  # an interrupt meanwhile
    return found


def _solve_undefined(
    program: Any, domain: StringDomain, length: int, deadline: Deadline
) -> tuple[tuple[int, ...] | None, bool]:
    """(the least string of this length where the program is undefined, as codes, or None; whether z3 decided
    within ``deadline``). Out of time while minimising, the last string found is returned (undefined, if not the
    least)."""
    from ..rasp.symbolic import program_outputs_symbolic
    from ..symbolic.inputs import string_input
    from ..symbolic.solve import SAT, UNKNOWN, UNSAT, Session
    from ..symbolic.values import Builder

    if deadline.expired():
        return None, False
    builder = Builder(deadline=deadline)
    inp = string_input(domain.alphabet, length, builder)
    alphabet_values = tokens_from_symbols(program, domain.alphabet)
    try:  # the encoding too stops at the search's deadline (a wide program's formulas take seconds to build)
        _, undefined = program_outputs_symbolic(program, inp, alphabet_values, builder.tick)
    except DeadlineExpired:
        return None, False
    session = Session(deadline)
    session.add(*builder.assertions, undefined)
    answer = session.check()
    if answer != SAT:
        return None, answer == UNSAT

    def witness() -> list[int]:  # the string of the last satisfiable check
        model = session.model()
        return [model.eval(term, model_completion=True).as_long() for term in inp.index_terms]

    found = witness()
    for term in inp.index_terms:  # fix each position to its least symbol that keeps an undefined input
        for symbol in range(len(domain.alphabet)):
            answer = session.check(term == symbol)
            if answer == SAT:
                found = witness()
                session.add(term == symbol)
                break
            if answer == UNKNOWN:  # out of time: the last string found is undefined too (if not the least)
                return _codes_of(program, inp, found), True
    return _codes_of(program, inp, found), True


def _codes_of(program: Any, inp: Any, chosen: list[int]) -> tuple[int, ...]:
    position = {term.get_id(): i for i, term in enumerate(inp.index_terms)}
    word = [str(symbol) for symbol in inp.decode(lambda var: chosen[position[var.get_id()]])]  # a string's letters
    program_codes = _token_codes(program)
    return tuple(program_codes[v] for v in tokens_from_symbols(program, word))


def _token_codes(program: Any) -> dict[Any, int]:
    """The code of each vocabulary value at the program's ``tokens`` node."""
    tokens = program.tokens_node
    assert tokens is not None  # an exported program reads tokens
    codes: dict[Any, int] = tokens.code_of
    return codes

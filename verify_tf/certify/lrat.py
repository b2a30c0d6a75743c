"""An independent LRAT proof checker (RUP steps only) and a DIMACS reader, in plain Python.

This is the only code a certificate's SAT evidence has to trust: it shares nothing with the SAT solver that
wrote the proof. LRAT text, as CaDiCaL writes it:

    <id> <lit>* 0 <hint-id>* 0      add clause <id>: assuming its literals false, unit propagation over exactly
                                    the hint clauses, in order, must end in a conflict
    <id> d <clause-id>* 0           delete clauses

A proof is accepted iff every step checks and the empty clause is added. RAT steps (negative hints) are
rejected: CaDiCaL writes none without extended resolution (off by default).

Clause numbering. CaDiCaL fed clause by clause through an API numbers the input clauses and the derived ones
from one counter, so derived ids interleave with input ids: input clause k (in DIMACS order) gets the k-th id
the proof does not use for an added clause ("gaps"). Any numbering is sound: the database holds exactly the
formula's clauses and the proof's own derived clauses, only their keys differ; a wrong numbering can only make
the check fail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable


class LratError(ValueError):
    """The proof (or the formula) does not check; the message names the line."""


def parse_dimacs(text: str) -> tuple[int, list[tuple[int, ...]]]:
    variables = declared = None
    clauses: list[tuple[int, ...]] = []
    current: list[int] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] == "c":
            continue
        if line[0] == "p":
            parts = line.split()
            if len(parts) != 4 or parts[1] != "cnf":
                raise LratError(f"bad DIMACS header {line!r}")
            variables, declared = int(parts[2]), int(parts[3])
            continue
        for token in line.split():
            literal = int(token)
            if literal == 0:
                clauses.append(tuple(current))
                current = []
            elif variables is None or abs(literal) > variables:
                raise LratError(f"literal {literal} outside the header's {variables} variables")
            else:
                current.append(literal)
    if current:
        raise LratError("the last clause is not terminated by 0")
    if variables is None or declared is None or declared != len(clauses):
        raise LratError(f"the header declares {declared} clauses, the file has {len(clauses)}")
    return variables, clauses


def check_lrat(
    variables: int,
    clauses: list[tuple[int, ...]],
    proof: Iterable[bytes],
    *,
    numbering: str = "gaps",
    expired: Callable[[], bool] = lambda: False,
) -> dict:
    """Raise ``LratError`` unless ``proof`` derives the empty clause from ``clauses``; statistics otherwise.

    ``expired()`` is polled every few thousand lines; when it is true the check stops with ``TimeoutError``.
    """
    lines = [line for line in proof if line.strip() and not line.startswith(b"c")]
    if numbering == "gaps":
        derived = {int(line.split(None, 1)[0]) for line in lines if line.split(None, 2)[1] != b"d"}
        database: dict[int, tuple[int, ...]] = {}
        key = 1
        for clause in clauses:
            while key in derived:
                key += 1
            database[key] = clause
            key += 1
    elif numbering == "dimacs":
        database = {k + 1: clause for k, clause in enumerate(clauses)}
    else:
        raise ValueError(f"numbering must be 'gaps' or 'dimacs', got {numbering!r}")
    originals = set(database)
    if any(not clause for clause in clauses):
        return {"added": 0, "deleted": 0, "hints": 0, "empty_input_clause": True}
    added = deleted = hints_used = 0
    for number, line in enumerate(lines, 1):
        if number % 4096 == 0 and expired():
            raise TimeoutError(f"LRAT check stopped at proof line {number} of {len(lines)}")
        tokens = line.split()
        if tokens[1] == b"d":
            if tokens[-1] != b"0":
                raise LratError(f"proof line {number}: deletion not terminated by 0")
            for token in tokens[2:-1]:
                if database.pop(int(token), None) is None:
                    raise LratError(f"proof line {number}: deletes clause {int(token)}, which is not active")
                deleted += 1
            continue
        numbers = [int(t) for t in tokens]
        clause_id = numbers[0]
        try:
            separator = numbers.index(0, 1)
        except ValueError:
            raise LratError(f"proof line {number}: literals not terminated by 0") from None
        literals, hints = numbers[1:separator], numbers[separator + 1 :]
        if not hints or hints[-1] != 0 or 0 in hints[:-1]:
            raise LratError(f"proof line {number}: hints not terminated by one 0")
        hints.pop()
        if clause_id in database or clause_id in originals:
            raise LratError(f"proof line {number}: clause id {clause_id} is not fresh")
        if any(abs(literal) > variables for literal in literals):
            raise LratError(f"proof line {number}: a literal outside the formula's {variables} variables")
        true = {-literal for literal in literals}  # the new clause assumed false
        tautology = any(-literal in true for literal in true)
        if not tautology:
            conflict = False
            for hint in hints:
                if hint <= 0:
                    raise LratError(f"proof line {number}: RAT hint {hint} is not supported")
                found = database.get(hint)
                if found is None:
                    raise LratError(f"proof line {number}: hint {hint} is not an active clause")
                clause = found
                unit = 0
                for literal in clause:
                    if -literal in true:
                        continue  # falsified
                    if literal in true or (unit != 0 and unit != literal):
                        raise LratError(f"proof line {number}: hint {hint} is neither unit nor falsified")
                    unit = literal
                hints_used += 1
                if unit == 0:
                    conflict = True
                    break
                true.add(unit)
            if not conflict:
                raise LratError(f"proof line {number}: the hints of clause {clause_id} end without a conflict")
        database[clause_id] = tuple(literals)
        added += 1
        if not literals:
            return {"added": added, "deleted": deleted, "hints": hints_used}
    raise LratError("the proof never derives the empty clause")

"""Positional predicates in the C-RASP compiler: position tests and guarded counts as heads with positional
encodings (docs/crasp.md, "Compiling positions").

Positions count from 0 in the program; the compiled model prepends BOS, so word position i is stream position
t = i + 1. Two kinds of heads carry the positions, both hardmax and causal, exact at every length:

* **Copy head** (``ShiftNode``, an RPE bias table): the boolean P at word position i − d, or 0 when i − d < 0.
  Scores are bos_j + B[j − i] with B[−d] = 2 and 0 at every other offset: the key at distance d scores 2 (3 if
  it is BOS), BOS scores at least 1, every other key 0, so hardmax picks the key at distance d when it exists and
  BOS otherwise, whose value is 0 (booleans are 0 at BOS).
* **Periodic head** (``PeriodicNode``, RoPE with the frequency 2π/M): 1 iff t ≡ ρ (mod M). The query is the
  rotation table's own entry at position ρ, (c_ρ, −s_ρ), rotated by RoPE at the query position t into
  (round(c_ρ·c_t + s_ρ·s_t), …) ≈ (cos 2π(t − ρ)/M, …); the only key with a rotary component is BOS (position 0,
  no rotation) with (K, 0), so its score is K·round(c_ρ·c_t + s_ρ·s_t), which depends on t mod M only. The
  compiler evaluates it for the M residues with the interpreter's own rotation, requires the residue ρ to score
  strictly highest (else more fractional bits are needed), and gives every word key the constant score
  L = K·top − 2^-f through a second pair with frequency 0 (no rotation). K = 2 makes L fall strictly between the
  top score and the next one. So BOS wins alone iff t ≡ ρ, and the value (the BOS indicator) is 1 exactly then.

What the predicates become (``crasp.positions`` proves their shape: ultimately periodic in one variable):

* a **unary** predicate u(i) with profile (head up to T, cycle of length M): the positions c < T where it holds,
  as [i ≥ c] ∧ ¬[i ≥ c + 1], and [i ≥ T] ∧ (the disjunction of [i ≡ r (mod M)] over the cycle's true
  residues); [i ≥ c] is a copy of "not BOS" from distance c, [i ≡ r] a periodic head at stream residue r + 1
  minus the BOS indicator;
* a **guarded count** #[g] P: the guard's atoms on i alone and on j alone are split off (a case split on the
  current position's tests, and the counted boolean P ∧ the tests at j); what remains depends on the distance
  d = i − j only. A finite set S of distances gives Σ_{d∈S} P(i − d), copies; a co-finite one (everything but F)
  gives #P − Σ_{d∈F} P(i − d). Both are sums of 0/1 choices, which the comparisons split on like ``? :``. A
  periodic set of distances (d % 2 == 0) is refused: it needs a uniform head over a residue class, which this
  compiler does not build.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from itertools import product
from typing import Protocol

from verify_tf.crasp.ast import CraspError
from verify_tf.crasp.positions import (
    COUNTED,
    CURRENT,
    PosBool,
    PosCompare,
    PosLogic,
    PosNot,
    Predicate,
    Profile,
    atoms,
    dependence,
    format_condition,
    profile,
)
from verify_tf.ir import Frequency, Head, RelativeTable, Rotary, zeros
from verify_tf.semantics import Fixed
from verify_tf.semantics.interpreter import rotation

from .crasp_values import (
    BoolValue,
    Choice,
    CountValue,
    Form,
    Leaf,
    Linear,
    Materialized,
    NodeId,
    PeriodicNode,
    ShiftNode,
    StreamNode,
    Table,
)

MAX_SPLIT_ATOMS = 4
"""At most this many atoms of a guard may depend on i alone or j alone (each doubles the cases)."""

COPY_SCORE = 2
"""B[−d] of a copy head."""

PERIODIC_SCALE = 2
"""K: the BOS key's rotary component of a periodic head."""


class Host(Protocol):
    """What positional lowering needs from the compiler."""

    alphabet: tuple[str, ...]
    one: Form
    bos: NodeId

    def node(self, node: StreamNode) -> NodeId: ...
    def conj(self, items: tuple[BoolValue, ...]) -> BoolValue: ...
    def disj(self, items: tuple[BoolValue, ...]) -> BoolValue: ...
    def negate(self, value: BoolValue) -> BoolValue: ...
    def lower(self, value: BoolValue) -> Form: ...
    def add(self, left: CountValue, right: CountValue) -> CountValue: ...
    def negate_count(self, value: CountValue) -> CountValue: ...
    def sized(self, value: CountValue) -> CountValue: ...


# ============================================================================ lowering


def position_test(host: Host, predicate: Predicate) -> BoolValue:
    """u(i) for a unary predicate, as copies and periodic heads."""
    used = list(atoms(predicate.body))
    return _one_variable(host, lambda i: predicate.holds(i), used, predicate)


def _one_variable(
    host: Host, condition: Callable[[int], bool], used: list[PosCompare], where: Predicate, role: int = CURRENT
) -> BoolValue:
    """A condition on one position x ≥ 0 (the current one, or the counted one when tested at j)."""
    shape = profile(condition, used, role)
    everywhere = Table(frozenset(host.alphabet))
    parts: list[BoolValue] = []
    for c in shape.members_below_threshold():
        parts.append(host.conj((_at_least(host, c), host.negate(_at_least(host, c + 1)))))
    threshold, period = len(shape.head), len(shape.cycle)
    true_residues = [(threshold + k) % period for k, member in enumerate(shape.cycle) if member]
    if true_residues:
        if len(true_residues) == period:
            periodic: BoolValue = everywhere
        elif 2 * len(true_residues) <= period:
            periodic = host.disj(tuple(_residue(host, period, r) for r in true_residues))
        else:
            false_residues = sorted(set(range(period)) - set(true_residues))
            periodic = host.negate(host.disj(tuple(_residue(host, period, r) for r in false_residues)))
        parts.append(host.conj((_at_least(host, threshold), periodic)))
    if not parts:
        return Table(frozenset())
    return parts[0] if len(parts) == 1 else host.disj(tuple(parts))


def _at_least(host: Host, c: int) -> BoolValue:
    """[i ≥ c] at word position i: "not BOS" copied from distance c."""
    if c == 0:
        return Table(frozenset(host.alphabet))
    return Materialized(Form.of({host.node(ShiftNode(host.one, c)): 1}))


def _residue(host: Host, modulus: int, residue: int) -> BoolValue:
    """[i ≡ residue (mod modulus)] at word position i, i.e. t = i + 1 ≡ residue + 1: the periodic head minus the
    BOS indicator (the head says 1 at BOS when residue + 1 ≡ 0)."""
    node = host.node(PeriodicNode(modulus, (residue + 1) % modulus))
    return Materialized(Form.of({node: 1, host.bos: -1}))


def guarded_count(host: Host, guard: Predicate, counted: BoolValue) -> CountValue:
    """#[guard] counted, as counts and sums of copies."""
    on_i, on_j, on_d = _split_atoms(guard)
    if len(on_i) + len(on_j) > MAX_SPLIT_ATOMS:
        raise CraspError(
            f"the guard {guard.source()} has {len(on_i) + len(on_j)} comparisons on i or j alone; the compiler "
            f"splits at most {MAX_SPLIT_ATOMS}",
            hint="write the tests on j into the counted boolean, e.g. #[near] (P && pos_even)",
        )
    cases: dict[tuple[bool, ...], CountValue] = {}
    for i_values in product((True, False), repeat=len(on_i)):
        total: CountValue = Leaf(Linear(()))
        for j_values in product((True, False), repeat=len(on_j)):
            fixed = dict(zip(on_i, i_values)) | dict(zip(on_j, j_values))
            tests_at_j = [
                _atom_test(host, atom, guard, COUNTED) if value else host.negate(_atom_test(host, atom, guard, COUNTED))
                for atom, value in zip(on_j, j_values)
            ]
            counted_here = host.conj((counted, *tests_at_j)) if tests_at_j else counted
            if isinstance(counted_here, Table) and not counted_here.letters:
                continue
            shape = profile(lambda d, fixed=fixed: _holds(guard.body, (d, 0), fixed), on_d, None)  # type: ignore[misc]
            total = host.add(total, _distance_count(host, shape, counted_here, guard))
        cases[i_values] = total
    return _case_split(host, guard, on_i, cases, ())


def _case_split(
    host: Host, guard: Predicate, on_i: list[PosCompare], cases: dict[tuple[bool, ...], CountValue], fixed: tuple
) -> CountValue:
    if len(fixed) == len(on_i):
        return cases[fixed]
    test = _atom_test(host, on_i[len(fixed)], guard, CURRENT)
    return host.sized(
        Choice(
            test,
            _case_split(host, guard, on_i, cases, (*fixed, True)),
            _case_split(host, guard, on_i, cases, (*fixed, False)),
        )
    )


def _atom_test(host: Host, atom: PosCompare, guard: Predicate, role: int) -> BoolValue:
    """One atom of a guard that depends on one position only, as a test at that position."""

    def holds(x: int) -> bool:
        return atom.holds((x, 0) if role == CURRENT else (0, x))

    return _one_variable(host, holds, [atom], guard, role)


def _distance_count(host: Host, shape: Profile, counted: BoolValue, guard: Predicate) -> CountValue:
    """Σ over the distances d in ``shape`` of counted(i − d)."""
    if shape.finite:
        total: CountValue = Leaf(Linear(()))
        for d in shape.members_below_threshold(True):
            total = host.add(total, _indicator(_copy(host, counted, d)))
        return total
    if shape.cofinite:
        form = host.lower(counted)
        total = Leaf(Linear.of({form: 1}) if form.terms else Linear(()))
        for d in shape.members_below_threshold(False):
            total = host.add(total, host.negate_count(_indicator(_copy(host, counted, d))))
        return total
    raise CraspError(
        f"the guard {guard.source()} holds at infinitely many distances i - j, but not at almost all of them "
        f"(they repeat with period {len(shape.cycle)})",
        hint="the compiler builds guards true at finitely many distances (j == i - 4, i - j <= 3) or at all but "
        "finitely many (i - j > 2); the interpreter runs every guard",
    )


def _copy(host: Host, value: BoolValue, distance: int) -> BoolValue:
    if distance == 0:
        return value
    return Materialized(Form.of({host.node(ShiftNode(host.lower(value), distance)): 1}))


def _indicator(value: BoolValue) -> CountValue:
    return Choice(value, Leaf(Linear((), 1)), Leaf(Linear((), 0)))


def _split_atoms(guard: Predicate) -> tuple[list[PosCompare], list[PosCompare], list[PosCompare]]:
    on_i: list[PosCompare] = []
    on_j: list[PosCompare] = []
    on_d: list[PosCompare] = []
    for atom in atoms(guard.body):
        kind = dependence(atom)
        if kind == "mixed":
            raise CraspError(
                f"the guard {guard.source()} compares i and j other than through their distance i - j "
                f"({format_condition(atom, guard.parameters)})",
                hint="a relative positional encoding sees j - i only; write the guard with i - j, or with tests "
                "on i alone and on j alone",
            )
        target = on_i if kind == "i" else on_j if kind == "j" else on_d
        if atom not in target:
            target.append(atom)
    return on_i, on_j, on_d


def _holds(body: PosBool, positions: tuple[int, int], fixed: dict[PosCompare, bool]) -> bool:
    """The guard with the atoms in ``fixed`` replaced by their given truth values."""
    if isinstance(body, PosCompare) and body in fixed:
        return fixed[body]
    if isinstance(body, PosNot):
        return not _holds(body.operand, positions, fixed)
    if isinstance(body, PosLogic):
        left = _holds(body.left, positions, fixed)
        right = _holds(body.right, positions, fixed)
        return (left and right) if body.op == "&&" else (left or right)
    return body.holds(positions)


# ============================================================================ heads


def copy_head(width: int, bos_dim: int, distance: int, rows: list[tuple[list[Fraction], Fraction]]) -> Head:
    """The copy head for ``distance`` (module docstring): one value coordinate per copied boolean."""
    key = [Fraction(0)] * width
    key[bos_dim] = Fraction(1)
    table = [Fraction(0)] * (2 * (distance + 1) + 1)  # offsets −(d+1) .. d+1; beyond −(d+1) clips to 0
    table[(distance + 1) - distance] = Fraction(COPY_SCORE)
    return Head(
        query=(zeros(width),),
        key=(tuple(key),),
        value=tuple(tuple(weights) for weights, _ in rows),
        output=(),  # filled by the builder
        query_bias=(Fraction(1),),
        key_bias=zeros(1),
        value_bias=tuple(bias for _, bias in rows),
        scoring="hardmax",
        causal=True,
        positional="rpe",
        rpe_bias=RelativeTable(tuple(table)),
    )


def periodic_rotary(modulus: int) -> Rotary:
    return Rotary((Frequency("turns", Fraction(1, modulus)), Frequency("turns", Fraction(0))), "interleaved")


def periodic_scores(modulus: int, residue: int, arith: Fixed) -> tuple[tuple[Fraction, ...], list[Fraction]]:
    """The query bias (c_ρ, −s_ρ, 1, 0) and its rotated first coordinate at every stream residue t mod M, computed
    with the interpreter's own rotation (rounded tables, one floor)."""
    frequency = periodic_rotary(modulus).frequencies[0]
    c, s = rotation(arith, frequency, residue)
    query = (c, -s, Fraction(1), Fraction(0))
    scores = []
    for t in range(modulus):
        ct, st = rotation(arith, frequency, t)
        scores.append(arith.round(query[0] * ct - query[1] * st))
    return query, scores


def periodic_head(width: int, bos_dim: int, letter_dims: list[int], node: PeriodicNode, arith: Fixed) -> Head:
    """The periodic head of ``node`` (module docstring); raises when the residues are not separated."""
    query, scores = periodic_scores(node.modulus, node.residue, arith)
    top = scores[node.residue]
    others = [score for t, score in enumerate(scores) if t != node.residue]
    if others and max(others) >= top:
        raise CraspError(
            f"a position test modulo {node.modulus} needs more fractional bits: with {arith.frac} the rounded "
            "rotation tables do not single out one residue",
            hint=f"compile with --frac {enough_periodic_frac(node.modulus)} or more",
        )
    unit = Fraction(1, arith.scale)
    level = PERIODIC_SCALE * top - unit
    key = [[Fraction(0)] * width for _ in range(4)]
    key[0][bos_dim] = Fraction(PERIODIC_SCALE)
    for d in letter_dims:
        key[2][d] = level
    value = [Fraction(0)] * width
    value[bos_dim] = Fraction(1)
    return Head(
        query=tuple(zeros(width) for _ in range(4)),
        key=tuple(tuple(row) for row in key),
        value=(tuple(value),),
        output=(),
        query_bias=tuple(query),
        key_bias=zeros(4),
        value_bias=zeros(1),
        scoring="hardmax",
        causal=True,
        positional="rope",
        rope=periodic_rotary(node.modulus),
    )


SCANNED_MODULI = 32  # up to this modulus the hint is the least format (a scan of 33·M² scores); past it, a formula


def enough_periodic_frac(modulus: int) -> int:
    """Fractional bits that single out every residue modulo M: the least (a scan) for small M; past
    ``SCANNED_MODULI`` a bound by formula, never a scan (M = 4001 took minutes). Each table entry is within
    ε = 2^-(f+1), so a score c_ρ·c_t + s_ρ·s_t is within √2·2^-f + 2ε² ≤ 1.5·2^-f (f ≥ 3) of cos(θ_ρ − θ_t)
    before its floor: residues are separated when 1 − cos(2π/M) > 4·2^-f, and 1 − cos x ≥ x²/2 − x⁴/24 with
    x = 2π/M ≥ 6/M (increasing for x < √6)."""
    if modulus <= SCANNED_MODULI:
        return least_periodic_frac(modulus)
    x = Fraction(6, modulus)
    gap = x * x / 2 - x**4 / 24
    frac = 3
    while Fraction(4, 1 << frac) >= gap:
        frac += 1
    return frac


def least_periodic_frac(modulus: int, start: int = 0) -> int:
    """The fewest fractional bits (≥ ``start``) whose rotation tables single out every residue modulo M."""
    for frac in range(start, 33):
        arith = Fixed(64, frac, "exact-sums")
        if all(_separated(modulus, residue, arith) for residue in range(modulus)):
            return frac
    raise CraspError(f"no fixed-point format up to 32 fractional bits separates the residues modulo {modulus}")


def _separated(modulus: int, residue: int, arith: Fixed) -> bool:
    _, scores = periodic_scores(modulus, residue, arith)
    others = [score for t, score in enumerate(scores) if t != residue]
    return not others or max(others) < scores[residue]

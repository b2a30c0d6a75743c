"""The witness convention the explorer reads (docs/explore.md): which inputs a counterexample names, how
their positions correspond, and which positions it points at.

Inputs ("roles"), in this order of precedence:

* ``inputs: {role: tokens, ...}`` — explicit, in the order written; or
* ``input`` followed by every other key ending in ``_input`` (``permuted_input``, ``other_input``, ...),
  in the order the witness lists them.

``tokens`` is a token list as ``witness.input_to_json`` writes it (symbols, or lists of exact numbers such
as ``["1/2", "0"]``); for alphabet models a plain string ``"abba"`` (or ``"a b b a"``) is accepted too.

Optional keys:

* ``alignment: {role: [p_0, ..., p_{n-1}]}`` — position i of that role's input corresponds to position
  ``p_i`` of the first role's input (values are compared along this correspondence); ``transposition:
  [a, b]`` is shorthand for swapping a and b in every role after the first (permutation-equivariance);
* ``positions: [p_first, p_second, ...]`` — one position of interest per role (e.g. the two colliding
  values of a contextual-mapping witness); ``position: p`` — a position of the last role's input (the
  other roles' positions follow the alignment: for permutation-equivariance, f(τX) at p vs f(X) at τ(p)).

Positions are user positions (0 = the first user token; a model's BOS token is not counted).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# how a property's witness summary names its inputs (docs/explore.md): the explorer uses these names, never the keys
ROLE_NAMES = {
    "contextual-mapping": {"input": "L", "other_input": "L′"},  # Yun et al.'s L and L′ (Def. 3.1)
    "permutation-equivariance": {"input": "X", "permuted_input": "τX"},
}


def role_name(kind: str, role: str) -> str:
    """The name of a witness input: the summary's (``L′``) where the property has one, else the key in words."""
    return ROLE_NAMES.get(kind, {}).get(role) or role.replace("_", " ")


@dataclass
class WitnessRoles:
    names: list[str]
    inputs: list[Any]  # as written in the witness (token lists or strings)
    alignment: dict[str, list[int]] = field(default_factory=dict)  # role -> first-role position of each position
    focus: dict[str, int] = field(default_factory=dict)  # role -> position of interest


def _int_list(value: Any) -> list[int] | None:
    if isinstance(value, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in value):
        return value
    return None


def roles_of(counterexample: dict[str, Any]) -> WitnessRoles:
    """The roles of a witness (possibly none, when it follows no convention)."""
    explicit = counterexample.get("inputs")
    if isinstance(explicit, dict) and explicit:
        names, inputs = [str(k) for k in explicit], list(explicit.values())
    else:
        names, inputs = [], []
        if "input" in counterexample:
            names.append("input")
            inputs.append(counterexample["input"])
        for key, value in counterexample.items():
            if key != "input" and key.endswith("_input"):
                names.append(key)
                inputs.append(value)
    roles = WitnessRoles(names, inputs)
    alignment = counterexample.get("alignment")
    transposition = _int_list(counterexample.get("transposition"))
    if isinstance(alignment, dict):
        roles.alignment = {str(k): v for k, v in alignment.items() if str(k) in names and _int_list(v) is not None}
    elif transposition is not None and len(transposition) == 2 and names:
        a, b = transposition
        for name, tokens in zip(names[1:], inputs[1:]):
            length = len(_sequence(tokens))
            if 0 <= a < length and 0 <= b < length:
                order = list(range(length))
                order[a], order[b] = b, a
                roles.alignment[name] = order
    positions = _int_list(counterexample.get("positions"))
    position = counterexample.get("position")
    if positions is not None and len(positions) == len(names):
        roles.focus = dict(zip(names, positions))
    elif isinstance(position, int) and not isinstance(position, bool) and names:
        roles.focus = {name: position for name in names}
        order = roles.alignment.get(names[-1])
        if order is not None and 0 <= position < len(order):
            roles.focus[names[0]] = order[position]
    return roles


def _sequence(tokens: Any) -> list:
    if isinstance(tokens, str):
        return tokens.split() if " " in tokens.strip() else list(tokens.strip())
    return list(tokens) if isinstance(tokens, (list, tuple)) else []

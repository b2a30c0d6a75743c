"""Regular languages for strings domains: ``strings: {..., language: {regex: "(a+b+){2}a+"}}``.

A small regular-expression syntax, parsed here (never evaluated as code), compiled to a deterministic automaton
whose word counts number the language's words directly: the domain enumerates the words of the language, never
Σ^n filtered. The syntax (docs/semantics.md, "Domains"):

* a **letter** is one character that is a symbol of the domain's alphabet (alphabets of one-character symbols
  only); ``.`` is any letter of the alphabet;
* ``RS`` concatenation, ``R|S`` alternation, ``(R)`` grouping;
* ``R*``, ``R+``, ``R?``, ``R{m}``, ``R{m,n}``, ``R{m,}`` repetition (m <= n <= 4096);
* ``()`` is the empty word; spaces are not allowed (write the letters together).

Pipeline: ``parse`` (text → a small tree), ``nfa`` (Thompson's construction), ``determinise`` (subset
construction; the dead state is dropped, a missing move is -1), then ``RegexLanguage``. ``Language``, the shape it
shares with the C-RASP form (``verify_tf.crasp.words``), counts the words of each length from each state
(``counts``: exact integers) and unranks ranks into words (``unrank``: the k-th word of length n in lexicographic
order of the alphabet as listed, vectorised over ranks). A state from which no accepted word of the remaining
length exists has count 0 there and is never entered: that is the trimming.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

MAX_REPEAT = 4096  # the largest m or n in {m,n} (the loader's MAX_LENGTH)
MAX_NFA_STATES = 200_000  # a larger expansion (nested counted repetitions) is refused
MAX_DFA_STATES = 20_000  # the subset construction gives up beyond this many states
MAX_DEPTH = 200  # nested parentheses
LIMIT = 1 << 62  # counts used to unrank must fit int64 with a margin (spaces.LIMIT)


class RegexError(ValueError):
    """A malformed or unsupported expression; ``column`` (1-based) points at the offending character."""

    def __init__(self, message: str, column: int, hint: str = ""):
        super().__init__(message)
        self.message, self.column, self.hint = message, column, hint


# ---------------------------------------------------------------- parse: text -> tree
# A tree is a tuple: ("letter", index) | ("empty",) | ("cat", parts) | ("alt", parts) | ("repeat", tree, m, n|None)


def parse(text: str, alphabet: Sequence[str]) -> tuple:
    """The tree of ``text`` over ``alphabet`` (one-character symbols), or ``RegexError`` at a column."""
    if any(len(symbol) != 1 for symbol in alphabet):
        long = next(symbol for symbol in alphabet if len(symbol) != 1)
        raise RegexError(
            f"a regex needs an alphabet of one-character symbols, and {long!r} is not one",
            1,
            "rename the symbols to single characters, or drop 'language'",
        )
    if not text:
        raise RegexError("the regex is empty", 1, "the empty word is written ()")
    parser = _Parser(text, tuple(alphabet))
    tree = parser.alternation(0)
    if parser.at < len(text):
        raise RegexError(f"unexpected {text[parser.at]!r}", parser.at + 1, "a ')' without its '('?")
    return tree


class _Parser:
    def __init__(self, text: str, alphabet: tuple[str, ...]):
        self.text, self.alphabet, self.at = text, alphabet, 0

    def peek(self) -> str:
        return self.text[self.at] if self.at < len(self.text) else ""

    def alternation(self, depth: int) -> tuple:
        parts = [self.concatenation(depth)]
        while self.peek() == "|":
            self.at += 1
            parts.append(self.concatenation(depth))
        return parts[0] if len(parts) == 1 else ("alt", tuple(parts))

    def concatenation(self, depth: int) -> tuple:
        parts = []
        start = self.at
        while self.peek() not in ("", "|", ")"):
            parts.append(self.repetition(depth))
        if not parts:
            raise RegexError(
                "an empty alternative" if self.peek() == "|" or start > 0 else "nothing to match",
                start + 1,
                "write () for the empty word, or R? for an optional R",
            )
        return parts[0] if len(parts) == 1 else ("cat", tuple(parts))

    def repetition(self, depth: int) -> tuple:
        tree = self.atom(depth)
        while self.peek() in ("*", "+", "?", "{"):
            mark = self.text[self.at]
            self.at += 1
            if mark == "*":
                tree = ("repeat", tree, 0, None)
            elif mark == "+":
                tree = ("repeat", tree, 1, None)
            elif mark == "?":
                tree = ("repeat", tree, 0, 1)
            else:
                low, high = self.bounds()
                tree = ("repeat", tree, low, high)
        return tree

    def bounds(self) -> tuple[int, int | None]:
        start = self.at - 1
        close = self.text.find("}", self.at)
        if close < 0:
            raise RegexError("'{' without its '}'", start + 1, "write R{m}, R{m,n} or R{m,}")
        body = self.text[self.at : close]
        pieces = body.split(",")
        if (
            len(pieces) > 2
            or not all(p.isdigit() for p in pieces[:1])
            or not all(p.isdigit() or (i == 1 and p == "") for i, p in enumerate(pieces))
        ):
            raise RegexError(f"expected {{m}}, {{m,n}} or {{m,}} with whole numbers, got {{{body}}}", start + 1)
        low = int(pieces[0])
        high: int | None = low if len(pieces) == 1 else (None if pieces[1] == "" else int(pieces[1]))
        if low > MAX_REPEAT or (high is not None and high > MAX_REPEAT):
            raise RegexError(f"a repetition count above {MAX_REPEAT}", start + 1)
        if high is not None and high < low:
            raise RegexError(f"{{{body}}}: n ({high}) is below m ({low})", start + 1)
        self.at = close + 1
        return low, high

    def atom(self, depth: int) -> tuple:
        char = self.peek()
        column = self.at + 1
        if char == "(":
            if depth >= MAX_DEPTH:
                raise RegexError(f"parentheses nested deeper than {MAX_DEPTH}", column)
            self.at += 1
            if self.peek() == ")":
                self.at += 1
                return ("empty",)
            tree = self.alternation(depth + 1)
            if self.peek() != ")":
                raise RegexError("'(' without its ')'", column, "close every group")
            self.at += 1
            return tree
        if char in ("*", "+", "?", "{"):
            raise RegexError(f"{char!r} repeats nothing", column, "put it after a letter or a group")
        if char == ".":
            self.at += 1
            return ("alt", tuple(("letter", i) for i in range(len(self.alphabet))))
        if char in self.alphabet:
            self.at += 1
            return ("letter", self.alphabet.index(char))
        raise RegexError(
            f"{char!r} is not a letter of the alphabet {{{', '.join(self.alphabet)}}}",
            column,
            "a regex uses the alphabet's letters, ( ) | * + ? {m,n} and . (spaces are not allowed)",
        )


# ---------------------------------------------------------------- nfa: Thompson's construction


@dataclass
class _Nfa:
    epsilon: list[list[int]] = field(default_factory=list)
    moves: list[list[tuple[int, int]]] = field(default_factory=list)  # (letter, target)

    def state(self) -> int:
        if len(self.epsilon) >= MAX_NFA_STATES:
            raise RegexError(f"the regex expands to more than {MAX_NFA_STATES} automaton states", 1)
        self.epsilon.append([])
        self.moves.append([])
        return len(self.epsilon) - 1


def nfa(tree: tuple) -> tuple[_Nfa, int, int]:
    """(automaton, start, accept): Thompson's construction, counted repetition unrolled."""
    automaton = _Nfa()
    start, accept = _build(automaton, tree)
    return automaton, start, accept


def _build(a: _Nfa, tree: tuple) -> tuple[int, int]:
    kind = tree[0]
    if kind == "letter":
        s, t = a.state(), a.state()
        a.moves[s].append((tree[1], t))
        return s, t
    if kind == "empty":
        s = a.state()
        return s, s
    if kind == "cat":
        s, t = _build(a, tree[1][0])
        for part in tree[1][1:]:
            u, v = _build(a, part)
            a.epsilon[t].append(u)
            t = v
        return s, t
    if kind == "alt":
        s, t = a.state(), a.state()
        for part in tree[1]:
            u, v = _build(a, part)
            a.epsilon[s].append(u)
            a.epsilon[v].append(t)
        return s, t
    _, inner, low, high = tree  # repeat
    s = t = a.state()
    for _ in range(low):
        u, v = _build(a, inner)
        a.epsilon[t].append(u)
        t = v
    if high is None:  # then R*: a loop
        u, v = _build(a, inner)
        end = a.state()
        a.epsilon[t] += [u, end]
        a.epsilon[v] += [u, end]
        return s, end
    end = a.state()
    a.epsilon[t].append(end)
    for _ in range(high - low):  # each optional copy may end the repetition
        u, v = _build(a, inner)
        a.epsilon[t].append(u)
        a.epsilon[v].append(end)
        t = v
    return s, end


# ---------------------------------------------------------------- determinise: subset construction


def determinise(automaton: _Nfa, start: int, accept: int, letters: int) -> tuple[np.ndarray, np.ndarray]:
    """(delta (S, letters) int64 with -1 for the dead state, accepting (S,) bool); state 0 is the start."""

    def closure(states: frozenset[int]) -> frozenset[int]:
        seen, stack = set(states), list(states)
        while stack:
            for nxt in automaton.epsilon[stack.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return frozenset(seen)

    first = closure(frozenset([start]))
    index = {first: 0}
    order = [first]
    delta: list[list[int]] = []
    at = 0
    while at < len(order):
        current = order[at]
        row = []
        for letter in range(letters):
            targets = frozenset(t for s in current for (x, t) in automaton.moves[s] if x == letter)
            if not targets:
                row.append(-1)
                continue
            target = closure(targets)
            if target not in index:
                if len(order) >= MAX_DFA_STATES:
                    raise RegexError(f"the regex needs more than {MAX_DFA_STATES} automaton states", 1)
                index[target] = len(order)
                order.append(target)
            row.append(index[target])
        delta.append(row)
        at += 1
    return np.array(delta, dtype=np.int64).reshape(len(order), letters), np.array([accept in s for s in order])


# ---------------------------------------------------------------- the language: counts and unranking


@dataclass(frozen=True, eq=False)
class Language:
    """The words of a language as a deterministic automaton: counted, unranked and walked from its state counts.

    One shape, two sources: a regular expression (``RegexLanguage``, here) and a C-RASP program read as a counter
    machine (``verify_tf.crasp.words.ProgramLanguage``). ``delta[q][a]`` is the state after letter a (the
    alphabet's index) from state q, -1 where no word continues; state 0 is the start. ``horizon``: None when the
    automaton is the language's own (exact for every length), else the length up to which it is exact (a
    counter machine explored up to the domain's ``max-length``: a state first reached after d letters is exact
    for the words of at most horizon − d more letters, which is all any length ≤ horizon asks of it).

    Equality, hashing, the cache key and a certificate's domain digest read ``identity()`` (the source and the
    automaton, plain data): a proof over a language is never taken for one over Σ^n or another language.
    """

    alphabet: tuple[str, ...]
    delta: tuple[tuple[int, ...], ...]  # (state, letter) -> state, -1: no word continues this way
    accepting: tuple[bool, ...]
    horizon: int | None

    @property
    def name(self) -> str:
        """How messages name the language: the regex, or the program's file."""
        raise NotImplementedError

    @staticmethod
    def compile(regex: str, alphabet: Sequence[str]) -> RegexLanguage:
        """The words of a regex: ``RegexLanguage.compile`` (kept on the shared type for its callers)."""
        return RegexLanguage.compile(regex, alphabet)

    def identity(self) -> tuple:
        """What tells this language from another: its source and its automaton."""
        return (type(self).__name__, self.name, self.alphabet, self.delta, self.accepting, self.horizon)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Language) and self.identity() == other.identity()

    def __hash__(self) -> int:  # delta can hold thousands of rows: hash the digest, computed once
        return hash(self.digest())

    def __repr__(self) -> str:  # the task fingerprint reads repr(domain): source, alphabet and automaton
        return (
            f"{type(self).__name__}({self.name!r}, {self.alphabet!r}, states={len(self.delta)}, digest={self.digest()})"
        )

    def digest(self) -> str:
        return self._digest

    @cached_property
    def _digest(self) -> str:  # written once into the instance's __dict__ (frozen dataclasses allow that)
        return hashlib.sha256(repr(self.identity()).encode()).hexdigest()[:16]

    def accepts(self, word: Sequence[str]) -> bool:
        """Whether ``word`` is a word of the language (read on the automaton)."""
        self._within(len(word))
        state = 0
        for letter in word:
            if letter not in self.alphabet:
                return False
            state = self.delta[state][self.alphabet.index(letter)]
            if state < 0:
                return False
        return self.accepting[state]

    def _within(self, length: int) -> None:
        if self.horizon is not None and length > self.horizon:
            raise ValueError(f"the automaton of {self.name} is exact up to length {self.horizon}, not {length}")

    def counts(self, longest: int) -> tuple[tuple[int, ...], ...]:
        """counts[m][q]: the words of length m that lead state q to acceptance (exact integers), m = 0..longest."""
        self._within(longest)
        rows = self._exact_rows  # grown once per language, never recomputed per length (``size`` asks each n)
        sink = self._delta_with_sink[:-1]  # (S, letters); the dead state S holds 0 below
        while len(rows) <= longest:
            previous = np.array((*rows[-1], 0), dtype=object)  # exact Python integers, added elementwise
            total = previous[sink[:, 0]]
            for letter in range(1, len(self.alphabet)):
                total = total + previous[sink[:, letter]]
            rows.append(tuple(int(c) for c in total))
        return tuple(rows[: longest + 1])

    def completable(self, shortest: int, longest: int) -> np.ndarray:
        """(longest + 1, S) booleans: [p, q] whether a prefix of length p that leads to state q extends to a word
        with a length in shortest..longest (a completion of m letters, max(0, shortest − p) <= m <= longest − p)."""
        nonzero = self._capped(longest)[: longest + 1, :-1] > 0  # [m, q]: some completion of exactly m letters
        below = np.vstack([np.zeros((1, nonzero.shape[1]), dtype=np.int64), np.cumsum(nonzero, axis=0)])
        p = np.arange(longest + 1)
        low, high = np.maximum(0, shortest - p), longest - p  # below[j]: the m < j with a completion
        return (below[high + 1] - below[np.minimum(low, high + 1)]) > 0

    def prefix_counts(self, shortest: int, longest: int) -> list[int]:
        """Per length n = 0..longest, the prefixes of length n of the words with a length in shortest..longest:
        the automaton's forward counts (the strings of n letters reaching each state) summed over the states from
        which such a word can still be completed (``completable``)."""
        completable = self.completable(shortest, longest)
        forward = [1] + [0] * (len(self.delta) - 1)
        found = []
        for n in range(longest + 1):
            found.append(sum(ways for q, ways in enumerate(forward) if completable[n][q]))
            step = [0] * len(forward)
            for q, ways in enumerate(forward):
                for target in self.delta[q]:
                    if target >= 0:
                        step[target] += ways
            forward = step
        return found

    def least_completion(self, state: int, length: int) -> tuple[int, ...]:
        """The lexicographically least string of ``length`` letters (indices in the alphabet's order) that leads
        ``state`` to acceptance: at each step the first letter from which the rest can still finish. There must be
        one (``counts(length)[length][state] > 0``)."""
        counts = self.counts(length)
        letters = []
        for left in range(length, 0, -1):
            letter = next(a for a, t in enumerate(self.delta[state]) if t >= 0 and counts[left - 1][t])
            letters.append(letter)
            state = self.delta[state][letter]
        return tuple(letters)

    @cached_property
    def _exact_rows(self) -> list[tuple[int, ...]]:
        return [tuple(int(a) for a in self.accepting)]

    def _capped(self, longest: int) -> np.ndarray:
        """counts capped at 2^62, as int64, with a zero column for the dead state (index -1 of ``delta``): at
        least rows 0..longest, all of them up to the horizon when there is one (one table for every length)."""
        table = self.__dict__.get("_capped_table")
        if table is None or len(table) <= longest:
            counts = self.counts(max(longest, self.horizon or 0))
            table = np.zeros((len(counts), len(self.delta) + 1), dtype=np.int64)
            for m, row in enumerate(counts):
                table[m, :-1] = [min(c, LIMIT) for c in row]
            object.__setattr__(self, "_capped_table", table)  # a cache, as cached_property writes it
        return table

    @cached_property
    def _delta_with_sink(self) -> np.ndarray:
        """delta as int64 with the dead state as the last index (S), which moves to itself."""
        states = len(self.delta)
        delta = np.array(self.delta, dtype=np.int64).reshape(states, len(self.alphabet))
        delta = np.where(delta < 0, states, delta)
        return np.vstack([delta, np.full((1, len(self.alphabet)), states, dtype=np.int64)])

    def __getstate__(self) -> dict:  # pickled (to a worker) without the caches
        return {key: value for key, value in self.__dict__.items() if not key.startswith("_")}

    def count(self, length: int) -> int:
        """The words of this length."""
        return self.counts(length)[length][0]

    def unrank(self, length: int, ranks: np.ndarray) -> np.ndarray:
        """Letter-index rows (len(ranks), length): the words of ``length`` with these ranks in lexicographic
        order (letters ordered as the alphabet lists them). Ranks must be below ``count(length)`` <= 2^62."""
        self._within(length)
        ranks = np.asarray(ranks, dtype=np.int64)
        rows = np.empty((len(ranks), length), dtype=np.int64)
        if len(ranks) == 0:
            return rows
        table = self._capped(length)  # (>= length + 1, S + 1): the dead state is the last column, count 0
        delta = self._delta_with_sink
        state = np.zeros(len(ranks), dtype=np.int64)
        r = ranks.copy()
        for p in range(length):
            remaining = length - p - 1
            undecided = np.ones(len(ranks), dtype=bool)
            for letter in range(len(self.alphabet)):
                target = delta[state, letter]
                completions = table[remaining, target]
                take = undecided & (r < completions)
                rows[take, p] = letter
                r = np.where(undecided & ~take, r - completions, r)
                state = np.where(take, target, state)
                undecided &= ~take
            if undecided.any():
                raise ValueError(f"rank out of range for words of length {length} of {self.name}")
        return rows

    def words(self, length: int) -> Iterator[tuple[str, ...]]:
        """The words of this length in lexicographic order (a depth-first walk that never enters a state whose
        count for the remaining length is 0)."""
        counts = self.counts(length)
        letters = range(len(self.alphabet))

        def walk(state: int, remaining: int, prefix: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
            if remaining == 0:
                yield prefix
                return
            for letter in letters:
                target = self.delta[state][letter]
                if target >= 0 and counts[remaining - 1][target]:
                    yield from walk(target, remaining - 1, (*prefix, self.alphabet[letter]))

        if counts[length][0]:
            yield from walk(0, length, ())


@dataclass(frozen=True, eq=False)
class RegexLanguage(Language):
    """The words of ``regex`` over ``alphabet``: its deterministic automaton (trimmed by counts), every length."""

    regex: str

    @staticmethod
    def compile(regex: str, alphabet: Sequence[str]) -> RegexLanguage:
        tree = parse(regex, alphabet)
        automaton, start, accept = nfa(tree)
        delta, accepting = determinise(automaton, start, accept, len(alphabet))
        return RegexLanguage(
            tuple(alphabet),
            tuple(tuple(int(x) for x in row) for row in delta),
            tuple(bool(x) for x in accepting),
            None,
            regex,
        )

    @property
    def name(self) -> str:
        return self.regex

    def identity(self) -> tuple:  # as before the C-RASP form existed: earlier certificates' digests still hold
        return (self.regex, self.alphabet, self.delta, self.accepting)

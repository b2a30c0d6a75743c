"""Regenerate the tracr exports in this folder: compile tracr's library programs (and four programs tracr
miscompiles) and write each as a ``verify-tf-tracr/1`` export (``verify_tf.tracr_export``; docs/tracr.md).

    pip install -e '.[tracr]'
    python examples/tracr/export_library.py            # every program
    python examples/tracr/export_library.py sort hist  # some

This runs tracr (and the RASP programs' Python functions); the specs in specs/tracr-*.yaml only read the
JSON files it writes. RASP labels carry tracr's process-wide counter (``map_5``), so programs are built in
this file's order, one process, to keep the files stable.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tracr.compiler import lib
from tracr.rasp import rasp

from verify_tf.tracr_export import compile_and_export

HERE = Path(__file__).resolve().parent
ABC, PARENS, DYCK2, NUMBERS = ("a", "b", "c"), ("(", ")", "a"), ("(", ")", "{", "}"), (1, 2, 3, 4)


def nary():
    is_a = (rasp.tokens == "a").named("is_a")
    return lib.make_nary_sequencemap(lambda t, i, b: (i + (1 if b else 0)) % 3, rasp.tokens, rasp.indices, is_a).named(
        "nary"
    )


def frac_gt_half():
    """Miscompiled: tracr assumes a numerical mean takes the values {v/len}, so 2/3 is read as 1/2."""
    frac = lib.make_frac_prevs(rasp.tokens == "a")
    return rasp.numerical(rasp.Map(lambda x: 1 if x > 0.5 else 0, frac)).named("gt_half")


def negative_map():
    """Miscompiled: a categorical->numerical map puts its table before the ReLU, so -1 becomes 0."""
    return rasp.numerical(rasp.Map(lambda t: -1 if t == "a" else 1, rasp.tokens)).named("sign")


def bos_leak():
    """Miscompiled: a numerical aggregate that selects nothing attends to BOS, whose residual carries z = 1."""
    frac = lib.make_frac_prevs(rasp.tokens == "a")
    z = rasp.numerical(rasp.Map(lambda x: 1 if x == 0 else 0, frac)).named("z")
    previous = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LT).named("previous")
    return rasp.numerical(rasp.Aggregate(previous, z, default=0)).named("agg")


def prev_a_wide():
    """Soft in float: a 225-valued select (every head's logits x 1/sqrt(227)) beside a numerical select that is
    empty at position 0, so BOS's 50-point lead shrinks to 3.3 and the float model leaks weight to the tokens."""
    tag = rasp.SequenceMap(lambda t, i: (t, i), rasp.tokens, rasp.indices).named("tag")
    tag2 = rasp.SequenceMap(lambda t, i: (t, 4 - i), rasp.tokens, rasp.indices).named("tag2")
    pair = rasp.SequenceMap(lambda x, y: (x, y), tag, tag2).named("pair")  # 15 x 15 = 225 values
    same = rasp.Aggregate(rasp.Select(pair, pair, rasp.Comparison.EQ).named("self"), rasp.tokens).named("same")
    is_a = rasp.numerical(rasp.Map(lambda t: 1 if t == "a" else 0, same)).named("is_a")
    prev = rasp.Select(rasp.indices, rasp.indices, lambda k, q: k == q - 1).named("prev")
    return rasp.numerical(rasp.Aggregate(prev, is_a, default=0)).named("prev_a")


def prev_a_wide_gt0():
    """The same, read through a categorical ``x > 0``: the leaked weight crosses the threshold."""
    return rasp.Map(lambda x: 1 if x > 0 else 0, prev_a_wide()).named("prev_a_cat")


PREV_A_WIDE = (
    "pair = (tokens, indices) x (tokens, 4 - indices) [225 values]; same = Aggregate(Select(pair, pair, EQ), "
    "tokens); numerical(Aggregate(Select(indices, indices, k == q - 1), numerical(Map(t == 'a', same)), default=0))"
)

# name: (builder, vocabulary, max_seq_len, source)
PROGRAMS = {
    "length": (lambda: lib.make_length(), ABC, 8, "lib.make_length()"),
    "length-numerical": (lambda: rasp.numerical(lib.make_length()), ABC, 6, "rasp.numerical(lib.make_length())"),
    "reverse": (lambda: lib.make_reverse(rasp.tokens), ABC, 6, "lib.make_reverse(rasp.tokens)"),
    "hist": (lambda: lib.make_hist(), ABC, 7, "lib.make_hist()"),
    "sort-unique": (
        lambda: lib.make_sort_unique(rasp.tokens, rasp.tokens),
        NUMBERS,
        5,
        "lib.make_sort_unique(rasp.tokens, rasp.tokens)",
    ),
    "sort": (
        lambda: lib.make_sort(rasp.tokens, rasp.tokens, max_seq_len=5, min_key=1),
        NUMBERS,
        5,
        "lib.make_sort(rasp.tokens, rasp.tokens, max_seq_len=5, min_key=1)",
    ),
    "sort-freq": (lambda: lib.make_sort_freq(max_seq_len=5), NUMBERS, 5, "lib.make_sort_freq(max_seq_len=5)"),
    "frac-prevs": (lambda: lib.make_frac_prevs(rasp.tokens == "a"), ABC, 7, 'lib.make_frac_prevs(rasp.tokens == "a")'),
    "pair-balance": (
        lambda: lib.make_pair_balance(rasp.tokens, "(", ")"),
        PARENS,
        5,
        'lib.make_pair_balance(rasp.tokens, "(", ")")',
    ),
    "shuffle-dyck": (lambda: lib.make_shuffle_dyck(pairs=["()"]), PARENS, 5, 'lib.make_shuffle_dyck(pairs=["()"])'),
    "shuffle-dyck2": (lambda: lib.make_shuffle_dyck2(), DYCK2, 5, "lib.make_shuffle_dyck2()"),
    "shift-by-1": (lambda: lib.shift_by(1, rasp.tokens), ABC, 7, "lib.shift_by(1, rasp.tokens)"),
    "detect-pattern": (
        lambda: lib.detect_pattern(rasp.tokens, "abc"),
        ABC,
        5,
        'lib.detect_pattern(rasp.tokens, "abc")',
    ),
    "count-less-freq": (lambda: lib.make_count_less_freq(n=2), ABC, 5, "lib.make_count_less_freq(n=2)"),
    "count": (lambda: lib.make_count(rasp.tokens, "a"), ABC, 7, 'lib.make_count(rasp.tokens, "a")'),
    "nary-sequencemap": (
        nary,
        ABC,
        5,
        "lib.make_nary_sequencemap(lambda t, i, b: (i + (1 if b else 0)) % 3, "
        "rasp.tokens, rasp.indices, rasp.tokens == 'a')",
    ),
    # the miscompilations
    "frac-gt-half": (
        frac_gt_half,
        ABC,
        5,
        'rasp.numerical(rasp.Map(lambda x: 1 if x > 0.5 else 0, lib.make_frac_prevs(rasp.tokens == "a")))',
    ),
    "negative-map": (
        negative_map,
        ("a", "b"),
        5,
        'rasp.numerical(rasp.Map(lambda t: -1 if t == "a" else 1, rasp.tokens))',
    ),
    "length-10": (lambda: lib.make_length(), ("a",), 10, "lib.make_length()  # max_seq_len 10"),
    "length-numerical-7": (
        lambda: rasp.numerical(lib.make_length()),
        ("a",),
        7,
        "rasp.numerical(lib.make_length())  # max_seq_len 7",
    ),
    "bos-leak": (
        bos_leak,
        ("a", "b"),
        5,
        "z = numerical(Map(x == 0, frac_prevs(tokens == 'a'))); "
        "numerical(Aggregate(Select(indices, indices, LT), z, default=0))",
    ),
    # soft in float (tracr's scale with the largest head's key size), exact in hardmax
    "prev-a-wide": (prev_a_wide, ABC, 5, PREV_A_WIDE),
    "prev-a-wide-gt0": (prev_a_wide_gt0, ABC, 5, f"Map(x > 0, {PREV_A_WIDE})"),
}


def main(names: list[str]) -> None:
    for name in names or list(PROGRAMS):
        build, vocabulary, max_seq_len, source = PROGRAMS[name]
        start = time.perf_counter()
        _, document = compile_and_export(build(), vocabulary, max_seq_len, HERE / f"{name}.json", source=source)
        snap = document["snap"]
        print(
            f"{name}: {time.perf_counter() - start:.1f} s, {document['checked']['inputs']} inputs checked against "
            f"rasp.evaluate, snap denominators {snap['denominators']}, largest error {snap['max_abs_error']}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])

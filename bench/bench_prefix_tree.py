"""Benchmark: the prefix-tree evaluator against word-by-word (padded) evaluation, on the shape of the yang exports.

Random causal softmax post-LN models of width 32 (feed-forward 64, one head, BOS) in fixed point 24.14, as the
``yang-lk-depth --export`` models are read; the words of L_3 (``a+b+a+``) up to ``--length``. Per depth:

* compile: seconds to compile the batched program at ``--length`` (interval bounds; paid once per model);
* prefix tree: CPU ms per prefix over the first ``--nodes`` prefixes of a depth-first walk (batches of 1,024);
* padded words: CPU ms per word, ``--words`` words of L_3 of length ``--length`` (the longest: what a word costs
  the padded scan at the end of the domain);
* the same two with LayerNorm on Python integers (``layer_norm_split`` switched off), the path before it.

    python bench/bench_prefix_tree.py --length 100 --depths 1,2,4
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from verify_tf.batched import BatchedEvaluator, normalization
from verify_tf.batched.prefix_tree import PrefixTreeEvaluator
from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.contract import CountingGoal
from verify_tf.engines.enumerate.prefix_scan import BATCH, _Tree
from verify_tf.regular import RegexLanguage
from verify_tf.semantics.arithmetic import Fixed


def model_of(depth: int, length: int):
    return random_model(
        RandomConfig(
            seed=depth,
            width=32,
            layers=depth,
            heads=1,
            ffn_width=64,
            scoring="softmax",
            causal=True,
            alphabet=("a", "b"),
            bos="^",
            layernorm="post",
            max_length=length,
        )
    )


def walk(evaluator: PrefixTreeEvaluator, tree: _Tree, length: int, nodes: int) -> int:
    """Depth first over the tree in batches, as the scan walks it, until ``nodes`` prefixes are evaluated."""
    pending: list = []

    def push(level, states: np.ndarray) -> None:
        if level.depth >= length:
            return
        up, letters, targets = tree.expand(level, states)
        for start in reversed(range(0, len(up), BATCH)):
            piece = slice(start, start + BATCH)
            pending.append((level, up[piece], letters[piece], targets[piece]))

    push(evaluator.root(), np.zeros(1, dtype=np.int64))
    done = 0
    while pending and done < nodes:
        parent, up, letters, targets = pending.pop()
        child = evaluator.children(parent, up, letters)
        done += len(child)
        push(child, targets)
    return done


def measure(depth: int, length: int, nodes: int, words: int) -> dict[str, float]:
    model, arith = model_of(depth, length), Fixed(24, 14)
    language = RegexLanguage.compile("a+b+a+", ("a", "b"))
    tree = _Tree(language, CountingGoal(("a", "b"), 1, length, least="prefix", language=language))
    batched = BatchedEvaluator(model, arith, ["a", "b"], backend="numpy", device="cpu")
    begin = time.process_time()
    batched.compiled(length)
    compile_seconds = time.process_time() - begin
    rows = language.unrank(length, np.arange(min(words, language.count(length))))
    out = {"compile_s": compile_seconds}
    split = normalization.layer_norm_split
    for label, switch in (("", split), ("_wide_ln", lambda *a: None)):
        normalization.layer_norm_split = switch  # type: ignore[assignment]
        try:
            evaluator = PrefixTreeEvaluator(model, arith, ["a", "b"], length, batched)
            begin = time.process_time()
            done = walk(evaluator, tree, length, nodes)
            out[f"tree_ms{label}"] = 1e3 * (time.process_time() - begin) / done
            begin = time.process_time()
            for start in range(0, len(rows), 256):
                batched.values(rows[start : start + 256], "readout")
            out[f"padded_ms{label}"] = 1e3 * (time.process_time() - begin) / len(rows)
        finally:
            normalization.layer_norm_split = split
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--length", type=int, default=100)
    parser.add_argument("--depths", default="1,2,4")
    parser.add_argument("--nodes", type=int, default=20_000)
    parser.add_argument("--words", type=int, default=512)
    args = parser.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.processor() or platform.machine()}")
    print(f"# L_3 up to {args.length}, 24.14 post-LN width 32, CPU time")
    print(
        "| depth | compile (s) | prefix tree (ms/prefix) | padded words (ms/word) | tree, LN on Python ints "
        "| words, LN on Python ints |"
    )
    print("|---|---|---|---|---|---|")
    for depth in (int(d) for d in args.depths.split(",")):
        m = measure(depth, args.length, args.nodes, args.words)
        print(
            f"| {depth} | {m['compile_s']:.1f} | {m['tree_ms']:.3f} | {m['padded_ms']:.2f} | "
            f"{m['tree_ms_wide_ln']:.3f} | {m['padded_ms_wide_ln']:.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()

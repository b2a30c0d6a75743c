"""Benchmark of the SMT engine: encode / solve time against exhaustive enumeration, and solvers compared.

For a ladder of random hardmax models (growing width, depth, length, grid), the query "some readout leaves
[-B, B]" with a bound B that holds (so the answer is a proof: the hard case) is encoded and solved by z3
(QF_LIA), cvc5 (QF_LIA) and bitwuzla (QF_BV translation) where installed, and the same domain is
enumerated by the batched evaluator (``enumerate``'s kernel; timed on a sample and extrapolated when the domain is
large).

    python bench/bench_smt.py [--timeout 30] [--quick]

Prints a Markdown table (docs/smt.md holds the measured one).
"""

from __future__ import annotations

import argparse
import random
import time
from fractions import Fraction

import z3

from verify_tf.batched import BatchedEvaluator
from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.domain import GridDomain
from verify_tf.semantics import Exact, Fixed, evaluate
from verify_tf.spaces import InputSpace
from verify_tf.symbolic import foreign
from verify_tf.symbolic.encoder import encode_model
from verify_tf.symbolic.inputs import grid_input
from verify_tf.symbolic.solve import smt2_text, solve
from verify_tf.symbolic.values import Builder, Sym

LADDER = [
    # name, width, layers, ffn, length, grid step, arithmetic
    ("d1 L1 n2", 1, 1, 0, 2, Fraction(1, 4), Exact()),
    ("d2 L1 n3", 2, 1, 2, 3, Fraction(1, 2), Exact()),
    ("d2 L1 n3 fixed", 2, 1, 2, 3, Fraction(1, 4), Fixed(10, 4)),
    ("d2 L1 n4", 2, 1, 2, 4, Fraction(1, 4), Exact()),
    ("d2 L2 n3", 2, 2, 2, 3, Fraction(1, 2), Exact()),
    ("d2 L2 n3 fixed", 2, 2, 2, 3, Fraction(1, 4), Fixed(10, 4)),
    ("d3 L2 n4", 3, 2, 3, 4, Fraction(1, 2), Exact()),
]


def bound_query(model, arith, domain, bound):
    builder = Builder()
    inp = grid_input(domain, builder)
    trace = encode_model(model, arith, inp, builder)
    outside = []
    for q in trace.readout:
        outside += [z3.Not(builder.ge(q, Sym.const(-bound))), z3.Not(builder.ge(Sym.const(bound), q))]
    return builder.assertions + [z3.Or(outside)], inp.index_terms, builder.stats


def enumeration_seconds(model, arith, domain, budget_s: float = 3.0) -> tuple[float, bool]:
    """Seconds for the batched evaluator (``enumerate``'s kernel, numpy on the CPU) to evaluate every input's
    readout (extrapolated from the chunks done in ``budget_s`` when the domain is larger)."""
    space = InputSpace(domain)
    evaluator = BatchedEvaluator(model, arith, space.tokens, backend="numpy", device="cpu")
    size, done = space.count(), 0
    start = time.perf_counter()
    for chunk in space.chunks(min(evaluator.chunk_size(domain.length), 1 << 16)):
        evaluator.values(chunk.rows, "readout")
        done += len(chunk.rows)
        if time.perf_counter() - start > budget_s:
            break
    elapsed = time.perf_counter() - start
    return elapsed * size / done, done < size


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--quick", action="store_true", help="the first three rungs only")
    args = parser.parse_args()
    solvers = ["z3", *foreign.available()]
    print("| model | domain | encode s | " + " | ".join(f"{s} s" for s in solvers) + " | enumerate s |")
    print("|---|---|---|" + "---|" * len(solvers) + "---|")
    for name, width, layers, ffn, length, step, arith in LADDER[: 3 if args.quick else None]:
        model = random_model(
            RandomConfig(
                seed=5,
                width=width,
                layers=layers,
                ffn_width=ffn,
                scoring="hardmax",
                weight_range=Fraction(1),
                denominator=4,
            )
        )
        domain = GridDomain.regular(width, step, length, lo=Fraction(-1), hi=Fraction(1))
        random.seed(0)
        sample = [tuple(random.choice(domain.tokens) for _ in range(length)) for _ in range(200)]
        top = max(abs(q) for x in sample for q in evaluate(model, arith, x).readout)
        bound = 4 * top + 4  # loose enough to hold: the solver has to prove it
        start = time.perf_counter()
        assertions, variables, _ = bound_query(model, arith, domain, bound)
        smt2_text(assertions)
        encode = time.perf_counter() - start
        cells = []
        for solver in solvers:
            answer = solve(assertions, variables, solver, args.timeout, 0, None)
            if answer.status == "unsat":
                label = f"{answer.seconds:.2f}"
            elif answer.status == "unknown" and answer.seconds >= args.timeout - 1:
                label = f">{args.timeout:g}"
            else:  # a wrong "sat" on a true bound, or a solver failure: show it, never hide it
                label = f"{answer.status} ({answer.reason[:40]})"
            cells.append(label)
        enum_s, extrapolated = enumeration_seconds(model, arith, domain)
        enum = f"{'~' if extrapolated else ''}{enum_s:.3g}"
        print(f"| {name} | {domain.size():,} | {encode:.2f} | " + " | ".join(cells) + f" | {enum} |", flush=True)


if __name__ == "__main__":
    main()

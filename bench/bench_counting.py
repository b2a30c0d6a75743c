"""Causal models as counter machines (engine ``counting``) beside string enumeration (engine ``enumerate``).

Prints the markdown tables of docs/performance.md, "Causal models as counter machines":

1. **softmax rewrite**: specs/counting-softmax-rewrite.yaml's one-layer causal softmax model (scores depending on
   the key, 16/8) against its exact rewrite (equivalent-to on the readout): every string up to N = 100 and every
   length by counting; enumeration's largest N proved within the budget;
2. **C-RASP with softmax-bos heads**: programs compiled with ``heads: softmax-bos`` (2 fractional bits): the largest N
   counting reaches in the budget (up to 100) and every length, beside enumeration's largest N;
3. **merging**: random causal softmax models, two layers, width 4, at 16/8, 8/4 and 6/3: classes per layer, states
   per length, how far counting gets, and when it says merging does not pay;
4. **positions** (issue 41): positional C-RASP programs (the shipped aa_star, copy4, increment, and
   examples/crasp/positional/) compiled at 5 bits, against their own programs at every length: verdict, merged
   states, the window (the program's longest guard window / the model's longest head window) and the modulus
   (the period of the program's positions / of the model's RoPE tables), wall and CPU seconds (this process and
   its children), the load average before each row;
5. **trained** (``--trained NAME-check.yaml``, the check spec ``verify-tf experiment prefix-labels`` writes beside
   its model): the same columns for the trained model against its program, re-quantized at each precision given
   (``--precision 16/8`` ..., default 16/8, 8/4, 6/3), beside enumeration.

Usage: ``python bench/bench_counting.py [--seconds 60] [--only rewrite,crasp,merging,positions] [--trained
results/prefix-labels-majority-check.yaml --precision 16/8]``. Times are wall seconds of this process on the
machine it runs on (say which, and its load, beside the table).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import re
import resource
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

from verify_tf.api import check
from verify_tf.builders.crasp_compiler import compile_program
from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.crasp import load_program
from verify_tf.crasp.machine import ProgramMachine
from verify_tf.domain import StringDomain
from verify_tf.engines.counting.counters import CounterModel
from verify_tf.semantics import Fixed
from verify_tf.spec import load_spec, load_spec_text

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "crasp"
ENUMERATION_LENGTHS = (10, 12, 14, 16, 18, 20, 22)


def run(model, arith, domain, prop, options, engine, seconds):
    began = time.perf_counter()
    verdict = check(model, arith, domain, prop, options, engine=engine, timeout=seconds, device="cpu")
    return verdict, time.perf_counter() - began


def enumeration_reach(model, arith, alphabet, prop, options, seconds, min_length=1) -> str:
    """The largest N of ENUMERATION_LENGTHS that enumeration decides within ``seconds`` (each N its own budget)."""
    reached = "none"
    for n in ENUMERATION_LENGTHS:
        verdict, took = run(model, arith, StringDomain(alphabet, min_length, n), prop, options, "enumerate", seconds)
        if verdict.status not in ("proved", "refuted"):
            return f"{reached} (N = {n}: {verdict.status} after {took:.0f} s)"
        reached = f"{n} ({verdict.status}, {took:.1f} s)"
        if verdict.status == "refuted":
            return reached
    return reached


def counting_row(name: str, verdict, took: float) -> str:
    st = verdict.statistics
    model = st.get("model", {})
    per_length = st.get("states_per_length", [])
    shown = ", ".join(str(n) for n in per_length[:8]) + (f", … {per_length[-1]}" if len(per_length) > 8 else "")
    streams = "/".join(str(v) for v in model.get("streams_per_layer", {}).values())
    classes = "/".join(str(v) for v in model.get("classes_per_head", {}).values()) or "sums"
    return (
        f"| {name} | {verdict.label} | {took:.1f} | {st.get('explored_up_to', '')} | {streams} | {classes} | "
        f"{shown} | {st.get('largest_count', '')} |"
    )


HEADER = (
    "| model | counting verdict | s | N explored | streams per layer | classes per head | states per length | "
    "largest count |\n|---|---|---|---|---|---|---|---|"
)


def rewrite(seconds: float) -> None:
    spec = load_spec(ROOT / "specs" / "counting-softmax-rewrite.yaml")
    other = spec.properties[0].options.model
    options = {"model": other, "on": "readout"}
    alphabet = ("a", "b")
    print("\n#### One-layer causal softmax model and its exact rewrite (equivalent-to, 16/8)\n")
    print(HEADER)
    for n, lengths in ((100, "domain"), (100, "all")):
        verdict, took = run(
            spec.model,
            spec.arithmetic,
            StringDomain(alphabet, 1, n),
            "equivalent-to",
            {**options, "lengths": lengths},
            "counting",
            seconds,
        )
        print(counting_row(f"rewrite, N = {n}, lengths: {lengths}", verdict, took))
    reach = enumeration_reach(spec.model, spec.arithmetic, alphabet, "equivalent-to", options, seconds)
    print(f"\nString enumeration (equivalent-to, both models on every string): largest N decided: {reach}.")


CRASP = [
    ("majority.cr", "ab", "prefix"),
    ("L1.cr", "ab", "accept"),
    ("dyck1.cr", "()", "prefix"),
    ("L2.cr", "ab", "accept"),
    ("L3.cr", "ab", "accept"),
]


def crasp(seconds: float) -> None:
    print("\n#### C-RASP programs compiled with softmax-bos heads (2 fractional bits, exact-sums)\n")
    print(HEADER.replace("|\n|", "| enumeration: largest N |\n|") + "---|")
    for name, alphabet, mode in CRASP:
        compiled = compile_program(load_program(EXAMPLES / name), frac=2, heads="softmax-bos")
        options = {"program": EXAMPLES / name, "mode": mode}
        for lengths in ("domain", "all"):
            domain = StringDomain(tuple(alphabet), 1, 100 if lengths == "domain" else 10)
            verdict, took = run(
                compiled.model,
                compiled.arithmetic,
                domain,
                "crasp-equivalence",
                {**options, "lengths": lengths},
                "counting",
                seconds,
            )
            row = counting_row(
                f"{name} ({mode}), {'N = 100' if lengths == 'domain' else 'every length'}", verdict, took
            )
            reach = (
                enumeration_reach(
                    compiled.model, compiled.arithmetic, tuple(alphabet), "crasp-equivalence", options, seconds
                )
                if lengths == "domain"
                else ""
            )
            print(f"{row} {reach} |")


def merging(seconds: float) -> None:
    print("\n#### Random causal softmax models, two layers, width 4, alphabet {a, b}: how precision moves merging\n")
    print(HEADER)
    for seed in (0, 1, 2):
        for bits, frac in ((16, 8), (8, 4), (6, 3)):
            model = random_model(
                RandomConfig(
                    seed=seed,
                    width=4,
                    layers=2,
                    heads=1,
                    ffn_width=4,
                    scoring="softmax",
                    causal=True,
                    alphabet=("a", "b"),
                    bos="^",
                    denominator=4,
                    weight_range=Fraction(1),
                )
            )
            verdict, took = run(
                model,
                Fixed(bits, frac),
                StringDomain(("a", "b"), 0, 100),
                "output-bounds",
                {"hi": 10**6},
                "counting",
                seconds,
            )
            print(counting_row(f"seed {seed}, {bits}/{frac}", verdict, took))


def at_precision(check: Path, bits: int, frac: int):
    """The experiment's check spec with the model quantized to ``bits``/``frac`` and the arithmetic to match."""
    text = check.read_text()
    text = re.sub(r"quantize: \{bits: \d+, frac: \d+\}", f"quantize: {{bits: {bits}, frac: {frac}}}", text)
    text = re.sub(r"mode: fixed, bits: \d+, frac: \d+", f"mode: fixed, bits: {bits}, frac: {frac}", text)
    return load_spec_text(text, str(check), check.parent)


def trained(check: Path, precisions: list[tuple[int, int]], seconds: float) -> None:
    """The model ``verify-tf experiment prefix-labels`` trained, re-quantized at each precision, against its program
    with the spec's own options (mode prefix, the threshold the readout's bias gives), beside enumeration."""
    print(f"\n#### Trained model of {check.name}, against its program (mode: prefix)\n")
    print(HEADER.replace("|\n|", "| enumeration: largest N |\n|") + "---|")
    for bits, frac in precisions:
        spec = at_precision(check, bits, frac)
        prop = spec.properties[0]
        alphabet = spec.domain.alphabet
        options = {**dataclasses.asdict(prop.options), "lengths": "domain"}
        for lengths in ("domain", "all"):
            domain = StringDomain(alphabet, 1, spec.domain.max_length)  # the spec's own (its bounded part too)
            verdict, took = run(
                spec.model,
                spec.arithmetic,
                domain,
                "crasp-equivalence",
                {**options, "lengths": lengths},
                "counting",
                seconds,
            )
            found = verdict.counterexample["string"] if verdict.status == "refuted" else ""
            shown = f" ({len(found)} letters: {found[:12]}{'…' if len(found) > 12 else ''})" if found else ""
            what = f"N up to {spec.domain.max_length}" if lengths == "domain" else "every length"
            row = counting_row(f"{bits}/{frac}, {what}{shown}", verdict, took)
            reach = (
                enumeration_reach(spec.model, spec.arithmetic, alphabet, "crasp-equivalence", options, seconds)
                if lengths == "domain"
                else ""
            )
            print(f"{row} {reach} |")


POSITIONS = [
    ("aa_star.cr", "ab", "aa_star.cr"),
    ("copy4.cr", "abc", "copy4.cr"),
    ("increment.cr", "01", "increment.cr"),
    ("positional/recent_b.cr", "ab", "positional/recent_b.cr"),
    ("positional/aa_star.cr", "ab", "positional/aa_star.cr"),
    ("positional/contains_ab.cr", "ab", "positional/contains_ab.cr"),
    ("positional/copy4.cr", "abc", "positional/copy4.cr"),
    ("positional/increment.cr", "01", "positional/increment.cr"),
    ("positional/dyck1_mod4.cr", "ab", "positional/dyck1_mod4.cr"),
    ("positional/ab_ba_factors.cr", "ab", "positional/ab_ba_factors.cr"),
    ("positional/a_then_b.cr", "ab", "positional/a_then_b.cr"),
    ("positional/first_equals_last.cr", "ab", "positional/first_equals_last.cr"),
    ("positional/ab_ba_factors.cr", "ab", "positional/first_equals_last.cr"),
]


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def positions(seconds: float) -> None:
    print("\n#### Positional C-RASP programs, compiled at 5 bits, against their programs at every length\n")
    print(
        "| model of | against | verdict | states | window (program / model) | modulus (program / model) | wall s | "
        "CPU s | load |\n|---|---|---|---|---|---|---|---|---|"
    )
    for name, alphabet, reference in POSITIONS:
        program = load_program(EXAMPLES / name)
        compiled = compile_program(program, bits=5)
        shape = ProgramMachine(load_program(EXAMPLES / reference)).shape
        counter = CounterModel.of(compiled.model, compiled.arithmetic)
        windows = f"{shape.window if shape else 0} / {max(counter.reach.values(), default=0)}"
        moduli = f"{shape.modulus if shape else 1} / {counter.period}"
        load = os.getloadavg()[0]
        cpu, began = _cpu(), time.perf_counter()
        verdict = check(
            compiled.model,
            compiled.arithmetic,
            StringDomain(tuple(alphabet), 1, 8),
            "crasp-equivalence",
            {"program": EXAMPLES / reference, "lengths": "all"},
            engine="counting",
            timeout=seconds,
            device="cpu",
        )
        took, used = time.perf_counter() - began, _cpu() - cpu
        states = verdict.statistics.get("states", "")
        print(
            f"| {name} | {reference} | {verdict.label} | {states} | {windows} | {moduli} | {took:.1f} | {used:.1f} | "
            f"{load:.1f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="budget of each check")
    parser.add_argument("--only", default="rewrite,crasp,merging")
    parser.add_argument(
        "--trained", type=Path, help="the check spec verify-tf experiment prefix-labels wrote (NAME-check.yaml)"
    )
    parser.add_argument("--precision", action="append", default=[], help="bits/frac for --trained (repeatable)")
    args = parser.parse_args()
    machine = f"{platform.node()} {platform.machine()}, python {platform.python_version()}"
    print(f"machine: {machine}, budget {args.seconds:g} s")
    sections: dict[str, Callable[[float], None]] = {
        "rewrite": rewrite,
        "crasp": crasp,
        "merging": merging,
        "positions": positions,
    }
    for name in args.only.split(","):
        if name in sections:
            sections[name](args.seconds)
    if args.trained is not None:
        precisions = [tuple(int(x) for x in p.split("/")) for p in args.precision] or [(16, 8), (8, 4), (6, 3)]
        trained(args.trained, precisions, args.seconds)  # type: ignore[arg-type]


if __name__ == "__main__":
    main()

"""What an engine's certificate module declares, and the evidence several engines share.

An engine whose card has ``CERTIFICATES`` has a module ``engines/<name>/certificate.py`` (found by
``engines.certificate(name)``) that owns its certificate's whole life:

* ``TRUSTED``: what its certificates leave trusted (docs/trust.md), by kind of certificate;
* ``REDERIVE``: how audit re-derives what a certificate is about before it checks any evidence: ``"queries"``
  (every query it asked, re-encoded or asked again by re-running the engine) or ``"proof"`` (the input space,
  then the engine proves the property again);
* ``evidence(task, verdict) -> dict``: the certificate's body for a proved verdict (its ``kind``, its checks,
  what it covered, ``trusted``); the solver queries the proof kept (``verdict.evidence.queries``) are written
  and re-proved by ``verify_tf.certify`` (cvc5, the LRAT chain), never here;
* ``rerun_differences(task, rerun, body) -> list[str]``: what the engine's re-run on the re-loaded spec finds
  different from the certificate (the chunk digests, the exploration's coverage);
* ``recheck(task, body) -> (problems, partial)``: audit's re-check of the evidence that is not a solver query.

``verify_tf.certify`` keeps only what is shared: the subject binding, digests, the query files and their
cvc5 / LRAT evidence. Below, what the exhaustive engines (``enumerate``, ``interpret``) and ``split`` share:
the space's size two ways, the outputs' digest, and a seeded sample re-evaluated on the reference interpreter
and compared bit for bit with the batched evaluator.

What the exhaustive evidence rules out: an enumeration that skipped inputs (the count), a batched evaluator
that disagrees with the interpreter on the sample (the comparison), a property check that lets a violating
input through on the sample (the property's ``violation`` is re-run on the interpreter for
``VIOLATION_SAMPLE`` of the sampled inputs), and a later change to the outputs (the digest).
What it does not rule out: a batched error on an input outside the sample (the differential tests and the
digest, which an auditor can recompute, are the defence there).
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from ..contract import CertifiedOutputs, DistinctValues, Task, capability
from ..semantics import evaluate
from ..spaces import InputSpace
from ..verdict import Evidence, Verdict
from .evaluators import CompiledEvaluators
from .scan import certified_outputs, combined_digest, fractions_digest

SAMPLE = 1000  # inputs re-evaluated on the interpreter (all of them when the space is smaller)
# of which the property's own interpreter check is re-run on a spread of this many: it can cost far more than
# one evaluation (equivariance: every permutation of the input), and the bit-for-bit comparison of the outputs
# is what certifies the batched run
VIOLATION_SAMPLE = 50
BRUTE_FORCE_LIMIT = 200_000  # spaces up to this size are also counted by listing them with itertools

# what the query evidence leaves trusted (any certificate of kind "smt": the smt and architecture engines)
SMT_TRUSTED = [
    "the encoder (verify_tf.symbolic): the query says what the property means",
    "for the LRAT check: the LIA-to-BV width argument (verify_tf.symbolic.bv) and z3's bit-blaster",
    "the LRAT checker (verify_tf.certify.lrat, ~120 lines)",
]
EXHAUSTIVE_TRUSTED = [
    "the input space's numbering (verify_tf.spaces) beyond the sampled inputs",
    "the batched evaluator on inputs outside the sample (differential tests cover it)",
]
READING_TRUSTED = [  # an exhaustive proof about the property's own reading of the model (its certified outputs)
    "the property's evaluation of the model in its reading (tracr's float reading: the exact enclosure of "
    "verify_tf.floats.enclosure under the error model of docs/semantics.md §7): the proof, the chunk digests "
    "and the sample's re-check use the same enclosure, so an unsound bound in it is not caught here; on the "
    "sample, numpy's float32 evaluation of the model must lie inside the enclosure and decode right (a torch "
    "import's float reading: verify_tf.floats.torch_enclosure, and torch's own evaluations under no_grad and "
    "with autograd must lie inside it, every prefix decided right)",
    "the input space's numbering (verify_tf.spaces) beyond the sampled inputs",
]


def closed_form_size(vocabulary: int, lengths: tuple[int, ...], order: str, distinct: bool) -> int:
    """The number of inputs, written independently of ``spaces.segment_count``."""
    total = 0
    for n in lengths:
        if order == "all":
            total += (
                math.factorial(vocabulary) // math.factorial(vocabulary - n)
                if distinct and n <= vocabulary
                else (0 if distinct else vocabulary**n)
            )
        elif order == "sorted":  # multisets (stars and bars) or sets
            total += math.comb(vocabulary, n) if distinct else math.comb(vocabulary + n - 1, n)
        elif order == "constant":
            total += 0 if n == 0 or (distinct and n > 1) else vocabulary
        else:
            raise ValueError(f"unknown order {order!r}")
    return total


def listed_size(vocabulary: int, lengths: tuple[int, ...], order: str, distinct: bool) -> int | None:
    """The number of inputs counted one by one (None above ``BRUTE_FORCE_LIMIT``)."""
    if closed_form_size(vocabulary, lengths, order, distinct) > BRUTE_FORCE_LIMIT:
        return None
    count = 0
    symbols = range(vocabulary)
    for n in lengths:
        source: Iterable[tuple[int, ...]]
        if order == "all":
            source = itertools.permutations(symbols, n) if distinct else itertools.product(symbols, repeat=n)
        elif order == "sorted":
            source = (
                itertools.combinations(symbols, n) if distinct else itertools.combinations_with_replacement(symbols, n)
            )
        else:
            source = (tuple([s] * n) for s in symbols if n > 0 and (n == 1 or not distinct))
        count += sum(1 for _ in source)
    return count


def space_size(space: InputSpace) -> int:
    """The space's size written independently of ``InputSpace.count``: by closed form, or from the language's
    automaton counts for a language-restricted strings domain."""
    if space.language is not None:
        return language_sizes(space, listing=False)[0]
    return closed_form_size(len(space.tokens), space.lengths, space.order, space.distinct)


def language_sizes(space: InputSpace, listing: bool = True) -> tuple[int, int | None]:
    """A language-restricted space's size from its automaton's counts, and counted one by one when small: by
    testing every string of Σ^n for membership (independent of the counts and of the unranking), else by the
    automaton's depth-first walk (None above ``BRUTE_FORCE_LIMIT``)."""
    language = space.language
    assert language is not None
    if space.order == "constant":
        size = sum(1 for n in space.lengths for a in language.alphabet if n > 0 and language.accepts((a,) * n))
        return size, size
    closed = sum(language.count(n) for n in space.lengths)
    if not listing:
        return closed, None
    letters = len(language.alphabet)
    if sum(letters**n for n in space.lengths) <= BRUTE_FORCE_LIMIT:
        listed = sum(
            1 for n in space.lengths for w in itertools.product(language.alphabet, repeat=n) if language.accepts(w)
        )
        return closed, listed
    if closed <= BRUTE_FORCE_LIMIT:
        return closed, sum(1 for n in space.lengths for _ in language.words(n))
    return closed, None


def sample_indices(size: int, seed: int) -> list[int]:
    if size <= SAMPLE:
        return list(range(size))
    return sorted(random.Random(f"verify-tf certificate {seed}").sample(range(size), SAMPLE))


def space_of(task: Task) -> InputSpace:
    return task.prop.input_space(task)


def space_record(task: Task) -> dict[str, Any]:
    """The input space an exhaustive (or split) proof covered, as the certificate records it."""
    space = space_of(task)
    return {
        "order": space.order,
        "lengths": list(space.lengths),
        "vocabulary": len(space.tokens),
        "distinct": space.distinct,
        "size": space_size(space),
        "description": space.describe(),
        **({"language": space.language.name, "language_sha256": space.language.digest()} if space.language else {}),
    }


def interpreter_outputs(task: Task, tokens: tuple[Any, ...]) -> list[Fraction]:
    """What an exhaustive run digests for one input, on the reference interpreter: the property's values for
    distinct-values properties, else the readout."""
    if isinstance(task.prop, DistinctValues):
        return list(capability(task.prop, DistinctValues).values(task, tokens))
    return list(evaluate(task.model, task.arithmetic, tokens).readout)


def chunk_digest(task: Task, start: int, stop: int) -> str:
    """The outputs digest of inputs [start, stop), as the exhaustive engines compute it for a certificate
    (``fractions_digest`` of each input's outputs, in input order): batched, or on the interpreter when the
    batched evaluator cannot run the model exactly. Audit recomputes a certificate's chunks with it."""
    space = space_of(task)
    rows = [tuple(int(t) for t in row) for piece in space.chunks(4096, start, stop) for row in piece.rows]
    outputs = batched_outputs(task, rows)
    if isinstance(outputs, str):
        outputs = [interpreter_outputs(task, space.decode(row)) for row in rows]
    return fractions_digest(outputs)


def certified_check(task: Task, tokens: tuple[Any, ...]) -> str | None:
    """The claim re-checked on one sampled input: in the property's own reading (``CertifiedOutputs``), else on
    the reference interpreter (``violation``)."""
    prop = task.prop
    if isinstance(prop, CertifiedOutputs):
        return prop.certified_check(task, tokens)
    return None if prop.violation(task, tokens) is None else "the interpreter finds a violation"


def own_outputs(task: Task, rows: Any) -> list[list[Fraction]] | None:
    """The property's certified outputs for token-index ``rows`` (``certified_outputs``), or None: the readout."""
    own = certified_outputs(task, rows)
    if own is None:
        return None
    numerators, den = own
    return [[Fraction(int(v), den) for v in line] for line in numerators]


def own_reading(task: Task, rows: list[tuple[Any, ...]]) -> str | None:
    """The reading the property's certified outputs are about (``Property.reading``), or None when the
    certificate digests the readout."""
    import numpy as np

    if not rows or isinstance(task.prop, DistinctValues):
        return None
    if certified_outputs(task, np.array([rows[0]], dtype=np.int64).reshape(1, len(rows[0]))) is None:
        return None
    return task.prop.reading(task)[0] or "its own"


def reevaluate(task: Task, indices: list[int]) -> tuple[list[list[Fraction]], list[int], list[tuple[Any, ...]]]:
    """The outputs at ``indices`` one input at a time (the property's values for distinct-values properties,
    its certified outputs when it has its own reading of the model, else the interpreter's readout), and the
    indices (of ``VIOLATION_SAMPLE`` spread over them) where the property's re-check (``certified_check``: by
    default its interpreter check) finds the claim broken."""
    import numpy as np

    space = space_of(task)
    distinct = isinstance(task.prop, DistinctValues)
    outputs, violations, rows = [], [], []
    spread = set(indices[:: max(1, len(indices) // VIOLATION_SAMPLE)])
    for index in indices:
        row = space.rows(index, index + 1)[0][0]
        tokens = space.decode(row)
        rows.append(tuple(int(t) for t in row))
        own = None if distinct else own_outputs(task, np.array([row], dtype=np.int64).reshape(1, len(row)))
        outputs.append(own[0] if own is not None else interpreter_outputs(task, tokens))
        if not distinct and index in spread and certified_check(task, tokens) is not None:
            violations.append(index)
    return outputs, violations, rows


def batched_outputs(task: Task, rows: list[tuple[Any, ...]]) -> list[list[Fraction]] | str:
    """The batched evaluator's outputs for the same rows (its reason when it cannot run this model)."""
    import numpy as np

    from ..batched import Unsupported

    space = space_of(task)
    try:
        evaluators = CompiledEvaluators(task, space)
        by_length: dict[int, list[int]] = {}
        for k, row in enumerate(rows):
            by_length.setdefault(len(row), []).append(k)
        slots: dict[int, list[Fraction]] = {}
        for length, ks in by_length.items():
            array = np.array([rows[k] for k in ks], dtype=np.int64).reshape(len(ks), length)
            own = None if isinstance(task.prop, DistinctValues) else own_outputs(task, array)
            if own is not None:
                for k, line in zip(ks, own):
                    slots[k] = line
                continue
            if isinstance(task.prop, DistinctValues):
                numerators, den = capability(task.prop, DistinctValues).batched_values(task, evaluators, array)
            else:
                values = evaluators.of().values(array, "readout")
                numerators, den = values.numerators, values.den
            for k, line in zip(ks, numerators):
                slots[k] = [Fraction(int(v), den) for v in line]
        return [slots[k] for k in range(len(rows))]
    except Unsupported as exc:
        return f"the batched evaluator cannot run this model exactly: {exc}"


def exhaustive_evidence(task: Task, statistics: dict[str, Any], evidence: Evidence, seed: int) -> dict[str, Any]:
    """The certificate of an exhaustive proof: the domain counted two ways against the inputs the run reports
    (``statistics``), the chunk digests it kept (``evidence``) combined again, a seeded sample re-evaluated."""
    space = space_of(task)
    vocabulary = len(space.tokens)
    if space.language is not None:
        closed, listed = language_sizes(space)
    else:
        closed = closed_form_size(vocabulary, space.lengths, space.order, space.distinct)
        listed = listed_size(vocabulary, space.lengths, space.order, space.distinct)
    evaluated = statistics.get("inputs_checked", statistics.get("inputs_evaluated"))
    chunks: list[list[Any]] = [list(c) for c in evidence.chunks]
    covered = sum(b - a for a, b, _ in chunks)
    count_ok = closed == evaluated == covered == space.count() and (listed is None or listed == closed)
    digest = evidence.outputs_sha256
    digest_ok = bool(digest) and combined_digest([tuple(c) for c in chunks]) == digest
    indices = sample_indices(closed, seed)
    outputs, violations, rows = reevaluate(task, indices)
    batched = batched_outputs(task, rows)
    mismatches = [indices[k] for k in range(len(rows)) if not isinstance(batched, str) and batched[k] != outputs[k]]
    reading = own_reading(task, rows)
    checks = [
        {
            "check": "domain size two ways vs inputs evaluated",
            "tool": "verify-tf (closed form; itertools listing)",
            "ok": count_ok,
            "closed_form": closed,
            "listed": listed,
            "evaluated": evaluated,
            "chunks_cover": covered,
        },
        {
            "check": "digest of the evaluated outputs",
            "tool": "sha256",
            "ok": digest_ok,
            "outputs_sha256": digest,
            "note": "" if digest_ok else "the chunk digests do not cover the space or do not combine to the digest",
        },
        {
            "check": f"seeded sample of {len(indices)} inputs re-evaluated "
            + (f"one at a time in the property's reading ({reading})" if reading else "on the reference interpreter"),
            "tool": "the property's certified outputs and check"
            if reading
            else "verify_tf.semantics (reference interpreter)",
            "ok": not violations and not mismatches,
            "seed": seed,
            "sample_size": len(indices),
            "interpreter_sha256": fractions_digest(outputs),
            "property_rechecked_on": len(indices[:: max(1, len(indices) // VIOLATION_SAMPLE)]),
            "violations": violations[:10],
            "batched_mismatches": mismatches[:10],
            "batched_compared": not isinstance(batched, str),
            "note": batched if isinstance(batched, str) else "outputs equal the batched evaluator's bit for bit",
        },
    ]
    return {
        "kind": "exhaustive",
        "space": space.describe(),
        "outputs": "property values"
        if isinstance(task.prop, DistinctValues)
        else (f"the property's certified outputs ({reading})" if reading else "readout"),
        "chunks": chunks,
        "checks": checks,
    }


def recheck_exhaustive(task: Task, record: dict[str, Any]) -> list[str]:
    """Audit: recount, recombine the digest, re-evaluate the sample on the interpreter."""
    problems = []
    space = space_of(task)
    count: dict[str, Any] = next((c for c in record["checks"] if c["check"].startswith("domain size")), {})
    closed = space_size(space)
    if count.get("closed_form") != closed or count.get("evaluated") != closed:
        problems.append(
            f"input count: the domain has {closed} inputs, the certificate says "
            f"{count.get('closed_form')} (evaluated {count.get('evaluated')})"
        )
    chunks = [tuple(c) for c in record.get("chunks", [])]
    if sum(b - a for a, b, _ in chunks) != closed:
        problems.append("the chunk digests do not cover the input space")
    digest: dict[str, Any] = next((c for c in record["checks"] if c["check"].startswith("digest")), {})
    if combined_digest(chunks) != digest.get("outputs_sha256"):
        problems.append("outputs digest does not match its chunk digests")
    sample: dict[str, Any] = next((c for c in record["checks"] if c["check"].startswith("seeded sample")), {})
    indices = sample_indices(closed, sample.get("seed", 0))
    if len(indices) != sample.get("sample_size"):
        problems.append("sample size differs")
    outputs, violations, _ = reevaluate(task, indices)
    if violations:
        problems.append(f"the interpreter finds a violation at sampled input {violations[0]}")
    if fractions_digest(outputs) != sample.get("interpreter_sha256"):
        problems.append("the interpreter's outputs on the sample differ from the certified ones")
    return problems


# ---------------------------------------------------------------- the exhaustive engines' certificate hooks


def evidence(task: Task, verdict: Verdict) -> dict[str, Any]:
    """An exhaustive engine's certificate body (``exhaustive_evidence``), its input space and what it trusts."""
    assert verdict.evidence is not None
    body = exhaustive_evidence(task, verdict.statistics, verdict.evidence, task.settings.seed)
    own = str(body["outputs"]).startswith("the property's certified outputs")
    return {**body, "space": space_record(task), "trusted": READING_TRUSTED if own else EXHAUSTIVE_TRUSTED}


def rerun_differences(task: Task, rerun: Verdict, body: dict[str, Any]) -> list[str]:
    """Each chunk's outputs digest in the certificate equals the one computed now: the re-run's, or recomputed
    over the certificate's own range where the re-run chunked the space otherwise (a proof certified with
    ``-j``)."""
    now = {(a, b): digest for a, b, digest in (rerun.evidence.chunks if rerun.evidence is not None else [])}
    differ = [
        (a, b)
        for a, b, digest in body.get("chunks") or []
        if (now[(a, b)] if (a, b) in now else chunk_digest(task, a, b)) != digest
    ]
    if not differ:
        return []
    return [
        f"the outputs of {len(differ)} of its {len(body.get('chunks') or [])} chunks differ from the certificate's "
        f"digests (the first: inputs {differ[0][0]}..{differ[0][1] - 1})"
    ]


def recheck(task: Task, body: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Audit: ``recheck_exhaustive``'s problems, named; nothing partial."""
    return [f"exhaustive: {p}" for p in recheck_exhaustive(task, body)], []

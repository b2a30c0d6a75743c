"""Certificates (`check --certify`) and `verify-tf audit`: the LRAT checker on hand-made proofs, the bit-width
argument on a hand-computed interval, end-to-end certificates that audit accepts, and tamper tests (a
certificate, a query, a proof, a witness, an exhaustive sample) that audit rejects, naming what failed."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from verify_tf.certify.lrat import LratError, check_lrat, parse_dimacs
from verify_tf.cli import main
from verify_tf.engines.certificates import closed_form_size, listed_size
from verify_tf.reporting.audit import FAILED, audit_report
from verify_tf.symbolic.bv import translation

pytest.importorskip("cvc5")
pytest.importorskip("pysat")

SPECS = Path(__file__).resolve().parent.parent / "specs"

# (a ∨ b)(a ∨ ¬b)(¬a ∨ b)(¬a ∨ ¬b): clause 5 = (a) by RUP over 1, 2 (¬a forces b by 1, then 2 is falsified);
# the empty clause 6 by RUP over 5, 3, 4 (a, then b by 3, then 4 is falsified). Worked out by hand.
FOUR = "p cnf 2 4\n1 2 0\n1 -2 0\n-1 2 0\n-1 -2 0\n"


def test_lrat_checker_accepts_a_hand_made_proof():
    variables, clauses = parse_dimacs(FOUR)
    stats = check_lrat(variables, clauses, [b"5 1 0 1 2 0", b"5 d 1 2 0", b"6 0 5 3 4 0"], numbering="dimacs")
    assert stats == {"added": 2, "deleted": 2, "hints": 5}


@pytest.mark.parametrize(
    "proof, message",
    [
        ([b"5 1 0 1 0", b"6 0 5 3 4 0"], "line 1: the hints of clause 5 end without a conflict"),
        ([b"5 1 0 1 2 0", b"6 0 5 3 0"], "line 2: the hints of clause 6 end without a conflict"),
        ([b"5 1 0 1 2 0", b"5 d 1 0", b"6 0 1 3 4 0"], "line 3: hint 1 is not an active clause"),
        ([b"5 1 0 1 2 0"], "never derives the empty clause"),
        ([b"5 1 0 -1 2 0"], "RAT hint -1"),
    ],
)
def test_lrat_checker_rejects_broken_proofs(proof, message):
    variables, clauses = parse_dimacs(FOUR)
    with pytest.raises(LratError, match=message):
        check_lrat(variables, clauses, proof, numbering="dimacs")


def test_bit_width_comes_from_the_encoder_bounds():
    # x ∈ [0, 100], y ∈ [0, 5]: x - 50 ∈ [-50, 50], (x - 50)*y ∈ [-250, 250]; 250 needs 8 bits, + sign + spare
    # = 10 (by hand)
    text = (
        "(declare-fun x () Int)(declare-fun y () Int)(assert (and (>= x 0) (<= x 100)))"
        "(assert (and (>= y 0) (<= y 5)))(assert (> (* (- x 50) y) 240))"
    )
    result = translation(text)
    assert (result.width, result.widest, result.bounded_variables) == (10, (-250, 250), 2)
    assert "(_ BitVec 10)" in result.text and translation(text).text == result.text  # same text every run


def test_negative_bounds_written_as_unary_minus_are_bounds():
    # z3 prints -5 as (- 5): x ∈ [-5, -2], 3x ∈ [-15, -6]; 15 needs 4 bits, + sign + spare = 6 (by hand)
    text = "(declare-fun x () Int)(assert (>= x (- 5)))(assert (<= x (- 2)))(assert (> (* 3 x) (- 7)))"
    result = translation(text)
    assert (result.width, result.widest, result.bounded_variables) == (6, (-15, -6), 1)


def test_domain_size_two_ways():
    # 3 symbols, lengths 1..3: 3 + 9 + 27 = 39 sequences; multisets C(3,1) + C(4,2) + C(5,3) = 3 + 6 + 10 = 19
    assert closed_form_size(3, (1, 2, 3), "all", False) == listed_size(3, (1, 2, 3), "all", False) == 39
    assert closed_form_size(3, (1, 2, 3), "sorted", False) == listed_size(3, (1, 2, 3), "sorted", False) == 19
    assert closed_form_size(3, (2,), "all", True) == listed_size(3, (2,), "all", True) == 6


def _check(tmp_path: Path, *specs: str) -> Path:
    for name in specs:  # relative paths in the spec still name the repository's files
        (tmp_path / name).write_text((SPECS / name).read_text().replace("../examples", str(SPECS.parent / "examples")))
    report = tmp_path / "report.json"
    result = CliRunner().invoke(
        main,
        [
            "check",
            *[str(tmp_path / n) for n in specs],
            "--no-cache",
            "-q",
            "--json",
            str(report),
            "--certify",
            str(tmp_path / "certificates"),
        ],
    )
    assert result.exit_code in (0, 1), result.output
    return report


def _audit(report: Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["audit", str(report)])
    return result.exit_code, " ".join(result.output.split())  # rich wraps lines at the terminal's width


def _entry(report: Path, verdict: str) -> dict:
    return next(e for e in json.loads(report.read_text())["results"] if e["verdict"] == verdict)


def _certificate(report: Path, entry: dict) -> Path:
    """The certificate file of a report's result (its path is relative to the report's folder)."""
    return report.parent / entry["statistics"]["certificate"]["path"]


def _rewrite_certificate(report: Path, entry_verdict: str, change) -> Path:
    """Apply ``change`` to the certificate body and re-seal it (its sha256 in the report updated), so only
    the re-checks can catch the tampering."""
    data = json.loads(report.read_text())
    entry = next(e for e in data["results"] if e["verdict"] == entry_verdict)
    path = _certificate(report, entry)
    body = json.loads(path.read_text())
    change(body, path.parent)
    text = json.dumps(body, indent=1)
    path.write_text(text)
    entry["statistics"]["certificate"]["sha256"] = hashlib.sha256(text.encode()).hexdigest()
    report.write_text(json.dumps(data))
    return path


@pytest.mark.slow
def test_smt_certificate_audits_and_tampering_fails(tmp_path):
    report = _check(tmp_path, "smt-equivalence-proved.yaml")
    summary = _entry(report, "proved")["statistics"]["certificate"]
    assert summary["complete"] and summary["kind"] == "smt"
    assert any(line.startswith("second solver re-proves the query: cvc5") for line in summary["checked_by"])
    assert any("LRAT proof" in line and "CaDiCaL 1.9.5" in line for line in summary["checked_by"])
    body = json.loads((report.parent / summary["path"]).read_text())
    lrat = body["queries"][0]["evidence"][1]
    assert lrat["width"] >= 2 and "interval analysis" in lrat["argument"]
    assert _audit(report)[0] == 0, _audit(report)[1]

    # 1. the certificate edited without re-sealing: its digest no longer matches the report
    path = report.parent / summary["path"]
    original = path.read_text()
    path.write_text(original.replace('"complete": true', '"complete": false'))
    code, output = _audit(report)
    assert code == 1 and "does not match the sha256 in the report" in output
    path.write_text(original)

    # 2. the query changed (and re-sealed): cvc5 and the CNF re-derivation disagree with the certificate
    query = path.parent / "query-1.smt2"
    text = query.read_text()
    assert "(check-sat)" in text
    weaker = text.replace("(check-sat)", "").rsplit("(assert", 1)[0] + "(check-sat)\n"  # the violation dropped

    def swap_query(body, folder):
        query.write_text(weaker)
        body["queries"][0]["sha256"] = hashlib.sha256(weaker.encode()).hexdigest()

    _rewrite_certificate(report, "proved", swap_query)
    code, output = _audit(report)
    assert code == 1 and "query 1 (length 2): the certificate's query (sha256" in output
    assert "is not the one the encoder derives from the spec" in output and "cvc5" not in output

    # 3. the LRAT proof replaced by one for another formula
    (tmp_path / "again").mkdir()
    report = _check(tmp_path / "again", "smt-equivalence-proved.yaml")
    path = _certificate(report, _entry(report, "proved"))
    proof = path.parent / "query-1.lrat.gz"
    proof.write_bytes(gzip.compress(b"1 0 0\n"))
    code, output = _audit(report)
    assert code == 1 and "proof file query-1.lrat.gz does not match its sha256" in output


def test_exhaustive_certificate_and_witness_tampering(tmp_path):
    report = _check(tmp_path, "luo-urpe-refuted.yaml", "yun-lemma6-d1-k2-n2.yaml")
    proved = _entry(report, "proved")["statistics"]["certificate"]
    assert proved["kind"] == "exhaustive" and proved["complete"]
    code, output = _audit(report)
    assert code == 0, output

    # a witness replaced by an input on which the model is position-blind (one position: trivially blind)
    data = json.loads(report.read_text())
    refuted = next(e for e in data["results"] if e["verdict"] == "refuted" and "input" in e["counterexample"])
    refuted["counterexample"]["input"] = refuted["counterexample"]["input"][:1]
    report.write_text(json.dumps(data))
    code, output = _audit(report)
    assert code == 1 and "counterexample: the interpreter finds no violation" in output

    # the sample's recorded interpreter outputs changed (and re-sealed)
    report = _check(tmp_path, "yun-lemma6-d1-k2-n2.yaml")

    def change_sample(body, folder):
        body["checks"][2]["interpreter_sha256"] = "0" * 64

    _rewrite_certificate(report, "proved", change_sample)
    code, output = _audit(report)
    assert code == 1 and "interpreter's outputs on the sample differ" in output


def test_proved_without_certificate_fails_audit(tmp_path):
    shutil.copy(SPECS / "smt-equivalence-proved.yaml", tmp_path / "s.yaml")
    report = tmp_path / "r.json"
    CliRunner().invoke(
        main, ["check", str(tmp_path / "s.yaml"), "--cache", str(tmp_path / "cache"), "-q", "--json", str(report)]
    )
    items = audit_report(report).results
    assert [i.outcome for i in items] == [FAILED] and "proved without a certificate" in items[0].problems[0]


def _counting_spec(tmp_path: Path) -> str:
    """crasp-L1 on strings up to length 6 (64 strings of length 6: the sample is all of them), engine counting."""
    text = (SPECS / "crasp-L1.yaml").read_text().replace("../examples", str(SPECS.parent / "examples"))
    text = text.replace("max-length: 14", "max-length: 6")
    text = text.replace("expect: proved}", "engine: counting, expect: proved}")
    (tmp_path / "l1.yaml").write_text(text)
    return "l1.yaml"


@pytest.mark.slow
def test_counting_certificates_audit_and_tampering_fails(tmp_path):
    report = tmp_path / "report.json"
    name = _counting_spec(tmp_path)
    result = CliRunner().invoke(
        main,
        [
            "check",
            str(tmp_path / name),
            "--no-cache",
            "-q",
            "--json",
            str(report),
            "--certify",
            str(tmp_path / "certificates"),
        ],
    )
    assert result.exit_code == 0, result.output
    entries = json.loads(report.read_text())["results"]
    assert [(e["engine"], e["verdict"]) for e in entries] == [("counting", "proved")] * 2
    bounded, every = (_certificate(report, e) for e in entries)
    body = json.loads(bounded.read_text())
    count, sample = body["checks"]
    # strings of length 0..6 over {a, b}: 1, 2, 4, ..., 64 by the closed form and by the exploration's merges
    assert count["ok"] and count["closed_form"] == count["explored"] == [1, 2, 4, 8, 16, 32, 64]
    assert sample["ok"] and sample["sample_size"] == 64 and "queries" not in body
    # every length: the last refinement round's two step queries and the two decision queries (letters a, b),
    # each re-proved by cvc5; no LRAT (unbounded integers), recorded as such: audit says partial, exit 0
    every_body = json.loads(every.read_text())
    assert [q["name"] for q in every_body["queries"]] == [
        "induction step, letter 'a'",
        "induction step, letter 'b'",
        "decisions, letter 'a'",
        "decisions, letter 'b'",
    ]
    assert all(q["evidence"][0]["ok"] is True and q["evidence"][1]["ok"] is None for q in every_body["queries"])
    items = audit_report(report).results
    assert [i.outcome for i in items] == ["ok", "partial"]
    assert any("unbounded integers" in p for p in items[1].partial)

    # tampering: the exploration's string count and the sample's interpreter digest (both re-sealed)
    def change_count(body, folder):
        body["checks"][0]["explored"][6] = 63
        body["checks"][1]["interpreter_sha256"] = "0" * 64

    _rewrite_certificate(report, "proved", change_count)
    code, output = _audit(report)
    assert code == 1 and "the exploration's strings per length or states differ" in output

    def change_sample(body, folder):
        body["checks"][1]["interpreter_sha256"] = "0" * 64

    report = tmp_path / "again.json"
    CliRunner().invoke(
        main,
        ["check", str(tmp_path / name), "--no-cache", "-q", "--json", str(report), "--certify", str(tmp_path / "c2")],
    )
    _rewrite_certificate(report, "proved", change_sample)
    code, output = _audit(report)
    assert code == 1 and "interpreter's outputs on the sample differ" in output


def test_query_free_depth_zero_proof_is_partial_and_its_pair_is_rechecked(tmp_path):
    # depth 0 asks no solver query: the pair a / ba (a in L_1 = a+, ba not; same last letter) is re-checked and
    # the class-wide step is recorded as trusted, so audit says partial (exit 0) until the pair is tampered with
    report = _check(tmp_path, "depth-lower-bound-L1.yaml")
    body = json.loads(_certificate(report, _entry(report, "proved")).read_text())
    assert body["kind"] == "conclusion" and body["queries"] == []
    pair, argument = body["checks"]
    assert pair["ok"] is True and pair["pair"] == ["a", "ba"] and pair["in_language"] == [True, False]
    assert argument["ok"] is None and "trusted" in argument["note"]
    assert [i.outcome for i in audit_report(report).results] == ["partial"] and _audit(report)[0] == 0

    def other_pair(body, folder):  # ab and bb: both end in b, both outside L_1: the language does not separate them
        body["checks"][0]["pair"] = ["ab", "bb"]

    _rewrite_certificate(report, "proved", other_pair)
    code, output = _audit(report)
    assert code == 1 and "does not check" in output


def test_sample_digest_of_inputs_of_several_lengths():
    # a sample spanning lengths 1 and 2 (tracr specs): ragged rows are digested per run of equal length
    from fractions import Fraction

    from verify_tf.engines.scan import fractions_digest

    rows = [[Fraction(1)], [Fraction(1, 2), Fraction(0)]]
    assert fractions_digest(rows) == fractions_digest([list(r) for r in rows])
    assert fractions_digest(rows) != fractions_digest([[Fraction(1)], [Fraction(1, 2), Fraction(1)]])


@pytest.mark.slow
def test_split_certificate_is_partial_and_tampering_fails(tmp_path):
    """specs/split-two-layer-output-bounds.yaml proves |q| <= 93/4 by bounds alone: the certificate counts the
    closed cubes' inputs against the domain ((9^2)^3 = 531,441 inputs: 9 grid points per coordinate, d = 2,
    length 3) and re-runs a seeded sample on the interpreter; the bounds themselves stay trusted, so audit says
    partial (exit 0)."""
    report = _check(tmp_path, "split-two-layer-output-bounds.yaml")
    summary = _entry(report, "proved")["statistics"]["certificate"]
    assert summary["kind"] == "split" and not summary["complete"] and not summary["failed"]
    body = json.loads((report.parent / summary["path"]).read_text())
    cover = body["checks"][0]
    assert cover["ok"] and cover["closed_inputs"] == cover["domain_inputs"] == cover["closed_form"] == 81**3
    code, output = _audit(report)
    assert code == 0 and "partial" in output and "cubes closed by bounds" in output

    def shrink_cover(body, folder):
        body["checks"][0]["closed_inputs"] -= 1

    _rewrite_certificate(report, "proved", shrink_cover)
    code, output = _audit(report)
    assert code == 1 and "the closed cubes hold" in output


# ---------------------------------------------------------------- a certificate is bound to what it proves (issue 26)


def test_an_unrelated_unsat_query_with_its_digests_updated_fails(tmp_path):
    """The issue's reproduction: query-1.smt2 replaced by x ∈ [0, 3] ∧ x > 5 (unsat, but not the property's
    query), its sha256 updated in the certificate and the certificate's in the report, only cvc5's evidence
    kept. It used to audit ok, exit 0: the stored query was checked to be unsat, never to be the property's."""
    report = _check(tmp_path, "smt-equivalence-proved.yaml")
    unrelated = "(declare-fun x () Int)\n(assert (>= x 0))\n(assert (<= x 3))\n(assert (> x 5))\n(check-sat)\n"

    def replace_query(body, folder):
        (folder / body["queries"][0]["file"]).write_text(unrelated)
        body["queries"][0]["sha256"] = hashlib.sha256(unrelated.encode()).hexdigest()
        body["queries"][0]["evidence"] = [e for e in body["queries"][0]["evidence"] if "second solver" in e["check"]]

    _rewrite_certificate(report, "proved", replace_query)
    code, output = _audit(report)
    assert code == 1 and "FAILED: certificate: query 1 (length 2): the certificate's query (sha256 " in output
    assert "is not the one the encoder derives from the spec (sha256 " in output


def test_a_certificate_of_another_property_of_another_spec_fails(tmp_path):
    """A contextual-mapping result pointing at the equivalence proof's certificate (both re-sealed in the report)
    used to audit ok: the certificate's spec, property and index were never compared with the result."""
    report = _check(tmp_path, "smt-equivalence-proved.yaml", "yun-lemma6-d1-k2-n2.yaml")
    data = json.loads(report.read_text())
    equivalence, mapping = (e for e in data["results"] if e["verdict"] == "proved")
    assert (equivalence["kind"], mapping["kind"]) == ("equivalent-to", "contextual-mapping")
    mapping["statistics"]["certificate"] = equivalence["statistics"]["certificate"]
    report.write_text(json.dumps(data))
    items = audit_report(report).results
    assert [i.outcome for i in items] == ["ok", FAILED, "ok"]
    problems = " ".join(items[1].problems)
    assert "the spec file differs: file 'smt-equivalence-proved.yaml' in the certificate, " in problems
    assert "'yun-lemma6-d1-k2-n2.yaml' here" in problems
    assert (
        "the property differs: " in problems
        and "name 'equivalent-to' in the certificate, 'contextual-mapping'" in problems
    )
    assert "the model (weights as loaded) differs" in problems and "the domain differs" in problems


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda body: body.update(kind="none"), "a certificate of kind 'none' for a proof by engine 'smt'"),
        (lambda body: body.update(kind="oracle"), "a certificate of kind 'oracle' for a proof by engine 'smt'"),
        (lambda body: body.update(queries=[]), "an SMT certificate without any query"),
        (lambda body: body.pop("subject"), "the certificate records no subject"),
        (lambda body: body.update(format="verify-tf-certificate/1"), "are not bound to what they prove"),
    ],
)
def test_certificates_that_certify_nothing_fail(tmp_path, change, message):
    # kind none, an unknown kind and an empty query list used to audit as partial, exit 0
    report = _check(tmp_path, "smt-equivalence-proved.yaml")
    _rewrite_certificate(report, "proved", lambda body, folder: change(body))
    code, output = _audit(report)
    assert code == 1 and message in output


def test_a_changed_program_file_is_named_although_the_spec_text_is_the_same(tmp_path):
    """The model is built from a C-RASP program file: the spec's text does not change when the program does,
    the model as loaded (and the options, which hash the file) do."""
    (tmp_path / "L.cr").write_text((SPECS.parent / "examples" / "crasp" / "L1.cr").read_text())
    (tmp_path / "l.yaml").write_text(
        "model: {construct: crasp-program, program: L.cr}\n"
        "arithmetic: {mode: fixed, bits: 3, frac: 0, attention-rounding: exact-sums}\n"
        "domain:\n  strings: {alphabet: [a, b], max-length: 4}\n"
        "properties:\n  - crasp-equivalence: {program: L.cr, engine: enumerate, expect: proved}\n"
    )
    report = tmp_path / "r.json"
    args = ["check", str(tmp_path / "l.yaml"), "--no-cache", "-q", "--json", str(report)]
    assert CliRunner().invoke(main, [*args, "--certify", str(tmp_path / "certs")]).exit_code == 0
    assert _audit(report)[0] == 0
    program = (tmp_path / "L.cr").read_text()
    (tmp_path / "L.cr").write_text(program.replace("accept = has_a && !has_b", "accept = has_a"))
    items = audit_report(report).results
    problems = " ".join(items[0].problems)
    assert items[0].outcome == FAILED and "the model (weights as loaded) differs" in problems
    assert "the property differs: options_sha256" in problems and "spec file differs" not in problems


def test_paths_resolve_against_the_report_folder_only(tmp_path, monkeypatch):
    """A report written to out/ with certificates in certs/ (both relative to the folder `check` ran in) used to
    audit ok from that folder and fail from any other: the certificate was looked up in the current folder."""
    shutil.copy(SPECS / "yun-lemma6-d1-k2-n2.yaml", tmp_path / "s.yaml")
    monkeypatch.chdir(tmp_path)
    args = ["check", "s.yaml", "--no-cache", "-q", "--json", "out/r.json", "--certify", "certs"]
    assert CliRunner().invoke(main, args).exit_code == 0  # proved, and refuted as its `expect:` says
    outcomes = []
    for folder in (tmp_path, tmp_path / "out", tmp_path / "elsewhere"):
        folder.mkdir(exist_ok=True)
        monkeypatch.chdir(folder)
        outcomes.append([i.outcome for i in audit_report(tmp_path / "out" / "r.json").results])
    assert outcomes == [["ok", "ok"]] * 3
    (tmp_path / "elsewhere" / "certs").mkdir()  # a decoy in the current folder changes nothing
    shutil.copytree(tmp_path / "certs", tmp_path / "elsewhere" / "certs", dirs_exist_ok=True)
    shutil.rmtree(tmp_path / "certs")
    assert [i.outcome for i in audit_report(tmp_path / "out" / "r.json").results] == [FAILED, "ok"]


def test_audit_names_files_and_digests_and_never_shows_their_contents(tmp_path):
    # a report naming some other file as its spec: audit used to print its first bytes ("root:x:0:0")
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:TOP-SECRET-LINE\n")
    report = _check(tmp_path, "smt-equivalence-proved.yaml")
    original = report.read_text()
    data = json.loads(original)
    entry = data["results"][0]
    entry.update(spec=str(secret), spec_resolved=str(secret))
    entry["spec_sha256"] = hashlib.sha256(secret.read_bytes()).hexdigest()  # even with its digest right
    report.write_text(json.dumps(data))
    code, output = _audit(report)
    assert code == 1 and "spec secret.txt (sha256 " in output and "does not load" in output
    assert "TOP-SECRET" not in output and "root" not in output
    entry.update(spec="/etc/passwd", spec_resolved="/etc/passwd")
    report.write_text(json.dumps(data))
    code, output = _audit(report)
    assert code == 1 and "spec passwd (sha256 " in output and "is not the report's" in output
    assert "root" not in output
    # evidence files: a plain name in the certificate's folder, and a proof whose digest is wrong is never parsed
    # (a secret named as the LRAT proof used to fail with "Not a gzipped file (b'ro')", its first bytes)
    report.write_text(original)

    def lrat_proof(name):
        return lambda body, folder: body["queries"][0]["evidence"][1].update(proof=name)

    for name in (str(secret), "../../secret.txt"):
        _rewrite_certificate(report, "proved", lrat_proof(name))
        code, output = _audit(report)
        assert code == 1 and "the LRAT proof is not named as a file in the certificate's folder" in output
    folder = _rewrite_certificate(report, "proved", lrat_proof("secret.lrat.gz")).parent
    shutil.copy(secret, folder / "secret.lrat.gz")
    code, output = _audit(report)
    assert code == 1 and "proof file secret.lrat.gz does not match its sha256" in output
    assert "root" not in output and "LRAT re-check failed" not in output


# ---------------------------------------------------------------- an exhaustive proof is re-derived, not re-read

# The smt-equivalence-proved model over its 9^4 = 6561 inputs: every readout lies in [-4, 19/2] (an interpreter
# run over the whole space), so [-100, 100] holds and [-100, 9] fails on exactly 147 inputs (readout 19/2 or
# 73/8 or 35/4 ... above 9), none of them among the 50 sampled inputs whose property check audit re-runs
# (counted by the same run with engines.certificates.sample_indices).
FORGE_SPEC = (SPECS / "smt-equivalence-proved.yaml").read_text().split("properties:")[0] + (
    "properties:\n"
    "  - value-range: {name: wide, interval: [-100, 100], engine: enumerate}\n"
    "  - value-range: {name: narrow, interval: [-100, 9], engine: enumerate}\n"
)


def test_a_proved_propertys_exhaustive_certificate_readdressed_to_a_refuted_one_fails(tmp_path):
    """An exhaustive certificate's evidence is about the model's outputs (a count, a digest, a sample), not the
    property on each input: the wide interval's certificate, its subject rewritten to the narrow interval's and
    the narrow result turned into `proved`, used to audit ok although 147 inputs violate it. Audit now runs the
    engine again, which refutes it."""
    from verify_tf.certify.subject import subject_of
    from verify_tf.runner import Overrides, task_of
    from verify_tf.spec import load_spec

    (tmp_path / "forge.yaml").write_text(FORGE_SPEC)
    report = tmp_path / "r.json"
    args = ["check", str(tmp_path / "forge.yaml"), "--no-cache", "-q", "--json", str(report)]
    assert CliRunner().invoke(main, [*args, "--certify", str(tmp_path / "certs")]).exit_code == 1
    data = json.loads(report.read_text())
    wide, narrow = data["results"]
    assert (wide["verdict"], narrow["verdict"]) == ("proved", "refuted")
    spec = load_spec(tmp_path / "forge.yaml")
    prop = spec.properties[1]
    task = task_of(spec, prop, Overrides())
    body = json.loads(_certificate(report, wide).read_text())
    body["subject"] = subject_of(spec.path, prop.index, prop.name, prop.label, task, spec.seed, "enumerate")
    forged = tmp_path / "certs" / "narrow" / "certificate.json"
    forged.parent.mkdir()
    forged.write_text(json.dumps(body))
    narrow.update(verdict="proved", counterexample=None, method="exhaustive", counts_as="proved")
    narrow["statistics"] = {
        **wide["statistics"],
        "certificate": {
            **wide["statistics"]["certificate"],
            "path": "certs/narrow/certificate.json",
            "sha256": hashlib.sha256(forged.read_bytes()).hexdigest(),
        },
    }
    report.write_text(json.dumps(data))
    items = audit_report(report).results
    assert [i.outcome for i in items] == ["ok", FAILED]
    assert items[1].problems == [
        "certificate: re-deriving the proof: the enumerate engine answers refuted now (X = [[-1, -1], [1, 1]]: "
        "q at position 1 is 9.5, outside [-100, 9])"
    ]


@pytest.mark.parametrize("engine", ["enumerate", "interpret"])
def test_chunk_digests_are_recomputed_whoever_chunked_the_space(tmp_path, engine):
    """Audit recomputes an exhaustive certificate's chunk digests over the certificate's own ranges when its
    re-run chunks the space otherwise (a proof certified with -j): `chunk_digest` must give each engine's digest
    (readouts for value-range; the property's values for contextual-mapping, a distinct-values property), and a
    fabricated digest, the combined digest made consistent with it, fails."""
    from verify_tf.engines.certificates import chunk_digest
    from verify_tf.engines.scan import combined_digest
    from verify_tf.runner import Overrides, task_of
    from verify_tf.spec import load_spec

    wide = FORGE_SPEC.split("  - value-range: {name: narrow")[0].replace("step: 1/4", "step: 1")  # 3^4 inputs
    (tmp_path / "wide.yaml").write_text(wide)
    shutil.copy(SPECS / "yun-lemma6-d1-k2-n2.yaml", tmp_path / "yun.yaml")
    report = tmp_path / "r.json"
    args = ["check", str(tmp_path / "wide.yaml"), str(tmp_path / "yun.yaml"), "--no-cache", "-q"]
    args += ["--engine", engine, "--json", str(report), "--certify", str(tmp_path / "certs")]
    assert CliRunner().invoke(main, args).exit_code == 0
    proved = [e for e in json.loads(report.read_text())["results"] if e["verdict"] == "proved"]
    assert [(e["kind"], e["engine"]) for e in proved] == [("value-range", engine), ("contextual-mapping", engine)]
    for entry in proved:
        spec = load_spec(tmp_path / entry["spec"])
        task = task_of(spec, spec.properties[entry["index"]], Overrides())
        chunks = json.loads(_certificate(report, entry).read_text())["chunks"]
        assert [chunk_digest(task, a, b) for a, b, _ in chunks] == [d for _, _, d in chunks]
    assert _audit(report)[0] == 0

    def fabricate(body, folder):
        body["chunks"][0][2] = "0" * 64
        body["checks"][1]["outputs_sha256"] = combined_digest([tuple(c) for c in body["chunks"]])

    _rewrite_certificate(report, "proved", fabricate)
    items = audit_report(report).results
    assert items[0].outcome == FAILED and "chunks differ from the certificate's digests" in items[0].problems[0]


@pytest.mark.slow
def test_counting_proofs_by_repeating_states_are_certified_up_to_the_repeat(tmp_path):
    """L_1 compiled at 2 fractional bits under per-probability rounding: every head weight ⌊1/n⌋_f is 0 from n = 5
    keys on, so the states of length 5 repeat those of length 4 and the exploration stops there, for the domain
    (lengths up to 12) and for every length alike (tests/test_counting_models.py). The certificate covers lengths
    0..5 (1 + 2 + ... + 32 strings counted two ways) and says the states repeat from 5; audit accepts it (it
    failed both: the domain's count asked for lengths up to 12, the every-length proof had no certificate)."""
    spec = tmp_path / "pp.yaml"
    spec.write_text(
        f"model: {{construct: crasp-program, program: {SPECS.parent / 'examples' / 'crasp' / 'L1.cr'}, frac: 2}}\n"
        "arithmetic: {mode: fixed, bits: 6, frac: 2, attention-rounding: per-probability}\n"
        "domain: {strings: {alphabet: [a, b], max-length: 12}}\n"
        "properties:\n"
        "  - output-bounds: {hi: 100, engine: counting}\n"
        "  - output-bounds: {hi: 100, engine: counting, lengths: all, name: every length}\n"
    )
    report = tmp_path / "report.json"
    arguments = ["check", str(spec), "--no-cache", "-q", "--json", str(report), "--certify", str(tmp_path / "c")]
    assert CliRunner().invoke(main, arguments).exit_code == 0
    entries = json.loads(report.read_text())["results"]
    for entry in entries:
        body = json.loads(_certificate(report, entry).read_text())
        assert body["kind"] == "counting" and body["covered"] == {
            "alphabet": ["a", "b"],
            "max_length": 5,
            "closed_at": 5,
        }
        assert body["checks"][0]["ok"] and body["checks"][0]["explored"] == [1, 2, 4, 8, 16, 32]
    assert [i.outcome for i in audit_report(report).results] == ["ok", "ok"]

    def not_closed(body, folder):  # a coverage of lengths 0..5 without the repeat does not cover 0..12
        del body["covered"]["closed_at"]

    _rewrite_certificate(report, "proved", not_closed)
    assert [i.outcome for i in audit_report(report).results] == ["failed", "ok"]


def test_a_float_reading_proof_certifies_the_enclosure_and_audit_rechecks_it(tmp_path):
    """tracr's float reading (docs/semantics.md §7): the certificate of a proof digests what the proof decided on,
    the enclosure of the float32 model's output coordinates on every input (before: the hardmax IR's readout,
    which says nothing about the float model), says which reading it is about and what it trusts, and audit
    re-checks it; a changed sample digest fails. 12 inputs (count-less-freq up to length 2)."""
    export = SPECS.parent / "examples" / "tracr" / "count-less-freq.json"
    text = (
        f"model:\n  tracr: {export}\ndomain:\n  strings: {{max-length: 2}}\n"
        f"properties:\n  - rasp-equivalence: {{program: {export}, expect: proved}}\n"
    )
    (tmp_path / "float.yaml").write_text(text)
    report = tmp_path / "report.json"
    result = CliRunner().invoke(
        main,
        ["check", str(tmp_path / "float.yaml"), "--no-cache", "-q", "--json", str(report)]
        + ["--certify", str(tmp_path / "certs")],
    )
    assert result.exit_code == 0, result.output
    entry = _entry(report, "proved")
    assert entry["reading"] == "float32 as compiled"
    body = json.loads(_certificate(report, entry).read_text())
    assert body["kind"] == "exhaustive" and body["complete"]
    assert body["outputs"] == "the property's certified outputs (float32 as compiled)"
    assert any("verify_tf.floats.enclosure" in line for line in body["trusted"])
    sample = body["checks"][2]
    assert sample["check"] == (
        "seeded sample of 12 inputs re-evaluated one at a time in the property's reading (float32 as compiled)"
    )
    assert sample["ok"] and sample["batched_compared"]
    code, output = _audit(report)
    assert code == 0, output

    def change_sample(body, folder):
        body["checks"][2]["interpreter_sha256"] = "0" * 64

    _rewrite_certificate(report, "proved", change_sample)
    code, output = _audit(report)
    assert code == 1 and "outputs on the sample differ" in output


def test_the_float_certificates_recheck_fails_where_the_model_is_wrong():
    """bos-leak at `a` (a miscompilation both readings refute there, docs/tracr.md): the re-check a certificate's
    sample runs fails, in the float reading on the enclosure (naming the position), under hardmax on the
    interpreter."""
    from verify_tf.properties.rasp_equivalence import PROPERTY
    from verify_tf.runner import Overrides, task_of
    from verify_tf.spec import load_spec_text

    export = SPECS.parent / "examples" / "tracr" / "bos-leak.json"
    for attention, problem in (
        ("float", "the enclosure does not decide position 0 right"),
        ("hardmax", "the interpreter finds a violation"),
    ):
        text = (
            f"model:\n  tracr: {export}\n  attention: {attention}\ndomain:\n  strings: {{max-length: 1}}\n"
            f"properties:\n  - rasp-equivalence: {{program: {export}}}\n"
        )
        spec = load_spec_text(text, "s.yaml", SPECS)
        task = task_of(spec, spec.properties[0], Overrides())
        assert PROPERTY.certified_check(task, ("a",)) == problem

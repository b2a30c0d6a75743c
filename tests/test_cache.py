"""The proof cache: keyed by everything a verdict depends on, definite verdicts only, served in well under a second."""

import json
import os
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner

from verify_tf import fingerprint
from verify_tf.cache import MAX_ENTRY_BYTES, ProofCache, key_material, key_of
from verify_tf.cli import main
from verify_tf.runner import Overrides, check_all, task_of
from verify_tf.spec import load_spec, load_spec_text
from verify_tf.verdict import Verdict

ROOT = Path(__file__).resolve().parent.parent

SPEC = """
model:
  tokens: {grid: 1}
  layers:
    - attention:
        heads:
          - {scoring: hardmax, query: [[1]], key: [[1]], value: [[1]], output: [[1]]}
  readout: [1]
arithmetic: exact
domain:
  grid: {step: 1/4}
  length: 3
properties:
  - permutation-equivariance: {}
"""

# 2 layers x 2 heads, 729 inputs: a check that takes about a second uncached on this machine
SLOW_SPEC = """
model:
  random: {seed: 1, width: 2, layers: 2, heads: 2, ffn-width: 3, scoring: hardmax}
arithmetic: exact
domain:
  grid: {step: 1/2, lo: -1/2, hi: 1/2}
  length: 3
properties:
  - permutation-equivariance: {expect: proved}
"""


def key(text: str, **overrides) -> str:
    spec = load_spec_text(text, "spec.yaml")
    return key_of(key_material(spec, spec.properties[0], Overrides(**overrides), "auto"))


def test_key_is_stable_and_ignores_labels_and_timeouts():
    assert key(SPEC) == key(SPEC)
    assert key(SPEC) == key(SPEC.replace("{}", "{name: renamed, timeout: 5, expect: proved}"))
    assert key(SPEC) == key(SPEC, timeout=3.0)


def test_any_change_to_weights_spec_or_versions_invalidates(monkeypatch):
    base = key(SPEC)
    assert key(SPEC.replace("value: [[1]]", "value: [[2]]")) != base  # a weight
    assert key(SPEC.replace("step: 1/4", "step: 1/2")) != base  # the domain
    assert key(SPEC.replace("arithmetic: exact", "arithmetic: {mode: fixed, bits: 8, frac: 2}")) != base
    assert key(SPEC.replace("{}", "{on: readout}")) != base  # the property's options
    assert key(SPEC.replace("scoring: hardmax", "scoring: uniform")) != base
    assert key(SPEC, minimize=True) != base
    monkeypatch.setattr(fingerprint, "__version__", "99.0")
    assert key(SPEC) != base  # the tool version
    monkeypatch.undo()
    monkeypatch.setattr(fingerprint, "library_versions", lambda: {"z3-solver": "0.0.1", "torch": None, "numpy": None})
    assert key(SPEC) != base  # the solver version
    monkeypatch.undo()
    monkeypatch.setattr(fingerprint, "source_fingerprint", lambda: "edited")
    assert key(SPEC) != base  # the tool's own source (a changed property or engine)


def test_smt2_output_is_never_served_from_the_cache():
    spec = load_spec_text(SPEC, "spec.yaml")
    assert key_material(spec, spec.properties[0], Overrides(smt2_dir=Path("queries")), "auto") is None


def _lookup(text: str = SPEC) -> tuple[str, dict, object]:
    """The key, key material and task of the first property of ``text`` (what the runner asks the cache with)."""
    spec = load_spec_text(text, "spec.yaml")
    material = key_material(spec, spec.properties[0], Overrides(), "auto")
    return key_of(material), material, task_of(spec, spec.properties[0], Overrides())


def test_only_definite_verdicts_are_stored(tmp_path):
    store = ProofCache(tmp_path)
    key, material, task = _lookup()
    assert not store.put(key, material, Verdict("p", "unknown", "interpret", detail="timeout"))
    assert not store.put(key, material, Verdict("p", "error", "interpret", detail="bug"))
    assert store.get(key, material, task) is None and store.rejected == []  # nothing stored: a plain miss
    assert store.put(key, material, Verdict("p", "proved", "interpret", method="exhaustive", seconds=2.5))
    assert store.get(key, material, task).status == "proved"
    assert (tmp_path / ".gitignore").read_text().strip().endswith("*")


def test_an_unwritable_cache_never_breaks_a_check(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    key, material, _ = _lookup()
    assert not ProofCache(blocker).put(key, material, Verdict("p", "proved", "interpret"))
    spec = load_spec_text(SPEC, str(tmp_path / "spec.yaml"))
    [verdict] = check_all([spec], Overrides(), cache=ProofCache(blocker))
    assert verdict.status == "proved" and not verdict.cached


def test_corrupt_or_foreign_entries_are_misses(tmp_path):
    store = ProofCache(tmp_path)
    key, material, task = _lookup()
    store.put(key, material, Verdict("p", "proved", "interpret"))
    entry = tmp_path / key[:2] / f"{key}.json"
    entry.write_text("{not json")
    assert store.get(key, material, task) is None
    entry.write_text(json.dumps({"body": {"key": "e" * 64}, "hmac": ""}))
    assert store.get(key, material, task) is None
    assert [reason.split(": ", 1)[1] for reason in store.rejected] == [
        "unreadable (JSONDecodeError)",
        "its key material is not this check's (an entry filed under another key)",
    ]


def test_unchanged_spec_rechecks_from_the_cache(tmp_path):
    spec = load_spec_text(SLOW_SPEC, str(tmp_path / "slow.yaml"))
    store = ProofCache(tmp_path / "cache")
    [first] = check_all([spec], Overrides(), cache=store)
    [second] = check_all([spec], Overrides(), cache=store)
    assert first.status == second.status == "proved" and not first.cached and second.cached
    assert second.detail == first.detail and second.statistics["cached_check_seconds"] == first.seconds
    changed = load_spec_text(SLOW_SPEC.replace("seed: 1", "seed: 2"), str(tmp_path / "slow.yaml"))
    [third] = check_all([changed], Overrides(), cache=store)
    assert not third.cached


def test_cli_marks_cached_results_and_no_cache_bypasses(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    runner = CliRunner()
    junit = tmp_path / "junit.xml"
    args = [
        "check",
        str(spec),
        "--cache",
        str(tmp_path / "c"),
        "--json",
        str(tmp_path / "r.json"),
        "--junit",
        str(junit),
    ]

    def row(result) -> str:  # the verdict table's one row: the time column says `cached` for a cached verdict
        (line,) = [line for line in result.output.splitlines() if line.startswith(" ✓ ")]
        return line

    first = runner.invoke(main, args)
    assert first.exit_code == 0 and not row(first).endswith(" cached") and "(cached)" not in junit.read_text()
    second = runner.invoke(main, args)
    assert second.exit_code == 0 and row(second).endswith(" cached")
    assert json.loads((tmp_path / "r.json").read_text())["results"][0]["cached"] is True
    assert "proved (exhaustive) with engine enumerate" in junit.read_text() and "(cached)" in junit.read_text()
    third = runner.invoke(main, args + ["--no-cache"])
    assert not row(third).endswith(" cached")
    assert json.loads((tmp_path / "r.json").read_text())["results"][0]["cached"] is False


def test_a_fifo_a_device_or_a_huge_file_planted_as_an_entry_is_refused_at_once(tmp_path):
    """The cache folder is data anyone with write access controls (CI restores it from an archive): a FIFO at an
    entry's path used to block the check forever, /dev/zero ended in a MemoryError traceback (exit 1, the code
    of `refuted`). Each is now refused (the check runs again), and a .gitignore planted as a symbolic link is
    never written through."""
    key, material, task = _lookup()
    entry = tmp_path / key[:2] / f"{key}.json"
    entry.parent.mkdir()
    os.mkfifo(entry)
    store = ProofCache(tmp_path)
    assert store.get(key, material, task) is None
    entry.unlink()
    entry.symlink_to("/dev/zero")
    assert store.get(key, material, task) is None
    entry.unlink()
    entry.write_bytes(b" " * (MAX_ENTRY_BYTES + 1))
    assert store.get(key, material, task) is None
    assert [reason.split(": ", 1)[1] for reason in store.rejected] == [
        "not a regular file: it is a FIFO (named pipe)",
        "not a regular file: it is a character device",
        "the entry is larger than 16 MiB (the limit for text inputs)",
    ]
    (tmp_path / ".gitignore").symlink_to(tmp_path / "planted")
    assert store.put(key, material, Verdict("p", "proved", "interpret"))  # replaces the planted entry
    assert not (tmp_path / "planted").exists() and store.get(key, material, task).status == "proved"


# One model, three properties: permutation-equivariance proved (64 inputs), output-bounds refuted at X = [0, 0, 1/2]
# (q = 1 at position 2: the hardmax head attends to the largest token, 1/2, and adds it to the residual 1/2), and
# contextual-mapping refuted by equivariance (a pair of permuted inputs gives equal values): checked by hand and
# by `verify-tf check` with --no-cache.
THREE = SPEC.replace(
    "  - permutation-equivariance: {}",
    "  - permutation-equivariance: {}\n  - output-bounds: {lo: -1/2, hi: 1/2}\n  - contextual-mapping: {}",
)


def _entries(folder: Path) -> dict[str, Path]:
    """The cache's entry files by the verdict they hold."""
    found = {}
    for path in folder.glob("*/*.json"):
        verdict = _stored(json.loads(path.read_text()))
        found[f"{verdict['kind']} {verdict['verdict']}"] = path
    return found


def _stored(entry: dict) -> dict:
    """The verdict inside an entry (entries before issue 26 had no body: the tests also run against them)."""
    return entry.get("body", entry)["verdict"]


def _run(tmp_path: Path, *extra: str) -> tuple[int, str, dict]:
    (tmp_path / "three.yaml").write_text(THREE)
    report = tmp_path / "r.json"
    args = ["check", str(tmp_path / "three.yaml"), "--cache", str(tmp_path / "c"), "--json", str(report), *extra]
    result = CliRunner().invoke(main, args)
    text = " ".join(result.output.split())
    return result.exit_code, text, {e["property"]: e for e in json.loads(report.read_text())["results"]}


def test_an_entry_edited_from_refuted_to_proved_is_not_served(tmp_path):
    # issue 26: the edit used to be served as "proved (exhaustive) (cached)", exit 0
    code, _, first = _run(tmp_path)
    assert code == 1 and first["output-bounds"]["verdict"] == "refuted"
    path = _entries(tmp_path / "c")["output-bounds refuted"]
    data = json.loads(path.read_text())
    _stored(data).update(verdict="proved", counterexample=None)
    path.write_text(json.dumps(data))
    code, output, again = _run(tmp_path)
    assert code == 1 and again["output-bounds"]["verdict"] == "refuted" and not again["output-bounds"]["cached"]
    assert again["permutation-equivariance"]["cached"]  # the untouched entries are still served
    assert "1 entry not trusted, so checked again" in output and "its signature does not verify" in output
    assert "proof cache " in output and "2 verdicts served" in output  # the run says what the cache did


def test_a_refutation_of_another_property_filed_under_a_proved_key_is_not_served(tmp_path):
    # issue 26: a contextual-mapping refutation copied under the equivariance proof's key was served as
    # "refuted (cached)" with a contextual-mapping witness for a permutation-equivariance property
    _run(tmp_path)
    entries = _entries(tmp_path / "c")
    entries["permutation-equivariance proved"].write_text(entries["contextual-mapping refuted"].read_text())
    _, output, again = _run(tmp_path)
    assert again["permutation-equivariance"]["verdict"] == "proved" and not again["permutation-equivariance"]["cached"]
    assert "its key material is not this check's" in output


def test_a_signed_refutation_is_replayed_before_it_is_served(tmp_path):
    # an entry signed with the right key (an engine bug, or a leaked key) whose witness does not violate the
    # property: X = [0, 0, 0] gives q = 0 at every position, inside [-1/2, 1/2]
    from verify_tf.cache import cache_secret, signature

    _run(tmp_path)
    path = _entries(tmp_path / "c")["output-bounds refuted"]
    data = json.loads(path.read_text())
    data["body"]["verdict"]["counterexample"]["input"] = [["0"], ["0"], ["0"]]
    data["hmac"] = signature(cache_secret(create=False), data["body"])
    path.write_text(json.dumps(data))
    _, output, again = _run(tmp_path)
    assert again["output-bounds"]["verdict"] == "refuted" and not again["output-bounds"]["cached"]
    assert again["output-bounds"]["counterexample"]["input"] == [["0"], ["0"], ["1/2"]]
    assert "its counterexample does not replay (the interpreter finds no violation" in output
    _, _, third = _run(tmp_path)  # the re-checked verdict was stored again: served, and replayed, from now on
    assert third["output-bounds"]["cached"] and third["contextual-mapping"]["cached"]


def test_a_witness_that_needs_its_check_to_replay_is_never_served(tmp_path):
    # a solver-chosen member of an architecture class ("model" in the witness) cannot be replayed from the
    # witness alone: such a refutation is checked again rather than served
    store = ProofCache(tmp_path)
    key, material, task = _lookup()
    witness = {"input": [["0"], ["0"], ["0"]], "model": {}, "summary": "a member of the class"}
    assert store.put(key, material, Verdict("p", "refuted", "architecture", counterexample=witness))
    assert store.get(key, material, task) is None
    # issue 39: said as what it is, the documented normal case, not as a counterexample that "does not replay"
    assert store.rejected == [] and len(store.rechecked) == 1
    assert store.notes() == [
        f"proof cache {tmp_path}: 0 verdicts served; 1 re-checked: refutations by a solver-chosen member of a class "
        "are never served (the check re-derives the member)"
    ]


def test_the_signing_key_lives_outside_the_cache_folder(tmp_path, monkeypatch):
    from verify_tf.cache import secret_path

    monkeypatch.delenv("VERIFY_TF_CACHE_SECRET")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    store = ProofCache(tmp_path / "cache")
    key, material, task = _lookup()
    assert store.put(key, material, Verdict("p", "proved", "interpret"))
    assert secret_path() == tmp_path / "config" / "verify-tf" / "cache-secret"
    assert secret_path().stat().st_mode & 0o777 == 0o600 and len(secret_path().read_text().strip()) == 64
    assert not list((tmp_path / "cache").rglob("*secret*"))
    assert store.get(key, material, task).status == "proved"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "another machine"))  # a cache restored elsewhere
    assert store.get(key, material, task) is None and "signature does not verify" in store.rejected[-1]
    monkeypatch.setenv("VERIFY_TF_CACHE_SECRET", "shared by the CI jobs")
    assert store.get(key, material, task) is None  # signed with the file's key, not this one
    assert store.put(key, material, Verdict("p", "proved", "interpret"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "a third machine"))
    assert store.get(key, material, task).status == "proved"  # the same secret everywhere: served


def test_certify_never_reads_the_cache(tmp_path):
    _run(tmp_path)
    _, output, certified = _run(tmp_path, "--certify", str(tmp_path / "certificates"))
    proved = certified["permutation-equivariance"]
    assert not proved["cached"] and proved["statistics"]["certificate"]["kind"] == "exhaustive"
    assert " cached\n" not in output


@pytest.mark.slow  # loads a float tracr export (about 3 s)
def test_a_cached_float_refutation_is_confirmed_by_its_enclosure_without_jax(tmp_path, monkeypatch):
    """Issue 39: serving a cached float tracr refutation took 8 s (importing JAX and running tracr's model
    un-jitted, a second opinion the original check recorded); the enclosure alone decides it (docs/ci.md)."""
    from verify_tf.floats import jax_replay, second_opinion

    spec = load_spec(ROOT / "specs" / "tracr-float-prev-a-wide.yaml")
    prop = spec.properties[0]
    task = task_of(spec, prop, Overrides())
    with second_opinion.declined():
        assert not jax_replay.available()
        witness = task.prop.violation(task, ("a", "a"))  # the spec's refutation: input aa, position 0 (its comment)
    assert witness is not None and witness["position"] == 0
    material = key_material(spec, prop, Overrides(), "auto")
    store = ProofCache(tmp_path)
    assert store.put(key_of(material), material, Verdict(prop.label, "refuted", "enumerate", counterexample=witness))

    def no_jax(*args, **kwargs):
        raise AssertionError("the cache ran tracr's JAX model")

    monkeypatch.setattr(jax_replay, "final_streams", no_jax)
    served = store.get(key_of(material), material, task)
    assert served is not None and served.counterexample["string"] == "aa" and store.served == 1
    # a tampered position 1 (the program and the model agree there: the enclosure decides it right) is refused
    tampered = dict(witness, input=[["a"]], string="a")
    assert store.put(key_of(material), material, Verdict(prop.label, "refuted", "enumerate", counterexample=tampered))
    assert store.get(key_of(material), material, task) is None and "does not replay" in store.rejected[-1]


def test_a_cached_checkpoint_refutation_is_confirmed_without_the_library(tmp_path, monkeypatch):
    """Issue 39, as for tracr above: the first cached refutation of a Hugging Face checkpoint in a run imported torch
    and transformers to replay it (specs/hf-bert-majority.yaml: 8.3 s of a warm re-run of the shipped specs,
    bench/bench_cache.py). The enclosure and verify-tf's float32 mirror decide it; the stored witness keeps what
    transformers gave when it was found. specs/hf-gpt2-majority.yaml's comment: above 7 already at X = a."""
    from verify_tf.builders import hf_replay
    from verify_tf.floats import second_opinion

    spec = load_spec(ROOT / "specs" / "hf-gpt2-majority.yaml")
    prop = next(p for p in spec.properties if p.label == "the logit difference stays below 7")
    task = task_of(spec, prop, Overrides())
    with second_opinion.declined():
        witness = task.prop.violation(task, ("a",))
    assert witness is not None and witness["input"] == ["a"] and list(witness["replayed_in"]) == ["verify-tf mirror"]
    assert Fraction(witness["value"]) > 7  # 7487413/1048576 = 7.1405 (the mirror's float32 value)
    material = key_material(spec, prop, Overrides(), "enumerate")
    store = ProofCache(tmp_path)
    assert store.put(key_of(material), material, Verdict(prop.label, "refuted", "enumerate", counterexample=witness))

    def no_library(*args, **kwargs):
        raise AssertionError("the cache ran transformers")

    monkeypatch.setattr(hf_replay.LibraryReplay, "__call__", no_library)
    served = store.get(key_of(material), material, task)
    assert served is not None and served.counterexample["input"] == ["a"] and store.served == 1
    # a tampered witness, X = b (the difference is below 7 there: the enclosure says so), is refused
    tampered = dict(witness, input=["b"])
    assert store.put(key_of(material), material, Verdict(prop.label, "refuted", "enumerate", counterexample=tampered))
    assert store.get(key_of(material), material, task) is None and "does not replay" in store.rejected[-1]


def test_one_digest_of_a_model_keys_the_cache_the_task_and_the_certificate_subject():
    """``fingerprint.model_digest`` is the one digest of a model: the cache key's material, the certificate's
    subject and the task's fingerprint are computed from it (a weight changed in the spec changes all three)."""
    import hashlib

    from verify_tf.certify.subject import subject_of
    from verify_tf.ir.plain import model_to_dict

    _, material, task = _lookup()
    spec = load_spec_text(SPEC, "spec.yaml")
    digest = fingerprint.model_digest(spec.model)
    # independently: SHA-256 of the model's plain form as canonical JSON (sorted keys, no spaces)
    plain = json.dumps(model_to_dict(spec.model), sort_keys=True, separators=(",", ":"))
    assert digest == hashlib.sha256(plain.encode()).hexdigest()
    assert material["model"] == digest
    assert (
        subject_of(Path("spec.yaml"), 0, task.prop.name, task.label, task, spec.seed, "auto")["model_sha256"] == digest
    )
    expected = fingerprint.digest([digest, repr(task.arithmetic), repr(task.domain)])[:16]
    assert task.fingerprint == expected
    changed = SPEC.replace("readout: [1]", "readout: [2]")
    assert fingerprint.model_digest(load_spec_text(changed, "spec.yaml").model) != digest

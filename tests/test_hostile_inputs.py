"""The hostile-input corpus (issue 26, item 7): specs, programs and files written to hurt a verifier.

Every case is a spec (or a `.cr` program, or a command line) built in a fresh temporary folder, run through the
CLI in this process (the fast test layer: no Python start-up per case), and asserted three ways:

* **its exit code**: 2 for every input error (never 1, the code of ``refuted``, and never a traceback);
* **a located message**: the file and, where there is one, the line (``spec.yaml:4: domain.grid.hi: ...``, a
  ``.cr`` file's line and column), saying what was expected;
* **nothing executed or written outside the temporary folder**: cases that would run code if the file were
  unpickled or a YAML tag constructed (``os.system``, ``__reduce__``) name a canary file that must not appear;
  after every case the repository's tree is unchanged (``git status``) and the case's ``TMPDIR`` is empty.

Each case's comment says what main bfa436e did with it, where that was wrong. The numbers in the expected
messages are the documented limits (docs/cli.md, "Input limits"; docs/crasp.md, "Limits").
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from helpers import torch_installed
from verify_tf.cli import main

ROOT = Path(__file__).resolve().parent.parent
BIG = "1" + "0" * 100_000  # 10^100000, written out
CANARY = "pwned"  # the file a successful attack would create in the case's folder

GRID = """name: hostile
model: {{tokens: {{grid: 1}}, layers: []}}
arithmetic: exact
domain: {{grid: {{step: {step}, hi: {hi}}}, length: 2}}
properties:
  - output-bounds: {{hi: 5{extra}}}
{top}"""
STRINGS = """name: hostile
model: {{tokens: {{alphabet: [a, b], embedding: [[1], [0]]}}, layers: []}}
arithmetic: exact
domain: {{strings: {{max-length: {length}}}}}
properties:
  - output-bounds: {{hi: 5}}
"""
FILE_MODEL = """name: hostile
model: {{file: {path}}}
arithmetic: exact
domain: {{strings: {{max-length: 2}}}}
properties:
  - output-bounds: {{hi: 5}}
"""
CRASP = """name: hostile
model: {{construct: crasp-program, program: {program}}}
arithmetic: {{mode: fixed, bits: 16, frac: 0}}
domain: {{strings: {{max-length: 3}}}}
properties:
  - crasp-equivalence: {{program: {program}}}
"""


def grid(step="1/2", hi="1/2", extra="", top="") -> str:
    return GRID.format(step=step, hi=hi, extra=extra, top=top)


@dataclass
class Case:
    name: str
    make: Callable[[Path], list[str]]  # writes the case's files into the folder, returns the command line
    message: str  # a regular expression the output must match (the location included)
    code: int = 2
    needs: str = ""  # "torch": skipped without it


def spec_case(name: str, text: str, message: str, **kwargs) -> Case:
    def make(folder: Path) -> list[str]:
        (folder / "spec.yaml").write_text(text)
        return ["check", "spec.yaml", "--no-cache"]

    return Case(name, make, message, **kwargs)


def crasp_case(name: str, program: str | bytes, message: str, command: str = "check") -> Case:
    def make(folder: Path) -> list[str]:
        (folder / "prog.cr").write_bytes(program if isinstance(program, bytes) else program.encode())
        if command == "check":
            (folder / "spec.yaml").write_text(CRASP.format(program="prog.cr"))
            return ["check", "spec.yaml", "--no-cache"]
        return ["crasp", command, "prog.cr", *(["ab"] if command == "run" else [])]

    return Case(f"{name} ({command})", make, message)


def model_file_case(name: str, setup: Callable[[Path], str], message: str, **kwargs) -> Case:
    def make(folder: Path) -> list[str]:
        (folder / "spec.yaml").write_text(FILE_MODEL.format(path=setup(folder)))
        return ["check", "spec.yaml", "--no-cache"]

    return Case(name, make, message, **kwargs)


def fifo(folder: Path) -> str:
    os.mkfifo(folder / "weights.safetensors")  # reading it would block forever: no writer ever comes
    return "weights.safetensors"


def directory(folder: Path) -> str:
    (folder / "weights.safetensors").mkdir()
    return "weights.safetensors"


def symlink_out(folder: Path) -> str:
    (folder / "weights.safetensors").symlink_to("/etc/passwd")  # outside the spec folder: read, never shown
    return "weights.safetensors"


def symlink_loop(folder: Path) -> str:
    (folder / "a.npz").symlink_to(folder / "b.npz")
    (folder / "b.npz").symlink_to(folder / "a.npz")
    return "a.npz"


def pickled_npz(folder: Path) -> str:
    import numpy as np

    class Attack:
        def __reduce__(self):
            return (os.system, (f"touch {folder / CANARY}",))

    np.save(folder / "payload.npy", np.array([Attack()], dtype=object), allow_pickle=True)
    os.replace(folder / "payload.npy", folder / "weights.npz")  # an .npy with a pickled object, named .npz
    return "weights.npz"


def pickled_pt(folder: Path) -> str:
    import torch

    class Attack:
        def __reduce__(self):
            return (os.system, (f"touch {folder / CANARY}",))

    torch.save({"w": Attack()}, folder / "weights.pt")  # torch.load(weights_only=False) would run os.system
    return "weights.pt"


def malformed_safetensors(folder: Path) -> str:
    header = b'{"__metadata__": {"__verify_tf__": "' + b"[" * 100_000 + b'"}}'
    (folder / "weights.safetensors").write_bytes(len(header).to_bytes(8, "little") + header)
    return "weights.safetensors"


def spec_fifo(folder: Path) -> list[str]:
    os.mkfifo(folder / "spec.yaml")
    return ["check", "spec.yaml", "--no-cache"]


def spec_too_big(folder: Path) -> list[str]:
    with open(folder / "spec.yaml", "wb") as handle:  # sparse: 65 MiB that take no disk
        handle.truncate(65 << 20)
    return ["check", "spec.yaml", "--no-cache"]


def spec_not_utf8(folder: Path) -> list[str]:
    (folder / "spec.yaml").write_bytes(b"name: caf\xe9\nmodel: {random: {seed: 1}}\n")
    return ["check", "spec.yaml", "--no-cache"]


def tracr_export(document: Callable[[dict], object]) -> Callable[[Path], list[str]]:
    def make(folder: Path) -> list[str]:
        original = json.loads((ROOT / "tests" / "data" / "tracr-undefined.json").read_text())
        (folder / "export.json").write_text(json.dumps(document(original)))
        (folder / "spec.yaml").write_text(
            "model: {tracr: export.json}\ndomain: {strings: {max-length: 3}}\n"
            "properties:\n  - rasp-equivalence: {program: export.json}\n"
        )
        return ["check", "spec.yaml", "--no-cache"]

    return make


def policy_error(document: dict) -> dict:
    document["undefined"]["policy"] = "error"
    return document


ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
    for i in range(8)
)  # 10^9 values from 90 written ones ("billion laughs")

CASES = [
    # -- numbers and sizes: main bfa436e hung (listing 10^100000 grid values) or printed a traceback with exit 1
    spec_case("hi 10^100000 written out", grid(hi=BIG), r"spec\.yaml:4: domain\.grid\.hi: .*at most 1000 digits"),
    spec_case("hi 1e100000", grid(hi="1e100000"), r"spec\.yaml:4: domain\.grid\.hi: .*exponent beyond ±1000"),
    spec_case("step 1/10^100000", grid(step="1/" + BIG, hi="1"), r"spec\.yaml:4: domain\.grid\.step: .*1000 digits"),
    spec_case("timeout 10^100000", grid(top=f"timeout: {BIG}\n"), r"spec\.yaml:7: timeout: .*at most 1000 digits"),
    spec_case("timeout 1e100000", grid(extra=", timeout: 1e100000"), r"spec\.yaml:6: .*timeout: .*1000 digits"),
    spec_case(
        "timeout past 10^6 s", grid(top="timeout: 1e7\n"), r"spec\.yaml:7: timeout: expected a number <= 1000000"
    ),
    spec_case("a bound of 2000 digits", grid(extra=", lo: -" + "9" * 2000), r"spec\.yaml:6: .*lo: .*1000 digits"),
    spec_case(
        "a grid of 10^9 values",
        grid(step="1/1000000000", hi="1"),
        r"spec\.yaml:4: domain\.grid: the grid has 1,000,000,001 values per coordinate; at most 1,048,576",
    ),
    spec_case(
        "a grid of 2^64 tokens",
        grid().replace("grid: 1}", "grid: 64}"),
        r"spec\.yaml:4: domain\.grid: the grid has 2\^64 = about 10\^19 tokens",
    ),
    spec_case(
        "plus: true with a 12,288-digit value",
        grid(step="1/1000", hi="1/2").replace("length: 2", "length: 4096").replace("hi: 1/2}", "hi: 1/2, plus: true}"),
        r"spec\.yaml:4: domain\.grid\.plus: −δ\^\(−nd\) = −\(1/1000\)\^\(−4096\) has more than 1000 digits",
    ),
    spec_case("max-length 10^100000", STRINGS.format(length=BIG), r"spec\.yaml:4: domain\.strings\.max-length: .*4096"),
    spec_case("max-length 10^9", STRINGS.format(length="1000000000"), r"spec\.yaml:4: .*max-length: .*<= 4096"),
    spec_case(
        "rlimit past 2^32",
        grid(extra=", engine: smt, rlimit: 99999999999"),
        r"spec\.yaml:6: .*rlimit: expected an integer >= 1 and <= 4294967295",
    ),
    # -- YAML itself
    spec_case("a billion laughs", ALIAS_BOMB, r"spec\.yaml:\d+: the spec expands to too many values"),
    spec_case(
        "10,000 nested lists", "a: " + "[" * 10_000 + "]" * 10_000 + "\n", r"spec\.yaml:1: .*nested more than 100"
    ),
    spec_case(
        "a python tag that would run a command",
        f'model: !!python/object/apply:os.system ["touch {CANARY}"]\n',
        r"spec\.yaml:1: YAML tags such as 'tag:yaml\.org,2002:python/object/apply:os\.system' are not allowed",
    ),
    spec_case("an empty spec", "", r"spec\.yaml:1: the spec is empty"),
    Case("a spec that is a FIFO", spec_fifo, r"spec\.yaml: not a regular file: it is a FIFO"),
    Case("a 65 MiB spec", spec_too_big, r"spec\.yaml: the spec is larger than 1 MiB"),
    Case("a spec that is not UTF-8", spec_not_utf8, r"spec\.yaml: the spec is not UTF-8 text \(byte 9 is b'\\xe9'\)"),
    # -- files a spec names: main bfa436e said "file not found" for a FIFO or a device (or blocked reading them)
    model_file_case(
        "a FIFO as the weight file", fifo, r"spec\.yaml:2: model\.file: .*not a regular file: it is a FIFO"
    ),
    model_file_case(
        "/dev/zero as the weight file",
        lambda folder: "/dev/zero",
        r"spec\.yaml:2: model\.file: /dev/zero: not a regular file: it is a character device",
    ),
    model_file_case(
        "a directory as the weight file",
        directory,
        r"spec\.yaml:2: model\.file: .*not a regular file: it is a directory",
    ),
    model_file_case(
        "a symlink out of the spec folder", symlink_out, r"spec\.yaml:2: model\.file: passwd: unknown model file type"
    ),
    model_file_case(
        "a symlink loop", symlink_loop, r"spec\.yaml:2: model\.file: (cannot resolve a\.npz|a\.npz: cannot read)"
    ),
    model_file_case(
        "an npz holding a pickled object (that would run a command)",
        pickled_npz,
        r"spec\.yaml:2: model\.file: weights\.npz: this file needs pickle to load .*verify-tf never unpickles",
    ),
    model_file_case(
        "a .pt that needs pickle (and would run a command)",
        pickled_pt,
        r"spec\.yaml:2: model\.file: weights\.pt: this file needs pickle to load; verify-tf never unpickles.*"
        r"torch\.save\(model\.state_dict\(\), 'model\.pt'\), or as safetensors",
        needs="torch",
    ),
    model_file_case(
        "a safetensors architecture nested 100,000 deep",
        malformed_safetensors,
        r"spec\.yaml:2: model\.file: weights\.safetensors: malformed architecture \(nested too deeply\)",
    ),
    model_file_case(
        "a NUL in the file name", lambda folder: '"a\\0b.npz"', r"spec\.yaml:2: model\.file: file not found: .*NUL"
    ),
    # -- .cr programs: main bfa436e raised RecursionError / ValueError (exit 1) in check and in crasp depth
    crasp_case(
        "50,000 nested parentheses",
        "x = " + "(" * 50_000 + '#"a"' + ")" * 50_000 + " > 0\n",
        r"prog\.cr:1:105: the expression nests deeper than 100 levels",
    ),
    crasp_case(
        "50,000 nested parentheses",
        "x = " + "(" * 50_000 + '#"a"' + ")" * 50_000 + " > 0\n",
        r"prog\.cr:1:105: .*deeper than 100",
        "depth",
    ),
    crasp_case(
        "50,000 negations",
        "x = " + "!" * 50_000 + '"a"\n',
        r"prog\.cr:1:105: the expression nests deeper than 100 levels",
    ),
    crasp_case("50,000 negations", "x = " + "!" * 50_000 + '"a"\n', r"prog\.cr:1:105: .*deeper than 100", "depth"),
    crasp_case(
        "a chain of 50,000 sums",
        "x = " + " + ".join(['#"a"'] * 50_000) + " > 0\n",
        r"prog\.cr:1:5: .*chain of operators",
    ),
    crasp_case(
        "a 100,000-digit constant",
        f'x = #"a" > {BIG}\n',
        r"prog\.cr:1:12: a constant of 100001 digits; at most 1000",
        "depth",
    ),
    crasp_case("a 100,000-digit constant", f'x = #"a" > {BIG}\n', r"prog\.cr:1:12: a constant of 100001 digits", "run"),
    crasp_case(
        "a program that is not UTF-8",
        b'x = #"\xe9" > 0\n',
        r"spec\.yaml:2: model: cannot read .*prog\.cr: the program is not UTF-8 text \(byte 6 is b'\\xe9'\)",
    ),
    # -- tracr exports
    Case(
        "an export whose program is undefined on aa",
        tracr_export(policy_error),
        r"spec\.yaml:4: properties\[0\]\.rasp-equivalence\.program: the RASP program is undefined on 'aa'",
    ),
    Case(
        "an export nested 100,000 deep",
        tracr_export(lambda document: json.loads("[" * 10 + "]" * 10) and "X"),
        r"spec\.yaml:1: model\.tracr: export\.json is not a JSON export: maximum recursion depth exceeded",
    ),
    # -- the command line
    Case(
        "--timeout 1e100000",
        lambda folder: ((folder / "spec.yaml").write_text(grid()), ["check", "spec.yaml", "--timeout", "1e100000"])[1],
        r"Invalid value for '--timeout': inf is not in the range 0<x<=1000000",
    ),
]


def _nested_export(folder: Path) -> None:  # the second tracr case writes raw text, not JSON of a document
    (folder / "export.json").write_text("[" * 100_000 + "]" * 100_000)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_input_is_a_located_input_error(case, sandbox):
    if case.needs == "torch" and not torch_installed():
        pytest.skip("needs torch")
    work, scratch = sandbox
    arguments = case.make(work)
    if case.name == "an export nested 100,000 deep":
        _nested_export(work)
    result = CliRunner().invoke(main, arguments, env={"COLUMNS": "400"})
    output = result.output
    assert result.exit_code == case.code, output + repr(result.exception)
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), output
    assert "Traceback" not in output and "RecursionError" not in output
    assert re.search(case.message, output), output[:2000]
    assert "root:x:0:0" not in output  # a file's content is never printed (the /etc/passwd symlink)
    assert not (work / CANARY).exists() and not Path(CANARY).exists(), "the input ran code"
    assert list(scratch.iterdir()) == [], "the case left files in TMPDIR"
    assert len(output) < 5000  # one message, not a dump of the input


def test_the_corpus_covers_every_case_the_issue_lists():
    names = " ".join(c.name for c in CASES)
    for listed in (
        "hi 10^100000",
        "hi 1e100000",
        "step 1/10^100000",
        "timeout 10^100000",
        "50,000 nested parentheses (check)",
        "50,000 nested parentheses (depth)",
        "50,000 negations (check)",
        "50,000 negations (depth)",
        "100,000-digit constant (depth)",
        "FIFO as the weight file",
        "/dev/zero as the weight file",
        "needs pickle",
        "undefined on aa",
        "symlink out of the spec folder",
        "billion laughs",
        "10,000 nested lists",
        "directory as the weight file",
        "not UTF-8",
    ):
        assert listed in names, listed

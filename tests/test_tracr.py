"""The real tracr path (needs the ``tracr`` extra, installed by ``pip install -e '.[test]'``): every library
program's tabulation agrees with tracr's own ``rasp.evaluate`` on every input up to its maximum length, and a
program compiled here is exported, imported and proved, and decodes as haiku's float model does."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path

import pytest

pytest.importorskip("tracr")
pytest.importorskip("jax")

from tracr.compiler import lib
from tracr.rasp import rasp

from verify_tf.builders.tracr_import import import_tracr, import_tracr_model, read_export
from verify_tf.runner import Overrides, check_property
from verify_tf.semantics import Exact, evaluate
from verify_tf.spec import load_spec_text
from verify_tf.tracr_export import check_against_rasp, compile_and_export, tabulate

pytestmark = pytest.mark.slow  # end to end: compiles real RASP programs with tracr and jax

ROOT = Path(__file__).resolve().parent.parent
LIBRARY_SCRIPT = ROOT / "examples" / "tracr" / "export_library.py"


def library():
    spec = importlib.util.spec_from_file_location("export_library", LIBRARY_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.PROGRAMS


PROGRAMS = library()


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_tabulated_program_agrees_with_rasp_evaluate_on_every_input(name):
    build, vocabulary, max_seq_len, _ = PROGRAMS[name]
    program = build()
    table = tabulate(program, vocabulary, max_seq_len)
    count, undefined = check_against_rasp(program, table, vocabulary, max_seq_len)  # raises at the first difference
    assert count == sum(len(vocabulary) ** n for n in range(1, max_seq_len + 1))
    assert undefined is None  # every library program is defined on every input (else the export would refuse it)
    committed = read_export(ROOT / "examples" / "tracr" / f"{name}.json").program
    assert [n.kind for n in table.nodes] == [n.kind for n in committed.nodes]  # the committed file is current
    assert [n.values for n in table.nodes] == [n.values for n in committed.nodes]


@pytest.mark.slow
def test_compile_export_import_prove(tmp_path):
    """The whole path once: tracr compiles make_sort_unique, the export is read by a spec and proved; the notebook
    import gives the same IR; the exact decoding equals haiku's float model at every defined position."""
    program = lib.make_sort_unique(rasp.tokens, rasp.tokens)
    path = tmp_path / "sort_unique.json"
    said: list[str] = []
    model, document = compile_and_export(program, {1, 2, 3}, 4, path, progress=said.append)
    assert document["checked"]["inputs"] == 3 + 9 + 27 + 81
    assert said[:3] == [
        "compiling with tracr (max_seq_len 4)",
        "tabulating the program over 3 tokens up to length 4",
        "checking the table against tracr's rasp.evaluate on 120 inputs",
    ]
    assert said[3].startswith(f"wrote {path} (") and said[3].endswith("; 120 inputs checked)")
    text = (
        f"model: {{tracr: {path}}}\ndomain: {{strings: {{max-length: 4}}}}\n"
        f"properties:\n  - rasp-equivalence: {{program: {path}, engine: enumerate}}\n"
    )
    loaded = load_spec_text(text, "t.yaml", tmp_path)
    result = check_property(loaded, loaded.properties[0], Overrides())
    assert result.status == "proved", result.detail
    direct = import_tracr_model(model, program, name=loaded.model.name)
    assert direct == loaded.model
    export = read_export(path)
    ir = import_tracr(path)
    for length in range(1, 4):
        for word in itertools.product([1, 2, 3], repeat=length):
            expected = rasp.evaluate(program, list(word))
            floats = model.apply(["BOS", *word]).decoded[1:]
            stream = evaluate(ir, Exact(), tuple(str(w) for w in word)).output
            for position, want in enumerate(expected):
                if want is None:
                    continue
                scores = [stream[position + 1][i] for _, i in export.output_space]
                exact = export.output_space[scores.index(max(scores))][0]
                assert exact == floats[position] == want, (word, position)


@pytest.mark.slow
def test_the_docs_export_snippet_runs_and_says_what_it_does(tmp_path, monkeypatch):
    """docs/tracr.md's export snippet, executed as written: it prints each step (issue 27: 13.7 s in silence)."""
    import contextlib
    import io
    import re

    doc = (Path(__file__).resolve().parent.parent / "docs" / "tracr.md").read_text(encoding="utf-8")
    snippet = re.search(r"```python\n(from tracr.*?write_export.*?)```", doc, flags=re.S).group(1)
    monkeypatch.chdir(tmp_path)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(snippet, "docs/tracr.md", "exec"), {})
    lines = printed.getvalue().splitlines()
    shown = doc.split("It prints its steps", 1)[1].split("```\n", 1)[1].split("```", 1)[0].splitlines()
    assert lines[:-1] == shown[:-1]
    assert lines[-1].startswith("wrote sort_unique.json (") and lines[-1].endswith("; 1,364 inputs checked)")
    assert shown[-1] == "wrote sort_unique.json (…)"
    assert read_export(tmp_path / "sort_unique.json").program.max_length == 5

"""Import + check of a Hugging Face checkpoint (docs/performance.md, "Checkpoints as they run"; docs/import.md).

A 2-layer, width-16 GPT-2 (``GPT2LMHeadModel``: 2 heads, inner 64, vocabulary of 4, context 8), seeded (random
initialisation, or ``--trained``: 300 Adam steps on majority of a over {a, b, c, d}), saved with ``save_pretrained``;
then ``verify-tf import`` (the spec: the logit of ``a`` over every string of {a, b, c, d} up to length 6, 5,460
strings) and ``verify-tf check`` (the starter ``output-bounds``), each a subprocess, timed in CPU seconds of the child
and wall seconds, with the verdict and the enclosure's widest interval. One JSON line per run.

    python bench/bench_hf.py [--trained] [--runs N]          # needs torch and transformers (the test extra)
"""

from __future__ import annotations

import itertools
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _model(trained: bool) -> object:
    import torch
    import transformers

    torch.manual_seed(0)
    torch.set_num_threads(1)
    config = transformers.GPT2Config(vocab_size=4, n_positions=8, n_embd=16, n_layer=2, n_head=2, resid_pdrop=0.0,
                                     embd_pdrop=0.0, attn_pdrop=0.0)  # fmt: skip
    model = transformers.GPT2LMHeadModel(config)
    if trained:
        rng = random.Random(0)
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
        for _ in range(300):
            strings = [[rng.randrange(4) for _ in range(6)] for _ in range(64)]
            targets = [[0 if 2 * sum(t == 0 for t in s[: i + 1]) > i + 1 else 1 for i in range(6)] for s in strings]
            logits = model(input_ids=torch.tensor(strings)).logits
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 4), torch.tensor(targets).reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return model.eval()


def _child(command: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, wall, done


def _widest(folder: Path) -> float:
    from verify_tf.builders.hf_checkpoint import load_checkpoint, network_of, readout_choice
    from verify_tf.floats.enclosure import SCALE
    from verify_tf.floats.transformer_enclosure import enclose_readout, prepare

    checkpoint = load_checkpoint(folder, ["a", "b", "c", "d"])
    network = network_of(checkpoint, readout_choice(checkpoint.symbols, {"logit": "a"}), None)
    widest = 0
    for n in range(1, 7):
        rows = np.array(list(itertools.product(range(4), repeat=n)), dtype=np.int64)
        for start in range(0, len(rows), 64):
            box = enclose_readout(prepare(network), rows[start : start + 64])
            widest = max(widest, int((box.hi - box.lo).max()))
    return widest / (1 << SCALE)


def main(arguments: list[str]) -> None:
    trained = "--trained" in arguments
    runs = int(arguments[arguments.index("--runs") + 1]) if "--runs" in arguments else 1
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work) / "gpt2-2x16"
        _model(trained).save_pretrained(folder)
        verify = [sys.executable, "-m", "verify_tf"]
        for _ in range(runs):
            spec = Path(work) / "spec.yaml"
            spec.unlink(missing_ok=True)
            imported = _child([*verify, "import", str(folder), "-o", str(spec), "--readout-token", "a",
                               "--vocabulary", "a,b,c,d"])  # fmt: skip
            assert imported[2].returncode == 0, imported[2].stderr
            report = Path(work) / "report.json"
            checked = _child([*verify, "check", "--no-cache", str(spec), "--json", str(report)])
            result = json.loads(report.read_text())["results"][0]
            print(json.dumps({
                "model": "GPT2LMHeadModel 2x16, 2 heads, vocabulary 4" + (" (trained)" if trained else ""),
                "strings": 5460,
                "import_cpu_s": round(imported[0], 2), "import_wall_s": round(imported[1], 2),
                "check_cpu_s": round(checked[0], 2), "check_wall_s": round(checked[1], 2),
                "verdict": result["verdict"], "detail": result["detail"][:160],
                "load": os.getloadavg()[0],
            }))  # fmt: skip
        print(json.dumps({"widest_enclosure": _widest(folder)}))


if __name__ == "__main__":
    main(sys.argv[1:])

"""Train the tiny checkpoints of the shipped specs ``specs/hf-*.yaml`` and ``specs/nanogpt-*.yaml`` (docs/import.md).

The files in this folder are made by this script (it is their source):

    pip install torch==2.13.0 transformers==5.23.0      # or: pip install -e ".[test]"
    python examples/checkpoints/make_checkpoints.py     # about a minute on one CPU thread

The task is majority at every prefix: strings over {a, b} after a BOS token "^"; at each position the model predicts
"a" if the prefix so far has more a's than b's, else "b" (a tie predicts "b"). Each model is trained with cross-entropy
on that next token for a few hundred Adam steps, seeded, then saved the way its users save it:

* ``gpt2-majority/``: ``GPT2LMHeadModel`` (1 layer, width 16, 2 heads, tanh-GELU) with ``save_pretrained``;
* ``llama-majority/``: ``LlamaForCausalLM`` (1 layer, width 16, 4 heads and 2 key/value heads, RoPE, SwiGLU);
* ``bert-majority/``: ``BertForMaskedLM`` (1 layer, width 16, 2 heads, erf-GELU; bidirectional, so it reads the whole
  string: its label at every position is the majority of the whole string);
* ``nanogpt-majority.pt``: a nanoGPT ``ckpt.pt`` (``model``, ``model_args``, ``optimizer``, ...), trained as a
  transformers GPT-2 with erf-GELU (nanoGPT's architecture) and written in nanoGPT's layout (Linear weights, the
  tied ``lm_head``).

Each folder also gets a ``tokenizer.json`` with the vocabulary ["a", "b", "^"] (a word-level table verify-tf reads;
transformers' tokenizers read it too), so specs name tokens instead of ids.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import torch
import transformers

HERE = Path(__file__).resolve().parent
VOCABULARY = ["a", "b", "^"]
BOS = 2
STEPS = 400


def majority_labels(strings: list[list[int]], causal: bool) -> list[list[int]]:
    out = []
    for s in strings:
        labels, lead = [], 0
        for token in s:
            lead += 1 if token == 0 else -1
            labels.append(0 if lead > 0 else 1)
        out.append(labels if causal else [labels[-1]] * len(s))
    return out


def batch(rng: random.Random, causal: bool, size: int = 64, longest: int = 6) -> tuple[torch.Tensor, torch.Tensor]:
    length = rng.randint(1, longest)
    strings = [[rng.randint(0, 1) for _ in range(length)] for _ in range(size)]
    labels = majority_labels(strings, causal)
    ids = torch.tensor([[BOS, *s] for s in strings])
    targets = torch.tensor([[-100, *t] for t in labels])  # the BOS position is not trained
    return ids, targets


def train(model: torch.nn.Module, causal: bool, seed: int) -> torch.nn.Module:
    rng = random.Random(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(STEPS):
        ids, targets = batch(rng, causal)
        logits = model(input_ids=ids).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    ids, targets = batch(random.Random(seed + 1), causal, size=512)
    with torch.no_grad():
        predicted = model(input_ids=ids).logits.argmax(-1)
    mask = targets != -100
    accuracy = (predicted[mask] == targets[mask]).float().mean().item()
    print(f"  {type(model).__name__}: loss {loss.item():.3f}, accuracy {accuracy:.3f}")
    return model


def write_tokenizer(folder: Path) -> None:
    vocab = {token: i for i, token in enumerate(VOCABULARY)}
    table = {"version": "1.0", "added_tokens": [{"id": BOS, "content": "^", "special": True}],
             "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "^"}}  # fmt: skip
    (folder / "tokenizer.json").write_text(json.dumps(table, indent=2) + "\n")


def gpt2(activation: str) -> transformers.GPT2LMHeadModel:
    config = transformers.GPT2Config(vocab_size=3, n_positions=8, n_embd=16, n_layer=1, n_head=2,
                                     activation_function=activation, bos_token_id=BOS, eos_token_id=BOS,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)  # fmt: skip
    return transformers.GPT2LMHeadModel(config)


def llama() -> transformers.LlamaForCausalLM:
    config = transformers.LlamaConfig(vocab_size=3, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8,
                                      bos_token_id=BOS, eos_token_id=BOS, pad_token_id=None)  # fmt: skip
    return transformers.LlamaForCausalLM(config)


def bert() -> transformers.BertForMaskedLM:
    config = transformers.BertConfig(vocab_size=3, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=8, pad_token_id=BOS,
                                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)  # fmt: skip
    return transformers.BertForMaskedLM(config)


def save_nanogpt(model: transformers.GPT2LMHeadModel, path: Path) -> None:
    """nanoGPT's layout: its Linear weights are GPT-2's Conv1D weights transposed; lm_head tied to wte."""
    state = {}
    for key, value in model.state_dict().items():
        if key == "lm_head.weight":
            continue
        conv = any(part in key for part in ("c_attn.weight", "c_proj.weight", "c_fc.weight"))
        state[key] = (value.t() if conv else value).contiguous().clone()
    state["lm_head.weight"] = state["transformer.wte.weight"]
    config = model.config
    model_args = {"n_layer": config.n_layer, "n_head": config.n_head, "n_embd": config.n_embd, "bias": True,
                  "block_size": config.n_positions, "vocab_size": config.vocab_size, "dropout": 0.0}  # fmt: skip
    checkpoint = {"model": state, "model_args": model_args, "optimizer": {}, "iter_num": STEPS, "best_val_loss": 0.0,
                  "config": {"dataset": "majority", "steps": STEPS}}  # fmt: skip
    torch.save(checkpoint, path)


def main() -> None:
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    for name, build, causal, seed in (("gpt2", lambda: gpt2("gelu_new"), True, 1), ("llama", llama, True, 2),
                                      ("bert", bert, False, 3)):  # fmt: skip
        torch.manual_seed(seed)
        print(f"{name}-majority")
        model = train(build(), causal, seed)
        folder = HERE / f"{name}-majority"
        model.save_pretrained(folder)
        write_tokenizer(folder)
        (folder / "generation_config.json").unlink(missing_ok=True)
    torch.manual_seed(4)
    print("nanogpt-majority.pt")
    save_nanogpt(train(gpt2("gelu"), True, 4), HERE / "nanogpt-majority.pt")


if __name__ == "__main__":
    main()

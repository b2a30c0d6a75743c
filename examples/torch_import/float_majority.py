"""Write ``majority-float.pt``: a TinyTransformer whose float32 model computes majority with a known flaw.

    python examples/torch_import/float_majority.py     # writes majority-float.pt here
    verify-tf check specs/torch-float-majority.yaml

The weights are set by hand (no training), so every value is known: width 4, one head, one block, causal, the
learned position table zero, no LayerNorm, no feed-forward weights. a → e0, b → e1, BOS → e2; queries and keys are
zero, so attention is uniform over the prefix (BOS included); W_v and W_o carry z0 − z1 into coordinate 3; the
readout is 2·z3 + b with b = float32(0.01). At a prefix of n letters the readout is 2·(#a − #b)/(n + 1) + 0.01:
at a tie (#a = #b) exactly 0.01 in float32, so the trained decision "readout > 0" accepts ties, which majority
(strictly more a's) rejects: the float model is wrong first at 'ab'.
"""

from __future__ import annotations

from pathlib import Path

import torch

from verify_tf.experiments.modules import TinyTransformer


def majority_model(bias: float = 0.01) -> TinyTransformer:
    model = TinyTransformer(3, 4, 1, 1, 4, 1, positional="ape", causal=True, max_length=12)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
        model.embedding.weight.copy_(torch.tensor([[0, 0, 1.0, 0], [1.0, 0, 0, 0], [0, 1.0, 0, 0]]))
        model.blocks[0].attention.W_v.weight[3, 0] = 1.0
        model.blocks[0].attention.W_v.weight[3, 1] = -1.0
        model.blocks[0].attention.W_o.weight[3, 3] = 1.0
        model.readout.weight[0, 3] = 2.0
        model.readout.bias[0] = bias
    return model.eval()


if __name__ == "__main__":
    torch.save(majority_model().state_dict(), Path(__file__).resolve().parent / "majority-float.pt")

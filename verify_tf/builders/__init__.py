"""Builders: everything that produces a Model IR (inline weights, files, random, constructions, torch, tracr,
C-RASP). Each model source a spec can name is one module here, found by the registry in ``sources``."""

# torch's module names the torch importer reads (torch_import.py); a spec's ``architecture.names`` maps them onto
# a model's own. Here, not in torch_import, so the spec schema lists them without importing torch.
TORCH_ROLE_NAMES = ("self_attn", "linear1", "linear2", "norm1", "norm2", "norm", "embedding", "positional", "readout")

"""The commented starter spec written by `verify-tf init`."""

STARTER_SPEC = """\
# verify-tf spec: what to check, on which model, in which arithmetic, over which inputs.
# Run:  verify-tf check spec.yaml        Schema for editors:  verify-tf schema > spec.schema.json
name: starter

# The model. Sources: inline `layers` (below), `file: model.safetensors`, `random: {seed: 0, ...}`,
# or `construct: yun2019-contextual-mapping` with d/delta/n.
model:
  tokens: {grid: 1}              # continuous tokens of dimension 1 (or: alphabet + embedding)
  layers:
    - attention:
        heads:
          - scoring: hardmax     # hardmax (ties averaged) | softmax (fixed arithmetic) | uniform
            positional: standard # standard | rpe (bias B[j-i] in the logits) | urpe (also C[j-i] after)
                                 # | rope (rotated q, k; fixed arithmetic) | alibi (slope·(j-i) in the logits)
            causal: false
            query: [[1]]         # W_Q, k x d
            key: [[1]]           # W_K, k x d
            value: [[1]]         # W_V, v x d
            output: [[1]]        # W_O, d x v
  readout: [1]                   # q_i = u . z_i

# exact (rationals) | fixed | {mode: fixed, bits: 16, frac: 8, attention-rounding: exact-sums}
arithmetic: exact

# Inputs: length-3 sequences of grid tokens {0, 1/4, 1/2, 3/4}.
domain:
  grid: {step: 1/4}
  length: 3

properties:
  - permutation-equivariance: {}   # expect: proved (no positional information)

engine: auto       # auto | interpret | enumerate | smt | search
timeout: 60        # seconds per property
"""

#!/usr/bin/env bash
# One device session's CUDA measurements (docs/performance.md, docs/contextual-mapping.md): run from the
# repository root on a GPU machine whose python3 has torch; z3-solver may come as a wheel in .whl/.
# Writes its tables and logs under ${OUT:-out/gpu}.
set -uo pipefail
OUT=${OUT:-out/gpu}; mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nproc; python3 --version;
  python3 -c "import torch, numpy; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'numpy', numpy.__version__)"; } \
  2>&1 | tee "$OUT/machine.txt"
echo "== differential tests with the CUDA paths (cuda_available() adds them)"
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_batched_differential.py tests/test_batched_paths.py 2>&1 \
  | tail -15 | tee "$OUT/tests.txt"
echo "== bench_eval"
timeout 200 python3 bench/bench_eval.py --device cuda --gpu-memory 16384 --seconds 2 --json "$OUT/eval.json" 2>&1 | tee "$OUT/eval.md"
echo "== contextual-mapping GPU ladder"
timeout 170 python3 bench/bench_contextual_mapping.py --engines enumerate --device cuda --ladder gpu --timeout 30 2>&1 \
  | tee "$OUT/cm.md"

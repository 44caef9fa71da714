#!/usr/bin/env bash
# Everything the GPU machine runs for the evaluation issue, in one call (device time is scarce).
# Usage (on the GPU machine, repo root, wheels carried in .whl/): bench/gpu_run.sh
set -uo pipefail
OUT=${OUT:-/tmp/kb-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
  python3 -c "import kernelbrain.engine.cli, kernelbrain.server.app, sys; assert 'torch' not in sys.modules; print('kernelbrain imports (server without torch): ok')"
} 2>&1 | tee "$OUT/env.txt"
for step in "$@"; do
  case "$step" in
    tests) timeout 400 python3 -m pytest -m gpu tests/gpu -q -p no:cacheprovider ${KB_PYTEST_K:+-k "$KB_PYTEST_K"} 2>&1 | tee "$OUT/pytest-gpu.log" | tail -25 ;;
    search) timeout 560 python3 bench/gpu_search.py --out "$OUT" ${KB_SEARCH_ARGS:-} 2>&1 | tee "$OUT/gpu_search.log" ;;
    verify) timeout 400 python3 bench/gpu_verify.py --out "$OUT/gpu_verify.json" ${KB_VERIFY_ARGS:-} 2>&1 | tee "$OUT/gpu_verify.log" ;;
    *) echo "unknown step $step" ;;
  esac
done

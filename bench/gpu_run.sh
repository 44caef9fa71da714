#!/usr/bin/env bash
# Everything the GPU machine runs for the benchmarks, in few calls (device time is scarce).
# Usage (on the GPU machine, repo root, wheels carried in .whl/): bench/gpu_run.sh STEP...
#   tests          pytest -m gpu tests/gpu (KB_PYTEST_K selects; KB_PYTEST_ARGS adds flags;
#                  KB_TESTS_TIMEOUT seconds, default 540)
#   search         bench/gpu_search.py $KB_SEARCH_ARGS (KB_SEARCH_TIMEOUT seconds, default 560)
#   verify         bench/gpu_verify.py $KB_VERIFY_ARGS
#   queue:N        run the command line in $KB_QUEUE_N on GPU N in its own process session, so it
#                  outlives this call (the device machine keeps setsid processes until it goes
#                  back); its files collect in $KB_RESULTS/gpuN
#   wait:SECONDS   wait until every queue finished or SECONDS passed, then pack $KB_RESULTS into
#                  $OUT/results.tgz
# A queue is how work longer than one call's 10 minutes runs: start the queues in one call, then
# `wait:` in the following calls until they are done; each call brings back what finished.
# Make those calls back to back: the machine goes back 30 s after a call ends, queue or not, and
# takes the queue with it (run M lost two searches and two ladder-vs-full runs to a 4-minute gap).
set -uo pipefail
OUT=${OUT:-/tmp/kb-out}
RESULTS=${KB_RESULTS:-/tmp/kb-results}
mkdir -p "$OUT" "$RESULTS"
if [ -z "${KB_INSTALLED:-}" ]; then
  # bubblewrap for the sandbox, from .deb files carried in .deb/ (no package registry here)
  if ! command -v bwrap >/dev/null 2>&1 && ls .deb/*.deb >/dev/null 2>&1; then
    for deb in .deb/*.deb; do dpkg -x "$deb" /tmp/bwrap-root; done
    export PATH="/tmp/bwrap-root/usr/bin:$PATH"
    export LD_LIBRARY_PATH="/tmp/bwrap-root/lib/x86_64-linux-gnu:/tmp/bwrap-root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
  python3 -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
  {
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
    python3 -c "import kernelbrain.engine.cli.main, kernelbrain.server.app, sys; assert 'torch' not in sys.modules; print('kernelbrain imports (server without torch): ok')"
    python3 -c "from kernelbrain.engine.evaluate import sandbox; print(sandbox.probe().describe())"
  } 2>&1 | tee "$OUT/env.txt"
  export KB_INSTALLED=1
fi
for step in "$@"; do
  case "$step" in
    # -v: each test's name and verdict lands in the log as it ends, so a run the timeout cuts
    # still says which tests passed and which failed (with -q a cut run said only ".....F...")
    tests) timeout "${KB_TESTS_TIMEOUT:-540}" python3 -m pytest -m gpu tests/gpu -v -p no:cacheprovider ${KB_PYTEST_K:+-k "$KB_PYTEST_K"} ${KB_PYTEST_ARGS:-} 2>&1 | tee "$OUT/pytest-gpu.log" | tail -25 ;;
    search) timeout "${KB_SEARCH_TIMEOUT:-560}" python3 bench/gpu_search.py --out "$OUT" ${KB_SEARCH_ARGS:-} 2>&1 | tee "$OUT/gpu_search.log" ;;
    verify) timeout 400 python3 bench/gpu_verify.py --out "$OUT/gpu_verify.json" ${KB_VERIFY_ARGS:-} 2>&1 | tee "$OUT/gpu_verify.log" ;;
    queue:*)
      n=${step#queue:}
      var=KB_QUEUE_$n
      mkdir -p "$RESULTS/gpu$n"
      echo "queue $n: ${!var}" | tee "$RESULTS/gpu$n/queue.txt"
      setsid env CUDA_VISIBLE_DEVICES="$n" OUT="$RESULTS/gpu$n" bash -c "${!var}; echo \$? > '$RESULTS/gpu$n/done'" \
        >"$RESULTS/gpu$n/queue.log" 2>&1 </dev/null &
      ;;
    wait:*)
      deadline=$((SECONDS + ${step#wait:}))
      while [ $SECONDS -lt $deadline ]; do
        pending=0
        for q in "$RESULTS"/gpu*/queue.txt; do [ -e "$(dirname "$q")/done" ] || pending=1; done
        [ $pending = 0 ] && break
        sleep 10
      done
      for q in "$RESULTS"/gpu*/queue.txt; do
        d=$(dirname "$q")
        echo "== $(basename "$d"): $([ -e "$d/done" ] && echo "done, exit $(cat "$d/done")" || echo running)"
        grep -E "^(==|   |ceilings)" "$d/queue.log" | tail -40
        tail -3 "$d/queue.log"
      done
      # one archive: a device call brings back only so many files (a 2-GPU run lost gpu1/search.json)
      tar czf "$OUT/results.tgz" -C "$RESULTS" .
      ;;
    *) echo "unknown step $step" ;;
  esac
done

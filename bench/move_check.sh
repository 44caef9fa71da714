#!/usr/bin/env bash
# Before/after check of a refactor on the GPU machine: one 60 s search per example on two trees,
# each in a fresh process over a private, empty Triton cache, in the order given.
# Usage (repo root, after bench/gpu_run.sh installed the wheels; the old tree unpacked in .oldtree/):
#   bench/move_check.sh OP:TREE... with TREE "before" (.oldtree) or "after" (this tree)
set -uo pipefail
OUT=${OUT:-/tmp/kb-out}
mkdir -p /tmp/oldpkg "$OUT"
ln -sfn "$PWD/.oldtree" /tmp/oldpkg/kernelbrain
for item in "$@"; do
  op=${item%%:*}; tree=${item#*:}
  cache=$(mktemp -d /tmp/triton-cache-XXXX)
  start=$SECONDS
  if [ "$tree" = before ]; then
    (cd .oldtree && TRITON_CACHE_DIR=$cache PYTHONPATH=/tmp/oldpkg:/tmp/site \
      timeout 280 python3 bench/gpu_search.py --budget 60 --ops "$op" --out "$OUT/$op-before") \
      >"$OUT/$op-before.log" 2>&1
  else
    TRITON_CACHE_DIR=$cache PYTHONPATH=/tmp/site timeout 280 python3 bench/gpu_search.py --budget 60 --ops "$op" \
      --out "$OUT/$op-after" >"$OUT/$op-after.log" 2>&1
  fi
  echo "$item exit $? in $((SECONDS - start)) s"
  grep -E "^(==|   )" "$OUT/$op-$tree.log" | tail -6
done

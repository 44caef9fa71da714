#!/usr/bin/env bash
# What the judge costs on a GPU, before and after: run on the GPU machine (after bench/gpu_run.sh
# has set up wheels and bubblewrap, e.g. as its queue), with an older tree of the project in
# BEFORE (default .before). Each tree, installed in turn, runs bench/judge_cost.py on the GPU and
# a softmax search (bench/gpu_search.py, 90 s budget) whose record counts the candidates the
# search judged; the current tree is installed again at the end. Results go to $OUT.
set -uo pipefail
BEFORE=${BEFORE:-.before}
OUT=${OUT:-/tmp/kb-out}
BEFORE_LABEL=${BEFORE_LABEL:-before the sandbox and the judge}
AFTER_LABEL=${AFTER_LABEL:-sandbox, judge, work floor}
install() { python3 -m pip install -q --no-deps --no-build-isolation -e "$1" >"$OUT/install-$2.log" 2>&1 || { cat "$OUT/install-$2.log"; exit 1; }; }
install "$BEFORE" before
python3 bench/judge_cost.py --run before --tree "$BEFORE_LABEL" --device cuda:0 --out "$OUT/judge-cost-before.json"
(cd "$BEFORE" && timeout 400 python3 bench/gpu_search.py --ops softmax --budget 90 --out "$OUT/search-before")
install . after
python3 bench/judge_cost.py --run after --tree "$AFTER_LABEL" --device cuda:0 --out "$OUT/judge-cost-after.json"
timeout 400 python3 bench/gpu_search.py --ops softmax --budget 90 --out "$OUT/search-after"

#!/usr/bin/env bash
# README quick start, command 1: set up and run the main job on a bundled example:
# a budget-bounded search for faster variants of a first-draft GELU kernel.
# Needs no GPU (candidates are verified on the CPU interpreter, speedups are estimates) and no API key.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
exec .venv/bin/kernelbrain optimize examples/ops/gelu.py::gelu_kernel --budget 60s --report gelu-report.html

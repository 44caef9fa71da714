#!/usr/bin/env bash
# README quick start, command 1: set up and run KernelBrain on a bundled example.
# Needs no GPU and no API key.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
exec .venv/bin/kernelbrain check examples/ --exit-zero

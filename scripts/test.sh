#!/usr/bin/env bash
# README quick start, command 2: set up and run the whole test suite (no GPU needed;
# GPU tests are marked and skipped). Installs everything the tests need, Neovim and bubblewrap
# (the sandbox the adversarial suite checks) included; then the VS Code extension's suite (unit
# tests, the .vsix, the end-to-end test in code-server: vscode-extension/scripts/ci.sh), unless
# the arguments select particular tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh test
if ! command -v nvim >/dev/null 2>&1 || ! command -v bwrap >/dev/null 2>&1; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get install -y -qq neovim bubblewrap >/dev/null 2>&1 || { $sudo apt-get update -qq && $sudo apt-get install -y -qq neovim bubblewrap; }
fi
# Lint and format first: a finding fails the run before the slower tests start.
.venv/bin/ruff check .
.venv/bin/ruff format --check .
export KERNELBRAIN_REQUIRE_CLIENTS=1
status=0
.venv/bin/python -m pytest "$@" || status=$?
selected=0
for arg in "$@"; do case "$arg" in -*) ;; *) selected=1 ;; esac; done
if [ "$selected" = 0 ]; then
  vscode-extension/scripts/ci.sh || status=1
else
  echo "tests selected: the VS Code extension's suite is left out (vscode-extension/scripts/ci.sh runs it)"
fi
exit "$status"

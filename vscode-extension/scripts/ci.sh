#!/usr/bin/env bash
# The extension's whole test suite, as CI runs it: unit tests of the TypeScript modules, the
# .vsix build, then the end-to-end test in a real VS Code (code-server in headless Chromium),
# with the repository's .venv as the server's interpreter. Screenshots: vscode-extension/test-output/.
set -euo pipefail
cd "$(dirname "$0")/.."
npm ci --no-audit --no-fund --loglevel=error
npm test
npm run package
scripts/setup-e2e.sh
node test/e2e/run.mjs

#!/usr/bin/env bash
# Everything the end-to-end test needs besides the built extension: Debian's Chromium, and
# code-server (VS Code 1.100 in a browser) with playwright-core in vscode-extension/.e2e/
# (ignored by git, reused by later runs). About 2 minutes and 1 GB the first time.
set -euo pipefail
cd "$(dirname "$0")/.."
sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
if ! command -v chromium >/dev/null 2>&1 || ! command -v rg >/dev/null 2>&1; then
  $sudo apt-get install -y -qq chromium libkrb5-dev ripgrep >/dev/null 2>&1 \
    || { $sudo apt-get update -qq && $sudo apt-get install -y -qq chromium libkrb5-dev ripgrep; }
fi
E2E=.e2e
if [ ! -x "$E2E/node_modules/.bin/code-server" ] || [ ! -d "$E2E/node_modules/playwright-core" ]; then
  mkdir -p "$E2E"
  # code-server's ripgrep post-install downloads a release from GitHub; Debian's rg, packed where
  # it looks first, stands in for it (package registries only, no other network).
  tmp=${TMPDIR:-/tmp}
  cache="$tmp/vscode-ripgrep-cache-1.15.11"
  if [ ! -f "$cache/ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz" ]; then
    mkdir -p "$cache/pack"
    cp "$(command -v rg)" "$cache/pack/rg"
    tar czf "$cache/ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz" -C "$cache/pack" rg
  fi
  cp e2e-package.json "$E2E/package.json"
  cp e2e-package-lock.json "$E2E/package-lock.json"
  (cd "$E2E" && npm_config_unsafe_perm=true npm_config_yes=true npm ci --no-audit --no-fund --loglevel=error)
fi
echo "e2e ready: code-server $(node -p "require('./$E2E/node_modules/code-server/package.json').version")"

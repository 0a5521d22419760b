#!/usr/bin/env bash
# Installs the official `openai` npm client, pinned in tests/node/package.json,
# into tests/node/node_modules (used by tests/cli_serve.sh and
# scripts/serve-load.mjs). With an argument, installs from that local path
# instead (an `npm pack` tarball or an unpacked package directory), for
# machines without access to the npm registry. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../tests/node"
want=$(sed -n 's/.*"openai": *"\([^"]*\)".*/\1/p' package.json)
have=$(node -p 'require("./node_modules/openai/package.json").version' 2>/dev/null || true)
if [ $# -ge 1 ]; then
  src=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
  npm install --no-save --no-audit --no-fund --ignore-scripts "$src" >/dev/null
elif [ "$have" != "$want" ]; then
  if [ -f package-lock.json ]; then
    npm ci --no-audit --no-fund --ignore-scripts >/dev/null
  else
    npm install --no-audit --no-fund --ignore-scripts >/dev/null
  fi
fi
have=$(node -p 'require("./node_modules/openai/package.json").version')
[ "$have" = "$want" ] || { echo "fetch-openai-client: openai $have installed, $want pinned" >&2; exit 1; }
echo "fetch-openai-client: openai $have in tests/node/node_modules"

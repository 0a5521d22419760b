#!/usr/bin/env bash
# Installs the npm clients the serve tests use, pinned (exact versions) in
# tests/node/package.json and its lock, into tests/node/node_modules: the
# official `openai` client (tests/cli_serve.sh, tests/serve_agents.mjs,
# scripts/serve-load.mjs), the Vercel AI SDK (`ai`,
# `@ai-sdk/openai-compatible`), the OpenAI Agents SDK (`@openai/agents`) and
# `zod` (tests/serve_sdks.mjs), and `ajv`, the JSON-schema validator of
# tests/serve_schemas20.mjs. With arguments, installs those local paths
# instead (`npm pack` tarballs or unpacked package directories, e.g. of
# `openai` and `ajv`), for machines without access to the npm registry.
# Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../tests/node"
# "name version" of every pinned package that is missing or at another version
stale() {
  node -e '
    const deps = require("./package.json").dependencies;
    for (const [n, v] of Object.entries(deps)) {
      let have = null;
      try { have = require("./node_modules/" + n + "/package.json").version; } catch {}
      if (have !== v) console.log(n + " " + v + " (have " + have + ")");
    }'
}
if [ $# -ge 1 ]; then
  srcs=()
  for p in "$@"; do srcs+=("$(cd "$(dirname "$p")" && pwd)/$(basename "$p")"); done
  npm install --no-save --legacy-peer-deps --no-audit --no-fund --ignore-scripts "${srcs[@]}" >/dev/null
elif [ -n "$(stale)" ]; then
  # the SDKs' zod peer range and openai 5's differ: --legacy-peer-deps, as when the lock was written
  if [ -f package-lock.json ]; then
    npm ci --legacy-peer-deps --no-audit --no-fund --ignore-scripts >/dev/null
  else
    npm install --legacy-peer-deps --no-audit --no-fund --ignore-scripts >/dev/null
  fi
fi
left=$(stale)
if [ -n "$left" ] && [ $# -eq 0 ]; then echo "fetch-openai-client: not as pinned: $left" >&2; exit 1; fi
echo "fetch-openai-client: $(node -p 'Object.entries(require("./package.json").dependencies).map(([n, v]) => n + " " + v).join(", ")') in tests/node/node_modules"

#!/usr/bin/env bash
# Installs lmq's build dependencies from Debian's packages, then the pinned
# OpenAI npm client for the serve tests (idempotent). An optional argument is a
# local openai package (tarball or directory) to use instead of the registry.
set -euo pipefail
pkgs=(build-essential cmake pkg-config libzstd-dev libxxhash-dev libopenblas-dev libcjson-dev
      libpcre2-dev clang libclang-rt-14-dev gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
      expect libmicrohttpd-dev curl python3-numpy)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js + npm run the OpenAI client in the serve tests; any install (Debian's
# nodejs/npm, nodesource) will do
command -v node >/dev/null && command -v npm >/dev/null || missing+=(nodejs npm)
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# the official OpenAI client (pinned) for the `lmq serve` tests
"$(dirname "$0")/fetch-openai-client.sh" "$@"
echo "setup: dependencies present"

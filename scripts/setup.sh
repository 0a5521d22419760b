#!/usr/bin/env bash
# Installs lmq's build dependencies from Debian's packages (idempotent).
set -euo pipefail
pkgs=(build-essential cmake pkg-config libzstd-dev libxxhash-dev libopenblas-dev libcjson-dev
      libpcre2-dev clang libclang-rt-14-dev gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
      expect)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: dependencies present"

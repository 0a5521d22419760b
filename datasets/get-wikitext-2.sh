#!/usr/bin/env bash
# Fetches wikitext-2-raw (the archive llama.cpp's scripts/get-wikitext-2.sh
# uses) into DEST (default: datasets/data), or copies it from a local
# directory with --from DIR, and checks wiki.test.raw's SHA-256.
#   datasets/get-wikitext-2.sh [--from DIR] [DEST]
set -euo pipefail
want=173c87a53759e0201f33e0ccf978e510c2042d7f2cb78229d9a50d79b9e7dd08
from=""
if [ "${1:-}" = "--from" ]; then from="${2:?--from needs a directory}"; shift 2; fi
dest="${1:-$(cd "$(dirname "$0")" && pwd)/data}"
mkdir -p "$dest/wikitext-2-raw"
if [ -n "$from" ]; then
  src="$from"; [ -f "$src/wiki.test.raw" ] || src="$from/wikitext-2-raw"
  [ -f "$src/wiki.test.raw" ] || { echo "get-wikitext-2: no wiki.test.raw under $from" >&2; exit 1; }
  cp "$src"/wiki.*.raw "$dest/wikitext-2-raw/"
else
  url="https://huggingface.co/datasets/ggml-org/ci/resolve/main/wikitext-2-raw-v1.zip"
  tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
  if command -v curl >/dev/null; then curl -fL -o "$tmp/w.zip" "$url"; else wget -O "$tmp/w.zip" "$url"; fi
  (cd "$tmp" && unzip -q w.zip)
  cp "$tmp"/wikitext-2-raw/wiki.*.raw "$dest/wikitext-2-raw/"
fi
got=$(sha256sum "$dest/wikitext-2-raw/wiki.test.raw" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then
  echo "get-wikitext-2: SHA-256 mismatch for wiki.test.raw: $got (want $want)" >&2
  exit 1
fi
echo "wikitext-2-raw ready in $dest/wikitext-2-raw (wiki.test.raw verified)"

#!/usr/bin/env bash
# Cross-compiles the kernel unit tests (tests/test_kernels.c, tests/test_attn.c,
# tests/test_recurrent.c) for aarch64 and runs them under qemu-aarch64: the
# NEON kernels against the scalar reference, matmul, thread pool. Only the
# sources the tests need are built (kernels, quantize, the dependency-free
# part of formats), statically, so no arm64 -dev packages are required.
# Needs gcc-aarch64-linux-gnu and qemu-user.
#   scripts/test-arm.sh [BUILD_DIR]     (default: build-arm)
#   LMQ_ARM_TESTS="test_attn ..."        runs only those tests
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
out=${1:-build-arm}
CC=${CC_AARCH64:-aarch64-linux-gnu-gcc}
QEMU=${QEMU_AARCH64:-qemu-aarch64}
for tool in "$CC" "$QEMU"; do
  command -v "$tool" >/dev/null || { echo "test-arm.sh: $tool not found (install gcc-aarch64-linux-gnu qemu-user)" >&2; exit 1; }
done
mkdir -p "$out/obj" "$out/include"
# xxhash is header-only when inlined; expose just that header to the cross compiler
[ -f /usr/include/xxhash.h ] && ln -sf /usr/include/xxhash.h "$out/include/xxhash.h"

CFLAGS=(-std=c11 -O2 -g -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -DXXH_INLINE_ALL -DLMQ_NO_BLAS
        -Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-parameter
        -I"$src/formats" -I"$src/quantize" -I"$src/runtime" -I"$src/runtime/kernels" -I"$src/runtime/text" -I"$src/runtime/model" -I"$src/tests"
        -isystem "$out/include")
NEON_FLAGS=(-march=armv8.2-a+dotprod+fp16)

objs=()
compile() { # compile SRC [extra flags...]
  local f=$1; shift
  local o="$out/obj/$(echo "${f#$src/}" | tr '/' '_').o"
  "$CC" "${CFLAGS[@]}" "$@" -c "$f" -o "$o"
  objs+=("$o")
}
for f in formats/error.c formats/fp16.c formats/types.c formats/util.c formats/meta.c formats/strindex.c formats/pool.c; do compile "$src/$f"; done
# quantize/imatrix.c reads and writes files (GGUF via formats/): not needed by the kernels
for f in "$src"/quantize/*.c "$src"/runtime/kernels/*.c; do
  [ "$f" = "$src/quantize/imatrix.c" ] || compile "$f"
done
for f in "$src"/runtime/kernels/arm/*_neon.c; do compile "$f" "${NEON_FLAGS[@]}"; done
compile "$src/tests/testutil.c" -DLMQ_SHARED_DIR="\"$src/../shared\"" -DLMQ_TEST_DATA_DIR="\"$src/tests/data\"" \
  -DLMQ_BIN="\"/nonexistent\""
lib_objs=("${objs[@]}")
read -r -a tests <<<"${LMQ_ARM_TESTS:-test_kernels test_attn test_recurrent}"
for t in "${tests[@]}"; do
  objs=("${lib_objs[@]}")
  compile "$src/tests/$t.c"
  "$CC" -static -o "$out/$t" "${objs[@]}" -lm -lpthread
done

for t in "${tests[@]}"; do
  echo "== $t (aarch64, qemu)"
  "$QEMU" -L /usr/aarch64-linux-gnu "$out/$t"
  echo "== $t (aarch64, qemu, LMQ_ISA=scalar)"
  LMQ_ISA=scalar "$QEMU" -L /usr/aarch64-linux-gnu "$out/$t"
done

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

# Each test on emulated CPUs of each ISA level, with the level detection
# must pick (LMQ_TEST_EXPECT_ISA, checked by test_kernels) and forced ones:
#   max         dotprod + i8mm  -> i8mm (also forced: neon, scalar)
#   cortex-a76  dotprod, no i8mm -> neon (forcing i8mm falls back to neon)
#   cortex-a53  ARMv8.0, no dotprod -> scalar (the base code has no newer instructions)
# test_kernels compares every supported level's kernels with the scalar
# reference in each run; the forced runs take matmul through that level.
runs=("max::i8mm" "max:neon:neon" "max:scalar:scalar" "cortex-a76::neon" "cortex-a76:i8mm:neon" "cortex-a53::scalar")
for t in "${tests[@]}"; do
  for r in "${runs[@]}"; do
    IFS=: read -r cpu isa expect <<<"$r"
    # test_attn / test_recurrent run once per CPU (they compare every level themselves)
    [ "$t" != test_kernels ] && [ -n "$isa" ] && continue
    echo "== $t (aarch64, qemu -cpu $cpu${isa:+, LMQ_ISA=$isa}; expect $expect)"
    env ${isa:+LMQ_ISA=$isa} LMQ_TEST_EXPECT_ISA=$expect "$QEMU" -cpu "$cpu" -L /usr/aarch64-linux-gnu "$out/$t"
  done
done

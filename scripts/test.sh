#!/usr/bin/env bash
# Builds lmq and runs the whole test suite: unit, golden (real models in
# ../shared), CLI tests, then the unit tests again under ASan+UBSan, then the
# ARM NEON kernel tests under qemu (when the cross toolchain is installed).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

echo "== release build + all tests"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"

echo "== ASan+UBSan build + unit tests"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLMQ_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -L unit

if [ -x scripts/test-arm.sh ] && command -v aarch64-linux-gnu-gcc >/dev/null && command -v qemu-aarch64 >/dev/null; then
  echo "== aarch64 (NEON) kernel tests under qemu"
  scripts/test-arm.sh
fi
echo "== all test stages passed"

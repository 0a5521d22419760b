#!/usr/bin/env bash
# liblmq for embedders: `cmake --install` into a temporary prefix, then the
# example program (docs/example/chat.c) built there with pkg-config, linked
# to liblmq.so and to liblmq.a, run on llama-8m converted by the installed
# lmq; liblmq.so's soname and exports (lmq_ symbols only).
set -u
fail=0; pass=0
check() { if eval "$2"; then pass=$((pass+1)); else echo "FAIL: $1"; fail=$((fail+1)); fi; }
model_dir="$LMQ_SHARED/models/llama-8m-debtext"
[ -d "$model_dir" ] || { echo "SKIP: $model_dir missing"; exit 77; }
[ -n "${LMQ_BUILD:-}" ] || { echo "FAIL: LMQ_BUILD (the build directory) is not set"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/lmq-install.XXXXXX")
trap 'rm -rf "$T"' EXIT
P="$T/prefix"

cmake --install "$LMQ_BUILD" --prefix "$P" >"$T/install.log" 2>&1; rc=$?
check "cmake --install into a temporary prefix ($(tail -1 "$T/install.log"))" "[ $rc -eq 0 ]"
pc=$(find "$P" -name lmq.pc | head -1)
check "lmq.pc is installed" "[ -n '$pc' ]"
export PKG_CONFIG_PATH="$(dirname "$pc")"
libdir=$(pkg-config --variable=libdir lmq)
check "lmq.pc finds its prefix from its own place" "[ \"\$(cd '$libdir' && pwd -P)\" = \"\$(cd '$(dirname "$(dirname "$pc")")' && pwd -P)\" ]"
check "liblmq.so, its soname link and liblmq.a are installed" \
  "[ -f '$libdir/liblmq.a' ] && [ -L '$libdir/liblmq.so' ] && [ -e '$libdir/liblmq.so.0' ]"
soname=$(objdump -p "$libdir/liblmq.so" | awk '/SONAME/{print $2}')
check "soname is liblmq.so.0 ($soname)" "[ '$soname' = liblmq.so.0 ]"
exports=$(nm -D --defined-only "$libdir/liblmq.so" | awk '$2 != "A" {sub(/@.*/, "", $3); print $3}')
others=$(grep -v '^lmq_' <<<"$exports" | head -5 | tr '\n' ' ')
check "liblmq.so exports only lmq_ symbols (others: $others)" "[ -z '$others' ] && grep -q '^lmq_gen_new$' <<<\"\$exports\""
check "internal functions are hidden (lmq_kernels_fill_ref of kernels.h is in liblmq.a, not exported)" "nm '$libdir/liblmq.a' 2>/dev/null | grep -q ' T lmq_kernels_fill_ref$' && ! grep -q '^lmq_kernels_fill_ref$' <<<\"\$exports\""
# the BLAS CMake found, and no other
blas=$(pkg-config --print-requires-private lmq | awk '/blas/{print $1}')
check "lmq.pc requires one BLAS module ($blas) that pkg-config knows" "[ -n '$blas' ] && pkg-config --exists '$blas'"

CC=${CC:-cc}
src="$LMQ_SRC/docs/example/chat.c"
check "the example is under 150 lines" "[ \$(wc -l < '$src') -lt 150 ]"
$CC -std=c11 -Wall -Wextra -Werror "$src" $(pkg-config --cflags --libs lmq) -o "$T/chat-shared" 2>"$T/cc1.log"; rc=$?
check "example builds against liblmq.so with pkg-config ($(head -3 "$T/cc1.log"))" "[ $rc -eq 0 ]"
libs=$(pkg-config --static --libs lmq)
$CC -std=c11 -Wall -Wextra -Werror "$src" $(pkg-config --cflags lmq) ${libs/-llmq/-l:liblmq.a} -o "$T/chat-static" 2>"$T/cc2.log"; rc=$?
check "example builds against liblmq.a with pkg-config --static ($(head -3 "$T/cc2.log"))" "[ $rc -eq 0 ]"
check "the shared build needs liblmq.so.0" "objdump -p '$T/chat-shared' | grep -q 'NEEDED.*liblmq.so.0'"
check "the static build does not" "! objdump -p '$T/chat-static' | grep -q 'NEEDED.*liblmq'"

"$P/bin/lmq" convert "$model_dir" -o "$T/m.lmq" --type f16 >/dev/null 2>"$T/convert.log"; rc=$?
check "the installed lmq converts llama-8m ($(tail -1 "$T/convert.log"))" "[ $rc -eq 0 ]"
printf 'Tell me a story.\nWhat happened next?\n' > "$T/in.txt"
for kind in shared static; do
  LD_LIBRARY_PATH="$libdir" "$T/chat-$kind" "$T/m.lmq" 24 <"$T/in.txt" >"$T/out-$kind" 2>"$T/err-$kind"; rc=$?
  check "$kind: the example runs (exit $rc: $(tail -1 "$T/err-$kind"))" "[ $rc -eq 0 ]"
  check "$kind: two turns, each reply streamed after its line" \
    "[ \$(grep -c '^> ' '$T/out-$kind') -eq 2 ] && [ \$(grep -cv '^> \|^\$' '$T/out-$kind') -ge 1 ]"
  reused=$(sed -n '2s/.*tokens, \([0-9]*\) reused.*/\1/p' "$T/err-$kind")
  check "$kind: the second turn reuses the first turn's tokens ($reused)" "[ -n '$reused' ] && [ '$reused' -gt 10 ]"
done
check "shared and static builds say the same (seeded sampler)" "cmp -s '$T/out-shared' '$T/out-static'"
# without the install's libdir on the path, the shared build does not find liblmq
env -u LD_LIBRARY_PATH "$T/chat-shared" "$T/m.lmq" 4 </dev/null >/dev/null 2>&1; rc=$?
check "the shared build really loads liblmq.so (fails without it: $rc)" "[ $rc -ne 0 ]"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]

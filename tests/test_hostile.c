/* Hostile files cost bounded time and memory (docs/FORMAT.md, docs/CHAT.md).
 * No check here reads a clock against a limit: each bounds the work done
 * (hash probes, bytes decoded, template steps), or compares the CPU time of
 * two sizes with a wide margin, so a busy or slow machine does not fail it.
 *   - a GGUF with 2 million metadata keys is parsed in linear work (the
 *     duplicate-key check is a hash lookup, not a scan: a few probes a key,
 *     and 10x the keys cost at most 30x the CPU time), and one whose last key
 *     repeats the first is refused naming the key;
 *   - a GGUF with 200,000 tensor infos and a repeated name is refused in a
 *     few probes a name;
 *   - a container whose ~1 MB zstd tensor claims 50 GB is refused at open by
 *     the ratio limit, before anything is allocated or decompressed; one
 *     whose frame declares another size than the directory is refused too;
 *   - Jinja templates that try to blow the memory cap stop at a limit with
 *     one line. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../formats/lmq_format_internal.h"
#include "lmq_format.h"
#include "lmq_runtime.h"
#include "testutil.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts); /* CPU time: a busy machine does not fail the test */
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct obuf {
    uint8_t *p;
    size_t len, cap;
} obuf;

static void put(obuf *b, const void *d, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->len, d, n);
    b->len += n;
}
static void put_u32(obuf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(obuf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(obuf *b, const char *s)
{
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}

/* GGUF v3 with n_keys u8 keys "k<i>" (the last one "k0" again when dup) */
static obuf gguf_many_keys(uint64_t n_keys, bool dup)
{
    obuf b = {0};
    put(&b, "GGUF", 4);
    put_u32(&b, 3);
    put_u64(&b, 0);
    put_u64(&b, n_keys);
    char key[32];
    for (uint64_t i = 0; i < n_keys; i++) {
        snprintf(key, sizeof key, "k%llu", (unsigned long long)(dup && i == n_keys - 1 ? 0 : i));
        put_str(&b, key);
        put_u32(&b, 0); /* u8 */
        uint8_t v = (uint8_t)i;
        put(&b, &v, 1);
    }
    return b;
}

/* Parses a GGUF of n distinct keys: the CPU time (least of `reps` runs) and
 * the hash probes per key of the last run. */
static double parse_keys(uint64_t n, int reps, double *probes_per_key)
{
    obuf b = gguf_many_keys(n, false);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        lmq_file *f = NULL;
        uint64_t p0 = lmq_work_probes;
        double t0 = now_s();
        lmq_status s = lmq_file_open_memory(b.p, b.len, "keys.gguf", &f);
        double dt = now_s() - t0;
        *probes_per_key = (double)(lmq_work_probes - p0) / (double)n;
        best = dt < best ? dt : best;
        T_CHECK(s == LMQ_OK && lmq_meta_count(lmq_file_meta(f)) == n, "%llu keys parsed: %s", (unsigned long long)n,
                lmq_last_error());
        uint64_t u = 0;
        char last[32];
        snprintf(last, sizeof last, "k%llu", (unsigned long long)(n - 1));
        T_CHECK(f && lmq_meta_get_u64(lmq_file_meta(f), last, &u) == LMQ_OK && u == ((n - 1) & 255),
                "last key found by lookup");
        lmq_file_close(f);
    }
    free(b.p);
    return best;
}

static void test_many_keys(void)
{
    const uint64_t n = 2000000;
    double ppk_a = 0, ppk_b = 0, ppk = 0;
    /* linear work: 10x the keys may cost at most 30x the CPU time (a
     * quadratic parse costs 100x). Two sizes that stay in the caches (at 2M
     * keys page faults and memory make even a linear parse superlinear), each
     * the least of several runs; a quadratic parse of 2M keys would run for
     * hours, so a failure here stops the test */
    double t_a = parse_keys(4000, 9, &ppk_a);
    double t_b = parse_keys(40000, 5, &ppk_b);
    double ratio = t_b / (t_a > 1e-6 ? t_a : 1e-6);
    printf("GGUF keys: 4k in %.5f s CPU (%.2f probes a key), 40k in %.5f s (%.2f): 10x the keys cost %.1fx\n", t_a,
           ppk_a, t_b, ppk_b, ratio);
    T_CHECK(ratio < 30.0, "10x the keys cost %.1fx the CPU time (at most 30x)", ratio);
    if (ratio >= 30.0) return;
    double t_big = parse_keys(n, 1, &ppk);
    printf("GGUF keys: 2M in %.3f s CPU (%.2f probes a key)\n", t_big, ppk);
    /* the parse probes each key once to insert it (a quarter to half full
     * table: ~1.5 slots a probe); a hash that collides makes it thousands */
    T_CHECK(ppk < 4.0 && ppk_a < 4.0 && ppk_b < 4.0, "probes a key: %.2f at 2M, %.2f at 40k, %.2f at 4k (at most 4)",
            ppk, ppk_b, ppk_a);

    obuf b = gguf_many_keys(n, true);
    lmq_file *f = NULL;
    uint64_t p0 = lmq_work_probes;
    lmq_status s = lmq_file_open_memory(b.p, b.len, "dup.gguf", &f);
    double dup_ppk = (double)(lmq_work_probes - p0) / (double)n;
    T_CHECK(s == LMQ_ERR_FORMAT && strstr(lmq_last_error(), "'k0' appears twice") && strstr(lmq_last_error(), "dup.gguf"),
            "repeated key refused naming it: %s", lmq_last_error());
    T_CHECK(dup_ppk < 4.0, "repeated key found in %.2f probes a key", dup_ppk);
    lmq_file_close(f);
    free(b.p);
}

static void test_many_tensors(void)
{
    const uint64_t n = 200000;
    obuf b = {0};
    put(&b, "GGUF", 4);
    put_u32(&b, 3);
    put_u64(&b, n);
    put_u64(&b, 0);
    char name[32];
    for (uint64_t i = 0; i < n; i++) {
        snprintf(name, sizeof name, "t%llu", (unsigned long long)(i == n - 1 ? 0 : i));
        put_str(&b, name);
        put_u32(&b, 1);
        put_u64(&b, 32);
        put_u32(&b, 0);       /* f32 */
        put_u64(&b, i * 128); /* offsets */
    }
    size_t pad = (32 - b.len % 32) % 32;
    uint8_t zero[32] = {0};
    put(&b, zero, pad);
    for (uint64_t i = 0; i < n; i++) {
        uint8_t row[128] = {0};
        put(&b, row, sizeof row);
    }
    lmq_file *f = NULL;
    uint64_t p0 = lmq_work_probes;
    lmq_status s = lmq_file_open_memory(b.p, b.len, "names.gguf", &f);
    double ppn = (double)(lmq_work_probes - p0) / (double)n;
    T_CHECK(s == LMQ_ERR_FORMAT && strstr(lmq_last_error(), "'t0' appears twice"), "repeated tensor name refused: %s",
            lmq_last_error());
    T_CHECK(ppn < 4.0, "200k tensor infos in %.2f probes a name (at most 4)", ppn);
    lmq_file_close(f);
    free(b.p);
}

/* Offset of the directory entry of tensor `name` in a container's bytes:
 * returns the position just after the name, or 0. */
static size_t entry_after_name(const uint8_t *bytes, size_t len, const char *name)
{
    uint64_t index_off;
    memcpy(&index_off, bytes + 56, 8);
    size_t nl = strlen(name);
    for (size_t i = (size_t)index_off; i + 8 + nl <= len; i++) {
        uint64_t l;
        memcpy(&l, bytes + i, 8);
        if (l == nl && !memcmp(bytes + i + 8, name, nl)) return i + 8 + nl;
    }
    return 0;
}

/* Re-seals a patched container: the header checksum covers the header (its
 * checksum field as zero) and the index. */
static void reseal(uint8_t *bytes, size_t len)
{
    uint64_t index_off, index_size;
    memcpy(&index_off, bytes + 56, 8);
    memcpy(&index_size, bytes + 64, 8);
    uint8_t *cat = malloc(128 + index_size);
    memcpy(cat, bytes, 128);
    memset(cat + 72, 0, 8);
    memcpy(cat + 128, bytes + index_off, index_size);
    uint64_t h = lmq_hash64(cat, 128 + index_size);
    memcpy(bytes + 72, &h, 8);
    free(cat);
    (void)len;
}

static void test_zstd_bomb(void)
{
    /* ~1.2 MB of f32 with a few bits of entropy each: compresses to ~1 MB */
    const int64_t n = 300000;
    float *x = malloc(sizeof(float) * n);
    uint32_t r = 12345;
    for (int64_t i = 0; i < n; i++) {
        r = r * 1664525u + 1013904223u;
        x[i] = (float)(r >> 20);
    }
    const char *path = t_tmp("bomb.lmq");
    lmq_writer_opts o = {LMQ_CODEC_ZSTD, 1};
    lmq_writer *w = NULL;
    lmq_status s = lmq_writer_open(path, &o, &w);
    if (!s) s = lmq_meta_set_str(lmq_writer_meta(w), "general.architecture", "llama");
    int64_t ne[1] = {n};
    if (!s) s = lmq_writer_add_tensor(w, "big", LMQ_TYPE_F32, 1, ne, x, sizeof(float) * n);
    if (!s) s = lmq_writer_finish(w);
    else lmq_writer_abort(w);
    free(x);
    T_CHECK(s == LMQ_OK, "write zstd container: %s", lmq_last_error());
    size_t len = 0;
    uint8_t *bytes = (uint8_t *)t_read_all(path, &len);
    size_t at = bytes ? entry_after_name(bytes, len, "big") : 0;
    T_CHECK(at != 0, "directory entry of 'big' found");
    if (!at) {
        free(bytes);
        return;
    }
    uint32_t codec;
    uint64_t stored;
    memcpy(&codec, bytes + at + 4 + 8 + 4, 4);
    memcpy(&stored, bytes + at + 4 + 8 + 4 + 4 + 8, 8);
    T_CHECK(codec == LMQ_CODEC_ZSTD && stored > 500000 && stored < 1300000, "stored compressed: %llu bytes",
            (unsigned long long)stored);
    lmq_file *f = NULL;
    T_CHECK(lmq_file_open_memory(bytes, len, "bomb.lmq", &f) == LMQ_OK, "unpatched opens: %s", lmq_last_error());
    lmq_file_close(f);

    /* the directory claims 50 GB (12.5e9 f32) for the same ~1 MB frame */
    uint64_t big_ne = 12500000000ull, big_nb = big_ne * 4;
    memcpy(bytes + at + 4, &big_ne, 8);
    memcpy(bytes + at + 4 + 8 + 4 + 4 + 8 + 8, &big_nb, 8);
    reseal(bytes, len);
    f = NULL;
    uint64_t z0 = lmq_work_zstd_bytes;
    s = lmq_file_open_memory(bytes, len, "bomb.lmq", &f);
    uint64_t decoded = lmq_work_zstd_bytes - z0;
    T_CHECK(s == LMQ_ERR_LIMIT && strstr(lmq_last_error(), "'big'") && strstr(lmq_last_error(), "ratio"),
            "50 GB claimed by a 1 MB frame refused at open by the ratio limit: %s", lmq_last_error());
    T_CHECK(decoded == 0, "refused with nothing decompressed (%llu bytes decoded)", (unsigned long long)decoded);
    lmq_file_close(f);

    /* within the ratio, but the frame declares another size than the directory */
    uint64_t ne2 = (uint64_t)n * 2, nb2 = ne2 * 4;
    memcpy(bytes + at + 4, &ne2, 8);
    memcpy(bytes + at + 4 + 8 + 4 + 4 + 8 + 8, &nb2, 8);
    reseal(bytes, len);
    f = NULL;
    s = lmq_file_open_memory(bytes, len, "bomb.lmq", &f);
    T_CHECK(s == LMQ_ERR_FORMAT && strstr(lmq_last_error(), "'big'") && strstr(lmq_last_error(), "frame size"),
            "frame size differing from the directory refused: %s", lmq_last_error());
    lmq_file_close(f);
    free(bytes);
}

/* Each template tries to blow one limit; the render must stop at that limit
 * (LMQ_ERR_LIMIT naming it: the step, output and memory caps bound the work)
 * with one line, and hold no more memory than the cap (the arena refuses
 * beyond it). The CPU time is printed, not asserted. */
static void test_jinja_blowups(void)
{
    static const struct {
        const char *what, *src, *want;
        lmq_status st;
    } cases[] = {
        {"string doubling in a loop",
         "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
         "limit", LMQ_ERR_LIMIT},
        {"string repetition", "{{ 'abc' * 1000000000 }}", "limit", LMQ_ERR_LIMIT},
        {"macro recursion without end", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "recursion",
         LMQ_ERR_LIMIT},
        {"macro fan-out recursion", "{% macro f(n) %}{{ f(n) ~ f(n) }}{% endmacro %}{{ f(0) }}", "recursion",
         LMQ_ERR_LIMIT},
        /* one huge range is refused as Jinja's sandbox does (MAX_RANGE) */
        {"huge range loop", "{% for i in range(1000000000000) %}{% endfor %}", "MAX_RANGE", LMQ_ERR_RUNTIME},
        {"huge range as a list", "{{ range(1000000000) | list | length }}", "MAX_RANGE", LMQ_ERR_RUNTIME},
        {"nested ranges (10^10 steps)",
         "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "limit", LMQ_ERR_LIMIT},
        {"list doubling", "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l | length }}",
         "limit", LMQ_ERR_LIMIT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lmq_chat_template *t = NULL;
        lmq_status s = lmq_chat_template_parse(cases[i].src, strlen(cases[i].src), &t);
        T_CHECK(s == LMQ_OK, "%s: parse: %s", cases[i].what, lmq_last_error());
        if (s) continue;
        lmq_chat_vars v = {0};
        char *out = NULL;
        size_t len = 0;
        double t0 = now_s();
        s = lmq_chat_render(t, &v, &out, &len);
        double dt = now_s() - t0;
        const char *e = lmq_last_error();
        printf("%-28s -> %s (%.2f s CPU)\n", cases[i].what, s ? e : "rendered", dt);
        T_CHECK(s == cases[i].st && strstr(e, cases[i].want) && !strchr(e, '\n'),
                "%s: stops at a limit with one line: %d %s", cases[i].what, (int)s, e);
        free(out);
        lmq_chat_template_free(t);
    }
    /* parsing: the arena is capped at LMQ_CHAT_MAX_PARSE_MEMORY whatever the
     * template's size (it was 512 x size + 16 MiB); a 16 MiB template of
     * dense expressions is parsed or refused with one line */
    size_t n = LMQ_CHAT_MAX_TEMPLATE;
    char *src = malloc(n);
    for (size_t i = 0; i + 8 <= n; i += 8) memcpy(src + i, "{{a+b}}x", 8);
    lmq_chat_template *t = NULL;
    double t0 = now_s();
    lmq_status s = lmq_chat_template_parse(src, n - n % 8, &t);
    double dt = now_s() - t0;
    printf("16 MiB dense template -> %s (%.2f s CPU)\n", s ? lmq_last_error() : "parsed", dt);
    T_CHECK(s == LMQ_OK || (strstr(lmq_last_error(), "parse memory limit") && !strchr(lmq_last_error(), '\n')),
            "16 MiB template: parsed or refused at the parse memory limit: %s", lmq_last_error());
    lmq_chat_template_free(t);
    free(src);
}

int main(void)
{
    test_many_keys();
    test_many_tensors();
    test_zstd_bomb();
    test_jinja_blowups();
    return t_finish();
}

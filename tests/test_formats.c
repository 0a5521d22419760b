/* Unit tests of the formats module: type table, f16/bf16 rounding, metadata
 * encoding, the .lmq container (round trip, zstd, corruption, truncation). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lmq_format.h"
#include "testutil.h"

/* Independent reference: round a double to the nearest representable value
 * with `mant` explicit mantissa bits and minimum normal exponent `emin`,
 * ties to even, used to check the bit-level converters. */
static double round_ref(double x, int mant, int emin, double maxv)
{
    if (x == 0) return x;
    double a = fabs(x);
    int e;
    frexp(a, &e); /* a = m * 2^e, m in [0.5,1) */
    e -= 1;       /* a = m' * 2^e, m' in [1,2) */
    if (e < emin) e = emin;
    double ulp = ldexp(1.0, e - mant);
    double q = a / ulp;
    double fl = floor(q);
    double r = q - fl;
    if (r > 0.5 || (r == 0.5 && fmod(fl, 2.0) == 1.0)) fl += 1;
    double y = fl * ulp;
    if (y > maxv) y = INFINITY;
    return x < 0 ? -y : y;
}

static void test_type_table(void)
{
    struct { lmq_type t; int bs, ts; } want[] = {
        {LMQ_TYPE_Q4_0, 32, 18}, {LMQ_TYPE_Q4_1, 32, 20}, {LMQ_TYPE_Q5_0, 32, 22},
        {LMQ_TYPE_Q5_1, 32, 24}, {LMQ_TYPE_Q8_0, 32, 34}, {LMQ_TYPE_Q8_1, 32, 36},
        {LMQ_TYPE_Q2_K, 256, 84}, {LMQ_TYPE_Q3_K, 256, 110}, {LMQ_TYPE_Q4_K, 256, 144},
        {LMQ_TYPE_Q5_K, 256, 176}, {LMQ_TYPE_Q6_K, 256, 210}, {LMQ_TYPE_Q8_K, 256, 292},
        {LMQ_TYPE_IQ4_NL, 32, 18}, {LMQ_TYPE_IQ4_XS, 256, 136}, {LMQ_TYPE_F16, 1, 2},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const lmq_type_traits *tt = lmq_type_get(want[i].t);
        T_CHECK(tt && tt->block_size == want[i].bs && tt->type_size == want[i].ts, "%s geometry",
                lmq_type_name(want[i].t));
    }
    for (int t = 0; t < LMQ_TYPE_COUNT; t++) {
        lmq_type back;
        T_CHECK(lmq_type_from_name(lmq_type_name((lmq_type)t), &back) == LMQ_OK && back == (lmq_type)t,
                "name round trip %d", t);
        const lmq_type_traits *tt = lmq_type_get((lmq_type)t);
        if (tt->ggml_type >= 0) {
            T_CHECK(lmq_type_from_ggml((uint32_t)tt->ggml_type, &back) == LMQ_OK && back == (lmq_type)t,
                    "ggml id round trip %s", tt->name);
        }
    }
    lmq_type x;
    T_CHECK(lmq_type_from_name("Q4_K", &x) == LMQ_OK && x == LMQ_TYPE_Q4_K, "case-insensitive name");
    T_CHECK(lmq_type_from_name("q9_9", &x) != LMQ_OK, "unknown name rejected");
    T_CHECK(lmq_type_get(LMQ_TYPE_COUNT) == NULL, "invalid id");
    T_CHECK(lmq_row_size(LMQ_TYPE_Q4_K, 255) == -1, "row not multiple of block");
    T_CHECK(lmq_row_size(LMQ_TYPE_Q4_K, 512) == 288, "row size");
}

static void test_fp16_bf16(void)
{
    /* every f16 code decodes to its defined value and re-encodes to itself */
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = lmq_fp16_to_fp32((uint16_t)h);
        uint32_t e = (h >> 10) & 31, m = h & 1023;
        double want = e == 0 ? ldexp((double)m, -24) : ldexp(1.0 + m / 1024.0, (int)e - 15);
        if (h & 0x8000) want = -want;
        if (e == 31) {
            if ((m == 0) != !isnan(f)) bad++;
            continue;
        }
        if ((double)f != want) bad++;
        if (lmq_fp32_to_fp16(f) != (uint16_t)h) bad++;
    }
    T_CHECK(bad == 0, "%d f16 codes wrong", bad);
    /* rounding of f32 -> f16 / bf16 against the double reference on a sweep
     * that includes ties, subnormals and overflow */
    int bad16 = 0, badbf = 0;
    uint32_t seed = 12345;
    for (int i = 0; i < 2000000; i++) {
        seed = seed * 1664525u + 1013904223u;
        uint32_t bits = seed;
        if (i % 4 == 0) bits &= 0x8fffe000u | 0x00001000u; /* force f16 ties */
        if (i % 4 == 1) bits = (bits & 0x83ffffffu) | 0x30000000u; /* f16 subnormal range */
        float f;
        memcpy(&f, &bits, 4);
        if (isnan(f)) continue;
        double r16 = round_ref(f, 10, -14, 65504.0);
        if (fabs(f) >= 65520.0) r16 = copysign(INFINITY, f);
        if ((double)lmq_fp16_to_fp32(lmq_fp32_to_fp16(f)) != r16) bad16++;
        double rbf = round_ref(f, 7, -126, 3.3895313892515355e38);
        if (isinf(f)) rbf = f;
        if ((double)lmq_bf16_to_fp32(lmq_fp32_to_bf16(f)) != rbf) badbf++;
    }
    T_CHECK(bad16 == 0, "%d f32->f16 roundings differ from the reference", bad16);
    T_CHECK(badbf == 0, "%d f32->bf16 roundings differ from the reference", badbf);
    T_CHECK(isnan(lmq_bf16_to_fp32(lmq_fp32_to_bf16(NAN))), "bf16 keeps NaN");
    T_CHECK(isnan(lmq_fp16_to_fp32(lmq_fp32_to_fp16(NAN))), "f16 keeps NaN");
}

static void test_meta(void)
{
    lmq_meta *m = lmq_meta_new();
    lmq_meta_set_str(m, "general.architecture", "llama");
    lmq_meta_set_u32(m, "llama.block_count", 8);
    lmq_meta_set_f32(m, "llama.rope.freq_base", 10000.0f);
    lmq_meta_set_bool(m, "tokenizer.ggml.add_bos_token", true);
    const char *toks[] = {"<unk>", "<s>", "", "\xe2\x96\x81the"};
    lmq_meta_set_str_arr(m, "tokenizer.ggml.tokens", toks, NULL, 4);
    float scores[] = {0, -1.5f, 2, 3};
    lmq_meta_set_arr(m, "tokenizer.ggml.scores", LMQ_V_F32, scores, 4);
    lmq_meta_set_u32(m, "llama.block_count", 9); /* replace keeps position */
    T_CHECK(lmq_meta_count(m) == 6, "count %zu", lmq_meta_count(m));
    T_CHECK(!strcmp(lmq_meta_key(m, 1), "llama.block_count"), "position kept");
    uint8_t *buf;
    size_t len;
    T_CHECK(lmq_meta_encode(m, &buf, &len) == LMQ_OK, "encode");
    lmq_meta *d = lmq_meta_new();
    size_t used = 0;
    T_CHECK(lmq_meta_decode(buf, len, 6, d, &used) == LMQ_OK && used == len, "decode: %s", lmq_last_error());
    uint64_t u;
    double f;
    bool b;
    const char *s;
    T_CHECK(lmq_meta_get_u64(d, "llama.block_count", &u) == LMQ_OK && u == 9, "u32 value");
    T_CHECK(lmq_meta_get_f64(d, "llama.rope.freq_base", &f) == LMQ_OK && f == 10000.0, "f32 value");
    T_CHECK(lmq_meta_get_bool(d, "tokenizer.ggml.add_bos_token", &b) == LMQ_OK && b, "bool");
    T_CHECK(lmq_meta_get_str(d, "general.architecture", &s, NULL) == LMQ_OK && !strcmp(s, "llama"), "str");
    lmq_vtype et;
    uint64_t n;
    const void *data;
    T_CHECK(lmq_meta_get_arr(d, "tokenizer.ggml.tokens", &et, &n, &data) == LMQ_OK && et == LMQ_V_STRING && n == 4 &&
                !strcmp(((const lmq_str *)data)[3].ptr, "\xe2\x96\x81the") && ((const lmq_str *)data)[2].len == 0,
            "string array");
    T_CHECK(lmq_meta_get_arr(d, "tokenizer.ggml.scores", &et, &n, &data) == LMQ_OK && et == LMQ_V_F32 &&
                ((const float *)data)[1] == -1.5f, "f32 array");
    T_CHECK(lmq_meta_get_u64(d, "missing.key", &u) == LMQ_ERR_NOT_FOUND && strstr(lmq_last_error(), "missing.key"),
            "missing key named");
    T_CHECK(lmq_meta_get_u64(d, "general.architecture", &u) == LMQ_ERR_FORMAT, "type mismatch");
    /* every truncation of the encoding fails cleanly */
    int ok_trunc = 0;
    for (size_t cut = 0; cut < len; cut++) {
        lmq_meta *t = lmq_meta_new();
        if (lmq_meta_decode(buf, cut, 6, t, NULL) != LMQ_OK) ok_trunc++;
        lmq_meta_free(t);
    }
    T_CHECK(ok_trunc == (int)len, "all %zu truncations rejected (%d)", len, ok_trunc);
    free(buf);
    lmq_meta_free(d);
    lmq_meta_free(m);
}

static void write_sample(const char *path, lmq_codec codec, float *w, uint16_t *h)
{
    lmq_writer_opts o = {codec, 0};
    lmq_writer *wr;
    T_CHECK(lmq_writer_open(path, &o, &wr) == LMQ_OK, "writer open: %s", lmq_last_error());
    lmq_meta_set_str(lmq_writer_meta(wr), "general.architecture", "llama");
    int64_t ne2[2] = {64, 3}, ne1[1] = {100};
    T_CHECK(lmq_writer_add_tensor(wr, "blk.0.attn_q.weight", LMQ_TYPE_F32, 2, ne2, w, 64 * 3 * 4) == LMQ_OK, "add f32");
    T_CHECK(lmq_writer_add_tensor(wr, "h", LMQ_TYPE_F16, 1, ne1, h, 200) == LMQ_OK, "add f16");
    T_CHECK(lmq_writer_add_tensor(wr, "h", LMQ_TYPE_F16, 1, ne1, h, 200) != LMQ_OK, "duplicate rejected");
    T_CHECK(lmq_writer_add_tensor(wr, "bad", LMQ_TYPE_F16, 1, ne1, h, 199) != LMQ_OK, "size mismatch rejected");
    T_CHECK(lmq_writer_finish(wr) == LMQ_OK, "finish: %s", lmq_last_error());
}

static void test_container(void)
{
    float w[64 * 3];
    uint16_t h[100];
    for (int i = 0; i < 64 * 3; i++) w[i] = (float)(i % 7) * 0.25f; /* compressible */
    for (int i = 0; i < 100; i++) h[i] = lmq_fp32_to_fp16((float)i);
    const char *p = t_tmp("a.lmq"), *pz = t_tmp("z.lmq");
    write_sample(p, LMQ_CODEC_NONE, w, h);
    write_sample(pz, LMQ_CODEC_ZSTD, w, h);
    for (int k = 0; k < 2; k++) {
        lmq_file *f;
        T_CHECK(lmq_file_open(k ? pz : p, &f) == LMQ_OK, "open: %s", lmq_last_error());
        if (!f) continue;
        T_CHECK(lmq_file_n_tensors(f) == 2, "n tensors");
        const lmq_tensor_info *t = lmq_file_find_tensor(f, "blk.0.attn_q.weight");
        T_CHECK(t && t->ne[0] == 64 && t->ne[1] == 3 && t->type == LMQ_TYPE_F32 && !memcmp(t->data, w, sizeof w),
                "tensor round trip");
        T_CHECK(t && ((uintptr_t)t->data % 64) == 0, "64-byte aligned data");
        if (k) T_CHECK(t && t->codec == LMQ_CODEC_ZSTD && t->stored_bytes < t->nbytes, "compressed");
        const lmq_tensor_info *t2 = lmq_file_find_tensor(f, "h");
        T_CHECK(t2 && !memcmp(t2->data, h, sizeof h), "f16 tensor");
        size_t bad = 99, checked = 0;
        T_CHECK(lmq_file_verify(f, 2, &bad, &checked) == LMQ_OK && checked == 2, "verify ok");
        const char *arch;
        T_CHECK(lmq_meta_get_str(lmq_file_meta(f), "general.architecture", &arch, NULL) == LMQ_OK, "meta");
        lmq_file_close(f);
    }
    /* no temporary left behind */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", p, (long)getpid());
    T_CHECK(!t_exists(tmp), "temp file removed");

    size_t len;
    char *bytes = t_read_all(p, &len);
    /* every truncation fails with a message naming the file */
    int rejected = 0;
    for (size_t cut = 0; cut < len; cut++) {
        lmq_file *f = NULL;
        if (lmq_file_open_memory(bytes, cut, "cut.lmq", &f) != LMQ_OK && strstr(lmq_last_error(), "cut.lmq")) rejected++;
        lmq_file_close(f);
    }
    T_CHECK(rejected == (int)len, "truncations rejected: %d of %zu", rejected, len);
    /* a flipped byte in the header/index is caught at open; in tensor data by verify */
    int caught_open = 0, caught_verify = 0, n_data = 0, n_meta = 0;
    for (size_t i = 0; i < len; i++) {
        bytes[i] ^= 0x20;
        lmq_file *f = NULL;
        lmq_status s = lmq_file_open_memory(bytes, len, "flip.lmq", &f);
        uint64_t index_off;
        memcpy(&index_off, bytes + 56, 8); /* header field: start of the index */
        bool in_data = i >= 128 && i < index_off;
        if (in_data) {
            n_data++;
            size_t bad;
            if (s == LMQ_OK && lmq_file_verify(f, 1, &bad, NULL) == LMQ_ERR_CHECKSUM) caught_verify++;
            else if (s == LMQ_OK) {
                /* a flip in alignment padding is harmless and not covered */
                const lmq_tensor_info *a = lmq_file_tensor(f, 0), *b = lmq_file_tensor(f, 1);
                bool in_tensor = (i >= a->file_offset && i < a->file_offset + a->stored_bytes) ||
                                 (i >= b->file_offset && i < b->file_offset + b->stored_bytes);
                if (!in_tensor) caught_verify++;
            }
        } else {
            n_meta++;
            if (s != LMQ_OK) caught_open++;
        }
        lmq_file_close(f);
        bytes[i] ^= 0x20;
    }
    T_CHECK(caught_verify == n_data, "data flips caught by verify: %d of %d", caught_verify, n_data);
    T_CHECK(caught_open == n_meta, "header/index flips caught at open: %d of %d", caught_open, n_meta);
    /* a NUL inside a tensor name, with the header checksum made valid again:
     * refused by name (and nothing leaks: the ASan run checks that) */
    {
        uint64_t index_off, index_len;
        memcpy(&index_off, bytes + 56, 8);
        memcpy(&index_len, bytes + 64, 8);
        char *nm = NULL;
        for (size_t i = (size_t)index_off; i + 19 <= len && !nm; i++)
            if (!memcmp(bytes + i, "blk.0.attn_q.weight", 19)) nm = bytes + i;
        T_CHECK(nm != NULL, "tensor name found in the index");
        if (nm) {
            char was = nm[3];
            nm[3] = 0;
            size_t hl = 128 + (size_t)index_len;
            uint8_t *hb = malloc(hl);
            memcpy(hb, bytes, 128);
            memset(hb + 72, 0, 8);
            memcpy(hb + 128, bytes + index_off, (size_t)index_len);
            uint64_t ck = lmq_hash64(hb, hl), ck0;
            memcpy(&ck0, bytes + 72, 8);
            memcpy(bytes + 72, &ck, 8);
            lmq_file *f = NULL;
            T_CHECK(lmq_file_open_memory(bytes, len, "nul.lmq", &f) == LMQ_ERR_FORMAT &&
                        strstr(lmq_last_error(), "NUL byte"), "NUL in a tensor name: %s", lmq_last_error());
            lmq_file_close(f);
            memcpy(bytes + 72, &ck0, 8);
            nm[3] = was;
            free(hb);
        }
    }
    free(bytes);

    /* unwritable output: clear error, nothing left */
    lmq_writer *wr;
    T_CHECK(lmq_writer_open("/nonexistent-dir/x.lmq", NULL, &wr) == LMQ_ERR_IO &&
                strstr(lmq_last_error(), "/nonexistent-dir/x.lmq"), "unwritable path named");
    /* abort removes the temporary: the writer's own PATH.tmp.<pid> exists
     * while writing (so this looks at the right name) and is gone after */
    char ab_tmp[4200];
    snprintf(ab_tmp, sizeof ab_tmp, "%s.tmp.%ld", t_tmp("ab.lmq"), (long)getpid());
    T_CHECK(lmq_writer_open(t_tmp("ab.lmq"), NULL, &wr) == LMQ_OK, "open");
    T_CHECK(t_exists(ab_tmp), "writer writes to %s", ab_tmp);
    lmq_writer_abort(wr);
    T_CHECK(!t_exists(ab_tmp), "abort removes %s", ab_tmp);
    T_CHECK(!t_exists(t_tmp("ab.lmq")), "abort leaves no output");
    lmq_file *f;
    T_CHECK(lmq_file_open(t_tmp("missing.lmq"), &f) == LMQ_ERR_NOT_FOUND, "missing file");
}

/* lmq_error_prefix: context before the current message, even when an
 * argument points into the message buffer itself */
static void test_error_prefix(void)
{
    lmq_error(LMQ_ERR_FORMAT, "bad block %d", 3);
    T_CHECK(lmq_error_prefix(LMQ_ERR_IO, "%s: tensor '%s'", "m.lmq", "w") == LMQ_ERR_IO, "returns the status");
    T_CHECK(!strcmp(lmq_last_error(), "m.lmq: tensor 'w': bad block 3"), "prefixed: %s", lmq_last_error());
    lmq_error(LMQ_ERR_FORMAT, "inner");
    lmq_error_prefix(LMQ_ERR_FORMAT, "outer (%s)", lmq_last_error());
    T_CHECK(!strcmp(lmq_last_error(), "outer (inner): inner"), "self-referential argument: %s", lmq_last_error());
    lmq_error_clear();
    lmq_error_prefix(LMQ_ERR_FORMAT, "only %s", "this");
    T_CHECK(!strcmp(lmq_last_error(), "only this"), "no current message: %s", lmq_last_error());
}

static char g_logged[256];
static int g_log_calls;
static void capture_log(lmq_log_level level, const char *msg, void *user)
{
    snprintf(g_logged, sizeof g_logged, "%d %s %s", (int)level, msg, (const char *)user);
    g_log_calls++;
}

/* the logging hook receives the library's messages (one line, no newline) */
static void test_log_hook(void)
{
    lmq_set_log(capture_log, "u");
    lmq_log(LMQ_LOG_WARN, "tensor '%s' skipped", "x");
    T_CHECK(g_log_calls == 1 && !strcmp(g_logged, "0 tensor 'x' skipped u"), "hook called: %s", g_logged);
    lmq_set_log(NULL, NULL);
    lmq_log(LMQ_LOG_INFO, "to stderr (the default hook), not to the capture");
    T_CHECK(g_log_calls == 1, "default restored");
}

/* lmq_pool_for: every share runs once, with the right count, on distinct
 * threads when the pool has them; the one cap is enforced. */
typedef struct pool_probe {
    int calls[8];
    int nth_seen[8];
    pthread_t who[8];
} pool_probe;

static void probe_share(void *ctx, int ith, int nth)
{
    pool_probe *p = ctx;
    p->calls[ith]++;
    p->nth_seen[ith] = nth;
    p->who[ith] = pthread_self();
}

static void test_pool_for(void)
{
    for (int n = 1; n <= 7; n += 3) {
        pool_probe p;
        memset(&p, 0, sizeof p);
        T_CHECK(lmq_pool_for(n, probe_share, &p) == LMQ_OK, "pool_for %d", n);
        bool once = true, distinct = true;
        for (int i = 0; i < n; i++) {
            once = once && p.calls[i] == 1 && p.nth_seen[i] == n;
            for (int k = 0; k < i; k++) distinct = distinct && !pthread_equal(p.who[i], p.who[k]);
        }
        T_CHECK(once, "pool_for %d: each share once, told nth = %d", n, n);
        T_CHECK(distinct && pthread_equal(p.who[0], pthread_self()), "pool_for %d: share 0 on the caller, the others on threads of the pool", n);
        T_CHECK(p.calls[n < 8 ? n : 7] == 0 || n == 8, "pool_for %d: no share beyond n", n);
    }
    pool_probe p;
    t_check_error("pool_for above the cap", lmq_pool_for(LMQ_MAX_THREADS + 1, probe_share, &p), LMQ_ERR_INVALID_ARG,
                  "at most 512", NULL);
}

int main(void)
{
    test_pool_for();
    test_error_prefix();
    test_log_hook();
    test_type_table();
    test_fp16_bf16();
    test_meta();
    test_container();
    return t_finish();
}

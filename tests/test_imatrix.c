/* Unit tests of importance matrices (quantize/imatrix.c) and of the
 * size-targeted allocation (convert/quantize_target.c):
 * - accumulate / save / load round trip, the GGUF keys and tensor shapes
 *   llama.cpp's llama-quantize reads (general.type, imatrix.datasets,
 *   imatrix.chunk_count, imatrix.chunk_size, <name>.in_sum2 [n_cols, n_mat],
 *   <name>.counts [1, n_mat]), MoE entries;
 * - merge exactness (sums and counts add exactly);
 * - a hand-made legacy imatrix.dat;
 * - truncated and corrupted files (GGUF and legacy, every prefix length):
 *   an error status with a one-line message, never a crash;
 * - the target solver: never over budget, optimal on a small table, refuses
 *   an infeasible budget;
 * - lmq_quantize_model with an imatrix on a 3-D expert tensor (per-expert
 *   weights, byte for byte) and a mismatched entry (error, nothing written). */
#include <stdlib.h>
#include <string.h>

#include "lmq_convert.h"
#include "lmq_quant.h"
#include "testutil.h"

static lmq_imatrix *make(unsigned seed, int n_tok)
{
    lmq_imatrix *im = lmq_imatrix_new();
    float x[64 * 48];
    srand(seed);
    for (int i = 0; i < 64 * 48; i++) x[i] = (float)rand() / RAND_MAX * 2.0f - 1.0f;
    T_CHECK(lmq_imatrix_accumulate(im, "blk.0.attn_q.weight", 0, x, n_tok, 64) == LMQ_OK, "accumulate");
    T_CHECK(lmq_imatrix_accumulate(im, "blk.0.ffn_down.weight", 0, x, n_tok / 2, 96) == LMQ_OK, "accumulate");
    /* MoE: experts 0 and 2 only (expert 1 sees no token) */
    T_CHECK(lmq_imatrix_accumulate(im, "blk.0.ffn_up_exps.weight", 2, x, 3, 32) == LMQ_OK, "expert 2");
    T_CHECK(lmq_imatrix_accumulate(im, "blk.0.ffn_up_exps.weight", 0, x + 32, 5, 32) == LMQ_OK, "expert 0");
    lmq_imatrix_set_chunks(im, 3, 128);
    lmq_imatrix_add_dataset(im, "calib.txt");
    return im;
}

static void test_roundtrip(void)
{
    lmq_imatrix *im = make(1, 40);
    T_CHECK(lmq_imatrix_accumulate(im, "blk.0.attn_q.weight", 0, NULL, 0, 65) == LMQ_ERR_INVALID_ARG,
            "column count mismatch is refused");
    const lmq_imatrix_entry *e = lmq_imatrix_find(im, "blk.0.ffn_up_exps.weight");
    T_CHECK(e && e->n_mat == 3 && e->counts[1] == 0 && e->counts[2] == 3 && e->counts[0] == 5, "MoE entry grows to 3");
    const char *path = t_tmp("im.gguf");
    T_CHECK(lmq_imatrix_save(im, path) == LMQ_OK, "save: %s", lmq_last_error());

    /* the file as llama.cpp sees it */
    lmq_file *f = NULL;
    T_CHECK(lmq_file_open(path, &f) == LMQ_OK, "open as GGUF: %s", lmq_last_error());
    if (f) {
        const lmq_meta *m = lmq_file_meta(f);
        const char *s;
        size_t len;
        uint64_t v;
        T_CHECK(!lmq_meta_get_str(m, "general.type", &s, &len) && len == 7 && !memcmp(s, "imatrix", 7), "general.type");
        T_CHECK(!lmq_meta_get_u64(m, "imatrix.chunk_count", &v) && v == 3, "chunk_count");
        T_CHECK(!lmq_meta_get_u64(m, "imatrix.chunk_size", &v) && v == 128, "chunk_size");
        /* llama-quantize reads chunk_count with gguf_get_val_u32, which
         * asserts the stored type */
        const lmq_value *cc = lmq_meta_find(m, "imatrix.chunk_count"), *cs = lmq_meta_find(m, "imatrix.chunk_size");
        T_CHECK(cc && cc->type == LMQ_V_U32 && cs && cs->type == LMQ_V_U32, "chunk_count/chunk_size stored as u32");
        const lmq_value *ds = lmq_meta_find(m, "imatrix.datasets");
        T_CHECK(ds && ds->type == LMQ_V_ARRAY && ds->arr.elem == LMQ_V_STRING && ds->arr.n == 1, "datasets array");
        const lmq_tensor_info *ts = lmq_file_find_tensor(f, "blk.0.ffn_up_exps.weight.in_sum2");
        const lmq_tensor_info *tc = lmq_file_find_tensor(f, "blk.0.ffn_up_exps.weight.counts");
        T_CHECK(ts && ts->type == LMQ_TYPE_F32 && ts->n_dims == 2 && ts->ne[0] == 32 && ts->ne[1] == 3, "in_sum2 shape");
        T_CHECK(tc && tc->type == LMQ_TYPE_F32 && tc->n_dims == 2 && tc->ne[0] == 1 && tc->ne[1] == 3, "counts shape");
        T_CHECK(lmq_file_n_tensors(f) == 6, "two tensors per entry");
        lmq_file_close(f);
    }

    lmq_imatrix *back = NULL;
    T_CHECK(lmq_imatrix_load(path, &back) == LMQ_OK, "load: %s", lmq_last_error());
    if (back) {
        T_CHECK(lmq_imatrix_count(back) == 3 && lmq_imatrix_chunk_count(back) == 3 && lmq_imatrix_chunk_size(back) == 128 &&
                    lmq_imatrix_n_datasets(back) == 1 && !strcmp(lmq_imatrix_dataset(back, 0), "calib.txt"),
                "header round trip");
        for (size_t i = 0; i < lmq_imatrix_count(im); i++) {
            const lmq_imatrix_entry *a = lmq_imatrix_at(im, i), *b = lmq_imatrix_find(back, a->name);
            T_CHECK(b && b->n_cols == a->n_cols && b->n_mat == a->n_mat, "%s shape", a->name);
            if (!b) continue;
            bool same = true;
            for (int64_t j = 0; j < a->n_cols * a->n_mat; j++) same &= b->sum2[j] == (double)(float)a->sum2[j];
            for (int32_t j = 0; j < a->n_mat; j++) same &= b->counts[j] == a->counts[j];
            T_CHECK(same, "%s: values are the f32 of the sums, counts exact", a->name);
        }
        float w[32];
        T_CHECK(lmq_imatrix_weights(back, "blk.0.ffn_up_exps.weight", 1, w, 32) == LMQ_OK && w[0] == 1.0f,
                "a matrix without tokens weighs 1");
        T_CHECK(lmq_imatrix_weights(back, "blk.9.attn_q.weight", 0, w, 32) == LMQ_ERR_NOT_FOUND, "missing entry");
        /* saving the loaded file gives the same bytes */
        const char *p2 = t_tmp("im2.gguf");
        T_CHECK(lmq_imatrix_save(back, p2) == LMQ_OK && t_files_equal(path, p2), "save(load(f)) == f");
        lmq_imatrix_free(back);
    }
    lmq_imatrix_free(im);
}

static void test_merge(void)
{
    lmq_imatrix *a = make(2, 40), *b = make(3, 24), *m = lmq_imatrix_new();
    T_CHECK(lmq_imatrix_merge(m, a) == LMQ_OK && lmq_imatrix_merge(m, b) == LMQ_OK, "merge");
    bool exact = true;
    for (size_t i = 0; i < lmq_imatrix_count(a); i++) {
        const lmq_imatrix_entry *x = lmq_imatrix_at(a, i), *y = lmq_imatrix_find(b, x->name),
                                *z = lmq_imatrix_find(m, x->name);
        for (int64_t j = 0; j < x->n_cols * x->n_mat; j++) exact &= z->sum2[j] == x->sum2[j] + y->sum2[j];
        for (int32_t j = 0; j < x->n_mat; j++) exact &= z->counts[j] == x->counts[j] + y->counts[j];
    }
    T_CHECK(exact, "merged sums and counts are the exact sums");
    T_CHECK(lmq_imatrix_chunk_count(m) == 6 && lmq_imatrix_n_datasets(m) == 2, "chunks add, datasets append");
    /* merging a matrix with another column count is refused */
    lmq_imatrix *bad = lmq_imatrix_new();
    float x[100] = {0};
    lmq_imatrix_accumulate(bad, "blk.0.attn_q.weight", 0, x, 1, 100);
    T_CHECK(lmq_imatrix_merge(m, bad) == LMQ_ERR_INVALID_ARG, "column mismatch in merge");
    lmq_imatrix_free(bad);
    lmq_imatrix_free(a);
    lmq_imatrix_free(b);
    lmq_imatrix_free(m);
}

/* llama.cpp's legacy layout, built by hand. */
static size_t make_legacy(uint8_t *buf)
{
    size_t o = 0;
    int32_t v;
#define PUT(x) (v = (x), memcpy(buf + o, &v, 4), o += 4)
    PUT(2);
    const char *names[2] = {"blk.0.attn_k.weight", "blk.1.ffn_down.weight"};
    for (int e = 0; e < 2; e++) {
        PUT((int32_t)strlen(names[e]));
        memcpy(buf + o, names[e], strlen(names[e]));
        o += strlen(names[e]);
        PUT(10);     /* ncall */
        PUT(8);      /* nval */
        for (int j = 0; j < 8; j++) {
            float f = (float)(j + 1) * 10.0f; /* mean square (j+1) x 10 calls */
            memcpy(buf + o, &f, 4);
            o += 4;
        }
    }
    PUT(10);
    PUT(9);
    memcpy(buf + o, "calib.txt", 9);
    o += 9;
#undef PUT
    return o;
}

static void test_legacy(void)
{
    uint8_t buf[512];
    size_t n = make_legacy(buf);
    lmq_imatrix *im = NULL;
    T_CHECK(lmq_imatrix_load_memory(buf, n, "legacy", &im) == LMQ_OK, "legacy: %s", lmq_last_error());
    if (!im) return;
    float w[8];
    T_CHECK(lmq_imatrix_weights(im, "blk.1.ffn_down.weight", 0, w, 8) == LMQ_OK && w[0] == 1.0f && w[7] == 8.0f,
            "legacy values / ncall = per-token mean square");
    T_CHECK(lmq_imatrix_chunk_count(im) == 10 && lmq_imatrix_n_datasets(im) == 1 &&
                !strcmp(lmq_imatrix_dataset(im, 0), "calib.txt"),
            "legacy trailer");
    lmq_imatrix_free(im);
    /* without the optional trailer */
    size_t body = n - 4 - 4 - 9 - 4;
    T_CHECK(lmq_imatrix_load_memory(buf, body + 4, "legacy", &im) == LMQ_OK, "legacy without dataset");
    lmq_imatrix_free(im);
}

static void one_line(lmq_status st, const char *what, size_t len)
{
    const char *msg = lmq_last_error();
    if (st != LMQ_OK) T_CHECK(msg && *msg && !strchr(msg, '\n'), "%s at %zu: one-line message", what, len);
}

static void test_corrupt(void)
{
    /* every prefix of a GGUF imatrix and of a legacy file */
    lmq_imatrix *im = make(4, 8);
    const char *path = t_tmp("c.gguf");
    lmq_imatrix_save(im, path);
    lmq_imatrix_free(im);
    size_t len;
    uint8_t *g = (uint8_t *)t_read_all(path, &len);
    T_CHECK(g != NULL, "read back");
    if (!g) return;
    int bad_ok = 0;
    for (size_t l = 0; l < len; l++) {
        lmq_imatrix *x = NULL;
        uint8_t *cp = malloc(l ? l : 1);
        memcpy(cp, g, l);
        lmq_status st = lmq_imatrix_load_memory(cp, l, "trunc.gguf", &x);
        /* the data section is padded: a cut inside the final padding is
         * still a complete file for the reader */
        if (st == LMQ_OK) bad_ok++;
        else one_line(st, "truncated gguf", l);
        lmq_imatrix_free(x);
        free(cp);
    }
    T_CHECK(bad_ok < 32, "truncated GGUF files are refused (%d prefixes read)", bad_ok);
    /* flipped bytes: never a crash; NaN sums are refused */
    unsigned seed = 7;
    for (int k = 0; k < 2000; k++) {
        uint8_t *cp = malloc(len);
        memcpy(cp, g, len);
        seed = seed * 1103515245u + 12345u;
        cp[(seed >> 8) % len] ^= (uint8_t)(1u << (seed % 8));
        lmq_imatrix *x = NULL;
        lmq_status st = lmq_imatrix_load_memory(cp, len, "flip.gguf", &x);
        if (st) one_line(st, "corrupt gguf", (size_t)k);
        lmq_imatrix_free(x);
        free(cp);
    }
    free(g);

    uint8_t buf[512];
    size_t n = make_legacy(buf);
    size_t body = n - 4 - 4 - 9 - 4; /* entries only (the trailer is optional) */
    for (size_t l = 0; l < body; l++) {
        lmq_imatrix *x = NULL;
        lmq_status st = lmq_imatrix_load_memory(buf, l, "trunc.dat", &x);
        T_CHECK(st == LMQ_ERR_FORMAT, "legacy truncated at %zu: %s", l, lmq_status_str(st));
        one_line(st, "truncated legacy", l);
        lmq_imatrix_free(x);
    }
    int32_t huge = 0x7fffffff;
    memcpy(buf + 4, &huge, 4); /* name length */
    lmq_imatrix *x = NULL;
    T_CHECK(lmq_imatrix_load_memory(buf, n, "huge.dat", &x) == LMQ_ERR_FORMAT, "huge name length");
    T_CHECK(lmq_imatrix_load_memory("hello", 5, "text", &x) == LMQ_ERR_FORMAT, "text file");
    T_CHECK(lmq_imatrix_load(t_tmp("does-not-exist"), &x) != LMQ_OK, "missing file");
}

static lmq_target_table *toy_table(void)
{
    lmq_target_table *t = calloc(1, sizeof *t);
    t->n = 4;
    t->t = calloc(4, sizeof *t->t);
    /* three free tensors with convex curves of different steepness, one fixed */
    static const double errs[3][3] = {{100, 30, 10}, {10, 5, 4}, {50, 10, 2}};
    static const lmq_type types[3] = {LMQ_TYPE_Q2_K, LMQ_TYPE_Q4_K, LMQ_TYPE_Q6_K};
    for (int i = 0; i < 3; i++) {
        lmq_target_tensor *x = &t->t[i];
        x->name = strdup("t");
        x->free_ = true;
        x->scale = 1;
        x->n_cand = 3;
        x->n_elements = 1000;
        for (int k = 0; k < 3; k++) {
            x->cand[k].type = types[k];
            x->cand[k].bytes = 100 * (k + 1);
            x->cand[k].err = errs[i][k];
        }
    }
    t->t[3].name = strdup("norm");
    t->t[3].fixed_bytes = 50;
    t->t[3].n_elements = 100;
    t->n_elements = 3100;
    return t;
}

static void test_solver(void)
{
    lmq_target_table *t = toy_table();
    int64_t total = 0;
    T_CHECK(lmq_target_solve(t, 349, &total) == LMQ_ERR_INVALID_ARG, "budget below the smallest plan");
    /* every budget from the minimum to everything: never over, error falls */
    double prev = 1e30;
    for (int64_t b = 350; b <= 1000; b += 10) {
        T_CHECK(lmq_target_solve(t, b, &total) == LMQ_OK && total <= b, "budget %lld: total %lld", (long long)b,
                (long long)total);
        double e = lmq_target_predicted(t);
        T_CHECK(e <= prev, "more budget never predicts more error (%lld: %g > %g)", (long long)b, e, prev);
        prev = e;
    }
    /* 550 bytes: 200 bytes to spend, best is tensor 0 -> q4 (70) and tensor 2 -> q4 (40) = 50 left */
    lmq_target_solve(t, 550, &total);
    T_CHECK(t->t[0].choice == 1 && t->t[1].choice == 0 && t->t[2].choice == 1 && total == 550,
            "greedy choice %d %d %d", t->t[0].choice, t->t[1].choice, t->t[2].choice);
    /* cache round trip */
    const char *cp = t_tmp("t.cache");
    T_CHECK(lmq_target_save(t, cp) == LMQ_OK, "save cache");
    lmq_target_table *b = NULL;
    T_CHECK(lmq_target_load(cp, &b) == LMQ_OK && b->n == 4 && b->t[2].cand[2].err == 2 && b->t[3].fixed_bytes == 50,
            "load cache");
    lmq_target_table_free(b);
    T_CHECK(lmq_target_load(t_tmp("does-not-exist"), &b) != LMQ_OK, "missing cache");
    t_write_all(cp, "lmq-target 1 5 3\nx 1 2", 22);
    T_CHECK(lmq_target_load(cp, &b) == LMQ_ERR_FORMAT, "truncated cache");
    lmq_target_table_free(t);
}


/* lmq_quantize_model with an imatrix on a 3-D expert tensor: each expert's
 * rows are quantized with that expert's weights (and a dense tensor with
 * its single vector), byte for byte what lmq_quantize_rows gives. */
static void test_quantize_experts(void)
{
    enum { NE0 = 256, NE1 = 4, NEXP = 3 };
    static float w3[NEXP * NE1 * NE0], w2[8 * NE0];
    srand(11);
    for (int i = 0; i < NEXP * NE1 * NE0; i++) w3[i] = (float)rand() / RAND_MAX - 0.5f;
    for (int i = 0; i < 8 * NE0; i++) w2[i] = (float)rand() / RAND_MAX - 0.5f;
    const char *in = t_tmp("moe.lmq"), *out = t_tmp("moe-q.lmq");
    lmq_writer *w = NULL;
    T_CHECK(lmq_writer_open(in, NULL, &w) == LMQ_OK, "writer: %s", lmq_last_error());
    if (!w) return;
    lmq_meta_set_str(lmq_writer_meta(w), "general.architecture", "llama");
    lmq_meta_set_u32(lmq_writer_meta(w), "llama.block_count", 1);
    int64_t ne3[3] = {NE0, NE1, NEXP}, ne2[2] = {NE0, 8};
    lmq_writer_add_tensor(w, "blk.0.ffn_up_exps.weight", LMQ_TYPE_F32, 3, ne3, w3, sizeof w3);
    lmq_writer_add_tensor(w, "blk.0.attn_q.weight", LMQ_TYPE_F32, 2, ne2, w2, sizeof w2);
    T_CHECK(lmq_writer_finish(w) == LMQ_OK, "finish: %s", lmq_last_error());

    /* activations: expert e sees columns scaled by (e + 1) at a different place */
    lmq_imatrix *im = lmq_imatrix_new();
    float x[NE0];
    for (int e = 0; e < NEXP; e++) {
        for (int j = 0; j < NE0; j++) x[j] = (j / 32 == e) ? 10.0f : 0.1f * (float)(e + 1);
        lmq_imatrix_accumulate(im, "blk.0.ffn_up_exps.weight", e, x, 1, NE0);
    }
    for (int j = 0; j < NE0; j++) x[j] = j < 16 ? 5.0f : 0.2f;
    lmq_imatrix_accumulate(im, "blk.0.attn_q.weight", 0, x, 1, NE0);

    lmq_quantize_opts qo;
    memset(&qo, 0, sizeof qo);
    qo.mix = "q4_k_s";
    qo.pure = true;
    qo.output_type = LMQ_TYPE_COUNT;
    qo.token_embd_type = LMQ_TYPE_COUNT;
    qo.n_threads = 1;
    qo.imatrix = im;
    qo.imatrix_path = "test.imatrix";
    lmq_quantize_stats st;
    T_CHECK(lmq_quantize_model(in, out, &qo, &st) == LMQ_OK, "quantize: %s", lmq_last_error());
    T_CHECK(st.n_imatrix == 2, "both tensors used importance weights (%llu)", (unsigned long long)st.n_imatrix);
    lmq_file *f = NULL;
    T_CHECK(lmq_file_open(out, &f) == LMQ_OK, "open output");
    if (f) {
        const lmq_tensor_info *t3 = lmq_file_find_tensor(f, "blk.0.ffn_up_exps.weight");
        const int64_t rb = lmq_row_size(LMQ_TYPE_Q4_K, NE0);
        static uint8_t ref[NEXP * NE1 * 144], plain[NEXP * NE1 * 144];
        float wt[NE0];
        for (int e = 0; e < NEXP; e++) {
            lmq_imatrix_weights(im, "blk.0.ffn_up_exps.weight", e, wt, NE0);
            lmq_quantize_rows(LMQ_TYPE_Q4_K, w3 + e * NE1 * NE0, ref + e * NE1 * rb, NE1, NE0, wt, 1);
        }
        lmq_quantize_rows(LMQ_TYPE_Q4_K, w3, plain, NEXP * NE1, NE0, NULL, 1);
        T_CHECK(t3 && t3->type == LMQ_TYPE_Q4_K && !memcmp(t3->data, ref, sizeof ref), "expert rows use their own weights");
        T_CHECK(memcmp(ref, plain, sizeof ref) != 0, "the weights change the bytes");
        const lmq_meta *m = lmq_file_meta(f);
        const char *s;
        size_t len;
        T_CHECK(!lmq_meta_get_str(m, "quantize.imatrix.file", &s, &len) && len == 12, "provenance: imatrix file");
        lmq_file_close(f);
    }
    /* an imatrix whose entry does not fit the tensor is an error naming it */
    lmq_imatrix *bad = lmq_imatrix_new();
    float y[128] = {0};
    lmq_imatrix_accumulate(bad, "blk.0.attn_q.weight", 0, y, 1, 128);
    qo.imatrix = bad;
    T_CHECK(lmq_quantize_model(in, t_tmp("moe-bad.lmq"), &qo, NULL) == LMQ_ERR_INVALID_ARG &&
                strstr(lmq_last_error(), "blk.0.attn_q.weight"),
            "mismatched entry: %s", lmq_last_error());
    T_CHECK(!t_exists(t_tmp("moe-bad.lmq")), "nothing written");
    lmq_imatrix_free(bad);
    lmq_imatrix_free(im);
}

int main(void)
{
    test_roundtrip();
    test_merge();
    test_legacy();
    test_corrupt();
    test_solver();
    test_quantize_experts();
    return t_finish();
}

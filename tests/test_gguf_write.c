/* Unit tests of the GGUF writer (formats/gguf_write.c) and of GGUF export and
 * import (convert/export_gguf.c, convert/convert_gguf.c) on small synthetic
 * models: byte layout, read-back through the GGUF reader, determinism,
 * atomicity and error paths, metadata type coercion, the RoPE row
 * permutation, fp8 refusal, and GGUF -> .lmq -> GGUF round trips. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lmq_convert.h"
#include "lmq_format.h"
#include "lmq_quant.h"
#include "testutil.h"

/* ------------------------------------------------------------ helpers */

static uint32_t rng_state = 12345;
static uint8_t rnd8(void)
{
    rng_state = rng_state * 1103515245u + 12345u;
    return (uint8_t)(rng_state >> 16);
}

static void fill_random(void *p, size_t n)
{
    for (size_t i = 0; i < n; i++) ((uint8_t *)p)[i] = rnd8();
}

/* f32 data with small finite values (random bytes could be NaNs, which are
 * fine for copying but not for comparisons through float conversions). */
static void fill_f32(float *p, size_t n)
{
    for (size_t i = 0; i < n; i++) p[i] = (float)((int)rnd8() - 128) / 64.0f;
}

static uint64_t rd64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* No leftover PATH.tmp.* files next to `path`. */
static bool no_temp_files(const char *path)
{
    const char *slash = strrchr(path, '/');
    char dir[4096], prefix[4096];
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    snprintf(prefix, sizeof prefix, "%s.tmp.", slash + 1);
    DIR *d = opendir(dir);
    if (!d) return false;
    bool clean = true;
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, prefix, strlen(prefix))) clean = false;
    closedir(d);
    return clean;
}

/* ------------------------------------------------------------ GGUF writer */

typedef struct wt {
    const char *name;
    lmq_type type;
    uint32_t n_dims;
    int64_t ne[4];
    uint8_t *data;
    uint64_t nbytes;
} wt;

static void make_tensors(wt *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        t[i].nbytes = (uint64_t)lmq_tensor_nbytes(t[i].type, t[i].n_dims, t[i].ne);
        t[i].data = malloc(t[i].nbytes ? t[i].nbytes : 1);
        fill_random(t[i].data, t[i].nbytes);
    }
}

static void fill_meta(lmq_meta *m)
{
    lmq_meta_set_str(m, "general.architecture", "llama");
    lmq_meta_set_u32(m, "test.u32", 7);
    lmq_meta_set_f32(m, "test.f32", 0.25f);
    lmq_meta_set_bool(m, "test.bool", true);
    const char *strs[] = {"a", "bc", ""};
    lmq_meta_set_str_arr(m, "test.strs", strs, NULL, 3);
    int32_t ints[] = {-1, 2, 3};
    lmq_meta_set_arr(m, "test.ints", LMQ_V_I32, ints, 3);
}

/* Writes tensors with the data given in pieces of `chunk` bytes (0: whole). */
static lmq_status write_gguf(const char *path, const wt *t, size_t n, uint32_t align, uint64_t chunk)
{
    lmq_gguf_writer *w;
    lmq_gguf_writer_opts o = {align};
    lmq_status s = lmq_gguf_writer_open(path, &o, &w);
    if (s) return s;
    fill_meta(lmq_gguf_writer_meta(w));
    for (size_t i = 0; i < n; i++)
        if ((s = lmq_gguf_writer_declare(w, t[i].name, t[i].type, t[i].n_dims, t[i].ne))) goto fail;
    for (size_t i = 0; i < n; i++) {
        uint64_t step = chunk ? chunk : t[i].nbytes;
        for (uint64_t off = 0; off < t[i].nbytes; off += step) {
            uint64_t k = t[i].nbytes - off < step ? t[i].nbytes - off : step;
            if ((s = lmq_gguf_writer_write(w, t[i].data + off, k))) goto fail;
        }
    }
    return lmq_gguf_writer_finish(w);
fail:
    lmq_gguf_writer_abort(w);
    return s;
}

static void test_writer_roundtrip(void)
{
    wt t[] = {
        {"norm", LMQ_TYPE_F32, 1, {37, 1, 1, 1}, 0, 0},
        {"q8", LMQ_TYPE_Q8_0, 2, {64, 3, 1, 1}, 0, 0},
        {"h3", LMQ_TYPE_F16, 3, {5, 3, 2, 1}, 0, 0},
        {"k4", LMQ_TYPE_Q4_K, 2, {256, 2, 1, 1}, 0, 0},
        {"b", LMQ_TYPE_BF16, 1, {1, 1, 1, 1}, 0, 0},
    };
    size_t n = sizeof t / sizeof t[0];
    make_tensors(t, n);
    const char *p1 = t_tmp("w1.gguf"), *p2 = t_tmp("w2.gguf"), *p3 = t_tmp("w3.gguf"), *p4 = t_tmp("w4.gguf");
    T_CHECK(write_gguf(p1, t, n, 0, 0) == LMQ_OK, "write: %s", lmq_last_error());
    T_CHECK(write_gguf(p2, t, n, 0, 0) == LMQ_OK, "write again: %s", lmq_last_error());
    T_CHECK(write_gguf(p3, t, n, 0, 7) == LMQ_OK, "write in 7-byte pieces: %s", lmq_last_error());
    T_CHECK(t_files_equal(p1, p2), "same input gives the same bytes");
    T_CHECK(t_files_equal(p1, p3), "pieces give the same bytes as whole tensors");
    T_CHECK(no_temp_files(p1), "no temporary files left");

    /* read back through the GGUF reader */
    lmq_file *f;
    lmq_status s = lmq_file_open(p1, &f);
    T_CHECK(s == LMQ_OK, "reader accepts the file: %s", lmq_last_error());
    if (s == LMQ_OK) {
        T_CHECK(lmq_file_kind_of(f) == LMQ_FILE_GGUF && lmq_file_version(f) == 3, "GGUF v3");
        const lmq_meta *m = lmq_file_meta(f);
        T_CHECK(lmq_meta_count(m) == 6, "6 keys (no alignment key at 32): %zu", lmq_meta_count(m));
        const lmq_value *v = lmq_meta_find(m, "test.u32");
        T_CHECK(v && v->type == LMQ_V_U32 && v->u == 7, "u32 value");
        v = lmq_meta_find(m, "test.f32");
        T_CHECK(v && v->type == LMQ_V_F32 && v->f == 0.25, "f32 value");
        v = lmq_meta_find(m, "test.strs");
        T_CHECK(v && v->type == LMQ_V_ARRAY && v->arr.elem == LMQ_V_STRING && v->arr.n == 3 &&
                    !strcmp(((lmq_str *)v->arr.data)[1].ptr, "bc"), "string array");
        T_CHECK(lmq_file_n_tensors(f) == n, "tensor count");
        for (size_t i = 0; i < n && i < lmq_file_n_tensors(f); i++) {
            const lmq_tensor_info *ti = lmq_file_tensor(f, i);
            T_CHECK(!strcmp(ti->name, t[i].name) && ti->type == t[i].type && ti->n_dims == t[i].n_dims, "tensor %zu header", i);
            T_CHECK(!memcmp(ti->ne, t[i].ne, sizeof ti->ne), "tensor %zu shape", i);
            T_CHECK(ti->nbytes == t[i].nbytes && !memcmp(ti->data, t[i].data, t[i].nbytes), "tensor %zu data", i);
            T_CHECK(ti->file_offset % 32 == 0, "tensor %zu aligned", i);
        }
        lmq_file_close(f);
    }

    /* byte layout: header fields, the tensor infos' relative offsets, and
     * zero padding after the last tensor up to the alignment */
    size_t len;
    uint8_t *b = (uint8_t *)t_read_all(p1, &len);
    if (b && len > 24) {
        T_CHECK(!memcmp(b, "GGUF", 4) && rd32(b + 4) == 3 && rd64(b + 8) == n && rd64(b + 16) == 6, "header fields");
        uint64_t data_end = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t padded = (t[i].nbytes + 31) / 32 * 32;
            data_end += padded;
        }
        T_CHECK(len % 32 == 0, "file size %zu is a multiple of the alignment", len);
        const lmq_tensor_info *last = NULL;
        if (lmq_file_open(p1, &f) == LMQ_OK) {
            last = lmq_file_tensor(f, n - 1);
            uint64_t data_start = lmq_file_tensor(f, 0)->file_offset;
            T_CHECK(data_start + data_end == len, "data section holds padded tensors: %llu + %llu vs %zu",
                    (unsigned long long)data_start, (unsigned long long)data_end, len);
            bool zeros = true;
            for (uint64_t k = last->file_offset + last->nbytes; k < len; k++) zeros &= b[k] == 0;
            T_CHECK(zeros, "padding is zeros");
            lmq_file_close(f);
        } else {
            T_CHECK(0, "open %s: %s", p1, lmq_last_error());
        }
    }
    free(b);

    /* alignment 64: general.alignment written as u32, offsets follow */
    T_CHECK(write_gguf(p4, t, n, 64, 0) == LMQ_OK, "write aligned 64: %s", lmq_last_error());
    if (lmq_file_open(p4, &f) == LMQ_OK) {
        const lmq_value *v = lmq_meta_find(lmq_file_meta(f), "general.alignment");
        T_CHECK(v && v->type == LMQ_V_U32 && v->u == 64, "general.alignment = 64 (u32)");
        for (size_t i = 0; i < lmq_file_n_tensors(f); i++)
            T_CHECK(lmq_file_tensor(f, i)->file_offset % 64 == 0, "64-aligned tensor %zu", i);
        T_CHECK(lmq_file_n_tensors(f) == n && !memcmp(lmq_file_tensor(f, 3)->data, t[3].data, t[3].nbytes), "data at 64");
        lmq_file_close(f);
    } else {
        T_CHECK(0, "open aligned-64 file: %s", lmq_last_error());
    }
    for (size_t i = 0; i < n; i++) free(t[i].data);
}

static void test_writer_errors(void)
{
    const char *p = t_tmp("err.gguf");
    unlink(p);
    int64_t ne[2] = {32, 2};
    lmq_gguf_writer *w;
    uint8_t buf[1024] = {0};

    /* fp8 has no GGUF type: refused, naming the tensor */
    T_CHECK(lmq_gguf_writer_open(p, NULL, &w) == LMQ_OK, "open");
    lmq_status s = lmq_gguf_writer_declare(w, "blk.0.fp8", LMQ_TYPE_F8_E4M3, 2, ne);
    T_CHECK(s == LMQ_ERR_UNSUPPORTED && strstr(lmq_last_error(), "blk.0.fp8"), "fp8 refused: %s", lmq_last_error());
    T_CHECK(lmq_gguf_writer_declare(w, "x", LMQ_TYPE_Q4_K, 2, ne) == LMQ_ERR_INVALID_ARG, "row not a multiple of 256");
    T_CHECK(lmq_gguf_writer_declare(w, "x", LMQ_TYPE_F32, 2, ne) == LMQ_OK, "declare x");
    T_CHECK(lmq_gguf_writer_declare(w, "x", LMQ_TYPE_F32, 2, ne) == LMQ_ERR_INVALID_ARG, "duplicate name");
    T_CHECK(lmq_gguf_writer_declare(w, "y", LMQ_TYPE_F32, 0, ne) == LMQ_ERR_INVALID_ARG, "0 dims");
    T_CHECK(lmq_gguf_writer_write(w, buf, 257) == LMQ_ERR_INVALID_ARG, "more bytes than the tensor holds");
    T_CHECK(lmq_gguf_writer_write(w, buf, 100) == LMQ_OK, "partial write");
    T_CHECK(lmq_gguf_writer_declare(w, "z", LMQ_TYPE_F32, 2, ne) == LMQ_ERR_INVALID_ARG, "declare after data");
    s = lmq_gguf_writer_finish(w); /* 156 bytes missing */
    T_CHECK(s == LMQ_ERR_INVALID_ARG && strstr(lmq_last_error(), "'x'"), "incomplete tensor refused: %s", lmq_last_error());
    T_CHECK(!t_exists(p) && no_temp_files(p), "failed finish leaves nothing behind");

    T_CHECK(lmq_gguf_writer_open(p, NULL, &w) == LMQ_OK, "open");
    T_CHECK(lmq_gguf_writer_declare(w, "x", LMQ_TYPE_F32, 2, ne) == LMQ_OK, "declare");
    T_CHECK(lmq_gguf_writer_write(w, buf, 256) == LMQ_OK, "write");
    T_CHECK(lmq_gguf_writer_write(w, buf, 1) == LMQ_ERR_INVALID_ARG, "write past the last tensor");
    T_CHECK(!no_temp_files(p), "the writer's temporary exists before abort (no_temp_files sees it)");
    lmq_gguf_writer_abort(w);
    T_CHECK(!t_exists(p) && no_temp_files(p), "abort leaves nothing behind");
    lmq_gguf_writer_abort(NULL);

    lmq_gguf_writer_opts bad = {48};
    T_CHECK(lmq_gguf_writer_open(p, &bad, &w) == LMQ_ERR_INVALID_ARG, "alignment 48 refused");
    T_CHECK(lmq_gguf_writer_open("/nonexistent-dir/x.gguf", NULL, &w) == LMQ_ERR_IO, "unwritable path");

    /* metadata only: a valid GGUF with no tensors */
    T_CHECK(lmq_gguf_writer_open(p, NULL, &w) == LMQ_OK, "open");
    lmq_meta_set_str(lmq_gguf_writer_meta(w), "general.architecture", "llama");
    T_CHECK(lmq_gguf_writer_finish(w) == LMQ_OK, "finish without tensors: %s", lmq_last_error());
    lmq_file *f;
    T_CHECK(lmq_file_open(p, &f) == LMQ_OK && lmq_file_n_tensors(f) == 0, "vocab-only style file reads back");
    lmq_file_close(f);
}

/* ------------------------------------------------------------ permutation, ftypes */

static void test_permutation(void)
{
    /* numpy: w.reshape(2, 2, 2).swapaxes(1, 2).reshape(8) on rows 0..7 */
    const int64_t want[8] = {0, 2, 1, 3, 4, 6, 5, 7};
    for (int64_t r = 0; r < 8; r++) T_CHECK(lmq_rope_permuted_row(r, 8, 2) == want[r], "row %lld", (long long)r);
    /* general case against the reshape/swapaxes index arithmetic, and a bijection */
    const int64_t H = 4, D = 12;
    int hit[48] = {0};
    for (int64_t h = 0; h < H; h++)
        for (int64_t j = 0; j < D / 2; j++)
            for (int64_t k = 0; k < 2; k++) {
                int64_t out = (h * (D / 2) + j) * 2 + k;   /* index in shape (H, D/2, 2) */
                int64_t in = (h * 2 + k) * (D / 2) + j;    /* index in shape (H, 2, D/2) */
                int64_t got = lmq_rope_permuted_row(out, H * D, H);
                T_CHECK(got == in, "row %lld -> %lld (want %lld)", (long long)out, (long long)got, (long long)in);
                if (got >= 0 && got < 48) hit[got]++;
            }
    bool bij = true;
    for (int i = 0; i < 48; i++) bij &= hit[i] == 1;
    T_CHECK(bij, "permutation is a bijection");
    T_CHECK(lmq_rope_permuted_row(0, 10, 4) == -1, "10 rows do not split into 4 heads of even size");
    T_CHECK(lmq_rope_permuted_row(8, 8, 2) == -1, "row out of range");
}

static void test_ftypes(void)
{
    struct { const char *n; int32_t ft; } k[] = {
        {"f32", 0}, {"F16", 1}, {"q4_0", 2}, {"q4_1", 3}, {"q8_0", 7}, {"q5_0", 8}, {"q5_1", 9}, {"q2_k", 10},
        {"q3_k_s", 11}, {"q3_k_m", 12}, {"q3_k_l", 13}, {"q4_k_s", 14}, {"Q4_K_M", 15}, {"q5_k_s", 16},
        {"q5_k_m", 17}, {"q6_k", 18}, {"iq4_nl", 25}, {"iq4_xs", 30}, {"bf16", 32}, {"f8_e4m3", -1}, {"nope", -1},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        T_CHECK(lmq_llama_ftype_from_name(k[i].n) == k[i].ft, "ftype of %s", k[i].n);
}

/* ------------------------------------------------------------ export / import */

/* A one-layer llama in HF ("neox") row order: n_embd 64, 4 heads of 16, 2 KV
 * heads, n_ff 32, vocab 8; metadata with the loose types an HF converter may
 * write (u64 counts, f64 eps), and lmq.* keys that must not be exported. */
#define N_EMBD 64
#define N_HEAD 4
#define N_KV 2
#define HD 16
static lmq_status make_container(const char *path, bool with_fp8, bool llama3, float *attn_q /* [N_EMBD*N_EMBD] */,
                                 uint8_t *attn_k /* q8_0 rows */)
{
    lmq_writer *w;
    lmq_status s = lmq_writer_open(path, NULL, &w);
    if (s) return s;
    lmq_meta *m = lmq_writer_meta(w);
    lmq_meta_set_str(m, "general.architecture", "llama");
    lmq_meta_set_u64(m, "llama.block_count", 1);
    lmq_meta_set_u64(m, "llama.context_length", 128);
    lmq_meta_set_u64(m, "llama.embedding_length", N_EMBD);
    lmq_meta_set_u64(m, "llama.feed_forward_length", 32);
    lmq_meta_set_u64(m, "llama.attention.head_count", N_HEAD);
    lmq_meta_set_i32(m, "llama.attention.head_count_kv", N_KV);
    lmq_meta_set_f64(m, "llama.attention.layer_norm_rms_epsilon", 1e-5);
    lmq_meta_set_f64(m, "llama.rope.freq_base", 10000.0);
    lmq_meta_set_str(m, "tokenizer.ggml.model", "llama");
    const char *toks[8] = {"<unk>", "<s>", "</s>", "a", "b", "c", "d", "e"};
    lmq_meta_set_str_arr(m, "tokenizer.ggml.tokens", toks, NULL, 8);
    double scores[8] = {0, 0, 0, -1, -2, -3, -4, -5};
    lmq_meta_set_arr(m, "tokenizer.ggml.scores", LMQ_V_F64, scores, 8);
    uint8_t types[8] = {2, 3, 3, 1, 1, 1, 1, 1};
    lmq_meta_set_arr(m, "tokenizer.ggml.token_type", LMQ_V_U8, types, 8);
    lmq_meta_set_u64(m, "tokenizer.ggml.bos_token_id", 1);
    lmq_meta_set_i32(m, "tokenizer.ggml.eos_token_id", 2);
    lmq_meta_set_u32(m, "tokenizer.ggml.add_bos_token", 1);
    lmq_meta_set_str(m, "lmq.rope.layout", "neox");
    lmq_meta_set_str(m, "lmq.convert.version", "test");
    if (llama3) {
        lmq_meta_set_f64(m, "llama.rope.freq_base", 500000.0);
        lmq_meta_set_str(m, "llama.rope.scaling.type", "llama3");
        lmq_meta_set_f64(m, "llama.rope.scaling.factor", 8.0);
        lmq_meta_set_f64(m, "llama.rope.scaling.low_freq_factor", 1.0);
        lmq_meta_set_f64(m, "llama.rope.scaling.high_freq_factor", 4.0);
        lmq_meta_set_u64(m, "llama.rope.scaling.original_context_length", 8192);
    }

    float emb[N_EMBD * 8], norm[N_EMBD], down[32 * N_EMBD], up[N_EMBD * 32], o[N_EMBD * N_EMBD], v[N_EMBD * 32];
    fill_f32(emb, N_EMBD * 8);
    fill_f32(norm, N_EMBD);
    fill_f32(down, 32 * N_EMBD);
    fill_f32(up, N_EMBD * 32);
    fill_f32(o, N_EMBD * N_EMBD);
    fill_f32(v, N_EMBD * 32);
    fill_f32(attn_q, N_EMBD * N_EMBD);
    size_t k_bytes = (size_t)lmq_row_size(LMQ_TYPE_Q8_0, N_EMBD) * N_KV * HD;
    fill_random(attn_k, k_bytes);
    uint8_t gate[33 * 2 * 32]; /* fp8: 64 elements per row = 2 blocks of 33 bytes, 32 rows */
    fill_random(gate, sizeof gate);
    for (size_t i = 0; i < sizeof gate; i += 33) gate[i] = 120; /* sane E8M0 scales */
#define ADD(name, type, nd, d0, d1, data, nb)                                                       \
    do {                                                                                           \
        int64_t ne_[2] = {d0, d1};                                                                 \
        if (!s) s = lmq_writer_add_tensor(w, name, type, nd, ne_, data, nb);                       \
    } while (0)
    ADD("token_embd.weight", LMQ_TYPE_F32, 2, N_EMBD, 8, emb, sizeof emb);
    ADD("blk.0.attn_norm.weight", LMQ_TYPE_F32, 1, N_EMBD, 1, norm, sizeof norm);
    ADD("blk.0.attn_q.weight", LMQ_TYPE_F32, 2, N_EMBD, N_EMBD, attn_q, sizeof(float) * N_EMBD * N_EMBD);
    ADD("blk.0.attn_k.weight", LMQ_TYPE_Q8_0, 2, N_EMBD, N_KV * HD, attn_k, k_bytes);
    ADD("blk.0.attn_v.weight", LMQ_TYPE_F32, 2, N_EMBD, N_KV * HD, v, sizeof v);
    ADD("blk.0.attn_output.weight", LMQ_TYPE_F32, 2, N_EMBD, N_EMBD, o, sizeof o);
    ADD("blk.0.ffn_norm.weight", LMQ_TYPE_F32, 1, N_EMBD, 1, norm, sizeof norm);
    if (with_fp8) ADD("blk.0.ffn_gate.weight", LMQ_TYPE_F8_E4M3, 2, N_EMBD, 32, gate, sizeof gate);
    else ADD("blk.0.ffn_gate.weight", LMQ_TYPE_F32, 2, N_EMBD, 32, up, sizeof up);
    ADD("blk.0.ffn_up.weight", LMQ_TYPE_F32, 2, N_EMBD, 32, up, sizeof up);
    ADD("blk.0.ffn_down.weight", LMQ_TYPE_F32, 2, 32, N_EMBD, down, sizeof down);
    ADD("output_norm.weight", LMQ_TYPE_F32, 1, N_EMBD, 1, norm, sizeof norm);
    ADD("output.weight", LMQ_TYPE_F32, 2, N_EMBD, 8, emb, sizeof emb);
#undef ADD
    if (s) {
        lmq_writer_abort(w);
        return s;
    }
    return lmq_writer_finish(w);
}

static void check_type(const lmq_meta *m, const char *key, lmq_vtype t)
{
    const lmq_value *v = lmq_meta_find(m, key);
    T_CHECK(v && v->type == t, "%s has type %s (got %s)", key, lmq_vtype_name(t), v ? lmq_vtype_name(v->type) : "none");
}

static void test_export(void)
{
    static float attn_q[N_EMBD * N_EMBD];
    static uint8_t attn_k[34 * 2 * N_KV * HD];
    const char *lmq = t_tmp("tiny.lmq"), *g1 = t_tmp("tiny.gguf"), *g2 = t_tmp("tiny2.gguf");
    const char *back = t_tmp("tiny-back.lmq"), *g3 = t_tmp("tiny3.gguf");
    T_CHECK(make_container(lmq, false, false, attn_q, attn_k) == LMQ_OK, "make container: %s", lmq_last_error());
    lmq_convert_stats st;
    lmq_status s = lmq_export_gguf(lmq, g1, NULL, &st);
    T_CHECK(s == LMQ_OK, "export: %s", lmq_last_error());
    T_CHECK(st.n_tensors == 12 && st.bytes_written > 0, "stats: %llu tensors", (unsigned long long)st.n_tensors);
    T_CHECK(lmq_export_gguf(lmq, g2, NULL, NULL) == LMQ_OK && t_files_equal(g1, g2), "export is deterministic");

    lmq_file *f;
    if (lmq_file_open(g1, &f) != LMQ_OK) {
        T_CHECK(0, "read export: %s", lmq_last_error());
        return;
    }
    const lmq_meta *m = lmq_file_meta(f);
    check_type(m, "llama.block_count", LMQ_V_U32);
    check_type(m, "llama.attention.head_count_kv", LMQ_V_U32);
    check_type(m, "llama.attention.layer_norm_rms_epsilon", LMQ_V_F32);
    check_type(m, "llama.rope.freq_base", LMQ_V_F32);
    check_type(m, "tokenizer.ggml.bos_token_id", LMQ_V_U32);
    check_type(m, "tokenizer.ggml.eos_token_id", LMQ_V_U32);
    check_type(m, "tokenizer.ggml.add_bos_token", LMQ_V_BOOL);
    check_type(m, "general.file_type", LMQ_V_U32);
    check_type(m, "general.quantization_version", LMQ_V_U32);
    check_type(m, "tokenizer.ggml.pre", LMQ_V_STRING);
    const lmq_value *v = lmq_meta_find(m, "tokenizer.ggml.scores");
    T_CHECK(v && v->type == LMQ_V_ARRAY && v->arr.elem == LMQ_V_F32 && v->arr.n == 8 && ((float *)v->arr.data)[4] == -2.0f,
            "scores as f32 array");
    v = lmq_meta_find(m, "tokenizer.ggml.token_type");
    T_CHECK(v && v->type == LMQ_V_ARRAY && v->arr.elem == LMQ_V_I32 && ((int32_t *)v->arr.data)[0] == 2, "token_type as i32");
    uint64_t u;
    T_CHECK(lmq_meta_get_u64(m, "llama.vocab_size", &u) == LMQ_OK && u == 8, "vocab_size derived");
    T_CHECK(lmq_meta_get_u64(m, "llama.rope.dimension_count", &u) == LMQ_OK && u == HD, "rope.dimension_count derived");
    T_CHECK(lmq_meta_get_u64(m, "general.file_type", &u) == LMQ_OK && u == 0, "file_type ALL_F32 (dominant f32)");
    const char *name;
    T_CHECK(lmq_meta_get_str(m, "general.name", &name, NULL) == LMQ_OK && !strcmp(name, "tiny"), "general.name from file");
    bool lmq_keys = false;
    for (size_t i = 0; i < lmq_meta_count(m); i++) lmq_keys |= !strncmp(lmq_meta_key(m, i), "lmq.", 4);
    T_CHECK(!lmq_keys, "lmq.* keys dropped");

    /* attn_q rows permuted by 4 heads, attn_k (q8_0 rows) by 2 */
    const lmq_tensor_info *q = lmq_file_find_tensor(f, "blk.0.attn_q.weight");
    const lmq_tensor_info *k = lmq_file_find_tensor(f, "blk.0.attn_k.weight");
    T_CHECK(q && k && k->type == LMQ_TYPE_Q8_0, "q/k present");
    if (q && k) {
        bool ok = true;
        for (int r = 0; r < N_EMBD; r++) {
            int hd = r / HD, w = r % HD; /* out row (h, j, k): in row (h, k, j) */
            int src = hd * HD + (w % 2) * (HD / 2) + w / 2;
            ok &= !memcmp((const float *)q->data + r * N_EMBD, attn_q + src * N_EMBD, N_EMBD * sizeof(float));
        }
        T_CHECK(ok, "attn_q rows permuted");
        size_t rb = (size_t)lmq_row_size(LMQ_TYPE_Q8_0, N_EMBD);
        ok = true;
        for (int r = 0; r < N_KV * HD; r++) {
            int hd = r / HD, w = r % HD;
            int src = hd * HD + (w % 2) * (HD / 2) + w / 2;
            ok &= !memcmp((const uint8_t *)k->data + r * rb, attn_k + src * rb, rb);
        }
        T_CHECK(ok, "attn_k q8_0 rows permuted whole");
    }
    lmq_file_close(f);

    /* GGUF -> .lmq: normal layout, provenance, same tensors; and back to
     * GGUF: the very same bytes as the first export */
    s = lmq_convert_gguf(g1, back, NULL, &st);
    T_CHECK(s == LMQ_OK, "import: %s", lmq_last_error());
    lmq_file *b = NULL, *g = NULL;
    if (s == LMQ_OK) {
        T_CHECK(lmq_file_open(back, &b) == LMQ_OK, "open %s: %s", back, lmq_last_error());
        T_CHECK(lmq_file_open(g1, &g) == LMQ_OK, "open %s: %s", g1, lmq_last_error());
    }
    if (b && g) {
        size_t nchk = 0;
        T_CHECK(lmq_file_verify(b, 1, NULL, &nchk) == LMQ_OK && nchk == lmq_file_n_tensors(b), "checksums verify");
        const char *layout;
        T_CHECK(lmq_meta_get_str(lmq_file_meta(b), "lmq.rope.layout", &layout, NULL) == LMQ_OK && !strcmp(layout, "normal"),
                "layout normal");
        lmq_vtype et;
        uint64_t nf;
        const void *hd;
        T_CHECK(lmq_meta_get_arr(lmq_file_meta(b), "lmq.source.xxh3", &et, &nf, &hd) == LMQ_OK && et == LMQ_V_U64 && nf == 1,
                "source hash");
        size_t glen;
        char *gbytes = t_read_all(g1, &glen);
        T_CHECK(gbytes && *(const uint64_t *)hd == lmq_hash64(gbytes, glen), "source hash is the file's XXH3");
        free(gbytes);
        T_CHECK(lmq_meta_find(lmq_file_meta(b), "lmq.convert.version") && lmq_meta_find(lmq_file_meta(b), "lmq.convert.time") &&
                    lmq_meta_find(lmq_file_meta(b), "lmq.source.files"), "provenance keys");
        T_CHECK(lmq_file_n_tensors(b) == lmq_file_n_tensors(g), "tensor count kept");
        for (size_t i = 0; i < lmq_file_n_tensors(b) && i < lmq_file_n_tensors(g); i++) {
            const lmq_tensor_info *x = lmq_file_tensor(b, i), *y = lmq_file_tensor(g, i);
            T_CHECK(!strcmp(x->name, y->name) && x->type == y->type && !memcmp(x->ne, y->ne, sizeof x->ne) &&
                        x->nbytes == y->nbytes && !memcmp(x->data, y->data, x->nbytes), "tensor %s copied", y->name);
        }
    }
    lmq_file_close(b);
    lmq_file_close(g);
    T_CHECK(lmq_export_gguf(back, g3, NULL, NULL) == LMQ_OK && t_files_equal(g1, g3),
            "GGUF -> lmq -> GGUF gives identical bytes: %s", lmq_last_error());
}

static void test_export_refusals(void)
{
    static float attn_q[N_EMBD * N_EMBD];
    static uint8_t attn_k[34 * 2 * N_KV * HD];
    const char *lmq = t_tmp("fp8.lmq"), *out = t_tmp("fp8.gguf");
    T_CHECK(make_container(lmq, true, false, attn_q, attn_k) == LMQ_OK, "fp8 container: %s", lmq_last_error());
    lmq_status s = lmq_export_gguf(lmq, out, NULL, NULL);
    T_CHECK(s == LMQ_ERR_UNSUPPORTED && strstr(lmq_last_error(), "blk.0.ffn_gate.weight") &&
                strstr(lmq_last_error(), "--widen-fp8"), "fp8 refused: %s", lmq_last_error());
    T_CHECK(!t_exists(out) && no_temp_files(out), "nothing written");
    lmq_export_opts o = {0};
    o.widen_fp8 = true;
    o.widen_type = LMQ_TYPE_BF16;
    for (int wi = 0; wi < 2; wi++) {
        o.widen_type = wi ? LMQ_TYPE_F16 : LMQ_TYPE_BF16;
        s = lmq_export_gguf(lmq, out, &o, NULL);
        T_CHECK(s == LMQ_OK, "widened export to %s: %s", lmq_type_name(o.widen_type), lmq_last_error());
        lmq_file *f = NULL, *src = NULL;
        if (s || lmq_file_open(out, &f) || lmq_file_open(lmq, &src)) {
            T_CHECK(0, "open widened export: %s", lmq_last_error());
            lmq_file_close(f);
            continue;
        }
        const lmq_tensor_info *t = lmq_file_find_tensor(f, "blk.0.ffn_gate.weight");
        const lmq_tensor_info *x = lmq_file_find_tensor(src, "blk.0.ffn_gate.weight");
        T_CHECK(t && t->type == o.widen_type && t->ne[0] == N_EMBD && t->ne[1] == 32, "gate widened to %s",
                lmq_type_name(o.widen_type));
        if (t && x && t->type == o.widen_type) {
            /* each row: the quantize module's dequantization, rounded to 16 bits */
            size_t rb = (size_t)lmq_row_size(x->type, N_EMBD);
            bool same = true;
            for (int r = 0; r < 32; r++) {
                float row[N_EMBD];
                T_CHECK(lmq_dequantize_row(x->type, (const uint8_t *)x->data + r * rb, row, N_EMBD) == LMQ_OK, "dequant");
                for (int i = 0; i < N_EMBD; i++) {
                    uint16_t want = wi ? lmq_fp32_to_fp16(row[i]) : lmq_fp32_to_bf16(row[i]);
                    same &= ((const uint16_t *)t->data)[r * N_EMBD + i] == want;
                }
            }
            T_CHECK(same, "widened values are the dequantized fp8 values");
            uint64_t ft = 99;
            lmq_meta_get_u64(lmq_file_meta(f), "general.file_type", &ft);
            T_CHECK(ft == 0, "file_type still ALL_F32 (most matrices are f32): %llu", (unsigned long long)ft);
        }
        lmq_file_close(f);
        lmq_file_close(src);
    }
    unlink(out);
    o.widen_type = LMQ_TYPE_Q8_0;
    T_CHECK(lmq_export_gguf(lmq, out, &o, NULL) == LMQ_ERR_INVALID_ARG, "widen to q8_0 refused");

    /* a corrupted tensor is caught by its checksum and named */
    const char *good = t_tmp("tiny.lmq"), *bad = t_tmp("corrupt.lmq");
    size_t len;
    char *bytes = t_read_all(good, &len);
    lmq_file *f = NULL;
    T_CHECK(bytes && lmq_file_open(good, &f) == LMQ_OK, "read and open %s: %s", good, lmq_last_error());
    if (bytes && f) {
        const lmq_tensor_info *t = lmq_file_find_tensor(f, "blk.0.ffn_up.weight");
        bytes[t->file_offset + 5] ^= 0x40;
        lmq_file_close(f);
        t_write_all(bad, bytes, len);
        s = lmq_export_gguf(bad, out, NULL, NULL);
        T_CHECK(s == LMQ_ERR_CHECKSUM && strstr(lmq_last_error(), "blk.0.ffn_up.weight"), "corrupt tensor: %s",
                lmq_last_error());
        T_CHECK(!t_exists(out) && no_temp_files(out), "nothing written");
    }
    free(bytes);

    /* import: truncated and foreign files fail naming the file */
    const char *g = t_tmp("tiny.gguf"), *trunc = t_tmp("trunc.gguf"), *o2 = t_tmp("trunc.lmq");
    bytes = t_read_all(g, &len);
    if (bytes) {
        size_t cuts[] = {3, 10, 30, len / 3, len - 40};
        for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
            t_write_all(trunc, bytes, cuts[i]);
            s = lmq_convert_gguf(trunc, o2, NULL, NULL);
            T_CHECK(s != LMQ_OK && strstr(lmq_last_error(), trunc), "truncated at %zu: %s", cuts[i], lmq_last_error());
            T_CHECK(!t_exists(o2) && no_temp_files(o2), "nothing written for truncated input");
        }
        free(bytes);
    }
    s = lmq_convert_gguf(t_tmp("tiny.lmq"), o2, NULL, NULL);
    T_CHECK(s == LMQ_ERR_FORMAT && strstr(lmq_last_error(), "not a GGUF"), "an .lmq is not a GGUF: %s", lmq_last_error());
    /* another architecture */
    lmq_gguf_writer *w;
    const char *gpt = t_tmp("gpt2.gguf");
    if (lmq_gguf_writer_open(gpt, NULL, &w) == LMQ_OK) {
        lmq_meta_set_str(lmq_gguf_writer_meta(w), "general.architecture", "gpt2");
        int64_t ne[1] = {4};
        float x[4] = {0};
        lmq_gguf_writer_declare(w, "t", LMQ_TYPE_F32, 1, ne);
        lmq_gguf_writer_write(w, x, sizeof x);
        lmq_gguf_writer_finish(w);
    } else {
        T_CHECK(0, "open %s: %s", gpt, lmq_last_error());
    }
    s = lmq_convert_gguf(gpt, o2, NULL, NULL);
    T_CHECK(s == LMQ_ERR_UNSUPPORTED && strstr(lmq_last_error(), "gpt2") && strstr(lmq_last_error(), gpt),
            "architecture named: %s", lmq_last_error());
    T_CHECK(lmq_path_is_gguf(g) && !lmq_path_is_gguf(good) && !lmq_path_is_gguf(t_tmpdir()) &&
                !lmq_path_is_gguf(t_tmp("missing")), "GGUF magic detection");
}

/* Llama 3 scaling: no llama.rope.scaling.* keys, a rope_freqs.weight tensor
 * of n_rot/2 factors as convert_hf_to_gguf.py computes them (here in double
 * precision, independently). */
static void test_llama3_rope(void)
{
    static float attn_q[N_EMBD * N_EMBD];
    static uint8_t attn_k[34 * 2 * N_KV * HD];
    const char *lmq = t_tmp("l3.lmq"), *out = t_tmp("l3.gguf");
    T_CHECK(make_container(lmq, false, true, attn_q, attn_k) == LMQ_OK, "llama3 container: %s", lmq_last_error());
    T_CHECK(lmq_export_gguf(lmq, out, NULL, NULL) == LMQ_OK, "llama3 export: %s", lmq_last_error());
    lmq_file *f;
    if (lmq_file_open(out, &f) != LMQ_OK) {
        T_CHECK(0, "open: %s", lmq_last_error());
        return;
    }
    bool scaling_keys = false;
    for (size_t i = 0; i < lmq_meta_count(lmq_file_meta(f)); i++)
        scaling_keys |= !strncmp(lmq_meta_key(lmq_file_meta(f), i), "llama.rope.scaling.", 19);
    T_CHECK(!scaling_keys, "no llama.rope.scaling.* keys");
    const lmq_tensor_info *t = lmq_file_find_tensor(f, "rope_freqs.weight");
    T_CHECK(t && t->type == LMQ_TYPE_F32 && t->n_dims == 1 && t->ne[0] == HD / 2, "rope_freqs.weight [%d]", HD / 2);
    T_CHECK(lmq_file_n_tensors(f) == 13, "12 tensors + rope_freqs");
    if (t) {
        const float *got = t->data;
        int n_one = 0, n_full = 0, n_mid = 0;
        for (int i = 0; i < HD / 2; i++) {
            double freq = pow(500000.0, -(double)(2 * i) / HD), wl = 2 * M_PI / freq, want;
            if (wl < 8192.0 / 4) want = 1, n_one++;
            else if (wl > 8192.0 / 1) want = 8, n_full++;
            else {
                double sm = (8192.0 / wl - 1) / (4 - 1);
                want = 1 / ((1 - sm) / 8 + sm);
                n_mid++;
            }
            T_NEAR(got[i], want, 1e-5 * want, "rope factor");
        }
        T_CHECK(n_one && n_full && n_mid, "all three regimes covered (%d %d %d)", n_one, n_mid, n_full);
    }
    lmq_file_close(f);
}

int main(void)
{
    test_writer_roundtrip();
    test_writer_errors();
    test_permutation();
    test_ftypes();
    test_export();
    test_export_refusals();
    test_llama3_rope();
    return t_finish();
}

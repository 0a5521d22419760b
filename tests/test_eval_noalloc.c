/* The contract of lmq_rt_model.h: nothing in the token loop allocates, every
 * buffer is sized in lmq_context_new(). This test replaces malloc and its
 * relatives for the whole process (the definitions below interpose on
 * glibc's, for lmq and the libraries it calls alike, no LD_PRELOAD) and
 * counts the calls made while lmq_eval runs: batched and single-token
 * evaluations of llama-8m as f32 (the BLAS path for large batches), q8_0
 * and q4_K_m (repacked weights where the ISA has them, the 16-row panels
 * without repacking), under each matmul path (auto, vecdot, panel, blas)
 * and every supported ISA. Also: a model repacked under one ISA evaluates
 * after lmq_isa_force to another; contexts with their own ISA and GEMM
 * mode (lmq_context_params.isa/.gemm) and a model repacked for a chosen
 * ISA (lmq_model_params.isa) side by side, in turns and on two threads at
 * once, each giving the bits of the process-wide setting it names. The
 * zoo's gpt-oss (MoE, MXFP4 experts, repacked expert by expert where the
 * ISA has the kernel) the same way: no allocation, and the ISA switch.
 * Skips (77) without ../shared. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_convert.h"
#include "lmq_runtime.h"
#include "testutil.h"

/* glibc's own entry points, which its malloc/free aliases also reach */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static atomic_int g_counting, g_allocs;

static void count(void)
{
    if (atomic_load_explicit(&g_counting, memory_order_relaxed)) atomic_fetch_add(&g_allocs, 1);
}

void *malloc(size_t n)
{
    count();
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b)
{
    count();
    return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n)
{
    count();
    return __libc_realloc(p, n);
}
void *aligned_alloc(size_t al, size_t n)
{
    count();
    return __libc_memalign(al, n);
}
void *memalign(size_t al, size_t n)
{
    count();
    return __libc_memalign(al, n);
}
int posix_memalign(void **out, size_t al, size_t n)
{
    count();
    void *p = __libc_memalign(al, n);
    if (!p) return 12; /* ENOMEM */
    *out = p;
    return 0;
}
void free(void *p) { __libc_free(p); }

/* Evaluations that take every path: a full batch, an odd batch, single
 * tokens, a rewind and a batch again. Returns the allocations counted. */
static int evals(lmq_context *c, const int32_t *toks, int n_batch)
{
    atomic_store(&g_allocs, 0);
    atomic_store(&g_counting, 1);
    lmq_status s = lmq_eval(c, toks, n_batch, 1);
    if (!s) s = lmq_eval(c, toks + n_batch, 7, 7);
    for (int i = 0; i < 5 && !s; i++) s = lmq_eval(c, toks + n_batch + 7 + i, 1, 1);
    if (!s) s = lmq_kv_truncate(c, 3);
    if (!s) s = lmq_eval(c, toks, 19, 1);
    if (!s) s = lmq_eval(c, toks + 19, 1, 1);
    atomic_store(&g_counting, 0);
    T_CHECK(s == LMQ_OK, "eval: %s", lmq_last_error());
    return atomic_load(&g_allocs);
}

static void check_model(const char *path, int repack, const char *label)
{
    lmq_model *m = NULL;
    lmq_model_params mp = lmq_model_default_params();
    mp.repack = repack;
    if (lmq_model_load_params(path, &mp, &m) != LMQ_OK) {
        T_CHECK(0, "%s: load: %s", label, lmq_last_error());
        return;
    }
    int32_t toks[128];
    for (int i = 0; i < 128; i++) toks[i] = 1 + (i * 37) % (lmq_model_hparams(m)->n_vocab - 1);
    static const lmq_gemm_mode modes[] = {LMQ_GEMM_AUTO, LMQ_GEMM_VECDOT, LMQ_GEMM_PANEL, LMQ_GEMM_BLAS};
    static const char *mode_names[] = {"auto", "vecdot", "panel", "blas"};
    for (int mi = 0; mi < 4; mi++) {
        lmq_gemm_mode old = lmq_gemm_mode_set(modes[mi]);
        for (int threads = 1; threads <= 3; threads += 2) {
            lmq_context_params cp = lmq_context_default_params();
            cp.n_ctx = 256;
            cp.n_batch = 64;
            cp.n_threads = threads;
            lmq_context *c = NULL;
            if (lmq_context_new(m, &cp, &c) != LMQ_OK) {
                T_CHECK(0, "%s: context: %s", label, lmq_last_error());
                continue;
            }
            int n = evals(c, toks, 64);
            T_CHECK(n == 0, "%s, %s path, %d threads, %s: %d allocations in lmq_eval after lmq_context_new", label,
                    mode_names[mi], threads, lmq_isa_name(lmq_isa_active()), n);
            lmq_context_free(c);
        }
        lmq_gemm_mode_set(old);
    }
    lmq_model_free(m);
}

/* Logits of 20 tokens and 1 more (n_logits 1). */
static lmq_status logits_of(lmq_model *m, float *out, int n_vocab)
{
    lmq_context_params cp = lmq_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 2;
    lmq_context *c = NULL;
    int32_t toks[21];
    for (int i = 0; i < 21; i++) toks[i] = 1 + i * 53 % (n_vocab - 1);
    lmq_status s = lmq_context_new(m, &cp, &c);
    if (!s) s = lmq_eval(c, toks, 20, 1);
    if (!s) s = lmq_eval(c, toks + 20, 1, 1);
    if (!s) memcpy(out, lmq_logits(c, 0), (size_t)n_vocab * sizeof *out);
    lmq_context_free(c);
    return s;
}

/* A model repacked under the best ISA keeps working after lmq_isa_force to
 * another: the same bits as a model loaded without repacking under that ISA. */
static void check_isa_switch(const char *path, const lmq_isa *isas, int n_isa)
{
    lmq_isa best = isas[n_isa - 1];
    T_CHECK(lmq_isa_force(best) == LMQ_OK, "force %s", lmq_isa_name(best));
    lmq_model_params mp = lmq_model_default_params();
    mp.repack = 1;
    lmq_model *packed = NULL, *plain = NULL;
    T_CHECK(lmq_model_load_params(path, &mp, &packed) == LMQ_OK, "load repacked: %s", lmq_last_error());
    if (!packed) return;
    if (lmq_model_repack_isa(packed) == LMQ_ISA_COUNT) {
        printf("note: %s repacks nothing: the ISA switch is checked on the mapped rows only\n", lmq_isa_name(best));
    } else {
        T_CHECK(lmq_model_repack_isa(packed) == best, "the model remembers the ISA it was repacked for (%s)",
                lmq_isa_name(lmq_model_repack_isa(packed)));
    }
    mp.repack = 0;
    int nv = lmq_model_hparams(packed)->n_vocab;
    float *a = malloc((size_t)nv * sizeof *a), *b = malloc((size_t)nv * sizeof *b);
    for (int k = 0; k < n_isa; k++) {
        T_CHECK(lmq_isa_force(isas[k]) == LMQ_OK, "force %s", lmq_isa_name(isas[k]));
        lmq_status s = logits_of(packed, a, nv);
        T_CHECK(s == LMQ_OK, "repacked under %s, evaluated under %s: %s", lmq_isa_name(best), lmq_isa_name(isas[k]),
                s ? lmq_last_error() : "ok");
        if (isas[k] == best) continue;
        T_CHECK(lmq_model_load_params(path, &mp, &plain) == LMQ_OK, "load plain: %s", lmq_last_error());
        if (!s && plain && logits_of(plain, b, nv) == LMQ_OK)
            T_CHECK(!memcmp(a, b, (size_t)nv * sizeof *a), "under %s the repacked model gives the plain model's bits",
                    lmq_isa_name(isas[k]));
        lmq_model_free(plain);
        plain = NULL;
    }
    free(a);
    free(b);
    lmq_model_free(packed);
}

/* Every repacked weight put back to its file rows (lmq_model_swap_weight
 * with no data drops the repacked copy, which lives in the model's arena):
 * the model then gives the bits of a model loaded without repacking, and
 * freeing it frees nothing of the arena twice (ASan run). */
static void check_swap_back(const char *path)
{
    lmq_model_params mp = lmq_model_default_params();
    mp.repack = 1;
    lmq_model *packed = NULL, *plain = NULL;
    T_CHECK(lmq_model_load_params(path, &mp, &packed) == LMQ_OK, "load repacked: %s", lmq_last_error());
    mp.repack = 0;
    T_CHECK(lmq_model_load_params(path, &mp, &plain) == LMQ_OK, "load plain: %s", lmq_last_error());
    if (!packed || !plain) {
        lmq_model_free(packed);
        lmq_model_free(plain);
        return;
    }
    const int nv = lmq_model_hparams(packed)->n_vocab;
    float *a = malloc((size_t)nv * sizeof *a), *b = malloc((size_t)nv * sizeof *b);
    T_CHECK(logits_of(plain, b, nv) == LMQ_OK, "plain logits: %s", lmq_last_error());
    const bool any = lmq_model_repack_isa(packed) != LMQ_ISA_COUNT;
    T_CHECK(logits_of(packed, a, nv) == LMQ_OK, "repacked logits: %s", lmq_last_error());
    if (any) T_CHECK(memcmp(a, b, (size_t)nv * sizeof *a) != 0, "repacked kernels round otherwise than the mapped rows'");
    const lmq_file *f = lmq_model_file(packed);
    int swapped = 0;
    for (size_t i = 0; i < lmq_file_n_tensors(f); i++) {
        const lmq_tensor_info *t = lmq_file_tensor(f, i);
        if (t->n_dims != 2 || !strstr(t->name, ".weight")) continue;
        if (lmq_model_swap_weight(packed, t->name, t->type, NULL) == LMQ_OK) swapped++;
        else lmq_error_clear();
    }
    T_CHECK(swapped > 0, "weights put back: %d", swapped);
    T_CHECK(logits_of(packed, a, nv) == LMQ_OK, "logits after the swaps: %s", lmq_last_error());
    T_CHECK(!memcmp(a, b, (size_t)nv * sizeof *a), "every weight back on its file rows: the plain model's bits");
    free(a);
    free(b);
    lmq_model_free(packed);
    lmq_model_free(plain);
}

/* ---------------------------------------------------------------- settings per context */

#define N_SET 21 /* tokens of one run: 20 in a batch, then 1 */

typedef struct run {
    lmq_context *c;
    const int32_t *toks;
    float *out; /* (n_vocab) */
    int n_vocab, repeat;
    lmq_status s;
} run;

/* The tokens of logits_of, from an empty cache, `repeat` times. */
static void *run_ctx(void *arg)
{
    run *r = arg;
    for (int i = 0; i < r->repeat && !r->s; i++) {
        r->s = lmq_kv_truncate(r->c, 0);
        if (!r->s) r->s = lmq_eval(r->c, r->toks, 20, 1);
        if (!r->s) r->s = lmq_eval(r->c, r->toks + 20, 1, 1);
        if (!r->s) memcpy(r->out, lmq_logits(r->c, 0), (size_t)r->n_vocab * sizeof *r->out);
    }
    return NULL;
}

static lmq_context *ctx_with(lmq_model *m, int isa, int gemm)
{
    lmq_context_params cp = lmq_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 2;
    cp.isa = isa;
    cp.gemm = gemm;
    lmq_context *c = NULL;
    T_CHECK(lmq_context_new(m, &cp, &c) == LMQ_OK, "context (isa %d, gemm %d): %s", isa, gemm, lmq_last_error());
    return c;
}

static void check_settings_per_context(const char *path, const lmq_isa *isas, int n_isa)
{
    static const lmq_gemm_mode modes[] = {LMQ_GEMM_AUTO, LMQ_GEMM_VECDOT, LMQ_GEMM_PANEL};
    enum { N_MODES = 3 };
    const lmq_isa best = isas[n_isa - 1];
    T_CHECK(lmq_isa_force(best) == LMQ_OK, "force %s", lmq_isa_name(best));
    lmq_model_params mp = lmq_model_default_params();
    mp.repack = 1;
    lmq_model *m = NULL;
    T_CHECK(lmq_model_load_params(path, &mp, &m) == LMQ_OK, "load: %s", lmq_last_error());
    if (!m) return;
    const int nv = lmq_model_hparams(m)->n_vocab;
    int32_t toks[N_SET];
    for (int i = 0; i < N_SET; i++) toks[i] = 1 + i * 53 % (nv - 1);
    /* the references: each ISA and mode set process-wide, a default context */
    float *ref = malloc((size_t)n_isa * N_MODES * (size_t)nv * sizeof *ref);
    float *got = malloc((size_t)n_isa * N_MODES * (size_t)nv * sizeof *got);
    for (int k = 0; k < n_isa; k++)
        for (int mi = 0; mi < N_MODES; mi++) {
            lmq_isa_force(isas[k]);
            lmq_gemm_mode old = lmq_gemm_mode_set(modes[mi]);
            T_CHECK(logits_of(m, ref + ((size_t)k * N_MODES + mi) * (size_t)nv, nv) == LMQ_OK, "reference: %s",
                    lmq_last_error());
            lmq_gemm_mode_set(old);
        }
    /* the process-wide setting now names none of them: scalar, vecdot */
    lmq_isa_force(LMQ_ISA_SCALAR);
    lmq_gemm_mode old = lmq_gemm_mode_set(LMQ_GEMM_VECDOT);
    lmq_context *cs[LMQ_ISA_COUNT * N_MODES] = {0};
    for (int k = 0; k < n_isa; k++)
        for (int mi = 0; mi < N_MODES; mi++) cs[k * N_MODES + mi] = ctx_with(m, isas[k], modes[mi]);
    /* in turns: every context evaluates its batch, then its last token */
    int n_ctx = n_isa * N_MODES;
    atomic_store(&g_allocs, 0);
    atomic_store(&g_counting, 1);
    lmq_status s = LMQ_OK;
    for (int i = 0; i < n_ctx && !s; i++) s = cs[i] ? lmq_eval(cs[i], toks, 20, 1) : LMQ_ERR_INVALID_ARG;
    for (int i = 0; i < n_ctx && !s; i++) {
        s = lmq_eval(cs[i], toks + 20, 1, 1);
        if (!s) memcpy(got + (size_t)i * nv, lmq_logits(cs[i], 0), (size_t)nv * sizeof *got);
    }
    atomic_store(&g_counting, 0);
    T_CHECK(s == LMQ_OK, "evaluations in turns: %s", lmq_last_error());
    T_CHECK(atomic_load(&g_allocs) == 0, "no allocation in lmq_eval with per-context settings (%d)",
            atomic_load(&g_allocs));
    for (int i = 0; i < n_ctx && !s; i++)
        T_CHECK(!memcmp(got + (size_t)i * nv, ref + (size_t)i * nv, (size_t)nv * sizeof *got),
                "context with isa %s, gemm %d: the bits of that setting process-wide", lmq_isa_name(isas[i / N_MODES]),
                (int)modes[i % N_MODES]);
    /* at once: the best ISA (repacked rows) and scalar vec_dot on two threads */
    run a = {cs[(n_isa - 1) * N_MODES + 0], toks, got, nv, 4, LMQ_OK};
    run b = {cs[0 * N_MODES + 1], toks, got + nv, nv, 4, LMQ_OK};
    pthread_t ta, tb;
    T_CHECK(pthread_create(&ta, NULL, run_ctx, &a) == 0 && pthread_create(&tb, NULL, run_ctx, &b) == 0, "threads");
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    T_CHECK(a.s == LMQ_OK && b.s == LMQ_OK, "concurrent evaluations: %s", lmq_last_error());
    T_CHECK(!memcmp(got, ref + (size_t)(n_isa - 1) * N_MODES * nv, (size_t)nv * sizeof *got) &&
                !memcmp(got + nv, ref + (size_t)1 * nv, (size_t)nv * sizeof *got),
            "two contexts with different settings at once: each gives its setting's bits");
    for (int i = 0; i < n_ctx; i++) lmq_context_free(cs[i]);

    /* a model repacked for another ISA than the process-wide one */
    for (int k = 0; k < n_isa; k++) {
        lmq_isa_force(isas[k]);
        lmq_model *pk = NULL;
        T_CHECK(lmq_model_load_params(path, &mp, &pk) == LMQ_OK, "load under %s", lmq_isa_name(isas[k]));
        lmq_gemm_mode_set(LMQ_GEMM_AUTO);
        T_CHECK(pk && logits_of(pk, ref, nv) == LMQ_OK, "reference under %s", lmq_isa_name(isas[k]));
        lmq_isa rk = pk ? lmq_model_repack_isa(pk) : LMQ_ISA_COUNT;
        lmq_model_free(pk);
        lmq_isa_force(isas[(k + 1) % n_isa]);
        lmq_gemm_mode_set(LMQ_GEMM_VECDOT);
        mp.isa = isas[k];
        T_CHECK(lmq_model_load_params(path, &mp, &pk) == LMQ_OK, "load for %s", lmq_isa_name(isas[k]));
        mp.isa = -1;
        if (!pk) continue;
        T_CHECK(lmq_model_repack_isa(pk) == rk, "repacked for %s (%s), as when it is the process-wide ISA",
                lmq_isa_name(isas[k]), lmq_isa_name(lmq_model_repack_isa(pk)));
        lmq_context *c = ctx_with(pk, isas[k], LMQ_GEMM_AUTO);
        run r = {c, toks, got, nv, 1, c ? LMQ_OK : LMQ_ERR_INVALID_ARG};
        run_ctx(&r);
        T_CHECK(r.s == LMQ_OK && !memcmp(got, ref, (size_t)nv * sizeof *got),
                "model repacked for %s and a context of %s: the bits of %s process-wide", lmq_isa_name(isas[k]),
                lmq_isa_name(isas[k]), lmq_isa_name(isas[k]));
        lmq_context_free(c);
        lmq_model_free(pk);
    }

    /* settings out of range or unsupported */
    lmq_context_params cp = lmq_context_default_params();
    lmq_context *c = NULL;
    cp.isa = LMQ_ISA_COUNT;
    t_check_error("context isa out of range", lmq_context_new(m, &cp, &c), LMQ_ERR_INVALID_ARG, "isa", NULL);
    cp.isa = -1;
    cp.gemm = LMQ_GEMM_MODE_COUNT;
    t_check_error("context gemm out of range", lmq_context_new(m, &cp, &c), LMQ_ERR_INVALID_ARG, "gemm", NULL);
    for (int k = 0; k < LMQ_ISA_COUNT; k++) {
        if (lmq_isa_supported((lmq_isa)k)) continue;
        cp = lmq_context_default_params();
        cp.isa = k;
        t_check_error("context isa unsupported", lmq_context_new(m, &cp, &c), LMQ_ERR_UNSUPPORTED, "not supported",
                      NULL);
        mp.isa = k;
        lmq_model *bad = NULL;
        t_check_error("model isa unsupported", lmq_model_load_params(path, &mp, &bad), LMQ_ERR_UNSUPPORTED,
                      "not supported", NULL);
        mp.isa = -1;
        break;
    }
    lmq_gemm_mode_set(old);
    lmq_isa_force(best);
    free(ref);
    free(got);
    lmq_model_free(m);
}

int main(void)
{
    const char *dir = t_shared("models/llama-8m-debtext");
    t_require(dir);
    char f32[512], q8[512], q4k[512];
    snprintf(f32, sizeof f32, "%s", t_tmp("noalloc-f32.lmq"));
    snprintf(q8, sizeof q8, "%s", t_tmp("noalloc-q8_0.lmq"));
    snprintf(q4k, sizeof q4k, "%s", t_tmp("noalloc-q4_k_m.lmq"));
    lmq_convert_opts co;
    memset(&co, 0, sizeof co);
    co.out_type = LMQ_TYPE_F32;
    co.n_threads = 2;
    T_CHECK(lmq_convert_hf(dir, f32, &co, NULL) == LMQ_OK, "convert: %s", lmq_last_error());
    const char *mixes[] = {"q8_0", "q4_k_m"};
    const char *outs[] = {q8, q4k};
    for (int i = 0; i < 2; i++) {
        lmq_quantize_opts qo;
        memset(&qo, 0, sizeof qo);
        qo.mix = mixes[i];
        qo.output_type = LMQ_TYPE_COUNT;
        qo.token_embd_type = LMQ_TYPE_COUNT;
        qo.n_threads = 2;
        T_CHECK(lmq_quantize_model(f32, outs[i], &qo, NULL) == LMQ_OK, "quantize %s: %s", mixes[i], lmq_last_error());
    }
    lmq_isa isas[LMQ_ISA_COUNT];
    int n_isa = lmq_isa_list(isas, LMQ_ISA_COUNT);
    for (int k = 0; k < n_isa; k++) {
        T_CHECK(lmq_isa_force(isas[k]) == LMQ_OK, "force %s", lmq_isa_name(isas[k]));
        char label[64];
        for (int repack = 1; repack >= 0; repack--) {
            snprintf(label, sizeof label, "q4_k_m%s", repack ? "" : " (not repacked)");
            check_model(q4k, repack, label);
            snprintf(label, sizeof label, "q8_0%s", repack ? "" : " (not repacked)");
            check_model(q8, repack, label);
        }
        check_model(f32, -1, "f32");
    }
    check_isa_switch(q4k, isas, n_isa);
    check_swap_back(q4k);
    check_swap_back(q8);
    check_settings_per_context(q4k, isas, n_isa);
    /* MoE: the experts go through lmq_matmul_multi, repacked or not */
    const char *moe_dir = t_shared("models/zoo/gptoss");
    t_require(moe_dir);
    char moe[512];
    snprintf(moe, sizeof moe, "%s", t_tmp("noalloc-gptoss.lmq"));
    T_CHECK(lmq_convert_hf(moe_dir, moe, &co, NULL) == LMQ_OK, "convert gptoss: %s", lmq_last_error());
    for (int k = 0; k < n_isa; k++) {
        T_CHECK(lmq_isa_force(isas[k]) == LMQ_OK, "force %s", lmq_isa_name(isas[k]));
        check_model(moe, 1, "gptoss (MXFP4 experts)");
        check_model(moe, 0, "gptoss (MXFP4 experts, not repacked)");
    }
    check_isa_switch(moe, isas, n_isa);
    return t_finish();
}

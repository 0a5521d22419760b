/* Layer-by-layer GPTQ (lmq_calib.h, lmq_gptq_sequential).
 *
 * The calibration chunks' residual streams X (n_chunks x n_ctx x n_embd)
 * start as the embeddings. For block l: every chunk runs through block l
 * alone (lmq_eval_layers) with the activation observer collecting block l's
 * input covariances; block l's matrices are quantized with feedback from
 * them, spilled to a scratch file and swapped into the model; every chunk
 * runs through block l again, now quantized, and its output replaces X.
 * The float rows of block l are then released from the page cache. At the
 * end the streaming writer (lmq_quantize_model) writes the model, taking
 * the blocks' tensors from the scratch file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "calib_internal.h"
#include "lmq_calib.h"
#include "lmq_quant.h"

typedef struct spilled {
    char *name;
    lmq_type type;
    uint64_t off, bytes;
    bool gptq;
} spilled;

typedef struct seq {
    lmq_gptq_calib *g;
    const char *prefix;        /* "blk.L." of the block being collected; NULL: the output head */
    lmq_status st;             /* the runtime observer's first failure */
    char err[512];
    spilled *sp;
    size_t n_sp, cap_sp;
    FILE *fp;                  /* the scratch file while writing */
    const uint8_t *map;        /* ... and mapped for the writer */
    size_t map_len;
} seq;

static bool in_block(void *ctx, const char *tensor)
{
    const seq *q = ctx;
    if (!q->prefix) return strncmp(tensor, "blk.", 4) != 0; /* the head (or the tied embedding it reads) */
    return !strncmp(tensor, q->prefix, strlen(q->prefix));
}

static void observe(void *user, const char *tensor, int32_t expert, const float *x, int32_t n_tok, int64_t n_in)
{
    seq *q = user;
    if (q->st) return;
    lmq_status st = calib_observe(q->g, tensor, expert, x, n_tok, n_in);
    if (st) {
        q->st = st;
        snprintf(q->err, sizeof q->err, "%s", lmq_last_error());
    }
}

static const void *from_scratch(void *user, const char *tensor, lmq_type type, uint64_t bytes, bool *gptq)
{
    const seq *q = user;
    for (size_t i = 0; i < q->n_sp && q->map; i++)
        if (!strcmp(q->sp[i].name, tensor) && q->sp[i].type == type && q->sp[i].bytes == bytes) {
            *gptq = q->sp[i].gptq;
            return q->map + q->sp[i].off;
        }
    return NULL;
}

/* Drops the file pages of a tensor from this process (they are re-read if needed). */
static void release(const void *p, uint64_t n)
{
    const long ps = sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)p + (uintptr_t)ps - 1) & ~(uintptr_t)(ps - 1), b = ((uintptr_t)p + n) & ~(uintptr_t)(ps - 1);
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

uint64_t lmq_gptq_sequential_bytes(const lmq_hparams *hp, int32_t n_ctx, int32_t n_chunks, lmq_gptq_inputs inputs)
{
    const uint64_t d = (uint64_t)hp->n_embd, q = (uint64_t)hp->n_head * (uint64_t)hp->head_dim, ff = (uint64_t)hp->n_ff;
    const uint64_t hidden = (uint64_t)n_chunks * (uint64_t)n_ctx * d * 4 * (inputs == LMQ_GPTQ_INPUTS_BOTH ? 2 : 1);
    const uint64_t block = 4 * (2 * d * d + q * q + ff * ff); /* attention input, its output, FFN input, down */
    return hidden + block;
}

/* The quantization of a block's tensors, and beside it the factor of its
 * largest matrix (lmq_pool_for: share 0, the caller, quantizes the tensors
 * that do not read that matrix; share 1 factors it). */
typedef struct block_q {
    seq *q;
    const lmq_quantize_plan *plan;
    const lmq_quantize_opts *o;
    const lmq_file *f;
    const char *in_path, *prefix;
    int il;
    uint8_t **qbuf;
    size_t *qcap;
    uint64_t *spill_off;
    uint64_t used;
    size_t late;          /* the matrix factored beside (SIZE_MAX: none) */
    lmq_status late_st;
    char late_err[512];
} block_q;

static lmq_status quantize_some(block_q *b, int pass)
{
    seq *q = b->q;
    const lmq_quantize_plan *plan = b->plan;
    lmq_status st = LMQ_OK;
    for (size_t i = 0; i < plan->n && !st; i++) {
        const char *name = plan->tensors[i].name;
        if (b->late != SIZE_MAX && calib_uses_mat(q->g, name, b->late) != (pass == 1)) continue;
        const lmq_mix_entry *e = &plan->entries[i];
        const lmq_type_traits *tt = lmq_type_get(e->type);
        if (strncmp(name, b->prefix, strlen(b->prefix)) || !tt || !tt->quantized || e->type == plan->tensors[i].type) continue;
        const lmq_tensor_info *ti = lmq_file_find_tensor(b->f, name);
        if (!ti) continue;
        if (b->used + (uint64_t)e->bytes > *b->qcap) { /* one block's quantized bytes stay in memory */
            size_t cap = (size_t)(b->used + (uint64_t)e->bytes) * 2;
            uint8_t *nb = realloc(*b->qbuf, cap);
            if (!nb) {
                st = lmq_error(LMQ_ERR_NOMEM, "gptq: out of memory for block %d's quantized tensors", b->il);
                break;
            }
            /* the model may point at the old buffer: re-point after the loop (swaps come last) */
            *b->qbuf = nb;
            *b->qcap = cap;
        }
        bool fb = false;
        if ((st = lmq_quantize_tensor(b->in_path, ti, e->type, b->o, *b->qbuf + b->used, (size_t)e->bytes, &fb))) break;
        if (q->n_sp == q->cap_sp) {
            size_t cap = q->cap_sp ? 2 * q->cap_sp : 64;
            spilled *p = realloc(q->sp, cap * sizeof *p);
            if (!p) {
                st = lmq_error(LMQ_ERR_NOMEM, "out of memory");
                break;
            }
            q->sp = p;
            q->cap_sp = cap;
        }
        char *nm = strdup(name);
        if (!nm) {
            st = lmq_error(LMQ_ERR_NOMEM, "out of memory");
            break;
        }
        q->sp[q->n_sp++] = (spilled){nm, e->type, *b->spill_off + b->used, (uint64_t)e->bytes, fb};
        b->used += (uint64_t)e->bytes;
    }
    return st;
}

typedef struct pool_q {
    block_q *b;
    lmq_status st; /* share 0's */
} pool_q;

static void pool_share(void *ctx, int ith, int nth)
{
    pool_q *p = ctx;
    block_q *b = p->b;
    (void)nth;
    if (ith == 0) {
        p->st = quantize_some(b, 0);
    } else if (ith == 1) {
        float *h = b->q->g->mats[b->late].h;
        b->late_st = lmq_gptq_factor(h, b->q->g->mats[b->late].n, LMQ_CALIB_GPTQ_DAMP);
        if (b->late_st) {
            snprintf(b->late_err, sizeof b->late_err, "%s", lmq_last_error());
            lmq_error_clear();
        }
    }
}

/* Block il: collect, quantize (spill + swap), propagate. */
static lmq_status run_block(seq *q, lmq_model *m, lmq_context *c, const char *in_path, const lmq_quantize_plan *plan,
                            const lmq_quantize_opts *qo, int il, float *X, float *Xf, int32_t n_chunks, int32_t n_ctx, float *xb,
                            uint8_t **qbuf, size_t *qcap, uint64_t *spill_off)
{
    const int64_t d = lmq_model_hparams(m)->n_embd;
    char prefix[32];
    snprintf(prefix, sizeof prefix, "blk.%d.", il);
    q->prefix = prefix;
    calib_store_clear(q->g);
    lmq_status st = LMQ_OK;
    /* 1. collect over the chunks, the block in float */
    lmq_context_set_observer(c, observe, q);
    for (int32_t ch = 0; ch < n_chunks && !st; ch++) {
        /* the float stream: its pass through the float block is also its propagation */
        if (Xf) {
            lmq_kv_truncate(c, 0);
            q->g->round++;
            st = lmq_eval_layers(c, NULL, Xf + (size_t)ch * n_ctx * d, n_ctx, il, il + 1);
            if (!st && q->st) st = lmq_error(q->st, "%s", q->err);
        }
        if (X && !st) {
            memcpy(xb, X + (size_t)ch * n_ctx * d, (size_t)n_ctx * d * sizeof *xb);
            lmq_kv_truncate(c, 0);
            q->g->round++;
            st = lmq_eval_layers(c, NULL, xb, n_ctx, il, il + 1);
            if (!st && q->st) st = lmq_error(q->st, "%s", q->err);
        }
    }
    lmq_context_set_observer(c, NULL, NULL);
    if (st) return st;
    /* the block's matrices side by side, the largest beside the quantization */
    const size_t late = calib_factor_all(q->g, true);
    /* 2. quantize the block's tensors as planned, with feedback */
    lmq_quantize_opts o = *qo;
    o.gptq_factor = lmq_gptq_calib_factor;
    o.gptq_user = q->g;
    o.progress = NULL; /* the write reports its own progress */
    const lmq_file *f = lmq_model_file(m);
    size_t first_sp = q->n_sp;
    block_q b = {q, plan, &o, f, in_path, prefix, il, qbuf, qcap, spill_off, 0, late, LMQ_OK, ""};
    if (late != SIZE_MAX) {
        pool_q pq = {&b, LMQ_OK};
        if (lmq_pool_for(2, pool_share, &pq)) pool_share(&pq, 0, 1), pool_share(&pq, 1, 2);
        calib_factor_done(q->g, late, b.late_st, b.late_err);
        st = pq.st;
        if (!st) st = quantize_some(&b, 1);
    } else {
        st = quantize_some(&b, 0);
    }
    const uint64_t used = b.used;
    if (st) return st;
    if (used && fwrite(*qbuf, 1, (size_t)used, q->fp) != (size_t)used)
        return lmq_error(LMQ_ERR_IO, "gptq: cannot write the scratch file (%llu bytes)", (unsigned long long)used);
    *spill_off += used;
    /* 3. the block quantized: swap in (tensors the model cannot swap stay float) */
    for (size_t k = first_sp; k < q->n_sp && X; k++)
        if (lmq_model_swap_weight(m, q->sp[k].name, q->sp[k].type, *qbuf + (q->sp[k].off - (*spill_off - used))))
            lmq_error_clear();
    for (int32_t ch = 0; ch < n_chunks && !st && X; ch++) {
        lmq_kv_truncate(c, 0);
        st = lmq_eval_layers(c, NULL, X + (size_t)ch * n_ctx * d, n_ctx, il, il + 1);
    }
    for (size_t k = first_sp; k < q->n_sp; k++) {
        if (lmq_model_swap_weight(m, q->sp[k].name, LMQ_TYPE_COUNT, NULL)) lmq_error_clear();
        const lmq_tensor_info *ti = lmq_file_find_tensor(f, q->sp[k].name);
        if (ti) release(ti->data, ti->nbytes);
    }
    return st;
}

lmq_status lmq_gptq_sequential(const char *in_path, const char *out_path, const lmq_quantize_opts *qo,
                               const int32_t *toks, size_t n_toks, const lmq_calib_params *p,
                               lmq_quantize_stats *stats)
{
    if (!in_path || !out_path || !qo || !toks || !p)
        return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_gptq_sequential: bad arguments");
    const int32_t n_ctx = p->n_ctx > 0 ? p->n_ctx : 256;
    int32_t n_chunks = (int32_t)(n_toks / (size_t)n_ctx);
    if (p->n_chunks > 0 && p->n_chunks < n_chunks) n_chunks = p->n_chunks;
    if (n_chunks < 1)
        return lmq_error(LMQ_ERR_INVALID_ARG, "gptq: the calibration text has %zu tokens, less than one chunk of %d",
                         n_toks, n_ctx);
    seq q = {0};
    lmq_model *m = NULL;
    lmq_context *c = NULL;
    lmq_quantize_plan *plan = NULL;
    float *X = NULL, *Xf = NULL, *xb = NULL; /* the quantized and the float streams */
    uint8_t *qbuf = NULL;
    size_t qcap = 0;
    int32_t *chunk = NULL;
    char scratch[4200];
    snprintf(scratch, sizeof scratch, "%s.gptq.%ld.tmp", out_path, (long)getpid());
    lmq_status st = lmq_quantize_plan_model(in_path, qo, &plan);
    if (!st) st = lmq_model_load(in_path, &m);
    if (st) goto out;
    const lmq_hparams *hp = lmq_model_hparams(m);
    const uint64_t need = lmq_gptq_sequential_bytes(hp, n_ctx, n_chunks, p->gptq_inputs);
    if (p->max_bytes && need > p->max_bytes) {
        st = lmq_error(LMQ_ERR_LIMIT,
                       "gptq: %d chunks of %d tokens need %.2f GiB (hidden states %.2f GiB + one block's covariances), "
                       "the limit is %.2f GiB: lower --gptq-chunks",
                       n_chunks, n_ctx, (double)need / 1073741824.0,
                       (double)n_chunks * n_ctx * hp->n_embd * 4 * (p->gptq_inputs == LMQ_GPTQ_INPUTS_BOTH ? 2 : 1) /
                           1073741824.0,
                       (double)p->max_bytes / 1073741824.0);
        goto out;
    }
    if (!(q.g = calib_store_new(0))) {
        st = lmq_error(LMQ_ERR_NOMEM, "out of memory");
        goto out;
    }
    q.g->n_threads = p->n_threads;
    q.g->filter = in_block;
    q.g->filter_ctx = &q;
    const size_t d = (size_t)hp->n_embd;
    const lmq_gptq_inputs mode = p->gptq_inputs;
    if (mode != LMQ_GPTQ_INPUTS_FLOAT) X = malloc((size_t)n_chunks * n_ctx * d * sizeof *X);
    if (mode != LMQ_GPTQ_INPUTS_QUANTIZED) Xf = malloc((size_t)n_chunks * n_ctx * d * sizeof *Xf);
    xb = malloc((size_t)n_ctx * d * sizeof *xb);
    chunk = malloc((size_t)n_ctx * sizeof *chunk);
    if ((!X && mode != LMQ_GPTQ_INPUTS_FLOAT) || (!Xf && mode != LMQ_GPTQ_INPUTS_QUANTIZED) || !xb || !chunk) {
        st = lmq_error(LMQ_ERR_NOMEM, "gptq: out of memory for the hidden states (%.2f GiB)",
                       (double)n_chunks * n_ctx * d * 4 / 1073741824.0);
        goto out;
    }
    lmq_context_params cp = lmq_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_ctx;
    cp.n_logits = n_ctx; /* the output head's pass */
    cp.n_threads = p->n_threads;
    if ((st = lmq_context_new(m, &cp, &c))) goto out;
    /* the embeddings, with the perplexity method's BOS substitution */
    const lmq_vocab *v = lmq_model_vocab(m);
    const bool add_bos = v && lmq_vocab_add_bos(v);
    for (int32_t ch = 0; ch < n_chunks && !st; ch++) {
        memcpy(chunk, toks + (size_t)ch * n_ctx, (size_t)n_ctx * sizeof *chunk);
        if (add_bos) chunk[0] = lmq_vocab_bos(v);
        lmq_kv_truncate(c, 0);
        st = lmq_eval_layers(c, chunk, X ? X + (size_t)ch * n_ctx * d : Xf + (size_t)ch * n_ctx * d, n_ctx, 0, 0);
        if (X && Xf) memcpy(Xf + (size_t)ch * n_ctx * d, X + (size_t)ch * n_ctx * d, (size_t)n_ctx * d * sizeof *X);
    }
    if (st) goto out;
    if (!(q.fp = fopen(scratch, "wb"))) {
        st = lmq_error(LMQ_ERR_IO, "gptq: cannot create %s", scratch);
        goto out;
    }
    uint64_t off = 0;
    if (p->progress) p->progress(p->progress_ctx, "gptq", 0, hp->n_layer, NULL);
    for (int il = 0; il < hp->n_layer && !st; il++) {
        st = run_block(&q, m, c, in_path, plan, qo, il, X, Xf, n_chunks, n_ctx, xb, &qbuf, &qcap, &off);
        if (!st && p->progress) {
            char what[48];
            snprintf(what, sizeof what, "blk.%d (%zu covariances, %.0f MiB)", il, lmq_gptq_calib_count(q.g),
                     (double)lmq_gptq_calib_bytes(q.g) / 1048576.0);
            p->progress(p->progress_ctx, "gptq", il + 1, hp->n_layer, what);
        }
    }
    if (st) goto out;
    /* the output head's input: the final stream, normed */
    if (!st) {
        q.prefix = NULL;
        calib_store_clear(q.g);
        lmq_context_set_observer(c, observe, &q);
        for (int32_t ch = 0; ch < n_chunks && !st; ch++)
            for (int k = 0; k < 2 && !st; k++) {
                float *src = k ? X : Xf;
                if (!src) continue;
                memcpy(xb, src + (size_t)ch * n_ctx * d, (size_t)n_ctx * d * sizeof *xb);
                lmq_kv_truncate(c, 0);
                q.g->round++;
                st = lmq_eval_layers(c, NULL, xb, n_ctx, hp->n_layer, hp->n_layer);
                if (!st && q.st) st = lmq_error(q.st, "%s", q.err);
            }
        lmq_context_set_observer(c, NULL, NULL);
        if (st) goto out;
    }
    calib_store_trim(q.g);
    if (fclose(q.fp)) {
        q.fp = NULL;
        st = lmq_error(LMQ_ERR_IO, "gptq: cannot write %s", scratch);
        goto out;
    }
    q.fp = NULL;
    /* the model's memory is not needed for the write */
    lmq_context_free(c);
    c = NULL;
    lmq_model_free(m);
    m = NULL;
    free(X);
    X = NULL;
    free(Xf);
    Xf = NULL;
    free(qbuf);
    qbuf = NULL;
    if (off) {
        FILE *fr = fopen(scratch, "rb");
        void *mp = fr ? mmap(NULL, (size_t)off, PROT_READ, MAP_PRIVATE, fileno(fr), 0) : MAP_FAILED;
        if (fr) fclose(fr);
        if (mp == MAP_FAILED) {
            st = lmq_error(LMQ_ERR_IO, "gptq: cannot map %s", scratch);
            goto out;
        }
        q.map = mp;
        q.map_len = (size_t)off;
    }
    lmq_quantize_opts o = *qo;
    o.prequantized = from_scratch;
    o.prequantized_user = &q;
    o.gptq_factor = lmq_gptq_calib_factor; /* the head (its covariance is all q.g holds now) */
    o.gptq_user = q.g;
    st = lmq_quantize_model(in_path, out_path, &o, stats);
out:
    if (q.fp) fclose(q.fp);
    if (q.map) munmap((void *)q.map, q.map_len);
    unlink(scratch);
    for (size_t i = 0; i < q.n_sp; i++) free(q.sp[i].name);
    free(q.sp);
    lmq_gptq_calib_free(q.g);
    lmq_context_free(c);
    lmq_model_free(m);
    lmq_quantize_plan_free(plan);
    free(X);
    free(Xf);
    free(xb);
    free(qbuf);
    free(chunk);
    return st;
}

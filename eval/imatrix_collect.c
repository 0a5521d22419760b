/* lmq_imatrix_collect: the perplexity method with an activation observer
 * that accumulates squared inputs per weight column (llama-imatrix's
 * collect_imatrix: blk.* weights, optionally the output head). */
#include <stdio.h>
#include <string.h>

#include "lmq_eval.h"

typedef struct collect_ctx {
    lmq_imatrix *im;
    bool process_output;
} collect_ctx;

static lmq_status observe(void *user, const char *tensor, int32_t expert, const float *x, int32_t n_tok, int64_t n_in)
{
    collect_ctx *cc = user;
    if (!tensor) return LMQ_OK;
    bool take = !strncmp(tensor, "blk.", 4) ||
                (cc->process_output && (!strcmp(tensor, "output.weight") || !strcmp(tensor, "token_embd.weight")));
    if (!take) return LMQ_OK;
    lmq_status st = lmq_imatrix_accumulate(cc->im, tensor, expert < 0 ? 0 : expert, x, n_tok, n_in);
    return st ? lmq_error(st, "imatrix: %s", lmq_last_error()) : LMQ_OK;
}

lmq_status lmq_imatrix_collect(lmq_model *m, const int32_t *tokens, int64_t n_tokens, const lmq_imatrix_params *ip,
                               lmq_imatrix *im, lmq_ppl_result *r)
{
    if (!m || !tokens || !ip || !im) return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_imatrix_collect: bad arguments");
    collect_ctx cc = {im, ip->process_output};
    lmq_ppl_params p = lmq_ppl_default_params();
    if (ip->n_ctx > 0) p.n_ctx = ip->n_ctx;
    p.n_chunks = ip->n_chunks;
    p.n_threads = ip->n_threads;
    p.on_chunk = ip->on_chunk;
    p.cb_ctx = ip->cb_ctx;
    p.observer = observe;
    p.observer_user = &cc;
    lmq_ppl_result tmp, *res = r ? r : &tmp;
    lmq_status st = lmq_perplexity(m, tokens, n_tokens, &p, res);
    if (st) return st;
    lmq_imatrix_set_chunks(im, lmq_imatrix_chunk_count(im) + (uint32_t)res->n_chunks, (uint32_t)p.n_ctx);
    return LMQ_OK;
}

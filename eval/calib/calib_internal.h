/* Private to the calibration module: the covariance store shared by the
 * one-pass collection and the layer-by-layer pass. */
#ifndef LMQ_CALIB_INTERNAL_H
#define LMQ_CALIB_INTERNAL_H

#include "lmq_calib.h"

/* GPTQ's damping (1% of the mean diagonal). On llama-8m, 0.01-0.3 gave the
 * same KLD within noise on held-out calibration text (docs/QUANT.md). */
#define LMQ_CALIB_GPTQ_DAMP 0.01f

typedef struct hmat {
    int64_t n;
    float *h;            /* n x n: H (upper triangle), then its factor */
    char *group;         /* the input group's key, or the tensor's name */
    int32_t expert;      /* -1: a 2-D tensor */
    uint64_t last_hash;  /* the rows last accumulated (hash), and in which round */
    uint64_t last_round;
    bool factored, failed;
} hmat;

typedef struct hname {
    char *name;
    int32_t expert;      /* -1: a 2-D tensor */
    size_t mat;          /* index into mats */
    bool alias;          /* shares the matrix of its group's first member: no accumulation */
} hname;

struct lmq_gptq_calib {
    hmat *mats;
    size_t n_mats, cap_mats;
    hname *names;
    size_t n_names, cap_names;
    size_t hint;         /* the entry after the last one found: calls come in the same order every chunk */
    uint64_t bytes, max_bytes;
    uint64_t round;      /* bumped per chunk (and per batch of the layer pass) */
    int n_threads;       /* for the covariance sums (lmq_gptq_accumulate_mt) */
    bool (*filter)(void *ctx, const char *tensor); /* NULL: every tensor */
    void *filter_ctx;
    char *failures;      /* "name: reason\n" lines */
    size_t failures_len, failures_cap;
    float *spare[8];     /* cleared matrices kept for the next block (fresh pages cost faults) */
    int64_t spare_n[8];
};

lmq_gptq_calib *calib_store_new(uint64_t max_bytes);
void calib_store_clear(lmq_gptq_calib *g); /* drops every matrix and name, keeps failures */
/* Factors every matrix not yet factored, several at once on n_threads
 * threads (each factor on one thread: the bits do not depend on the
 * count; the largest first); a matrix that cannot be factored is marked
 * failed and noted, as lmq_gptq_calib_factor does. keep_largest (with two
 * threads or more and two matrices or more): the largest is left to the
 * caller, who factors it (lmq_gptq_factor on mats[i].h) beside other work
 * and records the outcome with calib_factor_done; returns its index, else
 * SIZE_MAX. */
size_t calib_factor_all(lmq_gptq_calib *g, bool keep_largest);
void calib_factor_done(lmq_gptq_calib *g, size_t mat, lmq_status st, const char *err);
bool calib_uses_mat(const lmq_gptq_calib *g, const char *tensor, size_t mat); /* the tensor reads matrix mat */
void calib_store_trim(lmq_gptq_calib *g); /* frees the kept matrices */
lmq_status calib_observe(void *user, const char *tensor, int32_t expert, const float *x, int32_t n_tok, int64_t n_in);
#endif

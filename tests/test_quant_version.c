/* The quantizer's version (LMQ_QUANTIZE_VERSION, recorded as
 * lmq.quantize.version and in the target cache key) against the bytes it
 * produces: a fixed tensor (24 rows of 512, Gaussian-like with outliers) is
 * quantized to every quantized type, plainly, with importance weights, and
 * with error feedback (types with a grid; H built here in double and
 * factored by lmq_gptq_factor's C path, width < 512, so no BLAS enters the
 * bytes), and the XXH3 of each result is compared with the table below.
 *
 * When this fails, the quantized bytes changed: bump LMQ_QUANTIZE_VERSION in
 * quantize/lmq_quant.h, then run with LMQ_PRINT_QUANT_HASHES=1 and paste the
 * printed table here (with the new version). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_format.h"
#include "lmq_quant.h"
#include "testutil.h"

#define ROWS 24
#define COLS 512
#define NGPTQ 256 /* the feedback case's width: below lmq_gptq_factor's LAPACK threshold */

typedef struct row {
    const char *type;
    uint64_t plain, imat, gptq; /* 0: the type has no such quantizer */
} row;

static const char *k_version = "0.1.0-q4";
static const row k_hashes[] = {
{"q4_0", 0x76ae9918f97d35c5ULL, 0x6e127f29fe502d0bULL, 0x72508574ab62517aULL},
{"q4_1", 0xc01bc6251408553bULL, 0x9f0447585c3b4287ULL, 0xe3ad8efb94ad1868ULL},
{"q5_0", 0x33f658aa346954cdULL, 0xecffe70c3eb16e75ULL, 0x114ef7a7c8ce31f8ULL},
{"q5_1", 0x3a88bb5684e5a3e4ULL, 0xb48cb1dc4d074866ULL, 0x48c298301e6f2776ULL},
{"q8_0", 0x73552405b5a448e2ULL, 0x73552405b5a448e2ULL, 0x7280ae69c8ba503cULL},
{"q8_1", 0x774af0b9e4752ebbULL, 0x774af0b9e4752ebbULL, 0x0000000000000000ULL},
{"q2_K", 0xbfc610d9b74d237dULL, 0xef800237b31dd1acULL, 0xa1fbbcda751f835dULL},
{"q3_K", 0x4f44fcf52a8b808fULL, 0x50ea0e81a6227d58ULL, 0xa729f52ecc737160ULL},
{"q4_K", 0xf7539e13bf1aea25ULL, 0x563722efecad97e5ULL, 0xa12ae6ee0217f473ULL},
{"q5_K", 0x266d0f4e22cdd765ULL, 0xbb56b52055d805eeULL, 0x8cdfbf5b6f1f3b2eULL},
{"q6_K", 0x76753ef8943d08fcULL, 0x73444f8149aac099ULL, 0x9c142118bdd71751ULL},
{"q8_K", 0x9c8ea403e130e770ULL, 0x9c8ea403e130e770ULL, 0x0000000000000000ULL},
{"iq4_nl", 0xc1b58841129c4158ULL, 0xd6c0dc6b2f30e04dULL, 0xccdaaf9ffe75503aULL},
{"iq4_xs", 0x511e8f38d6ed3bc3ULL, 0x743887f00a592478ULL, 0xc6138fb157c2db1bULL},
{"f8_e4m3", 0xe2e9f325f499e6fdULL, 0xe2e9f325f499e6fdULL, 0x0000000000000000ULL},
{"f8_e5m2", 0xc188bb82bccebec7ULL, 0xc188bb82bccebec7ULL, 0x0000000000000000ULL},
{"mxfp4", 0xa9354d1025a35293ULL, 0x5fc37c26af7cf830ULL, 0xe02834bf9e0d0f9eULL},
{"iq2_xxs", 0x0000000000000000ULL, 0x0000000000000000ULL, 0x0000000000000000ULL},
{"iq2_xs", 0x0000000000000000ULL, 0x0000000000000000ULL, 0x0000000000000000ULL},
{"iq2_s", 0x0000000000000000ULL, 0x0000000000000000ULL, 0x0000000000000000ULL},
{"iq3_xxs", 0x0000000000000000ULL, 0x0000000000000000ULL, 0x0000000000000000ULL},
{"iq3_s", 0x0000000000000000ULL, 0x0000000000000000ULL, 0x0000000000000000ULL},
{"iq1_s", 0x0000000000000000ULL, 0x0000000000000000ULL, 0x0000000000000000ULL},
{"iq1_m", 0x0000000000000000ULL, 0x0000000000000000ULL, 0x0000000000000000ULL},
{"tq1_0", 0x7ebca17e21ac23e8ULL, 0x26192e7d9dc1c6bfULL, 0x0000000000000000ULL},
{"tq2_0", 0xfe14572f676a5244ULL, 0x04c9d17a7db8c59aULL, 0x0000000000000000ULL},
};

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static double uni(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
}

static float gauss(void) { return (float)(sqrt(-2.0 * log(uni())) * cos(6.283185307179586 * uni())); }

static uint64_t hash_of(lmq_type t, const float *src, int64_t rows, int64_t n, const float *imw, const float *u,
                        lmq_status *st)
{
    const int64_t rb = lmq_row_size(t, n);
    uint8_t *q = calloc((size_t)(rb * rows), 1);
    float *tmp = malloc((size_t)(rows * n) * sizeof *tmp);
    memcpy(tmp, src, (size_t)(rows * n) * sizeof *tmp);
    *st = u ? lmq_quantize_rows_gptq(t, tmp, q, rows, n, imw, u, 2) : lmq_quantize_rows(t, tmp, q, rows, n, imw, 2);
    uint64_t h = *st ? 0 : lmq_hash64(q, (size_t)(rb * rows));
    free(q);
    free(tmp);
    return h;
}

int main(void)
{
    float *w = malloc(ROWS * COLS * sizeof *w), *imw = malloc(COLS * sizeof *imw);
    for (int i = 0; i < ROWS * COLS; i++) w[i] = 0.02f * gauss() * (uni() < 0.01 ? 8.0f : 1.0f);
    for (int j = 0; j < COLS; j++) imw[j] = (float)(0.1 + uni() * uni() * 4.0);
    /* H of correlated inputs (x = a few shared factors + noise), in double */
    const int n_tok = 96;
    float *x = malloc((size_t)n_tok * NGPTQ * sizeof *x);
    for (int t = 0; t < n_tok; t++) {
        float f0 = gauss(), f1 = gauss();
        for (int j = 0; j < NGPTQ; j++) x[t * NGPTQ + j] = 0.5f * gauss() + f0 * (float)(j % 7) / 7.0f + f1 * (j & 1);
    }
    float *u = calloc((size_t)NGPTQ * NGPTQ, sizeof *u);
    for (int i = 0; i < NGPTQ; i++)
        for (int j = i; j < NGPTQ; j++) {
            double s = 0;
            for (int t = 0; t < n_tok; t++) s += (double)x[t * NGPTQ + i] * x[t * NGPTQ + j];
            u[i * NGPTQ + j] = (float)s;
        }
    T_CHECK(lmq_gptq_factor(u, NGPTQ, 0.01f) == LMQ_OK, "factor: %s", lmq_last_error());

    const bool print = getenv("LMQ_PRINT_QUANT_HASHES") != NULL;
    T_CHECK(!strcmp(k_version, LMQ_QUANTIZE_VERSION),
            "the table is for quantizer %s, the code is %s: regenerate it (LMQ_PRINT_QUANT_HASHES=1)", k_version,
            LMQ_QUANTIZE_VERSION);
    int n_types = 0;
    for (int t = 0; t < LMQ_TYPE_COUNT; t++) {
        const lmq_type_traits *tt = lmq_type_get((lmq_type)t);
        if (!tt || !tt->quantized || COLS % tt->block_size) continue;
        lmq_status s1, s2, s3 = LMQ_ERR_UNSUPPORTED;
        uint64_t hp = hash_of((lmq_type)t, w, ROWS, COLS, NULL, NULL, &s1);
        uint64_t hi = hash_of((lmq_type)t, w, ROWS, COLS, imw, NULL, &s2);
        uint64_t hg = 0;
        if (lmq_gptq_supported((lmq_type)t) && NGPTQ % tt->block_size == 0)
            hg = hash_of((lmq_type)t, w, ROWS, NGPTQ, imw, u, &s3);
        if (s1) hp = 0, hi = 0; /* no quantizer (a type the kernels only read) */
        if (print) {
            printf("{\"%s\", 0x%016llxULL, 0x%016llxULL, 0x%016llxULL},\n", tt->name, (unsigned long long)hp,
                   (unsigned long long)hi, (unsigned long long)hg);
            continue;
        }
        const row *r = NULL;
        for (size_t i = 0; i < sizeof k_hashes / sizeof k_hashes[0]; i++)
            if (!strcmp(k_hashes[i].type, tt->name)) r = &k_hashes[i];
        T_CHECK(r != NULL, "%s is not in the table: add it and bump LMQ_QUANTIZE_VERSION", tt->name);
        if (!r) continue;
        n_types++;
        T_CHECK(r->plain == hp, "%s: the plain quantizer's bytes changed (%016llx): bump LMQ_QUANTIZE_VERSION", tt->name,
                (unsigned long long)hp);
        T_CHECK(r->imat == hi, "%s: the imatrix-weighted quantizer's bytes changed (%016llx): bump LMQ_QUANTIZE_VERSION",
                tt->name, (unsigned long long)hi);
        T_CHECK(r->gptq == hg, "%s: the error-feedback quantizer's bytes changed (%016llx): bump LMQ_QUANTIZE_VERSION",
                tt->name, (unsigned long long)hg);
    }
    if (!print) T_CHECK(n_types >= 10, "%d quantized types checked", n_types);
    free(w);
    free(imw);
    free(x);
    free(u);
    return print ? 0 : t_finish();
}

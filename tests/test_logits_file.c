/* The KLD base-logits file (eval/logits_file.c): the version-2 tiered code
 * (error within half a step of each tier, monotone, saturating), a write ->
 * read round trip of real-looking log-softmax rows, and refusals of damaged
 * files (bad magic, unknown version, truncated chunk, corrupt zstd frame). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../eval/logits_file.h"
#include "testutil.h"

static void check_code(void)
{
    double worst[3] = {0, 0, 0};
    uint16_t prev = 0;
    bool monotone = true;
    for (double x = 0; x < 1400; x += x < 20 ? 0.000731 : 0.0371) {
        uint16_t q = lmq_logits_encode(x);
        double back = lmq_logits_decode(q);
        int tier = x < LMQ_LOGITS_T1 ? 0 : x < LMQ_LOGITS_T2 ? 1 : 2;
        worst[tier] = fmax(worst[tier], fabs(back - x));
        monotone &= q >= prev;
        prev = q;
    }
    T_CHECK(worst[0] <= 0.5 / LMQ_LOGITS_S1 + 1e-12, "tier 1 error %g", worst[0]);
    T_CHECK(worst[1] <= 0.5 / LMQ_LOGITS_S2 + 1e-12, "tier 2 error %g", worst[1]);
    T_CHECK(worst[2] <= 0.5 / LMQ_LOGITS_S3 + 1e-12, "tier 3 error %g", worst[2]);
    T_CHECK(monotone, "code is monotone");
    T_CHECK(lmq_logits_encode(0) == 0 && lmq_logits_encode(-1) == 0 && lmq_logits_encode(NAN) == 0, "x <= 0 and NaN -> 0");
    T_CHECK(lmq_logits_encode(1e9) == 65535 && lmq_logits_encode(INFINITY) == 65535, "saturates");
    T_NEAR(lmq_logits_decode(LMQ_LOGITS_C1), LMQ_LOGITS_T1, 0, "tier boundary 1");
    T_NEAR(lmq_logits_decode(LMQ_LOGITS_C2), LMQ_LOGITS_T2, 0, "tier boundary 2");
}

static void check_file(void)
{
    const uint32_t nv = 1000, ns = 7, nc = 3;
    lmq_logits_header h = {nv, 16, nc, ns, 0x1111, 0x2222, 0x3333};
    float *logits = malloc(sizeof(float) * nv * ns), *lp = malloc(sizeof(float) * nv * ns);
    const char *path = t_tmp("base.logits");
    lmq_logits_file lf;
    T_CHECK(lmq_logits_create(&lf, path, &h) == LMQ_OK, "create: %s", lmq_last_error());
    uint32_t seed = 7;
    for (uint32_t c = 0; c < nc; c++) {
        for (uint32_t i = 0; i < nv * ns; i++) {
            seed = seed * 1664525u + 1013904223u;
            logits[i] = (float)((seed >> 8) % 20000) / 1000.0f - 10.0f;
        }
        T_CHECK(lmq_logits_write_chunk(&lf, logits) == LMQ_OK, "write chunk %u", c);
    }
    T_CHECK(lmq_logits_finish(&lf) == LMQ_OK, "finish: %s", lmq_last_error());
    lmq_logits_close(&lf);

    T_CHECK(lmq_logits_open(&lf, path) == LMQ_OK, "open: %s", lmq_last_error());
    T_CHECK(lf.h.n_vocab == nv && lf.h.n_scored == ns && lf.h.n_chunks == nc && lf.h.vocab_hash == 0x1111 &&
                lf.h.tokens_hash == 0x2222,
            "header round trip");
    /* the last chunk written is in `logits`: skip to it and compare */
    for (uint32_t c = 0; c < nc; c++) T_CHECK(lmq_logits_read_chunk(&lf, lp) == LMQ_OK, "read chunk %u", c);
    double worst = 0;
    for (uint32_t t = 0; t < ns; t++) {
        const float *l = logits + t * nv;
        double mx = l[0], s = 0;
        for (uint32_t v = 1; v < nv; v++) mx = fmax(mx, l[v]);
        for (uint32_t v = 0; v < nv; v++) s += exp(l[v] - mx);
        for (uint32_t v = 0; v < nv; v++) {
            double want = l[v] - mx - log(s);
            double step = -want < LMQ_LOGITS_T1 ? 1 / LMQ_LOGITS_S1 : -want < LMQ_LOGITS_T2 ? 1 / LMQ_LOGITS_S2 : 1 / LMQ_LOGITS_S3;
            worst = fmax(worst, fabs(lp[t * nv + v] - want) / step);
        }
    }
    T_CHECK(worst <= 0.5 + 1e-3, "decoded log-probs within half a step (worst %.3f steps)", worst);
    T_CHECK(lmq_logits_read_chunk(&lf, lp) == LMQ_ERR_FORMAT, "reading past the last chunk is an error");
    lmq_logits_close(&lf);

    /* damaged copies */
    char *data = NULL;
    size_t len = 0;
    T_CHECK(lmq_read_file(path, 1 << 24, &data, &len) == LMQ_OK, "read back");
    const char *bad = t_tmp("bad.logits");
    struct {
        const char *what;
        size_t off;
        uint8_t val;
        size_t cut;
        lmq_status open_st, read_st;
    } cases[] = {
        {"bad magic", 0, 'X', 0, LMQ_ERR_FORMAT, LMQ_OK},
        {"unknown version", 4, 9, 0, LMQ_ERR_UNSUPPORTED, LMQ_OK},
        {"implausible vocabulary", 11, 0x7f, 0, LMQ_ERR_FORMAT, LMQ_OK},
        {"corrupt zstd frame", 48 + 8 + 20, 0x5a, 0, LMQ_OK, LMQ_ERR_FORMAT},
        {"truncated chunk", 0, 0, 48 + 8 + 10, LMQ_OK, LMQ_ERR_FORMAT},
        {"truncated header", 0, 0, 20, LMQ_ERR_FORMAT, LMQ_OK},
    };
    for (size_t i = 0; data && i < sizeof cases / sizeof cases[0]; i++) {
        char *copy = malloc(len);
        memcpy(copy, data, len);
        size_t n = cases[i].cut ? cases[i].cut : len;
        if (!cases[i].cut) copy[cases[i].off] ^= (char)cases[i].val;
        T_CHECK(lmq_write_file_atomic(bad, copy, n) == LMQ_OK, "write %s", cases[i].what);
        lmq_status st = lmq_logits_open(&lf, bad);
        T_CHECK(st == cases[i].open_st, "%s: open -> %d (%s)", cases[i].what, st, lmq_last_error());
        if (st == LMQ_OK) {
            st = lmq_logits_read_chunk(&lf, lp);
            T_CHECK(st == cases[i].read_st && strstr(lmq_last_error(), "bad.logits"), "%s: read -> %d (%s)",
                    cases[i].what, st, lmq_last_error());
        } else {
            T_CHECK(strstr(lmq_last_error(), "bad.logits") != NULL, "%s: message names the file", cases[i].what);
        }
        lmq_logits_close(&lf);
        free(copy);
    }
    free(data);
    free(logits);
    free(lp);
}

int main(void)
{
    check_code();
    check_file();
    return t_finish();
}

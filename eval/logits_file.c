/* Base log-probability file: a small header, then one zstd frame per chunk
 * holding n_scored x n_vocab uint16 log-probs, byte-shuffled (all low bytes,
 * then all high bytes) so that zstd sees long runs of similar bytes. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "logits_file.h"

#define MAGIC "LMQL"
#define VERSION 2u /* 2: tiered steps (below); 1: one step of 1/2048 nat (still read) */
#define MAX_RAW ((size_t)1 << 32)

uint16_t lmq_logits_encode(double x)
{
    double c;
    if (!(x > 0)) return 0; /* also NaN */
    if (x < LMQ_LOGITS_T1)
        c = x * LMQ_LOGITS_S1;
    else if (x < LMQ_LOGITS_T2)
        c = LMQ_LOGITS_C1 + (x - LMQ_LOGITS_T1) * LMQ_LOGITS_S2;
    else
        c = LMQ_LOGITS_C2 + (x - LMQ_LOGITS_T2) * LMQ_LOGITS_S3;
    return c >= 65535.0 ? 65535 : (uint16_t)lrint(c);
}

double lmq_logits_decode(uint16_t q)
{
    if (q < LMQ_LOGITS_C1) return q / LMQ_LOGITS_S1;
    if (q < LMQ_LOGITS_C2) return LMQ_LOGITS_T1 + (q - LMQ_LOGITS_C1) / LMQ_LOGITS_S2;
    return LMQ_LOGITS_T2 + (q - LMQ_LOGITS_C2) / LMQ_LOGITS_S3;
}

static size_t raw_elems(const lmq_logits_header *h)
{
    return (size_t)h->n_scored * h->n_vocab;
}

static lmq_status alloc_bufs(lmq_logits_file *lf)
{
    size_t n = raw_elems(&lf->h);
    if (n == 0 || n * 2 > MAX_RAW) return lmq_error(LMQ_ERR_LIMIT, "%s: chunk of %zu log-probs is too large", lf->path, n);
    lf->raw = malloc(n * 2);
    lf->plane = malloc(n * 2);
    lf->zcap = ZSTD_compressBound(n * 2);
    lf->z = malloc(lf->zcap);
    if (!lf->raw || !lf->plane || !lf->z) return lmq_error(LMQ_ERR_NOMEM, "%s: buffers", lf->path);
    return LMQ_OK;
}

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

#define HEADER_BYTES 48

lmq_status lmq_logits_create(lmq_logits_file *lf, const char *path, const lmq_logits_header *h)
{
    memset(lf, 0, sizeof *lf);
    snprintf(lf->path, sizeof lf->path, "%s", path);
    snprintf(lf->tmp, sizeof lf->tmp, "%s.tmp.%ld", path, (long)getpid());
    lf->h = *h;
    lf->writing = true;
    lmq_status s = alloc_bufs(lf);
    if (s) return s;
    lf->f = fopen(lf->tmp, "wb");
    if (!lf->f) return lmq_error(LMQ_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    uint8_t hdr[HEADER_BYTES] = {0};
    memcpy(hdr, MAGIC, 4);
    put32(hdr + 4, VERSION);
    put32(hdr + 8, h->n_vocab);
    put32(hdr + 12, h->n_ctx);
    put32(hdr + 16, h->n_chunks);
    put32(hdr + 20, h->n_scored);
    put64(hdr + 24, h->vocab_hash);
    put64(hdr + 32, h->tokens_hash);
    put64(hdr + 40, h->model_id);
    if (fwrite(hdr, 1, sizeof hdr, lf->f) != sizeof hdr) return lmq_error(LMQ_ERR_IO, "%s: write failed", path);
    lf->bytes = sizeof hdr;
    return LMQ_OK;
}

lmq_status lmq_logits_write_chunk(lmq_logits_file *lf, const float *logits)
{
    const uint32_t nv = lf->h.n_vocab;
    size_t n = raw_elems(&lf->h);
    for (uint32_t t = 0; t < lf->h.n_scored; t++) {
        const float *l = logits + (size_t)t * nv;
        float mx = l[0];
        for (uint32_t v = 1; v < nv; v++) if (l[v] > mx) mx = l[v];
        double sum = 0;
        for (uint32_t v = 0; v < nv; v++) sum += expf(l[v] - mx);
        double lse = log(sum);
        for (uint32_t v = 0; v < nv; v++) lf->raw[(size_t)t * nv + v] = lmq_logits_encode(lse - (double)(l[v] - mx));
    }
    for (size_t i = 0; i < n; i++) {
        lf->plane[i] = (uint8_t)lf->raw[i];
        lf->plane[n + i] = (uint8_t)(lf->raw[i] >> 8);
    }
    size_t z = ZSTD_compress(lf->z, lf->zcap, lf->plane, n * 2, 3);
    if (ZSTD_isError(z)) return lmq_error(LMQ_ERR_RUNTIME, "%s: zstd: %s", lf->path, ZSTD_getErrorName(z));
    uint8_t len[8];
    put64(len, z);
    if (fwrite(len, 1, 8, lf->f) != 8 || fwrite(lf->z, 1, z, lf->f) != z)
        return lmq_error(LMQ_ERR_IO, "%s: write failed: %s", lf->path, strerror(errno));
    lf->bytes += 8 + z;
    return LMQ_OK;
}

lmq_status lmq_logits_finish(lmq_logits_file *lf)
{
    if (fflush(lf->f) != 0 || fsync(fileno(lf->f)) != 0)
        return lmq_error(LMQ_ERR_IO, "%s: flush failed: %s", lf->path, strerror(errno));
    int rc = fclose(lf->f);
    lf->f = NULL;
    if (rc != 0) return lmq_error(LMQ_ERR_IO, "%s: close failed", lf->path);
    if (rename(lf->tmp, lf->path) != 0) return lmq_error(LMQ_ERR_IO, "%s: rename failed: %s", lf->path, strerror(errno));
    lf->tmp[0] = 0;
    return LMQ_OK;
}

lmq_status lmq_logits_open(lmq_logits_file *lf, const char *path)
{
    memset(lf, 0, sizeof *lf);
    snprintf(lf->path, sizeof lf->path, "%s", path);
    lf->f = fopen(path, "rb");
    if (!lf->f) return lmq_error(errno == ENOENT ? LMQ_ERR_NOT_FOUND : LMQ_ERR_IO, "%s: %s", path, strerror(errno));
    uint8_t hdr[HEADER_BYTES];
    if (fread(hdr, 1, sizeof hdr, lf->f) != sizeof hdr || memcmp(hdr, MAGIC, 4))
        return lmq_error(LMQ_ERR_FORMAT, "%s: not an lmq logits file (bad magic or truncated header)", path);
    lf->version = get32(hdr + 4);
    if (lf->version != 1 && lf->version != VERSION)
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: logits file version %u (this lmq reads 1 and 2)", path, lf->version);
    lf->h.n_vocab = get32(hdr + 8);
    lf->h.n_ctx = get32(hdr + 12);
    lf->h.n_chunks = get32(hdr + 16);
    lf->h.n_scored = get32(hdr + 20);
    lf->h.vocab_hash = get64(hdr + 24);
    lf->h.tokens_hash = get64(hdr + 32);
    lf->h.model_id = get64(hdr + 40);
    if (!lf->h.n_vocab || lf->h.n_vocab > (1u << 24) || lf->h.n_ctx < 2 || lf->h.n_scored >= lf->h.n_ctx)
        return lmq_error(LMQ_ERR_FORMAT, "%s: implausible header (vocab %u, ctx %u)", path, lf->h.n_vocab, lf->h.n_ctx);
    return alloc_bufs(lf);
}

lmq_status lmq_logits_read_chunk(lmq_logits_file *lf, float *lp)
{
    uint8_t len[8];
    if (fread(len, 1, 8, lf->f) != 8) return lmq_error(LMQ_ERR_FORMAT, "%s: truncated (missing chunk)", lf->path);
    uint64_t z = get64(len);
    if (z == 0 || z > lf->zcap) return lmq_error(LMQ_ERR_FORMAT, "%s: bad chunk size %llu", lf->path, (unsigned long long)z);
    if (fread(lf->z, 1, (size_t)z, lf->f) != z) return lmq_error(LMQ_ERR_FORMAT, "%s: truncated chunk", lf->path);
    size_t n = raw_elems(&lf->h);
    size_t got = ZSTD_decompress(lf->plane, n * 2, lf->z, (size_t)z);
    if (ZSTD_isError(got) || got != n * 2) return lmq_error(LMQ_ERR_FORMAT, "%s: corrupt chunk", lf->path);
    const bool v1 = lf->version == 1;
    for (size_t i = 0; i < n; i++) {
        const uint16_t q = (uint16_t)(lf->plane[i] | (uint32_t)lf->plane[n + i] << 8);
        lp[i] = -(float)(v1 ? q * LMQ_LOGITS_STEP : lmq_logits_decode(q));
    }
    return LMQ_OK;
}

void lmq_logits_close(lmq_logits_file *lf)
{
    if (lf->f) fclose(lf->f);
    if (lf->writing && lf->tmp[0]) unlink(lf->tmp);
    free(lf->raw);
    free(lf->plane);
    free(lf->z);
    memset(lf, 0, sizeof *lf);
}

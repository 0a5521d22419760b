/* The 256-element super-block types: q2_K, q3_K, q4_K, q5_K, q6_K, iq4_xs.
 *
 * Quantizers: per sub-block, a weighted least-squares search of the scale
 * (and min), then a weighted search of the super-block's quantized scales
 * (weights: the sub-block's total weight), then every quant is re-picked for
 * the scales as stored (q4_K/q5_K: then (d, dmin) refitted by least squares
 * over the whole super-block, alternating with the sub-block scales and the
 * quants). Finally q2_K-q5_K scale the super-block so that the
 * reconstruction is not shrunk towards zero (unshrink() below: the
 * least-squares fit shrinks every weight by about the relative error, a
 * coherent error that costs more KL divergence than the lower squared error
 * saves; docs/QUANT.md has the measurements). Weights follow ggml's importance formula
 * w = imatrix * sqrt(sigma^2 + x^2), sigma^2 = 2 * mean(x^2) over the
 * super-block (q6_K: w = imatrix, as ggml); without an importance matrix the
 * same formula with unit importance (docs/QUANT.md has the measurements that
 * chose this over ggml's x^2 / av+|x| defaults: lower RMSE for every type). */
#include "quant_internal.h"

/* ======================================================================
 * Scale packing
 * ====================================================================== */

/* q4_K/q5_K: 8 6-bit scales and 8 6-bit mins in 12 bytes. Bytes 0-3 hold
 * scales 0-3 (low 6 bits) and the top 2 bits of scales 4-7; bytes 4-7 the
 * same for the mins; bytes 8-11 the low nibbles of scale (low) and min (high)
 * 4-7. */
static void k4_pack(const uint8_t ls[8], const uint8_t lm[8], uint8_t s[12])
{
    memset(s, 0, 12);
    for (int j = 0; j < 4; j++) {
        s[j] = ls[j];
        s[j + 4] = lm[j];
    }
    for (int j = 4; j < 8; j++) {
        s[j + 4] = (uint8_t)((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
        s[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
        s[j] |= (uint8_t)((lm[j] >> 4) << 6);
    }
}

static inline void k4_unpack(int j, const uint8_t *s, int *sc, int *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* q3_K: 16 6-bit scales (stored +32) in 12 bytes: bytes 0-7 hold the low
 * nibbles (scale j in byte j%8, low nibble for j<8, high for j>=8), bytes
 * 8-11 the top 2 bits (scale j in byte 8 + j%4, bits 2*(j/4)). */
static void k3_pack(const uint8_t ls[16], uint8_t s[12])
{
    memset(s, 0, 12);
    for (int j = 0; j < 16; j++) {
        const int l = ls[j];
        if (j < 8)
            s[j] = (uint8_t)(l & 0xF);
        else
            s[j - 8] |= (uint8_t)((l & 0xF) << 4);
        s[8 + j % 4] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
    }
}

static inline int k3_unpack(int j, const uint8_t *s)
{
    const int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
    return (lo | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
}

/* 2-bit quants of 128 values in 32 bytes: byte l holds L[l], L[l+32],
 * L[l+64], L[l+96] in bits 0-1, 2-3, 4-5, 6-7. */
static void pack_2bit(const uint8_t *L, uint8_t *qs)
{
    for (int j = 0; j < LMQ_QK_K; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                      (L[j + l + 96] << 6));
}

/* w = (qw ? qw : 1) * sqrt(sigma2 + x^2) for n values; returns sum w. */
static float kq_weights(const float *x, const float *qw, float sigma2, float *w, int n)
{
    float s = 0.0f;
    for (int l = 0; l < n; l++) {
        w[l] = (qw ? qw[l] : 1.0f) * sqrtf(sigma2 + x[l] * x[l]);
        s += w[l];
    }
    return s;
}

/* Re-picks a sub-block's integer scale ls in [0, smax] and min lm in
 * [0, smax] (x ~ d*ls*q - dmin*lm, q in [0, nmax]) among the pair and its 8
 * neighbours, with the super-block scales fixed (one round: a second buys
 * about a tenth of the first's gain for as much time again). Returns the
 * weighted error of the pair kept (lmq_grid_err's value). */
static float refine_asym(const float *x, const float *w, int n, int nmax, float d, float dmin,
                         int smax, uint8_t *ls, uint8_t *lm)
{
    const float hi = (float)nmax;
    const int s0 = *ls, m0 = *lm;
    /* the pair first, then its neighbours in order; all errors in one call */
    float dl[9], ml[9], e[9];
    int cs[9], cm[9], nc = 1;
    cs[0] = s0;
    cm[0] = m0;
    for (int a = -1; a <= 1; a++) {
        for (int b = -1; b <= 1; b++) {
            const int s = s0 + a, m = m0 + b;
            if ((a == 0 && b == 0) || s < 0 || s > smax || m < 0 || m > smax) continue;
            cs[nc] = s;
            cm[nc++] = m;
        }
    }
    for (int c = 0; c < nc; c++) {
        dl[c] = d * (float)cs[c];
        ml[c] = dmin * (float)cm[c];
    }
    lmq_q_simd()->grid_errs(n, x, w, nc, dl, ml, 0.0f, hi, e);
    float best = e[0];
    for (int c = 1; c < nc; c++) {
        if (e[c] < best) {
            best = e[c];
            *ls = (uint8_t)cs[c];
            *lm = (uint8_t)cm[c];
        }
    }
    return best;
}

/* The same for a symmetric sub-block: integer scale sc in [smin, smax],
 * x ~ d*sc*q, q in [lo, hi]. */
static int refine_sym(const float *x, const float *w, int n, int lo, int hi, float d, int sc,
                      int smin, int smax)
{
    float best = lmq_grid_err(n, x, w, d * (float)sc, 0.0f, (float)lo, (float)hi);
    for (int dir = -1; dir <= 1; dir += 2) {
        for (int s = sc + dir; s >= smin && s <= smax; s += dir) {
            const float e = lmq_grid_err(n, x, w, d * (float)s, 0.0f, (float)lo, (float)hi);
            if (!(e < best)) break;
            best = e;
            sc = s;
        }
    }
    return sc;
}

/* Alternating refinement of a whole asymmetric super-block (at most iters
 * rounds, nsub <= 16): with the quants and integer sub-block scales fixed,
 * (d, dmin) is a weighted least-squares problem in two unknowns; with the
 * new (d, dmin) stored as f16, each sub-block's (scale, min) pair is
 * re-picked among its neighbours and the quants re-rounded. A round is kept
 * only when it lowers the super-block's total error (best: that of the
 * pairs given, the sum of their refine_asym() errors in sub-block order). */
static void asym_refit(const float *x, const float *w, int nsub, int len, int nmax, int smax, uint16_t *dh,
                       uint16_t *dminh, uint8_t *Ls, uint8_t *Lm, int iters, float best)
{
    float d = lmq_fp16_to_fp32(*dh), dmin = lmq_fp16_to_fp32(*dminh);
    uint8_t ls[16], lm[16];
    float mls[16], idls[16];
    double sums[16][5];
    for (int it = 0; it < iters; it++) {
        /* x' = d * a - dmin * b with a = Ls[j] * q, b = Lm[j] */
        double saa = 0, sab = 0, sbb = 0, sax = 0, sbx = 0;
        for (int j = 0; j < nsub; j++) {
            mls[j] = dmin * (float)Lm[j];
            idls[j] = lmq_inv(d * (float)Ls[j]);
        }
        lmq_q_simd()->asym_sums(nsub, len, x, w, mls, idls, nmax, sums);
        for (int j = 0; j < nsub; j++) {
            const double q2 = sums[j][0], q1 = sums[j][1], w1 = sums[j][2], qx = sums[j][3], x1 = sums[j][4];
            const double s = Ls[j], m = Lm[j];
            saa += s * s * q2;
            sab += s * m * q1;
            sbb += m * m * w1;
            sax += s * qx;
            sbx += m * x1;
        }
        const double det = saa * sbb - sab * sab;
        double nd = saa > 0 ? sax / saa : 0, nm = 0;
        if (det > 1e-12 * saa * sbb) {
            nm = (sab * sax - saa * sbx) / det;
            if (nm >= 0) nd = (sax * sbb - sab * sbx) / det;
            else nm = 0;
        }
        if (!(nd > 0) || !isfinite(nd) || !isfinite(nm)) break;
        const uint16_t ndh = lmq_f16_sat((float)nd), nmh = lmq_f16_sat((float)nm);
        const float d2 = lmq_fp16_to_fp32(ndh), m2 = lmq_fp16_to_fp32(nmh);
        memcpy(ls, Ls, (size_t)nsub);
        memcpy(lm, Lm, (size_t)nsub);
        float e = 0.0f; /* the super-block's total error, sub-blocks in order */
        for (int j = 0; j < nsub; j++)
            e += refine_asym(x + len * j, w + len * j, len, nmax, d2, m2, smax, &ls[j], &lm[j]);
        if (!(e < best)) break;
        best = e;
        d = d2;
        dmin = m2;
        *dh = ndh;
        *dminh = nmh;
        memcpy(Ls, ls, (size_t)nsub);
        memcpy(Lm, lm, (size_t)nsub);
    }
}

/* The factor that makes a super-block's reconstruction x' unshrunk:
 * sum w x^2 / sum w x x'. A least-squares fit leaves the error orthogonal
 * to x' (sum w x' (x - x') = 0), so x . x' < x . x: every weight comes out
 * smaller by about the relative squared error, the same way in every
 * block of a row, and the row's output shrinks coherently with it (as if
 * y = (1 - eps) W a) instead of receiving noise that averages out across
 * the row. Scaling (d, dmin) by this factor removes that component at the
 * price of a slightly larger squared error; it pays where the error is
 * large (q2_K -10% KL divergence, q3_K -3.5%; q4_K -0.2%; measurements in
 * docs/QUANT.md). 1 when either sum is not positive. */
static float unshrink(const float *x, const float *xq, const float *w, int n)
{
    double a = 0, b = 0;
    for (int i = 0; i < n; i++) {
        a += (double)w[i] * x[i] * xq[i];
        b += (double)w[i] * x[i] * x[i];
    }
    const double f = a > 0 && b > 0 ? b / a : 1.0;
    return isfinite(f) ? (float)f : 1.0f;
}

/* Final quants for x ~ dl * q - ml, q in [0, nmax] (dl == 0: all 0). */
static void asym_pick(const float *x, int n, int nmax, float dl, float ml, uint8_t *L)
{
    const float idl = lmq_inv(dl);
    for (int l = 0; l < n; l++)
        L[l] = (uint8_t)lmq_clampi(lmq_nearest_int((x[l] + ml) * idl), 0, nmax);
}

/* Final quants for x ~ dl * q, q in [lo, hi], stored as q - lo. */
static void sym_pick(const float *x, int n, int lo, int hi, float dl, uint8_t *L)
{
    const float idl = lmq_inv(dl);
    for (int l = 0; l < n; l++)
        L[l] = (uint8_t)(lmq_clampi(lmq_nearest_int(x[l] * idl), lo, hi) - lo);
}

static float sum_f(const float *w, int n)
{
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += w[i];
    return s;
}

/* ======================================================================
 * q2_K: 16 x 16, x = d*sc*q - dmin*m, 4-bit sc/m, 2-bit q
 * ====================================================================== */

void lmq_q_q2_K_to_float(const void *vx, float *y, int64_t n)
{
    const lmq_block_q2_K *x = vx;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        const float d = lmq_fp16_to_fp32(x[i].d), dmin = lmq_fp16_to_fp32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        int is = 0;
        for (int half = 0; half < 2; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int k = 0; k < 2; k++) {
                    const uint8_t sc = x[i].scales[is++];
                    const float dl = d * (float)(sc & 0xF), ml = dmin * (float)(sc >> 4);
                    for (int l = 0; l < 16; l++)
                        *y++ = dl * (float)((q[l + 16 * k] >> shift) & 3) - ml;
                }
            }
        }
    }
}

void lmq_q_q2_K_from_float(const float *x, void *vy, int64_t n, const float *qw)
{
    lmq_block_q2_K *y = vy;
    uint8_t L[LMQ_QK_K], Ls[16], Lm[16];
    float w[LMQ_QK_K], sw[16], sc[16], mn[16];
    for (int64_t i = 0; i < n / LMQ_QK_K; i++, x += LMQ_QK_K) {
        const float sigma2 = 2.0f * lmq_sum_sq(x, LMQ_QK_K) / LMQ_QK_K;
        for (int j = 0; j < 16; j++) {
            const float *xs = x + 16 * j, *ws = w + 16 * j;
            sw[j] = kq_weights(xs, qw ? qw + i * LMQ_QK_K + 16 * j : NULL, sigma2, w + 16 * j, 16);
            sc[j] = lmq_qkx_search(16, 3, xs, ws, L + 16 * j, &mn[j], -0.5f, 0.1f, 15);
        }
        const float d = lmq_fp16_to_fp32(lmq_f16_sat(lmq_qp_search(16, 15, sc, Ls, sw)));
        const float dmin = lmq_fp16_to_fp32(lmq_f16_sat(lmq_qp_search(16, 15, mn, Lm, sw)));
        float xq[LMQ_QK_K];
        for (int j = 0; j < 16; j++) {
            const float *xs = x + 16 * j;
            refine_asym(xs, w + 16 * j, 16, 3, d, dmin, 15, &Ls[j], &Lm[j]);
            y[i].scales[j] = (uint8_t)(Ls[j] | (Lm[j] << 4));
            const float dl = d * (float)Ls[j], ml = dmin * (float)Lm[j];
            asym_pick(xs, 16, 3, dl, ml, L + 16 * j);
            for (int l = 0; l < 16; l++) xq[16 * j + l] = dl * (float)L[16 * j + l] - ml;
        }
        const float f = unshrink(x, xq, w, LMQ_QK_K);
        y[i].d = lmq_f16_sat(d * f);
        y[i].dmin = lmq_f16_sat(dmin * f);
        pack_2bit(L, y[i].qs);
    }
}

/* ======================================================================
 * q3_K: 16 x 16, x = d*(sc-32)*(q-4), 6-bit sc, 3-bit q (2 low + hmask)
 * ====================================================================== */

void lmq_q_q3_K_to_float(const void *vx, float *y, int64_t n)
{
    const lmq_block_q3_K *x = vx;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        const float d = lmq_fp16_to_fp32(x[i].d);
        const uint8_t *q = x[i].qs, *hm = x[i].hmask;
        int is = 0;
        uint8_t m = 1;
        for (int half = 0; half < 2; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m = (uint8_t)(m << 1)) {
                for (int k = 0; k < 2; k++) {
                    const float dl = d * (float)k3_unpack(is++, x[i].scales);
                    for (int l = 16 * k; l < 16 * k + 16; l++)
                        *y++ = dl * (float)(((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                }
            }
        }
    }
}

void lmq_q_q3_K_from_float(const float *x, void *vy, int64_t n, const float *qw)
{
    lmq_block_q3_K *y = vy;
    uint8_t L[LMQ_QK_K], Ls[16];
    float w[LMQ_QK_K], sw[16], sc[16];
    for (int64_t i = 0; i < n / LMQ_QK_K; i++, x += LMQ_QK_K) {
        const float sigma2 = 2.0f * lmq_sum_sq(x, LMQ_QK_K) / LMQ_QK_K;
        for (int j = 0; j < 16; j++) {
            const float *xs = x + 16 * j;
            sw[j] = kq_weights(xs, qw ? qw + i * LMQ_QK_K + 16 * j : NULL, sigma2, w + 16 * j, 16);
            sc[j] = lmq_qx_search(16, 4, xs, L + 16 * j, w + 16 * j);
        }
        const float d = lmq_fp16_to_fp32(lmq_f16_sat(lmq_qx_search(16, 32, sc, Ls, sw)));
        float xq[LMQ_QK_K];
        for (int j = 0; j < 16; j++) {
            const float *xs = x + 16 * j;
            Ls[j] = (uint8_t)(refine_sym(xs, w + 16 * j, 16, -4, 3, d, Ls[j] - 32, -32, 31) + 32);
            const float dl = d * (float)((int)Ls[j] - 32);
            sym_pick(xs, 16, -4, 3, dl, L + 16 * j);
            for (int l = 0; l < 16; l++) xq[16 * j + l] = dl * (float)((int)L[16 * j + l] - 4);
        }
        y[i].d = lmq_f16_sat(d * unshrink(x, xq, w, LMQ_QK_K));
        k3_pack(Ls, y[i].scales);
        lmq_q_q3_K_codes(&y[i], L);
    }
}

void lmq_q_q3_K_codes(void *vy, const uint8_t *Lin)
{
    lmq_block_q3_K *y = vy;
    uint8_t L[LMQ_QK_K];
    /* high bit of quant j goes to hmask[j % 32], bit j / 32 */
    memset(y->hmask, 0, sizeof y->hmask);
    for (int j = 0; j < LMQ_QK_K; j++) {
        L[j] = Lin[j] & 3;
        if (Lin[j] > 3) y->hmask[j % 32] |= (uint8_t)(1u << (j / 32));
    }
    pack_2bit(L, y->qs);
}

/* ======================================================================
 * q4_K / q5_K: 8 x 32, x = d*sc*q - dmin*m, 6-bit sc/m
 * ====================================================================== */

/* Shared search: fills L (0..nmax), the packed scales, d and dmin. */
static void k45_quantize(const float *x, const float *qw, int nmax, uint16_t *dh,
                         uint16_t *dminh, uint8_t scales[12], uint8_t L[LMQ_QK_K])
{
    float w[LMQ_QK_K], sw[8], sc[8], mn[8];
    uint8_t Ls[8], Lm[8];
    const float sigma2 = 2.0f * lmq_sum_sq(x, LMQ_QK_K) / LMQ_QK_K;
    for (int j = 0; j < 8; j++) {
        const float *xs = x + 32 * j;
        sw[j] = kq_weights(xs, qw ? qw + 32 * j : NULL, sigma2, w + 32 * j, 32);
        sc[j] = lmq_qkx_search(32, nmax, xs, w + 32 * j, L + 32 * j, &mn[j], -1.0f, 0.1f, 20);
    }
    *dh = lmq_f16_sat(lmq_qp_search(8, 63, sc, Ls, sw));
    *dminh = lmq_f16_sat(lmq_qp_search(8, 63, mn, Lm, sw));
    const float d0 = lmq_fp16_to_fp32(*dh), dmin0 = lmq_fp16_to_fp32(*dminh);
    float e0 = 0.0f; /* the super-block's total error, sub-blocks in order */
    for (int j = 0; j < 8; j++) e0 += refine_asym(x + 32 * j, w + 32 * j, 32, nmax, d0, dmin0, 63, &Ls[j], &Lm[j]);
    asym_refit(x, w, 8, 32, nmax, 63, dh, dminh, Ls, Lm, 3, e0);
    const float d = lmq_fp16_to_fp32(*dh), dmin = lmq_fp16_to_fp32(*dminh);
    float xq[LMQ_QK_K];
    for (int j = 0; j < 8; j++) {
        const float dl = d * (float)Ls[j], ml = dmin * (float)Lm[j];
        asym_pick(x + 32 * j, 32, nmax, dl, ml, L + 32 * j);
        for (int l = 0; l < 32; l++) xq[32 * j + l] = dl * (float)L[32 * j + l] - ml;
    }
    const float f = unshrink(x, xq, w, LMQ_QK_K);
    *dh = lmq_f16_sat(d * f);
    *dminh = lmq_f16_sat(dmin * f);
    k4_pack(Ls, Lm, scales);
}

void lmq_q_q4_K_to_float(const void *vx, float *y, int64_t n)
{
    const lmq_block_q4_K *x = vx;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        const float d = lmq_fp16_to_fp32(x[i].d), dmin = lmq_fp16_to_fp32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        for (int j = 0; j < 8; j += 2, q += 32) {
            int sc, m;
            k4_unpack(j, x[i].scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            k4_unpack(j + 1, x[i].scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = dmin * (float)m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (float)(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

void lmq_q_q4_K_from_float(const float *x, void *vy, int64_t n, const float *qw)
{
    lmq_block_q4_K *y = vy;
    uint8_t L[LMQ_QK_K];
    for (int64_t i = 0; i < n / LMQ_QK_K; i++, x += LMQ_QK_K) {
        k45_quantize(x, qw ? qw + i * LMQ_QK_K : NULL, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
        lmq_q_q4_K_codes(&y[i], L);
    }
}

void lmq_q_q4_K_codes(void *vy, const uint8_t *L)
{
    lmq_block_q4_K *y = vy;
    /* 64 values per 32 bytes: low nibbles first 32, high nibbles next 32 */
    for (int j = 0; j < 4; j++)
        for (int l = 0; l < 32; l++)
            y->qs[32 * j + l] = (uint8_t)(L[64 * j + l] | (L[64 * j + l + 32] << 4));
}

void lmq_q_q5_K_to_float(const void *vx, float *y, int64_t n)
{
    const lmq_block_q5_K *x = vx;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        const float d = lmq_fp16_to_fp32(x[i].d), dmin = lmq_fp16_to_fp32(x[i].dmin);
        const uint8_t *ql = x[i].qs, *qh = x[i].qh;
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0; j < 8; j += 2, ql += 32, u1 = (uint8_t)(u1 << 2), u2 = (uint8_t)(u2 << 2)) {
            int sc, m;
            k4_unpack(j, x[i].scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            k4_unpack(j + 1, x[i].scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = dmin * (float)m;
            for (int l = 0; l < 32; l++)
                *y++ = d1 * (float)((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * (float)((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
        }
    }
}

void lmq_q_q5_K_from_float(const float *x, void *vy, int64_t n, const float *qw)
{
    lmq_block_q5_K *y = vy;
    uint8_t L[LMQ_QK_K];
    for (int64_t i = 0; i < n / LMQ_QK_K; i++, x += LMQ_QK_K) {
        k45_quantize(x, qw ? qw + i * LMQ_QK_K : NULL, 31, &y[i].d, &y[i].dmin, y[i].scales, L);
        lmq_q_q5_K_codes(&y[i], L);
    }
}

void lmq_q_q5_K_codes(void *vy, const uint8_t *L)
{
    lmq_block_q5_K *y = vy;
    /* as q4_K for the low 4 bits; the 5th bit of value 64*j + l goes to
     * qh[l] bit 2*j, of value 64*j + 32 + l to bit 2*j + 1 */
    memset(y->qh, 0, sizeof y->qh);
    for (int j = 0; j < 4; j++) {
        for (int l = 0; l < 32; l++) {
            const int l1 = L[64 * j + l], l2 = L[64 * j + l + 32];
            y->qs[32 * j + l] = (uint8_t)((l1 & 0xF) | ((l2 & 0xF) << 4));
            y->qh[l] |= (uint8_t)(((l1 >> 4) << (2 * j)) | ((l2 >> 4) << (2 * j + 1)));
        }
    }
}

/* ======================================================================
 * q6_K: 16 x 16, x = d*sc*(q-32), int8 sc, 6-bit q (4 low in ql, 2 in qh)
 * ====================================================================== */

void lmq_q_q6_K_to_float(const void *vx, float *y, int64_t n)
{
    const lmq_block_q6_K *x = vx;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        const float d = lmq_fp16_to_fp32(x[i].d);
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int half = 0; half < 2; half++, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * (float)sc[is] * (float)q1;
                y[l + 32] = d * (float)sc[is + 2] * (float)q2;
                y[l + 64] = d * (float)sc[is + 4] * (float)q3;
                y[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        }
    }
}

void lmq_q_q6_K_from_float(const float *x, void *vy, int64_t n, const float *qw)
{
    lmq_block_q6_K *y = vy;
    uint8_t L[LMQ_QK_K], Ls[16];
    float w[LMQ_QK_K], sw[16], sc[16];
    for (int64_t i = 0; i < n / LMQ_QK_K; i++, x += LMQ_QK_K) {
        float amax = 0.0f;
        /* ggml uses the importance weights as they are here */
        for (int l = 0; l < LMQ_QK_K; l++) w[l] = qw ? qw[i * LMQ_QK_K + l] : 1.0f;
        for (int j = 0; j < 16; j++) {
            const float *xs = x + 16 * j;
            sw[j] = sum_f(w + 16 * j, 16);
            sc[j] = lmq_qx_search(16, 32, xs, L + 16 * j, w + 16 * j);
            amax = fabsf(sc[j]) > amax ? fabsf(sc[j]) : amax;
        }
        if (amax < LMQ_GROUP_MAX_EPS) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        /* 8-bit scales: Ls - 128 in [-128, 127] */
        y[i].d = lmq_f16_sat(lmq_qx_search(16, 128, sc, Ls, sw));
        const float d = lmq_fp16_to_fp32(y[i].d);
        for (int j = 0; j < 16; j++) {
            const float *xs = x + 16 * j;
            const int s = refine_sym(xs, w + 16 * j, 16, -32, 31, d, (int)Ls[j] - 128, -128, 127);
            y[i].scales[j] = (int8_t)s;
            sym_pick(xs, 16, -32, 31, d * (float)s, L + 16 * j);
        }
        lmq_q_q6_K_codes(&y[i], L);
    }
}

void lmq_q_q6_K_codes(void *vy, const uint8_t *L)
{
    lmq_block_q6_K *y = vy;
    /* per 128 values: ql[l] = low nibbles of L[l] | L[l+64] << 4,
     * ql[l+32] = L[l+32] | L[l+96] << 4, qh[l] = the four top-2-bit pairs */
    for (int h = 0; h < 2; h++) {
        const uint8_t *Lh = L + 128 * h;
        uint8_t *ql = y->ql + 64 * h, *qh = y->qh + 32 * h;
        for (int l = 0; l < 32; l++) {
            ql[l] = (uint8_t)((Lh[l] & 0xF) | ((Lh[l + 64] & 0xF) << 4));
            ql[l + 32] = (uint8_t)((Lh[l + 32] & 0xF) | ((Lh[l + 96] & 0xF) << 4));
            qh[l] = (uint8_t)((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) |
                              ((Lh[l + 96] >> 4) << 6));
        }
    }
}

/* ======================================================================
 * iq4_xs: 8 x 32, x = d*(sc-32)*grid[q], 6-bit sc (4 low in scales_l,
 * 2 high in scales_h)
 * ====================================================================== */

static inline int iq4xs_scale(const lmq_block_iq4_xs *b, int ib)
{
    return (((b->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((b->scales_h >> (2 * ib)) & 3) << 4)) -
           32;
}

void lmq_q_iq4_xs_to_float(const void *vx, float *y, int64_t n)
{
    const lmq_block_iq4_xs *x = vx;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        const float d = lmq_fp16_to_fp32(x[i].d);
        const uint8_t *qs = x[i].qs;
        for (int ib = 0; ib < 8; ib++, y += 32, qs += 16) {
            const float dl = d * (float)iq4xs_scale(&x[i], ib);
            for (int j = 0; j < 16; j++) {
                y[j] = dl * (float)lmq_iq4nl_values[qs[j] & 0xF];
                y[j + 16] = dl * (float)lmq_iq4nl_values[qs[j] >> 4];
            }
        }
    }
}

/* Best 6-bit scale (-32..31) around sc for one sub-block, super scale d. */
static int iq4_refine(const float *x, const float *w, float d, int sc)
{
    float best = lmq_iq4_err(32, x, w, d * (float)sc);
    for (int dir = -1; dir <= 1; dir += 2) {
        for (int s = sc + dir; s >= -32 && s <= 31; s += dir) {
            const float e = lmq_iq4_err(32, x, w, d * (float)s);
            if (!(e < best)) break;
            best = e;
            sc = s;
        }
    }
    return sc;
}

void lmq_q_iq4_xs_from_float(const float *x, void *vy, int64_t n, const float *qw)
{
    lmq_block_iq4_xs *y = vy;
    uint8_t L[LMQ_QK_K], Ls[8];
    float w[LMQ_QK_K], sw[8], sc[8];
    for (int64_t i = 0; i < n / LMQ_QK_K; i++, x += LMQ_QK_K) {
        const float sigma2 = 2.0f * lmq_sum_sq(x, LMQ_QK_K) / LMQ_QK_K;
        for (int ib = 0; ib < 8; ib++) {
            const float *xs = x + 32 * ib;
            sw[ib] = kq_weights(xs, qw ? qw + i * LMQ_QK_K + 32 * ib : NULL, sigma2, w + 32 * ib, 32);
            sc[ib] = lmq_iq4_search(32, xs, w + 32 * ib, L + 32 * ib);
        }
        y[i].d = lmq_f16_sat(lmq_qx_search(8, 32, sc, Ls, sw));
        const float d = lmq_fp16_to_fp32(y[i].d);
        y[i].scales_h = 0;
        memset(y[i].scales_l, 0, sizeof y[i].scales_l);
        for (int ib = 0; ib < 8; ib++) {
            Ls[ib] = (uint8_t)(iq4_refine(x + 32 * ib, w + 32 * ib, d, (int)Ls[ib] - 32) + 32);
            y[i].scales_l[ib / 2] |= (uint8_t)((Ls[ib] & 0xF) << (4 * (ib % 2)));
            y[i].scales_h |= (uint16_t)((Ls[ib] >> 4) << (2 * ib));
            const float idl = lmq_inv(d * (float)((int)Ls[ib] - 32));
            for (int l = 0; l < 32; l++)
                L[32 * ib + l] = (uint8_t)lmq_iq4_best_index(lmq_iq4nl_values, idl * x[32 * ib + l]);
        }
        lmq_q_iq4_xs_codes(&y[i], L);
    }
}

void lmq_q_iq4_xs_codes(void *vy, const uint8_t *L)
{
    lmq_block_iq4_xs *y = vy;
    for (int ib = 0; ib < 8; ib++)
        for (int j = 0; j < 16; j++)
            y->qs[16 * ib + j] = (uint8_t)(L[32 * ib + j] | (L[32 * ib + 16 + j] << 4));
}

/* ======================================================================
 * Grids of stored super-blocks (error feedback, quantize/gptq.c): element
 * l takes the values a[l] * v(c) + b[l], c a code of the _codes() packer.
 * ====================================================================== */

void lmq_q_q2_K_codes(void *vy, const uint8_t *L)
{
    pack_2bit(L, ((lmq_block_q2_K *)vy)->qs);
}

void lmq_q_q2_K_grid(const void *vx, lmq_qgrid *g)
{
    const lmq_block_q2_K *x = vx;
    const float d = lmq_fp16_to_fp32(x->d), dmin = lmq_fp16_to_fp32(x->dmin);
    *g = (lmq_qgrid){.n = LMQ_QK_K, .nq = 4, .voff = 0};
    for (int l = 0; l < LMQ_QK_K; l++) {
        const uint8_t sc = x->scales[l / 16];
        g->a[l] = d * (float)(sc & 0xF);
        g->b[l] = -dmin * (float)(sc >> 4);
    }
}

void lmq_q_q3_K_grid(const void *vx, lmq_qgrid *g)
{
    const lmq_block_q3_K *x = vx;
    const float d = lmq_fp16_to_fp32(x->d);
    *g = (lmq_qgrid){.n = LMQ_QK_K, .nq = 8, .voff = -4};
    for (int l = 0; l < LMQ_QK_K; l++) {
        g->a[l] = d * (float)k3_unpack(l / 16, x->scales);
        g->b[l] = 0.0f;
    }
}

static void k45_grid(uint16_t dh, uint16_t dminh, const uint8_t *scales, int nq, lmq_qgrid *g)
{
    const float d = lmq_fp16_to_fp32(dh), dmin = lmq_fp16_to_fp32(dminh);
    *g = (lmq_qgrid){.n = LMQ_QK_K, .nq = nq, .voff = 0};
    for (int l = 0; l < LMQ_QK_K; l++) {
        int sc, m;
        k4_unpack(l / 32, scales, &sc, &m);
        g->a[l] = d * (float)sc;
        g->b[l] = -dmin * (float)m;
    }
}

void lmq_q_q4_K_grid(const void *vx, lmq_qgrid *g)
{
    const lmq_block_q4_K *x = vx;
    k45_grid(x->d, x->dmin, x->scales, 16, g);
}

void lmq_q_q5_K_grid(const void *vx, lmq_qgrid *g)
{
    const lmq_block_q5_K *x = vx;
    k45_grid(x->d, x->dmin, x->scales, 32, g);
}

void lmq_q_q6_K_grid(const void *vx, lmq_qgrid *g)
{
    const lmq_block_q6_K *x = vx;
    const float d = lmq_fp16_to_fp32(x->d);
    *g = (lmq_qgrid){.n = LMQ_QK_K, .nq = 64, .voff = -32};
    for (int l = 0; l < LMQ_QK_K; l++) {
        g->a[l] = d * (float)x->scales[l / 16];
        g->b[l] = 0.0f;
    }
}

void lmq_q_iq4_xs_grid(const void *vx, lmq_qgrid *g)
{
    const lmq_block_iq4_xs *x = vx;
    const float d = lmq_fp16_to_fp32(x->d);
    *g = (lmq_qgrid){.n = LMQ_QK_K, .nq = 16, .table = lmq_iq4nl_values};
    for (int l = 0; l < LMQ_QK_K; l++) {
        g->a[l] = d * (float)iq4xs_scale(x, l / 32);
        g->b[l] = 0.0f;
    }
}

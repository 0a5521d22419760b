/* AVX2 variants of the quantizers' hot loops (quant_internal.h, "SIMD
 * variants"). Compiled with -mavx2 -ffp-contract=off and called only after
 * quant_dispatch.c checked the CPU. Each computes, lane for lane, the float
 * operations of its scalar reference in the same order (an 8-lane register
 * is the reference's 8 partial sums; no FMA), so the bytes are the
 * reference's; tests/test_quant_simd.c checks that. */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "quant_internal.h"

/* round to nearest even as the reference's rnd(): (v + 1.5*2^23) - 1.5*2^23 */
static inline __m256 rnd8(__m256 v)
{
    const __m256 m = _mm256_set1_ps(12582912.0f);
    return _mm256_sub_ps(_mm256_add_ps(v, m), m);
}

/* the reference's clampf: (v < lo ? lo : v), then (v > hi ? hi : v);
 * maxps(a, b) is a > b ? a : b, minps(a, b) a < b ? a : b */
static inline __m256 clamp8(__m256 v, __m256 lo, __m256 hi)
{
    return _mm256_min_ps(hi, _mm256_max_ps(lo, v));
}

/* lane_sum(): ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)) */
static inline float hsum8(__m256 a)
{
    const __m128 v = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 t = _mm_add_ps(v, _mm_movehl_ps(v, v));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

static void csums_avx2(int n, const float *xm, const float *w, const float *wx, int nc, const float *isc, float lo,
                       float hi, lmq_csum3 *S)
{
    if (n % 8 || n > 256) {
        lmq_q_csums_ref(n, xm, w, wx, nc, isc, lo, hi, S);
        return;
    }
    const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
    for (int c = 0; c < nc; c++) {
        const __m256 is = _mm256_set1_ps(isc[c]);
        __m256 a = _mm256_setzero_ps(), b = _mm256_setzero_ps(), d = _mm256_setzero_ps();
        for (int i = 0; i < n; i += 8) {
            const __m256 l = rnd8(clamp8(_mm256_mul_ps(is, _mm256_loadu_ps(xm + i)), vlo, vhi));
            const __m256 wl = _mm256_mul_ps(_mm256_loadu_ps(w + i), l);
            a = _mm256_add_ps(a, wl);
            b = _mm256_add_ps(b, _mm256_mul_ps(wl, l));
            d = _mm256_add_ps(d, _mm256_mul_ps(_mm256_loadu_ps(wx + i), l));
        }
        S[c][0] = hsum8(a);
        S[c][1] = hsum8(b);
        S[c][2] = hsum8(d);
    }
}

/* lmq_grid_err: q = rnd(clamp((x + ml) * idl)), d = (dl * q - ml) - x,
 * e += (w * d) * d per lane; the elements past the last multiple of 8 go
 * to lane 0 one by one. */
static void grid_errs_avx2(int n, const float *x, const float *w, int nc, const float *dl, const float *ml, float lo,
                           float hi, float *e)
{
    if (n > 256) {
        lmq_q_grid_errs_ref(n, x, w, nc, dl, ml, lo, hi, e);
        return;
    }
    const int nv = n / 8 * 8;
    const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
    for (int c = 0; c < nc; c++) {
        const float idl = lmq_inv(dl[c]);
        const __m256 vdl = _mm256_set1_ps(dl[c]), vml = _mm256_set1_ps(ml[c]), vidl = _mm256_set1_ps(idl);
        __m256 acc = _mm256_setzero_ps();
        for (int i = 0; i < nv; i += 8) {
            const __m256 xv = _mm256_loadu_ps(x + i);
            const __m256 q = rnd8(clamp8(_mm256_mul_ps(_mm256_add_ps(xv, vml), vidl), vlo, vhi));
            const __m256 d = _mm256_sub_ps(_mm256_sub_ps(_mm256_mul_ps(vdl, q), vml), xv);
            acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(w + i), d), d));
        }
        if (nv == n) {
            e[c] = hsum8(acc);
            continue;
        }
        float lanes[8];
        _mm256_storeu_ps(lanes, acc);
        for (int i = nv; i < n; i++) {
            float v = (x[i] + ml[c]) * idl;
            v = v < lo ? lo : v;
            v = v > hi ? hi : v;
            const float qi = (v + 12582912.0f) - 12582912.0f;
            const float d = dl[c] * qi - ml[c] - x[i];
            lanes[0] += w[i] * d * d;
        }
        e[c] = hsum8(_mm256_loadu_ps(lanes));
    }
}

/* Lanes are the sub-blocks (8 at a time): element l of every sub-block is
 * gathered, so each lane sums its own sub-block in element order. */
static void asym_sums_avx2(int nsub, int len, const float *x, const float *w, const float *ml, const float *idl,
                           int nmax, double S[][5])
{
    if (nsub != 8 && nsub != 16) {
        lmq_q_asym_sums_ref(nsub, len, x, w, ml, idl, nmax, S);
        return;
    }
    const __m256 zero = _mm256_setzero_ps(), vmax = _mm256_set1_ps((float)nmax);
    for (int j0 = 0; j0 < nsub; j0 += 8) {
        const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(len));
        const float *xb = x + len * j0, *wb = w + len * j0;
        const __m256 vml = _mm256_loadu_ps(ml + j0), vidl = _mm256_loadu_ps(idl + j0);
        __m256d acc[5][2];
        for (int k = 0; k < 5; k++) acc[k][0] = acc[k][1] = _mm256_setzero_pd();
        for (int l = 0; l < len; l++) {
            const __m256 xv = _mm256_i32gather_ps(xb + l, idx, 4), wv = _mm256_i32gather_ps(wb + l, idx, 4);
            const __m256 q = rnd8(clamp8(_mm256_mul_ps(_mm256_add_ps(xv, vml), vidl), zero, vmax));
            const __m256 wq = _mm256_mul_ps(wv, q);
            const __m256 p[5] = {_mm256_mul_ps(wq, q), wq, wv, _mm256_mul_ps(wq, xv), _mm256_mul_ps(wv, xv)};
            for (int k = 0; k < 5; k++) {
                acc[k][0] = _mm256_add_pd(acc[k][0], _mm256_cvtps_pd(_mm256_castps256_ps128(p[k])));
                acc[k][1] = _mm256_add_pd(acc[k][1], _mm256_cvtps_pd(_mm256_extractf128_ps(p[k], 1)));
            }
        }
        for (int k = 0; k < 5; k++) {
            double t[8];
            _mm256_storeu_pd(t, acc[k][0]);
            _mm256_storeu_pd(t + 4, acc[k][1]);
            for (int j = 0; j < 8; j++) S[j0 + j][k] = t[j];
        }
    }
}

/* The iq4 grid value nearest to v: grid[0] plus the steps whose midpoints
 * are <= v, added in the reference's order (adding 0 where one is not is
 * exact: no partial sum is zero). */
static inline __m256 iq4_value8(__m256 v)
{
    __m256 q = _mm256_set1_ps((float)lmq_iq4nl_values[0]);
    for (int s = 0; s < 15; s++) {
        const __m256 ge = _mm256_cmp_ps(v, _mm256_set1_ps(lmq_iq4_mid[s]), _CMP_GE_OQ);
        q = _mm256_add_ps(q, _mm256_and_ps(ge, _mm256_set1_ps(lmq_iq4_step[s])));
    }
    return q;
}

static void iq4_sums_avx2(int n, const float *x, const float *w, const float *wx, int nc, const float *id,
                          float S[][2])
{
    if (n % 8) {
        lmq_q_iq4_sums_ref(n, x, w, wx, nc, id, S);
        return;
    }
    for (int c = 0; c < nc; c++) {
        const __m256 vid = _mm256_set1_ps(id[c]);
        __m256 a = _mm256_setzero_ps(), b = _mm256_setzero_ps();
        for (int i = 0; i < n; i += 8) {
            const __m256 q = iq4_value8(_mm256_mul_ps(vid, _mm256_loadu_ps(x + i)));
            a = _mm256_add_ps(a, _mm256_mul_ps(_mm256_loadu_ps(wx + i), q));
            b = _mm256_add_ps(b, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(w + i), q), q));
        }
        S[c][0] = hsum8(a);
        S[c][1] = hsum8(b);
    }
}

static float iq4_err_avx2(int n, const float *x, const float *w, float dl)
{
    if (n % 8) return lmq_q_iq4_err_ref(n, x, w, dl);
    const float idl = lmq_inv(dl);
    const __m256 vidl = _mm256_set1_ps(idl), vdl = _mm256_set1_ps(dl);
    __m256 e = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) {
        const __m256 xv = _mm256_loadu_ps(x + i);
        const __m256 q = iq4_value8(_mm256_mul_ps(xv, vidl));
        const __m256 d = _mm256_sub_ps(_mm256_mul_ps(vdl, q), xv);
        e = _mm256_add_ps(e, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(w + i), d), d));
    }
    return hsum8(e);
}

/* 16 int32 (0..15 each, as two vectors of 8) to 16 bytes in order. */
static inline __m128i pack16(__m256i a, __m256i b)
{
    const __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xD8);
    return _mm_packus_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
}

/* ggml's q4_0 round to nearest: d = (the first element of largest
 * magnitude) / -8, q = trunc(clamp(x / d + 8.5, 0, 15)). */
static void q4_0_rtn_avx2(const float *x, void *vy, int64_t n)
{
    lmq_block_q4_0 *y = vy;
    const __m256 sign = _mm256_set1_ps(-0.0f), zero = _mm256_setzero_ps();
    const __m256 half8 = _mm256_set1_ps(8.5f), fifteen = _mm256_set1_ps(15.0f);
    for (int64_t i = 0; i < n / LMQ_QK4_0; i++, x += LMQ_QK4_0) {
        __m256 v[4], a[4];
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(x + 8 * k);
            a[k] = _mm256_andnot_ps(sign, v[k]);
        }
        __m256 m = _mm256_max_ps(_mm256_max_ps(a[0], a[1]), _mm256_max_ps(a[2], a[3]));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
        const float amax = _mm_cvtss_f32(m4);
        float max = 0.0f;
        if (amax > 0.0f) { /* the first element whose magnitude is amax */
            const __m256 am = _mm256_set1_ps(amax);
            uint32_t bits = 0;
            for (int k = 0; k < 4; k++)
                bits |= (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(a[k], am, _CMP_EQ_OQ)) << (8 * k);
            max = x[__builtin_ctz(bits)];
        }
        const __m256 id = _mm256_set1_ps(lmq_store_scale(&y[i].d, max / -8.0f));
        __m256i q[4];
        for (int k = 0; k < 4; k++) {
            const __m256 t = _mm256_add_ps(_mm256_mul_ps(v[k], id), half8);
            q[k] = _mm256_cvttps_epi32(_mm256_min_ps(fifteen, _mm256_max_ps(zero, t)));
        }
        const __m256i lo = _mm256_or_si256(q[0], _mm256_slli_epi32(q[2], 4));
        const __m256i hi = _mm256_or_si256(q[1], _mm256_slli_epi32(q[3], 4));
        _mm_storeu_si128((__m128i *)(void *)y[i].qs, pack16(lo, hi));
    }
}

void lmq_q_fill_avx2(lmq_qsimd *t)
{
    t->csums = csums_avx2;
    t->grid_errs = grid_errs_avx2;
    t->asym_sums = asym_sums_avx2;
    t->iq4_sums = iq4_sums_avx2;
    t->iq4_err = iq4_err_avx2;
    t->q4_0_rtn = q4_0_rtn_avx2;
}
#endif

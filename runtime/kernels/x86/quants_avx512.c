/* AVX-512 (F/BW/VL/DQ + VNNI) kernels: the shared bodies of x86_dots.h and
 * x86_act.h compiled with vpdpbusd for the u8 x s8 dots (on ymm registers,
 * 32 of them under AVX-512VL), and 512-bit kernels for the K-quants, which
 * measured faster than the 256-bit ones (docs/PERF.md).
 *
 * q4_0, q5_0, q8_0 and iq4_nl have 512-bit tile kernels in q32_avx512.c.
 *
 * The 512-bit K-quant kernels handle 64 quants per instruction: vpmaddubsw
 * gives 32 pair sums (int16), and vpdpwssd multiplies them by the 16-bit
 * sub-block scales (broadcast per lane with vpermw) and accumulates int32. */
#include "kernels.h"
#include "x86_act.h"
#include "x86_dots.h"

static void lmq_vec_dot_f32_avx512(int64_t n, float *s, const void *w, const void *a)
{
    *s = kx_dot_f32(w, a, n);
}

static void lmq_vec_dot_f16_avx512(int64_t n, float *s, const void *w, const void *a)
{
    *s = kx_dot_f16_f16(w, a, n);
}

static void lmq_vec_dot_bf16_avx512(int64_t n, float *s, const void *w, const void *a)
{
    *s = kx_dot_bf16_bf16(w, a, n);
}

static void lmq_vec_dot_q4_1_avx512(int64_t n, float *s, const void *w, const void *a)
{
    kx_vec_dot_q4_1(n, s, w, a);
}

static void lmq_vec_dot_q5_1_avx512(int64_t n, float *s, const void *w, const void *a)
{
    kx_vec_dot_q5_1(n, s, w, a);
}

/* q8_0: the 256-bit body (with VNNI) streams faster than the 512-bit tile's
 * 1 x 1 instance (docs/PERF.md); batches of 16 tokens and more take the
 * panel path, so q8_0 has no tile kernel here. */
static void vec_dot_q8_0_avx512y(int64_t n, float *s, const void *w, const void *a)
{
    kx_vec_dot_q8_0(n, s, w, a);
}

static void vec_dot4_q8_0_avx512y(int64_t n, float *s, int64_t ss, const void *w, const void *a, int64_t as)
{
    kx_vec_dot4_q8_0(n, s, ss, w, a, as);
}

static void lmq_vec_dot_iq4_xs_avx512(int64_t n, float *s, const void *w, const void *a)
{
    kx_vec_dot_iq4_xs(n, s, w, a);
}

/* ================================================================
 * 512-bit K-quant kernels
 * ================================================================ */

static inline float hsum512(__m512 v)
{
    return _mm512_reduce_add_ps(v);
}

/* int16 lane k of the result = sc[idx(k)], for 8 scales held as int16 */
static inline __m512i scale_lanes(__m512i sc16, __m512i idx)
{
    return _mm512_permutexvar_epi16(idx, sc16);
}

/* pair lanes 0..15 take scale a, lanes 16..31 scale a + 1 (64 quants of
 * two 32-quant sub-blocks) */
static inline __m512i idx_halves(int a)
{
    return _mm512_inserti64x4(_mm512_set1_epi16((int16_t)a), _mm256_set1_epi16((int16_t)(a + 1)), 1);
}

/* pair lanes 8k..8k+7 take scale a + k (64 quants of four 16-quant groups) */
static inline __m512i idx_quarters(int a)
{
    const long long r = 0x0001000100010001LL;
    return _mm512_set_epi64((a + 3) * r, (a + 3) * r, (a + 2) * r, (a + 2) * r, (a + 1) * r, (a + 1) * r, a * r, a * r);
}

/* 32 bytes of packed nibbles -> 64 quants: low nibbles then high nibbles */
static inline __m512i nibbles64(const uint8_t *p)
{
    const __m256i b = _mm256_loadu_si256((const __m256i *)p);
    const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(b), _mm256_srli_epi16(b, 4), 1);
    return _mm512_and_si512(z, _mm512_set1_epi8(0x0F));
}

/* Every K-quant block is unpacked into 4 chunks of 64 quants (unsigned,
 * q[j] against q8[64j .. 64j+63]) with their int16 scale lanes; the int
 * part of the dot is then the same for all of them. */
typedef struct kz_block {
    __m512i q[4];
    __m512i s[4];
} kz_block;

static inline __m512i kz_isum(const kz_block *b, const int8_t *q8)
{
    __m512i isum = _mm512_setzero_si512();
    for (int j = 0; j < 4; j++)
        isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(b->q[j], _mm512_loadu_si512(q8 + 64 * j)), b->s[j]);
    return isum;
}

/* The 4-token kernels (vec_dot4) unpack a block once and dot it with four
 * activation rows; per token they do exactly the float operations of the
 * 1-token kernel, so the results are identical. */
#define KZ_Y(k) ((const lmq_block_q8_K *)((const uint8_t *)va + (k) * a_stride))

static inline void q4k_unpack(const lmq_block_q4_K *x, kz_block *b, __m128i *sm)
{
    *sm = x86_k4_scales(x->scales);
    const __m512i sc = _mm512_castsi128_si512(_mm_cvtepu8_epi16(*sm));
    for (int j = 0; j < 4; j++) {
        b->q[j] = nibbles64(x->qs + 32 * j);
        b->s[j] = scale_lanes(sc, idx_halves(2 * j));
    }
}

static inline void q5k_unpack(const lmq_block_q5_K *x, kz_block *b, __m128i *sm)
{
    *sm = x86_k4_scales(x->scales);
    const __m512i sc = _mm512_castsi128_si512(_mm_cvtepu8_epi16(*sm));
    const __m256i hb = _mm256_loadu_si256((const __m256i *)x->qh);
    for (int j = 0; j < 4; j++) {
        /* bit 2j of qh[l] is the 5th bit of quant l, bit 2j+1 that of quant l+32 */
        const __m512i h = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_srli_epi16(hb, 2 * j)),
                                             _mm256_srli_epi16(hb, 2 * j + 1), 1);
        b->q[j] = _mm512_or_si512(nibbles64(x->qs + 32 * j), _mm512_and_si512(_mm512_slli_epi16(h, 4), _mm512_set1_epi8(0x10)));
        b->s[j] = scale_lanes(sc, idx_halves(2 * j));
    }
}

/* q4_K and q5_K share the epilogue: d * isum in float lanes, mins apart */
static inline void k45_step(__m512 *acc, float *summ, const kz_block *b, __m128i sm, float d, float dmin,
                            const lmq_block_q8_K *y)
{
    const __m512i isum = kz_isum(b, y->qs);
    *acc = _mm512_fmadd_ps(_mm512_set1_ps(y->d * d), _mm512_cvtepi32_ps(isum), *acc);
    *summ += y->d * dmin * (float)kx_k4_mins(_mm_srli_si128(sm, 8), y->bsums);
}

static void vec_dot_q4_K_avx512z(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q4_K *x = vw;
    const lmq_block_q8_K *y = va;
    __m512 acc = _mm512_setzero_ps();
    float summ = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        kz_block b;
        __m128i sm;
        q4k_unpack(&x[i], &b, &sm);
        k45_step(&acc, &summ, &b, sm, x86_h2f(x[i].d), x86_h2f(x[i].dmin), &y[i]);
    }
    *s = hsum512(acc) - summ;
}

static void vec_dot4_q4_K_avx512z(int64_t n, float *s, int64_t s_stride, const void *vw, const void *va,
                                  int64_t a_stride)
{
    const lmq_block_q4_K *x = vw;
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    float summ[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        kz_block b;
        __m128i sm;
        q4k_unpack(&x[i], &b, &sm);
        const float d = x86_h2f(x[i].d), dmin = x86_h2f(x[i].dmin);
        for (int k = 0; k < 4; k++) k45_step(&acc[k], &summ[k], &b, sm, d, dmin, &KZ_Y(k)[i]);
    }
    for (int k = 0; k < 4; k++) s[k * s_stride] = hsum512(acc[k]) - summ[k];
}

static void vec_dot_q5_K_avx512z(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q5_K *x = vw;
    const lmq_block_q8_K *y = va;
    __m512 acc = _mm512_setzero_ps();
    float summ = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        kz_block b;
        __m128i sm;
        q5k_unpack(&x[i], &b, &sm);
        k45_step(&acc, &summ, &b, sm, x86_h2f(x[i].d), x86_h2f(x[i].dmin), &y[i]);
    }
    *s = hsum512(acc) - summ;
}

static void vec_dot4_q5_K_avx512z(int64_t n, float *s, int64_t s_stride, const void *vw, const void *va,
                                  int64_t a_stride)
{
    const lmq_block_q5_K *x = vw;
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    float summ[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        kz_block b;
        __m128i sm;
        q5k_unpack(&x[i], &b, &sm);
        const float d = x86_h2f(x[i].d), dmin = x86_h2f(x[i].dmin);
        for (int k = 0; k < 4; k++) k45_step(&acc[k], &summ[k], &b, sm, d, dmin, &KZ_Y(k)[i]);
    }
    for (int k = 0; k < 4; k++) s[k * s_stride] = hsum512(acc[k]) - summ[k];
}

/* q6_K: u = q + 32 in 0..63 (4 low bits | 2 high bits << 4). Quants 0..31
 * of a half take qh bits 0-1 (<< 4), 32..63 bits 2-3 (<< 2), 64..95 bits
 * 4-5 (>> 0), 96..127 bits 6-7 (>> 2). */
static inline void q6k_unpack(const lmq_block_q6_K *x, kz_block *b)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    const __m512i shl = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i shr = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1);
    for (int k = 0; k < 2; k++) {
        const __m512i sc = _mm512_castsi128_si512(_mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(x->scales + 8 * k))));
        const __m512i L = _mm512_loadu_si512(x->ql + 64 * k);
        const __m256i h256 = _mm256_loadu_si256((const __m256i *)(x->qh + 32 * k));
        const __m512i H = _mm512_inserti64x4(_mm512_castsi256_si512(h256), h256, 1);
        b->q[2 * k] = _mm512_or_si512(_mm512_and_si512(L, m4), _mm512_and_si512(_mm512_sllv_epi16(H, shl), m30));
        b->q[2 * k + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L, 4), m4),
                                          _mm512_and_si512(_mm512_srlv_epi16(H, shr), m30));
        b->s[2 * k] = scale_lanes(sc, idx_quarters(0));
        b->s[2 * k + 1] = scale_lanes(sc, idx_quarters(4));
    }
}

/* q3_K: u = q + 4 in 0..7 (2 low bits | high bit << 2); chunk j holds the
 * 32-quant parts c = 2j and 2j + 1 (shifts 2c mod 8 of qs[32 (c / 4) ..]). */
static inline void q3k_unpack(const lmq_block_q3_K *x, kz_block *b, __m256i *sc256)
{
    const __m512i m3 = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4);
    *sc256 = _mm256_cvtepi8_epi16(x86_q3k_scales(x->scales));
    const __m512i sc = _mm512_castsi256_si512(*sc256);
    const __m256i hm = _mm256_loadu_si256((const __m256i *)x->hmask);
    for (int j = 0; j < 4; j++) {
        const int c = 2 * j, sh = 2 * (c % 4);
        const __m256i q2 = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * (c / 4)));
        const __m512i q = _mm512_and_si512(
            _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_srli_epi16(q2, sh)), _mm256_srli_epi16(q2, sh + 2), 1), m3);
        const __m512i h = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_slli_epi16(_mm256_srli_epi16(hm, c), 2)),
                                             _mm256_slli_epi16(_mm256_srli_epi16(hm, c + 1), 2), 1);
        b->q[j] = _mm512_or_si512(q, _mm512_and_si512(h, four));
        b->s[j] = scale_lanes(sc, idx_quarters(2 * c));
    }
}

/* q2_K: 2-bit quants with 4-bit scales (low nibbles) and mins (high). */
static inline void q2k_unpack(const lmq_block_q2_K *x, kz_block *b, __m256i *mins)
{
    const __m512i m3 = _mm512_set1_epi8(3);
    const __m128i scv = _mm_loadu_si128((const __m128i *)x->scales);
    const __m512i sc = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(scv, _mm_set1_epi8(0x0F))));
    *mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(scv, 4), _mm_set1_epi8(0x0F)));
    for (int j = 0; j < 4; j++) {
        const int c = 2 * j, sh = 2 * (c % 4);
        const __m256i q2 = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * (c / 4)));
        b->q[j] = _mm512_and_si512(
            _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_srli_epi16(q2, sh)), _mm256_srli_epi16(q2, sh + 2), 1), m3);
        b->s[j] = scale_lanes(sc, idx_quarters(2 * c));
    }
}

static inline int madd_bsums(__m256i sc16, const lmq_block_q8_K *y)
{
    return x86_hsum_epi32(_mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)y->bsums)));
}

static inline float q6k_term(const kz_block *b, const lmq_block_q6_K *x, const lmq_block_q8_K *y)
{
    const int total = _mm512_reduce_add_epi32(kz_isum(b, y->qs)) - 32 * kx_scaled_bsums(x->scales, y->bsums);
    return (x86_h2f(x->d) * y->d) * (float)total;
}

static inline float q3k_term(const kz_block *b, __m256i sc256, const lmq_block_q3_K *x, const lmq_block_q8_K *y)
{
    const int total = _mm512_reduce_add_epi32(kz_isum(b, y->qs)) - 4 * madd_bsums(sc256, y);
    return (x86_h2f(x->d) * y->d) * (float)total;
}

static inline float q2k_term(const kz_block *b, __m256i mins, const lmq_block_q2_K *x, const lmq_block_q8_K *y)
{
    const float dall = y->d * x86_h2f(x->d), dmin = y->d * x86_h2f(x->dmin);
    return dall * (float)_mm512_reduce_add_epi32(kz_isum(b, y->qs)) - dmin * (float)madd_bsums(mins, y);
}

static void vec_dot_q6_K_avx512z(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q6_K *x = vw;
    const lmq_block_q8_K *y = va;
    float sumf = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        kz_block b;
        q6k_unpack(&x[i], &b);
        sumf += q6k_term(&b, &x[i], &y[i]);
    }
    *s = sumf;
}

static void vec_dot4_q6_K_avx512z(int64_t n, float *s, int64_t s_stride, const void *vw, const void *va,
                                  int64_t a_stride)
{
    const lmq_block_q6_K *x = vw;
    float sumf[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        kz_block b;
        q6k_unpack(&x[i], &b);
        for (int k = 0; k < 4; k++) sumf[k] += q6k_term(&b, &x[i], &KZ_Y(k)[i]);
    }
    for (int k = 0; k < 4; k++) s[k * s_stride] = sumf[k];
}

static void vec_dot_q3_K_avx512z(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q3_K *x = vw;
    const lmq_block_q8_K *y = va;
    float sumf = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        kz_block b;
        __m256i sc;
        q3k_unpack(&x[i], &b, &sc);
        sumf += q3k_term(&b, sc, &x[i], &y[i]);
    }
    *s = sumf;
}

static void vec_dot4_q3_K_avx512z(int64_t n, float *s, int64_t s_stride, const void *vw, const void *va,
                                  int64_t a_stride)
{
    const lmq_block_q3_K *x = vw;
    float sumf[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        kz_block b;
        __m256i sc;
        q3k_unpack(&x[i], &b, &sc);
        for (int k = 0; k < 4; k++) sumf[k] += q3k_term(&b, sc, &x[i], &KZ_Y(k)[i]);
    }
    for (int k = 0; k < 4; k++) s[k * s_stride] = sumf[k];
}

static void vec_dot_q2_K_avx512z(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q2_K *x = vw;
    const lmq_block_q8_K *y = va;
    float sumf = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        kz_block b;
        __m256i mins;
        q2k_unpack(&x[i], &b, &mins);
        sumf += q2k_term(&b, mins, &x[i], &y[i]);
    }
    *s = sumf;
}

static void vec_dot4_q2_K_avx512z(int64_t n, float *s, int64_t s_stride, const void *vw, const void *va,
                                  int64_t a_stride)
{
    const lmq_block_q2_K *x = vw;
    float sumf[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        kz_block b;
        __m256i mins;
        q2k_unpack(&x[i], &b, &mins);
        for (int k = 0; k < 4; k++) sumf[k] += q2k_term(&b, mins, &x[i], &KZ_Y(k)[i]);
    }
    for (int k = 0; k < 4; k++) s[k * s_stride] = sumf[k];
}

#undef KZ_Y

/* 32 fp8 codes as binary16 (see kx_load_f8): 32 x int16 lanes */
static inline __m512i f8_to_f16_x32(const uint8_t *p, int e4m3)
{
    const __m512i c = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)p));
    if (!e4m3) return _mm512_slli_epi16(c, 8);
    return _mm512_or_si512(_mm512_slli_epi16(_mm512_and_si512(c, _mm512_set1_epi16(0x80)), 8),
                           _mm512_slli_epi16(_mm512_and_si512(c, _mm512_set1_epi16(0x7F)), 7));
}

static void vec_dot_f8_avx512z(int64_t n, float *s, const void *vw, const float *a, int e4m3)
{
    const lmq_block_f8 *w = vw;
    __m512 acc = _mm512_setzero_ps();
    const float adj = e4m3 ? 256.0f : 1.0f;
    for (int64_t i = 0; i < n / LMQ_QK_F8; i++, a += LMQ_QK_F8) {
        const __m512i h = f8_to_f16_x32(w[i].qs, e4m3);
        __m512 b = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(h)), _mm512_loadu_ps(a));
        b = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1)), _mm512_loadu_ps(a + 16), b);
        acc = _mm512_fmadd_ps(_mm512_set1_ps(lmq_e8m0_to_fp32(w[i].e) * adj), b, acc);
    }
    *s = hsum512(acc);
}

static void vec_dot_f8_e4m3_avx512z(int64_t n, float *s, const void *w, const void *a)
{
    vec_dot_f8_avx512z(n, s, w, a, 1);
}

static void vec_dot_f8_e5m2_avx512z(int64_t n, float *s, const void *w, const void *a)
{
    vec_dot_f8_avx512z(n, s, w, a, 0);
}

static void quantize_q8_0_avx512(const float *x, void *y, int64_t n)
{
    kx_quantize_q8_0(x, y, n);
}

static void quantize_q8_1_avx512(const float *x, void *y, int64_t n)
{
    kx_quantize_q8_1(x, y, n);
}

static void quantize_q8_K_avx512(const float *x, void *y, int64_t n)
{
    kx_quantize_q8_K(x, y, n);
}

static void to_float_q8_0_avx512(const void *x, float *y, int64_t n)
{
    kx_q8_0_to_f32(x, y, n);
}

static void to_float_q4_0_avx512(const void *x, float *y, int64_t n)
{
    kx_q4_0_to_f32(x, y, n);
}

static void to_float_f16_avx512(const void *x, float *y, int64_t n)
{
    kx_f16_to_f32(x, y, n);
}

static void to_float_bf16_avx512(const void *x, float *y, int64_t n)
{
    kx_bf16_to_f32(x, y, n);
}

static void to_float_f8_e4m3_avx512(const void *x, float *y, int64_t n)
{
    kx_f8_to_f32(x, y, n, 1);
}

static void to_float_f8_e5m2_avx512(const void *x, float *y, int64_t n)
{
    kx_f8_to_f32(x, y, n, 0);
}

static void vec_dot_mxfp4_avx512(int64_t n, float *s, const void *w, const void *a)
{
    kx_vec_dot_mxfp4(n, s, w, a);
}

static void vec_dot4_mxfp4_avx512(int64_t n, float *s, int64_t ss, const void *w, const void *a, int64_t as)
{
    kx_vec_dot4_mxfp4(n, s, ss, w, a, as);
}

static void to_float_mxfp4_avx512(const void *x, float *y, int64_t n)
{
    kx_mxfp4_to_f32(x, y, n);
}

static float dot_f32_avx512(const float *a, const float *b, int64_t n)
{
    return kx_dot_f32(a, b, n);
}

static float dot_f16_f32_avx512(const uint16_t *a, const float *b, int64_t n)
{
    return kx_dot_f16_f32(a, b, n);
}

static void axpy_f32_avx512(float *y, float alpha, const float *x, int64_t n)
{
    kx_axpy_f32(y, alpha, x, n);
}

static void axpy_f16_avx512(float *y, float alpha, const uint16_t *x, int64_t n)
{
    kx_axpy_f16(y, alpha, x, n);
}

static float softmax_avx512(float *x, int64_t n)
{
    return kx_softmax(x, n);
}

void lmq_kernels_fill_avx512(lmq_kernel_table *t)
{
    t->isa = LMQ_ISA_AVX512;
    t->vec_dot[LMQ_TYPE_F32] = lmq_vec_dot_f32_avx512;
    t->vec_dot[LMQ_TYPE_F16] = lmq_vec_dot_f16_avx512;
    t->vec_dot[LMQ_TYPE_BF16] = lmq_vec_dot_bf16_avx512;
    t->vec_dot[LMQ_TYPE_Q4_1] = lmq_vec_dot_q4_1_avx512;
    t->vec_dot[LMQ_TYPE_Q5_1] = lmq_vec_dot_q5_1_avx512;
    t->vec_dot[LMQ_TYPE_Q2_K] = vec_dot_q2_K_avx512z;
    t->vec_dot[LMQ_TYPE_Q3_K] = vec_dot_q3_K_avx512z;
    t->vec_dot[LMQ_TYPE_Q4_K] = vec_dot_q4_K_avx512z;
    t->vec_dot[LMQ_TYPE_Q5_K] = vec_dot_q5_K_avx512z;
    t->vec_dot[LMQ_TYPE_Q6_K] = vec_dot_q6_K_avx512z;
    t->vec_dot[LMQ_TYPE_IQ4_XS] = lmq_vec_dot_iq4_xs_avx512;
    t->vec_dot[LMQ_TYPE_F8_E4M3] = vec_dot_f8_e4m3_avx512z;
    t->vec_dot[LMQ_TYPE_F8_E5M2] = vec_dot_f8_e5m2_avx512z;
    t->vec_dot4[LMQ_TYPE_Q2_K] = vec_dot4_q2_K_avx512z;
    t->vec_dot4[LMQ_TYPE_Q3_K] = vec_dot4_q3_K_avx512z;
    t->vec_dot4[LMQ_TYPE_Q4_K] = vec_dot4_q4_K_avx512z;
    t->vec_dot4[LMQ_TYPE_Q5_K] = vec_dot4_q5_K_avx512z;
    t->vec_dot4[LMQ_TYPE_Q6_K] = vec_dot4_q6_K_avx512z;
    t->to_float[LMQ_TYPE_F16] = to_float_f16_avx512;
    t->to_float[LMQ_TYPE_Q8_0] = to_float_q8_0_avx512;
    t->to_float[LMQ_TYPE_Q4_0] = to_float_q4_0_avx512;
    t->to_float[LMQ_TYPE_BF16] = to_float_bf16_avx512;
    t->to_float[LMQ_TYPE_F8_E4M3] = to_float_f8_e4m3_avx512;
    t->to_float[LMQ_TYPE_F8_E5M2] = to_float_f8_e5m2_avx512;
    t->from_float[LMQ_TYPE_Q8_0] = quantize_q8_0_avx512;
    t->from_float[LMQ_TYPE_Q8_1] = quantize_q8_1_avx512;
    t->from_float[LMQ_TYPE_Q8_K] = quantize_q8_K_avx512;
    t->vec_dot[LMQ_TYPE_MXFP4] = vec_dot_mxfp4_avx512;
    t->vec_dot4[LMQ_TYPE_MXFP4] = vec_dot4_mxfp4_avx512;
    t->to_float[LMQ_TYPE_MXFP4] = to_float_mxfp4_avx512;
    t->dot_f32 = dot_f32_avx512;
    t->dot_f16_f32 = dot_f16_f32_avx512;
    t->axpy_f32 = axpy_f32_avx512;
    t->axpy_f16 = axpy_f16_avx512;
    t->softmax = softmax_avx512;
    lmq_kernels_fill_avx512_q32(t); /* q4_0, q5_0, q8_0, iq4_nl */
    t->vec_dot[LMQ_TYPE_Q8_0] = vec_dot_q8_0_avx512y;
    t->vec_dot4[LMQ_TYPE_Q8_0] = vec_dot4_q8_0_avx512y;
    t->vec_dot_tile[LMQ_TYPE_Q8_0] = NULL;
    lmq_kernels_fill_avx512_panel(t);
}

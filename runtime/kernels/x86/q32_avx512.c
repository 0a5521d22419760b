/* q32_avx512.c — 512-bit kernels for the 32-element block types dotted with
 * q8_0 activations (q4_0, q5_0, q8_0, iq4_nl): one tile kernel of up to 4
 * weight rows x 4 activation rows, of which the 1 x 1 dot (vec_dot) and
 * the 1 x 4 dot (vec_dot4) are instances.
 *
 * Four blocks are handled at once as two vectors: `lo` holds quants 0..15
 * of block k in 128-bit lane k, `hi` quants 16..31, and the four scales as
 * 16 floats (lanes 4k..4k+3: block k). The pieces are gathered from three
 * or two 512-bit loads with vpermw / vpermt2w (blocks start at even byte
 * offsets). Weights become unsigned bytes u = q + o (o = 8 for q4_0, 16
 * for q5_0, 128 for q8_0 and iq4_nl) for vpdpbusd (u8 x s8), and every
 * accumulator starts from -o * (its lane's sum of activation quants),
 * computed once per token and group with vpdpbusd against the bytes o:
 *
 *   P   = dpbusd(dpbusd(-o * sum y, u_lo, y_lo), u_hi, y_hi)   exact int32
 *   acc = fma(float(P), dw * dy, acc)                         per lane
 *   dot = sum of the 16 lanes of acc (fixed order)
 *
 * Each (row, token) pair goes through exactly these float operations in
 * every instance of the tile, so all of them (and matmul with any split of
 * rows and tokens) give the 1 x 1 kernel's result bit for bit. A last
 * partial group (n / 32 not a multiple of 4) is copied into zeroed buffers
 * and goes through the same code. */
#include <stdbool.h>
#include <string.h>

#include "kernels.h"
#include "x86_simd.h"

#define KQ_INLINE static inline __attribute__((always_inline))
#define KQ_GROUP 4                   /* blocks per step */
#define KQ_ABYTES (KQ_GROUP * 34)    /* a group of q8_0 activation blocks */
#define KQ_WMAX (KQ_GROUP * 34)      /* the largest group of weight blocks */
#define KQ_PF 1024 /* prefetch distance on weight rows (bytes): +15-30% for 4-row matvecs */

typedef enum kq_kind { KQ_Q4_0, KQ_Q5_0, KQ_Q8_0, KQ_IQ4_NL } kq_kind;

/* bytes per block and the offset that makes the quants unsigned */
KQ_INLINE int64_t kq_bytes(kq_kind k)
{
    return k == KQ_Q8_0 ? 34 : k == KQ_Q5_0 ? 22 : 18;
}

KQ_INLINE int kq_off(kq_kind k)
{
    return k == KQ_Q4_0 ? 8 : k == KQ_Q5_0 ? 16 : 128;
}

/* ================================================================
 * Word gathers (16-bit indices for vpermw / vpermt2w; an index >= 32
 * selects word index - 32 of the second source)
 * ================================================================ */

/* 34-byte blocks (17 words; sources: words 0..31 and 32..63) */
static const uint16_t idx34_lo[32] __attribute__((aligned(64))) = {
    1, 2, 3, 4, 5, 6, 7, 8, 18, 19, 20, 21, 22, 23, 24, 25, 35, 36, 37, 38, 39, 40, 41, 42, 52, 53, 54, 55, 56, 57, 58, 59};
/* lanes 24..31 (block 3) come from the load at byte 72 instead */
static const uint16_t idx34_hi[32] __attribute__((aligned(64))) = {
    9, 10, 11, 12, 13, 14, 15, 16, 26, 27, 28, 29, 30, 31, 32, 33, 43, 44, 45, 46, 47, 48, 49, 50, 0, 0, 0, 0, 0, 0, 0, 0};
static const uint16_t idx34_d[32] __attribute__((aligned(64))) = {
    0, 0, 0, 0, 17, 17, 17, 17, 34, 34, 34, 34, 51, 51, 51, 51};
/* 18-byte blocks (9 words; source: words 0..31; block 3 from the load at byte 8) */
static const uint16_t idx18_q[32] __attribute__((aligned(64))) = {
    1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15, 16, 17, 19, 20, 21, 22, 23, 24, 25, 26, 0, 0, 0, 0, 0, 0, 0, 0};
static const uint16_t idx18_d[32] __attribute__((aligned(64))) = {
    0, 0, 0, 0, 9, 9, 9, 9, 18, 18, 18, 18, 27, 27, 27, 27};
/* 22-byte blocks (11 words; sources: words 0..31 and the load at byte 24,
 * words 12..43) */
static const uint16_t idx22_q[32] __attribute__((aligned(64))) = {
    3, 4, 5, 6, 7, 8, 9, 10, 14, 15, 16, 17, 18, 19, 20, 21, 45, 46, 47, 48, 49, 50, 51, 52, 56, 57, 58, 59, 60, 61, 62, 63};
static const uint16_t idx22_d[32] __attribute__((aligned(64))) = {
    0, 0, 0, 0, 11, 11, 11, 11, 22, 22, 22, 22, 53, 53, 53, 53};
/* qh: words 0..3 the low halves of the four blocks' 32-bit qh, 4..7 the high */
static const uint16_t idx22_h[32] __attribute__((aligned(64))) = {1, 12, 23, 54, 2, 13, 24, 55};

/* 64 bytes at p. Weights are loaded as two 256-bit halves: 512-bit loads
 * that miss the cache measured 2-3x slower on streamed rows (Zen 5);
 * activations (in cache) take one 512-bit load. */
KQ_INLINE __m512i kq_ld(const uint8_t *p, bool stream)
{
    if (!stream) return _mm512_loadu_si512((const void *)p);
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)p)),
                              _mm256_loadu_si256((const __m256i *)(p + 32)), 1);
}

KQ_INLINE __m512i kq_idx(const uint16_t *p)
{
    return _mm512_load_si512((const void *)p);
}

/* ================================================================
 * Unpacking a group of four blocks
 * ================================================================ */

typedef struct kq_act {
    __m512i lo, hi; /* activation quants */
    __m512i neg;    /* -o * (sum of the quants of each lane's 8 bytes) */
    __m512 d;       /* scales */
} kq_act;

typedef struct kq_wgt {
    __m512i lo, hi; /* unsigned weight quants u = q + o */
    __m512 d;
} kq_wgt;

/* lo, hi and d of four 34-byte blocks (q8_0 layout) at p */
KQ_INLINE void kq_load34(const uint8_t *p, bool stream, __m512i *lo, __m512i *hi, __m512 *d)
{
    const __m512i a = kq_ld(p, stream), b = kq_ld(p + 64, stream), c = kq_ld(p + 72, stream);
    *lo = _mm512_permutex2var_epi16(a, kq_idx(idx34_lo), b);
    *hi = _mm512_mask_mov_epi16(_mm512_permutex2var_epi16(a, kq_idx(idx34_hi), b), 0xFF000000u, c);
    *d = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutex2var_epi16(a, kq_idx(idx34_d), b)));
}

KQ_INLINE void kq_load_act(const uint8_t *p, __m512i off, kq_act *a)
{
    kq_load34(p, false, &a->lo, &a->hi, &a->d);
    const __m512i s = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), off, a->lo), off, a->hi);
    a->neg = _mm512_sub_epi32(_mm512_setzero_si512(), s);
}

/* the 16 quant bytes of four 18-byte blocks (q4_0 / iq4_nl) and their scales */
KQ_INLINE __m512i kq_load18(const uint8_t *p, __m512 *d)
{
    const __m512i a = kq_ld(p, true), c = kq_ld(p + 8, true);
    *d = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(kq_idx(idx18_d), a)));
    return _mm512_mask_mov_epi16(_mm512_permutexvar_epi16(kq_idx(idx18_q), a), 0xFF000000u, c);
}

KQ_INLINE void kq_load_wgt(kq_kind kind, const uint8_t *p, kq_wgt *w)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    if (kind == KQ_Q8_0) {
        kq_load34(p, true, &w->lo, &w->hi, &w->d);
        w->lo = _mm512_xor_si512(w->lo, _mm512_set1_epi8((char)0x80));
        w->hi = _mm512_xor_si512(w->hi, _mm512_set1_epi8((char)0x80));
    } else if (kind == KQ_Q5_0) {
        const __m512i a = kq_ld(p, true), c = kq_ld(p + 24, true);
        const __m512i q = _mm512_permutex2var_epi16(a, kq_idx(idx22_q), c);
        w->d = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutex2var_epi16(a, kq_idx(idx22_d), c)));
        /* bit 16k + i of the masks: the 5th bit of quant i (lo) or 16 + i (hi) of block k */
        const __m128i h = _mm512_castsi512_si128(_mm512_permutex2var_epi16(a, kq_idx(idx22_h), c));
        const __mmask64 mlo = (__mmask64)_mm_cvtsi128_si64(h), mhi = (__mmask64)_mm_extract_epi64(h, 1);
        const __m512i sixteen = _mm512_set1_epi8(16);
        w->lo = _mm512_and_si512(q, m4);
        w->hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
        w->lo = _mm512_mask_add_epi8(w->lo, mlo, w->lo, sixteen);
        w->hi = _mm512_mask_add_epi8(w->hi, mhi, w->hi, sixteen);
    } else {
        const __m512i q = kq_load18(p, &w->d);
        w->lo = _mm512_and_si512(q, m4);
        w->hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
        if (kind == KQ_IQ4_NL) {
            const __m512i grid = _mm512_xor_si512(
                _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)lmq_iq4nl_values)), _mm512_set1_epi8((char)0x80));
            w->lo = _mm512_shuffle_epi8(grid, w->lo);
            w->hi = _mm512_shuffle_epi8(grid, w->hi);
        }
    }
}

/* ================================================================
 * The tile
 * ================================================================ */

/* One group of four blocks of R weight rows (wp[r]) x T tokens (ap[t]). */
KQ_INLINE void kq_group(kq_kind kind, int R, int T, const uint8_t *const *wp, const uint8_t *const *ap,
                        __m512 acc[4][4])
{
    const __m512i off = _mm512_set1_epi8((char)kq_off(kind));
    kq_act a[4];
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) kq_load_act(ap[t], off, &a[t]);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        kq_wgt w;
        kq_load_wgt(kind, wp[r], &w);
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            __m512i p = _mm512_dpbusd_epi32(a[t].neg, w.lo, a[t].lo);
            p = _mm512_dpbusd_epi32(p, w.hi, a[t].hi);
            acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(w.d, a[t].d), acc[r][t]);
        }
    }
}

/* s[t * ss + r] = dot(row r at w + r * ws, token t at a + t * as) for r < R,
 * t < T (R, T constants after inlining). */
KQ_INLINE void kq_tile(kq_kind kind, int R, int T, int64_t n, float *s, int64_t ss, const uint8_t *w, int64_t ws,
                       const uint8_t *a, int64_t as)
{
    const int64_t wb = kq_bytes(kind), nb = n / 32, ng = nb / KQ_GROUP, rem = nb % KQ_GROUP;
    __m512 acc[4][4];
    const uint8_t *wp[4], *ap[4];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) acc[r][t] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            wp[r] = w + r * ws + g * KQ_GROUP * wb;
            _mm_prefetch((const char *)wp[r] + KQ_PF, _MM_HINT_T0);
            _mm_prefetch((const char *)wp[r] + KQ_PF + 64, _MM_HINT_T0);
            if (KQ_GROUP * wb > 128) _mm_prefetch((const char *)wp[r] + KQ_PF + 128, _MM_HINT_T0);
        }
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) ap[t] = a + t * as + g * KQ_ABYTES;
        kq_group(kind, R, T, wp, ap, acc);
    }
    if (rem) {
        uint8_t wbuf[4][KQ_WMAX], abuf[4][KQ_ABYTES];
        memset(wbuf, 0, sizeof wbuf);
        memset(abuf, 0, sizeof abuf);
        for (int r = 0; r < R; r++) {
            memcpy(wbuf[r], w + r * ws + ng * KQ_GROUP * wb, (size_t)(rem * wb));
            wp[r] = wbuf[r];
        }
        for (int t = 0; t < T; t++) {
            memcpy(abuf[t], a + t * as + ng * KQ_ABYTES, (size_t)(rem * 34));
            ap[t] = abuf[t];
        }
        kq_group(kind, R, T, wp, ap, acc);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) s[t * ss + r] = _mm512_reduce_add_ps(acc[r][t]);
}

/* nr rows x nt tokens (1..4 each): 4-row tiles, else row by row. q8_0
 * matrix-vector products also go row by row: with four rows (four
 * interleaved memory streams) they streamed 10-15% fewer GB/s, while the
 * 4-bit types gain from sharing the activation work. */
KQ_INLINE void kq_tile_any(kq_kind kind, int64_t n, int nr, int nt, float *s, int64_t ss, const uint8_t *w,
                           int64_t ws, const uint8_t *a, int64_t as)
{
    if (nr == 4 && !(kind == KQ_Q8_0 && nt == 1)) {
        switch (nt) {
        case 1: kq_tile(kind, 4, 1, n, s, ss, w, ws, a, as); return;
        case 2: kq_tile(kind, 4, 2, n, s, ss, w, ws, a, as); return;
        case 3: kq_tile(kind, 4, 3, n, s, ss, w, ws, a, as); return;
        default: kq_tile(kind, 4, 4, n, s, ss, w, ws, a, as); return;
        }
    }
    for (int r = 0; r < nr; r++, w += ws, s++) {
        switch (nt) {
        case 1: kq_tile(kind, 1, 1, n, s, ss, w, ws, a, as); break;
        case 2: kq_tile(kind, 1, 2, n, s, ss, w, ws, a, as); break;
        case 3: kq_tile(kind, 1, 3, n, s, ss, w, ws, a, as); break;
        default: kq_tile(kind, 1, 4, n, s, ss, w, ws, a, as); break;
        }
    }
}

/* ================================================================
 * Entry points
 * ================================================================ */

static void vec_dot_q4_0_avx512z(int64_t n, float *s, const void *w, const void *a)
{
    kq_tile(KQ_Q4_0, 1, 1, n, s, 0, w, 0, a, 0);
}

static void vec_dot4_q4_0_avx512z(int64_t n, float *s, int64_t ss, const void *w, const void *a, int64_t as)
{
    kq_tile(KQ_Q4_0, 1, 4, n, s, ss, w, 0, a, as);
}

static void vec_dot_tile_q4_0_avx512z(int64_t n, int nr, int nt, float *s, int64_t ss, const void *w, int64_t ws,
                                      const void *a, int64_t as)
{
    kq_tile_any(KQ_Q4_0, n, nr, nt, s, ss, w, ws, a, as);
}

static void vec_dot_q5_0_avx512z(int64_t n, float *s, const void *w, const void *a)
{
    kq_tile(KQ_Q5_0, 1, 1, n, s, 0, w, 0, a, 0);
}

static void vec_dot4_q5_0_avx512z(int64_t n, float *s, int64_t ss, const void *w, const void *a, int64_t as)
{
    kq_tile(KQ_Q5_0, 1, 4, n, s, ss, w, 0, a, as);
}

static void vec_dot_tile_q5_0_avx512z(int64_t n, int nr, int nt, float *s, int64_t ss, const void *w, int64_t ws,
                                      const void *a, int64_t as)
{
    kq_tile_any(KQ_Q5_0, n, nr, nt, s, ss, w, ws, a, as);
}

static void vec_dot_q8_0_avx512z(int64_t n, float *s, const void *w, const void *a)
{
    kq_tile(KQ_Q8_0, 1, 1, n, s, 0, w, 0, a, 0);
}

static void vec_dot4_q8_0_avx512z(int64_t n, float *s, int64_t ss, const void *w, const void *a, int64_t as)
{
    kq_tile(KQ_Q8_0, 1, 4, n, s, ss, w, 0, a, as);
}

static void vec_dot_tile_q8_0_avx512z(int64_t n, int nr, int nt, float *s, int64_t ss, const void *w, int64_t ws,
                                      const void *a, int64_t as)
{
    kq_tile_any(KQ_Q8_0, n, nr, nt, s, ss, w, ws, a, as);
}

static void vec_dot_iq4_nl_avx512z(int64_t n, float *s, const void *w, const void *a)
{
    kq_tile(KQ_IQ4_NL, 1, 1, n, s, 0, w, 0, a, 0);
}

static void vec_dot4_iq4_nl_avx512z(int64_t n, float *s, int64_t ss, const void *w, const void *a, int64_t as)
{
    kq_tile(KQ_IQ4_NL, 1, 4, n, s, ss, w, 0, a, as);
}

static void vec_dot_tile_iq4_nl_avx512z(int64_t n, int nr, int nt, float *s, int64_t ss, const void *w, int64_t ws,
                                        const void *a, int64_t as)
{
    kq_tile_any(KQ_IQ4_NL, n, nr, nt, s, ss, w, ws, a, as);
}

void lmq_kernels_fill_avx512_q32(lmq_kernel_table *t)
{
    t->vec_dot[LMQ_TYPE_Q4_0] = vec_dot_q4_0_avx512z;
    t->vec_dot4[LMQ_TYPE_Q4_0] = vec_dot4_q4_0_avx512z;
    t->vec_dot_tile[LMQ_TYPE_Q4_0] = vec_dot_tile_q4_0_avx512z;
    t->vec_dot[LMQ_TYPE_Q5_0] = vec_dot_q5_0_avx512z;
    t->vec_dot4[LMQ_TYPE_Q5_0] = vec_dot4_q5_0_avx512z;
    t->vec_dot_tile[LMQ_TYPE_Q5_0] = vec_dot_tile_q5_0_avx512z;
    t->vec_dot[LMQ_TYPE_Q8_0] = vec_dot_q8_0_avx512z;
    t->vec_dot4[LMQ_TYPE_Q8_0] = vec_dot4_q8_0_avx512z;
    t->vec_dot_tile[LMQ_TYPE_Q8_0] = vec_dot_tile_q8_0_avx512z;
    t->vec_dot[LMQ_TYPE_IQ4_NL] = vec_dot_iq4_nl_avx512z;
    t->vec_dot4[LMQ_TYPE_IQ4_NL] = vec_dot4_iq4_nl_avx512z;
    t->vec_dot_tile[LMQ_TYPE_IQ4_NL] = vec_dot_tile_iq4_nl_avx512z;
}

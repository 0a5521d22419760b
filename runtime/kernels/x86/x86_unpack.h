/* x86_unpack.h — 256-bit SIMD unpackers of one weight block into
 * lmq_unpacked (the panel packers' input), shared by panel_avx2.c and
 * panel_avx512.c: the quants in vectors, the scales as the scalar
 * unpackers of panel.c do them, the same bytes (tested through the
 * packers). Included only by files compiled with at least -mavx2 -mf16c. */
#ifndef LMQ_X86_UNPACK_H
#define LMQ_X86_UNPACK_H

#include "x86_simd.h"

static inline void kp_store_nibbles(int8_t *q, const uint8_t *p, __m256i off)
{
    /* 16 packed bytes -> quants 0..15 (low nibbles), 16..31 (high) */
    const __m128i b = _mm_loadu_si128((const __m128i *)p);
    const __m256i z = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0F));
    _mm256_storeu_si256((__m256i *)q, _mm256_add_epi8(z, off));
}

static void kp_unpack_q4_0(const void *row, int64_t ib, lmq_unpacked *u)
{
    const lmq_block_q4_0 *x = (const lmq_block_q4_0 *)row + ib;
    kp_store_nibbles(u->q, x->qs, _mm256_set1_epi8(-8));
    u->d = x86_h2f(x->d);
}

static void kp_unpack_q8_0(const void *row, int64_t ib, lmq_unpacked *u)
{
    const lmq_block_q8_0 *x = (const lmq_block_q8_0 *)row + ib;
    memcpy(u->q, x->qs, 32);
    u->d = x86_h2f(x->d);
}

/* 16 packed bytes of 4-bit codes -> 32 values of a 16-entry int8 grid */
static inline __m256i kp_grid4(const uint8_t *p, const int8_t *grid)
{
    const __m128i b = _mm_loadu_si128((const __m128i *)p);
    const __m256i z = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0F));
    const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)grid));
    return _mm256_shuffle_epi8(tab, z);
}

static inline __m256i kp_iq4(const uint8_t *p)
{
    return kp_grid4(p, lmq_iq4nl_values);
}

static void kp_unpack_mxfp4(const void *row, int64_t ib, lmq_unpacked *u)
{
    const lmq_block_mxfp4 *x = (const lmq_block_mxfp4 *)row + ib;
    _mm256_storeu_si256((__m256i *)u->q, kp_grid4(x->qs, lmq_mxfp4_values));
    u->d = lmq_mxfp4_scale(x->e);
}

static void kp_unpack_iq4_nl(const void *row, int64_t ib, lmq_unpacked *u)
{
    const lmq_block_iq4_nl *x = (const lmq_block_iq4_nl *)row + ib;
    _mm256_storeu_si256((__m256i *)u->q, kp_iq4(x->qs));
    u->d = x86_h2f(x->d);
}

static void kp_unpack_iq4_xs(const void *row, int64_t ib, lmq_unpacked *u)
{
    const lmq_block_iq4_xs *x = (const lmq_block_iq4_xs *)row + ib;
    for (int j = 0; j < 8; j++) {
        _mm256_storeu_si256((__m256i *)(u->q + 32 * j), kp_iq4(x->qs + 16 * j));
        u->sc[j] = (((x->scales_l[j / 2] >> (4 * (j % 2))) & 0xF) | (((x->scales_h >> (2 * j)) & 3) << 4)) - 32;
    }
    u->d = x86_h2f(x->d);
}

static inline void kp_k4_scales(const uint8_t *scales, lmq_unpacked *u)
{
    uint32_t w[4];
    uint8_t b[16];
    lmq_k4_unpack_u32(scales, w);
    memcpy(b, w, 16);
    for (int j = 0; j < 8; j++) {
        u->sc[j] = b[j];
        u->m[2 * j] = u->m[2 * j + 1] = b[8 + j];
    }
}

static void kp_unpack_q4_K(const void *row, int64_t ib, lmq_unpacked *u)
{
    const lmq_block_q4_K *x = (const lmq_block_q4_K *)row + ib;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int j = 0; j < 4; j++) {
        const __m256i b = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * j));
        _mm256_storeu_si256((__m256i *)(u->q + 64 * j), _mm256_and_si256(b, m4));
        _mm256_storeu_si256((__m256i *)(u->q + 64 * j + 32), _mm256_and_si256(_mm256_srli_epi16(b, 4), m4));
    }
    kp_k4_scales(x->scales, u);
    u->d = x86_h2f(x->d);
    u->dmin = x86_h2f(x->dmin);
}

static void kp_unpack_q5_K(const void *row, int64_t ib, lmq_unpacked *u)
{
    const lmq_block_q5_K *x = (const lmq_block_q5_K *)row + ib;
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    const __m256i hb = _mm256_loadu_si256((const __m256i *)x->qh);
    for (int j = 0; j < 4; j++) {
        const __m256i b = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * j));
        const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * j), one), 4);
        const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * j + 1), one), 4);
        _mm256_storeu_si256((__m256i *)(u->q + 64 * j), _mm256_or_si256(_mm256_and_si256(b, m4), h0));
        _mm256_storeu_si256((__m256i *)(u->q + 64 * j + 32),
                            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), m4), h1));
    }
    kp_k4_scales(x->scales, u);
    u->d = x86_h2f(x->d);
    u->dmin = x86_h2f(x->dmin);
}

static void kp_unpack_q6_K(const void *row, int64_t ib, lmq_unpacked *u)
{
    const lmq_block_q6_K *x = (const lmq_block_q6_K *)row + ib;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3), o = _mm256_set1_epi8(32);
    for (int h = 0; h < 2; h++) {
        const __m256i l0 = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * h));
        const __m256i l1 = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * h + 32));
        const __m256i hh = _mm256_loadu_si256((const __m256i *)(x->qh + 32 * h));
        const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(hh, m3), 4);
        const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hh, 2), m3), 4);
        const __m256i h2 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hh, 4), m3), 4);
        const __m256i h3 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hh, 6), m3), 4);
        int8_t *q = u->q + 128 * h;
        _mm256_storeu_si256((__m256i *)q, _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(l0, m4), h0), o));
        _mm256_storeu_si256((__m256i *)(q + 32), _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(l1, m4), h1), o));
        _mm256_storeu_si256((__m256i *)(q + 64),
                            _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), h2), o));
        _mm256_storeu_si256((__m256i *)(q + 96),
                            _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), h3), o));
    }
    for (int g = 0; g < 16; g++) u->sc[g] = x->scales[g];
    u->d = x86_h2f(x->d);
}

#endif /* LMQ_X86_UNPACK_H */

/* rowdot_l1.c: one thread dots 1 GiB of f16 weight rows of width N, one row
 * after the other, against f32 or f16 activations (the loop of
 * kx_dot_f16_f32 / kx_dot_f16_f16), and prints the weights' read rate.
 * Rows wider than about 5000 stream at half the rate with f32 activations:
 * the activations and a weight row no longer fit in L1 together
 * (docs/PERF.md, "Float weights on AVX2").
 *   cc -O2 -mavx2 -mfma -mf16c tests/bench/rowdot_l1.c -o /tmp/rowdot && /tmp/rowdot 5632 */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int n;
static const float *xf;
static const uint16_t *xh;

static inline __m256 ld16(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

static float hsum(__m256 s0, __m256 s1, __m256 s2, __m256 s3)
{
    float v[8];
    _mm256_storeu_ps(v, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}

__attribute__((noinline)) static float dot_f32act(const uint16_t *w)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (int i = 0; i < n; i += 32) {
        s0 = _mm256_fmadd_ps(ld16(w + i), _mm256_loadu_ps(xf + i), s0);
        s1 = _mm256_fmadd_ps(ld16(w + i + 8), _mm256_loadu_ps(xf + i + 8), s1);
        s2 = _mm256_fmadd_ps(ld16(w + i + 16), _mm256_loadu_ps(xf + i + 16), s2);
        s3 = _mm256_fmadd_ps(ld16(w + i + 24), _mm256_loadu_ps(xf + i + 24), s3);
    }
    return hsum(s0, s1, s2, s3);
}

__attribute__((noinline)) static float dot_f16act(const uint16_t *w)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (int i = 0; i < n; i += 32) {
        s0 = _mm256_fmadd_ps(ld16(w + i), ld16(xh + i), s0);
        s1 = _mm256_fmadd_ps(ld16(w + i + 8), ld16(xh + i + 8), s1);
        s2 = _mm256_fmadd_ps(ld16(w + i + 16), ld16(xh + i + 16), s2);
        s3 = _mm256_fmadd_ps(ld16(w + i + 24), ld16(xh + i + 24), s3);
    }
    return hsum(s0, s1, s2, s3);
}

int main(int argc, char **argv)
{
    n = argc > 1 ? atoi(argv[1]) : 5632;
    if (n < 32 || n % 32 != 0 || n > (1 << 24)) {
        fprintf(stderr, "rowdot_l1: width %s: a multiple of 32 from 32 to 2^24\n", argc > 1 ? argv[1] : "?");
        return 2;
    }
    const long rows = (1L << 30) / (2L * n);
    uint16_t *w = aligned_alloc(64, (size_t)(rows * n * 2));
    float *af = aligned_alloc(64, (size_t)n * 4);
    uint16_t *ah = aligned_alloc(64, (size_t)n * 2);
    if (!w || !af || !ah) {
        fprintf(stderr, "rowdot_l1: out of memory\n");
        return 1;
    }
    for (long i = 0; i < rows * n; i++) w[i] = (uint16_t)(0x3C00 ^ (i & 0xFF));
    for (int i = 0; i < n; i++) {
        af[i] = 1.0f;
        ah[i] = 0x3C00;
    }
    xf = af;
    xh = ah;
    for (int rep = 0; rep < 4; rep++)
        for (int m = 0; m < 2; m++) {
            struct timespec t0, t1;
            float sum = 0;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            for (long r = 0; r < rows; r++) sum += m ? dot_f16act(w + r * n) : dot_f32act(w + r * n);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            const double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
            if (rep) /* the first pass faults the pages in */
                printf("n=%d %s activations: %.1f GB/s (%g)\n", n, m ? "f16" : "f32", (double)rows * n * 2 / s / 1e9,
                       (double)sum);
        }
    free(w);
    free(af);
    free(ah);
    return 0;
}

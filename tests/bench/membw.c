/* Memory read bandwidth of this machine: N threads sum disjoint parts of a
 * 512 MiB buffer with AVX2 loads; best of 10 passes. The limit that token
 * generation (every weight byte read once per token) can approach.
 *   cc -O2 -mavx2 -pthread tests/bench/membw.c -o membw && ./membw 1 && ./membw 2
 * Not part of the build or the tests (a benchmark, not a check). */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BYTES ((size_t)512 << 20)
#define MAX_THREADS 64

static char *buf;
static int nth;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *reader(void *arg)
{
    const size_t per = BYTES / (size_t)nth;
    const __m256i *p = (const __m256i *)(buf + (size_t)(long)arg * per);
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t k = 0; k + 4 <= per / 32; k += 4) {
        s0 = _mm256_add_epi64(s0, _mm256_load_si256(p + k));
        s1 = _mm256_add_epi64(s1, _mm256_load_si256(p + k + 1));
        s2 = _mm256_add_epi64(s2, _mm256_load_si256(p + k + 2));
        s3 = _mm256_add_epi64(s3, _mm256_load_si256(p + k + 3));
    }
    s0 = _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3));
    return (void *)(long)_mm256_extract_epi64(s0, 0);
}

int main(int argc, char **argv)
{
    nth = argc > 1 ? atoi(argv[1]) : 1;
    if (nth < 1 || nth > MAX_THREADS) {
        fprintf(stderr, "usage: membw [THREADS 1..%d]\n", MAX_THREADS);
        return 2;
    }
    buf = aligned_alloc(64, BYTES);
    if (!buf) return 1;
    memset(buf, 1, BYTES);
    double best = 1e30;
    for (int r = 0; r < 10; r++) {
        pthread_t t[MAX_THREADS];
        double t0 = now();
        for (long i = 0; i < nth; i++) pthread_create(&t[i], NULL, reader, (void *)i);
        for (int i = 0; i < nth; i++) pthread_join(t[i], NULL);
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    printf("%d thread%s: %.1f GB/s\n", nth, nth > 1 ? "s" : "", (double)BYTES / best / 1e9);
    free(buf);
    return 0;
}

/* Run-time choice of the quantizers' SIMD variants (quant_internal.h).
 *
 * Compiled with baseline flags: it only calls into a variant after
 * cpuid/xgetbv said the CPU and the OS support it. Every variant gives the
 * reference's bytes, so the choice changes the speed, never the output. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "quant_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define QS_X86 1
#endif

static lmq_qsimd tables[LMQ_QSIMD_COUNT];
static bool supported[LMQ_QSIMD_COUNT];
static _Atomic(const lmq_qsimd *) active;
static const lmq_qsimd *best_table; /* the widest the CPU has */
static pthread_once_t once = PTHREAD_ONCE_INIT;

#if QS_X86
/* AVX2 usable: the CPU has it and the OS saves the ymm registers. */
static bool have_avx2(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    if (!(c & bit_OSXSAVE) || !(c & bit_AVX)) return false;
    uint32_t lo, hi;
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0)); /* xgetbv 0 */
    if ((lo & 0x6) != 0x6) return false;
    if (__get_cpuid_max(0, NULL) < 7) return false;
    unsigned b7 = 0, c7 = 0, d7 = 0;
    __cpuid_count(7, 0, a, b7, c7, d7);
    (void)c7;
    (void)d7;
    return (b7 & bit_AVX2) != 0;
}
#endif

static void build(void)
{
    tables[LMQ_QSIMD_REF] = (lmq_qsimd){"scalar", lmq_q_csums_ref, lmq_q_grid_errs_ref, lmq_q_asym_sums_ref,
                                          lmq_q_iq4_sums_ref, lmq_q_iq4_err_ref, lmq_q_q4_0_rtn_ref};
    supported[LMQ_QSIMD_REF] = true;
    int best = LMQ_QSIMD_REF;
#if QS_X86
    if (have_avx2()) {
        tables[LMQ_QSIMD_AVX2] = tables[LMQ_QSIMD_REF];
        tables[LMQ_QSIMD_AVX2].name = "avx2";
        lmq_q_fill_avx2(&tables[LMQ_QSIMD_AVX2]);
        supported[LMQ_QSIMD_AVX2] = true;
        best = LMQ_QSIMD_AVX2;
    }
#endif
    best_table = &tables[best];
    if (!atomic_load(&active)) atomic_store(&active, best_table);
}

const lmq_qsimd *lmq_q_simd(void)
{
    const lmq_qsimd *t = atomic_load_explicit(&active, memory_order_acquire);
    if (t) return t;
    pthread_once(&once, build);
    return atomic_load(&active);
}

const lmq_qsimd *lmq_q_simd_for(int which)
{
    pthread_once(&once, build);
    return which >= 0 && which < LMQ_QSIMD_COUNT && supported[which] ? &tables[which] : NULL;
}

bool lmq_q_simd_force(int which)
{
    const lmq_qsimd *t = lmq_q_simd_for(which);
    if (t) atomic_store(&active, t);
    return t != NULL;
}

void lmq_quantize_use_simd(bool on)
{
    pthread_once(&once, build);
    atomic_store(&active, on ? best_table : &tables[LMQ_QSIMD_REF]);
}

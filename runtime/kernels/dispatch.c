/* Run-time ISA detection and the kernel tables (xxHash style).
 *
 * This file is compiled with baseline flags only: it must run on any CPU of
 * the architecture, and only calls into an ISA's code after cpuid/xgetbv (or
 * hwcaps) said the CPU and OS support it. Tables are built once; the active
 * one is an atomic pointer so readers need no lock. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define LMQ_X86 1
#elif defined(__aarch64__)
#include <sys/auxv.h>
#define LMQ_ARM64 1
#endif

static const char *const isa_names[LMQ_ISA_COUNT] = {"scalar", "avx2", "avx512", "neon", "i8mm", "avxvnni"};
/* The ISAs from least to most preferred (the enum is append-only, so its
 * order is not the preference): lmq_isa_list's order, the default last. */
static const lmq_isa isa_rank[LMQ_ISA_COUNT] = {LMQ_ISA_SCALAR,  LMQ_ISA_AVX2, LMQ_ISA_AVXVNNI,
                                                LMQ_ISA_AVX512, LMQ_ISA_NEON, LMQ_ISA_I8MM};

static lmq_kernel_table tables[LMQ_ISA_COUNT];
static bool supported[LMQ_ISA_COUNT];
static char features[256] = "";
static _Atomic(const lmq_kernel_table *) active;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
#if defined(__x86_64__) || defined(__i386__)
/* avxvnni level: the VEX build (AVX-VNNI) or the EVEX one (AVX-512 VNNI + VL) */
static bool avxvnni_evex;
#endif

static void feat_add(const char *name)
{
    size_t len = strlen(features);
    snprintf(features + len, sizeof features - len, " %s", name);
}

#if LMQ_X86
/* XCR0 via xgetbv: which register states the OS saves on context switch. */
static uint64_t xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}

static void detect(void)
{
    unsigned a, b, c, d;
    snprintf(features, sizeof features, "x86-64:");
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    const bool fma = c & bit_FMA, f16c = c & bit_F16C, osxsave = c & bit_OSXSAVE, avx = c & bit_AVX;
    uint64_t xcr0 = osxsave ? xgetbv0() : 0;
    const bool os_ymm = (xcr0 & 0x6) == 0x6;        /* SSE + AVX state */
    const bool os_zmm = (xcr0 & 0xE6) == 0xE6;      /* + opmask, ZMM_Hi256, Hi16_ZMM */
    unsigned b7 = 0, c7 = 0, d7 = 0;
    if (__get_cpuid_max(0, NULL) >= 7) __cpuid_count(7, 0, a, b7, c7, d7);
    const bool avx2 = b7 & bit_AVX2;
    const bool f512 = b7 & bit_AVX512F, bw = b7 & bit_AVX512BW, vl = b7 & bit_AVX512VL,
               dq = b7 & bit_AVX512DQ, vnni = c7 & (1u << 11);
    unsigned a71 = 0, b71, c71, d71; /* leaf 7 subleaf 1: EAX bit 4 = AVX-VNNI */
    if (__get_cpuid_max(0, NULL) >= 7) {
        unsigned max_sub;
        __cpuid_count(7, 0, max_sub, b71, c71, d71);
        if (max_sub >= 1) __cpuid_count(7, 1, a71, b71, c71, d71);
    }
    const bool avxvnni = a71 & (1u << 4);
    if (avx2) feat_add("avx2");
    if (fma) feat_add("fma");
    if (f16c) feat_add("f16c");
    if (f512) feat_add("avx512f");
    if (bw) feat_add("avx512bw");
    if (vl) feat_add("avx512vl");
    if (dq) feat_add("avx512dq");
    if (vnni) feat_add("avx512vnni");
    if (avxvnni) feat_add("avxvnni");
    if (!os_ymm) feat_add("(os: no ymm state)");
    else if (f512 && !os_zmm) feat_add("(os: no zmm state)");
    supported[LMQ_ISA_AVX2] = avx && avx2 && fma && f16c && os_ymm;
    supported[LMQ_ISA_AVX512] =
        supported[LMQ_ISA_AVX2] && f512 && bw && vl && dq && vnni && os_zmm;
    /* EVEX-encoded 256-bit vpdpbusd computes the same: such CPUs run (and
     * test) the avxvnni level's kernels built for it */
    const bool evex256 = f512 && vl && vnni && os_zmm;
    supported[LMQ_ISA_AVXVNNI] = supported[LMQ_ISA_AVX2] && (avxvnni || evex256);
    avxvnni_evex = supported[LMQ_ISA_AVXVNNI] && !avxvnni;
    if (avxvnni_evex) feat_add("(avxvnni level: EVEX vpdpbusd)");
    (void)d;
    (void)d7;
    (void)b71;
    (void)c71;
    (void)d71;
}
#elif LMQ_ARM64
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1 << 1)
#endif
#ifndef HWCAP_FPHP
#define HWCAP_FPHP (1 << 9)
#endif
#ifndef HWCAP_ASIMDHP
#define HWCAP_ASIMDHP (1 << 10)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1 << 13)
#endif
static void detect(void)
{
    unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    snprintf(features, sizeof features, "aarch64:");
    if (hw & HWCAP_ASIMD) feat_add("asimd");
    if (hw & HWCAP_ASIMDDP) feat_add("asimddp");
    if (hw & HWCAP_FPHP) feat_add("fphp");
    if (hw & HWCAP_ASIMDHP) feat_add("asimdhp");
    if (hw2 & HWCAP2_I8MM) feat_add("i8mm");
    supported[LMQ_ISA_NEON] = (hw & HWCAP_ASIMD) && (hw & HWCAP_ASIMDDP) &&
                              (hw & HWCAP_FPHP) && (hw & HWCAP_ASIMDHP);
    supported[LMQ_ISA_I8MM] = supported[LMQ_ISA_NEON] && (hw2 & HWCAP2_I8MM);
}
#else
static void detect(void)
{
    snprintf(features, sizeof features, "generic:");
}
#endif

static void build_tables(void)
{
    supported[LMQ_ISA_SCALAR] = true;
    detect();
    lmq_kernels_fill_ref(&tables[LMQ_ISA_SCALAR]);
    tables[LMQ_ISA_SCALAR].attn = lmq_attn_ref;
    tables[LMQ_ISA_SCALAR].delta_rule = lmq_delta_rule_ref;
    tables[LMQ_ISA_SCALAR].ssm_conv = lmq_ssm_conv_ref;
#if LMQ_X86
    if (supported[LMQ_ISA_AVX2]) {
        lmq_kernels_fill_ref(&tables[LMQ_ISA_AVX2]);
        lmq_kernels_fill_avx2(&tables[LMQ_ISA_AVX2]);
        lmq_kernels_fill_attn_avx2(&tables[LMQ_ISA_AVX2]);
        lmq_kernels_fill_recurrent_avx2(&tables[LMQ_ISA_AVX2]);
        lmq_kernels_fill_avx2_panel(&tables[LMQ_ISA_AVX2]);
    }
    if (supported[LMQ_ISA_AVXVNNI]) { /* the AVX2 table, vpdpbusd for the repacked kernels */
        lmq_kernel_table *t = &tables[LMQ_ISA_AVXVNNI];
        lmq_kernels_fill_ref(t);
        lmq_kernels_fill_avx2(t);
        lmq_kernels_fill_attn_avx2(t);
        lmq_kernels_fill_recurrent_avx2(t);
        lmq_kernels_fill_avx2_panel(t);
        if (avxvnni_evex)
            lmq_kernels_fill_avxvnni_evex(t);
        else
            lmq_kernels_fill_avxvnni(t);
    }
    if (supported[LMQ_ISA_AVX512]) {
        lmq_kernels_fill_ref(&tables[LMQ_ISA_AVX512]);
        lmq_kernels_fill_avx2(&tables[LMQ_ISA_AVX512]);
        lmq_kernels_fill_avx512(&tables[LMQ_ISA_AVX512]);
        lmq_kernels_fill_attn_avx512(&tables[LMQ_ISA_AVX512]);
        lmq_kernels_fill_recurrent_avx512(&tables[LMQ_ISA_AVX512]);
    }
#elif LMQ_ARM64
    if (supported[LMQ_ISA_NEON]) {
        lmq_kernels_fill_ref(&tables[LMQ_ISA_NEON]);
        lmq_kernels_fill_neon(&tables[LMQ_ISA_NEON]);
        lmq_kernels_fill_attn_neon(&tables[LMQ_ISA_NEON]);
        lmq_kernels_fill_recurrent_neon(&tables[LMQ_ISA_NEON]);
    }
    if (supported[LMQ_ISA_I8MM]) { /* the dotprod table, smmla for batches */
        lmq_kernels_fill_ref(&tables[LMQ_ISA_I8MM]);
        lmq_kernels_fill_neon(&tables[LMQ_ISA_I8MM]);
        lmq_kernels_fill_attn_neon(&tables[LMQ_ISA_I8MM]);
        lmq_kernels_fill_recurrent_neon(&tables[LMQ_ISA_I8MM]);
        lmq_kernels_fill_i8mm(&tables[LMQ_ISA_I8MM]);
    }
#endif
    lmq_isa best = LMQ_ISA_SCALAR;
    for (int i = 0; i < LMQ_ISA_COUNT; i++)
        if (supported[isa_rank[i]]) best = isa_rank[i];
    /* the library reads no environment: the CLI applies LMQ_ISA with lmq_isa_force */
    atomic_store(&active, &tables[best]);
}

static void init(void)
{
    pthread_once(&init_once, build_tables);
}

/* the calling thread's settings (lmq_kernel_scope_enter) */
static _Thread_local const lmq_kernel_table *tl_table;
static _Thread_local int tl_gemm = -1;

lmq_kernel_scope lmq_kernel_scope_enter(lmq_isa isa, lmq_gemm_mode gemm)
{
    lmq_kernel_scope prev = {tl_table, tl_gemm};
    tl_table = lmq_kernels_for(isa); /* NULL for LMQ_ISA_COUNT or unsupported */
    tl_gemm = (unsigned)gemm < LMQ_GEMM_MODE_COUNT ? (int)gemm : -1;
    return prev;
}

void lmq_kernel_scope_leave(lmq_kernel_scope prev)
{
    tl_table = prev.k;
    tl_gemm = prev.gemm;
}

int lmq_kernel_scope_gemm(void) { return tl_gemm; }

const lmq_kernel_table *lmq_kernels(void)
{
    if (tl_table) return tl_table;
    const lmq_kernel_table *t = atomic_load_explicit(&active, memory_order_acquire);
    if (t) return t;
    init();
    return atomic_load(&active);
}

const lmq_kernel_table *lmq_kernels_for(lmq_isa isa)
{
    init();
    if ((unsigned)isa >= LMQ_ISA_COUNT || !supported[isa]) return NULL;
    return &tables[isa];
}

lmq_isa lmq_isa_active(void)
{
    return lmq_kernels()->isa;
}

const char *lmq_isa_name(lmq_isa isa)
{
    return (unsigned)isa < LMQ_ISA_COUNT ? isa_names[isa] : "?";
}

lmq_status lmq_isa_from_name(const char *name, lmq_isa *out)
{
    for (int i = 0; name && i < LMQ_ISA_COUNT; i++) {
        if (!strcasecmp(name, isa_names[i])) {
            *out = (lmq_isa)i;
            return LMQ_OK;
        }
    }
    return lmq_error(LMQ_ERR_INVALID_ARG, "unknown ISA '%s' (scalar, avx2, avxvnni, avx512, neon, i8mm)",
                     name ? name : "(null)");
}

bool lmq_isa_supported(lmq_isa isa)
{
    init();
    return (unsigned)isa < LMQ_ISA_COUNT && supported[isa];
}

int lmq_isa_list(lmq_isa *out, int cap)
{
    init();
    int n = 0;
    for (int i = 0; i < LMQ_ISA_COUNT; i++) {
        if (!supported[isa_rank[i]]) continue;
        if (n < cap) out[n] = isa_rank[i];
        n++;
    }
    return n;
}

lmq_status lmq_isa_force(lmq_isa isa)
{
    if (!lmq_isa_supported(isa))
        return lmq_error(LMQ_ERR_UNSUPPORTED, "ISA %s is not supported by this build or CPU (%s)",
                         lmq_isa_name(isa), lmq_cpu_features());
    atomic_store(&active, &tables[isa]);
    return LMQ_OK;
}

const char *lmq_cpu_features(void)
{
    init();
    return features;
}

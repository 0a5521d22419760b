/* recurrent_avx512.c — lmq_delta_rule and lmq_ssm_conv for AVX-512: the
 * 256-bit bodies of x86_recurrent.h, with blocks of 8 vectors (64 columns
 * of the state) in the 32 registers. Per column the operations are those of
 * the avx2 build, so both give the same bits. */
#include "x86_recurrent.h"

static void delta_rule_avx512(const lmq_delta_args *a)
{
    kx_delta_rule(a, 8);
}

static void ssm_conv_avx512(const lmq_conv_args *a)
{
    kx_ssm_conv(a);
}

void lmq_kernels_fill_recurrent_avx512(lmq_kernel_table *t)
{
    t->delta_rule = delta_rule_avx512;
    t->ssm_conv = ssm_conv_avx512;
}

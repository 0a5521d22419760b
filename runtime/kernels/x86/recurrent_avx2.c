/* recurrent_avx2.c — lmq_delta_rule and lmq_ssm_conv for avx2: the bodies
 * of x86_recurrent.h with blocks of 4 vectors (32 columns of the state;
 * 12 accumulators and 4 broadcasts in the 16 registers). */
#include "x86_recurrent.h"

static void delta_rule_avx2(const lmq_delta_args *a)
{
    kx_delta_rule(a, 4);
}

static void ssm_conv_avx2(const lmq_conv_args *a)
{
    kx_ssm_conv(a);
}

void lmq_kernels_fill_recurrent_avx2(lmq_kernel_table *t)
{
    t->delta_rule = delta_rule_avx2;
    t->ssm_conv = ssm_conv_avx2;
}

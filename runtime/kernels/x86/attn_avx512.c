/* attn_avx512.c — lmq_attn for avx512: the body of x86_attn.h with 8 keys per
 * block (32 vector registers hold 16 accumulators and 16 probabilities). */
#include "x86_attn.h"

static void attn_avx512(const lmq_attn_args *a)
{
    if (a->n_tok * a->n_grp <= 8)
        kx_attn_tile(a, 1, 8);
    else
        kx_attn_tile(a, 2, 8);
}

void lmq_kernels_fill_attn_avx512(lmq_kernel_table *t)
{
    t->attn = attn_avx512;
}

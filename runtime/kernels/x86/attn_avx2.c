/* attn_avx2.c — lmq_attn for avx2: the body of x86_attn.h with 4 keys per
 * block (16 vector registers). */
#include "x86_attn.h"

static void attn_avx2(const lmq_attn_args *a)
{
    if (a->n_tok * a->n_grp <= 8)
        kx_attn_tile(a, 1, 4);
    else
        kx_attn_tile(a, 2, 4);
}

void lmq_kernels_fill_attn_avx2(lmq_kernel_table *t)
{
    t->attn = attn_avx2;
}

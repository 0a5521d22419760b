/* attn.c — attention over a KV cache: the dispatcher, the per-thread scratch
 * size and the scalar oracle (lmq_attn_ref). The SIMD variants
 * (x86/attn_avx2.c, x86/attn_avx512.c, arm/attn_neon.c) compute the same
 * tile with the rows (queries x heads) across vector lanes; see
 * docs/PERF.md, "Attention, non-matmul work and long context". */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "kernels.h"

/* The SIMD kernels take keys in blocks of at most this many rows. */
#define ATTN_MAX_KB 8

static size_t pad16(int32_t n)
{
    return ((size_t)n + 15) & ~(size_t)15;
}

size_t lmq_attn_scratch_floats(int32_t head_dim)
{
    /* SIMD: q^T and out^T (head_dim x LMQ_ATTN_ROWS each), ATTN_MAX_KB key
     * and value rows in f32, one zero row; the oracle needs less */
    return pad16(head_dim) * (2 * LMQ_ATTN_ROWS + 2 * ATTN_MAX_KB + 1) + 64;
}

void lmq_attn(const lmq_attn_args *a)
{
    lmq_kernels()->attn(a);
}

/* Row `slot` of the cache at `base` as floats. */
static void kv_row_ref(lmq_type t, const void *base, size_t stride, int32_t slot, int32_t hd, float *dst)
{
    const uint8_t *src = (const uint8_t *)base + (size_t)slot * stride;
    if (t == LMQ_TYPE_F32) {
        memcpy(dst, src, (size_t)hd * sizeof(float));
    } else if (t == LMQ_TYPE_F16) {
        const uint16_t *h = (const uint16_t *)src;
        for (int32_t i = 0; i < hd; i++) dst[i] = lmq_fp16_to_fp32(h[i]);
    } else {
        assert(t == LMQ_TYPE_Q8_0 && hd % 32 == 0);
        lmq_dequantize_fn(LMQ_TYPE_Q8_0)(src, dst, hd);
    }
}

void lmq_attn_ref(const lmq_attn_args *a)
{
    const int32_t hd = a->head_dim;
    const size_t hp = pad16(hd);
    float *kr = a->scratch, *vr = kr + hp, *qr = vr + hp;
    double *acc = (double *)(void *)(qr + hp); /* hd doubles: 8-byte aligned, hp is a multiple of 16 */
    assert(a->n_tok * a->n_grp <= LMQ_ATTN_ROWS && 5 * hp <= lmq_attn_scratch_floats(hd));
    for (int32_t t = 0; t < a->n_tok; t++) {
        const int32_t pos = a->pos0 + t;
        const int32_t lo = a->window > 0 && pos - a->window + 1 > 0 ? pos - a->window + 1 : 0;
        for (int32_t g = 0; g < a->n_grp; g++) {
            const float *q = a->q + (size_t)t * (size_t)a->q_stride + (size_t)g * (size_t)hd;
            for (int32_t i = 0; i < hd; i++)
                qr[i] = a->kv_type == LMQ_TYPE_F16 ? lmq_fp16_to_fp32(lmq_fp32_to_fp16(q[i])) : q[i];
            /* a sink logit joins the denominator only: the running sums start
             * with its term exp(z - m) = 1 at m = z */
            double m = a->sinks ? (double)a->sinks[g] : -INFINITY, l = a->sinks ? 1.0 : 0.0;
            for (int32_t i = 0; i < hd; i++) acc[i] = 0;
            for (int32_t p = lo; p <= pos; p++) {
                const int32_t slot = p % a->n_slots;
                kv_row_ref(a->kv_type, a->k, a->kv_stride, slot, hd, kr);
                kv_row_ref(a->kv_type, a->v, a->kv_stride, slot, hd, vr);
                double s = 0;
                for (int32_t i = 0; i < hd; i++) s += (double)qr[i] * kr[i];
                s *= a->scale;
                if (a->softcap > 0) s = a->softcap * tanh(s / a->softcap);
                if (s > m) { /* a new maximum: rescale what was summed */
                    const double f = exp(m - s);
                    l *= f;
                    for (int32_t i = 0; i < hd; i++) acc[i] *= f;
                    m = s;
                }
                const double w = exp(s - m);
                l += w;
                for (int32_t i = 0; i < hd; i++) acc[i] += w * vr[i];
            }
            float *o = a->out + (size_t)t * (size_t)a->out_stride + (size_t)g * (size_t)hd;
            for (int32_t i = 0; i < hd; i++) o[i] = (float)(acc[i] / l);
        }
    }
}

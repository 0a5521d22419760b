/* recurrent.c — the kernels of recurrent (Gated DeltaNet) layers: the
 * dispatchers of lmq_delta_rule and lmq_ssm_conv and their scalar oracles.
 * The SIMD variants (x86/recurrent_avx2.c and x86/recurrent_avx512.c share
 * the body in x86/x86_recurrent.h; arm/recurrent_neon.c) put columns of the
 * state (delta rule) or channels (convolution) across vector lanes: every
 * column and channel is independent, so a lane's arithmetic does not depend
 * on where a call's range starts or ends. */
#include <assert.h>
#include <math.h>

#include "kernels.h"

void lmq_delta_rule(const lmq_delta_args *a)
{
    lmq_kernels()->delta_rule(a);
}

void lmq_ssm_conv(const lmq_conv_args *a)
{
    lmq_kernels()->ssm_conv(a);
}

/* Per token, each column j of S on its own (columns never mix):
 *   m = decay * sum_i S[i][j] k[i]          (= ((decay S)^T k)_j)
 *   d = beta * (v[j] - m)
 *   S[i][j] = decay * S[i][j] + k[i] * d    for each row i
 *   o[j] = sum_i S[i][j] q[i]               (the updated S)
 * Sums run over i in ascending order, in float. v[j] is read before o[j] is
 * written, so o may be v (same stride). */
void lmq_delta_rule_ref(const lmq_delta_args *a)
{
    const int32_t dk = a->dk, dv = a->dv;
    assert(dk >= 1 && dv >= 1 && a->n_tok >= 0);
    float *S = a->S;
    for (int32_t t = 0; t < a->n_tok; t++) {
        const float *q = a->q + (size_t)t * (size_t)a->qk_stride, *k = a->k + (size_t)t * (size_t)a->qk_stride;
        const float *v = a->v + (size_t)t * (size_t)a->v_stride;
        const float beta = a->beta[(size_t)t * (size_t)a->g_stride], decay = a->decay[(size_t)t * (size_t)a->g_stride];
        float *o = a->o + (size_t)t * (size_t)a->o_stride;
        for (int32_t j = 0; j < dv; j++) {
            float m = 0;
            for (int32_t i = 0; i < dk; i++) m += S[(size_t)i * (size_t)dv + (size_t)j] * k[i];
            const float d = beta * (v[j] - decay * m);
            float acc = 0;
            for (int32_t i = 0; i < dk; i++) {
                float *s = &S[(size_t)i * (size_t)dv + (size_t)j];
                *s = decay * *s + k[i] * d;
                acc += *s * q[i];
            }
            o[j] = acc;
        }
    }
}

/* Input s (s >= -(K-1)) of channel c: x for s >= 0, else the state. */
static inline float conv_in(const lmq_conv_args *a, int32_t s, int32_t c)
{
    return s >= 0 ? a->x[(size_t)s * (size_t)a->x_stride + (size_t)c]
                  : a->state[(size_t)(a->K - 1 + s) * (size_t)a->C + (size_t)c];
}

/* Per channel: y = sum_j w_j in_j over the taps in order (float, from 0),
 * then SiLU as y / (1 + expf(-y)); the state is updated after the channel's
 * outputs, rows in ascending order (row r takes input n_tok - (K-1) + r,
 * which is x or a later row of the old state). */
void lmq_ssm_conv_ref(const lmq_conv_args *a)
{
    const int32_t K = a->K, n = a->n_tok;
    assert(K >= 1 && 0 <= a->c0 && a->c0 <= a->c1 && a->c1 <= a->C && n >= 0);
    for (int32_t c = a->c0; c < a->c1; c++) {
        const float *w = a->w + (size_t)c * (size_t)K;
        for (int32_t t = 0; t < n; t++) {
            float acc = 0;
            for (int32_t j = 0; j < K; j++) acc += w[j] * conv_in(a, t - K + 1 + j, c);
            if (a->silu) acc = acc / (1.0f + expf(-acc));
            a->y[(size_t)t * (size_t)a->y_stride + (size_t)c] = acc;
        }
        for (int32_t r = 0; r < K - 1; r++)
            a->state[(size_t)r * (size_t)a->C + (size_t)c] = conv_in(a, n - (K - 1) + r, c);
    }
}

/* attn_neon.c — lmq_attn for NEON: the scheme of x86/x86_attn.h with the
 * tile's rows (at most 16) across four 4-lane vectors and 4 keys per block
 * (32 registers: 16 accumulators, 4 query vectors). */
#include <arm_neon.h>
#include <assert.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "arm_simd.h"
#include "kernels.h"

#define KB 4
#define MAX_KB 8 /* the scratch layout is the x86 one (attn.c) */

static size_t pad16(int32_t n)
{
    return ((size_t)n + 15) & ~(size_t)15;
}

/* tanh (as kx_tanh_ps): Taylor below |x| = 0.2, sign(x) (1 - e) / (1 + e) above. */
static inline float32x4_t tanh_f32x4(float32x4_t x)
{
    const float32x4_t ax = vabsq_f32(x);
    const float32x4_t e = arm_exp_ps(vmulq_n_f32(ax, -2.0f));
    float32x4_t big = vdivq_f32(vsubq_f32(vdupq_n_f32(1.0f), e), vaddq_f32(vdupq_n_f32(1.0f), e));
    big = vbslq_f32(vdupq_n_u32(0x80000000u), x, big);
    const float32x4_t x2 = vmulq_f32(x, x);
    float32x4_t p = vdupq_n_f32(62.0f / 2835);
    p = vfmaq_f32(vdupq_n_f32(-17.0f / 315), p, x2);
    p = vfmaq_f32(vdupq_n_f32(2.0f / 15), p, x2);
    p = vfmaq_f32(vdupq_n_f32(-1.0f / 3), p, x2);
    const float32x4_t small = vfmaq_f32(x, vmulq_f32(p, x2), x);
    return vbslq_f32(vcltq_f32(ax, vdupq_n_f32(0.2f)), small, big);
}

static const float *row_f32(const lmq_attn_args *a, const void *base, int32_t slot, float *buf)
{
    const uint8_t *src = (const uint8_t *)base + (size_t)slot * a->kv_stride;
    const int32_t hd = a->head_dim;
    if (a->kv_type == LMQ_TYPE_F32) return (const float *)(const void *)src;
    if (a->kv_type == LMQ_TYPE_F16) {
        const __fp16 *h = (const __fp16 *)(const void *)src;
        int32_t i = 0;
        for (; i + 4 <= hd; i += 4) vst1q_f32(buf + i, vcvt_f32_f16(vld1_f16(h + i)));
        for (; i < hd; i++) buf[i] = (float)h[i];
        return buf;
    }
    const lmq_block_q8_0 *b = (const lmq_block_q8_0 *)(const void *)src;
    for (int32_t ib = 0; ib < hd / 32; ib++) {
        const float d = lmq_fp16_to_fp32(b[ib].d);
        for (int k = 0; k < 32; k += 8) {
            const int16x8_t w = vmovl_s8(vld1_s8(b[ib].qs + k));
            vst1q_f32(buf + 32 * ib + k, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(w))), d));
            vst1q_f32(buf + 32 * ib + k + 4, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_high_s16(w))), d));
        }
    }
    return buf;
}

static inline __attribute__((always_inline)) void attn_tile(const lmq_attn_args *a, const int NV)
{
    const int32_t hd = a->head_dim, nr = a->n_tok * a->n_grp;
    const size_t hp = pad16(hd);
    float *qt = a->scratch, *ot = qt + hp * 16, *kf = ot + hp * 16, *vf = kf + hp * MAX_KB;
    float *zero = vf + hp * MAX_KB;
    assert(nr <= 4 * NV && hp * (2 * 16 + 2 * MAX_KB + 1) <= lmq_attn_scratch_floats(hd));
    int32_t qpos[16], qlo[16];
    float m0[16], l0[16]; /* the softmax's start: m = -inf, l = 0, or m = the sink logit, l = 1 */
    for (int r = 0; r < 16; r++) {
        const int rr = r < nr ? r : nr - 1;
        const int32_t t = rr / a->n_grp, g = rr % a->n_grp, pos = a->pos0 + t;
        qpos[r] = pos;
        qlo[r] = a->window > 0 && pos - a->window + 1 > 0 ? pos - a->window + 1 : 0;
        m0[r] = a->sinks ? a->sinks[g] : -INFINITY;
        l0[r] = a->sinks ? 1.0f : 0.0f;
        const float *q = a->q + (size_t)t * (size_t)a->q_stride + (size_t)g * (size_t)hd;
        for (int32_t d = 0; d < hd; d++) {
            float x = r < nr ? q[d] : 0.0f;
            if (a->kv_type == LMQ_TYPE_F16) x = (float)(__fp16)x;
            qt[(size_t)d * 16 + (size_t)r] = x;
        }
    }
    memset(ot, 0, (size_t)hd * 16 * sizeof(float));
    memset(zero, 0, (size_t)hd * sizeof(float));
    int32x4_t vpos[4], vlo[4];
    float32x4_t m[4], l[4];
    for (int v = 0; v < NV; v++) {
        vpos[v] = vld1q_s32(qpos + 4 * v);
        vlo[v] = vld1q_s32(qlo + 4 * v);
        m[v] = vld1q_f32(m0 + 4 * v);
        l[v] = vld1q_f32(l0 + 4 * v);
    }
    const float cap = a->softcap;
    const float32x4_t ninf = vdupq_n_f32(-INFINITY);
    const int32_t kmax = a->pos0 + a->n_tok - 1;
    /* blocks start at multiples of KB and of n_slots, whatever the tile:
     * a row's arithmetic is then the same in any tile (a block that is
     * masked for a row leaves its m, l and ot unchanged bit for bit) */
    for (int32_t p = qlo[0] - qlo[0] % KB; p <= kmax;) {
        const int32_t slot = p % a->n_slots;
        int32_t nb = KB - p % KB;
        if (nb > kmax + 1 - p) nb = kmax + 1 - p;
        if (nb > a->n_slots - slot) nb = a->n_slots - slot; /* a block never wraps */
        const float *kr[KB], *vr[KB];
        for (int j = 0; j < KB; j++) {
            const bool in = j < nb && p + j >= qlo[0];
            kr[j] = in ? row_f32(a, a->k, slot + j, kf + hp * (size_t)j) : zero;
            vr[j] = in ? row_f32(a, a->v, slot + j, vf + hp * (size_t)j) : zero;
        }
        float32x4_t S[KB][4];
        for (int j = 0; j < KB; j++)
            for (int v = 0; v < NV; v++) S[j][v] = vdupq_n_f32(0);
        for (int32_t d = 0; d < hd; d++) {
            float32x4_t qv[4];
            for (int v = 0; v < NV; v++) qv[v] = vld1q_f32(qt + (size_t)d * 16 + 4 * v);
            for (int j = 0; j < KB; j++)
                for (int v = 0; v < NV; v++) S[j][v] = vfmaq_n_f32(S[j][v], qv[v], kr[j][d]);
        }
        float32x4_t alpha[4];
        for (int v = 0; v < NV; v++) {
            float32x4_t mx = m[v];
            for (int j = 0; j < KB; j++) {
                float32x4_t s = vmulq_n_f32(S[j][v], a->scale);
                if (cap > 0) s = vmulq_n_f32(tanh_f32x4(vmulq_n_f32(s, 1.0f / cap)), cap);
                const int32x4_t kp = vdupq_n_s32(j < nb ? p + j : INT_MAX);
                const uint32x4_t bad = vorrq_u32(vcgtq_s32(kp, vpos[v]), vcgtq_s32(vlo[v], kp));
                S[j][v] = vbslq_f32(bad, ninf, s);
                mx = vmaxq_f32(mx, S[j][v]);
            }
            const float32x4_t ms = vbslq_f32(vceqq_f32(mx, ninf), vdupq_n_f32(0), mx);
            alpha[v] = arm_exp_ps(vsubq_f32(m[v], ms));
            float32x4_t sum = vdupq_n_f32(0);
            for (int j = 0; j < KB; j++) {
                S[j][v] = arm_exp_ps(vsubq_f32(S[j][v], ms));
                sum = vaddq_f32(sum, S[j][v]);
            }
            l[v] = vfmaq_f32(sum, l[v], alpha[v]);
            m[v] = mx;
        }
        for (int32_t d = 0; d < hd; d++) {
            float *op = ot + (size_t)d * 16;
            float32x4_t o[4];
            for (int v = 0; v < NV; v++) o[v] = vmulq_f32(vld1q_f32(op + 4 * v), alpha[v]);
            for (int j = 0; j < KB; j++)
                for (int v = 0; v < NV; v++) o[v] = vfmaq_n_f32(o[v], S[j][v], vr[j][d]);
            for (int v = 0; v < NV; v++) vst1q_f32(op + 4 * v, o[v]);
        }
        p += nb;
    }
    float lr[16];
    for (int v = 0; v < NV; v++) vst1q_f32(lr + 4 * v, l[v]);
    for (int r = 0; r < nr; r++) {
        const int32_t t = r / a->n_grp, g = r % a->n_grp;
        float *o = a->out + (size_t)t * (size_t)a->out_stride + (size_t)g * (size_t)hd;
        for (int32_t d = 0; d < hd; d++) o[d] = ot[(size_t)d * 16 + (size_t)r] / lr[r];
    }
}

static void attn_neon(const lmq_attn_args *a)
{
    const int nr = a->n_tok * a->n_grp;
    if (nr <= 4)
        attn_tile(a, 1);
    else if (nr <= 8)
        attn_tile(a, 2);
    else
        attn_tile(a, 4);
}

void lmq_kernels_fill_attn_neon(lmq_kernel_table *t)
{
    t->attn = attn_neon;
}

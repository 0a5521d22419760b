/* AVX2 + FMA + F16C kernels: the shared 256-bit bodies of x86_dots.h and
 * x86_act.h compiled with vpmaddubsw/vpmaddwd for the int8 dots. */
#include "kernels.h"
#include "x86_act.h"
#include "x86_dots.h"

static void lmq_vec_dot_f32_avx2(int64_t n, float *s, const void *w, const void *a)
{
    *s = kx_dot_f32(w, a, n);
}

static void lmq_vec_dot_f16_avx2(int64_t n, float *s, const void *w, const void *a)
{
    *s = kx_dot_f16_f16(w, a, n);
}

static void lmq_vec_dot_bf16_avx2(int64_t n, float *s, const void *w, const void *a)
{
    *s = kx_dot_bf16_bf16(w, a, n);
}

static void lmq_vec_dot_q4_0_avx2(int64_t n, float *s, const void *w, const void *a)
{
    kx_vec_dot_q4_0(n, s, w, a);
}

static void lmq_vec_dot_q4_1_avx2(int64_t n, float *s, const void *w, const void *a)
{
    kx_vec_dot_q4_1(n, s, w, a);
}

static void lmq_vec_dot_q5_0_avx2(int64_t n, float *s, const void *w, const void *a)
{
    kx_vec_dot_q5_0(n, s, w, a);
}

static void lmq_vec_dot_q5_1_avx2(int64_t n, float *s, const void *w, const void *a)
{
    kx_vec_dot_q5_1(n, s, w, a);
}

static void lmq_vec_dot_q8_0_avx2(int64_t n, float *s, const void *w, const void *a)
{
    kx_vec_dot_q8_0(n, s, w, a);
}

static void lmq_vec_dot_q2_K_avx2(int64_t n, float *s, const void *w, const void *a)
{
    kx_vec_dot_q2_K(n, s, w, a);
}

static void lmq_vec_dot_q3_K_avx2(int64_t n, float *s, const void *w, const void *a)
{
    kx_vec_dot_q3_K(n, s, w, a);
}

static void lmq_vec_dot_q4_K_avx2(int64_t n, float *s, const void *w, const void *a)
{
    kx_vec_dot_q4_K(n, s, w, a);
}

static void lmq_vec_dot_q5_K_avx2(int64_t n, float *s, const void *w, const void *a)
{
    kx_vec_dot_q5_K(n, s, w, a);
}

static void lmq_vec_dot_q6_K_avx2(int64_t n, float *s, const void *w, const void *a)
{
    kx_vec_dot_q6_K(n, s, w, a);
}

static void lmq_vec_dot_iq4_nl_avx2(int64_t n, float *s, const void *w, const void *a)
{
    kx_vec_dot_iq4_nl(n, s, w, a);
}

static void lmq_vec_dot_iq4_xs_avx2(int64_t n, float *s, const void *w, const void *a)
{
    kx_vec_dot_iq4_xs(n, s, w, a);
}

static void lmq_vec_dot_f8_e4m3_avx2(int64_t n, float *s, const void *w, const void *a)
{
    kx_vec_dot_f8(n, s, w, a, 1);
}

static void lmq_vec_dot_f8_e5m2_avx2(int64_t n, float *s, const void *w, const void *a)
{
    kx_vec_dot_f8(n, s, w, a, 0);
}


static void vec_dot4_q4_0_avx2(int64_t n, float *s, int64_t ss, const void *w, const void *a, int64_t as)
{
    kx_vec_dot4_q4_0(n, s, ss, w, a, as);
}

static void vec_dot4_q8_0_avx2(int64_t n, float *s, int64_t ss, const void *w, const void *a, int64_t as)
{
    kx_vec_dot4_q8_0(n, s, ss, w, a, as);
}

static void vec_dot4_q2_K_avx2(int64_t n, float *s, int64_t ss, const void *w, const void *a, int64_t as)
{
    kx_vec_dot4_q2_K(n, s, ss, w, a, as);
}

static void vec_dot4_q3_K_avx2(int64_t n, float *s, int64_t ss, const void *w, const void *a, int64_t as)
{
    kx_vec_dot4_q3_K(n, s, ss, w, a, as);
}

static void vec_dot4_q4_K_avx2(int64_t n, float *s, int64_t ss, const void *w, const void *a, int64_t as)
{
    kx_vec_dot4_q4_K(n, s, ss, w, a, as);
}

static void vec_dot4_q5_K_avx2(int64_t n, float *s, int64_t ss, const void *w, const void *a, int64_t as)
{
    kx_vec_dot4_q5_K(n, s, ss, w, a, as);
}

static void vec_dot4_q6_K_avx2(int64_t n, float *s, int64_t ss, const void *w, const void *a, int64_t as)
{
    kx_vec_dot4_q6_K(n, s, ss, w, a, as);
}

static void quantize_q8_0_avx2(const float *x, void *y, int64_t n)
{
    kx_quantize_q8_0(x, y, n);
}

static void quantize_q8_1_avx2(const float *x, void *y, int64_t n)
{
    kx_quantize_q8_1(x, y, n);
}

static void quantize_q8_K_avx2(const float *x, void *y, int64_t n)
{
    kx_quantize_q8_K(x, y, n);
}

static void to_float_q8_0_avx2(const void *x, float *y, int64_t n)
{
    kx_q8_0_to_f32(x, y, n);
}

static void to_float_q4_0_avx2(const void *x, float *y, int64_t n)
{
    kx_q4_0_to_f32(x, y, n);
}

static void to_float_q4_1_avx2(const void *x, float *y, int64_t n)
{
    kx_q4_1_to_f32(x, y, n);
}

static void to_float_q5_1_avx2(const void *x, float *y, int64_t n)
{
    kx_q5_1_to_f32(x, y, n);
}

static void to_float_f16_avx2(const void *x, float *y, int64_t n)
{
    kx_f16_to_f32(x, y, n);
}

static void to_float_bf16_avx2(const void *x, float *y, int64_t n)
{
    kx_bf16_to_f32(x, y, n);
}

static void to_float_f8_e4m3_avx2(const void *x, float *y, int64_t n)
{
    kx_f8_to_f32(x, y, n, 1);
}

static void to_float_f8_e5m2_avx2(const void *x, float *y, int64_t n)
{
    kx_f8_to_f32(x, y, n, 0);
}

static void vec_dot_mxfp4_avx2(int64_t n, float *s, const void *w, const void *a)
{
    kx_vec_dot_mxfp4(n, s, w, a);
}

static void vec_dot4_mxfp4_avx2(int64_t n, float *s, int64_t ss, const void *w, const void *a, int64_t as)
{
    kx_vec_dot4_mxfp4(n, s, ss, w, a, as);
}

static void to_float_mxfp4_avx2(const void *x, float *y, int64_t n)
{
    kx_mxfp4_to_f32(x, y, n);
}

static float dot_f32_avx2(const float *a, const float *b, int64_t n)
{
    return kx_dot_f32(a, b, n);
}

static float dot_f16_f32_avx2(const uint16_t *a, const float *b, int64_t n)
{
    return kx_dot_f16_f32(a, b, n);
}

static void axpy_f32_avx2(float *y, float alpha, const float *x, int64_t n)
{
    kx_axpy_f32(y, alpha, x, n);
}

static void axpy_f16_avx2(float *y, float alpha, const uint16_t *x, int64_t n)
{
    kx_axpy_f16(y, alpha, x, n);
}

static float softmax_avx2(float *x, int64_t n)
{
    return kx_softmax(x, n);
}

void lmq_kernels_fill_avx2(lmq_kernel_table *t)
{
    t->isa = LMQ_ISA_AVX2;
    t->vec_dot[LMQ_TYPE_F32] = lmq_vec_dot_f32_avx2;
    t->vec_dot[LMQ_TYPE_F16] = lmq_vec_dot_f16_avx2;
    t->vec_dot[LMQ_TYPE_BF16] = lmq_vec_dot_bf16_avx2;
    t->vec_dot[LMQ_TYPE_Q4_0] = lmq_vec_dot_q4_0_avx2;
    t->vec_dot[LMQ_TYPE_Q4_1] = lmq_vec_dot_q4_1_avx2;
    t->vec_dot[LMQ_TYPE_Q5_0] = lmq_vec_dot_q5_0_avx2;
    t->vec_dot[LMQ_TYPE_Q5_1] = lmq_vec_dot_q5_1_avx2;
    t->vec_dot[LMQ_TYPE_Q8_0] = lmq_vec_dot_q8_0_avx2;
    t->vec_dot[LMQ_TYPE_Q2_K] = lmq_vec_dot_q2_K_avx2;
    t->vec_dot[LMQ_TYPE_Q3_K] = lmq_vec_dot_q3_K_avx2;
    t->vec_dot[LMQ_TYPE_Q4_K] = lmq_vec_dot_q4_K_avx2;
    t->vec_dot[LMQ_TYPE_Q5_K] = lmq_vec_dot_q5_K_avx2;
    t->vec_dot[LMQ_TYPE_Q6_K] = lmq_vec_dot_q6_K_avx2;
    t->vec_dot[LMQ_TYPE_IQ4_NL] = lmq_vec_dot_iq4_nl_avx2;
    t->vec_dot[LMQ_TYPE_IQ4_XS] = lmq_vec_dot_iq4_xs_avx2;
    t->vec_dot[LMQ_TYPE_F8_E4M3] = lmq_vec_dot_f8_e4m3_avx2;
    t->vec_dot[LMQ_TYPE_F8_E5M2] = lmq_vec_dot_f8_e5m2_avx2;
    t->vec_dot4[LMQ_TYPE_Q4_0] = vec_dot4_q4_0_avx2;
    t->vec_dot4[LMQ_TYPE_Q8_0] = vec_dot4_q8_0_avx2;
    t->vec_dot4[LMQ_TYPE_Q2_K] = vec_dot4_q2_K_avx2;
    t->vec_dot4[LMQ_TYPE_Q3_K] = vec_dot4_q3_K_avx2;
    t->vec_dot4[LMQ_TYPE_Q4_K] = vec_dot4_q4_K_avx2;
    t->vec_dot4[LMQ_TYPE_Q5_K] = vec_dot4_q5_K_avx2;
    t->vec_dot4[LMQ_TYPE_Q6_K] = vec_dot4_q6_K_avx2;
    t->to_float[LMQ_TYPE_F16] = to_float_f16_avx2;
    t->to_float[LMQ_TYPE_Q8_0] = to_float_q8_0_avx2;
    t->to_float[LMQ_TYPE_Q4_0] = to_float_q4_0_avx2;
    t->to_float[LMQ_TYPE_Q4_1] = to_float_q4_1_avx2; /* the f32 panels' rows (q4_1 / q5_1 have no */
    t->to_float[LMQ_TYPE_Q5_1] = to_float_q5_1_avx2; /* integer panel kernel) */
    t->to_float[LMQ_TYPE_BF16] = to_float_bf16_avx2;
    t->to_float[LMQ_TYPE_F8_E4M3] = to_float_f8_e4m3_avx2;
    t->to_float[LMQ_TYPE_F8_E5M2] = to_float_f8_e5m2_avx2;
    t->from_float[LMQ_TYPE_Q8_0] = quantize_q8_0_avx2;
    t->from_float[LMQ_TYPE_Q8_1] = quantize_q8_1_avx2;
    t->from_float[LMQ_TYPE_Q8_K] = quantize_q8_K_avx2;
    t->vec_dot[LMQ_TYPE_MXFP4] = vec_dot_mxfp4_avx2;
    t->vec_dot4[LMQ_TYPE_MXFP4] = vec_dot4_mxfp4_avx2;
    t->to_float[LMQ_TYPE_MXFP4] = to_float_mxfp4_avx2;
    t->dot_f32 = dot_f32_avx2;
    t->dot_f16_f32 = dot_f16_f32_avx2;
    t->axpy_f32 = axpy_f32_avx2;
    t->axpy_f16 = axpy_f16_avx2;
    t->softmax = softmax_avx2;
    lmq_kernels_fill_iq_avx2(t);
}

/* Scale searches shared by the quantizers: the weighted least-squares
 * searches ggml's reference quantizers use (make_qx_quants, make_qkx2/3_quants,
 * make_qp_quants), rewritten for lmq. Every search minimises
 * sum_i w_i * (x_i - q(x_i))^2 for a fixed integer grid. */
#include "quant_internal.h"

float lmq_sum_sq(const float *x, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return s < 3.0e38 ? (float)s : 3.0e38f;
}

/* Copies w (NULL: x^2 of the normalised x) scaled so its maximum is 1, so
 * the sums below neither overflow nor underflow whatever the input's
 * magnitude; weights that are all zero or not finite become uniform. */
static void norm_weights(int n, const float *xs, const float *w, float *ws)
{
    float wmax = 0.0f;
    for (int i = 0; i < n; i++) {
        ws[i] = w ? w[i] : xs[i] * xs[i];
        if (ws[i] > wmax) wmax = ws[i];
    }
    if (!(wmax > 0.0f) || !isfinite(wmax)) {
        for (int i = 0; i < n; i++) ws[i] = 1.0f;
        return;
    }
    for (int i = 0; i < n; i++) ws[i] = isfinite(ws[i]) ? ws[i] / wmax : 1.0f;
}

/* ----------------------------------------------------------------------
 * Symmetric: x ~ s * l, l in [-nmax, nmax-1]. For a fixed assignment l the
 * best s is sumlx/suml2 and the error is sum(w x^2) - sumlx^2/suml2, so
 * candidates are compared by sumlx^2/suml2 (larger is better).
 * ---------------------------------------------------------------------- */

float lmq_qx_search(int n, int nmax, const float *xin, uint8_t *L, const float *qw)
{
    float max = 0.0f, amax = 0.0f;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(xin[i]);
        if (ax > amax) {
            amax = ax;
            max = xin[i];
        }
    }
    if (amax < LMQ_GROUP_MAX_EPS) {
        memset(L, nmax, (size_t)n);
        return 0.0f;
    }
    float x[256], w[256];
    for (int i = 0; i < n; i++) x[i] = xin[i] / amax;
    norm_weights(n, x, qw, w);
    max = max > 0.0f ? 1.0f : -1.0f;
    /* The element of largest magnitude maps to -nmax (the grid's longer side). */
    float best_lx = 0.0f, best_l2 = 0.0f, best_is = -(float)nmax / max;
    for (int is = -9; is <= 9; is++) {
        const float iscale = -((float)nmax + 0.1f * (float)is) / max;
        float sumlx = 0.0f, suml2 = 0.0f;
        for (int i = 0; i < n; i++) {
            const int l = lmq_clampi(lmq_nearest_int(iscale * x[i]), -nmax, nmax - 1);
            sumlx += w[i] * x[i] * (float)l;
            suml2 += w[i] * (float)(l * l);
        }
        if (suml2 > 0.0f && (best_l2 == 0.0f || sumlx * sumlx * best_l2 > best_lx * best_lx * suml2)) {
            best_lx = sumlx;
            best_l2 = suml2;
            best_is = iscale;
        }
    }
    int lv[256];
    for (int i = 0; i < n; i++)
        lv[i] = lmq_clampi(lmq_nearest_int(best_is * x[i]), -nmax, nmax - 1);
    if (best_l2 <= 0.0f) { /* every weight zero where quants are non-zero */
        for (int i = 0; i < n; i++) L[i] = (uint8_t)(lv[i] + nmax);
        return amax / best_is;
    }
    /* Coordinate descent: move single quants to their best level for the
     * scale implied by the others while that improves sumlx^2/suml2. */
    float sumlx = best_lx, suml2 = best_l2;
    for (int itry = 0; itry < 5; itry++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            if (w[i] == 0.0f) continue;
            const float slx = sumlx - w[i] * x[i] * (float)lv[i];
            const float sl2 = suml2 - w[i] * (float)(lv[i] * lv[i]);
            if (slx == 0.0f || sl2 <= 0.0f) continue;
            const int nl = lmq_clampi(lmq_nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (nl == lv[i]) continue;
            const float nlx = slx + w[i] * x[i] * (float)nl;
            const float nl2 = sl2 + w[i] * (float)(nl * nl);
            if (nl2 > 0.0f && nlx * nlx * suml2 > sumlx * sumlx * nl2) {
                lv[i] = nl;
                sumlx = nlx;
                suml2 = nl2;
                changed++;
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (uint8_t)(lv[i] + nmax);
    return sumlx / suml2 * amax;
}

/* ----------------------------------------------------------------------
 * Asymmetric: x ~ s * l + m, l in [0, nmax], m <= 0. Each candidate inverse
 * scale gives an assignment l; (s, m) then come from weighted least squares,
 * with m clamped to 0 (and s refitted) when the fit wants m > 0.
 * ---------------------------------------------------------------------- */

static float qkx_error(int n, const float *x, const float *w, const uint8_t *L, float s,
                       float m)
{
    float e = 0.0f;
    for (int i = 0; i < n; i++) {
        const float d = s * (float)L[i] + m - x[i];
        e += w[i] * d * d;
    }
    return e;
}

float lmq_qkx_search(int n, int nmax, const float *xin, const float *win, uint8_t *L,
                     float *neg_min, float rmin, float rdelta, int nstep)
{
    float amax = 0.0f;
    for (int i = 0; i < n; i++) amax = fabsf(xin[i]) > amax ? fabsf(xin[i]) : amax;
    if (amax < LMQ_GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        *neg_min = 0.0f;
        return 0.0f;
    }
    float x[256], w[256];
    for (int i = 0; i < n; i++) x[i] = xin[i] / amax;
    norm_weights(n, x, win, w);
    float min = x[0], max = x[0], sum_w = 0.0f, sum_x = 0.0f;
    for (int i = 0; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0.0f) min = 0.0f;
    if (max <= min) {
        memset(L, 0, (size_t)n);
        *neg_min = -min * amax;
        return 0.0f;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1.0f / iscale;
    for (int i = 0; i < n; i++)
        L[i] = (uint8_t)lmq_clampi(lmq_nearest_int(iscale * (x[i] - min)), 0, nmax);
    float best = qkx_error(n, x, w, L, scale, min);
    uint8_t Laux[256];
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
        float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
        for (int i = 0; i < n; i++) {
            const int l = lmq_clampi(lmq_nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)(l * l);
            sum_xl += w[i] * (float)l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (!(D > 0.0f)) continue;
        float s = (sum_w * sum_xl - sum_x * sum_l) / D;
        float m = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (m > 0.0f) {
            m = 0.0f;
            s = sum_xl / sum_l2;
        }
        const float e = qkx_error(n, x, w, Laux, s, m);
        if (e < best) {
            memcpy(L, Laux, (size_t)n);
            best = e;
            scale = s;
            min = m;
        }
    }
    *neg_min = -min * amax;
    return scale * amax;
}

/* ----------------------------------------------------------------------
 * Non-negative: x >= 0 ~ s * l, l in [0, nmax].
 * ---------------------------------------------------------------------- */

float lmq_qp_search(int n, int nmax, const float *xin, uint8_t *L, const float *win)
{
    float max = 0.0f;
    for (int i = 0; i < n; i++) max = xin[i] > max ? xin[i] : max;
    if (!(max > 0.0f)) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float x[64], w[64];
    for (int i = 0; i < n; i++) x[i] = xin[i] > 0.0f ? xin[i] / max : 0.0f;
    norm_weights(n, x, win, w);
    float best_is = (float)nmax, best = -1.0f;
    for (int is = -4; is <= 4; is++) {
        const float iscale = 0.1f * (float)is + (float)nmax;
        const float scale = 1.0f / iscale;
        float mse = 0.0f;
        for (int i = 0; i < n; i++) {
            const int l = lmq_clampi(lmq_nearest_int(iscale * x[i]), 0, nmax);
            const float d = x[i] - scale * (float)l;
            mse += w[i] * d * d;
        }
        if (best < 0.0f || mse < best) {
            best = mse;
            best_is = iscale;
        }
    }
    float sumlx = 0.0f, suml2 = 0.0f;
    int lv[64];
    for (int i = 0; i < n; i++) {
        lv[i] = lmq_clampi(lmq_nearest_int(best_is * x[i]), 0, nmax);
        sumlx += w[i] * x[i] * (float)lv[i];
        suml2 += w[i] * (float)(lv[i] * lv[i]);
    }
    for (int itry = 0; itry < 5 && suml2 > 0.0f; itry++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            const float slx = sumlx - w[i] * x[i] * (float)lv[i];
            const float sl2 = suml2 - w[i] * (float)(lv[i] * lv[i]);
            if (!(slx > 0.0f && sl2 > 0.0f)) continue;
            const int nl = lmq_clampi(lmq_nearest_int(x[i] * sl2 / slx), 0, nmax);
            if (nl == lv[i]) continue;
            const float nlx = slx + w[i] * x[i] * (float)nl;
            const float nl2 = sl2 + w[i] * (float)(nl * nl);
            if (nlx * nlx * suml2 > sumlx * sumlx * nl2) {
                lv[i] = nl;
                sumlx = nlx;
                suml2 = nl2;
                changed++;
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (uint8_t)lv[i];
    if (!(suml2 > 0.0f && sumlx > 0.0f)) return max / best_is;
    return sumlx / suml2 * max;
}

int lmq_iq4_best_index(const int8_t *grid, float x)
{
    if (x <= grid[0]) return 0;
    if (x >= grid[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (x < grid[mid])
            hi = mid;
        else
            lo = mid;
    }
    return x - grid[hi - 1] < grid[hi] - x ? hi - 1 : hi;
}

float lmq_iq4_search(int n, const float *xin, const float *win, uint8_t *L)
{
    const int8_t *grid = lmq_iq4nl_values;
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < n; i++) {
        if (fabsf(xin[i]) > amax) {
            amax = fabsf(xin[i]);
            max = xin[i];
        }
    }
    if (amax < LMQ_GROUP_MAX_EPS) {
        for (int i = 0; i < n; i++) L[i] = (uint8_t)lmq_iq4_best_index(grid, 0.0f);
        return 0.0f;
    }
    float x[256], w[256];
    for (int i = 0; i < n; i++) x[i] = xin[i] / amax;
    norm_weights(n, x, win, w);
    max = max > 0.0f ? 1.0f : -1.0f;
    /* Candidate inverse scales map the largest element to about either end
     * of the (asymmetric) grid: (itry + grid[0]) / max as ggml does, and
     * (itry + grid[15]) / max; each assignment gets its least-squares d. */
    float best_d = -max / (float)grid[0], best = -1.0f;
    for (int side = 0; side < 2; side++) {
        const float end = (float)grid[side ? 15 : 0];
        for (int itry = -7; itry <= 7; itry++) {
            const float id = ((float)itry + end) / max;
            float sumqx = 0.0f, sumq2 = 0.0f;
            for (int i = 0; i < n; i++) {
                const float q = (float)grid[lmq_iq4_best_index(grid, id * x[i])];
                sumqx += w[i] * q * x[i];
                sumq2 += w[i] * q * q;
            }
            if (sumq2 > 0.0f && (best < 0.0f || sumqx * sumqx > best * sumq2)) {
                best_d = sumqx / sumq2;
                best = best_d * sumqx;
            }
        }
    }
    const float id = lmq_inv(best_d);
    for (int i = 0; i < n; i++) L[i] = (uint8_t)lmq_iq4_best_index(grid, id * x[i]);
    return best_d * amax;
}

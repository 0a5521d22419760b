/* Scale searches shared by the quantizers: weighted least-squares searches
 * in the manner of ggml's make_qx_quants / make_qkx2_quants / make_qp_quants
 * (written anew for lmq). Each minimises sum_i w_i * (x_i - q(x_i))^2 over
 * an integer grid.
 *
 * Inputs are first normalised (x by its largest magnitude, w by its
 * largest value) so no sum over- or underflows whatever the magnitude of
 * the data. The candidate loops are written as 8 independent lanes of pure
 * float arithmetic (rounding by the 1.5*2^23 trick, which is
 * round-to-nearest-even) so the compiler can vectorise them; the lanes are
 * summed in a fixed order, so results do not depend on the compiler's choice. */
#include "quant_internal.h"

#define LANES 8

float lmq_sum_sq(const float *x, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return s < 3.0e38 ? (float)s : 3.0e38f;
}

/* Round to nearest even (|v| < 2^22) without leaving float. */
static inline float rnd(float v)
{
    return (v + 12582912.0f) - 12582912.0f;
}

static inline float clampf(float v, float lo, float hi)
{
    v = v < lo ? lo : v;
    return v > hi ? hi : v;
}

/* Fixed reduction order of the 8 lanes (the order a 4-wide vector unit
 * reduces in): (a0+a4, a1+a5, a2+a6, a3+a7), then pairs, then the two. */
static inline float lane_sum(const float a[LANES])
{
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

/* Copies w (NULL: x^2 of the normalised x) scaled so its maximum is 1;
 * weights that are all zero or not finite become uniform. */
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
    const float inv = 1.0f / wmax;
    for (int i = 0; i < n; i++) ws[i] = isfinite(ws[i]) ? ws[i] * inv : 1.0f;
}

/* Candidate sums: for each candidate c and l_i = round(clamp(isc[c] * xm_i,
 * lo, hi)), S[c] = { sum w l, sum w l^2, sum wx l }. n is a multiple of
 * LANES (inputs are padded with zero weights). */
typedef lmq_csum3 csum3;
#define MAX_CAND 40

#if defined(__GNUC__)
/* Lanes 0-3 and 4-7 as two GNU C generic 4-float vectors (lowered to what
 * the target has; no ISA-specific code). Same sums in the same order as the
 * portable version below, so results do not depend on the compiler. */
typedef float v4f __attribute__((vector_size(4 * sizeof(float))));

void lmq_q_csums_ref(int n, const float *xm, const float *w, const float *wx, int nc, const float *isc, float lo,
                     float hi, lmq_csum3 *S)
{
    float l[256 + LANES];
    for (int c = 0; c < nc; c++) {
        const float is = isc[c];
        for (int i = 0; i < n; i++) l[i] = rnd(clampf(is * xm[i], lo, hi));
        v4f a0 = {0}, a1 = {0}, b0 = {0}, b1 = {0}, c0 = {0}, c1 = {0};
        for (int i = 0; i < n; i += LANES) {
            v4f lv0, lv1, w0, w1, x0, x1;
            memcpy(&lv0, l + i, sizeof lv0);
            memcpy(&lv1, l + i + 4, sizeof lv1);
            memcpy(&w0, w + i, sizeof w0);
            memcpy(&w1, w + i + 4, sizeof w1);
            memcpy(&x0, wx + i, sizeof x0);
            memcpy(&x1, wx + i + 4, sizeof x1);
            const v4f wl0 = w0 * lv0, wl1 = w1 * lv1;
            a0 += wl0;
            a1 += wl1;
            b0 += wl0 * lv0;
            b1 += wl1 * lv1;
            c0 += x0 * lv0;
            c1 += x1 * lv1;
        }
        const v4f a = a0 + a1, b = b0 + b1, cc = c0 + c1;
        S[c][0] = (a[0] + a[2]) + (a[1] + a[3]);
        S[c][1] = (b[0] + b[2]) + (b[1] + b[3]);
        S[c][2] = (cc[0] + cc[2]) + (cc[1] + cc[3]);
    }
}
#else
void lmq_q_csums_ref(int n, const float *xm, const float *w, const float *wx, int nc, const float *isc, float lo,
                     float hi, lmq_csum3 *S)
{
    for (int c = 0; c < nc; c++) {
        float a[LANES] = {0}, b[LANES] = {0}, d[LANES] = {0};
        for (int i = 0; i < n; i += LANES) {
            for (int k = 0; k < LANES; k++) {
                const float l = rnd(clampf(isc[c] * xm[i + k], lo, hi));
                const float wl = w[i + k] * l;
                a[k] += wl;
                b[k] += wl * l;
                d[k] += wx[i + k] * l;
            }
        }
        S[c][0] = lane_sum(a);
        S[c][1] = lane_sum(b);
        S[c][2] = lane_sum(d);
    }
}
#endif

/* ----------------------------------------------------------------------
 * Weighted squared error of a linear grid: q = round(clamp((x + ml) / dl,
 * lo, hi)), x' = dl * q - ml. Used to compare neighbouring integer
 * sub-block scales once the super-block scale is fixed.
 * ---------------------------------------------------------------------- */

float lmq_grid_err(int n, const float *x, const float *w, float dl, float ml, float lo,
                   float hi)
{
    float e;
    lmq_q_simd()->grid_errs(n, x, w, 1, &dl, &ml, lo, hi, &e);
    return e;
}

static float grid_err_ref(int n, const float *x, const float *w, float dl, float ml, float lo, float hi)
{
    const float idl = lmq_inv(dl);
    float e[LANES] = {0};
    int i = 0;
#if defined(__GNUC__)
    float q[256];
    const int nv = n <= 256 ? n / LANES * LANES : 0;
    for (int k = 0; k < nv; k++) q[k] = rnd(clampf((x[k] + ml) * idl, lo, hi));
    v4f e0 = {0}, e1 = {0};
    for (; i < nv; i += LANES) {
        v4f xv[2], wv[2], qv[2];
        memcpy(xv, x + i, sizeof xv);
        memcpy(wv, w + i, sizeof wv);
        memcpy(qv, q + i, sizeof qv);
        const v4f d0 = dl * qv[0] - ml - xv[0], d1 = dl * qv[1] - ml - xv[1];
        e0 += wv[0] * d0 * d0;
        e1 += wv[1] * d1 * d1;
    }
    memcpy(e, &e0, sizeof e0);
    memcpy(e + 4, &e1, sizeof e1);
#else
    for (; i + LANES <= n; i += LANES) {
        for (int k = 0; k < LANES; k++) {
            const float q = rnd(clampf((x[i + k] + ml) * idl, lo, hi));
            const float d = dl * q - ml - x[i + k];
            e[k] += w[i + k] * d * d;
        }
    }
#endif
    for (; i < n; i++) {
        const float qi = rnd(clampf((x[i] + ml) * idl, lo, hi));
        const float d = dl * qi - ml - x[i];
        e[0] += w[i] * d * d;
    }
    return lane_sum(e);
}

void lmq_q_grid_errs_ref(int n, const float *x, const float *w, int nc, const float *dl, const float *ml, float lo,
                         float hi, float *e)
{
    for (int c = 0; c < nc; c++) e[c] = grid_err_ref(n, x, w, dl[c], ml[c], lo, hi);
}

void lmq_q_asym_sums_ref(int nsub, int len, const float *x, const float *w, const float *ml, const float *idl,
                         int nmax, double S[][5])
{
    for (int j = 0; j < nsub; j++) {
        const float *xs = x + len * j, *ws = w + len * j;
        double q2 = 0, q1 = 0, w1 = 0, qx = 0, x1 = 0;
        for (int l = 0; l < len; l++) {
            const float q = (float)lmq_clampi(lmq_nearest_int((xs[l] + ml[j]) * idl[j]), 0, nmax);
            q2 += ws[l] * q * q;
            q1 += ws[l] * q;
            w1 += ws[l];
            qx += ws[l] * q * xs[l];
            x1 += ws[l] * xs[l];
        }
        S[j][0] = q2;
        S[j][1] = q1;
        S[j][2] = w1;
        S[j][3] = qx;
        S[j][4] = x1;
    }
}

/* Pads a group to a multiple of LANES with zero-weight zeros. */
static int pad_lanes(int n, float *x, float *w)
{
    int np = (n + LANES - 1) / LANES * LANES;
    for (int i = n; i < np; i++) x[i] = w[i] = 0.0f;
    return np;
}

/* ----------------------------------------------------------------------
 * Symmetric: x ~ s * l, l in [-nmax, nmax-1]. For a fixed assignment l the
 * best s is sumlx/suml2 and the error is sum(w x^2) - sumlx^2/suml2, so
 * assignments are compared by sumlx^2/suml2 (larger is better).
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
    float x[256 + LANES], w[256 + LANES], wx[256 + LANES];
    const float inv_amax = 1.0f / amax;
    for (int i = 0; i < n; i++) x[i] = xin[i] * inv_amax;
    norm_weights(n, x, qw, w);
    const int np = pad_lanes(n, x, w);
    for (int i = 0; i < np; i++) wx[i] = w[i] * x[i];
    const float sgn = max > 0.0f ? 1.0f : -1.0f;
    const float lo = (float)-nmax, hi = (float)(nmax - 1);

    /* Candidates: the element of largest magnitude maps to about -nmax
     * (the grid's longer side), -(nmax + 0.1 k) for k in [-9, 9]. */
    float isc[19];
    csum3 S[19];
    for (int k = 0; k < 19; k++) isc[k] = -((float)nmax + 0.1f * (float)(k - 9)) * sgn;
    lmq_q_simd()->csums(np, x, w, wx, 19, isc, lo, hi, S);
    float best_lx = 0.0f, best_l2 = 0.0f, best_is = -(float)nmax * sgn;
    for (int k = 0; k < 19; k++) {
        const float l2 = S[k][1], lx = S[k][2];
        if (l2 > 0.0f && (best_l2 == 0.0f || lx * lx * best_l2 > best_lx * best_lx * l2)) {
            best_lx = lx;
            best_l2 = l2;
            best_is = isc[k];
        }
    }
    int lv[256];
    for (int i = 0; i < n; i++) lv[i] = (int)rnd(clampf(best_is * x[i], lo, hi));
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
            const float slx = sumlx - wx[i] * (float)lv[i];
            const float sl2 = suml2 - w[i] * (float)(lv[i] * lv[i]);
            if (slx == 0.0f || sl2 <= 0.0f) continue;
            const int nl = (int)rnd(clampf(x[i] * sl2 / slx, lo, hi));
            if (nl == lv[i]) continue;
            const float nlx = slx + wx[i] * (float)nl;
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
 * scale gives an assignment l = round((x - min) * iscale); (s, m) then come
 * from weighted least squares (m clamped to 0, s refitted, when the fit
 * wants m > 0). At the least-squares optimum the error is
 * sum(w x^2) - (s * sum(w x l) + m * sum(w x)), so candidates are compared
 * by F = s * sum(w x l) + m * sum(w x) (larger is better). A final
 * assign/refit round (each step can only lower the error) polishes the best.
 * ---------------------------------------------------------------------- */

/* A candidate's least-squares fit, its quality F = num / den (den > 0). */
typedef struct fit2 {
    float num, den;
    bool ok;
} fit2;

/* Fit of s, m (m <= 0) for sums ls = {sum w l, sum w l^2, sum w x l} with
 * W = sum w, X = sum w x; with D = W*B - A^2: s = (W*C - X*A)/D,
 * m = (B*X - A*C)/D, F = s*C + m*X; when m would be > 0: m = 0, s = C/B,
 * F = C^2/B. No divisions: F stays a fraction. */
static fit2 fit_sm(float W, float X, const float ls[3], float *s, float *m)
{
    const float A = ls[0], B = ls[1], C = ls[2];
    const float D = W * B - A * A;
    if (D > 0.0f) {
        const float ns = W * C - X * A, nm = B * X - A * C;
        if (nm <= 0.0f) {
            if (s) {
                *s = ns / D;
                *m = nm / D;
            }
            return (fit2){ns * C + nm * X, D, true};
        }
    }
    if (!(B > 0.0f)) return (fit2){0.0f, 1.0f, false};
    if (s) {
        *s = C / B;
        *m = 0.0f;
    }
    return (fit2){C * C, B, true};
}

static inline bool fit_better(fit2 a, fit2 b)
{
    return a.ok && (!b.ok || a.num * b.den > b.num * a.den);
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
    float x[256 + LANES], w[256 + LANES], wx[256 + LANES], xm[256 + LANES];
    const float inv_amax = 1.0f / amax;
    for (int i = 0; i < n; i++) x[i] = xin[i] * inv_amax;
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
    const int np = pad_lanes(n, x, w);
    for (int i = 0; i < np; i++) {
        wx[i] = w[i] * x[i];
        xm[i] = x[i] - min;
    }
    const float fmax_l = (float)nmax, inv_range = 1.0f / (max - min);
    if (nstep > MAX_CAND - 2) nstep = MAX_CAND - 2;

    /* Candidate 0: plain rounding on [min, max], s and m not refitted (the
     * error of a non-fitted pair is sum(w x^2) - F with F as below).
     * Candidates 1..nstep+1: inverse scales (nmax + rmin + rdelta k) / range. */
    float isc[MAX_CAND];
    csum3 S[MAX_CAND];
    const int nc = nstep + 2;
    isc[0] = fmax_l * inv_range;
    for (int k = 0; k <= nstep; k++) isc[k + 1] = (rmin + rdelta * (float)k + fmax_l) * inv_range;
    lmq_q_simd()->csums(np, xm, w, wx, nc, isc, 0.0f, fmax_l, S);

    float s0 = (max - min) / fmax_l, m0 = min;
    const float q2 = s0 * s0 * S[0][1] + 2.0f * s0 * m0 * S[0][0] + m0 * m0 * sum_w;
    fit2 best = {2.0f * (s0 * S[0][2] + m0 * sum_x) - q2, 1.0f, true};
    int best_k = 0;
    for (int k = 1; k < nc; k++) {
        const fit2 f = fit_sm(sum_w, sum_x, S[k], NULL, NULL);
        if (fit_better(f, best)) {
            best = f;
            best_k = k;
        }
    }
    float s = s0, m = m0;
    if (best_k > 0) fit_sm(sum_w, sum_x, S[best_k], &s, &m);
    for (int i = 0; i < n; i++) L[i] = (uint8_t)rnd(clampf(isc[best_k] * xm[i], 0.0f, fmax_l));

    /* Polish: re-assign each value to its nearest level for (s, m) and refit;
     * each step can only lower the error. */
    for (int it = 0; it < 2 && s > 0.0f; it++) {
        /* (x - m) / s = (xm + min - m) / s: the same grid as the candidates */
        const float is = 1.0f / s;
        float xs[256 + LANES], one = 1.0f, ls[3];
        for (int i = 0; i < np; i++) xs[i] = (x[i] - m) * is;
        lmq_q_simd()->csums(np, xs, w, wx, 1, &one, 0.0f, fmax_l, (csum3 *)ls);
        float ns, nm;
        const fit2 f = fit_sm(sum_w, sum_x, ls, &ns, &nm);
        if (!fit_better(f, best)) break;
        for (int i = 0; i < n; i++) L[i] = (uint8_t)rnd(clampf(xs[i], 0.0f, fmax_l));
        best = f;
        s = ns;
        m = nm;
    }
    *neg_min = -m * amax;
    return s * amax;
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
    const float fmax_l = (float)nmax;
    float best_is = fmax_l, best = -1.0f;
    for (int is = -4; is <= 4; is++) {
        const float iscale = 0.1f * (float)is + fmax_l;
        const float scale = 1.0f / iscale;
        float mse = 0.0f;
        for (int i = 0; i < n; i++) {
            const float d = x[i] - scale * rnd(clampf(iscale * x[i], 0.0f, fmax_l));
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
        lv[i] = (int)rnd(clampf(best_is * x[i], 0.0f, fmax_l));
        sumlx += w[i] * x[i] * (float)lv[i];
        suml2 += w[i] * (float)(lv[i] * lv[i]);
    }
    for (int itry = 0; itry < 5 && suml2 > 0.0f; itry++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            const float slx = sumlx - w[i] * x[i] * (float)lv[i];
            const float sl2 = suml2 - w[i] * (float)(lv[i] * lv[i]);
            if (!(slx > 0.0f && sl2 > 0.0f)) continue;
            const int nl = (int)rnd(clampf(x[i] * sl2 / slx, 0.0f, fmax_l));
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

/* ----------------------------------------------------------------------
 * iq4 grid: the nearest grid value is grid[0] plus the steps whose
 * midpoints lie at or below x (a tie goes to the upper value, as in ggml's
 * best_index_int8); written as compares so it vectorises.
 * ---------------------------------------------------------------------- */

/* Midpoints between consecutive lmq_iq4nl_values and the steps between
 * them (test_quant checks lmq_iq4_search's picks against the grid). */
const float lmq_iq4_mid[15] = {-115.5f, -93.5f, -74.0f, -57.0f, -42.0f, -28.5f, -16.0f, -4.5f, 7.0f, 19.0f, 31.5f, 45.5f, 61.0f, 79.0f, 101.0f};
const float lmq_iq4_step[15] = {23.0f, 21.0f, 18.0f, 16.0f, 14.0f, 13.0f, 12.0f, 11.0f, 12.0f, 12.0f, 13.0f, 15.0f, 16.0f, 20.0f, 24.0f};

int lmq_iq4_best_index(const int8_t *grid, float x)
{
    int idx = 0;
    for (int k = 0; k < 15; k++) idx += x >= 0.5f * (float)(grid[k] + grid[k + 1]);
    return idx;
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
    float x[256 + LANES], w[256 + LANES], wx[256 + LANES];
    const float inv_amax = 1.0f / amax;
    for (int i = 0; i < n; i++) x[i] = xin[i] * inv_amax;
    norm_weights(n, x, win, w);
    const int np = pad_lanes(n, x, w);
    for (int i = 0; i < np; i++) wx[i] = w[i] * x[i];
    const float sgn = max > 0.0f ? 1.0f : -1.0f;
    /* Candidate inverse scales map the largest element to about either end
     * of the (asymmetric) grid: (itry + grid[0]) / max as ggml does, and
     * (itry + grid[15]) / max; each assignment gets its least-squares d. */
    float best_d = -sgn / (float)grid[0], best = -1.0f;
    float ids[30], S[30][2];
    for (int side = 0, c = 0; side < 2; side++) {
        const float end = (float)grid[side ? 15 : 0];
        for (int itry = -7; itry <= 7; itry++) ids[c++] = ((float)itry + end) * sgn;
    }
    lmq_q_simd()->iq4_sums(np, x, w, wx, 30, ids, S);
    for (int c = 0; c < 30; c++) {
        const float sumqx = S[c][0], sumq2 = S[c][1];
        if (sumq2 > 0.0f && (best < 0.0f || sumqx * sumqx > best * sumq2)) {
            best_d = sumqx / sumq2;
            best = best_d * sumqx;
        }
    }
    const float id = lmq_inv(best_d);
    for (int i = 0; i < n; i++) L[i] = (uint8_t)lmq_iq4_best_index(grid, id * x[i]);
    return best_d * amax;
}

void lmq_q_iq4_sums_ref(int n, const float *x, const float *w, const float *wx, int nc, const float *id, float S[][2])
{
    for (int c = 0; c < nc; c++) {
        float a[LANES] = {0}, b[LANES] = {0};
        for (int i = 0; i < n; i += LANES) {
            for (int k = 0; k < LANES; k++) {
                const float v = id[c] * x[i + k];
                float q = (float)lmq_iq4nl_values[0];
                for (int s = 0; s < 15; s++) q += v >= lmq_iq4_mid[s] ? lmq_iq4_step[s] : 0.0f;
                a[k] += wx[i + k] * q;
                b[k] += w[i + k] * q * q;
            }
        }
        S[c][0] = lane_sum(a);
        S[c][1] = lane_sum(b);
    }
}

float lmq_iq4_err(int n, const float *x, const float *w, float dl)
{
    return lmq_q_simd()->iq4_err(n, x, w, dl);
}

float lmq_q_iq4_err_ref(int n, const float *x, const float *w, float dl)
{
    const float idl = lmq_inv(dl);
    float e[LANES] = {0};
    for (int i = 0; i < n; i++) {
        const float v = x[i] * idl;
        float q = (float)lmq_iq4nl_values[0];
        for (int s = 0; s < 15; s++) q += v >= lmq_iq4_mid[s] ? lmq_iq4_step[s] : 0.0f;
        const float d = dl * q - x[i];
        e[i % LANES] += w[i] * d * d;
    }
    return lane_sum(e);
}

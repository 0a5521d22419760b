/* Token sampler: a configurable chain of penalties, top-k, top-p, min-p and
 * temperature, then a draw from a seeded generator (splitmix64), so a seed
 * reproduces a run. Temperature <= 0 is greedy (argmax after penalties).
 *
 * Top-k selects its k candidates with a bounded heap (O(n log k), most
 * tokens rejected by one comparison) and sorts only those; top-p without a
 * top-k before it selects growing prefixes (64, 512, 4096 candidates) until
 * their mass reaches p, and sorts the rest only for a distribution so flat
 * that 4096 tokens do not reach it. The order is the total order (logit
 * descending, then id ascending), so the candidates and their order are the
 * ones a full sort gives: the distribution is that of the plain sort
 * (tests/test_sampler.c keeps that sampler as its reference).
 *
 * Optional per-sample extras: a token mask (constrained decoding: the
 * masked tokens get -inf before any stage) and log-probabilities of the
 * chosen token and of the n most likely tokens under the model's own
 * distribution (softmax of the raw logits, as OpenAI reports them). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_runtime.h"

typedef struct cand {
    int32_t id;
    float logit;
} cand;

struct lmq_sampler {
    lmq_sampler_params p;
    int32_t n_vocab;
    cand *cands;       /* (n_vocab) working set */
    int32_t *recent;   /* (penalty_last_n) ring of recent tokens */
    int32_t n_recent, head;
    uint16_t *counts;  /* (n_vocab) occurrences in the window */
    uint8_t *seen;     /* (n_vocab) scratch: token already penalized in this pass */
    double *w;         /* (n_vocab) scratch: the draw's unnormalized probabilities */
    uint64_t rng;
    /* token mask: NULL, or (n_vocab + 7) / 8 bytes, bit set = allowed */
    const uint8_t *mask;
    /* log-probabilities of the last sample */
    int32_t n_top;     /* < 0: off */
    cand *lp_heap;     /* (LMQ_SAMPLER_MAX_TOP_LOGPROBS) */
    lmq_token_logprob lp_chosen;
    lmq_token_logprob lp_top[LMQ_SAMPLER_MAX_TOP_LOGPROBS];
    int32_t lp_n;      /* entries of lp_top filled by the last sample */
    bool lp_valid;
};

lmq_sampler_params lmq_sampler_default_params(void)
{
    lmq_sampler_params p;
    memset(&p, 0, sizeof p);
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.repeat_penalty = 1.0f;
    p.penalty_last_n = 64;
    p.seed = 0x853c49e6748fea9bULL;
    strcpy(p.order, "rkpmt");
    return p;
}

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

lmq_status lmq_sampler_new(const lmq_sampler_params *p, int32_t n_vocab, lmq_sampler **out)
{
    *out = NULL;
    if (n_vocab <= 0) return lmq_error(LMQ_ERR_INVALID_ARG, "sampler: vocabulary size %d", n_vocab);
    lmq_sampler_params q = p ? *p : lmq_sampler_default_params();
    if (!q.order[0]) strcpy(q.order, "rkpmt");
    for (const char *c = q.order; *c; c++)
        if (!strchr("rkpmt", *c))
            return lmq_error(LMQ_ERR_INVALID_ARG, "sampler order '%s': unknown stage '%c' (use r, k, p, m, t)", q.order, *c);
    if (q.penalty_last_n < 0) q.penalty_last_n = 0;
    if (!(q.repeat_penalty > 0)) return lmq_error(LMQ_ERR_INVALID_ARG, "sampler: repeat penalty must be > 0");
    lmq_sampler *s = calloc(1, sizeof *s);
    if (!s) return lmq_error(LMQ_ERR_NOMEM, "sampler");
    s->p = q;
    s->n_vocab = n_vocab;
    s->n_top = -1;
    s->cands = malloc((size_t)n_vocab * sizeof *s->cands);
    s->counts = calloc((size_t)n_vocab, sizeof *s->counts);
    s->seen = calloc((size_t)n_vocab, 1);
    s->w = malloc((size_t)n_vocab * sizeof *s->w);
    s->recent = malloc((size_t)(q.penalty_last_n ? q.penalty_last_n : 1) * sizeof *s->recent);
    if (!s->cands || !s->counts || !s->seen || !s->w || !s->recent) {
        lmq_sampler_free(s);
        return lmq_error(LMQ_ERR_NOMEM, "sampler");
    }
    lmq_sampler_reset(s);
    *out = s;
    return LMQ_OK;
}

void lmq_sampler_free(lmq_sampler *s)
{
    if (!s) return;
    free(s->cands);
    free(s->counts);
    free(s->seen);
    free(s->w);
    free(s->recent);
    free(s->lp_heap);
    free(s);
}

void lmq_sampler_reset(lmq_sampler *s)
{
    memset(s->counts, 0, (size_t)s->n_vocab * sizeof *s->counts);
    s->n_recent = s->head = 0;
    s->rng = s->p.seed;
    s->lp_valid = false;
}

void lmq_sampler_accept(lmq_sampler *s, int32_t token)
{
    int32_t cap = s->p.penalty_last_n;
    if (cap <= 0 || token < 0 || token >= s->n_vocab) return;
    if (s->n_recent == cap) {
        int32_t old = s->recent[s->head];
        if (s->counts[old]) s->counts[old]--;
    } else {
        s->n_recent++;
    }
    s->recent[s->head] = token;
    s->head = (s->head + 1) % cap;
    if (s->counts[token] < UINT16_MAX) s->counts[token]++;
}

void lmq_sampler_set_mask(lmq_sampler *s, const uint8_t *mask)
{
    s->mask = mask;
}

lmq_status lmq_sampler_set_logprobs(lmq_sampler *s, int32_t n_top)
{
    if (n_top > LMQ_SAMPLER_MAX_TOP_LOGPROBS)
        return lmq_error(LMQ_ERR_INVALID_ARG, "sampler: %d top log-probabilities (at most %d)", n_top,
                         LMQ_SAMPLER_MAX_TOP_LOGPROBS);
    if (n_top >= 0 && !s->lp_heap && !(s->lp_heap = malloc(LMQ_SAMPLER_MAX_TOP_LOGPROBS * sizeof *s->lp_heap)))
        return lmq_error(LMQ_ERR_NOMEM, "sampler");
    s->n_top = n_top < 0 ? -1 : n_top;
    s->lp_valid = false;
    return LMQ_OK;
}

bool lmq_sampler_last_logprobs(const lmq_sampler *s, lmq_token_logprob *chosen, lmq_token_logprob *top,
                               int32_t *n_top)
{
    if (!s->lp_valid) return false;
    if (chosen) *chosen = s->lp_chosen;
    if (top) memcpy(top, s->lp_top, (size_t)s->lp_n * sizeof *top);
    if (n_top) *n_top = s->lp_n;
    return true;
}

/* ---------------------------------------------------------------- selection */

/* The total order of candidates: a before b when its logit is higher, or
 * equal with a lower id. */
static inline bool before(cand a, cand b)
{
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

static int cmp_desc(const void *a, const void *b)
{
    cand x = *(const cand *)a, y = *(const cand *)b;
    return before(x, y) ? -1 : before(y, x) ? 1 : 0;
}

/* Min-heap on `before` (the root is the last of the kept ones). */
static void sift_down(cand *h, int32_t n, int32_t i)
{
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && before(h[m], h[l])) m = l;
        if (r < n && before(h[m], h[r])) m = r;
        if (m == i) return;
        cand t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

/* Moves the first m of c[0..n) in the total order to c[0..m), sorted; the
 * rest of c keeps the others in some order. Elements c[0..done) are already
 * the first `done`, sorted (a previous call), and stay. */
static void select_top(cand *c, int32_t n, int32_t done, int32_t m)
{
    if (m > n) m = n;
    if (m <= done) return;
    cand *h = c + done;
    int32_t k = m - done, rest = n - done;
    for (int32_t i = k / 2 - 1; i >= 0; i--) sift_down(h, k, i);
    for (int32_t i = k; i < rest; i++) {
        if (before(h[i], h[0])) {
            cand t = h[0];
            h[0] = h[i];
            h[i] = t;
            sift_down(h, k, 0);
        }
    }
    qsort(h, (size_t)k, sizeof *h, cmp_desc);
}

static void apply_penalties(lmq_sampler *s, cand *c, int32_t n, bool identity)
{
    const lmq_sampler_params *p = &s->p;
    if (!s->n_recent) return;
    /* while no stage reordered (c[i].id == i), visit the recent tokens only */
    int32_t m = identity ? s->n_recent : n;
    for (int32_t j = 0; j < m; j++) {
        int32_t i = j;
        if (identity) {
            i = s->recent[j];
            if (s->seen[i]) continue;
            s->seen[i] = 1;
        }
        uint16_t cnt = s->counts[c[i].id];
        if (!cnt) continue;
        float l = c[i].logit;
        if (p->repeat_penalty != 1.0f) l = l > 0 ? l / p->repeat_penalty : l * p->repeat_penalty;
        l -= (float)cnt * p->frequency_penalty + p->presence_penalty;
        c[i].logit = l;
    }
    if (identity)
        for (int32_t j = 0; j < s->n_recent; j++) s->seen[s->recent[j]] = 0;
}

/* Top-p over c[0..n): the shortest prefix (in the total order) whose
 * probability at temperature 1 reaches top_p. c[0..sorted) is sorted. */
static int32_t top_p_keep(cand *c, int32_t n, int32_t sorted, float top_p)
{
    float mxf = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        if (c[i].logit > mxf) mxf = c[i].logit;
    double mx = mxf, sum = 0, acc = 0;
    for (int32_t i = 0; i < n; i++) sum += exp((double)c[i].logit - mx);
    int32_t i = 0;
    /* a peaked distribution reaches p within the first few dozen tokens; a
     * flat one may need most of the vocabulary: after 4096, sort the rest */
    for (int32_t want = 64;; want *= 8) {
        if (want > 4096 || want >= n) {
            qsort(c + sorted, (size_t)(n - sorted), sizeof *c, cmp_desc);
            sorted = n;
        } else {
            select_top(c, n, sorted, want);
            if (want > sorted) sorted = want;
        }
        for (; i < sorted; i++) {
            acc += exp((double)c[i].logit - mx) / sum;
            if (acc >= top_p) return i + 1;
        }
        if (sorted == n) return n;
    }
}

/* log-softmax of the raw logits: the chosen token and the n_top best. */
static void record_logprobs(lmq_sampler *s, const float *logits, int32_t tok)
{
    int32_t n = s->n_vocab, k = s->n_top;
    float mx = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        if (logits[i] > mx) mx = logits[i]; /* NaN compares false: skipped */
    double sum = 0;
    for (int32_t i = 0; i < n; i++)
        if (!isnan(logits[i])) sum += expf(logits[i] - mx);
    float lse = mx + (float)log(sum);
    cand *h = s->lp_heap;
    int32_t nh = 0;
    for (int32_t i = 0; i < n && k > 0; i++) {
        cand x = {i, isnan(logits[i]) ? -INFINITY : logits[i]};
        if (nh < k) {
            h[nh++] = x;
            if (nh == k)
                for (int32_t j = k / 2 - 1; j >= 0; j--) sift_down(h, k, j);
        } else if (before(x, h[0])) {
            h[0] = x;
            sift_down(h, k, 0);
        }
    }
    qsort(h, (size_t)nh, sizeof *h, cmp_desc);
    for (int32_t i = 0; i < nh; i++) s->lp_top[i] = (lmq_token_logprob){h[i].id, h[i].logit - lse};
    s->lp_n = nh;
    float lt = isnan(logits[tok]) ? -INFINITY : logits[tok];
    s->lp_chosen = (lmq_token_logprob){tok, lt - lse};
    s->lp_valid = true;
}

/* ---------------------------------------------------------------- sampling */

/* Masked tokens get -inf, a mask byte at a time: constrained-decoding masks
 * are mostly runs of 0xff (inside a string) or 0x00 (structure); a mixed
 * byte is applied without a branch per bit (a per-bit branch costs 0.6 ms
 * on an irregular 152k-token mask, this 0.15 ms). */
static void apply_mask(cand *c, int32_t n, const uint8_t *mask)
{
    for (int32_t i = 0; i < n; i += 8) {
        uint8_t b = mask[i >> 3];
        int32_t e = n - i < 8 ? n - i : 8;
        if (b == 0xff) continue;
        if (b == 0) {
            for (int32_t j = 0; j < e; j++) c[i + j].logit = -INFINITY;
            continue;
        }
        for (int32_t j = 0; j < e; j++) {
            uint32_t keep = 0u - (uint32_t)(b >> j & 1), x;
            memcpy(&x, &c[i + j].logit, sizeof x);
            x = (x & keep) | (0xff800000u & ~keep); /* the bits of -inf */
            memcpy(&c[i + j].logit, &x, sizeof x);
        }
    }
}

static int32_t sample_chain(lmq_sampler *s, const float *logits)
{
    const lmq_sampler_params *p = &s->p;
    cand *c = s->cands;
    int32_t n = s->n_vocab;
    for (int32_t i = 0; i < n; i++) {
        c[i].id = i;
        c[i].logit = isnan(logits[i]) ? -INFINITY : logits[i];
    }
    if (s->mask) apply_mask(c, n, s->mask);
    bool greedy = !(p->temperature > 0);
    bool identity = true; /* c[i].id == i */
    int32_t sorted = 0;   /* c[0..sorted) in the total order */
    float temp = 1.0f;
    for (const char *st = p->order; *st; st++) {
        switch (*st) {
        case 'r':
            apply_penalties(s, c, n, identity);
            sorted = 0;
            break;
        case 'k':
            if (greedy || p->top_k <= 0 || p->top_k >= n) break;
            select_top(c, n, sorted, p->top_k);
            n = sorted = p->top_k;
            identity = false;
            break;
        case 'p':
            if (greedy || !(p->top_p < 1.0f)) break;
            n = top_p_keep(c, n, sorted, p->top_p);
            sorted = n;
            identity = false;
            break;
        case 'm':
            if (greedy || !(p->min_p > 0)) break;
            {
                float mx = -INFINITY;
                for (int32_t i = 0; i < n; i++)
                    if (c[i].logit > mx) mx = c[i].logit;
                float thr = mx + logf(p->min_p);
                int32_t j = 0;
                for (int32_t i = 0; i < n; i++)
                    if (c[i].logit >= thr) c[j++] = c[i];
                if (j < n) identity = false;
                n = j > 0 ? j : 1;
                if (sorted > n) sorted = n;
            }
            break;
        case 't':
            if (!greedy) temp = p->temperature;
            break;
        }
    }
    if (greedy) {
        int32_t best = 0;
        for (int32_t i = 1; i < n; i++)
            if (before(c[i], c[best])) best = i;
        return c[best].id;
    }
    /* draw from softmax(logit / temp) over the surviving candidates */
    float mx = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        if (c[i].logit > mx) mx = c[i].logit;
    double sum = 0, *w = s->w;
    for (int32_t i = 0; i < n; i++) sum += (w[i] = exp((double)(c[i].logit - mx) / temp));
    double r = (double)(splitmix64(&s->rng) >> 11) * (1.0 / 9007199254740992.0) * sum;
    double acc = 0;
    for (int32_t i = 0; i < n; i++) {
        acc += w[i];
        if (r < acc) return c[i].id;
    }
    return c[n - 1].id;
}

int32_t lmq_sampler_sample(lmq_sampler *s, const float *logits)
{
    int32_t tok = sample_chain(s, logits);
    if (s->n_top >= 0) record_logprobs(s, logits, tok);
    return tok;
}

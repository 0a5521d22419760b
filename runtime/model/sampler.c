/* Token sampler: a configurable chain of penalties, top-k, top-p, min-p and
 * temperature, then a draw from a seeded generator (splitmix64), so a seed
 * reproduces a run. Temperature <= 0 is greedy (argmax after penalties). */
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
    uint64_t rng;
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
    s->cands = malloc((size_t)n_vocab * sizeof *s->cands);
    s->counts = calloc((size_t)n_vocab, sizeof *s->counts);
    s->recent = malloc((size_t)(q.penalty_last_n ? q.penalty_last_n : 1) * sizeof *s->recent);
    if (!s->cands || !s->counts || !s->recent) {
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
    free(s->recent);
    free(s);
}

void lmq_sampler_reset(lmq_sampler *s)
{
    memset(s->counts, 0, (size_t)s->n_vocab * sizeof *s->counts);
    s->n_recent = s->head = 0;
    s->rng = s->p.seed;
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

static int cmp_desc(const void *a, const void *b)
{
    float x = ((const cand *)a)->logit, y = ((const cand *)b)->logit;
    if (x > y) return -1;
    if (x < y) return 1;
    return ((const cand *)a)->id - ((const cand *)b)->id; /* stable tie order */
}

static void apply_penalties(lmq_sampler *s, cand *c, int32_t n)
{
    const lmq_sampler_params *p = &s->p;
    if (!s->n_recent) return;
    for (int32_t i = 0; i < n; i++) {
        uint16_t cnt = s->counts[c[i].id];
        if (!cnt) continue;
        float l = c[i].logit;
        if (p->repeat_penalty != 1.0f) l = l > 0 ? l / p->repeat_penalty : l * p->repeat_penalty;
        l -= (float)cnt * p->frequency_penalty + p->presence_penalty;
        c[i].logit = l;
    }
}

int32_t lmq_sampler_sample(lmq_sampler *s, const float *logits)
{
    const lmq_sampler_params *p = &s->p;
    cand *c = s->cands;
    int32_t n = s->n_vocab;
    for (int32_t i = 0; i < n; i++) {
        c[i].id = i;
        c[i].logit = isnan(logits[i]) ? -INFINITY : logits[i];
    }
    bool greedy = !(p->temperature > 0);
    bool sorted = false;
    float temp = 1.0f;
    for (const char *st = p->order; *st; st++) {
        switch (*st) {
        case 'r':
            apply_penalties(s, c, n);
            sorted = false;
            break;
        case 'k':
            if (greedy || p->top_k <= 0 || p->top_k >= n) break;
            qsort(c, (size_t)n, sizeof *c, cmp_desc);
            sorted = true;
            n = p->top_k;
            break;
        case 'p':
            if (greedy || !(p->top_p < 1.0f)) break;
            if (!sorted) qsort(c, (size_t)n, sizeof *c, cmp_desc);
            sorted = true;
            {
                /* probabilities of the current set, then the shortest prefix reaching top_p */
                double mx = c[0].logit, sum = 0, acc = 0;
                for (int32_t i = 0; i < n; i++) sum += exp((double)c[i].logit - mx);
                int32_t keep = n;
                for (int32_t i = 0; i < n; i++) {
                    acc += exp((double)c[i].logit - mx) / sum;
                    if (acc >= p->top_p) {
                        keep = i + 1;
                        break;
                    }
                }
                n = keep;
            }
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
                n = j > 0 ? j : 1;
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
            if (c[i].logit > c[best].logit || (c[i].logit == c[best].logit && c[i].id < c[best].id)) best = i;
        return c[best].id;
    }
    /* draw from softmax(logit / temp) over the surviving candidates */
    float mx = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        if (c[i].logit > mx) mx = c[i].logit;
    double sum = 0;
    for (int32_t i = 0; i < n; i++) sum += exp((double)(c[i].logit - mx) / temp);
    double r = (double)(splitmix64(&s->rng) >> 11) * (1.0 / 9007199254740992.0) * sum;
    double acc = 0;
    for (int32_t i = 0; i < n; i++) {
        acc += exp((double)(c[i].logit - mx) / temp);
        if (r < acc) return c[i].id;
    }
    return c[n - 1].id;
}

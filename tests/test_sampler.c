/* The sampler against the plain full-sort sampler it replaced (kept here as
 * the reference): the same token for every seed, chain order and parameter
 * set, on odd vocabulary sizes, with ties and penalties; the token mask;
 * log-probabilities against a direct double-precision log-softmax. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_runtime.h"
#include "testutil.h"

/* ---------------------------------------------------------------- reference (the old sampler) */

typedef struct rcand {
    int32_t id;
    float logit;
} rcand;

typedef struct ref_sampler {
    lmq_sampler_params p;
    int32_t n_vocab;
    rcand *c;
    int32_t *recent, n_recent, head;
    uint16_t *counts;
    uint64_t rng;
} ref_sampler;

static uint64_t ref_splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void ref_init(ref_sampler *s, const lmq_sampler_params *p, int32_t n)
{
    memset(s, 0, sizeof *s);
    s->p = *p;
    s->n_vocab = n;
    s->c = malloc((size_t)n * sizeof *s->c);
    s->counts = calloc((size_t)n, sizeof *s->counts);
    s->recent = malloc((size_t)(p->penalty_last_n ? p->penalty_last_n : 1) * sizeof *s->recent);
    s->rng = p->seed;
}

static void ref_free(ref_sampler *s)
{
    free(s->c);
    free(s->counts);
    free(s->recent);
}

static void ref_accept(ref_sampler *s, int32_t token)
{
    int32_t cap = s->p.penalty_last_n;
    if (cap <= 0) return;
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

static int ref_cmp(const void *a, const void *b)
{
    float x = ((const rcand *)a)->logit, y = ((const rcand *)b)->logit;
    if (x > y) return -1;
    if (x < y) return 1;
    return ((const rcand *)a)->id - ((const rcand *)b)->id;
}

static int32_t ref_sample(ref_sampler *s, const float *logits, const uint8_t *mask)
{
    const lmq_sampler_params *p = &s->p;
    rcand *c = s->c;
    int32_t n = s->n_vocab;
    for (int32_t i = 0; i < n; i++) {
        c[i].id = i;
        c[i].logit = isnan(logits[i]) ? -INFINITY : logits[i];
        if (mask && !(mask[i >> 3] & (1u << (i & 7)))) c[i].logit = -INFINITY;
    }
    bool greedy = !(p->temperature > 0), sorted = false;
    float temp = 1.0f;
    for (const char *st = p->order; *st; st++) {
        switch (*st) {
        case 'r':
            if (s->n_recent)
                for (int32_t i = 0; i < n; i++) {
                    uint16_t cnt = s->counts[c[i].id];
                    if (!cnt) continue;
                    float l = c[i].logit;
                    if (p->repeat_penalty != 1.0f) l = l > 0 ? l / p->repeat_penalty : l * p->repeat_penalty;
                    l -= (float)cnt * p->frequency_penalty + p->presence_penalty;
                    c[i].logit = l;
                }
            sorted = false;
            break;
        case 'k':
            if (greedy || p->top_k <= 0 || p->top_k >= n) break;
            qsort(c, (size_t)n, sizeof *c, ref_cmp);
            sorted = true;
            n = p->top_k;
            break;
        case 'p':
            if (greedy || !(p->top_p < 1.0f)) break;
            if (!sorted) qsort(c, (size_t)n, sizeof *c, ref_cmp);
            sorted = true;
            {
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
    float mx = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        if (c[i].logit > mx) mx = c[i].logit;
    double sum = 0;
    for (int32_t i = 0; i < n; i++) sum += exp((double)(c[i].logit - mx) / temp);
    double r = (double)(ref_splitmix64(&s->rng) >> 11) * (1.0 / 9007199254740992.0) * sum;
    double acc = 0;
    for (int32_t i = 0; i < n; i++) {
        acc += exp((double)(c[i].logit - mx) / temp);
        if (r < acc) return c[i].id;
    }
    return c[n - 1].id;
}

/* ---------------------------------------------------------------- helpers */

static uint64_t rs = 88172645463325252ULL;
static double urand(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (double)(rs >> 11) / 9007199254740992.0;
}

/* Logits of a peaked, heavy-tailed shape like a model's, with deliberate
 * ties (quantized to 1/8 in every other row) and a few NaN/-inf entries. */
static void fill_logits(float *l, int32_t n, int row)
{
    for (int32_t i = 0; i < n; i++) {
        double u = urand();
        double v = -8.0 * log(1.0 / (u + 1e-12)) + (urand() < 0.01 ? 10.0 * urand() : 0);
        l[i] = (float)v;
        if (row % 2) l[i] = floorf(l[i] * 8) / 8;
    }
    if (n > 10 && row % 3 == 0) {
        l[n / 3] = NAN;
        l[n / 2] = -INFINITY;
    }
}

/* Runs both samplers for `steps` tokens on fresh logits, accepting each
 * output token; returns the number of differing tokens. */
static int compare(const lmq_sampler_params *p, int32_t n, int steps, const uint8_t *mask)
{
    lmq_sampler *s = NULL;
    if (lmq_sampler_new(p, n, &s)) return -1;
    lmq_sampler_set_mask(s, mask);
    ref_sampler r;
    ref_init(&r, p, n);
    float *l = malloc((size_t)n * sizeof *l);
    int diff = 0;
    for (int t = 0; t < steps; t++) {
        fill_logits(l, n, t);
        int32_t a = lmq_sampler_sample(s, l), b = ref_sample(&r, l, mask);
        if (a != b) diff++;
        lmq_sampler_accept(s, b);
        ref_accept(&r, b);
    }
    free(l);
    ref_free(&r);
    lmq_sampler_free(s);
    return diff;
}

/* ---------------------------------------------------------------- tests */

static void test_same_as_full_sort(void)
{
    static const int32_t sizes[] = {1, 2, 7, 63, 65, 257, 1001, 40003};
    static const char *orders[] = {"rkpmt", "rpkmt", "rmkpt", "kpr", "mprkt", "t", "prt", "rkt"};
    int configs = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        for (int pi = 0; pi < 16; pi++) {
            lmq_sampler_params p = lmq_sampler_default_params();
            p.seed = 1000 + (uint64_t)pi * 7919 + (uint64_t)si;
            strcpy(p.order, orders[pi % 8]);
            p.temperature = pi == 3 ? 0.0f : (float)(0.3 + 1.5 * urand());
            p.top_k = pi % 4 == 0 ? 0 : pi % 4 == 1 ? 40 : pi % 4 == 2 ? 1 : 5000;
            p.top_p = pi % 5 == 0 ? 1.0f : (float)(0.5 + 0.49 * urand());
            p.min_p = pi % 3 == 0 ? 0.0f : (float)(0.2 * urand());
            p.repeat_penalty = pi % 2 ? 1.3f : 1.0f;
            p.frequency_penalty = pi % 6 == 1 ? 0.5f : 0.0f;
            p.presence_penalty = pi % 7 == 2 ? -0.4f : 0.0f;
            p.penalty_last_n = pi % 8 == 5 ? 0 : 16;
            int steps = sizes[si] > 10000 ? 12 : 60;
            int d = compare(&p, sizes[si], steps, NULL);
            T_CHECK(d == 0, "n_vocab %d order %s temp %.2f k %d p %.3f m %.3f: %d of %d tokens differ", sizes[si],
                    p.order, p.temperature, p.top_k, p.top_p, p.min_p, d, steps);
            configs++;
        }
    }
    /* OpenAI's defaults in lmq serve: temperature 1, top_p < 1 without top-k */
    lmq_sampler_params p = lmq_sampler_default_params();
    p.temperature = 1.0f;
    p.top_k = 0;
    p.min_p = 0;
    p.top_p = 0.9f;
    T_CHECK(compare(&p, 151936, 6, NULL) == 0, "152k vocabulary, top_p 0.9 alone");
    p.top_p = 1.0f;
    T_CHECK(compare(&p, 151936, 6, NULL) == 0, "152k vocabulary, plain draw");
    printf("%d sampler configurations match the full-sort reference\n", configs);
}

static void test_mask(void)
{
    const int32_t n = 1003;
    uint8_t *mask = calloc((n + 7) / 8, 1);
    for (int32_t i = 0; i < n; i += 37) mask[i >> 3] |= (uint8_t)(1u << (i & 7));
    lmq_sampler_params p = lmq_sampler_default_params();
    T_CHECK(compare(&p, n, 50, mask) == 0, "masked chain equals the reference");
    /* the mask is applied a byte at a time: runs of 0xff and 0x00, mixed
     * bytes, a last byte cut by the odd size */
    uint8_t *mixed = calloc((n + 7) / 8, 1);
    for (int32_t i = 0; i < n; i++) {
        int32_t run = i / 64 % 3; /* all allowed, none, every third */
        if (run == 0 || (run == 2 && i % 3 == 0)) mixed[i >> 3] |= (uint8_t)(1u << (i & 7));
    }
    T_CHECK(compare(&p, n, 50, mixed) == 0, "masked chain (runs and mixed bytes) equals the reference");
    lmq_sampler_params g = p;
    g.temperature = 0;
    T_CHECK(compare(&g, n, 20, mixed) == 0, "masked greedy (runs and mixed bytes) equals the reference");
    free(mixed);
    lmq_sampler *s = NULL;
    T_CHECK(lmq_sampler_new(&p, n, &s) == LMQ_OK, "new");
    lmq_sampler_set_mask(s, mask);
    float *l = malloc(n * sizeof *l);
    int bad = 0;
    for (int t = 0; t < 200; t++) {
        fill_logits(l, n, t);
        int32_t tok = lmq_sampler_sample(s, l);
        if (tok % 37) bad++;
    }
    T_CHECK(bad == 0, "%d draws outside the mask", bad);
    p.temperature = 0;
    lmq_sampler_free(s);
    T_CHECK(lmq_sampler_new(&p, n, &s) == LMQ_OK, "new greedy");
    lmq_sampler_set_mask(s, mask);
    for (int32_t i = 0; i < n; i++) l[i] = (float)i; /* argmax 1002 is masked out */
    T_CHECK(lmq_sampler_sample(s, l) == 999, "greedy takes the best allowed token (999)");
    lmq_sampler_set_mask(s, NULL);
    T_CHECK(lmq_sampler_sample(s, l) == 1002, "mask removed");
    lmq_sampler_free(s);
    free(l);
    free(mask);
}

static void test_logprobs(void)
{
    const int32_t n = 5001;
    lmq_sampler_params p = lmq_sampler_default_params();
    lmq_sampler *s = NULL;
    T_CHECK(lmq_sampler_new(&p, n, &s) == LMQ_OK, "new");
    T_CHECK(!lmq_sampler_last_logprobs(s, NULL, NULL, NULL), "off by default");
    T_CHECK(lmq_sampler_set_logprobs(s, LMQ_SAMPLER_MAX_TOP_LOGPROBS + 1) == LMQ_ERR_INVALID_ARG, "too many");
    T_CHECK(lmq_sampler_set_logprobs(s, 5) == LMQ_OK, "set 5");
    float *l = malloc(n * sizeof *l);
    fill_logits(l, n, 1); /* ties */
    int32_t tok = lmq_sampler_sample(s, l);
    lmq_token_logprob ch, top[LMQ_SAMPLER_MAX_TOP_LOGPROBS];
    int32_t nt = 0;
    T_CHECK(lmq_sampler_last_logprobs(s, &ch, top, &nt) && nt == 5, "recorded 5");
    double mx = -INFINITY, sum = 0;
    for (int32_t i = 0; i < n; i++) mx = l[i] > mx ? l[i] : mx;
    for (int32_t i = 0; i < n; i++) sum += exp((double)l[i] - mx);
    double lse = mx + log(sum);
    T_CHECK(ch.id == tok, "chosen id");
    T_NEAR(ch.logprob, l[tok] - lse, 1e-4, "chosen logprob");
    /* the reference top 5: a full sort */
    rcand *c = malloc(n * sizeof *c);
    for (int32_t i = 0; i < n; i++) c[i] = (rcand){i, l[i]};
    qsort(c, n, sizeof *c, ref_cmp);
    for (int i = 0; i < 5; i++) {
        T_CHECK(top[i].id == c[i].id, "top %d: id %d vs %d", i, top[i].id, c[i].id);
        T_NEAR(top[i].logprob, c[i].logit - lse, 1e-4, "top logprob");
    }
    double total = 0;
    for (int32_t i = 0; i < n; i++) total += exp(l[i] - lse);
    T_NEAR(total, 1.0, 1e-9, "probabilities sum to 1");
    T_CHECK(lmq_sampler_set_logprobs(s, -1) == LMQ_OK && (lmq_sampler_sample(s, l), !lmq_sampler_last_logprobs(s, NULL, NULL, NULL)),
            "off again");
    free(c);
    free(l);
    lmq_sampler_free(s);
}

/* LMQ_SAMPLER_BENCH=1: time per sample, this sampler against the full
 * sort, on a 151,936-token row (Qwen's vocabulary size); printed, not checked. */
static void bench(void)
{
    if (!getenv("LMQ_SAMPLER_BENCH")) return;
    const int32_t n = 151936, reps = 40;
    float *l = malloc(n * sizeof *l);
    fill_logits(l, n, 0);
    static const struct {
        const char *what;
        float temp, top_p, min_p;
        int32_t top_k;
    } cfg[] = {{"greedy", 0, 1, 0, 0},
               {"lmq run default (k 40, p 0.95, min-p 0.05, t 0.8)", 0.8f, 0.95f, 0.05f, 40},
               {"OpenAI default (t 1, no truncation)", 1, 1, 0, 0},
               {"top-p 0.9 alone (t 1)", 1, 0.9f, 0, 0}};
    for (size_t i = 0; i < sizeof cfg / sizeof *cfg; i++) {
        lmq_sampler_params p = lmq_sampler_default_params();
        p.temperature = cfg[i].temp;
        p.top_p = cfg[i].top_p;
        p.min_p = cfg[i].min_p;
        p.top_k = cfg[i].top_k;
        lmq_sampler *s = NULL;
        lmq_sampler_new(&p, n, &s);
        ref_sampler r;
        ref_init(&r, &p, n);
        double t0 = lmq_time_s();
        for (int k = 0; k < reps; k++) lmq_sampler_sample(s, l);
        double t1 = lmq_time_s();
        for (int k = 0; k < reps; k++) ref_sample(&r, l, NULL);
        double t2 = lmq_time_s();
        printf("bench %-52s %7.3f ms/sample (full sort: %7.3f ms)\n", cfg[i].what, (t1 - t0) * 1e3 / reps,
               (t2 - t1) * 1e3 / reps);
        ref_free(&r);
        lmq_sampler_free(s);
    }
    free(l);
}

int main(void)
{
    bench();
    test_same_as_full_sort();
    test_mask();
    test_logprobs();
    return t_finish();
}

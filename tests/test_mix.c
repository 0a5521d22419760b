/* Unit tests of the mixes (quantize/mix.c) and of the streaming model
 * quantizer (convert/quantize_model.c) on synthetic models.
 *
 * The expected per-tensor types below are written out by hand from
 * llama.cpp's llama_tensor_get_type() rules (commit c392e509) as per-layer
 * strings, one character per layer ('2'..'6' = q2_K..q6_K), so that the
 * tables in mix.c are checked against an independent statement of the rules,
 * not against themselves. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lmq_convert.h"
#include "lmq_format.h"
#include "lmq_quant.h"
#include "testutil.h"

/* ------------------------------------------------------------ model shapes */

typedef struct shape {
    const char *label;
    int n_layer, n_embd, n_ff, n_head, n_head_kv, n_vocab;
    bool tied;
} shape;

static const shape LLAMA2_7B = {"llama2-7b", 32, 4096, 11008, 32, 32, 32000, false};
static const shape LLAMA3_8B = {"llama3-8b", 32, 4096, 14336, 32, 8, 128256, false};
static const shape STORIES = {"stories260K", 5, 64, 172, 8, 4, 512, true};
static const shape LLAMA_70B = {"llama2-70b", 80, 8192, 28672, 64, 8, 32000, false};

typedef struct model {
    size_t n;
    lmq_mix_tensor t[1024];
    char names[1024][48];
    lmq_mix_model facts;
} model;

static void add(model *m, const char *name, lmq_type type, uint32_t nd, int64_t ne0, int64_t ne1)
{
    lmq_mix_tensor *t = &m->t[m->n];
    snprintf(m->names[m->n], sizeof m->names[0], "%s", name);
    t->name = m->names[m->n];
    t->type = type;
    t->n_dims = nd;
    t->ne[0] = ne0;
    t->ne[1] = nd > 1 ? ne1 : 1;
    t->ne[2] = t->ne[3] = 1;
    m->n++;
}

/* Tensors in the HF converter's order (token_embd, blocks 0..N-1, output). */
static void build(model *m, const shape *s, lmq_type wtype)
{
    memset(m, 0, sizeof *m);
    int kv = s->n_embd / s->n_head * s->n_head_kv;
    char nm[48];
    add(m, "token_embd.weight", wtype, 2, s->n_embd, s->n_vocab);
    for (int l = 0; l < s->n_layer; l++) {
#define L(x) (snprintf(nm, sizeof nm, "blk.%d." x, l), nm)
        add(m, L("attn_norm.weight"), LMQ_TYPE_F32, 1, s->n_embd, 1);
        add(m, L("attn_q.weight"), wtype, 2, s->n_embd, s->n_embd);
        add(m, L("attn_k.weight"), wtype, 2, s->n_embd, kv);
        add(m, L("attn_v.weight"), wtype, 2, s->n_embd, kv);
        add(m, L("attn_output.weight"), wtype, 2, s->n_embd, s->n_embd);
        add(m, L("ffn_norm.weight"), LMQ_TYPE_F32, 1, s->n_embd, 1);
        add(m, L("ffn_gate.weight"), wtype, 2, s->n_embd, s->n_ff);
        add(m, L("ffn_up.weight"), wtype, 2, s->n_embd, s->n_ff);
        add(m, L("ffn_down.weight"), wtype, 2, s->n_ff, s->n_embd);
#undef L
    }
    add(m, "output_norm.weight", LMQ_TYPE_F32, 1, s->n_embd, 1);
    if (!s->tied) add(m, "output.weight", wtype, 2, s->n_embd, s->n_vocab);
    m->facts.n_layer = s->n_layer;
    m->facts.n_head = s->n_head;
    m->facts.n_head_kv = s->n_head_kv;
}

static const lmq_mix_info *mix(const char *name)
{
    const lmq_mix_info *mi = NULL;
    lmq_status s = lmq_mix_from_name(name, &mi);
    T_CHECK(s == LMQ_OK && mi, "mix %s: %s", name, lmq_last_error());
    return mi;
}

static lmq_mix_opts opts_for(const char *name)
{
    lmq_mix_opts o;
    memset(&o, 0, sizeof o);
    o.mix = mix(name);
    o.output_type = LMQ_TYPE_COUNT;
    o.token_embd_type = LMQ_TYPE_COUNT;
    return o;
}

static lmq_type T(const char *name)
{
    lmq_type t = LMQ_TYPE_COUNT;
    if (lmq_type_from_name(name, &t) != LMQ_OK) {
        fprintf(stderr, "bad type name in test: %s\n", name);
        exit(1);
    }
    return t;
}

static lmq_type digit_type(char c)
{
    static const char *const names[] = {"q2_K", "q3_K", "q4_K", "q5_K", "q6_K"};
    return c >= '2' && c <= '6' ? T(names[c - '2']) : LMQ_TYPE_COUNT;
}

static size_t find(const model *m, const char *name)
{
    for (size_t i = 0; i < m->n; i++)
        if (!strcmp(m->t[i].name, name)) return i;
    return (size_t)-1;
}

static bool plan(const model *m, const lmq_mix_opts *o, lmq_mix_entry *e, size_t *hits)
{
    lmq_status s = lmq_mix_plan(o, &m->facts, m->t, m->n, e, hits);
    T_CHECK(s == LMQ_OK, "plan: %s", lmq_last_error());
    return s == LMQ_OK;
}

/* Checks one tensor kind across layers against a per-layer digit string
 * (or one type for every layer when the string has one character). */
static void expect_layers(const model *m, const lmq_mix_entry *e, const char *what, const char *kind,
                          const char *digits, int n_layer)
{
    char nm[64];
    int bad = 0;
    if (strlen(digits) != 1 && strlen(digits) != (size_t)n_layer) {
        T_CHECK(false, "%s: %s: expected list has %zu entries for %d layers", what, kind, strlen(digits), n_layer);
        return;
    }
    for (int l = 0; l < n_layer; l++) {
        snprintf(nm, sizeof nm, "blk.%d.%s.weight", l, kind);
        size_t i = find(m, nm);
        lmq_type want = digit_type(strlen(digits) == 1 ? digits[0] : digits[l]);
        if (i == (size_t)-1 || e[i].type != want) {
            if (bad++ < 3)
                T_CHECK(false, "%s: %s is %s, llama.cpp gives %s", what, nm,
                        i == (size_t)-1 ? "missing" : lmq_type_name(e[i].type), lmq_type_name(want));
        }
    }
    T_CHECK(bad == 0, "%s: %s: %d layers differ", what, kind, bad);
}

static void expect_one(const model *m, const lmq_mix_entry *e, const char *what, const char *name,
                       lmq_type want)
{
    size_t i = find(m, name);
    T_CHECK(i != (size_t)-1 && e[i].type == want, "%s: %s is %s, want %s", what, name,
            i == (size_t)-1 ? "missing" : lmq_type_name(e[i].type), lmq_type_name(want));
}

static void expect_norms_f32(const model *m, const lmq_mix_entry *e, const char *what)
{
    int bad = 0;
    for (size_t i = 0; i < m->n; i++)
        if (m->t[i].n_dims == 1 && (e[i].type != LMQ_TYPE_F32 || e[i].why != LMQ_MIX_WHY_KEEP)) bad++;
    T_CHECK(bad == 0, "%s: %d 1-D tensors not kept in f32", what, bad);
}

/* ------------------------------------------------------------ the expected lists */

/* use_more_bits(i, 32) by hand: i < 4, i >= 28, or i = 6, 9, ..., 27. */
#define MORE_BITS_32_Q4 "6666446446446446446446446446" "6666"
#define MORE_BITS_32_Q5 "6666556556556556556556556556" "6666"

typedef struct expect_row {
    const char *mix;
    const char *token_embd, *output; /* type names */
    /* per-layer digit strings (32 layers) or one digit for all */
    const char *attn_q, *attn_k, *attn_v, *attn_output, *ffn_gate, *ffn_up, *ffn_down;
} expect_row;

/* Llama-2-7B: no GQA (n_gqa 1). */
static const expect_row k_7b[] = {
    {"q4_k_m", "q4_K", "q6_K", "4", "4", MORE_BITS_32_Q4, "4", "4", "4", MORE_BITS_32_Q4},
    {"q5_k_m", "q5_K", "q6_K", "5", "5", MORE_BITS_32_Q5, "5", "5", "5", MORE_BITS_32_Q5},
    /* attn_v: q5_K for the first two, ffn_down: q5_K for i < 32/16 */
    {"q3_k_m", "q3_K", "q6_K", "3", "3", "55444444444444444444444444444444", "4", "3", "3",
     "55444444444444444444444444444444"},
    {"q2_k", "q2_K", "q6_K", "2", "2", "3", "3", "2", "2", "3"},
    {"q3_k_s", "q3_K", "q6_K", "3", "3", "3", "3", "3", "3", "3"},
    {"q3_k_l", "q3_K", "q6_K", "3", "3", "5", "5", "3", "3", "5"},
    {"q4_k_s", "q4_K", "q6_K", "4", "4", "55554444444444444444444444444444", "4", "4", "4",
     "55554444444444444444444444444444"},
    {"q5_k_s", "q5_K", "q6_K", "5", "5", "5", "5", "5", "5", "5"},
    {"q6_k", "q6_K", "q6_K", "6", "6", "6", "6", "6", "6", "6"},
};

/* Llama-3-8B: n_gqa 4 changes q2_k's attn_v (q4_K) and iq4's attn_v (q5_K). */
static const expect_row k_8b[] = {
    {"q4_k_m", "q4_K", "q6_K", "4", "4", MORE_BITS_32_Q4, "4", "4", "4", MORE_BITS_32_Q4},
    {"q5_k_m", "q5_K", "q6_K", "5", "5", MORE_BITS_32_Q5, "5", "5", "5", MORE_BITS_32_Q5},
    {"q3_k_m", "q3_K", "q6_K", "3", "3", "55444444444444444444444444444444", "4", "3", "3",
     "55444444444444444444444444444444"},
    {"q2_k", "q2_K", "q6_K", "2", "2", "4", "3", "2", "2", "3"},
};

static void check_rows(const shape *s, const expect_row *rows, size_t n_rows)
{
    model *m = malloc(sizeof *m);
    lmq_mix_entry *e = malloc(sizeof(lmq_mix_entry) * 1024);
    build(m, s, LMQ_TYPE_F16);
    for (size_t r = 0; r < n_rows; r++) {
        const expect_row *x = &rows[r];
        lmq_mix_opts o = opts_for(x->mix);
        if (!plan(m, &o, e, NULL)) continue;
        char what[64];
        snprintf(what, sizeof what, "%s %s", s->label, x->mix);
        expect_one(m, e, what, "token_embd.weight", T(x->token_embd));
        expect_one(m, e, what, "output.weight", T(x->output));
        expect_layers(m, e, what, "attn_q", x->attn_q, s->n_layer);
        expect_layers(m, e, what, "attn_k", x->attn_k, s->n_layer);
        expect_layers(m, e, what, "attn_v", x->attn_v, s->n_layer);
        expect_layers(m, e, what, "attn_output", x->attn_output, s->n_layer);
        expect_layers(m, e, what, "ffn_gate", x->ffn_gate, s->n_layer);
        expect_layers(m, e, what, "ffn_up", x->ffn_up, s->n_layer);
        expect_layers(m, e, what, "ffn_down", x->ffn_down, s->n_layer);
        expect_norms_f32(m, e, what);
    }
    free(m);
    free(e);
}

static void test_llama_shapes(void)
{
    check_rows(&LLAMA2_7B, k_7b, sizeof k_7b / sizeof k_7b[0]);
    check_rows(&LLAMA3_8B, k_8b, sizeof k_8b / sizeof k_8b[0]);

    /* the 32-block and iq4 mixes on the 8B shape */
    model *m = malloc(sizeof *m);
    lmq_mix_entry *e = malloc(sizeof(lmq_mix_entry) * 1024);
    build(m, &LLAMA3_8B, LMQ_TYPE_BF16);
    lmq_mix_opts o = opts_for("iq4_xs");
    if (plan(m, &o, e, NULL)) {
        expect_one(m, e, "8b iq4_xs", "output.weight", T("q6_K"));
        expect_one(m, e, "8b iq4_xs", "token_embd.weight", T("iq4_xs"));
        expect_one(m, e, "8b iq4_xs", "blk.17.attn_v.weight", T("q5_K"));   /* n_gqa >= 4 */
        expect_one(m, e, "8b iq4_xs", "blk.3.ffn_down.weight", T("q5_K"));  /* i < n/8 */
        expect_one(m, e, "8b iq4_xs", "blk.4.ffn_down.weight", T("iq4_xs"));
        expect_one(m, e, "8b iq4_xs", "blk.4.attn_output.weight", T("iq4_xs"));
    }
    const char *legacy[] = {"q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"};
    for (size_t k = 0; k < 5; k++) {
        o = opts_for(legacy[k]);
        if (!plan(m, &o, e, NULL)) continue;
        expect_one(m, e, legacy[k], "output.weight", T("q6_K"));
        expect_one(m, e, legacy[k], "token_embd.weight", o.mix->base);
        if (strcmp(legacy[k], "iq4_nl") != 0) {
            expect_one(m, e, legacy[k], "blk.0.ffn_down.weight", o.mix->base);
            expect_one(m, e, legacy[k], "blk.0.attn_v.weight", o.mix->base);
        } else {
            expect_one(m, e, legacy[k], "blk.0.ffn_down.weight", T("q5_K"));
            expect_one(m, e, legacy[k], "blk.9.attn_v.weight", T("q5_K"));
        }
    }
    o = opts_for("q8_0");
    if (plan(m, &o, e, NULL)) {
        int n_q8 = 0;
        for (size_t i = 0; i < m->n; i++) n_q8 += e[i].type == LMQ_TYPE_Q8_0;
        T_CHECK(n_q8 == 32 * 7 + 2, "q8_0: every matrix q8_0 (%d)", n_q8);
    }
    /* float mixes: every matrix in the type, vectors stay f32, no rules */
    const char *floats[] = {"f16", "bf16", "f32"};
    for (size_t k = 0; k < 3; k++) {
        o = opts_for(floats[k]);
        if (!plan(m, &o, e, NULL)) continue;
        int bad = 0;
        for (size_t i = 0; i < m->n; i++)
            if (m->t[i].n_dims == 2 && e[i].type != o.mix->base) bad++;
        T_CHECK(bad == 0, "%s: %d matrices not in the float type", floats[k], bad);
        expect_norms_f32(m, e, floats[k]);
    }

    /* llama.cpp's 70B bump: attn_v q3_K/q4_K -> q5_K with 80 layers and GQA */
    build(m, &LLAMA_70B, LMQ_TYPE_F16);
    o = opts_for("q4_k_m");
    if (plan(m, &o, e, NULL)) {
        expect_one(m, e, "70b q4_k_m", "blk.0.attn_v.weight", T("q6_K"));
        expect_one(m, e, "70b q4_k_m", "blk.11.attn_v.weight", T("q5_K"));
        expect_one(m, e, "70b q4_k_m", "blk.11.ffn_down.weight", T("q4_K"));
    }
    o = opts_for("q3_k_s");
    if (plan(m, &o, e, NULL)) expect_one(m, e, "70b q3_k_s", "blk.40.attn_v.weight", T("q5_K"));
    free(m);
    free(e);
}

/* The plan does not depend on the order tensors come in: llama.cpp counts
 * layers in (layer number, name) order, so blk.10 is the 11th attn_v, not
 * the 3rd as a plain name sort would have it. */
static void test_order_independent(void)
{
    model *m = malloc(sizeof *m), *r = malloc(sizeof *r);
    lmq_mix_entry *e = malloc(sizeof(lmq_mix_entry) * 1024), *f = malloc(sizeof(lmq_mix_entry) * 1024);
    build(m, &LLAMA2_7B, LMQ_TYPE_F16);
    /* reversed copy */
    memset(r, 0, sizeof *r);
    r->facts = m->facts;
    for (size_t i = 0; i < m->n; i++) add(r, m->t[m->n - 1 - i].name, m->t[m->n - 1 - i].type,
                                         m->t[m->n - 1 - i].n_dims, m->t[m->n - 1 - i].ne[0],
                                         m->t[m->n - 1 - i].ne[1]);
    lmq_mix_opts o = opts_for("q4_k_m");
    if (plan(m, &o, e, NULL) && plan(r, &o, f, NULL)) {
        int bad = 0;
        for (size_t i = 0; i < m->n; i++)
            if (e[i].type != f[m->n - 1 - i].type) bad++;
        T_CHECK(bad == 0, "reversed input order changes %d types", bad);
        expect_one(r, f, "reversed", "blk.10.attn_v.weight", T("q4_K"));
        expect_one(r, f, "reversed", "blk.9.attn_v.weight", T("q6_K"));
    }
    /* n_layer unknown: taken from the largest blk.N */
    m->facts.n_layer = 0;
    if (plan(m, &o, f, NULL)) {
        int bad = 0;
        for (size_t i = 0; i < m->n; i++) bad += e[i].type != f[i].type;
        T_CHECK(bad == 0, "n_layer from tensor names: %d differ", bad);
    }
    free(m);
    free(r);
    free(e);
    free(f);
}

/* ------------------------------------------------------------ fallback */

static void test_fallback(void)
{
    /* the table itself */
    struct {
        const char *from;
        int64_t ne0;
        const char *to;
    } fb[] = {
        {"q2_K", 64, "iq4_nl"}, {"q3_K", 64, "iq4_nl"}, {"iq4_xs", 64, "iq4_nl"}, {"q4_K", 64, "q5_0"},
        {"q5_K", 64, "q5_1"},   {"q6_K", 64, "q8_0"},   {"q4_K", 172, "f16"},     {"q6_K", 172, "f16"},
        {"q8_0", 172, "f16"},   {"q4_0", 48, "f16"},    {"q4_K", 512, "q4_K"},    {"q8_0", 64, "q8_0"},
        {"f32", 7, "f32"},      {"f8_e4m3", 100, "f16"},
    };
    for (size_t i = 0; i < sizeof fb / sizeof fb[0]; i++)
        T_CHECK(lmq_mix_fallback(T(fb[i].from), fb[i].ne0) == T(fb[i].to), "fallback %s @%lld -> %s",
                fb[i].from, (long long)fb[i].ne0, lmq_type_name(lmq_mix_fallback(T(fb[i].from), fb[i].ne0)));

    /* stories260K (64-wide rows, 172-wide ffn_down, tied embeddings) under
     * q4_k_m: what llama.cpp wrote into stories260K-q4_k_m.gguf */
    model *m = malloc(sizeof *m);
    lmq_mix_entry *e = malloc(sizeof(lmq_mix_entry) * 1024);
    build(m, &STORIES, LMQ_TYPE_F32);
    lmq_mix_opts o = opts_for("q4_k_m");
    if (plan(m, &o, e, NULL)) {
        expect_one(m, e, "stories q4_k_m", "token_embd.weight", T("q8_0")); /* tied, 64 % 256 != 0 */
        char nm[64];
        int bad = 0;
        for (int l = 0; l < 5; l++) {
            const char *kinds[] = {"attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"};
            for (int k = 0; k < 5; k++) {
                snprintf(nm, sizeof nm, "blk.%d.%s.weight", l, kinds[k]);
                bad += e[find(m, nm)].type != LMQ_TYPE_Q5_0;
            }
            snprintf(nm, sizeof nm, "blk.%d.attn_v.weight", l);
            bad += e[find(m, nm)].type != (l == 2 || l == 4 ? LMQ_TYPE_Q8_0 : LMQ_TYPE_Q5_0);
            snprintf(nm, sizeof nm, "blk.%d.ffn_down.weight", l);
            size_t i = find(m, nm);
            bad += e[i].type != LMQ_TYPE_F16;
            bad += e[i].wanted != (l == 2 || l == 4 ? LMQ_TYPE_Q6_K : LMQ_TYPE_Q4_K);
        }
        T_CHECK(bad == 0, "stories q4_k_m: %d tensors differ from llama.cpp's file", bad);
        expect_norms_f32(m, e, "stories q4_k_m");
    }
    /* q2_k: q2_K/q3_K -> iq4_nl, 172-wide -> f16 */
    o = opts_for("q2_k");
    if (plan(m, &o, e, NULL)) {
        expect_one(m, e, "stories q2_k", "blk.1.attn_q.weight", T("iq4_nl"));
        expect_one(m, e, "stories q2_k", "blk.1.attn_v.weight", T("iq4_nl"));
        expect_one(m, e, "stories q2_k", "blk.1.attn_output.weight", T("iq4_nl"));
        expect_one(m, e, "stories q2_k", "blk.1.ffn_down.weight", T("f16"));
        expect_one(m, e, "stories q2_k", "token_embd.weight", T("q8_0"));
    }
    o = opts_for("q5_k_s");
    if (plan(m, &o, e, NULL)) {
        expect_one(m, e, "stories q5_k_s", "blk.1.attn_q.weight", T("q5_1"));
        expect_one(m, e, "stories q5_k_s", "blk.3.ffn_down.weight", T("f16"));
    }
    o = opts_for("f8_e4m3");
    if (plan(m, &o, e, NULL)) {
        expect_one(m, e, "stories f8", "blk.1.attn_q.weight", T("f8_e4m3"));
        expect_one(m, e, "stories f8", "token_embd.weight", T("f8_e4m3"));
        expect_one(m, e, "stories f8", "blk.3.ffn_down.weight", T("f16"));
    }
    free(m);
    free(e);
}

/* ------------------------------------------------------------ overrides, --pure */

static void test_overrides(void)
{
    model *m = malloc(sizeof *m);
    lmq_mix_entry *e = malloc(sizeof(lmq_mix_entry) * 1024);
    build(m, &LLAMA2_7B, LMQ_TYPE_F16);
    lmq_mix_override ov[] = {
        {"blk\\.(0|1)\\.attn_(q|k)", LMQ_TYPE_Q8_0}, /* first match wins ... */
        {"attn_q", LMQ_TYPE_Q5_K},                   /* ... over this for layers 0, 1 */
        {"nothing_matches_this", LMQ_TYPE_Q8_0},
        {"ffn_down", LMQ_TYPE_Q2_K},                 /* beats the mix's q6_K promotion */
    };
    size_t hits[4];
    lmq_mix_opts o = opts_for("q4_k_m");
    o.overrides = ov;
    o.n_overrides = 4;
    if (plan(m, &o, e, hits)) {
        expect_one(m, e, "override", "blk.0.attn_q.weight", T("q8_0"));
        expect_one(m, e, "override", "blk.1.attn_k.weight", T("q8_0"));
        expect_one(m, e, "override", "blk.2.attn_k.weight", T("q4_K"));
        expect_one(m, e, "override", "blk.2.attn_q.weight", T("q5_K"));
        expect_one(m, e, "override", "blk.0.ffn_down.weight", T("q2_K"));
        expect_one(m, e, "override", "blk.0.attn_v.weight", T("q6_K"));
        T_CHECK(hits[0] == 4 && hits[1] == 30 && hits[2] == 0 && hits[3] == 32, "hits %zu %zu %zu %zu",
                hits[0], hits[1], hits[2], hits[3]);
        size_t i = find(m, "blk.5.attn_q.weight");
        T_CHECK(e[i].why == LMQ_MIX_WHY_OVERRIDE && e[i].override_index == 1, "why/index of an override");
        /* attn_v counting is unaffected by overrides elsewhere */
        expect_one(m, e, "override", "blk.6.attn_v.weight", T("q6_K"));
    }
    /* norms are never quantized, even when a pattern matches them */
    lmq_mix_override norm = {"norm", LMQ_TYPE_Q8_0};
    o.overrides = &norm;
    o.n_overrides = 1;
    if (plan(m, &o, e, hits)) {
        expect_norms_f32(m, e, "override on norms");
        T_CHECK(hits[0] == 0, "norm pattern hits %zu", hits[0]);
    }
    /* a regex that does not compile is an error naming it */
    lmq_mix_override bad = {"attn_(q", LMQ_TYPE_Q8_0};
    o.overrides = &bad;
    T_CHECK(lmq_mix_plan(&o, &m->facts, m->t, m->n, e, NULL) == LMQ_ERR_INVALID_ARG &&
                strstr(lmq_last_error(), "attn_(q"),
            "bad regex: %s", lmq_last_error());
    lmq_mix_override act = {"attn_q", LMQ_TYPE_Q8_K};
    o.overrides = &act;
    T_CHECK(lmq_mix_plan(&o, &m->facts, m->t, m->n, e, NULL) == LMQ_ERR_INVALID_ARG, "q8_K is not storable");

    /* --output-tensor-type / --token-embedding-type */
    o = opts_for("q4_k_m");
    o.output_type = LMQ_TYPE_Q8_0;
    o.token_embd_type = LMQ_TYPE_F16;
    if (plan(m, &o, e, NULL)) {
        expect_one(m, e, "user types", "output.weight", T("q8_0"));
        expect_one(m, e, "user types", "token_embd.weight", T("f16"));
        T_CHECK(e[find(m, "output.weight")].why == LMQ_MIX_WHY_OUTPUT, "why output");
    }
    /* tied embeddings take --output-tensor-type unless --token-embedding-type is given */
    build(m, &STORIES, LMQ_TYPE_F32);
    o = opts_for("q4_k_m");
    o.output_type = LMQ_TYPE_Q4_0;
    if (plan(m, &o, e, NULL)) expect_one(m, e, "tied", "token_embd.weight", T("q4_0"));
    o.token_embd_type = LMQ_TYPE_Q5_1;
    if (plan(m, &o, e, NULL)) expect_one(m, e, "tied", "token_embd.weight", T("q5_1"));
    /* a user type that does not fit the rows falls back too */
    lmq_mix_override k4 = {"ffn_down", LMQ_TYPE_Q4_K};
    o = opts_for("q8_0");
    o.overrides = &k4;
    o.n_overrides = 1;
    if (plan(m, &o, e, NULL)) {
        size_t i = find(m, "blk.0.ffn_down.weight");
        T_CHECK(e[i].type == LMQ_TYPE_F16 && e[i].wanted == LMQ_TYPE_Q4_K, "override fallback %s",
                lmq_type_name(e[i].type));
    }
    free(m);
    free(e);
}

static void test_pure(void)
{
    model *m = malloc(sizeof *m);
    lmq_mix_entry *e = malloc(sizeof(lmq_mix_entry) * 1024);
    build(m, &LLAMA3_8B, LMQ_TYPE_F16);
    lmq_mix_opts o = opts_for("q4_k_m");
    o.pure = true;
    if (plan(m, &o, e, NULL)) {
        int bad = 0;
        for (size_t i = 0; i < m->n; i++)
            bad += m->t[i].n_dims == 2 ? e[i].type != LMQ_TYPE_Q4_K || e[i].why != LMQ_MIX_WHY_BASE
                                       : e[i].type != LMQ_TYPE_F32;
        T_CHECK(bad == 0, "pure q4_k_m: %d tensors not q4_K", bad);
    }
    build(m, &STORIES, LMQ_TYPE_F32);
    o = opts_for("q2_k");
    o.pure = true;
    if (plan(m, &o, e, NULL)) {
        expect_one(m, e, "pure stories", "token_embd.weight", T("iq4_nl"));
        expect_one(m, e, "pure stories", "blk.2.attn_v.weight", T("iq4_nl"));
        expect_one(m, e, "pure stories", "blk.2.ffn_down.weight", T("f16"));
    }
    free(m);
    free(e);
}

/* ------------------------------------------------------------ the mix table */

static void test_table(void)
{
    const char *want[] = {"q2_k", "q3_k_s", "q3_k_m", "q3_k_l", "q4_k_s", "q4_k_m", "q5_k_s",
                          "q5_k_m", "q6_k", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl",
                          "iq4_xs", "f8_e4m3", "f8_e5m2", "f16", "bf16", "f32"};
    T_CHECK(lmq_mix_count() == sizeof want / sizeof want[0], "mix count %zu", lmq_mix_count());
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const lmq_mix_info *mi = mix(want[i]);
        if (!mi) continue;
        T_CHECK(strstr(lmq_mix_names(), want[i]) != NULL, "names list lacks %s", want[i]);
        T_CHECK(mi->llama_ftype == lmq_llama_ftype_from_name(want[i]), "%s: ftype %d vs export's %d", want[i],
                mi->llama_ftype, lmq_llama_ftype_from_name(want[i]));
        T_CHECK(lmq_mix_type_storable(mi->base), "%s base storable", want[i]);
    }
    const lmq_mix_info *mi = NULL;
    T_CHECK(lmq_mix_from_name("Q4_K_M", &mi) == LMQ_OK && mi && !strcmp(mi->name, "q4_k_m"), "case-insensitive");
    T_CHECK(lmq_mix_from_name("q4_k_x", &mi) == LMQ_ERR_INVALID_ARG && strstr(lmq_last_error(), "q4_k_x") &&
                strstr(lmq_last_error(), "iq4_xs"),
            "unknown mix lists names: %s", lmq_last_error());
    T_CHECK(lmq_mix_at(lmq_mix_count()) == NULL, "mix_at past the end");
    T_CHECK(lmq_mix_is_quantizable("blk.0.attn_q.weight", 2), "attn_q quantizable");
    T_CHECK(!lmq_mix_is_quantizable("blk.0.attn_norm.weight", 2), "norm never");
    T_CHECK(!lmq_mix_is_quantizable("blk.0.attn_q.weight", 1), "1-D never");
    T_CHECK(!lmq_mix_is_quantizable("blk.0.attn_q.bias", 2), "bias never");
    T_CHECK(!lmq_mix_type_storable(LMQ_TYPE_Q8_K) && !lmq_mix_type_storable(LMQ_TYPE_COUNT), "storable");

    lmq_meta *meta = lmq_meta_new();
    lmq_meta_set_str(meta, "general.architecture", "llama");
    lmq_meta_set_u32(meta, "llama.block_count", 22);
    lmq_meta_set_u32(meta, "llama.attention.head_count", 32);
    lmq_meta_set_u32(meta, "llama.attention.head_count_kv", 4);
    lmq_mix_model mm;
    lmq_mix_model_from_meta(meta, &mm);
    T_CHECK(mm.n_layer == 22 && mm.n_head == 32 && mm.n_head_kv == 4, "model from meta %d %d %d", mm.n_layer,
            mm.n_head, mm.n_head_kv);
    lmq_meta_remove(meta, "llama.attention.head_count_kv");
    lmq_mix_model_from_meta(meta, &mm);
    T_CHECK(mm.n_head_kv == 32, "head_count_kv defaults to head_count");
    lmq_meta_free(meta);
}

int main(void)
{
    test_table();
    test_llama_shapes();
    test_order_independent();
    test_fallback();
    test_overrides();
    test_pure();
    return t_finish();
}

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
    /* the ternary mixes as llama-quantize makes them: q4_K embedding, q6_K head */
    lmq_mix_opts o = opts_for("tq2_0");
    if (plan(m, &o, e, NULL)) {
        expect_one(m, e, "8b tq2_0", "output.weight", T("q6_K"));
        expect_one(m, e, "8b tq2_0", "token_embd.weight", T("q4_K"));
        expect_one(m, e, "8b tq2_0", "blk.17.attn_v.weight", T("tq2_0"));
        expect_one(m, e, "8b tq2_0", "blk.3.ffn_down.weight", T("tq2_0"));
    }
    o = opts_for("tq1_0");
    if (plan(m, &o, e, NULL)) expect_one(m, e, "8b tq1_0", "blk.0.attn_q.weight", T("tq1_0"));
    o = opts_for("iq4_xs");
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
                          "iq4_xs", "tq1_0", "tq2_0", "f8_e4m3", "f8_e5m2", "f16", "bf16", "f32"};
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
    T_CHECK(lmq_mix_from_name("IQ2_M", &mi) == LMQ_ERR_UNSUPPORTED && strstr(lmq_last_error(), "IQ2_M") &&
                strstr(lmq_last_error(), "cannot write") && strstr(lmq_last_error(), "--target-bpw"),
            "llama.cpp's codebook mixes: read only, with what to use instead: %s", lmq_last_error());
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


/* ------------------------------------------------------------ the model quantizer */

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float rnd_normal(void)
{
    /* sum of 4 uniforms: roughly normal, deterministic */
    float acc = 0;
    for (int k = 0; k < 4; k++) {
        g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
        acc += (float)(g_rng >> 40) / (float)(1ull << 24) - 0.5f;
    }
    return acc;
}

/* A 2-layer Llama-shaped f32 container (rows of 256 and 512). `nan_at`:
 * when not NULL, that tensor gets a NaN at row 3, column 5. */
static bool write_model(const char *path, const char *nan_at)
{
    static const shape S = {"tiny", 2, 256, 512, 4, 2, 64, false};
    model *m = malloc(sizeof *m);
    build(m, &S, LMQ_TYPE_F32);
    lmq_writer *w = NULL;
    lmq_status s = lmq_writer_open(path, NULL, &w);
    if (!s) {
        lmq_meta *meta = lmq_writer_meta(w);
        lmq_meta_set_str(meta, "general.architecture", "llama");
        lmq_meta_set_u32(meta, "llama.block_count", 2);
        lmq_meta_set_u32(meta, "llama.attention.head_count", 4);
        lmq_meta_set_u32(meta, "llama.attention.head_count_kv", 2);
        lmq_meta_set_str(meta, "lmq.quantize.mix", "stale"); /* replaced by the quantizer */
    }
    for (size_t i = 0; i < m->n && !s; i++) {
        const lmq_mix_tensor *t = &m->t[i];
        size_t n = (size_t)(t->ne[0] * t->ne[1]);
        float *x = malloc(n * sizeof *x);
        for (size_t j = 0; j < n; j++) x[j] = t->n_dims == 1 ? 1.0f + 0.01f * (float)j : 0.1f * rnd_normal();
        if (nan_at && !strcmp(nan_at, t->name)) x[3 * t->ne[0] + 5] = NAN;
        s = lmq_writer_add_tensor(w, t->name, LMQ_TYPE_F32, t->n_dims, t->ne, x, n * sizeof *x);
        free(x);
    }
    s = s ? s : lmq_writer_finish(w);
    if (s) lmq_writer_abort(w);
    T_CHECK(s == LMQ_OK, "write model %s: %s", path, lmq_last_error());
    free(m);
    return s == LMQ_OK;
}

static lmq_quantize_opts qopts(const char *mixname, int n_threads)
{
    lmq_quantize_opts o;
    memset(&o, 0, sizeof o);
    o.mix = mixname;
    o.output_type = LMQ_TYPE_COUNT;
    o.token_embd_type = LMQ_TYPE_COUNT;
    o.n_threads = n_threads;
    return o;
}

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    uint64_t *p = ctx;
    T_CHECK(done >= p[0] && done <= total, "progress goes forward");
    p[0] = done;
    p[1] = total;
    p[2]++;
}

/* Relative RMS error of a stored tensor against the source values. */
static double rel_rms(const lmq_tensor_info *q, const lmq_tensor_info *ref)
{
    int64_t n = q->ne[0] * q->ne[1];
    float *x = malloc((size_t)n * sizeof *x);
    int64_t row = lmq_row_size(q->type, q->ne[0]);
    for (int64_t r = 0; r < q->ne[1]; r++)
        lmq_dequantize_row(q->type, (const uint8_t *)q->data + r * row, x + r * q->ne[0], q->ne[0]);
    const float *y = ref->data;
    double e = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        e += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        s += (double)y[i] * y[i];
    }
    free(x);
    return s > 0 ? sqrt(e / s) : 0;
}

static void test_quantize_model(void)
{
    char src[4096], q1[4096], q2[4096];
    snprintf(src, sizeof src, "%s", t_tmp("tiny-f32.lmq"));
    snprintf(q1, sizeof q1, "%s", t_tmp("tiny-q4km-1.lmq"));
    snprintf(q2, sizeof q2, "%s", t_tmp("tiny-q4km-2.lmq"));
    if (!write_model(src, NULL)) return;

    lmq_quantize_opts o = qopts("q4_k_m", 2);
    uint64_t prog[3] = {0, 0, 0};
    o.progress = on_progress;
    o.progress_ctx = prog;
    lmq_quantize_stats st;
    lmq_status s = lmq_quantize_model(src, q2, &o, &st);
    T_CHECK(s == LMQ_OK, "quantize: %s", lmq_last_error());
    T_CHECK(prog[2] > 0 && prog[0] == prog[1] && prog[1] == st.n_elements, "progress ends at the total");
    o = qopts("q4_k_m", 1);
    s = lmq_quantize_model(src, q1, &o, NULL);
    T_CHECK(s == LMQ_OK && t_files_equal(q1, q2), "1 and 2 threads give the same bytes");

    lmq_quantize_plan *p = NULL;
    lmq_file *f = NULL, *in = NULL;
    s = lmq_quantize_plan_model(src, &o, &p);
    T_CHECK(s == LMQ_OK, "plan: %s", lmq_last_error());
    if (s || lmq_file_open(q2, &f) != LMQ_OK || lmq_file_open(src, &in) != LMQ_OK) {
        T_CHECK(false, "open: %s", lmq_last_error());
        goto out;
    }
    T_CHECK(lmq_file_n_tensors(f) == p->n && st.n_tensors == p->n, "tensor count");
    T_CHECK(st.bytes_out == p->stats.bytes_out && st.file_bytes > st.bytes_out, "stats");
    for (size_t i = 0; i < p->n && i < lmq_file_n_tensors(f); i++) {
        const lmq_tensor_info *t = lmq_file_tensor(f, i), *r = lmq_file_tensor(in, i);
        T_CHECK(!strcmp(t->name, p->names[i]) && t->type == p->entries[i].type, "%s: %s as planned", t->name,
                lmq_type_name(t->type));
        if (t->type == LMQ_TYPE_F32) {
            T_CHECK(t->nbytes == r->nbytes && !memcmp(t->data, r->data, t->nbytes), "%s copied bit for bit", t->name);
        } else {
            double e = rel_rms(t, r), tol = t->type == LMQ_TYPE_Q6_K ? 0.03 : 0.12;
            T_CHECK(e > 0 && e < tol, "%s (%s): relative RMS error %.4f", t->name, lmq_type_name(t->type), e);
        }
    }
    /* q4_k_m on 2 layers: use_more_bits(1, 2) holds (i >= 7n/8), use_more_bits(0, 2) does not */
    T_CHECK(lmq_file_find_tensor(f, "blk.1.attn_v.weight")->type == LMQ_TYPE_Q6_K &&
                lmq_file_find_tensor(f, "blk.0.attn_v.weight")->type == LMQ_TYPE_Q4_K,
            "tiny attn_v: q4_K, q6_K");
    const lmq_meta *m = lmq_file_meta(f);
    const char *mixname = NULL;
    uint64_t id = 0, ft = 0;
    T_CHECK(lmq_meta_get_str(m, "lmq.quantize.mix", &mixname, NULL) == LMQ_OK && !strcmp(mixname, "q4_k_m"),
            "mix recorded (stale value replaced)");
    T_CHECK(lmq_meta_get_u64(m, "lmq.quantize.source_id", &id) == LMQ_OK && id == lmq_file_id(in), "source id");
    T_CHECK(lmq_meta_get_u64(m, "general.file_type", &ft) == LMQ_OK && ft == 15, "file_type 15");
    T_CHECK(lmq_meta_find(m, "lmq.quantize.pure") == NULL && lmq_meta_find(m, "lmq.quantize.overrides") == NULL,
            "no pure/overrides keys when unused");
    T_CHECK(lmq_file_verify(f, 1, NULL, NULL) == LMQ_OK, "checksums verify");

    /* requantizing is refused; dequantizing to f16 works */
    o = qopts("q8_0", 2);
    s = lmq_quantize_model(q2, t_tmp("requant.lmq"), &o, NULL);
    T_CHECK(s == LMQ_ERR_UNSUPPORTED && strstr(lmq_last_error(), "already quantized") &&
                strstr(lmq_last_error(), ".weight"),
            "requantize refused: %s", lmq_last_error());
    T_CHECK(!t_exists(t_tmp("requant.lmq")), "nothing written on refusal");
    lmq_mix_override ov = {"attn_q", LMQ_TYPE_Q4_0};
    o = qopts("f16", 2);
    o.overrides = &ov;
    o.n_overrides = 1;
    s = lmq_quantize_model(q2, t_tmp("requant.lmq"), &o, NULL);
    T_CHECK(s == LMQ_ERR_UNSUPPORTED, "an override to a quantized type is requantizing too");
    o = qopts("f16", 2);
    s = lmq_quantize_model(q2, t_tmp("deq-f16.lmq"), &o, NULL);
    T_CHECK(s == LMQ_OK, "dequantize to f16: %s", lmq_last_error());
    lmq_file *d = NULL;
    if (!s && lmq_file_open(t_tmp("deq-f16.lmq"), &d) == LMQ_OK) {
        const lmq_tensor_info *a = lmq_file_find_tensor(d, "blk.0.ffn_up.weight");
        const lmq_tensor_info *b = lmq_file_find_tensor(f, "blk.0.ffn_up.weight");
        float x[256], y[256];
        lmq_dequantize_row(b->type, b->data, x, 256);
        lmq_dequantize_row(a->type, a->data, y, 256);
        int bad = 0;
        for (int j = 0; j < 256; j++) bad += lmq_fp16_to_fp32(lmq_fp32_to_fp16(x[j])) != y[j];
        T_CHECK(a->type == LMQ_TYPE_F16 && bad == 0, "f16 holds the dequantized q4_K values (%d differ)", bad);
        T_CHECK(lmq_file_find_tensor(d, "blk.0.attn_norm.weight")->type == LMQ_TYPE_F32, "norms stay f32");
    }
    lmq_file_close(d);

    /* user options are recorded; fp8 mixes have no llama.cpp file type */
    lmq_mix_override ov2 = {"ffn_(up|gate)", LMQ_TYPE_Q8_0};
    o = qopts("f8_e4m3", 2);
    o.pure = true;
    o.overrides = &ov2;
    o.n_overrides = 1;
    o.codec = LMQ_CODEC_ZSTD;
    s = lmq_quantize_model(src, t_tmp("f8.lmq"), &o, NULL);
    T_CHECK(s == LMQ_OK, "f8 mix: %s", lmq_last_error());
    if (!s && lmq_file_open(t_tmp("f8.lmq"), &d) == LMQ_OK) {
        const lmq_meta *dm = lmq_file_meta(d);
        bool pure = false;
        lmq_vtype el;
        uint64_t n_ov = 0;
        const void *data;
        T_CHECK(lmq_meta_find(dm, "general.file_type") == NULL, "no file_type for fp8");
        T_CHECK(lmq_meta_get_bool(dm, "lmq.quantize.pure", &pure) == LMQ_OK && pure, "pure recorded");
        T_CHECK(lmq_meta_get_arr(dm, "lmq.quantize.overrides", &el, &n_ov, &data) == LMQ_OK && el == LMQ_V_STRING &&
                    n_ov == 1 && !strcmp(((const lmq_str *)data)[0].ptr, "ffn_(up|gate)=q8_0"),
                "overrides recorded");
        T_CHECK(lmq_file_find_tensor(d, "blk.0.ffn_up.weight")->type == LMQ_TYPE_Q8_0 &&
                    lmq_file_find_tensor(d, "blk.0.attn_q.weight")->type == LMQ_TYPE_F8_E4M3 &&
                    lmq_file_find_tensor(d, "output.weight")->type == LMQ_TYPE_F8_E4M3,
                "f8 types");
        T_CHECK(lmq_file_verify(d, 1, NULL, NULL) == LMQ_OK, "zstd output verifies");
    }
    lmq_file_close(d);

    /* refusals */
    o = qopts("q4_k_x", 2);
    T_CHECK(lmq_quantize_model(src, t_tmp("x.lmq"), &o, NULL) == LMQ_ERR_INVALID_ARG &&
                strstr(lmq_last_error(), "q4_k_m"),
            "unknown mix: %s", lmq_last_error());
    o = qopts("q4_k_m", 2);
    T_CHECK(lmq_quantize_model(src, src, &o, NULL) == LMQ_ERR_INVALID_ARG, "output over input refused");
    if (write_model(t_tmp("nan.lmq"), "blk.1.ffn_up.weight")) {
        s = lmq_quantize_model(t_tmp("nan.lmq"), t_tmp("nan-q.lmq"), &o, NULL);
        T_CHECK(s == LMQ_ERR_FORMAT && strstr(lmq_last_error(), "blk.1.ffn_up.weight") &&
                    strstr(lmq_last_error(), "row 3, column 5"),
                "NaN refused: %s", lmq_last_error());
        T_CHECK(!t_exists(t_tmp("nan-q.lmq")), "no output after NaN");
        o = qopts("f32", 2); /* a plain copy is checked too */
        s = lmq_quantize_model(t_tmp("nan.lmq"), t_tmp("nan-q.lmq"), &o, NULL);
        T_CHECK(s == LMQ_ERR_FORMAT && !t_exists(t_tmp("nan-q.lmq")), "NaN refused for f32 too");
    }
    T_CHECK(lmq_quantize_model(t_tmp("missing.lmq"), t_tmp("x.lmq"), &o, NULL) == LMQ_ERR_NOT_FOUND,
            "missing input");
out:
    lmq_quantize_plan_free(p);
    lmq_file_close(f);
    lmq_file_close(in);
}

/* llama.cpp's rules for 8-expert models (Mixtral 8x7B): attn_v and attn_k
 * q8_0, attn_output q5_K for the mixes it lists (not q3_k_l); other expert
 * counts follow the dense rules. The expert tensors themselves are named
 * ffn_*_exps and fall in the ffn_down/ffn_gate/ffn_up categories. */
static void test_experts(void)
{
    static const shape S = {"moe", 4, 512, 256, 8, 2, 256, false};
    model *m = malloc(sizeof *m);
    lmq_mix_entry e[1024];
    for (int n_exp = 4; n_exp <= 8; n_exp += 4) {
        for (int mi = 0; mi < 2; mi++) {
            const char *mx = mi ? "q3_k_l" : "q4_k_m";
            build(m, &S, LMQ_TYPE_F32);
            m->facts.n_expert = n_exp;
            lmq_mix_opts o = opts_for(mx);
            if (!plan(m, &o, e, NULL)) continue;
            lmq_type want_k = n_exp == 8 ? LMQ_TYPE_Q8_0 : mi ? LMQ_TYPE_Q3_K : LMQ_TYPE_Q4_K;
            lmq_type want_o = mi ? (n_exp == 8 ? LMQ_TYPE_Q3_K : LMQ_TYPE_Q5_K) : (n_exp == 8 ? LMQ_TYPE_Q5_K : LMQ_TYPE_Q4_K);
            int bad = 0;
            for (int l = 0; l < S.n_layer; l++) {
                char nm[48];
                snprintf(nm, sizeof nm, "blk.%d.attn_k.weight", l);
                bad += e[find(m, nm)].type != want_k;
                snprintf(nm, sizeof nm, "blk.%d.attn_output.weight", l);
                bad += e[find(m, nm)].type != want_o;
                snprintf(nm, sizeof nm, "blk.%d.attn_v.weight", l);
                if (n_exp == 8) bad += e[find(m, nm)].type != LMQ_TYPE_Q8_0;
            }
            T_CHECK(bad == 0, "%d experts, %s: attn_k %s, attn_output %s, attn_v q8_0 for 8 (%d differ)", n_exp, mx,
                    lmq_type_name(want_k), lmq_type_name(want_o), bad);
        }
    }
    free(m);
}

int main(void)
{
    test_table();
    test_experts();
    test_llama_shapes();
    test_order_independent();
    test_fallback();
    test_overrides();
    test_pure();
    test_quantize_model();
    return t_finish();
}

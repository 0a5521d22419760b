/* testutil_hf.c: the test helpers that read and write Hugging Face
 * directories and compare converted files (they use lmq's formats library
 * and cJSON, unlike testutil.c, which the ARM kernel tests build alone). */
#define _XOPEN_SOURCE 700
#include "testutil.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lmq_quant.h"

/* ================================================================ crafted Hugging Face directories */

bool t_write_st(const char *path, const t_st_entry *e, size_t n)
{
    size_t cap = 16, len = 0;
    for (size_t i = 0; i < n; i++) cap += strlen(e[i].name) + strlen(e[i].dtype) + 64 + 21 * (4 + 2);
    char *h = malloc(cap);
    if (!h) return false;
    uint64_t off = 0;
    len += (size_t)snprintf(h + len, cap - len, "{");
    for (size_t i = 0; i < n; i++) {
        len += (size_t)snprintf(h + len, cap - len, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "", e[i].name,
                                e[i].dtype);
        for (uint32_t d = 0; d < e[i].n_dims && d < 4; d++)
            len += (size_t)snprintf(h + len, cap - len, "%s%lld", d ? "," : "", (long long)e[i].shape[d]);
        len += (size_t)snprintf(h + len, cap - len, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                                (unsigned long long)(off + e[i].nbytes));
        off += e[i].nbytes;
    }
    len += (size_t)snprintf(h + len, cap - len, "}");
    while (len % 8) h[len++] = ' ';
    const uint64_t total = 8 + len + off;
    uint8_t *buf = malloc((size_t)total);
    if (!buf) {
        free(h);
        return false;
    }
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)len >> (8 * i));
    memcpy(buf + 8, h, len);
    uint64_t p = 8 + len;
    for (size_t i = 0; i < n; i++) {
        memcpy(buf + p, e[i].data, (size_t)e[i].nbytes);
        p += e[i].nbytes;
    }
    bool ok = t_write_all(path, buf, (size_t)total) == 0;
    free(buf);
    free(h);
    return ok;
}

t_st_entry *t_entries_of(const lmq_safetensors *st, size_t extra, size_t *n)
{
    *n = lmq_safetensors_count(st);
    t_st_entry *e = calloc(*n + extra, sizeof *e);
    if (!e) return NULL;
    for (size_t i = 0; i < *n; i++) {
        const lmq_st_tensor *t = lmq_safetensors_tensor(st, i);
        snprintf(e[i].name, sizeof e[i].name, "%s", t->name);
        e[i].dtype = t->dtype;
        e[i].n_dims = t->n_dims;
        for (uint32_t d = 0; d < t->n_dims && d < 4; d++) e[i].shape[d] = t->shape[d];
        e[i].data = t->data;
        e[i].nbytes = t->nbytes;
    }
    return e;
}

const char *t_crafted_dir(const char *src, const char *name, const char *config)
{
    static char dir[4096]; /* not a slot(): callers hold t_shared() paths across many calls */
    snprintf(dir, sizeof dir, "%s/%s", t_tmpdir(), name);
    mkdir(dir, 0755);
    static const char *const files[] = {"config.json", "tokenizer.model", "tokenizer_config.json",
                                        "special_tokens_map.json", "generation_config.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char a[4096], b[4096];
        snprintf(a, sizeof a, "%s/%s", src, files[i]);
        snprintf(b, sizeof b, "%s/%s", dir, files[i]);
        if (i == 0 && config) T_CHECK(t_write_all(b, config, strlen(config)) == 0, "write %s", b);
        else if (t_exists(a)) T_CHECK(t_copy_file(a, b), "copy %s", a);
    }
    return dir;
}

const char *t_crafted(const char *src, const char *name, const char *config, const t_st_entry *e, size_t n)
{
    const char *dir = t_crafted_dir(src, name, config);
    char a[4096], b[4096];
    snprintf(a, sizeof a, "%s/model.safetensors", src);
    snprintf(b, sizeof b, "%s/model.safetensors", dir);
    if (e) T_CHECK(t_write_st(b, e, n), "write %s", b);
    else if (t_exists(a)) T_CHECK(t_copy_file(a, b), "copy %s", a);
    return dir;
}

cJSON *t_config_of(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text = t_read_all(path, NULL);
    cJSON *c = text ? cJSON_Parse(text) : NULL;
    free(text);
    return c;
}

char *t_config_with(const char *src, void (*edit)(cJSON *))
{
    cJSON *c = t_config_of(src);
    if (!c) return NULL;
    edit(c);
    char *out = cJSON_Print(c);
    cJSON_Delete(c);
    return out;
}

void t_check_error(const char *what, lmq_status s, lmq_status want, const char *mention, const char *mention2)
{
    const char *e = lmq_last_error();
    T_CHECK(s == want && strstr(e, mention) && (!mention2 || strstr(e, mention2)) && !strchr(e, '\n'),
            "%s: status %d (want %d), one line naming '%s': %s", what, s, want, mention, e);
}

/* ================================================================ comparisons */

void t_wants_free(t_wants *w)
{
    for (size_t i = 0; i < w->n; i++) {
        if (w->t[i].hf != w->t[i].v) free(w->t[i].hf);
        free(w->t[i].v);
        free(w->t[i].blocks);
    }
    free(w->t);
    memset(w, 0, sizeof *w);
}

const t_want *t_want_find(const t_wants *w, const char *name)
{
    for (size_t i = 0; i < w->n; i++)
        if (!strcmp(w->t[i].name, name)) return &w->t[i];
    return NULL;
}

bool t_same_shape(const lmq_tensor_info *t, const t_want *w)
{
    if (t->n_dims != w->n_dims) return false;
    for (uint32_t d = 0; d < t->n_dims; d++)
        if (t->ne[d] != w->ne[d]) return false;
    return true;
}

double t_rel_rms(const float *a, const float *b, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

float *t_tensor_floats(const lmq_tensor_info *t)
{
    int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3], rows = n / t->ne[0];
    int64_t rb = lmq_row_size(t->type, t->ne[0]);
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t r = 0; r < rows; r++)
        if (lmq_dequantize_row(t->type, (const uint8_t *)t->data + r * rb, v + r * t->ne[0], t->ne[0]) != LMQ_OK) {
            free(v);
            return NULL;
        }
    return v;
}

float t_bf16f(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Same type and value: strings and arrays byte for byte, numbers as doubles. */
static bool same_value(const lmq_meta *ours, const lmq_meta *ref, const char *k, const lmq_value *a, const lmq_value *b)
{
    if (!a || a->type != b->type) return false;
    if (b->type == LMQ_V_STRING) return a->s.len == b->s.len && !memcmp(a->s.ptr, b->s.ptr, (size_t)a->s.len);
    if (b->type == LMQ_V_ARRAY) {
        lmq_vtype ea, eb;
        uint64_t na, nb;
        const void *da, *db;
        return lmq_meta_get_arr(ours, k, &ea, &na, &da) == LMQ_OK &&
               lmq_meta_get_arr(ref, k, &eb, &nb, &db) == LMQ_OK && ea == eb && na == nb &&
               !memcmp(da, db, (size_t)na * lmq_vtype_size(ea));
    }
    double x, y;
    return lmq_meta_get_f64(ours, k, &x) == LMQ_OK && lmq_meta_get_f64(ref, k, &y) == LMQ_OK && x == y;
}

static bool is_optional(const char *suffix, const char *const *optional)
{
    for (; optional && *optional; optional++)
        if (!strcmp(suffix, *optional)) return true;
    return false;
}

void t_check_keys(const char *what, const lmq_meta *ours, const lmq_meta *ref, const char *arch,
                  const char *const *optional, int min_keys)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s.", arch);
    const size_t np = strlen(prefix);
    int bad = 0, n = 0;
    for (size_t i = 0; i < lmq_meta_count(ref); i++) {
        const char *k = lmq_meta_key(ref, i);
        if (strncmp(k, prefix, np)) continue;
        n++;
        if (!same_value(ours, ref, k, lmq_meta_find(ours, k), lmq_meta_value(ref, i))) {
            fprintf(stderr, "%s: key %s differs from the reference's (or is missing)\n", what, k);
            bad++;
        }
    }
    for (size_t i = 0; i < lmq_meta_count(ours); i++) {
        const char *k = lmq_meta_key(ours, i);
        if (!strncmp(k, prefix, np) && !lmq_meta_find(ref, k) && !is_optional(k + np, optional)) {
            fprintf(stderr, "%s: key %s is not in the reference\n", what, k);
            bad++;
        }
    }
    T_CHECK(bad == 0 && n >= min_keys, "%s: %d %s.* keys equal the reference's (%d differ, want at least %d)", what, n,
            arch, bad, min_keys);
    lmq_error_clear();
}

/* f32 tensors within a relative 1e-6 of each other (a value computed in
 * double on one side and in f32 on the other: at most an ulp apart). */
static bool close_f32(const lmq_tensor_info *a, const lmq_tensor_info *b)
{
    if (a->type != LMQ_TYPE_F32 || b->type != LMQ_TYPE_F32 || a->nbytes != b->nbytes) return false;
    const float *x = a->data, *y = b->data;
    for (uint64_t i = 0; i < a->nbytes / 4; i++)
        if (!(fabsf(x[i] - y[i]) <= 1e-6f * fabsf(y[i]))) return false;
    return true;
}

void t_check_names(const char *what, const lmq_file *ours, const lmq_file *ref, t_names_cmp cmp)
{
    int bad = 0;
    for (size_t i = 0; i < lmq_file_n_tensors(ref); i++) {
        const lmq_tensor_info *b = lmq_file_tensor(ref, i), *a = lmq_file_find_tensor(ours, b->name);
        bool ok = a && a->n_dims == b->n_dims && !memcmp(a->ne, b->ne, sizeof a->ne);
        if (ok && cmp != T_NAMES_SHAPES)
            ok = (a->type == b->type && a->nbytes == b->nbytes && !memcmp(a->data, b->data, (size_t)a->nbytes)) ||
                 (cmp == T_NAMES_BYTES_OR_CLOSE && close_f32(a, b));
        if (!ok) {
            fprintf(stderr, "%s: tensor %s missing or different\n", what, b->name);
            bad++;
        }
    }
    T_CHECK(bad == 0 && lmq_file_n_tensors(ours) == lmq_file_n_tensors(ref),
            "%s: the reference's %zu tensor names and shapes%s (%d differ, %zu tensors)", what,
            lmq_file_n_tensors(ref), cmp != T_NAMES_SHAPES ? " and bytes" : "", bad, lmq_file_n_tensors(ours));
}

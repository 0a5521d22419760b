/* Unit tests of the GGUF reader (formats/gguf.c) on files built here byte by
 * byte, against what ggml's own reader (gguf.cpp) accepts:
 *   - a 0-dimension tensor (ggml: one element, every extent 1) reads as a
 *     1-D tensor of ne[0] = 1 with its data, between ordinary tensors;
 *   - a 0-dimension tensor of every type in the type table: the float types
 *     read, each block type is refused with one line naming the file, the
 *     tensor, ne[0] and the block size;
 *   - 0-dimension tensors packed at alignment 1 (smaller tensor infos than
 *     any 1-D one), an empty tensor name, GGUF version 0, a 2^20 alignment:
 *     all read, as ggml reads them;
 *   - n_dims 5, an extent above 2^40, extents whose product overflows, a
 *     misaligned offset, a bad alignment, versions 1 and 4: refused, naming
 *     the field;
 *   - every prefix of a file with a 0-dimension tensor fails cleanly;
 *   - lmq convert of a GGUF with a 0-dimension tensor writes it as 1-D [1];
 *     a 0-d q4_0 tensor and an empty tensor name are refused, naming them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_convert.h"
#include "lmq_format.h"
#include "testutil.h"

/* ---------------------------------------------------------------- a GGUF builder */

typedef struct gbuf {
    uint8_t *p;
    size_t len, cap;
} gbuf;

static void put(gbuf *b, const void *d, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap *= 2;
        uint8_t *q = realloc(b->p, cap);
        if (!q) abort(); /* test scaffolding: out of memory is not the case under test */
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, d, n);
    b->len += n;
}
static void put_u32(gbuf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(b, x, 4);
}
static void put_u64(gbuf *b, uint64_t v)
{
    put_u32(b, (uint32_t)v);
    put_u32(b, (uint32_t)(v >> 32));
}
static void put_str(gbuf *b, const char *s, size_t n)
{
    put_u64(b, n);
    put(b, s, n);
}

/* One tensor info to write; data (nbytes) is placed at `offset` unless
 * offset is UINT64_MAX (then packed after the previous one, aligned). */
typedef struct gt {
    const char *name;
    size_t name_len; /* 0: strlen(name) */
    uint32_t n_dims;
    int64_t ne[5];
    uint32_t type; /* ggml type id */
    const void *data;
    size_t nbytes;
    uint64_t offset;
} gt;

typedef struct gfile {
    uint32_t version;
    uint32_t alignment;      /* 0: no general.alignment key (32) */
    const char *arch;        /* general.architecture, or NULL */
    const gt *t;
    size_t n;
} gfile;

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* The whole file into *out (malloc'd). */
static size_t build(const gfile *g, uint8_t **out)
{
    gbuf b = {0};
    const uint32_t al = g->alignment ? g->alignment : 32;
    put(&b, "GGUF", 4);
    put_u32(&b, g->version);
    put_u64(&b, g->n);
    put_u64(&b, (g->alignment ? 1 : 0) + (g->arch ? 1 : 0));
    if (g->arch) {
        put_str(&b, "general.architecture", 20);
        put_u32(&b, LMQ_V_STRING);
        put_str(&b, g->arch, strlen(g->arch));
    }
    if (g->alignment) {
        put_str(&b, "general.alignment", 17);
        put_u32(&b, LMQ_V_U32);
        put_u32(&b, g->alignment);
    }
    uint64_t *off = calloc(g->n ? g->n : 1, sizeof *off), next = 0, end = 0;
    for (size_t i = 0; i < g->n; i++) {
        const gt *t = &g->t[i];
        off[i] = t->offset != UINT64_MAX ? t->offset : align_up(next, al);
        next = off[i] + t->nbytes;
        if (next > end) end = next;
        put_str(&b, t->name, t->name_len ? t->name_len : strlen(t->name));
        put_u32(&b, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) put_u64(&b, (uint64_t)t->ne[d]);
        put_u32(&b, t->type);
        put_u64(&b, off[i]);
    }
    const size_t data_start = (size_t)align_up(b.len, al);
    while (b.len < data_start) put(&b, "", 1);
    const size_t total = data_start + (size_t)align_up(end, al);
    uint8_t *p = calloc(total ? total : 1, 1);
    memcpy(p, b.p, b.len);
    for (size_t i = 0; i < g->n; i++)
        if (g->t[i].nbytes) memcpy(p + data_start + off[i], g->t[i].data, g->t[i].nbytes);
    free(b.p);
    free(off);
    *out = p;
    return total;
}

/* Opens g from memory; *f is NULL on failure (the status is returned). */
static lmq_status open_g(const gfile *g, lmq_file **f, uint8_t **buf)
{
    size_t len = build(g, buf);
    return lmq_file_open_memory(*buf, len, "t.gguf", f);
}

/* One check: g is refused with `want`, one line naming the file and each of
 * the (up to three) mentions. */
static void refused(const char *what, const gfile *g, lmq_status want, const char *m1, const char *m2, const char *m3)
{
    lmq_file *f = NULL;
    uint8_t *buf = NULL;
    lmq_status s = open_g(g, &f, &buf);
    const char *e = lmq_last_error();
    T_CHECK(s == want && !f && !strchr(e, '\n') && strstr(e, "t.gguf") && (!m1 || strstr(e, m1)) &&
                (!m2 || strstr(e, m2)) && (!m3 || strstr(e, m3)),
            "%s: status %d (want %d): '%s'", what, (int)s, (int)want, e);
    lmq_file_close(f);
    free(buf);
}

static const float k_scale = 0.75f, k_vec[3] = {1.5f, -2.0f, 3.25f};

/* ---------------------------------------------------------------- cases */

/* A 0-dimension f32 tensor between two 1-D ones: 1-D [1], its value and the
 * neighbours' data in place. */
static void zero_dims_read(void)
{
    const gt t[3] = {
        {.name = "a", .n_dims = 1, .ne = {3}, .type = 0, .data = k_vec, .nbytes = 12, .offset = UINT64_MAX},
        {.name = "blk.0.layer_output_scale.weight", .n_dims = 0, .type = 0, .data = &k_scale, .nbytes = 4,
         .offset = UINT64_MAX},
        {.name = "b", .n_dims = 1, .ne = {3}, .type = 0, .data = k_vec, .nbytes = 12, .offset = UINT64_MAX},
    };
    const gfile g = {.version = 3, .arch = "llama", .t = t, .n = 3};
    lmq_file *f = NULL;
    uint8_t *buf = NULL;
    lmq_status s = open_g(&g, &f, &buf);
    T_CHECK(s == LMQ_OK, "a 0-dimension f32 tensor: %s", lmq_last_error());
    if (f) {
        const lmq_tensor_info *sc = lmq_file_find_tensor(f, "blk.0.layer_output_scale.weight"),
                              *b = lmq_file_find_tensor(f, "b");
        T_CHECK(sc && sc->n_dims == 1 && sc->ne[0] == 1 && sc->ne[1] == 1 && sc->ne[2] == 1 && sc->ne[3] == 1 &&
                    sc->nbytes == 4 && sc->type == LMQ_TYPE_F32,
                "0-d tensor reads as 1-D [1] f32 of 4 bytes (n_dims %u, ne[0] %lld, %llu bytes)", sc ? sc->n_dims : 0,
                sc ? (long long)sc->ne[0] : -1, sc ? (unsigned long long)sc->nbytes : 0);
        float v = 0;
        if (sc) memcpy(&v, sc->data, 4);
        T_CHECK(v == k_scale, "0-d tensor's value %g (want %g)", v, k_scale);
        T_CHECK(b && b->nbytes == 12 && !memcmp(b->data, k_vec, 12), "the tensor after it keeps its data");
    }
    lmq_file_close(f);
    free(buf);
}

/* A 0-dimension tensor of every type GGUF has: one element fills a block of
 * the float types only. */
static void zero_dims_every_type(void)
{
    static const uint8_t zeros[512]; /* one block of any type */
    int n_float = 0, n_block = 0;
    for (int ty = 0; ty < LMQ_TYPE_COUNT; ty++) {
        const lmq_type_traits *tt = lmq_type_get((lmq_type)ty);
        if (tt->ggml_type < 0) continue;
        const gt t = {.name = "s", .n_dims = 0, .type = (uint32_t)tt->ggml_type, .data = zeros,
                      .nbytes = (size_t)tt->type_size, .offset = UINT64_MAX};
        const gfile g = {.version = 3, .t = &t, .n = 1};
        char what[64], bs[32];
        snprintf(what, sizeof what, "0-d %s tensor", tt->name);
        if (tt->block_size == 1) {
            lmq_file *f = NULL;
            uint8_t *buf = NULL;
            lmq_status s = open_g(&g, &f, &buf);
            const lmq_tensor_info *ti = f ? lmq_file_tensor(f, 0) : NULL;
            T_CHECK(s == LMQ_OK && ti && ti->type == (lmq_type)ty && ti->n_dims == 1 && ti->ne[0] == 1 &&
                        ti->nbytes == (uint64_t)tt->type_size,
                    "%s reads as one element: %s", what, lmq_last_error());
            lmq_file_close(f);
            free(buf);
            n_float++;
        } else {
            snprintf(bs, sizeof bs, "block size %d", (int)tt->block_size);
            refused(what, &g, LMQ_ERR_FORMAT, "tensor 's'", "ne[0] = 1 (a 0-dimension tensor is one element)", bs);
            n_block++;
        }
    }
    T_CHECK(n_float == 3 && n_block >= 14, "types walked: %d float, %d block", n_float, n_block);
}

/* 60 one-element tensors at alignment 1 (29 bytes each with their data, less
 * than the 33 bytes of the smallest 1-D tensor info): ggml reads them. Also
 * an empty tensor name, version 0 (read as 2 and 3) and a 2^20 alignment. */
static void what_ggml_reads(void)
{
    gt t[60];
    char names[60][2];
    for (int i = 0; i < 60; i++) {
        names[i][0] = (char)('!' + i);
        names[i][1] = 0;
        t[i] = (gt){.name = names[i], .n_dims = 0, .type = 0, .data = &k_scale, .nbytes = 4, .offset = UINT64_MAX};
    }
    gfile g = {.version = 3, .alignment = 1, .t = t, .n = 60};
    uint8_t *buf = NULL;
    lmq_file *f = NULL;
    size_t len = build(&g, &buf);
    T_CHECK(len < 60 * 33, "60 0-d tensors in %zu bytes", len);
    lmq_status s = lmq_file_open_memory(buf, len, "t.gguf", &f);
    T_CHECK(s == LMQ_OK && lmq_file_n_tensors(f) == 60, "60 packed 0-d tensors: %s", lmq_last_error());
    const lmq_tensor_info *last = f ? lmq_file_find_tensor(f, names[59]) : NULL;
    T_CHECK(last && last->file_offset + 4 == len && !memcmp(last->data, &k_scale, 4), "the last one's data");
    lmq_file_close(f);
    free(buf);

    const gt e[2] = {{.name = "", .n_dims = 1, .ne = {3}, .type = 0, .data = k_vec, .nbytes = 12, .offset = UINT64_MAX},
                     {.name = "x", .n_dims = 0, .type = 0, .data = &k_scale, .nbytes = 4, .offset = UINT64_MAX}};
    g = (gfile){.version = 3, .t = e, .n = 2};
    s = open_g(&g, &f, &buf);
    const lmq_tensor_info *en = f ? lmq_file_find_tensor(f, "") : NULL;
    T_CHECK(s == LMQ_OK && en && en->ne[0] == 3 && !memcmp(en->data, k_vec, 12), "an empty tensor name: %s",
            lmq_last_error());
    lmq_file_close(f);
    free(buf);

    g.version = 0;
    s = open_g(&g, &f, &buf);
    T_CHECK(s == LMQ_OK && lmq_file_version(f) == 0 && lmq_file_n_tensors(f) == 2, "GGUF version 0: %s",
            lmq_last_error());
    lmq_file_close(f);
    free(buf);

    g = (gfile){.version = 3, .alignment = 1u << 20, .t = e + 1, .n = 1};
    s = open_g(&g, &f, &buf);
    const lmq_tensor_info *x = f ? lmq_file_tensor(f, 0) : NULL;
    T_CHECK(s == LMQ_OK && x && x->file_offset == (1u << 20) && !memcmp(x->data, &k_scale, 4),
            "general.alignment 2^20: %s", lmq_last_error());
    lmq_file_close(f);
    free(buf);

    /* zero-element tensors (ggml divides by ne[1..3] in its check, so only ne[0] = 0 reaches it) */
    const gt z[2] = {{.name = "z0", .n_dims = 2, .ne = {0, 7}, .type = 8, .offset = 0},
                     {.name = "z1", .n_dims = 3, .ne = {32, 0, 5}, .type = 8, .offset = 0}};
    g = (gfile){.version = 3, .t = z, .n = 2};
    s = open_g(&g, &f, &buf);
    T_CHECK(s == LMQ_OK && lmq_file_tensor(f, 0)->nbytes == 0 && lmq_file_tensor(f, 1)->nbytes == 0,
            "zero-element tensors: %s", lmq_last_error());
    lmq_file_close(f);
    free(buf);
}

static void refusals(void)
{
    gt t = {.name = "w", .n_dims = 5, .ne = {1, 1, 1, 1, 1}, .type = 0, .data = &k_scale, .nbytes = 4,
            .offset = UINT64_MAX};
    const gfile g = {.version = 3, .t = &t, .n = 1};
    refused("n_dims 5", &g, LMQ_ERR_FORMAT, "tensor 'w'", "n_dims = 5", "0..4");
    t = (gt){.name = "w", .n_dims = 1, .ne = {(int64_t)1 << 41}, .type = 0, .offset = 0};
    refused("ne[0] = 2^41", &g, LMQ_ERR_FORMAT, "tensor 'w'", "ne[0] = 2199023255552", "2^40");
    t = (gt){.name = "w", .n_dims = 3, .ne = {(int64_t)1 << 40, (int64_t)1 << 40, 0}, .type = 0, .offset = 0};
    refused("2^80 elements before a zero extent", &g, LMQ_ERR_FORMAT, "tensor 'w'", "ne[0..1]", "2^63 or more");
    t = (gt){.name = "w", .n_dims = 4, .ne = {0, (int64_t)1 << 40, (int64_t)1 << 40, 2}, .type = 0, .offset = 0};
    refused("zero elements in 2^81 rows", &g, LMQ_ERR_FORMAT, "tensor 'w'", "ne[0..2]", NULL);
    t = (gt){.name = "w", .n_dims = 1, .ne = {(int64_t)1 << 39}, .type = 0, .offset = 0};
    refused("2^41 bytes of f32 in a small file", &g, LMQ_ERR_FORMAT, "tensor 'w'", "outside the file", NULL);
    t = (gt){.name = "w", .n_dims = 0, .type = 0, .data = &k_scale, .nbytes = 4, .offset = 4};
    refused("offset 4 at alignment 32", &g, LMQ_ERR_FORMAT, "tensor 'w'", "offset 4", "general.alignment 32");
    /* a ggml type lmq lacks (ggml's integer types at least: I8 = 24 .. F64 = 28) */
    uint32_t missing = 16;
    lmq_type lt;
    while (missing < 64 && lmq_type_from_ggml(missing, &lt) == LMQ_OK) missing++;
    char want[32];
    snprintf(want, sizeof want, "ggml type %u", missing);
    t = (gt){.name = "w", .n_dims = 0, .type = missing, .data = &k_scale, .nbytes = 4, .offset = UINT64_MAX};
    refused("a ggml type lmq lacks", &g, LMQ_ERR_UNSUPPORTED, "tensor 'w'", want, "not supported");
    t = (gt){.name = "w", .n_dims = 0, .type = 0, .data = &k_scale, .nbytes = 4, .offset = UINT64_MAX};
    gfile h = g;
    h.alignment = 48;
    refused("alignment 48", &h, LMQ_ERR_FORMAT, "general.alignment = 48", "power of two", NULL);
    h.version = 1;
    h.alignment = 0;
    refused("version 1", &h, LMQ_ERR_UNSUPPORTED, "version 1", NULL, NULL);
    h.version = 4;
    refused("version 4", &h, LMQ_ERR_UNSUPPORTED, "version 4", NULL, NULL);
    /* general.alignment as a string */
    uint8_t *buf = NULL;
    size_t len = build(&g, &buf);
    gbuf b = {0};
    put(&b, buf, 16);
    put_u64(&b, 1);
    put_str(&b, "general.alignment", 17);
    put_u32(&b, LMQ_V_STRING);
    put_str(&b, "32", 2);
    put(&b, buf + 24, len - 24);
    lmq_file *f = NULL;
    lmq_status s = lmq_file_open_memory(b.p, b.len, "t.gguf", &f);
    T_CHECK(s == LMQ_ERR_FORMAT && strstr(lmq_last_error(), "general.alignment has value type string"),
            "a string alignment: %s", lmq_last_error());
    lmq_file_close(f);
    free(b.p);
    free(buf);
}

/* Every prefix of a file with a 0-dimension tensor that cuts its last
 * tensor's data is refused, one line naming the file; the longer ones (only
 * the last tensor's padding missing) read, as in ggml. */
static void prefixes(void)
{
    const gt t[2] = {
        {.name = "s", .n_dims = 0, .type = 0, .data = &k_scale, .nbytes = 4, .offset = UINT64_MAX},
        {.name = "v", .n_dims = 1, .ne = {3}, .type = 0, .data = k_vec, .nbytes = 12, .offset = UINT64_MAX},
    };
    const gfile g = {.version = 3, .arch = "llama", .t = t, .n = 2};
    uint8_t *buf = NULL;
    size_t len = build(&g, &buf), need = len;
    lmq_file *f = NULL;
    T_CHECK(lmq_file_open_memory(buf, len, "t.gguf", &f) == LMQ_OK, "the whole file: %s", lmq_last_error());
    if (f) need = (size_t)(lmq_file_tensor(f, 1)->file_offset + 12);
    lmq_file_close(f);
    T_CHECK(need < len, "the last tensor is padded (%zu of %zu bytes)", need, len);
    size_t bad = 0;
    for (size_t n = 0; n <= len; n++) {
        uint8_t *p = malloc(n ? n : 1);
        memcpy(p, buf, n);
        f = NULL;
        lmq_status s = lmq_file_open_memory(p, n, "t.gguf", &f);
        const bool ok = n < need ? s != LMQ_OK && !f && !strchr(lmq_last_error(), '\n') &&
                                       strstr(lmq_last_error(), "t.gguf")
                                 : s == LMQ_OK && lmq_file_n_tensors(f) == 2;
        if (!ok && !bad++) fprintf(stderr, "prefix %zu of %zu: %d '%s'\n", n, len, (int)s, lmq_last_error());
        lmq_file_close(f);
        free(p);
    }
    T_CHECK(bad == 0, "%zu of %zu prefixes were read wrongly", bad, len + 1);
    free(buf);
}

/* lmq convert keeps the tensor, 1-D [1] in the container; a 0-d q4_0 is
 * refused before anything is written. */
static void convert_zero_dims(void)
{
    const gt t[2] = {
        {.name = "s", .n_dims = 0, .type = 0, .data = &k_scale, .nbytes = 4, .offset = UINT64_MAX},
        {.name = "v", .n_dims = 1, .ne = {3}, .type = 0, .data = k_vec, .nbytes = 12, .offset = UINT64_MAX},
    };
    const gfile g = {.version = 3, .arch = "llama", .t = t, .n = 2};
    uint8_t *buf = NULL;
    size_t len = build(&g, &buf);
    const char *in = t_tmp("zero.gguf"), *out = t_tmp("zero.lmq");
    T_CHECK(t_write_all(in, buf, len) == 0, "write %s", in);
    free(buf);
    lmq_status s = lmq_convert_gguf(in, out, NULL, NULL);
    T_CHECK(s == LMQ_OK, "convert a GGUF with a 0-d tensor: %s", lmq_last_error());
    lmq_file *f = NULL;
    if (!s && lmq_file_open(out, &f) == LMQ_OK) {
        const lmq_tensor_info *sc = lmq_file_find_tensor(f, "s");
        T_CHECK(lmq_file_kind_of(f) == LMQ_FILE_LMQ && sc && sc->n_dims == 1 && sc->ne[0] == 1 && sc->nbytes == 4 &&
                    !memcmp(sc->data, &k_scale, 4),
                "the container holds it as 1-D [1] with its value");
        T_CHECK(lmq_file_verify(f, 1, NULL, NULL) == LMQ_OK, "checksums: %s", lmq_last_error());
    } else {
        T_CHECK(0, "open %s: %s", out, lmq_last_error());
    }
    lmq_file_close(f);

    const gt q = {.name = "blk.0.layer_output_scale.weight", .n_dims = 0, .type = 2, .data = k_vec, .nbytes = 12,
                  .offset = UINT64_MAX};
    const gfile gq = {.version = 3, .arch = "llama", .t = &q, .n = 1};
    len = build(&gq, &buf);
    const char *in2 = t_tmp("zero-q4_0.gguf"), *out2 = t_tmp("zero-q4_0.lmq");
    T_CHECK(t_write_all(in2, buf, len) == 0, "write %s", in2);
    free(buf);
    s = lmq_convert_gguf(in2, out2, NULL, NULL);
    t_check_error("convert a 0-d q4_0 tensor", s, LMQ_ERR_FORMAT, "blk.0.layer_output_scale.weight",
                  "not a multiple of its block size 32");
    T_CHECK(strstr(lmq_last_error(), in2) != NULL, "the error names the file: %s", lmq_last_error());
    T_CHECK(!t_exists(out2), "a refused convert left %s", out2);

    /* an empty tensor name reads (as in ggml), but a container cannot hold it */
    const gt e = {.name = "", .n_dims = 0, .type = 0, .data = &k_scale, .nbytes = 4, .offset = UINT64_MAX};
    const gfile ge = {.version = 3, .arch = "llama", .t = &e, .n = 1};
    len = build(&ge, &buf);
    T_CHECK(t_write_all(in2, buf, len) == 0, "write %s", in2);
    free(buf);
    s = lmq_convert_gguf(in2, out2, NULL, NULL);
    t_check_error("convert an empty tensor name", s, LMQ_ERR_UNSUPPORTED, "tensor 0 has an empty name", in2);
    T_CHECK(!t_exists(out2), "a refused convert left %s", out2);
}

int main(void)
{
    zero_dims_read();
    zero_dims_every_type();
    what_ggml_reads();
    refusals();
    prefixes();
    convert_zero_dims();
    return t_finish();
}

/* Unit tests of the safetensors reader (single files, sharded directories,
 * crafted bad headers, every truncation), the config.json mapping and the
 * Hugging Face -> GGUF tensor name mapping. */
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lmq_convert.h"
#include "lmq_format.h"
#include "testutil.h"

/* ---------------------------------------------------------------- helpers */

/* Test JSON is written with single quotes; this turns them into double quotes. */
static char *dq(const char *s)
{
    static char buf[8][4096];
    static int next;
    char *b = buf[next];
    next = (next + 1) % 8;
    snprintf(b, 4096, "%s", s);
    for (char *p = b; *p; p++)
        if (*p == '\'') *p = '"';
    return b;
}

/* 8-byte LE header length, header bytes, data bytes. */
static size_t build(uint8_t *out, size_t cap, const char *hdr, size_t hlen, const void *data, size_t dlen)
{
    if (8 + hlen + dlen > cap) return 0;
    for (int i = 0; i < 8; i++) out[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    memcpy(out + 8, hdr, hlen);
    if (dlen) memcpy(out + 8 + hlen, data, dlen);
    return 8 + hlen + dlen;
}

static size_t build_json(uint8_t *out, size_t cap, const char *json_sq, const void *data, size_t dlen)
{
    const char *h = dq(json_sq);
    return build(out, cap, h, strlen(h), data, dlen);
}

static bool contains(const char *hay, const char *needle)
{
    return hay && strstr(hay, needle) != NULL;
}

static uint8_t g_data[4096];

static void fill_data(void)
{
    for (size_t i = 0; i < sizeof g_data; i++) g_data[i] = (uint8_t)(i * 37 + 11);
}

/* ---------------------------------------------------------------- good files */

static void test_valid_file(void)
{
    uint8_t buf[8192];
    /* header order differs from data order; I64 is listed, not converted */
    size_t n = build_json(buf, sizeof buf,
                          "{'__metadata__': {'format': 'pt'},"
                          " 'b': {'dtype': 'BF16', 'shape': [4], 'data_offsets': [24, 32]},"
                          " 'a': {'dtype': 'F32', 'shape': [2, 3], 'data_offsets': [0, 24]},"
                          " 'c': {'dtype': 'I64', 'shape': [1], 'data_offsets': [32, 40]},"
                          " 'e': {'dtype': 'F16', 'shape': [0, 5], 'data_offsets': [40, 40]}}  ",
                          g_data, 40);
    const char *path = t_tmp("valid.safetensors");
    T_CHECK(t_write_all(path, buf, n) == 0, "write %s", path);
    size_t nt = 0;
    T_CHECK(lmq_safetensors_check_memory(buf, n, "mem", &nt) == LMQ_OK && nt == 4, "check_memory: %s", lmq_last_error());
    lmq_safetensors *st = NULL;
    lmq_status s = lmq_safetensors_open(path, &st);
    T_CHECK(s == LMQ_OK, "open: %s", lmq_last_error());
    if (s) return;
    T_CHECK(lmq_safetensors_count(st) == 4, "count %zu", lmq_safetensors_count(st));
    T_CHECK(lmq_safetensors_n_shards(st) == 1 && !strcmp(lmq_safetensors_shard_path(st, 0), path), "one shard");
    /* listed in data-offset order: a, b, c, e */
    const char *order[] = {"a", "b", "c", "e"};
    for (size_t i = 0; i < 4; i++) {
        const lmq_st_tensor *t = lmq_safetensors_tensor(st, i);
        T_CHECK(t && !strcmp(t->name, order[i]), "tensor %zu is %s", i, t ? t->name : "?");
    }
    const lmq_st_tensor *a = lmq_safetensors_find(st, "a"), *b = lmq_safetensors_find(st, "b"),
                        *c = lmq_safetensors_find(st, "c"), *e = lmq_safetensors_find(st, "e");
    T_CHECK(a && a->supported && a->type == LMQ_TYPE_F32 && a->n_dims == 2 && a->shape[0] == 2 && a->shape[1] == 3 &&
                a->nbytes == 24 && !strcmp(a->dtype, "F32"), "a");
    T_CHECK(b && b->supported && b->type == LMQ_TYPE_BF16 && b->n_dims == 1 && b->shape[0] == 4 && b->nbytes == 8, "b");
    T_CHECK(c && !c->supported && !strcmp(c->dtype, "I64") && c->nbytes == 8, "c listed as unsupported");
    T_CHECK(e && e->nbytes == 0 && e->type == LMQ_TYPE_F16, "empty tensor");
    T_CHECK(!lmq_safetensors_find(st, "__metadata__") && !lmq_safetensors_find(st, "zz"), "find misses");
    size_t hlen = n - 8 - 40;
    if (a && b && c) {
        T_CHECK(!memcmp(a->data, g_data, 24) && !memcmp(b->data, g_data + 24, 8) && !memcmp(c->data, g_data + 32, 8),
                "data views");
        const void *map;
        size_t msize;
        T_CHECK(lmq_safetensors_shard_data(st, 0, &map, &msize) == LMQ_OK && msize == n &&
                    (const uint8_t *)a->data == (const uint8_t *)map + 8 + hlen, "shard data");
    }
    uint64_t h = 0;
    T_CHECK(lmq_safetensors_shard_hash(st, 0, &h) == LMQ_OK && h == lmq_hash64(buf, n), "shard hash equals lmq_hash64");
    lmq_safetensors_release(st, a);
    T_CHECK(a && !memcmp(a->data, g_data, 24), "data still readable after release");
    lmq_safetensors_close(st);
    lmq_safetensors_close(NULL);
}

static void test_unaligned_and_gaps(void)
{
    uint8_t buf[512];
    /* header of 61 bytes: tensor data starts at an odd offset; a gap between tensors is allowed */
    const char *h = dq("{'x': {'dtype': 'F32', 'shape': [2], 'data_offsets': [4, 12]}}");
    size_t n = build(buf, sizeof buf, h, strlen(h), g_data, 12);
    size_t nt = 0;
    T_CHECK(lmq_safetensors_check_memory(buf, n, "odd", &nt) == LMQ_OK && nt == 1, "unaligned + gap: %s", lmq_last_error());
    /* header with only metadata: no tensors */
    n = build_json(buf, sizeof buf, "{'__metadata__': {}}", NULL, 0);
    T_CHECK(lmq_safetensors_check_memory(buf, n, "empty", &nt) == LMQ_OK && nt == 0, "no tensors");
    /* zero-size tensors at the same offset do not overlap */
    n = build_json(buf, sizeof buf,
                   "{'p': {'dtype': 'F32', 'shape': [0], 'data_offsets': [4, 4]},"
                   " 'q': {'dtype': 'F32', 'shape': [1], 'data_offsets': [0, 4]},"
                   " 'r': {'dtype': 'U8', 'shape': [0], 'data_offsets': [4, 4]}}", g_data, 4);
    T_CHECK(lmq_safetensors_check_memory(buf, n, "zeros", &nt) == LMQ_OK && nt == 3, "empty tensors: %s", lmq_last_error());
}

/* ---------------------------------------------------------------- bad files */

typedef struct bad_case {
    const char *what;
    const char *json; /* single-quoted */
    size_t dlen;
    lmq_status want;  /* 0: any error */
    const char *mention; /* a word the message must contain (besides the file name) */
} bad_case;

static const bad_case BAD[] = {
    {"lying end offset", "{'a': {'dtype': 'F32', 'shape': [4], 'data_offsets': [0, 16]}}", 12, LMQ_ERR_FORMAT, "'a'"},
    {"begin after end", "{'a': {'dtype': 'F32', 'shape': [0], 'data_offsets': [8, 4]}}", 12, LMQ_ERR_FORMAT, "'a'"},
    {"overlap", "{'a': {'dtype': 'F32', 'shape': [4], 'data_offsets': [0, 16]},"
                " 'b': {'dtype': 'F32', 'shape': [4], 'data_offsets': [12, 28]}}", 28, LMQ_ERR_FORMAT, "overlap"},
    {"size mismatch", "{'a': {'dtype': 'F32', 'shape': [2, 3], 'data_offsets': [0, 20]}}", 24, LMQ_ERR_FORMAT, "'a'"},
    {"bf16 size mismatch", "{'w': {'dtype': 'BF16', 'shape': [3], 'data_offsets': [0, 8]}}", 8, LMQ_ERR_FORMAT, "'w'"},
    {"bad json", "{'a': {'dtype': 'F32', 'shape': [1], ", 4, LMQ_ERR_FORMAT, "JSON"},
    {"not an object", "['a', 'b']", 0, LMQ_ERR_FORMAT, "object"},
    {"entry not an object", "{'a': 5}", 0, LMQ_ERR_FORMAT, "'a'"},
    {"unknown dtype", "{'a': {'dtype': 'Q9', 'shape': [1], 'data_offsets': [0, 1]}}", 1, LMQ_ERR_FORMAT, "Q9"},
    {"dtype not a string", "{'a': {'dtype': 4, 'shape': [1], 'data_offsets': [0, 4]}}", 4, LMQ_ERR_FORMAT, "dtype"},
    {"missing shape", "{'a': {'dtype': 'F32', 'data_offsets': [0, 4]}}", 4, LMQ_ERR_FORMAT, "shape"},
    {"negative dim", "{'a': {'dtype': 'F32', 'shape': [-1], 'data_offsets': [0, 4]}}", 4, LMQ_ERR_FORMAT, "'a'"},
    {"fractional dim", "{'a': {'dtype': 'F32', 'shape': [1.5], 'data_offsets': [0, 4]}}", 4, LMQ_ERR_FORMAT, "'a'"},
    {"string dim", "{'a': {'dtype': 'F32', 'shape': ['1'], 'data_offsets': [0, 4]}}", 4, LMQ_ERR_FORMAT, "'a'"},
    {"element count overflow", "{'a': {'dtype': 'F32', 'shape': [1099511627776, 1099511627776], 'data_offsets': [0, 4]}}",
     4, LMQ_ERR_FORMAT, "overflow"},
    {"byte size overflow", "{'a': {'dtype': 'F64', 'shape': [1099511627776, 16777216], 'data_offsets': [0, 4]}}", 4,
     LMQ_ERR_FORMAT, "overflow"},
    {"too many dims", "{'a': {'dtype': 'U8', 'shape': [1,1,1,1,1,1,1,1,1], 'data_offsets': [0, 1]}}", 1, LMQ_ERR_LIMIT,
     "dimensions"},
    {"three offsets", "{'a': {'dtype': 'U8', 'shape': [1], 'data_offsets': [0, 1, 2]}}", 2, LMQ_ERR_FORMAT, "'a'"},
    {"offsets as strings", "{'a': {'dtype': 'U8', 'shape': [1], 'data_offsets': ['0', '1']}}", 1, LMQ_ERR_FORMAT, "'a'"},
    {"offset beyond 2^53", "{'a': {'dtype': 'U8', 'shape': [0], 'data_offsets': [18446744073709551615, 18446744073709551615]}}",
     1, LMQ_ERR_FORMAT, "'a'"},
    {"duplicate name", "{'a': {'dtype': 'U8', 'shape': [1], 'data_offsets': [0, 1]},"
                       " 'a': {'dtype': 'U8', 'shape': [1], 'data_offsets': [1, 2]}}", 2, LMQ_ERR_FORMAT, "twice"},
    {"trailing garbage", "{} x", 0, LMQ_ERR_FORMAT, "trailing"},
    {"empty name", "{'': {'dtype': 'U8', 'shape': [1], 'data_offsets': [0, 1]}}", 1, LMQ_ERR_FORMAT, "name"},
    {"sub-byte dtype not filling bytes", "{'a': {'dtype': 'F4', 'shape': [3], 'data_offsets': [0, 2]}}", 2, LMQ_ERR_FORMAT,
     "'a'"},
};

static void expect_bad(const char *what, const uint8_t *buf, size_t n, lmq_status want, const char *mention)
{
    /* in memory */
    lmq_status s = lmq_safetensors_check_memory(buf, n, "crafted.safetensors", NULL);
    T_CHECK(s != LMQ_OK && (!want || s == want), "%s: status %d (%s)", what, s, lmq_last_error());
    T_CHECK(contains(lmq_last_error(), "crafted.safetensors"), "%s: message names the file: %s", what, lmq_last_error());
    if (mention) T_CHECK(contains(lmq_last_error(), mention), "%s: message mentions %s: %s", what, mention, lmq_last_error());
    /* through a file */
    const char *path = t_tmp("bad.safetensors");
    t_write_all(path, buf, n);
    lmq_safetensors *st = (lmq_safetensors *)1;
    s = lmq_safetensors_open(path, &st);
    T_CHECK(s != LMQ_OK && st == NULL, "%s: open fails (%d)", what, s);
    T_CHECK(contains(lmq_last_error(), path), "%s: open names the file: %s", what, lmq_last_error());
}

static void test_bad_files(void)
{
    uint8_t buf[4096];
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        size_t n = build_json(buf, sizeof buf, BAD[i].json, g_data, BAD[i].dlen);
        T_CHECK(n > 0, "build %s", BAD[i].what);
        expect_bad(BAD[i].what, buf, n, BAD[i].want, BAD[i].mention);
    }
    /* header length beyond the file */
    const char *h = dq("{}");
    size_t n = build(buf, sizeof buf, h, 2, NULL, 0);
    buf[0] = 200;
    expect_bad("header length beyond file", buf, n, LMQ_ERR_FORMAT, "header length");
    /* header length over the 100 MB bound, with the file long enough not to matter */
    memset(buf, 0, 8);
    buf[3] = 0x10; /* 256 MB */
    expect_bad("header length over limit", buf, n, LMQ_ERR_LIMIT, "limit");
    /* file shorter than the length field */
    expect_bad("7-byte file", (const uint8_t *)"\x02\0\0\0\0\0\0", 7, LMQ_ERR_FORMAT, "short");
    expect_bad("empty file", (const uint8_t *)"", 0, LMQ_ERR_FORMAT, "short");
    /* NUL byte inside the header */
    char hn[] = "{\"a\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0, 1]}}";
    hn[3] = 0;
    n = build(buf, sizeof buf, hn, sizeof hn - 1, g_data, 1);
    expect_bad("NUL in header", buf, n, LMQ_ERR_FORMAT, "NUL");
    /* header that does not start with '{' */
    h = " {}";
    n = build(buf, sizeof buf, h, 3, NULL, 0);
    expect_bad("leading space", buf, n, LMQ_ERR_FORMAT, "object");
}

/* Every truncation of a valid file (tensors filling the data region exactly) fails cleanly. */
static void test_truncation(void)
{
    uint8_t buf[1024];
    size_t n = build_json(buf, sizeof buf,
                          "{'a': {'dtype': 'F32', 'shape': [2, 2], 'data_offsets': [0, 16]},"
                          " 'b': {'dtype': 'BF16', 'shape': [3], 'data_offsets': [16, 22]}}", g_data, 22);
    T_CHECK(lmq_safetensors_check_memory(buf, n, "full", NULL) == LMQ_OK, "untruncated file is valid");
    int failed_cleanly = 0;
    for (size_t cut = 0; cut < n; cut++) {
        uint8_t *copy = malloc(cut ? cut : 1); /* exact size so ASan sees any overread */
        memcpy(copy, buf, cut);
        lmq_status s = lmq_safetensors_check_memory(copy, cut, "trunc.safetensors", NULL);
        if (s != LMQ_OK && contains(lmq_last_error(), "trunc.safetensors")) failed_cleanly++;
        else T_CHECK(false, "truncated at %zu: status %d (%s)", cut, s, lmq_last_error());
        free(copy);
    }
    T_CHECK(failed_cleanly == (int)n, "%d of %zu truncations failed with a message", failed_cleanly, n);
}

/* ---------------------------------------------------------------- sharded */

static void write_shard(const char *dir, const char *name, const char *json_sq, size_t dlen)
{
    uint8_t buf[2048];
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t n = build_json(buf, sizeof buf, json_sq, g_data, dlen);
    T_CHECK(n && t_write_all(path, buf, n) == 0, "write %s", path);
}

static void write_index(const char *dir, const char *json_sq)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    const char *j = dq(json_sq);
    T_CHECK(t_write_all(path, j, strlen(j)) == 0, "write %s", path);
}

static void test_sharded(void)
{
    const char *dir = t_tmp("sharded");
    mkdir(dir, 0755);
    write_shard(dir, "model-00001-of-00002.safetensors",
                "{'x': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 8]},"
                " 'y': {'dtype': 'BF16', 'shape': [2], 'data_offsets': [8, 12]}}", 12);
    write_shard(dir, "model-00002-of-00002.safetensors",
                "{'z': {'dtype': 'F16', 'shape': [1, 2], 'data_offsets': [0, 4]}}", 4);
    write_index(dir, "{'metadata': {'total_size': 16}, 'weight_map': {"
                     "'x': 'model-00001-of-00002.safetensors', 'z': 'model-00002-of-00002.safetensors',"
                     " 'y': 'model-00001-of-00002.safetensors'}}");
    lmq_safetensors *st = NULL;
    lmq_status s = lmq_safetensors_open(dir, &st);
    T_CHECK(s == LMQ_OK, "sharded open: %s", lmq_last_error());
    if (!s) {
        T_CHECK(lmq_safetensors_n_shards(st) == 2 && lmq_safetensors_count(st) == 3, "2 shards, 3 tensors");
        const lmq_st_tensor *z = lmq_safetensors_find(st, "z"), *y = lmq_safetensors_find(st, "y");
        T_CHECK(z && z->shard == 1 && contains(lmq_safetensors_shard_path(st, z->shard), "00002") &&
                    !memcmp(z->data, g_data, 4), "z in shard 2");
        T_CHECK(y && y->shard == 0 && !memcmp(y->data, g_data + 8, 4), "y in shard 1");
        lmq_safetensors_close(st);
    }
    /* the index file itself may be given */
    char ipath[4096];
    snprintf(ipath, sizeof ipath, "%s/model.safetensors.index.json", dir);
    s = lmq_safetensors_open(ipath, &st);
    T_CHECK(s == LMQ_OK && lmq_safetensors_count(st) == 3, "open via index path: %s", lmq_last_error());
    lmq_safetensors_close(st);

    /* a tensor listed in a shard that lacks it */
    write_index(dir, "{'weight_map': {'x': 'model-00001-of-00002.safetensors', 'w': 'model-00002-of-00002.safetensors'}}");
    s = lmq_safetensors_open(dir, &st);
    T_CHECK(s != LMQ_OK && contains(lmq_last_error(), "'w'") && contains(lmq_last_error(), "00002"),
            "missing listed tensor: %s", lmq_last_error());
    /* a tensor listed in the wrong shard */
    write_index(dir, "{'weight_map': {'x': 'model-00002-of-00002.safetensors', 'z': 'model-00002-of-00002.safetensors',"
                     " 'y': 'model-00001-of-00002.safetensors'}}");
    s = lmq_safetensors_open(dir, &st);
    T_CHECK(s != LMQ_OK && contains(lmq_last_error(), "'x'"), "wrong shard: %s", lmq_last_error());
    /* a missing shard file */
    write_index(dir, "{'weight_map': {'x': 'model-00001-of-00002.safetensors', 'q': 'model-00003-of-00003.safetensors'}}");
    s = lmq_safetensors_open(dir, &st);
    T_CHECK(s == LMQ_ERR_NOT_FOUND && contains(lmq_last_error(), "model-00003-of-00003.safetensors"),
            "missing shard: %s", lmq_last_error());
    /* shard names may not leave the directory */
    write_index(dir, "{'weight_map': {'x': '../model-00001-of-00002.safetensors'}}");
    s = lmq_safetensors_open(dir, &st);
    T_CHECK(s == LMQ_ERR_FORMAT && contains(lmq_last_error(), "index.json"), "path escape: %s", lmq_last_error());
    /* the same tensor in two shards */
    write_shard(dir, "model-00002-of-00002.safetensors",
                "{'z': {'dtype': 'F16', 'shape': [1, 2], 'data_offsets': [0, 4]},"
                " 'x': {'dtype': 'F32', 'shape': [1], 'data_offsets': [4, 8]}}", 8);
    write_index(dir, "{'weight_map': {'x': 'model-00001-of-00002.safetensors', 'z': 'model-00002-of-00002.safetensors'}}");
    s = lmq_safetensors_open(dir, &st);
    T_CHECK(s == LMQ_ERR_FORMAT && contains(lmq_last_error(), "twice"), "duplicate across shards: %s", lmq_last_error());
    /* bad index JSON */
    write_index(dir, "{'weight_map': ");
    s = lmq_safetensors_open(dir, &st);
    T_CHECK(s == LMQ_ERR_FORMAT && contains(lmq_last_error(), "index.json"), "bad index: %s", lmq_last_error());
    write_index(dir, "{'weight_map': {}}");
    s = lmq_safetensors_open(dir, &st);
    T_CHECK(s == LMQ_ERR_FORMAT && contains(lmq_last_error(), "weight_map"), "empty weight_map: %s", lmq_last_error());

    /* a directory with no model files; a path that does not exist */
    const char *empty = t_tmp("empty_dir");
    mkdir(empty, 0755);
    s = lmq_safetensors_open(empty, &st);
    T_CHECK(s == LMQ_ERR_NOT_FOUND && contains(lmq_last_error(), empty), "empty dir: %s", lmq_last_error());
    s = lmq_safetensors_open(t_tmp("nope"), &st);
    T_CHECK(s == LMQ_ERR_NOT_FOUND && contains(lmq_last_error(), "nope"), "missing path: %s", lmq_last_error());
}

/* ---------------------------------------------------------------- names */

static void test_tensor_names(void)
{
    static const char *const pairs[][2] = {
        {"model.embed_tokens.weight", "token_embd.weight"},
        {"model.norm.weight", "output_norm.weight"},
        {"lm_head.weight", "output.weight"},
        {"model.layers.0.input_layernorm.weight", "blk.0.attn_norm.weight"},
        {"model.layers.3.self_attn.q_proj.weight", "blk.3.attn_q.weight"},
        {"model.layers.12.self_attn.k_proj.weight", "blk.12.attn_k.weight"},
        {"model.layers.7.self_attn.v_proj.weight", "blk.7.attn_v.weight"},
        {"model.layers.7.self_attn.o_proj.weight", "blk.7.attn_output.weight"},
        {"model.layers.100.post_attention_layernorm.weight", "blk.100.ffn_norm.weight"},
        {"model.layers.1.mlp.gate_proj.weight", "blk.1.ffn_gate.weight"},
        {"model.layers.1.mlp.up_proj.weight", "blk.1.ffn_up.weight"},
        {"model.layers.1.mlp.down_proj.weight", "blk.1.ffn_down.weight"},
    };
    char out[64];
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        T_CHECK(lmq_hf_tensor_name(pairs[i][0], out, sizeof out) && !strcmp(out, pairs[i][1]), "%s -> %s (got %s)",
                pairs[i][0], pairs[i][1], out);
    static const char *const unused[] = {
        "model.layers.0.self_attn.rotary_emb.inv_freq", "model.layers.01.mlp.up_proj.weight",
        "model.layers.x.mlp.up_proj.weight", "model.layers..mlp.up_proj.weight", "model.layers.1.mlp.up_proj.bias",
        "model.layers.123456.mlp.up_proj.weight", "embed_tokens.weight", "", "model.layers.1.self_attn.q_proj.weightx",
    };
    for (size_t i = 0; i < sizeof unused / sizeof unused[0]; i++)
        T_CHECK(!lmq_hf_tensor_name(unused[i], out, sizeof out), "'%s' is not mapped", unused[i]);
    T_CHECK(!lmq_hf_tensor_name("model.layers.3.self_attn.q_proj.weight", out, 10), "too small a buffer");
}

/* ---------------------------------------------------------------- config */

static const char *LLAMA_CFG =
    "{'architectures': ['LlamaForCausalLM'], 'model_type': 'llama', 'hidden_act': 'silu', 'hidden_size': 256,"
    " 'intermediate_size': 768, 'num_hidden_layers': 8, 'num_attention_heads': 8, 'num_key_value_heads': 4,"
    " 'vocab_size': 4096, 'max_position_embeddings': 512, 'rms_norm_eps': 1e-05, 'rope_theta': 500000.0,"
    " 'rope_scaling': null, 'tie_word_embeddings': false, 'bos_token_id': 1, 'eos_token_id': 2 %s}";

static lmq_status parse_cfg(const char *extra_sq, lmq_meta **out)
{
    char json[4096];
    snprintf(json, sizeof json, LLAMA_CFG, extra_sq);
    const char *j = dq(json);
    *out = lmq_meta_new();
    return lmq_hf_config_parse(j, strlen(j), "cfg/config.json", "cfg", *out);
}

static uint64_t meta_u(const lmq_meta *m, const char *key)
{
    uint64_t v = 0;
    T_CHECK(lmq_meta_get_u64(m, key, &v) == LMQ_OK, "key %s", key);
    return v;
}

static double meta_f(const lmq_meta *m, const char *key)
{
    double v = 0;
    T_CHECK(lmq_meta_get_f64(m, key, &v) == LMQ_OK, "key %s", key);
    return v;
}

static void test_config(void)
{
    lmq_meta *m;
    lmq_status s = parse_cfg("", &m);
    T_CHECK(s == LMQ_OK, "llama config: %s", lmq_last_error());
    const char *str;
    T_CHECK(!lmq_meta_get_str(m, "general.architecture", &str, NULL) && !strcmp(str, "llama"), "architecture");
    T_CHECK(!lmq_meta_get_str(m, "general.name", &str, NULL) && !strcmp(str, "cfg"), "name");
    T_CHECK(meta_u(m, "llama.block_count") == 8 && meta_u(m, "llama.embedding_length") == 256 &&
                meta_u(m, "llama.feed_forward_length") == 768 && meta_u(m, "llama.attention.head_count") == 8 &&
                meta_u(m, "llama.attention.head_count_kv") == 4 && meta_u(m, "llama.attention.key_length") == 32 &&
                meta_u(m, "llama.attention.value_length") == 32 && meta_u(m, "llama.rope.dimension_count") == 32 &&
                meta_u(m, "llama.context_length") == 512 && meta_u(m, "llama.vocab_size") == 4096 &&
                meta_u(m, "tokenizer.ggml.bos_token_id") == 1 && meta_u(m, "tokenizer.ggml.eos_token_id") == 2,
            "llama hyper-parameters");
    T_CHECK(meta_f(m, "llama.rope.freq_base") == 500000.0 && meta_f(m, "llama.attention.layer_norm_rms_epsilon") == (double)1e-5f,
            "float keys (f32)");
    bool tied = true;
    T_CHECK(!lmq_meta_get_bool(m, "lmq.tie_word_embeddings", &tied) && !tied, "untied");
    T_CHECK(!lmq_meta_find(m, "llama.rope.scaling.type"), "no rope scaling");
    lmq_meta_free(m);

    /* llama3 rope scaling, tied embeddings, eos list, explicit head_dim */
    s = parse_cfg(", 'rope_scaling': {'rope_type': 'llama3', 'factor': 32.0, 'low_freq_factor': 1.0,"
                  " 'high_freq_factor': 4.0, 'original_max_position_embeddings': 8192},"
                  " 'tie_word_embeddings': true, 'eos_token_id': [3, 5, 7], 'head_dim': 64", &m);
    T_CHECK(s == LMQ_OK, "llama3 config: %s", lmq_last_error());
    T_CHECK(!lmq_meta_get_str(m, "llama.rope.scaling.type", &str, NULL) && !strcmp(str, "llama3") &&
                meta_f(m, "llama.rope.scaling.factor") == 32.0 && meta_f(m, "llama.rope.scaling.low_freq_factor") == 1.0 &&
                meta_f(m, "llama.rope.scaling.high_freq_factor") == 4.0 &&
                meta_u(m, "llama.rope.scaling.original_context_length") == 8192, "llama3 scaling keys");
    T_CHECK(!lmq_meta_get_bool(m, "lmq.tie_word_embeddings", &tied) && tied, "tied");
    T_CHECK(meta_u(m, "llama.attention.key_length") == 64 && meta_u(m, "tokenizer.ggml.eos_token_id") == 3, "head_dim, eos");
    lmq_vtype et;
    uint64_t ne;
    const void *d;
    T_CHECK(!lmq_meta_get_arr(m, "lmq.eos_token_ids", &et, &ne, &d) && et == LMQ_V_U32 && ne == 3 &&
                ((const uint32_t *)d)[2] == 7, "eos list");
    lmq_meta_free(m);

    s = parse_cfg(", 'rope_scaling': {'type': 'linear', 'factor': 4}", &m);
    T_CHECK(s == LMQ_OK && !lmq_meta_get_str(m, "llama.rope.scaling.type", &str, NULL) && !strcmp(str, "linear") &&
                meta_f(m, "llama.rope.scaling.factor") == 4.0, "linear scaling: %s", lmq_last_error());
    lmq_meta_free(m);

    /* Mistral: same graph; the sliding window caps the context */
    s = parse_cfg(", 'model_type': 'mistral', 'architectures': ['MistralForCausalLM'], 'sliding_window': 256", &m);
    T_CHECK(s == LMQ_OK && meta_u(m, "llama.context_length") == 256, "mistral window: %s", lmq_last_error());
    lmq_meta_free(m);
    s = parse_cfg(", 'model_type': 'mistral', 'sliding_window': null", &m);
    T_CHECK(s == LMQ_OK && meta_u(m, "llama.context_length") == 512, "mistral without window: %s", lmq_last_error());
    lmq_meta_free(m);

    /* refusals: one line naming config.json and the key or model type */
    static const struct {
        const char *extra, *mention;
        lmq_status want;
    } bad[] = {
        {", 'model_type': 'falcon'", "falcon", LMQ_ERR_UNSUPPORTED},
        {", 'model_type': 'gemma'", "gemma", LMQ_ERR_UNSUPPORTED},
        {", 'architectures': ['LlamaForSequenceClassification']", "LlamaForSequenceClassification", LMQ_ERR_UNSUPPORTED},
        {", 'hidden_act': 'gelu'", "hidden_act", LMQ_ERR_UNSUPPORTED},
        {", 'model_type': 'qwen3', 'attention_bias': true", "attention_bias", LMQ_ERR_UNSUPPORTED},
        {", 'model_type': 'gemma2'", "hidden_act", LMQ_ERR_UNSUPPORTED}, /* silu is not Gemma's GeGLU */
        {", 'model_type': 'phi3', 'rope_scaling': {'type': 'longrope', 'long_factor': [1], 'short_factor': [1]}",
         "original_max_position_embeddings", LMQ_ERR_FORMAT},
        {", 'mlp_bias': true", "mlp_bias", LMQ_ERR_UNSUPPORTED},
        {", 'rope_scaling': {'rope_type': 'yarn', 'factor': 4}", "yarn", LMQ_ERR_UNSUPPORTED},
        {", 'rope_scaling': {'rope_type': 'llama3', 'factor': 8}", "low_freq_factor", LMQ_ERR_FORMAT},
        {", 'hidden_size': null", "hidden_size", LMQ_ERR_FORMAT},
        {", 'num_hidden_layers': -3", "num_hidden_layers", LMQ_ERR_FORMAT},
        {", 'num_attention_heads': 2.5", "num_attention_heads", LMQ_ERR_FORMAT},
        {", 'num_key_value_heads': 3", "num_key_value_heads", LMQ_ERR_FORMAT},
        {", 'vocab_size': '4096'", "vocab_size", LMQ_ERR_FORMAT},
        {", 'head_dim': 33", "head_dim", LMQ_ERR_FORMAT},
        {", 'rms_norm_eps': 0", "rms_norm_eps", LMQ_ERR_FORMAT},
        {", 'bos_token_id': 4096", "bos_token_id", LMQ_ERR_FORMAT},
        {", 'eos_token_id': []", "eos_token_id", LMQ_ERR_FORMAT},
        {", 'tie_word_embeddings': 1", "tie_word_embeddings", LMQ_ERR_FORMAT},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s = parse_cfg(bad[i].extra, &m);
        T_CHECK(s == bad[i].want && contains(lmq_last_error(), "cfg/config.json") &&
                    contains(lmq_last_error(), bad[i].mention), "'%s': status %d, message %s", bad[i].extra, s,
                lmq_last_error());
        lmq_meta_free(m);
    }
    /* Gemma 3 multimodal checkpoints: the text model's config is text_config,
     * which lists only what differs from transformers' Gemma3TextConfig */
    {
        const char *mm = dq("{'architectures': ['Gemma3ForConditionalGeneration'], 'model_type': 'gemma3',"
                            " 'eos_token_id': [1, 106], 'text_config': {'model_type': 'gemma3_text', 'hidden_size': 2560,"
                            " 'intermediate_size': 10240, 'num_hidden_layers': 34,"
                            " 'rope_scaling': {'factor': 8.0, 'rope_type': 'linear'}, 'sliding_window': 1024}}");
        lmq_meta *g = lmq_meta_new();
        s = lmq_hf_config_parse(mm, strlen(mm), "g/config.json", NULL, g);
        double f = 0, sc = 0, base = 0;
        lmq_meta_get_f64(g, "gemma3.rope.scaling.factor", &f);
        lmq_meta_get_f64(g, "gemma3.attention.scale", &sc);
        lmq_meta_get_f64(g, "gemma3.rope.freq_base_swa", &base);
        lmq_vtype g_et = LMQ_V_U8;
        uint64_t nl = 0;
        const void *sw = NULL;
        lmq_meta_get_arr(g, "lmq.attention.sliding_window_layers", &g_et, &nl, &sw);
        const uint8_t *swl = sw;
        T_CHECK(s == LMQ_OK && meta_u(g, "gemma3.block_count") == 34 && meta_u(g, "gemma3.embedding_length") == 2560 &&
                    meta_u(g, "gemma3.attention.head_count") == 8 && meta_u(g, "gemma3.attention.head_count_kv") == 4 &&
                    meta_u(g, "gemma3.attention.key_length") == 256 && meta_u(g, "gemma3.vocab_size") == 262208 &&
                    meta_u(g, "gemma3.attention.sliding_window") == 1024 && f == 8.0 && fabs(sc - 1.0 / 16) < 1e-7 &&
                    base == 10000.0 && g_et == LMQ_V_BOOL && nl == 34 && swl && swl[0] && swl[4] && !swl[5] && swl[6] &&
                    !swl[11] && meta_u(g, "tokenizer.ggml.eos_token_id") == 1,
                "gemma3 text_config with defaults: %s", s ? lmq_last_error() : "values differ");
        lmq_meta_free(g);
        const lmq_arch *g3 = lmq_arch_by_name("gemma3");
        char out[128];
        T_CHECK(lmq_hf_tensor_name_arch(g3, "language_model.model.layers.0.self_attn.q_norm.weight", out, sizeof out) &&
                    !strcmp(out, "blk.0.attn_q_norm.weight"), "old multimodal prefix: %s", out);
        T_CHECK(lmq_hf_tensor_name_arch(g3, "model.language_model.layers.3.post_feedforward_layernorm.weight", out,
                                        sizeof out) && !strcmp(out, "blk.3.post_ffw_norm.weight"),
                "new multimodal prefix: %s", out);
        T_CHECK(!lmq_hf_tensor_name_arch(g3, "vision_tower.vision_model.embeddings.patch_embedding.weight", out,
                                         sizeof out), "the vision tower is not mapped");
        const lmq_arch *q2m = lmq_arch_by_name("qwen2moe");
        T_CHECK(lmq_hf_tensor_name_arch(q2m, "model.layers.2.mlp.shared_expert_gate.weight", out, sizeof out) &&
                    !strcmp(out, "blk.2.ffn_gate_inp_shexp.weight"), "qwen2moe shared expert gate: %s", out);
        T_CHECK(lmq_hf_tensor_name_arch(q2m, "model.layers.2.mlp.experts.17.down_proj.weight", out, sizeof out) &&
                    !strcmp(out, "blk.2.ffn_down_exps.weight"), "qwen2moe expert 17 -> stacked tensor: %s", out);
        const char *qm = dq("{'architectures': ['Qwen2MoeForCausalLM'], 'model_type': 'qwen2_moe', 'hidden_size': 256,"
                            " 'intermediate_size': 512, 'num_hidden_layers': 2, 'num_attention_heads': 8,"
                            " 'num_key_value_heads': 4, 'vocab_size': 4096, 'num_experts': 8, 'num_experts_per_tok': 2,"
                            " 'moe_intermediate_size': 64, 'shared_expert_intermediate_size': 128,"
                            " 'norm_topk_prob': false, 'hidden_act': 'silu'}");
        lmq_meta *g2 = lmq_meta_new();
        s = lmq_hf_config_parse(qm, strlen(qm), "q/config.json", NULL, g2);
        bool nrm = true;
        lmq_meta_get_bool(g2, "qwen2moe.expert_weights_norm", &nrm);
        T_CHECK(s == LMQ_OK && meta_u(g2, "qwen2moe.expert_count") == 8 && meta_u(g2, "qwen2moe.expert_used_count") == 2 &&
                    meta_u(g2, "qwen2moe.expert_feed_forward_length") == 64 &&
                    meta_u(g2, "qwen2moe.expert_shared_feed_forward_length") == 128 && !nrm,
                "qwen2_moe config: %s", s ? lmq_last_error() : "values differ");
        lmq_meta_free(g2);
        const lmq_arch *p3 = lmq_arch_by_name("phi3");
        T_CHECK(lmq_hf_tensor_name_arch(p3, "model.layers.1.mlp.gate_up_proj.weight", out, sizeof out) &&
                    !strcmp(out, "blk.1.ffn_up.weight"), "phi3 fused gate_up -> ffn_up: %s", out);
    }
    /* a required key missing altogether; no model_type at all; not JSON */
    const char *j = dq("{'model_type': 'llama', 'hidden_size': 64, 'num_hidden_layers': 2, 'num_attention_heads': 4,"
                       " 'vocab_size': 32}");
    m = lmq_meta_new();
    s = lmq_hf_config_parse(j, strlen(j), "x/config.json", NULL, m);
    T_CHECK(s == LMQ_ERR_FORMAT && contains(lmq_last_error(), "x/config.json") &&
                contains(lmq_last_error(), "intermediate_size"), "missing key: %s", lmq_last_error());
    j = dq("{'hidden_size': 64}");
    s = lmq_hf_config_parse(j, strlen(j), "x/config.json", NULL, m);
    T_CHECK(s == LMQ_ERR_FORMAT && contains(lmq_last_error(), "model_type"), "no model_type: %s", lmq_last_error());
    s = lmq_hf_config_parse("{\"a\": ", 6, "x/config.json", NULL, m);
    T_CHECK(s == LMQ_ERR_FORMAT && contains(lmq_last_error(), "JSON"), "not JSON: %s", lmq_last_error());
    lmq_meta_free(m);
    /* through the directory entry point: a missing config.json is named */
    m = lmq_meta_new();
    s = lmq_hf_config_to_meta(t_tmp("no_such_model"), m);
    T_CHECK(s == LMQ_ERR_NOT_FOUND && contains(lmq_last_error(), "no_such_model/config.json"), "no config: %s",
            lmq_last_error());
    lmq_meta_free(m);
}

int main(void)
{
    fill_data();
    test_valid_file();
    test_unaligned_and_gaps();
    test_bad_files();
    test_truncation();
    test_sharded();
    test_tensor_names();
    test_config();
    return t_finish();
}

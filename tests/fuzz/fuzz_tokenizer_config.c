/* libFuzzer target: tokenizer_config.json (special tokens, added_tokens_decoder,
 * add_bos/eos flags, chat templates as a string or a list of named ones) read
 * by lmq_hf_tokenizer_to_meta beside a fixed small tokenizer.json, and the
 * vocabulary built from whatever it accepts. The input is the file's bytes;
 * a NUL byte, if present, separates it from a config.json. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lmq_convert.h"
#include "lmq_runtime.h"

static const char TOKENIZER_JSON[] =
    "{\"version\":\"1.0\",\"added_tokens\":[{\"id\":7,\"content\":\"<|end|>\",\"special\":true},"
    "{\"id\":8,\"content\":\"<think>\",\"special\":false}],"
    "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,\"use_regex\":true},"
    "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2,\"\\u0120\":3,\"1\":4,"
    "\"\\u0120a\":5,\"11\":6},\"merges\":[\"a b\",\"\\u0120 a\",\"1 1\"]}}";

static char g_dir[256];

static void put(const char *name, const void *data, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return;
    if (len) fwrite(data, 1, len, f);
    fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_dir[0]) {
        snprintf(g_dir, sizeof g_dir, "%s/lmq-fuzz-tcfg.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        if (!mkdtemp(g_dir)) return 0;
        put("tokenizer.json", TOKENIZER_JSON, sizeof TOKENIZER_JSON - 1);
    }
    const uint8_t *nul = memchr(data, 0, size);
    size_t n1 = nul ? (size_t)(nul - data) : size;
    put("tokenizer_config.json", data, n1);
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", g_dir);
    if (nul) put("config.json", nul + 1, size - n1 - 1);
    else unlink(path);
    lmq_meta *m = lmq_meta_new();
    if (m && lmq_hf_tokenizer_to_meta(g_dir, m) == LMQ_OK) {
        lmq_vocab *v = NULL;
        if (lmq_vocab_load(m, &v) == LMQ_OK) {
            int32_t ids[64];
            size_t n = 0;
            lmq_tokenize(v, "ab a11<|end|><think>", 20, true, true, ids, 64, &n);
        }
        lmq_vocab_free(v);
    }
    lmq_meta_free(m);
    return 0;
}

/* libFuzzer target: chat template parse + render. The input is a template,
 * optionally followed by a NUL byte and the conversation's JSON (a list of
 * messages or an object with "messages" and "tools"). Limits are tight so
 * that slow inputs end quickly; every input must end in output or a clean
 * error, with no leak. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_runtime.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *src = (const char *)data;
    size_t tlen = size;
    const uint8_t *nul = memchr(data, 0, size);
    char *json = NULL;
    if (nul) {
        tlen = (size_t)(nul - data);
        size_t jlen = size - tlen - 1;
        json = malloc(jlen + 1);
        if (!json) return 0;
        memcpy(json, nul + 1, jlen);
        json[jlen] = 0;
    }
    lmq_chat_template *t = NULL;
    if (lmq_chat_template_parse(src, tlen, &t) == LMQ_OK) {
        lmq_chat_vars v;
        memset(&v, 0, sizeof v);
        v.messages_json = json ? json : "[{\"role\": \"system\", \"content\": \"s\"}, {\"role\": \"user\", \"content\": \"u\"}]";
        v.bos_token = "<s>";
        v.eos_token = "</s>";
        v.add_generation_prompt = true;
        v.now = 1722000000;
        v.max_steps = 200000;
        v.max_output = 1 << 20;
        v.max_memory = 64 << 20;
        v.max_depth = 32;
        lmq_chat_error err;
        v.error = &err;
        char *out = NULL;
        size_t len = 0;
        if (lmq_chat_render(t, &v, &out, &len) == LMQ_OK && len) {
            volatile char sink = out[len - 1];
            (void)sink;
        }
        free(out);
    }
    lmq_chat_template_free(t);
    free(json);
    return 0;
}

/* golden_chat_tools: the real templates of the tool-calling families (Qwen3,
 * Qwen2.5, Hermes 3, Llama 3.1/3.2, Mistral Nemo, Gemma 4) rendered for
 * conversations with tools, tool calls and tool results
 * (tests/data/chat-tools/cases.json) must equal, byte for byte, what
 * Hugging Face's apply_chat_template renders (expected/, written by
 * tests/make_tool_renders.py), or fail where it fails. Gemma 4's templates
 * are checked where a copy was put into ../shared (make_tool_renders.py says
 * from where); without it the run names them as not checked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "lmq_runtime.h"
#include "testutil.h"

static char *load_template(const char *source, size_t *len)
{
    char *text = t_read_all(t_shared(source), len);
    size_t n = strlen(source);
    if (!text || n < 5 || strcmp(source + n - 5, ".json")) return text;
    cJSON *j = cJSON_ParseWithLength(text, *len);
    free(text);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "chat_template");
    char *out = cJSON_IsString(t) ? strdup(t->valuestring) : NULL;
    *len = out ? strlen(out) : 0;
    cJSON_Delete(j);
    return out;
}

static int64_t noon_local(void)
{
    struct tm tmv = {0};
    tmv.tm_year = 2024 - 1900;
    tmv.tm_mon = 6;
    tmv.tm_mday = 26;
    tmv.tm_hour = 12;
    tmv.tm_isdst = -1;
    return (int64_t)mktime(&tmv);
}

int main(void)
{
    size_t n = 0;
    char *text = t_read_all(t_data("chat-tools/cases.json"), &n);
    if (!text) t_skip("tests/data/chat-tools/cases.json missing");
    cJSON *root = cJSON_ParseWithLength(text, n);
    T_CHECK(root != NULL, "cases.json parses");
    const cJSON *te, *cs;
    int n_txt = 0, n_err = 0, n_absent = 0;
    cJSON_ArrayForEach(te, cJSON_GetObjectItemCaseSensitive(root, "templates")) {
        const char *source = cJSON_GetObjectItemCaseSensitive(te, "source")->valuestring;
        /* a template ../shared does not carry (Gemma 4's, see
         * make_tool_renders.py) is named, not counted; the others must be there */
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(te, "optional")) && !t_exists(t_shared(source))) {
            printf("NOT CHECKED: %s (%s is not in ../shared)\n", te->string, source);
            n_absent++;
            continue;
        }
        t_require(t_shared(source));
        size_t slen = 0;
        char *src = load_template(source, &slen);
        lmq_chat_template *t = NULL;
        T_CHECK(src && lmq_chat_template_parse(src, slen, &t) == LMQ_OK, "%s: parse: %s", te->string, lmq_last_error());
        const cJSON *special = cJSON_GetObjectItemCaseSensitive(te, "special");
        cJSON_ArrayForEach(cs, cJSON_GetObjectItemCaseSensitive(root, "cases")) {
            if (!t) break;
            const char *cname = cJSON_GetObjectItemCaseSensitive(cs, "name")->valuestring;
            char rel[512];
            snprintf(rel, sizeof rel, "chat-tools/expected/%s/%s.txt", te->string, cname);
            size_t wl = 0, el = 0;
            char *want = t_exists(t_data(rel)) ? t_read_all(t_data(rel), &wl) : NULL;
            snprintf(rel, sizeof rel, "chat-tools/expected/%s/%s.error", te->string, cname);
            char *werr = t_exists(t_data(rel)) ? t_read_all(t_data(rel), &el) : NULL;
            T_CHECK(want || werr, "%s/%s: no expected file", te->string, cname);
            char *msgs = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(cs, "messages"));
            char *tools = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(cs, "tools"));
            lmq_chat_vars v;
            memset(&v, 0, sizeof v);
            lmq_chat_error err;
            memset(&err, 0, sizeof err);
            v.messages_json = msgs;
            v.tools_json = tools;
            v.add_generation_prompt = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cs, "add_generation_prompt"));
            const cJSON *bos = cJSON_GetObjectItemCaseSensitive(special, "bos_token");
            const cJSON *eos = cJSON_GetObjectItemCaseSensitive(special, "eos_token");
            v.bos_token = cJSON_IsString(bos) ? bos->valuestring : NULL;
            v.eos_token = cJSON_IsString(eos) ? eos->valuestring : NULL;
            v.now = noon_local();
            /* a case's extra template variables (enable_thinking, ...), as JSON values */
            lmq_chat_var extra[8];
            char *xval[8] = {0};
            const cJSON *kw;
            cJSON_ArrayForEach(kw, cJSON_GetObjectItemCaseSensitive(cs, "kwargs")) {
                if (v.n_extra == 8) break;
                xval[v.n_extra] = cJSON_PrintUnformatted(kw);
                extra[v.n_extra] = (lmq_chat_var){kw->string, xval[v.n_extra], true};
                v.n_extra++;
            }
            v.extra = extra;
            v.error = &err;
            char *out = NULL;
            size_t len = 0;
            lmq_status s = lmq_chat_render(t, &v, &out, &len);
            if (want) {
                n_txt++;
                T_CHECK(s == LMQ_OK, "%s/%s: render failed: %s", te->string, cname, lmq_last_error());
                size_t k = 0;
                while (s == LMQ_OK && k < len && k < wl && out[k] == want[k]) k++;
                T_CHECK(s == LMQ_OK && len == wl && k == len, "%s/%s: differs at byte %zu (%zu vs %zu bytes)", te->string,
                        cname, k, len, wl);
            } else if (werr) {
                n_err++;
                while (el && werr[el - 1] == '\n') werr[--el] = 0;
                T_CHECK(s != LMQ_OK, "%s/%s: rendered, HF failed with %s", te->string, cname, werr);
                const char *pre = "TemplateError: ";
                if (s != LMQ_OK && !strncmp(werr, pre, strlen(pre)))
                    T_CHECK(err.raised && !strcmp(err.message, werr + strlen(pre)), "%s/%s: raised '%s', want '%s'",
                            te->string, cname, err.message, werr);
            }
            for (size_t i = 0; i < v.n_extra; i++) free(xval[i]);
            free(out);
            free(msgs);
            free(tools);
            free(want);
            free(werr);
        }
        lmq_chat_template_free(t);
        free(src);
    }
    printf("%d tool-bearing renders byte-exact, %d failures as Hugging Face's; %d optional templates absent\n", n_txt,
           n_err, n_absent);
    T_CHECK(n_txt >= 14, "only %d renders checked", n_txt);
    cJSON_Delete(root);
    free(text);
    return t_finish();
}

/* golden_chat_templates: every real chat template in shared/chat-templates
 * rendered for every conversation of cases.json must equal, byte for byte,
 * what Hugging Face's apply_chat_template produced (expected/<t>/<case>.txt),
 * or fail where HF failed (.error; raise_exception messages must match). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "lmq_runtime.h"
#include "testutil.h"

static int64_t noon_local(int y, int m, int d)
{
    struct tm tmv = {0};
    tmv.tm_year = y - 1900;
    tmv.tm_mon = m - 1;
    tmv.tm_mday = d;
    tmv.tm_hour = 12;
    tmv.tm_isdst = -1;
    return (int64_t)mktime(&tmv);
}

static const struct { const char *tmpl, *family; } FAMILIES[] = {
    {"CohereForAI-c4ai-command-r-plus-tool_use", "command-r"},
    {"CohereForAI-c4ai-command-r7b-12-2024-tool_use", "command-r"},
    {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", "hermes"},
    {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "hermes"},
    {"Qwen-Qwen2.5-7B-Instruct", "chatml"},
    {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", "deepseek"},
    {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "deepseek"},
    {"google-gemma-2-2b-it", "gemma"},
    {"llama-cpp-deepseek-r1", "deepseek"},
    {"meetkai-functionary-medium-v3.1", "functionary"},
    {"meetkai-functionary-medium-v3.2", "functionary"},
    {"meta-llama-Llama-3.1-8B-Instruct", "llama3"},
    {"meta-llama-Llama-3.2-3B-Instruct", "llama3"},
    {"meta-llama-Llama-3.3-70B-Instruct", "llama3"},
    {"microsoft-Phi-3.5-mini-instruct", "phi3"},
    {"mistralai-Mistral-Nemo-Instruct-2407", "mistral"},
};

static void check_family(const char *tname, const char *src)
{
    char buf[96];
    for (size_t i = 0; i < sizeof FAMILIES / sizeof FAMILIES[0]; i++) {
        if (strcmp(FAMILIES[i].tmpl, tname)) continue;
        const char *got = lmq_chat_template_name_guess(src, buf, sizeof buf);
        T_CHECK(!strcmp(got, FAMILIES[i].family), "%s: family %s, want %s", tname, got, FAMILIES[i].family);
        return;
    }
    T_CHECK(0, "%s: no family listed", tname);
}

static void run_case(const char *tname, const lmq_chat_template *t, const cJSON *special,
                     const cJSON *cs, int *n_txt, int *n_err)
{
    const char *cname = cJSON_GetObjectItemCaseSensitive(cs, "name")->valuestring;
    char rel[512];
    snprintf(rel, sizeof rel, "chat-templates/expected/%s/%s.txt", tname, cname);
    char *want_txt = NULL, *want_err = NULL;
    size_t want_len = 0, elen = 0;
    if (t_exists(t_shared(rel))) want_txt = t_read_all(t_shared(rel), &want_len);
    snprintf(rel, sizeof rel, "chat-templates/expected/%s/%s.error", tname, cname);
    if (t_exists(t_shared(rel))) want_err = t_read_all(t_shared(rel), &elen);
    if (!want_txt && !want_err) return; /* the case does not apply to this template */

    lmq_chat_vars v;
    memset(&v, 0, sizeof v);
    char *msgs = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(cs, "messages"));
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(cs, "tools");
    char *tools_s = tools ? cJSON_PrintUnformatted(tools) : NULL;
    v.messages_json = msgs;
    v.tools_json = tools_s;
    v.add_generation_prompt = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cs, "add_generation_prompt"));
    const cJSON *bos = cJSON_GetObjectItemCaseSensitive(special, "bos_token");
    const cJSON *eos = cJSON_GetObjectItemCaseSensitive(special, "eos_token");
    v.bos_token = cJSON_IsString(bos) ? bos->valuestring : NULL;
    v.eos_token = cJSON_IsString(eos) ? eos->valuestring : NULL;
    v.now = noon_local(2024, 7, 26);
    lmq_chat_error err;
    v.error = &err;
    char *out = NULL;
    size_t len = 0;
    lmq_status s = lmq_chat_render(t, &v, &out, &len);
    if (want_txt) {
        (*n_txt)++;
        T_CHECK(s == LMQ_OK, "%s/%s: render failed: %s", tname, cname, lmq_last_error());
        if (s == LMQ_OK) {
            size_t k = 0;
            while (k < len && k < want_len && out[k] == want_txt[k]) k++;
            T_CHECK(len == want_len && k == len, "%s/%s: output differs at byte %zu (%zu vs %zu bytes)",
                    tname, cname, k, len, want_len);
        }
    } else {
        (*n_err)++;
        while (elen && (want_err[elen - 1] == '\n' || want_err[elen - 1] == '\r')) want_err[--elen] = 0;
        T_CHECK(s != LMQ_OK, "%s/%s: rendered but HF raised %s", tname, cname, want_err);
        const char *prefix = "TemplateError: ";
        if (s != LMQ_OK && !strncmp(want_err, prefix, strlen(prefix))) {
            /* raise_exception: the message must match exactly */
            T_CHECK(err.raised && !strcmp(err.message, want_err + strlen(prefix)),
                    "%s/%s: raised '%s', want '%s'", tname, cname, err.message, want_err);
        }
        if (s != LMQ_OK) T_CHECK(err.line > 0 && err.col > 0, "%s/%s: error without position", tname, cname);
    }
    free(out);
    free(msgs);
    free(tools_s);
    free(want_txt);
    free(want_err);
}

int main(void)
{
    const char *cases_path = t_shared("chat-templates/cases.json");
    t_require(cases_path);
    size_t n;
    char *text = t_read_all(cases_path, &n);
    cJSON *root = cJSON_ParseWithLength(text, n);
    T_CHECK(root != NULL, "cases.json parses");
    if (!root) { free(text); return t_finish(); }
    const cJSON *templates = cJSON_GetObjectItemCaseSensitive(root, "templates");
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases");
    int n_tmpl = 0, n_txt = 0, n_err = 0;
    const cJSON *te;
    cJSON_ArrayForEach(te, templates) {
        char rel[512];
        snprintf(rel, sizeof rel, "chat-templates/templates/%s.jinja", te->string);
        size_t slen;
        char *src = t_read_all(t_shared(rel), &slen);
        T_CHECK(src != NULL, "%s readable", rel);
        if (!src) continue;
        lmq_chat_template *t = NULL;
        lmq_status s = lmq_chat_template_parse(src, slen, &t);
        T_CHECK(s == LMQ_OK, "%s: parse: %s", te->string, lmq_last_error());
        check_family(te->string, src);
        if (s == LMQ_OK) {
            n_tmpl++;
            const cJSON *cs;
            cJSON_ArrayForEach(cs, cases)
                run_case(te->string, t, cJSON_GetObjectItemCaseSensitive(te, "special"), cs, &n_txt, &n_err);
        }
        lmq_chat_template_free(t);
        free(src);
    }
    printf("%d templates, %d renders compared byte for byte, %d expected failures\n", n_tmpl, n_txt, n_err);
    T_CHECK(n_tmpl == 16, "16 templates, got %d", n_tmpl);
    T_CHECK(n_txt + n_err == 91, "91 template x case pairs, got %d", n_txt + n_err);
    cJSON_Delete(root);
    free(text);
    return t_finish();
}

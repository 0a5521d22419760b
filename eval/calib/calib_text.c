/* Calibration text (lmq_calib.h): tokens, the evaluation-text refusal, and
 * which weights of a block read the same input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_calib.h"
#include "lmq_datasets.h"

lmq_status lmq_calib_check_text(const char *path, const char *text, size_t len)
{
    char hex[65];
    lmq_sha256_hex(text, len, hex);
    if (!strcmp(hex, LMQ_WIKITEXT2_TEST_SHA256))
        return lmq_error(LMQ_ERR_INVALID_ARG,
                         "%s is wikitext-2's test set (SHA-256 %.16s...), the evaluation text: calibrating on it makes "
                         "every KLD/PPL figure meaningless; calibrate on other text",
                         path ? path : "the calibration text", hex);
    return LMQ_OK;
}

lmq_status lmq_calib_tokens(const lmq_model *m, const char *path, int32_t **toks, size_t *n)
{
    *toks = NULL;
    *n = 0;
    const lmq_vocab *v = m ? lmq_model_vocab(m) : NULL;
    if (!v) return lmq_error(LMQ_ERR_UNSUPPORTED, "calibration: the model has no tokenizer");
    char *text = NULL;
    size_t len = 0;
    lmq_status st = lmq_read_file(path, (size_t)1 << 32, &text, &len);
    if (st) return st;
    st = lmq_calib_check_text(path, text, len);
    if (!st) st = lmq_tokenize_alloc(v, text, len, true, false, toks, n);
    free(text);
    return st;
}

/* Tensor kinds (the GGUF name after "blk.N.") that read one shared input. */
static const struct {
    const char *kind, *group;
} k_groups[] = {
    {"attn_q.weight", "attn_in"},         {"attn_k.weight", "attn_in"},     {"attn_v.weight", "attn_in"},
    {"attn_qkv.weight", "attn_in"},       {"attn_gate.weight", "attn_in"},  {"ssm_beta.weight", "attn_in"},
    {"ssm_alpha.weight", "attn_in"},      {"ffn_gate.weight", "ffn_in"},    {"ffn_up.weight", "ffn_in"},
    {"ffn_gate_inp.weight", "ffn_in"},    {"ffn_gate_shexp.weight", "ffn_in"}, {"ffn_up_shexp.weight", "ffn_in"},
    {"ffn_gate_exps.weight", "exps_in"},  {"ffn_up_exps.weight", "exps_in"},
};

bool lmq_calib_input_group(const char *tensor, char *key, size_t cap)
{
    if (!cap) return false;
    const char *kind = NULL;
    if (!strncmp(tensor, "blk.", 4)) {
        const char *p = tensor + 4;
        while (*p >= '0' && *p <= '9') p++;
        if (p > tensor + 4 && *p == '.') kind = p + 1;
    }
    for (size_t i = 0; kind && i < sizeof k_groups / sizeof k_groups[0]; i++)
        if (!strcmp(kind, k_groups[i].kind)) {
            snprintf(key, cap, "%.*s%s", (int)(kind - tensor), tensor, k_groups[i].group);
            return true;
        }
    snprintf(key, cap, "%s", tensor);
    return false;
}

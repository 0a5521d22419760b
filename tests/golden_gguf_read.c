/* Reads every GGUF file in ../shared (llama.cpp's own outputs): metadata,
 * tensor directory and data bounds, and the f32 reference model's tensors
 * against the Hugging Face source. */
#include <dirent.h>
#include <string.h>

#include "lmq_format.h"
#include "testutil.h"

static int check_dir(const char *rel, bool models)
{
    const char *dir = t_shared(rel);
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".gguf")) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        lmq_file *f;
        lmq_status s = lmq_file_open(path, &f);
        T_CHECK(s == LMQ_OK, "%s: %s", path, lmq_last_error());
        if (s) continue;
        n++;
        const lmq_meta *m = lmq_file_meta(f);
        const char *arch;
        T_CHECK(lmq_meta_get_str(m, "general.architecture", &arch, NULL) == LMQ_OK, "%s: architecture", path);
        uint64_t ntok;
        lmq_vtype et;
        T_CHECK(lmq_meta_get_arr(m, "tokenizer.ggml.tokens", &et, &ntok, NULL) == LMQ_OK && et == LMQ_V_STRING &&
                    ntok > 100, "%s: token list", path);
        T_CHECK(lmq_file_version(f) == 3 || lmq_file_version(f) == 2, "%s: version", path);
        if (models) {
            uint64_t blocks;
            T_CHECK(lmq_meta_get_u64(m, "llama.block_count", &blocks) == LMQ_OK, "%s: block_count", path);
            /* 9 tensors per layer + embeddings + output norm (+ output when untied) */
            size_t nt = lmq_file_n_tensors(f);
            T_CHECK(nt == blocks * 9 + 2 || nt == blocks * 9 + 3, "%s: %zu tensors for %llu blocks", path, nt,
                    (unsigned long long)blocks);
            for (size_t i = 0; i < nt; i++) {
                const lmq_tensor_info *t = lmq_file_tensor(f, i);
                T_CHECK(t->file_offset + t->nbytes <= lmq_file_size(f), "%s: %s in bounds", path, t->name);
            }
        } else {
            T_CHECK(lmq_file_n_tensors(f) == 0, "%s: vocab-only file", path);
        }
        lmq_file_close(f);
    }
    closedir(d);
    return n;
}

int main(void)
{
    t_require(t_shared("reference"));
    int n1 = check_dir("tokenizer-vectors", false);
    int n2 = check_dir("reference", true);
    T_CHECK(n1 >= 10, "vocab files read: %d", n1);
    T_CHECK(n2 >= 10, "model files read: %d", n2);
    /* tensor values: llama.cpp's f32 GGUF output_norm equals the HF weight */
    lmq_file *f;
    if (lmq_file_open(t_shared("reference/llama-8m-debtext-f32.gguf"), &f) == LMQ_OK) {
        const lmq_tensor_info *t = lmq_file_find_tensor(f, "token_embd.weight");
        T_CHECK(t && t->type == LMQ_TYPE_F32 && t->ne[0] == 256 && t->ne[1] == 4096, "token_embd shape");
        lmq_safetensors *st;
        if (t && lmq_safetensors_open(t_shared("models/llama-8m-debtext"), &st) == LMQ_OK) {
            const lmq_st_tensor *s = lmq_safetensors_find(st, "model.embed_tokens.weight");
            T_CHECK(s && s->nbytes == t->nbytes && !memcmp(s->data, t->data, t->nbytes), "embeddings identical");
            lmq_safetensors_close(st);
        } else {
            T_CHECK(0, "open %s: %s", "models/llama-8m-debtext", lmq_last_error());
        }
        lmq_file_close(f);
    } else {
        T_CHECK(0, "open %s: %s", "reference/llama-8m-debtext-f32.gguf", lmq_last_error());
    }
    return t_finish();
}

/* A chat loop on liblmq (docs/API.md): load a model, read one user message
 * per line from stdin, stream each reply as it is generated. The whole
 * transcript is the prompt of every turn; the generator re-evaluates only
 * what the KV cache does not hold yet.
 *
 *   cc chat.c $(pkg-config --cflags --libs lmq) -o chat
 *   ./chat model.lmq [max-tokens-per-reply] < questions.txt
 *
 * The transcript is plain "User: ...\nAssistant: ..." text (a model's own
 * chat template goes through lmq_chat_render, lmq_rt_chat.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lmq_runtime.h>

/* Streams one piece of the reply to stdout and keeps it for the transcript. */
typedef struct reply {
    char *text;
    size_t len;
} reply;

static bool on_text(void *user, const char *text, size_t len)
{
    reply *r = user;
    char *p = realloc(r->text, r->len + len + 1);
    if (!p) return false; /* stops the generation */
    memcpy(p + r->len, text, len);
    r->len += len;
    p[r->len] = 0;
    r->text = p;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return true;
}

/* Appends text to a malloc'd string (NULL on failure, the old one freed). */
static char *append(char *s, const char *a, const char *b)
{
    size_t n = s ? strlen(s) : 0, na = strlen(a), nb = strlen(b);
    char *p = realloc(s, n + na + nb + 1);
    if (!p) {
        free(s);
        return NULL;
    }
    memcpy(p + n, a, na);
    memcpy(p + n + na, b, nb + 1);
    return p;
}

static int fail(const char *what)
{
    fprintf(stderr, "chat: %s: %s\n", what, lmq_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL [MAX_TOKENS]\n", argv[0]);
        return 2;
    }
    lmq_model *model = NULL;
    if (lmq_model_load(argv[1], &model)) return fail(argv[1]);

    lmq_context_params cp = lmq_context_default_params();
    cp.n_ctx = 1024;
    lmq_context *ctx = NULL;
    lmq_sampler_params sp = lmq_sampler_default_params();
    sp.temperature = 0.7f;
    sp.seed = 42;
    lmq_sampler *smp = NULL;
    lmq_gen *gen = NULL;
    int rc = 1;
    if (lmq_context_new(model, &cp, &ctx)) {
        fail("context");
        goto out;
    }
    if (lmq_sampler_new(&sp, lmq_model_hparams(model)->n_vocab, &smp)) {
        fail("sampler");
        goto out;
    }
    if (lmq_gen_new(ctx, &gen)) {
        fail("generator");
        goto out;
    }

    lmq_gen_params gp = lmq_gen_default_params();
    gp.n_predict = argc > 2 ? atoi(argv[2]) : 128;
    gp.stops[0] = "\nUser:"; /* the model starting the next turn itself */
    gp.n_stops = 1;
    gp.sampler = smp;
    gp.on_text = on_text;

    char *transcript = NULL, line[4096];
    rc = 0;
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0]) continue;
        if (!(transcript = append(transcript, "User: ", line)) ||
            !(transcript = append(transcript, "\nAssistant:", ""))) {
            rc = 1;
            break;
        }
        reply r = {0};
        gp.user = &r;
        printf("> %s\n", line);
        lmq_gen_stats st;
        lmq_status s = lmq_generate_text(gen, transcript, strlen(transcript), &gp, &st);
        printf("\n");
        fprintf(stderr, "[prompt %d tokens, %d reused; %d generated, %.1f tok/s; stop %d]\n", st.n_prompt,
                st.n_reused, st.n_gen, st.t_gen > 0 ? st.n_gen / st.t_gen : 0.0, (int)st.stop);
        transcript = append(transcript, r.text ? r.text : "", "\n");
        free(r.text);
        if (s || !transcript) {
            rc = s ? fail("generate") : 1;
            break;
        }
    }
    free(transcript);
out:
    lmq_gen_free(gen);
    lmq_sampler_free(smp);
    lmq_context_free(ctx);
    lmq_model_free(model);
    return rc;
}

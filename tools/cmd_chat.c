/* lmq chat: a conversation rendered with the model's own chat template.
 * Each turn re-renders the whole conversation, tokenizes it, keeps the
 * longest prefix already in the KV cache and evaluates only the rest. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "sampling_opts.h"
#include "textgen.h"

static const char *USAGE =
    "lmq chat -m MODEL [--system TEXT] [--template FILE] [--reasoning] [--render]\n" GEN_OPTS_USAGE
    "\n  interactive on a terminal (/edit TEXT, /reset, /save FILE, /load FILE, /exit, Ctrl-D);"
    "\n  otherwise stdin is one user message and the reply is printed once;"
    "\n  --reasoning: also show the model's reasoning (harmony's analysis channel, <think> blocks,"
    "\n  Gemma 4's thought channel), marked \"Thinking:\"";

typedef struct msg {
    char *role, *content;
    char *thinking; /* a reply's reasoning (harmony's analysis channel, a <think> block), or NULL */
} msg;

typedef struct chat {
    lmq_model *m;
    const lmq_vocab *v;
    lmq_context *ctx;
    lmq_sampler *smp;
    lmq_gen *gen;            /* the token loop; it keeps the cached prefix across turns */
    lmq_chat_template *tmpl; /* NULL: plain fallback */
    bool harmony;            /* the template speaks harmony: replies are split into channels */
    bool think;              /* the model writes <think> / Gemma 4 thought blocks: split off */
    bool reasoning;          /* --reasoning: show the channels other than final, marked */
    msg *msgs;
    size_t n_msgs, cap_msgs;
    const char *bos, *eos;   /* special token texts for the template */
} chat;

static char *dup_n(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = 0;
    }
    return p;
}

static void free_msg(msg *m)
{
    free(m->role);
    free(m->content);
    free(m->thinking);
}

/* thinking: NULL or "" when the message has none */
static lmq_status add_msg(chat *c, const char *role, const char *content, const char *thinking)
{
    if (c->n_msgs == c->cap_msgs) {
        size_t cap = c->cap_msgs ? c->cap_msgs * 2 : 8;
        msg *m = realloc(c->msgs, cap * sizeof *m);
        if (!m) return lmq_error(LMQ_ERR_NOMEM, "chat history");
        c->msgs = m;
        c->cap_msgs = cap;
    }
    msg m = {strdup(role), strdup(content), thinking && thinking[0] ? strdup(thinking) : NULL};
    if (!m.role || !m.content || (thinking && thinking[0] && !m.thinking)) {
        free_msg(&m);
        return lmq_error(LMQ_ERR_NOMEM, "chat history");
    }
    c->msgs[c->n_msgs++] = m;
    return LMQ_OK;
}

static void clear_msgs(chat *c, bool keep_system)
{
    size_t keep = keep_system && c->n_msgs && !strcmp(c->msgs[0].role, "system") ? 1 : 0;
    for (size_t i = keep; i < c->n_msgs; i++) free_msg(&c->msgs[i]);
    c->n_msgs = keep;
}

static char *messages_json(const chat *c)
{
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; i < c->n_msgs; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "role", c->msgs[i].role);
        cJSON_AddStringToObject(o, "content", c->msgs[i].content);
        /* the harmony template renders `thinking` as the analysis channel */
        if (c->msgs[i].thinking) cJSON_AddStringToObject(o, "thinking", c->msgs[i].thinking);
        /* Qwen3's and Gemma 4's templates read it as reasoning_content */
        if (c->msgs[i].thinking && c->think)
            cJSON_AddStringToObject(o, "reasoning_content", c->msgs[i].thinking);
        cJSON_AddItemToArray(arr, o);
    }
    char *s = cJSON_PrintUnformatted(arr);
    cJSON_Delete(arr);
    return s;
}

/* The prompt for the conversation so far, ending where the assistant speaks. */
static lmq_status render(const chat *c, char **out)
{
    char *json = messages_json(c);
    if (!json) return lmq_error(LMQ_ERR_NOMEM, "messages");
    lmq_status s = textgen_render_chat(c->tmpl, json, c->bos, c->eos, out);
    free(json);
    return s;
}

/* ---- one reply: shown as it streams, recorded for the history --------
 * A plain reply is shown and kept whole. A harmony reply goes through the
 * splitter: the final channel is shown and becomes the message's content,
 * the analysis channel becomes its `thinking`; with --reasoning the other
 * channels are shown too, each after a label ("Thinking: ", "Commentary: "),
 * with a line "---" before the answer, dimmed on a terminal. Without it a
 * terminal shows a dim "Thinking..." while the model reasons. */
typedef struct reply {
    FILE *out;               /* NULL: nothing shown */
    bool reasoning, color;   /* color: out is a terminal that takes ANSI codes */
    textgen_buf final, thinking;
    bool oom;
    bool dim;                /* a dimmed part is open on out */
    bool hint;               /* "Thinking..." is on screen */
    bool other_shown;        /* a non-final message was shown since the last answer text */
    bool printed;            /* anything was written to out */
    char last;               /* the last byte written to out */
    char tool[96];           /* recipient of a tool call, if any */
} reply;

static void show(reply *r, const char *s, size_t n)
{
    if (!r->out || !n) return;
    fwrite(s, 1, n, r->out);
    r->printed = true;
    r->last = s[n - 1];
}

static void show_str(reply *r, const char *s) { show(r, s, strlen(s)); }

static void undim(reply *r)
{
    if (r->dim && r->out) fputs("\033[0m", r->out);
    r->dim = false;
}

static void unhint(reply *r)
{
    if (r->hint && r->out) fputs("\r\033[K", r->out);
    r->hint = false;
}

static void keep(reply *r, textgen_buf *b, const char *s, size_t n)
{
    if (!textgen_buf_add(b, s, n)) r->oom = true;
}

static void on_harmony(void *user, const lmq_harmony_event *e)
{
    reply *r = user;
    const lmq_harmony_header *m = e->msg;
    bool final = m->channel == LMQ_HARMONY_FINAL, analysis = m->channel == LMQ_HARMONY_ANALYSIS;
    switch (e->kind) {
    case LMQ_HARMONY_BEGIN:
        undim(r);
        if (m->recipient[0]) snprintf(r->tool, sizeof r->tool, "%s", m->recipient);
        if (analysis && r->thinking.len) keep(r, &r->thinking, "\n", 1); /* several analysis messages */
        if (final) {
            unhint(r);
            if (r->other_shown) {
                if (r->last != '\n') show_str(r, "\n");
                show_str(r, "---\n");
            }
            r->other_shown = false;
        } else if (r->reasoning) {
            if (r->printed && r->last != '\n') show_str(r, "\n");
            if (r->color && r->out) fputs("\033[2m", r->out), r->dim = true;
            char label[160];
            if (analysis) snprintf(label, sizeof label, "Thinking: ");
            else if (m->channel == LMQ_HARMONY_COMMENTARY)
                snprintf(label, sizeof label, "Commentary%s%s: ", m->recipient[0] ? " to " : "", m->recipient);
            else snprintf(label, sizeof label, "[%s]: ", m->channel_name);
            show_str(r, label);
            r->other_shown = true;
        } else if (analysis && r->color && !r->hint && r->out) {
            fputs("\033[2mThinking...\033[0m", r->out);
            fflush(r->out);
            r->hint = true;
        }
        break;
    case LMQ_HARMONY_TEXT:
        if (final) keep(r, &r->final, e->text, e->len);
        else if (analysis) keep(r, &r->thinking, e->text, e->len);
        if (final || r->reasoning) show(r, e->text, e->len);
        break;
    case LMQ_HARMONY_END:
        undim(r);
        break;
    default: break;
    }
    if (r->out) fflush(r->out);
}

/* The <think> splitter's parts: reasoning is kept as the message's
 * thinking and shown (dimmed, after "Thinking: ") with --reasoning, else
 * hinted on a terminal; the answer is shown after a "---" line. */
static void on_think(void *user, bool reasoning, const char *s, size_t n)
{
    reply *r = user;
    if (reasoning) {
        keep(r, &r->thinking, s, n);
        if (r->reasoning) {
            if (!r->other_shown) {
                if (r->color && r->out) fputs("\033[2m", r->out), r->dim = true;
                show_str(r, "Thinking: ");
                r->other_shown = true;
            }
            show(r, s, n);
        } else if (r->color && !r->hint && r->out) {
            fputs("\033[2mThinking...\033[0m", r->out);
            r->hint = true;
        }
    } else {
        undim(r);
        unhint(r);
        if (r->other_shown) {
            if (r->last != '\n') show_str(r, "\n");
            show_str(r, "---\n");
            r->other_shown = false;
        }
        keep(r, &r->final, s, n);
        show(r, s, n);
    }
    if (r->out) fflush(r->out);
}

/* Takes one piece of generated text (through the splitter hs or th, if any). */
static lmq_status reply_add(lmq_harmony *hs, lmq_think *th, reply *r, const char *p, size_t n)
{
    if (!n) return LMQ_OK;
    if (hs) {
        lmq_status s = lmq_harmony_push(hs, p, n);
        if (s) return s;
    } else if (th) {
        lmq_status s = lmq_think_push(th, p, n);
        if (s) return s;
    } else {
        show(r, p, n);
        keep(r, &r->final, p, n);
        if (r->out) fflush(r->out);
    }
    return r->oom ? lmq_error(LMQ_ERR_NOMEM, "chat reply") : LMQ_OK;
}

/* Strips the spaces and newlines around s, in place. */
static char *trim(char *s)
{
    if (!s) return NULL;
    while (*s == ' ' || *s == '\n') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n')) s[--n] = 0;
    return s;
}

/* The generator's text callback: one piece into the reply. */
typedef struct turn_sink {
    lmq_harmony *hs;
    lmq_think *th;
    reply *r;
    lmq_status s;
} turn_sink;

static bool on_text(void *user, const char *p, size_t n)
{
    turn_sink *t = user;
    t->s = reply_add(t->hs, t->th, t->r, p, n);
    return !t->s; /* a splitter failure (an endless header) ends the turn */
}

/* One assistant turn: render the whole conversation and generate; the
 * generator evaluates only what differs from the cached prefix. */
static lmq_status turn(chat *c, gen_opts *g, FILE *out)
{
    char *prompt = NULL;
    lmq_status s = render(c, &prompt);
    if (s) return s;
    int32_t *toks = NULL;
    size_t n = 0;
    /* a prompt that ends inside <think> (Qwen3.5): the reply starts as reasoning */
    const bool think_open = c->think && lmq_think_prompt_open(prompt, strlen(prompt));
    s = textgen_tokenize(c->v, prompt, strlen(prompt), true, true, &toks, &n);
    free(prompt);
    if (s) return s;
    lmq_gen_params p = textgen_params(&g->tg);
    p.unparse_special = c->harmony; /* the splitter reads <|channel|>, <|end|>, ... */
    p.sampler = c->smp;
    const char *term = getenv("TERM");
    reply r = {.out = out, .reasoning = c->reasoning, .last = '\n'};
    r.color = out && isatty(fileno(out)) && !getenv("NO_COLOR") && !(term && !strcmp(term, "dumb"));
    turn_sink sink = {.r = &r};
    if ((c->harmony && (s = lmq_harmony_new(on_harmony, &r, &sink.hs))) ||
        (c->think && (s = lmq_think_new(think_open, on_think, &r, &sink.th)))) {
        free(toks);
        return s;
    }
    p.on_text = on_text;
    p.user = &sink;
    lmq_gen_stats st;
    s = lmq_generate(c->gen, toks, n, &p, &st);
    free(toks);
    if (!s) s = sink.s;
    if (!s && sink.hs) s = lmq_harmony_finish(sink.hs);
    if (!s && sink.th) s = lmq_think_finish(sink.th);
    lmq_harmony_free(sink.hs);
    lmq_think_free(sink.th);
    undim(&r);
    unhint(&r);
    if (s) {
        if (out && r.printed) fputc('\n', out);
        free(r.final.p);
        free(r.thinking.p);
        return s;
    }
    if (out) fputc('\n', out);
    if (st.stop == LMQ_GEN_STOP_CONTEXT)
        fprintf(stderr, "lmq chat: context full (%d tokens); use /reset or a larger -c\n", lmq_context_n_ctx(c->ctx));
    /* trim whitespace around the reply as chat front-ends do */
    char empty[1] = "";
    char *content = trim(r.final.p ? r.final.p : empty);
    char *thinking = trim(r.thinking.p);
    if (c->harmony && r.tool[0])
        fprintf(stderr, "lmq chat: the model called the tool '%s'; lmq chat runs no tools\n", r.tool);
    else if (c->harmony && !content[0] && st.stop == LMQ_GEN_STOP_LENGTH)
        fprintf(stderr, "lmq chat: the reply ended before its final answer (-n %d reached); use a larger -n%s\n",
                p.n_predict, c->reasoning ? "" : " (--reasoning shows the reasoning)");
    s = add_msg(c, "assistant", content, thinking);
    free(r.final.p);
    free(r.thinking.p);
    return s;
}

static lmq_status save_chat(const chat *c, const char *path)
{
    char *json = messages_json(c);
    if (!json) return lmq_error(LMQ_ERR_NOMEM, "messages");
    lmq_status s = lmq_write_file_atomic(path, json, strlen(json));
    free(json);
    return s;
}

static lmq_status load_chat(chat *c, const char *path)
{
    char *text;
    size_t len;
    lmq_status s = lmq_read_file(path, 64u << 20, &text, &len);
    if (s) return s;
    cJSON *arr = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cJSON_IsArray(arr)) {
        cJSON_Delete(arr);
        return lmq_error(LMQ_ERR_FORMAT, "%s: expected a JSON list of {role, content[, thinking]} messages", path);
    }
    cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        cJSON *role = cJSON_GetObjectItem(it, "role"), *content = cJSON_GetObjectItem(it, "content");
        cJSON *thinking = cJSON_GetObjectItem(it, "thinking");
        if (!cJSON_IsString(role) || !cJSON_IsString(content) || (thinking && !cJSON_IsString(thinking))) {
            cJSON_Delete(arr);
            return lmq_error(LMQ_ERR_FORMAT, "%s: a message lacks a string role or content (or has a non-string thinking)", path);
        }
    }
    clear_msgs(c, false);
    cJSON_ArrayForEach(it, arr) {
        const cJSON *thinking = cJSON_GetObjectItem(it, "thinking");
        if (!s) s = add_msg(c, cJSON_GetObjectItem(it, "role")->valuestring, cJSON_GetObjectItem(it, "content")->valuestring,
                            thinking ? thinking->valuestring : NULL);
    }
    cJSON_Delete(arr);
    return s; /* the next turn's prefix match re-evaluates what differs */
}

static char *read_all_stdin(size_t *len)
{
    size_t cap = 4096, n = 0;
    char *p = malloc(cap);
    while (p) {
        size_t r = fread(p + n, 1, cap - n - 1, stdin);
        n += r;
        if (r == 0) break;
        if (cap - n < 2) {
            char *q = realloc(p, cap * 2);
            if (!q) {
                free(p);
                return NULL;
            }
            p = q;
            cap *= 2;
        }
    }
    if (p) p[n] = 0;
    *len = n;
    return p;
}

static void chomp(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r')) s[--n] = 0;
}

static int interactive(chat *c, gen_opts *g)
{
    char *line = NULL;
    size_t cap = 0;
    fprintf(stderr, "lmq chat: /edit TEXT (replace your last message), /reset, /save FILE, /load FILE, /exit; "
                    "Ctrl-D ends\n");
    for (;;) {
        printf("> ");
        fflush(stdout);
        ssize_t got = getline(&line, &cap, stdin);
        if (got < 0) {
            printf("\n");
            break;
        }
        chomp(line);
        if (!line[0]) continue;
        lmq_status s = LMQ_OK;
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
        if (!strcmp(line, "/reset")) {
            clear_msgs(c, true);
            lmq_gen_reset(c->gen);
            printf("(conversation cleared)\n");
            continue;
        }
        if (!strncmp(line, "/save ", 6)) {
            s = save_chat(c, line + 6);
            if (!s) printf("(saved %zu messages to %s)\n", c->n_msgs, line + 6);
        } else if (!strncmp(line, "/load ", 6)) {
            s = load_chat(c, line + 6);
            if (!s) printf("(loaded %zu messages from %s)\n", c->n_msgs, line + 6);
        } else if (!strncmp(line, "/edit ", 6)) {
            /* replace the last user message (and what followed it) and answer
             * again: the cache keeps the prefix before it (a recurrent model
             * resumes from its last state snapshot at or before that point) */
            size_t k = c->n_msgs;
            while (k > 0 && strcmp(c->msgs[k - 1].role, "user")) k--;
            if (!k) {
                fprintf(stderr, "lmq chat: /edit: there is no message of yours to edit\n");
                continue;
            }
            for (size_t i = k - 1; i < c->n_msgs; i++) free_msg(&c->msgs[i]);
            c->n_msgs = k - 1;
            if (!(s = add_msg(c, "user", line + 6, NULL)) && (s = turn(c, g, stdout)))
                free_msg(&c->msgs[--c->n_msgs]);
        } else if (line[0] == '/') {
            fprintf(stderr, "lmq chat: unknown command '%s' (/edit TEXT, /reset, /save FILE, /load FILE, /exit)\n",
                    line);
            continue;
        } else {
            if (!(s = add_msg(c, "user", line, NULL)) && (s = turn(c, g, stdout)))
                free_msg(&c->msgs[--c->n_msgs]); /* drop the user message that failed */
        }
        if (s) fprintf(stderr, "lmq chat: %s\n", lmq_last_error());
    }
    free(line);
    return LMQ_EXIT_OK;
}

int lmq_cmd_chat(int argc, char **argv)
{
    const char *model = NULL, *system = NULL, *tmpl_path = NULL;
    bool render_only = false, reasoning = false;
    gen_opts g;
    gen_opts_init(&g);
    g.tg.n_predict = 512;
    static const struct option opts[] = {{"model", required_argument, 0, 'm'}, {"system", required_argument, 0, 600},
                                         {"template", required_argument, 0, 601}, {"render", no_argument, 0, 602},
                                         {"reasoning", no_argument, 0, 603},
                                         {"help", no_argument, 0, 'h'}, GEN_LONG_OPTIONS, {0, 0, 0, 0}};
    opterr = 0;
    int o;
    while ((o = getopt_long(argc, argv, "m:n:c:t:h", opts, NULL)) != -1) {
        int r = gen_opts_parse(&g, o, optarg, "chat", USAGE);
        if (r < 0) return LMQ_EXIT_USAGE;
        if (r > 0) continue;
        switch (o) {
        case 'm': model = optarg; break;
        case 600: system = optarg; break;
        case 601: tmpl_path = optarg; break;
        case 602: render_only = true; break;
        case 603: reasoning = true; break;
        case 'h': printf("usage: %s\n", USAGE); return LMQ_EXIT_OK;
        default: return cli_usage_error("chat", USAGE, "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error("chat", USAGE, "unexpected argument '%s'", argv[optind]);
    if (!model) return cli_usage_error("chat", USAGE, "-m MODEL is required");

    chat c;
    memset(&c, 0, sizeof c);
    int rc = LMQ_EXIT_FAIL;
    char *tmpl_src = NULL, *input = NULL;
    lmq_status s = cli_model_load(model, &c.m);
    if (s) goto fail;
    c.v = lmq_model_vocab(c.m);
    if (!c.v) {
        s = lmq_error(LMQ_ERR_NOT_FOUND, "%s: the model has no tokenizer", model);
        goto fail;
    }
    size_t tl;
    const char *src = lmq_model_chat_template(c.m);
    if (tmpl_path) {
        if ((s = lmq_read_file(tmpl_path, LMQ_CHAT_MAX_TEMPLATE, &tmpl_src, &tl))) goto fail;
        src = tmpl_src;
    }
    if (src) {
        if ((s = lmq_chat_template_parse(src, strlen(src), &c.tmpl))) goto fail;
        c.harmony = lmq_harmony_is_template(src, strlen(src));
        c.think = !c.harmony && lmq_think_is_template(src, strlen(src));
    } else {
        fprintf(stderr, "lmq chat: %s has no chat template; using the plain \"User:/Assistant:\" format\n", model);
    }
    c.reasoning = reasoning;
    if (reasoning && !c.harmony && !c.think && !render_only)
        fprintf(stderr, "lmq chat: --reasoning has no effect: the chat template has no harmony channels or thought blocks "
                        "(the whole reply is shown)\n");
    size_t bl = 0, el = 0;
    const char *bos = lmq_vocab_bos(c.v) >= 0 ? lmq_vocab_token_text(c.v, lmq_vocab_bos(c.v), &bl) : NULL;
    const char *eos = lmq_vocab_eos(c.v) >= 0 ? lmq_vocab_token_text(c.v, lmq_vocab_eos(c.v), &el) : NULL;
    char *bos_s = bos ? dup_n(bos, bl) : NULL, *eos_s = eos ? dup_n(eos, el) : NULL;
    c.bos = bos_s;
    c.eos = eos_s;
    if (system && (s = add_msg(&c, "system", system, NULL))) goto fail_tokens;
    bool tty = isatty(0);
    if (render_only || !tty) {
        size_t len;
        input = read_all_stdin(&len);
        if (!input) {
            s = lmq_error(LMQ_ERR_IO, "cannot read standard input");
            goto fail_tokens;
        }
        chomp(input);
        if (input[0] && (s = add_msg(&c, "user", input, NULL))) goto fail_tokens;
        if (render_only) {
            char *prompt;
            if ((s = render(&c, &prompt))) goto fail_tokens;
            fputs(prompt, stdout);
            free(prompt);
            rc = LMQ_EXIT_OK;
            goto out_tokens;
        }
        if (!input[0]) {
            s = lmq_error(LMQ_ERR_INVALID_ARG, "no user message on standard input");
            goto fail_tokens;
        }
    }
    if ((s = lmq_context_new(c.m, &g.cp, &c.ctx))) goto fail_tokens;
    if ((s = lmq_sampler_new(&g.sp, lmq_model_hparams(c.m)->n_vocab, &c.smp))) goto fail_tokens;
    if ((s = lmq_gen_new(c.ctx, &c.gen))) goto fail_tokens;
    if (tty && !render_only) {
        rc = interactive(&c, &g);
        goto out_tokens;
    }
    if ((s = turn(&c, &g, stdout))) goto fail_tokens;
    rc = LMQ_EXIT_OK;
    goto out_tokens;
fail_tokens:
    cli_fail("chat", s);
out_tokens:
    free(bos_s);
    free(eos_s);
    goto out;
fail:
    cli_fail("chat", s);
out:
    clear_msgs(&c, false);
    free(c.msgs);
    free(input);
    free(tmpl_src);
    lmq_chat_template_free(c.tmpl);
    lmq_gen_free(c.gen);
    lmq_sampler_free(c.smp);
    lmq_context_free(c.ctx);
    lmq_model_free(c.m);
    return rc;
}

/* harmony.c — streaming splitter of OpenAI's harmony format, the output of
 * gpt-oss models (docs/CHAT.md "Harmony"; SPEC 2.7 of the gpt-oss notes).
 *
 * Two layers. The lexer turns the byte stream into plain text runs and
 * markers (<|start|>, <|channel|>, ...), holding back at most
 * MAX_MARKER - 1 bytes that may still become a marker, so the sequence it
 * produces does not depend on where the input was cut. The parser is a
 * state machine over that sequence: BETWEEN messages, inside a HEADER, in a
 * message's CONTENT, DONE, FAILED. Everything lives in one fixed-size
 * object: the held bytes, the header (capped) and the parsed header's
 * fields. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_rt_chat.h"

enum marker { MK_START, MK_CHANNEL, MK_MESSAGE, MK_END, MK_RETURN, MK_CALL, MK_CONSTRAIN, MK_COUNT };

static const struct {
    const char *text;
    size_t len;
} MARKERS[MK_COUNT] = {
    [MK_START] = {"<|start|>", 9},   [MK_CHANNEL] = {"<|channel|>", 11}, [MK_MESSAGE] = {"<|message|>", 11},
    [MK_END] = {"<|end|>", 7},       [MK_RETURN] = {"<|return|>", 10},   [MK_CALL] = {"<|call|>", 8},
    [MK_CONSTRAIN] = {"<|constrain|>", 13},
};
#define MAX_MARKER 13

enum state { ST_BETWEEN, ST_HEADER, ST_CONTENT, ST_DONE, ST_FAILED };

struct lmq_harmony {
    lmq_harmony_fn fn;
    void *user;
    enum state state;
    char hold[MAX_MARKER];               /* bytes that may begin a marker (always starts with '<') */
    size_t n_hold;
    /* ST_BETWEEN: a pending prefix of "to=" (a header without role: the
     * first message after the prompt's `<|start|>assistant`);
     * ST_HEADER: the header so far, markers as their text */
    char hdr[LMQ_HARMONY_MAX_HEADER];
    size_t n_hdr;
    uint64_t hdr_at;                     /* byte offset of the header's start */
    uint64_t at;                         /* bytes of input consumed by the lexer */
    /* role, channel, recipient, content type: NUL-terminated substrings of
     * hdr, each word at most once, plus fields[0] = "" */
    char fields[LMQ_HARMONY_MAX_HEADER + 8];
    lmq_harmony_header msg;
    lmq_status err;                      /* ST_FAILED: the status and its line */
    char err_msg[160];
};

/* ======================================================================
 * Events
 * ====================================================================== */

static void emit_begin(lmq_harmony *h)
{
    lmq_harmony_event e = {.kind = LMQ_HARMONY_BEGIN, .msg = &h->msg};
    h->fn(h->user, &e);
}

static void emit_text(lmq_harmony *h, const char *s, size_t n)
{
    if (!n) return;
    lmq_harmony_event e = {.kind = LMQ_HARMONY_TEXT, .msg = &h->msg, .text = s, .len = n};
    h->fn(h->user, &e);
}

static void emit_end(lmq_harmony *h, lmq_harmony_term t)
{
    lmq_harmony_event e = {.kind = LMQ_HARMONY_END, .msg = &h->msg, .term = t};
    h->fn(h->user, &e);
}

/* A message without a header (or without <|channel|>): the model answers. */
static void begin_implied(lmq_harmony *h)
{
    h->fields[0] = 0;
    h->msg = (lmq_harmony_header){.channel = LMQ_HARMONY_FINAL, .implied = true, .role = h->fields,
                                  .channel_name = h->fields, .recipient = h->fields, .content_type = h->fields};
    h->state = ST_CONTENT;
    emit_begin(h);
}

/* ======================================================================
 * Header parsing
 * ====================================================================== */

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static bool at_marker(const char *s, size_t n, enum marker m)
{
    return n >= MARKERS[m].len && !memcmp(s, MARKERS[m].text, MARKERS[m].len);
}

/* Parses h->hdr into h->msg. Words are separated by whitespace and by the
 * <|channel|> / <|constrain|> markers: `to=X` is the recipient wherever it
 * stands, the word after <|channel|> the channel, the word after
 * <|constrain|> (or a further word after the channel) the content type, a
 * word before any channel the role. */
static void parse_header(lmq_harmony *h)
{
    const char *s = h->hdr;
    size_t n = h->n_hdr, i = 0, w = 0;
    size_t role = SIZE_MAX, chan = SIZE_MAX, rcpt = SIZE_MAX, ctype = SIZE_MAX;
    enum { EXP_ANY, EXP_CHANNEL, EXP_CTYPE } expect = EXP_ANY;
    bool has_channel = false;
    char *f = h->fields;
    f[w++] = 0; /* fields[0] = "" for the absent ones */
    while (i < n) {
        if (is_space(s[i])) {
            i++;
            continue;
        }
        if (at_marker(s + i, n - i, MK_CHANNEL)) {
            i += MARKERS[MK_CHANNEL].len;
            if (!has_channel) expect = EXP_CHANNEL, chan = 0;
            has_channel = true;
            continue;
        }
        if (at_marker(s + i, n - i, MK_CONSTRAIN)) {
            i += MARKERS[MK_CONSTRAIN].len;
            expect = EXP_CTYPE;
            continue;
        }
        size_t b = i;
        while (i < n && !is_space(s[i]) && !at_marker(s + i, n - i, MK_CHANNEL) && !at_marker(s + i, n - i, MK_CONSTRAIN))
            i++;
        size_t *slot = NULL, skip = 0;
        if (i - b >= 3 && !memcmp(s + b, "to=", 3)) {
            if (rcpt == SIZE_MAX) slot = &rcpt, skip = 3;
        } else if (expect == EXP_CHANNEL) {
            slot = &chan;
        } else if (expect == EXP_CTYPE || (has_channel && ctype == SIZE_MAX)) {
            slot = &ctype;
        } else if (!has_channel && role == SIZE_MAX) {
            slot = &role;
        }
        if (slot != &rcpt) expect = EXP_ANY;
        if (!slot) continue;
        /* words are disjoint and separated, so n_hdr + 2 bytes suffice */
        *slot = w;
        memcpy(f + w, s + b + skip, i - b - skip);
        w += i - b - skip;
        f[w++] = 0;
    }
    h->msg.role = f + (role == SIZE_MAX ? 0 : role);
    h->msg.channel_name = f + (chan == SIZE_MAX ? 0 : chan);
    h->msg.recipient = f + (rcpt == SIZE_MAX ? 0 : rcpt);
    h->msg.content_type = f + (ctype == SIZE_MAX ? 0 : ctype);
    h->msg.implied = !has_channel;
    const char *c = h->msg.channel_name;
    h->msg.channel = !has_channel                ? LMQ_HARMONY_FINAL
                     : !strcmp(c, "final")      ? LMQ_HARMONY_FINAL
                     : !strcmp(c, "analysis")   ? LMQ_HARMONY_ANALYSIS
                     : !strcmp(c, "commentary") ? LMQ_HARMONY_COMMENTARY
                                                : LMQ_HARMONY_UNKNOWN;
}

/* ======================================================================
 * The parser: one state machine over text runs and markers
 * ====================================================================== */

static lmq_harmony_term term_of(enum marker m)
{
    return m == MK_END ? LMQ_HARMONY_TERM_END : m == MK_RETURN ? LMQ_HARMONY_TERM_RETURN : LMQ_HARMONY_TERM_CALL;
}

/* A header starting with s[0..n), which began at byte `at` of the input. */
static void header_begin(lmq_harmony *h, const char *s, size_t n, uint64_t at)
{
    h->state = ST_HEADER;
    h->hdr_at = at;
    memcpy(h->hdr, s, n);
    h->n_hdr = n;
}

static void header_add(lmq_harmony *h, const char *s, size_t n)
{
    if (h->n_hdr + n > sizeof h->hdr) {
        h->state = ST_FAILED;
        h->err = LMQ_ERR_LIMIT;
        snprintf(h->err_msg, sizeof h->err_msg,
                 "harmony: a message header longer than %d bytes (it begins at byte %llu of the output)",
                 LMQ_HARMONY_MAX_HEADER, (unsigned long long)h->hdr_at);
        return;
    }
    memcpy(h->hdr + h->n_hdr, s, n);
    h->n_hdr += n;
}

/* A pending prefix of "to=" turned out to be text: an implied message. */
static void between_to_text(lmq_harmony *h)
{
    size_t n = h->n_hdr;
    h->n_hdr = 0;
    begin_implied(h);
    emit_text(h, h->hdr, n);
}

static void on_text(lmq_harmony *h, const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        switch (h->state) {
        case ST_BETWEEN:
            if (h->n_hdr == 0 && is_space(s[i])) {
                i++;
                break;
            }
            h->hdr[h->n_hdr++] = s[i++];
            if (h->n_hdr == 3 && !memcmp(h->hdr, "to=", 3)) {
                /* h->at is where this run began; "to=" are contiguous input bytes */
                header_begin(h, "to=", 3, h->at + i - 3);
            } else if (memcmp(h->hdr, "to=", h->n_hdr)) {
                between_to_text(h);
            }
            break;
        case ST_HEADER:
            header_add(h, s + i, n - i);
            i = n;
            break;
        case ST_CONTENT:
            emit_text(h, s + i, n - i);
            i = n;
            break;
        case ST_DONE:
        case ST_FAILED: return;
        }
    }
}

static void on_marker(lmq_harmony *h, enum marker m)
{
    if (h->state == ST_BETWEEN && h->n_hdr) between_to_text(h);
    switch (h->state) {
    case ST_BETWEEN:
        if (m == MK_START) header_begin(h, "", 0, h->at);
        else if (m == MK_CHANNEL || m == MK_CONSTRAIN) header_begin(h, MARKERS[m].text, MARKERS[m].len, h->at - MARKERS[m].len);
        else if (m == MK_MESSAGE) begin_implied(h);
        else if (m == MK_RETURN || m == MK_CALL) h->state = ST_DONE;
        /* <|end|> outside a message: nothing to end */
        break;
    case ST_HEADER:
        if (m == MK_CHANNEL || m == MK_CONSTRAIN) {
            header_add(h, MARKERS[m].text, MARKERS[m].len);
        } else if (m == MK_START) {
            header_begin(h, "", 0, h->at); /* a header abandoned for a new one */
        } else {
            parse_header(h);
            h->n_hdr = 0; /* hdr[] now serves ST_BETWEEN again */
            h->state = ST_CONTENT;
            emit_begin(h);
            if (m != MK_MESSAGE) { /* a header and no content */
                emit_end(h, term_of(m));
                h->state = m == MK_END ? ST_BETWEEN : ST_DONE;
            }
        }
        break;
    case ST_CONTENT:
        if (m == MK_MESSAGE || m == MK_CONSTRAIN) {
            emit_text(h, MARKERS[m].text, MARKERS[m].len);
        } else if (m == MK_START || m == MK_CHANNEL) {
            emit_end(h, LMQ_HARMONY_TERM_NONE);
            if (m == MK_START) header_begin(h, "", 0, h->at);
            else header_begin(h, MARKERS[m].text, MARKERS[m].len, h->at - MARKERS[m].len);
        } else {
            emit_end(h, term_of(m));
            h->state = m == MK_END ? ST_BETWEEN : ST_DONE;
        }
        break;
    case ST_DONE:
    case ST_FAILED: break;
    }
}

/* ======================================================================
 * The lexer
 * ====================================================================== */

/* The marker at s[0..n): its index, -1 when s cannot begin one, -2 when s
 * is a proper prefix of one (more bytes decide). */
static int match_marker(const char *s, size_t n)
{
    bool prefix = false;
    for (int m = 0; m < MK_COUNT; m++) {
        size_t l = MARKERS[m].len;
        if (n >= l) {
            if (!memcmp(s, MARKERS[m].text, l)) return m;
        } else if (!memcmp(s, MARKERS[m].text, n)) {
            prefix = true;
        }
    }
    return prefix ? -2 : -1;
}

/* Hands the decided part of s[0..n) to the parser; returns its length (the
 * rest, shorter than MAX_MARKER, may still begin a marker). */
static size_t scan(lmq_harmony *h, const char *s, size_t n)
{
    size_t i = 0, start = 0;
    while (i < n && h->state != ST_FAILED && h->state != ST_DONE) {
        const char *p = memchr(s + i, '<', n - i);
        if (!p) break;
        size_t j = (size_t)(p - s);
        int m = match_marker(s + j, n - j);
        if (m == -2) {
            on_text(h, s + start, j - start);
            h->at += j - start;
            return j;
        }
        if (m >= 0) {
            on_text(h, s + start, j - start);
            h->at += j - start + MARKERS[m].len;
            on_marker(h, (enum marker)m);
            i = start = j + MARKERS[m].len;
        } else {
            i = j + 1;
        }
    }
    if (h->state != ST_FAILED && h->state != ST_DONE) {
        on_text(h, s + start, n - start);
        h->at += n - start;
    }
    return n;
}

lmq_status lmq_harmony_push(lmq_harmony *h, const char *text, size_t len)
{
    if (!h || (!text && len)) return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_harmony_push: NULL argument");
    if (h->state == ST_FAILED) return lmq_error(h->err, "%s", h->err_msg);
    if (h->state == ST_DONE || !len) return LMQ_OK;
    if (h->n_hold) {
        /* the held bytes and the first few new ones: either a marker forms,
         * or the held '<' is text; what stays undecided fits in hold[] */
        char tmp[2 * MAX_MARKER];
        size_t k = len < MAX_MARKER ? len : MAX_MARKER;
        memcpy(tmp, h->hold, h->n_hold);
        memcpy(tmp + h->n_hold, text, k);
        size_t old = h->n_hold, c = scan(h, tmp, old + k);
        h->n_hold = 0;
        if (c < old + k && h->state != ST_DONE && h->state != ST_FAILED) {
            if (c < old) { /* all of text was used and is still undecided */
                h->n_hold = old + k - c;
                memcpy(h->hold, tmp + c, h->n_hold);
                return LMQ_OK;
            }
            /* the undecided tail lies in text: rescan it from there */
            k = c - old;
        }
        text += k;
        len -= k;
    }
    if (h->state != ST_DONE && h->state != ST_FAILED && len) {
        size_t c = scan(h, text, len);
        if (c < len && h->state != ST_DONE && h->state != ST_FAILED) {
            h->n_hold = len - c;
            memcpy(h->hold, text + c, h->n_hold);
        }
    }
    if (h->state == ST_FAILED) return lmq_error(h->err, "%s", h->err_msg);
    return LMQ_OK;
}

lmq_status lmq_harmony_finish(lmq_harmony *h)
{
    if (!h) return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_harmony_finish: NULL argument");
    if (h->state == ST_FAILED) return lmq_error(h->err, "%s", h->err_msg);
    if (h->n_hold && h->state != ST_DONE) {
        /* held bytes that never became a marker are text */
        size_t n = h->n_hold;
        h->n_hold = 0;
        on_text(h, h->hold, n);
        h->at += n;
        if (h->state == ST_FAILED) return lmq_error(h->err, "%s", h->err_msg);
    }
    if (h->state == ST_BETWEEN && h->n_hdr) between_to_text(h);
    if (h->state == ST_CONTENT) emit_end(h, LMQ_HARMONY_TERM_NONE);
    h->state = ST_DONE;
    return LMQ_OK;
}

/* ======================================================================
 * Life cycle and helpers
 * ====================================================================== */

lmq_status lmq_harmony_new(lmq_harmony_fn fn, void *user, lmq_harmony **out)
{
    if (!out) return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_harmony_new: NULL output");
    *out = NULL;
    if (!fn) return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_harmony_new: NULL callback");
    lmq_harmony *h = malloc(sizeof *h);
    if (!h) return lmq_error(LMQ_ERR_NOMEM, "harmony: out of memory");
    h->fn = fn;
    h->user = user;
    lmq_harmony_reset(h);
    *out = h;
    return LMQ_OK;
}

void lmq_harmony_reset(lmq_harmony *h)
{
    if (!h) return;
    h->state = ST_BETWEEN;
    h->n_hold = h->n_hdr = 0;
    h->hdr_at = h->at = 0;
    h->fields[0] = 0;
    h->msg = (lmq_harmony_header){.role = h->fields, .channel_name = h->fields, .recipient = h->fields,
                                  .content_type = h->fields};
    h->err = LMQ_OK;
    h->err_msg[0] = 0;
}

void lmq_harmony_free(lmq_harmony *h) { free(h); }

bool lmq_harmony_done(const lmq_harmony *h) { return h && h->state == ST_DONE; }

const char *lmq_harmony_channel_str(lmq_harmony_channel c)
{
    static const char *const names[LMQ_HARMONY_CHANNEL_COUNT] = {
        [LMQ_HARMONY_FINAL] = "final", [LMQ_HARMONY_ANALYSIS] = "analysis",
        [LMQ_HARMONY_COMMENTARY] = "commentary", [LMQ_HARMONY_UNKNOWN] = "unknown"};
    return (unsigned)c < LMQ_HARMONY_CHANNEL_COUNT ? names[c] : "?";
}

bool lmq_harmony_is_template(const char *src, size_t len)
{
    if (!src) return false;
    return memmem(src, len, "<|channel|>", 11) && memmem(src, len, "<|message|>", 11);
}

/* Private helpers of the formats module (not installed). */
#ifndef LMQ_FORMAT_INTERNAL_H
#define LMQ_FORMAT_INTERNAL_H
#include "lmq_format.h"

/* Hard limits applied to every file before anything is allocated. */
#define LMQ_MAX_KEY_LEN 65535u
#define LMQ_MAX_NAME_LEN 4096u
#define LMQ_MAX_STRING_LEN (256u << 20) /* one metadata string */
#define LMQ_MAX_ARRAY_DEPTH 4
#define LMQ_MAX_DIM ((int64_t)1 << 40)
/* A zstd tensor may expand to at most this many times its stored size
 * (docs/FORMAT.md): a few MB of hostile frame cannot demand tens of GB at
 * open. The writer stores a tensor raw rather than exceed it. */
#define LMQ_MAX_ZSTD_RATIO 1024u

/* PATH.tmp.<pid> */
lmq_status lmq_tmp_name(const char *path, char *out, size_t cap);
lmq_status lmq_fsync_dir_of(const char *path);

/* Bounded little-endian cursor over a byte buffer. Reads past the end set
 * `bad` and return zeros; callers check `bad` once per structure. */
typedef struct lmq_cursor {
    const uint8_t *p;
    size_t len, pos;
    bool bad;
} lmq_cursor;

static inline bool lmq_cur_need(lmq_cursor *c, size_t n)
{
    if (c->bad || n > c->len - c->pos) {
        c->bad = true;
        return false;
    }
    return true;
}
static inline uint32_t lmq_cur_u32(lmq_cursor *c)
{
    if (!lmq_cur_need(c, 4)) return 0;
    const uint8_t *p = c->p + c->pos;
    c->pos += 4;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t lmq_cur_u64(lmq_cursor *c)
{
    uint64_t lo = lmq_cur_u32(c);
    uint64_t hi = lmq_cur_u32(c);
    return lo | hi << 32;
}

/* Growable output buffer used by the encoders. */
typedef struct lmq_buf {
    uint8_t *p;
    size_t len, cap;
    bool oom;
} lmq_buf;
void lmq_buf_put(lmq_buf *b, const void *data, size_t n);
void lmq_buf_u32(lmq_buf *b, uint32_t v);
void lmq_buf_u64(lmq_buf *b, uint64_t v);
void lmq_buf_str(lmq_buf *b, const char *s, uint64_t len); /* GGUF string */

/* Hash index from a string to its position in an owner's array (strindex.c).
 * The strings stay with the owner; get(owner, pos) returns the one at pos. */
typedef const char *(*lmq_strindex_key_fn)(const void *owner, size_t pos);
typedef struct lmq_strindex {
    uint64_t *slot; /* (hash high 32 bits) << 32 | (position + 1); 0 = empty */
    size_t cap;     /* power of two, or 0 */
    size_t n;
} lmq_strindex;
/* Position of key, or SIZE_MAX. */
size_t lmq_strindex_find(const lmq_strindex *ix, const char *key, lmq_strindex_key_fn get, const void *owner);
/* Adds position pos. When its string is already present, nothing is added and
 * *existing (if given) is set to the earlier position, else SIZE_MAX. */
lmq_status lmq_strindex_add(lmq_strindex *ix, size_t pos, lmq_strindex_key_fn get, const void *owner,
                            size_t *existing);
void lmq_strindex_clear(lmq_strindex *ix);

/* Work counters of the calling thread, for tests that bound the cost of
 * hostile input by the work done rather than by time: slots examined by
 * lmq_strindex probes, and bytes that zstd decoded into tensors. */
extern _Thread_local uint64_t lmq_work_probes;
extern _Thread_local uint64_t lmq_work_zstd_bytes;

/* Shared by the .lmq and GGUF parsers: builds an lmq_file over a mapping. */
struct lmq_file {
    char *path;
    lmq_file_kind kind;
    uint32_t version;
    const uint8_t *map;  /* whole file */
    size_t size;
    bool owns_map;       /* munmap on close */
    lmq_meta *meta;
    lmq_tensor_info *tensors;
    char **names;        /* owned tensor names */
    void **owned_data;   /* decoded zstd tensors (NULL when a view) */
    size_t n_tensors;
    uint64_t id;
    lmq_strindex name_ix; /* tensor name -> index, built by the parsers */
};
/* Adds tensor i's name to f->name_ix; a name seen before is a format error
 * naming the file and the tensor (parsers call it for i = 0, 1, ...). */
lmq_status lmq_file_index_name(lmq_file *f, size_t i);

lmq_status lmq_lmq_parse(lmq_file *f);  /* container.c */
lmq_status lmq_gguf_parse(lmq_file *f); /* gguf.c */
#endif

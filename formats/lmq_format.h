/* lmq_format.h — the formats module: status codes, errors, the type table,
 * f16/bf16 conversion, typed key/value metadata, the .lmq container (read and
 * write), and readers for safetensors and GGUF.
 *
 * Contract for every function here:
 *   - functions that act return lmq_status (LMQ_OK == 0, errors negative) and,
 *     on failure, leave one human-readable line in lmq_last_error() naming the
 *     file, tensor, key or byte offset at fault;
 *   - nothing here calls exit/abort on input; every size read from a file is
 *     bounded and overflow-checked before use;
 *   - every open/new function has a matching close/free that accepts NULL.
 */
#ifndef LMQ_FORMAT_H
#define LMQ_FORMAT_H
/* liblmq exports what its public headers declare, nothing else (docs/API.md) */
#pragma GCC visibility push(default)

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LMQ_VERSION_MAJOR 0
#define LMQ_VERSION_MINOR 1
#define LMQ_VERSION_PATCH 0
#define LMQ_VERSION_STRING "0.1.0"

/* ======================================================================
 * Status and errors
 * ====================================================================== */

typedef enum lmq_status {
    LMQ_OK = 0,
    LMQ_ERR_IO = -1,          /* open/read/write/mmap/rename failed */
    LMQ_ERR_NOMEM = -2,       /* allocation failed */
    LMQ_ERR_FORMAT = -3,      /* malformed, truncated or inconsistent input */
    LMQ_ERR_CHECKSUM = -4,    /* stored checksum does not match */
    LMQ_ERR_UNSUPPORTED = -5, /* well-formed but not supported (type, arch, dtype) */
    LMQ_ERR_NOT_FOUND = -6,   /* missing file, key or tensor */
    LMQ_ERR_INVALID_ARG = -7, /* caller passed a bad argument */
    LMQ_ERR_LIMIT = -8,       /* a hard limit was exceeded (sizes, context length) */
    LMQ_ERR_RUNTIME = -9,     /* evaluation-time failure (template raised, ...) */
    LMQ_ERR_COUNT_ = -10
} lmq_status;

/* Stable name of a status ("ok", "io error", ...). Never NULL. */
const char *lmq_status_str(lmq_status s);

/* The calling thread's last error message (one line, no trailing newline).
 * Valid until the next lmq call on this thread that fails. Never NULL. */
const char *lmq_last_error(void);

/* Sets the calling thread's last error (printf-style) and returns `s`, so
 * callers can write `return lmq_error(LMQ_ERR_FORMAT, "%s: ...", path);`. */
lmq_status lmq_error(lmq_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Puts a printf-style prefix and ": " before the calling thread's current
 * last error and returns `s`: `return lmq_error_prefix(s, "%s: tensor '%s'",
 * path, name);` turns "bad block 3" into "PATH: tensor 'NAME': bad block 3".
 * The one safe way to add context to an error: never pass lmq_last_error()
 * as an argument of lmq_error (it would format the message into itself). */
lmq_status lmq_error_prefix(lmq_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Clears the calling thread's last error. */
void lmq_error_clear(void);

/* Logging: the library's warnings (a tensor skipped, an environment override
 * that does not apply) go through one hook instead of stderr. The default
 * hook writes "lmq: MESSAGE" and a newline to stderr; lmq_set_log(NULL, NULL)
 * restores it; a hook that does nothing silences the library. The hook may be
 * called from any thread; set it before other lmq calls. */
typedef enum lmq_log_level { LMQ_LOG_WARN = 0, LMQ_LOG_INFO = 1, LMQ_LOG_LEVEL_COUNT } lmq_log_level;
typedef void (*lmq_log_fn)(lmq_log_level level, const char *msg, void *user);
void lmq_set_log(lmq_log_fn fn, void *user);
/* Formats one message (no trailing newline) and passes it to the hook. */
void lmq_log(lmq_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ======================================================================
 * The type table (append-only: never renumber, only add before COUNT)
 * ====================================================================== */

typedef enum lmq_type {
    LMQ_TYPE_F32 = 0,
    LMQ_TYPE_F16 = 1,
    LMQ_TYPE_BF16 = 2,
    LMQ_TYPE_Q4_0 = 3,
    LMQ_TYPE_Q4_1 = 4,
    LMQ_TYPE_Q5_0 = 5,
    LMQ_TYPE_Q5_1 = 6,
    LMQ_TYPE_Q8_0 = 7,
    LMQ_TYPE_Q8_1 = 8,
    LMQ_TYPE_Q2_K = 9,
    LMQ_TYPE_Q3_K = 10,
    LMQ_TYPE_Q4_K = 11,
    LMQ_TYPE_Q5_K = 12,
    LMQ_TYPE_Q6_K = 13,
    LMQ_TYPE_Q8_K = 14,
    LMQ_TYPE_IQ4_NL = 15,
    LMQ_TYPE_IQ4_XS = 16,
    LMQ_TYPE_F8_E4M3 = 17, /* 32 e4m3 codes + one E8M0 power-of-two scale (OCP MX) */
    LMQ_TYPE_F8_E5M2 = 18, /* 32 e5m2 codes + one E8M0 power-of-two scale (OCP MX) */
    LMQ_TYPE_MXFP4 = 19,   /* 32 E2M1 codes + one E8M0 scale: ggml's block_mxfp4 (type 39), byte for byte */
    /* ggml's codebook and ternary types, byte for byte (docs/QUANT.md): */
    LMQ_TYPE_IQ2_XXS = 20, /* 2.06 bpw: 8-value groups from a 256-point E8 grid, 7-bit signs */
    LMQ_TYPE_IQ2_XS = 21,  /* 2.31 bpw: 512-point grid, 4-bit scales per 16 */
    LMQ_TYPE_IQ2_S = 22,   /* 2.56 bpw: 1024-point grid, free signs */
    LMQ_TYPE_IQ3_XXS = 23, /* 3.06 bpw: 4-value groups from a 256-point grid */
    LMQ_TYPE_IQ3_S = 24,   /* 3.44 bpw: 512-point grid, free signs */
    LMQ_TYPE_IQ1_S = 25,   /* 1.56 bpw: 2048-point ternary grid, one shift per 32 */
    LMQ_TYPE_IQ1_M = 26,   /* 1.75 bpw: the same grid, scales per 16, shifts per 8 */
    LMQ_TYPE_TQ1_0 = 27,   /* 1.69 bpw: ternary, 5 trits a byte */
    LMQ_TYPE_TQ2_0 = 28,   /* 2.06 bpw: ternary, 2 bits each */
    LMQ_TYPE_COUNT
} lmq_type;

typedef struct lmq_type_traits {
    const char *name;   /* lower-case canonical name: "f32", "q4_K", "f8_e4m3" */
    int32_t block_size; /* elements per block (1 for float types) */
    int32_t type_size;  /* bytes per block */
    bool quantized;     /* false for f32/f16/bf16 */
    int32_t ggml_type;  /* the ggml/GGUF type id, or -1 when GGUF has none */
} lmq_type_traits;

/* Traits row of `t`, or NULL when `t` is not a valid type id. */
const lmq_type_traits *lmq_type_get(lmq_type t);
/* Canonical name, or "?" for an invalid id. */
const char *lmq_type_name(lmq_type t);
/* Case-insensitive lookup of a type by name ("Q4_K", "q4_k", "bf16"). */
lmq_status lmq_type_from_name(const char *name, lmq_type *out);
/* lmq type for a ggml type id; LMQ_ERR_UNSUPPORTED when lmq has none. */
lmq_status lmq_type_from_ggml(uint32_t ggml_type, lmq_type *out);
/* Bytes of a row of `n` elements, or -1 if n is not a multiple of the block
 * size or `t` is invalid. */
int64_t lmq_row_size(lmq_type t, int64_t n);
/* Bits per weight of the type (type_size * 8 / block_size). */
double lmq_type_bpw(lmq_type t);

/* ======================================================================
 * f16 / bf16 (IEEE binary16 and bfloat16), round-to-nearest-even
 * ====================================================================== */

uint16_t lmq_fp32_to_fp16(float f);
float lmq_fp16_to_fp32(uint16_t h);
uint16_t lmq_fp32_to_bf16(float f); /* RNE; NaN stays NaN (quiet) */
float lmq_bf16_to_fp32(uint16_t b);
void lmq_fp16_to_fp32_row(const uint16_t *src, float *dst, int64_t n);
void lmq_fp32_to_fp16_row(const float *src, uint16_t *dst, int64_t n);
void lmq_bf16_to_fp32_row(const uint16_t *src, float *dst, int64_t n);
void lmq_fp32_to_bf16_row(const float *src, uint16_t *dst, int64_t n);

/* Converts a row of n elements between float types (f32/f16/bf16). Quantized
 * types are handled by the quantize module. */
lmq_status lmq_convert_float_row(lmq_type src_type, const void *src,
                                 lmq_type dst_type, void *dst, int64_t n);

/* ======================================================================
 * Checksums (XXH3-64, seed 0)
 * ====================================================================== */

uint64_t lmq_hash64(const void *data, size_t len);

/* ======================================================================
 * Typed key/value metadata (GGUF's value types and numbering)
 * ====================================================================== */

typedef enum lmq_vtype {
    LMQ_V_U8 = 0,
    LMQ_V_I8 = 1,
    LMQ_V_U16 = 2,
    LMQ_V_I16 = 3,
    LMQ_V_U32 = 4,
    LMQ_V_I32 = 5,
    LMQ_V_F32 = 6,
    LMQ_V_BOOL = 7,
    LMQ_V_STRING = 8,
    LMQ_V_ARRAY = 9,
    LMQ_V_U64 = 10,
    LMQ_V_I64 = 11,
    LMQ_V_F64 = 12,
    LMQ_V_COUNT
} lmq_vtype;

typedef struct lmq_str {
    char *ptr;    /* NUL-terminated copy (may contain inner NULs; use len) */
    uint64_t len; /* bytes, without the terminator */
} lmq_str;

typedef struct lmq_value lmq_value;
struct lmq_value {
    lmq_vtype type;
    union {
        uint64_t u; /* U8..U64 */
        int64_t i;  /* I8..I64 */
        double f;   /* F32, F64 */
        bool b;
        lmq_str s;
        struct {
            lmq_vtype elem; /* element type */
            uint64_t n;     /* element count */
            /* numeric/bool: packed little-endian array of n elements of the
             * element's natural size (bool as uint8_t);
             * STRING: lmq_str[n]; ARRAY (nested): lmq_value[n] */
            void *data;
        } arr;
    };
};

/* Byte size of one element of a numeric/bool type (0 for STRING/ARRAY). */
size_t lmq_vtype_size(lmq_vtype t);
const char *lmq_vtype_name(lmq_vtype t);

typedef struct lmq_meta lmq_meta; /* ordered key -> value map; owns its data */

lmq_meta *lmq_meta_new(void);
void lmq_meta_free(lmq_meta *m);
size_t lmq_meta_count(const lmq_meta *m);
const char *lmq_meta_key(const lmq_meta *m, size_t i);
const lmq_value *lmq_meta_value(const lmq_meta *m, size_t i);
const lmq_value *lmq_meta_find(const lmq_meta *m, const char *key);

/* Typed getters. LMQ_ERR_NOT_FOUND when absent (message names the key),
 * LMQ_ERR_FORMAT when present with an incompatible type or out of range.
 * Integer getters accept any integer type; f64 accepts floats and integers. */
lmq_status lmq_meta_get_u64(const lmq_meta *m, const char *key, uint64_t *out);
lmq_status lmq_meta_get_i64(const lmq_meta *m, const char *key, int64_t *out);
lmq_status lmq_meta_get_f64(const lmq_meta *m, const char *key, double *out);
lmq_status lmq_meta_get_bool(const lmq_meta *m, const char *key, bool *out);
/* Returns a pointer into `m` (valid while m lives). */
lmq_status lmq_meta_get_str(const lmq_meta *m, const char *key, const char **out,
                            uint64_t *len);
/* Array access: element type, count and the data pointer described above. */
lmq_status lmq_meta_get_arr(const lmq_meta *m, const char *key, lmq_vtype *elem,
                            uint64_t *n, const void **data);

/* Setters replace an existing key (keeping its position) or append. */
lmq_status lmq_meta_set_u32(lmq_meta *m, const char *key, uint32_t v);
lmq_status lmq_meta_set_i32(lmq_meta *m, const char *key, int32_t v);
lmq_status lmq_meta_set_u64(lmq_meta *m, const char *key, uint64_t v);
lmq_status lmq_meta_set_f32(lmq_meta *m, const char *key, float v);
lmq_status lmq_meta_set_f64(lmq_meta *m, const char *key, double v);
lmq_status lmq_meta_set_bool(lmq_meta *m, const char *key, bool v);
lmq_status lmq_meta_set_str(lmq_meta *m, const char *key, const char *s);
lmq_status lmq_meta_set_strn(lmq_meta *m, const char *key, const char *s, size_t len);
/* Numeric/bool array: copies n elements of lmq_vtype_size(elem) bytes. */
lmq_status lmq_meta_set_arr(lmq_meta *m, const char *key, lmq_vtype elem,
                            const void *data, uint64_t n);
/* String array: copies n strings; lens may be NULL (then strlen is used). */
lmq_status lmq_meta_set_str_arr(lmq_meta *m, const char *key, const char *const *strs,
                                const size_t *lens, uint64_t n);
/* Deep-copies any value (including nested arrays) under `key`. */
lmq_status lmq_meta_set_value(lmq_meta *m, const char *key, const lmq_value *v);
lmq_status lmq_meta_remove(lmq_meta *m, const char *key);

/* GGUF-encoded key/value section: each entry is
 * (u64 key_len, key bytes, u32 vtype, value); see docs/FORMAT.md.
 * Decoding is bounded: every length is checked against `len`. */
lmq_status lmq_meta_decode(const uint8_t *buf, size_t len, uint64_t n_kv, lmq_meta *m,
                           size_t *consumed);
/* Encodes into a malloc'd buffer (*out, *out_len). */
lmq_status lmq_meta_encode(const lmq_meta *m, uint8_t **out, size_t *out_len);

/* ======================================================================
 * Model files: .lmq containers and GGUF, read through one interface
 * ====================================================================== */

#define LMQ_MAX_DIMS 4

typedef enum lmq_codec {
    LMQ_CODEC_NONE = 0,
    LMQ_CODEC_ZSTD = 1,
    LMQ_CODEC_COUNT
} lmq_codec;

typedef enum lmq_file_kind {
    LMQ_FILE_LMQ = 0,
    LMQ_FILE_GGUF = 1
} lmq_file_kind;

typedef struct lmq_tensor_info {
    const char *name;
    lmq_type type;
    uint32_t n_dims;
    int64_t ne[LMQ_MAX_DIMS]; /* ne[0] = innermost (row length); unused dims = 1 */
    uint64_t nbytes;          /* logical (decoded) byte size */
    uint64_t file_offset;     /* absolute offset of the stored bytes in the file */
    uint64_t stored_bytes;    /* bytes as stored (== nbytes unless compressed) */
    lmq_codec codec;
    bool has_checksum; /* .lmq: always; GGUF: never */
    uint64_t checksum; /* XXH3-64 of the stored bytes */
    const void *data;  /* decoded bytes: mmap view or owned memory; valid while open */
} lmq_tensor_info;

typedef struct lmq_file lmq_file;

/* Opens a .lmq container or a GGUF (v2/v3) file, chosen by its magic; mmaps it
 * read-only, validates every structure against the file size, checks the .lmq
 * header checksum, and decodes zstd tensors into owned memory. Tensor data
 * checksums are only checked by lmq_file_verify(). */
lmq_status lmq_file_open(const char *path, lmq_file **out);
void lmq_file_close(lmq_file *f);

lmq_file_kind lmq_file_kind_of(const lmq_file *f);
const char *lmq_file_path(const lmq_file *f);
uint64_t lmq_file_size(const lmq_file *f);
uint32_t lmq_file_version(const lmq_file *f); /* container or GGUF version */
const lmq_meta *lmq_file_meta(const lmq_file *f);
size_t lmq_file_n_tensors(const lmq_file *f);
const lmq_tensor_info *lmq_file_tensor(const lmq_file *f, size_t i);
const lmq_tensor_info *lmq_file_find_tensor(const lmq_file *f, const char *name);
/* XXH3-64 of the header, metadata and directory bytes (.lmq); for GGUF, a
 * hash of its metadata and directory. Identifies a model in logits files. */
uint64_t lmq_file_id(const lmq_file *f);

/* Checks every tensor checksum with n_threads threads (<=0: all cores).
 * On mismatch returns LMQ_ERR_CHECKSUM, names the first bad tensor in the
 * error, and stores its index in *bad (if bad != NULL). GGUF: LMQ_OK, nothing
 * to check (n_checked 0). */
lmq_status lmq_file_verify(const lmq_file *f, int n_threads, size_t *bad,
                           size_t *n_checked);

/* Parses an in-memory buffer (used by the fuzz targets and tests). The buffer
 * must stay alive while the file is open. */
/* Says that [p, p + n) of the file's tensor data will not be read again
 * (the runtime copied it elsewhere): the whole pages inside it are dropped
 * from memory when the file is memory-mapped (a later read maps them in
 * again from the file); nothing happens for data held in memory
 * (decompressed tensors, lmq_file_open_memory) or outside the mapping. */
void lmq_file_release(const lmq_file *f, const void *p, size_t n);
lmq_status lmq_file_open_memory(const void *buf, size_t len, const char *name,
                                lmq_file **out);

/* ----------------------------------------------------------------------
 * .lmq writer: streams tensors in call order; writes `PATH.tmp.<pid>`, fsyncs
 * and renames to PATH in lmq_writer_finish(); lmq_writer_abort() (or any
 * failure inside finish) removes the temporary file.
 * ---------------------------------------------------------------------- */

typedef struct lmq_writer lmq_writer;

typedef struct lmq_writer_opts {
    lmq_codec codec; /* default codec for tensors (NONE or ZSTD) */
    int zstd_level;  /* 0 = default (3) */
} lmq_writer_opts;

lmq_status lmq_writer_open(const char *path, const lmq_writer_opts *opts,
                           lmq_writer **out);
/* Metadata written at finish; callers may add keys until then. */
lmq_meta *lmq_writer_meta(lmq_writer *w);
/* Writes one tensor now (compressing it if the codec says so; a compressed
 * tensor that does not shrink is stored raw). nbytes must equal the size the
 * type and shape imply. */
lmq_status lmq_writer_add_tensor(lmq_writer *w, const char *name, lmq_type type,
                                 uint32_t n_dims, const int64_t *ne, const void *data,
                                 uint64_t nbytes);
lmq_status lmq_writer_finish(lmq_writer *w); /* frees w in all cases */
void lmq_writer_abort(lmq_writer *w);        /* frees w; accepts NULL */

/* Byte size of a tensor of this type and shape, or -1 when the row length is
 * not a multiple of the block size or the size overflows. */
int64_t lmq_tensor_nbytes(lmq_type type, uint32_t n_dims, const int64_t *ne);

/* ======================================================================
 * safetensors (single file or sharded directory)
 * ====================================================================== */

typedef struct lmq_st_tensor {
    const char *name;
    const char *dtype; /* as in the header: "F32", "BF16", "I64", ... */
    bool supported;    /* dtype is F32, F16 or BF16 */
    lmq_type type;     /* valid when supported */
    uint32_t n_dims;
    int64_t shape[8];  /* row-major as in the file: shape[n_dims-1] is innermost */
    const void *data;  /* mmap view */
    uint64_t nbytes;
    uint32_t shard;    /* index of the file it lives in */
} lmq_st_tensor;

typedef struct lmq_safetensors lmq_safetensors;

/* `path` is a .safetensors file, a model.safetensors.index.json, or a
 * directory holding either. */
lmq_status lmq_safetensors_open(const char *path, lmq_safetensors **out);
void lmq_safetensors_close(lmq_safetensors *st);
size_t lmq_safetensors_count(const lmq_safetensors *st);
const lmq_st_tensor *lmq_safetensors_tensor(const lmq_safetensors *st, size_t i);
const lmq_st_tensor *lmq_safetensors_find(const lmq_safetensors *st, const char *name);
size_t lmq_safetensors_n_shards(const lmq_safetensors *st);
const char *lmq_safetensors_shard_path(const lmq_safetensors *st, size_t i);
/* Validates a whole in-memory safetensors file (fuzzing/tests). */
lmq_status lmq_safetensors_check_memory(const void *buf, size_t len, const char *name,
                                        size_t *n_tensors);

/* Reader contract (formats/safetensors.c): the 8-byte header length is
 * bounded (LMQ_ST_MAX_HEADER), the header must be a JSON object without NUL
 * bytes; every tensor needs a known dtype, a shape of at most 8 dimensions
 * and data_offsets [begin, end] with begin <= end <= data size and
 * end - begin == product(shape) * dtype size (overflow-checked); tensors
 * with bytes may not overlap (gaps are allowed); `__metadata__` is ignored.
 * Known dtypes other than F32/F16/BF16 (F64, I64, U8, F8_E4M3, ...) are
 * listed with supported == false; an unknown dtype string is an error.
 * Tensors are listed shard by shard in data-offset order. Shards named by
 * an index must sit next to it (no '/' in the names); each is opened and
 * mapped once. Every error names the file and, where one is at fault, the
 * tensor. */
#define LMQ_ST_MAX_HEADER ((uint64_t)100 << 20)

/* The whole mapped file of shard i (header included). */
lmq_status lmq_safetensors_shard_data(const lmq_safetensors *st, size_t i,
                                      const void **data, size_t *size);
/* XXH3-64 (seed 0) of shard i's whole file, equal to lmq_hash64 over it;
 * reads the mapping in chunks and releases each chunk's pages afterwards so
 * that hashing a large model does not grow the resident set. */
lmq_status lmq_safetensors_shard_hash(const lmq_safetensors *st, size_t i, uint64_t *out);
/* Drops the tensor's pages from the process's resident set (the mapping
 * stays valid; a later access reads them back from the page cache). Lets a
 * converter stream a model larger than memory, one tensor at a time. */
void lmq_safetensors_release(const lmq_safetensors *st, const lmq_st_tensor *t);

/* ======================================================================
 * Model architectures as data — formats/arch.c (docs/ARCHITECTURE.md,
 * docs/MODELS.md)
 *
 * One descriptor per family: its GGUF architecture name, the Hugging Face
 * classes and model_types it comes from, the tensors it has (GGUF name,
 * Hugging Face name, shape in terms of the hyper-parameters, required or
 * optional) and the block features that are not visible from the tensor
 * list (activation, norm storage, embedding scale, sliding-window pattern,
 * RoPE pairing in GGUF files). Convert, GGUF import and export, model load,
 * the quantization mixes and `lmq info` all read it. Features that are
 * visible from the tensors (biases, q/k norms, sandwich norms, fused qkv and
 * gate|up, LongRoPE factor lists) are switched on by the tensors' presence.
 * ====================================================================== */

typedef enum lmq_arch_id {
    LMQ_ARCH_LLAMA = 0,
    LMQ_ARCH_QWEN2,
    LMQ_ARCH_QWEN3,
    LMQ_ARCH_GEMMA2,
    LMQ_ARCH_GEMMA3,
    LMQ_ARCH_PHI3,
    LMQ_ARCH_QWEN3MOE,
    LMQ_ARCH_QWEN2MOE,
    LMQ_ARCH_QWEN35,    /* Qwen3.5 / 3.6 dense: Gated DeltaNet + gated attention (3:1) */
    LMQ_ARCH_QWEN35MOE, /* the same with experts + a shared expert */
    LMQ_ARCH_GPT_OSS,   /* gpt-oss: sinks, YaRN, biased experts (MXFP4), clamped SwiGLU */
    LMQ_ARCH_SMOLLM3,   /* SmolLM3: Llama with no RoPE on every 4th layer */
    LMQ_ARCH_MISTRAL3,  /* Ministral 3: Llama with YaRN and Llama 4's query temperature */
    LMQ_ARCH_GEMMA4,    /* Gemma 4: per-kind head sizes, shared KV, per-layer embeddings, layer scalar */
    LMQ_ARCH_COUNT
} lmq_arch_id;

/* Tensor kinds (append only). Global kinds are named as is
 * ("token_embd.weight"); per-layer kinds are "blk.<N>.<name>". */
typedef enum lmq_tensor_kind {
    LMQ_TK_TOKEN_EMBD = 0,
    LMQ_TK_OUTPUT_NORM,
    LMQ_TK_OUTPUT,
    LMQ_TK_ROPE_FREQS,         /* llama3 scaling as frequency divisors [n_rot/2] */
    LMQ_TK_ROPE_FACTORS_LONG,  /* LongRoPE divisors [n_rot/2] (n_ctx > original context) */
    LMQ_TK_ROPE_FACTORS_SHORT, /* LongRoPE divisors [n_rot/2] */
    LMQ_TK_ATTN_NORM,
    LMQ_TK_ATTN_Q,
    LMQ_TK_ATTN_K,
    LMQ_TK_ATTN_V,
    LMQ_TK_ATTN_QKV,           /* fused rows Q|K|V */
    LMQ_TK_ATTN_OUT,
    LMQ_TK_ATTN_Q_BIAS,
    LMQ_TK_ATTN_K_BIAS,
    LMQ_TK_ATTN_V_BIAS,
    LMQ_TK_ATTN_OUT_BIAS,
    LMQ_TK_ATTN_Q_NORM,        /* [head_dim]: per head; [n_head*head_dim]: whole projection */
    LMQ_TK_ATTN_K_NORM,
    LMQ_TK_ATTN_POST_NORM,     /* sandwich norm on the attention output */
    LMQ_TK_FFN_NORM,
    LMQ_TK_FFN_GATE,
    LMQ_TK_FFN_UP,             /* [n_embd, 2*n_ff] rows gate|up when there is no ffn_gate (Phi-3) */
    LMQ_TK_FFN_DOWN,
    LMQ_TK_FFN_POST_NORM,      /* sandwich norm on the FFN output */
    LMQ_TK_FFN_GATE_INP,       /* MoE router [n_embd, n_expert] */
    LMQ_TK_FFN_GATE_EXPS,      /* experts' gate [n_embd, n_ff_exp, n_expert] */
    LMQ_TK_FFN_UP_EXPS,        /* experts' up   [n_embd, n_ff_exp, n_expert] */
    LMQ_TK_FFN_DOWN_EXPS,      /* experts' down [n_ff_exp, n_embd, n_expert] */
    LMQ_TK_FFN_GATE_INP_SHEXP, /* shared expert's gate [n_embd]: sigmoid(x . w) scales its output */
    LMQ_TK_FFN_GATE_SHEXP,     /* shared expert [n_embd, n_ff_shexp] (Qwen2-MoE) */
    LMQ_TK_FFN_UP_SHEXP,
    LMQ_TK_FFN_DOWN_SHEXP,     /* [n_ff_shexp, n_embd] */
    /* Gated DeltaNet (recurrent) layers, llama.cpp's names (Qwen3.5). The
     * linear layer's fused projection is LMQ_TK_ATTN_QKV with rows q|k|v
     * (2 nk dk + nv dv); every nv-indexed dimension is in llama.cpp's
     * "tiled" value-head order: value head j reads key head j % nk. */
    LMQ_TK_ATTN_GATE,          /* z: [n_embd, nv dv], the output gate silu(z) */
    LMQ_TK_SSM_BETA,           /* [n_embd, nv]: beta = sigmoid(x . w) */
    LMQ_TK_SSM_ALPHA,          /* [n_embd, nv]: a, the decay's input */
    LMQ_TK_SSM_CONV1D,         /* [conv_kernel, conv channels]: causal depthwise conv, no bias */
    LMQ_TK_SSM_DT,             /* [nv] dt_bias */
    LMQ_TK_SSM_A,              /* [nv] -exp(A_log) */
    LMQ_TK_SSM_NORM,           /* [dv] per-head RMSNorm of the output (plain weight, never 1+w) */
    LMQ_TK_SSM_OUT,            /* [nv dv, n_embd] output projection */
    /* gpt-oss */
    LMQ_TK_ATTN_SINKS,         /* [n_head] one logit per head that joins the softmax's denominator */
    LMQ_TK_FFN_GATE_INP_BIAS,  /* [n_expert] router bias */
    LMQ_TK_FFN_GATE_EXPS_BIAS, /* [n_ff_exp, n_expert] */
    LMQ_TK_FFN_UP_EXPS_BIAS,   /* [n_ff_exp, n_expert] */
    LMQ_TK_FFN_DOWN_EXPS_BIAS, /* [n_embd, n_expert] */
    /* Gemma 4's per-layer embeddings (PLE) and layer scalar */
    LMQ_TK_PER_LAYER_TOKEN_EMBD, /* [n_layer ple, n_vocab]: each token's inputs for every layer */
    LMQ_TK_PER_LAYER_MODEL_PROJ, /* [n_embd, n_layer ple]: the context part, from the scaled embedding */
    LMQ_TK_PER_LAYER_PROJ_NORM,  /* [ple] RMSNorm of each layer's slice of the projection */
    LMQ_TK_PER_LAYER_INP_GATE,   /* [n_embd, ple] per layer: gelu(x W) * the layer's input */
    LMQ_TK_PER_LAYER_PROJ,       /* [ple, n_embd] back to the residual */
    LMQ_TK_PER_LAYER_POST_NORM,  /* [n_embd] RMSNorm of that before it is added */
    LMQ_TK_LAYER_OUT_SCALE,      /* [1] the residual stream is multiplied by it after the layer */
    /* Gemma 4's MoE block: experts beside the dense MLP */
    LMQ_TK_FFN_GATE_INP_SCALE,   /* [n_embd] router input scale (times n_embd^-1/2 at run time) */
    LMQ_TK_FFN_DOWN_EXPS_SCALE,  /* [n_expert] per-expert output scale */
    LMQ_TK_FFN_PRE_NORM_2,       /* [n_embd] norm of the experts' input */
    LMQ_TK_FFN_POST_NORM_1,      /* [n_embd] norm of the dense MLP's output */
    LMQ_TK_FFN_POST_NORM_2,      /* [n_embd] norm of the experts' output */
    LMQ_TK_FFN_GATE_UP_EXPS,     /* [n_embd, 2 n_ff_exp, n_expert] per expert rows gate then up (llama.cpp's
                                  * Gemma 4 GGUFs; lmq convert writes the two stacks) */
    LMQ_TK_COUNT
} lmq_tensor_kind;

/* Shape symbols, resolved against the hyper-parameters. */
typedef enum lmq_dim {
    LMQ_DIM_1 = 0,    /* unused dimension (1-D tensors) */
    LMQ_DIM_EMBD,     /* n_embd */
    LMQ_DIM_VOCAB,    /* n_vocab */
    LMQ_DIM_Q,        /* n_head * head_dim */
    LMQ_DIM_KV,       /* n_head_kv * head_dim */
    LMQ_DIM_QKV,      /* Q + 2 KV */
    LMQ_DIM_FF,       /* n_ff */
    LMQ_DIM_FF2,      /* 2 n_ff */
    LMQ_DIM_HEAD,     /* head_dim */
    LMQ_DIM_ROT_HALF, /* n_rot / 2 */
    LMQ_DIM_EXPERT,   /* n_expert */
    LMQ_DIM_FF_EXP,   /* n_ff_exp: one expert's FFN width */
    LMQ_DIM_FF_SHEXP, /* n_ff_shexp: the shared expert's FFN width */
    LMQ_DIM_Q2,       /* 2 n_head head_dim: query and output-gate rows (Qwen3.5 attention) */
    LMQ_DIM_SSM_CONV, /* conv channels 2 nk dk + nv dv (the fused q|k|v of a recurrent layer) */
    LMQ_DIM_SSM_INNER,/* nv dv */
    LMQ_DIM_SSM_NV,   /* nv: value heads */
    LMQ_DIM_SSM_K,    /* conv kernel */
    LMQ_DIM_SSM_DV,   /* dv: one value head */
    LMQ_DIM_HEADS,    /* n_head */
    LMQ_DIM_PLE,      /* n_embd_ple: one layer's per-layer-embedding width */
    LMQ_DIM_PLE_ALL,  /* n_layer n_embd_ple */
    LMQ_DIM_FF_EXP2,  /* 2 n_ff_exp: one expert's gate and up rows */
} lmq_dim;

enum {
    LMQ_AT_OPTIONAL = 1u << 0, /* may be absent */
    LMQ_AT_NORM = 1u << 1,     /* an RMSNorm weight (stored as the multiplier) */
    LMQ_AT_FFN = 1u << 2,      /* one of a layer's FFNs: every layer has the dense one or the experts */
    LMQ_AT_ATTN = 1u << 3,     /* only in attention layers (hybrid families) */
    LMQ_AT_REC = 1u << 4,      /* only in recurrent layers (hybrid families) */
    LMQ_AT_NEG_EXP = 1u << 5,  /* stored as -exp(x) of the checkpoint's x (A_log -> ssm_a) */
};

typedef struct lmq_arch_tensor {
    lmq_tensor_kind kind;
    const char *hf;    /* Hugging Face name (per layer: after "model.layers.<N>."; a '*' stands for the
                        * expert index of a stacked expert tensor); NULL: not a checkpoint tensor */
    lmq_dim ne0, ne1;  /* ne1 == LMQ_DIM_1: a vector */
    unsigned flags;    /* LMQ_AT_* */
    lmq_dim ne2;       /* experts (3-D tensors), else LMQ_DIM_1 */
} lmq_arch_tensor;

typedef enum lmq_act {
    LMQ_ACT_SILU = 0,
    LMQ_ACT_GELU_TANH,
    LMQ_ACT_SWIGLU_OAI, /* gpt-oss: g = min(g, 7), u = clamp(u, -7, 7), g sigmoid(1.702 g) (u + 1) */
} lmq_act;

/* How a router turns logits into the k experts' weights. */
typedef enum lmq_moe_gating {
    LMQ_GATING_SOFTMAX = 0,   /* softmax over all experts, top-k, renormalised if moe_norm_topk */
    LMQ_GATING_TOPK_SOFTMAX,  /* top-k of the raw logits, softmax over those k (gpt-oss) */
} lmq_moe_gating;

/* Which layers use the sliding window when the model has one. */
typedef enum lmq_swa_pattern {
    LMQ_SWA_ALL = 0,      /* every layer (Phi-3, Mistral) */
    LMQ_SWA_EVEN,         /* layers 0, 2, 4, ... (Gemma 2) */
    LMQ_SWA_PERIOD,       /* all but every swa_period-th layer (Gemma 3: 5 local : 1 global) */
} lmq_swa_pattern;

typedef struct lmq_arch {
    lmq_arch_id id;
    const char *name;              /* GGUF general.architecture */
    const char *hf_class[3];       /* config.json "architectures" entries */
    const char *hf_model_type[3];  /* config.json "model_type" values */
    const lmq_arch_tensor *tensors;
    size_t n_tensors;
    bool gguf_rope_permuted;   /* llama.cpp permutes q/k rows (interleaved pairs) for this arch */
    bool norm_plus_one;        /* HF stores w and uses (1 + w): lmq adds 1 at convert, as llama.cpp */
    bool embd_scale;           /* embeddings multiplied by sqrt(n_embd) */
    bool tied_default;         /* tie_word_embeddings when config.json does not say */
    lmq_act act;
    lmq_swa_pattern swa;
    int swa_period;            /* LMQ_SWA_PERIOD */
    float rope_theta_swa;      /* RoPE base of sliding layers when the file has none (0: global base) */
    bool swa_rope_unscaled;    /* sliding layers use no RoPE scaling (Gemma 3) */
    lmq_moe_gating gating;
    bool moe_norm_topk;        /* MoE: the top-k router weights renormalised to sum 1 unless
                                * <arch>.expert_weights_norm says otherwise */
    bool attn_out_gate;        /* attn_q holds per head [q (head_dim), gate (head_dim)] rows; the attention
                                * output is multiplied by sigmoid(gate) (Qwen3.5) */
    bool ffn_norm_post_attn;   /* the pre-FFN norm is named post_attention_norm (llama.cpp's Qwen3.5 naming) */
    int nope_interval;         /* > 0: layers il with (il + 1) % nope_interval == 0 apply no RoPE unless
                                * lmq.rope.nope_layers says otherwise (lmq_arch_nope_layers; SmolLM3) */
    bool hybrid;               /* Gated DeltaNet layers beside attention layers: which is which comes from
                                * lmq.layer.recurrent or <arch>.full_attention_interval (lmq_arch_layer_kinds) */
    bool swa_heads;            /* sliding layers have their own head size and rotary dims
                                * (<arch>.attention.key_length_swa, rope.dimension_count_swa); rope_freqs.weight
                                * divides the global layers' frequencies only; the last
                                * <arch>.attention.shared_kv_layers layers read the KV cache of the last
                                * earlier layer of their kind (lmq_arch_layers; Gemma 4) */
    bool v_norm;               /* values RMS-normalised per head without a weight (Gemma 4) */
    bool attn_scale_one;       /* query scale 1 (no 1/sqrt(head_dim); Gemma 4) */
} lmq_arch;

const lmq_arch *lmq_arch_get(lmq_arch_id id);                /* NULL when out of range */
const lmq_arch *lmq_arch_by_name(const char *gguf_name);     /* NULL when unknown */
/* Matches config.json's model_type (preferred) or architectures[0]; either may be NULL. */
const lmq_arch *lmq_arch_by_hf(const char *model_type, const char *hf_class);
/* The descriptor's entry for a kind, or NULL when the family has no such tensor. */
const lmq_arch_tensor *lmq_arch_tensor_of(const lmq_arch *a, lmq_tensor_kind k);
/* "attn_q.weight", "token_embd.weight", ... */
const char *lmq_tensor_kind_name(lmq_tensor_kind k);
bool lmq_tensor_kind_per_layer(lmq_tensor_kind k);
/* GGUF name of kind k in layer il (ignored for global kinds); false when it does not fit. */
bool lmq_tensor_gguf_name(lmq_tensor_kind k, int il, char *out, size_t cap);
/* Parses a GGUF tensor name into kind and layer (-1 for global kinds). */
bool lmq_tensor_parse_name(const char *name, lmq_tensor_kind *kind, int *layer);
/* Comma-separated GGUF names of every family, for messages. */
const char *lmq_arch_names(void);

/* The shape-defining hyper-parameters, from `<arch>.*` metadata keys. */
typedef struct lmq_arch_dims {
    int64_t n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_rot, n_vocab; /* n_ff, n_head_kv: the largest
                                                                                 * over layers when per layer */
    int64_t n_expert, n_expert_used, n_ff_exp; /* 0, 0, n_ff for dense models */
    int64_t n_ff_shexp;                        /* shared expert width (expert_shared_feed_forward_length), 0: none */
    /* recurrent (Gated DeltaNet) layers; all 0 without them */
    int64_t ssm_conv;   /* ssm.conv_kernel */
    int64_t ssm_dk;     /* ssm.state_size: one key head */
    int64_t ssm_nk;     /* ssm.group_count: key heads */
    int64_t ssm_nv;     /* ssm.time_step_rank: value heads (a multiple of nk) */
    int64_t ssm_dv;     /* ssm.inner_size / nv: one value head */
    int64_t n_nextn;    /* nextn_predict_layers: multi-token-prediction blocks at the end of block_count
                         * (kept in llama.cpp's GGUFs, not run); n_layer excludes them */
    /* Gemma 4 (0 without): embedding_length_per_layer_input, attention.shared_kv_layers; head_dim_swa and
     * n_rot_swa are head_dim and n_rot when the family has one head size */
    int64_t n_embd_ple, n_kv_shared, head_dim_swa, n_rot_swa;
} lmq_arch_dims;

/* One layer's geometry: per-layer metadata arrays, the head size of its
 * kind, and where its keys and values live. */
typedef struct lmq_arch_layer {
    int64_t n_head_kv, n_ff, head_dim, n_rot;
    bool swa;        /* sliding-window layer (only meaningful with a window) */
    int64_t kv_src;  /* the layer whose KV cache it reads: itself, or (shared KV) the last layer before
                      * n_layer - n_kv_shared of the same kind */
} lmq_arch_layer;

/* Per-layer values of a hyper-parameter (llama.cpp lets
 * attention.head_count_kv and feed_forward_length be arrays with one entry
 * per layer): out[n_layer] from `<arch>.<sfx>` as an array or a scalar
 * (dflt when absent); each must lie in [lo, hi]. */
lmq_status lmq_arch_layer_values(const lmq_meta *m, const lmq_arch *a, const char *sfx, int64_t n_layer,
                                 const char *path, int64_t lo, int64_t hi, int64_t dflt, int64_t *out);
/* Reads block_count, embedding_length, feed_forward_length,
 * attention.head_count(_kv), attention.key_length, rope.dimension_count
 * vocab_size (0 when absent), expert_count, expert_used_count and
 * expert_feed_forward_length (default feed_forward_length) under the
 * architecture's prefix; checks
 * them for consistency (one line naming the key on failure). */
lmq_status lmq_arch_dims_from_meta(const lmq_meta *m, const lmq_arch *a, const char *path, lmq_arch_dims *out);
/* Value of a shape symbol; LMQ_DIM_1 is 1. */
int64_t lmq_arch_dim(const lmq_arch_dims *d, lmq_dim x);

/* Per-layer kinds of a hybrid family: rec[il] true for a recurrent layer.
 * From the bool array lmq.layer.recurrent (n_layer entries) when present,
 * else <arch>.full_attention_interval (default 4): layer il is recurrent iff
 * (il + 1) % interval != 0, as llama.cpp decides it. All false for a family
 * that is not hybrid. One line naming the key on a bad value. */
lmq_status lmq_arch_layer_kinds(const lmq_meta *m, const lmq_arch *a, int64_t n_layer, const char *path, bool *rec);
/* Per-layer "no RoPE" flags: lmq's bool array lmq.rope.nope_layers (n_layer
 * entries, true = no RoPE) when present, else the family's nope_interval
 * (llama.cpp hard-codes it), else all false. */
lmq_status lmq_arch_nope_layers(const lmq_meta *m, const lmq_arch *a, int64_t n_layer, const char *path, bool *nope);
/* Every layer's geometry (out[n_layer]): KV heads and FFN width (scalars or
 * arrays), sliding flags from <arch>.attention.sliding_window_pattern (one
 * bool per layer, true = sliding; llama.cpp's key) or
 * lmq.attention.sliding_window_layers or the family's pattern, head size
 * and rotary dims of the layer's kind, and the KV source. One line naming
 * the key on a bad value (a shared layer without an earlier layer of its
 * kind, or whose source has another shape). */
lmq_status lmq_arch_layers(const lmq_meta *m, const lmq_arch *a, const lmq_arch_dims *d, const char *path,
                           lmq_arch_layer *out);
/* The descriptor's shape symbols for layer l (KV heads, FFN width, head size, rotary dims). */
void lmq_arch_dims_for_layer(const lmq_arch_dims *d, const lmq_arch_layer *l, lmq_arch_dims *out);
/* KV-cache bytes per token at `bytes_per_value` (2: f16) over the layers
 * that own a cache (shared-KV layers and recurrent layers own none);
 * rec[n_layer] may be NULL. */
uint64_t lmq_arch_kv_bytes_per_token(const lmq_arch_dims *d, const lmq_arch_layer *l, const bool *rec,
                                     unsigned bytes_per_value);
/* f32 values of one recurrent layer's state for one sequence: the conv's
 * last (K-1) inputs of C channels, plus nv states of dk x dv. */
int64_t lmq_arch_rec_state_floats(const lmq_arch_dims *d);

/* ======================================================================
 * Small file helpers shared by the modules
 * ====================================================================== */

/* Reads a whole file (at most max_bytes) into a NUL-terminated malloc'd buffer. */
lmq_status lmq_read_file(const char *path, size_t max_bytes, char **out, size_t *len);
/* Writes a whole buffer atomically (temp file, fsync, rename). */
lmq_status lmq_write_file_atomic(const char *path, const void *data, size_t len);
/* Number of online CPUs (>= 1). */
int lmq_n_cpus(void);
/* The most threads any lmq call or command accepts (the thread pool, the
 * quantizer, every -t option); more is refused, never silently reduced. */
#define LMQ_MAX_THREADS 512

/* ======================================================================
 * Thread pool: persistent pthreads; lmq_pool_run is a parallel-for in which
 * the calling thread takes part as thread 0. Nothing is allocated per run.
 * One run at a time per pool; a job must not call lmq_pool_run on its own
 * pool. lmq's one threading mechanism: a context's kernels keep a pool for
 * the context's life; quantize, convert and verify run their work through
 * lmq_pool_for. One cap: LMQ_MAX_THREADS.
 * ====================================================================== */

typedef struct lmq_pool lmq_pool;
typedef void (*lmq_pool_fn)(void *ctx, int ith, int nth);

/* n_threads <= 0 means lmq_n_cpus(); at most LMQ_MAX_THREADS (512). */
lmq_status lmq_pool_new(int n_threads, lmq_pool **out);
void lmq_pool_free(lmq_pool *pool); /* accepts NULL; joins the workers */
int lmq_pool_n_threads(const lmq_pool *pool); /* 1 for NULL */
/* Calls fn(ctx, ith, nth) for ith = 0..nth-1 concurrently and returns when
 * all have returned. pool == NULL runs fn(ctx, 0, 1) on the caller. */
void lmq_pool_run(lmq_pool *pool, lmq_pool_fn fn, void *ctx);
/* One operation on a pool of n_threads (<= 0: lmq_n_cpus()) made for it:
 * fn(ctx, ith, n_threads) for every ith, on the pool's threads or, when
 * threads cannot be started, one after another on the caller.
 * LMQ_ERR_INVALID_ARG above LMQ_MAX_THREADS. */
lmq_status lmq_pool_for(int n_threads, lmq_pool_fn fn, void *ctx);
/* Monotonic seconds. */
double lmq_time_s(void);

/* ======================================================================
 * GGUF writer (v3, little-endian) — formats/gguf_write.c
 *
 * GGUF puts the tensor directory before the data, so a file is written in
 * two phases: declare every tensor (name, type, shape), then stream their
 * bytes in declaration order from caller-owned memory. The header, the
 * metadata and the directory go out with the first data write (or at finish
 * when there are no tensors); the metadata must not change after that.
 * Output is deterministic (same calls -> same bytes): nothing time- or
 * host-dependent is written. The file is written as `PATH.tmp.<pid>`,
 * fsynced and renamed to PATH by lmq_gguf_writer_finish(); abort, or any
 * failure inside finish, removes the temporary file.
 * ====================================================================== */

#define LMQ_GGUF_VERSION 3u
#define LMQ_GGUF_DEFAULT_ALIGNMENT 32u

typedef struct lmq_gguf_writer lmq_gguf_writer;

typedef struct lmq_gguf_writer_opts {
    /* Data alignment: a power of two in [1, 65536]; 0 = the value of
     * general.alignment in the metadata when set there, else 32. A value
     * other than 32 is (re)written as general.alignment (u32). */
    uint32_t alignment;
} lmq_gguf_writer_opts;

/* opts may be NULL (defaults). Creates the temporary file. */
lmq_status lmq_gguf_writer_open(const char *path, const lmq_gguf_writer_opts *opts,
                                lmq_gguf_writer **out);
/* The metadata to write (empty at open; owned by the writer). Callers fill
 * it before the first lmq_gguf_writer_write(). Every value type is written
 * as is, in the map's order. */
lmq_meta *lmq_gguf_writer_meta(lmq_gguf_writer *w);
/* Declares the next tensor. The type must have a ggml id (fp8 has none:
 * LMQ_ERR_UNSUPPORTED naming the tensor); n_dims 1..4; ne[0] a multiple of
 * the block size; names unique and at most 4096 bytes. */
lmq_status lmq_gguf_writer_declare(lmq_gguf_writer *w, const char *name, lmq_type type,
                                   uint32_t n_dims, const int64_t *ne);
/* Appends `nbytes` bytes to the current tensor's data (tensors in the order
 * declared; a tensor may be given in several calls, a call may not cross
 * into the next tensor). Padding between tensors is written automatically.
 * No further declarations are accepted after the first call. */
lmq_status lmq_gguf_writer_write(lmq_gguf_writer *w, const void *data, uint64_t nbytes);
/* Checks that every declared tensor got all its bytes, fsyncs and renames.
 * Frees w in all cases. */
lmq_status lmq_gguf_writer_finish(lmq_gguf_writer *w);
/* Removes the temporary file and frees w; accepts NULL. */
void lmq_gguf_writer_abort(lmq_gguf_writer *w);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif /* LMQ_FORMAT_H */

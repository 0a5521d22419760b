"""What scripts/make_synthetic_qwen35.py and make_synthetic_gptoss.py share: the command
line they have in common, reading the tokenizer source (token count, embedding rows,
bos/eos), the random stream of each tensor, random normal values written a bounded chunk
at a time, and the streaming safetensors writer (header, data, then config.json and the
tokenizer files). Imported from the scripts' own directory; needs Debian's python3-numpy.
"""
import argparse, contextlib, json, os, shutil, struct, zlib
import numpy as np

PAD_SCALE = 0.01         # embedding/lm_head rows past the tokenizer's last id
CHUNK = 1 << 22          # elements generated and converted at a time (16 MB as f32)
EMBEDDINGS = ("model.embed_tokens.weight", "lm_head.weight")
TOKENIZER_FILES = ["tokenizer.json", "tokenizer.model", "tokenizer_config.json",
                   "special_tokens_map.json", "added_tokens.json", "vocab.json", "merges.txt",
                   "chat_template.jinja", "generation_config.json"]
DTYPE_SIZE = {"f32": 4, "f16": 2, "bf16": 2}
ST_DTYPE = {"f32": "F32", "f16": "F16", "bf16": "BF16"}
TORCH_DTYPE = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}


def shared_dir():
    """$LMQ_SHARED, else ../shared beside the checkout (not normalised)."""
    here = os.path.dirname(os.path.abspath(__file__))
    return os.environ.get("LMQ_SHARED", os.path.join(here, "..", "..", "shared"))


def parse_args(doc, presets, default_preset, experts_help, real_vocab, tokenizer_dir, dtype_help=None):
    """The scripts' common command line; returns (parser, arguments)."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--preset", default=default_preset, choices=sorted(presets))
    ap.add_argument("--layers", type=int, default=0, help="keep the first N layers (default: all)")
    ap.add_argument("--experts", type=int, default=0, help=experts_help)
    ap.add_argument("--vocab", type=int, default=0,
                    help=f"embedding rows (>= the tokenizer's tokens; e.g. {real_vocab}, the real models')")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "f32"], help=dtype_help)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--tokenizer-dir", default=tokenizer_dir)
    ap.add_argument("--dry-run", action="store_true", help="print counts, write nothing")
    return ap, ap.parse_args()


def encode(a, dtype):
    if dtype == "f32":
        return a.astype("<f4").tobytes()
    if dtype == "f16":
        return a.astype("<f2").tobytes()
    bits = a.astype("<f4").view("<u4")      # finite values: no overflow in uint32
    bits = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    return bits.astype("<u2").tobytes()     # round to nearest even


def sp_piece_count(path):
    """Number of pieces in a SentencePiece model (protobuf ModelProto, field 1 repeated)."""
    data, i, n = open(path, "rb").read(), 0, 0
    def varint():
        nonlocal i
        v = s = 0
        while True:
            b = data[i]; i += 1
            v |= (b & 0x7F) << s; s += 7
            if b < 0x80:
                return v
    while i < len(data):
        key = varint()
        field, wt = key >> 3, key & 7
        if wt == 0:
            varint()
        elif wt == 1:
            i += 8
        elif wt == 2:
            size = varint()           # (not `i += varint()`: that reads i before varint moves it)
            i += size
        elif wt == 5:
            i += 4
        else:
            raise ValueError(f"{path}: unexpected protobuf wire type {wt}")
        if field == 1 and wt == 2:
            n += 1
    return n


def tokenizer_info(src, tokenizer_config_ids=False):
    """(tokens the tokenizer can produce, embedding rows of the source model, bos, eos).

    bos/eos come from config.json/generation_config.json; with tokenizer_config_ids, ids
    still missing are looked up from tokenizer_config.json's bos_token/eos_token strings
    (and the token count is that of the token -> id map, added tokens overriding)."""
    ntok, tok_ids = 0, {}
    tj, tm = os.path.join(src, "tokenizer.json"), os.path.join(src, "tokenizer.model")
    if os.path.exists(tj):
        t = json.load(open(tj))
        if tokenizer_config_ids:
            tok_ids = dict(t.get("model", {}).get("vocab", {}))
            tok_ids.update({a["content"]: a["id"] for a in t.get("added_tokens", [])})
            ids = list(tok_ids.values())
        else:
            ids = list(t.get("model", {}).get("vocab", {}).values()) + [a["id"] for a in t.get("added_tokens", [])]
        ntok = max(ids) + 1 if ids else 0
    elif os.path.exists(tm):
        ntok = sp_piece_count(tm)
    rows, bos, eos = 0, None, None
    for name in ("config.json", "generation_config.json"):
        p = os.path.join(src, name)
        if os.path.exists(p):
            c = json.load(open(p))
            c = {**c, **c.get("text_config", {})}
            rows = rows or int(c.get("vocab_size") or 0)
            bos = c.get("bos_token_id", bos) if bos is None else bos
            eos = c.get("eos_token_id", eos) if eos is None else eos
    p = os.path.join(src, "tokenizer_config.json")
    if tokenizer_config_ids and (bos is None or eos is None) and os.path.exists(p):
        tc = json.load(open(p))
        def tid(v):
            v = v.get("content") if isinstance(v, dict) else v
            return tok_ids.get(v) if isinstance(v, str) else None
        bos = tid(tc.get("bos_token")) if bos is None else bos
        eos = tid(tc.get("eos_token")) if eos is None else eos
    if ntok == 0 and rows == 0:
        raise SystemExit(f"{src}: no tokenizer.json, tokenizer.model or config.json vocab_size")
    return ntok, max(ntok, rows), bos, eos


def vocab(ap, a, **kw):
    """(tokenizer tokens, embedding rows V, bos, eos) for arguments `a`: --vocab, else the
    tokenizer source's rows; an error (through the parser) when V is below the tokens."""
    ntok, rows, bos, eos = tokenizer_info(a.tokenizer_dir, **kw)
    V = a.vocab or rows
    if V < ntok:
        ap.error(f"--vocab {V} is smaller than the tokenizer's {ntok} tokens")
    return ntok, V, bos, eos


def tensor_rng(seed, name):
    """The random stream of tensor `name` (the same whatever else the model holds)."""
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def fan_in_std(name, fan_in, resid, out_proj):
    """1/sqrt(fan_in), times resid for the projections into the residual stream."""
    std = 1.0 / np.sqrt(fan_in)
    if name.endswith(out_proj):
        std *= resid
    return std


def normal_chunks(name, shape, rng, std, ntok):
    """Yield N(0, std) values (f32, C order) a bounded chunk at a time; for the embedding
    and lm_head, rows from ntok on (--vocab padding) PAD_SCALE times smaller."""
    std = np.float32(std)
    if name in EMBEDDINGS:
        rows, H = shape
        step = max(1, CHUNK // H)
        for r0 in range(0, rows, step):
            a = rng.standard_normal((min(step, rows - r0), H), dtype=np.float32) * std
            if r0 + a.shape[0] > ntok:                    # padding rows: near zero
                a[max(0, ntok - r0):] *= np.float32(PAD_SCALE)
            yield a.reshape(-1)
        return
    n, done = int(np.prod(shape)), 0
    while done < n:
        k = min(CHUNK, n - done)
        yield rng.standard_normal(k, dtype=np.float32) * std
        done += k


def st_header(shapes, dtype):
    """Safetensors header of `shapes` (name -> (shape, "X" for --dtype or "U8")), tensors
    sorted by name: (header bytes, space-padded to 8, {name: data bytes}, data size)."""
    header, off, nbytes = {"__metadata__": {"format": "pt"}}, 0, {}
    for n in sorted(shapes):
        shape, dt = shapes[n]
        nbytes[n] = int(np.prod(shape)) * (1 if dt == "U8" else DTYPE_SIZE[dtype])
        header[n] = {"dtype": "U8" if dt == "U8" else ST_DTYPE[dtype], "shape": list(shape),
                     "data_offsets": [off, off + nbytes[n]]}
        off += nbytes[n]
    hjson = json.dumps(header, separators=(",", ":")).encode()
    hjson += b" " * (-len(hjson) % 8)
    return hjson, nbytes, off


@contextlib.contextmanager
def safetensors_file(out, hjson, size):
    """OUT/model.safetensors.tmp opened with the header written, for the caller to write the
    `size` data bytes in order; renamed to model.safetensors once they all are."""
    os.makedirs(out, exist_ok=True)
    tmp = os.path.join(out, "model.safetensors.tmp")
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)) + hjson)
        yield f
        assert f.tell() == 8 + len(hjson) + size
    os.replace(tmp, os.path.join(out, "model.safetensors"))


def write_chunks(f, chunks, dtype):
    """Write f32 chunks encoded as dtype; returns the number of values written."""
    wrote = 0
    for c in chunks:
        f.write(encode(c, dtype))
        wrote += c.size
    return wrote


def write_config_and_tokenizer(out, cfg, tokenizer_dir):
    """OUT/config.json (keys sorted) and the tokenizer files found in tokenizer_dir; returns
    the names of those copied."""
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(dict(sorted(cfg.items())), f, indent=2)
        f.write("\n")
    copied = []
    for t in TOKENIZER_FILES:
        src = os.path.join(tokenizer_dir, t)
        if os.path.exists(src):
            shutil.copyfile(src, os.path.join(out, t))
            copied.append(t)
    return copied

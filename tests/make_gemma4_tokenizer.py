#!/usr/bin/python3
"""Writes tests/data/gemma4-tokenizer/: a small tokenizer.json in the layout
of Gemma 4's (transformers' GemmaTokenizer: normalizer Replace(" " -> U+2581),
the vestigial Split(" ", MergedWithPrevious) pre-tokenizer, a BPE model with
byte_fallback and fuse_unk over raw UTF-8, <0xNN> byte pieces, Gemma 4's
special tokens at their real ids, newline runs as non-special added tokens),
its tokenizer_config.json, and cases.json: texts with the ids Hugging Face's
tokenizers library gives for them (add_special_tokens=False), computed here
by an independent re-implementation of that algorithm:

  1. added tokens are split off first, leftmost-longest (all of them are
     normalized=false, so they are matched in the raw text);
  2. every other segment: " " -> U+2581 (the normalizer); the pre-tokenizer
     then finds no space to split at;
  3. BPE: one symbol per character; a character that is no token becomes
     its <0xNN> byte pieces (byte_fallback; consecutive unknowns would fuse);
     then the adjacent pair with the lowest merge rank is merged (ties: the
     leftmost), until no pair has a merge.

for tests/test_tokenizer_gemma4.c. The merge list is ordered so that ranks
and token ids disagree ("ab" has a higher id than "bc" but an earlier
merge), which a score- or id-ordered tokenizer gets wrong. Run from
anywhere (needs only python3):

  tests/make_gemma4_tokenizer.py          # write
  tests/make_gemma4_tokenizer.py --check  # compare with what is stored
"""
import json, os, sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "data", "gemma4-tokenizer")
SP = "\u2581"

# ---- vocabulary -----------------------------------------------------------
SPECIAL = {0: "<pad>", 1: "<eos>", 2: "<bos>", 3: "<unk>", 4: "<mask>",
           46: "<|tool>", 47: "<tool|>", 48: "<|tool_call>", 49: "<tool_call|>",
           50: "<|tool_response>", 51: "<tool_response|>", 52: '<|"|>', 98: "<|think|>",
           100: "<|channel>", 101: "<channel|>", 105: "<|turn>", 106: "<turn|>"}
NEWLINES = {107: "\n", 108: "\n\n", 109: "\n\n\n"}  # non-special added tokens
FIRST_BYTE = 110                                     # <0x00> .. <0xFF>
CHARS = [SP, "\t"] + list("abcdefghijklmnopqrstuvwxyz") + list("HTCW") + list("0123456789") + \
        list(".,!?:'\"()-_<>|/{}=") + ["\u00e9", "\u00e0", "\u2014", "\U0001F60A", "\u043a", "\u043e", "\u0442",
                                          "\u65e5", "\u672c"]
# multi-character pieces, in id order (each is the concatenation of two
# earlier pieces); merges are derived from them below
PIECES = [SP + SP, SP + SP + SP, SP + SP + SP + SP, "\t\t", "bc", "ab", "He", "ll", "llo", "Hello", SP + "w",
          "or", SP + "wor", "ld", SP + "world", SP + "t", "he", SP + "the", SP + "T", "Th", "is", SP + "is",
          "in", "ing", SP + "th", "Ca", "Caf", "Caf\u00e9", SP + "Caf\u00e9", SP + "\U0001F60A", "..", "...",
          SP + "(", "\u043a\u043e", "\u043a\u043e\u0442", SP + "\u043a\u043e\u0442", "\u65e5\u672c", "call",
          ":{", "ca", "al", "ll" + SP, "},"]

def build_vocab():
    vocab = {}
    for i, t in list(SPECIAL.items()) + list(NEWLINES.items()):
        vocab[t] = i
    for i in range(5, FIRST_BYTE):
        if i not in SPECIAL and i not in NEWLINES:
            vocab["<unused%d>" % i] = i
    for b in range(256):
        vocab["<0x%02X>" % b] = FIRST_BYTE + b
    nid = FIRST_BYTE + 256
    for t in CHARS + [p for p in PIECES if p not in CHARS]:
        assert t not in vocab, t
        vocab[t] = nid
        nid += 1
    return vocab

def build_merges(vocab):
    """Every split of a multi-character piece into two pieces, ordered by
    the merged piece's id (as SentencePiece-derived merge lists are), then
    with "a b" moved before "b c" so that rank order != id order."""
    ms = []
    for t, i in sorted(vocab.items(), key=lambda kv: kv[1]):
        if i < FIRST_BYTE + 256 or len(t) < 2:
            continue
        for k in range(1, len(t)):
            l, r = t[:k], t[k:]
            if l in vocab and r in vocab and vocab[l] >= FIRST_BYTE + 256 and vocab[r] >= FIRST_BYTE + 256:
                ms.append((i, vocab[l], l, r))
    ms.sort()
    merges = [[l, r] for _, _, l, r in ms]
    ab, bc = merges.index(["a", "b"]), merges.index(["b", "c"])
    assert bc < ab
    merges.insert(bc, merges.pop(ab))
    return merges

# ---- the reference tokenizer (Hugging Face's algorithm) --------------------
def split_added(text, added):
    """Leftmost-longest matching of the added tokens (aho-corasick
    MatchKind::LeftmostLongest, as tokenizers' AddedVocabulary)."""
    out, i, start = [], 0, 0
    while i < len(text):
        best = None
        for t in added:
            if text.startswith(t, i) and (best is None or len(t) > len(best)):
                best = t
        if best is None:
            i += 1
            continue
        if i > start:
            out.append((False, text[start:i]))
        out.append((True, best))
        i += len(best)
        start = i
    if start < len(text):
        out.append((False, text[start:]))
    return out

def bpe(word, vocab, ranks, unk):
    syms = []  # token texts
    for ch in word:
        if ch in vocab:
            syms.append(ch)
            continue
        bts = ["<0x%02X>" % b for b in ch.encode("utf-8")]
        if all(b in vocab for b in bts):
            syms.extend(bts)
        elif syms and syms[-1] is unk:
            pass  # fuse_unk
        else:
            syms.append(unk)
    while True:
        best = None
        for k in range(len(syms) - 1):
            r = ranks.get((syms[k], syms[k + 1]))
            if r is not None and (best is None or r < best[0]):
                best = (r, k)
        if best is None:
            break
        k = best[1]
        syms[k:k + 2] = [syms[k] + syms[k + 1]]
    return [vocab[s] for s in syms]

def encode(text, vocab, ranks, added):
    ids = []
    for is_added, seg in split_added(text, added):
        if is_added:
            ids.append(vocab[seg])
        else:
            ids.extend(bpe(seg.replace(" ", SP), vocab, ranks, "<unk>"))
    return ids

CASES = [
    "Hello world",
    " Hello  world ",
    "abc",                          # merge rank, not token id, decides: [ab, c]
    "bcab",
    "The thing is",
    "   indented\tand\t\ttabs",
    "a\nb\n\nc\n\n\nd\n\n\n\ne",     # newline runs are added tokens; 4 = 3 + 1
    "\n\n\n\n\n\n\n",
    "1234567890 and 3.14",
    "Caf\u00e9 \u00e0 la mode \u2014 na\u00efve",  # \u00ef is no token: its two byte pieces
    " \U0001F60A\U0001F60A \U0001F60A!",
    "\u043a\u043e\u0442 \u65e5\u672c\u8a9e",       # \u8a9e: three byte pieces
    "\U0001F680 rocket",            # four byte pieces
    "<bos><|turn>user\nHello<turn|>\n<|turn>model\n",
    "<|turn>system\n<|think|>\nThink.<turn|>\n",
    "<|channel>thought\nhmm...<channel|>The world",
    '<|tool_call>call:get_time{tz:<|"|>UTC<|"|>}<tool_call|><|tool_response>',
    "<eos><pad><mask><unk>",
    "x <turn| <|turn ><|chan",       # broken markers are plain text
    "\u2581literal meta",            # a literal U+2581 is the same as a space
    "",
]

def main():
    vocab = build_vocab()
    merges = build_merges(vocab)
    ranks = {(l, r): i for i, (l, r) in enumerate(merges)}
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, t in sorted(SPECIAL.items())]
    added += [{"id": i, "content": "<unused%d>" % i, "single_word": False, "lstrip": False, "rstrip": False,
               "normalized": False, "special": True} for i in range(5, FIRST_BYTE)
              if i not in SPECIAL and i not in NEWLINES]
    added += [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
               "normalized": False, "special": False} for i, t in sorted(NEWLINES.items())]
    added.sort(key=lambda a: a["id"])
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": SP},
        "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
                          "invert": False},
        "post_processor": {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": SP}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": dict(sorted(vocab.items(), key=lambda kv: kv[1])), "merges": merges},
    }
    cfg = {"add_bos_token": False, "add_eos_token": False, "bos_token": "<bos>", "eos_token": "<eos>",
           "unk_token": "<unk>", "pad_token": "<pad>", "mask_token": "<mask>", "clean_up_tokenization_spaces": False,
           "padding_side": "left", "tokenizer_class": "GemmaTokenizer",
           "extra_special_tokens": {"sot_token": "<|turn>", "eot_token": "<turn|>", "soc_token": "<|channel>",
                                    "eoc_token": "<channel|>", "think_token": "<|think|>", "escape_token": '<|"|>',
                                    "str_token": "<|tool_response>", "etr_token": "<tool_response|>",
                                    "stc_token": "<|tool_call>", "etc_token": "<tool_call|>",
                                    "std_token": "<|tool>", "etd_token": "<tool|>"}}
    gen = {"bos_token_id": 2, "eos_token_id": [1, 106, 50], "pad_token_id": 0}
    names = [a["content"] for a in added]
    cases = {"about": __doc__.split("\n\n")[0],
             "cases": [{"text": t, "ids": encode(t, vocab, ranks, names)} for t in CASES]}
    files = {"tokenizer.json": tok, "tokenizer_config.json": cfg, "generation_config.json": gen,
             "cases.json": cases}
    check = "--check" in sys.argv[1:]
    os.makedirs(OUT, exist_ok=True)
    bad = 0
    for name, obj in files.items():
        text = json.dumps(obj, ensure_ascii=False, indent=1) + "\n"
        path = os.path.join(OUT, name)
        if check:
            with open(path, encoding="utf-8") as f:
                if f.read() != text:
                    print("differs:", path)
                    bad = 1
        else:
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(text)
    if not check:
        print("wrote", OUT)
    return bad

if __name__ == "__main__":
    sys.exit(main())

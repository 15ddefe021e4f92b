#!/usr/bin/env python3
"""A real (small) K3-style tokenizer for generated models: byte-level BPE in tiktoken form.

write_tokenizer(out_dir, num_merges) trains byte-level BPE on the text sample bundled in
tests/reference/data/bpe_sample/ and writes the two files a K3 model directory carries
(k3-model.md §9):

  tiktoken.model         one line per rank: base64(token bytes), a space, the rank.
                         Ranks 0..255 are the single bytes (rank = byte value); rank
                         256 + i is the i-th merge. rank = token id.
  tokenizer_config.json  Hugging Face layout: K3's 256 special tokens, ids R..R+255
                         (R = number of ranks) in "added_tokens_decoder", with the
                         named ones below and "<|reserved_token_ID|>" for the rest.
                         The chat format's four control tokens sit where K3's do
                         (k3-model.md 9.1): eos_token "<|end_of_msg|>" at R + 2 (K3's
                         163586), then "<|open|>", "<|close|>", "<|sep|>"; "<|close|>"
                         and "<|sep|>" are not marked special, as in the release.

It returns the vocabulary size (R + 256). Pure standard library; the output depends
only on the arguments and the bundled sample (same inputs, byte-identical files).

write_bench_tokenizer(out_dir, vocab_size) makes a large vocabulary (K3 has 163,840)
for the tokenizer benchmark by training on the sample plus pseudo-words drawn from
character Markov chains over it (not committed; ~1-2 minutes for 160k).

Training cuts text into pieces with an approximation of the K3 pre-tokenizer pattern
(Python's `re` has no \\p{..}; categories come from unicodedata, Han from code point
ranges). That only shapes which merges are learned: the encoders under test, C++ and
tiktoken, apply the exact pattern to whatever vocabulary this writes.

Command line:
  k3_tokenizer_gen.py OUT_DIR [--merges N]          the small vocabulary
  k3_tokenizer_gen.py OUT_DIR --bench [--vocab N]   the benchmark vocabulary
"""
import argparse
import base64
import heapq
import json
import os
import sys
import unicodedata

SAMPLE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "bpe_sample")
SAMPLE_FILES = ("en.txt", "zh.txt", "ja.txt", "ru.txt", "ar.txt", "eu.txt", "code.txt")
NUM_SPECIAL_TOKENS = 256

# K3's named special tokens by offset from the first special id (the rest are
# reserved). Offsets 2..5 are the chat format's control tokens at K3's ids 163586..163589
# (k3-model.md 9.1); offset 2, "<|end_of_msg|>", is the eos.
NAMED_SPECIALS = {
    0: "[BOS]",
    1: "[EOS]",
    2: "<|end_of_msg|>",
    3: "<|open|>",
    4: "<|close|>",
    5: "<|sep|>",
    6: "<|end_header_id|>",
    9: "[EOT]",
    11: "<|tool_calls_section_begin|>",
    12: "<|tool_calls_section_end|>",
    13: "<|tool_call_begin|>",
    14: "<|tool_call_argument_begin|>",
    15: "<|tool_call_end|>",
    17: "<think>",
    18: "</think>",
    254: "[UNK]",
    255: "[PAD]",
}
EOS_OFFSET = 2
# Specials that added_tokens_decoder does not mark "special" (a detokenizer that skips
# special tokens prints these as text), as in the released K3.
NOT_MARKED_SPECIAL = frozenset(("<|close|>", "<|sep|>"))

# ---------------------------------------------------------------------------------------
# Pre-tokenization (training only; see the module docstring)

_WHITE_SPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
_HAN_RANGES = ((0x2E80, 0x2FDF), (0x3005, 0x3005), (0x3007, 0x3007), (0x3021, 0x3029),
               (0x3038, 0x303B), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF),
               (0x20000, 0x323AF))

_UPPER, _LOWER, _LETTER, _NUMBER, _HAN, _SPACE = 1, 2, 4, 8, 16, 32
_class_cache = {}


def _char_class(ch):
    c = _class_cache.get(ch)
    if c is not None:
        return c
    cp = ord(ch)
    cat = unicodedata.category(ch)
    han = any(lo <= cp <= hi for lo, hi in _HAN_RANGES)
    c = 0
    if han:
        c |= _HAN
    if cat[0] == "L":
        c |= _LETTER
    if cat[0] == "N":
        c |= _NUMBER
    if ch in _WHITE_SPACE:
        c |= _SPACE
    if not han and (cat in ("Lu", "Lt", "Lm", "Lo") or cat[0] == "M"):
        c |= _UPPER
    if not han and (cat in ("Ll", "Lm", "Lo") or cat[0] == "M"):
        c |= _LOWER
    _class_cache[ch] = c
    return c


def _skip(s, i, bits):
    while i < len(s) and _char_class(s[i]) & bits:
        i += 1
    return i


def _contraction(s, i):
    if i + 1 < len(s) and s[i] == "'":
        a = s[i + 1].lower()
        if a in "stmdſ":
            return i + 2
        if i + 2 < len(s) and (a + s[i + 2].lower()) in ("re", "ve", "ll"):
            return i + 3
    return i


def _letters(s, j):
    """P?U*W+C? then P?U+W*C? tails from j (same rules as engine/tokenizer/pretokenizer.cpp)."""
    q, last_lower = j, None
    while q < len(s) and _char_class(s[q]) & _UPPER:
        q += 1
        if _char_class(s[q - 1]) & _LOWER:
            last_lower = q
    if q < len(s) and _char_class(s[q]) & _LOWER:
        return _contraction(s, _skip(s, q, _LOWER))
    if last_lower is not None:
        return _contraction(s, last_lower)
    return None


def _upper_first(s, j):
    q = _skip(s, j, _UPPER)
    if q == j:
        return None
    return _contraction(s, _skip(s, q, _LOWER))


def _match(s, i):
    c = _char_class(s[i])
    if c & _HAN:
        return _skip(s, i, _HAN)
    prefix = not (c & (_LETTER | _NUMBER)) and s[i] not in "\r\n"
    for tail in (_letters, _upper_first):
        if prefix:
            e = tail(s, i + 1)
            if e is not None:
                return e
        e = tail(s, i)
        if e is not None:
            return e
    if c & _NUMBER:
        e = i + 1
        while e < len(s) and e < i + 3 and _char_class(s[e]) & _NUMBER:
            e += 1
        return e
    punct = lambda ch: not (_char_class(ch) & (_SPACE | _LETTER | _NUMBER))
    start = None
    if s[i] == " " and i + 1 < len(s) and punct(s[i + 1]):
        start = i + 1
    elif punct(s[i]):
        start = i
    if start is not None:
        e = start
        while e < len(s) and punct(s[e]):
            e += 1
        while e < len(s) and s[e] in "\r\n":
            e += 1
        return e
    q, last_break = i, None
    while q < len(s) and _char_class(s[q]) & _SPACE:
        q += 1
        if s[q - 1] in "\r\n":
            last_break = q
    if last_break is not None:
        return last_break
    if q == len(s) or q - i == 1:
        return q
    return q - 1


def pre_tokenize(text):
    """The pieces of `text` (an approximation of the K3 pattern; training only)."""
    pieces, i = [], 0
    while i < len(text):
        e = _match(text, i)
        pieces.append(text[i:e])
        i = e
    return pieces


# ---------------------------------------------------------------------------------------
# Byte-level BPE training

def train_bpe(piece_counts, num_merges):
    """Learns up to num_merges merges from {piece bytes: count}; returns the tokens in
    rank order (the 256 single bytes first). Each step merges the most frequent adjacent
    pair (ties: the lower pair of ids). Incremental: only words containing the merged
    pair are revisited."""
    tokens = [bytes([b]) for b in range(256)]
    index = {t: i for i, t in enumerate(tokens)}
    words = [list(p) for p in piece_counts]
    counts = list(piece_counts.values())
    pair_counts = {}
    pair_words = {}
    for wi, w in enumerate(words):
        for pair in zip(w, w[1:]):
            pair_counts[pair] = pair_counts.get(pair, 0) + counts[wi]
            pair_words.setdefault(pair, set()).add(wi)
    heap = [(-c, a, b) for (a, b), c in pair_counts.items()]
    heapq.heapify(heap)

    target = 256 + num_merges
    while len(tokens) < target and heap:
        neg, a, b = heapq.heappop(heap)
        if pair_counts.get((a, b), 0) != -neg or neg == 0:
            continue  # stale entry
        merged = tokens[a] + tokens[b]
        new_id = index.get(merged)
        if new_id is None:
            new_id = len(tokens)
            tokens.append(merged)
            index[merged] = new_id
        changed = set()
        for wi in sorted(pair_words.pop((a, b), ())):
            old = words[wi]
            new, k, n = [], 0, len(old)
            while k < n:
                if k + 1 < n and old[k] == a and old[k + 1] == b:
                    new.append(new_id)
                    k += 2
                else:
                    new.append(old[k])
                    k += 1
            words[wi] = new
            c = counts[wi]
            old_pairs = list(zip(old, old[1:]))
            new_pairs = list(zip(new, new[1:]))
            for pair in old_pairs:
                pair_counts[pair] -= c
            for pair in new_pairs:
                pair_counts[pair] = pair_counts.get(pair, 0) + c
            old_set, new_set = set(old_pairs), set(new_pairs)
            for pair in old_set - new_set:
                ws = pair_words.get(pair)
                if ws is not None:
                    ws.discard(wi)
                changed.add(pair)
            for pair in new_set - old_set:
                pair_words.setdefault(pair, set()).add(wi)
                changed.add(pair)
            if len(old_set) != len(old_pairs) or len(new_set) != len(new_pairs):
                # A pair in both may still occur a different number of times.
                for pair in old_set & new_set:
                    if old_pairs.count(pair) != new_pairs.count(pair):
                        changed.add(pair)
        pair_counts.pop((a, b), None)
        for pair in sorted(changed):
            c = pair_counts.get(pair, 0)
            if c > 0:
                heapq.heappush(heap, (-c, pair[0], pair[1]))
            else:
                pair_counts.pop(pair, None)
    return tokens


def sample_texts():
    """The bundled sample, one string per file, in a fixed order."""
    out = []
    for name in SAMPLE_FILES:
        with open(os.path.join(SAMPLE_DIR, name), encoding="utf-8", newline="") as f:
            out.append(f.read())
    return out


def count_pieces(texts, weight=1, into=None):
    counts = {} if into is None else into
    for text in texts:
        for piece in pre_tokenize(text):
            b = piece.encode("utf-8")
            counts[b] = counts.get(b, 0) + weight
    return counts


# ---------------------------------------------------------------------------------------
# Output

def special_names(num_ranks):
    names = []
    for i in range(NUM_SPECIAL_TOKENS):
        names.append(NAMED_SPECIALS.get(i, "<|reserved_token_%d|>" % (num_ranks + i)))
    return names


def write_files(out_dir, tokens):
    """Writes tiktoken.model and tokenizer_config.json; returns the vocabulary size."""
    os.makedirs(out_dir, exist_ok=True)
    lines = ["%s %d\n" % (base64.b64encode(t).decode("ascii"), rank) for rank, t in enumerate(tokens)]
    _write(os.path.join(out_dir, "tiktoken.model"), "".join(lines))

    num_ranks = len(tokens)
    names = special_names(num_ranks)
    added = {}
    for i, name in enumerate(names):
        added[str(num_ranks + i)] = {
            "content": name, "lstrip": False, "normalized": False, "rstrip": False,
            "single_word": False, "special": name not in NOT_MARKED_SPECIAL,
        }
    config = {
        "added_tokens_decoder": added,
        "additional_special_tokens": [n for i, n in enumerate(names)
                                      if i in NAMED_SPECIALS and n not in NOT_MARKED_SPECIAL],
        "bos_token": names[0],
        "clean_up_tokenization_spaces": False,
        "eos_token": names[EOS_OFFSET],
        "model_max_length": 1048576,
        "pad_token": names[255],
        "tokenizer_class": "TikTokenTokenizer",
        "unk_token": names[254],
        "auto_map": {"AutoTokenizer": ["tokenization_kimi.TikTokenTokenizer", None]},
    }
    _write(os.path.join(out_dir, "tokenizer_config.json"),
           json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    return num_ranks + NUM_SPECIAL_TOKENS


def _write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    os.replace(tmp, path)


def write_tokenizer(out_dir: str, num_merges: int = 3000) -> int:
    """Trains num_merges merges on the bundled sample and writes tiktoken.model and
    tokenizer_config.json into out_dir (created if needed). Returns the vocabulary size:
    256 + num_merges ranks + 256 specials. Deterministic."""
    if num_merges < 0:
        raise ValueError("num_merges must be >= 0")
    tokens = train_bpe(count_pieces(sample_texts()), num_merges)
    if len(tokens) < 256 + num_merges:
        raise ValueError("the sample supports only %d merges" % (len(tokens) - 256))
    return write_files(out_dir, tokens)


# ---------------------------------------------------------------------------------------
# The benchmark vocabulary

class _Rng:
    """xorshift64*: the same numbers on every Python version."""

    def __init__(self, seed):
        self.s = seed or 1

    def next(self):
        x = self.s
        x ^= (x >> 12)
        x ^= (x << 25) & 0xFFFFFFFFFFFFFFFF
        x ^= (x >> 27)
        self.s = x
        return (x * 0x2545F4914F6CDD1D) & 0xFFFFFFFFFFFFFFFF

    def below(self, n):
        return self.next() % n


def _markov_chain(text, order):
    words = [p.strip() for p in pre_tokenize(text)]
    words = [w for w in words if len(w) >= 2 and all(_char_class(ch) & _LETTER for ch in w)]
    chain = {}
    for w in words:
        s = "^" * order + w + "$"
        for i in range(len(s) - order):
            chain.setdefault(s[i:i + order], []).append(s[i + order])
    return chain


def _markov_word(chain, rng, order, max_len=16):
    state, w = "^" * order, ""
    while len(w) < max_len:
        ch = chain[state][rng.below(len(chain[state]))]
        if ch == "$":
            break
        w += ch
        state = state[1:] + ch
    return w


def _pseudo_words(text, rng, unique, order=2):
    """`unique` distinct pseudo-words in the style of `text`, most frequent first: words of
    a character Markov chain over the text's words, and compounds of two once the chain
    alone stops producing new ones."""
    chain = _markov_chain(text, order)
    if not chain:
        return []
    seen, out, misses = set(), [], 0
    while len(out) < unique:
        w = _markov_word(chain, rng, order)
        if misses > 1000 or rng.below(4) == 0:
            w += _markov_word(chain, rng, order, 10)
        if not w or w in seen:
            misses += 1
            continue
        misses = 0
        seen.add(w)
        out.append(w)
    return out


# Share of the benchmark vocabulary's pseudo-words per sample file (the benchmark text is
# English).
_BENCH_SHARES = {"en.txt": 40, "zh.txt": 5, "ja.txt": 5, "ru.txt": 15, "ar.txt": 10, "eu.txt": 20,
                 "code.txt": 5}


def write_bench_tokenizer(out_dir: str, vocab_size: int = 160000) -> int:
    """A vocab_size-entry vocabulary (ranks + 256 specials) for the benchmark: the sample
    (weighted heavily, so its words become whole tokens as in a real vocabulary), numbers,
    and Zipf-weighted pseudo-words in each sample language. Deterministic."""
    num_merges = vocab_size - NUM_SPECIAL_TOKENS - 256
    if num_merges <= 0:
        raise ValueError("vocab_size too small")
    rng = _Rng(0x4E4A4B33)
    texts = sample_texts()
    counts = count_pieces(texts, weight=50)
    for n in range(1000):
        for piece in (str(n), " " + str(n)):
            b = piece.encode()
            counts[b] = counts.get(b, 0) + 20
    for name, text in zip(SAMPLE_FILES, texts):
        # About one merge per distinct word is learned late in training; 1.6x leaves room.
        words = _pseudo_words(text, rng, num_merges * 16 // 10 * _BENCH_SHARES[name] // 100)
        for rank, w in enumerate(words):
            cased = w.capitalize() if rng.below(8) == 0 else w
            piece = (" " + cased if rng.below(10) else cased).encode("utf-8")
            counts[piece] = counts.get(piece, 0) + 1 + 2000 // (rank + 20)
    tokens = train_bpe(counts, num_merges)
    if len(tokens) < 256 + num_merges:
        raise ValueError("the benchmark corpus supports only %d merges" % (len(tokens) - 256))
    return write_files(out_dir, tokens)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--merges", type=int, default=3000, help="merges for the small vocabulary")
    ap.add_argument("--bench", action="store_true", help="write the benchmark vocabulary")
    ap.add_argument("--vocab", type=int, default=160000, help="--bench: total vocabulary size")
    args = ap.parse_args(argv)
    if args.bench:
        n = write_bench_tokenizer(args.out_dir, args.vocab)
    else:
        n = write_tokenizer(args.out_dir, args.merges)
    print("%s: vocabulary of %d (%d ranks + %d specials)" % (args.out_dir, n, n - NUM_SPECIAL_TOKENS,
                                                               NUM_SPECIAL_TOKENS))
    return 0


if __name__ == "__main__":
    sys.exit(main())

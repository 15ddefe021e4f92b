#!/usr/bin/env python3
"""Tokenizer parity: the C++ encoder against the real tiktoken core, id for id.

The reference is the `tiktoken` package from the npm registry (tiktoken's Rust core
built to WebAssembly), pinned to TIKTOKEN_VERSION and installed under the build
directory on first run. Both sides get the same vocabulary (the model generator's,
tests/reference/k3_tokenizer_gen.py) and K3's pattern as written in k3-model.md §9;
tiktoken_side.mjs wraps tiktoken the way the reference K3 tokenizer does (the
25,000-character run splitting first).

Compared, id for id:
  - every line of tests/tokenizer/corpus.txt, and the whole file as one text;
  - edge cases: whitespace runs, long runs across the 25,000-character cut;
  - FUZZ_TEXTS random strings over an alphabet of one or more characters from each
    class the pattern distinguishes (deterministic);
  - chat-style texts with special-token recognition on;
  - pre-tokenization alone (see tiktoken_side.mjs "pieces") on all of the above plus
    both ends of every run of equal character class in the whole code space, so a
    table or Unicode-version mismatch anywhere shows.

Exit status: 0 all equal, 1 a mismatch or an error, 77 (ctest's skip) when the npm
registry cannot be reached to install the package.
"""
import argparse
import json
import os
import random
import subprocess
import sys

TIKTOKEN_VERSION = "1.0.22"  # the default; ctest passes the pin from tests/CMakeLists.txt
FUZZ_TEXTS = 5000
SKIP = 77

HERE = os.path.dirname(os.path.abspath(__file__))

# One or more characters per class the pattern tells apart.
FUZZ_ALPHABET = list("aAzZsStTrReEvVmMlLdD''' \t\n\r,.!?-_09") + [
    "\u017f",      # ſ: folds to s in (?i:'s)
    "\u212a",      # Kelvin sign: folds to k (not a contraction letter)
    "\u0301", "\u0903", "\u20dd",  # marks Mn, Mc, Me
    "\u01c5",      # ǅ Lt
    "\u02b0",      # ʰ Lm
    "\u30fc",      # ー Lm (Katakana)
    "\u3042", "\u05d0",  # あ א Lo
    "\u4e2d", "\u3005", "\u3007", "\u2e80", "\U00020000", "\U00016ff0",  # Han: Lo Lm Nl So, ext B, Mc
    "\u3001", "\u3002",  # ideographic punctuation (Script=Common)
    "\u0661", "\u2167", "\u00bd",  # Nd Nl No
    "\u00a0", "\u3000", "\u2028", "\u2029", "\u0085", "\x0b", "\x0c",  # \s
    "\x1c", "\x1f",  # Python-isspace but not \s
    "\u200b", "\u200d", "\ufeff", "\ufe0f",  # format / variation selector
    "\U0001f642", "\U0001f3fd", "\U0001f1fa",  # emoji, modifier, regional indicator
    "\u0627", "\u064b",  # Arabic letter and mark
    "\u00df", "\u0130", "\u0131",  # ß İ ı
    "\U00010d4a",  # Garay (new in Unicode 16.0)
    "\U00010940",  # Sidetic (new in 17.0: unassigned for a 16.0 engine)
    "\ue000",      # private use
]


def fuzz_texts():
    rng = random.Random(20250630)
    return ["".join(rng.choice(FUZZ_ALPHABET) for _ in range(rng.randint(1, 32)))
            for _ in range(FUZZ_TEXTS)]


def edge_texts():
    return [
        "", " ", "  ", "\n", "\r\n", "\t", " \n ", "a \n b", "x  \t\n\t  y",
        "a" * 25000, "a" * 25001, "a" * 60000, " " * 30000 + "word", "\n" * 26000,
        "中" * 30000 + "a" * 30000, ("word " * 6000) + "x" * 26000,
        "IT'S" * 7000, ("\u00a0" * 20000) + ("\x1c" * 10000) + "z",
    ]


def chat_texts():
    return [
        "<|open|>user<|sep|>What is a nightjar?<|close|><|open|>assistant<|sep|>",
        "[BOS]<|open|>system<|sep|>Be brief.<|close|>",
        "no specials here",
        "<|close|><|close|>",
        "text<|reserved_token_%d|>more",  # filled in with a real reserved id
        "<|open|", "<|open||>",
    ]


def class_boundary_texts(probe, model_dir):
    """Both ends (and the middle) of every run of code points with equal class bits,
    each in a few contexts, 64 code points per text."""
    out = run([probe, model_dir, "class-ranges"], b"").decode()
    cps = []
    for line in out.splitlines():
        first, last, _ = json.loads(line)
        for cp in sorted({first, (first + last) // 2, last}):
            if not 0xD800 <= cp <= 0xDFFF:  # surrogates are not text
                cps.append(cp)
    texts = []
    for i in range(0, len(cps), 64):
        texts.append("".join("a{0}b{0}{0}C{0}1{0} {0}'s{0}\t".format(chr(c)) for c in cps[i:i + 64]))
    return texts


def run(cmd, stdin_bytes, env=None):
    p = subprocess.run(cmd, input=stdin_bytes, capture_output=True, env=env)
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd[:3]), p.returncode,
                                                   p.stderr.decode(errors="replace")[-2000:]))
    return p.stdout


def jsonl(texts):
    return ("\n".join(json.dumps(t) for t in texts) + "\n").encode()


def ensure_tiktoken(npm_prefix, version):
    """Installs tiktoken@version under npm_prefix unless present. Returns None, or a reason
    to skip when the registry is unreachable."""
    pkg = os.path.join(npm_prefix, "node_modules", "tiktoken", "package.json")
    if os.path.exists(pkg):
        with open(pkg) as f:
            if json.load(f).get("version") == version:
                return None
    os.makedirs(npm_prefix, exist_ok=True)
    cmd = ["npm", "install", "--prefix", npm_prefix, "--no-audit", "--no-fund",
           "--fetch-retries=1", "--fetch-timeout=30000", "tiktoken@" + version]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode == 0:
        return None
    ping = subprocess.run(["npm", "ping", "--fetch-retries=0", "--fetch-timeout=15000"],
                          capture_output=True, text=True)
    if ping.returncode != 0:
        reasons = [l for l in (ping.stderr + ping.stdout).splitlines() if "FetchError" in l or " code " in l]
        return "the npm registry is unreachable (npm ping: %s)" % (
            reasons[-1].replace("npm error ", "") if reasons else "failed")
    raise RuntimeError("npm install tiktoken@%s failed:\n%s" % (version, p.stderr[-3000:]))


def compare(name, texts, cpp_out, js_out, detail=None):
    """Returns the number of ids compared; raises AssertionError on the first mismatch."""
    cpp = [json.loads(l) for l in cpp_out.decode().split("\n")[:-1]]
    js = [json.loads(l) for l in js_out.decode().split("\n")[:-1]]
    if len(cpp) != len(texts) or len(js) != len(texts):
        raise AssertionError("%s: %d texts but %d C++ and %d tiktoken results" % (name, len(texts), len(cpp), len(js)))
    ids = 0
    for i, (t, a, b) in enumerate(zip(texts, cpp, js)):
        if a != b:
            k = next((j for j in range(min(len(a), len(b))) if a[j] != b[j]), min(len(a), len(b)))
            msg = "%s: text %d differs at id %d\n  text: %r\n  C++:      %s\n  tiktoken: %s" % (
                name, i, k, t[:300], a[max(0, k - 3):k + 8], b[max(0, k - 3):k + 8])
            if detail:
                msg += "\n  C++ pieces: %r" % (detail[i][:40],)
            raise AssertionError(msg)
        ids += len(a)
    return ids


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--probe", required=True, help="the tokenizer_probe binary")
    ap.add_argument("--model", required=True, help="model directory with the generated vocabulary")
    ap.add_argument("--npm-prefix", required=True, help="where to install the npm package")
    ap.add_argument("--corpus", default=os.path.join(HERE, "corpus.txt"))
    ap.add_argument("--tiktoken-version", default=TIKTOKEN_VERSION)
    args = ap.parse_args()
    version = args.tiktoken_version

    try:
        reason = ensure_tiktoken(args.npm_prefix, version)
    except (RuntimeError, FileNotFoundError) as e:
        print("parity: cannot install npm tiktoken: %s" % e)
        return 1
    if reason:
        print("parity: SKIPPED: %s; cannot install tiktoken@%s to compare against" % (reason, version))
        return SKIP

    env = dict(os.environ, NJ_NPM_PREFIX=os.path.abspath(args.npm_prefix))
    side = ["node", os.path.join(HERE, "tiktoken_side.mjs")]
    with open(args.corpus, encoding="utf-8", newline="") as f:
        corpus = f.read()
    lines = corpus.split("\n")
    if lines and lines[-1] == "":
        lines.pop()

    num_ranks = sum(1 for l in open(os.path.join(args.model, "tiktoken.model")) if l.strip())
    chats = [t % (num_ranks + 100) if "%d" in t else t for t in chat_texts()]
    fuzz = fuzz_texts()
    edges = edge_texts()
    sweep = class_boundary_texts(args.probe, args.model)

    try:
        total_ids = 0
        report = []
        for name, texts in (("corpus lines", lines), ("whole corpus", [corpus]), ("edge cases", edges),
                            ("random texts", fuzz)):
            data = jsonl(texts)
            n = compare(name, texts, run([args.probe, args.model, "encode"], data),
                        run(side + ["encode", args.model], data, env))
            report.append("%s: %d texts, %d ids" % (name, len(texts), n))
            total_ids += n
        data = jsonl(chats)
        n = compare("specials", chats, run([args.probe, args.model, "specials"], data),
                    run(side + ["specials", args.model], data, env))
        report.append("specials on: %d texts, %d ids" % (len(chats), n))
        total_ids += n

        texts = lines + [corpus] + edges + fuzz + sweep
        data = jsonl(texts)
        pieces_out = run([args.probe, args.model, "pieces"], data)
        pieces = [json.loads(l) for l in pieces_out.decode().split("\n")[:-1]]
        piece_ids = []
        # The ids tiktoken must produce if it splits exactly as C++ did (see tiktoken_side.mjs).
        vocab = {}
        for ps in pieces:
            ids = []
            for p in ps:
                b = p.encode("utf-8")
                if len(b) == 1:
                    ids.append(b[0])
                else:
                    ids.append(vocab.setdefault(b, 256 + len(vocab)))
            piece_ids.append(json.dumps(ids))
        pieces_path = os.path.join(os.path.abspath(args.npm_prefix), "cpp_pieces.jsonl")
        with open(pieces_path, "wb") as f:
            f.write(pieces_out)
        n = compare("pre-tokenization", texts, ("\n".join(piece_ids) + "\n").encode(),
                    run(side + ["pieces", pieces_path], data, env), detail=pieces)
        report.append("pre-tokenization: %d texts (%d class-boundary sweeps), %d pieces" % (len(texts), len(sweep), n))
    except (AssertionError, RuntimeError) as e:
        print("parity: FAILED: %s" % e)
        return 1

    for r in report:
        print("parity: " + r)
    print("parity: tiktoken %s (npm) and the C++ encoder agree on %d ids over %d corpus lines and %d other texts"
          % (version, total_ids, len(lines), 1 + len(edges) + len(fuzz) + len(chats)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

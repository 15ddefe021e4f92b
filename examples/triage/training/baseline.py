#!/usr/bin/env python3
"""A diagnostic, not the demo model: a bag-of-words (word unigrams + bigrams, optionally
character n-grams) logistic regression trained on the same generated corpus as train.py and
scored on dev.jsonl + heldout.jsonl (the 72 tickets train.py's selection rule counts). It
answers one question: is the corpus or the transformer the limit? If a linear model on the
corpus also stalls near the transformer's count, more training of the transformer will not
help; if it does much better, the transformer is undertrained or too small.

  /usr/bin/python3 examples/triage/training/baseline.py [--seed 1] [--corpus 20000] [--wide-corpus]
      [--chars] [--epochs 20] [--l2 1e-4]

Never reads the 24 example tickets (the test set). Needs numpy and PyTorch (development only).
"""
import argparse
import math
import os
import re
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import corpus  # noqa: E402
from lexicon import LABELS  # noqa: E402
from task import read_jsonl  # noqa: E402

_WORD = re.compile(r"[a-z0-9']+")


def features(text, chars):
    words = _WORD.findall(text.lower())
    out = ["w:" + w for w in words] + ["b:%s_%s" % p for p in zip(words, words[1:])]
    if chars:
        t = " " + " ".join(words) + " "
        out += ["c:" + t[i:i + n] for n in (3, 4) for i in range(len(t) - n + 1)]
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--corpus", type=int, default=20000)
    ap.add_argument("--wide-corpus", action="store_true")
    ap.add_argument("--plain-corpus", type=float, default=0.0, help="fraction of plain tickets (lexicon_plain.py)")
    ap.add_argument("--plain-casual", type=float, default=0.0)
    ap.add_argument("--chars", action="store_true", help="add character 3- and 4-grams")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--l2", type=float, default=1e-4)
    ap.add_argument("--min-count", type=int, default=2)
    a = ap.parse_args(argv)
    torch.manual_seed(a.seed)
    torch.set_num_threads(1)
    t0 = time.time()
    data = corpus.generate(a.seed, a.corpus, a.wide_corpus, a.plain_corpus, a.plain_casual)
    evals = {n: [(r["id"], r["text"], r["label"]) for r in read_jsonl(os.path.join(HERE, n + ".jsonl"))]
             for n in ("dev", "heldout")}
    counts = {}
    feats = [features(t, a.chars) for t, _ in data]
    for fs in feats:
        for f in set(fs):
            counts[f] = counts.get(f, 0) + 1
    vocab = {f: i for i, f in enumerate(sorted(f for f, c in counts.items() if c >= a.min_count))}

    def matrix(fl):
        rows, cols, vals = [], [], []
        for r, fs in enumerate(fl):
            idx = {}
            for f in fs:
                if f in vocab:
                    idx[vocab[f]] = idx.get(vocab[f], 0) + 1
            norm = math.sqrt(sum(v * v for v in idx.values())) or 1.0
            for c, v in idx.items():
                rows.append(r)
                cols.append(c)
                vals.append(v / norm)
        return torch.sparse_coo_tensor([rows, cols], vals, (len(fl), len(vocab))).coalesce()

    X = matrix(feats)
    y = torch.tensor([LABELS.index(l) for _, l in data])
    W = torch.zeros(len(vocab), len(LABELS), requires_grad=True)
    b = torch.zeros(len(LABELS), requires_grad=True)
    opt = torch.optim.Adam([W, b], lr=0.05)
    n = len(data)
    for ep in range(a.epochs):
        perm = torch.randperm(n)
        for k in range(0, n, 512):
            ix = perm[k:k + 512]
            xb = torch.index_select(X, 0, ix)
            logits = torch.sparse.mm(xb, W) + b
            loss = torch.nn.functional.cross_entropy(logits, y[ix], label_smoothing=0.1) + a.l2 * (W * W).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    total, scored = 0, 0
    with torch.no_grad():
        for name, items in evals.items():
            Xe = matrix([features(t, a.chars) for _, t, _ in items])
            p = torch.softmax(torch.sparse.mm(Xe, W) + b, -1)
            pred = p.argmax(-1).tolist()
            ok = sum(LABELS[k] == l for k, (_, _, l) in zip(pred, items))
            nll = -sum(math.log(p[i, LABELS.index(l)].item()) for i, (_, _, l) in enumerate(items)) / len(items)
            total += ok
            scored += len(items)
            print("%s: %d/%d, log-loss %.3f" % (name, ok, len(items), nll))
            for (iid, _, l), k, row in zip(items, pred, p.tolist()):
                if LABELS[k] != l:
                    print("  %-6s %-16s -> %-16s %s" % (iid, l, LABELS[k], " ".join("%.2f" % v for v in row)))
    print("dev + held-out: %d/%d (features %d, %.0f s)" % (total, scored, len(vocab), time.time() - t0))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Trains the triage demo model and writes it as a K3 checkpoint (development only: needs
PyTorch, `apt-get install python3-torch`; nothing else in the project does).

  /usr/bin/python3 examples/triage/training/train.py [--out examples/triage/model]
      [--work build/triage-training] [--bin build/runner/nightjar] [--score-test]
  /usr/bin/python3 examples/triage/training/train.py --evaluate MODEL_DIR [--score-test]
  /usr/bin/python3 examples/triage/training/train.py --export WORK/best.pt [--out DIR] ...

Steps (README.md in this directory says why each is so):
  1. the tokenizer: k3_tokenizer_gen.write_tokenizer (the demo tokenizer, K3's format);
     bpe.py's ids are checked against `nightjar tokenize` (--bin) on every evaluation ticket
     and 200 corpus tickets;
  2. the corpus: corpus.generate(seed, --corpus) tickets, every one passing the exclusion
     guards against the test, held-out and development sets;
  3. training: next-token cross-entropy on the label's tokens after the prompt of
     triage.yaml's template (prefix computed once per batch and continued), BF16 and MXFP4
     rounding simulated, AdamW, --steps steps, MoE routing balanced by the bias update
     (no auxiliary loss); training stops at --steps, well before the training loss saturates;
     with --select-every N the model of the best step (from --select-from on, every N steps)
     on dev.jsonl + heldout.jsonl is kept instead of the last (scoring changes no random
     stream: the steps' weights are those of a run without it), and saved at every new best
     as --work's best.pt (`--export` finishes a run stopped early from it);
  4. export: the checkpoint (export.py) into --out, then the PyTorch forward pass on the
     stored weights: accuracy on the development and held-out sets (and, with --score-test,
     the test set's count only), and the logits on three prompts written to
     torch_logits.json (the engine-agreement test reads it).

Deterministic: the same arguments, PyTorch build and BLAS give the same bytes (seeded
generators, torch.use_deterministic_algorithms, a fixed thread count).
"""
import argparse
import copy
import hashlib
import json
import math
import os
import random
import subprocess
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # before the BLAS loads: one thread, fixed sums
os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "reference"))

import bpe  # noqa: E402
import corpus  # noqa: E402
import export  # noqa: E402
import k3_tokenizer_gen  # noqa: E402
from k3_torch import K3, Dims  # noqa: E402
from task import Task, read_jsonl  # noqa: E402

LOGITS_FILE = os.path.join(HERE, "torch_logits.json")
MAX_DOC_TOKENS = 160          # longer generated tickets are cut (the evaluation ones are far shorter)


def log(msg):
    print(msg, flush=True)


# ----------------------------------------------------------------------------- data

def engine_ids(nj, model_dir, text):
    p = subprocess.run([nj, "tokenize", "--model", model_dir, "--text", text, "--output", "json"],
                       capture_output=True, text=True, check=True)
    return json.loads(p.stdout)["ids"]


def check_tokenizer(tok, nj, model_dir, texts):
    bad = [t for t in texts if tok.encode(t) != engine_ids(nj, model_dir, t)]
    if bad:
        sys.exit("train: bpe.py and `nightjar tokenize` disagree on %d texts, e.g. %r" % (len(bad), bad[0]))


def evaluation_sets():
    """{set name: [(id, text, label)]}: dev.jsonl, heldout.jsonl and the 24 example tickets
    with the labels listed in tests/cli/test_triage_model.py."""
    sys.path.insert(0, os.path.join(REPO, "tests", "cli"))
    from test_triage_model import EXPECTED_LABELS
    out = {}
    for name in ("dev", "heldout"):
        out[name] = [(r["id"], r["text"], r["label"]) for r in read_jsonl(os.path.join(HERE, name + ".jsonl"))]
    test = []
    for fname, label in sorted(EXPECTED_LABELS.items()):
        with open(os.path.join(corpus.TICKETS_DIR, fname), encoding="utf-8") as f:
            test.append((fname, f.read(), label))
    out["test"] = test
    return out


class Example:
    def __init__(self, task, text, label):
        doc = task.tok.encode(text)[:MAX_DOC_TOKENS]
        self.doc_len = len(doc)
        self.ids = doc + task.suffix_ids                  # the prompt after the prefix
        self.label = task.labels.index(label)


def make_batch(examples, task, rng, noise):
    """ids [B, T]: each prompt after the prefix followed by the label trie's feed path (the
    tokens leading to its branching node), zero-padded; and each row's last prompt position.
    `noise`: the fraction of document tokens replaced by random ones (robustness to words the
    corpus never had)."""
    path = task.feed_paths[0] if task.feed_paths else []
    seqs, last = [], []
    for ex in examples:
        ids = list(ex.ids)
        for j in range(ex.doc_len):
            if rng.random() < noise:
                ids[j] = rng.randrange(task.tok.num_ranks)
        last.append(len(ids) - 1)
        seqs.append(ids + path)
    T = max(len(s) for s in seqs)
    ids = torch.zeros(len(seqs), T, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.tensor(s)
    return ids, last


def next_token_targets(examples, T):
    """[B, T] the next-token targets of the auxiliary language-model loss: at document
    position j the clean (un-noised) document token j + 1; -1 elsewhere (the suffix, the
    label path, the padding). Draws no random numbers."""
    tgt = torch.full((len(examples), T), -1, dtype=torch.long)
    for i, ex in enumerate(examples):
        if ex.doc_len > 1:
            tgt[i, :ex.doc_len - 1] = torch.tensor(ex.ids[1:ex.doc_len])
    return tgt


def batches(examples, batch, rng):
    """One epoch: shuffled, then sorted by length within groups of 16 batches (less padding),
    batch order shuffled again."""
    order = list(range(len(examples)))
    rng.shuffle(order)
    out = []
    group = 16 * batch
    for g in range(0, len(order), group):
        chunk = sorted(order[g:g + group], key=lambda i: len(examples[i].ids))
        out += [chunk[k:k + batch] for k in range(0, len(chunk), batch) if len(chunk[k:k + batch]) == batch]
    rng.shuffle(out)
    return out


# ----------------------------------------------------------------------------- model use

def label_log_probs(model, task, h, last):
    """[B, labels] log of the label distribution the engine reports (jobs/spec/label_trie.h): each
    label's log-probabilities at the branching nodes of its path, summed, normalized over the
    labels. h [B, T, hidden] comes from make_batch's ids; node k of the feed path sits k
    positions after the prompt's last one."""
    rows = torch.arange(h.shape[0])
    last = torch.tensor(last)
    at = {}
    scores = []
    for path in task.scored_positions():
        score = 0
        for node, tok in path:
            if node not in at:
                at[node] = torch.log_softmax(model.logits(h[rows, last + len(node)]), dim=-1)
            score = score + at[node][:, tok]
        scores.append(score)
    return torch.log_softmax(torch.stack(scores, dim=1), dim=1)


def loss_of(model, task, ids, last, labels, smoothing, loads=None, lm_targets=None, lm_weight=0.0):
    """Cross-entropy of the reported label distribution against the true label, smoothed:
    (1 - smoothing) on the true label and smoothing spread evenly over all labels, so the
    model is never pushed to certainty. With lm_weight > 0, plus lm_weight times the mean
    next-token cross-entropy over the document positions of lm_targets (next_token_targets):
    the auxiliary language-model loss. Returns (loss, label loss, language-model loss)."""
    _, st = model(torch.tensor([task.prefix_ids]), loads=loads)
    h, _ = model(ids, K3.expand_state(st, ids.shape[0]), loads=loads)
    logp = label_log_probs(model, task, h, last)
    n = logp.shape[1]
    target = torch.full_like(logp, smoothing / n)
    target[torch.arange(len(labels)), torch.tensor(labels)] += 1 - smoothing
    cls = -(target * logp).sum(1).mean()
    if not lm_weight:
        return cls, cls, None
    keep = lm_targets >= 0
    lm = torch.nn.functional.cross_entropy(model.logits(h[keep]), lm_targets[keep])
    return cls + lm_weight * lm, cls, lm


@torch.no_grad()
def classify(model, task, texts, batch=32):
    """[label probabilities] per text, scored over the label trie as the engine does."""
    _, st0 = model(torch.tensor([task.prefix_ids]))
    paths = task.feed_paths or [[]]
    out = []
    for b in range(0, len(texts), batch):
        docs = [task.document_ids(t) for t in texts[b:b + batch]]
        rows = {}                                          # (doc, node) -> log-softmax row
        for path in paths:
            seqs = [d + path for d in docs]
            T = max(len(s) for s in seqs)
            ids = torch.zeros(len(seqs), T, dtype=torch.long)
            for i, s in enumerate(seqs):
                ids[i, :len(s)] = torch.tensor(s)
            h, _ = model(ids, K3.expand_state(st0, len(seqs)))
            for i, d in enumerate(docs):
                for k in range(len(path) + 1):
                    node = tuple(path[:k])
                    if node in task.branching and (i, node) not in rows:
                        rows[(i, node)] = torch.log_softmax(model.logits(h[i, len(d) - 1 + k]).double(), -1)
        for i in range(len(docs)):
            out.append(task.probabilities(lambda node, i=i: rows[(i, node)]))
    return out


def evaluate(model, task, items):
    """(accuracy, mean log-loss, [(id, expected, predicted, p)])."""
    probs = classify(model, task, [t for _, t, _ in items])
    rows, correct, nll = [], 0, 0.0
    for (iid, _, label), p in zip(items, probs):
        k = max(range(len(p)), key=lambda j: p[j])
        pred = task.labels[k]
        correct += pred == label
        nll -= math.log(max(p[task.labels.index(label)], 1e-12))
        rows.append((iid, label, pred, p))
    return correct / len(items), nll / len(items), rows


def balance_router(model, loads, rate):
    """Auxiliary-loss-free balancing: raise the selection bias of experts chosen less than
    the mean in this step, lower it for the others."""
    with torch.no_grad():
        for L, counts in loads.items():
            bias = getattr(model, ("layers.%d.block_sparse_moe.gate.e_score_correction_bias" % L).replace(".", "__"))
            c = torch.tensor(counts, dtype=torch.float32)
            bias += rate * torch.sign(c.mean() - c)


# ----------------------------------------------------------------------------- main

def blas_library():
    """The BLAS this process loaded (the bits of a trained model depend on it)."""
    with open("/proc/self/maps") as f:
        libs = {line.split()[-1] for line in f if "blas" in line.split()[-1]}
    return ", ".join(sorted(libs)) or "none found"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--out", default=os.path.join(REPO, "examples", "triage", "model"))
    ap.add_argument("--work", default=os.path.join(REPO, "build", "triage-training"))
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "runner", "nightjar"),
                    help="the nightjar program, to check the tokenizer")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--corpus", type=int, default=20000, help="generated training tickets")
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--weight-decay", type=float, default=0.05)
    ap.add_argument("--noise", type=float, default=0.1, help="document tokens replaced at random")
    ap.add_argument("--smoothing", type=float, default=0.1,
                    help="label smoothing: keeps the label probabilities away from 0 and 1")
    ap.add_argument("--lm-weight", type=float, default=0.0,
                    help="auxiliary language-model loss: this weight times the next-token "
                         "cross-entropy on the training tickets' own (un-noised) text, added to "
                         "the label loss (0: none, the committed model's run)")
    ap.add_argument("--lm-pretrain", type=int, default=0, metavar="N",
                    help="N steps of the next-token loss alone on the training tickets before the "
                         "label training (0: none)")
    ap.add_argument("--wide-corpus", action="store_true",
                    help="the wide corpus: lexicon_wide.py's sentence structures, registers, asides "
                         "and more 'other' messages (corpus.generate(..., wide=True))")
    ap.add_argument("--plain-corpus", type=float, default=0.0, metavar="F",
                    help="the fraction F of the corpus made of plain tickets (lexicon_plain.py: one or "
                         "two sentences describing the situation without a request form; "
                         "corpus.generate(..., plain=F)); 0: none (the committed model's run used 0.3)")
    ap.add_argument("--plain-casual", type=float, default=0.0, metavar="F",
                    help="with --plain-corpus: the fraction F of the plain tickets in a casual chat "
                         "lead or tail, lowercased (lexicon_plain.P_CASUAL); 0: none (the committed model's run: 0.5)")
    ap.add_argument("--hidden", type=int, default=64, help="the model's hidden size")
    ap.add_argument("--experts", type=int, default=8, help="routed experts per MoE layer")
    ap.add_argument("--select-every", type=int, default=0, metavar="N",
                    help="checkpoint selection: every N steps from --select-from on, score the model on "
                         "dev.jsonl + heldout.jsonl and keep the best (most correct, then lowest "
                         "log-loss); 0: keep the last step")
    ap.add_argument("--select-from", type=int, default=300,
                    help="the first step considered by --select-every")
    ap.add_argument("--threads", type=int, default=1,
                    help="PyTorch threads (1: on a shared 2-core machine a second thread only waits)")
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--score-test", action="store_true",
                    help="also score the 24 example tickets (the test set): only for a candidate "
                         "chosen on the development and held-out sets; prints the count only")
    ap.add_argument("--logits", default=LOGITS_FILE,
                    help="where the PyTorch logits on three prompts are written (the test reads the default)")
    ap.add_argument("--evaluate", metavar="MODEL_DIR",
                    help="train nothing: score the checkpoint in MODEL_DIR (a finished run's --out) as a "
                         "run does after training, --score-test included; writes no model and no logits")
    ap.add_argument("--ema", type=float, default=0.0, metavar="DECAY",
                    help="with --select-every: also keep a running average of the weights (decay "
                         "DECAY per step, e.g. 0.99), score it at the same steps and save its best "
                         "step as --work's best-ema.pt, a second candidate (the exported model stays "
                         "the trained one; the average changes no training step)")
    ap.add_argument("--export", metavar="STATE",
                    help="train nothing: finish the run whose PyTorch state is STATE (its --work's "
                         "model.pt, or best.pt: the best step scored so far by --select-every, saved "
                         "at every new best, so a run stopped early still gives its best scored step) "
                         "as a run ends: checkpoint into --out, accuracy, --logits; give the run's "
                         "--hidden and --experts")
    a = ap.parse_args(argv)

    t0 = time.time()
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    torch.use_deterministic_algorithms(True)
    os.makedirs(a.work, exist_ok=True)

    tokdir = os.path.join(a.work, "tokenizer")
    vocab = k3_tokenizer_gen.write_tokenizer(tokdir)
    tok = bpe.Tokenizer(tokdir)
    task = Task(tok)
    if len(task.feed_paths) > 1:
        sys.exit("train: the labels' trie branches below the root on more than one path; "
                 "make_batch feeds one")
    sets = evaluation_sets()
    if a.export:
        model = K3(Dims(vocab=vocab, hidden=a.hidden, experts_n=a.experts), a.seed)
        model.load_state_dict(torch.load(a.export))
        log("exporting %s" % a.export)
        finish(model, task, sets, a, t0)
        return
    if a.evaluate:
        report_accuracy(export.load_checkpoint(K3(dims_of(a.evaluate), a.seed), a.evaluate), task, sets,
                        a.score_test)
        return
    data = corpus.generate(a.seed, a.corpus, a.wide_corpus, a.plain_corpus, a.plain_casual)
    check_tokenizer(tok, a.bin, tokdir, [t for s in sets.values() for _, t, _ in s] +
                    [t for t, _ in data[:200]] + [task.prefix_text, task.suffix_text])
    log("PyTorch %s, BLAS %s" % (torch.__version__, blas_library()))
    log("tokenizer: vocabulary %d, matches `nightjar tokenize`; labels %s; prefix %d tokens"
        % (vocab, task.label_ids, len(task.prefix_ids)))
    train = [Example(task, t, l) for t, l in data]
    gen_dev = [(str(i), t, l) for i, (t, l) in enumerate(corpus.generate(a.seed + 1000, 256, a.wide_corpus,
                                                                                       a.plain_corpus, a.plain_casual))]
    log("corpus: %d tickets, %.1f tokens on average (%.1f s)"
        % (len(train), sum(len(e.ids) for e in train) / len(train), time.time() - t0))

    model = K3(Dims(vocab=vocab, hidden=a.hidden, experts_n=a.experts), a.seed)
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for n, p in model.named_weights() if p.requires_grad and p.dim() >= 2]
    other = [p for n, p in model.named_weights() if p.requires_grad and p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": other, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.98))
    log("model: %d parameters" % sum(p.numel() for p in params))
    rng = random.Random(a.seed)
    selection = sets["dev"] + sets["heldout"]
    best = None                                   # (correct, -log-loss, step, state)
    ema = copy.deepcopy(model) if a.ema else None   # the running average of the weights
    best_ema = None
    step, epoch_batches = 0, []
    t_train = time.time()
    if a.lm_pretrain:
        lm_pretrain(model, opt, params, train, task, a)
    while step < a.steps:
        if not epoch_batches:
            epoch_batches = batches(train, a.batch, rng)
        idx = epoch_batches.pop()
        warm = min(1.0, (step + 1) / 50)
        lr = a.lr * warm * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / a.steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        exs = [train[i] for i in idx]
        ids, last = make_batch(exs, task, rng, a.noise)
        loads = {L: [0] * model.d.experts_n for L in range(model.d.dense_layers, model.d.layers)}
        lm_targets = next_token_targets(exs, ids.shape[1]) if a.lm_weight else None
        loss, cls_loss, lm_loss = loss_of(model, task, ids, last, [e.label for e in exs], a.smoothing,
                                          loads, lm_targets, a.lm_weight)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        balance_router(model, loads, 1e-3)
        step += 1
        if ema is not None:
            with torch.no_grad():
                d = min(a.ema, step / (step + 10))
                for pe, p in zip(ema.parameters(), model.parameters()):
                    pe.mul_(d).add_(p.detach(), alpha=1 - d)
        if step % 10 == 0:
            lm_part = "" if lm_loss is None else " (label %.4f, next-token %.4f)" % (cls_loss.item(), lm_loss.item())
            log("step %d loss %.4f%s lr %.2e (%.2f s/step)"
                % (step, loss.item(), lm_part, lr, (time.time() - t_train) / step))
        if step % a.eval_every == 0 or step == a.steps:
            for name, items in (("generated dev", gen_dev), ("dev", sets["dev"])):
                acc, nll, _ = evaluate(model, task, items)
                log("  %s: accuracy %.3f, log-loss %.3f" % (name, acc, nll))
        if a.select_every and step >= a.select_from and (step % a.select_every == 0 or step == a.steps):
            acc, nll, _ = evaluate(model, task, selection)
            correct = round(acc * len(selection))
            log("  selection (dev + held-out): %d/%d, log-loss %.4f" % (correct, len(selection), nll))
            if best is None or (correct, -nll) > best[:2]:
                best = (correct, -nll, step, copy.deepcopy(model.state_dict()))
                torch.save(best[3], os.path.join(a.work, "best.pt"))     # for --export, if stopped
            if ema is not None:
                acc, nll, _ = evaluate(ema, task, selection)
                correct = round(acc * len(selection))
                log("  selection, average of the weights (--ema): %d/%d, log-loss %.4f"
                    % (correct, len(selection), nll))
                if best_ema is None or (correct, -nll) > best_ema[:2]:
                    best_ema = (correct, -nll, step)
                    torch.save(ema.state_dict(), os.path.join(a.work, "best-ema.pt"))
    log("trained %d steps in %.0f s" % (a.steps, time.time() - t_train))
    if best is not None:
        model.load_state_dict(best[3])
        log("selected the model of step %d: dev + held-out %d/%d, log-loss %.4f"
            % (best[2], best[0], len(selection), -best[1]))
    if best_ema is not None:
        log("the average of the weights (--ema %g): best at step %d, dev + held-out %d/%d, log-loss "
            "%.4f; a candidate of its own: train.py --export %s"
            % (a.ema, best_ema[2], best_ema[0], len(selection), -best_ema[1],
               os.path.join(a.work, "best-ema.pt")))
    torch.save(model.state_dict(), os.path.join(a.work, "model.pt"))
    finish(model, task, sets, a, t0)


def lm_pretrain(model, opt, params, train, task, a):
    """--lm-pretrain N: N steps of the next-token loss alone on the training tickets (their
    prompts, as the label loss sees them: the template's prefix continued by the ticket),
    before the label training; warm-up 50 steps, then a constant --lr. Its own random stream
    (seed + 2000), so the label training's batches are those of a run without it."""
    rng = random.Random(a.seed + 2000)
    t = time.time()
    epoch_batches = []
    for step in range(a.lm_pretrain):
        if not epoch_batches:
            epoch_batches = batches(train, a.batch, rng)
        exs = [train[i] for i in epoch_batches.pop()]
        for g in opt.param_groups:
            g["lr"] = a.lr * min(1.0, (step + 1) / 50)
        ids, last = make_batch(exs, task, rng, a.noise)
        loads = {L: [0] * model.d.experts_n for L in range(model.d.dense_layers, model.d.layers)}
        _, st = model(torch.tensor([task.prefix_ids]), loads=loads)
        h, _ = model(ids, K3.expand_state(st, ids.shape[0]), loads=loads)
        tgt = next_token_targets(exs, ids.shape[1])
        keep = tgt >= 0
        loss = torch.nn.functional.cross_entropy(model.logits(h[keep]), tgt[keep])
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        balance_router(model, loads, 1e-3)
        if (step + 1) % 10 == 0:
            log("pre-training step %d next-token loss %.4f (%.2f s/step)"
                % (step + 1, loss.item(), (time.time() - t) / (step + 1)))


def finish(model, task, sets, a, t0):
    """The end of a run: the checkpoint into --out, the accuracy of the stored weights, the
    logits file."""
    summary = export.write_checkpoint(model, a.out)
    log("checkpoint: %s, %.2f MB, %d tensors" % (a.out, summary["disk_bytes"] / 1e6, summary["tensors"]))
    stored = export.load_checkpoint(K3(model.d, a.seed), a.out)
    report_accuracy(stored, task, sets, a.score_test)
    write_torch_logits(stored, task, sets, a.logits)
    digest = hashlib.sha256(open(os.path.join(a.out, "model.safetensors"), "rb").read()).hexdigest()
    log("model.safetensors sha256 %s; total %.0f s" % (digest, time.time() - t0))


def dims_of(model_dir):
    """The Dims of a checkpoint written by write_checkpoint (its config.json)."""
    with open(os.path.join(model_dir, "config.json")) as f:
        c = json.load(f)["text_config"]
    d = Dims(vocab=c["vocab_size"], hidden=c["hidden_size"], experts_n=c["num_experts"])
    same = {"num_hidden_layers": d.layers, "num_experts_per_token": d.top_k,
            "num_shared_experts": d.shared, "routed_expert_hidden_size": d.latent,
            "moe_intermediate_size": d.moe_inter, "intermediate_size": d.dense_inter}
    for key, want in same.items():
        if c[key] != want:
            sys.exit("train: %s has %s %s; train.py makes only %s" % (model_dir, key, c[key], want))
    return d


def report_accuracy(model, task, sets, score_test):
    """Prints the accuracy on the development and held-out sets, per ticket, and with
    `score_test` the test set's count only (no per-ticket results to tune against)."""
    for name in ("dev", "heldout") + (("test",) if score_test else ()):
        acc, nll, rows = evaluate(model, task, sets[name])
        log("%s: accuracy %.3f (%d/%d), log-loss %.3f" % (name, acc, round(acc * len(rows)), len(rows), nll))
        if name == "test":
            continue
        for iid, want, got, p in rows:
            log("  %-34s %-16s %-16s %s" % (iid, want, got + (" " if got == want else " X"),
                                             " ".join("%.3f" % x for x in p)))


def write_torch_logits(model, task, sets, path):
    """The PyTorch forward pass's logits on the stored weights, for three prompts (a test
    ticket with the label trie's branch token fed, a held-out and a development ticket): the
    full last row, and at every position the label tokens' and 11 fixed tokens' logits."""
    texts = [sets["test"][0][1], sets["heldout"][0][1], sets["dev"][0][1]]
    extra = [task.feed_paths[0] if task.feed_paths else [], [], []]
    cols = sorted({t for ids in task.label_ids for t in ids} | {0, 32, 101, 500, 1000, 1500, 2000,
                                                                 2500, 3000, 3300, 3500})
    prompts = []
    with torch.no_grad():
        for text, tail in zip(texts, extra):
            ids = task.prefix_ids + task.document_ids(text) + tail
            h, _ = model(torch.tensor([ids]))
            logits = model.logits(h[0])
            prompts.append({"ids": ids, "columns": cols,
                            "logits_at_columns": [[float("%.7g" % v) for v in row[cols].tolist()] for row in logits],
                            "last_logits": [float("%.7g" % v) for v in logits[-1].tolist()]})
    with open(path, "w") as f:
        json.dump({"what": "PyTorch (train.py, k3_torch.py) float32 forward pass on the stored weights "
                           "of examples/triage/model; values printed with 7 significant digits",
                   "prompts": prompts}, f)
        f.write("\n")
    log("wrote %s" % path)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Trains the story model (examples/stories/model) and writes it as a K3 checkpoint
(development only: needs PyTorch, `apt-get install python3-torch`; nothing else does).

  /usr/bin/python3 examples/stories/training/train.py [--out examples/stories/model]
      [--work build/stories-training] [--bin build/runner/nightjar]

The pipeline is the triage model's (examples/triage/training: k3_torch.py is the K3 forward
pass in PyTorch with BF16 and MXFP4 rounding simulated, export.py writes the checkpoint and
checks every stored value, bpe.py is the tokenizer), with a language-model objective:

  1. the tokenizer: the demo tokenizer (tests/reference/k3_tokenizer_gen.py, K3's format);
     bpe.py's ids are checked against `nightjar tokenize` (--bin) on 50 stories;
  2. the corpus: corpus.generate(seed, --stories) stories, each followed by the
     end-of-sequence token, as one stream of ids; held-out stories from seed + 1000;
  3. training: next-token cross-entropy on windows of --seq tokens drawn from the stream
     at random offsets, --batch windows a step, AdamW with warm-up and a cosine schedule,
     MoE routing balanced by the bias update (no auxiliary loss);
  4. export: the checkpoint into --out, then the PyTorch forward pass on the stored weights:
     the held-out loss, a greedy story from a prompt, and the logits on three prompts
     written to torch_logits.json (tests/cli/test_stories_model.py reads it).

Deterministic: the same arguments, PyTorch build and BLAS give the same bytes (seeded
generators, torch.use_deterministic_algorithms, one thread).
"""
import argparse
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
PIPELINE = os.path.join(REPO, "examples", "triage", "training")
sys.path.insert(0, os.path.join(REPO, "tests", "reference"))
sys.path.insert(0, PIPELINE)
sys.path.insert(0, HERE)                  # first: this directory's corpus.py, not the triage one

import bpe  # noqa: E402
import corpus  # noqa: E402
import export  # noqa: E402
import k3_tokenizer_gen  # noqa: E402
from k3_torch import K3, Dims  # noqa: E402

LOGITS_FILE = os.path.join(HERE, "torch_logits.json")
# The prompts of torch_logits.json and of the greedy sample printed at the end.
PROMPTS = ["Once upon a time there was a little fox called Mia.",
           "There once was a brave hedgehog named Finn. Finn lived in a garden full of flowers.",
           "Long ago there lived a sleepy owl called Sam. Every day Sam liked to count the clouds.\n\n"
           "One day Sam packed a small bag and said, \"I am going to the old castle"]


def log(msg):
    print(msg, flush=True)


def dims(vocab, hidden, experts):
    """The story model's shape: the triage model's layout (3 KDA layers, then one MLA; dense
    layer 0, LatentMoE after it) at twice the width."""
    return Dims(vocab=vocab, hidden=hidden, layers=4, kda_heads=2, kda_head_dim=hidden // 2, heads=2,
                q_lora=hidden // 2, kv_lora=hidden // 2, nope=32, rope=16, v_dim=32, experts_n=experts,
                top_k=2, shared=2, latent=hidden // 2, moe_inter=hidden // 2, dense_inter=2 * hidden)


def eos_id(tokdir):
    with open(os.path.join(tokdir, "tokenizer_config.json")) as f:
        cfg = json.load(f)
    (tid,) = [int(k) for k, v in cfg["added_tokens_decoder"].items() if v["content"] == cfg["eos_token"]]
    return tid


def stream(tok, stories, eos):
    """The stories' ids, each story followed by `eos`, as one list."""
    out = []
    for s in stories:
        out += tok.encode(s) + [eos]
    return out


def check_tokenizer(tok, nj, model_dir, texts):
    for t in texts:
        p = subprocess.run([nj, "tokenize", "--model", model_dir, "--text", t, "--output", "json"],
                           capture_output=True, text=True, check=True)
        if json.loads(p.stdout)["ids"] != tok.encode(t):
            sys.exit("train: bpe.py and `nightjar tokenize` disagree on %r" % t[:80])


def windows(data, starts, seq):
    """[B, seq + 1] ids: the stream's windows at `starts`."""
    return torch.tensor([data[s:s + seq + 1] for s in starts], dtype=torch.long)


def lm_loss(model, ids, loads=None):
    h, _ = model(ids[:, :-1], loads=loads)
    logits = model.logits(h)
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


@torch.no_grad()
def heldout_loss(model, data, seq, n=16):
    """Mean next-token loss (nats) on n fixed windows of the held-out stream."""
    starts = [k * (len(data) - seq - 1) // n for k in range(n)]
    return lm_loss(model, windows(data, starts, seq)).item()


def balance_router(model, loads, rate):
    """Auxiliary-loss-free balancing (as train.py of the triage model): raise the selection
    bias of experts chosen less than the mean in this step, lower it for the others."""
    with torch.no_grad():
        for L, counts in loads.items():
            bias = getattr(model, ("layers.%d.block_sparse_moe.gate.e_score_correction_bias" % L).replace(".", "__"))
            c = torch.tensor(counts, dtype=torch.float32)
            bias += rate * torch.sign(c.mean() - c)


@torch.no_grad()
def greedy(model, prompt_ids, n, eos):
    """Greedy continuation of prompt_ids, up to n tokens or eos (the state carried, as the
    engine decodes)."""
    h, st = model(torch.tensor([prompt_ids]))
    out = []
    for _ in range(n):
        t = int(torch.argmax(model.logits(h[0, -1])))
        out.append(t)
        if t == eos:
            break
        h, st = model(torch.tensor([[t]]), st)
    return out


def decode(tok, ids):
    inv = {r: b for b, r in tok.ranks.items()}
    return b"".join(inv.get(i, b"<%d>" % i) for i in ids).decode("utf-8", "replace")


def write_torch_logits(model, tok, path):
    """The PyTorch forward pass's logits on the stored weights for PROMPTS: the full last row,
    and at every position 12 fixed tokens' logits."""
    cols = [0, 32, 101, 500, 1000, 1500, 2000, 2500, 3000, 3255, 3258, 3500]
    prompts = []
    with torch.no_grad():
        for text in PROMPTS:
            ids = tok.encode(text)
            h, _ = model(torch.tensor([ids]))
            logits = model.logits(h[0])
            prompts.append({"ids": ids, "columns": cols,
                            "logits_at_columns": [[float("%.7g" % v) for v in row[cols].tolist()] for row in logits],
                            "last_logits": [float("%.7g" % v) for v in logits[-1].tolist()]})
    with open(path, "w") as f:
        json.dump({"what": "PyTorch (train.py, k3_torch.py) float32 forward pass on the stored weights "
                           "of examples/stories/model; values printed with 7 significant digits",
                   "prompts": prompts}, f)
        f.write("\n")
    log("wrote %s" % path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--out", default=os.path.join(REPO, "examples", "stories", "model"))
    ap.add_argument("--work", default=os.path.join(REPO, "build", "stories-training"))
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "runner", "nightjar"),
                    help="the nightjar program, to check the tokenizer")
    ap.add_argument("--logits", default=LOGITS_FILE,
                    help="where the PyTorch logits on three prompts are written (the test reads the default)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--stories", type=int, default=5000, help="generated training stories")
    ap.add_argument("--steps", type=int, default=700)
    ap.add_argument("--batch", type=int, default=8, help="windows per step")
    ap.add_argument("--seq", type=int, default=256, help="tokens per window")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--weight-decay", type=float, default=0.05)
    ap.add_argument("--hidden", type=int, default=128, help="the model's hidden size")
    ap.add_argument("--experts", type=int, default=8, help="routed experts per MoE layer")
    ap.add_argument("--kda-chunk", type=int, default=16,
                    help="KDA's recurrence in chunks of this many positions (k3_torch.kda_chunked; "
                         "0: step by step, the same function, slower)")
    ap.add_argument("--threads", type=int, default=1,
                    help="PyTorch threads (1: on a shared 2-core machine a second thread only waits)")
    ap.add_argument("--eval-every", type=int, default=100)
    a = ap.parse_args(argv)

    t0 = time.time()
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    torch.use_deterministic_algorithms(True)
    os.makedirs(a.work, exist_ok=True)
    tokdir = os.path.join(a.work, "tokenizer")
    vocab = k3_tokenizer_gen.write_tokenizer(tokdir)
    tok = bpe.Tokenizer(tokdir)
    eos = eos_id(tokdir)
    stories = corpus.generate(a.seed, a.stories)
    check_tokenizer(tok, a.bin, tokdir, stories[:50] + PROMPTS)
    data = stream(tok, stories, eos)
    held = stream(tok, corpus.generate(a.seed + 1000, 64), eos)
    log("PyTorch %s; vocabulary %d (eos %d), matches `nightjar tokenize`" % (torch.__version__, vocab, eos))
    log("corpus: %d stories, %d tokens (%.0f per story); held-out %d tokens (%.1f s)"
        % (len(stories), len(data), len(data) / len(stories), len(held), time.time() - t0))

    model = K3(dims(vocab, a.hidden, a.experts), a.seed)
    model.kda_chunk = a.kda_chunk
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for n, p in model.named_weights() if p.requires_grad and p.dim() >= 2]
    other = [p for n, p in model.named_weights() if p.requires_grad and p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": other, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.98))
    log("model: %d parameters" % sum(p.numel() for p in params))
    rng = random.Random(a.seed)
    t_train = time.time()
    for step in range(1, a.steps + 1):
        warm = min(1.0, step / 50)
        lr = a.lr * warm * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - 1) / a.steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        ids = windows(data, [rng.randrange(len(data) - a.seq - 1) for _ in range(a.batch)], a.seq)
        loads = {L: [0] * model.d.experts_n for L in range(model.d.dense_layers, model.d.layers)}
        loss = lm_loss(model, ids, loads)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        balance_router(model, loads, 1e-3)
        if step % 10 == 0:
            log("step %d loss %.4f lr %.2e (%.2f s/step)" % (step, loss.item(), lr, (time.time() - t_train) / step))
        if step % a.eval_every == 0 or step == a.steps:
            log("  held-out loss %.4f" % heldout_loss(model, held, a.seq))
    log("trained %d steps in %.0f s" % (a.steps, time.time() - t_train))
    torch.save(model.state_dict(), os.path.join(a.work, "model.pt"))

    summary = export.write_checkpoint(model, a.out)
    log("checkpoint: %s, %.2f MB, %d tensors" % (a.out, summary["disk_bytes"] / 1e6, summary["tensors"]))
    stored = export.load_checkpoint(K3(model.d, a.seed), a.out)
    stored.kda_chunk = a.kda_chunk
    log("stored weights: held-out loss %.4f" % heldout_loss(stored, held, a.seq))
    log("greedy story from %r:\n%s" % (PROMPTS[0], decode(tok, greedy(stored, tok.encode(PROMPTS[0]), 600, eos))))
    write_torch_logits(stored, tok, a.logits)
    digest = hashlib.sha256(open(os.path.join(a.out, "model.safetensors"), "rb").read()).hexdigest()
    log("model.safetensors sha256 %s; total %.0f s" % (digest, time.time() - t0))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Benchmark: what prefix reuse saves a classify job. A template with a long fixed text
before {document} (--prefix-tokens, ~1.5k by default: instructions and worked examples) is
run over --docs short documents twice per round, in alternating order, each time in a fresh
home through `nightjar run --drain`:
  reuse on    the prefix is prefilled once per job and its saved state restored per document
  reuse off   `run --no-prefix-reuse`: every document prefills prefix + document + suffix
Reported per mode, as medians over --repeats rounds:
  engine s    engine time of the job: every item's prefill + decode time, plus the one prefix
              prefill (its event) with reuse on
  run wall s  wall time of the `run` process (includes opening the model)
  tokens fed  tokens the engine consumed (items + prefix)
  restore     the time to load the saved prefix state, per document (details.prefix_restore_s)
and the ratios off/on of the medians measured in the same run. The answers of both modes are
checked to be identical (the benchmark fails otherwise).

Usage:
  /usr/bin/python3 tests/bench/bench_classify_prefix.py --bin build/runner/nightjar
  cmake --build build --target bench_classify_prefix
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import njtest  # noqa: E402

DOCS = ["I was charged twice for my March subscription, please refund one payment.",
        "The app crashes every time I open the settings page on Android.",
        "Would love a dark mode option for the dashboard.",
        "How do I change the billing address printed on my invoices?",
        "After entering my password the login page just reloads.",
        "Please add an option to export reports as PDF.",
        "What are your support hours on public holidays?",
        "Search returns no results for any query since this morning."]


def fixed_text(binary, model, tokens):
    """English sample text (the tokenizer's training sample) of about `tokens` tokens."""
    src = open(njtest.REPO / "tests/reference/data/bpe_sample/en.txt").read()
    text = ""
    while True:
        text += src
        ids = json.loads(subprocess.run([binary, "tokenize", "--model", model, "--text", text, "--output", "json"],
                                        capture_output=True, text=True, check=True).stdout)["ids"]
        if len(ids) >= tokens:
            break
    # Cut at about `tokens` tokens (proportionally by characters; the count is reported).
    return text[:int(len(text) * tokens / len(ids))].replace("{", "{{").replace("}", "}}")


def one(binary, work, tag, spec, reuse, threads):
    nj = njtest.Nightjar(binary, os.path.join(work, tag))
    job = nj.submit(spec)
    t0 = time.monotonic()
    p = nj.run("run", "--drain", "--threads", str(threads), "--log-seconds", "1000",
               *([] if reuse else ["--no-prefix-reuse"]))
    wall = time.monotonic() - t0
    if p.returncode != 0:
        raise SystemExit(f"run failed: {p.stderr}")
    results = nj.results(job)
    events = [d for _, _, d in nj.events("prefix_prefilled")]
    engine = sum(r["timings"]["prefill_s"] + r["timings"]["decode_s"] for r in results)
    engine += sum(e["prefill_s"] for e in events)
    fed = sum(r["engine"]["tokens_fed"] for r in results) + sum(e["tokens_fed"] for e in events)
    answers = [(r["custom_id"], r["details"]["probabilities"]) for r in results]
    restores = [r["details"]["prefix_restore_s"] for r in results if r["details"]["prefix"] == "restored"]
    return {"restore_s": statistics.median(restores) if restores else None,
            "prefill_s": sum(e["prefill_s"] for e in events),"engine_s": engine, "wall_s": wall, "tokens_fed": fed, "prefills": len(events),
            "answers": answers, "prefix_tokens": results[0]["details"]["prefix_tokens"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", help="a model directory with a tokenizer (default: generate the demo preset)")
    ap.add_argument("--docs", type=int, default=8)
    ap.add_argument("--prefix-tokens", type=int, default=1500)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    binary = os.path.abspath(args.bin)
    work = njtest.scratch_dir("bench-classify-")
    model = os.path.abspath(args.model) if args.model else njtest.make_model(os.path.join(work, "model"), preset="demo")

    labels = ["billing", "bug", "feature request", "other"]
    template = ("You are a support assistant. Read the reference material, then classify the "
                "ticket as one of: {labels}.\n\n" + fixed_text(binary, model, args.prefix_tokens) +
                "\n\nTicket: {document}\nLabel:\n")
    docs = [DOCS[k % len(DOCS)] + f" (ticket {k})" for k in range(args.docs)]
    spec = os.path.join(work, "bench.yaml")
    with open(spec, "w") as f:
        f.write(f"name: bench\nmodel: {json.dumps(model)}\nkind: classify\ntemplate: {json.dumps(template)}\n"
                f"labels: {json.dumps(labels)}\nitems:\n")
        for k, d in enumerate(docs):
            f.write(f"  - {{id: d{k}, document: {json.dumps(d)}}}\n")

    runs = {True: [], False: []}
    for r in range(args.repeats):
        for reuse in ((True, False) if r % 2 == 0 else (False, True)):
            runs[reuse].append(one(binary, work, f"r{r}-{'on' if reuse else 'off'}", spec, reuse, args.threads))
    on, off = runs[True], runs[False]
    if any(x["answers"] != on[0]["answers"] for x in on + off):
        raise SystemExit("FAIL: the answers differ with and without prefix reuse")
    med = {k: {m: statistics.median(x[m] for x in v) for m in ("engine_s", "wall_s", "tokens_fed")}
           for k, v in (("on", on), ("off", off))}
    print(f"classify prefix reuse: {args.docs} documents, prefix {on[0]['prefix_tokens']} tokens, "
          f"{args.repeats} rounds, {args.threads} thread(s), model {model}")
    print(f"  prefix prefills per job with reuse: {[x['prefills'] for x in on]}")
    print(f"  {'mode':<10} {'engine s (median)':>18} {'run wall s (median)':>20} {'tokens fed':>11}")
    for k in ("on", "off"):
        print(f"  reuse {k:<4} {med[k]['engine_s']:>18.3f} {med[k]['wall_s']:>20.3f} {med[k]['tokens_fed']:>11.0f}")
    print(f"  ratio off/on: engine {med['off']['engine_s'] / med['on']['engine_s']:.2f}x, "
          f"wall {med['off']['wall_s'] / med['on']['wall_s']:.2f}x, "
          f"tokens fed {med['off']['tokens_fed'] / med['on']['tokens_fed']:.2f}x")
    print(f"  with reuse: prefix prefill {statistics.median(x['prefill_s'] for x in on):.3f} s once per job; "
          f"restoring its state {statistics.median(x['restore_s'] for x in on) * 1000:.1f} ms per document (medians)")
    print(f"  per-round engine s, on: {[round(x['engine_s'], 3) for x in on]}, "
          f"off: {[round(x['engine_s'], 3) for x in off]}")


if __name__ == "__main__":
    main()

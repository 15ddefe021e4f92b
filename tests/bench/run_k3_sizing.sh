#!/usr/bin/env bash
# What one machine does in a night at K3's size, by memory (the README's sizing table): a
# classify job of documents of ~500 tokens on the released K3 layout, planned by `nightjar plan
# SPEC --output json` under each budget, as `run` would do it (its default schedule and
# window), kernels probed on this machine's cores (--threads), reads at --bandwidth. The
# "with C cores" columns divide the planned compute by C/threads: an estimate (the kernels'
# rows are split statically across threads), not a measurement.
# The model and tokenizer are tests/bench/k3_layout.sh's (made when missing).
#   tests/bench/run_k3_sizing.sh [--bandwidth GBps] [--docs N] [--threads N] [--night-hours H]
set -euo pipefail
cd "$(dirname "$0")/../.."
bandwidth=2.6
docs=100
threads=2
night=10
memories="8GiB 16GiB 32GiB 64GiB 128GiB"
while [ $# -gt 0 ]; do
  case "$1" in
    --bandwidth) bandwidth=$2; shift 2 ;;
    --docs) docs=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --night-hours) night=$2; shift 2 ;;
    --memories) memories=$2; shift 2 ;;
    *) echo "usage: $0 [--bandwidth GBps] [--docs N] [--threads N] [--night-hours H] [--memories 'A B']" >&2; exit 2 ;;
  esac
done
. tests/bench/k3_layout.sh  # nj, model
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 - "$nj" "$model" "$work" "$docs" "$bandwidth" "$threads" "$night" $memories <<'PY'
import json, os, subprocess, sys
nj, model, work, docs, bandwidth, threads, night = sys.argv[1:8]
docs, threads, night = int(docs), int(threads), float(night)
memories = sys.argv[8:]
words = open("tests/reference/data/bpe_sample/en.txt").read().split()
ids = json.loads(subprocess.run([nj, "tokenize", "--model", model, "--text", " ".join(words[:1000]),
                                 "--output", "json"], capture_output=True, text=True, check=True).stdout)["ids"]
n = int(500 * 1000 / len(ids))
with open(os.path.join(work, "docs.jsonl"), "w") as f:
    for i in range(docs):
        f.write(json.dumps({"id": "doc%04d" % i,
                            "text": " ".join(words[(i * 997 + j) % len(words)] for j in range(n))}) + "\n")
rows = []
for memory in memories:
    spec = os.path.join(work, f"k3-{memory}.yaml")
    with open(spec, "w") as f:
        f.write(f"name: k3-night\nmodel: {os.path.abspath(model)}\nkind: classify\nmemory: {memory}\n")
        f.write("template: |\n  Classify the support ticket as one of: {labels}.\n  Ticket: {document}\n  Label:\n")
        f.write("labels: [billing, bug, feature request, other]\ninputs: {jsonl: docs.jsonl}\n")
    p = subprocess.run([nj, "plan", spec, "--bandwidth", bandwidth, "--threads", str(threads), "--output", "json"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        rows.append((memory, None, p.stderr.strip().splitlines()[-1][:80]))
        continue
    rows.append((memory, json.loads(p.stdout), None))
# The kernel probe runs anew in every plan and swings with the machine's load; the compute of
# a document is its FLOPs at the fastest rate any of these plans measured (the least disturbed).
rate = max(j["predicted_flops"] / j["predicted_compute_seconds"] for _, j, _ in rows if j)
print(f"| memory | window (documents) | read per document | TFLOP per document | compute per document "
      f"({threads} cores) | per document | documents in {night:g} h, {threads} cores | 16 cores* | 64 cores* |")
print("|---|---|---|---|---|---|---|---|---|")
for memory, j, error in rows:
    if not j:
        print(f"| {memory} | refused: {error} | | | | | | | |")
        continue
    items = j["items"]
    flops = j["predicted_flops"] / items
    compute = flops / rate
    rest = (j["predicted_seconds"] - j["predicted_compute_seconds"]) / items  # reads not hidden, the prefix
    per = rest + compute
    window = j["window_documents"] if j["window_documents"] is not None else j["batch"]
    def per_night(cores):
        return night * 3600 / (rest + compute * threads / cores)
    print(f"| {memory} | {window} | {j['predicted_bytes_per_item'] / 2**40:.2f} TiB | {flops / 1e12:.0f} | "
          f"{compute / 3600:.2f} h | {per / 3600:.2f} h | {per_night(threads):.1f} | {per_night(16):.0f} | "
          f"{per_night(64):.0f} |")
print(f"\n(compute at {rate / 1e9:.0f} GFLOP/s, the fastest kernel probe of these plans on {threads} threads; "
      f"* the compute divided by cores/{threads}: an estimate, not a measurement; reads at {bandwidth} GB/s; "
      f"{docs} documents of ~500 tokens)")
PY

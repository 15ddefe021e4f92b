#!/usr/bin/env bash
# A night of K3 at its real size, predicted (issues 14 and 32). A classify job of 1,000
# documents of ~500 tokens on the released K3 layout at 8 GiB, planned by `nightjar plan SPEC
# --until 07:00`: one document at a time (--batch 1), in token-major windows (--schedule
# passes) and in layer sweeps (--schedule sweep). With K3_PLAN_JSON=PREFIX set, the passes
# and sweep plans are also written as PREFIX.passes.json and PREFIX.sweep.json.
#
# The layout comes from ../shared/tools/make_sparse_k3.py (sparse files, ~130 MB of disk,
# written to build/bench-models/k3-sparse when missing); planning reads headers only. It has
# no tokenizer, so this script links its shards into build/bench-models/k3-plan beside a
# K3-format tokenizer from tests/reference/k3_tokenizer_gen.py (small vocabulary, K3's
# special-token layout; the documents' token counts are that tokenizer's).
#   tests/bench/run_k3_plan.sh [--bandwidth GBps] [--until HH:MM] [--docs N] [--tokens N]
set -euo pipefail
cd "$(dirname "$0")/../.."
bandwidth=2.6
until=07:00
docs=1000
tokens=500
while [ $# -gt 0 ]; do
  case "$1" in
    --bandwidth) bandwidth=$2; shift 2 ;;
    --until) until=$2; shift 2 ;;
    --docs) docs=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    *) echo "usage: $0 [--bandwidth GBps] [--until HH:MM] [--docs N] [--tokens N]" >&2; exit 2 ;;
  esac
done
. tests/bench/k3_layout.sh  # nj, model
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 - "$nj" "$model" "$work" "$docs" "$tokens" <<'PY'
import json, os, subprocess, sys
nj, model, work, docs, tokens = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
words = open("tests/reference/data/bpe_sample/en.txt").read().split()
probe = " ".join(words[:1000])
ids = json.loads(subprocess.run([nj, "tokenize", "--model", model, "--text", probe, "--output", "json"],
                                capture_output=True, text=True, check=True).stdout)["ids"]
n = int(tokens * 1000 / len(ids))
with open(os.path.join(work, "docs.jsonl"), "w") as f:
    for i in range(docs):
        f.write(json.dumps({"id": "doc%04d" % i, "text": " ".join(words[(i * 997 + j) % len(words)] for j in range(n))}) + "\n")
with open(os.path.join(work, "k3-night.yaml"), "w") as f:
    f.write("name: k3-night\nmodel: %s\nkind: classify\nmemory: 8GiB\n" % os.path.abspath(model))
    f.write("template: |\n  Classify the support ticket as one of: {labels}.\n  Ticket: {document}\n  Label:\n")
    f.write("labels: [billing, bug, feature request, other]\ninputs: {jsonl: docs.jsonl}\n")
PY
echo "== one document at a time: nightjar plan k3-night.yaml --batch 1 --bandwidth $bandwidth --until $until"
"$nj" plan "$work/k3-night.yaml" --batch 1 --bandwidth "$bandwidth" --until "$until"
echo
echo "== windows (run's default batch): nightjar plan k3-night.yaml --schedule passes --bandwidth $bandwidth --until $until"
"$nj" plan "$work/k3-night.yaml" --schedule passes --bandwidth "$bandwidth" --until "$until"
echo
echo "== layer sweeps: nightjar plan k3-night.yaml --schedule sweep --bandwidth $bandwidth --until $until"
"$nj" plan "$work/k3-night.yaml" --schedule sweep --bandwidth "$bandwidth" --until "$until"
if [ -n "${K3_PLAN_JSON:-}" ]; then
  for s in passes sweep; do
    "$nj" plan "$work/k3-night.yaml" --schedule "$s" --bandwidth "$bandwidth" --until "$until" \
      --output json > "$K3_PLAN_JSON.$s.json"
  done
fi

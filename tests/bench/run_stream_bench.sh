#!/usr/bin/env bash
# Issue 4's benchmark: decoding a K3-shaped model (about 4 % of parameters active per token)
# from disk under memory budgets {minimum, 1 GiB, 2 GiB, 4 GiB, everything}, with cold caches.
# For each budget, in the same run: the device's sequential O_DIRECT bandwidth on the model's
# own files, then a cold decode; the table gives median seconds per token, bytes read per
# token (measured, and as `plan` predicts it), the I/O floor (bytes per token / the
# sequential bandwidth), wall / floor, the achieved read bandwidth, and peak RSS.
#   tests/bench/run_stream_bench.sh [--tokens N] [--model DIR]
# Needs a build (build/tests/bench/stream_bench) and root for dropping the page cache.
set -euo pipefail
cd "$(dirname "$0")/../.."
tokens=12
model=build/bench-models/k3-mini
while [ $# -gt 0 ]; do
  case "$1" in
    --tokens) tokens=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    *) echo "usage: $0 [--tokens N] [--model DIR]" >&2; exit 2 ;;
  esac
done
bench=build/tests/bench/stream_bench
[ -x "$bench" ] || { echo "build first: $bench is missing" >&2; exit 1; }
if [ ! -f "$model/config.json" ]; then
  free_kb=$(df -Pk "$(dirname "$model")" 2>/dev/null | awk 'NR==2 {print $4}' || echo 0)
  if [ "${free_kb:-0}" -lt $((12 * 1024 * 1024)) ]; then
    echo "need 12 GB free under $(dirname "$model") to generate the 5.6 GB benchmark model" >&2; exit 1
  fi
  mkdir -p "$(dirname "$model")"
  /usr/bin/python3 tests/reference/make_model.py --out "$model" --preset k3-mini --force
fi
drop_caches() {
  sync
  if ! echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then
    echo "warning: cannot drop the page cache (not root): runs are not cold" >&2
  fi
}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# The routing of this exact workload (same prompt, same tokens), for plan's cache prediction.
OMP_WAIT_POLICY=passive "$bench" --model "$model" --memory all --tokens "$tokens" \
  --save-routing-profile "$out/routing.json" > /dev/null
for m in min 1GiB 2GiB 4GiB all; do
  drop_caches
  seq=$("$bench" --model "$model" --seq-probe)
  echo "$seq" > "$out/seq-$m.json"
  gbps=$(echo "$seq" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["seq_direct_gbps"])')
  drop_caches
  OMP_WAIT_POLICY=passive "$bench" --model "$model" --memory "$m" --tokens "$tokens" \
    --routing-profile "$out/routing.json" --bandwidth "$gbps" > "$out/run-$m.json"
done
/usr/bin/python3 - "$out" <<'PY'
import json, sys, os
d = sys.argv[1]
rows = []
print("| budget | s/token (median) | read/token | plan predicts | err | seq O_DIRECT | I/O floor | wall/floor | achieved read | of seq | peak RSS | RSS - budget |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for m in ["min", "1GiB", "2GiB", "4GiB", "all"]:
    r = json.load(open(os.path.join(d, "run-%s.json" % m)))
    s = json.load(open(os.path.join(d, "seq-%s.json" % m)))
    b, p, w = r["bytes_per_token"], r["predicted_bytes_per_token"], r["median_s_per_token"]
    seq = s["seq_direct_gbps"]
    floor = b / (seq * 1e9)
    ach = b / w / 1e9 if w > 0 else 0
    err = abs(p - b) / b * 100 if b > 0 else (0.0 if p == 0 else 100.0)
    budget = r["budget_bytes"]
    name = "min (%.0f MB)" % (budget / 1e6) if m == "min" else m
    print("| %s | %.3f s | %.1f MB | %.1f MB | %.1f%% | %.2f GB/s | %.3f s | %s | %.2f GB/s | %s | %.0f MB | %s |" % (
        name, w, b / 1e6, p / 1e6, err, seq, floor, ("%.2f" % (w / floor)) if floor > 0 else "-",
        ach, ("%.0f%%" % (100 * ach / seq)) if b > 0 else "-", r["peak_rss_bytes"] / 1e6,
        ("%+.0f MB" % ((r["peak_rss_bytes"] - budget) / 1e6)) if budget else "-"))
PY

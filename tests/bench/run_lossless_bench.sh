#!/usr/bin/env bash
# Issue 15's benchmark: the lossless trunk against the raw one, all in the same run.
#   1. stored / raw for the trunk (the lossless pack's manifest, 4 KiB padding included);
#   2. decode GB/s on one core (output bytes) against a memcpy probe (codec_bench);
#   3. for each budget, --rounds times, cold cache: a sequential O_DIRECT probe of the raw
#      pack file (the I/O floor's bandwidth), then decodes from the raw pack and from the
#      lossless pack (the planner choosing which units to hold compressed, then never and
#      always), each giving median seconds per token and trunk bytes read per token. The
#      table gives each variant's median over the rounds and the median of its per-round
#      ratios to the raw pack (this host is shared: single runs swing by tens of percent).
# Optionally (--kimi ...) kimi-k3-in-c's raw and lossless trunks on the same model and
# budget, after the same probe (at every budget, or those of --kimi-budgets). The machine's
# load (uptime) is printed before and after.
#   tests/bench/run_lossless_bench.sh [--model DIR] [--packs DIR] [--tokens N] [--rounds N]
#       [--budgets "420MiB 1GiB 2GiB"] [--threads N] [--kimi K3_BIN --kimi-raw DIR
#       --kimi-lossless DIR [--kimi-budgets "420MiB"]] [--disk-gbps X]
# --disk-gbps X caps the disk's read rate at X GB/s for the probes and the decode runs (a
# blkio cgroup: io.max on cgroup v2, blkio.throttle.read_bps_device on v1; root). This host's
# disk is host-backed: a file written minutes ago can read at 7-9 GB/s from the host's cache,
# where a model too large for any cache (K3's 1.5 TB) reads at the device's rate. The probe
# then measures the capped rate, so the table says what the runs saw.
# --threads fixes the compute threads of every decode run; by default each run calibrates
# them as the nightjar program does (one thread unless two measure >= 1.6x as fast), which on
# a loaded host can differ between the runs being compared (the table shows what each used).
# --model defaults to build/bench-models/bench-8g (../shared/tools/make_bench_ckpt.py);
# packs are written under --packs (default build/bench-packs) when missing. Needs a build
# (build/runner/nightjar, build/tests/bench/{stream,codec}_bench) and root for dropping the
# page cache.
set -euo pipefail
cd "$(dirname "$0")/../.."
model=build/bench-models/bench-8g
packs=build/bench-packs
tokens=6
rounds=3
budgets="420MiB 1GiB 2GiB"
kimi="" kimi_raw="" kimi_lossless="" kimi_budgets="" threads="" disk_gbps=""
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --packs) packs=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --budgets) budgets=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --disk-gbps) disk_gbps=$2; shift 2 ;;
    --kimi) kimi=$2; shift 2 ;;
    --kimi-raw) kimi_raw=$2; shift 2 ;;
    --kimi-lossless) kimi_lossless=$2; shift 2 ;;
    --kimi-budgets) kimi_budgets=$2; shift 2 ;;
    *) echo "usage: $0 [--model DIR] [--packs DIR] [--tokens N] [--rounds N] [--budgets LIST]" \
            "[--threads N] [--disk-gbps X] [--kimi K3_BIN --kimi-raw DIR --kimi-lossless DIR [--kimi-budgets LIST]]" >&2; exit 2 ;;
  esac
done
kimi_budgets=${kimi_budgets:-$budgets}
nightjar=build/runner/nightjar
stream=build/tests/bench/stream_bench
codec=build/tests/bench/codec_bench
for b in "$nightjar" "$stream" "$codec"; do
  [ -x "$b" ] || { echo "build first: $b is missing" >&2; exit 1; }
done
[ -f "$model/config.json" ] || {
  echo "no model at $model: generate it with ../shared/tools/make_bench_ckpt.py" >&2; exit 1; }
drop_caches() {
  sync
  if ! echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then
    echo "warning: cannot drop the page cache (not root): runs are not cold" >&2
  fi
}
out=$(mktemp -d)  # kept when the report fails, for a look at the runs
# capped CMD...: runs CMD in the throttled cgroup when --disk-gbps is given, else as it is.
cgroup=""
if [ -n "$disk_gbps" ]; then
  src=$(findmnt -no SOURCE --target "$(dirname "$model")")
  disk=$(lsblk -ndo PKNAME "$src" 2>/dev/null || true)
  dev=$(lsblk -ndo MAJ:MIN "/dev/${disk:-${src#/dev/}}" | tr -d ' ')
  bps=$(/usr/bin/python3 -c 'import sys; print(int(float(sys.argv[1]) * 1e9))' "$disk_gbps")
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    cgroup=/sys/fs/cgroup/nightjar-lossless-bench
    mkdir -p "$cgroup"
    echo "$dev rbps=$bps" > "$cgroup/io.max"
  elif [ -d /sys/fs/cgroup/blkio ]; then
    cgroup=/sys/fs/cgroup/blkio/nightjar-lossless-bench
    mkdir -p "$cgroup"
    echo "$dev $bps" > "$cgroup/blkio.throttle.read_bps_device"
  else
    echo "--disk-gbps: no blkio or io controller under /sys/fs/cgroup" >&2; exit 1
  fi
  echo "disk reads capped at $disk_gbps GB/s (device $dev, cgroup $cgroup)"
fi
capped() {
  if [ -n "$cgroup" ]; then
    sh -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' capped "$cgroup" "$@"
  else
    "$@"
  fi
}
trap 'echo "runs kept in $out" >&2' ERR
echo "load at start: $(uptime)"
for c in raw lossless; do
  if [ ! -f "$packs/$c/nightjar-trunk.manifest.json" ]; then
    free_kb=$(df -Pk "$(dirname "$packs")" | awk 'NR==2 {print $4}')
    if [ "${free_kb:-0}" -lt $((4 * 1024 * 1024)) ]; then
      echo "need 4 GB free under $packs for the packs" >&2; exit 1
    fi
    mkdir -p "$packs/$c"
    "$nightjar" pack "$model" --out "$packs/$c" --codec "$c" --output json > "$out/pack-$c.json"
  fi
done
"$codec" --pack "$packs/lossless" --mb 256 --rounds 9 > "$out/codec.json"
run_kimi() {  # $1 trunk dir, $2 budget name, $3 output name
  local gb
  gb=$(/usr/bin/python3 -c 'import sys
b = sys.argv[1]
v = float(b[:-3]) * {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[b[-3:]]
print("%.3f" % (v / 1e9))' "$2")
  drop_caches
  # kimi-k3-in-c splits its budget into a trunk budget and an expert cache (a quarter).
  capped "$kimi" "$model" --trunk "$1" \
    --trunk-gb "$(/usr/bin/python3 -c "print('%.3f' % ($gb * 0.75))")" \
    --cache-gb "$(/usr/bin/python3 -c "print('%.3f' % ($gb * 0.25))")" \
    --incremental --ids 1,2,3,4 --gen "$tokens" --out "$out/$3.json" > "$out/$3.log" 2>&1 ||
    echo "kimi-k3-in-c failed on $1 at $2: see its log below" >&2
}
for m in $budgets; do
  for r in $(seq 1 "$rounds"); do
    drop_caches
    capped "$stream" --model "$model" --seq-probe-file "$packs/raw/nightjar-trunk.pack" \
      > "$out/seq-$m-$r.json"
    gbps=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["seq_direct_gbps"])' \
      "$out/seq-$m-$r.json")
    for v in raw lossless:auto lossless:no lossless:yes; do
      c=${v%%:*}
      pin=auto
      [ "$c" = lossless ] && pin=${v#*:}
      drop_caches
      OMP_WAIT_POLICY=passive capped "$stream" --model "$model" --pack "$packs/$c" --memory "$m" \
        --tokens "$tokens" --bandwidth "$gbps" --pin-compressed "$pin" \
        ${threads:+--threads "$threads"} > "$out/run-$m-$c-$pin-$r.json"
    done
  done
  if [ -n "$kimi" ] && [[ " $kimi_budgets " == *" $m "* ]]; then
    run_kimi "$kimi_raw" "$m" "kimi-$m-raw"
    run_kimi "$kimi_lossless" "$m" "kimi-$m-lossless"
  fi
done
echo "load at end: $(uptime)"
/usr/bin/python3 - "$out" "$packs" "$budgets" "$kimi" "$kimi_raw" "$kimi_lossless" "$rounds" \
  "$kimi_budgets" <<'PY'
import json, os, re, statistics, sys
d, packs, budgets, kimi, kimi_raw, kimi_lossless, rounds, kimi_budgets = sys.argv[1:9]
rounds = range(1, int(rounds) + 1)
def load(name):
    return json.load(open(os.path.join(d, name)))
m = json.load(open(os.path.join(packs, "lossless", "nightjar-trunk.manifest.json")))
r = json.load(open(os.path.join(packs, "raw", "nightjar-trunk.manifest.json")))
print("\n## Stored / raw, trunk of the model (units incl. the head; 4 KiB padding included)\n")
print("| pack | raw bytes | stored bytes | stored / raw |")
print("|---|---|---|---|")
print("| raw | %d | %d | %.4f |" % (r["raw_bytes"], r["pack_bytes"], r["pack_bytes"] / r["raw_bytes"]))
print("| lossless | %d | %d | **%.4f** |" % (m["raw_bytes"], m["pack_bytes"], m["pack_bytes"] / m["raw_bytes"]))
if kimi_lossless:
    kr = os.path.getsize(os.path.join(kimi_raw, "trunk.bin"))
    kl = os.path.getsize(os.path.join(kimi_lossless, "trunk.bin"))
    print("| kimi-k3-in-c lossless (24 layers, no head) | %d | %d | %.4f |" % (kr, kl, kl / kr))
c = load("codec.json")
print("\n## Decode on one core (output bytes), %d MB of the lossless pack, median of %d rounds\n"
      % (c["decoded_bytes"] / 1e6, c["rounds"]))
print("| level | decode GB/s (wall) | memcpy GB/s (wall) | ratio (wall) [min-max] | decode GB/s (CPU time) | memcpy GB/s (CPU time) | ratio (CPU time) |")
print("|---|---|---|---|---|---|---|")
for level in ["scalar", "avx2", "avx512"]:
    if level not in c: continue
    x = c[level]
    print("| %s | %.2f | %.2f | %.3f [%.3f-%.3f] | %.2f | %.2f | %.3f |" % (
        level, x["decode_gbps_wall"], x["memcpy_gbps_wall"], x["ratio_wall"], x["ratio_wall_min"],
        x["ratio_wall_max"], x["decode_gbps_cpu"], x["memcpy_gbps_cpu"], x["ratio_cpu"]))
print("\n## Decoding from disk, cold cache: medians over %d rounds (each a median over the decoded tokens)\n" % len(rounds))
print("| budget | pack | pinned | held compressed | s/token | / raw (median of rounds' ratios) [min-max] | trunk MB/token (read) | / raw | trunk raw MB/token | decode s/token | CPU s/token (all threads) | seq O_DIRECT | wall / I/O floor (all bytes) | peak RSS | compute threads |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
med = statistics.median
for b in budgets.split():
    seq = [load("seq-%s-%d.json" % (b, r))["seq_direct_gbps"] for r in rounds]
    raw = [load("run-%s-raw-auto-%d.json" % (b, r)) for r in rounds]
    for name, pin in [("raw", "auto"), ("lossless", "auto"), ("lossless", "no"), ("lossless", "yes")]:
        xs = [load("run-%s-%s-%s-%d.json" % (b, name, pin, r)) for r in rounds]
        for x in xs:
            if not x["uses_pack"]:
                sys.exit("the %s pack was not used at %s (stale or damaged?)" % (name, b))
        ratios = [x["median_s_per_token"] / y["median_s_per_token"] for x, y in zip(xs, raw)]
        floors = [x["bytes_per_token"] / (g * 1e9) for x, g in zip(xs, seq)]
        x = xs[0]
        trunk = med([x["median_trunk_bytes_per_token"] for x in xs])
        trunk_raw = med([x["median_trunk_bytes_per_token"] for x in raw])
        label = name if name == "raw" else "lossless, pin-compressed %s" % pin
        threads = sorted({x.get("compute_threads", 0) for x in xs})
        print("| %s | %s | %.0f MB | %.0f MB | %.3f | %.3f [%.3f-%.3f] | %.1f | %.3f | %.1f | %.3f | %.3f | %.2f GB/s | %s | %.0f MB | %s |" % (
            b, label, x["pinned_bytes"] / 1e6, x["held_bytes"] / 1e6,
            med([x["median_s_per_token"] for x in xs]), med(ratios), min(ratios), max(ratios),
            trunk / 1e6, trunk / trunk_raw if trunk_raw else 0,
            med([x["trunk_raw_bytes_per_token"] for x in xs]) / 1e6,
            med([x["decode_s_per_token"] for x in xs]),
            med([x.get("cpu_s_per_token", 0) for x in xs]), med(seq),
            "%.2f" % med([x["median_s_per_token"] / f for x, f in zip(xs, floors)]) if min(floors) > 0 else "-",
            max(x["peak_rss_bytes"] for x in xs) / 1e6, "/".join(str(t) for t in threads)))
if kimi:
    print("\n## kimi-k3-in-c on the same model, same budgets, after the same probe\n")
    print("| budget | trunk | s/token (median of steps after the first) | trunk GB read per step | peak RSS |")
    print("|---|---|---|---|---|")
    for b in kimi_budgets.split():
        for t in ["raw", "lossless"]:
            log = open(os.path.join(d, "kimi-%s-%s.log" % (b, t))).read()
            steps = [float(s) for s in re.findall(r"^\d+\s+\d+\s+([0-9.]+)\s", log, re.M)]
            read = re.search(r"trunk \[final\].*?read ([0-9.]+) GB", log, re.S)
            rss = re.search(r"PEAK RSS for the whole run: ([0-9.]+ MB)", log)
            if len(steps) < 2 or not read:
                print("| %s | %s | failed: %s |  |  |" % (b, t, log.strip().splitlines()[-1:] or "no output"))
                continue
            later = sorted(steps[1:])
            med = later[len(later) // 2] if len(later) % 2 else (later[len(later) // 2 - 1] + later[len(later) // 2]) / 2
            print("| %s | %s | %.3f | %.3f | %s |" % (b, t, med, float(read.group(1)) / len(steps),
                                                    rss.group(1) if rss else "?"))
PY
rm -rf "$out"
if [ -n "$cgroup" ]; then rmdir "$cgroup" 2>/dev/null || true; fi

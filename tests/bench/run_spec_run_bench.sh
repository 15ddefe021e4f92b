#!/usr/bin/env bash
# Issue 20 item 3's figure for `run`: one generate job run with `speculative: ngram` and the
# same job with `off`, in alternating rounds of the same invocation, each from a fresh home,
# on the demo model (text prompts that repeat themselves, as extraction does) and on a tiny
# model with a vocabulary of 8 tokens (random weights seldom repeat themselves; with 8 tokens
# prompt lookup's drafts are accepted by chance, so the accepted-draft path is measured too).
#
#   tests/bench/run_spec_run_bench.sh [--rounds R] [--items N] [--tokens T] [--memory SIZE]
#
# Prints per model: the passes of each run (exact: from the run's `run_ended` event), drafted
# and accepted tokens, and the median wall time of `run --drain` with the same-round ratio
# ngram / off. The script checks that both jobs give every item the same tokens. Resident by
# default (--memory gives both jobs a budget). Wall times on a shared machine are indicative.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=3 items=8 tokens=48 memory=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --items) items=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    --memory) memory=$2; shift 2 ;;
    *) echo "usage: $0 [--rounds R] [--items N] [--tokens T] [--memory SIZE]" >&2; exit 2 ;;
  esac
done
bin=build/runner/nightjar
[ -x "$bin" ] || { echo "build first: $bin is missing" >&2; exit 1; }
exec /usr/bin/python3 - "$bin" "$rounds" "$items" "$tokens" "$memory" <<'PY'
import json, os, shutil, sqlite3, statistics, subprocess, sys, time
sys.path.insert(0, "tests/cli")
import njtest
bin_, rounds, n_items, tokens, memory = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
work = os.path.abspath("build/bench-spec-run")
os.makedirs(work, exist_ok=True)
demo = njtest.make_model(os.path.join(work, "demo"), preset="demo")
tiny8 = njtest.make_model(os.path.join(work, "tiny-vocab8"), extra=("--vocab", "8"))
texts = ["Invoice 1042: 3 chairs, 2 desks. Invoice 1043: 3 chairs, 2 desks. Invoice 1044: 3 chairs,",
         "The cat sat on the mat. The cat sat on the mat. The cat sat on the mat. The cat",
         "id,name,qty\n1,bolt,40\n2,nut,40\n3,washer,40\n4,bolt,40\n5,"]
workloads = {
    "demo (repetitive text)": (demo, [{"id": f"t{k}", "prompt": texts[k % 3] + " " * (k // 3), "max_tokens": tokens,
                                        "ignore_eos": True} for k in range(n_items)]),
    "tiny, vocab 8 (ids)": (tiny8, [{"id": f"t{k}", "prompt_ids": [(k * 5 + i * 3) % 8 for i in range(4 + k % 5)],
                                     "max_tokens": tokens, **({"temperature": 0.8, "seed": k} if k % 2 else {})}
                                    for k in range(n_items)]),
}
print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
for name, (model, its) in workloads.items():
    rows = {"ngram": [], "off": []}
    outputs = {}
    for r in range(rounds):
        for mode in (("ngram", "off") if r % 2 == 0 else ("off", "ngram")):
            home = os.path.join(work, "home")
            shutil.rmtree(home, ignore_errors=True)
            nj = njtest.Nightjar(bin_, home)
            keys = {"speculative": mode, **({"memory": memory} if memory else {})}
            spec = njtest.write_spec(os.path.join(work, "job.yaml"), "bench", model, its, **keys)
            job = nj.submit(spec)
            t0 = time.monotonic()
            p = nj.run("run", "--drain", "--log-seconds", "1000")
            wall = time.monotonic() - t0
            if p.returncode != 0:
                sys.exit(f"run failed: {p.stderr}")
            (ended,) = [d for _, _, d in nj.events("run_ended")]
            res = {x["custom_id"]: x["output_ids"] for x in nj.results(job)}
            if outputs.setdefault(r, res) != res:
                sys.exit(f"{name}: ngram and off gave different tokens in round {r}")
            rows[mode].append((wall, ended))
    med = {m: statistics.median(w for w, _ in rows[m]) for m in rows}
    ratio = statistics.median(a[0] / b[0] for a, b in zip(rows["ngram"], rows["off"]))
    e_on, e_off = rows["ngram"][0][1], rows["off"][0][1]
    s = e_on["speculation"]
    print(f"{name}: {n_items} items x {tokens} tokens, {rounds} rounds")
    print(f"  passes: ngram {e_on['passes']}, off {e_off['passes']} (rows {e_on['rows']} / {e_off['rows']}); "
          f"drafted {s['drafted']}, accepted {s['accepted']} over {s['passes']} item passes")
    print(f"  run --drain wall s (median): ngram {med['ngram']:.2f}, off {med['off']:.2f}; "
          f"ratio ngram/off {ratio:.2f} (per round: "
          + ", ".join(f"{a[0] / b[0]:.2f}" for a, b in zip(rows['ngram'], rows['off'])) + ")")
print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
PY

#!/usr/bin/env python3
"""Issue 32, Must show 4: a layer sweep at the released K3's real shapes actually runs. A
classify job of a few short documents on the K3 layout (sparse files: every weight reads as
zero, so every token routes to the same experts; shapes, offsets and sizes are the real
ones) at a memory budget, run with `--schedule sweep` and (unless --no-baseline) token-major
with `--batch 1`: peak RSS of each run against the budget, bytes read against `plan SPEC`'s
prediction, compute seconds per row, and the answers of the two runs compared."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_night as bn  # noqa: E402


def run(binary, home, spec, flags):
    """`run --drain` under a fresh home; its wall time, peak RSS (bytes, its own) and results."""
    subprocess.run([binary, "submit", spec, "--home", home, "--output", "json"], check=True, capture_output=True)
    bn.drop_caches()
    log = os.path.join(home, "run.log")
    t0 = time.monotonic()
    with open(log, "w") as err:
        p = subprocess.Popen([binary, "run", "--drain", "--home", home, "--log-seconds", "100000", *flags],
                             stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit("run %s failed (%d): %s" % (flags, status, open(log).read()[-3000:]))
    out = subprocess.run([binary, "results", "1", "--home", home, "--format", "jsonl"], check=True,
                         capture_output=True, text=True).stdout
    results = sorted((json.loads(line) for line in out.splitlines() if line.strip()), key=lambda r: r["custom_id"])
    return {"wall": wall, "rss": usage.ru_maxrss * 1024, "results": results}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", required=True, help="the sparse K3 layout beside a K3-format tokenizer")
    ap.add_argument("--memory", default="8GiB")
    ap.add_argument("--docs", type=int, default=4)
    ap.add_argument("--doc-tokens", type=int, default=16)
    ap.add_argument("--no-baseline", action="store_true", help="skip the --batch 1 run")
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="k3-sweep-")
    os.makedirs(work, exist_ok=True)
    docs = bn.documents(a.docs, a.doc_tokens, a.bin, a.model)
    spec = bn.write_classify(work, os.path.abspath(a.model), a.memory, docs)
    plan = json.loads(subprocess.run([a.bin, "plan", spec, "--schedule", "sweep", "--output", "json"],
                                     check=True, capture_output=True, text=True).stdout)
    budget = plan["memory_bytes"]
    print("plan: window of %s documents (%s rows), %d sweep(s), minimum %.2f GiB, predicted %.1f GB read"
          % (plan["window_documents"], plan["window_rows"], plan["sweeps"], plan["min_memory_bytes"] / 2**30,
             plan["predicted_bytes"] / 1e9), flush=True)
    runs = {"sweep": run(a.bin, os.path.join(work, "home-sweep"), spec, ["--schedule", "sweep"])}
    if not a.no_baseline:
        runs["batch 1"] = run(a.bin, os.path.join(work, "home-one"), spec, ["--batch", "1", "--schedule", "passes"])
    for name, r in runs.items():
        engine = [x["engine"] for x in r["results"]]
        read = sum(e["bytes_read"] for e in engine)
        rows = sum(e.get("tokens_fed", 0) for e in engine)
        compute = sum(e.get("compute_s", 0) for e in engine)
        print("%-8s wall %7.1f s  peak RSS %.2f GiB (%.3fx the budget)  read %.1f GB%s  compute %.2f s per row"
              " (%d rows)  window %s" % (
                  name, r["wall"], r["rss"] / 2**30, r["rss"] / budget, read / 1e9,
                  " (%.3fx the plan)" % (read / plan["predicted_bytes"]) if name == "sweep" else "",
                  compute / max(1, rows), rows, sorted({e.get("window") for e in engine})), flush=True)
    if "batch 1" in runs:
        def answer(r):
            return (r["custom_id"], r["details"]["label"], r["details"]["probabilities"], r["output_ids"])
        same = [answer(r) for r in runs["sweep"]["results"]] == [answer(r) for r in runs["batch 1"]["results"]]
        print("answers identical to --batch 1: %s" % same)
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()

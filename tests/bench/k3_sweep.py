#!/usr/bin/env python3
"""Issue 32, Must show 4: a layer sweep at the released K3's real shapes actually runs. A
classify job of a few short documents on the K3 layout (sparse files: every weight reads as
zero, so every token routes to the same experts; shapes, offsets and sizes are the real
ones) at a memory budget, run with `--schedule sweep` and (unless --no-baseline) token-major
with `--batch 1`: peak RSS of each run against the budget, bytes read against `plan SPEC`'s
prediction, compute seconds per row, and the answers of the two runs compared.

`plan` prices uniform routing unless given the routing measured on the model: so the sweep's
bytes are compared with `plan SPEC --routing-profile` on a profile that `generate
--save-routing-profile` records on the same layout (a document's prompt and one token)."""
import argparse
import json
import os
import sqlite3
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
    with sqlite3.connect(os.path.join(home, "nightjar.db")) as db:
        (ended,) = db.execute("SELECT detail FROM events WHERE kind = 'run_ended'").fetchone()
    return {"wall": wall, "rss": usage.ru_maxrss * 1024, "results": results, "ended": json.loads(ended)}


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
    profile = os.path.join(work, "routing-profile.json")
    t0 = time.monotonic()
    subprocess.run([a.bin, "generate", "--model", a.model, "--memory", a.memory, "--prompt", docs[0],
                    "--max-tokens", "1", "--save-routing-profile", profile],
                   check=True, capture_output=True)
    print("routing profile recorded by generate in %.1f s" % (time.monotonic() - t0), flush=True)

    def planned(*flags):
        return json.loads(subprocess.run([a.bin, "plan", spec, "--schedule", "sweep", "--output", "json", *flags],
                                         check=True, capture_output=True, text=True).stdout)
    uniform = planned()
    plan = planned("--routing-profile", profile)
    budget = plan["memory_bytes"]
    print("plan: window of %s documents (%s rows), %d sweep(s), minimum %.2f GiB, predicted %.1f GB read "
          "(uniform routing: %.1f GB)"
          % (plan["window_documents"], plan["window_rows"], plan["sweeps"], plan["min_memory_bytes"] / 2**30,
             plan["predicted_bytes"] / 1e9, uniform["predicted_bytes"] / 1e9), flush=True)
    runs = {"sweep": run(a.bin, os.path.join(work, "home-sweep"), spec, ["--schedule", "sweep"])}
    if not a.no_baseline:
        runs["batch 1"] = run(a.bin, os.path.join(work, "home-one"), spec, ["--batch", "1", "--schedule", "passes"])
    for name, r in runs.items():
        engine = [x["engine"] for x in r["results"]]
        # The whole run's reads: its passes' (which the items' shares add up to) and the model's
        # opening (pinned units), as `plan` counts them.
        read = r["ended"]["bytes_read"] + r["ended"]["load_bytes"]
        rows = sum(e.get("tokens_fed", 0) for e in engine)
        compute = sum(e.get("compute_s", 0) for e in engine)
        # Per document row (the items' tokens), and per row computed: a sweep also computes the
        # template prefix in its window, which `--batch 1` restores from its checkpoint.
        ended = r["ended"]
        print("%-8s wall %7.1f s  peak RSS %.2f GiB (%.3fx the budget)  read %.1f GB%s  compute %.2f s per"
              " document row (%d rows), %.2f s per row computed (%d rows)  window %s" % (
                  name, r["wall"], r["rss"] / 2**30, r["rss"] / budget, read / 1e9,
                  " (%.4fx the plan with the recorded routing)" % (read / plan["predicted_bytes"])
                  if name == "sweep" else "",
                  compute / max(1, rows), rows, ended["compute_s"] / max(1, ended["rows"]), ended["rows"],
                  sorted({e.get("window") for e in engine})), flush=True)
    if "batch 1" in runs:
        def answer(r):
            return (r["custom_id"], r["details"]["label"], r["details"]["probabilities"], r["output_ids"])
        same = [answer(r) for r in runs["sweep"]["results"]] == [answer(r) for r in runs["batch 1"]["results"]]
        print("answers identical to --batch 1: %s" % same)
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Benchmark: a night's queue with batches against one item at a time (issue 14).

Each job runs on a model that is streaming-bound at its budget (run_night_bench.sh makes them):
  classify  --classify-model: from tests/reference/make_model.py, 256 MXFP4 experts top-8 with a
            near-uniform router (--router-gain 0.25; the default router's saturated scores let
            its bias pick the same few experts for every token, so one document at a time
            would be compute-bound), at --memory 768MiB: one document at a time reads most of
            the experts in every 64-row pass;
  generate  --model: bench-8g (the shared K3-shaped benchmark model, 24 layers, 192 experts
            top-8, 9.35 GB) with a K3-format tokenizer, at --gen-memory 512MiB: its streamed
            1.7 GB trunk, which a decode batch shares, is most of what a token reads.

  classify  --docs documents of about --doc-tokens tokens, four labels, at --memory.
            `run --drain --batch 1` and `run --drain` (the batch the budget holds: its
            documents prefill together in windows), each in a fresh home from a cold page
            cache. Reported: documents per hour, bytes read per document (the run's
            `run_ended` event), and `plan SPEC --measure-disk`'s prediction for each, made just
            before the run: the disk rate is the plan's own probe reading the model's files
            as a run does for --disk-seconds (model_read_probe.h). Labels and probabilities
            must be identical.
  generate  --gen-items prompts x --gen-tokens tokens (ignore_eos, greedy, speculative: off) at
            --gen-memory: `run --batch 1`, then --gen-rounds rounds of `generate --prompts-file`
            (the same prompts in lockstep without the job store) and `run` (batched). Aggregate
            tokens per hour (one at a time against the batched runs' median), and the runner's
            overhead (the median of the rounds' batched run wall / generate wall). Outputs must
            be identical.

Targets (the issue's, all in this run): classify bytes per document batched <= 1/20 of one
at a time, documents per hour >= 2x, each run within 25 % of the plan's prediction;
generate tokens per hour batched >= 3x one at a time, runner overhead <= 1.05.

Usage (root, for dropping the page cache):
  tests/bench/run_night_bench.sh [options]
  /usr/bin/python3 tests/bench/bench_night.py --bin build/runner/nightjar --model DIR
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import njtest  # noqa: E402

REPO = njtest.REPO
# Every command computes on the same threads (--threads): each would otherwise calibrate its
# own at start, and under a neighbour's load two calibrations can disagree (1 or 2 threads).
THREADS = 2


def drop_caches():
    subprocess.run(["sync"], check=True)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        print("warning: cannot drop the page cache (not root): runs are not cold", file=sys.stderr)


def disk_probe(binary_dir, model):
    """The disk's cold O_DIRECT read rate on the model's own shard (batch_bench probes)."""
    bench = os.path.join(binary_dir, "tests", "bench", "batch_bench")
    shard = sorted(f for f in os.listdir(model) if f.endswith(".safetensors"))[0]
    drop_caches()
    out = subprocess.run([bench, "probes", "--disk-file", os.path.join(model, shard)], capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out)["disk_gbps"]


def documents(count, tokens, binary, model):
    """`count` different texts of about `tokens` tokens from the tokenizer's English sample."""
    words = open(REPO / "tests/reference/data/bpe_sample/en.txt").read().split()
    probe = " ".join(words[:400])
    ids = json.loads(subprocess.run([binary, "tokenize", "--model", model, "--text", probe, "--output", "json"],
                                    capture_output=True, text=True, check=True).stdout)["ids"]
    per_word = len(ids) / 400
    n = max(1, int(tokens / per_word))
    return [" ".join(words[(i * 997 + j) % len(words)] for j in range(n)) for i in range(count)]


def write_classify(work, model, memory, docs):
    with open(os.path.join(work, "docs.jsonl"), "w") as f:
        for i, d in enumerate(docs):
            f.write(json.dumps({"id": "doc%03d" % i, "text": d}) + "\n")
    spec = os.path.join(work, "classify.yaml")
    with open(spec, "w") as f:
        f.write("name: night-classify\nmodel: %s\nkind: classify\nmemory: %s\n" % (model, memory))
        f.write("template: |\n  Classify the text as one of: {labels}.\n  Text: {document}\n  Label:\n")
        f.write("labels: [billing, bug, feature request, other]\ninputs: {jsonl: docs.jsonl}\n")
    return spec


def write_generate(work, model, memory, items, tokens, docs):
    spec = os.path.join(work, "generate.yaml")
    prompts = [d[:160] for d in docs[:items]]
    with open(spec, "w") as f:
        # speculative: off, as generate --prompts-file: the overhead compares the same engine work
        # (run's default, auto, may draft where generate does not).
        f.write("name: night-generate\nmodel: %s\nkind: generate\nmemory: %s\nspeculative: off\n" % (model, memory))
        f.write("defaults: {max_tokens: %d, ignore_eos: true}\nitems:\n" % tokens)
        for i, p in enumerate(prompts):
            f.write("  - {id: g%d, prompt: %s}\n" % (i, json.dumps(p)))
    pfile = os.path.join(work, "prompts.jsonl")
    with open(pfile, "w") as f:
        for i, p in enumerate(prompts):
            f.write(json.dumps({"id": "g%d" % i, "prompt": p}) + "\n")
    return spec, pfile


def plan(binary, spec, disk_seconds, batch=None, schedule=None):
    """`plan SPEC` with the disk rate of its own probe of the model's files."""
    args = [binary, "plan", spec, "--measure-disk", str(disk_seconds), "--threads", str(THREADS), "--output", "json"]
    if batch:
        args += ["--batch", str(batch)]
    if schedule:
        args += ["--schedule", schedule]
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("plan failed (%d): %s" % (p.returncode, p.stderr))
    return json.loads(p.stdout)


def run_job(binary, home, spec, batch=None, schedule=None):
    """A fresh home, the job submitted, `run --drain` timed from a cold cache."""
    shutil.rmtree(home, ignore_errors=True)
    nj = njtest.Nightjar(binary, home)
    job = nj.submit(spec)
    drop_caches()
    args = ["run", "--drain", "--log-seconds", "100000", "--threads", str(THREADS)] + (
        ["--batch", str(batch)] if batch else []) + (["--schedule", schedule] if schedule else [])
    t0 = time.monotonic()
    p = nj.run(*args, timeout=7200)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        raise SystemExit("run failed (%d): %s" % (p.returncode, p.stderr[-2000:]))
    (ended,) = [d for _, _, d in nj.events("run_ended")]
    results = sorted(nj.results(job), key=lambda r: r["custom_id"])
    return {"wall": wall, "ended": ended, "results": results}


def answers(results):
    """What must not change with the batch: ids, labels, probabilities, margins, tokens."""
    out = []
    for r in results:
        d = r.get("details") or {}
        out.append(json.dumps({"id": r["custom_id"], "status": r["status"], "output_ids": r["output_ids"],
                               "label": d.get("label"), "probabilities": d.get("probabilities"),
                               "margin": d.get("margin")}, sort_keys=True))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", required=True, help="the generate job's model (with a tokenizer)")
    ap.add_argument("--classify-model", help="the classify job's model (default: --model)")
    ap.add_argument("--memory", default="768MiB", help="the classify job's budget")
    ap.add_argument("--gen-memory", default="512MiB", help="the generate job's budget")
    ap.add_argument("--docs", type=int, default=64)
    ap.add_argument("--doc-tokens", type=int, default=200)
    ap.add_argument("--gen-items", type=int, default=8, help="0: no generate job")
    ap.add_argument("--gen-tokens", type=int, default=64)
    ap.add_argument("--gen-rounds", type=int, default=2,
                    help="rounds of generate --prompts-file then the batched run (the overhead's median)")
    ap.add_argument("--disk-seconds", type=float, default=30,
                    help="how long plan SPEC --measure-disk reads the model's files before each run")
    ap.add_argument("--threads", type=int, default=2, help="compute threads of every plan, run and generate")
    ap.add_argument("--schedule", choices=["sweep", "passes"],
                    help="the batched classify run's schedule (default: run's choice, layer sweeps)")
    a = ap.parse_args()
    global THREADS
    THREADS = a.threads
    binary = os.path.abspath(a.bin)
    a.model = os.path.abspath(a.model)
    a.classify_model = os.path.abspath(a.classify_model or a.model)
    binary_dir = os.path.dirname(os.path.dirname(binary))
    print("load before: " + os.popen("uptime").read().strip(), flush=True)
    work = tempfile.mkdtemp(prefix="night-bench-")
    try:
        disk = disk_probe(binary_dir, a.model)
        print("disk probe (cold O_DIRECT, 1 GiB of one shard, for the record): %.2f GB/s" % disk, flush=True)
        docs = documents(a.docs, a.doc_tokens, binary, a.classify_model)
        targets = []

        spec = write_classify(work, a.classify_model, a.memory, docs)
        rows = []
        for label, batch in (("one at a time", 1), ("batched", None)):
            schedule = None if batch else a.schedule
            predicted = plan(binary, spec, a.disk_seconds, batch, schedule)
            r = run_job(binary, os.path.join(work, "home-c-%s" % (batch or "b")), spec, batch, schedule)
            e = r["ended"]
            rows.append({"label": label, "batch": e["max_batch"], "passes": e["passes"], "wall": r["wall"],
                         "io_wait_s": e["io_wait_s"], "compute_s": e["compute_s"],
                         "docs_per_hour": a.docs / r["wall"] * 3600, "bytes_per_doc": e["bytes_read"] / a.docs,
                         "plan": predicted, "answers": answers(r["results"])})
        if rows[0]["answers"] != rows[1]["answers"]:
            for x, y in zip(rows[0]["answers"], rows[1]["answers"]):
                if x != y:
                    print("one at a time: " + x + "\nbatched:       " + y, file=sys.stderr)
                    break
            raise SystemExit("FAIL: the batched labels differ from one document at a time")
        print("\nclassify: %d documents of ~%d tokens at %s on %s (labels and probabilities identical)" %
              (a.docs, a.doc_tokens, a.memory, os.path.basename(a.classify_model)))
        print("%-14s %5s %6s %8s %8s %8s %9s %10s %11s %9s %12s" % (
            "", "batch", "passes", "wall s", "io s", "cpu s", "docs/h", "MiB/doc", "plan docs/h", "plan err",
            "plan MiB/doc"))
        for r in rows:
            p = r["plan"]
            plan_dph = a.docs / p["predicted_seconds"] * 3600
            r["plan_err"] = r["wall"] / p["predicted_seconds"] - 1
            print("%-14s %5d %6d %8.1f %8.1f %8.1f %9.0f %10.1f %11.0f %+8.0f%% %12.1f" % (
                r["label"], r["batch"], r["passes"], r["wall"], r["io_wait_s"], r["compute_s"], r["docs_per_hour"],
                r["bytes_per_doc"] / 2**20, plan_dph, 100 * r["plan_err"], p["predicted_bytes_per_item"] / 2**20))
        print("(io s, cpu s: the run's time blocked on weights and in kernels, its run_ended event; plan: "
              "predicted_seconds of `plan SPEC --measure-disk %g` just before the run)" % a.disk_seconds)
        for r in rows:
            p = r["plan"]
            print("plan, %-13s disk %.2f GB/s (probe's first half %.2f), reads %.1f s, compute %.1f s "
                  "(%.1f s routed experts, %.1f s outside the products)" % (
                      r["label"] + ":", p["bandwidth_gbps"], p["disk_probe"]["first_half_gbps"],
                      p["predicted_io_seconds"], p["predicted_compute_seconds"],
                      p.get("predicted_expert_seconds", 0), p["predicted_element_seconds"]))
        one, bat = rows
        bytes_ratio = bat["bytes_per_doc"] / one["bytes_per_doc"]
        speed = bat["docs_per_hour"] / one["docs_per_hour"]
        targets += [("classify bytes per document batched / one at a time <= 1/20", bytes_ratio <= 1 / 20,
                     "1/%.1f" % (1 / bytes_ratio)),
                    ("classify documents per hour batched / one at a time >= 2", speed >= 2, "%.2fx" % speed)]
        for r in rows:
            targets.append(("classify %s wall within 25%% of plan SPEC" % r["label"], abs(r["plan_err"]) <= 0.25,
                            "%+.0f%%" % (100 * r["plan_err"])))

        if a.gen_items > 0:
            prompts = documents(a.gen_items, a.doc_tokens, binary, a.model)
            gspec, pfile = write_generate(work, a.model, a.gen_memory, a.gen_items, a.gen_tokens, prompts)
            grow = []
            for label, batch in (("one at a time", 1), ("batched", None)):
                predicted = plan(binary, gspec, a.disk_seconds, batch)
                grow.append({"label": label, "batch": batch, "plan_s": predicted["predicted_seconds"],
                             "plan_gbps": predicted["bandwidth_gbps"], "runs": []})
                if batch == 1:
                    grow[-1]["runs"].append(run_job(binary, os.path.join(work, "home-g-1"), gspec, batch))
            # The runner's overhead: the batched run and generate --prompts-file in turns (ABAB), so
            # that the host disk's drift between runs falls on both; the median of the rounds' ratios.
            gens, ratios = [], []
            for k in range(a.gen_rounds):
                drop_caches()
                t0 = time.monotonic()
                g = subprocess.run([binary, "generate", "--model", a.model, "--memory", a.gen_memory, "--prompts-file",
                                    pfile, "--max-tokens", str(a.gen_tokens), "--ignore-eos", "--threads", str(THREADS),
                                    "--output", "json"],
                                   capture_output=True, text=True)
                gen_wall = time.monotonic() - t0
                if g.returncode != 0:
                    raise SystemExit("generate --prompts-file failed: " + g.stderr[-2000:])
                gens.append({"wall": gen_wall, "out": json.loads(g.stdout)})
                r = run_job(binary, os.path.join(work, "home-g-b%d" % k), gspec, None)
                grow[1]["runs"].append(r)
                ratios.append(r["wall"] / gen_wall)
            first = answers(grow[0]["runs"][0]["results"])
            for row in grow:
                for r in row["runs"]:
                    if answers(r["results"]) != first:
                        raise SystemExit("FAIL: batched generations differ from one at a time")
            solo = {x["id"]: x["output_ids"] for x in gens[0]["out"]["results"]}
            for r in grow[0]["runs"][0]["results"]:
                if r["output_ids"] != solo[r["custom_id"]]:
                    raise SystemExit("FAIL: run's tokens differ from generate --prompts-file for " + r["custom_id"])
            total = a.gen_items * a.gen_tokens
            print("\ngenerate: %d items x %d tokens at %s on %s, speculative: off (tokens identical in every run)" % (
                a.gen_items, a.gen_tokens, a.gen_memory, os.path.basename(a.model)))
            print("%-28s %5s %6s %6s %9s %10s %8s %8s %9s %8s %10s" % (
                "", "batch", "passes", "rows", "wall s", "tokens/h", "io s", "cpu s", "GiB read", "plan s",
                "plan GB/s"))
            for row in grow:
                for k, r in enumerate(row["runs"]):
                    e = r["ended"]
                    print("%-28s %5d %6d %6d %9.1f %10.0f %8.1f %8.1f %9.2f %8.1f %10.2f" % (
                        "run, %s%s" % (row["label"], " #%d" % (k + 1) if len(row["runs"]) > 1 else ""), e["max_batch"],
                        e["passes"], e["rows"], r["wall"], total / r["wall"] * 3600, e["io_wait_s"], e["compute_s"],
                        e["bytes_read"] / 2**30, row["plan_s"], row["plan_gbps"]))
            for k, gr in enumerate(gens):
                res, st = gr["out"]["results"], gr["out"]["stats"]
                print("%-28s %5d %6d %6s %9.1f %10.0f %8.1f %8.1f %9.2f   (load %.1f s, passes %.1f s)" % (
                    "generate --prompts-file #%d" % (k + 1), st.get("max_sequences_per_pass", 0), st.get("passes", 0), "",
                    gr["wall"], total / gr["wall"] * 3600, sum(x["usage"]["io_wait_s"] for x in res),
                    sum(x["usage"]["compute_s"] for x in res), sum(x["usage"]["bytes_read"] for x in res) / 2**30,
                    gr["out"]["timings"]["load_s"], gr["out"]["timings"]["run_s"]))
            print("(io s, cpu s, GiB read: the run_ended event's totals; generate's: the sum of its items' shares)")
            batched_wall = statistics.median(r["wall"] for r in grow[1]["runs"])
            gspeed = grow[0]["runs"][0]["wall"] / batched_wall
            overhead = statistics.median(ratios)
            print("runner overhead by round: " + ", ".join("%.3f" % x for x in ratios))
            targets += [("generate tokens per hour batched / one at a time >= 3", gspeed >= 3, "%.2fx" % gspeed),
                        ("runner overhead: batched run wall / generate --prompts-file wall <= 1.05 (median)",
                         overhead <= 1.05, "%.3f" % overhead)]
            for row in grow:
                err = statistics.median(r["wall"] for r in row["runs"]) / row["plan_s"] - 1
                print("generate %s: plan SPEC %+.0f%%" % (row["label"], 100 * err))
        print("\nload after: " + os.popen("uptime").read().strip())
        print("\ntargets (this run):")
        for name, ok, value in targets:
            print("  %-4s %-75s %s" % ("met" if ok else "MISS", name, value))
        return 0 if all(ok for _, ok, _ in targets) else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

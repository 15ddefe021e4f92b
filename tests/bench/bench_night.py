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
            `run_ended` event), and `plan SPEC`'s prediction for each at the disk rate probed
            in the same run. Labels and probabilities must be identical.
  generate  --gen-items prompts x --gen-tokens tokens (ignore_eos, greedy) at --gen-memory:
            `run --batch 1`, `run` (batched) and `generate --prompts-file` (the same prompts
            in lockstep without the job store). Aggregate tokens per hour, and the runner's
            overhead (batched run wall / generate wall). Outputs must be identical.

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
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import njtest  # noqa: E402

REPO = njtest.REPO


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
        f.write("name: night-generate\nmodel: %s\nkind: generate\nmemory: %s\n" % (model, memory))
        f.write("defaults: {max_tokens: %d, ignore_eos: true}\nitems:\n" % tokens)
        for i, p in enumerate(prompts):
            f.write("  - {id: g%d, prompt: %s}\n" % (i, json.dumps(p)))
    pfile = os.path.join(work, "prompts.jsonl")
    with open(pfile, "w") as f:
        for i, p in enumerate(prompts):
            f.write(json.dumps({"id": "g%d" % i, "prompt": p}) + "\n")
    return spec, pfile


def plan(binary, spec, bandwidth, batch=None):
    args = [binary, "plan", spec, "--bandwidth", "%.3f" % bandwidth, "--output", "json"]
    if batch:
        args += ["--batch", str(batch)]
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("plan failed (%d): %s" % (p.returncode, p.stderr))
    return json.loads(p.stdout)


def run_job(binary, home, spec, batch=None):
    """A fresh home, the job submitted, `run --drain` timed from a cold cache."""
    shutil.rmtree(home, ignore_errors=True)
    nj = njtest.Nightjar(binary, home)
    job = nj.submit(spec)
    drop_caches()
    args = ["run", "--drain", "--log-seconds", "100000"] + (["--batch", str(batch)] if batch else [])
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
    a = ap.parse_args()
    binary = os.path.abspath(a.bin)
    a.model = os.path.abspath(a.model)
    a.classify_model = os.path.abspath(a.classify_model or a.model)
    binary_dir = os.path.dirname(os.path.dirname(binary))
    print("load before: " + os.popen("uptime").read().strip(), flush=True)
    work = tempfile.mkdtemp(prefix="night-bench-")
    try:
        disk = disk_probe(binary_dir, a.model)
        print("disk probe (cold O_DIRECT, same run): %.2f GB/s" % disk, flush=True)
        docs = documents(a.docs, a.doc_tokens, binary, a.classify_model)
        targets = []

        spec = write_classify(work, a.classify_model, a.memory, docs)
        rows = []
        for label, batch in (("one at a time", 1), ("batched", None)):
            predicted = plan(binary, spec, disk, batch)
            r = run_job(binary, os.path.join(work, "home-c-%s" % (batch or "b")), spec, batch)
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
              "predicted_seconds of `plan SPEC` at the probed disk rate, whose bytes/compute split is "
              "%.0f/%.0f s and %.0f/%.0f s)" % (rows[0]["plan"]["predicted_io_seconds"],
                                               rows[0]["plan"]["predicted_compute_seconds"],
                                               rows[1]["plan"]["predicted_io_seconds"],
                                               rows[1]["plan"]["predicted_compute_seconds"]))
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
                predicted = plan(binary, gspec, disk, batch)
                r = run_job(binary, os.path.join(work, "home-g-%s" % (batch or "b")), gspec, batch)
                r["plan_s"] = predicted["predicted_seconds"]
                grow.append((label, r))
            drop_caches()
            t0 = time.monotonic()
            g = subprocess.run([binary, "generate", "--model", a.model, "--memory", a.gen_memory, "--prompts-file", pfile,
                                "--max-tokens", str(a.gen_tokens), "--ignore-eos", "--output", "json"],
                               capture_output=True, text=True)
            gen_wall = time.monotonic() - t0
            if g.returncode != 0:
                raise SystemExit("generate --prompts-file failed: " + g.stderr[-2000:])
            if answers(grow[0][1]["results"]) != answers(grow[1][1]["results"]):
                raise SystemExit("FAIL: batched generations differ from one at a time")
            total = a.gen_items * a.gen_tokens
            print("\ngenerate: %d items x %d tokens at %s on %s (tokens identical)" % (
                a.gen_items, a.gen_tokens, a.gen_memory, os.path.basename(a.model)))
            print("%-24s %5s %6s %9s %10s %8s" % ("", "batch", "passes", "wall s", "tokens/h", "plan s"))
            for label, r in grow:
                e = r["ended"]
                print("%-24s %5d %6d %9.1f %10.0f %8.1f" % ("run, " + label, e["max_batch"], e["passes"], r["wall"],
                                                           total / r["wall"] * 3600, r["plan_s"]))
            print("%-24s %5s %6s %9.1f %10.0f" % ("generate --prompts-file", "", "", gen_wall,
                                                 total / gen_wall * 3600))
            gspeed = grow[0][1]["wall"] / grow[1][1]["wall"]
            overhead = grow[1][1]["wall"] / gen_wall
            targets += [("generate tokens per hour batched / one at a time >= 3", gspeed >= 3, "%.2fx" % gspeed),
                        ("runner overhead: batched run wall / generate --prompts-file wall <= 1.05",
                         overhead <= 1.05, "%.3f" % overhead)]
        print("\nload after: " + os.popen("uptime").read().strip())
        print("\ntargets (this run):")
        for name, ok, value in targets:
            print("  %-4s %-75s %s" % ("met" if ok else "MISS", name, value))
        return 0 if all(ok for _, ok, _ in targets) else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Issue 32's benchmark: a classify job's documents through layer sweeps (`run --schedule sweep`)
against token-major windows (`--schedule passes`) and one document at a time (`--batch 1`), cold
cache, on one model and budget, beside `plan SPEC`'s prediction of each. With `--kind generate`,
a generate job of the same texts as prompts (`--max-tokens` each): `--schedule sweep` sweeps the
prompts of the items that start together, `passes` feeds them in passes. Prints, per schedule:
wall seconds, bytes read for the job (and as a multiple of the model's size), bytes per document,
documents per hour, compute seconds per row, and the plan's predicted bytes and seconds; and
checks that every schedule gives the same labels, probabilities, margins and output_ids."""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_night as bn  # noqa: E402


def model_bytes(model):
    return sum(os.path.getsize(os.path.join(model, f)) for f in os.listdir(model) if f.endswith(".safetensors"))


def run(binary, work, spec, tag, flags):
    nj_home = os.path.join(work, "home-" + tag)
    shutil_rm(nj_home)
    nj = bn.njtest.Nightjar(binary, nj_home)
    job = nj.submit(spec)
    bn.drop_caches()
    t0 = bn.time.monotonic()
    p = nj.run("run", "--drain", "--log-seconds", "100000", "--threads", str(bn.THREADS), "--output", "json",
               *flags, timeout=14400)
    wall = bn.time.monotonic() - t0
    if p.returncode != 0:
        raise SystemExit("run %s failed (%d): %s" % (tag, p.returncode, p.stderr[-2000:]))
    results = sorted(nj.results(job), key=lambda r: r["custom_id"])
    # The job's reads: the run's own total (every pass and sweep, the template prefix's
    # included), not the sum of the items' shares, which leaves out a prefix prefilled apart.
    return {"wall": wall, "results": results, "bytes_read": json.loads(p.stdout)["bytes_read"]}


def shutil_rm(path):
    import shutil
    shutil.rmtree(path, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", required=True, help="a model with a tokenizer (bench-8g beside a K3-format one)")
    ap.add_argument("--memory", default="600MiB")
    ap.add_argument("--docs", type=int, default=48)
    ap.add_argument("--doc-tokens", type=int, default=150, help="documents of about this many tokens (±50)")
    ap.add_argument("--schedules", default="sweep,passes,one", help="of sweep, passes, one (--batch 1)")
    ap.add_argument("--disk-seconds", type=float, default=20)
    ap.add_argument("--work", default=None)
    ap.add_argument("--kind", default="classify", choices=("classify", "generate"))
    ap.add_argument("--max-tokens", type=int, default=64, help="--kind generate: tokens per item")
    a = ap.parse_args()
    a.model = os.path.abspath(a.model)  # the spec is read relative to its own directory
    work = a.work or bn.tempfile.mkdtemp(prefix="sweep-bench-")
    os.makedirs(work, exist_ok=True)
    short = bn.documents(a.docs, max(1, a.doc_tokens - 50), a.bin, a.model)
    long = bn.documents(a.docs, a.doc_tokens + 50, a.bin, a.model)
    docs = [short[i] if i % 2 else long[i] for i in range(a.docs)]  # 100-200 tokens
    if a.kind == "classify":
        spec = bn.write_classify(work, a.model, a.memory, docs)
    else:
        spec = os.path.join(work, "generate.yaml")
        with open(spec, "w") as f:
            f.write("name: night-generate\nmodel: %s\nkind: generate\nmemory: %s\nspeculative: off\n"
                    % (a.model, a.memory))
            f.write("defaults: {max_tokens: %d, ignore_eos: true}\nitems:\n" % a.max_tokens)
            for i, d in enumerate(docs):
                f.write("  - {id: g%03d, prompt: %s}\n" % (i, json.dumps(d)))
    size = model_bytes(a.model)
    probe = bn.disk_probe(os.path.dirname(os.path.dirname(a.bin)), a.model)
    print("model %.2f GB, %d %s, budget %s, disk probe %.2f GB/s (cold O_DIRECT)" %
          (size / 1e9, a.docs, "documents" if a.kind == "classify" else
           "prompts (%d tokens each generated)" % a.max_tokens, a.memory, probe))
    flags = {"sweep": ["--schedule", "sweep"], "passes": ["--schedule", "passes"], "one": ["--batch", "1"]}
    rows = {}
    answers = {}
    for s in a.schedules.split(","):
        plan_args = [a.bin, "plan", spec, "--bandwidth", "%.3f" % probe, "--threads", str(bn.THREADS),
                     "--output", "json"] + flags[s]
        plan = json.loads(bn.subprocess.run(plan_args, capture_output=True, text=True, check=True).stdout)
        r = run(a.bin, work, spec, s, flags[s])
        eng = [x["engine"] for x in r["results"]]
        read = r["bytes_read"]
        shares = sum(e["bytes_read"] for e in eng)
        compute = sum(e["compute_s"] for e in eng)
        tokens = sum(e["tokens_fed"] for e in eng)
        rows[s] = {"wall_s": r["wall"], "bytes": read, "item_bytes": shares, "model_reads": read / size, "bytes_per_doc": read / a.docs,
                   "docs_per_hour": a.docs / r["wall"] * 3600, "compute_s_per_row": compute / max(1, tokens),
                   "compute_s": compute, "window": max(e.get("window") or 0 for e in eng),
                   "plan_bytes": plan["predicted_bytes"], "plan_seconds": plan["predicted_seconds"],
                   "plan_schedule": plan["schedule"], "plan_window": plan.get("window_documents"),
                   "plan_sweeps": plan.get("sweeps")}
        answers[s] = bn.answers(r["results"])
        x = rows[s]
        print("%-7s wall %7.1f s  read %7.2f GB (%5.2fx the model, %6.3f GB/doc)  %7.0f docs/h  "
              "compute %.4f s/row  window %s | plan: %s, %.2f GB (%+.0f %%), %.1f s (%+.0f %%)" %
              (s, x["wall_s"], x["bytes"] / 1e9, x["model_reads"], x["bytes_per_doc"] / 1e9, x["docs_per_hour"],
               x["compute_s_per_row"], x["window"], x["plan_schedule"], x["plan_bytes"] / 1e9,
               100 * (x["plan_bytes"] / max(1, x["bytes"]) - 1), x["plan_seconds"],
               100 * (x["plan_seconds"] / x["wall_s"] - 1)), flush=True)
    names = list(answers)
    same = all(answers[n] == answers[names[0]] for n in names)
    print("answers identical across %s: %s" % (", ".join(names), "yes" if same else "NO"))
    if "sweep" in rows and "passes" in rows:
        s, p = rows["sweep"], rows["passes"]
        print("sweep / passes: bytes per document %.3f, documents per hour %.2fx, compute per row %.2fx" %
              (s["bytes_per_doc"] / p["bytes_per_doc"], s["docs_per_hour"] / p["docs_per_hour"],
               s["compute_s_per_row"] / p["compute_s_per_row"]))
    print(json.dumps(rows))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

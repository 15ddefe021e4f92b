#!/usr/bin/env python3
"""Benchmark: the cost of crash safety. The same items through `nightjar run` (job store,
grouped token commits, state checkpoints, leases) and through plain `nightjar generate`,
at the default commit and checkpoint cadence.

Each item runs once through `generate` and once through `run --max-items 1` (one process
each, both loading the model), back to back in alternating order, --repeats times. Reported:
  wall ratio         total wall time of the run processes / of the generate processes
  load-free ratio    the same with each process's model load subtracted (its own measure):
                     the runner's overhead (store, commits, checkpoints, claims)
  paired median      the median over items and rounds of the per-pair load-free ratios:
                     robust to a neighbour's load drifting on a shared machine; the issue's
                     bar is <= 1.05 (the exit status says whether it is met)
  CPU-time ratio     user+sys CPU seconds, loads subtracted
With --instructions N it instead counts the instructions both execute for one item
(valgrind), a measure other processes cannot disturb (fsync waits are not instructions).

Usage:
  /usr/bin/python3 tests/bench/bench_run_vs_generate.py --bin build/runner/nightjar
  cmake --build build --target bench_run_vs_generate
Outputs are checked equal (the benchmark fails otherwise).
"""
import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import njtest  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--preset", default="demo", help="make_model.py preset (default demo, without tokenizer)")
    ap.add_argument("--items", type=int, default=4)
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=400)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--run-flags", default="", help="extra flags for run, e.g. '--checkpoint-tokens 64'")
    ap.add_argument("--instructions", type=int, default=0, metavar="TOKENS",
                    help="instead: count instructions under valgrind (callgrind) for one item of TOKENS "
                         "generated tokens through each; deterministic, immune to other load (minutes)")
    args = ap.parse_args()
    binary = os.path.abspath(args.bin)

    work = njtest.scratch_dir("bench-run-")
    extra = ["--no-tokenizer"] if args.preset == "demo" else []
    model = njtest.make_model(os.path.join(work, "model"), preset=args.preset, extra=extra)
    vocab = json.load(open(os.path.join(model, "config.json"))).get("vocab_size") or 256
    items = []
    for k in range(args.items):
        prompt = [(k * 131 + i * 17 + 1) % min(vocab, 256) for i in range(args.prompt_tokens)]
        item = {"id": f"item-{k}", "prompt_ids": prompt, "max_tokens": args.max_tokens}
        if k % 2:
            item.update(temperature=0.8, seed=k)
        items.append(item)
    spec = njtest.write_spec(os.path.join(work, "job.yaml"), "bench", model, items)
    threads = ["--threads", str(args.threads)]

    def child_cpu():
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime

    def time_generate(it):
        """One item through `generate`: (wall, wall - load, cpu - load, output)."""
        cmd = [binary, "generate", "--model", model, "--prompt-ids", ",".join(map(str, it["prompt_ids"])),
               "--max-tokens", str(it["max_tokens"]), "--temperature", str(it.get("temperature", 0)),
               "--seed", str(it.get("seed", 0)), "--output", "json", *threads]
        cpu0 = child_cpu()
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, check=True)
        wall = time.perf_counter() - t0
        cpu = child_cpu() - cpu0
        j = json.loads(p.stdout)
        load = j["timings"]["load_s"]
        return wall, wall - load, cpu - load, j["output_ids"]

    def time_run(nj):
        """The next queued item through `run --max-items 1`: the same measures."""
        cpu0 = child_cpu()
        t0 = time.perf_counter()
        p = nj.run("run", "--drain", "--max-items", "1", *threads, *args.run_flags.split())
        wall = time.perf_counter() - t0
        cpu = child_cpu() - cpu0
        if p.returncode != 0:
            raise SystemExit(f"run failed: {p.stderr}")
        load = sum(float(x) for x in re.findall(r"opened model .* in ([0-9.]+) s", p.stderr))
        return wall, wall - load, cpu - load

    if args.instructions:
        return count_instructions(binary, model, items[0], args, work)

    # Paired measurements: each item through generate and through run back to back (order
    # alternating), so both see the same background load; slow drift cancels in the ratios.
    pairs = []  # (gen_wall, gen_free, gen_cpu, run_wall, run_free, run_cpu)
    for r in range(args.repeats):
        nj = njtest.Nightjar(binary, os.path.join(work, f"home-{r}"))
        job = nj.submit(spec)
        gen_out = {}
        for k, it in enumerate(items):
            if (r + k) % 2 == 0:
                g = time_generate(it)
                rr = time_run(nj)
            else:
                rr = time_run(nj)
                g = time_generate(it)
            gen_out[it["id"]] = g[3]
            pairs.append((*g[:3], *rr))
            print(f"round {r + 1} {it['id']}: generate {g[1]:.3f} s, run {rr[1]:.3f} s (without loads); "
                  f"ratio {rr[1] / g[1]:.3f}", flush=True)
        run_out = {x["custom_id"]: x["output_ids"] for x in nj.results(job)}
        if run_out != gen_out:
            raise SystemExit("outputs differ between run and generate")

    tokens = args.items * args.max_tokens * args.repeats
    sums = [sum(col) for col in zip(*pairs)]
    median_ratio = statistics.median(p[4] / p[1] for p in pairs)
    print(f"\nmodel {args.preset}, {args.items} items x ({args.prompt_tokens} prompt + {args.max_tokens} generated "
          f"tokens) x {args.repeats} rounds, threads {args.threads}, run flags '{args.run_flags or 'default cadence'}'")
    print(f"generate: {sums[0]:.2f} s wall, {sums[1]:.2f} s without model loads ({tokens / sums[1]:.1f} tok/s)")
    print(f"run:      {sums[3]:.2f} s wall, {sums[4]:.2f} s without model loads ({tokens / sums[4]:.1f} tok/s)")
    print(f"wall ratio run/generate (totals):      {sums[3] / sums[0]:.3f}")
    print(f"load-free ratio run/generate (totals): {sums[4] / sums[1]:.3f}")
    print(f"median of {len(pairs)} paired load-free ratios: {median_ratio:.3f}   (bar: <= 1.05)")
    print(f"load-free CPU-time ratio (totals):     {sums[5] / sums[2]:.3f}")
    return 0 if median_ratio <= 1.05 else 1


def count_instructions(binary, model, item, args, work):
    """Instructions executed (valgrind callgrind's Ir) by `run` and by `generate` for one item,
    model load included on both sides."""
    item = dict(item, max_tokens=args.instructions)
    spec = njtest.write_spec(os.path.join(work, "one.yaml"), "one", model, [item])
    nj = njtest.Nightjar(binary, os.path.join(work, "home-instructions"))
    nj.submit(spec)
    env = dict(os.environ, OMP_WAIT_POLICY="passive")  # no re-exec under valgrind

    def ir(cmd):
        out = os.path.join(work, "callgrind.out")
        p = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *cmd],
                           capture_output=True, text=True, env=env)
        if p.returncode != 0:
            raise SystemExit(f"valgrind failed: {p.stderr[-2000:]}")
        return int(re.search(r"Collected : (\d+)", p.stderr).group(1))

    threads = ["--threads", str(args.threads)]
    run_ir = ir(nj.cmd("run", "--drain", *threads, *args.run_flags.split()))
    gen_ir = ir([binary, "generate", "--model", model, "--prompt-ids", ",".join(map(str, item["prompt_ids"])),
                 "--max-tokens", str(item["max_tokens"]), "--temperature", str(item.get("temperature", 0)),
                 "--seed", str(item.get("seed", 0)), *threads])
    print(f"instructions for {args.prompt_tokens} prompt + {args.instructions} generated tokens on {args.preset}: "
          f"run {run_ir:,}, generate {gen_ir:,}; ratio {run_ir / gen_ir:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

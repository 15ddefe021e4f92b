#!/usr/bin/env python3
"""Golden fixtures for the engine's tests: tests/golden/<name>/ = checkpoint + expected.json.

  /usr/bin/python3 tests/reference/make_golden.py            # (re)write tests/golden/
  /usr/bin/python3 tests/reference/make_golden.py --check    # regenerate into a temporary
                                                              # directory, compare byte for byte

Each fixture is a checkpoint written by make_model.py and an expected.json computed by the
float64 reference (k3ref):
  prompt_ids             the prompt
  greedy_ids             greedy continuation, by full recompute, ties -> lower id
  teacher_forced_argmax  argmax at every position of prompt + greedy_ids
  logits                 the full logit row at every position of prompt + greedy_ids,
                         float64 values printed with 7 significant digits ("%.7g")
  min_top2_margin        smallest top-1 minus top-2 logit over those rows (asserted >= 1e-3)
  min_route_gap          smallest non-zero gap at the router's top-k boundary of s + bias
                         (asserted >= 1e-4: fp32 and float64 select the same experts)
  designed_route_ties    exact ties at that boundary, on purpose (the last expert's router
                         row and bias copy the one before): the lower index must win
  generator              the make_model.py arguments that rebuild the checkpoint
"""
import argparse
import filecmp
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import make_model  # noqa: E402
from k3ref import K3Model  # noqa: E402

GOLDEN_DIR = os.path.normpath(os.path.join(HERE, "..", "golden"))
MIN_MARGIN = 1e-3
MIN_ROUTE_GAP = 1e-4

# name -> (make_model.py arguments, prompt ids, greedy tokens)
FIXTURES = {
    "tiny-mxfp4": (["--preset", "tiny", "--seed", "1"],
                   [3, 7, 11, 5, 9, 100, 200, 42, 17, 250], 20),
    "tiny-bf16-flat": (["--preset", "tiny-bf16", "--seed", "2", "--config-form", "flat",
                        "--header-align", "1", "--layers", "7", "--full-attn-layers", "4,6,7"],
                       [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 20),
    # the same model as tiny-mxfp4 (same seed), split into 3 shards, another prompt
    "tiny-sharded": (["--preset", "tiny", "--seed", "1", "--shard-bytes", "1300000"],
                     [255, 0, 128, 64, 32, 16, 8, 4, 2, 1, 77, 199], 20),
}


def fmt(v):
    return "%.7g" % v


def write_expected(path, gen_args, r, stats):
    head = {
        "generator": "make_model.py " + " ".join(gen_args),
        "logits_format": "float64 reference, 7 significant digits",
        "prompt_ids": r["prompt_ids"],
        "greedy_ids": r["output_ids"],
        "teacher_forced_argmax": r["argmax"],
        "min_top2_margin": float(fmt(r["min_top2_margin"])),
        "min_route_gap": float(fmt(stats["min_route_gap"])),
        "designed_route_ties": stats["route_ties"],
    }
    lines = ["{"]
    for k, v in head.items():
        lines.append(" %s: %s," % (json.dumps(k), json.dumps(v)))
    rows = r["logits"]
    lines.append(' "logits": [')
    for i, row in enumerate(rows):
        lines.append("  [" + ",".join(fmt(v) for v in row) + "]" + ("," if i + 1 < len(rows) else ""))
    lines.append(" ]")
    lines.append("}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def build(name, root, log=print):
    gen_args, prompt, n = FIXTURES[name]
    out = os.path.join(root, name)
    args = make_model.build_parser().parse_args(["--out", out] + gen_args)
    spec = make_model.spec_from_args(args, make_model.build_parser())
    info = make_model.write_model(spec, out, seed=args.seed, shard_bytes=args.shard_bytes,
                                  config_form=args.config_form, header_align=args.header_align,
                                  force=True)
    model = K3Model(out)
    r = model.run(prompt, n, collect_stats=True)
    r["prompt_ids"] = prompt
    st = model.stats
    if r["min_top2_margin"] < MIN_MARGIN:
        sys.exit("make_golden: %s: min top-2 margin %.3g < %g; pick another seed or prompt"
                 % (name, r["min_top2_margin"], MIN_MARGIN))
    if st["min_route_gap"] < MIN_ROUTE_GAP:
        sys.exit("make_golden: %s: min routing gap %.3g < %g; pick another seed or prompt"
                 % (name, st["min_route_gap"], MIN_ROUTE_GAP))
    write_expected(os.path.join(out, "expected.json"), gen_args, r, st)
    log("%-15s %d file(s), %.2f MB, margin %.4g, route gap %.3g, designed ties %d"
        % (name, info["files"], info["disk_bytes"] / 1e6, r["min_top2_margin"],
           st["min_route_gap"], st["route_ties"]))


def first_line_diff(a, b):
    """For text files: where they first differ (line number and the two lines, shortened)."""
    if not a.endswith(".json"):
        return ""
    with open(a) as fa, open(b) as fb:
        la, lb = fa.read().splitlines(), fb.read().splitlines()
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            j = next((k for k, (c, d) in enumerate(zip(x, y)) if c != d), min(len(x), len(y)))
            lo = max(0, j - 40)
            return " at line %d: committed ...%s... regenerated ...%s..." % (i + 1, x[lo:j + 40], y[lo:j + 40])
    return " (line count %d vs %d)" % (len(la), len(lb))


def compare_trees(want_root, got_root):
    """First difference between two fixture trees (relative path and reason), or None."""
    for name in sorted(FIXTURES):
        w, g = os.path.join(want_root, name), os.path.join(got_root, name)
        if not os.path.isdir(w):
            return name, "missing in %s" % want_root
        wf, gf = sorted(os.listdir(w)), sorted(os.listdir(g))
        if wf != gf:
            return name, "file lists differ: %s vs regenerated %s" % (wf, gf)
        for fn in wf:
            if not filecmp.cmp(os.path.join(w, fn), os.path.join(g, fn), shallow=False):
                return os.path.join(name, fn), "content differs" + first_line_diff(
                    os.path.join(w, fn), os.path.join(g, fn))
    extra = sorted(set(os.listdir(want_root)) - set(FIXTURES) - {"README.md"}) if os.path.isdir(want_root) else []
    if extra:
        return extra[0], "not produced by make_golden.py"
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help="regenerate into a temporary directory and compare with --dir byte for byte")
    ap.add_argument("--dir", default=GOLDEN_DIR, help="golden directory (default tests/golden)")
    a = ap.parse_args(argv)
    if a.check:
        with tempfile.TemporaryDirectory(prefix="nj-golden-") as tmp:
            for name in FIXTURES:
                build(name, tmp, log=lambda m: None)
            diff = compare_trees(a.dir, tmp)
        if diff:
            print("make_golden --check: %s: %s (regenerate with make_golden.py and review)" % diff)
            print("0 passed, 1 failed")
            sys.exit(1)
        print("make_golden --check: %d fixtures identical" % len(FIXTURES))
        print("1 passed, 0 failed")
        return
    os.makedirs(a.dir, exist_ok=True)
    for name in FIXTURES:
        if os.path.isdir(os.path.join(a.dir, name)):
            shutil.rmtree(os.path.join(a.dir, name))
        build(name, a.dir)


if __name__ == "__main__":
    main()
